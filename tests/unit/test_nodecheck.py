# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain rules shared by validate.yml and llmforge-nodecheck, and the node health check itself.

The health check runs against the nvidia-smi shim (8-GPU HGX H200 fixture), fake sysfs trees and a stand-in
scontrol that keeps the node's state in a file and logs every call.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _nodecheck as nc
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain

TESTS = pathlib.Path(__file__).resolve().parents[1]
REPO = TESTS.parent
GPU = TESTS / 'fixtures' / 'gpu'
SHIM = GPU / 'nvidia-smi-shim'
PROGRAM = REPO / 'roles' / 'slurm_node' / 'files' / 'llmforge-nodecheck'
sys.path.insert(0, str(TESTS / 'fixtures' / 'rdma'))
import make_sysfs_trees  # noqa: E402  pylint: disable=wrong-import-position

RDMA_EXPECTED = {'devices': '^mlx5_[0-7]$', 'hca_count': 8, 'rate_gbps': 400}

# What `scontrol show node <name> -o` prints (Slurm 24.11), trimmed of fields the parser does not read.
IDLE = ('NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=2 CPUTot=2 Gres=gpu:h200:8 NodeAddr=gpu1 '
        'NodeHostName=gpu1 Version=24.11.5 RealMemory=22000 State=IDLE ThreadsPerCore=1 Partitions=gpu '
        'BootTime=2026-11-30T01:02:03 SlurmdStartTime=2026-11-30T01:05:00')
OUR_DRAIN = ('NodeName=gpu1 Gres=gpu:h200:8 State=IDLE+DRAIN ThreadsPerCore=1 Partitions=gpu '
             'Reason=llmforge: pcie_width GPU0 8 [root@2026-11-30T02:10:00]')
ADMIN_DRAIN = ('NodeName=gpu1 Gres=gpu:h200:8 State=MIXED+DRAIN ThreadsPerCore=1 Partitions=gpu '
               'Reason=admin: fan swap Tuesday [alice@2026-11-30T02:10:00] Comment=(null)')


def failing(name='pcie_width', subject='GPU0', actual=8, message='x8'):
    return {'name': name, 'status': 'fail', 'subject': subject, 'expected': 16, 'actual': actual, 'message': message}


def passing(name='pcie_width', subject='GPU0'):
    return {'name': name, 'status': 'pass', 'subject': subject, 'expected': 16, 'actual': 16, 'message': 'ok'}


# --- drain reason and rules ------------------------------------------------------------------------------------

def test_reason_names_the_first_failing_check_its_subject_and_actual_value():
    checks = [passing(), failing(), failing('state', 'mlx5_3/1', 'DOWN')]
    assert drain.drain_reason(checks) == 'llmforge: pcie_width GPU0 8'
    assert drain.drain_reason([passing()]) == ''


def test_reason_is_compact_unquoted_and_at_most_120_characters():
    item = failing('counters', 'mlx5_0/1', {'symbol_error': 12, 'link_downed': 3})
    assert drain.drain_reason([item]) == 'llmforge: counters mlx5_0/1 {symbol_error:12,link_downed:3}'
    item = failing('run', 'nvidia-smi', None, "'nvidia-smi -q -x' exited with 9:\n  NVIDIA-SMI has failed " + 'x' * 200)
    reason = drain.drain_reason([item])
    assert reason.startswith('llmforge: run nvidia-smi nvidia-smi -q -x exited with 9: NVIDIA-SMI has failed')
    assert len(reason) <= 120 and '"' not in reason and "'" not in reason and '\n' not in reason


