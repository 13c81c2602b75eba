# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the fabric test planner: pair rounds, known-good nodes, retest plans and culprit classification."""

from __future__ import annotations

import collections
import itertools

import pytest

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _fabric_plan

BASE_PORT = _fabric_plan.DEFAULT_BASE_PORT
ALL_PATTERN_MAX_NODES = 64
MAX_NODES = 513


def node_names(count: int) -> list[str]:
    return [f'gpu{number:04d}' for number in range(1, count + 1)]


def rails_for(count: int) -> int:
    """Vary the rail count with N so every rail count from 1 to 3 meets every residue of N."""
    return 1 + count % 3


def assert_round_is_concurrent(tests: list[dict], nodes: list[str], rails: int, base_port: int, round_index: int) -> None:
    """Each node is client once and server once per rail, never against itself, on port base+rail."""
    assert len(tests) == len(nodes) * rails
    for test in tests:
        assert set(test) == {'round', 'client', 'server', 'rail', 'port'}
        assert test['round'] == round_index
        assert test['client'] != test['server']
        assert 0 <= test['rail'] < rails
        assert test['port'] == base_port + test['rail']
    for rail in range(rails):
        on_rail = [test for test in tests if test['rail'] == rail]
        assert sorted(test['client'] for test in on_rail) == sorted(nodes)
        assert sorted(test['server'] for test in on_rail) == sorted(nodes)


def index_distance(test: dict, position: dict[str, int], count: int) -> int:
    return (position[test['server']] - position[test['client']]) % count


# plan_pairs ------------------------------------------------------------------


@pytest.mark.parametrize('count', range(2, MAX_NODES + 1))
def test_ring_pairs_neighbours(count):
    nodes = node_names(count)
    rails = rails_for(count)
    rounds = _fabric_plan.plan_pairs(nodes, rails, 'ring')
    assert len(rounds) == 1
    assert_round_is_concurrent(rounds[0], nodes, rails, BASE_PORT, 0)
    position = {node: index for index, node in enumerate(nodes)}
    assert {index_distance(test, position, count) for test in rounds[0]} == {1}


