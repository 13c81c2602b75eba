# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what `dcgmi diag -r <level> -j` prints and judge it: one verdict, the failing GPUs and a drain reason.

Standard library only, no Ansible import: the `llmforge.cluster.dcgm_diag` module and programs on the nodes (a
Slurm health check, an epilog) share this code. Nothing here changes GPU state; it runs dcgmi or reads its output.

The format, as dcgmi writes it (dcgmi/Diag.cpp and nvvs/include/NvvsJsonStrings.h of NVIDIA/DCGM, printed by
jsoncpp: keys in sorted order, tab indentation). Two generations are read:

DCGM 2.x/3.x::

    {"DCGM GPU Diagnostic": {"test_categories": [
         {"category": "Deployment", "tests": [{"name": "Persistence Mode", "results": [{"status": "Pass"}]}, ...]},
         {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
             {"gpu_id": "3", "status": "Fail", "info": "...",
              "warnings": [{"warning": "...", "error_id": 52, "error_category": 10, "error_severity": 2}]}]}]}]},
     "Driver Version Detected": "550.127.08", "GPU Device IDs": ["2330", ...], "GPU Device Serials": {"0": ...},
     "version": "3.3.9"}

  A per-GPU result names its GPU as "gpu_id" (a string) or, in older releases and in nvvs' own output, "gpu_ids"
  (a number, or a comma-separated string for a result that stands for several GPUs); a Deployment result may
  name none. "info" is a string. nvvs' own output writes statuses in capitals and may hold `null` tests.

DCGM 4.x::

    {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [{"name": "memory",
         "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 3, "status": "Fail",
                      "info": ["..."], "warnings": [{...}]}],
         "test_summary": {"status": "Fail", "warnings": [...]}}]}]},
     "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [{"entity_id": 0, ...}]}],
     "metadata": {"Driver Version Detected": "570.133.20", "version": "4.2.3"}}

  test_summary carries the test's overall status and the errors that belong to no entity. "info" is a list.