@pytest.mark.parametrize('line, state, reason, drained', [
    (IDLE, 'IDLE', '', False),
    (OUR_DRAIN, 'IDLE+DRAIN', 'llmforge: pcie_width GPU0 8', True),
    (ADMIN_DRAIN, 'MIXED+DRAIN', 'admin: fan swap Tuesday', True),
    ('NodeName=gpu9 State=DOWN+NOT_RESPONDING Reason=Not responding [slurm@2026-11-30T00:00:00]', 'DOWN+NOT_RESPONDING',
     'Not responding', False),
    ('NodeName=gpu1 State=IDLE+DRAIN Reason=(null)', 'IDLE+DRAIN', '', True),
])
def test_parse_node(line, state, reason, drained):
    assert drain.parse_node(line) == {'name': line.split()[0][9:], 'state': state, 'reason': reason, 'drained': drained}


def test_a_failing_node_is_drained_once():
    assert drain.drain_action([failing()], drain.parse_node(IDLE)) == {
        'action': 'drain', 'reason': 'llmforge: pcie_width GPU0 8', 'why': 'failing'}
    assert drain.drain_action([failing()], drain.parse_node(OUR_DRAIN))['action'] is None
    assert drain.drain_action([failing()], drain.parse_node(ADMIN_DRAIN))['action'] is None


def test_our_drain_is_resumed_when_the_check_it_names_passes_again():
    decision = drain.drain_action([passing()], drain.parse_node(OUR_DRAIN))
    assert decision['action'] == 'resume' and 'llmforge: pcie_width GPU0 8' in decision['why']


def test_an_administrators_drain_is_never_resumed():
    decision = drain.drain_action([passing()], drain.parse_node(ADMIN_DRAIN))
    assert decision['action'] is None and 'someone else' in decision['why']
    other_tool = drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=gpu_driver: 550 -> 560 reboot')
    assert drain.drain_action([passing()], other_tool)['action'] is None


def test_our_drain_for_a_check_this_run_did_not_evaluate_stays():
    # The health check does not run NCCL: it must not lift validate.yml's bandwidth drain.
    node = drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: nccl_busbw single 310.2')
    assert drain.drain_action([passing()], node)['action'] is None
    assert drain.drain_action([passing(), passing('nccl_busbw', 'single')], node)['action'] == 'resume'
    # A node drained because a validator could not run is resumed once it runs and passes.
    node = drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: timeout nvidia-smi -q -x > 10s')
    assert drain.drain_action([passing()], node)['action'] == 'resume'


def test_a_dcgm_drain_is_lifted_only_by_a_pass_at_its_own_level():
    # The health check's level 1 passing says nothing of the level-3 failure that put the node in quarantine.
    node = drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: dcgm L3 fail: memory GPU3')
    assert drain.drain_action([passing(), passing('dcgm', 'L1')], node)['action'] is None
    assert drain.drain_action([passing('dcgm', 'L3')], node)['action'] == 'resume'
    node = drain.parse_node('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: dcgm L1 hang: timed out after 45 s')
    assert drain.drain_action([passing(), passing('dcgm', 'L1')], node)['action'] == 'resume'
    assert drain.drain_action([passing('dcgm', 'L3')], node)['action'] is None


# --- the health check ---------------------------------------------------------------------------------------

