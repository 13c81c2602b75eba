# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml's pull mode, the control host's part: which GPU nodes converge themselves, and what their step said.

Pure Python, no Ansible import. In pull mode the GPU-node plays are not run from the control host for every node:
the nodes Slurm can start a step on run them themselves (llmforge-pull-node, module_utils/programs/_pull_node.py),
all at once, in one `srun` step started from the first controller; the control host only reads what each printed.
Which nodes pull, by their Slurm state (the same reading as validate.yml's hardware stage, _validate_paths.classify):

- idle and schedulable: pull (the Slurm step);
- everything else is pushed (the plays from the control host, as always): nodes not in Slurm (first bring-up),
  drained, in maintenance or rebooting (a drained node's repair must not depend on the node's own Slurm), busy ones
  (as push converges them beside their jobs) and down ones (named unreachable, as push names them).

A node drained by an earlier pull for a converge failure (`llmforge: converge ...`) is pushed, and resumed when its
pushed plays pass (`converge_drained`).

`plan` decides; `outcomes` reads srun's output back (a node that printed nothing is `no-answer`); `drains` gives the
reason each node that did not converge is drained with, naming the task that failed.
"""

from __future__ import annotations

import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils import _pull_bundle as bundle
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _pull_node as node_program
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _validate_paths as paths

MODES = ('push', 'pull', 'auto')
JOB_NAME = 'llmforge-pull'
PROGRAM = '/usr/local/sbin/llmforge-pull-node'
# Characters of a drain reason: Slurm keeps longer ones, but sinfo -R and the ledger read the start.
REASON_CHARS = 120
# What the drains of a failed pull start with (the ledger and the health check leave such a drain alone).
DRAIN_PREFIX = 'llmforge: converge'
# What a node that printed nothing is said to have come to.
NO_ANSWER = 'no-answer'
CONVERGED = ('ok', 'changed')


# Unusable input; the message names the variable or field (one class with validate.yml's plan).
PlanError = paths.PlanError


def plan(nodes: t.Sequence[str], slurm_names: t.Mapping[str, str], scontrol: t.Optional[t.Mapping[str, t.Any]],
         mode: str, min_nodes: int, batch: t.Any = None) -> dict[str, t.Any]:
    """{mode, pull, push, busy, down, converge_drained: [nodes], states, nodelist, message} for `nodes` (busy and
    down nodes are pushed and also listed).

    `scontrol` is the first controller's registered `scontrol show node --oneliner` (None: no controller); `mode` is
    pull_mode; with `auto` the nodes pull only when at least `min_nodes` can (below that, push costs
    less than building a bundle). `batch` is the rolling batch (cluster_rolling_batch: a count or a percentage of
    the pulling nodes, as a play's `serial`; None: all at once): one step per batch, in turn, as push's batches."""
    if mode not in MODES:
        raise PlanError(f"pull_mode must be one of {', '.join(MODES)}, got {mode!r}")
    if isinstance(min_nodes, bool) or not isinstance(min_nodes, int) or min_nodes < 1:
        raise PlanError(f'pull_min_nodes must be a whole number of at least 1, got {min_nodes!r}')
    nodes = [str(node) for node in nodes]
    answered = scontrol is not None and not scontrol.get('skipped') and scontrol.get('rc') == 0
    groups: dict[str, list[str]] = {'pull': [], 'push': [], 'busy': [], 'down': []}
    states: dict[str, str] = {}
    drained: list[str] = []
    if mode == 'push' or not answered:
        groups['push'] = list(nodes)
    else:
        known = paths.node_states(str(scontrol.get('stdout') or '').splitlines())
        for node in nodes:
            name = slurm_names.get(node) or node
            state = known.get(name)
            states[node] = state['state'] if state else 'not in Slurm'
            way = paths.classify(state)
            if way in ('busy', 'down'):
                groups[way].append(node)
            groups['pull' if way == 'slurm' else 'push'].append(node)
            if state and state['reason'].startswith(DRAIN_PREFIX):
                drained.append(node)
        if mode == 'auto' and len(groups['pull']) < min_nodes:
            groups['push'] = list(nodes)
            groups['pull'] = []
    message = _message(mode, answered, groups, min_nodes)
    batches = [{'hosts': hosts, 'nodelist': hostlist.compress([slurm_names.get(node) or node for node in hosts])}
               for hosts in _batches(groups['pull'], batch)]
    if len(batches) > 1:
        message += f' in {len(batches)} batches of {len(batches[0]["hosts"])}'
    return dict(groups, mode=mode, states=states, batches=batches, converge_drained=drained, message=message)


def _batches(nodes: t.Sequence[str], batch: t.Any) -> list[list[str]]:
    """`nodes` cut into rolling batches: `batch` a whole number of nodes or 'N%' of them (at least one), as Ansible's
    `serial`; None or '100%': one batch."""
    if not nodes:
        return []
    if batch is None or batch == '':
        return [list(nodes)]
    text = str(batch).strip()
    try:
        size = max(1, int(len(nodes) * float(text[:-1]) / 100)) if text.endswith('%') else int(text)
    except ValueError:
        raise PlanError(f'cluster_rolling_batch must be a number of nodes or a percentage, got {batch!r}') from None
    if size < 1:
        raise PlanError(f'cluster_rolling_batch must be at least 1 node, got {batch!r}')
    return [list(nodes[start:start + size]) for start in range(0, len(nodes), size)]


def _message(mode: str, answered: bool, groups: t.Mapping[str, t.Sequence[str]], min_nodes: int) -> str:
    if mode == 'push':
        return f"GPU nodes: push for all {len(groups['push'])} (pull_mode=push)"
    if not answered:
        return f"GPU nodes: push for all {len(groups['push'])} (Slurm cannot be asked: no controller answered)"
    if mode == 'auto' and not groups['pull']:
        pushed = f'below pull_min_nodes={min_nodes} nodes that can pull'
    else:
        pushed = 'not idle in Slurm'
    parts = [f"pull on {len(groups['pull'])} through one Slurm step" if groups['pull'] else '',
             f"push for {len(groups['push'])} ({pushed})" if groups['push'] else '',
             f"busy, pushed beside their jobs: {hostlist.compress(groups['busy'])}" if groups['busy'] else '',
             f"down, pushed: {hostlist.compress(groups['down'])}" if groups['down'] else '']
    return 'GPU nodes: ' + '; '.join(part for part in parts if part)


def srun_argv(batch: t.Mapping[str, t.Any], options: t.Mapping[str, t.Any], bundle_dir: str, digest: str,
              check: bool) -> list[str]:
    """A batch's step (the plan's `batches`): a task per node, none waiting for another (--immediate), bounded by
    --time, then the program. `options` {immediate, time_minutes, partition, reservation, srun_args, program,
    timeout}."""
    count = len(batch['hosts'])
    argv = paths.srun_argv(batch['nodelist'], count, 0, options, job_name=JOB_NAME)
    argv += [str(options.get('program') or PROGRAM), '--bundle', bundle_dir, '--digest', digest,
             '--timeout', str(int(options.get('timeout', 3600)))]
    return argv + (['--check'] if check else [])


def outcomes(batch: t.Mapping[str, t.Any], slurm_names: t.Mapping[str, str],
             run: t.Optional[t.Mapping[str, t.Any]]) -> dict[str, dict[str, t.Any]]:
    """{node: what its run came to} for every node of a batch's step; a node whose lines are not all in srun's
    output (the step never started, the node died or the step's time ran out) is NO_ANSWER, with srun's last
    words."""
    by_name = node_program.parse_output(str((run or {}).get('stdout') or ''))
    tail = ' '.join(str((run or {}).get('stderr') or (run or {}).get('msg') or '').strip().splitlines()[-2:])[:300]
    found = {}
    for node in batch['hosts']:
        outcome = by_name.get(slurm_names.get(node) or node)
        if not isinstance(outcome, dict) or outcome.get('status') not in bundle.STATUSES:
            outcome = {'status': NO_ANSWER, 'message': f"no answer from the node's step{': ' + tail if tail else ''}",
                       'stats': {}, 'changed_tasks': [], 'failed_task': None}
        found[node] = outcome
    return found


def drains(found: t.Mapping[str, t.Mapping[str, t.Any]]) -> dict[str, str]:
    """{node: drain reason} for every node that did not converge: the failed task, or what stopped the run."""
    reasons = {}
    for node, outcome in found.items():
        status = outcome.get('status')
        if status in CONVERGED:
            continue
        failed = outcome.get('failed_task') or {}
        if status == 'failed' and failed.get('task'):
            # The role's own name (the collection's is the same for all): the reason is cut at REASON_CHARS.
            role = str(failed.get('role') or '').rsplit('.', 1)[-1]
            where = f"{role} : {failed['task']}" if role else failed['task']
            reason = f'{DRAIN_PREFIX} failed at {where}'
        else:
            reason = f'{DRAIN_PREFIX} {status}'
        reasons[node] = ' '.join(reason.split())[:REASON_CHARS]
    return reasons


def summary(found: t.Mapping[str, t.Mapping[str, t.Any]], slurm_names: t.Mapping[str, str]) -> dict[str, t.Any]:
    """{counts: {status: n}, changed: {node: [role : task]}, failed: {node: message}, lines: [text]}: what the run
    prints and what site.yml fails on."""
    counts = {status: 0 for status in bundle.STATUSES + (NO_ANSWER,)}
    for outcome in found.values():
        counts[outcome['status']] = counts.get(outcome['status'], 0) + 1
    changed = {node: [f"{item['role']} : {item['task']}" if item.get('role') else item['task']
                      for item in outcome.get('changed_tasks', [])]
               for node, outcome in found.items() if outcome.get('changed_tasks')}
    failed = {node: f"{node}: {outcome.get('message', '')}" for node, outcome in found.items()
              if outcome['status'] not in CONVERGED}
    lines = ['pulled: ' + ', '.join(f'{count} {status}' for status, count in counts.items() if count)]
    by_status: dict[str, list[str]] = {}
    for node, outcome in found.items():
        by_status.setdefault(outcome['status'], []).append(slurm_names.get(node) or node)
    lines += [f'{status}: {hostlist.compress(names)}' for status, names in by_status.items() if status != 'ok']
    lines += [f'{node} changed: ' + '; '.join(tasks) for node, tasks in sorted(changed.items())]
    lines += [f'failed {message}' for _node, message in sorted(failed.items())]
    return {'counts': counts, 'changed': changed, 'failed': failed, 'lines': lines}


# Variables that are Ansible's own or describe the control host's run, never a node's setting: not sent.
MAGIC = frozenset({'group_names', 'groups', 'inventory_dir', 'inventory_file', 'inventory_hostname',
                   'inventory_hostname_short', 'playbook_dir', 'omit', 'role_names', 'hostvars', 'environment',
                   'play_hosts', 'role_path'})
# Prefixes of names never sent: Ansible's connection and run variables (the pull role's pull_withheld_prefixes add
# theirs: the Vault values the inventory refers to, whose role options are sent resolved to the nodes that take them).
WITHHELD_PREFIXES = ('ansible_',)
# This collection's role options that start like Ansible's own (the ansible_node role's): sent.
OWN_PREFIXES = ('ansible_node_',)
# Groups the control host's run makes (the pull role's plan): not the inventory's, not sent.
RUN_GROUPS = ('all', 'ungrouped', 'llmforge_pulled', 'llmforge_converge_drained')
# What every other host carries in cluster.json: its management address (the firewall's sets need every host's).
SHARED_HOST_VARS = ('cluster_network_addresses',)


def sendable(name: str, withheld: t.Collection[str], prefixes: t.Sequence[str] = ()) -> bool:
    """Whether a variable of a pulled node may be sent to it at all (secrets of its own roles are, to it alone):
    not Ansible's own, not a name in `withheld` (other roles' secrets), not starting with one of `prefixes`."""
    if name.startswith(OWN_PREFIXES):
        return name not in withheld
    return name not in MAGIC and name not in withheld and not name.startswith(WITHHELD_PREFIXES + tuple(prefixes))


def documents(node_vars: t.Mapping[str, t.Mapping[str, t.Any]], addresses: t.Mapping[str, str],
              groups: t.Mapping[str, t.Sequence[str]], secrets: t.Collection[str]) -> dict[str, t.Any]:
    """cluster.json's {vars, hosts, groups} and each node's own variables.

    `node_vars` maps each pulled node to the variables it may be sent (already `sendable`); `addresses` every host of
    the cluster to its management address; `secrets` the option names of the node's roles that are secrets. A variable
    every pulled node has with the same value, and that is not a secret, goes to cluster.json once; the rest, each
    node's secrets always among them, to the node's own file."""
    nodes = list(node_vars)
    shared: dict[str, t.Any] = {}
    if nodes:
        first = node_vars[nodes[0]]
        for name, value in first.items():
            if name in secrets:
                continue
            if all(name in node_vars[node] and node_vars[node][name] == value for node in nodes[1:]):
                shared[name] = value
    own = {node: {name: value for name, value in variables.items() if name not in shared}
           for node, variables in node_vars.items()}
    hosts = {host: {'cluster_network_addresses': {'management': address}} for host, address in addresses.items()}
    return {'cluster': {'vars': shared, 'hosts': hosts,
                        'groups': {group: list(members) for group, members in groups.items()
                                   if group not in RUN_GROUPS}},
            'nodes': own}
