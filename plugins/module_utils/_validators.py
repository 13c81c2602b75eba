# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node validators: one protocol, one registry, one runner.

Standard library only, no Ansible import. A node validator (gpu_topology, rdma_links, dcgm, ...) is one `Validator`
defined in its own module_utils file, next to its parser; `registry()` lists them, one line each. Everything that
runs or reports validators iterates the registry instead of naming them: the node health check (_nodecheck.py)
checks its settings against each `Setting` schema and runs them with `run`, the report (_report.py) reads the
result of each one whose `stages` include ``hardware`` (the validate role's hardware stage runs its module as a task
registered ``__validate_<name>``), the metrics writer asks `families`, and docs/validate.md's table lists
`registry()`.

The protocol:

- ``name`` and ``title`` (a line for people), ``stages``: where it runs (``health_check``: llmforge-nodecheck,
  ``hardware``: the validate role's hardware stage, whose result is registered as ``__validate_<name>``).
- ``settings``: its schema, a tuple of `Setting` (name, kind, default, whether null means the default); `checked`
  fills the defaults and refuses a wrong value with an error naming ``validators.<name>.<field>``.
- ``prepare(settings)``: the settings with the expectation the checks compare against resolved once (an unknown
  profile is an error here, before any reading is taken); what `collect` and `judge` are given.
- ``collect(settings, timeout)``: the readings it takes, each a function with its own time limit; `run` starts
  the readings of every validator at once and waits for each until its deadline, so a node check takes as long
  as its slowest reading. A reading that overruns gives a ``timeout`` check (or the validator's ``timed_out``).
- ``judge(outputs, settings, current)``: the `_checks.check` records of the readings' outputs; `current.what`
  names what is being read, so that an unexpected exception names it.
- ``errors``: the exceptions that mean bad input (a failing ``run`` check with their message).
- drain reason and metrics: `drain_reason` and `families` (the shared _slurm_drain and _prometheus vocabulary;
  a validator shapes its reason through its checks' name, subject and actual, as dcgm's ``dcgm L1 fail: ...``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import threading
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, check, finite
from ansible_collections.llmforge.cluster.plugins.module_utils._module_errors import Input, detail

# A node health check must finish within Slurm's 60 s: no time limit above this.
MAX_SECONDS = 50
# Where a command given by its bare name is looked for (systemd's PATH order); PATH itself is never used.
SYSTEM_DIRS = ('/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin')
# The stages a validator can run in.
STAGES = ('health_check', 'hardware')


def find_command(command: str, dirs: t.Sequence[str] = SYSTEM_DIRS) -> t.Optional[str]:
    """A command's absolute path: itself when absolute, else the first executable of that name in `dirs` (the fixed
    system directories; PATH is never used); None when there is none."""
    if os.path.isabs(command):
        return command
    for directory in dirs:
        candidate = os.path.join(directory, command)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class SettingsError(Exception):
    """A setting is missing or wrong; the message names the field."""


# --- settings --------------------------------------------------------------------------------------

def type_name(value: t.Any) -> str:
    """A value's JSON type name, as the error messages say it."""
    return 'null' if value is None else {dict: 'object', list: 'array', str: 'string', bool: 'boolean'}.get(
        type(value), 'number' if isinstance(value, (int, float)) else type(value).__name__)


def text(value: t.Any, field: str, what: str = 'a string') -> str:
    if not isinstance(value, str):
        raise SettingsError(f'{field} must be {what}, got {type_name(value)}')
    if any(ord(char) < 32 for char in value):
        raise SettingsError(f'{field} must be {what} without control characters, got {value!r}')
    return value


def command(value: t.Any, field: str) -> str:
    """A command: a bare name (looked up in SYSTEM_DIRS when run) or an absolute path; '' is allowed (the default)."""
    name = text(value, field, 'a command name or an absolute path')
    if '/' in name and not os.path.isabs(name):
        raise SettingsError(f'{field} must be a command name (looked up in {", ".join(SYSTEM_DIRS)}) or an absolute '
                            f'path, got the relative path {name!r}')
    return name


def directory(value: t.Any, field: str) -> str:
    """An absolute path, or '' (none)."""
    path = text(value, field, 'an absolute path or empty')
    if path and not os.path.isabs(path):
        raise SettingsError(f'{field} must be an absolute path or empty, got {path!r}')
    return path


def seconds(value: t.Any, field: str) -> float:
    """A time limit within Slurm's 60 s for a HealthCheckProgram."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_SECONDS:
        raise SettingsError(f'{field} must be a number of seconds in (0, {MAX_SECONDS}], got {value!r}')
    return value


def number(value: t.Any, field: str) -> float:
    """A finite number of 0 or more (a Unix time, a count)."""
    if finite(value) is None or value < 0:
        raise SettingsError(f'{field} must be a number of 0 or more, got {value!r}')
    return value


def mapping(value: t.Any, field: str) -> dict[str, t.Any]:
    if not isinstance(value, dict):
        raise SettingsError(f'{field} must be an object, got {type_name(value)}')
    return value


# Kind of a setting -> its checker and how docs name it.
KINDS: dict[str, tuple[t.Callable[..., t.Any], str]] = {
    'text': (text, 'string'),
    'command': (command, 'command name or absolute path'),
    'directory': (directory, 'absolute path'),
    'seconds': (seconds, f'seconds, at most {MAX_SECONDS}'),
    'number': (number, 'number'),
    'object': (mapping, 'object'),
}


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting of a validator: its name, kind (a key of KINDS), default and what it means.

    ``nullable``: null (and, for text kinds, '') stands for the default. ``what`` words a text error ('a profile
    name or null'). ``package``: for a command, what installs it (named when it is not found).
    """

    name: str
    kind: str
    default: t.Any
    description: str
    nullable: bool = False
    what: str = ''
    package: str = ''

    def checked(self, value: t.Any, field: str) -> t.Any:
        if value is None and self.nullable:
            return self.default
        checker = KINDS[self.kind][0]
        value = checker(value, field, self.what) if self.what else checker(value, field)
        if value == '' and self.kind != 'object' and self.default is not None:
            return self.default
        return value


# --- the protocol ----------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Reading:
    """One bounded read of a validator: what it reads (named in errors), the function, its time limit and the
    subject its timeout check names."""

    what: str
    read: t.Callable[[], t.Any]
    limit: float
    subject: str


def timeout_check(subject: str, limit: float) -> dict[str, t.Any]:
    """The failing `timeout` check of a reading that did not finish within `limit` seconds."""
    return check('timeout', FAIL, subject, f'<= {limit:g}s', f'> {limit:g}s', f'{subject} did not finish within {limit:g} s')


def _as_given(settings: dict[str, t.Any]) -> dict[str, t.Any]:
    return settings


@dataclasses.dataclass(frozen=True)
class Validator:
    """A node validator (see the module docstring for the protocol)."""

    name: str
    title: str
    settings: t.Tuple[Setting, ...]
    collect: t.Callable[[t.Mapping[str, t.Any], float], t.List[Reading]]
    judge: t.Callable[[t.Mapping[str, t.Any], t.Mapping[str, t.Any], Input], t.List[dict[str, t.Any]]]
    prepare: t.Callable[[dict[str, t.Any]], dict[str, t.Any]] = _as_given
    errors: t.Tuple[t.Type[BaseException], ...] = ()
    # Exceptions that mean a reading's own time limit fired (a `timeout` check, not a `run` check).
    timeouts: t.Tuple[t.Type[BaseException], ...] = ()
    timed_out: t.Callable[[Reading], dict[str, t.Any]] = lambda reading: timeout_check(reading.subject, reading.limit)
    stages: t.Tuple[str, ...] = STAGES
    # The module that runs it alone (llmforge.cluster.<module>), for the docs table; '' when none.
    module: str = ''

    def checked_settings(self, settings: t.Any, prefix: str = 'validators') -> dict[str, t.Any]:
        """The settings with their defaults filled in; SettingsError names `<prefix>.<name>.<field>`."""
        where = f'{prefix}.{self.name}'
        if not isinstance(settings, dict):
            raise SettingsError(f'{where} must be an object, got {type_name(settings)}')
        known = {setting.name for setting in self.settings}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise SettingsError(f'{where}: unknown field(s) {", ".join(unknown)}; known: {", ".join(sorted(known))}')
        return {setting.name: setting.checked(settings[setting.name], f'{where}.{setting.name}')
                if setting.name in settings else copy.deepcopy(setting.default) for setting in self.settings}

    def drain_reason(self, checks: t.Iterable[t.Mapping[str, t.Any]]) -> str:
        """The Slurm drain reason of its checks: `llmforge: <check> <subject> <actual>` of the first failing one."""
        return drain.drain_reason(checks)

    def families(self, checks: t.Iterable[t.Mapping[str, t.Any]], healthy: bool,
                 duration_seconds: t.Optional[float] = None,
                 finished_at: t.Optional[float] = None) -> list[prometheus.Family]:
        """Its verdict as llmforge_validator_* metric families."""
        return prometheus.validator_families(self.name, checks, healthy, duration_seconds, finished_at)


# --- the registry ----------------------------------------------------------------------------------

_EXTRA: dict[str, Validator] = {}


def registry() -> dict[str, Validator]:
    """Every node validator by name, in the order they run and are reported."""
    # pylint: disable=import-outside-toplevel  # each validator's file imports this one for the protocol
    from ansible_collections.llmforge.cluster.plugins.module_utils import (
        _dcgm_diag, _gpu_topology, _kernel_log, _rdma_links)
    found = (
        _gpu_topology.VALIDATOR,
        _rdma_links.VALIDATOR,
        _dcgm_diag.VALIDATOR,
        _kernel_log.VALIDATOR,
    )
    return {validator.name: validator for validator in (*found, *_EXTRA.values())}


def register(validator: Validator) -> None:
    """Add a validator defined elsewhere (a site's own, or a test's) after the collection's."""
    if validator.name in registry():
        raise ValueError(f'a validator named {validator.name!r} is already registered')
    _EXTRA[validator.name] = validator


def unregister(name: str) -> None:
    """Remove a validator added by `register`."""
    _EXTRA.pop(name, None)


def in_stage(stage: str) -> dict[str, Validator]:
    """The validators that run in `stage` (one of STAGES)."""
    return {name: validator for name, validator in registry().items() if stage in validator.stages}


def families(validator: str, checks: t.Iterable[t.Mapping[str, t.Any]], healthy: bool) -> list[prometheus.Family]:
    """The metric families of a result of `validator`: the registered validator's, else the shared vocabulary's
    (the stages that judge nodes from elsewhere: nccl, training, dcgm's tiers)."""
    found = registry().get(validator)
    if found is None:
        return prometheus.validator_families(validator, checks, healthy)
    return found.families(checks, healthy)


def markdown_table() -> str:
    """docs/validate.md's table of the node validators, one row each from the registry."""
    stage_names = {'health_check': 'llmforge-nodecheck', 'hardware': 'validate hardware stage'}
    rows = ['| validator | what it proves | runs in | settings in the health check | module |', '|---|---|---|---|---|']
    for validator in registry().values():
        settings = '; '.join(f'`{setting.name}` ({KINDS[setting.kind][1]}, default `{json.dumps(setting.default)}`)'
                             for setting in validator.settings)
        stages = ', '.join(stage_names[stage] for stage in validator.stages)
        module = f'`llmforge.cluster.{validator.module}`' if validator.module else 'none'
        rows.append(f'| `{validator.name}` | {validator.title} | {stages} | {settings} | {module} |')
    return '\n'.join(rows) + '\n'


def drain_reason(checks: t.Iterable[t.Mapping[str, t.Any]]) -> str:
    """The drain reason of a node's checks (failures first): the first failing check's."""
    return drain.drain_reason(checks)


# --- running ---------------------------------------------------------------------------------------

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


def unexpected(err: BaseException) -> str:
    """`<exception type>: <its text>`, the text cut to _module_errors.MAX_DETAIL characters."""
    return f'{type(err).__name__}: {detail(err)}'


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
    message = f'nodecheck error while reading {where}: unexpected {unexpected(err)}'
    return check('run', FAIL, 'node', None, f'{drain.ERROR_REASON} {what}: {type(err).__name__}', message)


def _run_check(subject: str, err: BaseException) -> dict[str, t.Any]:
    return check('run', FAIL, subject.split()[0], None, str(err), str(err))


class Missing(Exception):
    """A command a validator needs is not installed; the message says where it was looked for."""


def run(configured: t.Mapping[str, t.Mapping[str, t.Any]], timeout: float,
        resolve: t.Callable[[str, str], str]) -> list[dict[str, t.Any]]:
    """The checks of the configured validators (`{name: checked settings}`, registry order), failures first.

    `resolve(command, package)` gives a command setting's absolute path or raises Missing (with the text of the
    failing `run` check); a validator whose command is missing takes no reading. A reading that fails gives one failing
    check; the validator is judged when all its readings gave an output.
    """
    validators = registry()
    chosen = [(validators[name], dict(settings)) for name, settings in configured.items()]
    errors: t.Tuple[t.Type[BaseException], ...] = (OSError, *{error for validator, _settings in chosen for error in validator.errors})
    timeouts = tuple({error for validator, _settings in chosen for error in validator.timeouts})
    checks: list[dict[str, t.Any]] = []
    started: list[tuple[Validator, dict[str, t.Any], list[tuple[Reading, Task]]]] = []
    for validator, settings in chosen:
        ready = True
        for setting in validator.settings:
            if setting.kind == 'command' and ready:
                try:
                    settings[setting.name] = resolve(settings[setting.name], setting.package)
                except Missing as err:
                    checks.append(check('run', FAIL, setting.default, None, str(err), str(err)))
                    ready = False
        if ready:
            readings = validator.collect(settings, timeout)
            started.append((validator, settings, [(reading, Task(reading.read)) for reading in readings]))
    begun = time.monotonic()
    outputs: list[dict[str, t.Any]] = []
    for validator, settings, tasks in started:
        outputs.append({})
        for reading, task in tasks:
            try:
                # A little more than the reading's own time limit, which fires first and names the command.
                outputs[-1][reading.what] = task.result(begun + reading.limit + 1.0)
            except TimeoutError:
                checks.append(validator.timed_out(reading))
            except Exception as err:  # pylint: disable=broad-except  # any failure of a reading is its validator's
                if isinstance(err, timeouts):
                    checks.append(timeout_check(reading.subject, reading.limit))
                elif isinstance(err, errors):
                    checks.append(_run_check(reading.subject, err))
                else:
                    checks.append(error_check(reading.what, err))
    for (validator, settings, tasks), output in zip(started, outputs):
        if len(output) < len(tasks) or not tasks:
            continue
        current = Input(tasks[0][0].what)
        try:
            checks.extend(validator.judge(output, settings, current))
        except validator.errors as err:
            checks.append(_run_check(tasks[0][0].subject, err))
        except Exception as err:  # pylint: disable=broad-except
            checks.append(error_check(current.what, err))
    # Failures first, as in the report, so the drain reason names the first failing check.
    return sorted(checks, key=lambda item: item['status'] != FAIL)
