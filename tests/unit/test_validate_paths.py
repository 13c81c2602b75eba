# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's hardware stage through Slurm: llmforge-validate-node gives the results the three modules give, the
plan sends each node the right way by its Slurm state, and the steps' output is read back."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.slurm_drain import drain_decisions
from ansible_collections.llmforge.cluster.plugins.filter.dcgm import dcgm_quarantine_plan
from ansible_collections.llmforge.cluster.plugins.filter.validate_paths import (
    validate_hardware_plan, validate_metrics_payload, validate_metrics_plan, validate_slurm_dcgm,
    validate_slurm_results)
from ansible_collections.llmforge.cluster.plugins.module_utils import _hardware_stage as stage
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _validate_node as program
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep
from module_runner import run_module
from node_install import install, run_launcher

TESTS = pathlib.Path(__file__).resolve().parents[1]
GPU = TESTS / 'fixtures' / 'gpu'
DCGM_FIXTURES = TESTS / 'fixtures' / 'dcgm'
DCGMI_SHIM = TESTS.parent / 'molecule' / 'resources' / 'files' / 'dcgmi_shim.py'
KERNEL_LOG = TESTS / 'fixtures' / 'kernel_log' / 'dmesg-raw.txt'
_spec = importlib.util.spec_from_file_location('make_sysfs_trees', TESTS / 'fixtures' / 'rdma' / 'make_sysfs_trees.py')
sysfs_trees = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sysfs_trees)

NDR = {'devices': r'^mlx5_(?!bond)', 'hca_count': 8, 'link_layer': 'InfiniBand', 'rate_gbps': 400}
DEFAULTS = {'validate_nvidia_smi': 'nvidia-smi', 'validate_sysfs_root': '/sys', 'validate_kernel_faults_source': 'journal',
            'monitoring_textfile_dir': '/var/lib/node_exporter/textfile'}
OPTIONS = {'immediate': 30, 'time_minutes': 3, 'partition': '', 'reservation': '', 'srun_args': []}


def node_files(root: pathlib.Path, fixture: str, case: str, kernel_log: str = '') -> dict:
    """A node's hardware: an nvidia-smi replaying a fixture, a sysfs tree of one case, a kernel log file (empty, or
    the fixture's Xids)."""
    root.mkdir(parents=True)
    smi = root / 'nvidia-smi'
    smi.write_text(f'#!/bin/sh\nNVIDIA_SMI_SHIM_DIR={GPU / fixture} exec {GPU / "nvidia-smi-shim"} "$@"\n', encoding='utf-8')
    smi.chmod(0o755)
    sysfs = sysfs_trees.build(case, root / 'sys')
    log = root / 'kernel.log'
    log.write_text(KERNEL_LOG.read_text(encoding='utf-8') if kernel_log else '', encoding='utf-8')
    return {'gpu_topology': {'profile': 'h200-sxm-8', 'expected': {}, 'nvidia_smi_path': str(smi)},
            'rdma_links': {'sysfs_root': str(sysfs), 'expected': NDR},
            'kernel_faults': {'source': str(log), 'nvidia_smi_path': str(smi), 'sysfs_root': str(sysfs)}}


@pytest.fixture(scope='module')
def nodes(tmp_path_factory):
    root = tmp_path_factory.mktemp('nodes')
    return {'gpu1': node_files(root / 'gpu1', 'hgx-h200-8', 'ndr8_healthy'),
            'gpu2': node_files(root / 'gpu2', 'hgx-h200-8', 'ndr8_port_down', kernel_log='xids'),
            'gpu3': node_files(root / 'gpu3', 'h200-1gpu-vm', 'ndr8_healthy')}


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    return install('programs._validate_node', tmp_path_factory.mktemp('node') / 'python')


def report_text(results: dict) -> str:
    """report.json as the report tasks write it (to_nice_json: sorted keys, 4-space indents), at a fixed time."""
    report = rep.build_report(rep.collect_results(results), 'llmforge', '2026-12-07T00:00:00+00:00')
    return json.dumps(report, sort_keys=True, indent=4)


