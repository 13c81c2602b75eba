# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL stage of validate.yml: which nccl-tests runs to make, and what the fleet's results say of each node.

Pure Python, no Ansible import. Runs are planned whole, srun argv included (plan_runs, plan_retest_runs): each test
on every node alone (`single`, all its GPUs) and on pairs of nodes (`pair`), each repeated; then the nodes of failing
pairs against known-good nodes (`retest`). Their nccl_tests module results are tagged with the test binary, the kind
and the nodes. A test (binary, kind, nodes) is judged on the median plateau busbw of its repeats:

- below the static threshold of its binary and kind -> fail;
- below (100 - tolerance_pct)% of the fleet median of the same binary and kind -> fail (an outlier: slower
  than its peers even when above the static floor);
- any repeat with wrong elements, out-of-bounds values or a failed exit -> fail.

A failing pair is bisected like the RDMA fabric test (plugin_utils/_fabric_plan.py: plan_retests, classify):
both of its nodes are retested against a known-good node, and the verdict names the bad node, a bad link between
the two, or says why it could not tell. Node checks come out as `nccl_busbw` (single node), `nccl_pair` (pairs,
attributed by the bisection) and `nccl_run` (a run that failed for other reasons than bandwidth).
"""

from __future__ import annotations

import collections
import statistics
import typing as t

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _fabric_plan as fabric
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import (
    FAIL, PASS, WARN, below_fleet, check, finite, healthy, natural_key, non_finite, require_record)

KINDS = ('single', 'pair', 'retest')
JOB_NAME = 'llmforge-nccl'
# Two-node runs: one rank per GPU (-g 1, the MPI layout nccl-tests documents) or one rank per node driving all its
# GPUs (-g <gpus>).
PAIR_LAYOUTS = ('rank_per_gpu', 'rank_per_node')


class NcclFleetError(ValueError):
    """Bad input; the message names the field."""


def check_tolerance(tolerance_pct: t.Any, error: type[ValueError] = NcclFleetError) -> float:
    """The fleet tolerance as a float; `error` names it when it is not a percentage in [0, 100)."""
    if isinstance(tolerance_pct, bool) or not isinstance(tolerance_pct, (int, float)) or not 0 <= tolerance_pct < 100:
        raise error(f'tolerance_pct must be a percentage in [0, 100), got {tolerance_pct!r}')
    return float(tolerance_pct)


def plan_item(result: t.Mapping[str, t.Any]) -> t.Any:
    """The plan entry of a registered loop result, also through async_status (whose item is the submitted job)."""
    item = result.get('item')
    if isinstance(item, dict) and 'ansible_job_id' in item:
        item = item.get('item')
    return item


def plan_pairs(nodes: t.Sequence[str]) -> list[list[str]]:
    """Neighbours in natural order: (n1, n2), (n3, n4), ...; an odd last node pairs with the first."""
    ordered = sorted(dict.fromkeys(nodes), key=natural_key)
    if len(ordered) < 2:
        return []
    pairs = [ordered[i:i + 2] for i in range(0, len(ordered) - 1, 2)]
    if len(ordered) % 2:
        pairs.append([ordered[-1], ordered[0]])
    return pairs


def _string_list(value: t.Any, name: str) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise NcclFleetError(f'{name} must be a list, got {value!r}')
    return [str(item) for item in value]


def run_options(options: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """The stage's settings, checked: tests, repeats, bin_dir, args, srun_args, immediate, pair_layout."""
    clean = {key: _string_list(options.get(key) or [], key) for key in ('tests', 'args', 'srun_args')}
    try:
        clean['repeats'] = int(options.get('repeats', 3))
    except (TypeError, ValueError):
        raise NcclFleetError(f"repeats must be a whole number, got {options.get('repeats')!r}") from None
    clean['bin_dir'] = str(options.get('bin_dir') or '')
    clean['immediate'] = options.get('immediate', 300)
    clean['pair_layout'] = options.get('pair_layout') or PAIR_LAYOUTS[0]
    if clean['pair_layout'] not in PAIR_LAYOUTS:
        raise NcclFleetError(f"pair_layout must be one of {', '.join(PAIR_LAYOUTS)}, got {clean['pair_layout']!r}")
    return clean


