# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of the training_env role: check the pip lock and name the environment built from it."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

pip_lock = plugin_utils('_pip_lock')


def training_env_plan(requirements, name, root, python='/usr/bin/python3', system_site_packages=False, os_packages=None):
    """{name, dir, current, digest, lock, packages, count} of the environment; the error names the bad variable."""
    try:
        return pip_lock.plan(requirements, name, root, python, bool(system_site_packages), list(os_packages or []))
    except pip_lock.LockError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {'training_env_plan': training_env_plan}
