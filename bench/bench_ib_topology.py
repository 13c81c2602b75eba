# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ib_topology on the largest fabric users run: 4,096 hosts with 8 HCAs each on a 3-level rail-optimised fat-tree
of 64-port switches (8 planes of 128 leaves, 128 spines and 64 cores).

Checks that the parse rebuilds the generated tree of rails mlx5_0 and mlx5_7, then prints the median of 5 parse
times, the time of tree plus topology.conf lines, the parse's peak memory (tracemalloc, in a separate run, and the
process's peak RSS, which also holds the generator's work), the dump's size and topology.conf's line counts.
Targets: parse under 2 s and 500 MB. Run from the repository root:
PYTHONPATH=collections .venv/bin/python bench/bench_ib_topology.py
"""

from __future__ import annotations

import gc
import importlib.util
import pathlib
import resource
import sys
import time
import tracemalloc

from ansible_collections.llmforge.cluster.plugins.module_utils import _ib_topology as ib
from benchlib import median_seconds

HOSTS, LEVELS, RAILS, RADIX = 4096, 3, 8, 64
PARSE_TARGET_S, MEMORY_TARGET_MB = 2.0, 500
GENERATOR = pathlib.Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'ibnetdiscover' / 'make_fat_tree.py'


def load_generator():
    spec = importlib.util.spec_from_file_location('make_fat_tree', GENERATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(result: dict, expected: dict) -> None:
    """The parse must rebuild the generated tree exactly, or the timings mean nothing."""
    leaves = {s['name']: s['hosts'] for s in result['switches'] if s['level'] == 0}
    children = {s['name']: sorted(s['switches']) for s in result['switches'] if s['level'] > 0}
    levels = {s['name']: s['level'] for s in result['switches']}
    assert leaves == expected['leaves'], 'leaves differ'
    assert children == {name: sorted(kids) for name, kids in expected['children'].items()}, 'upper switches differ'
    assert levels == expected['levels'], 'levels differ'
    assert result['warnings'] == [], result['warnings']


def main() -> None:
    generator = load_generator()
    started = time.perf_counter()
    tree = generator.FatTree(HOSTS, LEVELS, RAILS, RADIX)
    text, expected, generated_counts = tree.text(), tree.trees, tree.counts()
    del tree
    gc.collect()
    print(f'generated {HOSTS} hosts x {RAILS} rails, {LEVELS} levels, radix {RADIX} in '
          f'{time.perf_counter() - started:.1f} s: {len(text) / 1e6:.1f} MB, {text.count(chr(10))} lines, '
          f"{text.count(chr(10) + '[')} port lines")

    fabric = ib.parse(text)
    counts = fabric.counts()
    assert counts == dict(generated_counts, routers=0), (counts, generated_counts)
    for rail in ('mlx5_0', 'mlx5_7'):
        result = ib.topology_conf_lines(ib.build_tree(fabric, rail=rail))
        check(result, expected[rail])
    print(f"parsed {counts['switches']} switches, {counts['cas']} CAs, {counts['links']} links; "
          'trees of mlx5_0 and mlx5_7 match the generated ones')

    parse_s = median_seconds(lambda: ib.parse(text), repeats=5)
    tree_s = median_seconds(lambda: ib.topology_conf_lines(ib.build_tree(fabric, rail='mlx5_3')), repeats=5)
    lines = result['topology_conf']
    leaf_lines = sum(1 for line in lines if ' Nodes=' in line)

    del fabric
    gc.collect()
    tracemalloc.start()
    ib.parse(text)
    _current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_mb = peak / 2**20
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f'parse: median {parse_s:.2f} s of 5 (target < {PARSE_TARGET_S:g} s)')
    print(f'tree + topology.conf of one rail: median {tree_s * 1000:.0f} ms of 5')
    print(f'parse peak memory: {peak_mb:.0f} MB traced (target < {MEMORY_TARGET_MB} MB); '
          f'process peak RSS {rss_mb:.0f} MB, generator and text included')
    print(f'dump: {len(text) / 2**20:.1f} MiB; topology.conf: {len(lines)} lines '
          f'({leaf_lines} leaves, {len(lines) - leaf_lines} upper switches)')
    if parse_s >= PARSE_TARGET_S or peak_mb >= MEMORY_TARGET_MB:
        print('TARGET MISSED')
        sys.exit(1)


if __name__ == '__main__':
    main()
