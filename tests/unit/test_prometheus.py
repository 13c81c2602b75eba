# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Prometheus text writer: label escaping, rendering, and the validators' vocabulary."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prom
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL

ROOT = pathlib.Path(__file__).resolve().parents[2]

ESCAPE_CASES = [
    pytest.param('plain', 'plain', id='plain'),
    pytest.param('say "hi"', 'say \\"hi\\"', id='double-quote'),
    pytest.param('C:\\slurm', 'C:\\\\slurm', id='backslash'),
    pytest.param('two\nlines', 'two\\nlines', id='line-feed'),
    pytest.param('\\"', '\\\\\\"', id='backslash-then-quote'),
    pytest.param("it's | {x=1}", "it's | {x=1}", id='other-characters-kept'),
]


@pytest.mark.parametrize(('value', 'expected'), ESCAPE_CASES)
def test_escape_label_value(value, expected):
    assert prom.escape_label_value(value) == expected


@pytest.mark.parametrize(('value', 'text'), [(1, '1'), (0, '0'), (True, '1'), (False, '0'), (0.25, '0.25'), (1.0, '1.0'),
                                             (1767225600.123, '1767225600.123')])
def test_value_text(value, text):
    assert prom.value_text(value) == text


def test_render_keeps_family_order_label_order_and_empty_families():
    text = prom.render([
        prom.Family('b_total', 'counter', 'B things.', [({}, 3)]),
        prom.Family('a', 'gauge', 'A with labels.', [({'z': '1', 'a': 'x"y'}, 0.5)]),
        prom.Family('c', 'gauge', 'Nothing yet.', []),
    ])
    assert text == ('# HELP b_total B things.\n# TYPE b_total counter\nb_total 3\n'
                    '# HELP a A with labels.\n# TYPE a gauge\na{z="1",a="x\\"y"} 0.5\n'
                    '# HELP c Nothing yet.\n# TYPE c gauge\n')


def test_validator_families_of_a_failing_run():
    checks = [{'name': 'pcie_width', 'status': 'fail', 'subject': 'GPU0'}, {'name': 'nvlink', 'status': 'pass', 'subject': 'GPU1'},
              {'name': 'state', 'status': 'fail', 'subject': 'mlx5_3/1'}]
    text = prom.render(prom.validator_families('nodecheck', checks, False, duration_seconds=0.09123, finished_at=1767225600.6))
    assert text.splitlines() == [
        '# HELP llmforge_validator_healthy 1 when every check of the validator passed on this node at the last run.',
        '# TYPE llmforge_validator_healthy gauge',
        'llmforge_validator_healthy{validator="nodecheck"} 0',
        '# HELP llmforge_validator_duration_seconds How long the last run of the validator took on this node.',
        '# TYPE llmforge_validator_duration_seconds gauge',
        'llmforge_validator_duration_seconds{validator="nodecheck"} 0.091',
        '# HELP llmforge_validator_last_run_timestamp_seconds When the validator last ran on this node (Unix time).',
        '# TYPE llmforge_validator_last_run_timestamp_seconds gauge',
        'llmforge_validator_last_run_timestamp_seconds{validator="nodecheck"} 1767225601',
        '# HELP llmforge_validator_check_failed 1 for each check that failed at the last run.',
        '# TYPE llmforge_validator_check_failed gauge',
        'llmforge_validator_check_failed{validator="nodecheck",check="pcie_width",subject="GPU0"} 1',
        'llmforge_validator_check_failed{validator="nodecheck",check="state",subject="mlx5_3/1"} 1',
    ]


def test_validator_families_without_duration_nor_failures():
    families = prom.validator_families('gpu_topology', [{'name': 'nvlink', 'status': 'pass', 'subject': 'GPU1'}], True)
    assert [(family.name, list(family.samples)) for family in families] == [
        ('llmforge_validator_healthy', [({'validator': 'gpu_topology'}, 1)]),
        ('llmforge_validator_check_failed', []),
    ]


def test_the_validate_role_and_the_health_check_write_the_same_help_texts():
    """node_exporter drops a metric whose help text differs between two of its files (validate's and nodecheck's)."""
    metrics_tasks = (ROOT / 'roles' / 'validate' / 'tasks' / 'metrics.yml').read_text(encoding='utf-8')
    assert '| llmforge.cluster.validator_metrics' in metrics_tasks and '# HELP' not in metrics_tasks
    validate = prom.validators_text({'gpu_topology': {'healthy': False, 'checks': [{'name': 'x', 'status': FAIL}]}})
    nodecheck = prom.render(prom.validator_families('nodecheck', [{'name': 'x', 'status': FAIL}], False, 0.5, 1.0))
    helps = [dict(re.findall(r'(?m)^# HELP (\S+) (.*)$', text)) for text in (validate, nodecheck)]
    assert helps[0] and all(helps[1][name] == text for name, text in helps[0].items())


def test_output_passes_promtool():
    promtool = shutil.which('promtool')
    if not promtool:
        pytest.skip('promtool is not installed (Debian package prometheus)')
    checks = [{'name': 'pcie_width', 'status': 'fail', 'subject': 'GPU "0"\nx'}]
    text = prom.render(prom.validator_families('nodecheck', checks, False, 0.5, 1767225600.0))
    result = subprocess.run([promtool, 'check', 'metrics'], input=text, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
