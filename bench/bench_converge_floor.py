# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The floor of the demo cluster's first converge: apt-get install of the same packages on fresh containers at once.

Run from the repository root on a machine where `make demo` brought the cluster up (it reads what site.yml
installed there), then compare with `python bench/bench_site.py --converge`:

    PATH=$PWD/.venv/bin:$PATH python bench/bench_converge_floor.py [--runs 3]

For each cluster host, the package set is what `apt-mark showmanual` lists on the converged container and not on
a fresh container of the test image. Each run starts one fresh container per host (the options of
molecule/cluster), then runs `apt-get update && apt-get install -y --no-install-recommends <that set>` (as the
roles install: common_install_recommends false) in all of them in parallel and times the whole: no configuration,
templates, services or checks, only the package manager's work. Packages the Debian archive does not hold (the
stand-in driver of the demo's local repository) are left out and listed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import statistics
import subprocess
import sys
import time

from benchlib import SYSTEMD_CONTAINER

IMAGE = 'llmforge/debian13-systemd:latest'
HOSTS = ('ctl1', 'gpu1', 'gpu2', 'login1')
PREFIX = 'llmforge-floor-'


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(['docker', *args], check=check, capture_output=True, text=True)


def manual(container: str) -> set[str]:
    return set(docker('exec', container, 'apt-mark', 'showmanual').stdout.split())


def start(name: str) -> None:
    """A fresh container, once systemd has finished booting it (apt fails while its tmpfiles are being made)."""
    docker('rm', '-f', name, check=False)
    docker('run', '-d', '--name', name, *SYSTEMD_CONTAINER, IMAGE, '/lib/systemd/systemd')
    docker('exec', name, 'systemctl', 'is-system-running', '--wait', check=False)


def package_sets() -> dict[str, list[str]]:
    for host in HOSTS:
        if docker('inspect', '-f', '{{.State.Running}}', host, check=False).stdout.strip() != 'true':
            sys.exit(f'the demo cluster is not up (container {host}): run `make demo` first')
    probe = f'{PREFIX}probe'
    start(probe)
    try:
        base = manual(probe)
        docker('exec', probe, 'apt-get', 'update', '-qq')
        sets = {}
        for host in HOSTS:
            wanted = sorted(manual(host) - base)
            policy = docker('exec', probe, 'apt-cache', 'policy', *wanted).stdout
            missing = sorted(pkg for pkg in wanted if f'{pkg}:\n  Installed: (none)\n  Candidate: (none)' in policy
                             or f'{pkg}:' not in policy)
            if missing:
                print(f'{host}: not in the Debian archive, left out: {" ".join(missing)}')
            sets[host] = [pkg for pkg in wanted if pkg not in missing]
            print(f'{host}: {len(sets[host])} packages', flush=True)
        return sets
    finally:
        docker('rm', '-f', probe, check=False)


def install(host: str, packages: list[str]) -> float:
    started = time.monotonic()
    proc = docker('exec', '-e', 'DEBIAN_FRONTEND=noninteractive', f'{PREFIX}{host}', 'sh', '-c',
                  'apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" >/dev/null', 'install',
                  *packages, check=False)
    if proc.returncode != 0:
        sys.exit(f'apt-get install failed on the fresh {host}: {proc.stderr[-2000:]}')
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--runs', type=int, default=3)
    args = parser.parse_args()
    sets = package_sets()
    times = []
    for run in range(1, args.runs + 1):
        for host in HOSTS:
            start(f'{PREFIX}{host}')
        try:
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
                per_host = dict(zip(HOSTS, pool.map(lambda host: install(host, sets[host]), HOSTS)))
            elapsed = time.monotonic() - started
        finally:
            for host in HOSTS:
                docker('rm', '-f', f'{PREFIX}{host}', check=False)
        times.append(elapsed)
        print(f'floor run {run}: {elapsed:.1f} s (' + ', '.join(f'{h} {s:.0f} s' for h, s in per_host.items()) + ')',
              flush=True)
    print(f'first-converge floor: median of {len(times)}: {statistics.median(times):.1f} s')


if __name__ == '__main__':
    main()
