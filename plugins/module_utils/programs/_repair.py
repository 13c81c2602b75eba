# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-repair: the repair steps llmforge-remediate runs on a GPU node, as root, inside its Slurm jobs.

    llmforge-repair reset --gpu N              # nvidia-smi -r -i N, refused while a process uses the GPU
    llmforge-repair burnin --level 3 [--peer NODE]
    llmforge-repair evidence --out DIR --reason TEXT

Each prints one JSON result line and exits 0 (pass) or 1 (fail); 2 for unusable arguments. Standard library
only, no Ansible. Commands are resolved in the fixed system directories (SYSTEM_DIRS), never through PATH, and
every one runs with a time limit.

- reset: refuses when a compute process holds the GPU; after a successful reset it clears what the node
  remembers of that GPU's faults: the kernel-log fault state (_kernel_log.clear_faults) and the epilog's fault
  record when it names that GPU or none, so the health check does not drain the node again for the old fault.
- burnin: DCGM's diagnostic at the level given (dcgmi diag -r L, judged as the dcgm_diag module judges it), an
  NCCL all-reduce over the node's GPUs, and with --peer the same over both nodes (srun, in the two-node job), and
  perftest (ib_write_bw) per RDMA device, looped back on the node or against the peer. A test whose program is
  not installed is reported `skip` with the reason; the burn-in fails when a test that ran failed.
- evidence: a tarball `evidence-<node>-<time>.tar.gz` (mode 0600) in DIR of nvidia-smi -q -x, the GPUs' serials,
  the kernel log's fault lines (read where the health check reads them), dcgmi diag -r 1 -j, the RDMA counters and hw_counters from sysfs, dmidecode,
  the node's ledger history (--history: llmforge-remediate hands it over in the job's script) and the reason,
  with `manifest.json` (sha256 and size of each member) inside and beside it.

With --report inside a Slurm job (SLURM_JOB_ID set), a short summary goes to the job's AdminComment
(`llmforge-repair {json}`): the GPUs' serials and UUIDs and what failed, which llmforge-remediate reads with sacct
(only an administrator can set that field; a job's user cannot forge it).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import tarfile
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm_diag
from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu_topology
from ansible_collections.llmforge.cluster.plugins.module_utils import _kernel_log as kernel_log
from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_tests as nccl_tests
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils._validators import SYSTEM_DIRS, find_command

PROGRAM = 'llmforge-repair'
REPORT_PREFIX = 'llmforge-repair '
MAX_REPORT = 1000
# The epilog's fault record (llmforge-jobcheck), and the health check's expectation, whose kernel_faults validator
# names the state file of the kernel-log faults it remembers.
EPILOG_FAULT_FILE = '/run/llmforge/epilog-fault.json'
NODECHECK_CONFIG = '/etc/llmforge/nodecheck.json'
KERNEL_VALIDATOR = 'kernel_faults'
# Where the nccl role builds nccl-tests (/opt/nccl-tests/<version>/bin), looked in after SYSTEM_DIRS.
NCCL_TESTS_GLOB = '/opt/nccl-tests/*/bin'
KERNEL_FAULT_LINE = re.compile(r'NVRM: (?:Xid|.*fallen off the bus)|SXid|nvidia-nvswitch|AER:|PCIe Bus Error|'
                               r'Machine Check|mce:', re.I)
MAX_KERNEL_LINES = 5000
MAX_SYSFS_FILES = 20000
_BW_HEADER = re.compile(r'^\s*#bytes\s+(?:#sl\s+)?#iterations\s+BW peak\[([^\]]+)\]\s+BW average\[([^\]]+)\]')
_BW_ROW = re.compile(r'^\s*[0-9]+\s+(?:[0-9]+\s+)?[0-9]+\s+([0-9.]+)\s+([0-9.]+)\s')
PASS, FAIL, SKIP, WARN = 'pass', 'fail', 'skip', 'warn'


class UsageError(Exception):
    """Arguments or a node that cannot be worked on; exit 2."""


def find(command: str, extra: t.Sequence[str] = ()) -> t.Optional[str]:
    """The command's absolute path: itself when absolute, else the first executable in SYSTEM_DIRS then `extra`."""
    if os.path.isabs(command):
        return command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    return find_command(command, (*SYSTEM_DIRS, *extra))


def nccl_dirs() -> list[str]:
    return sorted(glob.glob(NCCL_TESTS_GLOB), reverse=True)


def run(argv: t.Sequence[str], timeout: float) -> proc.Completed:
    """proc.run, a command that cannot start or overruns given as rc 127 / 124 with the reason on stderr."""
    try:
        return proc.run(argv, timeout)
    except proc.CommandError as err:
        return proc.Completed(124 if err.reason == proc.TIMEOUT else 127, '', str(err))


def check(name: str, status: str, detail: str, **extra: t.Any) -> dict[str, t.Any]:
    return dict({'name': name, 'status': status, 'detail': detail}, **extra)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:200] if lines else ''


