# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A driver update rolls across the GPU nodes one batch at a time, proven from Slurm's own records.

A new stand-in driver release is published in the nodes' repository and `llmforge.cluster.gpu` runs with
gpu_driver_update=true and the default batch size (10% of 2 nodes: one node at a time). Each node is drained, its
running job finishes, the node is "rebooted" (skipped in a container, said in the output) and resumed before the
next node is drained: slurmdbd's node events and the job's accounting record show it. A release whose nvidia-smi
fails stops the roll-out in the first batch: that node stays drained for a look, the next one is left untouched.
"""

from __future__ import annotations

import datetime as dt

import pytest

from conftest import CONTROLLER, NODES
from scenario_helpers import recaps, run_playbook, said, wait_for

BUILDER = '/usr/local/share/llmforge-sim/driver-build/standin_driver.py'
REPO = '/srv/llmforge-driver-repo'
REASON = 'gpu_driver: driver update'


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


def test_driver_update_rolls_node_by_node_after_running_jobs(hosts, started):
    ctl = hosts[CONTROLLER]
    first, second = NODES
    job = ctl.check_output(f'sbatch --parsable -w {first} -o /dev/null --wrap "sleep 30"').split(';')[0]
    assert wait_for(lambda: ctl.check_output(f'squeue -h -j {job} -o %T').strip() == 'RUNNING')
    publish(hosts, '580.172.08-1')

    result = roll()
    assert result.returncode == 0, said(result)[-4000:]
    assert 'Skipped in a container (docker): reboot after a driver change' in said(result)
    for name in NODES:
        assert installed(hosts[name]) == '580.172.08-1'
        assert 'DRIVER version      : 580.172.08' in hosts[name].check_output('nvidia-smi --version')
        assert node_state(ctl, name) == 'idle'

    events = driver_events(ctl, started)
    print('slurmdbd node events:', events)
    assert set(events) == {first, second} and all(len(spans) == 1 for spans in events.values()), events
    (first_drained, first_resumed), (second_drained, second_resumed) = events[first][0], events[second][0]
    assert None not in (first_resumed, second_resumed), events
    assert first_resumed <= second_drained, f'{second} drained before {first} was back: {events}'

    state, end = ctl.check_output(f'sacct -X -n -P -j {job} -o State,End').strip().split('|')
    print(f'job {job}: {state}, ended {end}')
    assert state == 'COMPLETED'
    assert first_drained <= stamp(end) <= first_resumed, f'job end {end} outside {first}\'s drain {events}'


def test_failing_batch_stops_the_roll_out(hosts, started):
    ctl = hosts[CONTROLLER]
    first, second = NODES
    publish(hosts, '580.172.09-1', broken=True)

    result = roll()
    assert result.returncode != 0
    assert 'nvidia-smi does not answer after the reboot' in said(result), said(result)[-4000:]
    found = recaps(result)
    assert found[first]['failed'] == 1 and second not in found, found
    assert installed(hosts[second]) == '580.172.08-1'
    assert node_state(ctl, second) == 'idle'
    assert node_state(ctl, first) == 'drained'
    assert ctl.check_output(f'sinfo -h -N -n {first} -o %E').strip() == REASON

    # The fixed release: the next roll-out repairs the first node and resumes it, then updates the second.
    publish(hosts, '580.172.10-1')
    result = roll()
    assert result.returncode == 0, said(result)[-4000:]
    for name in NODES:
        assert installed(hosts[name]) == '580.172.10-1'
        assert node_state(ctl, name) == 'idle'
