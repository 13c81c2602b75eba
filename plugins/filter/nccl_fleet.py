# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of validate.yml's NCCL stage: pairs to run, fleet verdicts, bisection retests, per-node checks."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_fleet as fleet


def _wrap(name, func, *args):
    try:
        return func(*args)
    except (fleet.NcclFleetError, ValueError, KeyError, TypeError) as err:
        raise AnsibleFilterError(f'{name}: {err}') from err


def nccl_ready_nodes(nodes, hostvars, validators=('__validate_gpu_topology', '__validate_rdma_links')):
    """The nodes whose registered validator results (hostvars) are all healthy: the ones NCCL runs on."""
    ready = []
    for node in nodes:
        facts = hostvars[node]
        results = [facts.get(name) if hasattr(facts, 'get') else None for name in validators]
        if all(isinstance(r, dict) and r.get('healthy') and not r.get('failed') for r in results):
            ready.append(node)
    return ready


def nccl_tag_runs(results):
    """Tag registered nccl_tests loop results with test, kind and nodes for nccl_judge.

    Items are [test, {kind: single, node} | {kind: pair, pair: [a, b]}, repeat] (first runs, possibly through
    async_status) or [{test, nodes}, repeat] (retests).
    """
    runs = []
    for index, result in enumerate(results or []):
        planned = fleet.plan_item(result) if isinstance(result, dict) else None
        if not isinstance(planned, (list, tuple)) or not planned:
            raise AnsibleFilterError(f'nccl_tag_runs: results[{index}] has no plan item')
        if isinstance(planned[0], dict):
            runs.append({'test': planned[0]['test'], 'kind': 'retest', 'nodes': list(planned[0]['nodes']), 'result': result})
        else:
            spec = planned[1]
            nodes = [spec['node']] if spec['kind'] == 'single' else list(spec['pair'])
            runs.append({'test': planned[0], 'kind': spec['kind'], 'nodes': nodes, 'result': result})
    return runs


def nccl_pairs(nodes):
    """Node pairs for the 2-node runs: neighbours in natural order, an odd last node with the first."""
    return _wrap('nccl_pairs', fleet.plan_pairs, list(nodes))


def nccl_judge(runs, thresholds, tolerance_pct):
    """One verdict per (test, kind, nodes) from tagged nccl_tests results: median, threshold, fleet outliers."""
    return _wrap('nccl_judge', fleet.judge_tests, runs, thresholds or {}, tolerance_pct)


def nccl_bisect(verdicts):
    """Retests of the nodes of failing pairs against known-good nodes: [{test, nodes}]."""
    return _wrap('nccl_bisect', fleet.plan_bisection, verdicts)


def nccl_node_results(verdicts, nodes):
    """{node: {checks, healthy}} with nccl_busbw, nccl_run and nccl_pair checks, pairs attributed by bisection."""
    return _wrap('nccl_node_results', fleet.node_results, list(nodes), verdicts)


class FilterModule:
    """NCCL fleet filters."""

    def filters(self):
        return {
            'nccl_ready_nodes': nccl_ready_nodes,
            'nccl_tag_runs': nccl_tag_runs,
            'nccl_pairs': nccl_pairs,
            'nccl_judge': nccl_judge,
            'nccl_bisect': nccl_bisect,
            'nccl_node_results': nccl_node_results,
        }
