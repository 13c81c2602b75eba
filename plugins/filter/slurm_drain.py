# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters deciding how validation results drain and resume Slurm nodes (rules shared with llmforge-nodecheck)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

drain = module_utils('_slurm_drain')


def _checks(value, name):
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, dict) for item in value):
        raise AnsibleFilterError(f'{name}: expected a list of check dicts, got {type(value).__name__}')
    return value


def drain_reason(checks):
    """`llmforge: <check> <subject> <actual>` of the first failing check (at most 120 characters), or ''."""
    return drain.drain_reason(_checks(checks, 'drain_reason'))


def slurm_node_state(text):
    """{name, state, reason, drained} from one `scontrol show node <name> -o` line."""
    if not isinstance(text, str):
        raise AnsibleFilterError(f'slurm_node_state: expected the text of `scontrol show node -o`, got {type(text).__name__}')
    return drain.parse_node(text)


def drain_action(checks, node):
    """{action: drain|resume|None, reason, why} for a node's checks and its slurm_node_state."""
    if not isinstance(node, dict):
        raise AnsibleFilterError(f'drain_action: the node state must be a dict (slurm_node_state), got {type(node).__name__}')
    return drain.drain_action(_checks(checks, 'drain_action'), node)


def drain_plan(nodes, hostvars):
    """{host, healthy, reason, checks, slurm_name} of each node of a validation report (its `nodes`), the name in
    Slurm read from the node's validate_slurm_node_name (unset: the inventory name)."""
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError(f'drain_plan: expected the nodes of a validation report, got {type(nodes).__name__}')
    names = {}
    for node in nodes:
        facts = hostvars[node['name']] if node.get('name') in hostvars else {}
        names[node.get('name')] = facts.get('validate_slurm_node_name') if hasattr(facts, 'get') else None
    try:
        return drain.drain_plan(nodes, names)
    except KeyError as err:
        raise AnsibleFilterError(f'drain_plan: a report node has no {err}') from err


def drain_decisions(results, states=None):
    """{host, slurm_name, action (drain|resume|None), reason, old_reason, why} of every node whose state the
    registered `scontrol show node <name> -o` loop (over drain_plan) read; with `states` (the output of one
    `scontrol show node --oneliner` of every node), `results` is the drain plan itself."""
    if not isinstance(results, (list, tuple)) or not all(isinstance(item, dict) for item in results):
        raise AnsibleFilterError(f'drain_decisions: expected registered loop results, got {type(results).__name__}')
    try:
        if states is not None:
            results = drain.read_states(results, str(states))
        return drain.drain_decisions(results)
    except KeyError as err:
        raise AnsibleFilterError(f'drain_decisions: a read result has no {err} (its item must be a drain_plan entry)') from err


class FilterModule:
    """Slurm drain filters."""

    def filters(self):
        return {
            'drain_reason': drain_reason,
            'slurm_node_state': slurm_node_state,
            'drain_action': drain_action,
            'drain_plan': drain_plan,
            'drain_decisions': drain_decisions,
        }
