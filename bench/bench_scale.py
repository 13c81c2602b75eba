# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the wall time of a run grows with the host count: ping, validate.yml and site.yml's GPU-node path.

Run from the repository root on a machine where `make demo` brought the cluster up:

    PATH=$PWD/.venv/bin:$PATH python bench/bench_scale.py [--sizes 8,16,32,64] [--runs 3]
        [--what ping,validate,compute] [--forks 50] [--keep]

The simulated hosts are copies of the demo's converged gpu1 (`docker commit`): the same packages, stand-in driver,
simulated GPUs and InfiniBand sysfs tree, so every module runs its real code path. They are reached through the
same docker connection as the demo. Each size runs against the first N copies:

- ping:     `ansible <hosts> -m ansible.builtin.ping`, the floor: one module round trip per host.
- validate: playbooks/validate.yml on the copies (hardware, metrics and report stages; the drain stage runs on the
            first controller once per run whatever the size, so it is left out with --limit).
- compute:  site.yml limited to the copies, every play that targets GPU nodes, as an idempotent re-run. The copies
            run systemd here (the options of molecule/cluster) and are first converged into the cluster once,
            untimed: slurm.conf then lists them. Slow on a 2-core machine; off unless asked for.

Figures: wall time per run and its median, the median per host, and the ratio to ping at the same size. A least
squares line through the medians (t = a + b·N) extrapolates to 1,000 and 4,096 hosts for this controller.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys

from benchlib import SYSTEMD_CONTAINER, timed_run

IMAGE = 'llmforge/scale-node:bench'
PREFIX = 'llmforge-scale-'
NETWORK = 'llmforge-cluster'
SHARED_VOLUME = 'llmforge-cluster-shared'
WORK = pathlib.Path('build/bench/scale')


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(['docker', *args], check=check, capture_output=True, text=True).stdout.strip()


def name(index: int) -> str:
    return f'{PREFIX}{index:03d}'


def host(index: int) -> str:
    return f'scale{index:03d}'


def make_image(rebuild: bool) -> None:
    if docker('images', '-q', IMAGE) and not rebuild:
        return
    if docker('inspect', '-f', '{{.State.Running}}', 'gpu1', check=False) != 'true':
        sys.exit('the demo cluster is not up (container gpu1): run `make demo` first')
    print(f'committing gpu1 as {IMAGE}', flush=True)
    docker('commit', 'gpu1', IMAGE)


def start_hosts(count: int, systemd: bool) -> None:
    """Start copies 1..count (removing ones of the other kind), one at a time: dockerd is the bottleneck anyway."""
    for index in range(1, count + 1):
        running = docker('inspect', '-f', '{{.State.Running}} {{.Config.Cmd}}', name(index), check=False)
        if running.startswith('true') and ('systemd' in running) == systemd:
            continue
        docker('rm', '-f', name(index), check=False)
        command = ['/lib/systemd/systemd'] if systemd else ['sleep', 'infinity']
        # The demo's shared storage too, as on every node of molecule/cluster: the training environment lives there.
        options = [*SYSTEMD_CONTAINER, '-v', f'{SHARED_VOLUME}:/shared:rw'] if systemd else []
        docker('run', '-d', '--name', name(index), '--hostname', host(index), '--network', NETWORK,
               *options, IMAGE, *command)


def remove_hosts() -> None:
    names = docker('ps', '-aq', '--filter', f'name=^{PREFIX}')
    if names:
        docker('rm', '-f', *names.split())


def write_inventory(count: int) -> pathlib.Path:
    """The copies as GPU nodes of the demo cluster; given after inventories/demo, whose group_vars they take."""
    WORK.mkdir(parents=True, exist_ok=True)
    lines = ['---', '# Written by bench/bench_scale.py: copies of the demo gpu1.', 'scale_nodes:', '  vars:',
             '    ansible_connection: community.docker.docker', '  hosts:']
    lines += [f'    {host(index)}: {{ansible_host: {name(index)}}}' for index in range(1, count + 1)]
    lines += ['cluster:', '  children:', '    gpu_nodes:', '      children:', '        scale_nodes:']
    path = WORK / 'hosts.yml'
    path.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return path


