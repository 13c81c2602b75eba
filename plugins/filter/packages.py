# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""missing_packages: which of a list of packages the installed packages (package_facts) lack; packages_added: the
installed packages after an install succeeded (see plugin_utils/_packages.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_packages = plugin_utils('_packages')


def missing_packages(wanted, installed, version=None):
    """The entries of `wanted` (names, name:arch, name=version) not installed per `installed` (package facts), in order.

    `version`: the version the entries without their own must be installed at."""
    if installed is None:
        installed = {}
    try:
        return _packages.missing(wanted, installed, None if version is None else str(version))
    except _packages.PackagesError as err:
        raise AnsibleFilterError(f'missing_packages: {err}') from None


def packages_added(installed, wanted):
    """`installed` (package facts) with the entries of `wanted` it lacks added, as an install that succeeded leaves them."""
    try:
        return _packages.added({} if installed is None else installed, wanted)
    except _packages.PackagesError as err:
        raise AnsibleFilterError(f'packages_added: {err}') from None


class FilterModule:
    """Package list filters."""

    def filters(self):
        return {'missing_packages': missing_packages, 'packages_added': packages_added}
