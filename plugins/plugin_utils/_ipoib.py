# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""IPoIB addresses for every host of a group, computed from per-rail subnets and each host's index.

Pure Python (netaddr, no Ansible import) so the filter, the unit tests and any node-side tool share it.
A host's index is its position in the group (inventory order) unless an explicit ``node_index`` is given;
index ``i`` gets ``network + host_offset + i`` on every rail. Every refusal raises ``ValueError`` with a
message that names the variable holding the bad value, so the play can stop before anything changes.
"""

from __future__ import annotations

import re
import typing as t

try:
    import netaddr
except ImportError:  # reported by compute_addresses, so that importing this file never fails
    netaddr = None

NETWORKS_VAR = 'infiniband_ipoib_networks'
OFFSET_VAR = 'infiniband_ipoib_host_offset'
GROUP_VAR = 'infiniband_ipoib_group'
INDEX_VAR = 'node_index'
MODES = ('datagram', 'connected')
# Largest IPoIB MTU per mode: datagram carries one 4096-byte IB MTU less the 4-byte IPoIB header;
# connected mode is limited by the kernel's IPOIB_CM_MTU.
MAX_MTU = {'datagram': 4092, 'connected': 65520}
MIN_MTU = 1280
_RAIL_KEYS = frozenset({'interface', 'cidr', 'mtu', 'mode'})
# A Linux interface name: 1 to 15 characters, no '/', ':' or whitespace.
_IFNAME = re.compile(r'^[A-Za-z0-9_.-]{1,15}$')


class Rail(t.NamedTuple):
    """One IPoIB network as validated: where it lives and the addresses it may hand out."""

    label: str
    interface: str
    network: t.Any  # netaddr.IPNetwork
    first: int
    last: int
    mtu: int
    mode: str


def _usable_range(network: t.Any) -> tuple[int, int]:
    """First and last address a host may take: IPv4 networks above /31 lose network and broadcast."""
    first, last = int(network.first), int(network.last)
    if network.version == 4 and network.prefixlen < 31:
        return first + 1, last - 1
    if network.version == 6 and network.prefixlen < 127:
        # The all-zero host address is the subnet-router anycast address.
        return first + 1, last
    return first, last


def _integer(value: t.Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f'{where} must be an integer, got {value!r}')
    try:
        return int(value)
    except ValueError:
        raise ValueError(f'{where} must be an integer, got {value!r}') from None


def parse_rails(networks: t.Any, mtu: t.Any = 4092, mode: str = 'datagram') -> list[Rail]:
    """Validate the rails (list of {interface, cidr, mtu?, mode?}) against each other."""
    if netaddr is None:
        raise ValueError('IPoIB addressing needs the Python library netaddr on the Ansible controller '
                         '(pip install netaddr, pinned in requirements.txt)')
    if not isinstance(networks, (list, tuple)):
        raise ValueError(f'{NETWORKS_VAR} must be a list of {{interface, cidr}} items, got {networks!r}')
    rails: list[Rail] = []
    for position, item in enumerate(networks):
        label = f'{NETWORKS_VAR}[{position}]'
        if not isinstance(item, t.Mapping):
            raise ValueError(f'{label} must be a mapping with interface and cidr, got {item!r}')
        unknown = sorted(set(item) - _RAIL_KEYS)
        if unknown:
            raise ValueError(f'{label} has unknown key(s) {", ".join(map(str, unknown))}; '
                             f'known: {", ".join(sorted(_RAIL_KEYS))}')
        interface = item.get('interface')
        if not isinstance(interface, str) or not _IFNAME.fullmatch(interface):
            raise ValueError(f'{label}.interface must be a network interface name such as ib0 '
                             f'(1-15 letters, digits, _ . -), got {interface!r}')
        rails.append(_parse_rail(label, interface, item, mtu, mode))
    for later, rail in enumerate(rails):
        for earlier in rails[:later]:
            if rail.interface == earlier.interface:
                raise ValueError(f'{rail.label}.interface {rail.interface} is already used by {earlier.label}.interface')
            if rail.network.first <= earlier.network.last and earlier.network.first <= rail.network.last:
                raise ValueError(f'{rail.label}.cidr {rail.network} overlaps {earlier.label}.cidr {earlier.network}')
    return rails


def _parse_rail(label: str, interface: str, item: t.Mapping[str, t.Any], default_mtu: t.Any, default_mode: str) -> Rail:
    cidr = item.get('cidr')
    if not isinstance(cidr, str) or '/' not in cidr:
        raise ValueError(f'{label}.cidr must be a network in CIDR notation such as 10.10.0.0/16, got {cidr!r}')
    try:
        network = netaddr.IPNetwork(cidr)
    except (netaddr.AddrFormatError, ValueError, TypeError):
        raise ValueError(f'{label}.cidr {cidr!r} is not a network in CIDR notation such as 10.10.0.0/16') from None
    if network.ip != network.network:
        raise ValueError(f'{label}.cidr {cidr} has host bits set; the network is {network.cidr}')
    # Absent and null (as role argument validation may leave them) both mean the role-wide default.
    own_mode, own_mtu = item.get('mode'), item.get('mtu')
    mode = default_mode if own_mode is None else own_mode
    mode_where = 'infiniband_ipoib_mode' if own_mode is None else f'{label}.mode'
    if mode not in MODES:
        raise ValueError(f'{mode_where} must be one of {", ".join(MODES)}, got {mode!r}')
    mtu_where = 'infiniband_ipoib_mtu' if own_mtu is None else f'{label}.mtu'
    mtu = _integer(default_mtu if own_mtu is None else own_mtu, mtu_where)
    if not MIN_MTU <= mtu <= MAX_MTU[mode]:
        raise ValueError(f'{mtu_where} {mtu} is outside {MIN_MTU}..{MAX_MTU[mode]}, the range IPoIB {mode} mode '
                         f'carries ({mode_where} {mode})')
    first, last = _usable_range(network)
    return Rail(label, interface, network, first, last, mtu, mode)


def _indexes(hosts: t.Sequence[str], node_indexes: t.Mapping[str, t.Any], group: str) -> dict[str, int]:
    """Each host's index: its explicit node_index, else its position in the group; duplicates refused."""
    unknown = sorted(set(node_indexes) - set(hosts))
    if unknown:
        raise ValueError(f'{INDEX_VAR} is set for {", ".join(unknown)}, not in group {group} ({GROUP_VAR})')
    indexes: dict[str, int] = {}
    owner: dict[int, str] = {}
    for position, host in enumerate(hosts):
        if host in indexes:
            continue
        explicit = node_indexes.get(host)
        index = position if explicit is None else _integer(explicit, f'{INDEX_VAR} of {host}')
        if index < 0:
            raise ValueError(f'{INDEX_VAR} of {host} must not be negative, got {index}')
        if index in owner:
            raise ValueError(f'{INDEX_VAR} {index} of {host} is also the index of {owner[index]} '
                             f'({_why(owner[index], node_indexes)}); give every host of group {group} its own index')
        indexes[host] = index
        owner[index] = host
    return indexes


