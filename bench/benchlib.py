# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timing shared by the benchmarks: medians, because these machines are noisy."""

from __future__ import annotations

import statistics
import time
import typing as t


def median_seconds(operation: t.Callable[[], object], repeats: int = 7,
                   clock: t.Callable[[], float] = time.perf_counter) -> float:
    """Run `operation` `repeats` times and return the median duration on `clock` (wall time by default)."""
    timings = []
    for _repeat in range(repeats):
        started = clock()
        operation()
        timings.append(clock() - started)
    return statistics.median(timings)
