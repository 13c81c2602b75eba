# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which way validate.yml's hardware stage reaches each GPU node: through Slurm or with Ansible.

Pure Python, no Ansible import. On a running cluster the stage is one `srun` step per set of nodes with the same
parameters (one task per node: llmforge-validate-node, module_utils/programs/_validate_node.py), so the control
host does no per-node work but reading the results; nodes Slurm cannot run a step on are handled by their state:

- not in Slurm (first bring-up, or no controller): the Ansible path (the three modules, a task each per node);
- idle and schedulable: the Slurm path;
- idle but drained, in maintenance, failed or rebooting: the Ansible path (a drained node must be validated again
  to be resumed, and Slurm starts no step on it);
- busy (allocated, mixed, completing): listed, not validated (a `skip` check): their jobs are not waited for;
- down or not responding: listed, not validated.

`plan` decides; `srun_argv` builds each step's command line; `node_results` reads srun's output back into the
results the modules would have registered; `metrics_payload` packs the nodes' textfiles for the final step.
"""

from __future__ import annotations

import json
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _validate_node as node_program

MODES = ('auto', 'slurm', 'ansible')
JOB_NAME = 'llmforge-validate'
PROGRAM = '/usr/local/sbin/llmforge-validate-node'
# Base states (before '+') and flags of `scontrol show node -o`.
BUSY = ('ALLOCATED', 'MIXED', 'COMPLETING')
DOWN = ('DOWN', 'NOT_RESPONDING', 'FUTURE', 'UNKNOWN')
UNSCHEDULABLE = ('DRAIN', 'DRAINED', 'DRAINING', 'MAINTENANCE', 'MAINT', 'FAIL', 'FAILING', 'REBOOT_REQUESTED',
                 'REBOOT_ISSUED', 'POWERED_DOWN', 'POWERING_DOWN', 'POWERING_UP', 'POWER_DOWN', 'RESERVED_MAINT')


class PlanError(ValueError):
    """Unusable input; the message names the variable or field."""


def slurm_names(hostvars: t.Mapping[str, t.Any], hosts: t.Iterable[str]) -> dict[str, str]:
    """{inventory name: Slurm node name} of `hosts`: a host's validate_slurm_node_name, else its inventory name."""
    names = {}
    for host in hosts:
        facts = hostvars[host] if host in hostvars else {}
        names[host] = str((facts.get('validate_slurm_node_name') if hasattr(facts, 'get') else None) or host)
    return names


def node_states(lines: t.Iterable[str]) -> dict[str, dict[str, t.Any]]:
    """{slurm name: {state, words, reason}} of `scontrol show node -o` output lines (one node per line)."""
    states = {}
    for line in lines:
        parsed = drain.parse_node(str(line))
        if parsed['name']:
            words = [word for word in parsed['state'].upper().replace('*', '').split('+') if word]
            states[parsed['name']] = {'state': parsed['state'], 'words': words, 'reason': parsed['reason']}
    return states


def classify(state: t.Optional[t.Mapping[str, t.Any]]) -> str:
    """'ansible', 'slurm', 'busy' or 'down' for a node's parsed state (None: not in Slurm)."""
    if state is None:
        return 'ansible'
    words = list(state['words'])
    if not words:
        return 'ansible'
    if any(word in DOWN for word in words):
        return 'down'
    if words[0] in BUSY:
        return 'busy'
    if any(word in UNSCHEDULABLE for word in words[1:]) or words[0] != 'IDLE':
        return 'ansible'
    return 'slurm'


