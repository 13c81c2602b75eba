# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build slurm.conf node lines, gres.conf lines and cgroup.conf settings from per-host facts.

Pure Python with no Ansible import. Hosts with identical hardware collapse into one line whose
name is a compressed hostlist, so a 4,096-node cluster renders a handful of NodeName lines.
Bad input raises ``ValueError`` naming the group, host or field.
"""

from __future__ import annotations

import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _config_values
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog
from ansible_collections.llmforge.cluster.plugins.module_utils._gpu_catalog import parse_gpu_count, parse_gpu_type
from ansible_collections.llmforge.cluster.plugins.module_utils._hostlist import compress, expand

# Order of the hardware keys on a NodeName line, as `slurmd -C` prints them.
NODE_KEYS = ('CPUs', 'Boards', 'SocketsPerBoard', 'Sockets', 'CoresPerSocket', 'ThreadsPerCore',
             'RealMemory', 'Gres', 'Features', 'Weight', 'State')
GRES_AUTODETECT_MODES = ('nvml', 'nvidia', 'off')
# What topology.conf accepts in a switch name without quoting.
SWITCH_NAME = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]*$')


def node_group_members(node_groups: t.Sequence[str], groups: t.Mapping[str, t.Sequence[str]]) -> dict[str, str]:
    """Map each compute host to its node group; an empty/missing group or a host in two groups is an error."""
    if not node_groups:
        raise ValueError('slurm_common_node_groups is empty: name at least one inventory group of compute nodes')
    if len(set(node_groups)) != len(node_groups):
        raise ValueError(f"slurm_common_node_groups lists a group twice: {', '.join(node_groups)}")
    member_of: dict[str, str] = {}
    for group in node_groups:
        hosts = groups.get(group)
        if not hosts:
            raise ValueError(f"node group '{group}' (slurm_common_node_groups) has no hosts in the inventory")
        for host in hosts:
            if host in member_of:
                raise ValueError(f"host '{host}' is in two node groups, '{member_of[host]}' and '{group}': "
                                 'a Slurm node must belong to exactly one')
            member_of[host] = group
    return member_of


def _require_int(host: str, facts: t.Mapping[str, t.Any], key: str) -> int:
    if not isinstance(facts, t.Mapping):
        raise ValueError(f"host '{host}': its facts must be a mapping, got {type(facts).__name__}; gather facts on it first")
    value = facts.get(key)
    if value is None or isinstance(value, bool):
        raise ValueError(f"host '{host}': fact '{key}' is missing; gather facts on it first (is it reachable?)")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"host '{host}': fact '{key}' is not a number: {value!r}") from None


def parse_real_memory_percent(value: t.Any) -> int:
    """slurm_controller_real_memory_percent as an int between 50 and 100."""
    if isinstance(value, bool):
        raise ValueError(f'slurm_controller_real_memory_percent must be a whole number, got {value!r}')
    try:
        percent = int(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f'slurm_controller_real_memory_percent must be a whole number, got {value!r}') from None
    if not 50 <= percent <= 100:
        raise ValueError(f'slurm_controller_real_memory_percent must be between 50 and 100, got {percent}')
    return percent


def node_gpus(host: str, values: t.Mapping[str, t.Any], device_paths: t.Sequence[str]) -> tuple[t.Optional[str], int]:
    """(gpu_type, gpu_count) of a node as slurm.conf and gres.conf describe it: from the GPU catalog (gpu_profile, or
    gpu_type/gpu_count as set; see _gpu_catalog.node_gpus), the number of its device files where the inventory says
    nothing. ValueError naming the variable and the host when they disagree."""
    gpus = _gpu_catalog.node_gpus(host, values)
    count = gpus['gpu_count']
    return gpus['gpu_type'], len(device_paths) if count is None else count


def gres_string(host: str, gpu_count: t.Any, gpu_type: t.Any) -> t.Optional[str]:
    """`gpu:<type>:<count>`, `gpu:<count>` or None for a node without GPUs."""
    count = parse_gpu_count(host, gpu_count)
    if count == 0:
        return None
    gpu_type = parse_gpu_type(host, gpu_type)
    return f'gpu:{count}' if gpu_type is None else f'gpu:{gpu_type}:{count}'


def node_hardware(host: str, facts: t.Mapping[str, t.Any], real_memory_percent: t.Any,
                  gres: t.Optional[str], extra: t.Optional[t.Mapping[str, t.Any]] = None) -> dict[str, t.Any]:
    """One node's NodeName attributes from its Ansible hardware facts (un-prefixed fact names)."""
    real_memory_percent = parse_real_memory_percent(real_memory_percent)
    if extra is not None and not isinstance(extra, t.Mapping):
        raise ValueError(f"host '{host}': slurm_node_config must be a dictionary of NodeName attributes, "
                         f'got {type(extra).__name__}')
    sockets = _require_int(host, facts, 'processor_count')
    cores = _require_int(host, facts, 'processor_cores')
    threads = _require_int(host, facts, 'processor_threads_per_core')
    memtotal_mb = _require_int(host, facts, 'memtotal_mb')
    attrs: dict[str, t.Any] = {
        'CPUs': sockets * cores * threads,
        'Sockets': sockets,
        'CoresPerSocket': cores,
        'ThreadsPerCore': threads,
        # Below physical memory, or slurmd registers less than configured and the node drains.
        'RealMemory': memtotal_mb * real_memory_percent // 100,
    }
    if gres:
        attrs['Gres'] = gres
    problems = node_config_problems(host, extra)
    if problems:
        raise ValueError('; '.join(problems))
    for key, value in (extra or {}).items():
        if key == 'NodeName':
            raise ValueError(f"host '{host}': slurm_node_config may not set NodeName")
        attrs[key] = value
    attrs.setdefault('State', 'UNKNOWN')
    return attrs