def gpu_inventory(nvidia_smi: str, timeout: float) -> list[dict[str, t.Any]]:
    """[{index, serial, uuid, bus_id, processes}] from `nvidia-smi -q -x`, read as the gpu_topology validator reads
    it (processes: the pids holding a context on the GPU)."""
    done = run([nvidia_smi, '-q', '-x'], timeout)
    if done.rc != 0:
        raise UsageError(f'nvidia-smi could not list the GPUs (exit {done.rc}): {_first_line(done.stderr or done.stdout)}')
    try:
        facts = gpu_topology.parse_smi_xml(done.stdout)
    except gpu_topology.GpuTopologyError as err:
        raise UsageError(f'nvidia-smi could not list the GPUs: {err}') from None
    return [{'index': gpu['index'], 'serial': gpu.get('serial') or '', 'uuid': gpu.get('uuid') or '',
             'bus_id': gpu.get('pci_bus_id') or '', 'processes': [str(pid) for pid in gpu.get('processes') or []]}
            for gpu in facts['gpus']]


def kernel_settings(nodecheck_config: str) -> dict[str, t.Any]:
    """The health check's kernel_faults validator settings (source, state_file); {} when unreadable."""
    try:
        with open(nodecheck_config, encoding='utf-8') as handle:
            settings = json.load(handle).get('validators', {}).get(KERNEL_VALIDATOR, {})
        return dict(settings) if isinstance(settings, dict) else {}
    except (OSError, ValueError, AttributeError):
        return {}


def kernel_state_file(given: str, nodecheck_config: str) -> str:
    """The kernel-log fault state file: `given`, else the health check's (its kernel_faults validator's state_file)."""
    return given or str(kernel_settings(nodecheck_config).get('state_file') or '')


def clear_kernel_faults(state_file: str, gpu: int) -> dict[str, t.Any]:
    """Forget the kernel-log faults of this GPU in the health check's state (_kernel_log.clear_faults)."""
    if not state_file:
        return check('clear kernel faults', SKIP, 'the health check keeps no kernel-log fault state')
    try:
        forgotten = kernel_log.clear_faults(state_file, [gpu])
    except Exception as err:  # pylint: disable=broad-except  # the reset itself succeeded: say so, and why not this
        return check('clear kernel faults', FAIL, f'{state_file}: {type(err).__name__}: {err}')
    return check('clear kernel faults', PASS, f'{forgotten} fault(s) of GPU{gpu} forgotten in {state_file}')


def clear_epilog_fault(path: str, gpu: int) -> dict[str, t.Any]:
    """Remove the epilog's fault record when it names this GPU (`epilog GPU2 ...`) or no GPU."""
    try:
        with open(path, encoding='utf-8') as handle:
            record = json.load(handle)
        reason = str(record.get('reason') or '') if isinstance(record, dict) else ''
    except FileNotFoundError:
        return check('clear epilog fault', SKIP, 'no epilog fault recorded')
    except (OSError, ValueError) as err:
        reason = f'unreadable ({type(err).__name__})'
    named = re.findall(r'\bGPU([0-9]{1,3})\b', reason)
    if named and str(gpu) not in named:
        return check('clear epilog fault', SKIP, f'the epilog fault names another GPU: {reason[:120]}')
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        return check('clear epilog fault', FAIL, f'{path}: {err}')
    return check('clear epilog fault', PASS, f'removed {path} ({reason[:120]})')


