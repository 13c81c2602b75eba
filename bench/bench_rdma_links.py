# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wall and CPU time of rdma_links reading and judging 8 NDR HCAs with all their counters from sysfs.

Target: under 20 ms. Run from the repository root:
PYTHONPATH=collections .venv/bin/python bench/bench_rdma_links.py
"""

from __future__ import annotations

import importlib.util
import pathlib
import statistics
import tempfile
import time

from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma

REPEATS = 50
BUILDER = pathlib.Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'rdma' / 'make_sysfs_trees.py'
EXPECTED = {'devices': r'^mlx5_(?!bond)', 'hca_count': 8, 'link_layer': 'InfiniBand', 'rate_gbps': 400,
            'require_sm': True, 'require_netdev': True}


def load_builder():
    spec = importlib.util.spec_from_file_location('make_sysfs_trees', BUILDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    builder = load_builder()
    with tempfile.TemporaryDirectory() as scratch:
        root = str(builder.build('ndr8_healthy', pathlib.Path(scratch) / 'sys'))
        wall_ms, cpu_ms = [], []
        for _repeat in range(REPEATS):
            wall, cpu = time.perf_counter(), time.process_time()
            result = rdma.evaluate(root, EXPECTED)
            wall_ms.append((time.perf_counter() - wall) * 1000)
            cpu_ms.append((time.process_time() - cpu) * 1000)
    counters = sum(len(p['counters']) for p in result['ports'])
    print(f"{len(result['ports'])} ports, {counters} counters, {len(result['checks'])} checks: "
          f'median {statistics.median(wall_ms):.2f} ms wall, {statistics.median(cpu_ms):.2f} ms CPU '
          f'(max {max(wall_ms):.2f} ms wall, {REPEATS} runs)')


if __name__ == '__main__':
    main()