def test_the_installed_program_and_the_modules_give_the_same_report(nodes, installed):
    """The hardware tasks' three modules (as the Ansible path runs them) and llmforge-validate-node (as each task of
    the Slurm step runs it) on the same nodes: report.json is byte for byte the same, failures included."""
    ansible, slurm = {}, {}
    for name, params in nodes.items():
        ansible[name] = {validator: run_module(validator, dict(options, fail_on_mismatch=False))
                         for validator, options in params.items()}
        done = run_launcher('programs._validate_node', installed, '--params', json.dumps(params), '--node', name)
        assert done.returncode == 0, done.stderr
        assert all(len(line) < 1000 for line in done.stdout.splitlines())
        found = program.parse_output(done.stdout)
        assert list(found) == [name], done.stdout[:500]
        slurm[name] = found[name]
    text = report_text(slurm)
    assert text == report_text(ansible)
    report = json.loads(text)
    assert report['summary']['failing'] == ['gpu2', 'gpu3'], report['summary']
    assert {check['name'] for node in report['nodes'] for check in node['checks'] if check['status'] == 'fail'} >= {
        'state', 'gpu_count', 'xid'}


def test_a_validator_that_cannot_run_fails_as_its_module_does(nodes, tmp_path):
    params = json.loads(json.dumps(nodes['gpu1']))
    params['gpu_topology']['nvidia_smi_path'] = str(tmp_path / 'missing-nvidia-smi')
    params['rdma_links']['sysfs_root'] = str(tmp_path / 'no-sys')
    mine = stage.node_results(params)
    theirs = {name: run_module(name, dict(params[name], fail_on_mismatch=False)) for name in ('gpu_topology', 'rdma_links')}
    for name, result in theirs.items():
        assert result['failed'] and mine[name]['failed'] and mine[name]['msg'] == result['msg'], (name, result['msg'])
        assert mine[name]['healthy'] is False and mine[name]['checks'] == []


def test_bad_parameters_are_named(installed):
    done = run_launcher('programs._validate_node', installed, '--params', '{"gpu_topology": {"profil": "x"}}')
    assert done.returncode == 2 and "gpu_topology: unknown option(s) profil" in done.stderr
    done = run_launcher('programs._validate_node', installed, '--params', '{"dcgm": {}}')
    assert done.returncode == 2 and 'unknown validator(s) dcgm' in done.stderr
    done = run_launcher('programs._validate_node', installed, '--params', 'not json')
    assert done.returncode == 2 and '--params is not JSON' in done.stderr


STATES = '\n'.join([
    'NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 State=IDLE ThreadsPerCore=1 Reason=(null)',
    'NodeName=gpu2 Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1 Reason=llmforge: pcie_width GPU0 8 [root@2026-12-07T00:00:00]',
    'NodeName=gpu3 Arch=x86_64 State=ALLOCATED ThreadsPerCore=1',
    'NodeName=gpu4 Arch=x86_64 State=MIXED+DRAIN ThreadsPerCore=1 Reason=admin: fan',
    'NodeName=gpu5 Arch=x86_64 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 Reason=Not responding',
    'NodeName=gpu6 Arch=x86_64 State=IDLE ThreadsPerCore=1',
    'NodeName=node-b7 Arch=x86_64 State=IDLE ThreadsPerCore=1',
    'NodeName=gpu9 Arch=x86_64 State=IDLE+MAINTENANCE+RESERVED ThreadsPerCore=1',
])


def hostvars_of(count: int = 9) -> dict:
    hostvars = {f'gpu{index}': {'gpu_profile': 'h200-sxm-8'} for index in range(1, count + 1)}
    if count >= 7:
        hostvars['gpu7']['validate_slurm_node_name'] = 'node-b7'
        hostvars['gpu6']['validate_sysfs_root'] = '/srv/sim'
    return hostvars