def reset(args: argparse.Namespace) -> dict[str, t.Any]:
    result: dict[str, t.Any] = {'command': 'reset', 'gpu': args.gpu, 'checks': []}
    nvidia_smi = find(args.nvidia_smi)
    if nvidia_smi is None:
        raise UsageError(f'{args.nvidia_smi} not found in {", ".join(SYSTEM_DIRS)}')
    gpus = gpu_inventory(nvidia_smi, args.timeout)
    result['gpus'] = gpus
    target = next((gpu for gpu in gpus if gpu['index'] == args.gpu), None)
    if target is None:
        raise UsageError(f'GPU {args.gpu} is not among the GPUs nvidia-smi lists ({len(gpus)})')
    pids = target['processes']
    if pids:
        result['checks'].append(check('reset', FAIL, f'refused: process(es) {", ".join(pids)} use GPU{args.gpu}'))
        return result
    started = time.monotonic()
    done = run([nvidia_smi, '-r', '-i', str(args.gpu)], args.timeout)
    elapsed = round(time.monotonic() - started, 3)
    if done.rc != 0:
        detail = _first_line(done.stderr) or _first_line(done.stdout) or f'exit {done.rc}'
        result['checks'].append(check('reset', FAIL, f'nvidia-smi -r -i {args.gpu} failed: {detail}', seconds=elapsed))
        return result
    result['checks'].append(check('reset', PASS, f'GPU{args.gpu} reset ({target["serial"]})', seconds=elapsed))
    result['checks'].append(clear_kernel_faults(kernel_state_file(args.kernel_state, args.nodecheck_config), args.gpu))
    result['checks'].append(clear_epilog_fault(args.epilog_fault, args.gpu))
    return result


# --- burn-in ----------------------------------------------------------------------------------------------------

def dcgm_check(args: argparse.Namespace) -> dict[str, t.Any]:
    dcgmi = find(args.dcgmi)
    if dcgmi is None:
        return check('dcgm', SKIP, f'dcgmi not found (DCGM not installed): no diagnostic at level {args.level}')
    try:
        result = dcgm_diag.run_diag(dcgmi, args.level, args.dcgm_timeout)
    except dcgm_diag.DcgmDiagError as err:
        return check('dcgm', FAIL, f'dcgmi diag -r {args.level}: {err}')
    detail = result.reason.split(f'dcgm L{args.level} ', 1)[-1]
    return check('dcgm', PASS if result.healthy else FAIL, f'L{args.level} {detail}',
                 gpus=[f'GPU{gpu}' for gpu in result.failing_gpus])


def nccl_binary(args: argparse.Namespace) -> t.Optional[str]:
    return find(args.nccl_test, nccl_dirs())


def nccl_check(name: str, argv: t.Sequence[str], args: argparse.Namespace) -> dict[str, t.Any]:
    try:
        judged = nccl_tests.run_and_judge(argv, args.test_timeout, args.min_busbw)
    except nccl_tests.NcclTestsError as err:
        return check(name, FAIL, str(err)[:300])
    failing = [f"{item['name']}: {item['message']}" for item in judged['checks'] if item['status'] == 'fail']
    busbw = judged.get('plateau_busbw_gbps')
    detail = '; '.join(failing) if failing else f'plateau busbw {busbw} GB/s'
    return check(name, FAIL if failing else PASS, detail[:300], busbw_gbps=busbw)


