# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the reference training job: the trainer's launch and checkpoint logic, real CPU runs with torch
(one and two ranks, DDP and FSDP, resume, signals, damaged checkpoints) and the rendered sbatch script."""

from __future__ import annotations

import getpass
import importlib.util
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINER = ROOT / 'roles' / 'training_env' / 'files' / 'llmforge_train.py'
TEMPLATE = ROOT / 'roles' / 'training_env' / 'templates' / 'llmforge-train.sbatch.j2'
# A model small enough that process start-up, not training, is what the torch tests spend their time on.
TINY = ['--layers', '1', '--d-model', '32', '--heads', '2', '--seq-len', '16', '--batch-size', '4', '--log-every', '1']
RUN_TIMEOUT = 120


def load_trainer():
    spec = importlib.util.spec_from_file_location('llmforge_train', TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load_trainer()


# Launch: nodelists and rendezvous ---------------------------------------------------------------

@pytest.mark.parametrize('nodelist, hosts', [
    ('node1', ['node1']),
    ('a[1-2,5],b', ['a1', 'a2', 'a5', 'b']),
    ('gpu[08-10,7],login1', ['gpu08', 'gpu09', 'gpu10', 'gpu7', 'login1']),
    ('r[1-2]-n[01-02]', ['r1-n01', 'r1-n02', 'r2-n01', 'r2-n02']),
])
def test_nodelists_expand_as_slurm_writes_them(nodelist, hosts):
    assert train.expand_nodelist(nodelist) == hosts


def test_first_host_asks_scontrol_when_it_is_installed(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))
    assert train.first_host('gpu[3-4]') == 'gpu3'
    executable(tmp_path / 'scontrol', '#!/bin/sh\nprintf "from-scontrol\\nsecond\\n"\n')
    assert train.first_host('gpu[3-4]') == 'from-scontrol'


SRUN_ENV = {'SLURM_PROCID': '5', 'SLURM_NTASKS': '16', 'SLURM_LOCALID': '5', 'SLURM_JOB_NODELIST': 'gpu[07-08]',
            'SLURM_JOB_ID': '123456', 'SLURM_RESTART_COUNT': '2'}


@pytest.mark.parametrize('environ, expected', [
    ({}, dict(rank=0, world_size=1, local_rank=0, master_addr='127.0.0.1', master_port=29500, job_id=None,
              restart_count=0)),
    (SRUN_ENV, dict(rank=5, world_size=16, local_rank=5, master_addr='gpu07', master_port=23456, job_id='123456',
                    restart_count=2)),
    ({**SRUN_ENV, 'RANK': '1', 'WORLD_SIZE': '2', 'LOCAL_RANK': '0', 'MASTER_ADDR': '10.0.0.9', 'MASTER_PORT': '29999'},
     dict(rank=1, world_size=2, local_rank=0, master_addr='10.0.0.9', master_port=29999, job_id='123456',
          restart_count=2)),
    ({**SRUN_ENV, 'MASTER_PORT': '31000'}, dict(rank=5, master_addr='gpu07', master_port=31000)),
], ids=['nothing-set', 'srun', 'torchrun-wins', 'master-port-kept'])
def test_rendezvous_takes_torchrun_variables_then_srun_ones_then_a_single_process(environ, expected):
    derived = train.rendezvous(environ, host_of=lambda nodelist: train.expand_nodelist(nodelist)[0])
    assert {key: derived[key] for key in expected} == expected


# Checkpoint discovery, commit and clean-up ------------------------------------------------------

def checkpoint_dir(run_dir, name, marker_step=None):
    path = run_dir / name
    path.mkdir()
    (path / '__0_0.distcp').write_bytes(b'shard')
    if marker_step is not None:
        (path / train.MARKER).write_text(json.dumps({'step': marker_step, 'world_size': 1, 'time': 0, 'job_id': None}))
    return path


def test_discovery_lists_complete_checkpoints_newest_first_by_step_number(tmp_path):
    checkpoint_dir(tmp_path, 'step_00000020', 20)
    checkpoint_dir(tmp_path, 'step_00000100', 100)
    checkpoint_dir(tmp_path, 'step_00000009', 9)
    checkpoint_dir(tmp_path, 'step_00000200')                      # never finished: no marker
    checkpoint_dir(tmp_path, 'step_00000300', 30)                  # marker names another step
    (checkpoint_dir(tmp_path, 'step_00000400') / train.MARKER).write_text('{"step": 4')  # marker cut short
    checkpoint_dir(tmp_path, '.tmp-step_00000500-77-abc123', 500)  # being written: hidden
    checkpoint_dir(tmp_path, 'step_00000600-old', 600)             # not a checkpoint name
    (tmp_path / 'step_00000700').write_text('a file')
    found, skipped = train.discover_checkpoints(str(tmp_path))
    assert found == [(100, str(tmp_path / 'step_00000100')), (20, str(tmp_path / 'step_00000020')),
                     (9, str(tmp_path / 'step_00000009'))]
    assert [name for name, _reason in skipped] == ['step_00000200', 'step_00000300', 'step_00000400']
    assert skipped[0][1] == 'no llmforge-complete.json: incomplete'


def test_the_newest_checkpoint_that_loads_wins_and_each_failure_is_reported():
    messages, tried = [], []

    def load(path):
        tried.append(path)
        if path != 'b':
            raise ValueError(f'{path} is truncated')

    assert train.first_loadable([(30, 'a'), (20, 'b'), (10, 'c')], load, messages.append)[:2] == (20, 'b')
    assert tried == ['a', 'b']
    assert messages == ['checkpoint skipped path=a reason=load failed: ValueError: a is truncated']
    assert train.first_loadable([(30, 'a')], load, messages.append) is None


def test_leftover_writes_are_removed_without_following_links(tmp_path):
    run_dir, outside = tmp_path / 'run', tmp_path / 'outside'
    run_dir.mkdir()
    outside.mkdir()
    (outside / 'precious').write_text('keep')
    checkpoint_dir(run_dir, '.tmp-step_00000050-1-aaaaaa', 50)
    checkpoint_dir(run_dir, '.tmp-step_00000060-2-bbbbbb')
    checkpoint_dir(run_dir, 'step_00000040', 40)
    checkpoint_dir(run_dir, 'nested')
    checkpoint_dir(run_dir / 'nested', '.tmp-step_00000070-3-cccccc')
    (run_dir / '.tmp-step_00000080-link').symlink_to(outside, target_is_directory=True)
    assert train.remove_leftovers(str(run_dir)) == ['.tmp-step_00000050-1-aaaaaa', '.tmp-step_00000060-2-bbbbbb']
    assert sorted(path.name for path in run_dir.iterdir()) == ['.tmp-step_00000080-link', 'nested', 'step_00000040']
    assert (outside / 'precious').read_text() == 'keep'
    assert (run_dir / 'nested' / '.tmp-step_00000070-3-cccccc').is_dir()


def test_commit_renames_and_replaces_an_existing_checkpoint_of_the_same_step(tmp_path):
    first = checkpoint_dir(tmp_path, '.tmp-step_00000010-a', 10)
    train.commit_checkpoint(str(first), str(tmp_path / 'step_00000010'))
    again = checkpoint_dir(tmp_path, '.tmp-step_00000010-b', 10)
    (again / 'newer').write_text('')
    train.commit_checkpoint(str(again), str(tmp_path / 'step_00000010'))
    assert sorted(path.name for path in tmp_path.iterdir()) == ['step_00000010']
    assert (tmp_path / 'step_00000010' / 'newer').exists()


# Trust: run directories and checkpoints another user could have written ---------------------------

OTHER_UID = 20002  # a directory user of the cluster scenario (bob)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason='giving a file to another user needs root')


def test_a_new_run_directory_is_private_and_an_existing_one_of_ours_is_used(tmp_path):
    made = train.prepare_run_dir(str(tmp_path / 'run'), os.geteuid())
    assert made == str(tmp_path / 'run') and stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    assert train.prepare_run_dir(made, os.geteuid()) == made


@pytest.mark.parametrize('make, reason', [
    (lambda path: path.symlink_to(path.parent / 'target'), 'is a symbolic link'),
    (lambda path: path.write_text(''), 'is not a directory'),
    (lambda path: (path.mkdir(), path.chmod(0o775)), 'is writable by group or others (mode 0775)'),
    (lambda path: (path.mkdir(), path.chmod(0o757)), 'is writable by group or others (mode 0757)'),
], ids=['symlink', 'file', 'group-writable', 'world-writable'])
def test_a_run_directory_that_is_not_trusted_is_refused_with_the_reason(tmp_path, make, reason):
    (tmp_path / 'target').mkdir(mode=0o700)
    make(tmp_path / 'run')
    with pytest.raises(train.RefusedRunDir, match=re.escape(f'{tmp_path}/run {reason}')):
        train.prepare_run_dir(str(tmp_path / 'run'), os.geteuid())


def test_a_new_run_directory_is_made_exclusively(tmp_path):
    (tmp_path / 'run').mkdir(mode=0o700)
    with pytest.raises(train.RefusedRunDir, match='exists already: a new run needs a directory it makes itself'):
        train.prepare_run_dir(str(tmp_path / 'run'), os.geteuid(), new=True)
    with pytest.raises(train.RefusedRunDir, match='cannot make .*/missing/run: No such file or directory'):
        train.prepare_run_dir(str(tmp_path / 'missing' / 'run'), os.geteuid(), new=True)


def test_a_run_directory_below_a_directory_others_can_write_without_the_sticky_bit_is_refused(tmp_path):
    shared = tmp_path / 'shared'
    shared.mkdir()
    shared.chmod(0o777)  # anyone could rename our run directory away and put theirs in its place
    message = f'{shared} (above the run directory) is writable by group or others without the sticky bit (mode 0777)'
    with pytest.raises(train.RefusedRunDir, match=re.escape(message)):
        train.prepare_run_dir(str(shared / 'run'), os.geteuid())
    shared.chmod(0o1777)  # like /tmp: only the owner may rename or remove an entry
    assert train.prepare_run_dir(str(shared / 'run'), os.geteuid()) == str(shared / 'run')


@as_root
def test_another_users_run_directory_and_parent_are_refused(tmp_path):
    foreign = tmp_path / 'foreign'
    foreign.mkdir(mode=0o700)
    os.chown(foreign, OTHER_UID, OTHER_UID)
    with pytest.raises(train.RefusedRunDir, match=f'{foreign} is owned by uid {OTHER_UID}, not by this job.s uid 0'):
        train.prepare_run_dir(str(foreign), 0)
    with pytest.raises(train.RefusedRunDir, match=f'{foreign} .above the run directory. is owned by uid {OTHER_UID}'):
        train.prepare_run_dir(str(foreign / 'run'), 0, new=True)


def test_checkpoints_that_are_links_or_writable_by_others_are_passed_over(tmp_path):
    run_dir, outside = tmp_path / 'run', tmp_path / 'outside'
    run_dir.mkdir(mode=0o700)
    outside.mkdir()
    good = checkpoint_dir(run_dir, 'step_00000010', 10)
    checkpoint_dir(outside, 'step_00000090', 90)
    (run_dir / 'step_00000090').symlink_to(outside / 'step_00000090')
    checkpoint_dir(run_dir, 'step_00000080', 80).chmod(0o777)
    shard = checkpoint_dir(run_dir, 'step_00000070', 70) / '__0_0.distcp'
    shard.chmod(0o666)
    linked = checkpoint_dir(run_dir, 'step_00000060', 60) / '.metadata'
    linked.symlink_to(outside / 'step_00000090' / '__0_0.distcp')
    found, skipped = train.discover_checkpoints(str(run_dir))
    assert found == [(10, str(good))]
    assert skipped == [
        ('step_00000060', f'not trusted: {linked} is a symbolic link'),
        ('step_00000070', f'not trusted: {shard} is writable by group or others (mode 0666)'),
        ('step_00000080', f'not trusted: {run_dir}/step_00000080 is writable by group or others (mode 0777)'),
        ('step_00000090', f'not trusted: {run_dir}/step_00000090 is a symbolic link')]


@as_root
def test_a_checkpoint_another_user_wrote_is_passed_over(tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir(mode=0o700)
    theirs = checkpoint_dir(run_dir, 'step_00000050', 50)
    os.chown(theirs / train.MARKER, OTHER_UID, OTHER_UID)
    assert train.discover_checkpoints(str(run_dir), uid=0) == (
        [], [('step_00000050', f'not trusted: {theirs / train.MARKER} is owned by uid {OTHER_UID}, not by this '
                               "job's uid 0")])


class Payload:
    """What a hostile checkpoint's pickled metadata can hold: code that runs as whoever loads it."""

    def __init__(self, flag):
        self.flag = str(flag)

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.flag),))


