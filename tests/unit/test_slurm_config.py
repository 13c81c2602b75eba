# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the slurm.conf, gres.conf and cgroup.conf builders and the filters built on them."""

from __future__ import annotations

import random
import typing as t

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.slurm_config import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _slurm_config

FILTERS = FilterModule().filters()

# An 8-GPU HGX H200 node: 2 sockets x 56 cores x 2 threads, ~2 TiB of memory.
H200_FACTS = {'processor_count': 2, 'processor_cores': 56, 'processor_threads_per_core': 2, 'memtotal_mb': 2063731}
H200_LINE_TAIL = ('CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960544 Gres=gpu:h200:8 '
                  'State=UNKNOWN')
ALL_CGROUPS = {'version': 2, 'cores': True, 'memory': True, 'devices': True}


def devices(count: int) -> list[str]:
    """/dev/nvidia0.. in the lexicographic order the node facts play records them."""
    return sorted(f'/dev/nvidia{index}' for index in range(count))


def host_vars(facts: t.Optional[dict] = None, **overrides: t.Any) -> dict[str, t.Any]:
    """Hostvars of one H200 node, with any variable overridden or (as None) removed."""
    hv: dict[str, t.Any] = {
        'ansible_facts': dict(H200_FACTS, **(facts or {})),
        'gpu_type': 'h200',
        'gpu_count': 8,
        'slurm_common_gpu_devices': devices(8),
        'slurm_common_cgroup': dict(ALL_CGROUPS),
    }
    hv.update(overrides)
    return {key: value for key, value in hv.items() if value is not None}


def cluster(names: t.Iterable[str], **overrides: t.Any) -> dict[str, dict[str, t.Any]]:
    """Hostvars of identical nodes."""
    return {name: host_vars(**overrides) for name in names}


def gpu_names(count: int, width: int = 3) -> list[str]:
    return [f'gpu{number:0{width}d}' for number in range(1, count + 1)]


def filter_error(name: str, *args: t.Any) -> str:
    """Call a filter that must fail and return its message, checking the filter-name prefix."""
    with pytest.raises(AnsibleFilterError) as excinfo:
        FILTERS[name](*args)
    message = str(excinfo.value)
    assert message.startswith(f'{name}:')
    return message


# NodeName lines ------------------------------------------------------------

def test_identical_hosts_collapse_into_one_line():
    hostvars = cluster(gpu_names(16))
    lines = FILTERS['slurm_node_lines'](hostvars, {'gpu_nodes': list(hostvars)}, ['gpu_nodes'])
    assert lines == [f'NodeName=gpu[001-016] {H200_LINE_TAIL}']


def test_host_order_in_inventory_is_irrelevant():
    names = gpu_names(16)
    random.Random(7).shuffle(names)
    lines = FILTERS['slurm_node_lines'](cluster(names), {'gpu_nodes': names}, ['gpu_nodes'])
    assert lines == [f'NodeName=gpu[001-016] {H200_LINE_TAIL}']


def test_host_with_different_memory_gets_its_own_line():
    hostvars = cluster(gpu_names(16))
    hostvars['gpu016'] = host_vars({'memtotal_mb': 1031865})
    lines = FILTERS['slurm_node_lines'](hostvars, {'gpu_nodes': list(hostvars)}, ['gpu_nodes'])
    assert lines == [
        'NodeName=gpu016 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=980271 '
        'Gres=gpu:h200:8 State=UNKNOWN',
        f'NodeName=gpu[001-015] {H200_LINE_TAIL}',
    ]


def test_hosts_of_several_groups_with_the_same_hardware_share_a_line():
    hostvars = cluster(['gpu1', 'gpu2', 'gpu3', 'gpu4'])
    groups = {'rack_a': ['gpu1', 'gpu2'], 'rack_b': ['gpu3', 'gpu4']}
    lines = FILTERS['slurm_node_lines'](hostvars, groups, ['rack_a', 'rack_b'])
    assert lines == [f'NodeName=gpu[1-4] {H200_LINE_TAIL}']


def test_only_node_group_hosts_get_lines():
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars['login1'] = host_vars(gpu_count=0)
    groups = {'gpu_nodes': ['gpu1', 'gpu2'], 'login': ['login1']}
    assert FILTERS['slurm_node_lines'](hostvars, groups, ['gpu_nodes']) == [f'NodeName=gpu[1-2] {H200_LINE_TAIL}']