def rdma_devices(sysfs_root: str) -> list[str]:
    directory = os.path.join(sysfs_root, 'class', 'infiniband')
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def perftest_bandwidth(text: str) -> t.Optional[float]:
    """The average bandwidth (Gb/s) of an `ib_write_bw --report_gbits` client's result row; None without one."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        header = _BW_HEADER.match(line)
        if header:
            for row in lines[index + 1:]:
                match = _BW_ROW.match(row)
                if match:
                    value = float(match.group(2))
                    return value if header.group(2) == 'Gb/sec' else value * 8 * 1048576 / 1e9
    return None


def perftest_check(device: str, args: argparse.Namespace, binary: str, port: int) -> dict[str, t.Any]:
    """One rail: ib_write_bw on `device`, server on the peer (srun) or on this node, client here."""
    name = f'perftest {device}'
    common = ['-d', device, '-p', str(port), '-D', str(args.perftest_seconds), '--report_gbits']
    if args.peer:
        srun = find('srun')
        if srun is None:
            return check(name, SKIP, 'srun not found: no test against the peer')
        server_argv = [srun, '--overlap', '-N1', '-n1', '-w', args.peer, binary, *common]
        target = args.peer
    else:
        server_argv = [binary, *common]
        target = 'localhost'
    try:
        server = subprocess.Popen(server_argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True)
    except OSError as err:
        return check(name, FAIL, f'the server cannot start: {err}')
    try:
        time.sleep(args.perftest_wait)
        done = run([binary, *common, target], args.test_timeout)
    finally:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(server.pid, 9)
            except OSError:
                pass
            server.wait(timeout=5)
    bandwidth = perftest_bandwidth(done.stdout)
    if done.rc != 0 or bandwidth is None:
        detail = _first_line(done.stderr) or _first_line(done.stdout) or f'exit {done.rc}'
        return check(name, FAIL, f'ib_write_bw to {target} failed: {detail}')
    if args.min_rail_gbps is not None and bandwidth < args.min_rail_gbps:
        return check(name, FAIL, f'{bandwidth:g} Gb/s to {target}, expected at least {args.min_rail_gbps:g}',
                     gbps=bandwidth)
    return check(name, PASS, f'{bandwidth:g} Gb/s to {target}', gbps=bandwidth)


def burnin(args: argparse.Namespace) -> dict[str, t.Any]:
    result: dict[str, t.Any] = {'command': 'burnin', 'level': args.level, 'peer': args.peer or None, 'checks': []}
    nvidia_smi = find(args.nvidia_smi)
    gpus: list[dict[str, t.Any]] = []
    if nvidia_smi is None:
        result['checks'].append(check('gpus', FAIL, f'{args.nvidia_smi} not found: the GPUs cannot be listed'))
    else:
        try:
            gpus = gpu_inventory(nvidia_smi, args.timeout)
            result['checks'].append(check('gpus', PASS if gpus else FAIL, f'{len(gpus)} GPU(s) listed'))
        except UsageError as err:
            result['checks'].append(check('gpus', FAIL, str(err)))
    result['gpus'] = gpus
    result['checks'].append(dcgm_check(args))
    binary = nccl_binary(args)
    if binary is None:
        result['checks'].append(check('nccl', SKIP, f'{args.nccl_test} not found (nccl-tests not built here)'))
    elif not gpus:
        result['checks'].append(check('nccl', SKIP, 'no GPU listed'))
    else:
        argv = [binary, '-b', '8M', '-e', args.nccl_max_bytes, '-f', '2', '-g', str(len(gpus))]
        result['checks'].append(nccl_check('nccl', argv, args))
        if args.peer:
            srun = find('srun')
            if srun is None:
                result['checks'].append(check('nccl pair', SKIP, 'srun not found: no test with the peer'))
            else:
                here = socket.gethostname().split('.')[0]
                pair = [srun, '--overlap', '-N2', '--ntasks-per-node=1', f'--nodelist={here},{args.peer}',
                        binary, '-b', '8M', '-e', args.nccl_max_bytes, '-f', '2', '-g', str(len(gpus))]
                result['checks'].append(nccl_check('nccl pair', pair, args))
    ib_write_bw = find(args.perftest)
    devices = rdma_devices(args.sysfs_root)
    if ib_write_bw is None:
        result['checks'].append(check('perftest', SKIP, f'{args.perftest} not found (perftest not installed)'))
    elif not devices:
        result['checks'].append(check('perftest', SKIP, 'no RDMA device in sysfs'))
    else:
        for number, device in enumerate(devices):
            result['checks'].append(perftest_check(device, args, ib_write_bw, args.perftest_port + number))
    return result


# --- evidence ---------------------------------------------------------------------------------------------------

def kernel_fault_lines(args: argparse.Namespace) -> tuple[str, str]:
    """(the fault lines of the kernel log since boot, where they came from): --kernel-log, else where the health
    check reads it (its kernel_faults `source`: a file, or the journal)."""
    source = args.kernel_log or str(kernel_settings(args.nodecheck_config).get('source') or 'journal')
    if source != 'journal':
        try:
            with open(source, encoding='utf-8', errors='replace') as handle:
                text = handle.read(64 * 1024 * 1024)
        except OSError as err:
            return '', f'{source}: {err}'
    else:
        journalctl = find('journalctl')
        if journalctl is None:
            return '', 'journalctl not found'
        done = run([journalctl, '-k', '-b', '-o', 'short', '--no-pager'], args.timeout)
        text, source = done.stdout, f'journalctl -k -b (exit {done.rc})'
    lines = [line for line in text.splitlines() if KERNEL_FAULT_LINE.search(line)]
    return '\n'.join(lines[-MAX_KERNEL_LINES:]) + ('\n' if lines else ''), source


def rdma_counters(sysfs_root: str) -> dict[str, t.Any]:
    """{device: {port: {counters: {...}, hw_counters: {...}}}} read from sysfs."""
    found: dict[str, t.Any] = {}
    base = os.path.join(sysfs_root, 'class', 'infiniband')
    read = 0
    for device in rdma_devices(sysfs_root):
        ports_dir = os.path.join(base, device, 'ports')
        try:
            ports = sorted(os.listdir(ports_dir))
        except OSError:
            continue
        for port in ports:
            for group in ('counters', 'hw_counters'):
                directory = os.path.join(ports_dir, port, group)
                try:
                    names = sorted(os.listdir(directory))
                except OSError:
                    continue
                values = found.setdefault(device, {}).setdefault(port, {}).setdefault(group, {})
                for name in names:
                    read += 1
                    if read > MAX_SYSFS_FILES:
                        return found
                    try:
                        with open(os.path.join(directory, name), encoding='ascii', errors='replace') as handle:
                            text = handle.read(64).strip()
                    except OSError:
                        continue
                    values[name] = int(text) if text.isascii() and text.isdigit() else text
    return found


# The most of the ledger history an evidence bundle keeps.
MAX_HISTORY_BYTES = 1 << 20


def read_history(source: str) -> bytes:
    """The node's ledger history as llmforge-remediate hands it over (JSON lines; `-`: standard input)."""
    if source == '-':
        return sys.stdin.buffer.read(MAX_HISTORY_BYTES)
    with open(source, 'rb') as handle:
        return handle.read(MAX_HISTORY_BYTES)


