# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters behind playbooks/validate_fabric.yml: plan perftest pairs and their commands, judge them, classify failures."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import UNSET, plugin_utils

plan = plugin_utils('_fabric_plan')
perftest = plugin_utils('_perftest')

_TEST_KEYS = ('round', 'client', 'server', 'rail', 'port')


def _wrap(name: str, func: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    try:
        return func(*args)
    except ValueError as err:
        raise AnsibleFilterError(f'{name}: {err}') from err


def _judged(client_result: t.Mapping[str, t.Any], expected_gbps: float, tolerance: float, phase: str) -> dict[str, t.Any]:
    """One pair's verdict from the client's registered command result (its loop item is the planned test)."""
    test = {key: client_result['item'][key] for key in _TEST_KEYS}
    where = f"{test['client']} -> {test['server']} rail {test['rail']}"
    rc = client_result.get('rc')
    try:
        measured = perftest.judge_bw(perftest.parse_bw(client_result.get('stdout', '')), expected_gbps, tolerance)
    except perftest.PerftestError as err:
        detail = (client_result.get('stderr') or '').strip().splitlines()
        reason = 'timed out' if rc == 124 else (detail[0] if detail else str(err))
        measured = {'status': 'fail', 'average_gbps': None, 'threshold_gbps': expected_gbps * tolerance,
                    'message': f'no bandwidth measured (exit {rc}): {reason}'}
    return dict(test, **measured, phase=phase, summary=f"{where}: {measured['message']}")


def perftest_results(client_results, expected_gbps, tolerance=0.9, phase='pairs'):
    """Judge every client run of a round: registered loop results in, one verdict per planned test out."""
    return _wrap('perftest_results',
                 lambda: [_judged(r, float(expected_gbps), float(tolerance), phase) for r in client_results])


def fabric_plan(nodes, rails, pattern='ring', base_port=UNSET):
    """Rounds of concurrent pair tests (see plan_pairs); base_port defaults to plan.DEFAULT_BASE_PORT."""
    base_port = plan.DEFAULT_BASE_PORT if base_port is UNSET else base_port
    return _wrap('fabric_plan', plan.plan_pairs, list(nodes), int(rails), pattern, int(base_port))


def _address(facts, node):
    """Where clients reach a node's perftest servers: its fabric_address, else its ansible_host, else its name."""
    for key in ('fabric_address', 'ansible_host'):
        value = facts.get(key) if hasattr(facts, 'get') else None
        if value is not None:
            return value
    return node


def fabric_round_commands(round_tests, node, rails, hostvars, perftest='ib_write_bw', duration=5):
    """This node's perftest servers and clients in one round, argv included: {servers, clients}."""
    round_tests = list(round_tests)
    servers = {test['server'] for test in round_tests if test.get('client') == node}
    addresses = {server: _address(hostvars[server], server) for server in servers}
    return _wrap('fabric_round_commands', plan.round_commands, round_tests, node, list(rails), addresses, perftest, duration)


def fabric_retests(results, base_port=UNSET):
    """Rounds retesting both nodes of each failing pair against a known-good peer (base_port as fabric_plan)."""
    base_port = plan.DEFAULT_BASE_PORT if base_port is UNSET else base_port
    return _wrap('fabric_retests', plan.plan_retests, list(results), int(base_port))


def fabric_classify(results, retest_results, retest_rounds):
    """A verdict (bad node, bad link, undetermined) for every failing pair."""
    unplannable = [entry for round_ in retest_rounds for entry in round_ if entry.get('server') is None]
    evidence = list(retest_results) + unplannable
    failed = [r for r in results if r['status'] == 'fail']
    return _wrap('fabric_classify', lambda: [plan.classify(dict(test), evidence) for test in failed])


class FilterModule:
    """Fabric validation filters."""

    def filters(self):
        return {
            'perftest_results': perftest_results,
            'fabric_plan': fabric_plan,
            'fabric_round_commands': fabric_round_commands,
            'fabric_retests': fabric_retests,
            'fabric_classify': fabric_classify,
        }
