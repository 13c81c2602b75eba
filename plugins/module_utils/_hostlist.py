# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compress and expand Slurm-style host lists such as ``gpu[001-003,007],login1``.

Pure Python with no Ansible import, so modules, filters and tests can all share it.
Every kind of bad input raises ``ValueError`` with a message that quotes the bad part.
"""

from __future__ import annotations

import itertools
import re
import typing as t

MAX_EXPANSION = 1_000_000

# Only ASCII digits count: int() would accept other Unicode digits and break the round trip.
_LAST_NUMBER = re.compile(r'(.*?)([0-9]+)([^0-9]*)', re.DOTALL)
_BRACKET_GROUP = re.compile(r'\[([^\[\]]*)\]')
_RANGE_TOKEN = re.compile(r'([0-9]+)(?:-([0-9]+))?')
# These characters are hostlist syntax, so a name holding one could not be expanded back.
_RESERVED_IN_NAMES = re.compile(r'[\[\],\s]')


class _NumberedName(t.NamedTuple):
    prefix: str
    digits: str
    suffix: str


class _Range(t.NamedTuple):
    start: int
    end: int
    width: int


# A bracket-free piece of an item is a literal; a bracket group is a tuple of ranges.
_Segment = t.Union[str, t.Tuple[_Range, ...]]
_GroupKey = t.Tuple[str, str, int]


def _padding_width(digits: str) -> int:
    """Return the zero-padded width of a digit string, or 0 when it is not padded."""
    # A leading zero is the only evidence that a number was padded.
    return len(digits) if len(digits) > 1 and digits.startswith('0') else 0


def _format_number(number: int, width: int) -> str:
    """Write a number with the zero padding of its group."""
    return str(number).zfill(width)


# compress ------------------------------------------------------------------


def _validated_names(names: t.Iterable[str]) -> set[str]:
    """Return the distinct names, raising ValueError for anything that is not a usable host name."""
    # A lone string is iterable too, and would otherwise be compressed character by character.
    if isinstance(names, (str, bytes)):
        raise ValueError(f'expected a list of host names, got the single string {names!r}')
    distinct = set()
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f'host name {name!r} is a {type(name).__name__}, not a string')
        if not name:
            raise ValueError(f'host name {name!r} is empty')
        if _RESERVED_IN_NAMES.search(name):
            raise ValueError(f"host name {name!r} contains whitespace or one of '[', ']', ','")
        distinct.add(name)
    return distinct


def _split_last_number(name: str) -> t.Optional[_NumberedName]:
    """Split a name around its last run of digits, or return None when it has no digits."""
    match = _LAST_NUMBER.fullmatch(name)
    return _NumberedName(*match.groups()) if match else None


def _group_numbers(numbered: list[_NumberedName]) -> dict[_GroupKey, list[int]]:
    """Collect the numbers of each (prefix, suffix, width) group."""
    padded_groups = {(n.prefix, n.suffix, _padding_width(n.digits)) for n in numbered if _padding_width(n.digits)}
    groups: dict[_GroupKey, list[int]] = {}
    for name in numbered:
        width = _padding_width(name.digits)
        # An unpadded number as long as a padded group's width (gpu100 beside gpu099) prints the same inside it.
        if not width and (name.prefix, name.suffix, len(name.digits)) in padded_groups:
            width = len(name.digits)
        groups.setdefault((name.prefix, name.suffix, width), []).append(int(name.digits))
    return groups


def _consecutive_runs(sorted_numbers: list[int]) -> list[tuple[int, int]]:
    """Collapse sorted numbers into (first, last) runs of consecutive values."""
    runs: list[tuple[int, int]] = []
    for number in sorted_numbers:
        if runs and number == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], number)
        else:
            runs.append((number, number))
    return runs


def _format_run(run: tuple[int, int], width: int) -> str:
    """Write a run as ``a-b``, or as ``a`` when it holds one number."""
    first, last = run
    if first == last:
        return _format_number(first, width)
    return f'{_format_number(first, width)}-{_format_number(last, width)}'


def _render_group(key: _GroupKey, numbers: list[int]) -> str:
    """Write one group as ``prefix[ranges]suffix``, or plainly when it holds one host."""
    prefix, suffix, width = key
    if len(numbers) == 1:
        return f'{prefix}{_format_number(numbers[0], width)}{suffix}'
    ranges = ','.join(_format_run(run, width) for run in _consecutive_runs(numbers))
    return f'{prefix}[{ranges}]{suffix}'


def compress(names: t.Iterable[str]) -> str:
    """Compress host names into a Slurm hostlist expression.

    ``['gpu001', 'gpu002', 'gpu003', 'gpu007', 'login1']`` becomes ``gpu[001-003,007],login1``.
    Duplicates are dropped and the output order is deterministic, whatever the input order.
    """
    # Each item carries its sort key: (prefix or plain name, suffix, first number, width).
    items: list[tuple[tuple[str, str, int, int], str]] = []
    numbered = []
    for name in _validated_names(names):
        parts = _split_last_number(name)
        if parts is None:
            items.append(((name, '', -1, 0), name))
        else:
            numbered.append(parts)
    for key, numbers in _group_numbers(numbered).items():
        numbers.sort()
        prefix, suffix, width = key
        items.append(((prefix, suffix, numbers[0], width), _render_group(key, numbers)))
    return ','.join(text for _sort_key, text in sorted(items))


# expand --------------------------------------------------------------------


def _split_items(expr: str) -> list[str]:
    """Split an expression at its top-level commas, checking that brackets pair up."""
    items = []
    item_start = 0
    open_at = -1
    for index, char in enumerate(expr):
        if char == '[':
            if open_at >= 0:
                raise ValueError(f"nested '[' at index {index} in {expr!r}")
            open_at = index
        elif char == ']':
            if open_at < 0:
                raise ValueError(f"unbalanced ']' at index {index} in {expr!r}")
            open_at = -1
        elif char == ',' and open_at < 0:
            items.append(expr[item_start:index])
            item_start = index + 1
    if open_at >= 0:
        raise ValueError(f"unclosed '[' at index {open_at} in {expr!r}")
    items.append(expr[item_start:])
    return items


def _parse_range(token: str, group: str, item: str) -> _Range:
    """Parse ``a-b`` or ``a`` from inside a bracket group."""
    if not token:
        raise ValueError(f'empty range in {group!r} of {item!r}')
    match = _RANGE_TOKEN.fullmatch(token)
    if match is None:
        raise ValueError(f'invalid range {token!r} in {item!r}: expected a number or two numbers joined by "-"')
    start_digits, end_digits = match.groups()
    start = int(start_digits)
    end = start if end_digits is None else int(end_digits)
    if end < start:
        raise ValueError(f'reversed range {token!r} in {item!r}')
    return _Range(start, end, _padding_width(start_digits))


def _parse_bracket_group(content: str, item: str) -> tuple[_Range, ...]:
    """Parse the comma-separated ranges between one pair of brackets."""
    group = f'[{content}]'
    if not content.strip():
        raise ValueError(f'empty bracket group {group!r} in {item!r}')
    return tuple(_parse_range(token.strip(), group, item) for token in content.split(','))


def _parse_item(item: str) -> list[_Segment]:
    """Split one balanced item into literal text and bracket groups, left to right."""
    segments: list[_Segment] = []
    literal_start = 0
    for match in _BRACKET_GROUP.finditer(item):
        segments.append(item[literal_start:match.start()])
        segments.append(_parse_bracket_group(match.group(1), item))
        literal_start = match.end()
    segments.append(item[literal_start:])
    return segments


def _expansion_size(segments: list[_Segment]) -> int:
    """Count the names an item expands to, without building them."""
    size = 1
    for segment in segments:
        if not isinstance(segment, str):
            size *= sum(r.end - r.start + 1 for r in segment)
    return size


def _segment_choices(segment: _Segment) -> list[str]:
    """List the strings one segment can stand for, in written order."""
    if isinstance(segment, str):
        return [segment]
    return [_format_number(number, r.width) for r in segment for number in range(r.start, r.end + 1)]


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in the order written.

    ``rack[1-2]-n[01-02]`` gives ``rack1-n01, rack1-n02, rack2-n01, rack2-n02``.
    Duplicates are kept; more than MAX_EXPANSION names raise ValueError.
    """
    if not isinstance(expr, str):
        raise ValueError(f'expected a hostlist string, got {type(expr).__name__} {expr!r}')
    if not expr.strip():
        return []
    names: list[str] = []
    for position, raw_item in enumerate(_split_items(expr), start=1):
        item = raw_item.strip()
        if not item:
            raise ValueError(f'empty item at position {position} in {expr!r}')
        segments = _parse_item(item)
        total = len(names) + _expansion_size(segments)
        # Check before building anything, so n[0-999999999] fails fast instead of filling memory.
        if total > MAX_EXPANSION:
            raise ValueError(f'expanding {item!r} would make {total} names, over the limit of {MAX_EXPANSION}')
        names.extend(''.join(parts) for parts in itertools.product(*map(_segment_choices, segments)))
    return names