@pytest.fixture
def node(tmp_path, monkeypatch):
    """A simulated 8-GPU node: GPU fixture copy, healthy NDR sysfs tree, stand-in scontrol, expectation file."""
    shutil.copytree(GPU / 'hgx-h200-8', tmp_path / 'gpu')
    make_sysfs_trees.build('ndr8_healthy', tmp_path / 'sys')
    monkeypatch.setenv('NVIDIA_SMI_SHIM_DIR', str(tmp_path / 'gpu'))
    state = tmp_path / 'slurm-state'
    state.write_text(IDLE)
    scontrol = tmp_path / 'scontrol'
    scontrol.write_text(
        '#!/bin/sh\n'
        f'echo "$*" >> {tmp_path}/scontrol.log\n'
        'case "$1" in\n'
        f'  show) cat {state} ;;\n'
        '  requeue) [ "$2" = 12 ] && { echo "scontrol: error: Requested operation is disabled for job 12" >&2; exit 1; } ;;\n'
        '  update) case "$3" in\n'
        f'      State=DRAIN) echo "NodeName=gpu1 State=IDLE+DRAIN Reason=${{4#Reason=}} [root@now]" > {state} ;;\n'
        f'      State=RESUME) echo "NodeName=gpu1 State=IDLE" > {state} ;;\n'
        '    esac ;;\n'
        'esac\n'
        f'exit ${{SCONTROL_RC:-0}}\n')
    scontrol.chmod(0o755)
    # Jobs running on the node: 11 (requeueable) and 12 (submitted with --no-requeue).
    squeue = tmp_path / 'squeue'
    squeue.write_text(f'#!/bin/sh\necho "squeue $*" >> {tmp_path}/scontrol.log\nprintf "11\\n12\\n"\n')
    squeue.chmod(0o755)
    (tmp_path / 'textfile').mkdir()
    config = {
        'node_name': 'gpu1', 'timeout': 3, 'drain': True, 'scontrol': str(scontrol), 'squeue': str(squeue),
        'textfile_dir': str(tmp_path / 'textfile'), 'state_file': str(tmp_path / 'nodecheck.json'),
        'validators': {
            'gpu_topology': {'profile': 'h200-sxm-8', 'expected': {}, 'nvidia_smi': str(SHIM)},
            'rdma_links': {'sysfs_root': str(tmp_path / 'sys'), 'expected': RDMA_EXPECTED},
        },
    }
    (tmp_path / 'nodecheck.json.in').write_text(json.dumps(config))

    class Node:
        root = tmp_path

        @staticmethod
        def run(*args, **overrides):
            data = dict(config, **overrides)
            (tmp_path / 'config.json').write_text(json.dumps(data))
            return nc.main(['--config', str(tmp_path / 'config.json'), '--strict', *args])

        @staticmethod
        def slurm_state():
            return drain.parse_node(state.read_text())

        @staticmethod
        def set_state(line):
            state.write_text(line)

        @staticmethod
        def scontrol_calls():
            log = tmp_path / 'scontrol.log'
            return log.read_text().splitlines() if log.exists() else []

        @staticmethod
        def degrade_gpu0_to_x8():
            xml = tmp_path / 'gpu' / 'smi_q.xml'
            xml.write_text(xml.read_text().replace('<current_link_width>16x<', '<current_link_width>8x<', 1))

        @staticmethod
        def restore_gpu():
            shutil.copy(GPU / 'hgx-h200-8' / 'smi_q.xml', tmp_path / 'gpu' / 'smi_q.xml')

    return Node


def test_healthy_node_passes_and_slurm_is_left_alone(node, capsys):
    assert node.run() == 0
    out = capsys.readouterr().out
    assert out.startswith('llmforge-nodecheck gpu1: healthy (') and '0 fail' in out and 'Slurm: healthy' in out
    assert node.scontrol_calls() == ['show node gpu1 -o']
    metrics = (node.root / 'textfile' / 'llmforge_nodecheck.prom').read_text()
    assert 'llmforge_validator_healthy{validator="nodecheck"} 1\n' in metrics and 'llmforge_validator_check_failed{' not in metrics
    saved = json.loads((node.root / 'nodecheck.json').read_text())
    assert saved['healthy'] is True and saved['node'] == 'gpu1'


