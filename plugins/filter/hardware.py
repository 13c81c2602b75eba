# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""hardware_problems: what is wrong with a host's hardware description (see module_utils/_hardware.py)."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

_hardware = module_utils('_hardware')


def hardware_problems(values, host):
    """One sentence per problem with the host's gpu_type, gpu_count, gpu_profile, ... (values: name -> value); [] when none."""
    if not isinstance(values, t.Mapping):
        raise AnsibleFilterError(f'hardware_problems: expected a mapping of variable names to values, got {type(values).__name__}')
    return _hardware.problems(str(host), values)


class FilterModule:
    """Hardware description filters."""

    def filters(self):
        return {'hardware_problems': hardware_problems}