def test_each_node_takes_the_path_its_slurm_state_allows():
    hostvars = hostvars_of()
    plan = validate_hardware_plan(list(hostvars), hostvars, {'rc': 0, 'stdout': STATES}, 'auto', OPTIONS, DEFAULTS)
    assert plan['slurm'] == ['gpu1', 'gpu6', 'gpu7']
    assert plan['ansible'] == ['gpu2', 'gpu8', 'gpu9']  # drained idle, not in Slurm, maintenance
    assert plan['busy'] == ['gpu3', 'gpu4'] and plan['down'] == ['gpu5']
    assert plan['states']['gpu8'] == 'not in Slurm' and plan['states']['gpu4'] == 'MIXED+DRAIN'
    assert plan['message'] == ('hardware stage through Slurm on 3 node(s) (gpu[1,6-7]), with Ansible on 3 '
                               '(gpu[2,8-9]: not in Slurm, or drained); not validated: busy 2 (gpu[3-4]), down 1 (gpu5)')
    # gpu6 reads another sysfs: a step of its own; gpu1 and gpu7 (node-b7 in Slurm) share one.
    assert [(step['hosts'], step['nodelist']) for step in plan['steps']] == [
        (['gpu1', 'gpu7'], 'gpu1,node-b7'), (['gpu6'], 'gpu6')]
    argv = plan['steps'][0]['argv']
    assert argv[:11] == ['srun', '--job-name=llmforge-validate', '--nodes=2', '--ntasks=2', '--ntasks-per-node=1',
                         '--nodelist=gpu1,node-b7', '--exclusive', '--immediate=30', '--time=3', '--kill-on-bad-exit=0',
                         '--no-kill']
    assert argv[11] == '--gres=gpu:8' and argv[12:14] == ['/usr/local/sbin/llmforge-validate-node', '--params']
    assert json.loads(argv[14]) == {
        'gpu_topology': {'expected': {}, 'nvidia_smi_path': 'nvidia-smi', 'profile': 'h200-sxm-8'},
        'kernel_faults': {'nvidia_smi_path': 'nvidia-smi', 'source': 'journal', 'sysfs_root': '/sys'},
        'rdma_links': {'expected': {}, 'sysfs_root': '/sys'}}
    assert plan['steps'][0]['srun'] + [plan['steps'][0]['program']] == argv[:13]
    assert plan['steps'][0]['textfile_dir'] == '/var/lib/node_exporter/textfile'


def test_without_slurm_every_node_goes_with_ansible_and_slurm_mode_says_why():
    hostvars = hostvars_of(3)
    for scontrol in (None, {'skipped': True}, {'rc': 1, 'stdout': '', 'stderr': 'slurm_load_node error: Unable to contact'}):
        plan = validate_hardware_plan(list(hostvars), hostvars, scontrol, 'auto', OPTIONS, DEFAULTS)
        assert plan['ansible'] == ['gpu1', 'gpu2', 'gpu3'] and plan['steps'] == []
        assert 'no Slurm to ask' in plan['message']
    plan = validate_hardware_plan(list(hostvars), hostvars, {'rc': 0, 'stdout': STATES}, 'ansible', OPTIONS, DEFAULTS)
    assert plan['ansible'] == ['gpu1', 'gpu2', 'gpu3'] and 'validate_path=ansible' in plan['message']
    with pytest.raises(AnsibleFilterError, match='validate_path is slurm but Slurm cannot be asked: scontrol show node '
                                                 'failed on the first controller: slurm_load_node error'):
        validate_hardware_plan(list(hostvars), hostvars, {'rc': 1, 'stderr': 'slurm_load_node error'}, 'slurm', OPTIONS,
                               DEFAULTS)
    with pytest.raises(AnsibleFilterError, match='no host in slurm_controllers'):
        validate_hardware_plan(list(hostvars), hostvars, None, 'slurm', OPTIONS, DEFAULTS)
    with pytest.raises(AnsibleFilterError, match="validate_path must be one of auto, slurm, ansible, got 'push'"):
        validate_hardware_plan(list(hostvars), hostvars, None, 'push', OPTIONS, DEFAULTS)


