# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check and normalise the lustre_client role's LNet networks, Lustre mounts and striping settings.

Pure Python with no Ansible import; ``plugins/filter/lustre.py`` wraps these functions so a bad value
fails the play before anything changes, with a message naming the variable and the item.

LNet networks are written as LNet's ``networks`` module option writes them: ``<type><number>(<interfaces>)``,
e.g. ``o2ib0(ib0)``, ``o2ib1(ib1,ib2)`` (multi-rail) or ``tcp0(eth0)``; a missing number means 0.

A NID is ``<IPv4 address>@<type><number>``, e.g. ``10.0.0.1@o2ib`` or ``10.0.0.1@tcp0``. An MGS NID
string lists the MGS nodes separated by ``:`` (failover partners) and, within one node, its NIDs separated
by ``,`` (multi-rail): ``10.0.0.1@o2ib,10.1.0.1@tcp:10.0.0.2@o2ib,10.1.0.2@tcp``.
"""

from __future__ import annotations

import re
import typing as t

# LNet network types (LNDs) the role configures: InfiniBand (o2ib, ko2iblnd) and TCP (ksocklnd).
NETWORK_TYPES = ('o2ib', 'tcp')
DEFAULT_MOUNT_OPTIONS = ('_netdev', 'flock', 'noatime')
AUTOMOUNT_OPTION = 'x-systemd.automount'
# Lustre file system names are at most 8 characters (the MDT/OST target names are built from them).
FSNAME_MAX = 8
STRIPE_SIZE_UNIT = 64 * 1024

_NETWORK = re.compile(r'(?P<type>[a-z][a-z0-9]*?)(?P<number>[0-9]*)\((?P<interfaces>[^()]*)\)')
# Bounded numbers: int() refuses more than 4300 digits with its own ValueError.
_NET = re.compile(r'(?P<type>[a-z][a-z0-9]*?)(?P<number>[0-9]{0,10})')
_INTERFACE = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}')
_FSNAME = re.compile(r'[A-Za-z0-9_-]{1,%d}' % FSNAME_MAX)
_OPTION = re.compile(r'[A-Za-z0-9_.=/:+-]+')
_SIZE = re.compile(r'(?P<number>[0-9]{1,20})(?P<unit>[kKmMgG]?)')
_UNITS = {'': 1, 'k': 1024, 'm': 1024 ** 2, 'g': 1024 ** 3}
_UNIT_SAFE = re.compile(r'[A-Za-z0-9:_.]')


class LustreConfigError(ValueError):
    """A value the role cannot use; the message names the variable and the item."""


def parse_net(text: str, where: str) -> dict[str, t.Any]:
    """``o2ib`` / ``o2ib1`` / ``tcp0`` -> {'type', 'number', 'net'} with the number made explicit."""
    match = _NET.fullmatch(text)
    if not match or match.group('type') not in NETWORK_TYPES:
        raise LustreConfigError(
            f'{where}: {text!r} is not an LNet network: expected one of {", ".join(NETWORK_TYPES)} '
            'followed by an optional network number, e.g. o2ib, o2ib1, tcp0')
    number = int(match.group('number') or 0)
    return {'type': match.group('type'), 'number': number, 'net': f"{match.group('type')}{number}"}


def parse_network(item: t.Any, where: str) -> dict[str, t.Any]:
    """One lustre_client_lnet_networks item, ``o2ib0(ib0)``, as {'net', 'type', 'number', 'interfaces', 'spec'}."""
    if not isinstance(item, str):
        raise LustreConfigError(f'{where}: {item!r} is not a string such as "o2ib0(ib0)"')
    match = _NETWORK.fullmatch(item.strip())
    if not match:
        raise LustreConfigError(
            f'{where}: {item!r} is not written <network>(<interface>[,<interface>...]), e.g. "o2ib0(ib0)" or "tcp0(eth0)"')
    network = parse_net(match.group('type') + match.group('number'), where)
    interfaces = [name.strip() for name in match.group('interfaces').split(',')]
    bad = [name for name in interfaces if not _INTERFACE.fullmatch(name)]
    if bad or not interfaces:
        raise LustreConfigError(f'{where}: {item!r} names no valid network interface in its parentheses (got {bad or "none"})')
    if len(set(interfaces)) != len(interfaces):
        raise LustreConfigError(f'{where}: {item!r} names an interface twice')
    network['interfaces'] = interfaces
    network['spec'] = f"{network['net']}({','.join(interfaces)})"
    return network


def check_networks(items: t.Any, ipoib_interfaces: t.Optional[t.Iterable[str]] = None,
                   variable: str = 'lustre_client_lnet_networks',
                   ipoib_variable: str = 'infiniband_ipoib_networks') -> list[dict[str, t.Any]]:
    """Every LNet network, checked; o2ib ones must use an IPoIB interface of ipoib_interfaces when it is given."""
    if not isinstance(items, (list, tuple)) or not items:
        raise LustreConfigError(f'{variable} must be a non-empty list such as ["o2ib0(ib0)", "tcp0(eth0)"]; got {items!r}')
    networks: list[dict[str, t.Any]] = []
    used_interfaces: dict[str, str] = {}
    known = None if ipoib_interfaces is None else sorted(set(ipoib_interfaces))
    for index, item in enumerate(items):
        where = f'{variable}[{index}]'
        network = parse_network(item, where)
        if any(seen['net'] == network['net'] for seen in networks):
            raise LustreConfigError(f'{where}: {item!r} declares network {network["net"]} a second time; '
                                    'list all its interfaces in one item, e.g. o2ib0(ib0,ib1)')
        for interface in network['interfaces']:
            if interface in used_interfaces:
                raise LustreConfigError(f'{where}: {item!r} puts {interface} on {network["net"]}, but '
                                        f'{used_interfaces[interface]} already uses it; an interface belongs to one network')
            used_interfaces[interface] = network['net']
        if network['type'] == 'o2ib' and known is not None:
            missing = [name for name in network['interfaces'] if name not in known]
            if missing:
                raise LustreConfigError(
                    f'{where}: {item!r} names {", ".join(missing)}, which {ipoib_variable} does not configure on this host '
                    f'(its IPoIB interfaces: {", ".join(known) or "none"}); o2ib networks run over IPoIB interfaces')
        networks.append(network)
    return networks


def parse_nid(text: str, where: str) -> dict[str, t.Any]:
    """``10.0.0.1@o2ib`` -> {'address', 'type', 'number', 'net', 'nid'} (the canonical NID keeps the text as written)."""
    address, separator, net = text.strip().partition('@')
    if not separator:
        raise LustreConfigError(f'{where}: {text!r} is not a NID: expected <IPv4 address>@<network>, e.g. 10.0.0.1@o2ib')
    octets = address.split('.')
    if len(octets) != 4 or not all(octet.isascii() and octet.isdigit() and len(octet) <= 3 and int(octet) <= 255 for octet in octets):
        raise LustreConfigError(f'{where}: {text!r} is not a NID: {address!r} is not an IPv4 address')
    parsed = parse_net(net, where + f' ({text!r})')
    parsed.update(address=address, nid=f'{address}@{net}')
    return parsed


def parse_mgs_nids(text: str, where: str) -> list[list[dict[str, t.Any]]]:
    """An MGS NID string as a list of MGS nodes (``:`` failover), each a list of its NIDs (``,`` multi-rail)."""
    if not isinstance(text, str) or not text.strip():
        raise LustreConfigError(f'{where}: no MGS NID given, e.g. 10.0.0.1@o2ib')
    nodes = []
    for node in text.strip().split(':'):
        if not node:
            raise LustreConfigError(f'{where}: {text!r} has an empty MGS node between ":" separators')
        nids = node.split(',')
        if any(not nid for nid in nids):
            raise LustreConfigError(f'{where}: {text!r} has an empty NID between "," separators')
        nodes.append([parse_nid(nid, where) for nid in nids])
    return nodes


def stripe_size_bytes(value: t.Any, where: str) -> int:
    """``4M`` / ``1048576`` / ``64k`` -> bytes; Lustre wants a multiple of 64 KiB."""
    match = _SIZE.fullmatch(str(value).strip())
    if isinstance(value, bool) or not match:
        raise LustreConfigError(f'{where}: {value!r} is not a stripe size such as 1M, 4M or 4194304')
    size = int(match.group('number')) * _UNITS[match.group('unit').lower()]
    if size <= 0 or size % STRIPE_SIZE_UNIT:
        raise LustreConfigError(f'{where}: stripe size {value!r} ({size} bytes) must be a positive multiple of 64K')
    return size


def systemd_unit_name(path: str, suffix: str) -> str:
    """The systemd unit name of a mount point, as ``systemd-escape --path --suffix=<suffix>`` writes it."""
    trimmed = '/'.join(part for part in path.split('/') if part)
    if not trimmed:
        return f'-.{suffix}'
    escaped = []
    for index, char in enumerate(trimmed):
        if char == '/':
            escaped.append('-')
        elif _UNIT_SAFE.fullmatch(char) and not (index == 0 and char == '.'):
            escaped.append(char)
        else:
            escaped.extend(f'\\x{byte:02x}' for byte in char.encode('utf-8'))
    return ''.join(escaped) + f'.{suffix}'


def mount_options(mount: dict[str, t.Any], where: str, default_options: t.Sequence[str], automount: bool,
                  filesystem: str = 'Lustre', error: type[ValueError] = LustreConfigError) -> list[str]:
    """A mount's fstab options (its own or the defaults), checked, with x-systemd.automount added when it is on.

    Shared with the other network file systems' roles (``filesystem`` and ``error`` name theirs).
    """
    options = mount.get('options', default_options)
    if options is None:
        options = default_options
    if not isinstance(options, (list, tuple)) or not all(isinstance(option, str) for option in options):
        raise error(f'{where}.options must be a list of mount options such as [_netdev, noatime]')
    bad = [option for option in options if not _OPTION.fullmatch(option)]
    if bad:
        raise error(f'{where}.options: {bad} are not mount options (one option per item, no spaces or commas)')
    chosen = list(dict.fromkeys(options))
    if mount.get('automount', automount) and AUTOMOUNT_OPTION not in chosen:
        chosen.append(AUTOMOUNT_OPTION)
    if '_netdev' not in chosen:
        # Without it systemd mounts the file system before the network is up, and boot hangs.
        raise error(f'{where}.options must include _netdev: {filesystem} needs the network before it can mount')
    return chosen


def check_mounts(mounts: t.Any, networks: t.Sequence[dict[str, t.Any]],
                 default_options: t.Sequence[str] = DEFAULT_MOUNT_OPTIONS, automount: bool = True,
                 variable: str = 'lustre_client_mounts',
                 networks_variable: str = 'lustre_client_lnet_networks') -> list[dict[str, t.Any]]:
    """Every mount, checked and completed with its fstab source (``<MGS NIDs>:/<fsname>``) and options."""
    if not isinstance(mounts, (list, tuple)):
        raise LustreConfigError(f'{variable} must be a list of {{fsname, mgs_nids, mount_point}} items; got {mounts!r}')
    declared_types = sorted({network['type'] for network in networks})
    result: list[dict[str, t.Any]] = []
    for index, mount in enumerate(mounts):
        where = f'{variable}[{index}]'
        if not isinstance(mount, dict):
            raise LustreConfigError(f'{where}: {mount!r} is not a mapping with fsname, mgs_nids and mount_point')
        unknown = sorted(set(mount) - {'fsname', 'mgs_nids', 'mount_point', 'options', 'automount'})
        if unknown:
            raise LustreConfigError(f'{where}: unknown keys {unknown}; allowed: fsname, mgs_nids, mount_point, options, automount')
        fsname = mount.get('fsname')
        if not isinstance(fsname, str) or not _FSNAME.fullmatch(fsname):
            raise LustreConfigError(f'{where}.fsname: {fsname!r} is not a Lustre file system name (1 to {FSNAME_MAX} '
                                    'letters, digits, _ or -)')
        mount_point = mount.get('mount_point')
        if not isinstance(mount_point, str) or not mount_point.startswith('/') or mount_point.rstrip('/') == '' \
                or re.search(r'\s', mount_point):
            raise LustreConfigError(f'{where}.mount_point: {mount_point!r} is not an absolute path other than / without spaces')
        mount_point = '/' + '/'.join(part for part in mount_point.split('/') if part)
        nids = mount.get('mgs_nids')
        if isinstance(nids, str):
            nids = [nids]
        if not isinstance(nids, (list, tuple)) or not nids or not all(isinstance(nid, str) for nid in nids):
            raise LustreConfigError(f'{where}.mgs_nids must be a non-empty list of MGS NID strings, e.g. ["10.0.0.1@o2ib"]')
        nids_text = ':'.join(nid.strip() for nid in nids)
        nodes = parse_mgs_nids(nids_text, f'{where}.mgs_nids')
        for node in nodes:
            for nid in node:
                if nid['type'] not in declared_types:
                    raise LustreConfigError(
                        f"{where}.mgs_nids: NID {nid['nid']} is on a {nid['type']} network, but {networks_variable} "
                        f"declares only {', '.join(declared_types)} networks: this client could not reach it")
        if any(seen['mount_point'] == mount_point for seen in result):
            raise LustreConfigError(f'{where}.mount_point: {mount_point} is mounted twice')
        options = mount_options(mount, where, default_options, automount)
        result.append({
            'fsname': fsname,
            'mount_point': mount_point,
            'mgs_nids': nids_text,
            'src': f'{nids_text}:/{fsname}',
            'options': options,
            'opts': ','.join(options),
            'automount': AUTOMOUNT_OPTION in options,
            'automount_unit': systemd_unit_name(mount_point, 'automount'),
        })
    return result


def check_stripe_dirs(items: t.Any, mounts: t.Sequence[dict[str, t.Any]], default_count: int = 4,
                      default_size: t.Any = '4M', variable: str = 'lustre_client_stripe_dirs') -> list[dict[str, t.Any]]:
    """Every striped directory, checked: inside a declared mount, with a stripe count and a stripe size."""
    if not isinstance(items, (list, tuple)):
        raise LustreConfigError(f'{variable} must be a list of {{path, stripe_count, stripe_size}} items; got {items!r}')
    result = []
    for index, item in enumerate(items):
        where = f'{variable}[{index}]'
        if not isinstance(item, dict) or not isinstance(item.get('path'), str):
            raise LustreConfigError(f'{where}: {item!r} is not a mapping with a path')
        path = '/' + '/'.join(part for part in item['path'].split('/') if part)
        owning = [mount for mount in mounts if path.startswith(mount['mount_point'] + '/')]
        if not item['path'].startswith('/') or not owning:
            raise LustreConfigError(f"{where}.path: {item['path']!r} is not below a mount point of lustre_client_mounts "
                                    f"({', '.join(mount['mount_point'] for mount in mounts) or 'none declared'})")
        count = item.get('stripe_count', default_count)
        if isinstance(count, bool) or not isinstance(count, int) or count < -1:
            raise LustreConfigError(f'{where}.stripe_count: {count!r} must be -1 (every OST), 0 (file system default) or a positive count')
        mode = str(item.get('mode', '1777'))
        if not re.fullmatch(r'0?[0-7]{3,4}', mode):
            raise LustreConfigError(f'{where}.mode: {mode!r} is not an octal mode such as "1777"')
        result.append({
            'path': path,
            'mount_point': max((mount['mount_point'] for mount in owning), key=len),
            'stripe_count': count,
            'stripe_size': stripe_size_bytes(item.get('stripe_size', default_size), f'{where}.stripe_size'),
            'owner': str(item.get('owner', 'root')),
            'group': str(item.get('group', 'root')),
            'mode': mode if len(mode) == 4 else '0' + mode,
        })
    return result


def lnet_conf_yaml(networks: t.Sequence[dict[str, t.Any]]) -> str:
    """The ``net:`` section of /etc/lnet.conf (``lnetctl import`` format) for the checked networks."""
    lines = ['net:']
    for network in networks:
        lines.append(f"    - net type: {network['net']}")
        lines.append('      local NI(s):')
        for interface in network['interfaces']:
            lines.append('        - interfaces:')
            lines.append(f'              0: {interface}')
    return '\n'.join(lines) + '\n'
