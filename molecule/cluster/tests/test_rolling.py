# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A driver update rolls across the GPU nodes one batch at a time, proven from Slurm's own records.

A new stand-in driver release is published in the nodes' repository and `llmforge.cluster.gpu` runs with
gpu_driver_update=true and the default batch size (10% of 2 nodes: one node at a time). Each node is drained, its
running job finishes (released a few seconds after Slurm shows the node draining), the node is "rebooted"
(skipped in a container, said in the output) and resumed before the next node is drained: slurmdbd's node events
and the job's accounting record show it. A release whose nvidia-smi fails stops the roll-out in the first batch:
that node stays drained for a look, the next one is left untouched; the next roll-out repairs and resumes it first.
"""

from __future__ import annotations

import datetime as dt
import threading
import time

import pytest

from conftest import CONTROLLER, NODES
from scenario_helpers import recaps, run_playbook, said, wait_for

BUILDER = '/usr/local/share/llmforge-sim/driver-build/standin_driver.py'
REPO = '/srv/llmforge-driver-repo'
REASON = 'gpu_driver: driver update'
# Newer than any release published before (the prepared one is 580.159.04-1), also when the tests run again.
SERIES = f'580.{int(time.time())}'


def publish(hosts, version, broken=False):
    for name in NODES:
        hosts[name].check_output(f"python3 {BUILDER} {'--broken ' if broken else ''}{version} {REPO}")


def installed(node):
    return node.check_output("dpkg-query -W -f '${Version}' nvidia-smi")


def roll():
    return run_playbook('-e', 'gpu_driver_update=true', playbook='llmforge.cluster.gpu', timeout=900)


def stamp(text):
    return dt.datetime.fromisoformat(text) if text not in ('', 'Unknown', 'None') else None


def driver_events(ctl, since):
    """slurmdbd's node events with the gpu_driver reason since `since`: {node: [(start, end)]}."""
    out = ctl.check_output(f"sacctmgr -n -P show event Nodes={','.join(NODES)} Start={since} "
                           "format=NodeName,TimeStart,TimeEnd,Reason")
    events = {}
    for line in out.splitlines():
        node, start, end, reason = line.split('|', 3)
        if reason == REASON:
            events.setdefault(node, []).append((stamp(start), stamp(end)))
    return events


def node_state(ctl, name):
    return ctl.check_output(f'sinfo -h -N -n {name} -o %T').strip()


@pytest.fixture(scope='module')
def started(hosts):
    return hosts[CONTROLLER].check_output("date +%Y-%m-%dT%H:%M:%S").strip()


def release_when_draining(hosts, name, marker, seen):
    """Let the job on `name` end a few seconds after Slurm shows the node draining (drain set, job still running);
    `seen` gets what sinfo said then: the drain reason and Slurm's time stamp of it."""
    ctl = hosts[CONTROLLER]
    if wait_for(lambda: node_state(ctl, name) == 'draining', timeout=600, interval=1):
        seen['draining'] = ctl.check_output(f'sinfo -h -N -n {name} -o "%E|%H"').strip()
    hosts[name].run(f'sleep 5; touch {marker}')


def test_a_broken_release_stops_in_the_first_batch_and_the_fixed_one_rolls_node_by_node_after_jobs(hosts, started):
    """Two roll-outs (each costs a minute, so one test): a release whose nvidia-smi fails stops in the first batch,
    that node drained for a look and the next left untouched; the fixed release then repairs and resumes the first
    node before it drains the second, which waits for the job running on it."""
    ctl = hosts[CONTROLLER]
    first, second = NODES
    before = installed(hosts[second])
    publish(hosts, f'{SERIES}.01-1', broken=True)
    result = roll()
    assert result.returncode != 0
    assert 'nvidia-smi does not answer after the reboot' in said(result), said(result)[-4000:]
    found = recaps(result)
    assert found[first]['failed'] == 1 and second not in found, found
    assert installed(hosts[second]) == before
    assert node_state(ctl, second) == 'idle'
    assert node_state(ctl, first) == 'drained'
    assert ctl.check_output(f'sinfo -h -N -n {first} -o %E').strip() == REASON

    marker = '/tmp/llmforge-release-job'
    hosts[second].run(f'rm -f {marker}')
    job = ctl.check_output(f'sbatch --parsable -w {second} -t 15 -o /dev/null '
                           f'--wrap "while [ ! -e {marker} ]; do sleep 1; done"').split(';')[0]
    assert wait_for(lambda: ctl.check_output(f'squeue -h -j {job} -o %T').strip() == 'RUNNING')
    publish(hosts, f'{SERIES}.02-1')
    seen = {}
    releaser = threading.Thread(target=release_when_draining, args=(hosts, second, marker, seen), daemon=True)
    releaser.start()
    result = roll()
    releaser.join(timeout=5)
    assert result.returncode == 0, said(result)[-4000:]
    assert 'Skipped in a container (docker): reboot after a driver change' in said(result)
    for name in NODES:
        assert installed(hosts[name]) == f'{SERIES}.02-1'
        assert f'DRIVER version      : {SERIES}.02' in hosts[name].check_output('nvidia-smi --version')
        assert node_state(ctl, name) == 'idle'

    events = driver_events(ctl, started)
    print('slurmdbd node events:', events)
    # The first node's drain began with the broken release and ended when the fixed one resumed it.
    assert set(events) == {first, second} and len(events[second]) == 1, events
    assert all(span[1] is not None for spans in events.values() for span in spans), events
    first_resumed = max(span[1] for span in events[first])
    second_drained, second_resumed = events[second][0]
    assert first_resumed <= second_drained, f'{second} drained before {first} was back: {events}'

    state, end = ctl.check_output(f'sacct -X -n -P -j {job} -o State,End').strip().split('|')
    print(f'job {job} on {second}: {state}, ended {end}; {second} while draining: {seen}')
    assert state == 'COMPLETED'
    # Slurm stamps the drain request; slurmdbd's event starts once the node is empty (drained), after the job.
    reason, requested = seen['draining'].split('|')
    assert reason == REASON
    assert stamp(requested) < stamp(end) <= second_drained <= second_resumed, (requested, end, events)