def _why(host: str, node_indexes: t.Mapping[str, t.Any]) -> str:
    return f'its {INDEX_VAR}' if node_indexes.get(host) is not None else 'its position in the group'


def _management_networks(management: t.Mapping[str, t.Any]) -> list[tuple[str, t.Any]]:
    """(host, network) pairs for every management address given as an IP or CIDR; host names are skipped."""
    found = []
    for host, values in management.items():
        for value in values if isinstance(values, (list, tuple)) else [values]:
            if not isinstance(value, str) or not value:
                continue
            try:
                found.append((host, netaddr.IPNetwork(value).cidr))
            except (netaddr.AddrFormatError, ValueError, TypeError):
                continue  # a DNS name (ansible_host: node1.example.com) is not resolved here
    return found


def compute_addresses(networks: t.Any, hosts: t.Sequence[str], node_indexes: t.Optional[t.Mapping[str, t.Any]] = None,
                      management: t.Optional[t.Mapping[str, t.Any]] = None, host_offset: t.Any = 1,
                      mtu: t.Any = 4092, mode: str = 'datagram', group: str = 'cluster',
                      only: t.Optional[str] = None,
                      management_interfaces: t.Optional[t.Mapping[str, t.Any]] = None) -> dict[str, list[dict[str, t.Any]]]:
    """Per host, one {interface, address, prefix, cidr, network, netmask, mtu, mode} per rail.

    hosts: the group's hosts in inventory order; node_indexes: host -> explicit index (None: use the position);
    management: host -> management address(es) as IP or CIDR strings (ansible_host, default IPv4 with its
    network); only: return that host's entry alone (the whole group is still validated);
    management_interfaces: host -> interface of its default route, which no rail may take over.
    """
    rails = parse_rails(networks, mtu, mode)
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, (list, tuple)) or not all(isinstance(host, str) for host in hosts):
        raise ValueError(f'the hosts of group {group} ({GROUP_VAR}) must be a list of host names, got {hosts!r}')
    for name, value in ((INDEX_VAR, node_indexes), ('the management addresses', management),
                        ('the management interfaces', management_interfaces)):
        if value is not None and not isinstance(value, t.Mapping):
            raise ValueError(f'{name} must be a mapping of host to value, got {value!r}')
    hosts = list(hosts)
    if only is not None and only not in hosts:
        raise ValueError(f'{only} is not in group {group} ({GROUP_VAR}), whose hosts get IPoIB addresses')
    offset = _integer(host_offset, OFFSET_VAR)
    indexes = _indexes(hosts, dict(node_indexes or {}), group)
    highest = max(indexes.values(), default=-1)
    highest_host = next((host for host, index in indexes.items() if index == highest), None)
    for rail in rails:
        start = int(rail.network.first) + offset
        if start < rail.first:
            # A negative start is no address at all (netaddr refuses to build one): say so instead.
            place = f'on {netaddr.IPAddress(start, rail.network.version)}' if start >= 0 else 'before the first address'
            raise ValueError(f'{OFFSET_VAR} {offset} puts index 0 {place}, '
                             f'below the first usable address of {rail.label}.cidr {rail.network}')
        if highest >= 0 and start + highest > rail.last:
            usable = max(rail.last - start + 1, 0)
            raise ValueError(f'{rail.label}.cidr {rail.network} is too small: from {OFFSET_VAR} {offset} on it holds '
                             f'{usable} address(es), but {highest_host} has index {highest} '
                             f'({len(indexes)} host(s) in group {group})')
    for host, network in _management_networks(dict(management or {})):
        for rail in rails:
            if network.first <= rail.network.last and rail.network.first <= network.last:
                raise ValueError(f'{rail.label}.cidr {rail.network} overlaps the management network {network} of {host}; '
                                 f'IPoIB rails need subnets of their own')
    for host, interface in (management_interfaces or {}).items():
        for rail in rails:
            if interface and rail.interface == interface:
                raise ValueError(f'{rail.label}.interface {interface} is the management interface of {host} '
                                 f'(its default IPv4 route); IPoIB rails must not reconfigure it')
    wanted = [only] if only is not None else list(indexes)
    return {host: [_address(rail, int(rail.network.first) + offset + indexes[host]) for rail in rails] for host in wanted}


