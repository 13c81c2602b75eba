# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read the stdout of an nccl-tests binary (all_reduce_perf, alltoall_perf, ...) and judge it.

Pure Python (standard library only, no Ansible import) so the same code runs in the
`llmforge.cluster.nccl_tests` module and on nodes outside Ansible. The format is the one of nccl-tests 2.19.6
(see tests/fixtures/nccl-tests): one row per size with out-of-place then in-place `time algbw busbw #wrong`,
`# Out of bounds values : N OK|FAILED` and `# Avg bus bandwidth : X [OK|FAILED]`. The average mixes every
size, so bandwidth is judged at the plateau: the best out-of-place busbw over the large sizes.
"""

from __future__ import annotations

import math
import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import (
    FAIL, PASS, check as _check, failure_summary as _failure_summary, finite, healthy, skip as _skip)

DEFAULT_PLATEAU_MIN_BYTES = 1 << 30
WHAT = 'nccl-tests'

# ASCII digits only ([0-9], not \d): a line of other scripts' digits is no row, device or count.
_VERSION = re.compile(r'^# nccl-tests version (\S+)(?:.*\bnccl-library=([0-9]+))?')
_COLLECTIVE = re.compile(r'^# Collective test starting: (\S+)')
_DEVICE = re.compile(r'^#\s+Rank\s+([0-9]+)\s+Group\s+([0-9]+)\s+Pid\s+([0-9]+)\s+on\s+(\S+)\s+device\s+([0-9]+)\s+\[([^\]]*)\]\s+(.*?)\s*$')
_OUT_OF_BOUNDS = re.compile(r'^#\s*Out of bounds values\s*:\s*([0-9]+)')
_AVG_BUSBW = re.compile(r'^#\s*Avg bus bandwidth\s*:\s*(\S+)')
_ROW_START = re.compile(r'^\s*[0-9]+\s')
# More digits than any size, count, rank or status nccl-tests prints: a damaged value.
_MAX_DIGITS = 20
_WHOLE = re.compile(rf'^[-+]?[0-9]{{1,{_MAX_DIGITS}}}$')
_RECORDED_EXIT = re.compile(r'^\[rc=(-?[0-9]+)\]\s*$')
# Lines nccl-tests prints when something went wrong: the FAILED verdicts and the `Test failure` family
# (`Test failure`, `Test NCCL failure`, `Test CUDA failure`).
_FAILURE_LINE = re.compile(r'\bFAILED\b|\bTest (?:NCCL |CUDA )?failure\b')
_ERRORISH = re.compile(r'(?i)error|fail|fault|fatal|abort|not found|no such|cannot|invalid|denied|unable|killed|terminated')


class NcclTestsError(ValueError):
    """Output that cannot be read, or a command that produced none; the message says which line or why."""


def nccl_version_string(code: str) -> str:
    """`22809` (NCCL_VERSION_CODE: major*10000 + minor*100 + patch) as `2.28.9`."""
    value = _integer(code, 'the nccl-library version code')
    return f'{value // 10000}.{value // 100 % 100}.{value % 100}'


def _integer(text: str, what: str, line_no: t.Optional[int] = None) -> int:
    """A whole number of at most _MAX_DIGITS digits; NcclTestsError naming the field (and line) otherwise."""
    where = f'line {line_no}: ' if line_no is not None else ''
    if not _WHOLE.match(text):
        raise NcclTestsError(f'{where}{what} {text[:40]!r} is not a plausible whole number')
    return int(text)


def _number(text: str, line_no: int, line: str) -> float:
    number = _ascii_float(text)
    if number is None:
        raise NcclTestsError(f'line {line_no}: {text!r} is not a number in the result row {line.strip()!r}')
    return number


def _ascii_float(text: str) -> t.Optional[float]:
    """float() of ASCII text (nan and inf kept for the judge to refuse); None for other scripts' digits or words."""
    if not text.isascii():
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _wrong(text: str, line_no: int, line: str) -> t.Optional[int]:
    if text == 'N/A':
        return None
    value = _number(text, line_no, line)
    if not math.isfinite(value) or abs(value) >= 10 ** _MAX_DIGITS:
        raise NcclTestsError(f'line {line_no}: #wrong {text[:40]!r} is not a count of elements in the result row {line.strip()[:200]!r}')
    return int(value)


def _parse_row(line: str, line_no: int) -> dict[str, t.Any]:
    fields = line.split()
    if len(fields) != 13:
        raise NcclTestsError(f'line {line_no}: a result row has 13 columns (size count type redop root and '
                             f'time algbw busbw #wrong twice), got {len(fields)}: {line.strip()!r}')
    if not all(_WHOLE.match(field) for field in (fields[0], fields[1], fields[4])):
        raise NcclTestsError(f'line {line_no}: size, count and root must be integers: {line.strip()[:200]!r}')
    size, count, root = int(fields[0]), int(fields[1]), int(fields[4])

    def place(offset: int) -> dict[str, t.Any]:
        return {'time_us': _number(fields[offset], line_no, line),
                'algbw_gbps': _number(fields[offset + 1], line_no, line),
                'busbw_gbps': _number(fields[offset + 2], line_no, line),
                'wrong': _wrong(fields[offset + 3], line_no, line)}

    return {'size': size, 'count': count, 'type': fields[2], 'redop': fields[3], 'root': root,
            'out_of_place': place(5), 'in_place': place(9)}


