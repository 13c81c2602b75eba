# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-nodecheck: the Slurm HealthCheckProgram of a GPU node.

Runs the same checks as the gpu_topology and rdma_links modules (this collection's module_utils code, installed
on the node by the slurm_node role) against the node's expectation file, and, when configured, DCGM's level-1
diagnostic as the dcgm_diag module judges it (under its own limit: `dcgmi diag -r 1` takes seconds). Then it
drains the node in Slurm with the same reason validate.yml uses, or resumes it when it drained it and the node is
healthy again (see _slurm_drain.py). Standard library only, no Ansible.

Every command and every validator runs in its own daemon thread with a deadline, so a hung nvidia-smi or a stuck
sysfs read cannot hold the program past Slurm's 60 s limit: the check is reported as `timeout <what>` instead. A
validator that fails on input it cannot handle (odd bytes from nvidia-smi, a number too large, a NUL byte in a
sysfs file) gives a failing `run` check of the node naming the exception and what was being read, and drains the
node with `llmforge: nodecheck error <what>: <exception>`; metrics and the state file are written all the same.

Commands run as root: scontrol, squeue and nvidia-smi are taken from the expectation file as absolute paths, or as
bare names looked up in the fixed system directories SYSTEM_DIRS, never through PATH.

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

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, ascii_digits, check, healthy

DEFAULT_CONFIG = '/etc/llmforge/nodecheck.json'
# The label of its metrics among the validators' (llmforge_validator_*{validator="nodecheck"}).
VALIDATOR = 'nodecheck'
VALIDATORS = ('gpu_topology', 'rdma_links', 'dcgm')
CONFIG_KEYS = {'node_name', 'validators', 'timeout', 'drain', 'requeue', 'scontrol', 'squeue', 'textfile_dir', 'state_file'}
# The settings each validator takes.
VALIDATOR_KEYS = {'gpu_topology': {'profile', 'expected', 'nvidia_smi'}, 'rdma_links': {'sysfs_root', 'expected'},
                  'dcgm': {'dcgmi', 'timeout'}}
# DCGM's level 1 (seconds) is the only diagnostic level a health check runs; its own time limit defaults to this
# and, like `timeout`, may not exceed 50 s (Slurm kills a HealthCheckProgram after 60 s).
DCGM_TIMEOUT = 45
# Where a command given by its bare name is looked for (systemd's PATH order); PATH itself is never used.
SYSTEM_DIRS = ('/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin')
# An exception's text in a message is cut to this many characters (it may quote a whole input).
MAX_DETAIL = 300


class ConfigError(Exception):
    """The expectation file is missing or wrong; the message names the file and the field."""


class SlurmError(Exception):
    """scontrol failed; the message says which command and why."""


class CommandNotFound(Exception):
    """A command given by its bare name is in none of SYSTEM_DIRS."""


def _type_name(value: t.Any) -> str:
    return 'null' if value is None else {dict: 'object', list: 'array', str: 'string', bool: 'boolean'}.get(
        type(value), 'number' if isinstance(value, (int, float)) else type(value).__name__)


def _string(value: t.Any, field: str, what: str = 'a string') -> str:
    if not isinstance(value, str):
        raise ConfigError(f'{field} must be {what}, got {_type_name(value)}')
    if any(ord(char) < 32 for char in value):
        raise ConfigError(f'{field} must be {what} without control characters, got {value!r}')
    return value


def _command(value: t.Any, field: str) -> str:
    """A command: a bare name (looked up in SYSTEM_DIRS when run) or an absolute path."""
    text = _string(value, field, 'a command name or an absolute path')
    if '/' in text and not os.path.isabs(text):
        raise ConfigError(f'{field} must be a command name (looked up in {", ".join(SYSTEM_DIRS)}) or an absolute '
                          f'path, got the relative path {text!r}')
    return text


def _directory(value: t.Any, field: str) -> str:
    """An absolute path, or '' (none)."""
    text = _string(value, field, 'an absolute path or empty')
    if text and not os.path.isabs(text):
        raise ConfigError(f'{field} must be an absolute path or empty, got {text!r}')
    return text


