# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Self-healing drills: a fault under a running job ends with the job training again and the node repaired or sent
back, with no one acting.

Each drill injects a real fault into the reference job on both GPU nodes, or into a node, and waits for the cluster
to handle it: (a) a node killed, (b) an Xid 79 under the job (in-job drain, reboot through Slurm, burn-in, resume),
(c) a slow GPU (straggler sightings, suspect, failing burn-in, repair), (d) a rank that stops stepping (stacks,
requeue), (e) a trainer that cannot run on healthy nodes (FAILED after max_restarts), (f) a hardware Xid repeated
on one GPU (RMA with its evidence bundle), (g) an administrator's drain (left alone). Their timelines come from
Slurm's own records (sacct's runs of the job and of the repair jobs, scontrol's node times) and the repair ledger,
and are printed. The jobs are a directory user's (alice, submitting from the login node); the faults, the repair
jobs and the ledger are root's. The repair lifecycle's ticks are started by hand (`systemctl start llmforge-remediate.service`):
the demo's timer waits an hour so that the other tests' deliberate drains are not repaired under them.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess

import pytest

from conftest import FIRST, NODES, SECOND, drain_reasons
from scenario_helpers import wait_for
from test_training import checkpoints, job_fields, log_of, run_dir, submit, wait_finished

# On by default; LLMFORGE_SELF_HEALING_DRILLS=0 leaves them out (a quicker verify while working on something else).
DRILLS = os.environ.get('LLMFORGE_SELF_HEALING_DRILLS', '1') == '1'
pytestmark = pytest.mark.skipif(not DRILLS, reason='LLMFORGE_SELF_HEALING_DRILLS=0')
# Long enough never to finish during a drill; a checkpoint every 10 steps. The drills cancel the job at the end.
LONG_RUN = ['--steps', '100000', '--ckpt-every-steps', '10', '--log-every', '1']
# The job's watcher looks every 2 s; a failed rank with the step still running after 10 s means a lost node.
FAST = 'LLMFORGE_POLL_SECONDS=2 LLMFORGE_LOST_GRACE=10 LLMFORGE_STOP_GRACE=10'


def now(ctl):
    return ctl.check_output('date +%Y-%m-%dT%H:%M:%S').strip()  # as Slurm prints its times


def runs(ctl, job):
    """The job's runs as Slurm accounted them (sacct -D: one row per start, the requeued ones included)."""
    out = ctl.check_output(f'sacct -D -X -n -P -j {job} -o JobID,State,Start,End,NodeList,Restart%0 2>/dev/null || '
                           f'sacct -D -X -n -P -j {job} -o JobID,State,Start,End,NodeList')
    rows = [line.split('|') for line in out.splitlines() if line.strip()]
    return [{'state': row[1], 'start': row[2], 'end': row[3], 'nodes': row[4]} for row in rows]


def node_field(ctl, node, field):
    return dict(re.findall(r'(\w+)=(\S*)', ctl.check_output(f'scontrol show node -o {node}'))).get(field, '')


def node_usable(ctl, node):
    state = ctl.check_output(f'sinfo -h -N -n {node} -o %T').strip()
    return state in ('idle', 'mixed', 'allocated')


def seconds_between(first, second):
    parse = datetime.datetime.fromisoformat
    return (parse(second) - parse(first)).total_seconds()


def timeline(title, events):
    """Print `events` [(label, iso time)] in time order with the seconds since the first."""
    events = sorted(events, key=lambda event: event[1])
    start = events[0][1]
    lines = [f'{title}:'] + [f'  {label:<28} {when}  (+{seconds_between(start, when):.0f} s)' for label, when in events]
    print('\n'.join(lines))


def resumed_after(ctl, job, restart):
    """The step the first run of the job from `restart` on resumed at ("resumed step=N"), None before one has.

    A run after the first restart may itself be cut short: seen once in drill (a), the new run's task on the node that
    had just come back was killed (SIGKILL) a second after it started, most likely by the clean-up of the job's lost
    run on that node (the same job id); the job requeued itself again within its restart budget. The drills want the
    job training again, whichever restart brought it back.
    """
    text = log_of(ctl, job)
    runs_text = re.split(r'^llmforge-train: \S+ job \d+ restart \d+ ', text, flags=re.M)
    for chunk in runs_text[restart + 1:]:
        found = re.search(r'^resumed step=(\d+) ', chunk, re.M)
        if found:
            return int(found.group(1))
    return None