HARDWARE_CASES = [
    pytest.param({}, 95, 'CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960544', id='h200-default'),
    pytest.param({}, 100, 'CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=2063731', id='all-memory'),
    pytest.param({}, 50, 'CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1031865', id='half-memory'),
    pytest.param({'processor_count': 1, 'processor_cores': 64, 'processor_threads_per_core': 1, 'memtotal_mb': 515413},
                 95, 'CPUs=64 Sockets=1 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=489642', id='one-socket-no-smt'),
    pytest.param({'processor_count': '2', 'processor_cores': '48', 'processor_threads_per_core': '2'},
                 95, 'CPUs=192 Sockets=2 CoresPerSocket=48 ThreadsPerCore=2 RealMemory=1960544', id='string-facts'),
    pytest.param({'memtotal_mb': 99}, 95, 'CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=94',
                 id='memory-rounds-down'),
]


@pytest.mark.parametrize(('facts', 'percent', 'expected'), HARDWARE_CASES)
def test_node_hardware_line(facts, percent, expected):
    hostvars = {'gpu1': host_vars(facts, gpu_count=0)}
    lines = FILTERS['slurm_node_lines'](hostvars, {'gpu_nodes': ['gpu1']}, ['gpu_nodes'], percent)
    assert lines == [f'NodeName=gpu1 {expected} State=UNKNOWN']


def test_real_memory_percent_defaults_to_95():
    lines = FILTERS['slurm_node_lines']({'gpu1': host_vars()}, {'g': ['gpu1']}, ['g'])
    assert ' RealMemory=1960544 ' in lines[0]


GRES_CASES = [
    pytest.param({'gpu_type': 'h200', 'gpu_count': 8}, 'gpu:h200:8', id='typed'),
    pytest.param({'gpu_type': None, 'gpu_count': 8}, 'gpu:8', id='untyped'),
    pytest.param({'gpu_type': '', 'gpu_count': 4}, 'gpu:4', id='empty-type'),
    pytest.param({'gpu_type': 'a100_80g-sxm', 'gpu_count': 4}, 'gpu:a100_80g-sxm:4', id='type-with-dash-underscore'),
    pytest.param({'gpu_count': '8'}, 'gpu:h200:8', id='string-count'),
    pytest.param({'gpu_count': None, 'slurm_common_gpu_devices': devices(4)}, 'gpu:h200:4', id='count-from-devices'),
    pytest.param({'gpu_count': 2, 'slurm_common_gpu_devices': devices(8)}, 'gpu:h200:2', id='count-below-devices'),
]


@pytest.mark.parametrize(('overrides', 'gres'), GRES_CASES)
def test_node_line_gres(overrides, gres):
    lines = FILTERS['slurm_node_lines']({'gpu1': host_vars(**overrides)}, {'g': ['gpu1']}, ['g'])
    assert f' Gres={gres} ' in lines[0]


@pytest.mark.parametrize('overrides', [
    pytest.param({'gpu_count': 0}, id='zero-count'),
    pytest.param({'gpu_count': '0'}, id='zero-string'),
    pytest.param({'gpu_count': None, 'slurm_common_gpu_devices': None}, id='no-count-no-devices'),
    pytest.param({'gpu_count': None, 'slurm_common_gpu_devices': []}, id='no-count-empty-devices'),
])
def test_node_line_without_gpus_has_no_gres(overrides):
    lines = FILTERS['slurm_node_lines']({'cpu1': host_vars(**overrides)}, {'g': ['cpu1']}, ['g'])
    assert lines == ['NodeName=cpu1 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960544 '
                     'State=UNKNOWN']


def test_node_config_extras_appear_in_key_order():
    hv = host_vars(slurm_node_config={'Weight': 10, 'Features': ['h200', 'nvlink'], 'MemSpecLimit': 8192})
    lines = FILTERS['slurm_node_lines']({'gpu1': hv}, {'g': ['gpu1']}, ['g'])
    # Known keys in `slurmd -C` order, then State, then the rest alphabetically.
    assert lines == ['NodeName=gpu1 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960544 '
                     'Gres=gpu:h200:8 Features=h200,nvlink Weight=10 State=UNKNOWN MemSpecLimit=8192']


def test_node_config_can_override_state():
    hv = host_vars(slurm_node_config={'State': 'FUTURE'})
    assert FILTERS['slurm_node_lines']({'gpu1': hv}, {'g': ['gpu1']}, ['g'])[0].endswith(' State=FUTURE')


def test_node_config_extras_split_groups():
    hostvars = cluster(gpu_names(8))
    for name in ('gpu007', 'gpu008'):
        hostvars[name] = host_vars(slurm_node_config={'Features': 'spare', 'Weight': 100})
    lines = FILTERS['slurm_node_lines'](hostvars, {'g': list(hostvars)}, ['g'])
    assert lines == [
        f'NodeName=gpu[001-006] {H200_LINE_TAIL}',
        'NodeName=gpu[007-008] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960544 '
        'Gres=gpu:h200:8 Features=spare Weight=100 State=UNKNOWN',
    ]


