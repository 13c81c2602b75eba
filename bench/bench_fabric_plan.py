# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time the fabric planner on cluster-sized inputs and the perftest parser on an ``-a`` size sweep.

Run from the repository root: PYTHONPATH=collections .venv/bin/python bench/bench_fabric_plan.py
"""

from __future__ import annotations

import pathlib

from benchlib import median_seconds

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _fabric_plan
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _perftest

REPEATS = 7
LARGE_NODES = 4096
ALL_PAIRS_NODES = 256
RAILS = 8
PARSES = 1000
SWEEP = pathlib.Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'perftest' / 'ib_write_bw_sweep_gbits.txt'


def main() -> None:
    large = [f'gpu{number:04d}' for number in range(1, LARGE_NODES + 1)]
    small = large[:ALL_PAIRS_NODES]
    for nodes, pattern in ((large, 'ring'), (large, 'bisection'), (small, 'all')):
        rounds = _fabric_plan.plan_pairs(nodes, RAILS, pattern)
        tests = sum(len(tests) for tests in rounds)
        # A benchmark of wrong output is worthless: every round must pair each node once per rail as client.
        assert all(len(tests) == len(nodes) * RAILS for tests in rounds), f'{pattern}: a round is not a full permutation'
        seconds = median_seconds(lambda nodes=nodes, pattern=pattern: _fabric_plan.plan_pairs(nodes, RAILS, pattern), REPEATS)
        print(f'plan_pairs {pattern:<9} {len(nodes)} nodes x {RAILS} rails: {len(rounds)} rounds, {tests} tests, '
              f'median of {REPEATS}: {seconds:.6f} s')
    text = SWEEP.read_text(encoding='utf-8')
    assert len(_perftest.parse_bw(text)['rows']) == 23, 'the sweep fixture should hold 23 sizes'

    def parse_many() -> None:
        for _parse in range(PARSES):
            _perftest.parse_bw(text)

    seconds = median_seconds(parse_many, REPEATS)
    print(f'parse_bw sweep fixture x {PARSES}, median of {REPEATS}: {seconds:.6f} s ({seconds / PARSES * 1e6:.1f} us per parse)')


if __name__ == '__main__':
    main()