def evidence(args: argparse.Namespace) -> dict[str, t.Any]:
    node = socket.gethostname().split('.')[0]
    stamp = time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())
    name = f'evidence-{node}-{stamp}'
    members: dict[str, bytes] = {}
    ran: list[dict[str, t.Any]] = []

    def capture(member: str, command: str, argv_tail: t.Sequence[str], extra: t.Sequence[str] = ()) -> None:
        path = find(command, extra)
        if path is None:
            ran.append({'member': member, 'status': SKIP, 'detail': f'{command} not found'})
            return
        started = time.monotonic()
        done = run([path, *argv_tail], args.timeout)
        members[member] = done.stdout.encode('utf-8', 'replace')
        if done.stderr.strip():
            members[member + '.stderr'] = done.stderr.encode('utf-8', 'replace')
        ran.append({'member': member, 'command': ' '.join([command, *argv_tail]), 'rc': done.rc,
                    'seconds': round(time.monotonic() - started, 3), 'status': PASS if done.rc == 0 else FAIL})

    members['reason.txt'] = (args.reason + '\n').encode('utf-8', 'replace')
    capture('nvidia-smi-q.xml', args.nvidia_smi, ['-q', '-x'])
    capture('gpu-serials.csv', args.nvidia_smi, ['--query-gpu=index,serial,uuid,pci.bus_id,vbios_version',
                                                 '--format=csv'])
    text, source = kernel_fault_lines(args)
    members['kernel-faults.log'] = text.encode('utf-8', 'replace')
    ran.append({'member': 'kernel-faults.log', 'source': source, 'status': PASS,
                'lines': text.count('\n')})
    capture('dcgm-diag-r1.json', args.dcgmi, ['diag', '-r', '1', '-j'])
    members['rdma-counters.json'] = json.dumps(rdma_counters(args.sysfs_root), indent=1, sort_keys=True).encode()
    ib_dir = os.path.join(args.sysfs_root, 'class', 'infiniband')
    ran.append({'member': 'rdma-counters.json', 'status': PASS, 'source': ib_dir})
    capture('dmidecode.txt', 'dmidecode', [])
    if args.history:
        members['ledger-history.jsonl'] = read_history(args.history)
        ran.append({'member': 'ledger-history.jsonl', 'status': PASS, 'source': args.history,
                    'lines': members['ledger-history.jsonl'].count(b'\n')})
    members['commands.json'] = json.dumps(ran, indent=1, sort_keys=True).encode()
    manifest = {'node': node, 'created': stamp, 'reason': args.reason, 'members': {
        member: {'sha256': hashlib.sha256(data).hexdigest(), 'size': len(data)} for member, data in sorted(members.items())}}
    manifest_bytes = (json.dumps(manifest, indent=1, sort_keys=True) + '\n').encode()
    members['manifest.json'] = manifest_bytes
    os.makedirs(args.out, mode=0o700, exist_ok=True)
    tarball = os.path.join(args.out, f'{name}.tar.gz')
    packed = io.BytesIO()  # the members are in memory already (each capture bounded)
    with tarfile.open(fileobj=packed, mode='w:gz') as archive:
        for member, data in sorted(members.items()):
            info = tarfile.TarInfo(f'{name}/{member}')
            info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
            archive.addfile(info, io.BytesIO(data))
    files.write_atomic(tarball, packed.getvalue(), mode=0o600)
    manifest_path = os.path.join(args.out, f'{name}.manifest.json')
    files.write_atomic(manifest_path, manifest_bytes, mode=0o600)
    digest = hashlib.sha256(packed.getvalue()).hexdigest()
    # A command that failed on a broken node is evidence too (its output and stderr are in the bundle): warn.
    checks = [check(item['member'], WARN if item['status'] == FAIL else item['status'],
                    item.get('detail') or item.get('command') or item.get('source', '')) for item in ran]
    checks.append(check('bundle', PASS, f'{tarball} ({len(members)} members)'))
    return {'command': 'evidence', 'bundle': tarball, 'sha256': digest, 'manifest': manifest_path,
            'reason': args.reason, 'checks': checks}