def test_node_config_key_order_does_not_split_groups():
    hostvars = {'gpu1': host_vars(slurm_node_config={'Weight': 5, 'Features': 'a'}),
                'gpu2': host_vars(slurm_node_config={'Features': 'a', 'Weight': 5})}
    assert len(FILTERS['slurm_node_lines'](hostvars, {'g': ['gpu1', 'gpu2']}, ['g'])) == 1


def test_mixed_cluster_lines_are_sorted_by_hostlist():
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars.update(cluster(['cpu1', 'cpu2'], gpu_count=0))
    groups = {'gpu_nodes': ['gpu1', 'gpu2'], 'cpu_nodes': ['cpu1', 'cpu2']}
    lines = FILTERS['slurm_node_lines'](hostvars, groups, ['gpu_nodes', 'cpu_nodes'])
    assert [line.split()[0] for line in lines] == ['NodeName=cpu[1-2]', 'NodeName=gpu[1-2]']


NODE_LINE_ERRORS = [
    pytest.param({'gpu1': host_vars()}, {'g': []}, ['g'], ["node group 'g'", 'no hosts'], id='empty-group'),
    pytest.param({'gpu1': host_vars()}, {'g': ['gpu1']}, ['missing'], ["node group 'missing'", 'no hosts'],
                 id='group-not-in-inventory'),
    pytest.param({'gpu1': host_vars()}, {'g': ['gpu1']}, [], ['slurm_common_node_groups is empty'], id='no-groups'),
    pytest.param({'gpu1': host_vars()}, {'g': ['gpu1']}, 'g', ['must be a list', "'g'"], id='groups-as-string'),
    pytest.param({'gpu1': host_vars()}, {'g': ['gpu1']}, None, ['must be a list', 'None'], id='groups-none'),
    pytest.param(cluster(['gpu1', 'gpu2']), {'a': ['gpu1', 'gpu2'], 'b': ['gpu2']}, ['a', 'b'],
                 ["host 'gpu2'", 'two node groups', "'a'", "'b'"], id='host-in-two-groups'),
    pytest.param({'gpu1': host_vars()}, {'g': ['gpu1', 'gpu2']}, ['g'], ["host 'gpu2'", 'no variables'],
                 id='host-without-hostvars'),
]


@pytest.mark.parametrize(('hostvars', 'groups', 'node_groups', 'wanted'), NODE_LINE_ERRORS)
def test_node_lines_group_errors(hostvars, groups, node_groups, wanted):
    message = filter_error('slurm_node_lines', hostvars, groups, node_groups)
    for part in wanted:
        assert part in message


HOST_ERRORS = [
    pytest.param({'ansible_facts': None}, ["'processor_count'", 'missing'], id='no-facts-at-all'),
    pytest.param({'ansible_facts': {'processor_cores': 56, 'processor_threads_per_core': 2, 'memtotal_mb': 1}},
                 ["'processor_count'", 'missing'], id='no-sockets'),
    pytest.param({'ansible_facts': {'processor_count': 2, 'processor_threads_per_core': 2, 'memtotal_mb': 1}},
                 ["'processor_cores'", 'missing'], id='no-cores'),
    pytest.param({'ansible_facts': {'processor_count': 2, 'processor_cores': 56, 'memtotal_mb': 1}},
                 ["'processor_threads_per_core'", 'missing'], id='no-threads'),
    pytest.param({'ansible_facts': {'processor_count': 2, 'processor_cores': 56, 'processor_threads_per_core': 2}},
                 ["'memtotal_mb'", 'missing'], id='no-memory'),
    pytest.param({'ansible_facts': dict(H200_FACTS, memtotal_mb='lots')}, ["'memtotal_mb'", 'not a number', "'lots'"],
                 id='memory-not-a-number'),
    pytest.param({'ansible_facts': dict(H200_FACTS, processor_count=True)}, ["'processor_count'"], id='bool-fact'),
    pytest.param({'gpu_count': 'eight'}, ['gpu_count', 'whole number', "'eight'"], id='gpu-count-word'),
    pytest.param({'gpu_count': True}, ['gpu_count', 'whole number', 'True'], id='gpu-count-bool'),
    pytest.param({'gpu_count': -1}, ['gpu_count', 'negative', '-1'], id='gpu-count-negative'),
    pytest.param({'gpu_type': 'H200 SXM'}, ['gpu_type', "'H200 SXM'"], id='gpu-type-with-space'),
    pytest.param({'gpu_type': 'h200:141g'}, ['gpu_type', "'h200:141g'"], id='gpu-type-with-colon'),
    pytest.param({'slurm_node_config': {'NodeName': 'other'}}, ['slurm_node_config', 'NodeName'],
                 id='node-config-sets-nodename'),
]


