# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's networks (management, storage, training) and each host's address on them.

Standard library only (``ipaddress``), no Ansible import: the filters, the unit tests and any node-side tool share it.
``cluster_networks`` maps a network name to ``{cidr, interface?, groups?}``. A host's address on a network is its
explicit ``cluster_network_addresses[network]``, else the address of the network's interface (per host
``cluster_network_interfaces[network]`` or the network's ``interface``) lying in the CIDR, else any of its
``all_ipv4_addresses`` in the CIDR. A network that is not declared (``cluster_networks`` undefined or empty) is the
network of the host's default IPv4 route. Every refusal raises ``ValueError`` naming the variable, host and value.
"""

from __future__ import annotations

import ipaddress
import re
import typing as t

NETWORKS_VAR = 'cluster_networks'
ADDRESSES_VAR = 'cluster_network_addresses'
INTERFACES_VAR = 'cluster_network_interfaces'
MANAGEMENT = 'management'
# Hosts that must have an address on a network whose entry names no groups.
DEFAULT_GROUPS = {MANAGEMENT: ('cluster',)}
_NETWORK_KEYS = frozenset({'cidr', 'interface', 'groups'})
# A network name is a key of cluster_networks and of the per-host mappings.
_NAME = re.compile(r'^[A-Za-z][A-Za-z0-9_]*$')
# A Linux interface name: 1 to 15 characters, no '/', ':' or whitespace.
_IFNAME = re.compile(r'^[A-Za-z0-9_.-]{1,15}$')
# How many problems a refusal lists before it counts the rest.
_MAX_PROBLEMS = 20


class Network(t.NamedTuple):
    """One declared network as validated."""

    name: str
    cidr: ipaddress.IPv4Network
    interface: t.Optional[str]
    groups: tuple[str, ...]


def _ipv4_network(value: t.Any, where: str) -> ipaddress.IPv4Network:
    if not isinstance(value, str) or '/' not in value:
        raise ValueError(f'{where} must be an IPv4 network in CIDR notation such as 10.10.0.0/16, got {value!r}')
    try:
        network = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        raise ValueError(f'{where} is not a valid IPv4 network ({err}), got {value!r}') from None
    if not isinstance(network, ipaddress.IPv4Network):
        raise ValueError(f'{where} must be an IPv4 network (host addresses come from IPv4 facts), got {value!r}')
    return network


def _ipv4_address(value: t.Any, where: str) -> ipaddress.IPv4Address:
    try:
        parsed = ipaddress.ip_address(value.strip()) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, ipaddress.IPv4Address):
        raise ValueError(f'{where} must be an IPv4 address such as 10.10.0.5, got {value!r}')
    return parsed


def parse_networks(networks: t.Any) -> dict[str, Network]:
    """Validate ``cluster_networks`` (undefined, None or {}: no declared network) and return it by name."""
    if networks is None or networks == '':
        return {}
    if not isinstance(networks, t.Mapping):
        raise ValueError(f'{NETWORKS_VAR} must be a mapping of network name to {{cidr, interface, groups}}, '
                         f'got {networks!r}')
    parsed: dict[str, Network] = {}
    for name, entry in networks.items():
        where = f'{NETWORKS_VAR}.{name}'
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f'{NETWORKS_VAR}: network names are letters, digits and underscores starting with a '
                             f'letter, got {name!r}')
        if not isinstance(entry, t.Mapping):
            raise ValueError(f'{where} must be a mapping with cidr (and optionally interface and groups), got {entry!r}')
        unknown = sorted(str(key) for key in set(entry) - _NETWORK_KEYS)
        if unknown:
            raise ValueError(f'{where} has unknown keys {", ".join(unknown)} (known: {", ".join(sorted(_NETWORK_KEYS))})')
        if 'cidr' not in entry:
            raise ValueError(f'{where}.cidr is missing: give the network in CIDR notation such as 10.10.0.0/16')
        cidr = _ipv4_network(entry['cidr'], f'{where}.cidr')
        interface = entry.get('interface')
        if interface is not None and (not isinstance(interface, str) or not _IFNAME.fullmatch(interface)):
            raise ValueError(f'{where}.interface must be an interface name such as eno1 or ib0, got {interface!r}')
        groups = entry.get('groups', DEFAULT_GROUPS.get(name, ()))
        if isinstance(groups, str) or not isinstance(groups, (list, tuple)) or \
                not all(isinstance(group, str) and group for group in groups):
            raise ValueError(f'{where}.groups must be a list of inventory group names, got {groups!r}')
        parsed[name] = Network(name, cidr, interface or None, tuple(groups))
    names = list(parsed)
    for position, first in enumerate(names):
        for second in names[position + 1:]:
            if parsed[first].cidr.overlaps(parsed[second].cidr):
                raise ValueError(f'{NETWORKS_VAR}.{first} ({parsed[first].cidr}) and {NETWORKS_VAR}.{second} '
                                 f'({parsed[second].cidr}) overlap: each network needs its own address range')
    return parsed


def _host_name(hostvars_of_host: t.Mapping[str, t.Any]) -> str:
    return str(hostvars_of_host.get('inventory_hostname') or '<unknown host>')


def _fact(hostvars_of_host: t.Mapping[str, t.Any], name: str) -> t.Any:
    """A gathered fact: from ansible_facts, or the ansible_<name> variable when facts are injected as variables."""
    facts = hostvars_of_host.get('ansible_facts') or {}
    if isinstance(facts, t.Mapping) and name in facts:
        return facts[name]
    return hostvars_of_host.get(f'ansible_{name}')


def _host_mapping(hostvars_of_host: t.Mapping[str, t.Any], variable: str) -> t.Mapping[str, t.Any]:
    value = hostvars_of_host.get(variable)
    if value is None or value == '':
        return {}
    if not isinstance(value, t.Mapping):
        raise ValueError(f'{variable} of {_host_name(hostvars_of_host)} must be a mapping of network name to value, '
                         f'got {value!r}')
    return value


def _interface_addresses(hostvars_of_host: t.Mapping[str, t.Any], interface: str) -> list[str]:
    """The IPv4 addresses facts give the interface (Ansible writes '-' in interface names as '_')."""
    facts = _fact(hostvars_of_host, interface.replace('-', '_'))
    if not isinstance(facts, t.Mapping):
        return []
    entries = [facts.get('ipv4')] + list(facts.get('ipv4_secondaries') or [])
    return [str(entry['address']) for entry in entries if isinstance(entry, t.Mapping) and entry.get('address')]


def _in(value: str, network: ipaddress.IPv4Network) -> bool:
    try:
        return ipaddress.ip_address(value) in network
    except ValueError:
        return False


def _interface_of(hostvars_of_host: t.Mapping[str, t.Any], network: Network) -> t.Optional[str]:
    interface = _host_mapping(hostvars_of_host, INTERFACES_VAR).get(network.name, network.interface)
    if interface is not None and (not isinstance(interface, str) or not _IFNAME.fullmatch(interface)):
        raise ValueError(f'{INTERFACES_VAR}.{network.name} of {_host_name(hostvars_of_host)} must be an interface '
                         f'name such as eno1, got {interface!r}')
    return interface or None


def _default_ipv4(hostvars_of_host: t.Mapping[str, t.Any]) -> t.Mapping[str, t.Any]:
    default = _fact(hostvars_of_host, 'default_ipv4')
    return default if isinstance(default, t.Mapping) else {}


def host_address(hostvars_of_host: t.Mapping[str, t.Any], name: str, networks: t.Any = None) -> str:
    """The host's IPv4 address on network ``name`` (see the module's docstring for the order of the sources)."""
    if not isinstance(hostvars_of_host, t.Mapping):
        raise ValueError(f'the first argument must be hostvars[host] (a mapping), got {type(hostvars_of_host).__name__}')
    return _address(hostvars_of_host, name, parse_networks(networks))


def _address(hostvars_of_host: t.Mapping[str, t.Any], name: str, declared: dict[str, Network]) -> str:
    host = _host_name(hostvars_of_host)
    network = declared.get(name)
    explicit = _host_mapping(hostvars_of_host, ADDRESSES_VAR).get(name)
    if explicit is not None:
        value = _ipv4_address(explicit, f'{ADDRESSES_VAR}.{name} of {host}')
        if network is not None and value not in network.cidr:
            raise ValueError(f'{ADDRESSES_VAR}.{name} of {host} is {value}, outside {NETWORKS_VAR}.{name} '
                             f'({network.cidr})')
        return str(value)
    if network is None:
        default = _default_ipv4(hostvars_of_host).get('address')
        if not default:
            raise ValueError(f'{host} has no address on the {name} network: {NETWORKS_VAR} does not declare it, so '
                             f'it is the network of the default IPv4 route, and {host} has no default_ipv4 facts '
                             f'(gather facts, or set {ADDRESSES_VAR}.{name})')
        return str(_ipv4_address(default, f'the default_ipv4 address of {host}'))
    interface = _interface_of(hostvars_of_host, network)
    candidates = _interface_addresses(hostvars_of_host, interface) if interface else []
    candidates += [str(item) for item in _fact(hostvars_of_host, 'all_ipv4_addresses') or []]
    candidates = list(dict.fromkeys(candidates))
    for candidate in candidates:
        if _in(candidate, network.cidr):
            return candidate
    have_facts = _fact(hostvars_of_host, 'all_ipv4_addresses') is not None
    why = (f'none of its addresses ({", ".join(candidates) or "none"}) lies in it' if have_facts
           else 'it has no gathered network facts (gather facts, or set '
                f'{ADDRESSES_VAR}.{name})')
    raise ValueError(f'{host} has no address on the {name} network ({NETWORKS_VAR}.{name}: {network.cidr}, '
                     f'interface {interface or "any"}): {why}')


def network_cidr(hostvars_of_host: t.Mapping[str, t.Any], name: str, networks: t.Any = None) -> str:
    """The network's CIDR; for a network not declared, that of the host's default IPv4 route (from its facts)."""
    declared = parse_networks(networks)
    if name in declared:
        return str(declared[name].cidr)
    host = _host_name(hostvars_of_host) if isinstance(hostvars_of_host, t.Mapping) else '<unknown host>'
    default = _default_ipv4(hostvars_of_host) if isinstance(hostvars_of_host, t.Mapping) else {}
    if not default.get('address') or not default.get('netmask'):
        raise ValueError(f'the {name} network is not declared in {NETWORKS_VAR}, so it is the network of the default '
                         f'IPv4 route, and {host} has no default_ipv4 address and netmask facts (gather facts, or '
                         f'declare {NETWORKS_VAR}.{name}.cidr)')
    try:
        return str(ipaddress.ip_network(f'{default["address"]}/{default["netmask"]}', strict=False))
    except ValueError as err:
        raise ValueError(f'the default_ipv4 facts of {host} do not give a network ({err})') from None


def _explicit_addresses(hostvars_of_host: t.Mapping[str, t.Any], declared: dict[str, Network],
                        problems: list[str]) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The host's explicit addresses on declared networks that are IPv4 addresses (the others become problems)."""
    try:
        explicit = _host_mapping(hostvars_of_host, ADDRESSES_VAR)
    except ValueError:
        return []  # reported with the unknown names
    found = []
    for name, value in explicit.items():
        if name in declared:
            try:
                found.append((name, _ipv4_address(value, f'{ADDRESSES_VAR}.{name} of {_host_name(hostvars_of_host)}')))
            except ValueError as err:
                problems.append(str(err))
    return found


