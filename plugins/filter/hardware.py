# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Hardware filters: the GPU catalog (module_utils/_gpu_catalog.py) and the check of a host's hardware description
(plugin_utils/_hardware.py)."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils, plugin_utils

_catalog = module_utils('_gpu_catalog')
_hardware = plugin_utils('_hardware')


def hardware_problems(values, host):
    """One sentence per problem with the host's gpu_type, gpu_count, gpu_profile, ... (values: name -> value); [] when none."""
    if not isinstance(values, t.Mapping):
        raise AnsibleFilterError(f'hardware_problems: expected a mapping of variable names to values, got {type(values).__name__}')
    return _hardware.problems(str(host), values)


def hardware_variables(names):
    """The names among `names` that are hardware variables the check reads (gpu_profile, gpu_type, ...)."""
    if isinstance(names, (str, bytes)) or not isinstance(names, t.Iterable):
        raise AnsibleFilterError(f'hardware_variables: expected a list of variable names, got {type(names).__name__}')
    return _hardware.set_variables(names)


def gpu_model(profile):
    """The GPU catalog's record of a profile (h200-sxm-8, ...) as a dict."""
    try:
        return _catalog.as_dict(_catalog.model(profile, 'profile'))
    except _catalog.GpuCatalogError as err:
        raise AnsibleFilterError(f'gpu_model: {err}') from err


def gpu_node(values, host):
    """A host's GPUs from its variables (gpu_profile, gpu_type, gpu_count, gpu_expected), derived through the catalog."""
    if not isinstance(values, t.Mapping):
        raise AnsibleFilterError(f'gpu_node: expected a mapping of variable names to values, got {type(values).__name__}')
    try:
        return _catalog.node_facts(str(host), values)
    except ValueError as err:
        raise AnsibleFilterError(f'gpu_node: {err}') from err


class FilterModule:
    """Hardware description filters."""

    def filters(self):
        return {
            'hardware_problems': hardware_problems,
            'hardware_variables': hardware_variables,
            'gpu_model': gpu_model,
            'gpu_node': gpu_node,
        }