def plan(nodes: t.Sequence[str], slurm_names: t.Mapping[str, str], params: t.Mapping[str, t.Any],
         gpus: t.Mapping[str, int], scontrol: t.Optional[t.Mapping[str, t.Any]], mode: str,
         options: t.Mapping[str, t.Any], textfile_dirs: t.Optional[t.Mapping[str, str]] = None) -> dict[str, t.Any]:
    """The stage's plan for `nodes` (inventory names).

    `slurm_names` maps a node to its Slurm name; `params` a node to its stage parameters (validator -> options);
    `gpus` a node to its GPU count (the step asks for them all: a step sees only the GPUs it was given);
    `scontrol` is the registered `scontrol show node -o` of the first controller (None: no controller);
    `mode` validate_path; `options` {immediate, time_minutes, partition, reservation, srun_args, program};
    `textfile_dirs` a node to its node_exporter textfile directory (where the metrics step writes).

    Returns {mode, slurm, ansible, busy, down: [nodes], states: {node: state text}, steps: [{hosts, nodelist, srun,
    program, argv, textfile_dir}], message}: `argv` is srun's, then the program's with the step's parameters.
    """
    if mode not in MODES:
        raise PlanError(f"validate_path must be one of {', '.join(MODES)}, got {mode!r}")
    nodes = [str(node) for node in nodes]
    answered = scontrol is not None and not scontrol.get('skipped') and scontrol.get('rc') == 0
    if mode == 'slurm' and not answered:
        why = 'no host in slurm_controllers' if scontrol is None else (
            f"scontrol show node failed on the first controller: {str(scontrol.get('stderr') or scontrol.get('msg') or '').strip()[:200]}")
        raise PlanError(f'validate_path is slurm but Slurm cannot be asked: {why} (validate_path=auto falls back to Ansible)')
    groups: dict[str, list[str]] = {'slurm': [], 'ansible': [], 'busy': [], 'down': []}
    states: dict[str, str] = {}
    if mode == 'ansible' or not answered:
        groups['ansible'] = list(nodes)
    else:
        known = node_states(str(scontrol.get('stdout') or '').splitlines())
        for node in nodes:
            state = known.get(slurm_names.get(node) or node)
            states[node] = state['state'] if state else 'not in Slurm'
            groups[classify(state)].append(node)
    steps = _steps(groups['slurm'], slurm_names, params, gpus, options, textfile_dirs or {})
    return dict(groups, mode=mode, states=states, steps=steps, options=dict(options),
                message=_message(mode, answered, groups, states))


def _steps(nodes: t.Sequence[str], slurm_names: t.Mapping[str, str], params: t.Mapping[str, t.Any],
           gpus: t.Mapping[str, int], options: t.Mapping[str, t.Any],
           textfile_dirs: t.Mapping[str, str]) -> list[dict[str, t.Any]]:
    """One srun step per set of nodes sharing parameters, GPU count and textfile directory, in the nodes' order."""
    keyed: dict[str, list[str]] = {}
    for node in nodes:
        if node not in params:
            raise PlanError(f'no hardware stage parameters for node {node!r}')
        key = json.dumps([params[node], gpus.get(node, 0), textfile_dirs.get(node, '')], sort_keys=True)
        keyed.setdefault(key, []).append(node)
    steps = []
    for key, hosts in keyed.items():
        stage_params, count, textfile_dir = json.loads(key)
        names = [slurm_names.get(host) or host for host in hosts]
        nodelist = hostlist.compress(names)
        srun = srun_argv(nodelist, len(names), count, options)
        program = str(options.get('program') or PROGRAM)
        steps.append({'hosts': hosts, 'nodelist': nodelist, 'srun': srun, 'program': program, 'textfile_dir': textfile_dir,
                      'gpus': count, 'validators': sorted(stage_params), 'time_minutes': int(options.get('time_minutes') or 5),
                      'argv': srun + [program, '--params', json.dumps(stage_params, sort_keys=True, separators=(',', ':'))]})
    return steps


def srun_argv(nodelist: str, count: int, gpus: int, options: t.Mapping[str, t.Any], job_name: str = JOB_NAME) -> list[str]:
    """srun's options, before the program: one task on each of `count` nodes of `nodelist`, all their GPUs, bounded
    in time, never queued longer than `immediate` seconds."""
    argv = ['srun', f'--job-name={job_name}', f'--nodes={count}', f'--ntasks={count}', '--ntasks-per-node=1',
            f'--nodelist={nodelist}', '--exclusive', f"--immediate={int(options.get('immediate') or 60)}",
            f"--time={int(options.get('time_minutes') or 5)}", '--kill-on-bad-exit=0', '--no-kill']
    if gpus:
        argv.append(f'--gres=gpu:{int(gpus)}')
    for option in ('partition', 'reservation'):
        if options.get(option):
            argv.append(f'--{option}={options[option]}')
    return argv + [str(arg) for arg in options.get('srun_args') or []]


