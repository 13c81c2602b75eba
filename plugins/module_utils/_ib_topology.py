# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's topology.conf from an InfiniBand fabric as ``ibnetdiscover`` prints it.

Slurm's topology/tree plugin places a job under as few leaf switches as it can (``sbatch --switches=1``), so it must
know which nodes hang off which leaf and which switches join the leaves. ``ibnetdiscover`` (infiniband-diags)
walks the fabric and prints it; this module reads that text, finds the hosts and their rails, rebuilds the
switch tree of one rail and writes ``SwitchName=<leaf> Nodes=<hostlist>`` and ``SwitchName=<upper>
Switches=<list>`` lines. Standard library only, no Ansible import.

The format read is ibnetdiscover's default output (not ``-p``, ``-l`` or ``-g``). One block per node, blocks
separated by blank lines; ``key=value`` lines (vendid, devid, sysimgguid, switchguid, caguid, rtguid) and ``#``
comment lines are skipped::

    Switch	64 "S-fc6a1c0300e1b2a0"		# "MF0;leaf01:MQM9700/U1" enhanced port 0 lid 12 lmc 0
    [1]	"H-0002c903000a0b0c"[1](2c903000a0b0d) 		# "gpu001 mlx5_0" lid 14 4xNDR
    [33]	"S-fc6a1c0300e1b3a0"[1]		# "MF0;spine01:MQM9700/U1" lid 2 4xNDR

    Ca	1 "H-0002c903000a0b0c"		# "gpu001 mlx5_0"
    [1](2c903000a0b0d) 	"S-fc6a1c0300e1b2a0"[1]		# lid 14 lmc 0 "MF0;leaf01:MQM9700/U1" lid 12 4xNDR

A header names the node type (``Switch``, ``Ca``, ``Rt``), its port count and its id (``S-``/``H-``/``R-`` and
the node GUID); the comment holds the node description (NodeDescription, printed raw: it may hold spaces,
``#`` or quotes) and, for a switch, its LID. A port line links a local port (optionally ``[ext N]`` and a
port GUID in parentheses) to the remote node's id and port; its comment repeats the remote description. Routers
are kept but take no part in the tree. Several dumps may be concatenated (one per rail's subnet, from
``ibnetdiscover -C mlx5_<r>``): a node seen twice is one node. Lines of any other shape outside the format
(a warning printed into the output, a stray prompt) are skipped and reported; a port or header line that does
not parse is an error naming the line.

