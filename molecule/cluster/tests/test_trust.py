# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run directories are a trust boundary: another directory user (bob) tries to hand a job a checkpoint of his own.

A checkpoint's metadata is a pickle, so a job that resumed from bob's checkpoint would run bob's code as the job's
user, and as root in validate.yml's training stage. Bob's checkpoint here is complete (marker, shard, metadata) and
its metadata is a live payload that touches /tmp/llmforge-hijacked on whichever host loads it. Every attempt must end
with bob's directory refused or never seen, and the payload never run on any host.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import shlex
import sys

import pytest

from conftest import FIRST, JOB_USER
from scenario_helpers import PROJECT
from test_training import RUNS, job_fields, submit, wait_finished

FLAG = '/tmp/llmforge-hijacked'
BOB_UID = 20002


class Hijack:
    """Pickled, this is the call os.system('touch FLAG'): what loading bob's metadata would run."""

    def __reduce__(self):
        return (os.system, (f'touch {FLAG}',))


def as_bob(host, command):
    return host.run(f'su bob -s /bin/sh -c {shlex.quote(command)}')


def plant_checkpoint(host, directory):
    """As bob: a complete-looking step_00000090 in `directory` whose .metadata is the payload."""
    payload = base64.b64encode(pickle.dumps(Hijack(), protocol=2)).decode()
    marker = json.dumps({'step': 90, 'world_size': 1, 'time': 0, 'job_id': None})
    step = f'{directory}/step_00000090'
    done = as_bob(host, f'mkdir -p {step} && echo {payload} | base64 -d > {step}/.metadata && '
                        f'printf %s {shlex.quote(marker)} > {step}/llmforge-complete.json && touch {step}/__0_0.distcp')
    assert done.rc == 0, done.stderr


def no_payload_ran(hosts):
    ran = {name: host.file(FLAG).exists for name, host in hosts.items()}
    assert not any(ran.values()), ran


@pytest.fixture(autouse=True)
def clean_flag(hosts):
    for host in hosts.values():
        host.run(f'rm -f {FLAG}')


def next_job_id(ctl):
    """The id the next job gets: one more than a job submitted now (the scenario's tests submit one at a time)."""
    return int(ctl.check_output('sbatch --parsable --wrap true').split(';')[0]) + 1


def test_the_run_root_is_roots_and_no_user_can_make_a_run_directory_in_it(hosts, ctl):
    root = ctl.file(RUNS)
    assert (root.user, root.group, root.mode) == ('root', 'root', 0o755)
    job = next_job_id(ctl)
    # A user's directory before that user's first job, the next job's run directory of alice and of the layout before.
    for directory in (f'{RUNS}/nobody-yet-{job}', f'{RUNS}/{JOB_USER}/llmforge-train-{job}', f'{RUNS}/llmforge-train-{job}'):
        denied = as_bob(ctl, f'mkdir {directory}')
        assert denied.rc != 0 and 'Permission denied' in denied.stderr, directory


def test_the_next_jobs_run_directory_cannot_be_pre_made_and_the_job_trains_from_scratch(hosts, ctl, user):
    """alice's next job: bob cannot put his checkpoint where it will look."""
    job = next_job_id(ctl)
    run_dir = f'{RUNS}/{JOB_USER}/llmforge-train-{job}'
    # Where bob can write: his own home. He cannot put it at the job's run directory or at the run root.
    plant_checkpoint(ctl, '/shared/home/bob/trap')
    assert as_bob(ctl, f'ln -s /shared/home/bob/trap {run_dir}').rc != 0
    assert as_bob(ctl, f'ln -s /shared/home/bob/trap {RUNS}/llmforge-train-{job}').rc != 0
    assert submit(user, trainer_args=['--steps', '3', '--ckpt-every-steps', '0']) == str(job)
    state = wait_finished(ctl, job, timeout=300)
    log = ctl.file(f'{RUNS}/{JOB_USER}/llmforge-train-{job}.out').content_string
    assert state == 'COMPLETED', log[-3000:]
    assert 'starting fresh' in log and 'resumed step=' not in log
    directory = ctl.file(run_dir)
    assert (directory.user, directory.mode, directory.is_symlink) == (JOB_USER, 0o700, False)
    assert ctl.file(f'{RUNS}/{JOB_USER}').mode == 0o700
    no_payload_ran(hosts)


def test_a_run_directory_of_another_user_is_refused_and_the_job_is_not_requeued(hosts, ctl):
    """A job pointed at bob's directory (LLMFORGE_RUN_DIR): the trainer refuses it before reading anything.

    The job is root's: root can read whatever bob writes (another directory user cannot even look into his home),
    so only the trainer's own check stands between root and bob's pickle."""
    plant_checkpoint(ctl, '/shared/home/bob/lure')
    job = submit(ctl, trainer_args=['--steps', '3'], env='LLMFORGE_RUN_DIR=/shared/home/bob/lure')
    state = wait_finished(ctl, job, timeout=300)
    log = ctl.file(f'{RUNS}/root/llmforge-train-{job}.out').content_string
    assert state == 'FAILED', log[-3000:]
    assert (f'llmforge-train: refusing the run directory: /shared/home/bob/lure is owned by uid {BOB_UID}, not by '
            "this job's uid 0") in log
    assert 'not requeued' in log and 'step=' not in log
    assert job_fields(ctl, job).get('Restarts', '0') == '0'
    no_payload_ran(hosts)


def validate_stage_wrapper():
    """validate.yml's srun payload, from the collection the scenario installed."""
    sys.path.insert(0, os.path.join(PROJECT, 'build', 'user', 'collections'))
    try:
        from ansible_collections.llmforge.cluster.plugins.plugin_utils import _training_fleet
    finally:
        sys.path.pop(0)
    return _training_fleet.RUN_WRAPPER, _training_fleet.JOB_NAME


def test_validate_training_refuses_a_run_directory_another_user_made_first(hosts, ctl):
    """Validate's runs are root's: bob squats the next jobs' /tmp/llmforge-validate-<id> on the node it runs on."""
    node = hosts[FIRST]
    first = next_job_id(ctl)
    for job in range(first, first + 4):
        plant_checkpoint(node, f'/tmp/llmforge-validate-{job}')
    wrapper, name = validate_stage_wrapper()
    trainer = '/shared/llmforge/envs/llmforge-train/bin/llmforge-train'
    argv = ['srun', f'--job-name={name}', f'--nodelist={FIRST}', '--nodes=1', '--ntasks-per-node=1',
            'bash', '-c', wrapper, name, '/tmp', trainer, '--steps', '3', '--device', 'cpu']
    done = ctl.run(f'timeout 300 {shlex.join(argv)}')
    assert done.rc == 2, done.stdout + done.stderr
    [job] = re.findall(r'refusing the run directory: /tmp/llmforge-validate-(\d+) exists already', done.stderr)
    assert first <= int(job) < first + 4
    assert 'step=' not in done.stdout
    # Bob's directory is left as it was (root removes only a run directory it made), and nothing of it ran.
    squatted = node.file(f'/tmp/llmforge-validate-{job}/step_00000090/.metadata')
    assert squatted.exists and squatted.uid == BOB_UID
    no_payload_ran(hosts)
    for job in range(first, first + 4):
        node.run(f'rm -rf /tmp/llmforge-validate-{job}')