def _address(rail: Rail, value: int) -> dict[str, t.Any]:
    address = netaddr.IPAddress(value, rail.network.version)
    return {
        'interface': rail.interface,
        'address': str(address),
        'prefix': rail.network.prefixlen,
        'cidr': f'{address}/{rail.network.prefixlen}',
        'network': str(rail.network.cidr),
        'netmask': str(rail.network.netmask),
        'mtu': rail.mtu,
        'mode': rail.mode,
    }


def host_inputs(hostvars: t.Mapping[str, t.Any], hosts: t.Sequence[str]) -> dict[str, dict[str, t.Any]]:
    """node_indexes, management and management_interfaces for compute_addresses, read from inventory variables.

    Per host: node_index; ansible_host; ansible_facts.default_ipv4 address/netmask and interface (known only for
    hosts whose facts were gathered).
    """
    node_indexes: dict[str, t.Any] = {}
    management: dict[str, list[str]] = {}
    interfaces: dict[str, str] = {}
    for host in hosts:
        host_vars = hostvars.get(host) or {}
        if host_vars.get(INDEX_VAR) is not None:
            node_indexes[host] = host_vars[INDEX_VAR]
        facts = host_vars.get('ansible_facts') or {}
        ipv4 = facts.get('default_ipv4') or {}
        found = [host_vars.get('ansible_host')]
        if ipv4.get('address'):
            found.append(f"{ipv4['address']}/{ipv4['netmask']}" if ipv4.get('netmask') else ipv4['address'])
        management[host] = [value for value in found if isinstance(value, str) and value]
        if ipv4.get('interface'):
            interfaces[host] = ipv4['interface']
    return {'node_indexes': node_indexes, 'management': management, 'management_interfaces': interfaces}
