# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""config_value_problems: values a role renders into a configuration file, checked (plugin_utils/_config_values.py)."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_config_values = plugin_utils('_config_values')


def config_value_problems(values, syntax='line', keys=False, host=None):
    """One sentence per value of `values` (variable name -> value) that would break out of its place in the file."""
    if not isinstance(values, t.Mapping):
        raise AnsibleFilterError('config_value_problems: expected a mapping of variable names to values, '
                                 f'got {type(values).__name__}')
    try:
        return _config_values.problems(values, syntax=syntax, keys=bool(keys), host=host or None)
    except ValueError as err:
        raise AnsibleFilterError(f'config_value_problems: {err}') from err


class FilterModule:
    """Rendered configuration value checks."""

    def filters(self):
        return {'config_value_problems': config_value_problems}
