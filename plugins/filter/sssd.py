# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sssd_problems: what is wrong with the sssd role's LDAP settings (see plugin_utils/_sssd.py)."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_sssd = plugin_utils('_sssd')


def sssd_problems(values):
    """One sentence per problem with the sssd_* settings (values: variable name -> value); [] when none."""
    if not isinstance(values, t.Mapping):
        raise AnsibleFilterError(f'sssd_problems: expected a mapping of variable names to values, got {type(values).__name__}')
    return _sssd.problems(values)


class FilterModule:
    """SSSD settings filters."""

    def filters(self):
        return {'sssd_problems': sssd_problems}