def test_degraded_node_is_drained_with_the_validate_reason_then_resumed_when_fixed(node, capsys):
    node.degrade_gpu0_to_x8()
    assert node.run() == 1
    assert node.slurm_state() == {'name': 'gpu1', 'state': 'IDLE+DRAIN', 'reason': 'llmforge: pcie_width GPU0 8', 'drained': True}
    assert 'FAILING llmforge: pcie_width GPU0 8' in capsys.readouterr().out
    assert 'update NodeName=gpu1 State=DRAIN Reason=llmforge: pcie_width GPU0 8' in node.scontrol_calls()
    metrics = (node.root / 'textfile' / 'llmforge_nodecheck.prom').read_text()
    assert 'llmforge_validator_check_failed{validator="nodecheck",check="pcie_width",subject="GPU0"} 1' in metrics
    # Still failing: not drained a second time.
    assert node.run() == 1
    assert sum('State=DRAIN' in call for call in node.scontrol_calls()) == 1
    node.restore_gpu()
    assert node.run() == 0
    assert node.slurm_state()['state'] == 'IDLE' and node.scontrol_calls()[-1] == 'update NodeName=gpu1 State=RESUME'


def test_jobs_on_a_node_drained_for_a_fault_are_requeued(node, capsys):
    node.degrade_gpu0_to_x8()
    assert node.run() == 1
    calls = node.scontrol_calls()
    drained = calls.index('update NodeName=gpu1 State=DRAIN Reason=llmforge: pcie_width GPU0 8')
    assert calls[drained + 1:] == ['squeue --noheader --nodelist gpu1 --states RUNNING,CONFIGURING --format %A',
                                   'requeue 11', 'requeue 12']
    out = capsys.readouterr().out
    assert '; requeued job(s) 11; not requeued: 12 (' in out and 'Requested operation is disabled for job 12' in out
    saved = json.loads((node.root / 'nodecheck.json').read_text())
    assert saved['slurm']['requeued'] == ['11'] and saved['slurm']['not_requeued'][0].startswith('12 (')
    # Still failing on the next run: neither drained nor requeued again.
    assert node.run() == 1
    assert sum(call.startswith('requeue') for call in node.scontrol_calls()) == 2


def test_requeue_false_drains_and_leaves_the_jobs_running(node):
    node.degrade_gpu0_to_x8()
    assert node.run(requeue=False) == 1
    assert not any(call.startswith(('squeue', 'requeue')) for call in node.scontrol_calls())
    assert node.slurm_state()['drained']


def test_without_strict_a_handled_failing_node_exits_0(node, tmp_path):
    node.degrade_gpu0_to_x8()
    assert nc.main(['--config', str(tmp_path / 'nodecheck.json.in'), '--no-slurm']) == 0
    assert nc.main(['--config', str(tmp_path / 'nodecheck.json.in'), '--no-slurm', '--strict']) == 1


def test_an_administrators_drain_survives_a_healthy_check(node):
    node.set_state(ADMIN_DRAIN)
    assert node.run() == 0
    assert node.slurm_state()['reason'] == 'admin: fan swap Tuesday'
    assert not any(call.startswith('update') for call in node.scontrol_calls())


def test_port_down_drains_with_the_port_named(node):
    make_sysfs_trees.build('ndr8_port_down', node.root / 'sys')
    assert node.run() == 1
    assert node.slurm_state()['reason'].startswith(('llmforge: state mlx5_3/1', 'llmforge: phys_state mlx5_3/1'))


def test_dry_run_and_no_slurm_change_nothing(node, capsys):
    node.degrade_gpu0_to_x8()
    assert node.run('--dry-run') == 1
    assert 'would drain' in capsys.readouterr().out and node.slurm_state()['state'] == 'IDLE'
    assert node.run('--no-slurm') == 1
    assert node.scontrol_calls() == ['show node gpu1 -o']
    assert node.run(drain=False) == 1 and len(node.scontrol_calls()) == 1


def test_hung_nvidia_smi_is_reported_as_a_timeout_within_the_limit(node, monkeypatch, capsys):
    monkeypatch.setenv('NVIDIA_SMI_SHIM_HANG', '1')
    started = time.monotonic()
    assert node.run(timeout=1) == 1
    assert time.monotonic() - started < 4
    assert node.slurm_state()['reason'] in ('llmforge: timeout nvidia-smi -q -x > 1s', 'llmforge: timeout nvidia-smi topo -m > 1s')
    assert 'FAILING llmforge: timeout nvidia-smi' in capsys.readouterr().out


