# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-repair with fake nvidia-smi, dcgmi, nccl-tests, perftest, journalctl, dmidecode and scontrol."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import sys
import tarfile

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _repair as rep
from node_install import LAUNCHERS, install, run_launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'fixtures'
LAUNCHER = LAUNCHERS['programs._repair']

# One fake for every command: its behaviour comes from files in $FAKE_DIR (what it prints, its exit status).
FAKE = '''#!{python}
import os, sys, pathlib
fake = pathlib.Path(os.environ['FAKE_DIR'])
name = pathlib.Path(sys.argv[0]).name
args = sys.argv[1:]
with open(fake / 'calls.log', 'a') as log:
    log.write(name + ' ' + ' '.join(args) + '\\n')
def reply(key, default_rc=0):
    out = fake / (key + '.out')
    rc = fake / (key + '.rc')
    if out.exists():
        sys.stdout.write(out.read_text())
    err = fake / (key + '.err')
    if err.exists():
        sys.stderr.write(err.read_text())
    sys.exit(int(rc.read_text()) if rc.exists() else default_rc)
if name == 'nvidia-smi':
    if args[:1] == ['-r']:
        reply('reset')
    if args == ['-q', '-x']:
        reply('smi-q')
    reply('smi-other')
if name == 'dcgmi':
    reply('dcgmi-r' + args[2])
reply(name)
'''

BUSES = ('18', '2A', '3A', '3B')


def smi_xml(processes=None):
    """`nvidia-smi -q -x` of four GPUs (serial 165000000000<i>, UUID GPU-<iiii>), `processes` {index: [pid]}."""
    gpus = []
    for index, bus in enumerate(BUSES):
        pids = ''.join(f'<process_info><pid>{pid}</pid><type>C</type></process_info>'
                       for pid in (processes or {}).get(index, []))
        gpus.append(f'<gpu id="00000000:{bus}:00.0"><product_name>NVIDIA H200</product_name>'
                    f'<serial>165000000000{index}</serial><uuid>GPU-{str(index) * 4}</uuid>'
                    f'<pci><pci_bus_id>00000000:{bus}:00.0</pci_bus_id></pci><processes>{pids}</processes></gpu>')
    return f'<?xml version="1.0" ?><nvidia_smi_log><attached_gpus>4</attached_gpus>{"".join(gpus)}</nvidia_smi_log>\n'


class Fake(type(pathlib.Path())):  # type: ignore[misc]
    """The fake's state directory, with `bin`: the directory of the fake commands."""

    def __new__(cls, state, bin_dir):
        made = super().__new__(cls, state)
        made.bin = bin_dir
        return made

    def __init__(self, state, bin_dir):  # pylint: disable=unused-argument
        if sys.version_info >= (3, 12):
            super().__init__(state)
        self.bin = bin_dir


@pytest.fixture
def fake(tmp_path, monkeypatch):
    bin_dir = tmp_path / 'bin'
    state = tmp_path / 'fake'
    bin_dir.mkdir()
    state.mkdir()
    for name in ('nvidia-smi', 'dcgmi', 'all_reduce_perf', 'ib_write_bw', 'journalctl', 'dmidecode', 'scontrol', 'srun'):
        path = bin_dir / name
        path.write_text(FAKE.format(python=sys.executable), encoding='utf-8')
        path.chmod(0o755)
    (state / 'smi-q.out').write_text(smi_xml(), encoding='utf-8')
    (state / 'reset.out').write_text('GPU 00000000:3B:00.0 was successfully reset.\n', encoding='utf-8')
    monkeypatch.setenv('FAKE_DIR', str(state))
    monkeypatch.setattr(rep, 'SYSTEM_DIRS', (str(bin_dir),))
    monkeypatch.setattr(rep, 'NCCL_TESTS_GLOB', str(tmp_path / 'none' / '*'))
    return Fake(state, bin_dir)


