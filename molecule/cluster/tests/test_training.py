# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Training on the cluster: the reference PyTorch job through real Slurm on two nodes (CPU, gloo), and its drills.

The training_env role built the environment once on the shared volume (/shared, a Lustre or NFS mount on real
clusters) and installed the reference job's sbatch script there. A directory user (alice) logged in on the login node
submits it, as every user does; it trains on both GPU nodes; its time limit and a
half-written checkpoint each end with the job resuming from its newest complete checkpoint under the same job id,
without anyone resubmitting it. A node lost under the job and the other faults are test_self_healing.py's drills.
"""

from __future__ import annotations

import json
import os
import re
import shlex

import pytest

from conftest import FIRST, JOB_USER, NODES, set_hardware
from scenario_helpers import recaps, run_playbook, said, wait_for

# Where the training_env role builds the environment (training_env_root): on the shared storage.
ENVS = os.environ.get('LLMFORGE_ENV_ROOT', '/shared/llmforge/envs')
ENV = f'{ENVS}/llmforge-train'
SBATCH = f'{ENV}/share/llmforge/llmforge-train.sbatch'
RUNS = '/shared/llmforge/runs'
USER_RUNS = f'{RUNS}/{JOB_USER}'  # each user's runs are in <run root>/<user> (0700, the user's)
TARGET = 60          # the inventory's training_env_job_args: --steps 60 --ckpt-every-steps 10
DRILLS = os.environ.get('LLMFORGE_TRAINING_DRILLS', '1') == '1'


def submit(user, *sbatch_args, trainer_args=(), env=''):
    """The reference job, submitted by `user` (a login session, conftest.Session) with its id."""
    argv = ['sbatch', '--parsable', *sbatch_args, SBATCH, *trainer_args]
    return user.check_output(f'{env} {shlex.join(argv)}').strip().split(';')[0]


def job_fields(ctl, job):
    """scontrol's view of a job ({} once it left slurmctld's memory)."""
    out = ctl.run(f'scontrol show job -o {job}').stdout
    return dict(re.findall(r'(\w+)=(\S*)', out))


def accounting_state(ctl, job):
    return ctl.check_output(f'sacct -X -n -P -j {job} -o State').strip().split('\n')[0]


def wait_finished(ctl, job, timeout):
    wait_for(lambda: job_fields(ctl, job).get('JobState') in ('COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT',
                                                              'NODE_FAIL', None), timeout=timeout, interval=3)
    return job_fields(ctl, job).get('JobState') or accounting_state(ctl, job)


def run_dir(job):
    return f'{USER_RUNS}/llmforge-train-{job}'


def read_json(host, path):
    return json.loads(host.file(path).content_string)


def log_of(ctl, job):
    return ctl.file(f'{USER_RUNS}/llmforge-train-{job}.out').content_string


def checkpoints(ctl, directory):
    """Step numbers of the complete checkpoints in a run directory."""
    out = ctl.run(f'ls -d {directory}/step_*/llmforge-complete.json 2>/dev/null').stdout
    return sorted(int(m) for m in re.findall(r'/step_(\d+)/llmforge-complete\.json', out))


@pytest.fixture(scope='module')
def trained(ctl, user):
    """The reference job as installed: 2 nodes, TARGET steps, a checkpoint every 10 steps."""
    job = submit(user)
    state = wait_finished(ctl, job, timeout=600)
    assert state == 'COMPLETED', f'{state}\n{log_of(ctl, job)[-3000:]}'
    return {'job': job, 'summary': read_json(ctl, f'{run_dir(job)}/summary-{job}-0.json'), 'log': log_of(ctl, job)}


def test_both_nodes_see_the_same_environment(ctl):
    manifests = [read_json(ctl, f'{ENV}/manifests/{name}.json') for name in NODES]
    assert manifests[0] == manifests[1]
    assert manifests[0]['torch'] and manifests[0]['python'] and 'gloo' in manifests[0]['distributed_backends']
    assert manifests[0]['driver'], 'the stand-in driver reports a version through nvidia-smi'
    marker = read_json(ctl, f'{ENV}/llmforge-env.json')
    assert ctl.file(ENV).is_symlink and ctl.file(ENV).linked_to == f"{ENVS}/{marker['name']}"
    assert re.fullmatch(r'llmforge-train-[0-9a-f]{12}', marker['name'])


def test_the_environment_loads_as_a_module_file(ctl):
    modulefile = ctl.file(f'{ENVS}/modulefiles/llmforge-train/.version').content_string
    version = re.search(r'ModulesVersion "([0-9a-f]{12})"', modulefile).group(1)
    text = ctl.file(f'{ENVS}/modulefiles/llmforge-train/{version}').content_string
    assert text.startswith('#%Module') and f'prepend-path PATH {ENVS}/llmforge-train-{version}/bin' in text


@pytest.mark.parametrize('name', NODES)
def test_pytorch_and_venv_came_in_the_slurm_package_transaction(hosts, name):
    # slurm_hosts.yml installs the training environment's OS packages in each host's Slurm transaction, in
    # parallel on every host, instead of in a play of their own after the Slurm plays.
    host = hosts[name]
    if not host.package('python3-torch').is_installed:
        pytest.skip(f'{name} takes no PyTorch from the OS packages (training_env_os_packages)')
    history = host.file('/var/log/apt/history.log').content_string
    installs = [line for line in history.splitlines() if re.match(r'Install: .*\bpython3-torch:', line)]
    assert len(installs) == 1, f'python3-torch installed in {len(installs)} apt transactions on {name}'
    assert re.search(r'\bslurmd:', installs[0]), f'python3-torch came without slurmd on {name}: {installs[0][:300]}'
    # Python's venv module too (the first install: the drift test removes it later and the re-run puts it back).
    venv = next(line for line in history.splitlines() if re.match(r'Install: .*\bpython3-venv:', line))
    assert venv == installs[0], f'python3-venv came in another apt transaction than PyTorch on {name}: {venv[:300]}'
    # And the compute node's SSH server with pam_slurm_adopt, which slurm_node would otherwise install on its own.
    ssh = [line for line in history.splitlines() if re.match(r'Install: .*\bopenssh-server:', line)]
    assert ssh[:1] == installs[:1] and re.search(r'\blibpam-slurm-adopt:', installs[0]), \
        f'the SSH server or pam_slurm_adopt came in another apt transaction than PyTorch on {name}'


def test_reference_job_trains_on_two_nodes(trained):
    summary = trained['summary']
    assert summary['world_size'] == 2 and summary['nodes'] == sorted(NODES), summary
    assert summary['restart_count'] == 0 and summary['resumed_step'] == 0 and summary['first_step'] == 1
    assert summary['last_step'] == TARGET and summary['exit_reason'] == 'target'
    assert summary['loss_last'] < summary['loss_first'], summary
    assert summary['tokens_per_s'] > 0 and [c['step'] for c in summary['checkpoints']] == list(range(10, TARGET + 1, 10))
    assert re.search(rf'^step={TARGET} loss=', trained['log'], re.M), trained['log'][-2000:]


def test_checkpoints_are_complete_and_nothing_half_written_is_left(ctl, trained):
    directory = run_dir(trained['job'])
    assert checkpoints(ctl, directory) == list(range(10, TARGET + 1, 10))
    # The user's files, private to the user: nothing of the run is root's or readable by other users.
    owners = ctl.check_output(f'find {directory} {directory}.out -printf "%u %m\\n" | sort -u').splitlines()
    assert owners and all(line.split()[0] == JOB_USER for line in owners), owners
    run_root = ctl.file(USER_RUNS)
    assert (run_root.user, run_root.mode) == (JOB_USER, 0o700)
    assert ctl.run(f'ls -a {directory} | grep -c "^\\.tmp"').stdout.strip() == '0'


def test_half_written_checkpoints_are_never_resumed_from(ctl, user, trained):
    """A copy of the finished run gets the leftovers of writes killed half-way; the next job resumes from step 60."""
    directory = f'{USER_RUNS}/half-written'
    user.check_output(f'rm -rf {directory} && cp -a {run_dir(trained["job"])} {directory}')
    # Killed before the rename: a hidden temporary directory. Killed between rename and marker cannot happen (the
    # marker is written before the rename), but a copy interrupted by hand looks like this: no marker.
    user.check_output(f'mkdir {directory}/.tmp-step_00000090-1 && echo partial > {directory}/.tmp-step_00000090-1/__0_0.distcp')
    user.check_output(f'mkdir {directory}/step_00000080 && echo partial > {directory}/step_00000080/__0_0.distcp')
    # Marked complete, but its shard files are truncated: it fails to load and the next older one is taken.
    user.check_output(f'cp -a {directory}/step_{TARGET:08d} {directory}/step_00000070 && '
                      f'for f in {directory}/step_00000070/*.distcp; do : > "$f"; done && '
                      f'sed -i "s/\\"step\\": {TARGET}/\\"step\\": 70/" {directory}/step_00000070/llmforge-complete.json')
    job = submit(user, env=f'LLMFORGE_RUN_DIR={directory}',
                 trainer_args=['--steps', str(TARGET + 5), '--ckpt-every-steps', '5'])
    try:
        assert wait_finished(ctl, job, timeout=600) == 'COMPLETED', log_of(ctl, job)[-3000:]
    finally:
        ctl.run(f'scancel {job}')  # a job that never ended would hold both nodes for the tests after this one
    summary = read_json(ctl, f'{directory}/summary-{job}-0.json')
    assert summary['resumed_step'] == TARGET and summary['resumed_from'].endswith(f'/step_{TARGET:08d}'), summary
    assert summary['first_step'] == TARGET + 1 and summary['last_step'] == TARGET + 5


@pytest.mark.skipif(not DRILLS, reason='LLMFORGE_TRAINING_DRILLS=0')
@pytest.mark.skipif(not DRILLS, reason='LLMFORGE_TRAINING_DRILLS=0')
def test_time_limit_signal_checkpoints_requeues_and_resumes(ctl, user):
    """A 3-minute limit, USR1 100 s before it: the trainer checkpoints, the job requeues itself and resumes.

    Slurm sends the signal up to 60 s before the requested time, so here 20 to 80 s after the start.
    """
    job = submit(user, '--time=3', '--signal=B:USR1@100',
                 trainer_args=['--steps', '100000000', '--ckpt-every-steps', '0', '--log-every', '50'])
    directory = run_dir(job)
    try:
        first = wait_for(lambda: ctl.file(f'{directory}/summary-{job}-0.json').exists, timeout=240, interval=2)
        assert first, log_of(ctl, job)[-3000:]
        summary = read_json(ctl, f'{directory}/summary-{job}-0.json')
        assert summary['exit_reason'] == 'signal' and summary['last_step'] > 0, summary
        assert checkpoints(ctl, directory) == [summary['last_step']]
        # Slurm holds a requeued job back for cred_expire (30 s here, Reason=BeginTime) before it starts again.
        resumed = wait_for(lambda: f"resumed step={summary['last_step']} " in log_of(ctl, job), timeout=420, interval=3)
        assert resumed, log_of(ctl, job)[-3000:]
        assert job_fields(ctl, job).get('Restarts') == '1'
    finally:
        ctl.run(f'scancel {job}')


def test_health_check_drain_requeues_the_jobs_running_on_the_node(hosts, ctl, user):
    """A fault found by llmforge-nodecheck drains the node and requeues its job, which restarts on the other node."""
    job = user.check_output(f'sbatch --parsable --requeue -w {FIRST} -o /dev/null --wrap "sleep 600"').strip()
    try:
        assert wait_for(lambda: job_fields(ctl, job).get('JobState') == 'RUNNING', timeout=60), job_fields(ctl, job)
        set_hardware(hosts[FIRST], gpu_x8=True)
        result = hosts[FIRST].run('/usr/local/sbin/llmforge-nodecheck')
        assert f'requeued job(s) {job}' in result.stdout, result.stdout + result.stderr
        assert wait_for(lambda: job_fields(ctl, job).get('Restarts') == '1', timeout=60), job_fields(ctl, job)
    finally:
        ctl.run(f'scancel {job}')
        set_hardware(hosts[FIRST])
        hosts[FIRST].run('/usr/local/sbin/llmforge-nodecheck')
        ctl.run(f'scontrol update NodeName={FIRST} State=RESUME')


def test_a_lock_that_cannot_be_installed_leaves_the_environment_in_use(hosts, ctl):
    before = ctl.file(ENV).linked_to
    hosts[FIRST].check_output('mkdir -p /tmp/llmforge-empty-wheelhouse')
    lock = f'torch==2.6.0 --hash=sha256:{"0" * 64}'
    result = run_playbook('-e', json.dumps({'training_env_requirements': lock,
                                            'training_env_wheelhouse': '/tmp/llmforge-empty-wheelhouse'}),
                          playbook='llmforge.cluster.training')
    assert result.returncode != 0
    text = said(result)
    assert 'pip could not install the lock from the wheelhouse /tmp/llmforge-empty-wheelhouse' in text, text[-3000:]
    assert 'The lock is training_env_requirements; pip installs from training_env_wheelhouse.' in text
    assert f'Nothing was replaced: {ENV} still points where it did' in text
    assert ctl.file(ENV).linked_to == before
    leftovers = ctl.check_output(f'ls {ENVS}').split()
    assert len([name for name in leftovers if name.startswith('llmforge-train-')]) == 1, leftovers


@pytest.mark.parametrize('lock, named', [
    ('torch>=2.6', "line 1: 'torch>=2.6' is not pinned as name==version"),
    ('torch==2.6.0', 'line 1: torch==2.6.0 has no --hash=sha256:'),
], ids=['range', 'no-hash'])
def test_a_bad_lock_is_refused_before_anything_is_installed(ctl, lock, named):
    result = run_playbook('-e', json.dumps({'training_env_requirements': lock}), playbook='llmforge.cluster.training')
    assert result.returncode != 0 and f'training_env_requirements: {named}' in said(result), said(result)[-3000:]
    assert all(counters['changed'] == 0 for counters in recaps(result).values()), recaps(result)
