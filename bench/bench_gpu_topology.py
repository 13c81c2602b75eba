# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU time gpu_topology spends beyond the nvidia-smi calls: parse both outputs and judge them.

Target: under 50 ms for an 8-GPU HGX node. Run from the repository root:
PYTHONPATH=collections .venv/bin/python bench/bench_gpu_topology.py
"""

from __future__ import annotations

import pathlib
import statistics
import time

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu

REPEATS = 50
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'gpu'
CASES = {'hgx-h200-8': 'h200-sxm-8', 'h200-1gpu-vm': 'h200-1'}


def parse_and_judge(xml_text: str, topo_text: str, profile: str) -> dict:
    facts = gpu.parse_smi_xml(xml_text)
    topo = gpu.parse_topo_matrix(topo_text)
    return gpu.evaluate(facts, topo, gpu.resolve_expectation(profile, None))


def main() -> None:
    for fixture, profile in CASES.items():
        xml_text = (FIXTURES / fixture / 'smi_q.xml').read_text()
        topo_text = (FIXTURES / fixture / 'topo_m.txt').read_text()
        cpu_ms = []
        for _repeat in range(REPEATS):
            started = time.process_time()
            result = parse_and_judge(xml_text, topo_text, profile)
            cpu_ms.append((time.process_time() - started) * 1000)
        print(f'{fixture:14s} profile {profile:11s} {len(result["gpus"])} GPUs, {len(result["checks"])} checks: '
              f'median {statistics.median(cpu_ms):.2f} ms CPU, max {max(cpu_ms):.2f} ms '
              f'({REPEATS} runs, {len(xml_text) // 1024} KiB XML)')


if __name__ == '__main__':
    main()
