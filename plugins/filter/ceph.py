# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the ceph_client role: check the cluster's fsid, monitors, client name and key, and the CephFS mounts.

Each raises AnsibleFilterError naming the variable and the bad item, so the role's preflight fails before anything
changes on the host.
"""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import UNSET, plugin_utils

ceph = plugin_utils('_ceph')


def _wrap(func: t.Callable[..., t.Any], *args: t.Any, **kwargs: t.Any) -> t.Any:
    try:
        return func(*args, **kwargs)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


def ceph_cluster(settings):
    """{fsid, mon_hosts, name, key} of the ceph_client role, checked and normalised (the key is never echoed)."""
    if not isinstance(settings, dict):
        raise AnsibleFilterError(f'ceph_cluster expects a mapping of fsid, mon_hosts, name and key; got {type(settings).__name__}')
    return {
        'fsid': _wrap(ceph.check_fsid, settings.get('fsid')),
        'mon_hosts': _wrap(ceph.check_mon_hosts, settings.get('mon_hosts')),
        'name': _wrap(ceph.check_client_name, settings.get('name')),
        'key': _wrap(ceph.check_key, settings.get('key')),
    }


def ceph_mounts(mounts, client_name, mon_hosts, driver, default_options=UNSET, automount=True, readahead='64M'):
    """ceph_client_mounts checked, each with its fstab source, type and options for the driver (kernel or fuse)."""
    default_options = ceph.DEFAULT_MOUNT_OPTIONS if default_options is UNSET else default_options
    return _wrap(ceph.check_mounts, mounts, client_name, list(mon_hosts), driver, list(default_options),
                 bool(automount), readahead)


class FilterModule:
    """Ceph client filters."""

    def filters(self):
        return {
            'ceph_cluster': ceph_cluster,
            'ceph_mounts': ceph_mounts,
        }
