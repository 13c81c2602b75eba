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
import contextlib
import fcntl
import json
import os
import sys
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import ascii_digits, healthy
from ansible_collections.llmforge.cluster.plugins.module_utils._validators import (
    Task, command as _command, directory as _directory, seconds as _seconds, text as _string, unexpected as _unexpected)
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _jobcheck as jobcheck

DEFAULT_CONFIG = '/etc/llmforge/nodecheck.json'
# The label of its metrics among the validators' (llmforge_validator_*{validator="nodecheck"}).
VALIDATOR = 'nodecheck'
CONFIG_KEYS = {'node_name', 'validators', 'timeout', 'drain', 'requeue', 'scontrol', 'squeue', 'textfile_dir', 'state_file',
               'epilog_fault_file'}
# Where a command given by its bare name is looked for; PATH itself is never used.
SYSTEM_DIRS = validators.SYSTEM_DIRS

ConfigError = validators.SettingsError


class SlurmError(Exception):
    """scontrol failed; the message says which command and why."""


class CommandNotFound(Exception):
    """A command given by its bare name is in none of SYSTEM_DIRS."""


def resolve_command(command: str) -> str:
    """The absolute path of a command: itself when absolute, else the first executable of that name in SYSTEM_DIRS."""
    found = validators.find_command(command, SYSTEM_DIRS)
    if found:
        return found
    raise CommandNotFound(f'{command} not found in {", ".join(SYSTEM_DIRS)} (give its absolute path in the expectation file)')


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


def check_validators(given: t.Any) -> dict[str, dict[str, t.Any]]:
    """`{name: settings}` of the validators to run, each checked against its schema and prepared, registry order."""
    known = validators.in_stage('health_check')
    if not isinstance(given, dict) or set(given) - set(known):
        raise ConfigError(f'validators must be an object with keys among {", ".join(known)}')
    checked = {name: validator.checked_settings(given[name]) for name, validator in known.items() if name in given}
    prepared = {}
    for name, settings in checked.items():
        try:
            prepared[name] = known[name].prepare(settings)
        except Exception as err:  # pylint: disable=broad-except  # an expectation the checks choke on
            if isinstance(err, known[name].errors):
                raise ConfigError(f'validators.{name}: {err}') from None
            raise ConfigError(f'validators.{name}: unexpected {_unexpected(err)}') from None
    return prepared


def check_config(data: t.Any) -> dict[str, t.Any]:
    """The parsed expectation with its defaults, every field type-checked; ConfigError names the field."""
    if not isinstance(data, dict):
        raise ConfigError(f'expected a JSON object, got {type(data).__name__}')
    unknown = sorted(set(data) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f'unknown field(s) {", ".join(unknown)}; known: {", ".join(sorted(CONFIG_KEYS))}')
    config = {'node_name': '', 'validators': {}, 'timeout': 10, 'drain': True, 'requeue': True, 'scontrol': 'scontrol',
              'squeue': 'squeue', 'textfile_dir': '', 'state_file': '', 'epilog_fault_file': jobcheck.FAULT_FILE}
    config.update(data)
    _string(config['node_name'], 'node_name')
    _seconds(config['timeout'], 'timeout')
    config['validators'] = check_validators(config['validators'])
    for key in ('drain', 'requeue'):
        if not isinstance(config[key], bool):
            raise ConfigError(f'{key} must be true or false')
    for key in ('scontrol', 'squeue'):
        _command(config[key], key)
    for key in ('textfile_dir', 'state_file', 'epilog_fault_file'):
        _directory(config[key], key)
    return config


def _installed(command: str, package: str) -> str:
    """The command's absolute path; validators.Missing saying what to install when it is in none of SYSTEM_DIRS."""
    try:
        return resolve_command(command)
    except CommandNotFound:
        raise validators.Missing(f'{command} not found: is {package} installed? (looked in {", ".join(SYSTEM_DIRS)})') from None


def run_validators(config: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    """The checks of every configured validator, failures first; a validator that cannot run gives a failing check.
    Then the `epilog` check: failing while the job epilog's fault record is there (see _jobcheck.py)."""
    checks = validators.run(config['validators'], float(config['timeout']), _installed)
    epilog = jobcheck.fault_check(config['epilog_fault_file'])
    return sorted(checks + [epilog], key=lambda item: item['status'] != 'fail')


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
        'reason': validators.drain_reason(checks),
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


@contextlib.contextmanager
def _one_at_a_time(state_file: str) -> t.Iterator[None]:
    """An exclusive lock beside the state file, held for one run (none without a state file), waited for at most
    validators.MAX_SECONDS: a run still stuck past that does not stop this one."""
    if not state_file:
        yield
        return
    try:
        handle = open(state_file + '.lock', 'a+', encoding='utf-8')  # pylint: disable=consider-using-with
    except OSError:
        yield
        return
    with handle:
        deadline = time.monotonic() + validators.MAX_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        yield


def main(argv: t.Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog='llmforge-nodecheck', description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--config', default=DEFAULT_CONFIG, help=f'expectation file (default {DEFAULT_CONFIG})')
    parser.add_argument('--node', help='Slurm node name (default: the file\'s node_name, else $SLURMD_NODENAME, else the host name)')
    parser.add_argument('--no-slurm', action='store_true', help='check only; do not read or change Slurm')
    parser.add_argument('--dry-run', action='store_true', help='say what would be done in Slurm without doing it')
    parser.add_argument('--json', action='store_true', help='print the whole result as JSON')
    parser.add_argument('--strict', action='store_true', help='exit 1 when the node is failing (default: 0 once handled)')
    parser.add_argument('--request', action='store_true',
                        help='a job asks (llmforge-nodecheck.socket): check and handle Slurm as usual, print one JSON line '
                             '{node, healthy, reason}, exit 1 when failing')
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
    # One check at a time on a node (slurmd's periodic one and the jobs' requests): the second waits for the first.
    with _one_at_a_time(config['state_file']):
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
    if args.request:
        sys.stdout.write(json.dumps({'node': node_name, 'healthy': result['healthy'], 'reason': result['reason']}) + '\n')
        sys.stdout.flush()
        sys.stderr.write(summary(result) + '\n')
        return 0 if result['healthy'] else 1
    sys.stdout.write((_json_text(result) if args.json else summary(result)) + '\n')
    if result['slurm_error']:
        sys.stderr.write(f"llmforge-nodecheck: {result['slurm_error']}\n")
        return 3
    return 1 if args.strict and not result['healthy'] else 0
