# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""site.yml's pull mode at 4,096 nodes: the control host's filters (plan, bundle content, node files, reading the
step's output back, the report), CPU seconds in all and per node, with a bound.

Run from the repository root: PYTHONPATH=collections:bench .venv/bin/python bench/bench_pull.py [--nodes 4096]

Each node's variables are the demo inventory's group variables for GPU nodes (inventories/demo/group_vars, all and
gpu_nodes: what every node shares) plus its own management address and the two secrets its roles take; the step's
output is what llmforge-pull-node prints for a re-run (222 ok, 123 skipped, 0 changed), a few nodes failing, the
nodes' lines dealt out in turns as srun interleaves them. Medians of 3; exits 1 past the bound (CPU a node).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import yaml

from benchlib import dealt_out, median_seconds

from ansible_collections.llmforge.cluster.plugins.filter import pull  # noqa: E402
from ansible_collections.llmforge.cluster.plugins.module_utils import _node_lines as node_lines  # noqa: E402
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _pull_node as program  # noqa: E402

GROUP_VARS = pathlib.Path('inventories/demo/group_vars')
ROLES = ['common', 'firewall', 'sssd', 'infiniband', 'local_scratch', 'lustre_client', 'ceph_client', 'gpu_driver',
         'nccl', 'slurm_common', 'slurm_node', 'containers', 'training_env', 'monitoring', 'node_programs', 'ansible_node']
# CPU a node the control host may spend on these filters (the 0.5 s a node of the whole run, most of it left to the
# fixed plays and Ansible's own handling).
BOUND_CPU_PER_NODE = 0.02
FAILING = 4


def group_vars() -> dict:
    found = {}
    for group in ('all', 'gpu_nodes'):
        for path in sorted((GROUP_VARS / group).glob('*.yml')):
            found.update(yaml.safe_load(path.read_text(encoding='utf-8')) or {})
    return found


def fleet(count: int) -> tuple[list[str], dict, dict]:
    shared = group_vars()
    nodes = [f'gpu{index:04d}' for index in range(1, count + 1)]
    hostvars = {node: dict(shared, cluster_network_addresses={'management': f'10.{index // 65536 % 256}.{index // 256 % 256}.{index % 256}'},
                           slurm_common_munge_key='a2V5' * 300, sssd_ldap_bind_password='secret',
                           slurm_controller_db_password='not for nodes')
                for index, node in enumerate(nodes, 1)}
    hostvars['ctl1'] = {'cluster_network_addresses': {'management': '10.255.0.1'}}
    groups = {'all': nodes + ['ctl1'], 'cluster': nodes + ['ctl1'], 'gpu_nodes': nodes, 'slurm_controllers': ['ctl1']}
    return nodes, hostvars, groups


def step_output(nodes: list[str]) -> str:
    per_node = []
    for index, node in enumerate(nodes):
        failed = index < FAILING
        outcome = {'status': 'failed' if failed else 'ok', 'digest': 'a' * 64, 'check': False, 'seconds': 123.4,
                   'message': "failed at 'x : y': boom" if failed else '222 ok, 0 changed',
                   'stats': {'ok': 222, 'changed': 0, 'failures': int(failed), 'unreachable': 0, 'skipped': 123,
                             'rescued': 0, 'ignored': 0},
                   'changed_tasks': [], 'failed_task': {'role': 'llmforge.cluster.slurm_node', 'task': 'y', 'message': 'boom'}
                   if failed else None}
        per_node.append(node_lines.lines(program.MARKER, node, 'pull', outcome))
    return dealt_out(per_node)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--nodes', type=int, default=4096)
    args = parser.parse_args()
    nodes, hostvars, groups = fleet(args.nodes)
    scontrol = {'rc': 0, 'stdout': '\n'.join(f'NodeName={node} Arch=x86_64 State=IDLE ThreadsPerCore=2' for node in nodes)}
    state = {}

    def plan():
        state['plan'] = pull.pull_plan(nodes, hostvars, scontrol, 'pull', 64)

    def content():
        state['content'] = pull.pull_bundle_content(state['plan'], hostvars, groups, ROLES, 'cluster', {},
                                                    {'slurm_common_munge_key': 'a2V5' * 300})

    def files():
        state['files'] = pull.pull_node_files(state['content'], 'a' * 64)

    output = step_output(nodes)
    run = {'rc': 1, 'stdout': output, 'stderr': ''}

    def results():
        outcomes = pull.pull_outcomes(state['plan']['batches'][0], run, hostvars)
        state['report'] = pull.pull_report(state['plan'], outcomes, hostvars)

    rows = []
    for label, operation in (('plan', plan), ('bundle content (cluster.json, each node\'s variables)', content),
                             ("each node's file", files), ("reading the step's output, the report", results)):
        wall = median_seconds(operation, repeats=3)
        cpu = median_seconds(operation, repeats=3, clock=time.process_time)
        rows.append((label, wall, cpu))
    total = sum(cpu for _label, _wall, cpu in rows)
    cluster_bytes = len(state['content']['cluster_text'])
    node_bytes = sum(map(len, state['files'].values())) / len(nodes)
    for label, wall, cpu in rows:
        print(f'{label}: {wall:.2f} s wall, {cpu:.2f} s CPU, {cpu / len(nodes) * 1000:.2f} ms CPU a node')
    print(f'{len(nodes)} nodes: {total:.2f} s CPU in all, {total / len(nodes) * 1000:.2f} ms a node '
          f'(bound {BOUND_CPU_PER_NODE * 1000:.0f} ms); cluster.json {cluster_bytes / 1024:.0f} KiB, a node\'s file '
          f'{node_bytes:.0f} bytes; srun output {len(output) / 2**20:.1f} MiB; drains {len(state["report"]["drains"])}')
    secrets_leak = any('not for nodes' in text for text in state['files'].values()) or 'secret' in state['content']['cluster_text']
    if secrets_leak:
        print('a secret reached cluster.json or another role\'s secret a node\'s file')
        return 1
    return 0 if total / len(nodes) <= BOUND_CPU_PER_NODE else 1


if __name__ == '__main__':
    sys.exit(main())