def node_config_problems(host: str, extra: t.Any) -> list[str]:
    """What in a host's slurm_node_config would break out of its NodeName line: keys that are not identifiers,
    values with white space, '#' or control characters."""
    if not isinstance(extra, t.Mapping):
        return []
    return _config_values.problems({'slurm_node_config': extra}, syntax='slurm', keys=True, host=f"host '{host}'")


def _line_key(attrs: t.Mapping[str, t.Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, format_value(v)) for k, v in attrs.items()))


def collapse(records: t.Mapping[str, t.Mapping[str, t.Any]]) -> list[dict[str, t.Any]]:
    """Group hosts whose attributes are identical; each result has 'hosts' (a hostlist) and 'attrs'."""
    by_attrs: dict[tuple[tuple[str, str], ...], list[str]] = {}
    first_attrs: dict[tuple[tuple[str, str], ...], t.Mapping[str, t.Any]] = {}
    for host, attrs in records.items():
        key = _line_key(attrs)
        by_attrs.setdefault(key, []).append(host)
        first_attrs.setdefault(key, attrs)
    lines = [{'hosts': compress(hosts), 'attrs': dict(first_attrs[key])} for key, hosts in by_attrs.items()]
    return sorted(lines, key=lambda line: line['hosts'])


def format_value(value: t.Any) -> str:
    """slurm.conf spelling of a value: YES/NO for booleans, commas between list items."""
    if isinstance(value, bool):
        return 'YES' if value else 'NO'
    if isinstance(value, (list, tuple)):
        return ','.join(format_value(v) for v in value)
    return str(value)


def render_line(keyword: str, name: str, attrs: t.Mapping[str, t.Any], order: t.Sequence[str] = NODE_KEYS) -> str:
    """`Keyword=name K=V ...` with known keys in `order` first, then the rest alphabetically."""
    # The last guard: whatever the caller checked, nothing here may add a pair, a line or a comment to the file.
    problems = (_config_values.value_problems(keyword, name, 'slurm')
                + _config_values.value_problems(f'{keyword}={name}', dict(attrs), 'slurm', keys=True))
    if problems:
        raise ValueError('; '.join(problems))
    known = [k for k in order if k in attrs]
    rest = sorted(k for k in attrs if k not in order)
    parts = [f'{keyword}={name}'] + [f'{k}={format_value(attrs[k])}' for k in known + rest]
    return ' '.join(parts)


def gres_attrs(host: str, autodetect: t.Optional[str], gpu_type: t.Any, device_paths: t.Sequence[str],
               gpu_count: t.Any) -> t.Optional[dict[str, t.Any]]:
    """gres.conf attributes for one node: AutoDetect, or explicit device files.

    The device files are the node's own when it has at least `gpu_count` of them, else /dev/nvidia0..N-1: slurm.conf
    and gres.conf describe the hardware the inventory declares, not the state of a node that still lacks its driver.
    """
    gpu_count = parse_gpu_count(host, gpu_count)
    if gpu_count == 0:
        return None
    if autodetect and autodetect != 'off':
        if autodetect not in GRES_AUTODETECT_MODES:
            raise ValueError(f"host '{host}': unknown GRES autodetect mode {autodetect!r}")
        return {'AutoDetect': autodetect}
    if len(device_paths) < gpu_count:
        # A bare node (driver not installed yet) or one with a lost GPU: the inventory says what it has. The
        # node itself refuses to start slurmd while its devices disagree (slurm_node's preflight).
        devices = [f'/dev/nvidia{index}' for index in range(gpu_count)]
    else:
        devices = sorted(device_paths, key=lambda p: int(p.rsplit('nvidia', 1)[-1]))[:gpu_count]
    attrs: dict[str, t.Any] = {'Name': 'gpu'}
    if gpu_type not in (None, ''):
        attrs['Type'] = str(gpu_type)
    attrs['File'] = compress(devices)
    return attrs


