# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The training stage of validate.yml: which runs of the reference trainer to make through Slurm, and what they say.

Pure Python, no Ansible import. The trainer is the training_env role's `llmforge-train`; at exit its rank 0 prints one
line `summary {json}` (world_size, nodes, tokens_per_s, loss_first, loss_last, last_step, target_steps, exit_reason,
...). Runs are planned whole, argv included: one per node alone (kind `single`, all its GPUs) and one across all
the ready nodes (kind `all`), each repeated. A node is judged on its single-node runs:

- `training_run`: every repeat exited 0, printed its summary, reached the target step with the planned world size;
- `training_loss`: the loss went down in every repeat (loss_last < loss_first);
- `training_tokens_per_s`: the median tokens/s of its repeats is not more than tolerance_pct below the fleet median
  (the median over the nodes that ran the same number of tasks; with 2 nodes that is their mean) nor below the
  optional absolute floor.

The all-node run is a cluster-level result, never attributed to a node: when it fails while every node passed
alone, the fabric or the rendezvous between nodes is the suspect.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, PASS, SKIP, check, healthy
from ansible_collections.llmforge.cluster.plugins.plugin_utils._nccl_fleet import (
    below_fleet, check_tolerance, natural_key, plan_item)

KINDS = ('single', 'all')
JOB_NAME = 'llmforge-train-validate'
SUMMARY_PREFIX = 'summary '
ALL_NODES = 'all-nodes'
TIMEOUT_RC = 124  # coreutils timeout's exit status when the time ran out
KILL_AFTER = 30   # seconds between timeout's TERM (the trainer checkpoints and stops) and KILL
# Runs in each task, as root: the trainer in a new run directory named after the Slurm job, made exclusively and 0700
# by the trainer's rank 0 (--new-run-dir: one another user made first, with a checkpoint whose pickled metadata would
# run as root, is refused, never resumed from). Rank 0 removes it afterwards (all ranks have passed the trainer's
# last barrier by then), only when it is root's own directory; the trainer's exit status is kept.
RUN_WRAPPER = ('run_dir="$1/llmforge-validate-${SLURM_JOB_ID:?}"; shift; "$@" --new-run-dir --run-dir "$run_dir"; '
               'rc=$?; if [ "${SLURM_PROCID:-0}" = 0 ] && [ ! -L "$run_dir" ] && [ -O "$run_dir" ]; then '
               'rm -rf -- "$run_dir"; fi; exit "$rc"')


class TrainingFleetError(ValueError):
    """Bad input; the message names the field."""


# --- plan ------------------------------------------------------------------------------------------

def _count(value: t.Any, where: str) -> int:
    if isinstance(value, bool):
        raise TrainingFleetError(f'{where} must be a whole number, got {value!r}')
    try:
        number = int(str(value))
    except ValueError:
        raise TrainingFleetError(f'{where} must be a whole number, got {value!r}') from None
    if number < 0:
        raise TrainingFleetError(f'{where} must not be negative, got {value!r}')
    return number


