# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time nccl_tests spends beyond the benchmark itself: parse the largest fixture output and judge it.

Run from the repository root: PYTHONPATH=collections .venv/bin/python bench/bench_nccl_tests.py
"""

from __future__ import annotations

import pathlib

from benchlib import median_seconds

from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_tests as nccl

REPEATS = 50
FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'tests' / 'fixtures' / 'nccl-tests'


def main() -> None:
    largest = max(FIXTURES.glob('*.txt'), key=lambda path: path.stat().st_size)
    text = largest.read_text(encoding='utf-8')

    def parse_and_judge() -> dict:
        return nccl.evaluate(nccl.parse_output(text), min_busbw_gbps=360.0)

    result = parse_and_judge()
    seconds = median_seconds(parse_and_judge, repeats=REPEATS)
    print(f'{largest.name}: {len(result["rows"])} rows, {len(result["devices"])} devices, '
          f'{len(result["checks"])} checks: median {seconds * 1000:.3f} ms ({REPEATS} runs, {len(text)} bytes)')


if __name__ == '__main__':
    main()