@pytest.mark.parametrize(('overrides', 'wanted'), HOST_ERRORS)
def test_node_lines_host_errors(overrides, wanted):
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars['gpu2'].update(overrides)
    message = filter_error('slurm_node_lines', hostvars, {'g': ['gpu1', 'gpu2']}, ['g'])
    assert "host 'gpu2'" in message
    for part in wanted:
        assert part in message


@pytest.mark.parametrize('percent', [49, 101, 0, -95, 950])
def test_real_memory_percent_out_of_range(percent):
    message = filter_error('slurm_node_lines', {'gpu1': host_vars()}, {'g': ['gpu1']}, ['g'], percent)
    assert 'slurm_controller_real_memory_percent' in message
    assert str(percent) in message


def test_node_lines_error_keeps_the_cause():
    with pytest.raises(AnsibleFilterError) as excinfo:
        FILTERS['slurm_node_lines']({'gpu1': host_vars(gpu_count=-1)}, {'g': ['gpu1']}, ['g'])
    assert isinstance(excinfo.value.__cause__, ValueError)


# gres.conf lines -----------------------------------------------------------

def test_gres_explicit_device_files():
    hostvars = cluster(['gpu1', 'gpu2'])
    lines = FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1', 'gpu2']}, ['g'])
    assert lines == ['NodeName=gpu[1-2] Name=gpu Type=h200 File=/dev/nvidia[0-7]']


def test_gres_devices_sorted_numerically():
    scrambled = devices(8)
    random.Random(3).shuffle(scrambled)
    hostvars = {'gpu1': host_vars(slurm_common_gpu_devices=scrambled)}
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu Type=h200 File=/dev/nvidia[0-7]']


def test_gres_twelve_devices_past_nvidia9():
    # The facts play sorts as text: nvidia0, nvidia1, nvidia10, nvidia11, nvidia2, ...
    assert devices(12)[:4] == ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidia10', '/dev/nvidia11']
    hostvars = {'gpu1': host_vars(gpu_count=12, slurm_common_gpu_devices=devices(12))}
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu Type=h200 File=/dev/nvidia[0-11]']


def test_gres_uses_lowest_devices_when_count_is_below_devices_present():
    hostvars = {'gpu1': host_vars(gpu_count=4, slurm_common_gpu_devices=devices(12))}
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu Type=h200 File=/dev/nvidia[0-3]']


def test_gres_without_type():
    hostvars = {'gpu1': host_vars(gpu_type=None)}
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu File=/dev/nvidia[0-7]']


def test_gres_count_defaults_to_devices_present():
    hostvars = {'gpu1': host_vars(gpu_count=None, slurm_common_gpu_devices=devices(4))}
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu Type=h200 File=/dev/nvidia[0-3]']


@pytest.mark.parametrize(('mode', 'expected'), [
    pytest.param('nvml', 'AutoDetect=nvml', id='nvml'),
    pytest.param('nvidia', 'AutoDetect=nvidia', id='nvidia'),
    pytest.param('', 'Name=gpu Type=h200 File=/dev/nvidia[0-7]', id='empty-means-explicit'),
    pytest.param('off', 'Name=gpu Type=h200 File=/dev/nvidia[0-7]', id='off-means-explicit'),
])
def test_gres_autodetect(mode, expected):
    hostvars = cluster(['gpu1', 'gpu2'], slurm_common_gres_autodetect_resolved=mode)
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1', 'gpu2']}, ['g']) == [f'NodeName=gpu[1-2] {expected}']


def test_gres_autodetect_ignores_missing_device_files():
    hostvars = {'gpu1': host_vars(slurm_common_gres_autodetect_resolved='nvml', slurm_common_gpu_devices=[])}
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == ['NodeName=gpu1 AutoDetect=nvml']


def test_gres_mixed_autodetect_and_explicit_nodes_split():
    hostvars = cluster(['gpu1', 'gpu2', 'gpu3'])
    hostvars['gpu3']['slurm_common_gres_autodetect_resolved'] = 'nvml'
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1', 'gpu2', 'gpu3']}, ['g']) == [
        'NodeName=gpu3 AutoDetect=nvml',
        'NodeName=gpu[1-2] Name=gpu Type=h200 File=/dev/nvidia[0-7]',
    ]


def test_gres_nodes_without_gpus_have_no_line():
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars.update(cluster(['cpu1', 'cpu2'], gpu_count=0, slurm_common_gpu_devices=[]))
    groups = {'gpu_nodes': ['gpu1', 'gpu2'], 'cpu_nodes': ['cpu1', 'cpu2']}
    assert FILTERS['slurm_gres_lines'](hostvars, groups, ['gpu_nodes', 'cpu_nodes']) == [
        'NodeName=gpu[1-2] Name=gpu Type=h200 File=/dev/nvidia[0-7]']


