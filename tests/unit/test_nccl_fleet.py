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
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _nccl_fleet as fleet
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


@pytest.mark.parametrize('value', [float('nan'), float('inf'), float('-inf'), 10 ** 400],
                         ids=['nan', 'inf', '-inf', '400-digits'])
def test_non_finite_busbw_fails_its_test_and_stays_out_of_the_fleet_median(value):
    broken = dict(GOOD, plateau_busbw_gbps=value)
    mixed = [{'test': 'all_reduce_perf', 'kind': 'single', 'nodes': ['n1'], 'result': r} for r in (GOOD, broken, GOOD)]
    mixed += [{'test': 'all_reduce_perf', 'kind': 'single', 'nodes': [node], 'result': GOOD} for node in ('n2', 'n3')]
    verdicts = fleet.judge_tests(mixed, THRESHOLDS, 10)
    assert [v['status'] for v in verdicts] == ['fail', 'pass', 'pass']
    assert verdicts[0]['problem'] == 'run' and 'is not a finite number' in verdicts[0]['message']
    assert verdicts[0]['busbw_gbps'] is None and verdicts[1]['fleet_median_gbps'] == pytest.approx(477.49)
    assert by_node(verdicts, ['n1'])['n1']['healthy'] is False


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
        'a': {'__validate_gpu_topology': {'healthy': True}, '__validate_rdma_links': {'healthy': True},
              '__validate_kernel_faults': {'healthy': True}},
        'b': {'__validate_gpu_topology': {'healthy': False}, '__validate_rdma_links': {'healthy': True},
              '__validate_kernel_faults': {'healthy': True}},
        'c': {'__validate_gpu_topology': {'healthy': True, 'failed': True}, '__validate_rdma_links': {'healthy': True},
              '__validate_kernel_faults': {'healthy': True}},
        'd': {},
        'e': {'__validate_gpu_topology': {'healthy': True}, '__validate_rdma_links': {'healthy': True},
              '__validate_kernel_faults': {'healthy': False}},
    }
    assert filters.nccl_ready_nodes(['a', 'b', 'c', 'd', 'e'], hostvars) == ['a']


# --- planning the runs -----------------------------------------------------------------------------

OPTIONS = {'tests': ['all_reduce_perf', 'alltoall_perf'], 'repeats': 2, 'bin_dir': '/opt/nccl-tests/bin',
           'args': ['-b', '8', '-e', '8G', '-f', '2'], 'srun_args': [], 'immediate': 300, 'pair_layout': 'rank_per_gpu'}
SRUN = ['srun', '--exclusive', '--immediate=300', '--job-name=llmforge-nccl']
SIZES = ['-b', '8', '-e', '8G', '-f', '2']


def test_plan_runs_every_test_alone_then_in_pairs_each_repeated():
    runs = fleet.plan_runs(['n1', 'n2', 'n3'], {'n1': 8, 'n2': 8, 'n3': 4}, OPTIONS)
    assert [(r['test'], r['kind'], r['nodes'], r['repeat']) for r in runs[:3]] == [
        ('all_reduce_perf', 'single', ['n1'], 0), ('all_reduce_perf', 'single', ['n1'], 1),
        ('all_reduce_perf', 'single', ['n2'], 0)]
    assert [r['label'] for r in runs if r['kind'] == 'pair'] == [
        'all_reduce_perf n1+n2 #1', 'all_reduce_perf n1+n2 #2', 'all_reduce_perf n3+n1 #1', 'all_reduce_perf n3+n1 #2',
        'alltoall_perf n1+n2 #1', 'alltoall_perf n1+n2 #2', 'alltoall_perf n3+n1 #1', 'alltoall_perf n3+n1 #2']
    assert len(runs) == 2 * 3 * 2 + 2 * 2 * 2
    single = next(r for r in runs if r['label'] == 'alltoall_perf n3 #2')
    assert single['argv'] == SRUN + ['--nodes=1', '--nodelist=n3', '--ntasks=1', '--gres=gpu:4',
                                     '/opt/nccl-tests/bin/alltoall_perf'] + SIZES + ['-g', '4']
    # A pair asks for the first node's GPUs; one rank per GPU, each driving one (-g 1).
    pair = next(r for r in runs if r['label'] == 'all_reduce_perf n3+n1 #1')
    assert pair['argv'] == SRUN + ['--nodes=2', '--nodelist=n3,n1', '--ntasks-per-node=4', '--gres=gpu:4',
                                   '/opt/nccl-tests/bin/all_reduce_perf'] + SIZES + ['-g', '1']


