# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml's pull mode on the control host: which nodes pull, the one step, and reading what each node said."""

from __future__ import annotations

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _node_lines as node_lines
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _pull_node as node_program
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _pull_plan as pull

NODES = ['gpu1', 'gpu2', 'gpu3', 'gpu4', 'gpu5', 'gpu6']
SCONTROL = {'rc': 0, 'stdout': '\n'.join([
    'NodeName=gpu1 Arch=x86_64 State=IDLE ThreadsPerCore=1',
    'NodeName=gpu2 Arch=x86_64 State=IDLE+DRAIN Reason=llmforge: pcie_width GPU0 8',
    'NodeName=gpu3 Arch=x86_64 State=ALLOCATED ThreadsPerCore=1',
    'NodeName=gpu4 Arch=x86_64 State=DOWN+NOT_RESPONDING ThreadsPerCore=1',
    'NodeName=gpu5 Arch=x86_64 State=IDLE ThreadsPerCore=1',
    'NodeName=gpu7 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=llmforge: converge failed at x : y [root@2026-12-07T10:00:00]',
])}
OPTIONS = {'immediate': 60, 'time_minutes': 70, 'partition': '', 'reservation': 'llmforge-maint', 'srun_args': [],
           'timeout': 3600}
DIGEST = 'a' * 64


def test_idle_nodes_pull_and_the_others_are_pushed_busy_and_down_ones_named():
    plan = pull.plan(NODES + ['gpu7'], {}, SCONTROL, 'pull', 1)
    assert (plan['pull'], plan['push'], plan['busy'], plan['down']) == (
        ['gpu1', 'gpu5'], ['gpu2', 'gpu3', 'gpu4', 'gpu6', 'gpu7'], ['gpu3'], ['gpu4'])
    assert plan['batches'] == [{'hosts': ['gpu1', 'gpu5'], 'nodelist': 'gpu[1,5]'}] and plan['converge_drained'] == ['gpu7']
    assert plan['message'] == ('GPU nodes: pull on 2 through one Slurm step; push for 5 (not idle in Slurm); busy, '
                               'pushed beside their jobs: gpu3; down, pushed: gpu4')


def test_auto_pulls_only_from_the_threshold_and_push_or_no_controller_push_everything():
    assert pull.plan(NODES, {}, SCONTROL, 'auto', 3)['pull'] == []
    assert pull.plan(NODES, {}, SCONTROL, 'auto', 3)['push'] == NODES
    assert 'below pull_min_nodes=3' in pull.plan(NODES, {}, SCONTROL, 'auto', 3)['message']
    assert pull.plan(NODES, {}, SCONTROL, 'auto', 2)['pull'] == ['gpu1', 'gpu5']
    assert pull.plan(NODES, {}, SCONTROL, 'push', 1)['push'] == NODES
    for scontrol in (None, {'skipped': True}, {'rc': 1, 'stdout': '', 'stderr': 'Unable to contact slurm controller'}):
        plan = pull.plan(NODES, {}, scontrol, 'pull', 1)
        assert plan['push'] == NODES and 'Slurm cannot be asked' in plan['message']


def test_bad_settings_are_named():
    with pytest.raises(pull.PlanError, match='pull_mode must be one of push, pull, auto'):
        pull.plan(NODES, {}, SCONTROL, 'pul', 1)
    with pytest.raises(pull.PlanError, match='pull_min_nodes must be a whole number'):
        pull.plan(NODES, {}, SCONTROL, 'auto', 0)


def test_the_step_is_one_task_a_node_bounded_in_the_reservation():
    plan = pull.plan(NODES, {'gpu1': 'node-a1', 'gpu5': 'node-a5'}, {'rc': 0, 'stdout': SCONTROL['stdout'].replace(
        'gpu1', 'node-a1').replace('gpu5', 'node-a5')}, 'pull', 1)
    argv = pull.srun_argv(plan['batches'][0], OPTIONS, '/shared/llmforge/pull/' + DIGEST, DIGEST, check=True)
    assert argv[:2] == ['srun', '--job-name=llmforge-pull'] and '--nodelist=node-a[1,5]' in argv
    assert {'--nodes=2', '--ntasks=2', '--ntasks-per-node=1', '--immediate=60', '--time=70',
            '--reservation=llmforge-maint'} <= set(argv)
    assert argv[argv.index(pull.PROGRAM):] == [pull.PROGRAM, '--bundle', '/shared/llmforge/pull/' + DIGEST,
                                               '--digest', DIGEST, '--timeout', '3600', '--check']


def _printed(node, status, **extra):
    outcome = {'status': status, 'message': extra.pop('message', status), 'stats': {}, 'changed_tasks': [],
               'failed_task': None, 'digest': DIGEST, 'check': False, 'seconds': 1.0, **extra}
    return node_lines.lines(node_program.MARKER, node, 'pull', outcome)


