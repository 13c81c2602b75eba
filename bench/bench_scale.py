# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a run grows with the host count: ping, validate.yml and site.yml's GPU-node path, pushed or pulled.

Run from the repository root on a machine where `make demo` brought the cluster up:

    PATH=$PWD/.venv/bin:$PATH python bench/bench_scale.py [--sizes 8,16,32,64] [--runs 3]
        [--what ping,validate,compute] [--mode push,pull] [--forks 50] [--keep] [--converged]

The simulated hosts are copies of the demo's converged gpu1 (`docker commit`): the same packages, stand-in driver,
simulated GPUs and InfiniBand sysfs tree, so every module runs its real code path. They are reached through the
same docker connection as the demo. Each size runs against the first N copies:

- ping:     `ansible <hosts> -m ansible.builtin.ping`, the floor: one module round trip per host.
- validate: playbooks/validate.yml on the copies (hardware, metrics and report stages; the drain stage runs on the
            first controller once per run whatever the size, so it is left out with --limit). Mode push: the
            hardware stage with Ansible (validate_path=ansible); pull: through Slurm (validate_path=slurm, one srun
            step on the copies, which then must be in the cluster: see compute).
- compute:  site.yml limited to the copies, every play that targets GPU nodes, as an idempotent re-run. Mode push:
            the plays from the control host; pull: the copies run them themselves in one Slurm step (pull_mode=pull,
            the pull role; --limit adds localhost, where pull mode plans). The copies run systemd here (the options
            of molecule/cluster) and are first converged into the cluster once, untimed, with the pinned Ansible
            of pull mode (ansible_node_enabled, from `make ansible-wheelhouse`'s wheel): slurm.conf then lists them
            (topology.conf under a switch of their own: the demo's simulated fabric shows gpu1 and gpu2 only). Slow
            on a 2-core machine (64 copies: 12 min to boot, 47 min for the converge with the demo, 39.5 min for the
            timed push re-run); off unless asked for. 64 systemd containers need more inotify instances than Linux's
            default 128 (the bench says how many and stops before starting them); --keep and then --converged
            measure again without converging again. Asking for pull mode of either runs every kind on these copies.

Figures: wall time per run and its median, the median per host, and the ratio to ping at the same size; the control
host's CPU seconds (ansible-playbook, its workers and `docker exec` clients: this process's children) and the
copies' (their containers' cgroups and their Slurm jobs' cgroups, cgroup v1 as on the test machines), each per host.
A least squares line through the medians (t = a + b·N) extrapolates to 1,000 and 4,096 hosts for this controller;
with the nodes' work in parallel on their own cores, a 16-core control host's wall time is projected as
t = a_c + b_c·N/16 + R: a_c + b_c·N the control host's CPU seconds (fitted), R one copy's own CPU seconds (the
slowest node's run, which on a node with cores to itself is its wall time at most).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import typing as t

from benchlib import SYSTEMD_CONTAINER, timed_run

IMAGE = 'llmforge/scale-node:bench'
PREFIX = 'llmforge-scale-'
NETWORK = 'llmforge-cluster'
SHARED_VOLUME = 'llmforge-cluster-shared'
WORK = pathlib.Path('build/bench/scale')
# The demo's simulated fabric (the saved ibnetdiscover output on gpu1) shows gpu1 and gpu2 only: the copies go under
# a switch of their own in topology.conf, as the role does for nodes missing from a real fabric when told to.
COMPUTE_VARS = ['-e', 'slurm_controller_topology_allow_missing=true']
MODES = ('push', 'pull')
# Where the copies' pinned Ansible (pull mode) is installed from: `make ansible-wheelhouse`, as in molecule/cluster.
ANSIBLE_WHEELHOUSE = pathlib.Path('build/ansible-wheelhouse')
CGROUP_V1 = pathlib.Path('/sys/fs/cgroup/cpuacct')
CGROUP_V2 = pathlib.Path('/sys/fs/cgroup/system.slice')
# The control host's cores the projection is made for.
CONTROL_CORES = 16


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(['docker', *args], check=check, capture_output=True, text=True).stdout.strip()


def name(index: int) -> str:
    return f'{PREFIX}{index:03d}'


def host(index: int) -> str:
    return f'scale{index:03d}'


def running(container: str) -> bool:
    return docker('inspect', '-f', '{{.State.Running}}', container, check=False) == 'true'


def require_demo() -> None:
    """Stop unless the demo's gpu1, which the copies are made from, is up."""
    if not running('gpu1'):
        sys.exit('the demo cluster is not up (container gpu1): run `make demo` first')


def make_image(rebuild: bool) -> None:
    if docker('images', '-q', IMAGE) and not rebuild:
        return
    require_demo()
    print(f'committing gpu1 as {IMAGE}', flush=True)
    docker('commit', 'gpu1', IMAGE)


# systemd holds about 6 inotify instances per container (counted in gpu1, ctl1, login1 and a copy; 15 copies beside
# the demo's 7 containers used up the default 128); the limit is per user, and every container's systemd runs as the
# host's root. 16 leaves room for the demo's and the copies' other services.
INOTIFY_PER_CONTAINER = 16
INOTIFY_LIMIT = pathlib.Path('/proc/sys/fs/inotify/max_user_instances')


def check_inotify(count: int) -> None:
    """Stop before starting systemd copies that would exit at once (status 255, no log) for want of inotify."""
    needed = INOTIFY_PER_CONTAINER * (count + 8)
    limit = int(INOTIFY_LIMIT.read_text(encoding='ascii'))
    if limit < needed:
        sys.exit(f'{count} systemd copies need fs.inotify.max_user_instances >= {needed} (now {limit}); as root: '
                 f'sysctl -w fs.inotify.max_user_instances={needed}')


def not_running(count: int) -> list[str]:
    """The copies among 1..count that are not running."""
    return [name(index) for index in range(1, count + 1) if not running(name(index))]


def make_gpu_device_nodes(count: int) -> None:
    """gpu1's /dev/nvidia* nodes in each copy, as the driver's module makes them at boot: a container's /dev is not in
    its image, and without them slurm_node rightly refuses a node whose gpu_count has no devices."""
    require_demo()
    nodes = docker('exec', 'gpu1', 'sh', '-c', "stat -c '%n %t %T %a' /dev/nvidia*").splitlines()
    script = '; '.join(f'[ -e {path} ] || mknod -m {mode} {path} c {int(major, 16)} {int(minor, 16)}'
                       for path, major, minor, mode in (line.split() for line in nodes))
    for index in range(1, count + 1):
        docker('exec', name(index), 'sh', '-c', script)


def start_hosts(count: int, systemd: bool, converged: bool = False) -> None:
    """Start copies 1..count (removing ones of the other kind), one at a time: dockerd is the bottleneck anyway."""
    if converged:
        missing = not_running(count)
        if missing:
            sys.exit(f'--converged: {len(missing)} copies are not running ({", ".join(missing[:5])}); run without it')
        return
    if systemd:
        check_inotify(count)
    for index in range(1, count + 1):
        running = docker('inspect', '-f', '{{.State.Running}} {{.Config.Cmd}}', name(index), check=False)
        if running.startswith('true') and ('systemd' in running) == systemd:
            continue
        docker('rm', '-f', name(index), check=False)
        CONTAINER_IDS.pop(name(index), None)
        command = ['/lib/systemd/systemd'] if systemd else ['sleep', 'infinity']
        # The demo's shared storage too, as on every node of molecule/cluster: the training environment lives there;
        # and the wheel of the pinned Ansible pull mode runs on the nodes.
        options = [*SYSTEMD_CONTAINER, '-v', f'{SHARED_VOLUME}:/shared:rw',
                   '-v', f'{ANSIBLE_WHEELHOUSE.resolve()}:/srv/ansible-wheelhouse:ro'] if systemd else []
        docker('run', '-d', '--name', name(index), '--hostname', host(index), '--network', NETWORK,
               *options, IMAGE, *command)
    stopped = not_running(count)
    if stopped:
        more = '...' if len(stopped) > 5 else ''
        sys.exit(f'{len(stopped)} copies exited after their start ({", ".join(stopped[:5])}{more}): `docker logs` them')
    if systemd:
        make_gpu_device_nodes(count)
        # Until a copy's systemd has booted, systemd-tmpfiles may empty /tmp under a module that runs there (seen:
        # setup's payload zip gone mid-run on the last copies started), as the scenarios' prepare waits too.
        for index in range(1, count + 1):
            docker('exec', name(index), 'timeout', '300', 'systemctl', 'is-system-running', '--wait', check=False)


def control_cpu() -> float:
    """CPU seconds of this process's waited-for children: ansible, its workers and their `docker exec` clients."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# The copies' container ids, asked once (an `docker inspect` during a timed run would count as the control host's).
CONTAINER_IDS: dict[str, str] = {}


def node_cpu(count: int) -> t.Optional[float]:
    """CPU seconds the copies 1..count have used: each container's cgroup and its Slurm jobs' (slurmstepd puts
    them under slurm_<node> at the cgroup root: the containers share the host's cgroup namespace). None where this
    host's cgroups cannot be read."""
    total = 0.0
    for index in range(1, count + 1):
        if name(index) not in CONTAINER_IDS:
            CONTAINER_IDS[name(index)] = docker('inspect', '-f', '{{.Id}}', name(index), check=False)
        container = CONTAINER_IDS[name(index)]
        v1 = [CGROUP_V1 / 'docker' / container / 'cpuacct.usage', CGROUP_V1 / f'slurm_{host(index)}' / 'cpuacct.usage']
        v2 = CGROUP_V2 / f'docker-{container}.scope' / 'cpu.stat'
        if v1[0].exists():
            total += sum(int(path.read_text(encoding='ascii')) / 1e9 for path in v1 if path.exists())
        elif v2.exists():
            stat = dict(line.split() for line in v2.read_text(encoding='ascii').splitlines())
            total += int(stat['usage_usec']) / 1e6
        else:
            return None
    return total


def remove_hosts() -> None:
    names = docker('ps', '-aq', '--filter', f'name=^{PREFIX}')
    if names:
        docker('rm', '-f', *names.split())


def write_inventory(count: int) -> pathlib.Path:
    """The copies as GPU nodes of the demo cluster; given after inventories/demo, whose group_vars they take."""
    WORK.mkdir(parents=True, exist_ok=True)
    lines = ['---', '# Written by bench/bench_scale.py: copies of the demo gpu1.', 'scale_nodes:', '  vars:',
             '    ansible_connection: community.docker.docker',
             '    # The pinned Ansible of pull mode, from the wheel mounted at /srv/ansible-wheelhouse.',
             '    ansible_node_enabled: true', '    ansible_node_wheelhouse: /srv/ansible-wheelhouse', '  hosts:']
    # Each copy's management address given (its address on the demo's network), as a large site gives its nodes'
    # (cluster_network_addresses): a run limited to some copies then gathers no facts from the others.
    for index in range(1, count + 1):
        template = f'{{{{(index .NetworkSettings.Networks "{NETWORK}").IPAddress}}}}'
        address = docker('inspect', '-f', template, name(index))
        lines.append(f'    {host(index)}: {{ansible_host: {name(index)}, '
                     f'cluster_network_addresses: {{management: {address}}}}}')
    lines += ['cluster:', '  children:', '    gpu_nodes:', '      children:', '        scale_nodes:']
    path = WORK / 'hosts.yml'
    path.write_text('\n'.join(lines) + '\n', encoding='utf-8')
    return path


def timed(argv: list[str], log_path: pathlib.Path, env: dict[str, str],
          count: int) -> tuple[float, dict[str, dict[str, int]], float, t.Optional[float]]:
    """Wall time, recap, the control host's and the first `count` copies' CPU seconds of one run."""
    nodes = node_cpu(count)
    control = control_cpu()
    elapsed, recap, returncode = timed_run(argv, str(log_path), env)
    control = control_cpu() - control
    if returncode != 0:
        sys.exit(f'{" ".join(argv[:2])} failed (rc {returncode}); see {log_path}')
    after = node_cpu(count)
    return elapsed, recap, control, None if nodes is None or after is None else after - nodes


def converge(inventory: pathlib.Path, env: dict[str, str]) -> None:
    """site.yml on the demo and the copies, untimed, so that slurm.conf lists them. Tried twice: a host whose fact
    gathering fails (seen on copies whose systemd was still booting, before start_hosts waited for it) makes the
    firewall's preflight stop the play for every host, as it must without that host's address."""
    argv = ['ansible-playbook', 'playbooks/site.yml', '-i', 'inventories/demo', '-i', str(inventory), *COMPUTE_VARS]
    for attempt in (1, 2):
        print(f'converging the copies into the cluster (untimed), try {attempt}', flush=True)
        log_path = WORK / f'compute-converge-{attempt}.log'
        _elapsed, _recap, returncode = timed_run(argv, str(log_path), env)
        if returncode == 0:
            return
        print(f'site.yml failed (rc {returncode}); see {log_path}', flush=True)
    sys.exit('the copies could not be converged into the cluster')


def commands(what: str, count: int, inventory: pathlib.Path, mode: str = 'push') -> list[str]:
    inventories = ['-i', 'inventories/demo', '-i', str(inventory)]
    hosts = f'scale_nodes[0:{count - 1}]'
    if what == 'ping':
        return ['ansible', hosts, *inventories, '-m', 'ansible.builtin.ping', '-o']
    if what == 'validate':
        return ['ansible-playbook', 'playbooks/validate.yml', *inventories, '--limit', f'{hosts},localhost',
                '-e', f'validate_report_dir={(WORK / "report").resolve()}',
                '-e', f'validate_path={"slurm" if mode == "pull" else "ansible"}']
    if mode == 'pull':
        return ['ansible-playbook', 'playbooks/site.yml', *inventories, '--limit', f'{hosts},localhost',
                *COMPUTE_VARS, '-e', 'pull_mode=pull']
    return ['ansible-playbook', 'playbooks/site.yml', *inventories, '--limit', hosts, *COMPUTE_VARS]


def fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least squares t = a + b·n."""
    sizes = [size for size, _seconds in points]
    times = [seconds for _size, seconds in points]
    mean_n, mean_t = statistics.fmean(sizes), statistics.fmean(times)
    spread = sum((size - mean_n) ** 2 for size in sizes)
    slope = sum((size - mean_n) * (seconds - mean_t) for size, seconds in points) / spread if spread else 0.0
    return mean_t - slope * mean_n, slope


PULL_LAST_RUN = pathlib.Path.home() / '.cache/llmforge/pull/last-run.json'


def pulled_changes(count: int, log_path: pathlib.Path) -> int:
    """What the copies changed in a pull run, from the control host's record of the step (they are not in the
    recap); stops unless every one of the `count` copies pulled and converged."""
    outcomes = json.loads(PULL_LAST_RUN.read_text(encoding='utf-8'))['outcomes']
    wanted = {host(index) for index in range(1, count + 1)}
    if set(outcomes) != wanted or any(outcome['status'] not in ('ok', 'changed') for outcome in outcomes.values()):
        sys.exit(f'pull run at {count} hosts: not every copy pulled and converged ({PULL_LAST_RUN}); see {log_path}')
    return sum(int(outcome['stats']['changed']) for outcome in outcomes.values())


def per_host(value: t.Optional[float], size: int) -> str:
    return '-' if value is None else f'{value / size:.2f}'


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
    parser.add_argument('--sizes', default='8,16,32,64')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--what', default='ping,validate')
    parser.add_argument('--mode', default='push', help='push, pull or both (push,pull): for validate and compute')
    parser.add_argument('--forks', type=int, help='ANSIBLE_FORKS for the runs (default: ansible.cfg)')
    parser.add_argument('--rebuild', action='store_true', help='commit gpu1 again')
    parser.add_argument('--keep', action='store_true', help='leave the copies running afterwards')
    parser.add_argument('--converged', action='store_true',
                        help='the copies kept (--keep) by an earlier compute run are in the cluster: no converge')
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(','))
    kinds = args.what.split(',')
    modes = args.mode.split(',')
    if not set(modes) <= set(MODES):
        parser.error(f'--mode: push, pull or push,pull, got {args.mode!r}')
    # Pull mode (or any compute) needs the copies in the cluster: systemd copies, converged once, for every kind.
    in_cluster = 'compute' in kinds or ('pull' in modes and 'validate' in kinds)
    env = dict(os.environ, ANSIBLE_NOCOLOR='1')
    if args.forks:
        env['ANSIBLE_FORKS'] = str(args.forks)
    make_image(args.rebuild)
    results: dict[str, list[tuple[int, float, float, t.Optional[float]]]] = {}
    try:
        start_hosts(max(sizes), systemd=in_cluster, converged=in_cluster and args.converged)
        inventory = write_inventory(max(sizes))
        if in_cluster and not args.converged:
            converge(inventory, env)
        for kind in kinds:
            for mode in (modes if kind in ('validate', 'compute') else ['push']):
                label = kind if kind == 'ping' else f'{kind}/{mode}'
                for size in sizes:
                    times, controls, nodes = [], [], []
                    for run in range(1, args.runs + 1):
                        log_path = WORK / f'{kind}-{mode}-{size}-{run}.log'
                        elapsed, recap, control, node = timed(commands(kind, size, inventory, mode), log_path, env,
                                                              size)
                        if kind == 'compute' and mode == 'pull':
                            changed = pulled_changes(size, log_path)
                        else:
                            changed = sum(counts['changed'] for name_, counts in recap.items() if name_ != 'localhost')
                        if kind == 'compute' and changed:
                            sys.exit(f'compute re-run at {size} hosts changed {changed} tasks: see {log_path}')
                        tasks = sum(c['ok'] + c['changed'] + c['skipped'] for c in recap.values())
                        times.append(elapsed)
                        controls.append(control)
                        nodes.append(node)
                        print(f'{label} {size} hosts run {run}: {elapsed:.1f} s, control host {control:.1f} CPU-s, '
                              f'copies {"-" if node is None else f"{node:.1f}"} CPU-s'
                              + (f', {tasks} task results' if recap else ''), flush=True)
                    node_median = None if None in nodes else statistics.median(nodes)
                    results.setdefault(label, []).append(
                        (size, statistics.median(times), statistics.median(controls), node_median))
    finally:
        if not args.keep:
            remove_hosts()
    report(results, args)


def report(results: dict[str, list[tuple[int, float, float, t.Optional[float]]]], args: argparse.Namespace) -> None:
    ping = {size: seconds for size, seconds, _control, _node in results.get('ping', [])}
    print(f'\nforks {args.forks or "from ansible.cfg"}, medians of {args.runs}:')
    print(f'{"what":<16} {"hosts":>5} {"seconds":>8} {"s/host":>7} {"x ping":>7} {"control CPU-s/host":>19} '
          f'{"node CPU-s/host":>16}')
    for label, points in results.items():
        for size, seconds, control, node in points:
            ratio = f'{seconds / ping[size]:.1f}' if size in ping else '-'
            print(f'{label:<16} {size:>5} {seconds:>8.1f} {seconds / size:>7.2f} {ratio:>7} '
                  f'{per_host(control, size):>19} {per_host(node, size):>16}')
        if len(points) < 2:
            continue
        base, slope = fit([(size, seconds) for size, seconds, _control, _node in points])
        print(f'{label:<16} fit t = {base:.1f} s + {slope:.2f} s x N on this machine: 1,000 hosts '
              f'{base + slope * 1000:.0f} s, 4,096 hosts {base + slope * 4096:.0f} s')
        fixed, per_node = fit([(size, control) for size, _seconds, control, _node in points])
        own = max((node / size for size, _seconds, _control, node in points if node is not None), default=0.0)
        projected = {count: fixed + per_node * count / CONTROL_CORES + own for count in (1000, 4096)}
        print(f'{label:<16} control host CPU = {fixed:.1f} s + {per_node:.3f} s x N; a node\'s own {own:.1f} CPU-s; '
              f'projected on {CONTROL_CORES} cores, nodes in parallel (a_c + b_c·N/{CONTROL_CORES} + R): '
              f'1,000 hosts {projected[1000]:.0f} s, 4,096 hosts {projected[4096]:.0f} s')


if __name__ == '__main__':
    main()
