# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-nodecheck: the Slurm HealthCheckProgram of a GPU node.

Runs the same checks as the gpu_topology and rdma_links modules (this collection's module_utils code, installed
on the node by the slurm_node role) against the node's expectation file, then drains the node in Slurm with the
same reason validate.yml uses, or resumes it when it drained it and the node is healthy again (see
_slurm_drain.py). Standard library only, no Ansible.

Every command and every validator runs in its own daemon thread with a deadline, so a hung nvidia-smi or a stuck
sysfs read cannot hold the program past Slurm's 60 s limit: the check is reported as `timeout <what>` instead.

Exit status: 0 when the check ran and Slurm was handled, healthy or not (slurmd re-runs a health check that exits
non-zero at its start and may hold the node's registration until it succeeds: a failing node must register and be
drained, not vanish); with --strict 1 for a failing node; 2 unusable expectation file or arguments; 3 Slurm could
not be read or updated.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, check, healthy

DEFAULT_CONFIG = '/etc/llmforge/nodecheck.json'
# The label of its metrics among the validators' (llmforge_validator_*{validator="nodecheck"}).
VALIDATOR = 'nodecheck'
VALIDATORS = ('gpu_topology', 'rdma_links')
CONFIG_KEYS = {'node_name', 'validators', 'timeout', 'drain', 'requeue', 'scontrol', 'squeue', 'textfile_dir', 'state_file'}


class ConfigError(Exception):
    """The expectation file is missing or wrong; the message names the file and the field."""


class SlurmError(Exception):
    """scontrol failed; the message says which command and why."""


def load_config(path: str) -> dict[str, t.Any]:
    """The expectation file, checked field by field."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ConfigError(f'{path}: not found (the slurm_node role writes it)') from None
    except (OSError, ValueError) as err:
        raise ConfigError(f'{path}: cannot be read as JSON: {err}') from None
    if not isinstance(data, dict):
        raise ConfigError(f'{path}: expected a JSON object, got {type(data).__name__}')
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f'{path}: unknown field(s) {", ".join(unknown)}; known: {", ".join(sorted(CONFIG_KEYS))}')
    config = {'node_name': '', 'validators': {}, 'timeout': 10, 'drain': True, 'requeue': True, 'scontrol': 'scontrol',
              'squeue': 'squeue', 'textfile_dir': '', 'state_file': ''}
    config.update(data)
    if not isinstance(config['node_name'], str):
        raise ConfigError(f'{path}: node_name must be a string')
    timeout = config['timeout']
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 50:
        raise ConfigError(f'{path}: timeout must be a number of seconds in (0, 50], got {timeout!r}')
    validators = config['validators']
    if not isinstance(validators, dict) or set(validators) - set(VALIDATORS):
        raise ConfigError(f'{path}: validators must be an object with keys among {", ".join(VALIDATORS)}')
    for name, settings in validators.items():
        if not isinstance(settings, dict):
            raise ConfigError(f'{path}: validators.{name} must be an object')
        if not isinstance(settings.get('expected', {}), dict):
            raise ConfigError(f'{path}: validators.{name}.expected must be an object')
    try:
        if 'gpu_topology' in validators:
            settings = validators['gpu_topology']
            config['gpu_want'] = gpu.resolve_expectation(settings.get('profile') or None, settings.get('expected') or {})
        if 'rdma_links' in validators:
            rdma.resolve_expectation(validators['rdma_links'].get('expected') or {})
    except (gpu.GpuTopologyError, rdma.RdmaLinksError) as err:
        raise ConfigError(f'{path}: validators: {err}') from None
    for key in ('drain', 'requeue'):
        if not isinstance(config[key], bool):
            raise ConfigError(f'{path}: {key} must be true or false')
    for key in ('scontrol', 'squeue', 'textfile_dir', 'state_file'):
        if not isinstance(config[key], str):
            raise ConfigError(f'{path}: {key} must be a string')
    return config


class Task:
    """A function run in a daemon thread; result() waits at most until a deadline."""

    def __init__(self, func: t.Callable[[], t.Any]) -> None:
        self._func = func
        self._value: t.Any = None
        self._error: t.Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._func()
        except BaseException as err:  # pylint: disable=broad-except  # handed to the waiting thread
            self._error = err

    def result(self, deadline: float) -> t.Any:
        """The function's value; TimeoutError when it is still running at the deadline (monotonic clock)."""
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            raise TimeoutError
        if self._error is not None:
            raise self._error
        return self._value


