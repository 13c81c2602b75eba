# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's Slurm path at 4,096 nodes: what the control host does for the whole fleet.

One node's real results are taken first: llmforge-validate-node's code (module_utils/_hardware_stage.py) against the
HGX H200 fixture (nvidia-smi shim), the NDR sysfs tree of the unit tests and an empty kernel log. Every simulated
node prints those results, as numbered lines under its own name, into one srun output, the nodes' lines dealt out
in turns (as two nodes' lines arrive mixed). Then, medians of REPEATS runs of the filters the play calls:

- plan: `scontrol show node --oneliner` of 4,096 idle nodes read, every node's parameters, the srun steps;
- read: the step's output read back into 4,096 nodes' results (validate_slurm_results);
- report: validator_results and llmforge_report of the fleet, then report.json, junit.xml and report.html;
- metrics: the metrics step's standard input (each distinct text once).

The figure is the filters' own CPU; Ansible's handling of the registered output (its size is printed) and the
nodes' own work (each runs its validators on its own cores, about a second) come on top.

Run from the repository root: PYTHONPATH=collections:bench .venv/bin/python bench/bench_validate_slurm.py [--nodes N]
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import tempfile
import time

from benchlib import dealt_out, median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'collections'))
# pylint: disable=wrong-import-position
from ansible_collections.llmforge.cluster.plugins.filter.report import (  # noqa: E402
    llmforge_report, report_files, validator_results)
from ansible_collections.llmforge.cluster.plugins.filter.validate_paths import (  # noqa: E402
    validate_hardware_plan, validate_metrics_payload, validate_slurm_results)
from ansible_collections.llmforge.cluster.plugins.module_utils import _hardware_stage as stage  # noqa: E402
from ansible_collections.llmforge.cluster.plugins.module_utils import _node_lines as node_lines  # noqa: E402
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _validate_node as program  # noqa: E402

FIXTURES = REPO / 'tests' / 'fixtures'
REPEATS = 3
OPTIONS = {'immediate': 60, 'time_minutes': 5, 'partition': '', 'reservation': '', 'srun_args': []}
DEFAULTS = {'validate_nvidia_smi': 'nvidia-smi', 'validate_sysfs_root': '/sys', 'validate_kernel_faults_source': 'journal',
            'monitoring_textfile_dir': '/var/lib/node_exporter/textfile'}


def one_node(work: pathlib.Path, tree: str = 'ndr8_healthy') -> dict:
    """The real results of one HGX H200 node with 8 NDR ports, its sysfs tree the fixture's `tree` (healthy by
    default; `ndr8_port_down`: mlx5_3 port 1 down)."""
    spec = importlib.util.spec_from_file_location('make_sysfs_trees', FIXTURES / 'rdma' / 'make_sysfs_trees.py')
    trees = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trees)
    smi = work / 'nvidia-smi'
    smi.write_text(f'#!/bin/sh\nNVIDIA_SMI_SHIM_DIR={FIXTURES / "gpu" / "hgx-h200-8"} '
                   f'exec {FIXTURES / "gpu" / "nvidia-smi-shim"} "$@"\n', encoding='utf-8')
    smi.chmod(0o755)
    sysfs = trees.build(tree, work / 'sys')
    log = work / 'kernel.log'
    log.write_text('', encoding='utf-8')
    return stage.node_results({
        'gpu_topology': {'profile': 'h200-sxm-8', 'nvidia_smi_path': str(smi)},
        'rdma_links': {'sysfs_root': str(sysfs), 'expected': {'hca_count': 8, 'rate_gbps': 400}},
        'kernel_faults': {'source': str(log), 'nvidia_smi_path': str(smi), 'sysfs_root': str(sysfs)}})


def srun_output(names: list[str], results: dict) -> str:
    """What srun prints for the step: every node's numbered lines, the nodes' lines dealt out in turns."""
    return dealt_out([node_lines.lines(program.MARKER, name, 'results', results) for name in names])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--nodes', type=int, default=4096)
    args = parser.parse_args()
    names = [f'gpu{index:04d}' for index in range(1, args.nodes + 1)]
    hostvars = {name: {'gpu_profile': 'h200-sxm-8'} for name in names}
    with tempfile.TemporaryDirectory() as work:
        results = one_node(pathlib.Path(work))
    scontrol = {'rc': 0, 'stdout': '\n'.join(f'NodeName={name} Arch=x86_64 CoresPerSocket=56 State=IDLE '
                                             'ThreadsPerCore=1 Reason=(null)' for name in names)}
    output = srun_output(names, results)
    state: dict = {}

    def plan():
        state['plan'] = validate_hardware_plan(names, hostvars, scontrol, 'auto', OPTIONS, DEFAULTS)

    def read():
        state['hardware'] = validate_slurm_results(state['plan'], [{'rc': 0, 'stdout': output, 'stderr': ''}], hostvars)

    def report():
        built = llmforge_report(validator_results(names, hostvars, {}, state['hardware']), 'bench', '2026-12-07T00:00:00')
        state['files'] = report_files(built)

    def metrics():
        state['payload'] = validate_metrics_payload(names, hostvars, {}, state['hardware'])

    figures = []
    for label, operation in (('plan', plan), ('read', read), ('report', report), ('metrics', metrics)):
        started = time.process_time()
        wall = median_seconds(operation, repeats=REPEATS)
        cpu = (time.process_time() - started) / REPEATS
        figures.append((label, wall, cpu))
    assert len(state['hardware']) == args.nodes and all(
        result['gpu_topology']['healthy'] for result in state['hardware'].values())
    assert len(state['plan']['steps']) == 1 and len(state['payload']['texts']) == 1
    sizes = {item['name']: len(item['content']) for item in state['files']}
    print(f"{args.nodes} nodes; srun output {len(output) / 2**20:.1f} MiB in {output.count(chr(10))} lines "
          f"({len(output) // args.nodes} bytes a node); report.json {sizes['report.json'] / 2**20:.1f} MiB, "
          f"junit.xml {sizes['junit.xml'] / 2**20:.1f} MiB, report.html {sizes['report.html'] / 2**20:.1f} MiB")
    for label, wall, cpu in figures:
        print(f'{label:8s} {wall:6.2f} s wall (median of {REPEATS}), {cpu:6.2f} s CPU, {1000 * cpu / args.nodes:6.2f} ms CPU a node')
    total = sum(cpu for _label, _wall, cpu in figures)
    print(f'total    {total:6.2f} s CPU, {1000 * total / args.nodes:.2f} ms a node')
    return 0


if __name__ == '__main__':
    sys.exit(main())
