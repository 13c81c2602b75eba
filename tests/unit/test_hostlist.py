# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the Slurm hostlist helpers and the filters built on them."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.hostlist import FilterModule
from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist

FILTERS = FilterModule().filters()


# compress ------------------------------------------------------------------

COMPRESS_CASES = [
    pytest.param(['gpu001', 'gpu002', 'gpu003', 'gpu007', 'login1'], 'gpu[001-003,007],login1', id='brief-example'),
    pytest.param(['n1', 'n2', 'n10'], 'n[1-2,10]', id='unpadded-numeric-order'),
    pytest.param(['n10', 'n2', 'n1'], 'n[1-2,10]', id='input-order-irrelevant'),
    pytest.param(['n01', 'n1', 'n2'], 'n[1-2],n01', id='mixed-widths-stay-apart'),
    pytest.param(['gpu099', 'gpu100', 'gpu101'], 'gpu[099-101]', id='unpadded-number-of-group-width-joins'),
    pytest.param(['gpu099', 'gpu1000'], 'gpu099,gpu1000', id='longer-number-stays-apart'),
    pytest.param(['gpu1-ib', 'gpu2-ib'], 'gpu[1-2]-ib', id='suffix-group'),
    pytest.param(['gpu1-ib', 'gpu2-ib', 'gpu3'], 'gpu3,gpu[1-2]-ib', id='suffix-splits-groups'),
    pytest.param(['rack1-n01', 'rack1-n02', 'rack1-n03'], 'rack1-n[01-03]', id='last-digit-run-is-the-number'),
    pytest.param(['rack1-n01', 'rack2-n01'], 'rack1-n01,rack2-n01', id='earlier-digit-runs-are-prefix'),
    pytest.param(['gpu001-ib', 'gpu002-ib'], 'gpu[001-002]-ib', id='padded-with-suffix'),
    pytest.param(['gpu007'], 'gpu007', id='single-host-plain'),
    pytest.param(['n5', 'n5', 'n6', 'n6'], 'n[5-6]', id='dedupe'),
    pytest.param(['n3', 'n3'], 'n3', id='dedupe-to-single'),
    pytest.param(['login', 'admin', 'n1'], 'admin,login,n1', id='names-without-digits'),
    pytest.param(['login', 'login1', 'login2'], 'login,login[1-2]', id='plain-name-before-its-group'),
    pytest.param(['n1', 'n3', 'n5'], 'n[1,3,5]', id='no-runs'),
    pytest.param(['n0', 'n00', 'n1'], 'n[0-1],n00', id='zero-and-padded-zero'),
    pytest.param(('a1', 'a2'), 'a[1-2]', id='tuple-input'),
    pytest.param((name for name in ['a1', 'a2']), 'a[1-2]', id='generator-input'),
    pytest.param([], '', id='empty'),
]


@pytest.mark.parametrize(('names', 'expected'), COMPRESS_CASES)
def test_compress(names, expected):
    assert _hostlist.compress(names) == expected


COMPRESS_ERRORS = [
    pytest.param(['gpu1', 5], '5', id='int-item'),
    pytest.param(['gpu1', None], 'None', id='none-item'),
    pytest.param(['gpu1', b'gpu2'], "b'gpu2'", id='bytes-item'),
    pytest.param(['gpu1', ''], "''", id='empty-item'),
    pytest.param(['gpu[1]'], "'gpu[1]'", id='bracket-in-name'),
    pytest.param(['a,b'], "'a,b'", id='comma-in-name'),
    pytest.param([' gpu1'], "' gpu1'", id='whitespace-in-name'),
    pytest.param('gpu1', "'gpu1'", id='single-string'),
]