def test_the_steps_output_is_read_back_and_a_silent_node_fails():
    hostvars = hostvars_of()
    plan = validate_hardware_plan(list(hostvars), hostvars, {'rc': 0, 'stdout': STATES}, 'auto', OPTIONS, DEFAULTS)
    healthy = {'checks': [{'name': 'gpu_count', 'status': 'pass', 'subject': 'node', 'expected': 8, 'actual': 8,
                           'message': 'ok'}], 'healthy': True, 'changed': False}
    text = json.dumps({'node': 'gpu1', 'results': {name: healthy for name in stage.STAGE}})
    pieces = [text[:100], text[100:]]
    runs = [{'rc': 1, 'stdout': f'srun: warning: something\n{program.MARKER} gpu1 2/2 {pieces[1]}\nnot json\n'
                                f'{program.MARKER} node-b7 1/2 {{"node"\n{program.MARKER} gpu1 1/2 {pieces[0]}\n',
             'stderr': 'srun: error: node-b7: task 1: Exited with exit code 1\n'},
            {'rc': 0, 'stdout': program.MARKER + ' gpu6 1/1 {"node": "gpu6"', 'stderr': ''}]
    results = validate_slurm_results(plan, runs, hostvars)
    assert results['gpu1'] == {name: healthy for name in stage.STAGE}  # its pieces out of order, between others
    assert results['gpu7']['gpu_topology']['failed'] and results['gpu7']['rdma_links']['msg'] == (
        'no result from the Slurm step on node-b7 (srun exit status 1: srun: error: node-b7: task 1: Exited with exit '
        'code 1)')
    assert results['gpu6']['kernel_faults']['msg'].endswith('(srun exit status 0: no error output)')
    assert 'checks' not in results['gpu6']['kernel_faults']
    assert results['gpu3']['gpu_topology'] == {
        'skipped': True, 'changed': False,
        'skip_reason': 'not validated: busy in Slurm (ALLOCATED); its jobs are not waited for'}
    assert results['gpu5']['rdma_links']['skip_reason'] == 'not validated: down in Slurm (DOWN+NOT_RESPONDING)'
    assert set(results) == {'gpu1', 'gpu7', 'gpu6', 'gpu3', 'gpu4', 'gpu5'}
    with pytest.raises(AnsibleFilterError, match=r'expected one registered run per step \(2\), got 1'):
        validate_slurm_results(plan, runs[:1], hostvars)
    report = rep.build_report(rep.collect_results({host: results[host] for host in ('gpu3', 'gpu7')}), 'c', 't')
    assert report['summary']['failing'] == ['gpu7']
    silent = next(node for node in report['nodes'] if node['name'] == 'gpu7')
    assert {(check['name'], check['status']) for check in silent['checks']} == {('run', 'fail')}
    assert 'no result from the Slurm step on node-b7' in silent['checks'][0]['message']