def parse_output(text: str, stderr: str = '') -> dict[str, t.Any]:
    """Facts from one nccl-tests stdout. Raises NcclTestsError on a malformed row or when no row was printed.

    `stderr`, when the command's error stream was kept apart, only adds failure and error lines.
    """
    facts: dict[str, t.Any] = {'collective': None, 'nccl_tests_version': None, 'nccl_version': None, 'devices': [],
                               'rows': [], 'avg_busbw_gbps': None, 'avg_busbw_verdict': None, 'out_of_bounds': None,
                               'failure_lines': [], 'recorded_exit_code': None}
    errorish = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not line.strip():
            continue
        if _FAILURE_LINE.search(line):
            facts['failure_lines'].append(line.strip())
        if line.startswith('#'):
            _parse_comment(line, facts)
            continue
        recorded = _RECORDED_EXIT.match(line)
        if recorded:
            # The shared captures end with the exit status the capture script saw.
            facts['recorded_exit_code'] = _integer(recorded.group(1), 'the recorded exit status', line_no)
        elif _ROW_START.match(line):
            facts['rows'].append(_parse_row(line, line_no))
        elif _ERRORISH.search(line):
            errorish.append(line.strip())
    for line in stderr.splitlines():
        if _FAILURE_LINE.search(line):
            facts['failure_lines'].append(line.strip())
        elif _ERRORISH.search(line):
            errorish.append(line.strip())
    if not facts['rows']:
        if errorish or facts['failure_lines']:
            raise NcclTestsError(f'no nccl-tests result rows; first error line: {(errorish + facts["failure_lines"])[0]!r}')
        first = next((line.strip() for line in text.splitlines() if line.strip()), None)
        raise NcclTestsError('no nccl-tests result rows in an empty output' if first is None
                             else f'no nccl-tests result rows; output starts with {first[:200]!r}')
    return facts


def _parse_comment(line: str, facts: dict[str, t.Any]) -> None:
    match = _VERSION.match(line)
    if match:
        facts['nccl_tests_version'] = match.group(1)
        if match.group(2):
            facts['nccl_version'] = nccl_version_string(match.group(2))
        return
    match = _COLLECTIVE.match(line)
    if match:
        facts['collective'] = match.group(1)
        return
    match = _DEVICE.match(line)
    if match:
        facts['devices'].append({'rank': _integer(match.group(1), 'the rank'), 'host': match.group(4),
                                 'device': _integer(match.group(5), 'the device'),
                                 'bus_id': match.group(6), 'name': match.group(7)})
        return
    match = _OUT_OF_BOUNDS.match(line)
    if match:
        facts['out_of_bounds'] = _integer(match.group(1), 'the out-of-bounds count')
        return
    match = _AVG_BUSBW.match(line)
    if match:
        facts['avg_busbw_gbps'] = _ascii_float(match.group(1))
        if facts['avg_busbw_gbps'] is None:
            raise NcclTestsError(f'average bus bandwidth is not a number: {line.strip()!r}')
        verdict = line.split(':', 1)[1].split()[1:]
        facts['avg_busbw_verdict'] = verdict[0] if verdict else None


def plateau(rows: t.Sequence[t.Mapping[str, t.Any]], min_bytes: int) -> tuple[float, int, bool]:
    """(best out-of-place busbw over sizes >= min_bytes, its size, False), or the largest size's (..., True).

    A NaN or infinite busbw among them is returned instead: max() over NaN depends on the order, and it is no figure.
    """
    large = [row for row in rows if row['size'] >= min_bytes]
    candidates = large or [max(rows, key=lambda row: row['size'])]
    damaged = [row for row in candidates if finite(row['out_of_place']['busbw_gbps']) is None]
    best = damaged[0] if damaged else max(candidates, key=lambda row: row['out_of_place']['busbw_gbps'])
    return best['out_of_place']['busbw_gbps'], best['size'], not large


def human_bytes(size: int) -> str:
    for unit, scale in (('GiB', 1 << 30), ('MiB', 1 << 20), ('KiB', 1 << 10)):
        if size >= scale and size % scale == 0:
            return f'{size // scale} {unit}'
    return f'{size} B'


