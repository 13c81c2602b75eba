# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg_packages: the installed packages in package_facts' structure; missing_packages: which of a list they lack;
dpkg_selections: their dpkg selections; packages_added: the installed packages after an install succeeded (see
module_utils/_dpkg.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

_dpkg = module_utils('_dpkg')


def dpkg_packages(text):
    """{name: [{name, version, arch, source}]} of the fully installed packages in dpkg-query's output."""
    if not isinstance(text, str):
        raise AnsibleFilterError(f'dpkg_packages: expected the text dpkg-query printed, got {type(text).__name__}')
    try:
        return _dpkg.parse(text)
    except _dpkg.DpkgError as err:
        raise AnsibleFilterError(f'dpkg_packages: {err}') from None


def missing_packages(wanted, installed, version=None):
    """The entries of `wanted` (names, name:arch, name=version) not installed per `installed` (package facts), in order.

    `version`: the version the entries without their own must be installed at."""
    if installed is None:
        installed = {}
    try:
        return _dpkg.missing(wanted, installed, None if version is None else str(version))
    except _dpkg.DpkgError as err:
        raise AnsibleFilterError(f'missing_packages: {err}') from None


def dpkg_selections(names, installed):
    """['<name> <selection>', ...] of the installed instances of `names`, sorted; None when `installed` cannot tell."""
    try:
        return _dpkg.selections(names, {} if installed is None else installed)
    except _dpkg.DpkgError as err:
        raise AnsibleFilterError(f'dpkg_selections: {err}') from None


def packages_added(installed, wanted):
    """`installed` (package facts) with the entries of `wanted` it lacks added, as an install that succeeded leaves them."""
    try:
        return _dpkg.added({} if installed is None else installed, wanted)
    except _dpkg.DpkgError as err:
        raise AnsibleFilterError(f'packages_added: {err}') from None


class FilterModule:
    """Debian package filters."""

    def filters(self):
        return {'dpkg_packages': dpkg_packages, 'missing_packages': missing_packages, 'dpkg_selections': dpkg_selections,
                'packages_added': packages_added}