def test_gres_no_gpus_anywhere_gives_no_lines():
    hostvars = cluster(['cpu1'], gpu_count=None, slurm_common_gpu_devices=[])
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['cpu1']}, ['g']) == []


@pytest.mark.parametrize(('overrides', 'wanted'), [
    pytest.param({'slurm_common_gres_autodetect_resolved': 'rsmi'}, ['autodetect', "'rsmi'"], id='unknown-autodetect'),
])
def test_gres_errors(overrides, wanted):
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars['gpu2'].update(overrides)
    message = filter_error('slurm_gres_lines', hostvars, {'g': ['gpu1', 'gpu2']}, ['g'])
    assert "host 'gpu2'" in message
    for part in wanted:
        assert part in message


@pytest.mark.parametrize('present', [0, 6], ids=['bare-node', 'fewer-devices'])
def test_gres_follows_the_inventory_on_nodes_without_all_their_devices(present):
    """A bare node (no driver yet) gets the gres.conf line its declared gpu_count gives; slurm_node checks devices."""
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars['gpu2']['slurm_common_gpu_devices'] = devices(present)
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1', 'gpu2']}, ['g']) == [
        'NodeName=gpu[1-2] Name=gpu Type=h200 File=/dev/nvidia[0-7]']


def test_gres_without_gpu_count_follows_the_devices():
    hostvars = cluster(['gpu1'], gpu_count=None, slurm_common_gpu_devices=devices(4))
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu Type=h200 File=/dev/nvidia[0-3]']


def test_gres_group_errors():
    message = filter_error('slurm_gres_lines', {'gpu1': host_vars()}, {'g': ['gpu1']}, 'g')
    assert 'must be a list' in message


# cgroup.conf constraints ---------------------------------------------------

def test_cgroup_all_allowed():
    hostvars = cluster(['gpu1', 'gpu2'])
    assert FILTERS['slurm_cgroup_constraints'](hostvars, {'g': ['gpu1', 'gpu2']}, ['g']) == {
        'ConstrainCores': True, 'ConstrainRAMSpace': True, 'ConstrainDevices': True}


@pytest.mark.parametrize(('cgroup', 'expected'), [
    pytest.param({'version': 2, 'cores': True, 'memory': True, 'devices': False},
                 {'ConstrainCores': True, 'ConstrainRAMSpace': True, 'ConstrainDevices': False}, id='no-devices'),
    pytest.param({'version': 1, 'cores': False, 'memory': True, 'devices': True},
                 {'ConstrainCores': False, 'ConstrainRAMSpace': True, 'ConstrainDevices': True}, id='no-cpuset'),
    pytest.param({'version': 1, 'cores': True, 'memory': False, 'devices': True},
                 {'ConstrainCores': True, 'ConstrainRAMSpace': False, 'ConstrainDevices': True}, id='no-memory'),
    pytest.param({'version': 2}, {'ConstrainCores': False, 'ConstrainRAMSpace': False, 'ConstrainDevices': False},
                 id='no-controllers-reported'),
])
def test_cgroup_one_node_turns_a_constraint_off_for_all(cgroup, expected):
    hostvars = cluster(gpu_names(16))
    hostvars['gpu009']['slurm_common_cgroup'] = cgroup
    assert FILTERS['slurm_cgroup_constraints'](hostvars, {'g': list(hostvars)}, ['g']) == expected


def test_cgroup_ignores_hosts_outside_node_groups():
    hostvars = cluster(['gpu1'])
    hostvars['login1'] = host_vars(slurm_common_cgroup={'version': 2, 'cores': False, 'memory': False,
                                                        'devices': False})
    groups = {'gpu_nodes': ['gpu1'], 'login': ['login1']}
    assert all(FILTERS['slurm_cgroup_constraints'](hostvars, groups, ['gpu_nodes']).values())


@pytest.mark.parametrize('cgroup', [
    pytest.param(None, id='missing'),
    pytest.param('v2', id='string'),
    pytest.param([True, True, True], id='list'),
])
def test_cgroup_missing_fact_names_the_host(cgroup):
    hostvars = cluster(['gpu1', 'gpu2'])
    hostvars['gpu2']['slurm_common_cgroup'] = cgroup
    message = filter_error('slurm_cgroup_constraints', hostvars, {'g': ['gpu1', 'gpu2']}, ['g'])
    assert "host 'gpu2'" in message
    assert 'slurm_common_cgroup' in message


def test_cgroup_constraints_pure_function_empty_is_all_false():
    assert _slurm_config.cgroup_constraints({}) == {
        'ConstrainCores': False, 'ConstrainRAMSpace': False, 'ConstrainDevices': False}