def _seconds(value: t.Any, field: str) -> float:
    """A time limit within Slurm's 60 s for a HealthCheckProgram."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 50:
        raise ConfigError(f'{field} must be a number of seconds in (0, 50], got {value!r}')
    return value


def resolve_command(command: str) -> str:
    """The absolute path of a command: itself when absolute, else the first executable of that name in SYSTEM_DIRS."""
    if os.path.isabs(command):
        return command
    for directory in SYSTEM_DIRS:
        candidate = os.path.join(directory, command)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise CommandNotFound(f'{command} not found in {", ".join(SYSTEM_DIRS)} (give its absolute path in the expectation file)')


def _unexpected(err: BaseException) -> str:
    text = str(err).strip() or 'no message'
    return f'{type(err).__name__}: {text[:MAX_DETAIL] + "..." if len(text) > MAX_DETAIL else text}'


def load_config(path: str) -> dict[str, t.Any]:
    """The expectation file, checked field by field."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ConfigError(f'{path}: not found (the slurm_node role writes it)') from None
    except (OSError, ValueError, RecursionError) as err:
        raise ConfigError(f'{path}: cannot be read as JSON: {err}') from None
    try:
        return check_config(data)
    except ConfigError as err:
        raise ConfigError(f'{path}: {err}') from None
    except Exception as err:  # pylint: disable=broad-except  # a field nobody foresaw: still exit 2 naming the file
        raise ConfigError(f'{path}: unexpected {_unexpected(err)}') from None


def check_config(data: t.Any) -> dict[str, t.Any]:
    """The parsed expectation with its defaults, every field type-checked; ConfigError names the field."""
    if not isinstance(data, dict):
        raise ConfigError(f'expected a JSON object, got {type(data).__name__}')
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f'unknown field(s) {", ".join(unknown)}; known: {", ".join(sorted(CONFIG_KEYS))}')
    config = {'node_name': '', 'validators': {}, 'timeout': 10, 'drain': True, 'requeue': True, 'scontrol': 'scontrol',
              'squeue': 'squeue', 'textfile_dir': '', 'state_file': ''}
    config.update(data)
    _string(config['node_name'], 'node_name')
    _seconds(config['timeout'], 'timeout')
    validators = config['validators']
    if not isinstance(validators, dict) or set(validators) - set(VALIDATORS):
        raise ConfigError(f'validators must be an object with keys among {", ".join(VALIDATORS)}')
    for name, settings in validators.items():
        if not isinstance(settings, dict):
            raise ConfigError(f'validators.{name} must be an object, got {_type_name(settings)}')
        unknown = sorted(set(settings) - VALIDATOR_KEYS[name])
        if unknown:
            raise ConfigError(f'validators.{name}: unknown field(s) {", ".join(unknown)}; '
                              f'known: {", ".join(sorted(VALIDATOR_KEYS[name]))}')
        if not isinstance(settings.get('expected', {}), dict):
            raise ConfigError(f'validators.{name}.expected must be an object, got {_type_name(settings["expected"])}')
    if 'gpu_topology' in validators:
        settings = validators['gpu_topology']
        if settings.get('profile') is not None:
            _string(settings['profile'], 'validators.gpu_topology.profile', 'a profile name or null')
        if settings.get('nvidia_smi'):
            _command(settings['nvidia_smi'], 'validators.gpu_topology.nvidia_smi')
        elif settings.get('nvidia_smi') not in (None, ''):
            raise ConfigError(f'validators.gpu_topology.nvidia_smi must be a command name or an absolute path, '
                              f'got {_type_name(settings["nvidia_smi"])}')
    if 'dcgm' in validators:
        settings = validators['dcgm']
        _command(settings.get('dcgmi', 'dcgmi'), 'validators.dcgm.dcgmi')
        settings['timeout'] = _seconds(settings.get('timeout', DCGM_TIMEOUT), 'validators.dcgm.timeout')
    if 'rdma_links' in validators and validators['rdma_links'].get('sysfs_root') is not None:
        _directory(validators['rdma_links']['sysfs_root'], 'validators.rdma_links.sysfs_root')
    try:
        if 'gpu_topology' in validators:
            settings = validators['gpu_topology']
            config['gpu_want'] = gpu.resolve_expectation(settings.get('profile') or None, settings.get('expected') or {})
        if 'rdma_links' in validators:
            rdma.resolve_expectation(validators['rdma_links'].get('expected') or {})
    except (gpu.GpuTopologyError, rdma.RdmaLinksError) as err:
        raise ConfigError(f'validators: {err}') from None
    except Exception as err:  # pylint: disable=broad-except  # an expectation the checks choke on
        raise ConfigError(f'validators: unexpected {_unexpected(err)}') from None
    for key in ('drain', 'requeue'):
        if not isinstance(config[key], bool):
            raise ConfigError(f'{key} must be true or false')
    for key in ('scontrol', 'squeue'):
        _command(config[key], key)
    for key in ('textfile_dir', 'state_file'):
        _directory(config[key], key)
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