# --- the program ------------------------------------------------------------------------------------------------

def report_text(result: t.Mapping[str, t.Any]) -> str:
    """The AdminComment summary: command, verdict, the GPUs' serials and UUIDs, what failed (at most MAX_REPORT)."""
    gpus = {str(gpu['index']): [gpu['serial'], gpu['uuid']] for gpu in result.get('gpus') or []}
    failed = [f"{item['name']}: {item['detail']}"[:120] for item in result['checks'] if item['status'] == FAIL]
    summary = {'command': result['command'], 'ok': result['ok'], 'gpus': gpus, 'failed': failed[:4]}
    if result.get('sha256'):
        summary['bundle'] = os.path.basename(result['bundle'])
    text = REPORT_PREFIX + json.dumps(summary, sort_keys=True, separators=(',', ':'))
    while len(text) > MAX_REPORT and summary['failed']:
        summary['failed'].pop()
        text = REPORT_PREFIX + json.dumps(summary, sort_keys=True, separators=(',', ':'))
    if len(text) > MAX_REPORT:
        summary['gpus'] = {}
        text = REPORT_PREFIX + json.dumps(summary, sort_keys=True, separators=(',', ':'))
    return re.sub(r'[\x00-\x1f|]', ' ', text)


def report(result: t.Mapping[str, t.Any], timeout: float, environ: t.Mapping[str, str]) -> t.Optional[str]:
    """Set the job's AdminComment to the summary; an error text when that failed, None when done or no job."""
    job = environ.get('SLURM_JOB_ID', '')
    if not (job.isascii() and job.isdigit()):
        return None
    scontrol = find('scontrol')
    if scontrol is None:
        return 'scontrol not found: no report'
    done = run([scontrol, 'update', f'JobId={job}', f'AdminComment={report_text(result)}'], timeout)
    return None if done.rc == 0 else f'AdminComment not set: {_first_line(done.stderr or done.stdout)}'


def positive(text: str) -> float:
    try:
        value = float(text) if text.isascii() else 0.0
    except ValueError:
        value = 0.0
    if not 0 < value < 1e7:
        raise argparse.ArgumentTypeError(f'{text!r} is not a positive number')
    return value


def gpu_index(text: str) -> int:
    if not (text.isascii() and text.isdigit() and int(text) < 4096):
        raise argparse.ArgumentTypeError(f'{text!r} is not a GPU index')
    return int(text)


