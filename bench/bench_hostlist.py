# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time hostlist compress and expand on a cluster-sized set of names.

Run from the repository root: PYTHONPATH=collections .venv/bin/python bench/bench_hostlist.py
"""

from __future__ import annotations

import random

from benchlib import median_seconds

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist

REPEATS = 7
# 100,000 names in all: 95,904 GPU nodes left of gpu000001..gpu100952 plus the 4,096 rack nodes.
GPU_NODES = 100952
MISSING_FRACTION = 0.05
RACKS = 'r[01-32]-n[01-128]'
SEED = 20260101


def cluster_names(rng: random.Random) -> list[str]:
    """gpu000001..gpu100952 with a random 5% missing, plus every rack node, shuffled."""
    gpus = [f'gpu{number:06d}' for number in range(1, GPU_NODES + 1)]
    # Missing nodes break the ranges up, as drained or dead nodes do in a real cluster.
    present = rng.sample(gpus, round(len(gpus) * (1 - MISSING_FRACTION)))
    names = present + _hostlist.expand(RACKS)
    rng.shuffle(names)
    return names


def main() -> None:
    names = cluster_names(random.Random(SEED))
    compressed = _hostlist.compress(names)
    expanded = _hostlist.expand(compressed)
    # A benchmark of wrong output is worthless, so check the round trip first.
    assert sorted(expanded) == sorted(set(names)), 'round trip lost or invented names'
    print(f'names: {len(names)}, compressed to {len(compressed)} characters')
    print(f'compress median of {REPEATS}: {median_seconds(lambda: _hostlist.compress(names), REPEATS):.6f} s')
    print(f'expand   median of {REPEATS}: {median_seconds(lambda: _hostlist.expand(compressed), REPEATS):.6f} s')


if __name__ == '__main__':
    main()