def test_the_metrics_step_writes_each_nodes_own_text_once(installed, tmp_path):
    hostvars = hostvars_of(3)
    healthy = {'checks': [], 'healthy': True}
    failing = {'checks': [{'name': 'state', 'status': 'fail', 'subject': 'mlx5_3/1', 'expected': 'ACTIVE',
                           'actual': 'DOWN', 'message': 'down'}], 'healthy': False}
    hardware = {'gpu1': {name: healthy for name in stage.STAGE}, 'gpu2': {name: healthy for name in stage.STAGE},
                'gpu3': dict({name: healthy for name in stage.STAGE}, rdma_links=failing)}
    payload = validate_metrics_payload(['gpu1', 'gpu2', 'gpu3'], hostvars, {}, hardware)
    assert payload['nodes'] == {'gpu1': 0, 'gpu2': 0, 'gpu3': 1} and len(payload['texts']) == 2
    assert 'llmforge_validator_check_failed{validator="rdma_links",check="state",subject="mlx5_3/1"} 1' in payload['texts'][1]
    directory = tmp_path / 'textfile'
    for expected in ('wrote', 'unchanged'):
        done = run_launcher('programs._validate_node', installed, '--metrics', str(directory), '--node', 'gpu3',
                            input=json.dumps(payload))
        assert done.returncode == 0 and f': {expected} {directory}/llmforge_validate.prom' in done.stdout, done.stderr
    assert (directory / 'llmforge_validate.prom').read_text(encoding='utf-8') == payload['texts'][1]
    assert oct(os.stat(directory / 'llmforge_validate.prom').st_mode & 0o777) == '0o644'
    done = run_launcher('programs._validate_node', installed, '--metrics', str(directory), '--node', 'gpu9',
                        input=json.dumps(payload))
    assert done.returncode == 2 and "standard input has no metrics for node 'gpu9'" in done.stderr


def test_the_drain_stage_reads_every_node_in_one_command():
    """The drain decisions from one `scontrol show node --oneliner` equal those of one command per node."""
    failing = [{'name': 'pcie_width', 'status': 'fail', 'subject': 'GPU0', 'expected': 16, 'actual': 8, 'message': 'x8'}]
    plan = [{'host': 'gpu1', 'healthy': False, 'reason': 'llmforge: pcie_width GPU0 8', 'checks': failing, 'slurm_name': 'gpu1'},
            {'host': 'gpu2', 'healthy': True, 'reason': '', 'checks': [], 'slurm_name': 'gpu2'},
            {'host': 'gpu7', 'healthy': True, 'reason': '', 'checks': [
                {'name': 'pcie_width', 'status': 'pass', 'subject': 'GPU0', 'expected': 16, 'actual': 16, 'message': ''}],
             'slurm_name': 'node-b7'},
            {'host': 'gpu8', 'healthy': False, 'reason': 'llmforge: pcie_width GPU0 8', 'checks': failing, 'slurm_name': 'gpu8'}]
    states = STATES.replace('Reason=llmforge: pcie_width GPU0 8', 'Reason=admin: fan').replace(
        'NodeName=node-b7 Arch=x86_64 State=IDLE', 'NodeName=node-b7 Arch=x86_64 State=IDLE+DRAIN Reason=llmforge: pcie_width GPU0 8')
    one_each = [{'rc': 0, 'stdout': line, 'item': entry} for entry in plan for line in states.splitlines()
                if line.startswith(f"NodeName={entry['slurm_name']} ")]
    assert drain_decisions(plan, states) == drain_decisions(one_each)
    assert [(item['host'], item['action']) for item in drain_decisions(plan, states)] == [
        ('gpu1', 'drain'), ('gpu2', None), ('gpu7', 'resume')]  # gpu8: not in Slurm, no decision


def test_a_step_that_never_started_judges_nothing():
    """srun gave up before any node ran (a job took the nodes between the plan and the step): the step's nodes are
    not validated, so neither drained nor resumed; the reason is srun's last error line."""
    hostvars = hostvars_of()
    plan = validate_hardware_plan(list(hostvars), hostvars, {'rc': 0, 'stdout': STATES}, 'auto', OPTIONS, DEFAULTS)
    runs = [{'rc': 1, 'stdout': '', 'stderr': 'srun: job 41 queued and waiting for resources\n'
                                              'srun: error: Unable to allocate resources: Requested nodes are busy\n'},
            {'rc': 0, 'stdout': '', 'stderr': ''}]
    results = validate_slurm_results(plan, runs, hostvars)
    assert results['gpu1']['rdma_links'] == results['gpu7']['rdma_links'] == {
        'skipped': True, 'changed': False, 'skip_reason': 'not validated: the Slurm step did not start (srun exit status '
                                                          '1: srun: error: Unable to allocate resources: Requested nodes '
                                                          'are busy)'}
    assert results['gpu6']['gpu_topology']['failed']  # its step ran and printed nothing readable