def node_results(plan_: t.Mapping[str, t.Any], runs: t.Sequence[t.Mapping[str, t.Any]],
                 slurm_names: t.Mapping[str, str], validators: t.Sequence[str]) -> dict[str, dict[str, t.Any]]:
    """{node: {validator: result}} of the Slurm path's nodes from the steps' registered runs (in plan order).

    A node whose line is missing from a step that ran (the node died in it, or its output was unreadable) gets a
    failed result for each validator without checks (the report shows it as a failing `run` check, as an unreachable
    node on the Ansible path), naming the step's exit status and the first line of its error output. The nodes of a
    step that never started (srun failed and no node printed) are not validated: skipped, naming srun's last error.
    """
    steps = list(plan_.get('steps') or [])
    if len(runs) != len(steps):
        raise PlanError(f'expected one registered run per step ({len(steps)}), got {len(runs)}')
    results: dict[str, dict[str, t.Any]] = {}
    for step, run in zip(steps, runs):
        by_name = node_program.parse_output(str(run.get('stdout') or ''))
        errors = [line for line in str(run.get('stderr') or run.get('msg') or '').splitlines() if line.strip()]
        if not by_name and run.get('rc') != 0:
            # srun gave up before any node ran (its nodes were taken meanwhile, --immediate ran out, a refused
            # account): nothing was judged, so nothing is drained or resumed for it.
            why = (f"not validated: the Slurm step did not start (srun exit status {run.get('rc')}: "
                   f"{errors[-1][:200] if errors else 'no error output'})")
            results.update((host, {name: {'skipped': True, 'skip_reason': why, 'changed': False} for name in validators})
                           for host in step['hosts'])
            continue
        for host in step['hosts']:
            found = by_name.get(slurm_names.get(host) or host)
            if found is None:
                why = (f"no result from the Slurm step on {slurm_names.get(host) or host} (srun exit status "
                       f"{run.get('rc')}: {errors[0][:200] if errors else 'no error output'})")
                found = {name: {'failed': True, 'msg': why, 'healthy': False} for name in validators}
            results[host] = {name: found.get(name) or {'failed': True, 'msg': f'{name}: no result', 'healthy': False}
                             for name in validators}
    return results


def not_validated(plan_: t.Mapping[str, t.Any], validators: t.Sequence[str]) -> dict[str, dict[str, t.Any]]:
    """{node: {validator: skipped result}} of the busy and down nodes: listed in the report, judged by nothing."""
    results = {}
    for kind, words in (('busy', 'busy in Slurm'), ('down', 'down in Slurm')):
        for host in plan_.get(kind) or []:
            why = f"not validated: {words} ({plan_['states'].get(host, '?')}); its jobs are not waited for" \
                if kind == 'busy' else f"not validated: {words} ({plan_['states'].get(host, '?')})"
            results[host] = {name: {'skipped': True, 'skip_reason': why, 'changed': False} for name in validators}
    return results


def metrics_plan(plan_: t.Mapping[str, t.Any], scontrol: t.Optional[t.Mapping[str, t.Any]],
                 slurm_names: t.Mapping[str, str]) -> dict[str, t.Any]:
    """The metrics steps for the Slurm path's nodes that are still idle now (`scontrol`: a fresh `scontrol show
    node -o`; the stages may have drained some, DCGM's quarantine for one), and `ansible`: the hardware stage's
    Ansible nodes plus the Slurm path's nodes that Slurm cannot run a step on any more, whose metrics Ansible writes."""
    answered = scontrol is not None and not scontrol.get('skipped') and scontrol.get('rc') == 0
    known = node_states(str(scontrol.get('stdout') or '').splitlines()) if answered else {}
    options = plan_.get('options') or {}
    steps, moved = [], []
    for step in plan_.get('steps') or []:
        idle = [host for host in step['hosts'] if answered and classify(known.get(slurm_names.get(host) or host)) == 'slurm']
        moved += [host for host in step['hosts'] if host not in idle]
        if idle:
            nodelist = hostlist.compress([slurm_names.get(host) or host for host in idle])
            steps.append(dict(step, hosts=idle, nodelist=nodelist,
                              srun=srun_argv(nodelist, len(idle), int(step.get('gpus') or 0), options)))
    return {'steps': steps, 'ansible': list(plan_.get('ansible') or []) + moved}


def metrics_payload(texts: t.Mapping[str, str], slurm_names: t.Mapping[str, str]) -> dict[str, t.Any]:
    """{texts, nodes} for llmforge-validate-node --metrics: each distinct text once, each node its text's index."""
    distinct: dict[str, int] = {}
    nodes = {}
    for host, text in texts.items():
        nodes[slurm_names.get(host) or host] = distinct.setdefault(str(text), len(distinct))
    return {'texts': list(distinct), 'nodes': nodes}


def _message(mode: str, answered: bool, groups: t.Mapping[str, t.Sequence[str]], states: t.Mapping[str, str]) -> str:
    def named(hosts: t.Sequence[str]) -> str:
        return hostlist.compress(hosts) if hosts else 'none'
    if mode == 'ansible':
        head = 'hardware stage with Ansible on every node (validate_path=ansible)'
    elif not answered:
        head = 'hardware stage with Ansible on every node (no Slurm to ask: first bring-up, or no controller)'
    else:
        head = (f"hardware stage through Slurm on {len(groups['slurm'])} node(s) ({named(groups['slurm'])}), with "
                f"Ansible on {len(groups['ansible'])} ({named(groups['ansible'])}: not in Slurm, or drained)")
    left = [f"{kind} {len(groups[kind])} ({named(groups[kind])})" for kind in ('busy', 'down') if groups[kind]]
    return head + ('; not validated: ' + ', '.join(left) if left else '')