def test_plan_runs_rank_per_node_and_extra_srun_options():
    options = dict(OPTIONS, pair_layout='rank_per_node', srun_args=['--partition=gpu'], repeats='1', immediate=60,
                   tests=['all_reduce_perf'], args=['-b', 8, '-e', '8G'])
    runs = fleet.plan_runs(['n2', 'n1'], {'n1': 8, 'n2': '8'}, options)
    assert [r['label'] for r in runs] == ['all_reduce_perf n2 #1', 'all_reduce_perf n1 #1', 'all_reduce_perf n1+n2 #1']
    assert runs[-1]['argv'] == ['srun', '--exclusive', '--immediate=60', '--job-name=llmforge-nccl', '--partition=gpu',
                                '--nodes=2', '--nodelist=n1,n2', '--ntasks-per-node=1', '--gres=gpu:8',
                                '/opt/nccl-tests/bin/all_reduce_perf', '-b', '8', '-e', '8G', '-g', '8']
    assert fleet.plan_runs(['n1'], {'n1': 8}, options)[-1]['kind'] == 'single'
    assert fleet.plan_runs([], {}, options) == []


def test_plan_retest_runs_bisect_failing_pairs_against_known_good_nodes():
    verdicts = fleet.judge_tests(runs({'a': GOOD, 'b': SLOW, 'c': GOOD, 'd': GOOD}, {'a+b': PAIR_SLOW, 'c+d': PAIR}),
                                 THRESHOLDS, 10)
    planned = fleet.plan_retest_runs(verdicts, {node: 8 for node in 'abcd'}, dict(OPTIONS, repeats=1))
    assert [(r['kind'], r['nodes']) for r in planned] == [
        ('retest', pair['nodes']) for pair in fleet.plan_bisection(verdicts)]
    assert {r['nodes'][0] for r in planned} == {'a', 'b'} and {r['nodes'][1] for r in planned} <= {'c', 'd'}
    assert planned[0]['argv'][4:8] == ['--nodes=2', f"--nodelist={','.join(planned[0]['nodes'])}", '--ntasks-per-node=8',
                                       '--gres=gpu:8']
    assert fleet.plan_retest_runs(verdicts, {node: 8 for node in 'abcd'}, OPTIONS)[1]['label'].endswith('#2')
    assert fleet.plan_retest_runs([], {}, OPTIONS) == []


@pytest.mark.parametrize('options, message', [
    (dict(OPTIONS, pair_layout='ring'), 'pair_layout must be one of rank_per_gpu, rank_per_node'),
    (dict(OPTIONS, tests='all_reduce_perf'), 'tests must be a list'),
    (dict(OPTIONS, repeats='many'), 'repeats must be a whole number'),
])
def test_plan_runs_rejects_bad_options(options, message):
    with pytest.raises(fleet.NcclFleetError, match=message):
        fleet.plan_runs(['n1'], {'n1': 8}, options)


def test_plan_filters_read_gpu_count_from_hostvars_and_tag_their_own_runs():
    hostvars = {'n1': {'gpu_count': 4}, 'n2': {}, 'n3': {'gpu_count': None}}
    planned = filters.nccl_plan(['n1', 'n2', 'n3'], hostvars, dict(OPTIONS, tests=['all_reduce_perf'], repeats=1))
    assert [r['argv'][7] for r in planned] == ['--gres=gpu:4', '--gres=gpu:8', '--gres=gpu:8', '--gres=gpu:4', '--gres=gpu:8']
    submitted = [{'ansible_job_id': str(i), 'item': run} for i, run in enumerate(planned)]
    tagged = filters.nccl_tag_runs([{'item': job, 'plateau_busbw_gbps': 1.0} for job in submitted])
    assert [(r['test'], r['kind'], r['nodes']) for r in tagged] == [(r['test'], r['kind'], r['nodes']) for r in planned]
    verdicts = fleet.judge_tests(runs({'n1': GOOD, 'n2': SLOW, 'n3': GOOD}, {'n1+n2': PAIR_SLOW, 'n3+n1': PAIR}),
                                 THRESHOLDS, 10)
    retests = filters.nccl_retest_plan(verdicts, hostvars, dict(OPTIONS, repeats=1))
    assert retests and all(r['kind'] == 'retest' for r in retests)
    assert filters.nccl_tag_runs([{'item': r} for r in retests])[0]['kind'] == 'retest'
    with pytest.raises(filters.AnsibleFilterError, match='^nccl_plan: pair_layout'):
        filters.nccl_plan(['n1'], hostvars, dict(OPTIONS, pair_layout='x'))
