# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate role's DCGM quarantine: candidates, release decisions, reservation arithmetic, report and metrics."""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _dcgm_quarantine as quarantine
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as report
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / 'tests' / 'fixtures' / 'dcgm'
L3_FAIL = 'llmforge: dcgm L3 fail: memory GPU3; targeted_power GPU6'


def module_result(fixture: str, level: int, rc: int = 0) -> dict:
    """What the dcgm_diag module returns for a fixture (as_dict plus command and changed)."""
    text = (FIXTURES / fixture).read_text(encoding='utf-8')
    result = dcgm.judge_run(level, rc, text)
    result.duration_seconds = 2.5
    return dict(result.as_dict(), command=['dcgmi'], changed=False)


def hang(level: int, timeout: int = 5) -> dict:
    return dict(dcgm.hang_result(level, timeout).as_dict(), command=['dcgmi'], changed=False)


def scontrol(name: str, state: str = 'IDLE', reason: str = '') -> dict:
    line = f'NodeName={name} Arch=x86_64 CoresPerSocket=4 State={state} ThreadsPerCore=1'
    if reason:
        line += f' Reason={reason} [root@2026-12-01T10:00:00]'
    return {'rc': 0, 'stdout': line + ' Comment=(null)', 'item': name}


def node(host: str, fast: dict | None, state: dict | None = None) -> dict:
    return {'host': host, 'slurm_name': host, 'fast': fast, 'state': state if state is not None else scontrol(host)}


def plan_of(*nodes: dict) -> list[dict]:
    return quarantine.quarantine_plan(list(nodes), 1, 3)


# --- candidates ------------------------------------------------------------------------------------

def test_a_failing_fast_tier_is_quarantined_with_a_pending_reason():
    plan = plan_of(node('gpu1', module_result('l1-pass.json', 1)), node('gpu2', module_result('l1-fail.json', 1, 205)))
    by_host = {entry['host']: entry for entry in plan}
    assert not by_host['gpu1']['candidate'] and not by_host['gpu1']['drain']
    gpu2 = by_host['gpu2']
    assert gpu2['candidate'] and gpu2['drain'] and gpu2['slurm']
    assert gpu2['reason'] == 'llmforge: dcgm L3 pending: L1 fail: software GPU3'
    assert gpu2['fast']['verdict'] == 'fail' and gpu2['fast']['failing_gpus'] == [3]


@pytest.mark.parametrize('fast', [hang(1), module_result('error-hostengine.json', 1, 235),
                                  {'failed': True, 'msg': 'dcgmi not found: is DCGM installed?', 'verdict': 'error',
                                   'reason': ''}])
def test_hang_and_error_are_failures_too(fast):
    entry, = plan_of(node('gpu2', fast))
    assert entry['candidate'] and entry['reason'].startswith('llmforge: dcgm L3 pending: L1 ')
    assert len(entry['reason']) <= drain.MAX_REASON


def test_the_pending_reason_is_lifted_only_by_the_long_level():
    entry, = plan_of(node('gpu2', module_result('l1-fail.json', 1, 205)))
    drained = {'name': 'gpu2', 'state': 'IDLE+DRAIN', 'reason': entry['reason'], 'drained': True}
    l1_pass = [dcgm.as_check(dcgm.judge_run(1, 0, (FIXTURES / 'l1-pass.json').read_text()))]
    l3_pass = [dcgm.as_check(dcgm.judge_run(3, 0, (FIXTURES / 'l3-pass.json').read_text()))]
    assert drain.drain_action(l1_pass, drained)['action'] is None
    assert drain.drain_action(l3_pass, drained)['action'] == 'resume'


def test_an_administrators_drain_is_left_alone():
    entry, = plan_of(node('gpu1', module_result('l1-fail.json', 1, 205),
                          scontrol('gpu1', 'IDLE+DRAIN', 'admin: fan swap')))
    assert not entry['candidate'] and not entry['drain']
    assert 'drained by someone else (admin: fan swap)' in entry['why']


@pytest.mark.parametrize('old, pending', [
    ('llmforge: dcgm L1 fail: software GPU3', 'llmforge: dcgm L3 pending: L1 fail: software GPU3'),
    (L3_FAIL, 'llmforge: dcgm L3 pending: L3 fail: memory GPU3; targeted_power GPU6'),
])
def test_our_dcgm_drains_are_retested_even_when_the_fast_tier_passes(old, pending):
    entry, = plan_of(node('gpu2', module_result('l1-pass.json', 1), scontrol('gpu2', 'IDLE+DRAIN', old)))
    assert entry['candidate'] and entry['drain'] and entry['reason'] == pending


