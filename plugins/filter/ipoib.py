# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ipoib_addresses: IPoIB addresses of a group's hosts from per-rail subnets (see plugin_utils/_ipoib.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_ipoib = plugin_utils('_ipoib')


def ipoib_addresses(networks, hostvars, hosts, host=None, host_offset=1, mtu=4092, mode='datagram', group='cluster'):
    """Validate the rails against every host of the group; return {host: [address per rail]} (only host's when given).

    node_index, ansible_host and the gathered default IPv4 facts are read from hostvars.
    """
    try:
        hosts = list(hosts)
        inputs = _ipoib.host_inputs(hostvars, hosts)
        return _ipoib.compute_addresses(networks, hosts, inputs['node_indexes'], inputs['management'], host_offset,
                                        mtu, mode, group, host, inputs['management_interfaces'])
    except ValueError as err:
        raise AnsibleFilterError(f'ipoib_addresses: {err}') from err


class FilterModule:
    """IPoIB addressing filters."""

    def filters(self):
        return {'ipoib_addresses': ipoib_addresses}