def docker(*argv):
    subprocess.run(['docker', *argv], check=True, capture_output=True, timeout=120)


@pytest.fixture
def healthy_nodes(hosts, ctl):
    """Both GPU nodes in service before and after the drill (a drill that failed half-way leaves none behind)."""
    yield
    for node in NODES:
        subprocess.run(['docker', 'start', node], capture_output=True, timeout=120, check=False)
    for node in NODES:
        wait_for(lambda node=node: node_usable(ctl, node) or 'DRAIN' in node_field(ctl, node, 'State'), timeout=240)
        reason = drain_reasons(ctl).get(node, '')
        if reason.startswith('llmforge:') or reason.startswith('drill'):
            ctl.run(f'scontrol update NodeName={node} State=RESUME')


def test_a_hard_node_loss_requeues_at_once_and_the_node_returns_by_itself(hosts, ctl, user, healthy_nodes):
    """docker kill gpu2 under the job: the job notices within seconds (not SlurmdTimeout), requeues itself; the
    node, started again, comes back with its GPU devices and slurmd by itself; the job resumes under its id."""
    job = submit(user, trainer_args=LONG_RUN, env=FAST)
    directory = run_dir(job)
    try:
        assert wait_for(lambda: len(checkpoints(ctl, directory)) >= 2, timeout=300, interval=1), log_of(ctl, job)[-3000:]
        before = checkpoints(ctl, directory)[-1]
        fault = now(ctl)
        docker('kill', SECOND)
        assert wait_for(lambda: job_fields(ctl, job).get('Restarts') == '1', timeout=180, interval=1), \
            log_of(ctl, job)[-3000:]
        requeued = runs(ctl, job)[0]['end']
        assert seconds_between(fault, requeued) < 120, (fault, requeued)  # SlurmdTimeout is 300 s
        docker('start', SECOND)
        assert wait_for(lambda: node_usable(ctl, SECOND), timeout=300, interval=2), \
            ctl.check_output(f'scontrol show node {SECOND}')
        back = node_field(ctl, SECOND, 'SlurmdStartTime')
        assert hosts[SECOND].run('test -c /dev/nvidia0').rc == 0  # made again at boot by the stand-in driver
        assert wait_for(lambda: resumed_after(ctl, job, 1) is not None, timeout=420, interval=2), log_of(ctl, job)[-3000:]
        second = runs(ctl, job)[-1]
        resumed = resumed_after(ctl, job, 1)
        assert resumed >= before and job_fields(ctl, job).get('JobState') == 'RUNNING'
        timeline(f'hard node loss drill (job {job}, resumed at step {resumed}, last checkpoint before the fault {before}, '
                 f'{len(runs(ctl, job))} runs)',
                 [('fault: docker kill ' + SECOND, fault), ('job requeued (sacct End)', requeued),
                  (f'{SECOND} slurmd back', back), ('job running again (sacct Start)', second['start'])])
    finally:
        ctl.run(f'scancel {job}')


def remediate(ctl):
    """One tick of the repair lifecycle on the controller, as its timer starts it."""
    result = ctl.run('systemctl start llmforge-remediate.service')
    assert result.rc == 0, result.stdout + result.stderr + ctl.run('journalctl -u llmforge-remediate -n 30').stdout


def ledger_state(ctl, node):
    """The node's state in the ledger: the first line of `llmforge-remediate --history NODE` is its record (JSON)."""
    out = ctl.check_output(f'llmforge-remediate --history {node}')
    return json.loads(out.splitlines()[0]).get('state', '') if out.strip() else ''


def repair_jobs(ctl, node):
    """The repair jobs Slurm ran on `node`: [(step, start, end, state)] from sacct."""
    out = ctl.check_output('sacct -X -n -P -S now-2hours --name=llmforge-repair -o Comment,Start,End,State,NodeList')
    rows = [line.split('|') for line in out.splitlines() if line.strip()]
    return [(row[0].split()[2], row[1], row[2], row[3]) for row in rows if len(row[0].split()) >= 3
            and row[0].split()[1] == node]


