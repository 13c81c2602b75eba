# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The floor of the demo cluster's first converge: apt-get install of the same packages on fresh containers at once.

Run from the repository root on a machine where `make demo` brought the cluster up (it reads what site.yml
installed there), then compare with `python bench/bench_site.py --converge`:

    PATH=$PWD/.venv/bin:$PATH python bench/bench_converge_floor.py [--runs 3]

For each cluster host, the package set is what `apt-mark showmanual` lists on the converged container and not on
a fresh container of the test image. Each run starts one fresh container per host (the options of
molecule/cluster), gives it the apt sources the converge added on that host from the Debian archive (the nccl
role's contrib and non-free components on the GPU nodes, where libnccl2 comes from), then runs `apt-get update &&
apt-get install -y --no-install-recommends <that set>` (as the roles install: common_install_recommends false) in
all of them in parallel and times the whole: no configuration, templates, services or checks, only the package
manager's work. Packages no such source holds (the stand-in driver of the demo's local repository, a `file:`
source only the cluster's containers have) are left out and listed.

`--mask slurmd` masks those units in the fresh containers before the timer starts, as slurm_common does before it
installs slurmd: Debian's slurmd package starts slurmd, which without a configuration retries until systemd's start
timeout (90 s) while apt-get waits. Without it the floor holds that wait on the GPU nodes; with it, only the package
manager's work.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import re
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


def source_files(container: str) -> dict[str, str]:
    """The deb822 apt sources files of a container, by path, with their content."""
    listing = docker('exec', container, 'sh', '-c', 'for f in /etc/apt/sources.list.d/*.sources; do '
                     '[ -f "$f" ] && printf "%s\\0" "$f" && cat "$f" && printf "\\0"; done; true').stdout
    parts = listing.split('\0')
    return dict(zip(parts[0:-1:2], parts[1::2]))


def added_sources(host: str, image_sources: dict[str, str]) -> dict[str, str]:
    """The sources files the converge added on a cluster host that a fresh container can reach (no file: URIs)."""
    return {path: text for path, text in source_files(host).items()
            if path not in image_sources and not re.search(r'(?m)^URIs:.*\bfile:', text)}


def start(name: str, sources: dict[str, str] | None = None) -> None:
    """A fresh container, once systemd has finished booting it (apt fails while its tmpfiles are being made), with
    `sources` (path: content) written."""
    docker('rm', '-f', name, check=False)
    docker('run', '-d', '--name', name, *SYSTEMD_CONTAINER, IMAGE, '/lib/systemd/systemd')
    docker('exec', name, 'systemctl', 'is-system-running', '--wait', check=False)
    for path, text in (sources or {}).items():
        subprocess.run(['docker', 'exec', '-i', name, 'sh', '-c', 'cat > "$1"', 'write', path], input=text,
                       check=True, capture_output=True, text=True)


def versions(policy: str) -> dict[str, set[str]]:
    """The versions each package's version table in `apt-cache policy` output offers."""
    offered: dict[str, set[str]] = {}
    package = None
    for line in policy.splitlines():
        if line and not line.startswith(' ') and line.endswith(':'):
            package = line[:-1]
            offered[package] = set()
        elif package and (match := re.match(r'^ (?:\*\*\*| {3}) (\S+) \d+$', line)):
            offered[package].add(match.group(1))
    return offered


def update(container: str) -> int:
    """apt-get update, again after a pause when it fails (a freshly booted container's own apt jobs hold its lock, a
    signature check lost its temporary file); the number of attempts it took."""
    for attempt in range(1, 6):
        proc = docker('exec', container, 'apt-get', 'update', '-qq', check=False)
        if proc.returncode == 0:
            return attempt
        time.sleep(5)
    sys.exit(f'apt-get update failed in {container} after {attempt} attempts: {proc.stderr[-2000:]}')


def package_sets() -> tuple[dict[str, list[str]], dict[str, dict[str, str]]]:
    """Each host's package set and the sources its floor container gets."""
    for host in HOSTS:
        if docker('inspect', '-f', '{{.State.Running}}', host, check=False).stdout.strip() != 'true':
            sys.exit(f'the demo cluster is not up (container {host}): run `make demo` first')
    probe = f'{PREFIX}probe'
    start(probe)
    try:
        base = manual(probe)
        image_sources = source_files(probe)
        sources = {host: added_sources(host, image_sources) for host in HOSTS}
        sets = {}
        probe_sources, updated = {}, False
        for host in HOSTS:
            if sources[host] != probe_sources:
                start(probe, sources[host])
                probe_sources, updated = sources[host], False
            if not updated:
                update(probe)
                updated = True
            wanted = sorted(manual(host) - base)
            installed = dict(line.split() for line in docker(
                'exec', host, 'dpkg-query', '--show', '--showformat=${Package} ${Version}\\n', *wanted).stdout.splitlines())
            offered = versions(docker('exec', probe, 'apt-cache', 'policy', *wanted).stdout)
            missing = sorted(pkg for pkg in wanted if installed.get(pkg) not in offered.get(pkg, set()))
            if missing:
                print(f'{host}: at their installed version in no source a fresh container has, left out: '
                      f'{" ".join(missing)}')
            sets[host] = [f'{pkg}={installed[pkg]}' for pkg in wanted if pkg not in missing]
            added = ', '.join(sorted(sources[host])) or 'none'
            print(f'{host}: {len(sets[host])} packages; sources added: {added}', flush=True)
        return sets, sources
    finally:
        docker('rm', '-f', probe, check=False)


def install(host: str, packages: list[str], mask: list[str]) -> float:
    """apt-get update and install on the fresh container of `host`, timed, the units of `mask` masked first (not
    timed). Retries of a failed update (`update`) stay in the time and are printed."""
    if mask:
        # What `systemctl mask` leaves (a unit file that is /dev/null), made without asking systemd, which a freshly
        # booted container may not answer yet; the package's daemon-reload reads it.
        units = [unit if '.' in unit else f'{unit}.service' for unit in mask]
        docker('exec', f'{PREFIX}{host}', 'sh', '-c', 'for unit; do ln -sf /dev/null "/etc/systemd/system/$unit"; done',
               'mask', *units)
    started = time.monotonic()
    attempts = update(f'{PREFIX}{host}')
    if attempts > 1:
        print(f'{host}: apt-get update took {attempts} attempts (counted in the floor)', flush=True)
    proc = docker('exec', '-e', 'DEBIAN_FRONTEND=noninteractive', f'{PREFIX}{host}', 'apt-get', 'install', '-y',
                  '-qq', '--no-install-recommends', *packages, check=False)
    if proc.returncode != 0:
        sys.exit(f'apt-get install failed on the fresh {host}: {proc.stderr[-2000:]}')
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--mask', action='append', default=[], metavar='UNIT',
                        help='mask UNIT in the fresh containers before installing (repeatable), e.g. slurmd')
    args = parser.parse_args()
    sets, sources = package_sets()
    times = []
    for run in range(1, args.runs + 1):
        for host in HOSTS:
            start(f'{PREFIX}{host}', sources[host])
        try:
            started = time.monotonic()
            with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
                per_host = dict(zip(HOSTS, pool.map(lambda host: install(host, sets[host], args.mask), HOSTS)))
            elapsed = time.monotonic() - started
        finally:
            for host in HOSTS:
                docker('rm', '-f', f'{PREFIX}{host}', check=False)
        times.append(elapsed)
        print(f'floor run {run}: {elapsed:.1f} s (' + ', '.join(f'{h} {s:.0f} s' for h, s in per_host.items()) + ')',
              flush=True)
    masked = f" (masked: {', '.join(args.mask)})" if args.mask else ''
    print(f'first-converge floor{masked}: median of {len(times)}: {statistics.median(times):.1f} s')


if __name__ == '__main__':
    main()