def run_argv(options: t.Mapping[str, t.Any], test: str, nodes: t.Sequence[str], gpus: t.Any) -> list[str]:
    """srun argv of one run of `test`: one node with one task driving its `gpus` GPUs, or two nodes laid out by
    pair_layout (`gpus` per node: the first node's)."""
    srun = ['srun', '--exclusive', f"--immediate={options['immediate']}", f'--job-name={JOB_NAME}'] + options['srun_args']
    if len(nodes) == 1:
        where, per_rank = ['--nodes=1', f'--nodelist={nodes[0]}', '--ntasks=1'], gpus
    else:
        rank_per_node = options['pair_layout'] == 'rank_per_node'
        where = [f'--nodes={len(nodes)}', f"--nodelist={','.join(nodes)}", f'--ntasks-per-node={1 if rank_per_node else gpus}']
        per_rank = gpus if rank_per_node else 1
    return srun + where + [f'--gres=gpu:{gpus}', f"{options['bin_dir']}/{test}"] + options['args'] + ['-g', str(per_rank)]


def _planned(options: t.Mapping[str, t.Any], test: str, kind: str, nodes: list[str], gpus: t.Mapping[str, t.Any],
             repeat: int) -> dict[str, t.Any]:
    return {'test': test, 'kind': kind, 'nodes': nodes, 'repeat': repeat, 'label': f"{test} {'+'.join(nodes)} #{repeat + 1}",
            'argv': run_argv(options, test, nodes, gpus[nodes[0]])}