def run(capsys, *argv, environ=None):
    code = rep.main(list(argv), environ=environ or {})
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 1, captured.out
    return code, json.loads(lines[0]), captured.err


def calls(fake) -> list[str]:
    path = fake / 'calls.log'
    return path.read_text(encoding='utf-8').splitlines() if path.exists() else []


# --- reset -------------------------------------------------------------------------------------------------------

def test_reset_resets_and_clears_what_the_node_remembers(fake, capsys, tmp_path, monkeypatch):
    epilog = tmp_path / 'epilog-fault.json'
    epilog.write_text(json.dumps({'reason': 'epilog GPU3 leftover processes 4711'}), encoding='utf-8')
    cleared = []
    monkeypatch.setattr(rep.kernel_log, 'clear_faults', lambda path, gpus: cleared.append((path, gpus)) or 2)
    nodecheck = tmp_path / 'nodecheck.json'
    nodecheck.write_text(json.dumps({'validators': {'kernel_faults': {'state_file': '/var/lib/llmforge/k.json'}}}),
                         encoding='utf-8')
    code, result, _err = run(capsys, 'reset', '--gpu', '3', '--epilog-fault', str(epilog), '--nodecheck-config',
                             str(nodecheck))
    assert code == 0 and result['ok'] and result['gpu'] == 3
    assert [item['status'] for item in result['checks']] == ['pass', 'pass', 'pass']
    assert cleared == [('/var/lib/llmforge/k.json', [3])] and not epilog.exists()
    assert 'nvidia-smi -r -i 3' in calls(fake)


def test_reset_refuses_while_a_process_uses_the_gpu(fake, capsys):
    (fake / 'smi-q.out').write_text(smi_xml({3: [4711]}), encoding='utf-8')
    code, result, _err = run(capsys, 'reset', '--gpu', '3')
    assert code == 1 and not result['ok']
    assert result['checks'][0]['detail'] == 'refused: process(es) 4711 use GPU3'
    assert not any(call.startswith('nvidia-smi -r') for call in calls(fake))


def test_a_process_on_another_gpu_does_not_stop_the_reset(fake, capsys):
    (fake / 'smi-q.out').write_text(smi_xml({0: [4711]}), encoding='utf-8')
    code, result, _err = run(capsys, 'reset', '--gpu', '3', '--nodecheck-config', '/nonexistent')
    assert code == 0 and result['checks'][1]['status'] == 'skip'


def test_a_failing_reset_fails_and_keeps_the_records(fake, capsys, tmp_path):
    (fake / 'reset.rc').write_text('255', encoding='utf-8')
    (fake / 'reset.err').write_text('Unable to reset GPU 00000000:3B:00.0: in use by another client\n', encoding='utf-8')
    epilog = tmp_path / 'epilog-fault.json'
    epilog.write_text('{"reason": "epilog GPU3 x"}', encoding='utf-8')
    code, result, _err = run(capsys, 'reset', '--gpu', '3', '--epilog-fault', str(epilog))
    assert code == 1 and 'in use by another client' in result['checks'][0]['detail'] and epilog.exists()


def test_a_hung_reset_is_bounded(fake, capsys, tmp_path):
    hang = fake.bin / 'nvidia-smi-hang'
    hang.write_text(f'#!{sys.executable}\nimport sys, time\nif sys.argv[1:2] == ["-r"]:\n    time.sleep(30)\n'
                    f'print({smi_xml()!r})\n', encoding='utf-8')
    hang.chmod(0o755)
    code, result, _err = run(capsys, 'reset', '--gpu', '3', '--nvidia-smi', str(hang), '--timeout', '1')
    assert code == 1 and 'did not finish within 1 s' in result['checks'][0]['detail']
    assert result['seconds'] < 10


def test_the_epilog_record_of_another_gpu_stays(tmp_path):
    record = tmp_path / 'f.json'
    record.write_text('{"reason": "epilog GPU2 leftover processes 1"}', encoding='utf-8')
    assert rep.clear_epilog_fault(str(record), 3)['status'] == 'skip' and record.exists()
    record.write_text('{"reason": "epilog node unreadable"}', encoding='utf-8')
    assert rep.clear_epilog_fault(str(record), 3)['status'] == 'pass' and not record.exists()