def test_stuck_validator_thread_is_cut_at_the_deadline(node, monkeypatch):
    def stuck(*_args):
        time.sleep(30)
    monkeypatch.setattr(rdma, 'evaluate', stuck)
    started = time.monotonic()
    result = nc.run(nc.load_config(str(node.root / 'nodecheck.json.in')), 'gpu1', use_slurm=False, dry_run=False)
    assert time.monotonic() - started < 5  # the 3 s timeout and 1 s of grace
    assert [c for c in result['checks'] if c['status'] == 'fail'][0]['subject'] == 'rdma_links'
    assert result['reason'] == 'llmforge: timeout rdma_links > 3s'


def test_driver_down_and_missing_nvidia_smi_fail_the_run_check(node, monkeypatch):
    monkeypatch.setenv('NVIDIA_SMI_SHIM_FAIL', '9')
    assert node.run() == 1
    assert node.slurm_state()['reason'].startswith('llmforge: run nvidia-smi nvidia-smi-shim -q -x exited with 9') or \
        node.slurm_state()['reason'].startswith('llmforge: run nvidia-smi ')
    monkeypatch.delenv('NVIDIA_SMI_SHIM_FAIL')
    node.set_state(IDLE)
    validators = {'gpu_topology': {'profile': 'h200-sxm-8', 'nvidia_smi': str(node.root / 'absent')}}
    assert node.run('--no-slurm', validators=validators) == 1


@pytest.fixture
def dcgmi(tmp_path, monkeypatch):
    """The dcgmi stand-in replaying tests/fixtures/dcgm; select(level, 'l1-fail' | 'hang') picks what a level says."""
    state = tmp_path / 'dcgm-state'
    state.mkdir()
    monkeypatch.setenv('DCGMI_SHIM_FIXTURES', str(TESTS / 'fixtures' / 'dcgm'))
    monkeypatch.setenv('DCGMI_SHIM_STATE', str(state))
    monkeypatch.setenv('DCGMI_SHIM_LOG', str(tmp_path / 'dcgmi.log'))
    program = tmp_path / 'dcgmi'
    program.write_text(f'#!/bin/sh\nexec {sys.executable} {REPO}/molecule/resources/files/dcgmi_shim.py "$@"\n')
    program.chmod(0o755)

    class Dcgmi:
        path = str(program)

        @staticmethod
        def select(level, line):
            (state / f'dcgmi-diag-{level}').write_text(line + '\n')

        @staticmethod
        def calls():
            log = tmp_path / 'dcgmi.log'
            return log.read_text().splitlines() if log.exists() else []
    return Dcgmi


def with_dcgm(node, dcgmi, **settings):
    """The node's validators plus DCGM's level 1."""
    config = json.loads((node.root / 'nodecheck.json.in').read_text())
    return dict(config['validators'], dcgm=dict({'dcgmi': dcgmi.path}, **settings))


def test_dcgm_level_1_passes_beside_the_other_validators(node, dcgmi, capsys):
    assert node.run(validators=with_dcgm(node, dcgmi)) == 0
    assert dcgmi.calls() == ['diag -r 1 -j']
    saved = json.loads((node.root / 'nodecheck.json').read_text())
    dcgm_checks = [c for c in saved['checks'] if c['name'] == 'dcgm']
    assert [(c['subject'], c['status'], c['actual']) for c in dcgm_checks] == [('L1', 'pass', 'pass: 1 test on 8 GPUs')]
    assert 'healthy' in capsys.readouterr().out


