# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters deciding how validation results drain and resume Slurm nodes (shared with llmforge-nodecheck)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain


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


class FilterModule:
    """Slurm drain filters."""

    def filters(self):
        return {
            'drain_reason': drain_reason,
            'slurm_node_state': slurm_node_state,
            'drain_action': drain_action,
        }