@pytest.mark.parametrize(('names', 'bad_part'), COMPRESS_ERRORS)
def test_compress_rejects(names, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _hostlist.compress(names)
    assert bad_part in str(excinfo.value)


# expand --------------------------------------------------------------------

EXPAND_CASES = [
    pytest.param('gpu[001-003,007],login1', ['gpu001', 'gpu002', 'gpu003', 'gpu007', 'login1'], id='brief-example'),
    pytest.param('rack[1-2]-n[01-02]', ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02'], id='cartesian-product'),
    pytest.param('n[08-11]', ['n08', 'n09', 'n10', 'n11'], id='padding-kept-past-width-change'),
    pytest.param('n[099-101]', ['n099', 'n100', 'n101'], id='padding-three'),
    pytest.param('n[8-11]', ['n8', 'n9', 'n10', 'n11'], id='unpadded'),
    pytest.param('a,b[1-2],c', ['a', 'b1', 'b2', 'c'], id='mixed-items'),
    pytest.param(' a , b[1-2] ,c ', ['a', 'b1', 'b2', 'c'], id='whitespace-stripped'),
    pytest.param('n[1, 3-4]', ['n1', 'n3', 'n4'], id='whitespace-in-brackets'),
    pytest.param('gpu[1-2]-ib', ['gpu1-ib', 'gpu2-ib'], id='suffix'),
    pytest.param('n[3,1-2]', ['n3', 'n1', 'n2'], id='written-order-kept'),
    pytest.param('n1,n[1-2]', ['n1', 'n1', 'n2'], id='duplicates-kept'),
    pytest.param('n[5-5]', ['n5'], id='one-number-range'),
    pytest.param('n[007]', ['n007'], id='single-padded-number'),
    pytest.param('[1-3]', ['1', '2', '3'], id='bare-group'),
    pytest.param('login', ['login'], id='plain-name'),
    pytest.param('', [], id='empty'),
    pytest.param('   ', [], id='blank'),
]


@pytest.mark.parametrize(('expr', 'expected'), EXPAND_CASES)
def test_expand(expr, expected):
    assert _hostlist.expand(expr) == expected


EXPAND_ERRORS = [
    pytest.param('gpu[1-2', "unclosed '['", 'gpu[1-2', id='unclosed-bracket'),
    pytest.param('gpu1-2]', "unbalanced ']'", 'gpu1-2]', id='stray-close-bracket'),
    pytest.param('gpu[1[2]]', "nested '['", 'gpu[1[2]]', id='nested-brackets'),
    pytest.param('gpu[5-3]', 'reversed range', '5-3', id='reversed-range'),
    pytest.param('a,,b', 'empty item', 'a,,b', id='double-comma'),
    pytest.param(',a', 'empty item', ',a', id='leading-comma'),
    pytest.param('a,', 'empty item', 'a,', id='trailing-comma'),
    pytest.param('gpu[]', 'empty bracket group', 'gpu[]', id='empty-brackets'),
    pytest.param('gpu[1,]', 'empty range', 'gpu[1,]', id='empty-range'),
    pytest.param('gpu[a-b]', 'invalid range', 'a-b', id='letters-range'),
    pytest.param('gpu[1-x]', 'invalid range', '1-x', id='letter-end'),
    pytest.param('gpu[1-2-3]', 'invalid range', '1-2-3', id='double-dash'),
    pytest.param('gpu[-3]', 'invalid range', '-3', id='missing-start'),
    pytest.param('n[0-999999999]', 'over the limit', 'n[0-999999999]', id='cap-one-group'),
    pytest.param('a[0-999]b[0-999]c[0-9]', 'over the limit', 'a[0-999]b[0-999]c[0-9]', id='cap-product'),
    pytest.param('a[1-600000],b[1-600000]', 'over the limit', 'b[1-600000]', id='cap-total'),
]


@pytest.mark.parametrize(('expr', 'problem', 'bad_part'), EXPAND_ERRORS)
def test_expand_rejects(expr, problem, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _hostlist.expand(expr)
    message = str(excinfo.value)
    assert problem in message
    assert repr(bad_part) in message


def test_expand_rejects_non_string():
    with pytest.raises(ValueError, match='list'):
        _hostlist.expand(['gpu1'])


def test_expand_allows_exactly_the_cap():
    assert len(_hostlist.expand(f'n[1-{_hostlist.MAX_EXPANSION}]')) == _hostlist.MAX_EXPANSION


# round trips ---------------------------------------------------------------

PREFIXES = ['gpu', 'n', 'node-', 'rack1-n', 'r2-c3-', 'a', '']
SUFFIXES = ['', '-ib', '.lan', 'x']
PLAIN_NAMES = ['login', 'admin', 'head-node', 'db']


def random_hostname(rng: random.Random) -> str:
    """Make a host name with varied prefixes, suffixes, padding and digit lengths."""
    if rng.random() < 0.05:
        return rng.choice(PLAIN_NAMES)
    number = rng.choice([rng.randint(0, 20), rng.randint(0, 150), rng.randint(0, 5000)])
    width = rng.choice([0, 0, 2, 3, 4])
    return f'{rng.choice(PREFIXES)}{str(number).zfill(width)}{rng.choice(SUFFIXES)}'


def random_hostnames(seed: int) -> list[str]:
    """Make a list of host names, duplicates included, from a seed."""
    rng = random.Random(seed)
    return [random_hostname(rng) for _index in range(rng.randint(1, 120))]


ROUND_TRIP_SEEDS = range(300)


@pytest.mark.parametrize('seed', ROUND_TRIP_SEEDS)
def test_round_trip(seed):
    names = random_hostnames(seed)
    compressed = _hostlist.compress(names)
    assert sorted(set(_hostlist.expand(compressed))) == sorted(set(names))
    # Compressing the expansion again must land on the same text.
    assert _hostlist.compress(_hostlist.expand(compressed)) == compressed


@pytest.mark.parametrize('seed', range(20))
def test_compress_ignores_input_order(seed):
    names = random_hostnames(seed)
    shuffled = list(names)
    random.Random(seed).shuffle(shuffled)
    assert _hostlist.compress(shuffled) == _hostlist.compress(names)


def test_compressed_expansion_has_no_duplicates():
    names = random_hostnames(12345)
    expanded = _hostlist.expand(_hostlist.compress(names))
    assert len(expanded) == len(set(expanded))


# filter plugin -------------------------------------------------------------

def test_filter_module_exposes_both_filters():
    assert set(FILTERS) == {'hostlist_compress', 'hostlist_expand'}


def test_filter_compress():
    assert FILTERS['hostlist_compress'](['gpu001', 'gpu002', 'gpu003', 'gpu007', 'login1']) == 'gpu[001-003,007],login1'


def test_filter_expand():
    assert FILTERS['hostlist_expand']('rack[1-2]-n[01-02]') == ['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']


@pytest.mark.parametrize(('value', 'bad_part'), [
    pytest.param('gpu1', 'str', id='string'),
    pytest.param({'gpu1': 1}, 'dict', id='dict'),
    pytest.param(7, 'int', id='int'),
    pytest.param(None, 'NoneType', id='none'),
    pytest.param(['gpu1', 3], '3', id='non-string-item'),
    pytest.param(['gpu1', ''], "''", id='empty-item'),
])
def test_filter_compress_errors(value, bad_part):
    with pytest.raises(AnsibleFilterError) as excinfo:
        FILTERS['hostlist_compress'](value)
    message = str(excinfo.value)
    assert message.startswith('hostlist_compress:')
    assert bad_part in message


@pytest.mark.parametrize(('value', 'bad_part'), [
    pytest.param(['gpu1'], 'list', id='list'),
    pytest.param(3, 'int', id='int'),
    pytest.param(None, 'NoneType', id='none'),
    pytest.param('gpu[5-3]', "'5-3'", id='reversed-range'),
    pytest.param('gpu[1-2', "'gpu[1-2'", id='unclosed-bracket'),
    pytest.param('a,,b', "'a,,b'", id='empty-item'),
])
def test_filter_expand_errors(value, bad_part):
    with pytest.raises(AnsibleFilterError) as excinfo:
        FILTERS['hostlist_expand'](value)
    message = str(excinfo.value)
    assert message.startswith('hostlist_expand:')
    assert bad_part in message


def test_filter_error_keeps_the_cause():
    with pytest.raises(AnsibleFilterError) as excinfo:
        FILTERS['hostlist_expand']('gpu[5-3]')
    assert isinstance(excinfo.value.__cause__, ValueError)


# bounds --------------------------------------------------------------------

# The pathological inputs these guard against took seconds to minutes (or GiBs); the bound is far above what the
# refusals take (~0.1 s) so that a machine busy with other tests does not fail them.
BOUND_S = 5


def timed(call, *args):
    started = time.perf_counter()
    try:
        return call(*args), time.perf_counter() - started
    except _hostlist.HostlistError as exc:
        return exc, time.perf_counter() - started


def test_a_long_prefix_times_a_big_range_fails_at_once_on_the_name_length():
    # 'x'*2000 + '[0-999999]' once built a million 2 kB names (2 GiB) before anything objected.
    expr = 'x' * 2000 + '[0-999999]'
    error, seconds = timed(_hostlist.expand, expr)
    assert isinstance(error, _hostlist.HostlistError) and seconds < BOUND_S
    message = str(error)
    assert 'names of up to 2006 characters, over the limit of 255' in message
    # The input is quoted, cut short.
    assert "'xxxxxxxx" in message and '(2010 characters in all)' in message and len(message) < 400


def test_the_total_characters_are_capped_before_building():
    # A million names of 250 characters each: under the name and count limits, far over the text limit.
    expr = 'x' * 244 + '[000000-999999]'
    error, seconds = timed(_hostlist.expand, expr)
    assert isinstance(error, _hostlist.HostlistError) and seconds < BOUND_S
    assert f'250000000 characters of host names in all, over the limit of {_hostlist.MAX_EXPANDED_CHARS}' in str(error)


def test_the_character_cap_counts_across_items():
    width = 200
    count = _hostlist.MAX_EXPANDED_CHARS // (width + 5) // 2 + 1
    item = 'y' * width + f'[00000-{count - 1:05d}]'
    error, _seconds = timed(_hostlist.expand, f'{item},{item.replace("y", "z")}')
    assert isinstance(error, _hostlist.HostlistError) and 'characters of host names in all' in str(error)
    assert len(_hostlist.expand(item)) == count


@pytest.mark.parametrize(('expr', 'problem'), [
    pytest.param('n[' + '1' * 5000 + ']', 'has a number longer than a host name may be', id='huge-number'),
    pytest.param('n[1-' + '9' * 300 + ']', 'has a number longer than a host name may be', id='huge-range-end'),
    pytest.param('a[0-9]' * 20000, 'over the limit of 1000000', id='many-groups'),
    pytest.param('n' * 300, 'names of up to 300 characters', id='long-literal'),
    pytest.param('n,' * (_hostlist.MAX_EXPRESSION_LENGTH // 2 + 1), 'over the limit of 16777216', id='long-expression'),
    pytest.param('a b', 'whitespace inside the host names', id='inner-space'),
    pytest.param('n[1-2]\tx', 'whitespace inside the host names', id='inner-tab'),
])
def test_expand_bounds(expr, problem):
    error, seconds = timed(_hostlist.expand, expr)
    assert isinstance(error, _hostlist.HostlistError), error
    assert problem in str(error) and len(str(error)) < 600
    assert seconds < BOUND_S


def test_a_long_name_compresses_in_linear_time_or_is_refused():
    # One 40 kB name of digits and a trailing 'a1' once took 16 s in a backtracking regular expression.
    error, seconds = timed(_hostlist.compress, ['1' * 39998 + 'a1'])
    assert isinstance(error, _hostlist.HostlistError) and seconds < BOUND_S
    assert 'has 40000 characters, over the limit of 255' in str(error) and '(40000 characters in all)' in str(error)
    # The split itself is a single pass, whatever the length.
    started = time.perf_counter()
    parts = _hostlist._split_last_number('1' * 999_998 + 'a1')  # pylint: disable=protected-access
    assert time.perf_counter() - started < 1
    assert parts == ('1' * 999_998 + 'a', '1', '')


def test_names_at_the_length_limit_round_trip():
    names = [f"{'p' * 252}{number:03d}" for number in range(5)]
    assert _hostlist.compress(names) == f"{'p' * 252}[000-004]"
    assert _hostlist.expand(_hostlist.compress(names)) == names


def test_values_too_large_to_show_are_still_named():
    with pytest.raises(_hostlist.HostlistError, match='is a int, not a string'):
        _hostlist.compress(['n1', 10 ** 5000])
    with pytest.raises(_hostlist.HostlistError, match='got int <a int too large to show>'):
        _hostlist.expand(10 ** 5000)


def test_errors_are_value_errors():
    assert issubclass(_hostlist.HostlistError, ValueError)


# properties ----------------------------------------------------------------

# Slurm's own forms, and the pieces mutations are made of.
REAL_EXPRESSIONS = ['gpu[001-128,200],login[1-2]', 'r[1-2]-n[01-16]', 'gpu[001-003,007],login1', 'n[08-11]',
                    'rack[1-4]-gpu[01-32]', 'login', 'dgx-a100-[001-064].cluster', 'ib-sw[1-2]', 'n[0-5],n[3-9]']
MUTATION_PIECES = ['[', ']', ',', '-', ' ', '0', '9', '007', '99999999999999999999', '1' * 300, '\x00', '\t', '\u0663',
                   '\u00a0', 'é', 'x' * 260, '[1-3]', '[0-99999999]', '[0-99]', '[5-3]', '[]', ',,']

number_text = st.one_of(st.integers(0, 300).map(str), st.integers(0, 300).map(lambda n: f'{n:03d}'),
                        st.sampled_from(['0', '00', '099', '100', '1000']))
bracket_range = st.one_of(number_text, st.tuples(st.integers(0, 120), st.integers(0, 16), st.integers(0, 4)).map(
    lambda spec: f'{spec[0]:0{spec[2]}d}-{spec[0] + spec[1]:0{spec[2]}d}'))
bracket_group = st.lists(bracket_range, min_size=1, max_size=3).map(lambda ranges: '[' + ','.join(ranges) + ']')
literal = st.text(alphabet='abcgnpux-._0123456789', max_size=8)
# Up to two bracket groups an item, as Slurm writes them (r[1-2]-n[01-16]), so an example stays small.
host_item = st.tuples(literal, st.one_of(st.just(''), bracket_group), literal, st.one_of(st.just(''), bracket_group)).map(
    ''.join).filter(bool)
generated = st.lists(host_item, min_size=1, max_size=4).map(','.join)


@st.composite
def mutated(draw):
    """A real or generated expression with a few cuts, insertions and duplications."""
    text = draw(st.one_of(st.sampled_from(REAL_EXPRESSIONS), generated))
    for _step in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        kind = draw(st.sampled_from(['insert', 'delete', 'duplicate', 'truncate']))
        if kind == 'insert':
            text = text[:at] + draw(st.sampled_from(MUTATION_PIECES)) + text[at:]
        elif kind == 'delete':
            text = text[:at] + text[at + draw(st.integers(1, 3)):]
        elif kind == 'duplicate':
            text = text[:at] + text[at:at + 6] * 2 + text[at + 6:]
        else:
            text = text[:at]
    return text


def check_round_trip(expr):
    """expand gives names or a HostlistError; names compress and expand back to the same set."""
    try:
        names = _hostlist.expand(expr)
    except _hostlist.HostlistError:
        return
    compressed = _hostlist.compress(names)
    assert set(_hostlist.expand(compressed)) == set(names)
    assert _hostlist.compress(_hostlist.expand(compressed)) == compressed


# A fixed seed and no example database: every run tries the same examples.
PROPERTY_SETTINGS = settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))


@seed(15)
@settings(PROPERTY_SETTINGS, max_examples=700)
@given(st.one_of(generated, mutated(), st.text(alphabet='[],- 0123n\x00\u0663', max_size=30)))
def test_property_expand_then_compress_round_trips(expr):
    check_round_trip(expr)


@seed(15)
@settings(PROPERTY_SETTINGS, max_examples=400)
@given(st.lists(st.one_of(literal, st.text(max_size=12)), max_size=20))
def test_property_compress_then_expand_round_trips(names):
    try:
        compressed = _hostlist.compress(names)
    except _hostlist.HostlistError:
        return
    assert set(_hostlist.expand(compressed)) == set(names)