def _last_path(err: BaseException) -> t.Optional[str]:
    """The `path` the innermost frame of the traceback that had one was handling (the file being read), if any."""
    found = None
    trace = err.__traceback__
    while trace is not None:
        value = trace.tb_frame.f_locals.get('path')
        if isinstance(value, str):
            found = value
        trace = trace.tb_next
    return found


def error_check(what: str, err: BaseException) -> dict[str, t.Any]:
    """The failing `run` check of a validator that raised on input it could not handle; the node drains with
    `llmforge: nodecheck error <what>: <exception type>` (see _slurm_drain)."""
    path = _last_path(err)
    where = f'{what} ({path!r})' if path and path not in what else what
    message = f'nodecheck error while reading {where}: unexpected {_unexpected(err)}'
    return check('run', FAIL, 'node', None, f'{drain.ERROR_REASON} {what}: {type(err).__name__}', message)


def _installed(command: str, name: str, package: str, checks: list[dict[str, t.Any]]) -> str:
    """The command's absolute path; '' and a failing `run` check of `name` when it is in none of SYSTEM_DIRS."""
    try:
        return resolve_command(command)
    except CommandNotFound:
        message = f'{command} not found: is {package} installed? (looked in {", ".join(SYSTEM_DIRS)})'
        checks.append(check('run', FAIL, name, None, message, message))
        return ''


