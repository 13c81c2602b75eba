# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan rounds of concurrent perftest pairs over a fabric, plan retests of failures and name the culprit.

Pure Python with no Ansible import, so modules, filters and tests can all share it.

A test is a dict ``{'round', 'client', 'server', 'rail', 'port'}``: the client's rail ``k`` HCA runs
``ib_*_bw`` against the server's rail ``k`` HCA, and the server listens on ``base_port + k``. Rounds and rails
count from 0. Within one round a node is server at most once and client at most once on each rail, so
every test of a round can run at the same time without two servers sharing a port.
A result is a test plus ``'status': 'pass' | 'fail'``. Bad input raises ``ValueError`` quoting the bad part.
"""

from __future__ import annotations

import collections
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils._checks import require_record

DEFAULT_BASE_PORT = 18515  # perftest's own default port (DEF_PORT in perftest_parameters.h)
MAX_PORT = 65535
PATTERNS = ('ring', 'bisection', 'all')
STATUSES = ('pass', 'fail')

_TestKey = t.Tuple[str, str, int]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_ports(rails: int, base_port: int) -> None:
    if not _is_int(base_port) or base_port < 1 or base_port + rails - 1 > MAX_PORT:
        raise ValueError(f'base_port {base_port!r} does not leave ports base_port..base_port+{rails - 1} within 1..{MAX_PORT}')


def _distinct_nodes(nodes: t.Iterable[str]) -> list[str]:
    """Return the nodes without repeats, first occurrence first, raising ValueError for a non-name."""
    if isinstance(nodes, (str, bytes)):
        raise ValueError(f'expected a list of node names, got the single string {nodes!r}')
    if not isinstance(nodes, t.Iterable) or isinstance(nodes, t.Mapping):
        raise ValueError(f'expected a list of node names, got {nodes!r}')
    seen = {}
    for node in nodes:
        if not isinstance(node, str) or not node:
            raise ValueError(f'node {node!r} is not a non-empty string')
        seen.setdefault(node, None)
    return list(seen)


def _shifts(pattern: str, count: int) -> list[int]:
    if pattern == 'ring':
        return [1]
    if pattern == 'bisection':
        return [count // 2]
    if pattern == 'all':
        return list(range(1, count))
    raise ValueError(f"unknown pattern {pattern!r}; known patterns: {', '.join(PATTERNS)}")


def plan_pairs(nodes: list[str], rails: int, pattern: str = 'ring', base_port: int = DEFAULT_BASE_PORT) -> list[list[dict]]:
    """Plan rounds of tests in which node ``i`` is the client of node ``(i + shift) mod N`` on every rail.

    ``ring`` is one round with shift 1 (neighbours), ``bisection`` one round with shift N//2 (the farthest
    node, so traffic crosses the middle of the list) and ``all`` N-1 rounds with shifts 1..N-1, which cover
    every ordered pair once. A shift s with 0 < s < N is a permutation without fixed points, so in each round
    every node is client exactly once and server exactly once per rail.
    """
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}; known patterns: {', '.join(PATTERNS)}")
    if not _is_int(rails) or rails < 1:
        raise ValueError(f'rails {rails!r} must be a whole number of at least 1')
    _check_ports(rails, base_port)
    distinct = _distinct_nodes(nodes)
    count = len(distinct)
    if count < 2:
        raise ValueError(f'need at least 2 distinct nodes to pair, got {count}')
    ports = [(rail, base_port + rail) for rail in range(rails)]
    rounds = []
    for round_index, shift in enumerate(_shifts(pattern, count)):
        servers = distinct[shift:] + distinct[:shift]
        rounds.append([
            {'round': round_index, 'client': client, 'server': server, 'rail': rail, 'port': port}
            for client, server in zip(distinct, servers)
            for rail, port in ports
        ])
    return rounds


# commands --------------------------------------------------------------------

# Seconds a perftest may run past its test duration before `timeout` stops it (connection setup, a late peer).
RUN_GRACE = 60


def _whole_seconds(value: object) -> int:
    # ASCII only: int() and float() also read other scripts' digits.
    if not str(value).isascii():
        raise ValueError(f'duration {value!r} is not a number of seconds')
    try:
        return int(str(value))
    except ValueError:
        try:
            return int(float(str(value)))
        except (ValueError, OverflowError):
            raise ValueError(f'duration {value!r} is not a number of seconds') from None


def perftest_argv(perftest: str, device: str, port: int, duration: object, server: t.Optional[str] = None) -> list[str]:
    """One perftest run bounded by `timeout`: a server, or with `server` (its address) a client of it."""
    argv = ['timeout', str(_whole_seconds(duration) + RUN_GRACE), str(perftest), '-d', str(device), '-p', str(port),
            '-D', str(duration), '--report_gbits', '-F']
    return argv + ([str(server)] if server is not None else [])


def round_commands(tests: t.Iterable[dict], node: str, devices: t.Sequence[str], addresses: t.Mapping[str, str],
                   perftest: str, duration: object) -> dict[str, list[dict]]:
    """This node's part of one round: ``{'servers': [...], 'clients': [...]}``, each a planned test plus its ``argv``.

    ``devices`` are the node's rail devices in rail order; ``addresses`` map a server node to the address its
    clients connect to.
    """
    def device(test: dict) -> str:
        rail = test['rail']
        if not _is_int(rail) or not 0 <= rail < len(devices):
            raise ValueError(f'{node} has no rail {rail!r}: its rails are {list(devices)}')
        return devices[rail]

    if isinstance(devices, (str, bytes)) or not isinstance(devices, t.Sequence):
        raise ValueError(f'the rail devices of {node} must be a list, got {devices!r}')
    if not isinstance(addresses, t.Mapping):
        raise ValueError(f'the server addresses must be a mapping of node to address, got {addresses!r}')
    tests = [_checked_test(test) for test in tests]
    for test in tests:
        if test['client'] == node and test['server'] not in addresses:
            raise ValueError(f"no address for server {test['server']!r} of test {test!r}")
    servers = [dict(test, argv=perftest_argv(perftest, device(test), test['port'], duration))
               for test in tests if test['server'] == node]
    clients = [dict(test, argv=perftest_argv(perftest, device(test), test['port'], duration, addresses[test['server']]))
               for test in tests if test['client'] == node]
    return {'servers': servers, 'clients': clients}


def _checked_test(test: object) -> dict:
    """A planned test with the keys round_commands reads."""
    if not isinstance(test, dict) or not all(key in test for key in ('client', 'server', 'rail', 'port')):
        raise ValueError(f'planned test {test!r} is not a dict with client, server, rail and port')
    return test


# results ---------------------------------------------------------------------


def _checked_result(result: object) -> dict:
    """Return a result dict after checking the keys the planner reads."""
    require_record(result, ('client', 'server', 'rail', 'status'), f'result {result!r}')
    if result['status'] not in STATUSES:
        raise ValueError(f"result {result!r} has status {result['status']!r}; expected one of {', '.join(STATUSES)}")
    for key in ('client', 'server'):
        if not isinstance(result[key], str) or not result[key]:
            raise ValueError(f'result {result!r} has {key} {result[key]!r}, not a node name')
    if not _is_int(result['rail']) or result['rail'] < 0:
        raise ValueError(f"result {result!r} has rail {result['rail']!r}, not a whole number >= 0")
    return result


def _tests_run(results: t.Iterable[dict]) -> list[dict]:
    """Checked results of tests that ran; entries without a server (unplannable retests) are reports, not tests."""
    if not isinstance(results, (list, tuple)):
        raise ValueError(f'expected a list of results, got {results!r}')
    return [_checked_result(result) for result in results if not (isinstance(result, dict) and 'server' in result and result['server'] is None)]


def known_good_nodes(results: list[dict]) -> dict[int, list[str]]:
    """Per rail, the sorted nodes that took part in at least one test on that rail and passed all of them."""
    seen: dict[int, set[str]] = collections.defaultdict(set)
    failed: dict[int, set[str]] = collections.defaultdict(set)
    for result in _tests_run(results):
        ends = (result['client'], result['server'])
        seen[result['rail']].update(ends)
        if result['status'] != 'pass':
            failed[result['rail']].update(ends)
    return {rail: sorted(seen[rail] - failed[rail]) for rail in sorted(seen)}


def _first_free_round(busy: list[set[tuple[str, str, int]]], keys: tuple[tuple[str, str, int], ...]) -> int:
    """Return the first round in which none of the keys is taken, or the index of a new round."""
    for round_index, taken in enumerate(busy):
        if taken.isdisjoint(keys):
            return round_index
    return len(busy)


def _schedule(tests: list[dict]) -> list[list[dict]]:
    """First-fit the tests into rounds so no node is client twice or server twice on one rail in a round."""
    rounds: list[list[dict]] = []
    busy: list[set[tuple[str, str, int]]] = []
    for test in tests:
        keys = (('client', test['client'], test['rail']), ('server', test['server'], test['rail']))
        round_index = _first_free_round(busy, keys)
        if round_index == len(rounds):
            rounds.append([])
            busy.append(set())
        busy[round_index].update(keys)
        rounds[round_index].append(dict(test, round=round_index))
    return rounds


def plan_retests(results: list[dict], base_port: int = DEFAULT_BASE_PORT) -> list[list[dict]]:
    """Plan, for each failed test a->b on rail k, the tests a->g and b->g against a known-good node g of rail k.

    g is the least-loaded known-good node of the rail other than a and b (ties go to the first in sorted order),
    so retests spread over the good nodes. A retest shared by several failures runs once and lists each
    failure under ``retest_of``. A failure with no usable g gives an entry with ``'server': None``, ``'port': None``
    and a ``'reason'``; such entries ride in round 0 for the playbook to report and are never run.
    Returns [] when nothing failed.
    """
    tests_run = _tests_run(results)
    failures = sorted({(result['client'], result['server'], result['rail']) for result in tests_run if result['status'] == 'fail'},
                      key=lambda key: (key[2], key[0], key[1]))
    if not failures:
        return []
    _check_ports(max(rail for _client, _server, rail in failures) + 1, base_port)
    good = known_good_nodes(tests_run)
    load: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    planned: dict[_TestKey, dict] = {}
    unplannable = []
    for client, server, rail in failures:
        failure = {'client': client, 'server': server, 'rail': rail}
        peers = [node for node in good.get(rail, []) if node not in (client, server)]
        if not peers:
            unplannable.append({'round': 0, 'client': client, 'server': None, 'rail': rail, 'port': None,
                                'reason': f'no known-good peer on rail {rail}', 'retest_of': [failure]})
            continue
        peer = min(peers, key=lambda node: (load[rail][node], node))
        for suspect in (client, server):
            key = (suspect, peer, rail)
            if key not in planned:
                load[rail][peer] += 1
                planned[key] = {'round': 0, 'client': suspect, 'server': peer, 'rail': rail, 'port': base_port + rail, 'retest_of': []}
            planned[key]['retest_of'].append(failure)
    rounds = _schedule(list(planned.values()))
    if unplannable:
        if not rounds:
            rounds.append([])
        rounds[0].extend(unplannable)
    return rounds


# classification ----------------------------------------------------------------


def _passed_against(node: str, pair: tuple[str, str], rail: int, retests: list[dict]) -> dict[str, bool]:
    """Map each peer outside the failed pair that ``node`` was retested against on ``rail`` to whether it passed."""
    verdicts: dict[str, bool] = {}
    for result in retests:
        if result['rail'] != rail or node not in (result['client'], result['server']):
            continue
        peer = result['server'] if result['client'] == node else result['client']
        if peer in pair:
            continue
        verdicts[peer] = verdicts.get(peer, True) and result['status'] == 'pass'
    return verdicts


def classify(failed_test: dict, retests: list[dict]) -> dict:
    """Name the likely culprit of a failed test a->b on rail k from retests of a and b against known-good peers.

    a fails and b passes: ``bad node a``; the reverse: ``bad node b``; both pass: a bad link (cable, port or
    switch path) between a and b, or a transient; both fail: both suspect. Without a retest of each, the verdict
    starts with ``undetermined:``. ``suspects`` lists the nodes not cleared by a passing retest (both for a bad link,
    whose two ends are where to look). A node counts as failing if any of its retests failed.
    """
    require_record(failed_test, ('client', 'server', 'rail'), f'failed test {failed_test!r}')
    if failed_test.get('status', 'fail') != 'fail':
        raise ValueError(f"failed test {failed_test!r} has status {failed_test['status']!r}, not 'fail'")
    client, server, rail = failed_test['client'], failed_test['server'], failed_test['rail']
    pair = (client, server)
    if isinstance(retests, (str, bytes, dict)):
        raise ValueError(f'expected a list of retest results, got {retests!r}')
    no_peer = [entry for entry in retests if isinstance(entry, dict) and entry.get('server') is None and entry.get('rail') == rail
               and {'client': client, 'server': server, 'rail': rail} in entry.get('retest_of', [])]
    tests_run = _tests_run(retests)
    outcome = {node: _passed_against(node, pair, rail, tests_run) for node in pair}
    peers = ', '.join(sorted(set(outcome[client]) | set(outcome[server])))
    report = {'client': client, 'server': server, 'rail': rail, 'peers': sorted(set(outcome[client]) | set(outcome[server]))}
    missing = [node for node in pair if not outcome[node]]
    if missing:
        cleared = {node for node in pair if outcome[node] and all(outcome[node].values())}
        if no_peer and len(missing) == 2:
            reason = no_peer[0].get('reason', f'no known-good peer on rail {rail}')
        else:
            reason = f"no retest of {' or '.join(missing)} against a known-good peer on rail {rail}"
        return dict(report, verdict=f'undetermined: {reason}', suspects=[node for node in pair if node not in cleared])
    client_ok = all(outcome[client].values())
    server_ok = all(outcome[server].values())
    if client_ok and server_ok:
        verdict, suspects = f'bad link between {client} and {server} (both pass against {peers})', [client, server]
    elif server_ok:
        verdict, suspects = f'bad node {client}', [client]
    elif client_ok:
        verdict, suspects = f'bad node {server}', [server]
    else:
        verdict, suspects = f'both nodes fail against {peers}', [client, server]
    return dict(report, verdict=verdict, suspects=suspects)
