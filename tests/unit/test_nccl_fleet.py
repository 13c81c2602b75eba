# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's NCCL stage: pairing, medians, thresholds, fleet outliers, bisection and node attribution.

Results are the parser's own output on the nccl-tests fixtures (8-GPU node, degraded node, two-node run), so the
busbw figures are what real runs print.
"""

from __future__ import annotations

import pathlib

import pytest

from ansible_collections.llmforge.cluster.plugins.filter import nccl_fleet as filters
from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_fleet as fleet
from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_tests as nt

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'nccl-tests'
THRESHOLDS = {'all_reduce_perf': {'single': 400, 'pair': 300}}


def result(fixture: str, scale: float = 1.0) -> dict:
    facts = nt.parse_output((FIXTURES / fixture).read_text())
    judged = nt.evaluate(facts, exit_code=0)
    judged['plateau_busbw_gbps'] = round(judged['plateau_busbw_gbps'] * scale, 2)
    return judged


GOOD, SLOW = result('all_reduce_perf_8gpu.txt'), result('all_reduce_perf_8gpu_degraded.txt')
PAIR, PAIR_SLOW = result('all_reduce_perf_2node_16gpu.txt'), result('all_reduce_perf_2node_16gpu.txt', 0.5)


def runs(singles: dict, pairs: dict, retests: dict | None = None, repeats: int = 3) -> list[dict]:
    out = []
    for kind, table in (('single', singles), ('pair', pairs), ('retest', retests or {})):
        for nodes, res in table.items():
            nodes = nodes.split('+')
            out += [{'test': 'all_reduce_perf', 'kind': kind, 'nodes': nodes, 'result': res}] * repeats
    return out


def by_node(verdicts, nodes):
    return fleet.node_results(nodes, verdicts)


def test_pairs_are_neighbours_in_natural_order_and_an_odd_node_pairs_with_the_first():
    assert fleet.plan_pairs(['gpu10', 'gpu2', 'gpu1', 'gpu3']) == [['gpu1', 'gpu2'], ['gpu3', 'gpu10']]
    assert fleet.plan_pairs(['n1', 'n2', 'n3']) == [['n1', 'n2'], ['n3', 'n1']]
    assert fleet.plan_pairs(['n1']) == [] and fleet.plan_pairs(['n1', 'n1']) == []


def test_median_of_repeats_is_judged_not_one_lucky_run():
    mixed = [{'test': 'all_reduce_perf', 'kind': 'single', 'nodes': ['n1'], 'result': r} for r in (GOOD, SLOW, SLOW)]
    verdict, = fleet.judge_tests(mixed, THRESHOLDS, 10)
    assert verdict['busbw_gbps'] == SLOW['plateau_busbw_gbps'] and verdict['status'] == 'fail'
    assert verdict['all_busbw_gbps'] == [GOOD['plateau_busbw_gbps'], SLOW['plateau_busbw_gbps'], SLOW['plateau_busbw_gbps']]


def test_healthy_fleet_passes_with_the_plateau_figures():
    verdicts = fleet.judge_tests(runs({'n1': GOOD, 'n2': GOOD}, {'n1+n2': PAIR}), THRESHOLDS, 10)
    assert [v['status'] for v in verdicts] == ['pass', 'pass', 'pass']
    assert verdicts[0]['busbw_gbps'] == pytest.approx(477.49) and verdicts[2]['busbw_gbps'] == pytest.approx(384.64)
    nodes = by_node(verdicts, ['n1', 'n2'])
    assert all(item['healthy'] for item in nodes.values())
    assert [c['name'] for c in nodes['n1']['checks']] == ['nccl_busbw', 'nccl_pair']


def test_outlier_above_the_static_floor_still_fails_against_the_fleet():
    # 420 GB/s passes the 400 floor but is 12% below the fleet median of 477.
    slightly = result('all_reduce_perf_8gpu.txt', 420 / 477.49)
    singles = {f'n{i}': GOOD for i in range(1, 8)} | {'n8': slightly}
    verdicts = fleet.judge_tests(runs(singles, {}), THRESHOLDS, 10)
    failing = [v for v in verdicts if v['status'] == 'fail']
    assert [v['nodes'] for v in failing] == [['n8']]
    assert 'more than 10% below the fleet median 477.49 GB/s' in failing[0]['message']
    assert fleet.judge_tests(runs(singles, {}), THRESHOLDS, 15)[-1]['status'] == 'pass'


def test_wrong_elements_or_a_failed_exit_fail_the_run_whatever_the_bandwidth():
    wrong = nt.evaluate(nt.parse_output((FIXTURES / 'all_reduce_perf_8gpu_wrong.txt').read_text()), exit_code=0)
    verdict, = fleet.judge_tests(runs({'n1': wrong}, {}, repeats=1), THRESHOLDS, 10)
    assert verdict['status'] == 'fail' and verdict['problem'] == 'run' and verdict['message'].startswith('wrong:')
    checks = by_node([verdict], ['n1'])['n1']['checks']
    assert checks[0]['name'] == 'nccl_run' and checks[0]['status'] == 'fail'


def test_failing_pair_is_bisected_against_a_known_good_node():
    singles = {n: GOOD for n in ('n1', 'n2', 'n3', 'n4')}
    pairs = {'n1+n2': PAIR, 'n3+n4': PAIR_SLOW}
    verdicts = fleet.judge_tests(runs(singles, pairs), THRESHOLDS, 10)
    retests = fleet.plan_bisection(verdicts)
    assert sorted(tuple(r['nodes']) for r in retests) == [('n3', 'n1'), ('n4', 'n1')]
    # n4 is the bad one: slow with n1 too; n3 is fine with n1.
    verdicts = fleet.judge_tests(runs(singles, pairs, {'n3+n1': PAIR, 'n4+n1': PAIR_SLOW}), THRESHOLDS, 10)
    nodes = by_node(verdicts, ['n1', 'n2', 'n3', 'n4'])
    assert [n for n, r in nodes.items() if not r['healthy']] == ['n4']
    pair_check = [c for c in nodes['n4']['checks'] if c['name'] == 'nccl_pair'][0]
    assert pair_check['subject'] == 'all_reduce_perf n3+n4' and 'bad node n4' in pair_check['message']


def test_both_ends_pass_elsewhere_means_a_bad_link_and_both_are_suspects():
    singles = {n: GOOD for n in ('n1', 'n2', 'n3', 'n4')}
    verdicts = fleet.judge_tests(runs(singles, {'n1+n2': PAIR, 'n3+n4': PAIR_SLOW}, {'n3+n1': PAIR, 'n4+n1': PAIR}), THRESHOLDS, 10)
    nodes = by_node(verdicts, ['n1', 'n2', 'n3', 'n4'])
    assert sorted(n for n, r in nodes.items() if not r['healthy']) == ['n3', 'n4']
    assert 'bad link between n3 and n4' in nodes['n3']['checks'][0]['message']


def test_two_nodes_without_a_peer_blame_the_node_whose_own_run_failed():
    verdicts = fleet.judge_tests(runs({'gpu1': GOOD, 'gpu2': SLOW}, {'gpu1+gpu2': PAIR_SLOW}), THRESHOLDS, 10)
    assert fleet.plan_bisection(verdicts) == []
    nodes = by_node(verdicts, ['gpu1', 'gpu2'])
    assert nodes['gpu1']['healthy'] and not nodes['gpu2']['healthy']
    assert [c['status'] for c in nodes['gpu1']['checks'] if c['name'] == 'nccl_pair'] == ['warn']
    first = nodes['gpu2']['checks'][0]
    assert (first['name'], first['subject'], first['status']) == ('nccl_busbw', 'all_reduce_perf single', 'fail')


@pytest.mark.parametrize('runs_in, thresholds, tolerance, message', [
    ([{'test': 'x', 'kind': 'triple', 'nodes': ['a'], 'result': {}}], {}, 10, 'runs[0].kind must be one of'),
    ([{'test': 'x', 'kind': 'single', 'nodes': 'a', 'result': {}}], {}, 10, 'runs[0].nodes must be a list'),
    ([{'test': 'x', 'kind': 'single', 'nodes': ['a']}], {}, 10, "runs[0] has no 'result'"),
    ([], {}, 100, 'tolerance_pct must be a percentage'),
    ([{'test': 'x', 'kind': 'single', 'nodes': ['a'], 'result': GOOD}], {'x': {'single': 'fast'}}, 10, 'thresholds.x.single'),
])
def test_bad_input_names_the_field(runs_in, thresholds, tolerance, message):
    with pytest.raises(fleet.NcclFleetError, match=message.replace('(', r'\(').replace('[', r'\[').replace(']', r'\]').replace('.', r'\.')):
        fleet.judge_tests(runs_in, thresholds, tolerance)


def test_tag_runs_reads_async_and_retest_loop_results():
    submitted = {'ansible_job_id': 'j1', 'item': ['all_reduce_perf', {'kind': 'pair', 'pair': ['a', 'b']}, 0]}
    tagged = filters.nccl_tag_runs([
        {'item': submitted, 'plateau_busbw_gbps': 1.0},
        {'item': ['alltoall_perf', {'kind': 'single', 'node': 'a'}, 2]},
        {'item': [{'test': 'all_reduce_perf', 'nodes': ['b', 'c']}, 1]},
    ])
    assert [(r['test'], r['kind'], r['nodes']) for r in tagged] == [
        ('all_reduce_perf', 'pair', ['a', 'b']), ('alltoall_perf', 'single', ['a']), ('all_reduce_perf', 'retest', ['b', 'c'])]


def test_ready_nodes_are_those_whose_validators_passed():
    hostvars = {
        'a': {'__validate_gpu_topology': {'healthy': True}, '__validate_rdma_links': {'healthy': True}},
        'b': {'__validate_gpu_topology': {'healthy': False}, '__validate_rdma_links': {'healthy': True}},
        'c': {'__validate_gpu_topology': {'healthy': True, 'failed': True}, '__validate_rdma_links': {'healthy': True}},
        'd': {},
    }
    assert filters.nccl_ready_nodes(['a', 'b', 'c', 'd'], hostvars) == ['a']