def test_an_xid_requeues_the_job_and_the_node_is_rebooted_burnt_in_and_resumed(hosts, ctl, user, healthy_nodes):
    """Xid 79 on a GPU of gpu2 under the job (the trainer's CUDA call aborts): the job's own node check drains gpu2
    `llmforge: xid GPU3 79` and requeues within seconds; the repair lifecycle quarantines gpu2, reboots it through
    Slurm, burns it in, resumes it; the job trains again from its last checkpoint; the ledger holds every step."""
    job = submit(user, trainer_args=LONG_RUN, env=FAST)
    directory = run_dir(job)
    try:
        assert wait_for(lambda: len(checkpoints(ctl, directory)) >= 1, timeout=300, interval=1), log_of(ctl, job)[-3000:]
        before = checkpoints(ctl, directory)[-1]
        fault = now(ctl)
        hosts[SECOND].check_output(f'llmforge-sim-fault xid 79 --gpu 3 --abort-job {job}')
        assert wait_for(lambda: job_fields(ctl, job).get('Restarts') == '1', timeout=120, interval=1), \
            log_of(ctl, job)[-3000:]
        requeued = runs(ctl, job)[0]['end']
        assert seconds_between(fault, requeued) < 60, (fault, requeued)
        assert drain_reasons(ctl).get(SECOND, '').startswith('llmforge: xid GPU3 79'), drain_reasons(ctl)
        drained = node_field(ctl, SECOND, 'LastBusyTime') or requeued

        def repaired():
            remediate(ctl)
            return ledger_state(ctl, SECOND) == 'healthy' and node_usable(ctl, SECOND)
        assert wait_for(repaired, timeout=600, interval=5), \
            ctl.check_output(f'llmforge-remediate --history {SECOND}') + ctl.check_output(f'scontrol show node {SECOND}')
        history = ctl.check_output(f'llmforge-remediate --history {SECOND}')
        for words in ('fault', 'reboot', 'burnin', 'repaired'):
            assert words in history, history
        booted = node_field(ctl, SECOND, 'BootTime')
        jobs = repair_jobs(ctl, SECOND)
        burnin = [row for row in jobs if row[0] == 'burnin']
        assert burnin and burnin[-1][3] == 'COMPLETED', jobs
        assert wait_for(lambda: resumed_after(ctl, job, 1) is not None, timeout=420, interval=2), log_of(ctl, job)[-3000:]
        resumed = resumed_after(ctl, job, 1)
        assert resumed >= before
        del drained
        timeline(f'Xid drill (job {job}, resumed at step {resumed}, last checkpoint before the fault {before})',
                 [(f'fault: Xid 79 GPU3 on {SECOND}', fault), ('job requeued (sacct End)', requeued),
                  (f'{SECOND} back from its reboot (BootTime)', booted),
                  ('burn-in job start (sacct)', burnin[-1][1]), ('burn-in job end (sacct)', burnin[-1][2]),
                  ('job running again (sacct Start)', runs(ctl, job)[-1]['start'])])
        print('ledger: ' + '; '.join(f"{event['kind']} {event.get('action', '')} {event.get('outcome', '')}".strip()
                                     for event in reversed([json.loads(line) for line in history.splitlines()[1:]])))
    finally:
        ctl.run(f'scancel {job}')


def drained_for(hosts, ctl, node, code, gpu):
    """Inject Xid `code` on GPU `gpu` of `node` and have its health check run (the socket the epilog and the job use)."""
    hosts[node].check_output(f'llmforge-sim-fault xid {code} --gpu {gpu}')
    hosts[node].run('llmforge-nodecheck-request')
    assert wait_for(lambda: drain_reasons(ctl).get(node, '').startswith(f'llmforge: xid GPU{gpu} {code}'),
                    timeout=60, interval=1), drain_reasons(ctl)
    return now(ctl)