# partitions ----------------------------------------------------------------

PARTITION_GROUPS = {'gpu_nodes': gpu_names(16), 'cpu_nodes': ['cpu01', 'cpu02'], 'login': ['login1']}
NODE_GROUPS = ['gpu_nodes', 'cpu_nodes']
ROLE_DEFAULT_PARTITIONS = [{'name': 'gpu', 'default': True, 'options': {'MaxTime': 'INFINITE', 'State': 'UP'}}]


def test_role_default_partition_spans_all_node_groups():
    lines = FILTERS['slurm_partition_lines'](ROLE_DEFAULT_PARTITIONS, PARTITION_GROUPS, NODE_GROUPS)
    assert lines == ['PartitionName=gpu Nodes=cpu[01-02],gpu[001-016] Default=YES MaxTime=INFINITE State=UP']


def test_partitions_restricted_to_groups():
    partitions = [
        {'name': 'gpu', 'default': True, 'groups': ['gpu_nodes'], 'options': {'State': 'UP', 'MaxTime': 'INFINITE'}},
        {'name': 'cpu', 'groups': ['cpu_nodes'], 'options': {'MaxTime': '1-00:00:00'}},
        {'name': 'all', 'groups': ['cpu_nodes', 'gpu_nodes'], 'options': {'PriorityTier': 1, 'State': 'UP'}},
    ]
    assert FILTERS['slurm_partition_lines'](partitions, PARTITION_GROUPS, NODE_GROUPS) == [
        'PartitionName=gpu Nodes=gpu[001-016] Default=YES MaxTime=INFINITE State=UP',
        'PartitionName=cpu Nodes=cpu[01-02] MaxTime=1-00:00:00',
        'PartitionName=all Nodes=cpu[01-02],gpu[001-016] State=UP PriorityTier=1',
    ]


def test_partition_without_default_or_options():
    assert FILTERS['slurm_partition_lines']([{'name': 'debug', 'default': False}], PARTITION_GROUPS, NODE_GROUPS) == [
        'PartitionName=debug Nodes=cpu[01-02],gpu[001-016]']


def test_partition_option_booleans_and_lists():
    partitions = [{'name': 'gpu', 'options': {'ExclusiveUser': True, 'AllowGroups': ['ml', 'ops'], 'Hidden': False}}]
    assert FILTERS['slurm_partition_lines'](partitions, PARTITION_GROUPS, ['cpu_nodes']) == [
        'PartitionName=gpu Nodes=cpu[01-02] AllowGroups=ml,ops ExclusiveUser=YES Hidden=NO']


PARTITION_ERRORS = [
    pytest.param([{'name': 'gpu', 'groups': ['login']}], NODE_GROUPS, ["partition 'gpu'", "group 'login'"],
                 id='group-not-a-node-group'),
    pytest.param([{'name': 'gpu', 'groups': ['nope']}], NODE_GROUPS, ["partition 'gpu'", "group 'nope'"],
                 id='unknown-group'),
    pytest.param([{'name': 'a', 'default': True}, {'name': 'b'}, {'name': 'c', 'default': True}], NODE_GROUPS,
                 ['a, c', 'default'], id='two-defaults'),
    pytest.param([{'name': 'a'}, {'default': True}], NODE_GROUPS, ['slurm_controller_partitions[1]', 'needs a name'],
                 id='missing-name'),
    pytest.param([{'name': ''}], NODE_GROUPS, ['slurm_controller_partitions[0]', 'needs a name'], id='empty-name'),
    pytest.param(['gpu'], NODE_GROUPS, ['slurm_controller_partitions[0]', 'needs a name'], id='partition-as-string'),
    pytest.param([], NODE_GROUPS, ['non-empty list'], id='no-partitions'),
    pytest.param({'name': 'gpu'}, NODE_GROUPS, ['non-empty list'], id='partitions-as-dict'),
    pytest.param('gpu', NODE_GROUPS, ['non-empty list'], id='partitions-as-string'),
    pytest.param(ROLE_DEFAULT_PARTITIONS, 'gpu_nodes', ['must be a list'], id='node-groups-as-string'),
    pytest.param(ROLE_DEFAULT_PARTITIONS, ['gpu_nodes', 'missing'], ["node group 'missing'"], id='missing-node-group'),
]


@pytest.mark.parametrize(('partitions', 'node_groups', 'wanted'), PARTITION_ERRORS)
def test_partition_errors(partitions, node_groups, wanted):
    message = filter_error('slurm_partition_lines', partitions, PARTITION_GROUPS, node_groups)
    for part in wanted:
        assert part in message


# slurm_conf_lines ----------------------------------------------------------