def test_nodes_a_stage_drained_meanwhile_write_their_metrics_with_ansible():
    hostvars = hostvars_of()
    plan = validate_hardware_plan(list(hostvars), hostvars, {'rc': 0, 'stdout': STATES}, 'auto', OPTIONS, DEFAULTS)
    later = STATES.replace('NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 State=IDLE ',
                           'NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN+RESERVED ')
    metrics = validate_metrics_plan(plan, {'rc': 0, 'stdout': later}, hostvars)
    assert metrics['ansible'] == ['gpu2', 'gpu8', 'gpu9', 'gpu1']
    assert [(step['hosts'], step['nodelist']) for step in metrics['steps']] == [(['gpu7'], 'node-b7'), (['gpu6'], 'gpu6')]
    assert '--nodes=1' in metrics['steps'][0]['srun'] and '--nodelist=node-b7' in metrics['steps'][0]['srun']
    assert metrics['steps'][0]['srun'][-1] == '--gres=gpu:8'
    unanswered = validate_metrics_plan(plan, {'rc': 1, 'stdout': '', 'stderr': 'down'}, hostvars)
    assert unanswered['steps'] == [] and sorted(unanswered['ansible']) == sorted(plan['ansible'] + plan['slurm'])


DCGM_DEFAULTS = dict(DEFAULTS, validate_dcgm=True, validate_dcgm_fast_level=1, validate_dcgm_fast_timeout=240,
                     validate_dcgm_dcgmi='dcgmi')


def test_with_validate_dcgm_the_step_runs_the_fast_diagnostic_as_the_module_does(nodes, installed, tmp_path):
    """validate_dcgm: the fast DCGM diagnostic runs in the hardware stage's step (its time covering the diagnostic's
    limit), each node's result read back as the dcgm_diag task registers it on the Ansible path, and the quarantine
    reads it from there; a node that printed nothing is not reached, as an unreachable node."""
    hostvars = {'gpu1': {'gpu_profile': 'h200-sxm-8'}, 'gpu6': {'gpu_profile': 'h200-sxm-8'}}
    states = {'rc': 0, 'stdout': STATES}
    plan = validate_hardware_plan(list(hostvars), hostvars, states, 'auto', OPTIONS, DCGM_DEFAULTS)
    (step,) = plan['steps']
    assert step['validators'] == ['dcgm_diag', 'gpu_topology', 'kernel_faults', 'rdma_links']
    assert json.loads(step['argv'][-1])['dcgm_diag'] == {'level': 1, 'timeout': 240, 'dcgmi_path': 'dcgmi'}
    assert '--time=6' in step['argv'] and step['time_minutes'] == 6  # 240 s + 90 s, above OPTIONS' 3 minutes
    plain = validate_hardware_plan(list(hostvars), hostvars, states, 'auto', OPTIONS, DEFAULTS)
    assert 'dcgm_diag' not in plain['steps'][0]['validators'] and validate_slurm_dcgm(plain, [{'rc': 0}], hostvars) == {}

    state = tmp_path / 'dcgm-state'
    state.mkdir()
    (state / 'dcgmi-diag-1').write_text('l1-fail\n', encoding='utf-8')
    shim = {'DCGMI_SHIM_FIXTURES': str(DCGM_FIXTURES), 'DCGMI_SHIM_STATE': str(state)}
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    params = dict(nodes['gpu1'], dcgm_diag={'level': 1, 'timeout': 60, 'dcgmi_path': str(DCGMI_SHIM)})
    done = run_launcher('programs._validate_node', installed, '--params', json.dumps(params), '--node', 'gpu1',
                        env=dict(env, **shim))
    assert done.returncode == 0, done.stderr
    mine = program.parse_output(done.stdout)['gpu1']
    assert set(mine) == {'gpu_topology', 'rdma_links', 'kernel_faults', 'dcgm_diag'}
    theirs = run_module('dcgm_diag', dict(params['dcgm_diag'], fail_on_mismatch=False), env=shim)
    # What Ansible adds to any module's result, and the run's own duration, aside.
    theirs = {key: value for key, value in theirs.items() if key not in ('_ansible_no_log', 'action', 'invocation')}
    assert dict(mine['dcgm_diag'], duration_seconds=0) == dict(theirs, duration_seconds=0)
    assert theirs['verdict'] == 'fail', theirs

    runs = [{'rc': 0, 'stdout': done.stdout, 'stderr': ''}]
    found = validate_slurm_dcgm(plan, runs, hostvars)
    assert found['gpu1'] == mine['dcgm_diag']
    silent = 'no result from the Slurm step on gpu6 (srun exit status 0: no error output)'
    assert found['gpu6'] == {'unreachable': True, 'msg': silent}
    quarantine = {entry['host']: entry for entry in dcgm_quarantine_plan(
        states, hostvars, 1, 3, nodes=['gpu1', 'gpu6'], fast_results=found)}
    assert quarantine['gpu1']['candidate'] and quarantine['gpu1']['drain'] and quarantine['gpu1']['reason'] == (
        'llmforge: dcgm L3 pending: L1 fail: software GPU3')
    assert not quarantine['gpu6']['candidate'] and quarantine['gpu6']['why'] == 'no level-1 result (node not reached)'