def evaluate(facts: t.Mapping[str, t.Any], min_busbw_gbps: t.Optional[float] = None,
             plateau_min_bytes: int = DEFAULT_PLATEAU_MIN_BYTES, exit_code: t.Optional[int] = None) -> dict[str, t.Any]:
    """The module's result: the facts plus the plateau and the checks busbw, wrong, out_of_bounds and exit.

    `exit_code` is the status of the command that was run; None when re-judging a saved output, where a
    `[rc=N]` line recorded by the capture stands in for it.
    """
    subject = facts.get('collective') or WHAT
    rows = facts['rows']
    busbw, at_bytes, fell_back = plateau(rows, plateau_min_bytes)
    where = (f'at {human_bytes(at_bytes)}, the best out-of-place busbw over sizes >= {human_bytes(plateau_min_bytes)}'
             if not fell_back else
             f'at {human_bytes(at_bytes)}, the largest size run, as no size >= {human_bytes(plateau_min_bytes)} was run')
    checks = []
    if finite(busbw) is None:
        checks.append(_check('busbw', FAIL, subject, min_busbw_gbps, str(busbw),
                             f'busbw {where.partition(",")[0]} is not a finite number ({busbw}): no bandwidth to judge'))
    elif min_busbw_gbps is None:
        checks.append(_skip('busbw', f'no min_busbw_gbps set; plateau busbw {busbw:g} GB/s {where}'))
    else:
        ok = busbw >= min_busbw_gbps
        checks.append(_check('busbw', PASS if ok else FAIL, subject, min_busbw_gbps, busbw,
                             f'plateau busbw {busbw:g} GB/s {where}, expected at least {min_busbw_gbps:g} GB/s'))

    wrong = [f"{human_bytes(row['size'])} {place.replace('_', '-')}: {row[place]['wrong']}"
             for row in rows for place in ('out_of_place', 'in_place') if (row[place]['wrong'] or 0) > 0]
    validated = any(row[place]['wrong'] is not None for row in rows for place in ('out_of_place', 'in_place'))
    if not validated:
        checks.append(_skip('wrong', 'every #wrong is N/A (validation off, -c 0)'))
    else:
        checks.append(_check('wrong', FAIL if wrong else PASS, subject, 0, len(wrong),
                             f"wrong elements in {len(wrong)} result(s): {'; '.join(wrong)}" if wrong
                             else 'no wrong elements in any result'))

    oob = facts['out_of_bounds']
    if oob is None:
        checks.append(_skip('out_of_bounds', 'no "# Out of bounds values" line printed'))
    else:
        checks.append(_check('out_of_bounds', FAIL if oob else PASS, subject, 0, oob,
                             f'{oob} out-of-bounds value(s)' if oob else 'no out-of-bounds values'))

    code = exit_code if exit_code is not None else facts.get('recorded_exit_code')
    failures = facts['failure_lines']
    problems = []
    if code:
        problems.append(f'exited with status {code}')
    if failures:
        problems.append(f'printed {failures[0]!r}')
    if code is None and not failures:
        message = 'no failure line in the saved output (exit status unknown)'
    else:
        message = ' and '.join(problems) if problems else 'exited 0 with no failure line'
    checks.append(_check('exit', FAIL if problems else PASS, subject, 0, code, message))

    result = {key: facts[key] for key in ('rows', 'avg_busbw_gbps', 'out_of_bounds', 'nccl_tests_version',
                                          'nccl_version', 'devices', 'collective')}
    result.update(plateau_busbw_gbps=busbw, plateau_bytes=at_bytes, exit_code=code, checks=checks,
                  healthy=healthy(checks))
    return result


def failure_summary(checks: t.Iterable[t.Mapping[str, t.Any]]) -> str:
    return _failure_summary(checks, WHAT)


def run_command(argv: t.Sequence[str], timeout: float) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of argv; a missing program or a timeout raise NcclTestsError naming argv.

    The command runs in its own process group so that a timeout also ends what it started (srun, mpirun ranks).
    """
    try:
        return proc.run(argv, timeout, own_session=True)
    except proc.CommandError as err:
        if err.reason == proc.TIMEOUT:
            raise NcclTestsError(f"'{err.command}' did not finish within {timeout} s (timeout); a hung rank or fabric?") from None
        if err.reason == proc.MISSING:
            raise NcclTestsError(f'{argv[0]} not found: is nccl-tests installed and in PATH?') from None
        raise NcclTestsError(str(err)) from None


def run_and_judge(argv: t.Sequence[str], timeout: float, min_busbw_gbps: t.Optional[float] = None,
                  plateau_min_bytes: int = DEFAULT_PLATEAU_MIN_BYTES) -> dict[str, t.Any]:
    """Run one nccl-tests command and judge its output; rows come from stdout, failure lines from both streams."""
    code, stdout, stderr = run_command(argv, timeout)
    try:
        facts = parse_output(stdout, stderr)
    except NcclTestsError as err:
        raise NcclTestsError(f"'{' '.join(argv)}' exited with status {code}: {err}") from None
    return evaluate(facts, min_busbw_gbps, plateau_min_bytes, exit_code=code)