def _timeout_check(what: str, timeout: float, message: str) -> dict[str, t.Any]:
    return check('timeout', FAIL, what, f'<= {timeout:g}s', f'> {timeout:g}s', message)


def run_validators(config: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """The checks of every configured validator; a validator that cannot run gives one failing check."""
    timeout = float(config['timeout'])
    validators = config['validators']
    tasks: dict[str, Task] = {}
    if 'gpu_topology' in validators:
        smi = validators['gpu_topology'].get('nvidia_smi') or 'nvidia-smi'
        # Both nvidia-smi calls at once: the node check's time is the slower one, not their sum.
        tasks['nvidia-smi -q -x'] = Task(lambda: gpu.run_command([smi, '-q', '-x'], timeout))
        tasks['nvidia-smi topo -m'] = Task(lambda: gpu.run_command([smi, 'topo', '-m'], timeout))
    if 'rdma_links' in validators:
        settings = validators['rdma_links']
        tasks['rdma_links'] = Task(lambda: rdma.evaluate(settings.get('sysfs_root') or '/sys', settings.get('expected') or {}))
    # A little more than the commands' own timeout, which fires first and names the command.
    deadline = time.monotonic() + timeout + 1.0
    outputs: dict[str, t.Any] = {}
    checks: list[dict[str, t.Any]] = []
    for what, task in tasks.items():
        try:
            outputs[what] = task.result(deadline)
        except (TimeoutError, gpu.CommandTimeout):
            checks.append(_timeout_check(what, timeout, f'{what} did not finish within {timeout:g} s'))
        except (gpu.GpuTopologyError, rdma.RdmaLinksError, OSError) as err:
            checks.append(check('run', FAIL, what.split()[0], None, str(err), str(err)))
    if 'nvidia-smi -q -x' in outputs and 'nvidia-smi topo -m' in outputs:
        try:
            facts = gpu.parse_smi_xml(outputs['nvidia-smi -q -x'])
            topo = gpu.parse_topo_matrix(outputs['nvidia-smi topo -m'])
            checks.extend(gpu.judge(facts, topo, config['gpu_want']))
        except gpu.GpuTopologyError as err:
            checks.append(check('run', FAIL, 'nvidia-smi', None, str(err), str(err)))
    if 'rdma_links' in outputs:
        checks.extend(outputs['rdma_links']['checks'])
    # Failures first, as in the report, so the drain reason names the first failing check.
    return sorted(checks, key=lambda item: item['status'] != FAIL)


def _scontrol(argv: list[str], timeout: float) -> str:
    command = ' '.join(argv)
    # The thread's deadline also bounds a command that outlives its own timeout (a process stuck in the kernel).
    task = Task(lambda: proc.run(argv, timeout))
    try:
        done = task.result(time.monotonic() + timeout + 1.0)
    except TimeoutError:
        raise SlurmError(f"'{command}' did not finish within {timeout:g} s") from None
    except proc.CommandError as err:
        raise SlurmError(str(err)) from None
    if done.rc != 0:
        detail = (done.stderr.strip() or done.stdout.strip() or 'no output').splitlines()[0]
        raise SlurmError(f"'{command}' exited with {done.rc}: {detail}")
    return done.stdout


def requeue_jobs(config: dict[str, t.Any], node_name: str) -> dict[str, list[str]]:
    """Requeue the jobs running on a node just drained for a fault: they restart elsewhere from their checkpoint
    instead of failing or hanging on broken hardware. Jobs that cannot be requeued (--no-requeue, not batch) keep
    running and are listed with scontrol's answer."""
    timeout = float(config['timeout'])
    done: dict[str, list[str]] = {'requeued': [], 'not_requeued': []}
    try:
        listed = _scontrol([config['squeue'], '--noheader', '--nodelist', node_name, '--states', 'RUNNING,CONFIGURING',
                            '--format', '%A'], timeout)
    except SlurmError as err:
        done['not_requeued'].append(f'jobs not listed ({err})')
        return done
    for job in sorted({line.strip() for line in listed.splitlines() if line.strip().isdigit()}, key=int):
        try:
            _scontrol([config['scontrol'], 'requeue', job], timeout)
            done['requeued'].append(job)
        except SlurmError as err:
            done['not_requeued'].append(f'{job} ({err})')
    return done


def slurm_act(config: dict[str, t.Any], checks: list[dict[str, t.Any]], node_name: str, dry_run: bool) -> dict[str, t.Any]:
    """Read the node's Slurm state and drain or resume it as _slurm_drain decides; requeue a drained node's jobs."""
    scontrol, timeout = config['scontrol'], float(config['timeout'])
    node = drain.parse_node(_scontrol([scontrol, 'show', 'node', node_name, '-o'], timeout))
    decision = drain.drain_action(checks, node)
    decision['done'] = False
    if decision['action'] and not dry_run:
        update = [scontrol, 'update', f'NodeName={node_name}']
        update += ['State=DRAIN', f"Reason={decision['reason']}"] if decision['action'] == 'drain' else ['State=RESUME']
        _scontrol(update, timeout)
        decision['done'] = True
        if decision['action'] == 'drain' and config['requeue']:
            decision.update(requeue_jobs(config, node_name))
    return decision


def metrics_text(result: dict[str, t.Any]) -> str:
    """The run as validator metrics: llmforge_validator_*{validator="nodecheck"}, as validate.yml writes its own."""
    return prometheus.render(prometheus.validator_families(VALIDATOR, result['checks'], result['healthy'],
                                                           result['duration_seconds'], result['finished_at']))


def run(config: dict[str, t.Any], node_name: str, use_slurm: bool, dry_run: bool) -> dict[str, t.Any]:
    started = time.monotonic()
    checks = run_validators(config)
    result: dict[str, t.Any] = {
        'node': node_name,
        'healthy': healthy(checks),
        'reason': drain.drain_reason(checks),
        'checks': checks,
        'slurm': None,
        'slurm_error': None,
    }
    if use_slurm and config['drain']:
        try:
            result['slurm'] = slurm_act(config, checks, node_name, dry_run)
        except SlurmError as err:
            result['slurm_error'] = str(err)
    result['duration_seconds'] = time.monotonic() - started
    result['finished_at'] = time.time()
    return result


def summary(result: dict[str, t.Any]) -> str:
    counts = {status: sum(1 for c in result['checks'] if c['status'] == status) for status in ('pass', 'fail', 'warn', 'skip')}
    verdict = 'healthy' if result['healthy'] else f"FAILING {result['reason']}"
    text = (f"llmforge-nodecheck {result['node']}: {verdict} ({counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['warn']} warn, {counts['skip']} skip in {result['duration_seconds']:.2f} s)")
    slurm = result['slurm']
    if slurm and slurm['action']:
        text += f"; {'drained' if slurm['action'] == 'drain' else 'resumed'}" if slurm['done'] else f"; would {slurm['action']}"
        if slurm.get('requeued'):
            text += f"; requeued job(s) {', '.join(slurm['requeued'])}"
        if slurm.get('not_requeued'):
            text += f"; not requeued: {'; '.join(slurm['not_requeued'])}"
    elif slurm:
        text += f"; Slurm: {slurm['why']}"
    if result['slurm_error']:
        text += f"; Slurm not updated: {result['slurm_error']}"
    return text


def main(argv: t.Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog='llmforge-nodecheck', description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--config', default=DEFAULT_CONFIG, help=f'expectation file (default {DEFAULT_CONFIG})')
    parser.add_argument('--node', help='Slurm node name (default: the file\'s node_name, else $SLURMD_NODENAME, else the host name)')
    parser.add_argument('--no-slurm', action='store_true', help='check only; do not read or change Slurm')
    parser.add_argument('--dry-run', action='store_true', help='say what would be done in Slurm without doing it')
    parser.add_argument('--json', action='store_true', help='print the whole result as JSON')
    parser.add_argument('--strict', action='store_true', help='exit 1 when the node is failing (default: 0 once handled)')
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config)
    except ConfigError as err:
        sys.stderr.write(f'llmforge-nodecheck: {err}\n')
        return 2
    node_name = args.node or config['node_name'] or os.environ.get('SLURMD_NODENAME') or os.uname().nodename.split('.')[0]
    result = run(config, node_name, use_slurm=not args.no_slurm, dry_run=args.dry_run)
    outputs = []
    if config['textfile_dir']:
        outputs.append((os.path.join(config['textfile_dir'], 'llmforge_nodecheck.prom'), metrics_text(result)))
    if config['state_file']:
        outputs.append((config['state_file'], json.dumps(result, indent=1, sort_keys=True) + '\n'))
    for path, text in outputs:
        try:
            files.write_atomic(path, text)
        except OSError as err:
            sys.stderr.write(f'llmforge-nodecheck: cannot write {path}: {err}\n')
    sys.stdout.write((json.dumps(result, indent=1, sort_keys=True) if args.json else summary(result)) + '\n')
    if result['slurm_error']:
        sys.stderr.write(f"llmforge-nodecheck: {result['slurm_error']}\n")
        return 3
    return 1 if args.strict and not result['healthy'] else 0