def _group_hosts(groups: t.Mapping[str, t.Any], names: t.Iterable[str]) -> list[str]:
    """The hosts of the groups, in inventory order, each once (a missing group has none)."""
    hosts: dict[str, None] = {}
    for group in names:
        for host in groups.get(group) or ():
            hosts.setdefault(str(host), None)
    return list(hosts)


def _refuse(problems: list[str]) -> None:
    problems = list(dict.fromkeys(problems))
    if problems:
        shown = problems[:_MAX_PROBLEMS]
        more = len(problems) - len(shown)
        raise ValueError('; '.join(shown) + (f'; and {more} more' if more else ''))


def network_plan(hostvars: t.Mapping[str, t.Any], groups: t.Mapping[str, t.Any], networks: t.Any = None,
                 resolve: t.Optional[t.Iterable[str]] = None) -> dict[str, t.Any]:
    """Check the whole inventory against ``cluster_networks``; return every host's address on each of its networks.

    Returns ``{'hosts': {host: {network: address}}, 'networks': {name: cidr}}``; ``networks`` holds the declared
    networks only (an undeclared management network has one CIDR per host, see ``network_cidr``). A management network
    that is not declared still gets an address for every host of the ``cluster`` group (its default IPv4 address).
    ``resolve`` names the networks whose hosts must have an address (default: management and every declared one);
    the others are checked without facts: their CIDRs, and the explicit addresses hosts give for them.
    """
    declared = parse_networks(networks)
    if not isinstance(hostvars, t.Mapping) or not isinstance(groups, t.Mapping):
        raise ValueError('cluster_network_plan needs hostvars and groups (both mappings)')
    if resolve is not None and (isinstance(resolve, (str, t.Mapping)) or not isinstance(resolve, t.Iterable)):
        raise ValueError(f'resolve must be a list of network names, got {resolve!r}')
    problems: list[str] = []
    known = set(declared) | {MANAGEMENT}
    for host in _group_hosts(groups, ['all']) or [str(name) for name in hostvars]:
        hostvars_of_host = hostvars[host] if host in hostvars else {}
        for variable in (ADDRESSES_VAR, INTERFACES_VAR):
            try:
                unknown = sorted(str(key) for key in set(_host_mapping(hostvars_of_host, variable)) - known)
            except ValueError as err:
                problems.append(str(err))
                continue
            if unknown:
                problems.append(f'{variable} of {host} names networks {NETWORKS_VAR} does not declare: '
                                f'{", ".join(unknown)} (declared: {", ".join(sorted(known))})')
        for name, explicit in _explicit_addresses(hostvars_of_host, declared, problems):
            if explicit not in declared[name].cidr:
                problems.append(f'{ADDRESSES_VAR}.{name} of {host} is {explicit}, outside {NETWORKS_VAR}.{name} '
                                f'({declared[name].cidr})')
    order = [MANAGEMENT] + [name for name in declared if name != MANAGEMENT]
    if resolve is not None:
        resolve = {str(name) for name in resolve}
        if resolve - known:
            problems.append(f'resolve names networks {NETWORKS_VAR} does not declare: {", ".join(sorted(resolve - known))}')
        order = [name for name in order if name in resolve]
    hosts: dict[str, dict[str, str]] = {}
    for name in order:
        members = _group_hosts(groups, declared[name].groups if name in declared else DEFAULT_GROUPS[MANAGEMENT])
        owners: dict[str, str] = {}
        for host in members:
            try:
                value = _address(hostvars[host] if host in hostvars else {'inventory_hostname': host}, name, declared)
            except ValueError as err:
                problems.append(str(err))
                continue
            if value in owners:
                problems.append(f'{owners[value]} and {host} have the same address {value} on the {name} network')
            owners.setdefault(value, host)
            hosts.setdefault(host, {})[name] = value
    _refuse(problems)
    return {'hosts': hosts, 'networks': {name: str(network.cidr) for name, network in declared.items()}}