CONF_CASES = [
    pytest.param({'ClusterName': 'llmforge', 'SlurmctldPort': 6817}, ['ClusterName=llmforge', 'SlurmctldPort=6817'],
                 id='plain'),
    pytest.param({'A': True, 'B': False}, ['A=YES', 'B=NO'], id='booleans'),
    pytest.param({'SchedulerParameters': ['bf_continue', 'bf_max_job_test=1000']},
                 ['SchedulerParameters=bf_continue,bf_max_job_test=1000'], id='list-comma-joined'),
    pytest.param({'X': ('a', True)}, ['X=a,YES'], id='tuple-with-boolean'),
    pytest.param({'A': None, 'B': '', 'C': [], 'D': 'kept'}, ['D=kept'], id='empty-values-left-out'),
    pytest.param({'Zero': 0, 'Off': False}, ['Zero=0', 'Off=NO'], id='falsy-but-meaningful-kept'),
    pytest.param({'Z': 1, 'A': 2, 'M': 3}, ['Z=1', 'A=2', 'M=3'], id='order-preserved'),
    pytest.param({}, [], id='empty'),
]


@pytest.mark.parametrize(('mapping', 'expected'), CONF_CASES)
def test_conf_lines(mapping, expected):
    assert FILTERS['slurm_conf_lines'](mapping) == expected


@pytest.mark.parametrize(('value', 'type_name'), [
    pytest.param(['A=1'], 'list', id='list'),
    pytest.param('A=1', 'str', id='string'),
    pytest.param(None, 'NoneType', id='none'),
])
def test_conf_lines_rejects_non_dict(value, type_name):
    message = filter_error('slurm_conf_lines', value)
    assert 'dictionary' in message
    assert type_name in message


# pure builders -------------------------------------------------------------

@pytest.mark.parametrize(('value', 'expected'), [
    pytest.param(True, 'YES', id='true'),
    pytest.param(False, 'NO', id='false'),
    pytest.param(['a', 'b'], 'a,b', id='list'),
    pytest.param([], '', id='empty-list'),
    pytest.param(1960544, '1960544', id='int'),
    pytest.param('UNKNOWN', 'UNKNOWN', id='string'),
])
def test_format_value(value, expected):
    assert _slurm_config.format_value(value) == expected


@pytest.mark.parametrize(('count', 'gpu_type', 'expected'), [
    pytest.param(8, 'h200', 'gpu:h200:8', id='typed'),
    pytest.param('8', 'h200', 'gpu:h200:8', id='string-count'),
    pytest.param(8, None, 'gpu:8', id='untyped'),
    pytest.param(8, '', 'gpu:8', id='empty-type'),
    pytest.param(0, 'h200', None, id='zero'),
])
def test_gres_string(count, gpu_type, expected):
    assert _slurm_config.gres_string('gpu1', count, gpu_type) == expected


def test_render_line_puts_known_keys_first_then_the_rest_alphabetically():
    attrs = {'Zeta': 1, 'State': 'UNKNOWN', 'Alpha': 2, 'CPUs': 4, 'Boards': 1, 'Sockets': 1}
    assert _slurm_config.render_line('NodeName', 'n1', attrs) == (
        'NodeName=n1 CPUs=4 Boards=1 Sockets=1 State=UNKNOWN Alpha=2 Zeta=1')


def test_collapse_groups_identical_records():
    records = {'n3': {'A': 1}, 'n1': {'A': 1}, 'n2': {'A': 2}, 'n4': {'A': '1'}}
    # '1' and 1 render the same, so the hosts share a line.
    assert _slurm_config.collapse(records) == [
        {'hosts': 'n2', 'attrs': {'A': 2}},
        {'hosts': 'n[1,3-4]', 'attrs': {'A': 1}},
    ]


def test_node_group_members_maps_hosts_to_groups():
    groups = {'a': ['n1', 'n2'], 'b': ['n3'], 'other': ['x']}
    assert _slurm_config.node_group_members(['a', 'b'], groups) == {'n1': 'a', 'n2': 'a', 'n3': 'b'}


def test_gres_attrs_zero_gpus_is_none_even_with_devices():
    assert _slurm_config.gres_attrs('gpu1', None, 'h200', devices(8), 0) is None


def test_filter_module_exposes_all_filters():
    assert set(FILTERS) == {'slurm_node_lines', 'slurm_gres_lines', 'slurm_cgroup_constraints',
                            'slurm_partition_lines', 'slurm_conf_lines', 'slurm_topology_lines',
                            'slurm_node_config_problems'}