def run_validators(config: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """The checks of every configured validator; a validator that cannot run gives one failing check."""
    timeout = float(config['timeout'])
    validators = config['validators']
    # Each task with its own time limit; all run at once, so the check takes as long as the slowest.
    tasks: dict[str, tuple[Task, float]] = {}
    checks: list[dict[str, t.Any]] = []
    if 'gpu_topology' in validators:
        smi = _installed(validators['gpu_topology'].get('nvidia_smi') or 'nvidia-smi', 'nvidia-smi',
                         'the NVIDIA driver', checks)
        if smi:
            tasks['nvidia-smi -q -x'] = (Task(lambda: gpu.run_command([smi, '-q', '-x'], timeout)), timeout)
            tasks['nvidia-smi topo -m'] = (Task(lambda: gpu.run_command([smi, 'topo', '-m'], timeout)), timeout)
    if 'rdma_links' in validators:
        settings = validators['rdma_links']
        sysfs_root = settings.get('sysfs_root') or '/sys'
        tasks[f'sysfs {sysfs_root}'] = (Task(lambda: rdma.evaluate(sysfs_root, settings.get('expected') or {})),
                                        timeout)
    if 'dcgm' in validators:
        dcgm_timeout = float(validators['dcgm'].get('timeout', DCGM_TIMEOUT))
        dcgmi = _installed(validators['dcgm'].get('dcgmi') or 'dcgmi', 'dcgmi', 'DCGM (datacenter-gpu-manager)', checks)
        if dcgmi:
            tasks['dcgmi diag -r 1'] = (Task(lambda: dcgm.run_diag(dcgmi, 1, dcgm_timeout)), dcgm_timeout)
    started = time.monotonic()
    outputs: dict[str, t.Any] = {}
    for what, (task, limit) in tasks.items():
        # The checks name the validator (rdma_links), as before; errors name what was read.
        subject = 'rdma_links' if what.startswith('sysfs ') else what
        try:
            # A little more than the command's own time limit, which fires first and names the command.
            outputs[what] = task.result(started + limit + 1.0)
        except TimeoutError:
            if what.startswith('dcgmi '):
                checks.append(dcgm.as_check(dcgm.hang_result(1, limit)))
            else:
                checks.append(_timeout_check(subject, limit, f'{subject} did not finish within {limit:g} s'))
        except gpu.CommandTimeout:
            checks.append(_timeout_check(subject, limit, f'{subject} did not finish within {limit:g} s'))
        except (gpu.GpuTopologyError, rdma.RdmaLinksError, dcgm.DcgmDiagError, OSError) as err:
            checks.append(check('run', FAIL, subject.split()[0], None, str(err), str(err)))
        except Exception as err:  # pylint: disable=broad-except  # any other failure is this validator's
            checks.append(error_check(what, err))
    if 'nvidia-smi -q -x' in outputs and 'nvidia-smi topo -m' in outputs:
        what = 'nvidia-smi -q -x'
        try:
            facts = gpu.parse_smi_xml(outputs[what])
            what = 'nvidia-smi topo -m'
            topo = gpu.parse_topo_matrix(outputs[what])
            what = 'nvidia-smi -q -x and topo -m'
            checks.extend(gpu.judge(facts, topo, config['gpu_want']))
        except gpu.GpuTopologyError as err:
            checks.append(check('run', FAIL, 'nvidia-smi', None, str(err), str(err)))
        except Exception as err:  # pylint: disable=broad-except
            checks.append(error_check(what, err))
    for what, output in outputs.items():
        if what.startswith('sysfs '):
            try:
                checks.extend(output['checks'])
            except Exception as err:  # pylint: disable=broad-except
                checks.append(error_check(what, err))
        elif what.startswith('dcgmi '):
            checks.append(dcgm.as_check(output))
    # Failures first, as in the report, so the drain reason names the first failing check.
    return sorted(checks, key=lambda item: item['status'] != FAIL)


def _scontrol(argv: list[str], timeout: float) -> str:
    command = ' '.join(argv)
    try:
        argv = [resolve_command(argv[0]), *argv[1:]]
    except CommandNotFound as err:
        raise SlurmError(str(err)) from None
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
    # Job ids are ASCII digits: str.isdigit() also takes a superscript digit that int() refuses.
    for job in sorted({line.strip() for line in listed.splitlines() if ascii_digits(line.strip())}, key=int):
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
        except Exception as err:  # pylint: disable=broad-except  # odd scontrol output: Slurm not handled, exit 3
            result['slurm_error'] = f'unexpected {_unexpected(err)} while reading or updating the node in Slurm'
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


def _json_text(result: dict[str, t.Any]) -> str:
    # default=str: a value a parser left in a check that JSON has no type for is written as its text.
    return json.dumps(result, indent=1, sort_keys=True, default=str)


def main(argv: t.Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog='llmforge-nodecheck', description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--config', default=DEFAULT_CONFIG, help=f'expectation file (default {DEFAULT_CONFIG})')
    parser.add_argument('--node', help='Slurm node name (default: the file\'s node_name, else $SLURMD_NODENAME, else the host name)')
    parser.add_argument('--no-slurm', action='store_true', help='check only; do not read or change Slurm')
    parser.add_argument('--dry-run', action='store_true', help='say what would be done in Slurm without doing it')
    parser.add_argument('--json', action='store_true', help='print the whole result as JSON')
    parser.add_argument('--strict', action='store_true', help='exit 1 when the node is failing (default: 0 once handled)')
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):
        # Whatever the locale, odd characters read from the hardware are escaped, not a UnicodeEncodeError.
        try:
            stream.reconfigure(errors='backslashreplace')  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    try:
        config = load_config(args.config)
    except ConfigError as err:
        sys.stderr.write(f'llmforge-nodecheck: {err}\n')
        return 2
    node_name = args.node or config['node_name'] or os.environ.get('SLURMD_NODENAME') or os.uname().nodename.split('.')[0]
    result = run(config, node_name, use_slurm=not args.no_slurm, dry_run=args.dry_run)
    outputs: list[tuple[str, t.Callable[[], str]]] = []
    if config['textfile_dir']:
        outputs.append((os.path.join(config['textfile_dir'], 'llmforge_nodecheck.prom'), lambda: metrics_text(result)))
    if config['state_file']:
        outputs.append((config['state_file'], lambda: _json_text(result) + '\n'))
    for path, render in outputs:
        try:
            files.write_atomic(path, render())
        except OSError as err:
            sys.stderr.write(f'llmforge-nodecheck: cannot write {path}: {err}\n')
        except Exception as err:  # pylint: disable=broad-except  # the other output is still written
            sys.stderr.write(f'llmforge-nodecheck: cannot write {path}: unexpected {_unexpected(err)}\n')
    sys.stdout.write((_json_text(result) if args.json else summary(result)) + '\n')
    if result['slurm_error']:
        sys.stderr.write(f"llmforge-nodecheck: {result['slurm_error']}\n")
        return 3
    return 1 if args.strict and not result['healthy'] else 0