def hostile_checkpoint(fresh_run, run_dir, flag):
    """The fresh run's newest checkpoint copied into run_dir, its .metadata swapped for a live payload."""
    import pickle
    checkpoint = run_dir / 'step_00000090'
    shutil.copytree(fresh_run[0] / 'step_00000030', checkpoint)
    (checkpoint / train.MARKER).write_text(json.dumps({'step': 90, 'world_size': 1, 'time': 0, 'job_id': None}))
    payload = pickle.dumps(Payload(flag))
    (checkpoint / '.metadata').write_bytes(payload)
    pickle.loads(payload)  # the payload is live: loading it runs it
    assert flag.exists()
    flag.unlink()
    return checkpoint


@as_root
def test_a_hijacked_run_directory_is_refused_and_nothing_of_its_owner_runs(fresh_run, tmp_path):
    """Another user made the run directory first, with a complete checkpoint whose metadata is a payload."""
    run_dir, flag = tmp_path / 'llmforge-train-43', tmp_path / 'payload-ran'
    run_dir.mkdir(mode=0o755)
    hostile_checkpoint(fresh_run, run_dir, flag)
    for path in [run_dir, *run_dir.rglob('*')]:
        os.lchown(path, OTHER_UID, OTHER_UID)
    done = subprocess.run([sys.executable, str(TRAINER), '--run-dir', str(run_dir), *TINY, '--steps', '2'],
                          env=clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == train.REFUSED_EXIT, done.stdout + done.stderr
    assert done.stderr.strip() == (f'llmforge-train: refusing the run directory: {run_dir} is owned by uid '
                                   f"{OTHER_UID}, not by this job's uid 0")
    assert not flag.exists() and 'step=' not in done.stdout
    new = subprocess.run([sys.executable, str(TRAINER), '--new-run-dir', '--run-dir', str(run_dir), *TINY],
                         env=clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert new.returncode == train.REFUSED_EXIT and 'exists already' in new.stderr and not flag.exists()


def test_a_planted_checkpoint_in_our_run_directory_is_never_loaded(fresh_run, tmp_path):
    """A checkpoint reached through a link (or writable by others) is passed over: the run starts fresh."""
    run_dir, elsewhere, flag = tmp_path / 'run', tmp_path / 'elsewhere', tmp_path / 'payload-ran'
    run_dir.mkdir(mode=0o700)
    elsewhere.mkdir()
    (run_dir / 'step_00000090').symlink_to(hostile_checkpoint(fresh_run, elsewhere, flag))
    codes, stdout = run_ranks(1, run_dir, *TINY, '--steps', '2', '--ckpt-every-steps', '0')
    assert codes == [0] and not flag.exists()
    assert f'checkpoint skipped path={run_dir}/step_00000090 reason=not trusted: {run_dir}/step_00000090 is a ' \
           'symbolic link' in stdout
    assert summary_of(stdout)['resumed_step'] == 0


# Real runs on CPU (torch) -----------------------------------------------------------------------

def clean_env(**extra):
    """This environment without launcher variables, so a test run inside a Slurm job stays a local run."""
    launch = {'RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT'}
    env = {key: value for key, value in os.environ.items() if key not in launch and not key.startswith('SLURM_')}
    env.update(OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1', **extra)
    return env


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def start_ranks(world, run_dir, *args, **env):
    port = str(free_port())
    return [subprocess.Popen([sys.executable, str(TRAINER), '--run-dir', str(run_dir), *args],
                             env=clean_env(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                                           MASTER_ADDR='127.0.0.1', MASTER_PORT=port, **env),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for rank in range(world)]


def finish(processes, expected=(0, train.REQUEUE_EXIT)):
    """(exit codes, rank 0's stdout, rank 0's stderr); every process is gone afterwards, even when one hangs."""
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=RUN_TIMEOUT))
    finally:
        for process in processes:
            process.kill()
            process.wait()
    codes = [process.returncode for process in processes]
    if any(code not in expected for code in codes):
        pytest.fail(f'exit codes {codes}\n' + '\n'.join(out + err for out, err in outputs))
    return codes, outputs[0][0], outputs[0][1]


def run_ranks(world, run_dir, *args, **env):
    """(exit codes, rank 0's stdout) of a run of `world` ranks on this host."""
    return finish(start_ranks(world, run_dir, *args, **env))[:2]


def summary_of(stdout: str) -> dict:
    [line] = [line for line in stdout.splitlines() if line.startswith('summary ')]
    return json.loads(line[len('summary '):])


def marker_of(path) -> dict:
    return json.loads((pathlib.Path(path) / train.MARKER).read_text())


@pytest.fixture(scope='module')
def fresh_run(tmp_path_factory):
    """30 steps of the default model in one process, a checkpoint every 10."""
    pytest.importorskip('torch')
    run_dir = tmp_path_factory.mktemp('fresh') / 'run'
    summary_path = run_dir.parent / 'summary.json'
    codes, stdout = run_ranks(1, run_dir, '--steps', '30', '--ckpt-every-steps', '10', '--summary', str(summary_path))
    return run_dir, codes, stdout, json.loads(summary_path.read_text())


def test_a_single_process_learns_and_checkpoints(fresh_run):
    run_dir, codes, stdout, summary = fresh_run
    assert codes == [0]
    assert stdout.splitlines()[0] == 'starting fresh'
    assert re.search(r'^step=10 loss=\d+\.\d{4} tokens_per_s=[0-9.]+ step_time_s=[0-9.]+$', stdout, re.M)
    assert re.search(rf'^checkpoint step=30 seconds=[0-9.]+ bytes=\d+ path={run_dir}/step_00000030$', stdout, re.M)
    assert summary == summary_of(stdout)
    assert summary['loss_last'] < 0.7 * summary['loss_first']
    assert (summary['first_step'], summary['last_step'], summary['resumed_step'], summary['exit_reason']) == \
        (1, 30, 0, 'target')
    assert [checkpoint['step'] for checkpoint in summary['checkpoints']] == [10, 20, 30]
    assert sorted(path.name for path in run_dir.iterdir()) == [
        'alive', 'failed', 'heartbeat', 'stacks', 'step_00000010', 'step_00000020', 'step_00000030', 'steps']
    for name in ('alive', 'failed', 'heartbeat', 'stacks', 'steps'):
        assert stat.S_IMODE((run_dir / name).stat().st_mode) == 0o700
    steps = [json.loads(line) for line in (run_dir / 'steps' / 'rank-0.jsonl').read_text().splitlines()]
    assert [line['step'] for line in steps] == list(range(1, 31)) and summary['stragglers'] == []
    assert all(0 < line['compute_seconds'] <= line['seconds'] and line['rank'] == 0 for line in steps)
    heartbeat = json.loads((run_dir / 'heartbeat' / 'rank-0.json').read_text())
    assert (heartbeat['step'], heartbeat['phase'], heartbeat['job_id']) == (30, 'checkpoint', None)
    assert not list((run_dir / 'failed').iterdir())
    assert marker_of(run_dir / 'step_00000030')['step'] == 30
    assert summary['checkpoints'][-1]['bytes'] == sum(path.stat().st_size for path in (run_dir / 'step_00000030').iterdir())


def test_damaged_and_unfinished_checkpoints_are_never_resumed_from(fresh_run, tmp_path):
    run_dir = tmp_path / 'run'
    shutil.copytree(fresh_run[0], run_dir)
    shard = run_dir / 'step_00000030' / '__0_0.distcp'
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])  # marker present, data cut short
    shutil.copytree(run_dir / 'step_00000010', run_dir / 'step_00000040')
    (run_dir / 'step_00000040' / train.MARKER).unlink()
    shutil.copytree(run_dir / 'step_00000010', run_dir / '.tmp-step_00000050-1-abcdef')
    codes, stdout = run_ranks(1, run_dir, '--steps', '32', '--ckpt-every-steps', '10')
    assert codes == [0]
    assert f'checkpoint skipped path={run_dir}/step_00000040 reason=no llmforge-complete.json: incomplete' in stdout
    assert f'checkpoint skipped path={run_dir}/step_00000030 reason=load failed' in stdout
    assert 'removed interrupted checkpoint write .tmp-step_00000050-1-abcdef' in stdout
    summary = summary_of(stdout)
    assert (summary['resumed_step'], summary['resumed_from'], summary['first_step']) == (20, f'{run_dir}/step_00000020', 21)
    # Step 30 was reached again: the damaged checkpoint was replaced by a good one.
    assert [checkpoint['step'] for checkpoint in summary['checkpoints']] == [30, 32]
    assert shard.stat().st_size > 0 and marker_of(run_dir / 'step_00000030')['step'] == 30
    assert not [path.name for path in run_dir.iterdir() if path.name.startswith('.')]


