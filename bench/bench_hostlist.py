# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time hostlist compress and expand on a 4,096-node fleet and on a cluster of 100,000 names.

- 4,096 names: gpu0001..gpu4312 with a random 5 % missing, shuffled (the nodes a report or a drain plan names);
- 100,000 names: gpu000001..gpu100952 with a random 5 % missing plus the 4,096 nodes of r[01-32]-n[01-128], shuffled.

Each figure is the median of REPEATS runs. Bounds (exit status 1 past any), 4 to 5 times the figures of the 2-core
test machine (4,096 names: compress 8 ms, expand 1.4 ms; 100,000 names: compress 0.26 s, expand 0.04 s):

- 4,096 names: compress 35 ms, expand 6 ms;
- 100,000 names: compress 1.0 s, expand 0.2 s.

Run from the repository root: PYTHONPATH=collections:bench .venv/bin/python bench/bench_hostlist.py
"""

from __future__ import annotations

import random
import sys

from benchlib import median_seconds

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist

REPEATS = 7
# 100,000 names in all: 95,904 GPU nodes left of gpu000001..gpu100952 plus the 4,096 rack nodes.
GPU_NODES = 100952
MISSING_FRACTION = 0.05
RACKS = 'r[01-32]-n[01-128]'
# 4,096 names: what is left of gpu0001..gpu4312 with 5 % missing.
FLEET = 4096
FLEET_NUMBERS = 4312
SEED = 20260101
# (compress, expand) bounds in seconds.
BOUNDS = {FLEET: (0.035, 0.006), 100_000: (1.0, 0.2)}


def fleet_names(rng: random.Random) -> list[str]:
    """4,096 of gpu0001..gpu4312, shuffled."""
    names = rng.sample([f'gpu{number:04d}' for number in range(1, FLEET_NUMBERS + 1)], FLEET)
    rng.shuffle(names)
    return names


def cluster_names(rng: random.Random) -> list[str]:
    """gpu000001..gpu100952 with a random 5% missing, plus every rack node, shuffled."""
    gpus = [f'gpu{number:06d}' for number in range(1, GPU_NODES + 1)]
    # Missing nodes break the ranges up, as drained or dead nodes do in a real cluster.
    present = rng.sample(gpus, round(len(gpus) * (1 - MISSING_FRACTION)))
    names = present + _hostlist.expand(RACKS)
    rng.shuffle(names)
    return names


def main() -> int:
    failed = []
    for names in (fleet_names(random.Random(SEED)), cluster_names(random.Random(SEED))):
        compressed = _hostlist.compress(names)
        expanded = _hostlist.expand(compressed)
        # A benchmark of wrong output is worthless, so check the round trip first.
        assert sorted(expanded) == sorted(set(names)), 'round trip lost or invented names'
        bounds = BOUNDS[len(names)]
        figures = (median_seconds(lambda names=names: _hostlist.compress(names), REPEATS),
                   median_seconds(lambda compressed=compressed: _hostlist.expand(compressed), REPEATS))
        print(f'names: {len(names)}, compressed to {len(compressed)} characters')
        for label, seconds, bound in zip(('compress', 'expand  '), figures, bounds):
            print(f'{label} median of {REPEATS}: {seconds:.6f} s (bound {bound} s)')
            if seconds > bound:
                failed.append(f'{label.strip()} of {len(names)} names took {seconds:.6f} s, over the bound of {bound} s')
    for line in failed:
        print(f'FAIL: {line}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