def test_a_repeated_hardware_xid_on_one_gpu_sends_the_node_to_rma_with_its_evidence(hosts, ctl, healthy_nodes):
    """Xid 48 (an uncorrectable ECC error, a hardware fault) on GPU5 of gpu1: the repair lifecycle resets the GPU,
    burns the node in and returns it. The same fault again on the same GPU: RMA. The node stays drained
    `llmforge: rma <GPU serial> ...`; the evidence bundle on the node holds the GPU's nvidia-smi record, the kernel's
    Xid lines, the DCGM diagnostic, the RDMA counters, dmidecode and the node's ledger history, with a manifest
    whose digests match."""
    node, serial = FIRST, ''
    first = drained_for(hosts, ctl, node, 48, 5)

    def ticked_to(wanted):
        remediate(ctl)
        return ledger_state(ctl, node) == wanted and (wanted != 'healthy' or node_usable(ctl, node))
    assert wait_for(lambda: ticked_to('healthy'), timeout=300, interval=3), \
        ctl.check_output(f'llmforge-remediate --history {node}')
    returned = now(ctl)
    record = json.loads(ctl.check_output(f'llmforge-remediate --history {node}').splitlines()[0])
    serial = record['gpus']['5']['serial']
    second = drained_for(hosts, ctl, node, 48, 5)

    # RMA: the node waits in the reservation, resumed, for its evidence job; drained `llmforge: rma` after it.
    def evidence_done():
        events = [json.loads(line) for line in ctl.check_output(f'llmforge-remediate --history {node}').splitlines()[1:]]
        return any(event.get('kind') == 'outcome' and event.get('action') == 'evidence' for event in events)
    assert wait_for(lambda: ticked_to('rma') and evidence_done(), timeout=300, interval=3), \
        ctl.check_output(f'llmforge-remediate --history {node}')
    reason = drain_reasons(ctl)[node]
    assert reason.startswith(f'llmforge: rma {serial} '), reason
    for _tick in range(2):  # it stays drained and nothing more is started on it
        remediate(ctl)
    assert drain_reasons(ctl).get(node) == reason and ledger_state(ctl, node) == 'rma'
    assert node_field(ctl, node, 'Reservation') in ('', '(null)')
    bundle = hosts[node].check_output('ls -t /var/lib/llmforge/evidence/evidence-*.tar.gz | head -1').strip()
    check = hosts[node].check_output(f"""python3 - <<'EOF'
import hashlib, json, tarfile
with tarfile.open('{bundle}') as archive:
    members = {{m.name.split('/', 1)[1]: archive.extractfile(m).read() for m in archive.getmembers()}}
manifest = json.loads(members.pop('manifest.json'))
bad = [name for name, data in members.items() if manifest['members'][name]['sha256'] != hashlib.sha256(data).hexdigest()]
history = [json.loads(line) for line in members['ledger-history.jsonl'].decode().splitlines()]
print(json.dumps({{'members': sorted(members), 'bad': bad, 'reason': manifest['reason'],
                  'xid': [line for line in members['kernel-faults.log'].decode().splitlines() if 'Xid' in line],
                  'serial': '{serial}' in members['nvidia-smi-q.xml'].decode(),
                  'history': [event['kind'] for event in history]}}))
EOF""")
    found = json.loads(check)
    assert not found['bad'] and found['serial'] and found['reason'] == reason, found
    # dmidecode runs in a container too; it finds no DMI table there, which its stderr member says.
    assert {'nvidia-smi-q.xml', 'kernel-faults.log', 'dcgm-diag-r1.json', 'rdma-counters.json', 'dmidecode.txt',
            'ledger-history.jsonl', 'reason.txt', 'commands.json'} <= set(found['members']), found
    assert any(': 48, ' in line for line in found['xid']), found['xid']
    assert found['history'].count('fault') >= 2 and 'rma' in found['history'], found['history']
    jobs = repair_jobs(ctl, node)
    timeline(f'RMA drill ({node} GPU5 serial {serial}; bundle {bundle})',
             [('first fault: Xid 48 GPU5, drained', first)]
             + [(f'{step} job {state.lower()} (sacct End)', end) for step, _start, end, state in jobs
                if seconds_between(first, end) >= 0]
             + [('returned to service', returned), ('second fault: Xid 48 GPU5, drained', second),
                (f'drained "{reason[:40]}..."', ctl.check_output(f'sinfo -h -R -n {node} -o %H').strip())])
    # An administrator sends the GPU back, replaces it and returns the node: the ledger follows.
    hosts[node].check_output(': > /run/llmforge-sim/kernel.log')
    hosts[node].run('/usr/local/sbin/llmforge-nodecheck')
    ctl.check_output(f'scontrol update NodeName={node} State=RESUME')
    remediate(ctl)
    assert ledger_state(ctl, node) == 'healthy'


