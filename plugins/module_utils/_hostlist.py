# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compress and expand Slurm-style host lists such as ``gpu[001-003,007],login1``.

Pure Python with no Ansible import, so modules, filters and tests can all share it.
Every kind of bad input raises ``HostlistError`` (a ``ValueError``) with a message that quotes the bad part.

Both directions are bounded in memory and run in time linear in their input and output: an expansion is
sized before anything is built, and the limits below are far above any real cluster (4,096 nodes with
names of 64 characters expand to 256 KiB of text).
"""

from __future__ import annotations

import itertools
import re
import typing as t

# Most names one expression may expand to.
MAX_EXPANSION = 1_000_000
# Longest host name, in either direction: DNS allows 253 characters for a whole domain name.
MAX_NAME_LENGTH = 255
# Most characters all the names of one expansion may hold together (8 MiB of text).
MAX_EXPANDED_CHARS = 8 * 1024 * 1024
# Longest expression expand() reads; a compressed list never comes near it.
MAX_EXPRESSION_LENGTH = 2 * MAX_EXPANDED_CHARS
# How much of a long input an error message quotes.
_QUOTED_LENGTH = 200

# Only ASCII digits count: int() would accept other Unicode digits and break the round trip.
_ASCII_DIGITS = frozenset('0123456789')
_WHITESPACE = re.compile(r'\s')
_BRACKET_GROUP = re.compile(r'\[([^\[\]]*)\]')
_RANGE_TOKEN = re.compile(r'([0-9]+)(?:-([0-9]+))?')
# These characters are hostlist syntax, so a name holding one could not be expanded back.
_RESERVED_IN_NAMES = re.compile(r'[\[\],\s]')


class HostlistError(ValueError):
    """A value that is not a usable host list; the message quotes the bad part."""


def _quoted(value: object) -> str:
    """The repr of a value for an error message, cut short when the value is long."""
    try:
        text = repr(value)
    except ValueError:
        # An int of more digits than Python converts to text.
        return f'<a {type(value).__name__} too large to show>'
    if len(text) <= _QUOTED_LENGTH:
        return text
    if isinstance(value, str):
        return f'{text[:_QUOTED_LENGTH]}... ({len(value)} characters in all)'
    return f'{text[:_QUOTED_LENGTH]}... ({len(text)} characters written out)'


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
    """Return the distinct names, raising HostlistError for anything that is not a usable host name."""
    # A lone string is iterable too, and would otherwise be compressed character by character.
    if isinstance(names, (str, bytes)):
        raise HostlistError(f'expected a list of host names, got the single string {_quoted(names)}')
    distinct = set()
    for name in names:
        if not isinstance(name, str):
            raise HostlistError(f'host name {_quoted(name)} is a {type(name).__name__}, not a string')
        if not name:
            raise HostlistError(f'host name {name!r} is empty')
        if len(name) > MAX_NAME_LENGTH:
            raise HostlistError(f'host name {_quoted(name)} has {len(name)} characters, over the limit of {MAX_NAME_LENGTH}')
        if _RESERVED_IN_NAMES.search(name):
            raise HostlistError(f"host name {_quoted(name)} contains whitespace or one of '[', ']', ','")
        distinct.add(name)
    return distinct


def _split_last_number(name: str) -> t.Optional[_NumberedName]:
    """Split a name around its last run of digits, or return None when it has no digits."""
    # A plain scan from the end: one pass over the name, where a regular expression could backtrack.
    number_end = len(name)
    while number_end and name[number_end - 1] not in _ASCII_DIGITS:
        number_end -= 1
    if not number_end:
        return None
    number_start = number_end
    while number_start and name[number_start - 1] in _ASCII_DIGITS:
        number_start -= 1
    return _NumberedName(name[:number_start], name[number_start:number_end], name[number_end:])


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
                raise HostlistError(f"nested '[' at index {index} in {_quoted(expr)}")
            open_at = index
        elif char == ']':
            if open_at < 0:
                raise HostlistError(f"unbalanced ']' at index {index} in {_quoted(expr)}")
            open_at = -1
        elif char == ',' and open_at < 0:
            items.append(expr[item_start:index])
            item_start = index + 1
    if open_at >= 0:
        raise HostlistError(f"unclosed '[' at index {open_at} in {_quoted(expr)}")
    items.append(expr[item_start:])
    return items


def _parse_range(token: str, group: str, item: str) -> _Range:
    """Parse ``a-b`` or ``a`` from inside a bracket group."""
    if not token:
        raise HostlistError(f'empty range in {_quoted(group)} of {_quoted(item)}')
    match = _RANGE_TOKEN.fullmatch(token)
    if match is None:
        raise HostlistError(f'invalid range {_quoted(token)} in {_quoted(item)}: expected a number or two numbers joined by "-"')
    start_digits, end_digits = match.groups()
    # Checked before int(), whose time grows faster than the length of the digits.
    if max(len(start_digits), len(end_digits or '')) > MAX_NAME_LENGTH:
        raise HostlistError(f'range {_quoted(token)} in {_quoted(item)} has a number longer than a host name may be '
                            f'({MAX_NAME_LENGTH} characters)')
    start = int(start_digits)
    end = start if end_digits is None else int(end_digits)
    if end < start:
        raise HostlistError(f'reversed range {_quoted(token)} in {_quoted(item)}')
    return _Range(start, end, _padding_width(start_digits))


def _parse_bracket_group(content: str, item: str) -> tuple[_Range, ...]:
    """Parse the comma-separated ranges between one pair of brackets."""
    group = f'[{content}]'
    if not content.strip():
        raise HostlistError(f'empty bracket group {_quoted(group)} in {_quoted(item)}')
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
    for segment in segments:
        # compress() refuses such names, so they could never come back from a round trip.
        if isinstance(segment, str) and _WHITESPACE.search(segment):
            raise HostlistError(f'whitespace inside the host names of {_quoted(item)}')
    return segments


def _range_chars(number_range: _Range) -> tuple[int, int]:
    """The characters all the numbers of a range take together when written, and the longest one."""
    total = 0
    low = number_range.start
    while low <= number_range.end:
        # One band of numbers with the same count of digits at a time: a handful of steps, not one per number.
        digits = len(str(low))
        high = min(number_range.end, 10 ** digits - 1)
        total += (high - low + 1) * max(digits, number_range.width)
        low = high + 1
    return total, max(len(str(number_range.end)), number_range.width)


class _Size(t.NamedTuple):
    names: int
    chars: int
    longest: int


def _expansion_size(segments: list[_Segment]) -> _Size:
    """Count the names an item expands to and the characters they hold, without building them."""
    # Each segment: how many strings it stands for, their characters together, the longest.
    parts = []
    names = 1
    for segment in segments:
        if isinstance(segment, str):
            parts.append((1, len(segment), len(segment)))
            continue
        count = sum(r.end - r.start + 1 for r in segment)
        names *= count
        if names > MAX_EXPANSION:
            # Stop here: the product of many groups would only grow.
            return _Size(names, 0, 0)
        sizes = [_range_chars(r) for r in segment]
        parts.append((count, sum(chars for chars, _longest in sizes), max(longest for _chars, longest in sizes)))
    # Every string of a segment appears in names // count of the names.
    chars = sum(part_chars * (names // count) for count, part_chars, _longest in parts)
    return _Size(names, chars, sum(longest for _count, _chars, longest in parts))


def _segment_choices(segment: _Segment) -> list[str]:
    """List the strings one segment can stand for, in written order."""
    if isinstance(segment, str):
        return [segment]
    return [_format_number(number, r.width) for r in segment for number in range(r.start, r.end + 1)]


def expand(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in the order written.

    ``rack[1-2]-n[01-02]`` gives ``rack1-n01, rack1-n02, rack2-n01, rack2-n02``.
    Duplicates are kept. More than MAX_EXPANSION names, more than MAX_EXPANDED_CHARS characters in all, a name
    longer than MAX_NAME_LENGTH or an expression longer than MAX_EXPRESSION_LENGTH raise HostlistError.
    """
    if not isinstance(expr, str):
        raise HostlistError(f'expected a hostlist string, got {type(expr).__name__} {_quoted(expr)}')
    if len(expr) > MAX_EXPRESSION_LENGTH:
        raise HostlistError(f'hostlist {_quoted(expr)} has {len(expr)} characters, over the limit of {MAX_EXPRESSION_LENGTH}')
    if not expr.strip():
        return []
    names: list[str] = []
    chars = 0
    for position, raw_item in enumerate(_split_items(expr), start=1):
        item = raw_item.strip()
        if not item:
            raise HostlistError(f'empty item at position {position} in {_quoted(expr)}')
        segments = _parse_item(item)
        size = _expansion_size(segments)
        # Checked before building anything, so n[0-999999999] fails fast instead of filling memory.
        total = len(names) + size.names
        if total > MAX_EXPANSION:
            raise HostlistError(f'expanding {_quoted(item)} would make {total} names, over the limit of {MAX_EXPANSION}')
        if size.longest > MAX_NAME_LENGTH:
            raise HostlistError(f'expanding {_quoted(item)} would make names of up to {size.longest} characters, '
                                f'over the limit of {MAX_NAME_LENGTH}')
        chars += size.chars
        if chars > MAX_EXPANDED_CHARS:
            raise HostlistError(f'expanding {_quoted(item)} would make {chars} characters of host names in all, '
                                f'over the limit of {MAX_EXPANDED_CHARS}')
        names.extend(''.join(parts) for parts in itertools.product(*map(_segment_choices, segments)))
    return names
