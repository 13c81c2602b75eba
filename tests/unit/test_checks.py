# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The guards every parser of measured output shares: finite numbers, ASCII digits, natural sort keys."""

from __future__ import annotations

import math

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _checks as checks
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _dcgm_quarantine as quarantine
from ansible_collections.llmforge.cluster.plugins.module_utils import _ib_topology as ib
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _nccl_fleet as fleet
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as report

HOSTILE_DIGITS = ['\u00b2', '3\u00b2', '\u0663', '\uff13', '\u09e9']


@pytest.mark.parametrize('value, expected', [(0, 0.0), (-2.5, -2.5), (10 ** 20, 1e20), (1e308, 1e308)])
def test_finite_numbers(value, expected):
    assert checks.finite(value) == expected and not checks.non_finite(value)


@pytest.mark.parametrize('value', [math.nan, math.inf, -math.inf, 10 ** 400])
def test_non_finite_numbers(value):
    assert checks.finite(value) is None and checks.non_finite(value)


@pytest.mark.parametrize('value', [None, True, False, '1', 'nan', [], {}])
def test_non_numbers_are_neither(value):
    assert checks.finite(value) is None and not checks.non_finite(value)


@pytest.mark.parametrize('text', ['0', '7', '0042', '9' * 30])
def test_ascii_digits(text):
    assert checks.ascii_digits(text) and checks.whole_number(f' {text}\n') == int(text)


@pytest.mark.parametrize('text', HOSTILE_DIGITS + ['', ' ', '-1', '+1', '1.0', '1e3', '9' * 31, '9' * 5000, None, 7])
def test_not_ascii_digits(text):
    assert not checks.ascii_digits(text) and checks.whole_number(text) is None


@pytest.mark.parametrize('key', [checks.natural_key, fleet.natural_key, ib.natural_key, report._natural],
                         ids=['checks', 'nccl_fleet', 'ib_topology', 'report'])
def test_natural_keys_take_any_name(key):
    names = ['gpu10', 'gpu2', 'gpu' + '9' * 5000, 'gpu\u00b2', '\u00b2', '\u0663', 'n' + '1' * 400, '']
    ordered = sorted(names, key=key)
    assert ordered.index('gpu2') < ordered.index('gpu10')


def test_quarantine_orders_any_node_name():
    names = ['gpu10', 'gpu2', 'gpu' + '9' * 5000, 'gpu\u00b2', '\u0663']
    ordered = quarantine._ordered(names)
    assert ordered.index('gpu2') < ordered.index('gpu10') and len(ordered) == len(names)


class _PlanError(ValueError):
    pass


@pytest.mark.parametrize(('value', 'message'), [
    (['client'], "runs[3] must be a mapping, got ['client']"),
    (None, 'runs[3] must be a mapping, got None'),
    ({'client': 'a'}, "runs[3] has no 'server'"),
])
def test_a_record_without_its_keys_is_refused_in_the_callers_words(value, message):
    with pytest.raises(_PlanError) as raised:
        checks.require_record(value, ('client', 'server'), 'runs[3]', _PlanError)
    assert str(raised.value) == message


def test_a_complete_record_is_returned_as_it_is():
    record = {'client': 'a', 'server': 'b', 'extra': 1}
    assert checks.require_record(record, ('client', 'server'), 'result') is record