def usr1_is_caught(pid: int) -> bool:
    with open(f'/proc/{pid}/status', encoding='ascii') as status:
        caught = next(int(line.split()[1], 16) for line in status if line.startswith('SigCgt:'))
    return bool(caught & 1 << (signal.SIGUSR1 - 1))


def test_a_signal_while_torch_is_still_loading_is_kept_for_the_first_step(tmp_path):
    """The handler is in place before torch is imported; the trainer then checkpoints step 1 and asks for a requeue."""
    pytest.importorskip('torch')
    [process] = start_ranks(1, tmp_path, *TINY, '--steps', '100000')
    deadline = time.monotonic() + RUN_TIMEOUT
    while not usr1_is_caught(process.pid) and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGUSR1)
    codes, stdout, _stderr = finish([process])
    assert codes == [train.REQUEUE_EXIT], stdout
    assert 'signal: checkpointed at step 1, exiting for requeue' in stdout
    assert marker_of(tmp_path / 'step_00000001')['step'] == 1


@pytest.mark.parametrize('strategy', ['ddp', 'fsdp'])
def test_two_ranks_checkpoint_shards_and_a_second_run_resumes(strategy, tmp_path):
    pytest.importorskip('torch')
    codes, stdout = run_ranks(2, tmp_path, *TINY, '--strategy', strategy, '--steps', '6', '--ckpt-every-steps', '4')
    assert codes == [0, 0]
    summary = summary_of(stdout)
    assert (summary['world_size'], summary['strategy'], summary['last_step']) == (2, strategy, 6)
    assert [checkpoint['step'] for checkpoint in summary['checkpoints']] == [4, 6]
    assert {'__0_0.distcp', '__1_0.distcp', '.metadata'} <= {path.name for path in (tmp_path / 'step_00000006').iterdir()}
    assert marker_of(tmp_path / 'step_00000006')['world_size'] == 2
    codes, stdout = run_ranks(2, tmp_path, *TINY, '--strategy', strategy, '--steps', '9', '--ckpt-every-steps', '4')
    assert codes == [0, 0]
    summary = summary_of(stdout)
    assert (summary['resumed_step'], summary['first_step'], summary['last_step']) == (6, 7, 9)
    assert re.search(rf'^resumed step=6 from={tmp_path}/step_00000006 seconds=[0-9.]+$', stdout, re.M)
    assert [checkpoint['step'] for checkpoint in summary['checkpoints']] == [8, 9]


