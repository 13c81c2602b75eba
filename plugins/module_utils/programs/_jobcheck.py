# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-jobcheck: what a GPU node checks when a job starts (prolog) and ends (epilog).

    llmforge-jobcheck prolog     # slurmd's Prolog (prolog.d): remember when the job began and its GPUs' ECC counts
    llmforge-jobcheck epilog     # slurmd's Epilog (epilog.d): was the node left healthy by the job?

Run by slurmd as root with the job's SLURM_JOB_ID and SLURM_JOB_GPUS in the environment. Standard library only, no
Ansible; the node's health check expectation (/etc/llmforge/nodecheck.json, written by slurm_node) says where
nvidia-smi is and where the kernel log is read from.

The prolog never fails a job: whatever it cannot read, it records less, and it exits 0 within its bound.

The epilog is bounded (EPILOG_SECONDS, 3 s in all: its readings run at once, each with its own limit) and calls
nothing that waits on slurmctld. It looks at the job's GPUs:

- processes still holding a context on them (the job's own were killed before the epilog runs);
- GPU memory still in use beyond `memory_used_mib_max`;
- uncorrectable ECC errors counted since the prolog;
- kernel-log faults (Xid, SXid, a GPU fallen off the bus, PCIe AER) since the job began, as the kernel_faults
  validator finds them, except those for which the health check has drained the node since the job began (its
  state file says so): the job's own node check after a failed srun drains with the precise reason, which Slurm's
  "Epilog error" would replace;

and `nvidia-smi` not answering within its limit counts as a failure too. On a failure it writes the fault record
FAULT_FILE (in /run: a reboot clears it, as it clears the fault) and exits 1, so that Slurm drains the node at once
("Epilog error"); llmforge-nodecheck, at its next run, reads the record as its failing `epilog` check and replaces
Slurm's generic reason with the precise one (`llmforge: epilog GPU2 leftover processes 4711`). The record stays until
the node reboots or a GPU reset repairs it (`llmforge-repair reset` removes it), so the health check does not resume
the node in between.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu_topology
from ansible_collections.llmforge.cluster.plugins.module_utils import _kernel_log as kernel_log
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, PASS, check
from ansible_collections.llmforge.cluster.plugins.module_utils._validators import Task, find_command, unexpected

NODECHECK_CONFIG = '/etc/llmforge/nodecheck.json'
RECORDS_DIR = '/run/llmforge/jobs'
FAULT_FILE = '/run/llmforge/epilog-fault.json'
EPILOG_SECONDS = 3.0
PROLOG_SECONDS = 2.0
# An idle GPU's used framebuffer is a few MiB; more after the job ended means memory it did not release.
MEMORY_USED_MIB_MAX = 1024


def _command(name: str) -> str:
    return find_command(name) or name


def job_gpus(environ: t.Mapping[str, str]) -> list[int]:
    """The job's GPU indexes on this node from SLURM_JOB_GPUS (slurmd sets it in the prolog and epilog): `0,3`."""
    text = environ.get('SLURM_JOB_GPUS', '') or ''
    found = []
    for word in text.split(','):
        word = word.strip()
        if word.isascii() and word.isdigit():
            found.append(int(word))
    return sorted(set(found))


def job_id(environ: t.Mapping[str, str]) -> str:
    value = environ.get('SLURM_JOB_ID', '') or ''
    return value if value.isascii() and value.isdigit() else ''


def _settings(config_path: str) -> dict[str, t.Any]:
    """nvidia-smi and the kernel-log settings from the health check's expectation; defaults when it is unreadable."""
    settings: dict[str, t.Any] = {'nvidia_smi': 'nvidia-smi', 'kernel_faults': {}, 'state_file': ''}
    try:
        with open(config_path, encoding='utf-8') as handle:
            data = json.load(handle)
        validators = data.get('validators') or {}
        settings['nvidia_smi'] = (validators.get('gpu_topology') or {}).get('nvidia_smi') or 'nvidia-smi'
        settings['kernel_faults'] = dict(validators.get('kernel_faults') or {})
        settings['state_file'] = str(data.get('state_file') or '')
    except (OSError, ValueError, AttributeError):
        pass
    return settings


def _smi_facts(nvidia_smi: str, timeout: float) -> dict[str, t.Any]:
    done = proc.run([_command(nvidia_smi), '-q', '-x'], timeout)
    if done.rc != 0:
        raise gpu_topology.GpuTopologyError(f'nvidia-smi -q -x exited with {done.rc}')
    return gpu_topology.parse_smi_xml(done.stdout)


def _ecc_counts(nvidia_smi: str) -> tuple[dict[str, int], str]:
    """{GPU index: uncorrectable ECC errors} within PROLOG_SECONDS, and what went wrong ('' when nothing)."""
    task = Task(lambda: _smi_facts(nvidia_smi, PROLOG_SECONDS))
    try:
        facts = task.result(time.monotonic() + PROLOG_SECONDS + 0.5)
    except TimeoutError:
        return {}, f'nvidia-smi did not answer within {PROLOG_SECONDS:g} s'
    except Exception as err:  # pylint: disable=broad-except  # the prolog never fails a job
        return {}, f'nvidia-smi: {unexpected(err)}'
    return {str(gpu['index']): gpu['ecc_uncorrected_volatile'] for gpu in facts['gpus']
            if gpu['ecc_uncorrected_volatile'] is not None}, ''


def _record_path(job: str, records_dir: str) -> str:
    return os.path.join(records_dir, f'{job}.json')


def prolog(environ: t.Mapping[str, str], config_path: str = NODECHECK_CONFIG, records_dir: str = RECORDS_DIR,
           now: t.Optional[float] = None) -> dict[str, t.Any]:
    """The job's start record (written 0600 root): start time, GPUs and their uncorrectable ECC counts."""
    job = job_id(environ)
    record: dict[str, t.Any] = {'job_id': job, 'start': time.time() if now is None else now, 'gpus': job_gpus(environ),
                                'ecc': {}, 'errors': []}
    if not job:
        record['errors'].append('SLURM_JOB_ID is not set')
        return record
    settings = _settings(config_path)
    if record['gpus']:  # a job without GPUs has nothing of theirs to compare after it
        record['ecc'], error = _ecc_counts(settings['nvidia_smi'])
        if error:
            record['errors'].append(error)
    try:
        os.makedirs(records_dir, mode=0o700, exist_ok=True)
        files.write_atomic(_record_path(job, records_dir), json.dumps(record, sort_keys=True) + '\n', mode=0o600)
    except OSError as err:
        record['errors'].append(f'cannot write the record: {err}')
    return record


def _read_record(job: str, records_dir: str) -> t.Optional[dict[str, t.Any]]:
    path = _record_path(job, records_dir)
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def judge_gpus(facts: t.Mapping[str, t.Any], gpus: t.Sequence[int], ecc_before: t.Mapping[str, t.Any],
               memory_max: int = MEMORY_USED_MIB_MAX) -> list[dict[str, t.Any]]:
    """The epilog's checks of the job's GPUs (none for a job without GPUs: others may be another job's)."""
    checks = []
    chosen = set(gpus)
    for gpu in facts.get('gpus') or []:
        index = gpu['index']
        if index not in chosen:
            continue
        subject = f'GPU{index}'
        pids = gpu.get('processes') or []
        if pids:
            checks.append(check('epilog', FAIL, subject, 'no process', f"leftover processes {' '.join(map(str, pids))}",
                                f'{subject}: processes still hold it after the job ended: {pids}'))
        used = gpu.get('memory_used_mib')
        if used is not None and used > memory_max:
            checks.append(check('epilog', FAIL, subject, f'<= {memory_max} MiB used', f'memory not released {used} MiB',
                                f'{subject}: {used} MiB of GPU memory still in use after the job ended'))
        before = ecc_before.get(str(index))
        after = gpu.get('ecc_uncorrected_volatile')
        if isinstance(before, int) and isinstance(after, int) and after > before:
            checks.append(check('epilog', FAIL, subject, f'ecc {before}', f'ecc uncorrectable +{after - before}',
                                f'{subject}: {after - before} uncorrectable ECC error(s) during the job'))
    return checks


def drained_already(state_file: str, since: t.Any) -> set[tuple[str, str, str]]:
    """The failing checks (name, subject, actual) for which the health check, in a run that finished after the job
    began (the job's own node check after a failed srun, or a run the socket asked for), drained the node with its
    precise reason. The epilog does not fail the node again for them: Slurm's "Epilog error" would replace that
    reason."""
    try:
        with open(state_file, encoding='utf-8') as handle:
            data = json.load(handle)
        slurm = data.get('slurm') or {}
        if data.get('healthy') is not False or slurm.get('action') != 'drain' or not slurm.get('done'):
            return set()
        if not isinstance(since, (int, float)) or float(data.get('finished_at') or 0) < since:
            return set()
        return {(str(item.get('name')), str(item.get('subject')), str(item.get('actual')))
                for item in data.get('checks') or [] if isinstance(item, dict) and item.get('status') == FAIL}
    except (OSError, ValueError, AttributeError, TypeError):
        return set()


def _hung(limit: float) -> dict[str, t.Any]:
    return check('epilog', FAIL, 'nvidia-smi', f'<= {limit:g}s', 'nvidia-smi hung',
                 f'nvidia-smi did not answer within {limit:g} s after the job')


def epilog(environ: t.Mapping[str, str], config_path: str = NODECHECK_CONFIG, records_dir: str = RECORDS_DIR,
           fault_file: str = FAULT_FILE, budget: float = EPILOG_SECONDS) -> dict[str, t.Any]:
    """The epilog's verdict: {healthy, reason, checks, job_id}; a failure is written to `fault_file`."""
    started = time.monotonic()
    job = job_id(environ)
    record = _read_record(job, records_dir) if job else None
    gpus = job_gpus(environ) or list((record or {}).get('gpus') or [])
    ecc_before = (record or {}).get('ecc') or {}
    since = (record or {}).get('start')
    settings = _settings(config_path)
    limit = max(0.5, budget - 0.5)
    smi = Task(lambda: _smi_facts(settings['nvidia_smi'], limit)) if gpus else None
    kernel_settings = dict(settings['kernel_faults'], state_file='', since=since if isinstance(since, (int, float)) else None)
    kernel = Task(lambda: kernel_log.read_faults(kernel_settings, limit)) if settings['kernel_faults'] else None
    checks: list[dict[str, t.Any]] = []
    deadline = started + budget - 0.2
    try:
        if smi is not None:
            checks.extend(judge_gpus(smi.result(deadline), gpus, ecc_before))
    except TimeoutError:
        checks.append(_hung(limit))
    except Exception as err:  # pylint: disable=broad-except  # a driver that no longer answers is a fault
        if isinstance(err, proc.CommandError) and err.reason == proc.TIMEOUT:
            checks.append(_hung(limit))
        else:
            checks.append(check('epilog', FAIL, 'nvidia-smi', 'answers', 'nvidia-smi failed',
                                f'nvidia-smi after the job: {unexpected(err)}'))
    if kernel is not None:
        try:
            found = kernel.result(deadline)
            reported = drained_already(settings['state_file'], since) if settings['state_file'] else set()
            checks.extend(item for item in found['checks'] if item['status'] == FAIL
                          and (str(item['name']), str(item['subject']), str(item['actual'])) not in reported)
        except TimeoutError:
            pass  # a slow journal is not the GPUs' fault; the health check reads it again at its next run
        except Exception:  # pylint: disable=broad-except
            pass
    failing = [item for item in checks if item['status'] == FAIL]
    result = {'job_id': job, 'healthy': not failing, 'checks': failing or [check('epilog', PASS, 'node', None, 'clean', 'clean')],
              'reason': '', 'duration_seconds': round(time.monotonic() - started, 3)}
    if failing:
        first = failing[0]
        reason = f"{first['name']} {first['subject']} {first['actual']}"
        result['reason'] = reason if first['name'] == 'epilog' else f'epilog {reason}'
        record_fault(fault_file, job, failing, result['reason'])
    if job:
        try:
            os.unlink(_record_path(job, records_dir))
        except OSError:
            pass
    return result


def record_fault(fault_file: str, job: str, failing: list[dict[str, t.Any]], reason: str) -> None:
    data = {'job_id': job, 'time': time.time(), 'reason': reason, 'checks': failing}
    try:
        os.makedirs(os.path.dirname(fault_file), mode=0o755, exist_ok=True)
        files.write_atomic(fault_file, json.dumps(data, sort_keys=True, default=str) + '\n', mode=0o644)
    except OSError:
        pass


def fault_check(fault_file: str = FAULT_FILE) -> dict[str, t.Any]:
    """The health check's `epilog` check: failing while a fault record is there, passing otherwise."""
    try:
        with open(fault_file, encoding='utf-8') as handle:
            data = json.load(handle)
        reason = str(data.get('reason') or 'epilog node failed')
    except FileNotFoundError:
        return check('epilog', PASS, 'node', 'clean', 'clean', 'no epilog fault recorded')
    except (OSError, ValueError, AttributeError) as err:
        reason = f'epilog node unreadable record {type(err).__name__}'
    words = reason.split(' ', 2)
    subject = words[1] if len(words) > 1 else 'node'
    actual = words[2] if len(words) > 2 else 'failed'
    return check('epilog', FAIL, subject, 'clean', actual, f'the epilog found the node unhealthy after a job: {reason}')


def clear_fault(fault_file: str = FAULT_FILE) -> bool:
    """Remove the epilog's fault record (after a repair); True when there was one."""
    try:
        os.unlink(fault_file)
        return True
    except FileNotFoundError:
        return False


def main(argv: t.Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog='llmforge-jobcheck', description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('mode', choices=('prolog', 'epilog'))
    parser.add_argument('--config', default=NODECHECK_CONFIG, help=f'the health check expectation (default {NODECHECK_CONFIG})')
    args = parser.parse_args(argv)
    if args.mode == 'prolog':
        record = prolog(os.environ, args.config)
        for error in record['errors']:
            sys.stderr.write(f'llmforge-jobcheck prolog: {error}\n')
        return 0
    result = epilog(os.environ, args.config)
    if result['healthy']:
        return 0
    sys.stderr.write(f"llmforge-jobcheck epilog: job {result['job_id'] or '?'}: {result['reason']} "
                     f"(node drained by Slurm; {len(result['checks'])} failing check(s) in {FAULT_FILE})\n")
    return 1