@pytest.mark.parametrize('filter_name', ['slurm_node_lines', 'slurm_gres_lines'])
@pytest.mark.parametrize('count, fragment', [
    (-2, 'must not be negative'),
    ('eight', "gpu_count must be a whole number, got 'eight'"),
    (2.7, 'gpu_count must be a whole number, got 2.7'),
    (True, 'gpu_count must be a whole number, got True'),
], ids=['negative', 'word', 'fraction', 'bool'])
def test_bad_gpu_count_is_refused_by_both_files(filter_name, count, fragment):
    message = filter_error(filter_name, {'gpu1': host_vars(gpu_count=count)}, {'g': ['gpu1']}, ['g'])
    assert "host 'gpu1'" in message and fragment in message


def test_gpu_count_null_is_unset_as_in_the_hardware_check():
    hv = host_vars(slurm_common_gpu_devices=devices(4))
    hv['gpu_count'] = None
    assert FILTERS['slurm_gres_lines']({'gpu1': hv}, {'g': ['gpu1']}, ['g']) == [
        'NodeName=gpu1 Name=gpu Type=h200 File=/dev/nvidia[0-3]']


@pytest.mark.parametrize('profile, gres, files', [
    ('h200-sxm-8', 'gpu:h200:8', '/dev/nvidia[0-7]'),
    ('h200-1', 'gpu:h200:1', '/dev/nvidia0'),
    ('gb200-nvl72-4', 'gpu:gb200:4', '/dev/nvidia[0-3]'),
])
def test_gres_follows_gpu_profile_alone(profile, gres, files):
    hostvars = {'gpu1': host_vars(gpu_type=None, gpu_count=None, gpu_profile=profile, slurm_common_gpu_devices=[])}
    assert f'Gres={gres}' in FILTERS['slurm_node_lines'](hostvars, {'g': ['gpu1']}, ['g'])[0]
    assert FILTERS['slurm_gres_lines'](hostvars, {'g': ['gpu1']}, ['g']) == [
        f'NodeName=gpu1 Name=gpu Type={gres.split(":")[1]} File={files}']


@pytest.mark.parametrize('filter_name', ['slurm_node_lines', 'slurm_gres_lines'])
@pytest.mark.parametrize('overrides, fragment', [
    ({'gpu_count': 4}, "host 'gpu1': gpu_count is 4, but gpu_profile h200-sxm-8 expects 8 GPUs"),
    ({'gpu_type': 'h100'}, "host 'gpu1': gpu_type is 'h100', but gpu_profile h200-sxm-8 has GRES type 'h200'"),
])
def test_gpu_type_or_count_that_disagrees_with_gpu_profile_is_refused(filter_name, overrides, fragment):
    hostvars = {'gpu1': host_vars(gpu_profile='h200-sxm-8', **overrides)}
    assert fragment in filter_error(filter_name, hostvars, {'g': ['gpu1']}, ['g'])


@pytest.mark.parametrize('node_config', ['Features=x', ['a']])
def test_node_config_must_be_a_dictionary(node_config):
    message = filter_error('slurm_node_lines', {'gpu1': host_vars(slurm_node_config=node_config)},
                           {'g': ['gpu1']}, ['g'])
    assert 'slurm_node_config must be a dictionary' in message


@pytest.mark.parametrize('percent', [None, 'abc', True])
def test_real_memory_percent_must_be_a_number(percent):
    message = filter_error('slurm_node_lines', {'gpu1': host_vars()}, {'g': ['gpu1']}, ['g'], percent)
    assert 'slurm_controller_real_memory_percent must be a whole number' in message


@pytest.mark.parametrize('partitions, fragment', [
    ([{'name': 'a', 'groups': 'g'}], "groups must be a list of node groups, got 'g'"),
    ([{'name': 'a'}, {'name': 'a'}], "partition 'a' is defined twice"),
    ([{'name': 'a', 'default': 'false'}], "default must be true or false, got 'false'"),
])
def test_partition_mistakes_are_named(partitions, fragment):
    assert fragment in filter_error('slurm_partition_lines', partitions, {'g': ['gpu1']}, ['g'])


def test_node_group_listed_twice_is_named():
    message = filter_error('slurm_node_lines', {'gpu1': host_vars()}, {'g': ['gpu1']}, ['g', 'g'])
    assert 'lists a group twice' in message


def test_empty_tuples_and_dicts_are_left_out_of_conf_lines():
    assert FILTERS['slurm_conf_lines']({'a': (), 'b': {}, 'c': 1}) == ['c=1']


def test_cgroup_strings_do_not_count_as_allowed():
    hostvars = {'gpu1': host_vars(slurm_common_cgroup={'cores': 'false', 'memory': True, 'devices': True})}
    constraints = FILTERS['slurm_cgroup_constraints'](hostvars, {'g': ['gpu1']}, ['g'])
    assert constraints['ConstrainCores'] is False and constraints['ConstrainRAMSpace'] is True
