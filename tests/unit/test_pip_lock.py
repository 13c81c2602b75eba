# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the pip lock reader and the environment naming of the training_env role."""

from __future__ import annotations

import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.training_env import training_env_plan
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _pip_lock as pip_lock

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The real lock of the Debian 12 cluster scenario: torch 2.13.0's CPU build, its nine dependencies and numpy.
SCENARIO_LOCK = (ROOT / 'molecule' / 'resources' / 'files' / 'training-cp311.lock').read_text()
A, B, C = 'a' * 64, 'b' * 64, 'c' * 64


def test_the_scenario_lock_reads_as_twelve_pinned_hashed_packages():
    requirements = pip_lock.parse(SCENARIO_LOCK)
    assert [item['name'] for item in requirements] == [
        'filelock', 'fsspec', 'jinja2', 'markupsafe', 'mpmath', 'networkx', 'numpy', 'py-spy', 'setuptools', 'sympy',
        'torch', 'typing-extensions']
    torch = requirements[-2]
    assert torch['version'] == '2.13.0+cpu' and len(torch['hashes']) == 1 and len(torch['hashes'][0]) == 64


def test_pip_compile_output_with_continuations_comments_extras_and_markers():
    text = (f'# via pip-compile\n'
            f'Torch==2.6.0 \\\n    --hash=sha256:{A} \\\n    --hash sha256:{B}\n'
            f'    # via -r requirements.in\n'
            f'fsspec[http]==2024.6.1 ; python_version >= "3.9" --hash=sha256:{C}  # a comment\n')
    requirements = pip_lock.parse(text)
    assert requirements == [
        {'name': 'fsspec', 'version': '2024.6.1', 'extras': ['http'], 'marker': 'python_version >= "3.9"', 'hashes': [C]},
        {'name': 'torch', 'version': '2.6.0', 'extras': [], 'marker': '', 'hashes': [A, B]},
    ]


@pytest.mark.parametrize('text, message', [
    ('torch>=2.6', "line 1: 'torch>=2.6' is not pinned as name==version"),
    ('torch', "line 1: 'torch' is not pinned as name==version"),
    ('https://example.org/torch.whl', "line 1: 'https://example.org/torch.whl' is not pinned"),
    ('torch==2.6.0', 'line 1: torch==2.6.0 has no --hash=sha256:'),
    (f'torch==2.6.0 --hash=md5:{A[:32]}', 'options other than --hash=sha256:<64 hex digits> are not accepted'),
    (f'torch==2.6.0 --hash=sha256:{A[:63]}', 'options other than --hash=sha256:<64 hex digits>'),
    ('--index-url https://pypi.example/simple', 'is an option, not a requirement'),
    (f'--find-links /wheels\ntorch==2.6.0 --hash=sha256:{A}', 'line 1:'),
    (f'torch==2.6.0 --hash=sha256:{A}\n\nTORCH==2.7.0 --hash=sha256:{B}', 'line 3: TORCH is pinned again (first on line 1)'),
], ids=['range', 'bare', 'url', 'no-hash', 'md5', 'short-hash', 'index', 'find-links', 'twice'])
def test_a_lock_that_does_not_pin_everything_is_refused_with_the_line(text, message):
    with pytest.raises(pip_lock.LockError) as err:
        pip_lock.parse(text)
    assert str(err.value).startswith('training_env_requirements: ') and message in str(err.value)


def test_every_bad_line_is_named_at_once():
    with pytest.raises(pip_lock.LockError) as err:
        pip_lock.parse('a>=1\nb==1\n')
    assert 'line 1:' in str(err.value) and 'line 2:' in str(err.value)


def test_the_name_follows_the_content_not_its_order_or_comments():
    one = pip_lock.plan(f'a==1 --hash=sha256:{A}\nb==2 --hash=sha256:{B}\n', 'train', '/envs')
    two = pip_lock.plan(f'# reordered\nb==2 \\\n  --hash=sha256:{B}\nA==1 --hash=sha256:{A}\n', 'train', '/envs/')
    assert one == two
    assert one['dir'] == f"/envs/{one['name']}" and one['current'] == '/envs/train'
    assert one['name'] == 'train-' + one['digest'][:12] and one['packages'] == ['a==1', 'b==2']
    assert one['lock'] == f'a==1 \\\n    --hash=sha256:{A}\nb==2 \\\n    --hash=sha256:{B}\n'


@pytest.mark.parametrize('change', [
    {'text': f'a==1.1 --hash=sha256:{A}'},
    {'text': f'a==1 --hash=sha256:{C}'},
    {'python': '/usr/bin/python3.12'},
    {'system_site_packages': True},
    {'os_packages': ['python3-torch']},
], ids=['version', 'hash', 'python', 'system-site', 'os-packages'])
def test_any_change_of_content_or_interpreter_gives_a_new_directory(change):
    base = {'text': f'a==1 --hash=sha256:{A}', 'base': 'train', 'root': '/envs'}
    assert pip_lock.plan(**base)['name'] != pip_lock.plan(**dict(base, **change))['name']


def test_an_empty_lock_needs_the_system_packages():
    with pytest.raises(pip_lock.LockError, match='training_env_requirements is empty'):
        pip_lock.plan('# nothing\n', 'train', '/envs')
    planned = pip_lock.plan('', 'train', '/envs', system_site_packages=True, os_packages=['python3-torch'])
    assert planned['count'] == 0 and planned['lock'] == ''


@pytest.mark.parametrize('args, variable', [
    (('x', '../up', '/envs'), 'training_env_name'),
    (('x', '', '/envs'), 'training_env_name'),
    (('x', 'train', 'envs'), 'training_env_root'),
    (('x', 'train', '/'), 'training_env_root'),
    (('x', 'train', '/envs', 'python3'), 'training_env_python'),
    ((['a==1'], 'train', '/envs'), 'training_env_requirements must be the text'),
])
def test_bad_settings_name_their_variable(args, variable):
    with pytest.raises(pip_lock.LockError, match=variable):
        pip_lock.plan(*args)


def test_the_filter_turns_errors_into_filter_errors():
    with pytest.raises(AnsibleFilterError, match="training_env_requirements: line 1: 'torch>=2' is not pinned"):
        training_env_plan('torch>=2', 'train', '/envs')
    assert training_env_plan(SCENARIO_LOCK, 'llmforge-train', '/shared/envs')['count'] == 12