def test_a_slow_gpu_is_seen_as_a_straggler_made_suspect_fails_its_burnin_and_is_repaired(hosts, ctl, user, healthy_nodes):
    """A GPU of gpu2 runs slow (the stand-in's fault knob: its rank's processes get a quarter of the time, and DCGM's
    level-3 diagnostic fails its performance tests): each job's rank 0 sees the straggler and names gpu2 in the job's
    comment; after the sightings of three jobs the repair lifecycle makes gpu2 suspect and quarantines it for a
    burn-in, which fails: gpu2 goes on to the repair tiers, not back to service. The fault cleared, the repair ends
    with a passing burn-in and gpu2 in service."""
    node = SECOND
    args = ['--steps', '16', '--ckpt-every-steps', '1000', '--log-every', '1', '--straggler-steps', '5']
    jobs, sighted = [], []
    try:
        for _job in range(3):
            job = submit(user, trainer_args=args, env=FAST)
            jobs.append(job)
            assert wait_for(lambda job=job: re.search(r'^step=3 ', log_of(ctl, job), re.M) if
                            ctl.run(f'test -f {run_dir(job)}.out').rc == 0 else False, timeout=300, interval=1)
            hosts[node].check_output(f'llmforge-sim-fault slow --gpu 6 --job {job}')
            state = wait_finished(ctl, job, timeout=300)
            comment = ctl.check_output(f'sacct -X -n -P -j {job} -o Comment').strip()
            assert state == 'COMPLETED' and f'llmforge-suspect {node} straggler' in comment, \
                f'{state} {comment}\n{log_of(ctl, job)[-2000:]}'
            sighted.append((f'job {job}: straggler {comment.split("straggler", 1)[1].strip()[:20]} (sacct End)',
                            runs(ctl, job)[-1]['end']))

        def burnt_in_and_failed():
            remediate(ctl)
            history = ctl.check_output(f'llmforge-remediate --history {node}')
            return '"outcome": "fail"' in history and '"action": "burnin"' in history
        assert wait_for(burnt_in_and_failed, timeout=300, interval=3), \
            ctl.check_output(f'llmforge-remediate --history {node}')
        events = [json.loads(line) for line in ctl.check_output(f'llmforge-remediate --history {node}').splitlines()[1:]]
        states = [(event['action'], event['outcome']) for event in reversed(events) if event['kind'] == 'transition']
        assert ('healthy', 'suspect') in states and ('suspect', 'repairing') in states, states
        assert ledger_state(ctl, node) in ('quarantined', 'repairing') and not node_usable(ctl, node), states
        failed = [event for event in events if event['kind'] == 'outcome' and event.get('action') == 'burnin']
        hosts[node].check_output('llmforge-sim-fault clear')

        def repaired():
            remediate(ctl)
            return ledger_state(ctl, node) == 'healthy' and node_usable(ctl, node)
        assert wait_for(repaired, timeout=600, interval=3), ctl.check_output(f'llmforge-remediate --history {node}')
        stamp = datetime.datetime.fromtimestamp
        timeline(f'straggler drill ({node}; jobs {", ".join(jobs)})', sighted + [
            ('burn-in failed (ledger)', stamp(failed[0]['ts']).strftime('%Y-%m-%dT%H:%M:%S')),
            ('back in service (ledger)', stamp(json.loads(ctl.check_output(
                f'llmforge-remediate --history {node}').splitlines()[0])['since']).strftime('%Y-%m-%dT%H:%M:%S'))])
    finally:
        hosts[node].run('llmforge-sim-fault clear')
        for job in jobs:
            ctl.run(f'scancel {job}')


