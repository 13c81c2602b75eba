# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of validate.yml's training stage: the runs of the reference trainer to make, and their verdicts."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils, plugin_utils

fleet = plugin_utils('_training_fleet')
catalog = module_utils('_gpu_catalog')

# Where the training_env role installs the trainer, when the node's inventory does not say.
DEFAULT_ENV_ROOT = '/opt/llmforge/envs'
DEFAULT_ENV_NAME = 'llmforge-train'
DEFAULT_GPU_COUNT = 8


def _first(facts, *names, default=None):
    for name in names:
        value = facts.get(name) if hasattr(facts, 'get') else None
        if value is not None and value != '':
            return value
    return default


def _gpus_per_node(facts, node):
    gpus = _first(facts, 'validate_training_gpus_per_node')
    if gpus is None and hasattr(facts, 'get'):
        gpus = catalog.node_gpus(str(node), facts)['gpu_count']
    return DEFAULT_GPU_COUNT if gpus is None else gpus


def node_settings(facts, node=''):
    """{gpus, tasks, trainer, run_root} of a node from its variables (hostvars), with the documented defaults.

    GPUs: validate_training_gpus_per_node, else the GPU count of the node's gpu_profile in the GPU catalog (or its
    gpu_count)."""
    env = f"{_first(facts, 'training_env_root', default=DEFAULT_ENV_ROOT)}/{_first(facts, 'training_env_name', default=DEFAULT_ENV_NAME)}"
    return {
        'gpus': _gpus_per_node(facts, node),
        'tasks': _first(facts, 'validate_training_tasks_per_node'),
        'trainer': f'{env}/bin/llmforge-train',
        'run_root': _first(facts, 'validate_training_run_root', 'training_env_job_run_root', default=''),
    }


def training_plan(nodes, hostvars, options):
    """{runs, all_nodes_skipped}: every single-node run, then the all-node run, argv included."""
    try:
        return fleet.plan_runs({node: node_settings(hostvars[node], node) for node in nodes}, options or {})
    except (fleet.TrainingFleetError, KeyError, TypeError, ValueError) as err:
        raise AnsibleFilterError(f'training_plan: {err}') from err


def training_judge(results, plan, tolerance_pct, min_tokens_per_s=0):
    """{nodes: {node: {checks, healthy, tokens_per_s, ...}}, cluster: the all-node result} of the registered runs."""
    try:
        return fleet.judge(list(results or []), plan or {}, tolerance_pct, min_tokens_per_s)
    except (fleet.TrainingFleetError, KeyError, TypeError) as err:
        raise AnsibleFilterError(f'training_judge: {err}') from err


class FilterModule:
    """Training fleet filters."""

    def filters(self):
        return {
            'training_plan': training_plan,
            'training_judge': training_judge,
        }