def test_the_program_leaves_without_torch_teardown_and_loses_no_output(tmp_path):
    """Run as a program, the trainer ends with os._exit (gloo's destructor can deadlock on the GIL, see `leave`).

    Its output, block-buffered into a pipe, still arrives whole; a run that fails inside prints its traceback and
    exits 1, as Python would.
    """
    pytest.importorskip('torch')
    # An exit handler that Python's normal teardown would run; os._exit skips it, as it skips torch's destructors.
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'sitecustomize.py').write_text(
        "import atexit, sys\natexit.register(lambda: print('python teardown ran', file=sys.stderr, flush=True))\n")
    env = clean_env(PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get('PYTHONPATH')])))
    env.pop('PYTHONUNBUFFERED')

    def program(run_dir):
        return subprocess.run([sys.executable, str(TRAINER), '--run-dir', str(run_dir), *TINY, '--steps', '3'],
                              env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)

    done = program(tmp_path / 'run')
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary_of(done.stdout)['last_step'] == 3 and re.search(r'^step=3 loss=', done.stdout, re.M)
    assert 'python teardown ran' not in done.stderr, done.stderr
    failed = subprocess.run([sys.executable, str(TRAINER), '--run-dir', str(tmp_path / 'run2'), *TINY, '--steps', '1',
                             '--summary', str(tmp_path / 'missing' / 'summary.json')],
                            env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert 'Traceback (most recent call last)' in failed.stderr and 'FileNotFoundError' in failed.stderr, failed.stderr
    assert 'python teardown ran' not in failed.stderr, failed.stderr
    # A rank that fails leaves its error for the job shell before it exits.
    record = json.loads((tmp_path / 'run2' / 'failed' / 'rank-0.json').read_text())
    assert record['error'].startswith('FileNotFoundError') and record['rank'] == 0 and 'Traceback' in record['traceback']


def test_a_signal_to_one_rank_stops_both_after_a_checkpoint_and_the_run_resumes(tmp_path):
    pytest.importorskip('torch')
    processes = start_ranks(2, tmp_path, *TINY, '--steps', '100000', '--ckpt-every-steps', '5')
    deadline, seen = time.monotonic() + RUN_TIMEOUT, []
    while time.monotonic() < deadline:
        line = processes[0].stdout.readline()
        seen.append(line)
        if line.startswith('checkpoint step=5 ') or not line:
            break
    processes[1].send_signal(signal.SIGUSR1)
    codes, stdout, _stderr = finish(processes)
    assert codes == [train.REQUEUE_EXIT] * 2, ''.join(seen)
    [stopped] = re.findall(r'^signal: checkpointed at step (\d+), exiting for requeue$', stdout, re.M)
    stopped = int(stopped)
    summary = summary_of(stdout)
    assert (summary['exit_reason'], summary['last_step'], summary['checkpoints'][-1]['step']) == ('signal', stopped, stopped)
    assert marker_of(tmp_path / f'step_{stopped:08d}')['step'] == stopped
    # The requeued job may come back with another number of ranks: checkpoints are resharded on load.
    # Time-based checkpoints alone this time, due after every step (0.6 ms).
    codes, stdout = run_ranks(1, tmp_path, *TINY, '--steps', str(stopped + 2), '--ckpt-every-steps', '0',
                              '--ckpt-every-minutes', '0.00001')
    summary = summary_of(stdout)
    assert (codes, summary['first_step'], summary['last_step'], summary['exit_reason']) == ([0], stopped + 1, stopped + 2, 'target')
    assert [checkpoint['step'] for checkpoint in summary['checkpoints']] == [stopped + 1, stopped + 2]


def test_a_slow_rank_is_reported_as_a_straggler(tmp_path):
    pytest.importorskip('torch')
    # 0.5 s a step against the tiny model's few milliseconds: 3 slow steps in a row out of 8 even when a busy machine
    # slows rank 0's own steps now and then (0.2 s of 6 steps once saw no straggler beside the other checks).
    codes, stdout = run_ranks(2, tmp_path, *TINY, '--steps', '8', '--ckpt-every-steps', '0', '--drill-slow-rank', '1',
                              '--drill-slow-seconds', '0.5', '--straggler-steps', '3')
    assert codes == [0, 0]
    [sighting] = summary_of(stdout)['stragglers']
    assert (sighting['kind'], sighting['rank'], sighting['steps']) == ('straggler', 1, 3) and sighting['factor'] > 1.5
    assert re.search(r"^straggler: rank 1 on \S+ took x[0-9.]+ the other ranks' median compute time for 3 steps$",
                     stdout, re.M), stdout
    [line] = (tmp_path / 'sightings.jsonl').read_text().splitlines()
    assert json.loads(line)['rank'] == 1
    slow = [json.loads(line) for line in (tmp_path / 'steps' / 'rank-1.jsonl').read_text().splitlines()]
    assert len(slow) == 8 and min(line['compute_seconds'] for line in slow) >= 0.5


def test_a_hung_rank_is_named_and_its_stacks_are_taken_by_its_own_handler(tmp_path):
    """Rank 1 stops at step 3 (a drill); the other waits in a collective. The job shell's helpers see it as it would."""
    pytest.importorskip('torch')
    port, job = str(free_port()), {'SLURM_JOB_ID': '4242', 'SLURM_RESTART_COUNT': '0'}
    processes = [subprocess.Popen([sys.executable, str(TRAINER), '--run-dir', str(tmp_path), *TINY, '--steps', '50',
                                   '--drill-hang-rank', '1', '--drill-hang-step', '3'],
                                  env=clean_env(RANK=str(rank), WORLD_SIZE='2', LOCAL_RANK=str(rank),
                                                MASTER_ADDR='127.0.0.1', MASTER_PORT=port, SLURM_PROCID=str(rank),
                                                SLURMD_NODENAME=f'gpu{rank + 1}', **job),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for rank in range(2)]
    helper_env = clean_env(PATH='/usr/bin:/bin', **job)  # no scontrol: the comment part is skipped
    try:
        def hang_check(*extra):
            return subprocess.run([sys.executable, str(TRAINER), '--hang-check', str(tmp_path), '--seconds', '1.5',
                                   *extra], env=helper_env, capture_output=True, text=True, timeout=60, check=False)

        deadline = time.monotonic() + RUN_TIMEOUT
        # A busy machine may take more than 1.5 s over an earlier step: wait for the drill's step.
        while not ((check := hang_check()).returncode == train.HUNG_EXIT and json.loads(check.stdout)['step'] == 3):
            assert check.returncode in (0, train.HUNG_EXIT), check.stdout + check.stderr
            assert time.monotonic() < deadline, check.stdout
            time.sleep(0.2)
        check = hang_check('--report')
        state = json.loads(check.stdout.splitlines()[0])
        assert (state['state'], state['rank'], state['node'], state['step'], state['phase']) == \
            ('hung', 1, 'gpu2', 3, 'forward'), state
        dump = subprocess.run([sys.executable, str(TRAINER), '--dump-stacks', '--run-dir', str(tmp_path)],
                              env=helper_env, capture_output=True, text=True, timeout=120, check=False)
        assert dump.returncode == 0, dump.stdout + dump.stderr
        assert len(re.findall(r'^stacks on \S+: rank [01] pid \d+ -> ', dump.stdout, re.M)) == 2, dump.stdout
        host = re.sub(r'[^A-Za-z0-9._-]', '_', socket.gethostname())  # the helper ran without SLURMD_NODENAME
        deadline = time.monotonic() + 30
        # py-spy (when installed) writes the per-node files; else each rank appends to its own file on SIGUSR2.
        while 'in drill' not in ''.join(path.read_text() for path in (tmp_path / 'stacks').iterdir()):
            assert time.monotonic() < deadline, dump.stdout
            time.sleep(0.1)
        assert all(process.poll() is None for process in processes)
    finally:
        for process in processes:
            process.kill()
            process.communicate()
    [sighting] = [json.loads(line) for line in (tmp_path / 'sightings.jsonl').read_text().splitlines()]
    assert (sighting['kind'], sighting['node'], sighting['rank'], sighting['job_id']) == ('hang', 'gpu2', 1, '4242')
    assert sorted(path.name for path in (tmp_path / 'stacks').iterdir()) == sorted([
        'rank-0.txt', 'rank-1.txt', f'{host}-rank0-restart0.txt', f'{host}-rank1-restart0.txt'])


# The sbatch script ------------------------------------------------------------------------------

JOB_VARS = {
    'ansible_managed': 'Ansible managed', 'training_env_job_nodes': 2, 'training_env_job_tasks_per_node': 8,
    'training_env_job_gpus_per_node': 8, 'training_env_job_time_limit': '00:30:00',
    'training_env_job_signal_seconds': 120, 'training_env_job_partition': 'gpu',
    'training_env_job_run_root': '/shared/llmforge/runs', 'training_env_job_args': ['--steps', '200', '--ckpt-every-steps', '50'],
    'training_env_job_hang_seconds': 300, 'training_env_job_lost_grace': 30, 'training_env_job_max_restarts': 3,
    'training_env_job_straggler_factor': 1.5, 'training_env_job_straggler_steps': 20, 'training_env_job_local_dir': '',
    '_training_env_dir': '/opt/llmforge/train',
}


def render(**overrides) -> str:
    jinja2 = pytest.importorskip('jinja2')
    core = pytest.importorskip('ansible.plugins.filter.core')
    # Ansible renders templates with trim_blocks on; its `quote` filter is the one the template uses.
    environment = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    environment.filters.update(core.FilterModule().filters())
    return environment.from_string(TEMPLATE.read_text()).render(**{**JOB_VARS, **overrides})


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize('overrides', [{}, {'training_env_job_gpus_per_node': 0, 'training_env_job_tasks_per_node': 1,
                                            'training_env_job_partition': ''}], ids=['gpu', 'cpu'])
def test_the_rendered_script_passes_bash_and_shellcheck(overrides, tmp_path):
    script = tmp_path / 'llmforge-train.sbatch'
    script.write_text(render(**overrides))
    subprocess.run(['bash', '-n', str(script)], check=True)
    if not shutil.which('shellcheck'):
        pytest.skip('shellcheck is not installed')
    result = subprocess.run(['shellcheck', str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


def test_directives_follow_the_variables():
    gpu = render()
    assert [line for line in gpu.splitlines() if line.startswith('#SBATCH')] == [
        '#SBATCH --job-name=llmforge-train', '#SBATCH --nodes=2', '#SBATCH --ntasks-per-node=8',
        '#SBATCH --gpus-per-node=8', '#SBATCH --partition=gpu', '#SBATCH --time=00:30:00',
        '#SBATCH --signal=B:USR1@120', '#SBATCH --requeue', '#SBATCH --open-mode=append',
        '#SBATCH --output=/shared/llmforge/runs/%u/%x-%j.out']
    assert 'OMP_NUM_THREADS' not in gpu
    cpu = render(training_env_job_gpus_per_node=0, training_env_job_partition='')
    assert '--gpus-per-node' not in cpu and '--partition' not in cpu
    assert 'export OMP_NUM_THREADS="${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}"' in cpu


PROLOG = ROOT / 'roles' / 'training_env' / 'templates' / 'prolog-run-root.sh.j2'


def run_prolog(tmp_path, run_root, **job_env):
    jinja2 = pytest.importorskip('jinja2')
    core = pytest.importorskip('ansible.plugins.filter.core')
    environment = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    environment.filters.update(core.FilterModule().filters())
    script = tmp_path / '40-llmforge-run-root'
    script.write_text(environment.from_string(PROLOG.read_text()).render(
        ansible_managed='Ansible managed', training_env_job_run_root=str(run_root)))
    return subprocess.run(['sh', str(script)], env={'PATH': os.environ['PATH'], **job_env}, capture_output=True,
                          text=True, check=False), script


def test_the_prolog_makes_each_users_private_run_directory_and_never_fails(tmp_path):
    run_root = tmp_path / 'runs'
    run_root.mkdir()
    uid, gid = (OTHER_UID, OTHER_UID) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    done, script = run_prolog(tmp_path, run_root, SLURM_JOB_USER='bob', SLURM_JOB_UID=str(uid), SLURM_JOB_GID=str(gid))
    made = os.lstat(run_root / 'bob')
    assert done.returncode == 0 and (made.st_uid, stat.S_IMODE(made.st_mode)) == (uid, 0o700)
    (run_root / 'bob').chmod(0o750)  # an existing directory is the user's to keep as they like
    assert run_prolog(tmp_path, run_root, SLURM_JOB_USER='bob', SLURM_JOB_UID=str(uid),
                      SLURM_JOB_GID=str(gid))[0].returncode == 0
    assert stat.S_IMODE(os.lstat(run_root / 'bob').st_mode) == 0o750
    for user in ('', '..', 'a/b', '-rf'):
        done = run_prolog(tmp_path, run_root, SLURM_JOB_USER=user, SLURM_JOB_UID='1', SLURM_JOB_GID='1')[0]
        assert done.returncode == 0, user
    assert run_prolog(tmp_path, tmp_path / 'missing', SLURM_JOB_USER='bob', SLURM_JOB_UID='1',
                      SLURM_JOB_GID='1')[0].returncode == 0
    assert sorted(path.name for path in run_root.iterdir()) == ['bob'] and not (tmp_path / 'missing').exists()
    if shutil.which('shellcheck'):
        checked = subprocess.run(['shellcheck', str(script)], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stdout


class BatchJob:
    """The rendered script run as Slurm starts the batch shell, with stand-ins for srun, scontrol and the trainer.

    The stand-in trainer passes the helper modes (--hang-check ...) on to the real trainer program; otherwise it runs
    the test's shell code. srun becomes the task it starts (so signals reach it directly), except for the node check,
    whose answers the test sets (`answers`); scontrol keeps the job comment in a file and logs every call.
    """

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        bin_dir, env_dir, run_root = tmp_path / 'bin', tmp_path / 'env', tmp_path / 'runs'
        for folder in (bin_dir, env_dir / 'bin', run_root):
            folder.mkdir(parents=True)
        self.script = tmp_path / 'llmforge-train.sbatch'
        self.script.write_text(render(_training_env_dir=str(env_dir), training_env_job_run_root=str(run_root)))
        self.trainer = env_dir / 'bin' / 'llmforge-train'
        self.run_dir = run_root / getpass.getuser() / 'llmforge-train-42'
        self.answers = [answer('gpu01', True), answer('gpu02', True)]
        executable(bin_dir / 'srun', textwrap.dedent(f"""\
            #!/bin/bash
            printf '%s\\n' "$*" >> {tmp_path}/srun.log
            case "$*" in
                *llmforge-nodecheck-request*) cat {tmp_path}/answers 2>/dev/null; exit 0 ;;
                *--dump-stacks*) ;;
                *) printf '%s\\n' "$@" > {tmp_path}/srun.args ;;
            esac
            while [ "${{1#--}}" != "$1" ]; do shift; done
            exec "$@"
            """))
        executable(bin_dir / 'scontrol', textwrap.dedent(f"""\
            #!/bin/bash
            printf '%s\\n' "$*" >> {tmp_path}/scontrol.log
            case "$1 $2" in
                'show job') printf 'JobId=%s JobName=llmforge-train\\n   Comment=%s \\n' "$3" \\
                                "$(cat {tmp_path}/comment 2>/dev/null || echo '(null)')" ;;
                'update jobid=42') printf '%s' "${{3#comment=}}" > {tmp_path}/comment ;;
            esac
            """))
        self.env = clean_env(PATH=f'{bin_dir}:{os.environ["PATH"]}', SLURM_JOB_ID='42', SLURM_JOB_NAME='llmforge-train',
                             SLURM_JOB_NODELIST='gpu[01-02]', SLURM_JOB_NUM_NODES='2', LLMFORGE_POLL_SECONDS='0.1',
                             LLMFORGE_STOP_GRACE='1')

    def start(self, trainer: str, *args, **extra_env):
        (self.tmp / 'answers').write_text(''.join(line + '\n' for line in self.answers))
        executable(self.trainer, textwrap.dedent(f"""\
            #!/bin/bash
            case "$1" in
                --hang-check|--dump-stacks|--node-verdict|--restart-budget|--stage-dataset) exec {sys.executable} {TRAINER} "$@" ;;
            esac
            """) + textwrap.dedent(trainer))
        self.started = time.monotonic()
        return subprocess.Popen(['bash', str(self.script), *args], env={**self.env, **extra_env},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def run(self, trainer: str, *args, **extra_env):
        job = self.start(trainer, *args, **extra_env)
        return job, job.communicate(timeout=60)[0]

    def lines(self, name):
        path = self.tmp / name
        return path.read_text().splitlines() if path.exists() else []

    def requeues(self):
        return [line for line in self.lines('scontrol.log') if line.startswith('requeue')]

    def comment(self):
        path = self.tmp / 'comment'
        return path.read_text() if path.exists() else ''

    def sightings(self):
        path = self.run_dir / 'sightings.jsonl'
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def answer(node, healthy, reason=''):
    return json.dumps({'node': node, 'healthy': healthy, 'reason': reason})


def events(output):
    """The job shell's timeline: the event of each `llmforge-train: <time> <event>` line, in order."""
    return re.findall(r'^llmforge-train: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d (.*)$', output, re.M)


def index_of(timeline, start):
    return next(position for position, event in enumerate(timeline) if event.startswith(start))


@pytest.fixture
def batch_job(tmp_path):
    return BatchJob(tmp_path)


# Shell code for the stand-in trainer: make the run directory as the trainer does, write a rank's records.
MAKE_RUN_DIR = 'mkdir -p -m 0700 "$2" && mkdir -p -m 0700 "$2"/heartbeat "$2"/failed "$2"/stacks "$2"/steps\n'
IGNORE_TERM_AND_WAIT = "trap '' TERM\nwhile :; do sleep 0.05; done\n"


def failed_rank(rank, node, error, ago=0):
    return (f"""printf '{{"rank": {rank}, "node": "{node}", "job_id": "42", "restart": %s, "time": %s, """
            f""""error": "{error}"}}' "${{SLURM_RESTART_COUNT:-0}}" "$(( $(date +%s) - {ago} ))" """
            f"""> "$2/failed/rank-{rank}.json"\n""")


def heartbeat(rank, node, step, phase, ago):
    return (f"""printf '{{"rank": {rank}, "node": "{node}", "job_id": "42", "restart": 0, "step": {step}, """
            f""""phase": "{phase}", "time": %s}}' "$(( $(date +%s) - {ago} ))" > "$2/heartbeat/rank-{rank}.json"\n""")


def test_the_trainer_gets_the_run_dir_the_summary_and_every_argument(batch_job):
    job, output = batch_job.run('printf "arg=%s\\n" "$@"\n', '--steps', '7', 'two words',
                                LLMFORGE_CONTAINER='/bundles/train')
    assert job.returncode == 0, output
    run_dir = batch_job.run_dir
    assert re.findall('^arg=(.*)$', output, re.M) == [
        '--run-dir', str(run_dir), '--summary', f'{run_dir}/summary-42-0.json', '--straggler-factor', '1.5',
        '--straggler-steps', '20', '--steps', '200', '--ckpt-every-steps', '50', '--steps', '7', 'two words']
    assert batch_job.lines('srun.args')[:2] == ['--kill-on-bad-exit=1', '--container=/bundles/train']
    timeline = events(output)
    assert timeline[0] == f'job 42 restart 0 nodes gpu[01-02] run dir {run_dir} env {batch_job.tmp}/env'
    assert timeline[-1] == 'srun exit 0: the trainer reached its target'
    assert batch_job.requeues() == [] and len(batch_job.lines('srun.log')) == 1  # no node check after a success


def test_the_job_shell_settings_follow_the_role_variables():
    script = render(training_env_job_hang_seconds=90, training_env_job_lost_grace=15, training_env_job_max_restarts=5,
                    training_env_job_straggler_factor=2.5, training_env_job_straggler_steps=7)
    for line in ('HANG_SECONDS="${LLMFORGE_HANG_SECONDS:-90}"', 'LOST_GRACE="${LLMFORGE_LOST_GRACE:-15}"',
                 'MAX_RESTARTS="${LLMFORGE_MAX_RESTARTS:-5}"', '--straggler-factor 2.5 \\', '--straggler-steps 7 \\'):
        assert line in script, line


def test_the_local_checkpoint_tier_is_passed_per_user_and_can_be_turned_off_per_job(batch_job, tmp_path):
    batch_job.script.write_text(render(_training_env_dir=str(tmp_path / 'env'),
                                       training_env_job_run_root=str(tmp_path / 'runs'),
                                       training_env_job_local_dir='/scratch'))
    job, output = batch_job.run('exit 0\n')
    args = batch_job.lines('srun.args')
    assert job.returncode == 0 and args[args.index('--local-dir') + 1] == f'/scratch/{getpass.getuser()}', output
    assert 'local checkpoints /scratch' in events(output)[0]
    job, output = batch_job.run('exit 0\n', LLMFORGE_LOCAL_DIR='')
    assert job.returncode == 0 and '--local-dir' not in batch_job.lines('srun.args'), output


def test_a_dataset_is_staged_before_the_trainer_starts_and_handed_to_it(batch_job, tmp_path):
    source = tmp_path / 'shared-data'
    source.mkdir()
    (source / 'tokens.bin').write_bytes(b'\x01\x00' * 100)
    (tmp_path / 'scratch').mkdir(mode=0o1777)
    os.chmod(tmp_path / 'scratch', 0o1777)
    job, output = batch_job.run('exit 0\n', LLMFORGE_DATASET=str(source), LLMFORGE_LOCAL_DIR=str(tmp_path / 'scratch'))
    args = batch_job.lines('srun.args')
    staged = pathlib.Path(args[args.index('--data') + 1])
    assert job.returncode == 0 and (staged / 'tokens.bin').read_bytes() == b'\x01\x00' * 100, output
    assert staged.parent == tmp_path / 'scratch' / getpass.getuser() / 'datasets'
    assert any(event.startswith('dataset staged: {"node"') for event in events(output)), output
    job, output = batch_job.run('exit 0\n', LLMFORGE_DATASET=str(source), LLMFORGE_LOCAL_DIR=str(tmp_path / 'scratch'),
                                LLMFORGE_DATASET_DIGEST='sha256:' + '0' * 64)
    assert job.returncode == 1 and 'could not be staged on every node' in output, output
    assert batch_job.requeues() == []
    job, output = batch_job.run('exit 0\n', LLMFORGE_DATASET=str(source), LLMFORGE_LOCAL_DIR='')
    assert job.returncode == 1 and 'LLMFORGE_DATASET needs a node-local directory' in output, output


def test_a_requeue_exit_requeues_without_a_node_check(batch_job):
    job, output = batch_job.run('exit 3\n')
    assert (job.returncode, batch_job.requeues()) == (0, ['requeue 42']), output
    assert events(output)[-1] == 'trainer checkpointed and stopped (srun exit 3), requeueing job 42'
    assert not any('nodecheck' in line for line in batch_job.lines('srun.log'))


def test_a_failed_step_with_an_unhealthy_node_requeues_at_once(batch_job):
    batch_job.answers = [answer('gpu01', True), answer('gpu02', False, 'Xid 79: GPU 3 has fallen off the bus')]
    job, output = batch_job.run(MAKE_RUN_DIR + failed_rank(1, 'gpu02', 'RuntimeError: CUDA error') + 'exit 1\n',
                                SLURM_RESTART_COUNT='7', LLMFORGE_MAX_RESTARTS='3')
    assert (job.returncode, batch_job.requeues()) == (0, ['requeue 42']), output
    timeline = events(output)
    assert timeline[index_of(timeline, 'asking every node'):] == [
        'asking every node of the job to check itself',
        'node check: {"verdict": "bad", "healthy": ["gpu01"], "unhealthy": [{"node": "gpu02", "reason": "Xid 79: GPU 3 '
        'has fallen off the bus"}], "silent": []}',
        'srun exit 1; a node of the job failed its check, requeueing job 42']
    assert batch_job.lines('srun.log')[-1] == ('--overlap --kill-on-bad-exit=0 --nodes=2 --ntasks-per-node=1 '
                                               '/usr/local/sbin/llmforge-nodecheck-request')
    assert [(s['kind'], s['node']) for s in batch_job.sightings()] == [('unhealthy', 'gpu02')]
    assert batch_job.comment() == ''  # the node's own health check drains it
    assert not (batch_job.run_dir / 'restarts.jsonl').exists()  # a bad node spends no restart


def test_a_failed_step_on_healthy_nodes_requeues_within_the_budget_and_then_fails(batch_job):
    trainer = MAKE_RUN_DIR + failed_rank(0, 'gpu01', 'ValueError: a bug in the model code') + 'exit 1\n'
    for attempt in range(3):
        job, output = batch_job.run(trainer, SLURM_RESTART_COUNT=str(attempt))
        assert (job.returncode, len(batch_job.requeues())) == (0, attempt + 1), output
        assert events(output)[-1] == ('srun exit 1; no node failed its check, restart within the budget of 3, '
                                      'requeueing job 42')
    job, output = batch_job.run(trainer, SLURM_RESTART_COUNT='3')
    assert (job.returncode, len(batch_job.requeues())) == (1, 3), output
    assert 'rank 0 on gpu01 failed: ValueError: a bug in the model code' in events(output)
    assert events(output)[-1] == ('srun exit 1; no node failed its check and the restart budget of 3 is spent: the '
                                  'job fails (exit 1)')
    assert [json.loads(line)['requeued'] for line in (batch_job.run_dir / 'restarts.jsonl').read_text().splitlines()] \
        == [True, True, True, False]


def test_the_budget_counts_failures_since_the_newest_checkpoint(batch_job):
    """Failures spread over a long run, each after new checkpoints, never spend the budget."""
    for attempt in range(4):
        step = (attempt + 1) * 10
        job, output = batch_job.run(MAKE_RUN_DIR + f'mkdir -p "$2/step_{step:08d}"\n'
                                    f"""echo '{{"step": {step}}}' > "$2/step_{step:08d}/llmforge-complete.json"\n"""
                                    'exit 1\n', SLURM_RESTART_COUNT=str(attempt), LLMFORGE_MAX_RESTARTS='1')
        assert job.returncode == 0, output
    assert len(batch_job.requeues()) == 4


@pytest.mark.parametrize('restarts, code, requeued', [('2', 0, 1), ('3', 7, 0)])
def test_a_trainer_that_never_made_its_run_directory_is_counted_by_the_jobs_restarts(
        batch_job, restarts, code, requeued):
    batch_job.answers = []  # and the node check answers nothing: it proves nothing, the budget decides
    job, output = batch_job.run('exit 7\n', SLURM_RESTART_COUNT=restarts)
    assert (job.returncode, len(batch_job.requeues())) == (code, requeued), output
    assert 'node check: {"verdict": "unknown"' in output


def test_a_hang_takes_the_stacks_names_the_rank_stops_the_step_and_requeues(batch_job):
    trainer = (MAKE_RUN_DIR + heartbeat(0, 'gpu01', 7, 'backward', 100) + heartbeat(1, 'gpu02', 7, 'forward', 120)
               + IGNORE_TERM_AND_WAIT)
    job, output = batch_job.run(trainer, LLMFORGE_HANG_SECONDS='2')
    assert (job.returncode, batch_job.requeues()) == (0, ['requeue 42']), output
    timeline = events(output)
    order = [index_of(timeline, start) for start in (
        'hang: no rank advanced for 2s', 'taking the stacks of every rank', 'stacks taken (exit 0)',
        'stopping the trainer', 'srun still running 1s after TERM: KILL', "trainer's step stopped (srun exit 137)",
        'asking every node', 'node check: {"verdict": "healthy"', 'hang; no node failed its check, restart within')]
    assert order == sorted(order), timeline
    assert '"rank": 1, "node": "gpu02", "phase": "forward"' in timeline[order[0]]
    assert f'--overlap --kill-on-bad-exit=0 --nodes=2 --ntasks-per-node=1 {batch_job.trainer} --dump-stacks --run-dir ' \
           f'{batch_job.run_dir}' in batch_job.lines('srun.log')
    assert 'no trainer process of job 42 here' in output  # the stand-in trainer is no Python rank
    [sighting] = batch_job.sightings()
    assert (sighting['kind'], sighting['node'], sighting['rank'], sighting['step']) == ('hang', 'gpu02', 1, 7)
    assert batch_job.comment() == 'llmforge-suspect gpu02 hang rank1 step7'


def test_a_failed_rank_whose_step_does_not_end_is_a_lost_node(batch_job):
    """gpu02 is gone: rank 0 failed on its connection, and srun waits for a node that will never answer."""
    batch_job.answers = [answer('gpu01', True)]
    trainer = MAKE_RUN_DIR + failed_rank(0, 'gpu01', 'RuntimeError: Connection closed by peer') + IGNORE_TERM_AND_WAIT
    job, output = batch_job.run(trainer, LLMFORGE_LOST_GRACE='1', LLMFORGE_HANG_SECONDS='300')
    assert (job.returncode, batch_job.requeues()) == (0, ['requeue 42']), output
    assert time.monotonic() - batch_job.started < 30
    timeline = events(output)
    order = [index_of(timeline, start) for start in (
        'lost: a rank failed and the step has not ended 1s later', 'stopping the trainer', 'asking every node',
        'node check: {"verdict": "bad", "healthy": ["gpu01"], "unhealthy": [], "silent": ["gpu02"]}',
        'lost node; a node of the job failed its check, requeueing job 42')]
    assert order == sorted(order), timeline
    assert not any('--dump-stacks' in line for line in batch_job.lines('srun.log'))
    assert [(s['kind'], s['node']) for s in batch_job.sightings()] == [('lost', 'gpu02')]
    assert batch_job.comment() == ''


def test_an_existing_job_comment_keeps_its_text(batch_job):
    (batch_job.tmp / 'comment').write_text('project llm-7b;llmforge-suspect gpu05 straggler x1.7 rank40')
    job, output = batch_job.run(MAKE_RUN_DIR + heartbeat(0, 'gpu01', 3, 'sync', 50) + IGNORE_TERM_AND_WAIT,
                                LLMFORGE_HANG_SECONDS='2')
    assert job.returncode == 0, output
    assert batch_job.comment() == ('project llm-7b;llmforge-suspect gpu05 straggler x1.7 rank40;'
                                   'llmforge-suspect gpu01 hang rank0 step3')


def test_usr1_reaches_the_trainer_and_its_requeue_exit_requeues_the_job(batch_job):
    job = batch_job.start("""\
        trap 'echo "trainer: USR1"; exit 3' USR1
        echo ready
        while :; do sleep 0.05; done
        """, SLURM_RESTART_COUNT='1')
    assert re.match(r'llmforge-train: \S+ job 42 restart 1 ', job.stdout.readline())
    while job.stdout.readline() not in ('ready\n', ''):
        pass
    job.send_signal(signal.SIGUSR1)
    output = job.communicate(timeout=30)[0]
    assert job.returncode == 0, output
    assert 'trainer: USR1' in output
    assert 'requeueing job 42' in output
    assert batch_job.requeues() == ['requeue 42']


def test_usr1_before_the_trainer_starts_requeues_without_starting_it(batch_job):
    """Slurm may send the signal up to a minute early: here while the script is still naming the run directory."""
    shell_pid = batch_job.tmp / 'shell.pid'
    executable(batch_job.tmp / 'bin' / 'id', f'''#!/bin/sh
        while [ ! -s {shell_pid} ]; do sleep 0.01; done
        kill -USR1 "$(cat {shell_pid})"
        exec /usr/bin/id "$@"
        '''.replace('        ', ''))
    job = batch_job.start('echo "TRAINER RAN"\n')
    shell_pid.write_text(str(job.pid))
    output = job.communicate(timeout=30)[0]
    assert (job.returncode, batch_job.requeues()) == (0, ['requeue 42']), output
    assert 'USR1 came before the trainer started (nothing new to save), requeueing job 42' in output
    assert 'TRAINER RAN' not in output and not batch_job.lines('srun.log')


def test_a_refused_run_directory_fails_the_job_and_its_summary_is_never_read(batch_job):
    """The trainer's exit 2: a run directory it does not trust; whatever summary lies there is someone else's."""
    job, output = batch_job.run("""\
        mkdir -p "$(dirname "$4")" && echo '{"exit_reason": "signal"}' > "$4"
        echo "llmforge-train: refusing the run directory: $2 is owned by uid 20002" >&2
        exit 2
        """)
    assert (job.returncode, batch_job.requeues()) == (2, []), output
    assert f'the trainer refused the run directory {batch_job.run_dir} or its local checkpoint directory (its error says which and why); not requeued' in output
    assert len(batch_job.lines('srun.log')) == 1


def test_a_signal_summary_requeues_even_when_srun_reports_a_killed_task(batch_job):
    job, output = batch_job.run("""\
        mkdir -p "$(dirname "$4")" && echo '{"exit_reason": "signal"}' > "$4"
        exit 137
        """)
    assert (job.returncode, batch_job.requeues()) == (0, ['requeue 42']), output
    assert (batch_job.run_dir / 'summary-42-0.json').exists()
