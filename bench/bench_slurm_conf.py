# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time the slurm.conf and gres.conf filters on a 4,096-node cluster.

Run from the repository root: PYTHONPATH=collections .venv/bin/python bench/bench_slurm_conf.py
"""

from __future__ import annotations

import random
import typing as t

from benchlib import median_seconds

from ansible_collections.llmforge.cluster.plugins.filter.slurm_config import FilterModule
from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist

REPEATS = 7
GPU_NODES = 4096
NODES_PER_RACK = 128
ODD_MEMORY_FRACTION = 0.01
SEED = 20260101

# Three hardware generations; racks take them in turn so each spans several racks.
VARIANTS = [
    {'name': 'h200', 'facts': {'processor_count': 2, 'processor_cores': 56, 'processor_threads_per_core': 2,
                               'memtotal_mb': 2063731}, 'autodetect': ''},
    {'name': 'h100', 'facts': {'processor_count': 2, 'processor_cores': 48, 'processor_threads_per_core': 2,
                               'memtotal_mb': 2063731}, 'autodetect': ''},
    {'name': 'b200', 'facts': {'processor_count': 2, 'processor_cores': 56, 'processor_threads_per_core': 2,
                               'memtotal_mb': 4127462}, 'autodetect': 'nvml'},
]
# The facts play records device files in text order: nvidia0, nvidia1, nvidia2, ...
GPU_DEVICES = sorted(f'/dev/nvidia{index}' for index in range(8))
CGROUP = {'version': 2, 'cores': True, 'memory': True, 'devices': True}


def rack_of(number: int) -> str:
    return f'rack{(number - 1) // NODES_PER_RACK + 1:02d}'


def node_vars(variant: dict[str, t.Any], memtotal_mb: int) -> dict[str, t.Any]:
    """Hostvars of one node as the node facts play leaves them."""
    return {
        'ansible_facts': dict(variant['facts'], memtotal_mb=memtotal_mb),
        'gpu_type': variant['name'],
        'gpu_count': 8,
        'slurm_common_gpu_devices': list(GPU_DEVICES),
        'slurm_common_gres_autodetect_resolved': variant['autodetect'],
        'slurm_common_cgroup': dict(CGROUP),
    }


def synthetic_cluster(rng: random.Random) -> tuple[dict[str, t.Any], dict[str, list[str]], list[dict[str, t.Any]]]:
    """Hostvars, rack groups and partitions for gpu0001..gpu4096."""
    names = [f'gpu{number:04d}' for number in range(1, GPU_NODES + 1)]
    # A failed DIMM lowers a node's memory, giving it a NodeName line of its own.
    odd_memory = set(rng.sample(names, round(GPU_NODES * ODD_MEMORY_FRACTION)))
    hostvars: dict[str, t.Any] = {}
    groups: dict[str, list[str]] = {}
    variant_racks: dict[str, list[str]] = {variant['name']: [] for variant in VARIANTS}
    for number, name in enumerate(names, start=1):
        rack = rack_of(number)
        variant = VARIANTS[(int(rack[4:]) - 1) % len(VARIANTS)]
        memtotal_mb = variant['facts']['memtotal_mb']
        if name in odd_memory:
            memtotal_mb -= rng.randint(1, 512) * 64
        hostvars[name] = node_vars(variant, memtotal_mb)
        if rack not in groups:
            groups[rack] = []
            variant_racks[variant['name']].append(rack)
        groups[rack].append(name)
    partitions = [{'name': 'all', 'default': True, 'options': {'MaxTime': 'INFINITE', 'State': 'UP'}}]
    partitions += [{'name': variant, 'groups': racks, 'options': {'State': 'UP'}}
                   for variant, racks in variant_racks.items()]
    return hostvars, groups, partitions


def main() -> None:
    filters = FilterModule().filters()
    hostvars, groups, partitions = synthetic_cluster(random.Random(SEED))
    node_groups = sorted(groups)
    runs = {
        'slurm_node_lines': lambda: filters['slurm_node_lines'](hostvars, groups, node_groups),
        'slurm_gres_lines': lambda: filters['slurm_gres_lines'](hostvars, groups, node_groups),
        'slurm_partition_lines': lambda: filters['slurm_partition_lines'](partitions, groups, node_groups),
    }
    node_lines = runs['slurm_node_lines']()
    covered = [host for line in node_lines for host in _hostlist.expand(line.split()[0].split('=', 1)[1])]
    # A benchmark of wrong output is worthless, so check every node got exactly one line first.
    assert sorted(covered) == sorted(hostvars), 'NodeName lines lost or repeated nodes'
    print(f'nodes: {len(hostvars)} in {len(groups)} racks')
    for name, run in runs.items():
        print(f'{name:<22} median of {REPEATS}: {median_seconds(run, REPEATS):.6f} s, {len(run())} lines')


if __name__ == '__main__':
    main()
