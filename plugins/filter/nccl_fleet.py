# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of validate.yml's NCCL stage: pairs to run, fleet verdicts, bisection retests, per-node checks."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import UNSET, module_utils, plugin_utils

fleet = plugin_utils('_nccl_fleet')
report = plugin_utils('_report')
catalog = module_utils('_gpu_catalog')

# GPUs of a node whose inventory does not say (gpu_profile or gpu_count).
DEFAULT_GPU_COUNT = 8


def _wrap(name, func, *args):
    try:
        return func(*args)
    except (fleet.NcclFleetError, ValueError, KeyError, TypeError) as err:
        raise AnsibleFilterError(f'{name}: {err}') from err


def nccl_ready_nodes(nodes, hostvars, validators=UNSET, hardware=None):
    """The nodes whose registered validator results (hostvars) are all healthy: the ones NCCL runs on.

    `validators`: the names of the registered results to require; default, every validator's. `hardware`: the
    results of the nodes the hardware stage ran through Slurm, or left alone ({node: {validator: result}}), read
    instead of their registered ones.
    """
    if validators is UNSET:
        validators = tuple(report.REGISTERED_VALIDATORS.values())
    ready = []
    for node in nodes:
        if hardware and node in hardware:
            facts = {variable: hardware[node].get(name) for name, variable in report.REGISTERED_VALIDATORS.items()}
        else:
            facts = hostvars[node]
        results = [facts.get(name) if hasattr(facts, 'get') else None for name in validators]
        if all(isinstance(r, dict) and r.get('healthy') and not r.get('failed') for r in results):
            ready.append(node)
    return ready


def nccl_tag_runs(results):
    """Tag registered nccl_tests loop results with test, kind and nodes for nccl_judge.

    Items are the runs of nccl_plan and nccl_retest_plan ({test, kind, nodes, ...}), possibly through async_status,
    or the list items of hand-made loops: [test, {kind: single, node} | {kind: pair, pair: [a, b]}, repeat] and
    [{test, nodes}, repeat] (retests).
    """
    runs = []
    for index, result in enumerate(results or []):
        planned = fleet.plan_item(result) if isinstance(result, dict) else None
        if isinstance(planned, dict) and {'test', 'kind', 'nodes'} <= set(planned):
            runs.append({'test': planned['test'], 'kind': planned['kind'], 'nodes': list(planned['nodes']), 'result': result})
            continue
        if not isinstance(planned, (list, tuple)) or not planned:
            raise AnsibleFilterError(f'nccl_tag_runs: results[{index}] has no plan item')
        if isinstance(planned[0], dict):
            runs.append({'test': planned[0]['test'], 'kind': 'retest', 'nodes': list(planned[0]['nodes']), 'result': result})
        else:
            spec = planned[1]
            nodes = [spec['node']] if spec['kind'] == 'single' else list(spec['pair'])
            runs.append({'test': planned[0], 'kind': spec['kind'], 'nodes': nodes, 'result': result})
    return runs


def _gpus(nodes, hostvars):
    """{node: gpu_count} from the nodes' variables: their gpu_profile's GPU count in the GPU catalog, or gpu_count
    (DEFAULT_GPU_COUNT where neither is set)."""
    counts = {}
    for node in nodes:
        facts = hostvars[node]
        value = catalog.node_gpus(str(node), facts)['gpu_count'] if hasattr(facts, 'get') else None
        counts[node] = DEFAULT_GPU_COUNT if value is None else value
    return counts


def nccl_plan(nodes, hostvars, options):
    """Every single-node and pair run of the stage, srun argv included (see _nccl_fleet.plan_runs)."""
    nodes = list(nodes)
    return _wrap('nccl_plan', fleet.plan_runs, nodes, _gpus(nodes, hostvars), options or {})


def nccl_retest_plan(verdicts, hostvars, options):
    """The runs retesting the nodes of failing pairs against known-good nodes, argv included."""
    verdicts = list(verdicts or [])
    nodes = sorted({node for verdict in verdicts for node in verdict['nodes']})
    return _wrap('nccl_retest_plan', fleet.plan_retest_runs, verdicts, _gpus(nodes, hostvars), options or {})


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
            'nccl_plan': nccl_plan,
            'nccl_retest_plan': nccl_retest_plan,
            'nccl_pairs': nccl_pairs,
            'nccl_judge': nccl_judge,
            'nccl_bisect': nccl_bisect,
            'nccl_node_results': nccl_node_results,
        }