def test_a_pending_node_is_not_drained_again():
    old = 'llmforge: dcgm L3 pending: L1 fail: software GPU3'
    entry, = plan_of(node('gpu2', module_result('l1-fail.json', 1, 205), scontrol('gpu2', 'IDLE+DRAIN', old)))
    assert entry['candidate'] and not entry['drain']


@pytest.mark.parametrize('fast', ['l1-pass.json', 'l1-fail.json'])
def test_other_llmforge_drains_are_never_candidates(fast):
    # Its reason stays: replacing it with the pending one could resume a node whose PCIe link is still degraded.
    entry, = plan_of(node('gpu2', module_result(fast, 1, 0 if 'pass' in fast else 205),
                          scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: pcie_width GPU0 8')))
    assert not entry['candidate'] and not entry['drain']
    assert entry['why'].startswith('drained for another check (llmforge: pcie_width GPU0 8)')


def test_without_slurm_the_long_diagnostic_still_runs_but_nothing_is_drained():
    entry, = plan_of(node('gpu2', module_result('l1-fail.json', 1, 205), {'skipped': True, 'item': 'gpu2'}))
    assert entry['candidate'] and not entry['slurm'] and not entry['drain']


def test_an_unreached_node_is_no_candidate():
    entry, = plan_of(node('gpu2', None))
    assert not entry['candidate'] and entry['fast'] is None


# --- release ---------------------------------------------------------------------------------------

def release(long: dict | None, state: dict, fast: dict | None = None):
    plan = plan_of(node('gpu2', fast or module_result('l1-fail.json', 1, 205)))
    return plan, quarantine.release_plan(plan, {'gpu2': long}, {'gpu2': state}, 3)


def test_a_long_pass_resumes_the_node():
    _plan, (decision,) = release(module_result('l3-pass.json', 3),
                                 scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: dcgm L3 pending: L1 fail: software GPU3'))
    assert decision['release'] is True and decision['action'] == 'resume'


def test_a_long_fail_keeps_the_node_with_the_long_reason():
    _plan, (decision,) = release(module_result('l3-fail.json', 3, 205),
                                 scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: dcgm L3 pending: L1 fail: software GPU3'))
    assert decision['release'] is False and decision['action'] == 'drain' and decision['reason'] == L3_FAIL


def test_a_long_hang_keeps_the_node():
    _plan, (decision,) = release(hang(3, 5), scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: dcgm L3 pending: L1 hang'))
    assert decision['reason'] == 'llmforge: dcgm L3 hang: timed out after 5 s' and decision['action'] == 'drain'


def test_an_unchanged_reason_is_not_set_again():
    _plan, (decision,) = release(module_result('l3-fail.json', 3, 205), scontrol('gpu2', 'IDLE+DRAIN', L3_FAIL))
    assert decision['release'] is False and decision['action'] is None


def test_a_reason_someone_else_set_meanwhile_is_kept():
    _plan, (passed,) = release(module_result('l3-pass.json', 3), scontrol('gpu2', 'IDLE+DRAIN', 'admin: RMA'))
    assert passed['release'] is True and passed['action'] is None
    _plan, (failed,) = release(module_result('l3-fail.json', 3, 205), scontrol('gpu2', 'IDLE+DRAIN', 'admin: RMA'))
    assert failed['release'] is False and failed['action'] is None


def test_no_long_result_is_an_error_and_a_skipped_one_decides_nothing():
    _plan, (missing,) = release(None, scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: dcgm L3 pending: x'))
    assert missing['release'] is False and missing['reason'].startswith('llmforge: dcgm L3 error: ')
    _plan, (skipped,) = release({'skipped': True, 'skip_reason': 'check mode'}, scontrol('gpu2'))
    assert skipped['release'] is None and skipped['action'] is None and skipped['long'] is None


# --- reservation -----------------------------------------------------------------------------------

def shown(nodes: str) -> dict:
    return {'rc': 0, 'stdout': f'ReservationName=llmforge_quarantine StartTime=2026-12-01T10:00:00 '
                               f'EndTime=2027-12-01T10:00:00 Duration=365-00:00:00 Nodes={nodes} NodeCnt=2 '
                               f'Flags=MAINT,IGNORE_JOBS Users=root'}


ABSENT = {'rc': 1, 'stdout': 'Reservation llmforge_quarantine not found', 'stderr': ''}


def test_reservation_nodes():
    assert quarantine.reservation_nodes(shown('gpu[1-2],gpu10')) == ['gpu1', 'gpu2', 'gpu10']
    assert quarantine.reservation_nodes(ABSENT) is None
    assert quarantine.reservation_nodes({'skipped': True}) is None
    assert quarantine.reservation_nodes(shown('(null)')) == []


def test_reservation_commands():
    name = 'llmforge_quarantine'
    assert quarantine.reservation_command(name, None, ['gpu2']) == [
        'scontrol', 'create', 'reservation', 'ReservationName=llmforge_quarantine', 'StartTime=now',
        'Duration=UNLIMITED', 'Users=root', 'Flags=MAINT,IGNORE_JOBS', 'Nodes=gpu2']
    assert quarantine.reservation_command(name, None, []) == []
    assert quarantine.reservation_command(name, ['gpu2'], ['gpu2']) == []
    assert quarantine.reservation_command(name, ['gpu2'], ['gpu10', 'gpu2']) == [
        'scontrol', 'update', 'ReservationName=llmforge_quarantine', 'Nodes=gpu2,gpu10']
    assert quarantine.reservation_command(name, ['gpu2'], []) == [
        'scontrol', 'delete', 'ReservationName=llmforge_quarantine']
    with pytest.raises(quarantine.QuarantineError, match='one word'):
        quarantine.reservation_command('a b', None, ['gpu2'])


def test_wanted_nodes():
    assert quarantine.wanted_nodes(None, ['gpu2']) == ['gpu2']
    assert quarantine.wanted_nodes(['gpu1', 'gpu2'], ['gpu3'], ['gpu1']) == ['gpu2', 'gpu3']
    assert quarantine.wanted_nodes(['gpu2'], ['gpu2'], ['gpu2']) == ['gpu2']
    assert quarantine.wanted_nodes(['gpu2'], [], ['gpu2']) == []


# --- report and metrics ----------------------------------------------------------------------------

def test_report_results_of_a_node_that_stays_quarantined():
    plan, decisions = release(module_result('l3-fail.json', 3, 205), scontrol('gpu2', 'IDLE+DRAIN', 'x'))
    plan += plan_of(node('gpu1', module_result('l1-pass.json', 1)))
    results = quarantine.node_results(plan, decisions, 'llmforge_quarantine')
    gpu2 = results['gpu2']
    assert gpu2['quarantined'] and not gpu2['healthy']
    assert [(c['subject'], c['status']) for c in gpu2['checks']] == [('L3', 'fail'), ('L1', 'fail')]
    assert drain.drain_reason(gpu2['checks']) == L3_FAIL
    assert results['gpu1']['healthy'] and not results['gpu1']['quarantined']
    stage = quarantine.cluster_stage(plan, decisions, 'llmforge_quarantine', 1, 3)
    built = report.build_report({host: {'dcgm': result} for host, result in results.items()}, 'demo',
                                '2026-12-01T10:00:00+00:00', {'dcgm': stage})
    assert built['stages']['dcgm']['nodes']['gpu2']['quarantined'] is True
    assert built['stages']['dcgm']['facts']['quarantined'] == ['gpu2']
    assert {n['name']: n['healthy'] for n in built['nodes']} == {'gpu1': True, 'gpu2': False}
    assert 'llmforge_quarantine' in report.render_html(built)


def test_a_passing_long_diagnostic_makes_the_fast_failure_a_warning():
    plan, decisions = release(module_result('l3-pass.json', 3), scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: dcgm L3 x'))
    result = quarantine.node_results(plan, decisions, 'q')['gpu2']
    assert result['healthy'] and not result['quarantined']
    assert [(c['subject'], c['status']) for c in result['checks']] == [('L3', 'pass'), ('L1', 'warn')]
    assert drain.drain_reason(result['checks']) == ''


def test_metrics():
    plan, decisions = release(hang(3, 5), scontrol('gpu2', 'IDLE+DRAIN', 'llmforge: dcgm L3 pending: x'), fast=hang(1))
    text = quarantine.metrics_text(quarantine.node_results(plan, decisions, 'q')['gpu2'])
    assert 'llmforge_dcgm_diag_healthy{level="1"} 0\n' in text
    assert 'llmforge_dcgm_diag_healthy{level="3"} 0\n' in text
    assert 'llmforge_dcgm_diag_duration_seconds{level="3"} 5.0\n' in text
    assert 'llmforge_dcgm_quarantined 1\n' in text
    assert quarantine.metrics_text(None) == ''