def node_name(text: str) -> str:
    if not re.fullmatch(r'[A-Za-z0-9][A-Za-z0-9._-]{0,254}', text):
        raise argparse.ArgumentTypeError(f'{text!r} is not a node name')
    return text


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split('\n\n', maxsplit=1)[0])
    commands = top.add_subparsers(dest='command', required=True)

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument('--nvidia-smi', default='nvidia-smi', help='nvidia-smi (a name in the system directories or a path)')
        sub.add_argument('--dcgmi', default='dcgmi', help='dcgmi')
        sub.add_argument('--timeout', type=positive, default=120.0, help='time limit of each plain command (s)')
        sub.add_argument('--sysfs-root', default='/sys', help='where sysfs is mounted')
        sub.add_argument('--report', action='store_true', help="in a Slurm job: summary to the job's AdminComment")

    sub = commands.add_parser('reset', help='reset one GPU')
    common(sub)
    sub.add_argument('--gpu', type=gpu_index, required=True, help='the GPU index (nvidia-smi -i)')
    sub.add_argument('--kernel-state', default='', help="kernel-log fault state file (default: the health check's)")
    sub.add_argument('--nodecheck-config', default=NODECHECK_CONFIG, help="the health check's expectation")
    sub.add_argument('--epilog-fault', default=EPILOG_FAULT_FILE, help="the epilog's fault record")
    sub = commands.add_parser('burnin', help='burn-in tests')
    common(sub)
    sub.add_argument('--level', type=int, choices=(1, 2, 3, 4), default=3, help='dcgmi diag level')
    sub.add_argument('--peer', type=node_name, help='a second node of the job for the pair tests')
    sub.add_argument('--dcgm-timeout', type=positive, default=None, help='time limit of the diagnostic (default per level)')
    sub.add_argument('--nccl-test', default='all_reduce_perf', help='the nccl-tests binary')
    sub.add_argument('--nccl-max-bytes', default='1G', help='largest message of the NCCL test')
    sub.add_argument('--min-busbw', type=positive, default=None, help='least NCCL plateau busbw, GB/s')
    sub.add_argument('--perftest', default='ib_write_bw', help='the perftest binary')
    sub.add_argument('--perftest-port', type=int, default=18515, help='first TCP port of the perftest servers')
    sub.add_argument('--perftest-seconds', type=int, default=5, help='duration of each perftest run')
    sub.add_argument('--perftest-wait', type=positive, default=2.0, help='seconds for a server to start')
    sub.add_argument('--min-rail-gbps', type=positive, default=None, help='least ib_write_bw average per rail, Gb/s')
    sub.add_argument('--test-timeout', type=positive, default=900.0, help='time limit of each NCCL or perftest run')
    sub = commands.add_parser('evidence', help='write an evidence bundle')
    common(sub)
    sub.add_argument('--out', required=True, help='directory of the bundle')
    sub.add_argument('--reason', required=True, help='why (the RMA reason)')
    sub.add_argument('--kernel-log', default='', help="a kernel log file (default: where the health check reads it)")
    sub.add_argument('--nodecheck-config', default=NODECHECK_CONFIG, help="the health check's expectation")
    sub.add_argument('--history', default='', help="the node's ledger history, JSON lines (-: standard input)")
    return top


def main(argv: t.Optional[t.Sequence[str]] = None, environ: t.Optional[t.Mapping[str, str]] = None) -> int:
    args = parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors='backslashreplace')  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    started = time.monotonic()
    try:
        if args.command == 'evidence' and not os.path.isabs(args.out):
            raise UsageError(f'--out must be an absolute path, got {args.out!r}')
        result = {'reset': reset, 'burnin': burnin, 'evidence': evidence}[args.command](args)
    except UsageError as err:
        result = {'command': args.command, 'checks': [check(args.command, FAIL, str(err))], 'usage_error': True}
    except OSError as err:
        result = {'command': args.command, 'checks': [check(args.command, FAIL, f'{type(err).__name__}: {err}')]}
    result['ok'] = not any(item['status'] == FAIL for item in result['checks'])
    result['node'] = socket.gethostname().split('.')[0]
    result['seconds'] = round(time.monotonic() - started, 3)
    for item in result['checks']:
        if item['status'] == SKIP:
            sys.stderr.write(f"{PROGRAM}: skip {item['name']}: {item['detail']}\n")
    if args.report:
        problem = report(result, args.timeout, environ)
        if problem:
            result['report_error'] = problem
    sys.stdout.write(json.dumps(result, sort_keys=True, default=str) + '\n')
    if result.get('usage_error'):
        return 2
    return 0 if result['ok'] else 1