def test_an_unknown_gpu_is_a_usage_error(fake, capsys):
    code, result, _err = run(capsys, 'reset', '--gpu', '7')
    assert code == 2 and 'GPU 7 is not among the GPUs' in result['checks'][0]['detail']


def test_clearing_kernel_faults_forgets_only_that_gpus_and_says_why_it_could_not(monkeypatch, tmp_path):
    assert rep.clear_kernel_faults('', 3)['status'] == 'skip'
    check = rep.clear_kernel_faults(str(tmp_path / 'state.json'), 3)
    assert check['status'] == 'pass' and check['detail'].startswith('0 fault(s) of GPU3 forgotten')

    def broken(_path, _gpus):
        raise OSError('read-only file system')
    monkeypatch.setattr(rep.kernel_log, 'clear_faults', broken)
    check = rep.clear_kernel_faults('/var/lib/llmforge/k.json', 3)
    assert check['status'] == 'fail' and check['detail'] == '/var/lib/llmforge/k.json: OSError: read-only file system'


# --- burn-in -----------------------------------------------------------------------------------------------------

def sysfs(tmp_path, devices=('mlx5_0', 'mlx5_1')):
    root = tmp_path / 'sys'
    for device in devices:
        counters = root / 'class' / 'infiniband' / device / 'ports' / '1' / 'counters'
        hw_counters = counters.parent / 'hw_counters'
        counters.mkdir(parents=True)
        hw_counters.mkdir()
        (counters / 'symbol_error').write_text('3\n', encoding='utf-8')
        (counters / 'link_downed').write_text('0\n', encoding='utf-8')
        (hw_counters / 'out_of_buffer').write_text('17\n', encoding='utf-8')
    return root