def test_a_hung_rank_gets_its_stacks_taken_and_the_job_requeued(hosts, ctl, user, healthy_nodes):
    """One rank stops (SIGSTOP): no heartbeat advances, the job takes every rank's stacks, names the stopped rank's
    node a suspect in its comment, requeues itself and resumes."""
    job = submit(user, trainer_args=LONG_RUN, env=f'{FAST} LLMFORGE_HANG_SECONDS=20')
    directory = run_dir(job)
    try:
        assert wait_for(lambda: len(checkpoints(ctl, directory)) >= 1, timeout=300, interval=1), log_of(ctl, job)[-3000:]
        # The trainer's rank: python .../llmforge_train.py --run-dir DIR (the [l]: not the shell that runs pgrep).
        pids = hosts[SECOND].check_output(f"pgrep -f '[l]lmforge_train.py --run-dir {directory} ' || true").split()
        assert pids, 'no trainer process on ' + SECOND
        fault = now(ctl)
        hosts[SECOND].check_output(f'kill -STOP {" ".join(pids)}')
        assert wait_for(lambda: job_fields(ctl, job).get('Restarts') == '1', timeout=240, interval=2), \
            log_of(ctl, job)[-3000:]
        requeued = runs(ctl, job)[0]['end']
        stacks = ctl.check_output(f'ls {directory}/stacks').split()
        assert any(name.startswith(SECOND) for name in stacks), stacks
        # The job's comment as slurmctld holds it (slurmdbd records it when the job ends).
        comment = re.search(r'Comment=(.*)', ctl.check_output(f'scontrol show job {job}')).group(1)
        assert f'llmforge-suspect {SECOND} hang' in comment, comment
        assert wait_for(lambda: resumed_after(ctl, job, 1) is not None, timeout=300, interval=2), log_of(ctl, job)[-3000:]
        timeline(f'hang drill (job {job}, stacks {", ".join(stacks)})',
                 [(f'fault: SIGSTOP a rank on {SECOND}', fault), ('job requeued (sacct End)', requeued),
                  ('job running again (sacct Start)', runs(ctl, job)[-1]['start'])])
    finally:
        ctl.run(f'scancel {job}')
        hosts[SECOND].run(f"pkill -CONT -f '[l]lmforge_train.py --run-dir {directory} '")


def test_a_crash_on_healthy_nodes_fails_the_job_after_max_restarts(ctl, user, healthy_nodes):
    """The trainer cannot run (CUDA asked on CPU-only nodes): both nodes check healthy, so it is the trainer's own
    error; the job restarts LLMFORGE_MAX_RESTARTS times and then ends FAILED with the trainer's error."""
    job = submit(user, trainer_args=['--steps', '20', '--device', 'cuda'], env=f'{FAST} LLMFORGE_MAX_RESTARTS=1')
    state = wait_finished(ctl, job, timeout=400)
    log = log_of(ctl, job)
    assert state == 'FAILED', f'{state}\n{log[-3000:]}'
    assert job_fields(ctl, job).get('Restarts', '1') == '1' or len(runs(ctl, job)) == 2, runs(ctl, job)
    assert 'restart budget of 1 is spent: the job fails' in log, log[-3000:]
    assert log.count('node check:') == 2 and 'a node of the job failed its check' not in log, log[-3000:]
    assert re.search(r'CUDA|cuda', log), log[-3000:]
    print(f'crash drill (job {job}): ' + '; '.join(f"{run['state']} {run['start']}..{run['end']}" for run in runs(ctl, job)))


def test_an_administrators_drain_is_never_repaired_or_resumed(hosts, ctl, healthy_nodes):
    """A node the administrator drained keeps its reason through a fault, the health check and the repair tick."""
    reason = 'admin: fan swap Tuesday'
    ctl.check_output(f'scontrol update NodeName={FIRST} State=DRAIN Reason="{reason}"')
    try:
        hosts[FIRST].check_output('llmforge-sim-fault xid 79 --gpu 1')
        result = hosts[FIRST].run('/usr/local/sbin/llmforge-nodecheck')
        assert 'xid GPU1 79' in result.stdout and 'drained by someone else' not in result.stderr, result.stdout
        tick = ctl.run('systemctl start llmforge-remediate.service')
        assert tick.rc == 0, tick.stdout + tick.stderr
        assert drain_reasons(ctl).get(FIRST) == reason, drain_reasons(ctl)
        assert node_field(ctl, FIRST, 'Reservation') in ('', '(null)')
        assert 'REBOOT' not in node_field(ctl, FIRST, 'State')
    finally:
        hosts[FIRST].check_output(': > /run/llmforge-sim/kernel.log')
        hosts[FIRST].run('/usr/local/sbin/llmforge-nodecheck')
        ctl.check_output(f'scontrol update NodeName={FIRST} State=RESUME')
