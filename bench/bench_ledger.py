# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-remediate at 4,096 nodes: the ledger after 30 days, one decision tick, insert throughput.

The ledger is filled with 30 days of a 4,096-node fleet at the rates of a busy cluster: FAULT_RATE of the nodes a
day get a fault drain (drain, fault, transitions, a reset or a reboot, the burn-in, the outcome and the return: the
events a real repair leaves), SIGHTINGS_PER_NODE_DAY suspect sightings per node a day (each from its own job), and
a few RMAs. Then, medians of REPEATS runs:

- decide: the ledger snapshot, `scontrol show node -o` of 4,096 nodes and sacct rows of a day of jobs
  (JOBS_PER_DAY, one in twenty with sightings in its Comment) parsed, and decide() -> the plan;
- tick: the whole tick against a fake Slurm that answers at once (reads, decide, the observations and decisions
  written to a copy of the ledger, the metrics file), so the figure is the program's own cost;
- inserts: events a second, batched (1,000 a transaction, as a tick's observations) and one a transaction (as a
  tick's per-node decisions).

Bounds (exit status 1 past any), about 4 times the figures of the 2-core test machine at the default rates (decide
0.50 s, tick 1.04 s, 32,600 events/s batched, 11,300 one a transaction): decide within DECIDE_BOUND_S (2.0 s), tick
within TICK_BOUND_S (4.0 s), at least BATCHED_FLOOR (8,000) and SINGLE_FLOOR (2,800) events a second; checked at
the default rates only.

Run from the repository root: .venv/bin/python bench/bench_ledger.py [--sightings-per-node-day N]
"""

from __future__ import annotations

import argparse
import io
import os
import pathlib
import random
import sys
import tempfile
import time

from benchlib import median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'collections'))
# pylint: disable=wrong-import-position
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc  # noqa: E402
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _remediate as rem  # noqa: E402

NODES = 4096
DAYS = 30
FAULT_RATE = 0.015
SIGHTINGS_PER_NODE_DAY = 3.0
JOBS_PER_DAY = 40000
REPEATS = 5
DECIDE_BOUND_S = 2.0
TICK_BOUND_S = 4.0
BATCHED_FLOOR = 8000  # events a second
SINGLE_FLOOR = 2800
NOW = 1_800_000_000.0
DAY = 86400.0


def node(index: int) -> str:
    return f'gpu{index:04d}'


def build(ledger: rem.Ledger, sightings_rate: float, rng: random.Random) -> dict[str, int]:
    """Fill the ledger; the counts of what went in."""
    names = [node(index) for index in range(1, NODES + 1)]
    ledger.ensure_nodes(names, NOW - DAYS * DAY)
    events: list[dict] = []
    counts = {'episodes': 0, 'sightings': 0, 'rma': 0}
    job = 1_000_000
    for day in range(DAYS):
        start = NOW - (DAYS - day) * DAY
        for name in rng.sample(names, int(NODES * FAULT_RATE)):
            when = start + rng.uniform(0, DAY)
            gpu = rng.randrange(8)
            serial = f'16500{names.index(name):05d}{gpu}'
            reason = f'llmforge: xid GPU{gpu} {rng.choice((48, 79, 94, 119))}'
            steps = ['reset', 'burnin'] if rng.random() < 0.7 else ['reset', 'burnin', 'reboot', 'burnin']
            events.append({'ts': when, 'node': name, 'kind': 'drain', 'detail': reason, 'action': 'ours',
                           'dedup': f'drain|{name}|{reason}@{when:.0f}'})
            events.append({'ts': when, 'node': name, 'kind': 'fault', 'action': 'xid', 'device': f'GPU{gpu}',
                           'gpu_serial': serial, 'outcome': 'hardware' if rng.random() < 0.5 else '',
                           'detail': reason, 'dedup': f'fault|{name}|{reason}@{when:.0f}'})
            for old, new in (('healthy', 'quarantined'), ('quarantined', 'repairing')):
                events.append({'ts': when, 'node': name, 'kind': 'transition', 'action': old, 'outcome': new})
            for number, step in enumerate(steps):
                at = when + 600 * (number + 1)
                job += 1
                events.append({'ts': at, 'node': name, 'kind': 'action', 'action': step, 'device': f'GPU{gpu}',
                               'gpu_serial': serial, 'detail': 'bench'})
                events.append({'ts': at + 300, 'node': name, 'kind': 'outcome', 'action': step, 'job_id': str(job),
                               'outcome': 'fail' if number == 1 and len(steps) == 4 else 'pass', 'value': 300.0})
                events.append({'ts': at + 300, 'node': name, 'kind': 'diagnostic', 'job_id': str(job),
                               'action': step, 'outcome': 'pass', 'detail': '{"command": "%s", "ok": true}' % step})
            done = when + 600 * (len(steps) + 1)
            events.append({'ts': done, 'node': name, 'kind': 'repaired', 'value': done - when})
            events.append({'ts': done, 'node': name, 'kind': 'transition', 'action': 'repairing', 'outcome': 'healthy'})
            counts['episodes'] += 1
        for name in rng.sample(names, 2):
            events.append({'ts': start + DAY / 2, 'node': name, 'kind': 'rma', 'detail': 'llmforge: rma bench'})
            counts['rma'] += 1
        per_day = int(NODES * sightings_rate)
        for _sighting in range(per_day):
            job += 1
            name = names[rng.randrange(NODES)]
            events.append({'ts': start + rng.uniform(0, DAY), 'node': name, 'kind': 'sighting', 'job_id': str(job),
                           'user': f'user{rng.randrange(200)}', 'action': rng.choice(('straggler', 'hang')),
                           'detail': 'rank 12 30% slower', 'dedup': f'sighting|{job}|{name}|straggler'})
        counts['sightings'] += per_day
        if len(events) > 50000:
            with ledger.transaction():
                ledger.add_events(events)
            events = []
    with ledger.transaction():
        ledger.add_events(events)
    return counts


def current_state(ledger: rem.Ledger, rng: random.Random) -> tuple[dict[str, dict], list[str]]:
    """Now: ~1.5 % drained by us (some busy), some in repair with jobs running, a few admin drains and RMAs."""
    names = [node(index) for index in range(1, NODES + 1)]
    slurm = {name: {'state': 'MIXED' if rng.random() < 0.6 else 'IDLE', 'flags': '', 'reason': ''} for name in names}
    chosen = rng.sample(names, 120)
    repairing, drained, admin, rma = chosen[:8], chosen[8:70], chosen[70:100], chosen[100:]
    reservation = list(repairing)
    with ledger.transaction():
        for number, name in enumerate(repairing):
            record = rem.NodeRecord(name, rem.REPAIRING, NOW - 3600, plan={
                'held': True, 'trigger': 'fault', 'entered': NOW - 3600, 'tiers_done': ['reset'],
                'fault': {'kind': 'xid', 'code': 48, 'device': 'GPU1', 'gpu': 1, 'tier': 'reset', 'hardware': True,
                          'reason': 'llmforge: xid GPU1 48'},
                'step': {'kind': 'burnin', 'job_id': str(900 + number), 'token': f't{number}', 'at': NOW - 1200,
                         'attempts': 1}})
            ledger.save_node(record, NOW)
            slurm[name] = {'state': 'ALLOCATED', 'flags': '+MAINT', 'reason': ''}
        for name in drained:
            slurm[name] = {'state': rng.choice(('IDLE', 'MIXED')), 'flags': '+DRAIN',
                           'reason': f'llmforge: xid GPU{rng.randrange(8)} {rng.choice((48, 94, 119, 79))}'}
        for name in admin:
            slurm[name] = {'state': 'IDLE', 'flags': '+DRAIN', 'reason': 'firmware update (ops)'}
        for name in rma:
            ledger.save_node(rem.NodeRecord(name, rem.RMA, NOW - 5 * DAY, 'llmforge: rma S x',
                                            plan={'final': True}), NOW)
            slurm[name] = {'state': 'IDLE', 'flags': '+DRAIN', 'reason': 'llmforge: rma S x'}
    return slurm, reservation


def scontrol_text(slurm: dict[str, dict]) -> str:
    lines = []
    for name, entry in slurm.items():
        reason = f" Reason={entry['reason']} [root@{rem.format_slurm_time(NOW - 600)}]" if entry['reason'] else ''
        lines.append(f"NodeName={name} Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 CPUTot=224 Gres=gpu:h200:8 "
                     f"NodeAddr={name} State={entry['state']}{entry['flags']} ThreadsPerCore=2 Partitions=gpu "
                     f"BootTime={rem.format_slurm_time(NOW - 20 * DAY)} SlurmdStartTime=2027-01-01T00:00:00 "
                     f"CfgTRES=cpu=224,mem=2000G,gres/gpu=8 AllocTRES={reason}")
    return '\n'.join(lines) + '\n'


def sacct_text(rng: random.Random) -> str:
    """A day of jobs: NodeList hostlists of 1 to 64 nodes, one job in twenty with a sighting."""
    lines = []
    for number in range(JOBS_PER_DAY):
        size = rng.choice((1, 1, 1, 2, 4, 8, 16, 64))
        first = rng.randrange(1, NODES - size + 1)
        nodelist = f'gpu[{first:04d}-{first + size - 1:04d}]' if size > 1 else node(first)
        comment = ''
        if number % 20 == 0:
            suspect = node(first + rng.randrange(size))
            comment = f'llmforge-suspect {suspect} straggler step time 31% above median'
        lines.append(f'{2_000_000 + number}|user{rng.randrange(200)}|{nodelist}|'
                     f'{rem.format_slurm_time(NOW - rng.uniform(0, DAY))}|{comment}')
    return '\n'.join(lines) + '\n'


class FakeSlurm:
    """Answers every command of a tick at once with the canned texts."""

    def __init__(self, nodes: str, reservation: list[str], comments: str) -> None:
        self.nodes = nodes
        self.reservation = f"ReservationName=llmforge_quarantine Nodes={','.join(reservation)}\n"
        self.jobs = ''.join(f'{900 + number}|RUNNING|root|llmforge_quarantine|llmforge-remediate {name} burnin t{number}\n'
                            for number, name in enumerate(reservation))
        self.comments = comments

    def __call__(self, argv, timeout):
        if argv[0] == 'scontrol' and argv[1:3] == ['show', 'node']:
            return proc.Completed(0, self.nodes, '')
        if argv[0] == 'scontrol' and argv[1:3] == ['show', 'reservation']:
            return proc.Completed(0, self.reservation, '')
        if argv[0] == 'squeue':
            return proc.Completed(0, self.jobs, '')
        if argv[0] == 'sacct':
            return proc.Completed(0, '' if any(arg.startswith('--name=') for arg in argv) else self.comments, '')
        if argv[0] == 'sbatch':
            return proc.Completed(0, '12345\n', '')
        return proc.Completed(0, '', '')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--sightings-per-node-day', type=float, default=SIGHTINGS_PER_NODE_DAY)
    args = parser.parse_args()
    rng = random.Random(42)
    with tempfile.TemporaryDirectory(prefix='llmforge-bench-ledger-') as tmp:
        config = rem.check_config({'ledger': os.path.join(tmp, 'ledger.sqlite'), 'textfile_dir': tmp})
        ledger = rem.Ledger(config['ledger'])
        started = time.perf_counter()
        counts = build(ledger, args.sightings_per_node_day, rng)
        slurm, reservation = current_state(ledger, rng)
        built = time.perf_counter() - started
        ledger.db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
        events = ledger.db.execute('SELECT COUNT(*) FROM events').fetchone()[0]
        size = os.path.getsize(config['ledger'])
        print(f'ledger: {NODES} nodes x {DAYS} days: {events:,} events ({counts["episodes"]:,} repair episodes, '
              f'{counts["sightings"]:,} sightings at {args.sightings_per_node_day:g}/node/day, {counts["rma"]} RMAs), '
              f'{size / 1e6:.1f} MB, built in {built:.1f} s')
        nodes_text = scontrol_text(slurm)
        comments_text = sacct_text(rng)
        print(f'inputs: scontrol show node -o {len(nodes_text) / 1e6:.1f} MB, sacct of a day {JOBS_PER_DAY:,} jobs '
              f'{len(comments_text) / 1e6:.1f} MB')

        def decide_once():
            snapshot = ledger.snapshot(config, NOW)
            view = rem.SlurmView(rem.parse_nodes(nodes_text), reservation, {}, True,
                                 rem.parse_sacct_comments(comments_text))
            return rem.decide(snapshot, view, config, NOW)

        plan = decide_once()
        changing = [item for item in plan.decisions if item.commands or item.record is not None]
        print(f'plan: {len(plan.decisions):,} decisions ({len(changing):,} changing a node), held {plan.held}, '
              f'waiting {plan.waiting}, sightings ignored (node not in the job) {plan.ignored_sightings}')
        decide_seconds = median_seconds(decide_once, REPEATS)
        print(f'decide (snapshot + parse 4,096 nodes + parse a day of sacct + decide): {decide_seconds:.3f} s '
              f'(median of {REPEATS})')

        fake = FakeSlurm(nodes_text, reservation, comments_text)
        copies = iter(range(REPEATS + 1))

        def tick_once():
            path = os.path.join(tmp, f'copy{next(copies)}.sqlite')
            ledger.backup(path)
            copy = rem.Ledger(path)
            try:
                clock = time.perf_counter()
                rem.tick(dict(config, ledger=path), copy, fake, now=NOW, out=io.StringIO())
                return time.perf_counter() - clock
            finally:
                copy.close()
                for suffix in ('', '-wal', '-shm'):
                    if os.path.exists(path + suffix):
                        os.unlink(path + suffix)

        tick_times = sorted(tick_once() for _run in range(REPEATS))
        print(f'tick (read the fake Slurm, record, decide, apply, metrics): {tick_times[REPEATS // 2]:.3f} s '
              f'(median of {REPEATS})')

        batch = [{'ts': NOW + number, 'node': node(1 + number % NODES), 'kind': 'sighting', 'job_id': str(number),
                  'user': 'u', 'action': 'hang', 'dedup': f'bench|{number}'} for number in range(100_000)]

        def batched():
            for offset in range(0, len(batch), 1000):
                with ledger.transaction():
                    ledger.add_events(batch[offset:offset + 1000])
            ledger.db.execute("DELETE FROM events WHERE dedup LIKE 'bench|%'")

        single = [{'ts': NOW + number, 'node': node(1 + number % NODES), 'kind': 'action', 'action': 'reset',
                   'detail': 'bench-single'} for number in range(2000)]

        def one_by_one():
            for event in single:
                with ledger.transaction():
                    ledger.add_events([event])
            ledger.db.execute("DELETE FROM events WHERE detail = 'bench-single'")

        batched_seconds = median_seconds(batched, REPEATS)
        single_seconds = median_seconds(one_by_one, REPEATS)
        print(f'inserts: {len(batch) / batched_seconds:,.0f} events/s batched (1,000 a transaction), '
              f'{len(single) / single_seconds:,.0f} events/s one a transaction (medians of {REPEATS}, cleanup included)')
        ledger.close()
    checks = (('decide', decide_seconds <= DECIDE_BOUND_S, f'{decide_seconds:.3f} s, bound {DECIDE_BOUND_S} s'),
              ('tick', tick_times[REPEATS // 2] <= TICK_BOUND_S, f'{tick_times[REPEATS // 2]:.3f} s, bound {TICK_BOUND_S} s'),
              ('batched inserts', len(batch) / batched_seconds >= BATCHED_FLOOR,
               f'{len(batch) / batched_seconds:,.0f} events/s, at least {BATCHED_FLOOR:,}'),
              ('single inserts', len(single) / single_seconds >= SINGLE_FLOOR,
               f'{len(single) / single_seconds:,.0f} events/s, at least {SINGLE_FLOOR:,}'))
    if args.sightings_per_node_day != SIGHTINGS_PER_NODE_DAY:
        print('bounds not checked: they are for the default rates')
        return 0
    failed = [f'{label}: {text}' for label, within, text in checks if not within]
    for line in failed:
        print(f'FAIL: {line}', file=sys.stderr)
    if not failed:
        print('within the bounds: ' + '; '.join(f'{label} {text}' for label, _within, text in checks))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
