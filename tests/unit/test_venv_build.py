# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""venv_from_lock's build, run for real: python -m venv and pip install --no-index from a local wheelhouse.

The wheel is made here (a one-file package); the lock pins it with its real sha256. A wrong hash, a missing wheel
and an interpreter that does not exist must leave no directory behind, and a complete environment is never rebuilt.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _venv_build as venv_build

REPO = pathlib.Path(__file__).resolve().parents[2]
MODULE = REPO / 'plugins' / 'modules' / 'venv_from_lock.py'
NAME, VERSION = 'llmforge_lock_probe', '1.0'


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
    return f'{name},sha256={digest},{len(data)}'


@pytest.fixture(scope='module')
def wheelhouse(tmp_path_factory) -> tuple[pathlib.Path, str]:
    """A directory with one pure-Python wheel; (the directory, its sha256)."""
    directory = tmp_path_factory.mktemp('wheels')
    info = f'{NAME}-{VERSION}.dist-info'
    files = {
        f'{NAME}/__init__.py': b'ANSWER = 42\n',
        f'{info}/METADATA': f'Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n'.encode(),
        f'{info}/WHEEL': b'Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
    }
    record = '\n'.join([_record_line(name, data) for name, data in files.items()] + [f'{info}/RECORD,,']) + '\n'
    wheel = directory / f'{NAME}-{VERSION}-py3-none-any.whl'
    with zipfile.ZipFile(wheel, 'w') as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f'{info}/RECORD', record)
    return directory, hashlib.sha256(wheel.read_bytes()).hexdigest()


def settings(path: pathlib.Path, **changes) -> venv_build.Settings:
    return venv_build.Settings(**{'path': str(path), 'python': sys.executable, 'timeout': 300, **changes})


def test_a_lock_from_a_wheelhouse_is_installed_hash_checked_and_the_marker_written_last(tmp_path, wheelhouse):
    wheels, sha = wheelhouse
    env = tmp_path / 'envs' / 'train-abc'
    lock = f'{NAME}=={VERSION} \\\n    --hash=sha256:{sha}\n'
    venv_build.build(settings(env, lock=lock, wheelhouse=str(wheels), marker={'name': 'train-abc', 'packages': [1]}))
    assert venv_build.is_complete(str(env))
    assert (env / 'llmforge-lock.txt').read_text(encoding='utf-8') == lock
    assert json.loads((env / 'llmforge-env.json').read_text(encoding='utf-8')) == {'name': 'train-abc', 'packages': [1]}
    assert not (env / 'llmforge-env.json.tmp').exists()
    answer = subprocess.run([env / 'bin' / 'python', '-c', f'import {NAME}; print({NAME}.ANSWER)'],
                            capture_output=True, text=True, check=True, timeout=60)
    assert answer.stdout.strip() == '42'
    assert oct((tmp_path / 'envs').stat().st_mode & 0o777) == '0o755'


def test_a_hash_mismatch_removes_the_new_environment_and_quotes_pip(tmp_path, wheelhouse):
    wheels, _sha = wheelhouse
    env = tmp_path / 'train-bad'
    lock = f'{NAME}=={VERSION} --hash=sha256:{"0" * 64}\n'
    with pytest.raises(venv_build.BuildError) as err:
        venv_build.build(settings(env, lock=lock, wheelhouse=str(wheels)))
    message = str(err.value)
    assert message.startswith(f'pip could not install the lock from the wheelhouse {wheels} (exit status 1): ')
    assert 'HASH' in message.upper()
    assert not env.exists()
    assert tmp_path.exists()


def test_an_interrupted_build_is_removed_and_built_again_without_packages(tmp_path):
    env = tmp_path / 'train-empty'
    (env / 'lib').mkdir(parents=True)
    (env / 'lib' / 'half-written').write_text('x', encoding='utf-8')
    assert not venv_build.is_complete(str(env))
    venv_build.build(settings(env, lock='', marker={'name': 'train-empty'}))
    assert not (env / 'lib' / 'half-written').exists()
    assert (env / 'llmforge-lock.txt').read_text(encoding='utf-8') == ''
    assert venv_build.is_complete(str(env))


def test_an_interpreter_that_does_not_exist_leaves_nothing(tmp_path):
    env = tmp_path / 'train-nopython'
    with pytest.raises(venv_build.BuildError, match=r'^/nonexistent/python3 -m venv could not create .*not found'):
        venv_build.build(settings(env, python='/nonexistent/python3'))
    assert not env.exists()


@pytest.mark.parametrize(('changes', 'problem'), [
    ({'path': 'envs/train'}, 'path must be an absolute directory other than /'),
    ({'path': '/'}, 'path must be an absolute directory other than /'),
    ({'python': 'python3'}, 'python must be the absolute path of an interpreter'),
    ({'wheelhouse': 'wheels'}, 'wheelhouse must be an absolute directory'),
    ({'timeout': 0}, 'timeout must be positive'),
])
def test_bad_settings_name_the_option(changes, problem):
    found = venv_build.settings_problems(venv_build.Settings(**{'path': '/envs/train', **changes}))
    assert len(found) == 1 and found[0].startswith(problem), found


@pytest.mark.parametrize(('changes', 'source', 'text'), [
    ({'wheelhouse': '/srv/wheels', 'index_url': 'https://pypi.example/simple'},
     ['--no-index', '--find-links', '/srv/wheels'], 'the wheelhouse /srv/wheels'),
    ({'index_url': 'https://pypi.example/simple'}, ['--index-url', 'https://pypi.example/simple'],
     'the index https://pypi.example/simple'),
    ({}, [], "the node's configured index"),
])
def test_the_wheelhouse_wins_over_the_index(changes, source, text):
    chosen = venv_build.Settings(path='/envs/train', **changes)
    assert venv_build.pip_source(chosen) == source and venv_build.source_text(chosen) == text


def test_comments_alone_are_no_requirements():
    assert not venv_build.has_requirements('# nothing pinned\n\n')
    assert venv_build.has_requirements('a==1 --hash=sha256:' + '0' * 64)


def _module(args: dict, tmp_path: pathlib.Path) -> dict:
    """Run the module as Ansible does (arguments in a file), in a child process; its JSON result."""
    args_file = tmp_path / 'args.json'
    args_file.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': args}), encoding='utf-8')
    env = dict(os.environ, PYTHONPATH=str(REPO / 'collections') + os.pathsep + os.environ.get('PYTHONPATH', ''))
    done = subprocess.run([sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    return json.loads(done.stdout)


def test_the_module_reports_a_change_only_when_it_builds_and_builds_nothing_in_check_mode(tmp_path):
    env = tmp_path / 'envs' / 'train-m'
    args = {'path': str(env), 'python': sys.executable, 'marker': {'name': 'train-m'}}
    checked = _module({**args, '_ansible_check_mode': True}, tmp_path)
    assert checked['changed'] and not checked['built'] and not env.exists(), checked
    first = _module(args, tmp_path)
    assert first['changed'] and first['built'] and first['marker'] == f'{env}/llmforge-env.json', first
    again = _module(args, tmp_path)
    assert not again['changed'] and not again['built'], again


def test_the_module_fails_naming_the_option(tmp_path):
    result = _module({'path': '/envs/train', 'python': 'python3'}, tmp_path)
    assert result['failed'] and result['msg'] == (
        "venv_from_lock: python must be the absolute path of an interpreter, got 'python3'"), result