def timed(argv: list[str], log_path: pathlib.Path, env: dict[str, str]) -> tuple[float, dict[str, dict[str, int]]]:
    elapsed, recap, returncode = timed_run(argv, str(log_path), env)
    if returncode != 0:
        sys.exit(f'{" ".join(argv[:2])} failed (rc {returncode}); see {log_path}')
    return elapsed, recap


def commands(what: str, count: int, inventory: pathlib.Path) -> list[str]:
    inventories = ['-i', 'inventories/demo', '-i', str(inventory)]
    hosts = f'scale_nodes[0:{count - 1}]'
    if what == 'ping':
        return ['ansible', hosts, *inventories, '-m', 'ansible.builtin.ping', '-o']
    if what == 'validate':
        return ['ansible-playbook', 'playbooks/validate.yml', *inventories, '--limit', f'{hosts},localhost',
                '-e', f'validate_report_dir={(WORK / "report").resolve()}']
    return ['ansible-playbook', 'playbooks/site.yml', *inventories, '--limit', hosts]


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares t = a + b·n."""
    sizes = [size for size, _seconds in points]
    times = [seconds for _size, seconds in points]
    mean_n, mean_t = statistics.fmean(sizes), statistics.fmean(times)
    spread = sum((size - mean_n) ** 2 for size in sizes)
    slope = sum((size - mean_n) * (seconds - mean_t) for size, seconds in points) / spread if spread else 0.0
    return mean_t - slope * mean_n, slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--sizes', default='8,16,32,64')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--what', default='ping,validate')
    parser.add_argument('--forks', type=int, help='ANSIBLE_FORKS for the runs (default: ansible.cfg)')
    parser.add_argument('--rebuild', action='store_true', help='commit gpu1 again')
    parser.add_argument('--keep', action='store_true', help='leave the copies running afterwards')
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(','))
    kinds = args.what.split(',')
    env = dict(os.environ, ANSIBLE_NOCOLOR='1')
    if args.forks:
        env['ANSIBLE_FORKS'] = str(args.forks)
    make_image(args.rebuild)
    inventory = write_inventory(max(sizes))
    results: dict[str, list[tuple[int, float]]] = {}
    try:
        for kind in kinds:
            start_hosts(max(sizes), systemd=kind == 'compute')
            if kind == 'compute':
                print('converging the copies into the cluster once (untimed)', flush=True)
                timed(['ansible-playbook', 'playbooks/site.yml', '-i', 'inventories/demo', '-i', str(inventory)],
                      WORK / 'compute-converge.log', env)
            for size in sizes:
                times = []
                for run in range(1, args.runs + 1):
                    log_path = WORK / f'{kind}-{size}-{run}.log'
                    elapsed, recap = timed(commands(kind, size, inventory), log_path, env)
                    changed = sum(counts['changed'] for name_, counts in recap.items() if name_ != 'localhost')
                    if kind == 'compute' and changed:
                        sys.exit(f'compute re-run at {size} hosts changed {changed} tasks: see {log_path}')
                    tasks = sum(c['ok'] + c['changed'] + c['skipped'] for c in recap.values())
                    times.append(elapsed)
                    print(f'{kind} {size} hosts run {run}: {elapsed:.1f} s'
                          + (f', {tasks} task results' if recap else ''), flush=True)
                results.setdefault(kind, []).append((size, statistics.median(times)))
    finally:
        if not args.keep:
            remove_hosts()
    ping = dict(results.get('ping', []))
    print(f'\nforks {args.forks or "from ansible.cfg"}, medians of {args.runs}:')
    print(f'{"what":<9} {"hosts":>5} {"seconds":>8} {"s/host":>7} {"x ping":>7}')
    for kind, points in results.items():
        for size, seconds in points:
            ratio = f'{seconds / ping[size]:.1f}' if size in ping else '-'
            print(f'{kind:<9} {size:>5} {seconds:>8.1f} {seconds / size:>7.2f} {ratio:>7}')
        if len(points) > 1:
            base, slope = fit(points)
            print(f'{kind:<9} fit t = {base:.1f} s + {slope:.2f} s x N: 1,000 hosts {base + slope * 1000:.0f} s, '
                  f'4,096 hosts {base + slope * 4096:.0f} s')


if __name__ == '__main__':
    main()