def cidr_problems(values: t.Any, variable: str) -> list[str]:
    """What is wrong with a list of IPv4/IPv6 networks (CIDR notation; a bare address is one host), naming each item."""
    if isinstance(values, (str, bytes, t.Mapping)) or not isinstance(values, t.Iterable):
        return [f'{variable} must be a list of networks in CIDR notation such as 10.0.0.0/8, got {values!r}']
    problems = []
    for position, value in enumerate(values):
        try:
            normalized_cidr(value)
        except ValueError as err:
            problems.append(f'{variable}[{position}] is not a network in CIDR notation such as 10.0.0.0/8 '
                            f'({err}): {value!r}')
    return problems


def normalized_cidr(value: t.Any) -> str:
    """The network as nftables and the other files get it (10.0.0.5 -> 10.0.0.5/32); ValueError saying why not."""
    if not isinstance(value, str):
        raise ValueError('not a string')
    if '%' in value:
        # ipaddress takes fe80::1%eth0 (a scope id, any text after %), which no firewall rule can hold.
        raise ValueError('an IPv6 scope id (%...) has no place in a network')
    # Unstripped: a value with white space around it would be rendered as it is elsewhere.
    return str(ipaddress.ip_network(value, strict=True))


def normalized_cidrs(values: t.Any, variable: str) -> list[str]:
    """The networks of ``values`` in normalised CIDR form; ValueError naming every item cidr_problems refuses."""
    _refuse(cidr_problems(values, variable))
    return [normalized_cidr(value) for value in values]


def address_in_networks(value: t.Any, networks: t.Any) -> bool:
    """Whether the IPv4 or IPv6 address (an IPv4-mapped IPv6 one counts as IPv4) lies in one of the networks."""
    try:
        parsed = ipaddress.ip_address(str(value).strip())
    except ValueError:
        raise ValueError(f'{value!r} is not an IP address') from None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped:
        parsed = parsed.ipv4_mapped
    problems = cidr_problems(networks, 'the networks')
    if problems:
        raise ValueError('; '.join(problems))
    return any(parsed in ipaddress.ip_network(network.strip()) for network in networks)
