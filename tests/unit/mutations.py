"""Hypothesis strategies that damage real captured inputs, shared by the property tests.

Text and bytes mutations: truncation at any point, a flipped byte, a deleted or duplicated line, a number
replaced by a hostile one (hundreds or thousands of digits, 1e400, inf, nan, -0, negative, a superscript,
Arabic-Indic or fullwidth digit), an inserted NUL
byte, inserted bytes that are not UTF-8. Structure mutations (JSON documents, inventory dicts): one value
anywhere in the tree swapped for a value of the wrong type or a hostile number, or a key removed.
Each example applies one to three mutations, so damage combines.
"""

from __future__ import annotations

import collections
import copy
import json
import math
import os
import re
import sys
import traceback
import typing as t

from hypothesis import strategies as st

HOSTILE_NUMBERS = ('1' * 400, '9' * 5000, '1e400', '-1e400', 'inf', '-inf', 'nan', 'NaN', '-0', '-1', '0', '0.0',
                   '18446744073709551616', '1.5', '٣', '0x10', '\u00b2', '1\u00b2', '\uff13', 'Infinity', '-nan')
BAD_BYTES = (b'\x00', b'\xff', b'\xfe\xff', b'\xc3', b'\xed\xa0\x80', b'\x80\x80', b'\r', b'\t', b'\x1b[0m')
_NUMBER = re.compile(rb'\d+(?:\.\d+)?')

HOSTILE_VALUES: tuple[t.Any, ...] = (None, True, False, 0, -1, 10 ** 400, 1e308, math.inf, -math.inf, math.nan, -0.0,
                                     '', 'x', '\x00', '1' * 400, '9' * 5000, 'nan', 'inf', '-1', '\u00b2', '\u0663',
                                     [], [None], {}, {'a': None}, [[[]]])


@st.composite
def _mutate_once(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(('truncate', 'flip', 'delete_line', 'dup_line', 'number', 'insert')))
    if kind == 'truncate':
        return data[:draw(st.integers(0, len(data)))]
    if kind == 'flip' and data:
        at = draw(st.integers(0, len(data) - 1))
        return data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    if kind in ('delete_line', 'dup_line'):
        lines = data.split(b'\n')
        at = draw(st.integers(0, len(lines) - 1))
        lines[at:at + 1] = [] if kind == 'delete_line' else [lines[at]] * draw(st.integers(2, 3))
        return b'\n'.join(lines)
    if kind == 'number':
        numbers = list(_NUMBER.finditer(data))
        if numbers:
            match = draw(st.sampled_from(numbers))
            hostile = draw(st.sampled_from(HOSTILE_NUMBERS)).encode()
            return data[:match.start()] + hostile + data[match.end():]
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.sampled_from(BAD_BYTES)) + data[at:]


@st.composite
def mutated_bytes(draw: st.DrawFn, originals: t.Sequence[bytes]) -> bytes:
    """One of `originals` with one to three mutations."""
    data = draw(st.sampled_from(list(originals)))
    for _round in range(draw(st.integers(1, 3))):
        data = draw(_mutate_once(data))
    return data


@st.composite
def mutated_text(draw: st.DrawFn, originals: t.Sequence[bytes]) -> str:
    """Mutated bytes decoded as command output is (bad bytes replaced), or with lone surrogates kept."""
    data = draw(mutated_bytes(originals))
    return data.decode('utf-8', draw(st.sampled_from(('replace', 'replace', 'surrogateescape'))))


def _paths(value: t.Any, prefix: tuple = ()) -> t.Iterator[tuple]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


@st.composite
def mutated_structure(draw: st.DrawFn, originals: t.Sequence[t.Any]) -> t.Any:
    """A deep copy of one of `originals` with one to three values swapped for hostile ones or keys removed."""
    value = copy.deepcopy(draw(st.sampled_from(list(originals))))
    for _round in range(draw(st.integers(1, 3))):
        paths = list(_paths(value))
        path = draw(st.sampled_from(paths))
        hostile = draw(st.sampled_from(HOSTILE_VALUES))
        if not path:
            value = copy.deepcopy(hostile)
            continue
        parent = value
        for key in path[:-1]:
            parent = parent[key]
        if isinstance(parent, dict) and draw(st.booleans()) and draw(st.booleans()):
            del parent[path[-1]]
        else:
            parent[path[-1]] = copy.deepcopy(hostile)
    return value


# LLMFORGE_PROPERTY_TALLY=1: count examples and escaped exceptions per test instead of failing on the first one.
TALLY = os.environ.get('LLMFORGE_PROPERTY_TALLY') == '1'
TRIED: collections.Counter = collections.Counter()
ESCAPED: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def _own(err: BaseException, own: t.Union[type, tuple]) -> bool:
    """`own`, not a decoding or JSON error that merely subclasses ValueError."""
    return isinstance(err, own) and not isinstance(err, (UnicodeError, json.JSONDecodeError)) and bool(str(err).strip())


def assert_own_error(call: t.Callable[[], t.Any], own: t.Union[type, tuple]) -> None:
    """`call()` returns, or raises `own` with a non-empty message; any other exception fails the test."""
    name = sys._getframe(1).f_code.co_name  # pylint: disable=protected-access
    TRIED[name] += 1
    try:
        call()
    except Exception as err:  # pylint: disable=broad-except
        if _own(err, own):
            return
        if not TALLY:
            raise
        where = traceback.extract_tb(err.__traceback__)[-1]
        ESCAPED[name][f'{type(err).__name__} at {os.path.basename(where.filename)}:{where.lineno}'] += 1
