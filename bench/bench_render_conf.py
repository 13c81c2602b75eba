# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render slurm.conf, gres.conf and topology.conf of a 4,096-node x 8-GPU cluster through the role's own templates.

Run from the repository root: PYTHONPATH=collections:tests/unit:bench .venv/bin/python bench/bench_render_conf.py

The templates of slurm_controller are rendered with Ansible's templating, its defaults and vars laid over
slurm_common's as a play does (tests/unit/role_render.py), for the controller of an inventory of 4,096 HGX nodes in
32 racks of three hardware generations. topology.conf comes from what ib_topology returns for a generated 3-level,
8-rail fat-tree of the same hosts. Each figure is the wall time of one render in a fresh process (Ansible's start
included), median of 3; the line counts show how hostlist compression keeps the files small.

Bounds (exit status 1 past any), about 4 times the figures of the 2-core test machine (slurm.conf 1.35 s, gres.conf
1.14 s, topology.conf 0.72 s): BOUNDS.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from bench_ib_topology import load_generator
from bench_slurm_conf import SEED, synthetic_cluster
from role_render import render

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils import _ib_topology as ib

REPEATS = 3
CONTROLLER = 'ctl1'
BOUNDS = {'slurm.conf.j2': 5.0, 'gres.conf.j2': 4.5, 'topology.conf.j2': 3.0}  # seconds, median of REPEATS


def fabric_result(hosts: list[str]) -> dict:
    """What llmforge.cluster.ib_topology returns for a 3-level 8-rail fat-tree of `hosts` (rail mlx5_0)."""
    text = load_generator().generate(len(hosts), 3, 8, 64)
    return ib.analyse(text, hosts=hosts)


def main() -> int:
    hostvars, groups, partitions = synthetic_cluster(random.Random(SEED))
    node_groups = sorted(groups)
    hosts = dict(hostvars)
    hosts[CONTROLLER] = {'ansible_facts': {'architecture': 'x86_64', 'os_family': 'Debian'}}
    inventory = {'hosts': hosts, 'groups': {**groups, 'slurm_controllers': [CONTROLLER]}}
    fabric = fabric_result(sorted(hostvars))
    assert not fabric['hosts_missing_from_fabric'], 'the generated fabric lost hosts'
    extra = {'slurm_common_node_groups': node_groups, 'slurm_controller_partitions': partitions,
             'slurm_controller_topology_source': 'fabric', '__slurm_controller_fabric': fabric,
             'common_in_container': False}
    print(f'nodes: {len(hostvars)} in {len(groups)} racks, fabric: {fabric["counts"]}')
    failed = []
    for template in ('slurm.conf.j2', 'gres.conf.j2', 'topology.conf.j2'):
        timings, result = [], {}
        for _repeat in range(REPEATS):
            started = time.monotonic()
            result = render('slurm_controller', template, inventory, tasks='', extra_vars=extra,
                            render_hosts=[CONTROLLER], base_roles=['slurm_common'],
                            published={'slurm_common_os': '{{ _slurm_common_os }}'})
            timings.append(time.monotonic() - started)
        assert 'error' not in result, result.get('error')
        text = result['hosts'][CONTROLLER]
        lines = [line for line in text.splitlines() if line and not line.startswith('#')]
        if template == 'slurm.conf.j2':
            nodes = [name for line in lines if line.startswith('NodeName=')
                     for name in _hostlist.expand(line.split()[0].split('=', 1)[1])]
            # A benchmark of wrong output is worthless: every node exactly once, the topology plugin on.
            assert sorted(nodes) == sorted(hostvars), 'NodeName lines lost or repeated nodes'
            assert 'TopologyPlugin=topology/tree' in lines
        if template == 'topology.conf.j2':
            leaves = [name for line in lines if ' Nodes=' in line
                      for name in _hostlist.expand(line.split(' Nodes=', 1)[1])]
            assert sorted(leaves) == sorted(hostvars), 'topology.conf lost or repeated nodes'
        seconds = statistics.median(timings)
        print(f'{template:<17} median of {REPEATS}: {seconds:.2f} s (bound {BOUNDS[template]} s), {len(lines)} lines, '
              f'{len(text)} characters')
        if seconds > BOUNDS[template]:
            failed.append(f'{template} took {seconds:.2f} s, over the bound of {BOUNDS[template]} s')
    for line in failed:
        print(f'FAIL: {line}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
