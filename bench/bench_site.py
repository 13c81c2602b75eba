# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time site.yml on the demo cluster: the idempotent re-run (and, with --converge, the first converge).

Run from the repository root on a machine where `make demo` brought the cluster up:

    PATH=$PWD/.venv/bin:$PATH python bench/bench_site.py [--runs 3] [--converge]

Each run is `ansible-playbook playbooks/site.yml -i inventories/demo` as README tells an operator to type. The
re-run must report 0 changed on every host, or its time means nothing; the figures are the wall time of each run,
their median, and the task count (tasks run per host, summed over hosts, from the recap). --converge recreates the
containers (molecule destroy, create and prepare) before each timed run, so that run is a first converge.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

from benchlib import timed_run

SITE = ['ansible-playbook', 'playbooks/site.yml', '-i', 'inventories/demo']
MOLECULE = ['molecule', '--base-config', '.config/molecule/config.yml']


def site(log_path: str) -> tuple[float, dict[str, dict[str, int]]]:
    """Run site.yml once; its wall time and the recap per host. The output goes to `log_path`."""
    elapsed, recap, returncode = timed_run(SITE, log_path)
    if returncode != 0 or not recap:
        sys.exit(f'site.yml failed (rc {returncode}); see {log_path}')
    return elapsed, recap


def fresh_cluster() -> None:
    for step in ('destroy', 'create'):
        subprocess.run(MOLECULE + [step, '--scenario-name', 'cluster'], check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--converge', action='store_true', help='time first converges on recreated containers')
    parser.add_argument('--log-dir', default='build/bench')
    args = parser.parse_args()
    os.makedirs(args.log_dir, exist_ok=True)
    kind = 'first converge' if args.converge else 're-run'
    times = []
    for index in range(1, args.runs + 1):
        if args.converge:
            fresh_cluster()
        log_path = os.path.join(args.log_dir, f"site-{'converge' if args.converge else 'rerun'}-{index}.log")
        elapsed, recap = site(log_path)
        changed = sum(host['changed'] for host in recap.values())
        tasks = sum(host['ok'] + host['changed'] + host['skipped'] for host in recap.values())
        if not args.converge and changed:
            sys.exit(f're-run {index} changed {changed} tasks (see {log_path}): not idempotent, no figure')
        times.append(elapsed)
        print(f'{kind} {index}: {elapsed:.1f} s, {len(recap)} hosts, {tasks} tasks (ok+changed+skipped over hosts), '
              f'{changed} changed, log {log_path}', flush=True)
    print(f'{kind}: median of {len(times)}: {statistics.median(times):.1f} s')


if __name__ == '__main__':
    main()