def test_burnin_passes_with_every_test(fake, capsys, tmp_path):
    (fake / 'dcgmi-r3.out').write_text((FIXTURES / 'dcgm' / 'l3-pass.json').read_text(encoding='utf-8'), encoding='utf-8')
    (fake / 'all_reduce_perf.out').write_text((FIXTURES / 'nccl-tests' / 'all_reduce_perf_8gpu.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    (fake / 'ib_write_bw.out').write_text((FIXTURES / 'perftest' / 'ib_write_bw_client_gbits.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    code, result, err = run(capsys, 'burnin', '--level', '3', '--nccl-test', str(fake.bin / 'all_reduce_perf'),
                            '--sysfs-root', str(sysfs(tmp_path)), '--perftest-wait', '0.01', '--min-rail-gbps', '350')
    assert code == 0 and result['ok'], result
    statuses = {item['name']: item['status'] for item in result['checks']}
    assert statuses == {'gpus': 'pass', 'dcgm': 'pass', 'nccl': 'pass', 'perftest mlx5_0': 'pass',
                        'perftest mlx5_1': 'pass'}
    assert next(item for item in result['checks'] if item['name'] == 'perftest mlx5_0')['gbps'] == 391.41
    assert any(call.startswith('dcgmi diag -r 3 -j') for call in calls(fake))
    assert any(call.startswith('all_reduce_perf -b 8M -e 1G -f 2 -g 4') for call in calls(fake))
    assert any(call.endswith('--report_gbits localhost') for call in calls(fake))
    assert 'skip' not in err


def test_burnin_fails_on_a_failing_diagnostic_and_names_the_gpu(fake, capsys, tmp_path):
    (fake / 'dcgmi-r3.out').write_text((FIXTURES / 'dcgm' / 'l3-fail.json').read_text(encoding='utf-8'), encoding='utf-8')
    (fake / 'dcgmi-r3.rc').write_text('205', encoding='utf-8')
    (fake / 'all_reduce_perf.out').write_text((FIXTURES / 'nccl-tests' / 'all_reduce_perf_8gpu_wrong.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    code, result, _err = run(capsys, 'burnin', '--nccl-test', str(fake.bin / 'all_reduce_perf'), '--perftest',
                             '/nonexistent/ib_write_bw', '--sysfs-root', str(tmp_path))
    assert code == 1 and not result['ok']
    dcgm = next(item for item in result['checks'] if item['name'] == 'dcgm')
    assert dcgm['status'] == 'fail' and dcgm['gpus']
    assert next(item for item in result['checks'] if item['name'] == 'nccl')['status'] == 'fail'


def test_burnin_skips_what_is_not_installed_and_says_so(fake, capsys, tmp_path):
    code, result, err = run(capsys, 'burnin', '--dcgmi', '/nonexistent/dcgmi', '--perftest', '/nonexistent/ib_write_bw',
                            '--nccl-test', '/nonexistent/all_reduce_perf', '--sysfs-root', str(tmp_path))
    assert code == 0 and result['ok']
    statuses = {item['name']: item['status'] for item in result['checks']}
    assert statuses == {'gpus': 'pass', 'dcgm': 'skip', 'nccl': 'skip', 'perftest': 'skip'}
    assert 'llmforge-repair: skip dcgm: dcgmi not found' in err and 'skip nccl' in err and 'skip perftest' in err


def test_burnin_with_a_peer_runs_the_pair_tests_through_srun(fake, capsys, tmp_path):
    (fake / 'all_reduce_perf.out').write_text((FIXTURES / 'nccl-tests' / 'all_reduce_perf_2node_16gpu.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    (fake / 'srun.out').write_text((FIXTURES / 'nccl-tests' / 'all_reduce_perf_2node_16gpu.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    (fake / 'ib_write_bw.out').write_text((FIXTURES / 'perftest' / 'ib_write_bw_client_gbits.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    code, result, _err = run(capsys, 'burnin', '--peer', 'gpu009', '--dcgmi', '/nonexistent', '--nccl-test',
                             str(fake.bin / 'all_reduce_perf'), '--sysfs-root', str(sysfs(tmp_path, ('mlx5_0',))),
                             '--perftest-wait', '0.01')
    assert code == 0, result
    names = [item['name'] for item in result['checks']]
    assert 'nccl pair' in names and 'perftest mlx5_0' in names
    log = calls(fake)
    assert any(call.startswith('srun --overlap -N2 --ntasks-per-node=1 --nodelist=') and 'gpu009' in call for call in log)
    assert any(call.startswith('srun --overlap -N1 -n1 -w gpu009') for call in log)
    assert any(call.endswith('--report_gbits gpu009') for call in log)


def test_a_slow_rail_fails(fake, capsys, tmp_path):
    (fake / 'ib_write_bw.out').write_text((FIXTURES / 'perftest' / 'ib_write_bw_slow_gbits.txt').read_text(
        encoding='utf-8'), encoding='utf-8')
    code, result, _err = run(capsys, 'burnin', '--dcgmi', '/nonexistent', '--sysfs-root', str(sysfs(tmp_path, ('mlx5_0',))),
                             '--perftest-wait', '0.01', '--min-rail-gbps', '350')
    assert code == 1 and 'expected at least 350' in result['checks'][-1]['detail']


def test_perftest_bandwidth_is_read():
    text = (FIXTURES / 'perftest' / 'ib_write_bw_duration_gbits.txt').read_text(encoding='utf-8')
    assert rep.perftest_bandwidth(text) == 391.28
    assert rep.perftest_bandwidth('nothing') is None


# --- evidence ----------------------------------------------------------------------------------------------------

def test_evidence_bundle_with_a_verified_manifest(fake, capsys, tmp_path):
    (fake / 'smi-q.out').write_text('<?xml version="1.0" ?><nvidia_smi_log></nvidia_smi_log>\n', encoding='utf-8')
    (fake / 'smi-other.out').write_text('index, serial\n3, 1650000000003\n', encoding='utf-8')
    (fake / 'dcgmi-r1.out').write_text((FIXTURES / 'dcgm' / 'l1-pass.json').read_text(encoding='utf-8'), encoding='utf-8')
    (fake / 'dmidecode.out').write_text('System Information\n\tSerial Number: ABC123\n', encoding='utf-8')
    kernel = tmp_path / 'kern.log'
    kernel.write_text('Dec 05 07:00:01 gpu001 kernel: usb 1-1: new device\n'
                      'Dec 05 07:00:02 gpu001 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n'
                      'Dec 05 07:00:03 gpu001 kernel: pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error message '
                      'received from 0000:3b:00.0\n', encoding='utf-8')
    out = tmp_path / 'evidence'
    history = tmp_path / 'history.jsonl'
    history.write_text('{"kind": "fault", "node": "gpu001"}\n{"kind": "rma", "node": "gpu001"}\n', encoding='utf-8')
    code, result, _err = run(capsys, 'evidence', '--out', str(out), '--reason', 'llmforge: rma 1650000000003 xid 79',
                             '--kernel-log', str(kernel), '--sysfs-root', str(sysfs(tmp_path)), '--history', str(history))
    assert code == 0 and result['ok'], result
    bundle = pathlib.Path(result['bundle'])
    assert bundle.parent == out and bundle.name.startswith('evidence-') and bundle.name.endswith('.tar.gz')
    assert os.stat(bundle).st_mode & 0o777 == 0o600 and os.stat(out).st_mode & 0o777 == 0o700
    assert os.stat(result['manifest']).st_mode & 0o777 == 0o600
    assert hashlib.sha256(bundle.read_bytes()).hexdigest() == result['sha256']
    with tarfile.open(bundle) as archive:
        members = {member.name.split('/', 1)[1]: archive.extractfile(member).read() for member in archive.getmembers()}
        assert all(member.mode == 0o600 for member in archive.getmembers())
    manifest = json.loads(members.pop('manifest.json'))
    assert manifest == json.loads(pathlib.Path(result['manifest']).read_text(encoding='utf-8'))
    assert set(manifest['members']) == set(members)
    for name, data in members.items():
        assert manifest['members'][name] == {'sha256': hashlib.sha256(data).hexdigest(), 'size': len(data)}, name
    assert {'nvidia-smi-q.xml', 'gpu-serials.csv', 'kernel-faults.log', 'dcgm-diag-r1.json', 'rdma-counters.json',
            'dmidecode.txt', 'reason.txt', 'commands.json', 'ledger-history.jsonl'} <= set(members)
    assert members['ledger-history.jsonl'] == history.read_bytes()
    faults = members['kernel-faults.log'].decode()
    assert 'Xid' in faults and 'AER' in faults and 'usb' not in faults
    counters = json.loads(members['rdma-counters.json'])
    assert counters['mlx5_0']['1'] == {'counters': {'link_downed': 0, 'symbol_error': 3},
                                       'hw_counters': {'out_of_buffer': 17}}
    assert manifest['reason'] == 'llmforge: rma 1650000000003 xid 79'


def test_evidence_from_a_broken_node_is_still_written(fake, capsys, tmp_path):
    (fake / 'smi-q.rc').write_text('15', encoding='utf-8')
    (fake / 'smi-q.err').write_text('Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost\n',
                                    encoding='utf-8')
    (fake / 'journalctl.out').write_text('kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1\n', encoding='utf-8')
    code, result, _err = run(capsys, 'evidence', '--out', str(tmp_path / 'e'), '--reason', 'x', '--dcgmi', '/nonexistent',
                             '--sysfs-root', str(tmp_path))
    assert code == 0 and result['ok']
    statuses = {item['name']: item['status'] for item in result['checks']}
    assert statuses['nvidia-smi-q.xml'] == 'warn' and statuses['dcgm-diag-r1.json'] == 'skip'
    with tarfile.open(result['bundle']) as archive:
        names = [member.name.split('/', 1)[1] for member in archive.getmembers()]
    assert 'nvidia-smi-q.xml.stderr' in names
    assert any(call.startswith('journalctl -k -b -o short --no-pager') for call in calls(fake))


def test_evidence_needs_an_absolute_directory(fake, capsys):
    code, result, _err = run(capsys, 'evidence', '--out', 'relative', '--reason', 'x')
    assert code == 2 and 'absolute' in result['checks'][0]['detail']


# --- the report in AdminComment ----------------------------------------------------------------------------------

def test_report_goes_to_the_jobs_admin_comment(fake, capsys):
    code, result, _err = run(capsys, 'reset', '--gpu', '3', '--report', '--nodecheck-config', '/nonexistent',
                             environ={'SLURM_JOB_ID': '4242'})
    assert code == 0 and 'report_error' not in result
    [call] = [line for line in calls(fake) if line.startswith('scontrol')]
    assert call.startswith('scontrol update JobId=4242 AdminComment=llmforge-repair {')
    summary = json.loads(call.split('AdminComment=llmforge-repair ', 1)[1])
    assert summary == {'command': 'reset', 'ok': True, 'failed': [],
                       'gpus': {str(i): [f'165000000000{i}', f'GPU-{str(i) * 4}'] for i in range(4)}}


def test_report_text_is_bounded_and_readable_by_remediate():
    from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _remediate as rem
    result = {'command': 'burnin', 'ok': False, 'gpus': [{'index': i, 'serial': 'S' * 20, 'uuid': 'U' * 40} for i in range(8)],
              'checks': [{'name': f'c{i}', 'status': 'fail', 'detail': 'x|y\n' * 50} for i in range(10)]}
    text = rep.report_text(result)
    assert len(text) <= rep.MAX_REPORT and '|' not in text and '\n' not in text
    parsed = rem.parse_report(text)
    assert parsed['command'] == 'burnin' and parsed['ok'] is False and len(parsed['gpus']) == 8


def test_no_report_outside_a_job(fake, capsys):
    run(capsys, 'reset', '--gpu', '3', '--report', '--nodecheck-config', '/nonexistent')
    assert not [line for line in calls(fake) if line.startswith('scontrol')]


# --- the installed program ---------------------------------------------------------------------------------------

def test_the_installed_program_runs_from_its_code_alone(tmp_path):
    done = run_launcher('programs._repair', install('programs._repair', tmp_path / 'python'), '--help')
    assert done.returncode == 0 and done.stdout.startswith('usage: llmforge-repair ')
    text = LAUNCHER.read_text(encoding='utf-8')
    assert text.startswith('#!/usr/bin/python3 -I\n') and os.stat(LAUNCHER).st_mode & 0o111
    assert len([line for line in text.splitlines() if line and not line.startswith('#')]) <= 12


def test_evidence_reads_the_kernel_log_where_the_health_check_does(fake, capsys, tmp_path):
    kernel = tmp_path / 'kernel.log'
    kernel.write_text('[Sun Dec  6 20:00:00 2026] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, Double Bit ECC Error\n',
                      encoding='utf-8')
    nodecheck = tmp_path / 'nodecheck.json'
    nodecheck.write_text(json.dumps({'validators': {'kernel_faults': {'source': str(kernel)}}}), encoding='utf-8')
    code, result, _err = run(capsys, 'evidence', '--out', str(tmp_path / 'e'), '--reason', 'x', '--nodecheck-config',
                             str(nodecheck), '--sysfs-root', str(tmp_path))
    assert code == 0 and result['ok']
    with tarfile.open(result['bundle']) as archive:
        member = next(item for item in archive.getmembers() if item.name.endswith('/kernel-faults.log'))
        assert ': 48, ' in archive.extractfile(member).read().decode()
    assert not any(call.startswith('journalctl') for call in calls(fake))