def node_shape(node: str, settings: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """{gpus, tasks, trainer, run_root} of one node: one task per GPU (one task without GPUs) unless overridden."""
    gpus = _count(settings.get('gpus', 0), f'{node}: validate_training_gpus_per_node (or gpu_count)')
    tasks = settings.get('tasks')
    tasks = _count(tasks, f'{node}: validate_training_tasks_per_node') if tasks not in (None, '') else max(gpus, 1)
    if tasks < 1:
        raise TrainingFleetError(f'{node}: validate_training_tasks_per_node must be at least 1, got {tasks}')
    trainer = str(settings.get('trainer') or '')
    if not os.path.isabs(trainer):
        raise TrainingFleetError(f'{node}: the trainer must be an absolute path, got {trainer!r}')
    run_root = str(settings.get('run_root') or '')
    if run_root and not os.path.isabs(run_root):
        raise TrainingFleetError(f'{node}: validate_training_run_root must be an absolute path, got {run_root!r}')
    return {'gpus': gpus, 'tasks': tasks, 'trainer': trainer, 'run_root': run_root}


def _argv(options: t.Mapping[str, t.Any], nodes: list[str], tasks: int, gpus: int, run_root: str,
          trainer: str) -> list[str]:
    where = [f'--nodes={len(nodes)}', f"--nodelist={','.join(nodes)}", f'--ntasks-per-node={tasks}']
    where += [f'--gres=gpu:{gpus}'] if gpus else []
    srun = ['srun', '--exclusive', f"--immediate={options['immediate']}", f'--job-name={JOB_NAME}']
    srun += list(options['srun_args']) + where + ['--kill-on-bad-exit=1']
    return (['timeout', f'--kill-after={KILL_AFTER}', str(options['timeout'])] + srun
            + ['bash', '-c', RUN_WRAPPER, JOB_NAME, run_root, trainer] + list(options['args']))


def _options(options: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    clean = {'repeats': _count(options.get('repeats', 1), 'validate_training_repeats'),
             'timeout': _count(options.get('timeout', 900), 'validate_training_timeout'),
             'immediate': _count(options.get('immediate', 300), 'validate_training_immediate'),
             'local_root': str(options.get('local_root') or '/tmp')}
    for key in ('args', 'srun_args'):
        value = options.get(key) or []
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise TrainingFleetError(f'validate_training_{key} must be a list of strings, got {value!r}')
        clean[key] = [str(item) for item in value]
    if clean['repeats'] < 1 or clean['timeout'] < 1:
        raise TrainingFleetError('validate_training_repeats and validate_training_timeout must be at least 1')
    if not os.path.isabs(clean['local_root']):
        raise TrainingFleetError(f"validate_training_local_root must be an absolute path, got {clean['local_root']!r}")
    if '--run-dir' in clean['args']:
        raise TrainingFleetError('validate_training_args must not set --run-dir: every run gets its own')
    return clean


def _all_nodes_problem(ordered: list[str], shapes: t.Mapping[str, dict[str, t.Any]]) -> t.Optional[str]:
    """Why the all-node run cannot be made, or None."""
    if len(ordered) < 2:
        return f'needs at least 2 ready nodes, {len(ordered)} ready'
    roots = {shapes[node]['run_root'] for node in ordered}
    if roots == {''}:
        return ('no run directory shared by the nodes: set validate_training_run_root (or the training_env role\'s '
                'training_env_job_run_root)')
    if len(roots) > 1:
        return f"the nodes disagree on validate_training_run_root ({', '.join(sorted(roots))})"
    trainers = {shapes[node]['trainer'] for node in ordered}
    if len(trainers) > 1:
        return f"the nodes disagree on the trainer's path ({', '.join(sorted(trainers))})"
    return None


def plan_runs(settings: t.Mapping[str, t.Mapping[str, t.Any]], options: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """{'runs': [...], 'all_nodes_skipped': reason or None}.

    `settings` is {node: {gpus, tasks (None: one per GPU), trainer, run_root (shared by the nodes, may be '')}};
    `options` holds repeats, timeout, immediate, args, srun_args and local_root (single-node runs' directory).
    Every run is {kind, nodes, repeat, tasks_per_node, gpus_per_node, timeout, label, argv}; single-node runs come
    first, then the all-node run (it needs every node).
    """
    if not isinstance(options, t.Mapping):
        raise TrainingFleetError(f'the validate_training options must be a mapping, got {options!r}')
    opts = _options(options)
    if not isinstance(settings, t.Mapping):
        raise TrainingFleetError(f'the per-node training settings must be a mapping of node to settings, got {settings!r}')
    for node, value in settings.items():
        if not isinstance(node, str) or not isinstance(value, t.Mapping):
            raise TrainingFleetError(f'the training settings of node {node!r} must be a mapping, got {value!r}')
    ordered = sorted(settings, key=natural_key)
    shapes = {node: node_shape(node, settings[node]) for node in ordered}
    runs = []
    for node in ordered:
        shape = shapes[node]
        for repeat in range(opts['repeats']):
            runs.append({'kind': 'single', 'nodes': [node], 'repeat': repeat, 'tasks_per_node': shape['tasks'],
                         'gpus_per_node': shape['gpus'], 'timeout': opts['timeout'],
                         'label': f"{node} #{repeat + 1}",
                         'argv': _argv(opts, [node], shape['tasks'], shape['gpus'], opts['local_root'], shape['trainer'])})
    skipped = _all_nodes_problem(ordered, shapes)
    if skipped is None:
        # One srun shape for all: the smallest task and GPU counts when the nodes differ.
        tasks = min(shapes[node]['tasks'] for node in ordered)
        gpus = min(shapes[node]['gpus'] for node in ordered)
        first = shapes[ordered[0]]
        for repeat in range(opts['repeats']):
            runs.append({'kind': 'all', 'nodes': ordered, 'repeat': repeat, 'tasks_per_node': tasks,
                         'gpus_per_node': gpus, 'timeout': opts['timeout'],
                         'label': f"{len(ordered)} nodes #{repeat + 1}",
                         'argv': _argv(opts, ordered, tasks, gpus, first['run_root'], first['trainer'])})
    return {'runs': runs, 'all_nodes_skipped': skipped}


# --- one run ---------------------------------------------------------------------------------------

def _last_line(text: t.Any) -> str:
    lines = [line.strip() for line in str(text or '').splitlines() if line.strip()]
    return lines[-1][:200] if lines else ''


def _summary_line(stdout: str) -> t.Optional[str]:
    found = [line for line in stdout.splitlines() if line.startswith(SUMMARY_PREFIX)]
    return found[-1][len(SUMMARY_PREFIX):] if found else None


def _number(summary: t.Mapping[str, t.Any], key: str) -> t.Optional[float]:
    value = summary.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _finite(summary: t.Mapping[str, t.Any], key: str) -> bool:
    value = _number(summary, key)
    return value is not None and math.isfinite(value)


def _summary_problem(summary: t.Mapping[str, t.Any], planned: t.Mapping[str, t.Any]) -> t.Optional[str]:
    world = len(planned['nodes']) * planned['tasks_per_node']
    if summary.get('world_size') != world:
        return (f"world size {summary.get('world_size')!r}, {world} planned (did every task see Slurm's "
                f'environment?)')
    nodes = summary.get('nodes')
    if isinstance(nodes, list) and len(nodes) != len(planned['nodes']):
        return f"ran on {len(nodes)} host(s) ({', '.join(map(str, nodes))}), {len(planned['nodes'])} planned"
    if summary.get('exit_reason') != 'target' or summary.get('last_step') != summary.get('target_steps'):
        return (f"stopped at step {summary.get('last_step')!r} of {summary.get('target_steps')!r} "
                f"(exit_reason {summary.get('exit_reason')!r})")
    for key in ('tokens_per_s', 'loss_first', 'loss_last'):
        if _number(summary, key) is None:
            return f'the summary has no numeric {key} ({summary.get(key)!r})'
    if not _finite(summary, 'tokens_per_s') or _number(summary, 'tokens_per_s') <= 0:
        return f"tokens/s is not a positive finite number ({summary.get('tokens_per_s')!r})"
    return None


def parse_run(result: t.Mapping[str, t.Any], planned: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    """{'ok', 'cause', 'rc', 'summary'} of one registered run (ansible.builtin.command, possibly via async_status)."""
    rc = result.get('rc')
    stdout = str(result.get('stdout') or '')
    summary, cause = None, None
    text = _summary_line(stdout)
    if text is not None:
        try:
            summary = json.loads(text)
        except ValueError:
            cause = f'the summary line is not JSON: {text[:80]!r}'
        else:
            if not isinstance(summary, dict):
                summary, cause = None, f'the summary line is not a JSON object: {text[:80]!r}'
    if result.get('finished') is False or (rc is None and result.get('msg') == 'Timeout exceeded'):
        cause = f"did not finish within {planned['timeout']} s (Ansible gave up waiting)"
    elif rc is None:
        cause = f"did not run: {result.get('msg') or 'no exit status'}"
    elif rc == TIMEOUT_RC:
        cause = f"timed out after {planned['timeout']} s, waiting for the node(s) included"
    elif rc != 0:
        hint = ' (is the training_env role applied?)' if rc in (126, 127) else ''
        last = _last_line(result.get('stderr')) or _last_line(stdout)
        cause = f'exit code {rc}{hint}' + (f': {last}' if last else '')
    elif cause is None and summary is None:
        last = _last_line(stdout) or _last_line(result.get('stderr'))
        cause = 'no summary line in the output' + (f' (last line: {last})' if last else ' (no output)')
    elif cause is None:
        cause = _summary_problem(summary, planned)
    return {'ok': cause is None, 'cause': cause, 'rc': rc, 'summary': summary}


def _tag(results: t.Sequence[t.Mapping[str, t.Any]]) -> list[tuple[dict[str, t.Any], dict[str, t.Any]]]:
    tagged = []
    for index, result in enumerate(results or []):
        planned = plan_item(result) if isinstance(result, t.Mapping) else None
        if not isinstance(planned, t.Mapping) or planned.get('kind') not in KINDS or not planned.get('nodes'):
            raise TrainingFleetError(f'results[{index}] has no planned run (kind, nodes) as its loop item')
        tagged.append((dict(planned), parse_run(result, planned)))
    return tagged


# --- verdicts --------------------------------------------------------------------------------------

def _round(value: t.Optional[float], digits: int = 1) -> t.Optional[float]:
    # NaN and inf are not JSON: the report says None, the check's message says what was measured.
    return None if value is None or not math.isfinite(value) else round(value, digits)


def _judge_group(name: str, subject: str, runs: list[tuple[dict[str, t.Any], dict[str, t.Any]]]) -> dict[str, t.Any]:
    """training_run and training_loss checks of one node's (or the all-node) repeats, and their median tokens/s."""
    failed = [(planned, parsed) for planned, parsed in runs if not parsed['ok']]
    good = [parsed['summary'] for _planned, parsed in runs if parsed['ok']]
    if failed:
        planned, parsed = failed[0]
        run_check = check('training_run', FAIL, subject, 'exit 0 at the target step', parsed['cause'],
                          f"{name}: run {planned['repeat'] + 1} of {len(runs)} failed: {parsed['cause']}"
                          + (f' ({len(failed)} of {len(runs)} runs failed)' if len(failed) > 1 else ''))
    else:
        run_check = check('training_run', PASS, subject, 'exit 0 at the target step', 'exit 0',
                          f'{name}: {len(runs)} run(s) reached the target step')
    # NaN or inf is a failure, never a comparison that happens to come out either way (a GPU producing NaNs).
    not_finite = [s for s in good if not (_finite(s, 'loss_first') and _finite(s, 'loss_last'))]
    rising = [s for s in good if s not in not_finite and _number(s, 'loss_last') >= _number(s, 'loss_first')]
    if not good:
        loss_check = check('training_loss', SKIP, subject, None, None, f'{name}: no run finished')
    elif not_finite:
        worst = not_finite[0]
        loss_check = check('training_loss', FAIL, subject, 'finite and decreasing',
                           f"{worst['loss_first']} -> {worst['loss_last']}",
                           f"{name}: the loss is not a finite number: {worst['loss_first']} -> {worst['loss_last']} "
                           '(NaN or inf: suspect the GPU or its numerics)')
    elif rising:
        worst = rising[0]
        loss_check = check('training_loss', FAIL, subject, f"< {worst['loss_first']:.4f}", _round(worst['loss_last'], 4),
                           f"{name}: the loss did not decrease: {worst['loss_first']:.4f} -> {worst['loss_last']:.4f}")
    else:
        loss_check = check('training_loss', PASS, subject, 'decreasing', _round(good[0]['loss_last'], 4),
                           f"{name}: the loss decreased: {good[0]['loss_first']:.4f} -> {good[0]['loss_last']:.4f}")
    tokens = statistics.median(_number(s, 'tokens_per_s') for s in good) if good else None
    first = good[0] if good else {}
    return {'checks': [run_check, loss_check], 'tokens_per_s': tokens, 'repeats': len(runs), 'failed_runs': len(failed),
            'loss_first': first.get('loss_first'), 'loss_last': first.get('loss_last'),
            'device': first.get('device'), 'world_size': first.get('world_size'),
            'torch_version': first.get('torch_version')}


def _tokens_check(name: str, tokens: t.Optional[float], fleet_median: t.Optional[float], peers: int,
                  tolerance_pct: float, floor: float) -> dict[str, t.Any]:
    bound = max(floor, fleet_median * (1 - tolerance_pct / 100) if fleet_median and peers >= 2 else 0)
    expected = f'>= {bound:.1f}' if bound else None
    if tokens is None:
        return check('training_tokens_per_s', SKIP, 'single', expected, None, f'{name}: no tokens/s measured')
    problems = []
    if floor and tokens < floor:
        problems.append(f'below the floor {floor:g}')
    if peers >= 2 and below_fleet(tokens, fleet_median, tolerance_pct):
        problems.append(f'more than {tolerance_pct:g}% below the fleet median {fleet_median:.1f}')
    fleet_text = f'fleet median {fleet_median:.1f} over {peers} node(s)' if fleet_median else 'no fleet median'
    if problems:
        return check('training_tokens_per_s', FAIL, 'single', expected, _round(tokens),
                     f"{name}: {tokens:.1f} tokens/s is {' and '.join(problems)} ({fleet_text})")
    return check('training_tokens_per_s', PASS, 'single', expected, _round(tokens), f'{name}: {tokens:.1f} tokens/s ({fleet_text})')


def judge(results: t.Sequence[t.Mapping[str, t.Any]], plan: t.Mapping[str, t.Any], tolerance_pct: t.Any,
          min_tokens_per_s: t.Any = 0) -> dict[str, t.Any]:
    """{'nodes': {node: {checks, healthy, tokens_per_s, ...}}, 'cluster': the all-node result} of the stage's runs.

    `results` are the registered runs (their loop item is the planned run); `plan` is plan_runs()'s result.
    """
    tolerance = check_tolerance(tolerance_pct, TrainingFleetError)
    if isinstance(min_tokens_per_s, bool) or not isinstance(min_tokens_per_s, (int, float)) or min_tokens_per_s < 0:
        raise TrainingFleetError(f'validate_training_min_tokens_per_s must be a number >= 0, got {min_tokens_per_s!r}')
    tagged = _tag(results)
    planned_nodes = [run['nodes'][0] for run in (plan or {}).get('runs', []) if run['kind'] == 'single']
    singles: dict[str, list[tuple[dict[str, t.Any], dict[str, t.Any]]]] = {node: [] for node in planned_nodes}
    for planned, parsed in tagged:
        if planned['kind'] == 'single':
            singles.setdefault(planned['nodes'][0], []).append((planned, parsed))
    groups = {node: _judge_group(node, 'single', runs) for node, runs in singles.items() if runs}
    tasks = {node: runs[0][0]['tasks_per_node'] for node, runs in singles.items() if runs}
    # The fleet: the nodes that ran the same number of tasks (a 4-GPU node is not a slow 8-GPU node).
    fleets: dict[int, list[float]] = {}
    for node, group in groups.items():
        if group['tokens_per_s'] is not None:
            fleets.setdefault(tasks[node], []).append(group['tokens_per_s'])
    nodes = {}
    for node in sorted(groups, key=natural_key):
        group = groups[node]
        peers = fleets.get(tasks[node], [])
        median = statistics.median(peers) if peers else None
        checks = group.pop('checks') + [_tokens_check(node, group['tokens_per_s'], median, len(peers), tolerance,
                                                      float(min_tokens_per_s))]
        nodes[node] = dict(group, checks=sorted(checks, key=lambda c: c['status'] != FAIL), healthy=healthy(checks),
                           tokens_per_s=_round(group['tokens_per_s']), tasks_per_node=tasks[node],
                           fleet_median_tokens_per_s=_round(median))
    cluster = _cluster(tagged, plan or {}, nodes, tolerance, float(min_tokens_per_s))
    return {'nodes': nodes, 'cluster': cluster}


def _cluster(tagged: list[tuple[dict[str, t.Any], dict[str, t.Any]]], plan: t.Mapping[str, t.Any],
             nodes: t.Mapping[str, t.Mapping[str, t.Any]], tolerance: float, floor: float) -> dict[str, t.Any]:
    """The stage's cluster-level result for the report: the all-node run's checks and the per-node table."""
    runs = [(planned, parsed) for planned, parsed in tagged if planned['kind'] == 'all']
    facts: dict[str, t.Any] = {'fleet_tolerance_pct': tolerance, 'min_tokens_per_s': floor or None}
    if not runs:
        why = plan.get('all_nodes_skipped') or 'not run'
        checks = [check('training_run', SKIP, ALL_NODES, None, None, f'all-node run skipped: {why}')]
    else:
        participants = runs[0][0]['nodes']
        group = _judge_group(f'all-node run on {len(participants)} nodes', ALL_NODES, runs)
        checks = group['checks']
        if group['failed_runs']:
            failing_alone = [node for node in participants if not nodes.get(node, {}).get('healthy', False)]
            checks[0]['message'] += ('; every node passed alone: suspect the fabric or the rendezvous between nodes '
                                     '(not attributed to a node)' if not failing_alone else
                                     f"; failing alone too: {', '.join(failing_alone)}")
        alone = [nodes.get(node, {}).get('tokens_per_s') for node in participants]
        same_shape = all(nodes.get(node, {}).get('tasks_per_node') == runs[0][0]['tasks_per_node'] for node in participants)
        scaling = (100 * group['tokens_per_s'] / sum(alone) if group['tokens_per_s'] and same_shape
                   and all(alone) else None)
        # Reported, not judged: no fleet to compare the one all-node run with.
        if group['tokens_per_s']:
            text = f"{group['tokens_per_s']:.1f} tokens/s on {len(participants)} nodes"
            text += f', {scaling:.0f}% of the sum of the nodes alone' if scaling else ''
            checks.append(check('training_tokens_per_s', PASS, ALL_NODES, None, _round(group['tokens_per_s']), text))
        else:
            checks.append(check('training_tokens_per_s', SKIP, ALL_NODES, None, None, 'no tokens/s measured'))
        facts.update(nodes=participants, world_size=group['world_size'], tokens_per_s=_round(group['tokens_per_s']),
                     scaling_pct=_round(scaling), repeats=group['repeats'], device=group['device'],
                     torch_version=group['torch_version'])
    table = {node: {'healthy': result['healthy'], 'tokens_per_s': result['tokens_per_s'],
                    'fleet_median_tokens_per_s': result['fleet_median_tokens_per_s'],
                    'loss_first': _round(result['loss_first'], 4), 'loss_last': _round(result['loss_last'], 4),
                    'tasks_per_node': result['tasks_per_node'], 'runs': result['repeats'],
                    'failed_runs': result['failed_runs']} for node, result in nodes.items()}
    return {'title': 'Training', 'checks': checks, 'healthy': healthy(checks), 'facts': facts, 'nodes': table,
            'columns': ['healthy', 'tokens_per_s', 'fleet_median_tokens_per_s', 'loss_first', 'loss_last',
                        'tasks_per_node', 'runs', 'failed_runs']}