Hosts: a CA's description gives the host (``host_pattern``, default the first word, as rdma-ndd's ``%h %d``
writes ``gpu001 mlx5_0``) and the HCA name (the ``hca`` group of the pattern, else the last word after the
host's match). A host has a CA per rail; the rail of a CA is its HCA name when every host CA has one, else its
place among its host's CAs ordered by GUID (``0``, ``1``...). Slurm puts each node under one leaf, so the tree is
built from one rail. A CA linked to several switches is placed under the one on its lowest port.

Levels: every switch with a CA attached is a leaf (level 0); the other switches get their level by breadth-first
distance from the leaves. A rail's tree holds the leaves of its hosts and what is reached from them going up
one level at a time, so planes of other rails, even when joined at the top, stay out.

Switch names: the text between ``;`` and ``:`` of the Mellanox form ``MF0;<name>:<model>/U1``, else the whole
description; runs of characters other than letters, digits, ``-``, ``_`` and ``.`` become ``-`` and ends are
trimmed of ``-._``. A switch with no description, or whose name another switch shares, is named
``ib-<16 hex digits of its GUID>``.
"""

from __future__ import annotations

import collections
import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import whole_number

DEFAULT_HOST_PATTERN = r'^\s*(?P<host>\S+)'
KINDS = ('Switch', 'Ca', 'Rt')
# How much of a bad line an error message quotes.
QUOTED_LINE = 200
# How many warnings of one kind are spelled out.
MAX_LISTED = 10

# Port counts, ports and LIDs in ASCII digits, bounded: int() reads each (a longer one is no ibnetdiscover output).
_PORT_LINE = re.compile(
    r'\[([0-9]{1,9})\](?:\[ext ([0-9]{1,9})\])?(?:\(([0-9A-Fa-f]+)\))?\s*"([SHR])-([0-9A-Fa-f]{1,16})"\[([0-9]{1,9})\]'
    r'(?:\[ext ([0-9]{1,9})\])?(?:\(([0-9A-Fa-f]+)\))?\s*(?:#(.*))?$')
_HEADER_LINE = re.compile(r'(Switch|Ca|Rt)\s+([0-9]{1,9})\s+"([SHR])-([0-9A-Fa-f]{1,16})"\s*(?:#(.*))?$')
_HEADER_START = re.compile(r'(?:Switch|Ca|Rt)\s')
_HEADER_COMMENT = re.compile(r'\s*"(.*)"(?:\s+\w+\s+port\s+[0-9]+\s+lid\s+([0-9]{1,9})\s+lmc\s+[0-9]+)?\s*$')
_REMOTE_COMMENT = re.compile(r'"(.*)"\s+lid\s+([0-9]{1,9})(?![0-9])')
_LOCAL_LID = re.compile(r'\s*lid\s+([0-9]{1,9})(?![0-9])')
_KEY_VALUE = re.compile(r'[A-Za-z_]+=')
_PORTS_REPORT = re.compile(r'(?:CA|SW|RT)\s+[0-9]+\s+[0-9]+\s+0x[0-9a-f]+', re.IGNORECASE)
_ID_KIND = {'S': 'Switch', 'H': 'Ca', 'R': 'Rt'}
_MELLANOX_NAME = re.compile(r'[^;]*;([^:;]+):')
_UNSAFE_NAME_CHARS = re.compile(r'[^A-Za-z0-9._-]+')
_DIGITS = re.compile(r'([0-9]{1,30})')  # ASCII and bounded: int() reads every run
_HOSTLIST_RESERVED = re.compile(r'[\[\],\s]')


class IbnetdiscoverError(ValueError):
    """Text that is not ibnetdiscover's default output; the message names the line."""


class TopologyError(ValueError):
    """A fabric or a request the tree cannot be built from (unknown rail, no hosts, bad host_pattern)."""


class Link(t.NamedTuple):
    guid_a: str
    port_a: int
    guid_b: str
    port_b: int


class Node:
    """One switch, CA or router; `links` maps a local port to (remote GUID, remote port)."""

    __slots__ = ('kind', 'guid', 'ports', 'description', 'lid', 'line', 'links')

    def __init__(self, kind: str, guid: str, ports: int, description: str, lid: t.Optional[int], line: int) -> None:
        self.kind = kind
        self.guid = guid
        self.ports = ports
        self.description = description
        self.lid = lid
        self.line = line
        self.links: dict[int, tuple[str, int]] = {}

    def __repr__(self) -> str:
        return f'Node({self.kind} {self.guid} {self.description!r}, {len(self.links)} links)'


class Fabric:
    """The nodes by GUID (16 lower-case hex digits) and what reading them noticed."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.ignored_lines: list[int] = []
        self.warnings: list[str] = []

    def of_kind(self, kind: str) -> list[Node]:
        return [node for node in self.nodes.values() if node.kind == kind]

    @property
    def links(self) -> list[Link]:
        """Every link once, whichever end (or both) the dump printed it from."""
        found = []
        nodes = self.nodes
        for guid, node in nodes.items():
            for port, (remote, remote_port) in node.links.items():
                if (guid, port) < (remote, remote_port):
                    found.append(Link(guid, port, remote, remote_port))
                else:
                    other = nodes.get(remote)
                    if other is None or other.links.get(remote_port) != (guid, port):
                        found.append(Link(guid, port, remote, remote_port))
        return found

    def counts(self) -> dict[str, int]:
        kinds = collections.Counter(node.kind for node in self.nodes.values())
        return {'switches': kinds['Switch'], 'cas': kinds['Ca'], 'routers': kinds['Rt'], 'links': len(self.links)}


# parsing -------------------------------------------------------------------

def _bad_line(number: int, line: str, reason: str) -> IbnetdiscoverError:
    shown = line if len(line) <= QUOTED_LINE else line[:QUOTED_LINE] + '...'
    return IbnetdiscoverError(f'ibnetdiscover output line {number}: {reason}: {shown!r}')


def _guid(digits: str) -> str:
    return digits.lower().zfill(16)


def parse(text: str) -> Fabric:
    """Read ibnetdiscover's default output; IbnetdiscoverError names the first line that does not fit."""
    if text.startswith('\ufeff'):
        text = text[1:]
    if '\r' in text:
        text = text.replace('\r\n', '\n').replace('\r', '\n')
    if not text.strip():
        raise IbnetdiscoverError('the ibnetdiscover output is empty: was the fabric reachable '
                                 '(an active port and a subnet manager)?')
    fabric = Fabric()
    nodes = fabric.nodes
    ignored = fabric.ignored_lines
    stubs: dict[str, tuple[str, str]] = {}
    current: t.Optional[Node] = None
    port_match = _PORT_LINE.match
    for number, line in enumerate(text.split('\n'), 1):
        first = line[:1]
        if first == '[':
            found = port_match(line)
            if found is None:
                raise _bad_line(number, line, 'a port line that is not [port] "X-guid"[port]')
            if current is None:
                raise _bad_line(number, line, 'a port line before any Switch, Ca or Rt line')
            port, _ext, _port_guid, kind, digits, remote_port, _rext, _rguid, comment = found.groups()
            remote = digits.lower()
            if len(remote) != 16:
                remote = remote.zfill(16)
            current.links[int(port)] = (remote, int(remote_port))
            if remote not in nodes and remote not in stubs:
                stubs[remote] = (kind, comment or '')
            if current.lid is None and current.kind != 'Switch' and comment:
                lid = _LOCAL_LID.match(comment)
                if lid:
                    current.lid = int(lid.group(1))
        elif first in 'SCR' and _HEADER_START.match(line):
            current = _header(fabric, number, line)
        elif not line.strip() or first == '#' or _KEY_VALUE.match(line):
            continue
        else:
            ignored.append(number)
    if not nodes:
        if any(_PORTS_REPORT.match(line) for line in text.split('\n', 50)[:50]):
            raise IbnetdiscoverError('this looks like the ports report of ibnetdiscover -p; only the default '
                                     'output (ibnetdiscover without options) is read')
        raise IbnetdiscoverError('no Switch, Ca or Rt block in the ibnetdiscover output')
    for guid, (kind, comment) in stubs.items():
        if guid not in nodes:
            found = _REMOTE_COMMENT.search(comment)
            description, lid = (found.group(1), int(found.group(2))) if found else ('', None)
            nodes[guid] = Node(_ID_KIND[kind], guid, 0, description, lid, 0)
            fabric.warnings.append(f'{_ID_KIND[kind]} {guid} ({description or "no description"}) is linked to '
                                   'but has no block of its own: the dump may be cut short')
    if ignored:
        listed = ', '.join(str(number) for number in ignored[:MAX_LISTED])
        more = f' and {len(ignored) - MAX_LISTED} more' if len(ignored) > MAX_LISTED else ''
        fabric.warnings.append(f'skipped {len(ignored)} line(s) that are not ibnetdiscover output: line {listed}{more}')
    return fabric


def _header(fabric: Fabric, number: int, line: str) -> Node:
    found = _HEADER_LINE.match(line)
    if found is None:
        raise _bad_line(number, line, 'a node line that is not Switch|Ca|Rt <ports> "X-guid" # "description"')
    kind, ports, id_kind, digits, comment = found.groups()
    if _ID_KIND[id_kind] != kind:
        raise _bad_line(number, line, f'a {kind} line whose id starts with {id_kind}-')
    guid = _guid(digits)
    description, lid = '', None
    if comment:
        described = _HEADER_COMMENT.match(comment)
        if described:
            description = described.group(1)
            lid = int(described.group(2)) if described.group(2) else None
    node = fabric.nodes.get(guid)
    if node is None:
        node = fabric.nodes[guid] = Node(kind, guid, int(ports), description, lid, number)
    elif node.kind != kind:
        raise _bad_line(number, line, f'{guid} was a {node.kind} on line {node.line}')
    return node


# hosts and rails -------------------------------------------------------------

class HostCa(t.NamedTuple):
    host: str
    hca: t.Optional[str]
    guid: str
    node: Node


def natural_key(text: str) -> list:
    """gpu2 before gpu10, mlx5_2 before mlx5_10."""
    return [int(part) if index % 2 else part for index, part in enumerate(_DIGITS.split(text))]


def compile_host_pattern(pattern: t.Optional[str]) -> re.Pattern:
    if pattern is None:
        pattern = DEFAULT_HOST_PATTERN
    try:
        compiled = re.compile(pattern)
    except re.error as err:
        raise TopologyError(f'host_pattern {pattern!r} is not a valid regular expression: {err}') from None
    if 'host' not in compiled.groupindex:
        raise TopologyError(f'host_pattern {pattern!r} has no named group "host", as in (?P<host>...)')
    return compiled


def host_cas(fabric: Fabric, pattern: re.Pattern, warnings: list[str]) -> list[HostCa]:
    """The CAs whose description names a host, with the HCA name when the description gives one."""
    found = []
    unmatched = []
    bad_names = []
    has_hca_group = 'hca' in pattern.groupindex
    for node in fabric.nodes.values():
        if node.kind != 'Ca':
            continue
        match = pattern.search(node.description)
        host = match.group('host') if match else None
        if not host:
            unmatched.append(node)
            continue
        if _HOSTLIST_RESERVED.search(host):
            bad_names.append(host)
            continue
        if has_hca_group:
            hca = match.group('hca') or None
        else:
            rest = node.description[match.end():].split()
            hca = rest[-1] if rest else None
        found.append(HostCa(host, hca, node.guid, node))
    if unmatched:
        listed = ', '.join(f'{node.guid} ({node.description!r})' for node in unmatched[:MAX_LISTED])
        warnings.append(f'{len(unmatched)} CA(s) whose description host_pattern does not match are not hosts: '
                        f'{listed}')
    if bad_names:
        warnings.append(f'{len(bad_names)} host name(s) with characters a Slurm host list cannot hold are left '
                        f'out: {", ".join(sorted(set(bad_names))[:MAX_LISTED])}')
    return found


def split_rails(cas: list[HostCa]) -> dict[str, list[HostCa]]:
    """Rail name -> its CAs, in rail order: HCA names when every CA has one, else the GUID order per host."""
    rails: dict[str, list[HostCa]] = {}
    if cas and all(ca.hca for ca in cas):
        for ca in cas:
            rails.setdefault(t.cast(str, ca.hca), []).append(ca)
    else:
        per_host: dict[str, list[HostCa]] = {}
        for ca in cas:
            per_host.setdefault(ca.host, []).append(ca)
        for host_cas_ in per_host.values():
            for index, ca in enumerate(sorted(host_cas_, key=lambda ca: ca.guid)):
                rails.setdefault(str(index), []).append(ca)
    return {name: rails[name] for name in sorted(rails, key=natural_key)}


def choose_rail(rails: dict[str, list[HostCa]], rail: t.Union[str, int, None]) -> str:
    names = list(rails)
    seen = ', '.join(names) if names else 'none'
    if rail is None or rail == '':
        return names[0]
    if isinstance(rail, bool):
        raise TopologyError(f'rail must be an HCA name or an index, not {rail!r}; rails seen: {seen}')
    if isinstance(rail, str) and rail in rails:
        return rail
    if isinstance(rail, int) or whole_number(rail) is not None:
        index = int(rail)
        if 0 <= index < len(names):
            return names[index]
        raise TopologyError(f'rail index {index} is out of range: the fabric shows {len(names)} rail(s): {seen}')
    raise TopologyError(f'rail {rail!r} is not on the fabric; rails seen: {seen}')


# the tree ----------------------------------------------------------------------

class TreeSwitch:
    __slots__ = ('guid', 'name', 'description', 'level', 'hosts', 'children')

    def __init__(self, guid: str, name: str, description: str, level: int) -> None:
        self.guid = guid
        self.name = name
        self.description = description
        self.level = level
        self.hosts: set[str] = set()
        self.children: set[str] = set()


class Tree(t.NamedTuple):
    rail: str
    rails: list[str]
    switches: dict[str, TreeSwitch]
    hosts: set[str]
    warnings: list[str]


def switch_names(fabric: Fabric) -> dict[str, str]:
    """GUID -> the name topology.conf uses (see the module docstring for the rule)."""
    wanted = {}
    for node in fabric.nodes.values():
        if node.kind != 'Switch':
            continue
        description = node.description.strip()
        mellanox = _MELLANOX_NAME.match(description)
        if mellanox:
            description = mellanox.group(1)
        wanted[node.guid] = _UNSAFE_NAME_CHARS.sub('-', description).strip('-._')
    uses = collections.Counter(wanted.values())
    return {guid: name if name and uses[name] == 1 else f'ib-{guid}' for guid, name in wanted.items()}


def switch_levels(fabric: Fabric) -> dict[str, int]:
    """Breadth-first distance of every switch from the nearest switch that has a CA attached."""
    nodes = fabric.nodes
    levels: dict[str, int] = {}
    for node in nodes.values():
        if node.kind == 'Switch' and any(nodes[remote].kind == 'Ca' for remote, _port in node.links.values()):
            levels[node.guid] = 0
    frontier = list(levels)
    level = 0
    while frontier:
        level += 1
        following = []
        for guid in frontier:
            for remote, _port in nodes[guid].links.values():
                if remote not in levels and nodes[remote].kind == 'Switch':
                    levels[remote] = level
                    following.append(remote)
        frontier = following
    return levels


def build_tree(fabric: Fabric, host_pattern: t.Optional[str] = None, rail: t.Union[str, int, None] = None) -> Tree:
    """The switch tree of one rail: its leaves with their hosts and the switches above them."""
    warnings = list(fabric.warnings)
    pattern = compile_host_pattern(host_pattern)
    cas = host_cas(fabric, pattern, warnings)
    if not cas:
        raise TopologyError(f'no hosts found: no CA description on the fabric matches host_pattern '
                            f'{pattern.pattern!r} ({len(fabric.of_kind("Ca"))} CA(s) seen)')
    rails = split_rails(cas)
    chosen = choose_rail(rails, rail)
    nodes = fabric.nodes
    names = switch_names(fabric)
    levels = switch_levels(fabric)
    switches: dict[str, TreeSwitch] = {}
    placed: dict[str, HostCa] = {}
    unlinked = []
    for ca in sorted(rails[chosen], key=lambda ca: ca.guid):
        if ca.host in placed:
            warnings.append(f'host {ca.host} has two CAs on rail {chosen} ({placed[ca.host].guid} and {ca.guid}); '
                            f'{placed[ca.host].guid} places it')
            continue
        leaf = next((remote for _port, (remote, _rport) in sorted(ca.node.links.items())
                     if nodes[remote].kind == 'Switch'), None)
        if leaf is None:
            unlinked.append(ca.host)
            continue
        placed[ca.host] = ca
        if leaf not in switches:
            switches[leaf] = TreeSwitch(leaf, names[leaf], nodes[leaf].description, 0)
        switches[leaf].hosts.add(ca.host)
    if unlinked:
        warnings.append(f'{len(unlinked)} host(s) whose rail {chosen} CA is linked to no switch are left out: '
                        f'{", ".join(sorted(unlinked, key=natural_key)[:MAX_LISTED])}')
    frontier = list(switches)
    while frontier:
        following = []
        for guid in frontier:
            up = levels.get(guid, 0) + 1
            for remote, _port in nodes[guid].links.values():
                if levels.get(remote) != up or nodes[remote].kind != 'Switch':
                    continue
                parent = switches.get(remote)
                if parent is None:
                    parent = switches[remote] = TreeSwitch(remote, names[remote], nodes[remote].description, up)
                    following.append(remote)
                parent.children.add(guid)
        frontier = following
    return Tree(chosen, list(rails), switches, set(placed), warnings)


# topology.conf -------------------------------------------------------------------

def _pruned(tree: Tree, inventory: t.Optional[set[str]]) -> dict[str, TreeSwitch]:
    """The switches left once hosts outside the inventory, and switches left empty, are dropped."""
    kept: dict[str, TreeSwitch] = {}
    for guid, switch in sorted(tree.switches.items(), key=lambda item: item[1].level):
        copy = TreeSwitch(guid, switch.name, switch.description, switch.level)
        if switch.level == 0:
            copy.hosts = switch.hosts if inventory is None else switch.hosts & inventory
            if copy.hosts:
                kept[guid] = copy
        else:
            copy.children = {child for child in switch.children if child in kept}
            if copy.children:
                kept[guid] = copy
    return kept


def _uncovered_warning(kept: dict[str, TreeSwitch]) -> t.Optional[str]:
    """Slurm wants one switch above every node; say so when the tree has none."""
    leaves_below: dict[str, frozenset[str]] = {}
    for guid, switch in sorted(kept.items(), key=lambda item: item[1].level):
        if switch.level == 0:
            leaves_below[guid] = frozenset((guid,))
        else:
            leaves_below[guid] = frozenset().union(*(leaves_below[child] for child in switch.children))
    every_leaf = frozenset(guid for guid, switch in kept.items() if switch.level == 0)
    if len(every_leaf) <= 1 or any(below == every_leaf for below in leaves_below.values()):
        return None
    tops = [switch.name for guid, switch in kept.items()
            if not any(guid in other.children for other in kept.values())]
    tops.sort(key=natural_key)
    return (f'no switch of the tree is above all its {len(every_leaf)} leaves (top switches: '
            f'{", ".join(tops[:MAX_LISTED])}): Slurm cannot place one job across them')


def topology_conf_lines(tree: Tree, hosts: t.Optional[t.Iterable[str]] = None) -> dict[str, t.Any]:
    """topology.conf lines for the tree, leaves first, then each level up, by name within a level.

    With `hosts` (the inventory) only those hosts appear in Nodes=; leaves left empty are dropped and so are the
    switches above them left without children.
    """
    inventory = None if hosts is None else set(hosts)
    kept = _pruned(tree, inventory)
    order = sorted(kept.values(), key=lambda switch: (switch.level, natural_key(switch.name), switch.guid))
    lines = []
    switches = []
    for switch in order:
        host_names = sorted(switch.hosts, key=natural_key)
        child_names = sorted((kept[child].name for child in switch.children), key=natural_key)
        if switch.level == 0:
            lines.append(f'SwitchName={switch.name} Nodes={hostlist.compress(host_names)}')
        else:
            lines.append(f'SwitchName={switch.name} Switches={hostlist.compress(child_names)}')
        switches.append({'guid': f'0x{switch.guid}', 'name': switch.name, 'description': switch.description,
                         'level': switch.level, 'hosts': host_names, 'switches': child_names})
    warnings = list(tree.warnings)
    uncovered = _uncovered_warning(kept)
    if uncovered:
        warnings.append(uncovered)
    if inventory is not None and not lines:
        warnings.append(f'none of the {len(inventory)} inventory host(s) has a CA on rail {tree.rail}: '
                        'topology.conf would be empty')
    if inventory is None:
        missing: list[str] = []
        extra: list[str] = []
    else:
        missing = sorted(inventory - tree.hosts, key=natural_key)
        extra = sorted(tree.hosts - inventory, key=natural_key)
    return {'topology_conf': lines, 'switches': switches, 'hosts_missing_from_fabric': missing,
            'fabric_hosts_not_in_inventory': extra, 'rail': tree.rail, 'rails': tree.rails, 'warnings': warnings}


def analyse(text: str, hosts: t.Optional[t.Iterable[str]] = None, host_pattern: t.Optional[str] = None,
            rail: t.Union[str, int, None] = None) -> dict[str, t.Any]:
    """Everything the module returns, from ibnetdiscover's output."""
    fabric = parse(text)
    result = topology_conf_lines(build_tree(fabric, host_pattern, rail), hosts)
    result['counts'] = fabric.counts()
    return result
