# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check record every validator returns, and the verdict drawn from a list of them.

Pure Python, no Ansible import: shared by gpu_topology, rdma_links and the node health check. Also the two
guards every parser of measured output uses: `finite` (NaN compares False with everything, so a check must refuse it
rather than compare) and `ascii_digits` (str.isdigit() and a Unicode `\\d` also take superscript and Arabic-Indic
digits, which int() refuses or reads as other numbers).
"""

from __future__ import annotations

import math
import re
import typing as t

PASS, FAIL, WARN, SKIP = 'pass', 'fail', 'warn', 'skip'

# Readings and inventory numbers never need more digits than this; int() refuses over 4300 with a ValueError.
MAX_DIGITS = 30
_ASCII_DIGITS = re.compile(r'[0-9]+')
# Runs of at most MAX_DIGITS ASCII digits: a longer run splits into several, each one int() reads.
_DIGIT_RUNS = re.compile(r'([0-9]{1,%d})' % MAX_DIGITS)

# A judge looks at one subject and says (status, actual value, message).
Judge = t.Callable[[t.Any], t.Tuple[str, t.Any, str]]


def check(name: str, status: str, subject: str, expected: t.Any, actual: t.Any, message: str) -> dict[str, t.Any]:
    return {'name': name, 'status': status, 'subject': subject, 'expected': expected, 'actual': actual,
            'message': message}


def skip(name: str, why: str = 'no expectation set') -> dict[str, t.Any]:
    return check(name, SKIP, 'node', None, None, why)


def per_subject(name: str, items: t.Iterable[t.Any], expected: t.Any, subject: t.Callable[[t.Any], str],
                judge: Judge) -> list[dict[str, t.Any]]:
    """One check per item; a single `skip` when there is no expectation."""
    if expected is None:
        return [skip(name)]
    checks = []
    for item in items:
        status, actual, message = judge(item)
        checks.append(check(name, status, subject(item), expected, actual, message))
    return checks


def healthy(checks: t.Iterable[t.Mapping[str, t.Any]]) -> bool:
    return not any(c['status'] == FAIL for c in checks)


def failure_summary(checks: t.Iterable[t.Mapping[str, t.Any]], what: str) -> str:
    """`2 GPU check(s) failed: name (subject): message; ...`, or '' when nothing failed."""
    failing = [f"{c['name']} ({c['subject']}): {c['message']}" for c in checks if c['status'] == FAIL]
    return f'{len(failing)} {what} check(s) failed: ' + '; '.join(failing) if failing else ''


def finite(value: t.Any) -> t.Optional[float]:
    """`value` as a float when it is a real, finite number (not a bool); None for NaN, +-inf, a huge int or a
    non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def non_finite(value: t.Any) -> bool:
    """A number that is there but cannot be judged: NaN, +-inf, or an int too large for a float."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and finite(value) is None


def ascii_digits(text: t.Any, max_digits: int = MAX_DIGITS) -> bool:
    """Whether `text` is a string of 1 to `max_digits` ASCII digits, which int() reads without surprise."""
    return isinstance(text, str) and len(text) <= max_digits and _ASCII_DIGITS.fullmatch(text) is not None


def whole_number(text: t.Any, max_digits: int = MAX_DIGITS) -> t.Optional[int]:
    """The value of a string of ASCII digits (surrounding blanks allowed), or None for anything else."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    return int(text) if ascii_digits(text, max_digits) else None


def natural_key(name: str) -> tuple[t.Any, ...]:
    """Sort key that puts n2 before n10: ASCII digit runs compare as numbers, the text between them as text."""
    return tuple(int(part) if index % 2 else part for index, part in enumerate(_DIGIT_RUNS.split(name)))


def below_fleet(value: float, fleet_median: t.Optional[float], tolerance_pct: float) -> bool:
    """True when `value` is more than tolerance_pct below the fleet median (never without a median)."""
    return bool(fleet_median) and value < fleet_median * (1 - tolerance_pct / 100)


def require_record(value: t.Any, keys: t.Iterable[str], what: str,
                   error: t.Callable[[str], Exception] = ValueError) -> t.Any:
    """`value` when it is a mapping holding every one of `keys`; otherwise `error` raised with a message that starts
    with `what` (how the caller names the record) and says what is wrong."""
    if not isinstance(value, t.Mapping):
        raise error(f'{what} must be a mapping, got {value!r}')
    for key in keys:
        if key not in value:
            raise error(f'{what} has no {key!r}')
    return value
