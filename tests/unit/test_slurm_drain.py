# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate role's Slurm stage: the drain plan of a report, and what to do with each node once its state is read."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import slurm_drain as filters
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain

WHEN = '2026-11-30T01:00:00Z'
PCIE_X8 = {'name': 'pcie_width', 'status': 'fail', 'subject': 'GPU0', 'expected': 16, 'actual': 8, 'message': 'x8'}
NVLINK_OK = {'name': 'nvlink', 'status': 'pass', 'subject': 'GPU0-GPU1', 'expected': 'NV18', 'actual': 'NV18', 'message': 'ok'}


def state(name, status='IDLE', reason=None):
    """A `scontrol show node <name> -o` line, as Slurm 24.11 prints it (trimmed)."""
    text = f'NodeName={name} Arch=x86_64 Gres=gpu:h200:8 State={status} Partitions=gpu'
    return text + (f' Reason={reason} [root@2026-11-30T02:10:00]' if reason else '')


@pytest.fixture(name='report')
def fixture_report():
    results = {name: {'gpu_topology': {'healthy': checks[0]['status'] == 'pass', 'checks': checks}}
               for name, checks in {'gpu1': [NVLINK_OK], 'gpu2': [PCIE_X8], 'gpu3': [NVLINK_OK], 'gpu4': [PCIE_X8],
                                    'gpu5': [NVLINK_OK]}.items()}
    return rep.build_report(results, 'c', WHEN)


def read(plan, lines):
    """Registered results of the `scontrol show node` loop: None for a skipped item, an int for a failed read."""
    out = []
    for item, line in zip(plan, lines):
        if line is None:
            out.append({'skipped': True, 'item': item})
        elif isinstance(line, int):
            out.append({'rc': line, 'stdout': '', 'item': item})
        else:
            out.append({'rc': 0, 'stdout': line, 'item': item})
    return out


def test_drain_plan_names_each_node_in_slurm_with_its_reason(report):
    plan = drain.drain_plan(report['nodes'], {'gpu2': 'node-02', 'gpu3': None})
    assert [(p['host'], p['slurm_name'], p['healthy'], p['reason']) for p in plan] == [
        ('gpu1', 'gpu1', True, ''), ('gpu2', 'node-02', False, 'llmforge: pcie_width GPU0 8'), ('gpu3', 'gpu3', True, ''),
        ('gpu4', 'gpu4', False, 'llmforge: pcie_width GPU0 8'), ('gpu5', 'gpu5', True, '')]
    assert plan[1]['checks'] == report['nodes'][1]['checks']
    assert drain.drain_plan([], {}) == []


def test_drain_decisions_follow_the_drain_rules(report):
    plan = drain.drain_plan(report['nodes'], {})
    decisions = drain.drain_decisions(read(plan, [
        state('gpu1', 'IDLE+DRAIN', 'llmforge: nvlink GPU0-GPU1 NV12'),   # ours, healthy again: resume
        state('gpu2'),                                                   # failing, not drained: drain
        state('gpu3', 'MIXED+DRAIN', 'admin: fan swap'),                 # an administrator's: left alone
        state('gpu4', 'IDLE+DRAIN', 'llmforge: pcie_width GPU0 8'),      # failing, already drained
        None,                                                            # not read (no scontrol): no decision
    ]))
    assert [(d['host'], d['action']) for d in decisions] == [
        ('gpu1', 'resume'), ('gpu2', 'drain'), ('gpu3', None), ('gpu4', None)]
    resume, drained = decisions[0], decisions[1]
    assert resume['old_reason'] == 'llmforge: nvlink GPU0-GPU1 NV12' and resume['why'].startswith('healthy again')
    assert drained == {'host': 'gpu2', 'slurm_name': 'gpu2', 'action': 'drain', 'reason': 'llmforge: pcie_width GPU0 8',
                       'old_reason': '', 'why': 'failing'}
    assert 'drained by someone else' in decisions[2]['why']
    assert drain.drain_decisions(read(plan[:2], [1, None])) == []


def test_filters_read_slurm_names_from_hostvars(report):
    hostvars = {'gpu1': {'validate_slurm_node_name': 'n1'}, 'gpu2': {}, 'gpu3': {'validate_slurm_node_name': None},
                'gpu4': {}, 'gpu5': {}}
    plan = filters.drain_plan(report['nodes'], hostvars)
    assert [p['slurm_name'] for p in plan] == ['n1', 'gpu2', 'gpu3', 'gpu4', 'gpu5']
    decisions = filters.drain_decisions(read(plan, [state('n1'), state('gpu2'), None, None, None]))
    assert [(d['slurm_name'], d['action']) for d in decisions] == [('n1', None), ('gpu2', 'drain')]
    assert {'drain_plan', 'drain_decisions'} <= set(filters.FilterModule().filters())


@pytest.mark.parametrize('name, value, message', [
    ('drain_plan', 'gpu1', '^drain_plan: expected the nodes of a validation report'),
    ('drain_plan', [{'name': 'gpu1'}], "^drain_plan: a report node has no 'healthy'"),
    ('drain_decisions', {'results': []}, '^drain_decisions: expected registered loop results'),
    ('drain_decisions', [{'rc': 0, 'stdout': '', 'item': {'host': 'gpu1'}}], "^drain_decisions: a read result has no 'checks'"),
])
def test_filter_errors_name_the_filter(name, value, message):
    with pytest.raises(AnsibleFilterError, match=message):
        if name == 'drain_plan':
            filters.drain_plan(value, {'gpu1': {}})
        else:
            filters.drain_decisions(value)
