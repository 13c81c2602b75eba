# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the cluster's networks (cluster_networks): host addresses, CIDRs, the checked plan of the inventory.

The logic lives in plugin_utils/_networks.py (standard library only); each filter's documentation is beside this file.
"""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

_networks = plugin_utils('_networks')


def _call(name: str, func: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    try:
        return func(*args)
    except ValueError as err:
        raise AnsibleFilterError(f'{name}: {err}', orig_exc=err) from err


def network_address(hostvars_of_host, network, networks=None):
    """The host's IPv4 address on the network."""
    return _call('network_address', _networks.host_address, hostvars_of_host, network, networks)


def network_cidr(hostvars_of_host, network, networks=None):
    """The network's CIDR (an undeclared one: the network of the host's default IPv4 route)."""
    return _call('network_cidr', _networks.network_cidr, hostvars_of_host, network, networks)


def cluster_network_plan(hostvars, groups, networks=None, resolve=None):
    """Check cluster_networks against the inventory; every host's address on each of its networks."""
    return _call('cluster_network_plan', _networks.network_plan, hostvars, groups, networks, resolve)


def cidr_problems(values, variable):
    """What is wrong with a list of networks in CIDR notation, each problem naming the item of the variable."""
    return _networks.cidr_problems(values, variable)


def normalized_cidrs(values, variable):
    """The networks in normalised CIDR form (10.0.0.5 -> 10.0.0.5/32), as the files that list them get them."""
    return _call('normalized_cidrs', _networks.normalized_cidrs, values, variable)


def address_in_networks(address, networks):
    """Whether the address lies in one of the networks."""
    return _call('address_in_networks', _networks.address_in_networks, address, networks)


class FilterModule:
    """Cluster network filters."""

    def filters(self) -> dict[str, t.Callable[..., t.Any]]:
        return {
            'network_address': network_address,
            'network_cidr': network_cidr,
            'cluster_network_plan': cluster_network_plan,
            'cidr_problems': cidr_problems,
            'normalized_cidrs': normalized_cidrs,
            'address_in_networks': address_in_networks,
        }