def test_dcgm_level_1_failure_drains_and_its_pass_resumes(node, dcgmi):
    dcgmi.select(1, 'l1-fail')
    assert node.run(validators=with_dcgm(node, dcgmi)) == 1
    assert node.slurm_state()['reason'] == 'llmforge: dcgm L1 fail: software GPU3'
    metrics = (node.root / 'textfile' / 'llmforge_nodecheck.prom').read_text()
    assert re.search(r'^llmforge_validator_check_failed\{[^}]*check="dcgm"[^}]*subject="L1"[^}]*\} 1$', metrics, re.M), metrics
    dcgmi.select(1, 'l1-pass')
    assert node.run(validators=with_dcgm(node, dcgmi)) == 0
    assert node.slurm_state()['state'] == 'IDLE'
    # A node held for the long diagnostic (validate.yml's quarantine) is not released by the level-1 pass.
    node.set_state('NodeName=gpu1 State=IDLE+DRAIN Reason=llmforge: dcgm L3 fail: memory GPU3 [root@now]')
    assert node.run(validators=with_dcgm(node, dcgmi)) == 0
    assert node.slurm_state()['reason'] == 'llmforge: dcgm L3 fail: memory GPU3'


def test_hung_dcgmi_is_cut_at_its_own_limit_and_drains_as_a_hang(node, dcgmi):
    dcgmi.select(1, 'hang')
    started = time.monotonic()
    assert node.run(validators=with_dcgm(node, dcgmi, timeout=2)) == 1
    assert time.monotonic() - started < 6
    assert node.slurm_state()['reason'] == 'llmforge: dcgm L1 hang: timed out after 2 s'


def test_dcgmi_errors_fail_the_node(node, dcgmi):
    # No host engine: dcgmi's own error, exit 235.
    dcgmi.select(1, 'error-hostengine 235')
    assert node.run('--no-slurm', validators=with_dcgm(node, dcgmi)) == 1
    saved = json.loads((node.root / 'nodecheck.json').read_text())
    assert saved['reason'] == 'llmforge: dcgm L1 error: Host engine connection invalid/disconnected (-21)'
    validators = with_dcgm(node, dcgmi)
    validators['dcgm']['dcgmi'] = str(node.root / 'absent')
    assert node.run('--no-slurm', validators=validators) == 1
    saved = json.loads((node.root / 'nodecheck.json').read_text())
    assert saved['reason'].startswith('llmforge: run dcgmi ') and 'not found' in saved['reason']


@pytest.mark.parametrize('settings, message', [
    ({'timeout': 90}, 'validators.dcgm.timeout must be a number of seconds in (0, 50], got 90'),
    ({'timeout': '10'}, 'validators.dcgm.timeout must be a number of seconds'),
    ({'dcgmi': 'bin/dcgmi'}, 'validators.dcgm.dcgmi must be a command name'),
    ({'level': 3}, 'validators.dcgm: unknown field(s) level'),
])
def test_bad_dcgm_settings_are_named(tmp_path, capsys, settings, message):
    path = tmp_path / 'nodecheck.json'
    path.write_text(json.dumps({'validators': {'dcgm': settings}}))
    assert nc.main(['--config', str(path)]) == 2
    assert message in capsys.readouterr().err


def test_slurm_failure_is_reported_with_exit_3(node, monkeypatch, capsys):
    monkeypatch.setenv('SCONTROL_RC', '1')
    assert node.run() == 3
    assert "Slurm not updated: 'show node gpu1 -o'" in capsys.readouterr().out.replace(str(node.root / 'scontrol') + ' ', '')