def test_the_quarantine_reads_every_node_in_one_command():
    """dcgm_quarantine_plan with `nodes` reads one `scontrol show node --oneliner` as the per-node loop did; a node's
    own registered fast result comes before the Slurm path's; no Slurm to ask: no node is known to it."""
    hostvars = {'gpu1': {}, 'gpu2': {'__validate_dcgm_fast': {'verdict': 'pass', 'reason': ''}}, 'gpu7': {
        'validate_slurm_node_name': 'node-b7'}, 'gpu8': {}}
    failing = {'verdict': 'fail', 'reason': 'llmforge: dcgm L1 fail: software GPU3', 'failing_gpus': [3]}
    elsewhere = {'gpu1': {'verdict': 'pass', 'reason': ''}, 'gpu2': failing, 'gpu7': failing}
    plan = {entry['host']: entry for entry in dcgm_quarantine_plan(
        {'rc': 0, 'stdout': STATES}, hostvars, 1, 3, nodes=list(hostvars), fast_results=elsewhere)}
    assert not plan['gpu1']['candidate'] and plan['gpu1']['slurm']
    # gpu2's own task passed (and it is drained for another of our checks): left as it is.
    assert plan['gpu2']['fast']['verdict'] == 'pass' and not plan['gpu2']['candidate']
    assert plan['gpu7']['candidate'] and plan['gpu7']['slurm_name'] == 'node-b7' and plan['gpu7']['drain']
    assert not plan['gpu8']['slurm'] and plan['gpu8']['fast'] is None  # not in Slurm, not reached
    loop = [{'rc': 0, 'stdout': line, 'item': host} for host, line in
            (('gpu1', STATES.splitlines()[0]), ('gpu2', STATES.splitlines()[1]), ('gpu7', STATES.splitlines()[6]))]
    loop.append({'rc': 1, 'stdout': '', 'item': 'gpu8'})
    assert dcgm_quarantine_plan(loop, hostvars, 1, 3, fast_results=elsewhere) == list(plan.values())
    for unread in ({'skipped': True}, {'rc': 1, 'stdout': ''}):
        unknown = dcgm_quarantine_plan(unread, hostvars, 1, 3, nodes=list(hostvars), fast_results=elsewhere)
        assert not any(entry['slurm'] for entry in unknown)
        assert [entry['host'] for entry in unknown if entry['candidate']] == ['gpu7']
