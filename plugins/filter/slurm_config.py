# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that render slurm.conf, gres.conf and cgroup.conf pieces from inventory and facts."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils, plugin_utils

cfg = plugin_utils('_slurm_config')
_config_values = plugin_utils('_config_values')
_hostlist = module_utils('_hostlist')


def _host_vars(hostvars: t.Mapping[str, t.Any], host: str) -> t.Mapping[str, t.Any]:
    try:
        return hostvars[host]
    except KeyError:
        raise ValueError(f"host '{host}' has no variables (is it in the inventory?)") from None


def _members(groups: t.Mapping[str, t.Sequence[str]], node_groups: t.Sequence[str]) -> dict[str, str]:
    if isinstance(node_groups, str) or not isinstance(node_groups, t.Sequence):
        raise ValueError(f'slurm_common_node_groups must be a list of inventory group names, got {node_groups!r}')
    return cfg.node_group_members(node_groups, groups)


def _gpus(host: str, hv: t.Mapping[str, t.Any]) -> tuple[t.Any, int]:
    """(gpu_type, gpu_count) of a node: derived from its gpu_profile through the GPU catalog (module_utils/_gpu_catalog)."""
    return cfg.node_gpus(host, hv, hv.get('slurm_common_gpu_devices') or [])


def _wrap(name: str, func: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    try:
        return func(*args)
    except ValueError as err:
        raise AnsibleFilterError(f'{name}: {err}') from err


def _node_lines(hostvars, groups, node_groups, real_memory_percent=95):
    records = {}
    for host in _members(groups, node_groups):
        hv = _host_vars(hostvars, host)
        gpu_type, gpu_count = _gpus(host, hv)
        gres = cfg.gres_string(host, gpu_count, gpu_type)
        records[host] = cfg.node_hardware(host, hv.get('ansible_facts') or {}, real_memory_percent, gres,
                                          hv.get('slurm_node_config'))
    return [cfg.render_line('NodeName', line['hosts'], line['attrs']) for line in cfg.collapse(records)]


def _node_config_problems(hostvars, groups, node_groups):
    if isinstance(node_groups, str) or not isinstance(node_groups, t.Sequence):
        raise ValueError(f'slurm_common_node_groups must be a list of inventory group names, got {node_groups!r}')
    # Every host of the groups that exist: empty or overlapping groups are slurm_node_lines' to refuse.
    hosts = dict.fromkeys(host for group in node_groups for host in groups.get(group) or [])
    return [problem for host in hosts
            for problem in cfg.node_config_problems(host, _host_vars(hostvars, host).get('slurm_node_config'))]


def _gres_lines(hostvars, groups, node_groups):
    records = {}
    for host in _members(groups, node_groups):
        hv = _host_vars(hostvars, host)
        gpu_type, gpu_count = _gpus(host, hv)
        attrs = cfg.gres_attrs(host, hv.get('slurm_common_gres_autodetect_resolved') or None, gpu_type,
                               hv.get('slurm_common_gpu_devices') or [], gpu_count)
        if attrs:
            records[host] = attrs
    order = ('AutoDetect', 'Name', 'Type', 'File', 'Cores')
    return [cfg.render_line('NodeName', line['hosts'], line['attrs'], order) for line in cfg.collapse(records)]


def _cgroup_constraints(hostvars, groups, node_groups):
    node_cgroups = {}
    for host in _members(groups, node_groups):
        cgroup = _host_vars(hostvars, host).get('slurm_common_cgroup')
        if not isinstance(cgroup, t.Mapping):
            raise ValueError(f"host '{host}': no cgroup facts (slurm_common_cgroup); run the node facts play first")
        node_cgroups[host] = cgroup
    return cfg.cgroup_constraints(node_cgroups)


def _partition_lines(partitions, groups, node_groups):
    members = _members(groups, node_groups)
    if not isinstance(partitions, t.Sequence) or isinstance(partitions, str) or not partitions:
        raise ValueError('slurm_controller_partitions must be a non-empty list of partitions')
    lines, defaults, names = [], [], set()
    for index, part in enumerate(partitions):
        if not isinstance(part, t.Mapping) or not part.get('name'):
            raise ValueError(f'slurm_controller_partitions[{index}] needs a name')
        name = str(part['name'])
        if name in names:
            raise ValueError(f"partition '{name}' is defined twice in slurm_controller_partitions")
        names.add(name)
        part_groups = part.get('groups') or []
        if isinstance(part_groups, str) or not isinstance(part_groups, t.Sequence):
            raise ValueError(f"partition '{name}': groups must be a list of node groups, got {part_groups!r}")
        if not isinstance(part.get('default', False), bool):
            raise ValueError(f"partition '{name}': default must be true or false, got {part.get('default')!r}")
        for group in part_groups:
            if group not in node_groups:
                raise ValueError(f"partition '{name}': group '{group}' is not one of slurm_common_node_groups "
                                 f"({', '.join(node_groups)})")
        hosts = [h for h, g in members.items() if g in part_groups] if part_groups else list(members)
        attrs: dict[str, t.Any] = {'Nodes': _hostlist.compress(hosts)}
        if part.get('default'):
            attrs['Default'] = True
            defaults.append(name)
        attrs.update(part.get('options') or {})
        lines.append(cfg.render_line('PartitionName', name, attrs, ('Nodes', 'Default', 'MaxTime', 'State')))
    if len(defaults) > 1:
        raise ValueError(f"partitions {', '.join(defaults)} are all marked default; Slurm allows one")
    return lines


def _topology_lines(switches, groups, node_groups):
    return cfg.topology_lines(switches, list(_members(groups, node_groups)))


def _conf_lines(mapping):
    if not isinstance(mapping, t.Mapping):
        raise ValueError(f'expected a dictionary of slurm.conf keys, got {type(mapping).__name__}')
    problems = _config_values.problems({'the settings': mapping}, syntax='slurm', keys=True)
    if problems:
        raise ValueError('; '.join(problems))
    return [f'{key}={cfg.format_value(value)}' for key, value in mapping.items() if not _is_empty(value)]


def _is_empty(value):
    """A value slurm.conf should not see: None, '', or an empty list/tuple/dict."""
    return value is None or value == '' or (isinstance(value, (list, tuple, dict)) and not value)


def slurm_node_lines(hostvars, groups, node_groups, real_memory_percent=95):
    """NodeName lines for every host of the node groups, identical hosts collapsed."""
    return _wrap('slurm_node_lines', _node_lines, hostvars, groups, node_groups, real_memory_percent)


def slurm_node_config_problems(hostvars, groups, node_groups):
    """What in each compute node's slurm_node_config would break out of its NodeName line, naming the host."""
    return _wrap('slurm_node_config_problems', _node_config_problems, hostvars, groups, node_groups)


def slurm_gres_lines(hostvars, groups, node_groups):
    """gres.conf lines: AutoDetect where the node resolved a mode, explicit /dev/nvidiaN files otherwise."""
    return _wrap('slurm_gres_lines', _gres_lines, hostvars, groups, node_groups)


def slurm_cgroup_constraints(hostvars, groups, node_groups):
    """ConstrainCores/RAMSpace/Devices booleans every node's cgroups allow."""
    return _wrap('slurm_cgroup_constraints', _cgroup_constraints, hostvars, groups, node_groups)


def slurm_partition_lines(partitions, groups, node_groups):
    """PartitionName lines from slurm_controller_partitions."""
    return _wrap('slurm_partition_lines', _partition_lines, partitions, groups, node_groups)


def slurm_topology_lines(switches, groups, node_groups):
    """topology.conf lines from an explicit switch tree (slurm_controller_topology_switches)."""
    return _wrap('slurm_topology_lines', _topology_lines, switches, groups, node_groups)


def slurm_conf_lines(mapping):
    """`Key=Value` lines from a dict, booleans as YES/NO, lists comma-joined, empty values left out."""
    return _wrap('slurm_conf_lines', _conf_lines, mapping)


class FilterModule:
    """Slurm configuration filters."""

    def filters(self):
        return {
            'slurm_node_lines': slurm_node_lines,
            'slurm_node_config_problems': slurm_node_config_problems,
            'slurm_gres_lines': slurm_gres_lines,
            'slurm_cgroup_constraints': slurm_cgroup_constraints,
            'slurm_partition_lines': slurm_partition_lines,
            'slurm_conf_lines': slurm_conf_lines,
            'slurm_topology_lines': slurm_topology_lines,
        }