@pytest.mark.parametrize('content, message', [
    (None, 'not found'),
    ('{', 'cannot be read as JSON'),
    ('[]', 'expected a JSON object'),
    ('{"nodename": "x"}', 'unknown field(s) nodename'),
    ('{"timeout": 90}', 'timeout must be a number of seconds in (0, 50]'),
    ('{"timeout": true}', 'timeout must be a number'),
    ('{"validators": {"gpu": {}}}', 'validators must be an object with keys among gpu_topology, rdma_links, dcgm'),
    ('{"validators": {"gpu_topology": {"profile": "h300"}}}', 'validators.gpu_topology: '),
    ('{"validators": {"rdma_links": {"expected": {"hca_cnt": 8}}}}', "validators.rdma_links: unknown key 'expected.hca_cnt'"),
    ('{"drain": "yes"}', 'drain must be true or false'),
])
def test_bad_expectation_files_are_named_and_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / 'nodecheck.json'
    if content is not None:
        path.write_text(content)
    assert nc.main(['--config', str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f'llmforge-nodecheck: {path}: ') and message in err


def launcher(tmp_path, library):
    """A copy of the wrapper the role installs, its fixed library directory replaced by `library`."""
    text = PROGRAM.read_text()
    assert "LIBRARY = '/usr/local/lib/llmforge/python'\n" in text
    copy = tmp_path / 'llmforge-nodecheck'
    copy.write_text(text.replace("'/usr/local/lib/llmforge/python'", repr(str(library))))
    return copy


def test_installed_program_runs_from_its_library_dir(node, tmp_path):
    """The wrapper the role installs, pointed at this checkout's module_utils as its library."""
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    proc = subprocess.run([sys.executable, str(launcher(tmp_path, REPO / 'collections')), '--config',
                           str(tmp_path / 'nodecheck.json.in'), '--json'],
                          capture_output=True, text=True, env=env, timeout=30, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result['healthy'] is True and result['slurm']['action'] is None
    assert {c['name'] for c in result['checks']} >= {'gpu_count', 'nvlink', 'pcie_width', 'state', 'rate'}
    # Nothing else may provide the checks: neither PYTHONPATH (the Makefile exports PYTHONPATH=collections) nor
    # the variable that used to name the library.
    proc = subprocess.run([sys.executable, str(launcher(tmp_path, tmp_path / 'nowhere'))], capture_output=True,
                          text=True, timeout=30, check=False,
                          env=dict(os.environ, PYTHONPATH=str(REPO / 'collections'), LLMFORGE_PYTHON_DIR=str(REPO / 'collections')))
    assert proc.returncode == 2 and f'cannot load its checks from {tmp_path}/nowhere' in proc.stderr


def test_the_environment_puts_nothing_on_the_import_path(node, tmp_path):
    """Run as root, the program imports nothing from PYTHONPATH, the current directory or the user's site."""
    planted = tmp_path / 'planted'
    planted.mkdir()
    marker = tmp_path / 'imported'
    (planted / 'json.py').write_text(f'open({str(marker)!r}, "w").close()\nraise SystemExit(99)\n')
    program = launcher(tmp_path, REPO / 'collections')
    shutil.copy(planted / 'json.py', tmp_path / 'json.py')  # beside the program, too
    proc = subprocess.run([sys.executable, str(program), '--config', str(tmp_path / 'nodecheck.json.in'), '--no-slurm'],
                          capture_output=True, text=True, timeout=30, check=False, cwd=planted,
                          env=dict(os.environ, PYTHONPATH=str(planted), PYTHONUSERBASE=str(planted)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not marker.exists() and 'healthy' in proc.stdout
    assert PROGRAM.read_text().startswith('#!/usr/bin/python3 -I\n')


def test_only_ascii_job_ids_are_requeued(monkeypatch):
    calls = []

    def scontrol(argv, timeout):
        calls.append(argv[1:])
        return '11\n\u00b2\n\u0663\n' + '9' * 5000 + '\n7\n' if argv[0] == 'squeue' else ''
    monkeypatch.setattr(nc, '_scontrol', scontrol)
    done = nc.requeue_jobs({'timeout': 5, 'squeue': 'squeue', 'scontrol': 'scontrol'}, 'gpu1')
    assert done == {'requeued': ['7', '11'], 'not_requeued': []}
    assert [call for call in calls if call[0] == 'requeue'] == [['requeue', '7'], ['requeue', '11']]