Either generation, when the run could not complete, prints an error object instead of results:
``{"DCGM Diagnostic": {"runtime_error": "Error: Unable to complete diagnostic for group 2147483647. Return: (-21)
: Host engine connection invalid/disconnected\\n", "version": "4.2.3"}}`` (2.x/3.x under "DCGM GPU Diagnostic").
Statuses dcgmi writes are Pass, Fail and Skip (a warning is written as Fail); Warn and Not Run are read too.

dcgmi exits with its dcgmReturn_t as an 8-bit status: 0 (no failure), 226 (DCGM_ST_NVVS_ERROR, -30: a test
failed), 205 (DCGM_ST_NVVS_ISOLATE_ERROR, -51: a failure whose error code asks to isolate the GPU), and others
for errors (235 DCGM_ST_CONNECTION_NOT_VALID, 217 DCGM_ST_DIAG_ALREADY_RUNNING, 203 DCGM_ST_NVVS_KILLED, ...).

Verdicts: ``pass``; ``warn`` (nothing failed, but a result carries warnings, or a test was skipped on some
entity); ``fail`` (a result or a test summary failed); ``error`` (dcgmi reported a runtime error, exited non-zero
without results, or ran no test at all); ``hang`` (dcgmi did not finish in time). ``healthy`` is pass or warn.
Malformed output (not JSON, truncated, an unknown status, a wrong type) raises DcgmDiagError naming the field.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _checks as checks
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators

PASS, FAIL, WARN, SKIP, ERROR, HANG = 'pass', 'fail', 'warn', 'skip', 'error', 'hang'
VERDICTS = (PASS, WARN, FAIL, ERROR, HANG)
LEVELS = (1, 2, 3, 4)
# Seconds a level may run before the caller gives up: level 1 takes seconds, 2 about two minutes, 3 ten to thirty
# minutes, 4 one to several hours on an 8-GPU node; the margins cover slow nodes and the plugins' setup.
DEFAULT_TIMEOUTS = {1: 120, 2: 600, 3: 2700, 4: 10800}
# Drain reasons: the prefix the collection's drains carry and the bound they keep (as _slurm_drain does).
REASON_PREFIX = 'llmforge:'
MAX_REASON = 120
# The top-level object of each generation, newest first.
ROOT_KEYS = ('DCGM Diagnostic', 'DCGM GPU Diagnostic')
# dcgmi's exit status (dcgmReturn_t & 0xff) and what it means.
EXIT_MEANINGS = {
    0: 'no failure',
    226: 'a test failed (DCGM_ST_NVVS_ERROR)',
    205: 'a failure asks to isolate the GPU (DCGM_ST_NVVS_ISOLATE_ERROR)',
    235: 'the host engine connection is not valid (DCGM_ST_CONNECTION_NOT_VALID)',
    217: 'another diagnostic is already running (DCGM_ST_DIAG_ALREADY_RUNNING)',
    215: 'the diagnostic could not be launched (DCGM_ST_DIAG_BAD_LAUNCH)',
    204: 'the diagnostic binary was not found (DCGM_ST_NVVS_BINARY_NOT_FOUND)',
    203: 'the diagnostic was killed by a signal (DCGM_ST_NVVS_KILLED)',
    202: 'DCGM is paused (DCGM_ST_PAUSED)',
}
_STATUSES = {
    'pass': PASS, 'passed': PASS,
    'fail': FAIL, 'failed': FAIL,
    'warn': WARN, 'warning': WARN,
    'skip': SKIP, 'skipped': SKIP, 'not run': SKIP,
}
# DCGM 4.x entity groups (dcgm_field_entity_group_t) by id, for results that give only the id.
_ENTITY_GROUPS = {1: 'GPU', 2: 'VGPU', 3: 'Switch', 4: 'GPU_I', 5: 'GPU_CI', 6: 'Link', 7: 'CPU', 8: 'CPU_Core'}
# DCGM 2.x/3.x display names of the tests, to the plugin names 4.x prints (and reasons use).
_TEST_KEYS = {
    'gpu memory': 'memory', 'pcie': 'pcie', 'sm stress': 'sm_stress', 'targeted stress': 'targeted_stress',
    'targeted power': 'targeted_power', 'memory bandwidth': 'memory_bandwidth', 'pulse test': 'pulse_test',
    'eud test': 'eud', 'cpu eud test': 'cpu_eud', 'context create': 'context_create',
}
# GPU indices are small; a larger number is a damaged value, not a GPU.
_MAX_ENTITY = 4096
_RETURN = re.compile(r'Return:\s*\((-?[0-9]+)\)\s*:?\s*(.*)')


class DcgmDiagError(Exception):
    """Output that cannot be read as dcgmi diag JSON, or dcgmi that cannot be run; the message says which."""


@dataclasses.dataclass
class Outcome:
    """A status with the warnings and info lines that came with it: what dcgmi prints per entity and per test."""

    status: str
    warnings: t.List[t.Dict[str, t.Any]]
    info: t.List[str]


@dataclasses.dataclass
class EntityResult(Outcome):
    """One test's outcome on one entity (GPU3, CPU0) or, for a result that names none, the node."""

    entity: str
    gpus: t.List[int]


@dataclasses.dataclass
class DiagTest(Outcome):
    """One test (plugin): its name as printed, its key (4.x plugin name), category, status and results."""

    name: str
    key: str
    category: str
    results: t.List[EntityResult]


@dataclasses.dataclass
class DiagResult:
    """What one `dcgmi diag` run says about the node, with the one-line reason a drain can carry."""

    level: int
    verdict: str
    reason: str
    tests: t.List[DiagTest]
    failing_gpus: t.List[int]
    messages: t.List[str]
    counts: t.Dict[str, int]
    dcgm_version: t.Optional[str] = None
    driver_version: t.Optional[str] = None
    runtime_error: t.Optional[str] = None
    exit_code: t.Optional[int] = None
    duration_seconds: t.Optional[float] = None

    @property
    def healthy(self) -> bool:
        return self.verdict in (PASS, WARN)

    def as_dict(self) -> t.Dict[str, t.Any]:
        result = dataclasses.asdict(self)
        result['healthy'] = self.healthy
        return result


# --- reading the document -------------------------------------------------------------------------

def load(text: t.Union[str, bytes]) -> t.Dict[str, t.Any]:
    """The JSON object dcgmi printed. Lines before it (a warning dcgmi or a wrapper printed) are skipped."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    if not isinstance(text, str) or not text.strip():
        raise DcgmDiagError('dcgmi diag -j printed nothing')
    start = text.find('{')
    if start < 0:
        raise DcgmDiagError(f'dcgmi diag -j output is not JSON: {_first_line(text)!r}')
    try:
        document, end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as err:
        where = 'truncated' if err.pos >= len(text.rstrip()) else 'malformed'
        raise DcgmDiagError(f'dcgmi diag -j output is {where} JSON: {err.msg} at line {err.lineno} '
                            f'column {err.colno}') from None
    except RecursionError:
        raise DcgmDiagError('dcgmi diag -j output nests too deeply to be dcgmi output') from None
    except ValueError as err:  # a number of more digits than int() converts
        raise DcgmDiagError(f'dcgmi diag -j output cannot be read: {err}') from None
    rest = text[end:].strip()
    if rest:
        raise DcgmDiagError(f'dcgmi diag -j output has text after the JSON object: {_first_line(rest)!r}')
    if not isinstance(document, dict):
        raise DcgmDiagError(f'dcgmi diag -j output is a JSON {type(document).__name__}, expected an object')
    return document


def _first_line(text: str, limit: int = 160) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0][:limit] if lines else ''


def _kind(value: t.Any) -> str:
    return {dict: 'object', list: 'array', str: 'string', bool: 'boolean', type(None): 'null'}.get(
        type(value), 'number')


def _expect(value: t.Any, kind: type, path: str) -> t.Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        want = {dict: 'an object', list: 'an array', str: 'a string', int: 'a whole number'}[kind]
        raise DcgmDiagError(f'{path}: expected {want}, found {_kind(value)} {_short(value)}')
    return value


def _short(value: t.Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + '...'


def _status(value: t.Any, path: str) -> str:
    _expect(value, str, path)
    status = _STATUSES.get(' '.join(value.lower().split()))
    if status is None:
        raise DcgmDiagError(f'{path}: unknown status {value!r} (dcgmi writes Pass, Fail, Warn or Skip)')
    return status


def _entity_id(value: t.Any, path: str) -> int:
    # ASCII digits only: str.isdigit() takes a superscript digit that int() then refuses.
    number = checks.whole_number(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < _MAX_ENTITY:
        raise DcgmDiagError(f'{path}: expected a GPU or entity index, found {_short(value)}')
    return number


def _gpu_list(value: t.Any, path: str) -> t.List[int]:
    """A 2.x/3.x gpu_id(s): a number, "3", "0,1,2" or a list of those."""
    if isinstance(value, list):
        return sorted({gpu for index, item in enumerate(value) for gpu in _gpu_list(item, f'{path}[{index}]')})
    if isinstance(value, str) and ',' in value:
        return sorted({_entity_id(part, path) for part in value.split(',') if part.strip()})
    return [_entity_id(value, path)]


def _text_list(value: t.Any, path: str) -> t.List[str]:
    """info: a string (2.x/3.x) or a list of strings (4.x)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    _expect(value, list, path)
    return [_expect(item, str, f'{path}[{index}]') for index, item in enumerate(value)]


def _warnings(value: t.Any, path: str) -> t.List[t.Dict[str, t.Any]]:
    """warnings: objects {warning, error_id, error_category, error_severity}, or bare strings (nvvs' own)."""
    if value is None:
        return []
    _expect(value, list, path)
    found = []
    for index, item in enumerate(value):
        where = f'{path}[{index}]'
        if item is None:
            continue
        if isinstance(item, str):
            found.append({'message': item, 'error_id': None, 'error_category': None, 'error_severity': None})
            continue
        _expect(item, dict, where)
        # dcgmi 3.x writes the message of a Deployment test's error under "warnings" (HelperJsonAddBasicTests).
        key = next((name for name in ('warning', 'warnings', 'message') if isinstance(item.get(name), str)), None)
        if key is None:
            raise DcgmDiagError(f"{where}: a warning without its text ('warning' is missing)")
        entry: t.Dict[str, t.Any] = {'message': item[key]}
        for field in ('error_id', 'error_category', 'error_severity'):
            entry[field] = None if item.get(field) is None else _expect(item[field], int, f'{where}.{field}')
        found.append(entry)
    return found


def _entity(result: t.Dict[str, t.Any], path: str) -> t.Tuple[str, t.List[int]]:
    """(label, GPU indices) of a result: GPU3 / CPU0 (4.x entities), GPU3 or GPU0-7 (2.x/3.x ids), or node."""
    if 'entity_id' in result:
        number = _entity_id(result['entity_id'], f'{path}.entity_id')
        group = result.get('entity_group')
        group_id = result.get('entity_group_id')
        if group is None and group_id is not None:
            group = _ENTITY_GROUPS.get(_expect(group_id, int, f'{path}.entity_group_id'), f'entity{group_id}:')
        group = _expect(group, str, f'{path}.entity_group') if group is not None else 'GPU'
        return f'{group}{number}', ([number] if group.upper() == 'GPU' else [])
    for key in ('gpu_id', 'gpu_ids'):
        if result.get(key) is not None:
            gpus = _gpu_list(result[key], f'{path}.{key}')
            return (subject(gpus) if gpus else 'node'), gpus
    return 'node', []


def plugin_key(name: str) -> str:
    """The name a reason uses: 4.x plugin names as they are, 3.x display names mapped or made lower_snake."""
    lowered = ' '.join(name.lower().split())
    return _TEST_KEYS.get(lowered) or re.sub(r'[^a-z0-9]+', '_', lowered).strip('_') or 'test'


def _test(test: t.Dict[str, t.Any], category: str, path: str) -> DiagTest:
    name = _expect(test.get('name'), str, f'{path}.name')
    results = []
    raw_results = test.get('results')
    if raw_results is not None:
        for index, item in enumerate(_expect(raw_results, list, f'{path}.results')):
            where = f'{path}.results[{index}]'
            if item is None:
                continue
            _expect(item, dict, where)
            label, gpus = _entity(item, where)
            if 'status' not in item:
                raise DcgmDiagError(f"{where}: no 'status'")
            results.append(EntityResult(**_outcome(item, where), entity=label, gpus=gpus))
    summary = {'status': None, 'warnings': [], 'info': []}
    if test.get('test_summary') is not None:
        summary = _outcome(_expect(test['test_summary'], dict, f'{path}.test_summary'), f'{path}.test_summary')
    statuses = [result.status for result in results] + ([summary['status']] if summary['status'] else [])
    if FAIL in statuses:
        status = FAIL
    elif WARN in statuses:
        status = WARN
    elif PASS in statuses:
        status = PASS
    else:
        status = SKIP
    return DiagTest(status=status, warnings=summary['warnings'], info=summary['info'], name=name, key=plugin_key(name),
                    category=category, results=results)


def _outcome(item: t.Dict[str, t.Any], where: str) -> t.Dict[str, t.Any]:
    """The status (None when the item has none), warnings and info of one result or test summary at `where`."""
    status = _status(item['status'], f'{where}.status') if 'status' in item else None
    return {'status': status, 'warnings': _warnings(item.get('warnings'), f'{where}.warnings'),
            'info': _text_list(item.get('info'), f'{where}.info')}


def _root(document: t.Dict[str, t.Any]) -> t.Tuple[str, t.Dict[str, t.Any]]:
    for key in ROOT_KEYS:
        if key in document:
            return key, _expect(document[key], dict, key)
    if 'iterations' in document:
        raise DcgmDiagError("dcgmi diag -j output holds 'iterations' (dcgmi diag --iterations): run one iteration")
    found = ', '.join(repr(key) for key in list(document)[:8]) or 'none'
    raise DcgmDiagError(f"dcgmi diag -j output has no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' object "
                        f'(top-level keys: {found})')


def _version(document: t.Dict[str, t.Any], root: t.Dict[str, t.Any], key: str) -> t.Optional[str]:
    """A version string wherever a generation keeps it: 4.x metadata, 3.x top level, or the error object."""
    metadata = document.get('metadata')
    for place in (metadata if isinstance(metadata, dict) else {}, document, root):
        value = place.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def read_tests(document: t.Dict[str, t.Any]) -> t.Tuple[t.List[DiagTest], t.Optional[str], str]:
    """(tests, runtime error or None, root key) of a loaded document; DcgmDiagError naming the field at fault."""
    key, root = _root(document)
    runtime_error = root.get('runtime_error')
    if runtime_error is not None:
        runtime_error = _expect(runtime_error, str, f'{key}.runtime_error').strip() or 'runtime error without a message'
    tests: t.List[DiagTest] = []
    categories = root.get('test_categories')
    if categories is None:
        if runtime_error is None:
            raise DcgmDiagError(f"{key}: neither 'test_categories' nor 'runtime_error' (no results)")
        return tests, runtime_error, key
    for index, category in enumerate(_expect(categories, list, f'{key}.test_categories')):
        path = f'{key}.test_categories[{index}]'
        if category is None:
            continue
        _expect(category, dict, path)
        name = _expect(category.get('category'), str, f'{path}.category')
        for number, test in enumerate(_expect(category.get('tests'), list, f'{path}.tests')):
            if test is None:  # nvvs leaves a null where a test was not run
                continue
            tests.append(_test(_expect(test, dict, f'{path}.tests[{number}]'), name, f'{path}.tests[{number}]'))
    return tests, runtime_error, key


# --- judging --------------------------------------------------------------------------------------

def subject(gpus: t.Iterable[int]) -> str:
    """GPU3, GPU1,6 or GPU0-7: GPU indices in a drain reason, runs of three or more as ranges."""
    ordered = sorted(set(gpus))
    parts = []
    start = 0
    while start < len(ordered):
        end = start
        while end + 1 < len(ordered) and ordered[end + 1] == ordered[end] + 1:
            end += 1
        if end - start >= 2:
            parts.append(f'{ordered[start]}-{ordered[end]}')
        else:
            parts.extend(str(number) for number in ordered[start:end + 1])
        start = end + 1
    return 'GPU' + ','.join(parts) if parts else 'node'


def _subjects(results: t.Iterable[EntityResult]) -> str:
    results = list(results)
    gpus = [gpu for result in results for gpu in result.gpus]
    others = sorted({result.entity for result in results if not result.gpus})
    parts = ([subject(gpus)] if gpus else []) + others
    return ' '.join(parts) if parts else 'node'


def clean_reason(text: str, limit: int = MAX_REASON) -> str:
    """One line for scontrol's Reason=: no quotes or control characters, ASCII, at most `limit` characters."""
    text = re.sub(r'[\s\x00-\x1f\x7f]+', ' ', text.replace('"', '').replace("'", '')).strip()
    text = text.encode('ascii', 'replace').decode('ascii')
    return text[:limit].rstrip()


def make_reason(prefix: str, level: int, verdict: str, parts: t.Sequence[str]) -> str:
    """`<prefix> dcgm L<level> <verdict>: part; part`, dropping parts (`+N more`) to stay within MAX_REASON."""
    head = ' '.join(item for item in (clean_reason(prefix or ''), f'dcgm L{level} {verdict}') if item)
    parts = [clean_reason(part) for part in parts if part]
    for keep in range(len(parts), 0, -1):
        more = f'; +{len(parts) - keep} more' if keep < len(parts) else ''
        text = f"{head}: {'; '.join(parts[:keep])}{more}"
        if len(text) <= MAX_REASON:
            return text
    return clean_reason(f"{head}: {'; '.join(parts)}" if parts else head)


def _runtime_detail(message: str) -> str:
    """`Host engine connection invalid/disconnected (-21)` from dcgmi's `Error: Unable ... Return: (-21) : ...`."""
    line = _first_line(message, 400)
    match = _RETURN.search(line)
    if match and match.group(2).strip():
        return f'{match.group(2).strip().rstrip(".")} ({match.group(1)})'
    return re.sub(r'^Error:\s*', '', line)


def _counts(tests: t.Sequence[DiagTest]) -> t.Dict[str, int]:
    results = [result for test in tests for result in test.results]
    counts = {'tests': len(tests), 'results': len(results), PASS: 0, FAIL: 0, WARN: 0, SKIP: 0}
    for result in results:
        counts[result.status] += 1
    counts['warnings'] = sum(len(result.warnings) for result in results) + sum(len(test.warnings) for test in tests)
    counts['gpus'] = len({gpu for result in results for gpu in result.gpus})
    return counts


def _messages(tests: t.Sequence[DiagTest]) -> t.List[str]:
    messages = []
    for test in tests:
        for warning in test.warnings:
            messages.append(f"{test.key}: {' '.join(warning['message'].split())}")
        for result in test.results:
            for warning in result.warnings:
                messages.append(f"{test.key} {result.entity}: {' '.join(warning['message'].split())}")
    return messages


def judge(tests: t.Sequence[DiagTest], runtime_error: t.Optional[str], level: int,
          reason_prefix: str = REASON_PREFIX) -> DiagResult:
    """The verdict, failing GPUs and reason of parsed tests (see the module docstring for the verdicts)."""
    level = check_level(level)
    tests = list(tests)
    counts = _counts(tests)
    messages = _messages(tests)
    failing = sorted({gpu for test in tests for result in test.results if result.status == FAIL
                      for gpu in result.gpus})
    if runtime_error is not None:
        return DiagResult(level, ERROR, make_reason(reason_prefix, level, ERROR, [_runtime_detail(runtime_error)]),
                          tests, failing, [runtime_error] + messages, counts, runtime_error=runtime_error)
    if not any(test.status != SKIP for test in tests):
        why = 'no test ran (every result skipped)' if tests else 'no test results'
        return DiagResult(level, ERROR, make_reason(reason_prefix, level, ERROR, [why]), tests, failing,
                          messages, counts)
    failed = [test for test in tests if test.status == FAIL]
    if failed:
        parts = [f"{test.key} {_subjects(r for r in test.results if r.status == FAIL)}" for test in failed]
        return DiagResult(level, FAIL, make_reason(reason_prefix, level, FAIL, parts), tests, failing, messages,
                          counts)
    parts = []
    for test in tests:
        flagged = [r for r in test.results if r.status == WARN or (r.warnings and r.status == PASS)]
        if flagged or test.warnings or test.status == WARN:
            parts.append(f'{test.key} {_subjects(flagged)}')
    for test in tests:
        skipped = [r for r in test.results if r.status == SKIP]
        if skipped or (test.status == SKIP and not test.results):
            parts.append(f'{test.key} {_subjects(skipped)} skipped')
    if parts:
        return DiagResult(level, WARN, make_reason(reason_prefix, level, WARN, parts), tests, failing, messages,
                          counts)
    detail = f"{_plural(counts['tests'], 'test')} on {_plural(counts['gpus'], 'GPU')}"
    return DiagResult(level, PASS, make_reason(reason_prefix, level, PASS, [detail]), tests, failing, messages,
                      counts)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def check_level(level: t.Any) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or level not in LEVELS:
        raise DcgmDiagError(f'level must be 1, 2, 3 or 4, got {level!r}')
    return level


def parse(text: t.Union[str, bytes], level: int, reason_prefix: str = REASON_PREFIX) -> DiagResult:
    """Judge the output of `dcgmi diag -r <level> -j` (or a saved copy of it)."""
    check_level(level)
    document = load(text)
    tests, runtime_error, key = read_tests(document)
    result = judge(tests, runtime_error, level, reason_prefix)
    result.dcgm_version = _version(document, document[key], 'version')
    result.driver_version = _version(document, document[key], 'Driver Version Detected')
    return result


def hang_result(level: int, timeout: float, reason_prefix: str = REASON_PREFIX) -> DiagResult:
    """dcgmi did not finish within `timeout` seconds: a result, so that a health check can act on it."""
    level = check_level(level)
    detail = f'timed out after {timeout:g} s'
    return DiagResult(level, HANG, make_reason(reason_prefix, level, HANG, [detail]), [], [],
                      [f'dcgmi diag -r {level} did not finish within {timeout:g} s and was killed'],
                      _counts([]), duration_seconds=float(timeout))


def error_result(level: int, message: str, reason_prefix: str = REASON_PREFIX,
                 exit_code: t.Optional[int] = None) -> DiagResult:
    """dcgmi gave no usable results (its own error text, an exit status without JSON)."""
    level = check_level(level)
    return DiagResult(level, ERROR, make_reason(reason_prefix, level, ERROR, [message]), [], [], [message],
                      _counts([]), exit_code=exit_code)


def as_check(result: DiagResult) -> t.Dict[str, t.Any]:
    """The result as a validator check (_checks.check): name `dcgm`, subject `L<level>`, actual `<verdict>: <detail>`.

    Its drain reason (_slurm_drain.drain_reason) is then the module's: `llmforge: dcgm L3 fail: memory GPU3`, and
    _slurm_drain lifts a drain for `dcgm L<level>` only when a diagnostic of that level passes. pass and warn are
    healthy; fail, error and hang fail.
    """
    status = {PASS: checks.PASS, WARN: checks.WARN}.get(result.verdict, checks.FAIL)
    actual = result.reason.partition(f'dcgm L{result.level} ')[2] or result.verdict
    message = '; '.join(result.messages[:3]) or actual
    return checks.check('dcgm', status, f'L{result.level}', PASS, actual, f'dcgmi diag -r {result.level}: {message}')


# --- running --------------------------------------------------------------------------------------

def command(dcgmi: str, level: int, gpus: t.Optional[t.Sequence[int]] = None) -> t.List[str]:
    """`dcgmi diag -r <level> -j [-i 0,1,...]`."""
    argv = [dcgmi, 'diag', '-r', str(check_level(level)), '-j']
    if gpus:
        for gpu in gpus:
            if isinstance(gpu, bool) or not isinstance(gpu, int) or not 0 <= gpu < _MAX_ENTITY:
                raise DcgmDiagError(f'gpus must be GPU indices (whole numbers from 0), got {gpu!r}')
        argv += ['-i', ','.join(str(gpu) for gpu in sorted(set(gpus)))]
    return argv


def exit_meaning(code: int) -> str:
    return EXIT_MEANINGS.get(code, f'dcgmReturn_t {code - 256 if code > 127 else code}')


def judge_run(level: int, rc: int, stdout: str, stderr: str = '', reason_prefix: str = REASON_PREFIX) -> DiagResult:
    """The result of a finished dcgmi run, its exit status weighed with its JSON.

    JSON that cannot be read raises DcgmDiagError when dcgmi exited 0 (something we do not understand); with a
    non-zero exit it is dcgmi's own error text (no host engine, bad arguments) and the verdict is `error`.
    A non-zero exit with JSON that shows no failure is an `error` too: dcgmi saw something the JSON does not say.
    """
    try:
        result = parse(stdout, level, reason_prefix)
    except DcgmDiagError as err:
        if rc == 0:
            raise
        text = re.sub(r'^Error:\s*', '', _first_line(stdout) or _first_line(stderr) or 'no output')
        result = error_result(level, f'exit {rc}: {text}', reason_prefix, rc)
        result.messages = [f'dcgmi exited {rc} ({exit_meaning(rc)}): {_first_line(stdout) or _first_line(stderr)}',
                           f'the output is not dcgmi diag JSON: {err}']
        return result
    result.exit_code = rc
    if rc != 0 and result.verdict in (PASS, WARN):
        detail = f'dcgmi exited {rc} ({exit_meaning(rc)}) but its JSON shows no failure'
        result.verdict = ERROR
        result.reason = make_reason(reason_prefix, level, ERROR, [detail])
        result.messages.insert(0, detail)
    elif rc == 205:
        result.messages.insert(0, 'dcgmi exited 205: the failure asks to isolate the GPU (DCGM_ST_NVVS_ISOLATE_ERROR)')
    return result


def run_diag(dcgmi: str, level: int, timeout: t.Optional[float] = None, gpus: t.Optional[t.Sequence[int]] = None,
             reason_prefix: str = REASON_PREFIX) -> DiagResult:
    """Run `dcgmi diag -r <level> -j` and judge it; a timeout is the `hang` verdict.

    DcgmDiagError when dcgmi cannot be started (missing, not executable) or prints JSON we cannot read.
    A killed dcgmi may leave its diagnostic running inside nv-hostengine until that finishes: the next run can
    then report DCGM_ST_DIAG_ALREADY_RUNNING (exit 217), an `error` verdict.
    """
    level = check_level(level)
    timeout = DEFAULT_TIMEOUTS[level] if timeout is None else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise DcgmDiagError(f'timeout must be a positive number of seconds, got {timeout!r}')
    argv = command(dcgmi, level, gpus)
    started = time.monotonic()
    try:
        done = proc.run(argv, timeout)
    except proc.CommandError as err:
        if err.reason == proc.TIMEOUT:
            return hang_result(level, timeout, reason_prefix)
        if err.reason == proc.MISSING:
            raise DcgmDiagError(f'{dcgmi} not found: is DCGM (the datacenter-gpu-manager package) installed?') from None
        if err.reason == proc.DENIED:
            raise DcgmDiagError(f'{dcgmi} is not executable (permission denied)') from None
        raise DcgmDiagError(str(err)) from None
    result = judge_run(level, done.rc, done.stdout, done.stderr, reason_prefix)
    result.duration_seconds = round(time.monotonic() - started, 3)
    return result


# --- the dcgm_diag module's work, also run by llmforge-validate-node (validate.yml's Slurm path) ----

def empty_result(level: int, argv: t.Sequence[str] = ()) -> t.Dict[str, t.Any]:
    """What the dcgm_diag module returns beside its message when it could not judge the node."""
    return dict(verdict=ERROR, healthy=False, reason='', level=level, failing_gpus=[], messages=[], counts={},
                tests=[], dcgm_version=None, driver_version=None, runtime_error=None, exit_code=None,
                duration_seconds=None, command=list(argv), changed=False)


def module_work(params: t.Mapping[str, t.Any], current: t.Any) -> t.Dict[str, t.Any]:
    """The dcgm_diag module's result for `params` (its options: level, timeout, dcgmi_path, output, gpus,
    reason_prefix), as it returns it with fail_on_mismatch false. DcgmDiagError, naming the option, when it cannot
    judge the node; `current.what` says what was being read, `current.argv` the command (for the error's result)."""
    current.argv = []
    level = check_level(params['level'])
    timeout = params.get('timeout')
    timeout = DEFAULT_TIMEOUTS[level] if timeout is None else timeout
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise DcgmDiagError(f'timeout must be a positive number of seconds, got {timeout}')
    gpus = params.get('gpus')
    if any(isinstance(gpu, bool) or not isinstance(gpu, int) or gpu < 0 for gpu in gpus or []):
        raise DcgmDiagError(f'gpus must be GPU indices (0 or more), got {gpus}')
    prefix = params.get('reason_prefix') or REASON_PREFIX
    if params.get('output'):
        current.what = f"the saved dcgmi diag output {params['output']}"
        try:
            with open(params['output'], encoding='utf-8', errors='replace') as handle:
                text = handle.read()
        except OSError as err:
            raise DcgmDiagError(f"cannot read output {params['output']}: {err.strerror or err}") from None
        try:
            result = parse(text, level, prefix)
        except DcgmDiagError as err:
            raise DcgmDiagError(f"{params['output']}: {err}") from None
    else:
        dcgmi = str(params.get('dcgmi_path') or 'dcgmi')
        current.argv = command(dcgmi, level, gpus)
        current.what = f"the output of '{' '.join(current.argv)}'"
        result = run_diag(dcgmi, level, timeout, gpus, prefix)
    current.what = 'the dcgmi diag result'
    return dict(result.as_dict(), command=current.argv, changed=False)


# --- as a node validator (_validators.py): level 1 in the health check ------------------------------

# Level 1 takes seconds; its own limit in a health check defaults to this (Slurm kills one after 60 s).
HEALTH_CHECK_TIMEOUT = 45
_HEALTH_CHECK_READING = 'dcgmi diag -r 1'


def _collect(settings: t.Mapping[str, t.Any], timeout: float) -> t.List[validators.Reading]:
    dcgmi, limit = settings['dcgmi'], float(settings['timeout'])
    return [validators.Reading(_HEALTH_CHECK_READING, lambda: run_diag(dcgmi, 1, limit), limit, _HEALTH_CHECK_READING)]


def _judge(outputs: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any], current: t.Any) -> t.List[t.Dict[str, t.Any]]:
    return [as_check(outputs[_HEALTH_CHECK_READING])]


VALIDATOR = validators.Validator(
    name='dcgm', title="DCGM's level-1 diagnostic (dcgmi diag -r 1), judged as the dcgm_diag module judges it",
    settings=(
        validators.Setting('dcgmi', 'command', 'dcgmi', 'The dcgmi command.', package='DCGM (datacenter-gpu-manager)'),
        validators.Setting('timeout', 'seconds', HEALTH_CHECK_TIMEOUT, "The diagnostic's own time limit."),
    ),
    collect=_collect, judge=_judge, errors=(DcgmDiagError,),
    timed_out=lambda reading: as_check(hang_result(1, reading.limit)), stages=('health_check',), module='dcgm_diag')