@pytest.mark.parametrize('count', range(2, MAX_NODES + 1))
def test_bisection_pairs_half_way(count):
    nodes = node_names(count)
    rails = rails_for(count)
    rounds = _fabric_plan.plan_pairs(nodes, rails, 'bisection', base_port=20000)
    assert len(rounds) == 1
    assert_round_is_concurrent(rounds[0], nodes, rails, 20000, 0)
    position = {node: index for index, node in enumerate(nodes)}
    assert {index_distance(test, position, count) for test in rounds[0]} == {count // 2}


@pytest.mark.parametrize('count', range(2, ALL_PATTERN_MAX_NODES + 1))
def test_all_covers_every_ordered_pair_once(count):
    nodes = node_names(count)
    rails = rails_for(count)
    rounds = _fabric_plan.plan_pairs(nodes, rails, 'all')
    assert len(rounds) == count - 1
    for round_index, tests in enumerate(rounds):
        assert_round_is_concurrent(tests, nodes, rails, BASE_PORT, round_index)
    covered = collections.Counter((test['client'], test['server'], test['rail']) for tests in rounds for test in tests)
    expected = {(client, server, rail) for client, server in itertools.permutations(nodes, 2) for rail in range(rails)}
    assert set(covered) == expected
    assert set(covered.values()) == {1}


def test_plan_pairs_exact_small_ring():
    assert _fabric_plan.plan_pairs(['a', 'b', 'c'], 2) == [[
        {'round': 0, 'client': 'a', 'server': 'b', 'rail': 0, 'port': 18515},
        {'round': 0, 'client': 'a', 'server': 'b', 'rail': 1, 'port': 18516},
        {'round': 0, 'client': 'b', 'server': 'c', 'rail': 0, 'port': 18515},
        {'round': 0, 'client': 'b', 'server': 'c', 'rail': 1, 'port': 18516},
        {'round': 0, 'client': 'c', 'server': 'a', 'rail': 0, 'port': 18515},
        {'round': 0, 'client': 'c', 'server': 'a', 'rail': 1, 'port': 18516},
    ]]


def test_plan_pairs_two_nodes_every_pattern_pairs_both_ways():
    for pattern in _fabric_plan.PATTERNS:
        rounds = _fabric_plan.plan_pairs(['x', 'y'], 1, pattern)
        assert [(test['client'], test['server']) for test in rounds[0]] == [('x', 'y'), ('y', 'x')]


def test_plan_pairs_dedupes_keeping_order():
    rounds = _fabric_plan.plan_pairs(['c', 'a', 'c', 'b', 'a'], 1)
    assert [(test['client'], test['server']) for test in rounds[0]] == [('c', 'a'), ('a', 'b'), ('b', 'c')]


def test_plan_pairs_accepts_any_iterable():
    rounds = _fabric_plan.plan_pairs((name for name in ['a', 'b']), 1)
    assert len(rounds[0]) == 2


def test_plan_pairs_highest_port_fits():
    rounds = _fabric_plan.plan_pairs(['a', 'b'], 8, base_port=65528)
    assert max(test['port'] for test in rounds[0]) == 65535


PLAN_ERRORS = [
    pytest.param([], 1, 'ring', BASE_PORT, 'got 0', id='no-nodes'),
    pytest.param(['a'], 1, 'ring', BASE_PORT, 'got 1', id='one-node'),
    pytest.param(['a', 'a'], 1, 'ring', BASE_PORT, 'got 1', id='one-distinct-node'),
    pytest.param(['a', 'b'], 0, 'ring', BASE_PORT, 'rails 0', id='zero-rails'),
    pytest.param(['a', 'b'], -2, 'ring', BASE_PORT, 'rails -2', id='negative-rails'),
    pytest.param(['a', 'b'], 1.5, 'ring', BASE_PORT, 'rails 1.5', id='float-rails'),
    pytest.param(['a', 'b'], True, 'ring', BASE_PORT, 'rails True', id='bool-rails'),
    pytest.param(['a', 'b'], 1, 'mesh', BASE_PORT, "'mesh'", id='unknown-pattern'),
    pytest.param(['a', 'b'], 1, 'mesh', BASE_PORT, 'ring, bisection, all', id='unknown-pattern-lists-known'),
    pytest.param(['a', 'b'], 1, 'Ring', BASE_PORT, "'Ring'", id='pattern-case-matters'),
    pytest.param(['a', 'b'], 8, 'ring', 65529, 'base_port 65529', id='ports-past-65535'),
    pytest.param(['a', 'b'], 1, 'ring', 0, 'base_port 0', id='port-zero'),
    pytest.param(['a', 'b'], 1, 'ring', '18515', "base_port '18515'", id='string-port'),
    pytest.param(['a', 5], 1, 'ring', BASE_PORT, 'node 5', id='int-node'),
    pytest.param(['a', ''], 1, 'ring', BASE_PORT, "node ''", id='empty-node'),
    pytest.param('ab', 1, 'ring', BASE_PORT, "'ab'", id='single-string'),
]


@pytest.mark.parametrize(('nodes', 'rails', 'pattern', 'base_port', 'bad_part'), PLAN_ERRORS)
def test_plan_pairs_rejects(nodes, rails, pattern, base_port, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _fabric_plan.plan_pairs(nodes, rails, pattern, base_port)
    assert bad_part in str(excinfo.value)


# known_good_nodes ----------------------------------------------------------------


def results_of(rounds: list[list[dict]], failing: set[tuple[str, str, int]]) -> list[dict]:
    """Every planned test as a result, failing exactly the (client, server, rail) keys given."""
    return [dict(test, status='fail' if (test['client'], test['server'], test['rail']) in failing else 'pass')
            for tests in rounds for test in tests]


def ring_results(count: int, rails: int, failing: set[tuple[str, str, int]]) -> list[dict]:
    return results_of(_fabric_plan.plan_pairs(node_names(count), rails), failing)


def test_known_good_all_pass():
    assert _fabric_plan.known_good_nodes(ring_results(3, 2, set())) == {0: node_names(3), 1: node_names(3)}


def test_known_good_drops_both_ends_of_a_failure_on_that_rail_only():
    results = ring_results(5, 2, {('gpu0002', 'gpu0003', 1)})
    assert _fabric_plan.known_good_nodes(results) == {0: node_names(5), 1: ['gpu0001', 'gpu0004', 'gpu0005']}


def test_known_good_client_and_server_failures_count():
    # gpu0002 passes as client but fails as server: not known-good.
    results = ring_results(4, 1, {('gpu0001', 'gpu0002', 0)})
    assert _fabric_plan.known_good_nodes(results) == {0: ['gpu0003', 'gpu0004']}


def test_known_good_sorted_and_ignores_unplannable_entries():
    results = [
        {'client': 'z', 'server': 'y', 'rail': 0, 'status': 'pass'},
        {'client': 'b', 'server': None, 'rail': 0, 'reason': 'no known-good peer on rail 0'},
    ]
    assert _fabric_plan.known_good_nodes(results) == {0: ['y', 'z']}


def test_known_good_rail_with_no_good_node_is_empty():
    results = [{'client': 'a', 'server': 'b', 'rail': 3, 'status': 'fail'}]
    assert _fabric_plan.known_good_nodes(results) == {3: []}


def test_known_good_empty():
    assert not _fabric_plan.known_good_nodes([])


RESULT_ERRORS = [
    pytest.param([{'client': 'a', 'server': 'b', 'rail': 0, 'status': 'ok'}], "'ok'", id='unknown-status'),
    pytest.param([{'client': 'a', 'server': 'b', 'rail': 0}], "'status'", id='missing-status'),
    pytest.param([{'client': 'a', 'rail': 0, 'status': 'pass'}], "'server'", id='missing-server'),
    pytest.param([{'client': 'a', 'server': 'b', 'rail': '0', 'status': 'pass'}], "'0'", id='string-rail'),
    pytest.param([{'client': 'a', 'server': 'b', 'rail': -1, 'status': 'pass'}], '-1', id='negative-rail'),
    pytest.param(['a->b'], "'a->b'", id='not-a-dict'),
    pytest.param({'client': 'a'}, "'client'", id='dict-not-list'),
    pytest.param(None, 'expected a list of results, got None', id='none'),
    pytest.param(5, 'expected a list of results, got 5', id='number'),
]


@pytest.mark.parametrize(('results', 'bad_part'), RESULT_ERRORS)
def test_known_good_rejects(results, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _fabric_plan.known_good_nodes(results)
    assert bad_part in str(excinfo.value)


@pytest.mark.parametrize(('results', 'bad_part'), RESULT_ERRORS)
def test_plan_retests_rejects(results, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _fabric_plan.plan_retests(results)
    assert bad_part in str(excinfo.value)


# plan_retests ---------------------------------------------------------------------


def run_tests(rounds: list[list[dict]]) -> list[dict]:
    return [test for tests in rounds for test in tests if test['server'] is not None]


def assert_retest_rounds_are_concurrent(rounds: list[list[dict]], base_port: int = BASE_PORT) -> None:
    for round_index, tests in enumerate(rounds):
        assert tests, f'round {round_index} is empty'
        clients = collections.Counter((test['client'], test['rail']) for test in tests if test['server'] is not None)
        servers = collections.Counter((test['server'], test['rail']) for test in tests if test['server'] is not None)
        assert set(clients.values()) <= {1}
        assert set(servers.values()) <= {1}
        for test in tests:
            assert test['round'] == round_index
            if test['server'] is not None:
                assert test['port'] == base_port + test['rail']
                assert test['client'] != test['server']


def test_plan_retests_nothing_failed():
    assert not _fabric_plan.plan_retests(ring_results(4, 2, set()))


def test_plan_retests_single_failure_uses_first_good_node():
    results = ring_results(6, 2, {('gpu0003', 'gpu0004', 1)})
    rounds = _fabric_plan.plan_retests(results)
    assert_retest_rounds_are_concurrent(rounds)
    failure = {'client': 'gpu0003', 'server': 'gpu0004', 'rail': 1}
    # Both retests hit gpu0001 (first known-good in sorted order), which can serve only once per round.
    assert rounds == [
        [{'round': 0, 'client': 'gpu0003', 'server': 'gpu0001', 'rail': 1, 'port': 18516, 'retest_of': [failure]}],
        [{'round': 1, 'client': 'gpu0004', 'server': 'gpu0001', 'rail': 1, 'port': 18516, 'retest_of': [failure]}],
    ]


def test_plan_retests_spreads_load_over_good_nodes():
    failing = {('gpu0001', 'gpu0002', 0), ('gpu0005', 'gpu0006', 0), ('gpu0009', 'gpu0010', 0)}
    rounds = _fabric_plan.plan_retests(ring_results(16, 1, failing))
    assert_retest_rounds_are_concurrent(rounds)
    tests = run_tests(rounds)
    assert len(tests) == 6
    # Three failures, three different good servers, so the whole retest fits in two rounds.
    assert sorted({test['server'] for test in tests}) == ['gpu0003', 'gpu0004', 'gpu0007']
    assert len(rounds) == 2
    for test in tests:
        assert test['server'] not in {'gpu0001', 'gpu0002', 'gpu0005', 'gpu0006', 'gpu0009', 'gpu0010', 'gpu0016'}


def test_plan_retests_failures_sharing_a_node():
    # gpu0003 fails both as server (of gpu0002) and as client (of gpu0004): a bad gpu0003 looks like this.
    failing = {('gpu0002', 'gpu0003', 0), ('gpu0003', 'gpu0004', 0)}
    rounds = _fabric_plan.plan_retests(ring_results(8, 1, failing))
    assert_retest_rounds_are_concurrent(rounds)
    tests = run_tests(rounds)
    keys = [(test['client'], test['server']) for test in tests]
    assert len(keys) == len(set(keys))
    assert {test['client'] for test in tests} == {'gpu0002', 'gpu0003', 'gpu0004'}
    assert {test['server'] for test in tests} == {'gpu0001', 'gpu0005'}
    for test in tests:
        assert test['retest_of']
        for failure in test['retest_of']:
            assert test['client'] in (failure['client'], failure['server'])


def test_plan_retests_shared_retest_runs_once_for_both_failures():
    # gpu0009 is the only known-good node, so gpu0003->gpu0009 serves both failures and runs once.
    results = [
        {'client': 'gpu0002', 'server': 'gpu0003', 'rail': 0, 'status': 'fail'},
        {'client': 'gpu0003', 'server': 'gpu0004', 'rail': 0, 'status': 'fail'},
        {'client': 'gpu0004', 'server': 'gpu0009', 'rail': 0, 'status': 'pass'},
        {'client': 'gpu0009', 'server': 'gpu0002', 'rail': 0, 'status': 'pass'},
    ]
    rounds = _fabric_plan.plan_retests(results)
    assert_retest_rounds_are_concurrent(rounds)
    shared = [test for test in run_tests(rounds) if test['client'] == 'gpu0003']
    assert len(shared) == 1
    assert shared[0]['retest_of'] == [
        {'client': 'gpu0002', 'server': 'gpu0003', 'rail': 0},
        {'client': 'gpu0003', 'server': 'gpu0004', 'rail': 0},
    ]
    assert sorted((test['client'], test['server']) for test in run_tests(rounds)) == [
        ('gpu0002', 'gpu0009'), ('gpu0003', 'gpu0009'), ('gpu0004', 'gpu0009')]
    assert len(rounds) == 3


def test_plan_retests_no_known_good_peer():
    results = ring_results(2, 1, {('gpu0001', 'gpu0002', 0)})
    rounds = _fabric_plan.plan_retests(results)
    assert rounds == [[{
        'round': 0, 'client': 'gpu0001', 'server': None, 'rail': 0, 'port': None,
        'reason': 'no known-good peer on rail 0', 'retest_of': [{'client': 'gpu0001', 'server': 'gpu0002', 'rail': 0}],
    }]]


def test_plan_retests_no_peer_on_one_rail_only():
    # Rail 1: every test fails, so no node is known-good there; rail 0 has good peers.
    failing = {('gpu0001', 'gpu0002', 0)} | {(client, server, 1) for client, server in zip(node_names(4), node_names(4)[1:] + ['gpu0001'])}
    rounds = _fabric_plan.plan_retests(ring_results(4, 2, failing))
    assert_retest_rounds_are_concurrent(rounds)
    unplannable = [entry for entry in rounds[0] if entry['server'] is None]
    assert len(unplannable) == 4
    assert {entry['reason'] for entry in unplannable} == {'no known-good peer on rail 1'}
    assert {(test['client'], test['server'], test['rail']) for test in run_tests(rounds)} == {
        ('gpu0001', 'gpu0003', 0), ('gpu0002', 'gpu0003', 0)}


def test_plan_retests_custom_base_port():
    rounds = _fabric_plan.plan_retests(ring_results(4, 3, {('gpu0001', 'gpu0002', 2)}), base_port=30000)
    assert {test['port'] for test in run_tests(rounds)} == {30002}


def test_plan_retests_many_failures_stay_concurrent():
    count, rails = 64, 4
    failing = {(f'gpu{number:04d}', f'gpu{number + 1:04d}', number % rails) for number in range(1, count, 5)}
    rounds = _fabric_plan.plan_retests(ring_results(count, rails, failing))
    assert_retest_rounds_are_concurrent(rounds)
    planned_failures = {(failure['client'], failure['server'], failure['rail'])
                        for test in run_tests(rounds) for failure in test['retest_of']}
    assert planned_failures == failing


def test_plan_retests_rejects_bad_base_port():
    with pytest.raises(ValueError, match='base_port 65535'):
        _fabric_plan.plan_retests(ring_results(4, 2, {('gpu0001', 'gpu0002', 1)}), base_port=65535)


# classify -------------------------------------------------------------------------

FAILED = {'round': 0, 'client': 'a', 'server': 'b', 'rail': 2, 'port': 18517, 'status': 'fail'}


def retest(client: str, server: str, status: str, rail: int = 2) -> dict:
    return {'round': 0, 'client': client, 'server': server, 'rail': rail, 'port': 18515 + rail, 'status': status}


CLASSIFY_CASES = [
    pytest.param([retest('a', 'g', 'fail'), retest('b', 'g', 'pass')], 'bad node a', ['a'], id='bad-client'),
    pytest.param([retest('a', 'g', 'pass'), retest('b', 'g', 'fail')], 'bad node b', ['b'], id='bad-server'),
    pytest.param([retest('a', 'g', 'pass'), retest('b', 'g', 'pass')], 'bad link between a and b (both pass against g)', ['a', 'b'],
                 id='bad-link'),
    pytest.param([retest('a', 'g', 'fail'), retest('b', 'g', 'fail')], 'both nodes fail against g', ['a', 'b'], id='both-fail'),
    pytest.param([retest('a', 'g', 'pass'), retest('b', 'h', 'fail')], 'bad node b', ['b'], id='different-peers'),
    pytest.param([retest('a', 'g', 'pass'), retest('b', 'h', 'pass')], 'bad link between a and b (both pass against g, h)', ['a', 'b'],
                 id='bad-link-different-peers'),
    pytest.param([retest('a', 'g', 'pass'), retest('a', 'h', 'fail'), retest('b', 'g', 'pass')], 'bad node a', ['a'],
                 id='any-failing-retest-fails-the-node'),
    pytest.param([retest('g', 'a', 'fail'), retest('g', 'b', 'pass')], 'bad node a', ['a'], id='roles-reversed'),
    pytest.param([retest('a', 'g', 'pass'), retest('b', 'g', 'fail'), retest('a', 'g', 'fail', rail=1), retest('c', 'd', 'fail')],
                 'bad node b', ['b'], id='other-rails-and-pairs-ignored'),
    pytest.param([retest('a', 'b', 'pass'), retest('a', 'g', 'fail'), retest('b', 'g', 'pass')], 'bad node a', ['a'],
                 id='rerun-of-the-pair-itself-ignored'),
    pytest.param([retest('a', 'g', 'fail')], 'undetermined: no retest of b against a known-good peer on rail 2', ['a', 'b'],
                 id='server-not-retested'),
    pytest.param([retest('b', 'g', 'pass')], 'undetermined: no retest of a against a known-good peer on rail 2', ['a'],
                 id='client-not-retested-server-cleared'),
    pytest.param([], 'undetermined: no retest of a or b against a known-good peer on rail 2', ['a', 'b'], id='no-retests'),
    pytest.param([{'round': 0, 'client': 'a', 'server': None, 'rail': 2, 'port': None, 'reason': 'no known-good peer on rail 2',
                   'retest_of': [{'client': 'a', 'server': 'b', 'rail': 2}]}],
                 'undetermined: no known-good peer on rail 2', ['a', 'b'], id='no-known-good-peer'),
]


@pytest.mark.parametrize(('retests', 'verdict', 'suspects'), CLASSIFY_CASES)
def test_classify(retests, verdict, suspects):
    classified = _fabric_plan.classify(FAILED, retests)
    assert classified['verdict'] == verdict
    assert classified['suspects'] == suspects
    assert (classified['client'], classified['server'], classified['rail']) == ('a', 'b', 2)


def test_classify_reports_peers():
    classified = _fabric_plan.classify(FAILED, [retest('a', 'h', 'pass'), retest('b', 'g', 'pass')])
    assert classified['peers'] == ['g', 'h']


CLASSIFY_ERRORS = [
    pytest.param(dict(FAILED, status='pass'), [], "'pass'", id='passed-test'),
    pytest.param({'client': 'a', 'server': 'b'}, [], "'rail'", id='missing-rail'),
    pytest.param('a->b', [], "'a->b'", id='not-a-dict'),
    pytest.param(FAILED, [retest('a', 'g', 'maybe')], "'maybe'", id='bad-retest-status'),
    pytest.param(FAILED, 'a->g', "'a->g'", id='retests-string'),
]


@pytest.mark.parametrize(('failed_test', 'retests', 'bad_part'), CLASSIFY_ERRORS)
def test_classify_rejects(failed_test, retests, bad_part):
    with pytest.raises(ValueError) as excinfo:
        _fabric_plan.classify(failed_test, retests)
    assert bad_part in str(excinfo.value)


# end to end -------------------------------------------------------------------------

SCENARIOS = [
    pytest.param({'gpu0004'}, set(), {('gpu0003', 'gpu0004', 0): 'bad node gpu0004', ('gpu0004', 'gpu0005', 0): 'bad node gpu0004'},
                 id='bad-node'),
    pytest.param(set(), {frozenset({'gpu0006', 'gpu0007'})},
                 {('gpu0006', 'gpu0007', 0): 'bad link between gpu0006 and gpu0007 (both pass against gpu0001)'}, id='bad-cable'),
    pytest.param({'gpu0002', 'gpu0003'}, set(),
                 {('gpu0001', 'gpu0002', 0): 'bad node gpu0002', ('gpu0002', 'gpu0003', 0): 'both nodes fail against gpu0005, gpu0006, gpu0007',
                  ('gpu0003', 'gpu0004', 0): 'bad node gpu0003'}, id='two-adjacent-bad-nodes'),
]


@pytest.mark.parametrize(('bad_nodes', 'bad_links', 'verdicts'), SCENARIOS)
def test_plan_run_retest_classify(bad_nodes, bad_links, verdicts):
    """Simulate a fabric with bad nodes and links: a test fails when either end is bad or their link is."""

    def run(tests: list[dict]) -> list[dict]:
        return [dict(test, status='fail' if {test['client'], test['server']} & bad_nodes
                     or frozenset({test['client'], test['server']}) in bad_links else 'pass') for test in tests]

    first = run(test for tests in _fabric_plan.plan_pairs(node_names(8), 1) for test in tests)
    failures = [result for result in first if result['status'] == 'fail']
    retests = run(run_tests(_fabric_plan.plan_retests(first)))
    found = {(failure['client'], failure['server'], failure['rail']): _fabric_plan.classify(failure, retests)['verdict'] for failure in failures}
    assert found == verdicts


# commands --------------------------------------------------------------------

def test_round_commands_give_each_node_its_servers_and_clients_with_their_argv():
    round_ = _fabric_plan.plan_pairs(['fab1', 'fab2', 'fab3'], 2)[0]
    mine = _fabric_plan.round_commands(round_, 'fab2', ['mlx5_0', 'mlx5_1'], {'fab3': '10.0.0.3'}, 'ib_write_bw', 5)
    assert [(t['client'], t['server'], t['rail']) for t in mine['servers']] == [('fab1', 'fab2', 0), ('fab1', 'fab2', 1)]
    assert [(t['client'], t['server'], t['rail']) for t in mine['clients']] == [('fab2', 'fab3', 0), ('fab2', 'fab3', 1)]
    assert mine['servers'][1]['argv'] == ['timeout', '65', 'ib_write_bw', '-d', 'mlx5_1', '-p', str(BASE_PORT + 1),
                                          '-D', '5', '--report_gbits', '-F']
    assert mine['clients'][0]['argv'] == ['timeout', '65', 'ib_write_bw', '-d', 'mlx5_0', '-p', str(BASE_PORT),
                                          '-D', '5', '--report_gbits', '-F', '10.0.0.3']
    # Every planned key stays: the judge reads the test from the client's loop item.
    assert {key: mine['clients'][0][key] for key in round_[0]} == round_[2]


def test_round_commands_of_a_node_without_tests_and_with_a_text_duration():
    round_ = _fabric_plan.plan_pairs(['a', 'b'], 1)[0]
    assert _fabric_plan.round_commands(round_, 'c', ['mlx5_0'], {}, 'ib_write_bw', 5) == {'servers': [], 'clients': []}
    assert _fabric_plan.perftest_argv('/usr/bin/ib_read_bw', 'mlx5_0', 18515, '2', 'b')[:2] == ['timeout', '62']
    assert _fabric_plan.perftest_argv('ib_write_bw', 'mlx5_0', 18515, 1.5)[1] == '61'


@pytest.mark.parametrize('devices, duration, bad_part', [
    (['mlx5_0'], 5, 'a has no rail 1'),
    (['mlx5_0', 'mlx5_1'], 'soon', "duration 'soon'"),
    (['mlx5_0', 'mlx5_1'], '\u0665', "duration '\u0665'"),
    (['mlx5_0', 'mlx5_1'], '5\u00b2', "duration '5\u00b2'"),
    (['mlx5_0', 'mlx5_1'], 'nan', "duration 'nan'"),
    (['mlx5_0', 'mlx5_1'], float('inf'), 'duration inf'),
    (['mlx5_0', 'mlx5_1'], '9' * 5000, 'duration'),
])
def test_round_commands_rejects(devices, duration, bad_part):
    round_ = _fabric_plan.plan_pairs(['a', 'b'], 2)[0]
    with pytest.raises(ValueError, match=bad_part):
        _fabric_plan.round_commands(round_, 'a', devices, {'b': 'b'}, 'ib_write_bw', duration)


def test_round_commands_filter_reads_the_servers_addresses_from_hostvars():
    fabric = pytest.importorskip('ansible_collections.llmforge.cluster.plugins.filter.fabric')
    round_ = _fabric_plan.plan_pairs(['a', 'b', 'c', 'd'], 1, 'all')[0]
    hostvars = {'a': {}, 'b': {'fabric_address': '192.0.2.2', 'ansible_host': 'b.mgmt'}, 'c': {'ansible_host': 'c.mgmt'},
                'd': {'fabric_address': None}}
    servers = {}
    for node in 'abcd':
        mine = fabric.fabric_round_commands(round_, node, ['mlx5_0'], hostvars, 'ib_write_bw', 1)
        servers.update((test['server'], test['argv'][-1]) for test in mine['clients'])
    assert servers == {'b': '192.0.2.2', 'c': 'c.mgmt', 'd': 'd', 'a': 'a'}
    with pytest.raises(fabric.AnsibleFilterError, match='^fabric_round_commands: a has no rail 0'):
        fabric.fabric_round_commands(round_, 'a', [], hostvars)
