# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timing shared by the benchmarks: medians, because these machines are noisy; timed Ansible runs with their recap."""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import time
import typing as t

# One host's line of the PLAY RECAP.
RECAP = re.compile(r'^(?P<host>\S+)\s+: ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)'
                   r'\s+failed=(?P<failed>\d+)\s+skipped=(?P<skipped>\d+)', re.M)
# The docker run options molecule/cluster gives its systemd containers (--privileged fails on these hosts).
SYSTEMD_CONTAINER = ['--cap-add', 'SYS_ADMIN', '--cap-add', 'NET_ADMIN', '--security-opt', 'seccomp=unconfined',
                     '--cgroupns', 'host', '-v', '/sys/fs/cgroup:/sys/fs/cgroup:rw', '--tmpfs', '/run',
                     '--tmpfs', '/run/lock']


def median_seconds(operation: t.Callable[[], object], repeats: int = 7,
                   clock: t.Callable[[], float] = time.perf_counter) -> float:
    """Run `operation` `repeats` times and return the median duration on `clock` (wall time by default)."""
    timings = []
    for _repeat in range(repeats):
        started = clock()
        operation()
        timings.append(clock() - started)
    return statistics.median(timings)


def timed_run(argv: list[str], log_path: str,
              env: t.Optional[dict[str, str]] = None) -> tuple[float, dict[str, dict[str, int]], int]:
    """Run an Ansible command with its output in `log_path`: wall time, the recap per host, the exit status."""
    started = time.monotonic()
    with open(log_path, 'w', encoding='utf-8') as log:
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False,
                              env=env or dict(os.environ, ANSIBLE_NOCOLOR='1'))
    elapsed = time.monotonic() - started
    with open(log_path, encoding='utf-8') as log:
        text = log.read()
    recap = {m['host']: {key: int(m[key]) for key in ('ok', 'changed', 'unreachable', 'failed', 'skipped')}
             for m in RECAP.finditer(text)}
    return elapsed, recap, proc.returncode


def dealt_out(per_node: t.Sequence[t.Sequence[str]]) -> str:
    """What srun prints for a step whose tasks print the given lines each: the nodes' lines dealt out in turns, as
    slurmstepd forwards them."""
    lines = [chunk[turn] for turn in range(max(map(len, per_node), default=0)) for chunk in per_node if turn < len(chunk)]
    return '\n'.join(lines) + '\n'