def plan_runs(nodes: t.Sequence[str], gpus: t.Mapping[str, t.Any], options: t.Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """Every first run of the stage, argv included: [{test, kind, nodes, repeat, label, argv}].

    Each test on every node alone, then on every pair (plan_pairs), each `repeats` times; `gpus` maps a node to its
    GPU count. Slurm schedules them: they can all be submitted at once (--exclusive keeps them apart).
    """
    opts = run_options(options)
    runs = [_planned(opts, test, 'single', [node], gpus, repeat)
            for test in opts['tests'] for node in nodes for repeat in range(opts['repeats'])]
    pairs = plan_pairs(nodes)
    runs += [_planned(opts, test, 'pair', pair, gpus, repeat)
             for test in opts['tests'] for pair in pairs for repeat in range(opts['repeats'])]
    return runs


def plan_retest_runs(verdicts: t.Sequence[t.Mapping[str, t.Any]], gpus: t.Mapping[str, t.Any],
                     options: t.Mapping[str, t.Any]) -> list[dict[str, t.Any]]:
    """The retests of plan_bisection as runs like plan_runs' (kind `retest`), each `repeats` times."""
    opts = run_options(options)
    return [_planned(opts, retest['test'], 'retest', list(retest['nodes']), gpus, repeat)
            for retest in plan_bisection(verdicts) for repeat in range(opts['repeats'])]


def _run_key(run: t.Mapping[str, t.Any], index: int) -> tuple[str, str, tuple[str, ...]]:
    require_record(run, ('test', 'kind', 'nodes', 'result'), f'runs[{index}]', NcclFleetError)
    if run['kind'] not in KINDS:
        raise NcclFleetError(f"runs[{index}].kind must be one of {', '.join(KINDS)}, got {run['kind']!r}")
    nodes = run['nodes']
    if not isinstance(nodes, (list, tuple)) or not nodes or not all(isinstance(node, str) for node in nodes):
        raise NcclFleetError(f'runs[{index}].nodes must be a list of node names')
    result = run['result']
    if result is not None and not isinstance(result, t.Mapping):
        raise NcclFleetError(f'runs[{index}].result must be a mapping (a registered nccl_tests result), got {result!r}')
    if isinstance(result, t.Mapping) and not isinstance(result.get('checks', []), list):
        raise NcclFleetError(f"runs[{index}].result.checks must be a list, got {result.get('checks')!r}")
    return str(run['test']), run['kind'], tuple(nodes)


def _family(kind: str) -> str:
    """Retests are pair runs: they share the pair threshold and the pair fleet median."""
    return 'pair' if kind == 'retest' else kind


def _threshold(thresholds: t.Mapping[str, t.Any], test: str, kind: str) -> t.Optional[float]:
    per_test = thresholds.get(test) or {}
    if not isinstance(per_test, dict):
        raise NcclFleetError(f'thresholds.{test} must map single/pair to GB/s, got {per_test!r}')
    value = per_test.get(_family(kind))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise NcclFleetError(f'thresholds.{test}.{kind} must be a number of GB/s, got {value!r}')
    return float(value)


def judge_tests(runs: t.Sequence[t.Mapping[str, t.Any]], thresholds: t.Mapping[str, t.Any],
                tolerance_pct: float) -> list[dict[str, t.Any]]:
    """One verdict per (test, kind, nodes): median busbw over its repeats against the threshold and the fleet."""
    check_tolerance(tolerance_pct)
    if isinstance(runs, (str, bytes)) or not isinstance(runs, t.Sequence):
        raise NcclFleetError(f'runs must be a list of registered runs, got {runs!r}')
    if not isinstance(thresholds, t.Mapping):
        raise NcclFleetError(f'thresholds must map each test to its single/pair GB/s, got {thresholds!r}')
    groups: dict[tuple[str, str, tuple[str, ...]], list[t.Mapping[str, t.Any]]] = {}
    for index, run in enumerate(runs):
        groups.setdefault(_run_key(run, index), []).append(run['result'] or {})
    medians: dict[tuple[str, str, tuple[str, ...]], t.Optional[float]] = {}
    # A NaN or infinite busbw is a broken run: it fails its test and stays out of every median.
    damaged: dict[tuple[str, str, tuple[str, ...]], list[t.Any]] = {}
    for key, results in groups.items():
        measured = [r.get('plateau_busbw_gbps') for r in results]
        damaged[key] = [value for value in measured if non_finite(value)]
        values = [number for number in map(finite, measured) if number is not None]
        medians[key] = statistics.median(values) if values and not damaged[key] else None
    family_medians: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    for (test, kind, _nodes), busbw in medians.items():
        if busbw is not None:
            family_medians[(test, _family(kind))].append(busbw)
    fleet = {key: statistics.median(values) for key, values in family_medians.items()}
    # The fleet comparison needs at least two tests of the same binary and kind.
    peers = collections.Counter((test, kind) for test, kind, _nodes in groups)
    verdicts = []
    for key in sorted(groups, key=lambda k: (k[0], KINDS.index(k[1]), [natural_key(n) for n in k[2]])):
        test, kind, nodes = key
        results = groups[key]
        busbw = medians[key]
        floor = _threshold(thresholds, test, kind)
        median_of_fleet = fleet.get((test, _family(kind)))
        problems = []
        broken = [c for r in results for c in r.get('checks', []) if isinstance(c, t.Mapping) and c.get('status') == FAIL and c.get('name') != 'busbw']
        if broken or any(r.get('failed') for r in results):
            first = broken[0] if broken else {'name': 'run', 'message': next((r.get('msg') for r in results if r.get('failed')), 'failed')}
            problems.append(('run', f"{first['name']}: {first.get('message')}"))
        if damaged[key]:
            problems.append(('run', f'busbw {damaged[key][0]} is not a finite number'))
        elif busbw is None:
            problems.append(('run', 'no busbw measured'))
        else:
            if floor is not None and busbw < floor:
                problems.append(('busbw', f'median busbw {busbw:g} GB/s below the threshold {floor:g} GB/s'))
            if peers[(test, kind)] >= 2 and below_fleet(busbw, median_of_fleet, tolerance_pct):
                problems.append(('busbw', f'median busbw {busbw:g} GB/s is more than {tolerance_pct:g}% below the fleet '
                                          f'median {median_of_fleet:g} GB/s'))
        verdicts.append({
            'test': test, 'kind': kind, 'nodes': list(nodes), 'repeats': len(results), 'busbw_gbps': busbw,
            'all_busbw_gbps': [r.get('plateau_busbw_gbps') for r in results], 'threshold_gbps': floor,
            'fleet_median_gbps': median_of_fleet, 'status': FAIL if problems else PASS,
            'problem': problems[0][0] if problems else None,
            'message': '; '.join(text for _kind, text in problems) if problems else
            f'median busbw {busbw:g} GB/s over {len(results)} run(s)',
        })
    return verdicts


def _as_fabric(verdict: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """A pair verdict as a _fabric_plan test result on one 'rail' per test binary."""
    client, server = verdict['nodes'][:2]
    return {'client': client, 'server': server, 'rail': 0, 'status': verdict['status'], 'test': verdict['test']}


def plan_bisection(verdicts: t.Sequence[t.Mapping[str, t.Any]]) -> list[dict[str, t.Any]]:
    """Retests for failing pairs: [{'test', 'nodes': [suspect, known-good]}]; a failure without a known-good peer
    gives no retest (classify then says why). Known-good nodes passed every pair and single run of that test."""
    retests: list[dict[str, t.Any]] = []
    for test in sorted({v['test'] for v in verdicts}):
        pairs = [_as_fabric(v) for v in verdicts if v['test'] == test and v['kind'] == 'pair']
        bad_singles = {v['nodes'][0] for v in verdicts if v['test'] == test and v['kind'] == 'single' and v['status'] == FAIL}
        # A node whose own single-node run failed is not a known-good peer.
        usable = [dict(p, status=FAIL) if {p['client'], p['server']} & bad_singles else p for p in pairs]
        failing = [p for p in pairs if p['status'] == FAIL]
        if not failing:
            continue
        for round_tests in fabric.plan_retests([p for p in usable if p['status'] == PASS] + failing):
            for planned in round_tests:
                if planned['server'] is not None:
                    retests.append({'test': test, 'nodes': [planned['client'], planned['server']]})
    unique = {(r['test'], tuple(r['nodes'])): r for r in retests}
    return list(unique.values())


def node_results(nodes: t.Sequence[str], verdicts: t.Sequence[t.Mapping[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
    """{node: {'checks': [...], 'healthy': bool, 'tests': [...]}} for the report, the drain and the summary."""
    checks: dict[str, list[dict[str, t.Any]]] = {node: [] for node in nodes}

    def add(node: str, item: dict[str, t.Any]) -> None:
        checks.setdefault(node, []).append(item)

    for verdict in verdicts:
        if verdict['kind'] != 'single':
            continue
        node = verdict['nodes'][0]
        name = 'nccl_run' if verdict['problem'] == 'run' else 'nccl_busbw'
        add(node, check(name, verdict['status'], f"{verdict['test']} single", verdict['threshold_gbps'],
                        verdict['busbw_gbps'], verdict['message']))
    for test in sorted({v['test'] for v in verdicts}):
        retests = [_as_fabric(v) for v in verdicts if v['test'] == test and v['kind'] == 'retest']
        singles = {v['nodes'][0]: v['status'] for v in verdicts if v['test'] == test and v['kind'] == 'single'}
        for verdict in (v for v in verdicts if v['test'] == test and v['kind'] == 'pair'):
            subject = f"{test} {'+'.join(verdict['nodes'])}"
            if verdict['status'] == PASS:
                for node in verdict['nodes']:
                    add(node, check('nccl_pair', PASS, subject, verdict['threshold_gbps'], verdict['busbw_gbps'],
                                    verdict['message']))
                continue
            outcome = fabric.classify(_as_fabric(verdict), retests)
            suspects = outcome['suspects']
            if outcome['verdict'].startswith('undetermined') and any(singles.get(n) == FAIL for n in verdict['nodes']):
                # No peer to bisect against (e.g. a 2-node cluster): blame the node whose own run failed.
                suspects = [n for n in verdict['nodes'] if singles.get(n) == FAIL]
            for node in verdict['nodes']:
                status = FAIL if node in suspects else WARN if outcome['verdict'].startswith('undetermined') else PASS
                add(node, check('nccl_pair', status, subject, verdict['threshold_gbps'], verdict['busbw_gbps'],
                                f"{verdict['message']}; {outcome['verdict']}"))
    return {node: {'checks': sorted(items, key=lambda c: c['status'] != FAIL), 'healthy': healthy(items)}
            for node, items in checks.items()}