def test_what_the_nodes_printed_is_read_back_and_the_silent_ones_named():
    plan = {'hosts': ['gpu1', 'gpu2', 'gpu3', 'gpu4', 'gpu5']}
    failed = {'role': 'llmforge.cluster.slurm_node', 'task': 'Configure and start slurmd', 'message': 'boom'}
    printed = (_printed('gpu1', 'ok') + _printed('gpu2', 'changed', changed_tasks=[
        {'role': 'llmforge.cluster.firewall', 'task': 'Write the ruleset'}])
        + _printed('gpu3', 'failed', failed_task=failed, message="failed at '...': boom")
        + _printed('gpu4', 'bundle', message='/shared/llmforge/pull/x/bundle.json has digest 1234'))
    found = pull.outcomes(plan, {}, {'rc': 1, 'stdout': '\n'.join(printed), 'stderr': 'srun: error: gpu5: task 4: Killed'})
    assert {node: outcome['status'] for node, outcome in found.items()} == {
        'gpu1': 'ok', 'gpu2': 'changed', 'gpu3': 'failed', 'gpu4': 'bundle', 'gpu5': 'no-answer'}
    assert found['gpu5']['message'] == "no answer from the node's step: srun: error: gpu5: task 4: Killed"
    assert pull.drains(found) == {'gpu3': 'llmforge: converge failed at slurm_node : Configure and start slurmd',
                                  'gpu4': 'llmforge: converge bundle', 'gpu5': 'llmforge: converge no-answer'}
    summary = pull.summary(found, {})
    assert summary['lines'][:4] == ['pulled: 1 bundle, 1 failed, 1 changed, 1 ok, 1 no-answer', 'changed: gpu2',
                                    'failed: gpu3', 'bundle: gpu4']
    assert summary['counts'] == {'bundle': 1, 'no-ansible': 0, 'timeout': 0, 'failed': 1, 'changed': 1, 'ok': 1,
                                 'no-answer': 1}
    assert summary['changed'] == {'gpu2': ['llmforge.cluster.firewall : Write the ruleset']}
    assert sorted(summary['failed']) == ['gpu3', 'gpu4', 'gpu5']


def test_a_step_that_never_started_leaves_every_node_unanswered():
    found = pull.outcomes({'hosts': ['gpu1', 'gpu2']}, {}, {
        'rc': 1, 'stdout': '', 'stderr': 'srun: error: Unable to allocate resources: Requested nodes are busy'})
    assert {outcome['status'] for outcome in found.values()} == {'no-answer'}
    assert 'Requested nodes are busy' in found['gpu1']['message']


def test_a_rolling_batch_cuts_the_pulling_nodes_into_steps_taken_in_turn():
    scontrol = {'rc': 0, 'stdout': '\n'.join(f'NodeName=gpu{i} State=IDLE' for i in range(1, 12))}
    nodes = [f'gpu{i}' for i in range(1, 12)]
    assert [b['nodelist'] for b in pull.plan(nodes, {}, scontrol, 'pull', 1, '10%')['batches']][:2] == ['gpu1', 'gpu2']
    plan = pull.plan(nodes, {}, scontrol, 'pull', 1, 4)
    assert [b['nodelist'] for b in plan['batches']] == ['gpu[1-4]', 'gpu[5-8]', 'gpu[9-11]']
    assert plan['message'].endswith('in 3 batches of 4')
    assert len(pull.plan(nodes, {}, scontrol, 'pull', 1, '100%')['batches']) == 1
    with pytest.raises(pull.PlanError, match='cluster_rolling_batch must be a number of nodes or a percentage'):
        pull.plan(nodes, {}, scontrol, 'pull', 1, 'ten')


def test_what_is_sent_to_a_node_and_where():
    assert not pull.sendable('ansible_host', set()) and not pull.sendable('inventory_hostname', set())
    assert pull.sendable('ansible_node_wheelhouse', set()) and not pull.sendable('vault_munge', set(), ['vault_'])
    assert not pull.sendable('slurm_controller_db_password', {'slurm_controller_db_password'})
    node_vars = {'gpu1': {'gpu_profile': 'h200', 'slurm_common_munge_key': 'k', 'node_index': 1},
                 'gpu2': {'gpu_profile': 'h200', 'slurm_common_munge_key': 'k', 'node_index': 2}}
    content = pull.documents(node_vars, {'ctl1': '10.0.0.1', 'gpu1': '10.0.0.11'},
                             {'all': ['ctl1', 'gpu1'], 'gpu_nodes': ['gpu1', 'gpu2'], 'llmforge_pulled': ['gpu1']},
                             {'slurm_common_munge_key'})
    # Shared values once in cluster.json, never a secret there; each node's own values and its secrets in its file.
    assert content['cluster']['vars'] == {'gpu_profile': 'h200'}
    assert content['nodes'] == {'gpu1': {'slurm_common_munge_key': 'k', 'node_index': 1},
                                'gpu2': {'slurm_common_munge_key': 'k', 'node_index': 2}}
    assert content['cluster']['groups'] == {'gpu_nodes': ['gpu1', 'gpu2']}
    assert content['cluster']['hosts']['ctl1'] == {'cluster_network_addresses': {'management': '10.0.0.1'}}