def cgroup_constraints(node_cgroups: t.Mapping[str, t.Mapping[str, t.Any]]) -> dict[str, bool]:
    """Constrain cores, RAM and devices only where every node's cgroups allow it."""
    allowed = {'ConstrainCores': 'cores', 'ConstrainRAMSpace': 'memory', 'ConstrainDevices': 'devices'}
    if not isinstance(node_cgroups, t.Mapping):
        raise ValueError(f'the nodes\' cgroup facts must be a mapping of host to facts, got {type(node_cgroups).__name__}')
    for host, facts in node_cgroups.items():
        if not isinstance(facts, t.Mapping):
            raise ValueError(f"host '{host}': its cgroup facts must be a mapping, got {facts!r}")
    return {key: bool(node_cgroups) and all(cg.get(fact) is True for cg in node_cgroups.values())
            for key, fact in allowed.items()}


def _name_list(value: t.Any, where: str, what: str) -> list[str]:
    """A hostlist expression or a list of names (each may itself be a hostlist) as a flat list of names."""
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, t.Sequence) and all(isinstance(item, str) for item in value):
        items = list(value)
    else:
        raise ValueError(f'{where}: {what} must be a hostlist string or a list of names, got {value!r}')
    names: list[str] = []
    for item in items:
        try:
            names.extend(expand(item))
        except ValueError as err:
            raise ValueError(f'{where}: {what} {item!r} is not a valid hostlist: {err}') from None
    if not names:
        raise ValueError(f'{where}: {what} is empty')
    return names


def topology_lines(switches: t.Any, compute_hosts: t.Sequence[str],
                   varname: str = 'slurm_controller_topology_switches') -> list[str]:
    """topology.conf lines from an explicit tree: [{name, nodes} | {name, switches}].

    A leaf names its compute nodes (`nodes`, a hostlist), an upper switch its child switches (`switches`). Every
    compute host must sit under exactly one leaf, every node and child switch must exist, and the switches must
    form a forest (no cycles, one parent each), or Slurm's topology/tree would reject or misplace jobs.
    """
    if not isinstance(switches, t.Sequence) or isinstance(switches, str) or not switches:
        raise ValueError(f'{varname} must be a non-empty list of switches ({{name, nodes}} or {{name, switches}})')
    known_hosts = set(compute_hosts)
    names: dict[str, int] = {}
    leaf_of: dict[str, str] = {}
    parent_of: dict[str, str] = {}
    records: list[tuple[str, str, list[str]]] = []
    for index, switch in enumerate(switches):
        where = f'{varname}[{index}]'
        if not isinstance(switch, t.Mapping):
            raise ValueError(f'{where} must be a dict with name and nodes or switches, got {switch!r}')
        unknown = sorted(set(switch) - {'name', 'nodes', 'switches'})
        if unknown:
            raise ValueError(f"{where}: unknown key {', '.join(unknown)} (known: name, nodes, switches)")
        name = switch.get('name')
        if not isinstance(name, str) or not SWITCH_NAME.fullmatch(name):
            raise ValueError(f'{where}: name {name!r} must be letters, digits, ".", "-" or "_"')
        if name in names:
            raise ValueError(f"{where}: switch '{name}' is already defined at {varname}[{names[name]}]")
        names[name] = index
        where = f"{where} ('{name}')"
        if ('nodes' in switch) == ('switches' in switch):
            raise ValueError(f'{where}: give either nodes (a leaf) or switches (an upper switch), not '
                             + ('both' if 'nodes' in switch else 'neither'))
        if 'nodes' in switch:
            nodes = _name_list(switch['nodes'], where, 'nodes')
            strangers = [host for host in nodes if host not in known_hosts]
            if strangers:
                raise ValueError(f'{where}: {compress(strangers)} not compute nodes of this cluster '
                                 '(slurm_common_node_groups)')
            for host in nodes:
                if host in leaf_of:
                    raise ValueError(f"{where}: node {host} is already under switch '{leaf_of[host]}'")
                leaf_of[host] = name
            records.append(('Nodes', name, nodes))
        else:
            records.append(('Switches', name, _name_list(switch['switches'], where, 'switches')))
    for kind, name, children in records:
        if kind != 'Switches':
            continue
        for child in children:
            where = f"{varname}[{names[name]}] ('{name}')"
            if child not in names:
                raise ValueError(f"{where}: switch '{child}' is not defined in {varname}")
            if child in parent_of:
                raise ValueError(f"{where}: switch '{child}' is already under switch '{parent_of[child]}'")
            parent_of[child] = name
    for name in names:
        seen = {name}
        current = name
        while current in parent_of:
            current = parent_of[current]
            if current in seen:
                raise ValueError(f"{varname}: switch '{name}' is its own ancestor (a cycle)")
            seen.add(current)
    unplaced = [host for host in compute_hosts if host not in leaf_of]
    if unplaced:
        raise ValueError(f'{varname}: compute nodes {compress(unplaced)} are under no switch; '
                         'topology/tree could not place them in any multi-node job')
    return [f'SwitchName={name} {kind}={compress(children)}' for kind, name, children in records]
