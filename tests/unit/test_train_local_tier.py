# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the reference trainer's node-local checkpoint tier (--local-dir): the job's directory on the node and its
trust rules, the background copy into the run directory and its commit (marker last, one copy at a time, nothing
complete after a copy cut short), and real CPU runs with torch (one and two ranks, resume, signals, kills, errors)."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import signal
import stat
import subprocess
import sys
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _checkpoint_prune as prune

# Running ranks of the trainer on this host: the reference job's tests' helpers.
from test_train_reference import clean_env, finish, marker_of, run_ranks, start_ranks, summary_of

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINER = ROOT / 'roles' / 'training_env' / 'files' / 'llmforge_train.py'
# A model small enough that process start-up, not training, is what the torch tests spend their time on; its
# checkpoint is about 0.5 MB, so --drill-copy-mbps 0.5 makes a copy last about a second.
TINY = ['--layers', '1', '--d-model', '32', '--heads', '2', '--seq-len', '16', '--batch-size', '4', '--log-every', '1']
RUN_TIMEOUT = 120
OTHER_UID = 20002  # a directory user of the cluster scenario (bob)
as_root = pytest.mark.skipif(os.geteuid() != 0, reason='giving a file to another user needs root')


def load_trainer():
    spec = importlib.util.spec_from_file_location('llmforge_train_local_tier', TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load_trainer()


# The job's directory on the node --------------------------------------------------------------------------

def test_the_jobs_local_directory_is_private_and_made_under_a_sticky_root(tmp_path):
    scratch = tmp_path / 'scratch'
    scratch.mkdir()
    scratch.chmod(0o1777)  # like /scratch: every user makes a directory there
    made = train.prepare_local_dir(str(scratch), 'llmforge-train-42', os.geteuid())
    assert made == str(scratch / 'llmforge-train-42') and stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    assert train.prepare_local_dir(str(scratch), 'llmforge-train-42', os.geteuid()) == made  # a requeue's: ours
    mine = train.prepare_local_dir(str(tmp_path / 'mine'), 'job', os.geteuid())  # a missing root is made private
    assert stat.S_IMODE(os.lstat(tmp_path / 'mine').st_mode) == 0o700 and os.path.isdir(mine)


@pytest.mark.parametrize('make, reason', [
    (lambda path: path.symlink_to(path.parent / 'target'), 'is a symbolic link'),
    (lambda path: path.write_text(''), 'is not a directory'),
    (lambda path: (path.mkdir(), path.chmod(0o770)), 'is writable by group or others (mode 0770)'),
    (lambda path: (path.mkdir(), path.chmod(0o707)), 'is writable by group or others (mode 0707)'),
], ids=['symlink', 'file', 'group-writable', 'world-writable'])
def test_a_local_directory_that_is_not_trusted_is_refused_naming_the_path(tmp_path, make, reason):
    (tmp_path / 'target').mkdir(mode=0o700)
    make(tmp_path / 'llmforge-train-42')
    with pytest.raises(train.RefusedLocalDir, match=re.escape(f'{tmp_path}/llmforge-train-42 {reason}')):
        train.prepare_local_dir(str(tmp_path), 'llmforge-train-42', os.geteuid())


def test_a_local_root_others_can_write_without_the_sticky_bit_is_refused(tmp_path):
    root = tmp_path / 'scratch'
    root.mkdir()
    root.chmod(0o777)  # anyone could rename the job's directory away and put theirs in its place
    with pytest.raises(train.RefusedLocalDir, match=re.escape(
            f'{root} (above the local checkpoint directory) is writable by group or others without the sticky bit '
            '(mode 0777): another user could replace the local checkpoint directory')):
        train.prepare_local_dir(str(root), 'job', os.geteuid())
    assert not (root / 'job').exists()
    with pytest.raises(train.RefusedLocalDir, match=f'cannot make {tmp_path}/missing/scratch: No such file'):
        train.prepare_local_dir(str(tmp_path / 'missing' / 'scratch'), 'job', os.geteuid())


@as_root
def test_another_users_local_directory_is_refused(tmp_path):
    theirs = tmp_path / 'llmforge-train-42'
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    with pytest.raises(train.RefusedLocalDir, match=f'{theirs} is owned by uid {OTHER_UID}, not by this job.s uid 0'):
        train.prepare_local_dir(str(tmp_path), 'llmforge-train-42', 0)


class StatVFS:
    def __init__(self, free_bytes):
        self.f_bavail, self.f_frsize = free_bytes // 4096, 4096


def test_too_little_free_space_names_the_option_and_the_path():
    assert train.free_space_problem('/scratch/job', 4 * 10 ** 9, 'as given', lambda path: StatVFS(5 * 10 ** 9)) is None
    problem = train.free_space_problem('/scratch/job', 4 * 10 ** 9, 'as given', lambda path: StatVFS(10 ** 9))
    assert problem == ('/scratch/job has 1.00 GB free on its file system, less than --local-min-free-gb 4.00 '
                       '(as given): free some space, point --local-dir elsewhere or lower the bound')


@pytest.mark.parametrize('argv, message', [
    (['--local-min-free-gb', '5'], '--local-min-free-gb and --drill-copy-mbps need --local-dir'),
    (['--drill-copy-mbps', '5'], '--local-min-free-gb and --drill-copy-mbps need --local-dir'),
    (['--local-dir', '/s', '--local-drain-seconds', '-1'], 'must be 0 or more'),
])
def test_local_tier_options_are_checked(argv, message, capsys):
    with pytest.raises(SystemExit):
        train.parse_args(['--run-dir', '/r', *argv])
    assert message in capsys.readouterr().err


# The background copy and its commit (no torch: files as dcp leaves them) ------------------------------------

def local_checkpoint(folder, rank, metadata=False, size=1000):
    """What dcp leaves in a rank's local directory: its shard, and .metadata on rank 0."""
    folder.mkdir(parents=True)
    (folder / f'__{rank}_0.distcp').write_bytes(bytes([rank]) * size)
    if metadata:
        (folder / '.metadata').write_bytes(b'metadata')
    return folder


def copy_of(tmp_path, rank, world, step=10, **extra):
    run_dir = tmp_path / 'run'
    run_dir.mkdir(mode=0o700, exist_ok=True)
    source = tmp_path / 'local' / f'rank-{rank}' / f'step_{step:08d}'
    if not source.exists():
        local_checkpoint(source, rank, metadata=rank == 0)
    return train.CheckpointCopy(step, str(source), str(run_dir / f'.tmp-step_{step:08d}-t'),
                                str(run_dir / f'step_{step:08d}'), rank, world, save_started=time.perf_counter(),
                                marker={'step': step, 'world_size': world, 'job_id': None, 'tier': train.LOCAL_TIER},
                                say=lambda message: None, **extra)


def test_a_copy_is_committed_with_the_marker_written_last(tmp_path, monkeypatch):
    written = train.write_json_atomically
    seen = {}

    def watch(path, document):
        if path.endswith(train.MARKER):  # the moment of the marker: everything else is there, nothing committed yet
            folder = pathlib.Path(path).parent
            seen.update(names=sorted(entry.name for entry in folder.iterdir()),
                        committed=(tmp_path / 'run' / 'step_00000010').exists())
        written(path, document)

    monkeypatch.setattr(train, 'write_json_atomically', watch)
    record = {'step': 10, 'stall_s': 0.5}
    copy = copy_of(tmp_path, 0, 1, record=record).start()
    assert copy.done.wait(30) and copy.outcome == 'committed'
    assert seen == {'names': ['.metadata', '__0_0.distcp'], 'committed': False}
    final = tmp_path / 'run' / 'step_00000010'
    assert sorted(entry.name for entry in final.iterdir()) == ['.metadata', '__0_0.distcp', train.MARKER]
    marker = json.loads((final / train.MARKER).read_text())
    assert (marker['step'], marker['tier'], marker['world_size']) == (10, 'local-then-copy', 1)
    assert marker['copy_seconds'] >= 0 and marker['time'] > 0
    assert (final / '__0_0.distcp').read_bytes() == bytes(1000)
    assert record['committed'] and record['commit_s'] >= 0 and record['bytes'] == train.tree_bytes(str(final))
    assert not (tmp_path / 'local' / 'rank-0' / 'step_00000010').exists()  # the local copy is gone after the commit
    assert [path.name for path in (tmp_path / 'run').iterdir()] == ['step_00000010']
    assert train.discover_checkpoints(str(tmp_path / 'run'))[0] == [(10, str(final))]


def test_rank_0_commits_only_once_every_rank_has_copied_its_files(tmp_path):
    first = copy_of(tmp_path, 0, 2).start()
    time.sleep(0.5)  # rank 1 is late: rank 0's files are there, the checkpoint is not
    assert not first.done.is_set() and not (tmp_path / 'run' / 'step_00000010').exists()
    assert first.progress() == (1008, 1)
    second = copy_of(tmp_path, 1, 2).start()
    assert second.done.wait(30) and first.done.wait(30)
    assert (first.outcome, second.outcome) == ('committed', 'copied')
    final = tmp_path / 'run' / 'step_00000010'
    assert sorted(entry.name for entry in final.iterdir()) == ['.metadata', '__0_0.distcp', '__1_0.distcp',
                                                               train.MARKER]
    assert (final / '__1_0.distcp').read_bytes() == bytes([1]) * 1000


def test_a_rank_whose_copy_fails_leaves_nothing_committed(tmp_path):
    local_checkpoint(tmp_path / 'local' / 'rank-1' / 'step_00000010', 0)  # rank 1 holds a file named like rank 0's
    copies = [copy_of(tmp_path, rank, 2).start() for rank in (0, 1)]
    assert all(copy.done.wait(30) for copy in copies)
    assert copies[0].outcome.startswith('rank ') and 'FileExistsError' in copies[0].outcome
    assert list((tmp_path / 'run').iterdir()) == []  # no step, and the temporary directory is gone


def test_a_copy_cut_short_is_never_taken_for_a_checkpoint(tmp_path):
    """A copy stopped half-way leaves a hidden directory without the marker: resume and the pruner pass it over."""
    done = copy_of(tmp_path, 0, 1, step=5).start()
    assert done.done.wait(30) and done.outcome == 'committed'
    source = local_checkpoint(tmp_path / 'local' / 'rank-0' / 'step_00000010', 0, metadata=True, size=200_000)
    slow = copy_of(tmp_path, 0, 1, step=10, throttle_bps=100_000).start()
    deadline = time.monotonic() + 30
    while slow.progress()[0] < 20_000:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    slow.cancel()
    assert slow.done.wait(30) and 'CopyCancelled' in slow.outcome
    assert not source.exists()
    run_dir = tmp_path / 'run'
    found, skipped = train.discover_checkpoints(str(run_dir))
    assert found == [(5, str(run_dir / 'step_00000005'))] and skipped == []
    # The pruner, configured with the trainer's marker, sees one complete checkpoint and nothing in progress.
    descriptor = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listed, _leftovers, ok = prune.scan(descriptor, str(run_dir), prune.compile_pattern(prune.DEFAULT_PATTERN),
                                            train.MARKER, lambda *args, **kwargs: None)
    finally:
        os.close(descriptor)
    assert ok and [(checkpoint.name, checkpoint.complete) for checkpoint in listed] == [('step_00000005', True)]


def test_a_file_is_copied_never_through_a_link_nor_over_a_file_there(tmp_path):
    (tmp_path / 'source').write_bytes(b'x' * 10)
    (tmp_path / 'elsewhere').write_bytes(b'keep')
    (tmp_path / 'link').symlink_to(tmp_path / 'elsewhere')
    for target in ('link', 'elsewhere'):
        with pytest.raises(FileExistsError):
            train.copy_file(str(tmp_path / 'source'), str(tmp_path / target))
    assert (tmp_path / 'elsewhere').read_bytes() == b'keep'
    assert train.copy_file(str(tmp_path / 'source'), str(tmp_path / 'new')) == 10
    assert (tmp_path / 'new').read_bytes() == b'x' * 10


# Real runs on CPU (torch) ---------------------------------------------------------------------------------

def hidden(run_dir) -> list[str]:
    return sorted(path.name for path in pathlib.Path(run_dir).iterdir() if path.name.startswith('.'))


def line_index(stdout: str, start: str) -> int:
    return next(position for position, line in enumerate(stdout.splitlines()) if line.startswith(start))


@pytest.fixture
def dirs(tmp_path):
    pytest.importorskip('torch')
    return tmp_path / 'run', tmp_path / 'scratch'


def test_checkpoints_go_to_the_node_first_and_are_committed_to_the_run_directory(dirs):
    run_dir, scratch = dirs
    codes, stdout = run_ranks(1, run_dir, *TINY, '--steps', '6', '--ckpt-every-steps', '3', '--local-dir', str(scratch))
    assert codes == [0]
    summary = summary_of(stdout)
    assert (summary['checkpoint_tier'], summary['last_step'], summary['exit_reason']) == (
        'local-then-copy', 6, 'target')
    assert summary['local_dir'].startswith(f'{scratch}/llmforge-train-local-')
    assert [checkpoint['step'] for checkpoint in summary['checkpoints']] == [3, 6]
    for checkpoint in summary['checkpoints']:
        assert checkpoint['tier'] == 'local-then-copy' and checkpoint['committed'] is True
        assert 0 < checkpoint['stall_s'] <= checkpoint['commit_s'] == checkpoint['seconds']
        assert checkpoint['wait_s'] >= 0 and checkpoint['copy_s'] >= 0
        assert checkpoint['bytes'] == train.tree_bytes(checkpoint['path'])
        marker = marker_of(checkpoint['path'])
        assert (marker['step'], marker['world_size'], marker['tier']) == (checkpoint['step'], 1, 'local-then-copy')
        assert marker['copy_seconds'] >= 0
    assert re.search(rf'^local checkpoint step=3 stall_s=[0-9.]+ wait_s=[0-9.]+ path={scratch}/llmforge-train-local-'
                     r'[0-9a-f]+/rank-0/step_00000003$', stdout, re.M), stdout
    assert re.search(rf'^checkpoint step=6 seconds=[0-9.]+ bytes=\d+ path={run_dir}/step_00000006 '
                     r'tier=local-then-copy stall_s=[0-9.]+$', stdout, re.M), stdout
    assert sorted(path.name for path in (run_dir / 'step_00000006').iterdir()) == [
        '.metadata', '__0_0.distcp', train.MARKER]
    assert hidden(run_dir) == [] and list(scratch.iterdir()) == []  # nothing left on the node
    # The next run (any tier) resumes from what was committed to the run directory.
    codes, stdout = run_ranks(1, run_dir, *TINY, '--steps', '7', '--ckpt-every-steps', '0')
    summary = summary_of(stdout)
    assert (summary['resumed_step'], summary['resumed_from'], summary['checkpoint_tier']) == (
        6, f'{run_dir}/step_00000006', 'direct')
    assert summary['checkpoints'][-1]['tier'] == 'direct'
    assert summary['checkpoints'][-1]['stall_s'] >= summary['checkpoints'][-1]['commit_s'] > 0


@pytest.mark.parametrize('strategy', ['ddp', 'fsdp'])
def test_two_ranks_each_copy_their_shards_and_the_union_is_the_checkpoint(strategy, dirs):
    run_dir, scratch = dirs
    args = [*TINY, '--strategy', strategy, '--ckpt-every-steps', '2', '--local-dir', str(scratch)]
    codes, stdout = run_ranks(2, run_dir, *args, '--steps', '4')
    assert codes == [0, 0]
    assert sorted(path.name for path in (run_dir / 'step_00000004').iterdir()) == [
        '.metadata', '__0_0.distcp', '__1_0.distcp', train.MARKER]
    assert marker_of(run_dir / 'step_00000004')['world_size'] == 2
    assert [checkpoint['committed'] for checkpoint in summary_of(stdout)['checkpoints']] == [True, True]
    assert hidden(run_dir) == [] and list(scratch.iterdir()) == []
    codes, stdout = run_ranks(2, run_dir, *args, '--steps', '5')
    summary = summary_of(stdout)
    assert (codes, summary['resumed_step'], summary['last_step']) == ([0, 0], 4, 5)


def test_a_checkpoint_due_during_a_copy_waits_for_it_and_commits_stay_in_step_order(dirs):
    """One copy at a time: a checkpoint every step, each copy about a second; the last one is committed before exit."""
    run_dir, scratch = dirs
    codes, stdout = run_ranks(1, run_dir, *TINY, '--steps', '4', '--ckpt-every-steps', '1', '--local-dir',
                              str(scratch), '--drill-copy-mbps', '0.5')
    assert codes == [0]
    for step in (2, 3, 4):
        order = [line_index(stdout, start) for start in (
            f'checkpoint step={step}: waiting for the copy of step {step - 1} to the run directory',
            f'checkpoint step={step - 1} seconds=', f'checkpoint step={step}: waited ',
            f'local checkpoint step={step} ')]
        assert order == sorted(order), stdout
    commits = [int(step) for step in re.findall(r'^checkpoint step=(\d+) seconds=', stdout, re.M)]
    assert commits == [1, 2, 3, 4]
    order = [line_index(stdout, start) for start in (
        'waiting up to 300s for the copy of step 4 to be committed', 'checkpoint step=4 seconds=', 'summary ')]
    assert order == sorted(order), stdout
    checkpoints = summary_of(stdout)['checkpoints']
    assert all(checkpoint['committed'] for checkpoint in checkpoints)
    assert all(checkpoint['wait_s'] > 0.2 and checkpoint['stall_s'] >= checkpoint['wait_s']
               for checkpoint in checkpoints[1:]), checkpoints
    assert all(checkpoint['commit_s'] > checkpoint['stall_s'] for checkpoint in checkpoints), checkpoints
    times = [marker_of(run_dir / f'step_{step:08d}')['time'] for step in (1, 2, 3, 4)]
    assert times == sorted(times)


def test_a_run_killed_during_a_copy_resumes_from_the_newest_committed_checkpoint(dirs):
    run_dir, scratch = dirs
    args = [*TINY, '--ckpt-every-steps', '5', '--local-dir', str(scratch), '--drill-copy-mbps', '0.25']
    [process] = start_ranks(1, run_dir, *args, '--steps', '100000', SLURM_JOB_ID='77')
    try:
        deadline, seen = time.monotonic() + RUN_TIMEOUT, []
        while not seen or not seen[-1].startswith('local checkpoint step=10 '):
            seen.append(process.stdout.readline())
            assert seen[-1] and time.monotonic() < deadline, ''.join(seen)
        assert any(line.startswith('checkpoint step=5 seconds=') for line in seen), ''.join(seen)
        # Step 10's copy has begun: wait until part of its shard is in the run directory, then kill the rank.
        while not [path for path in run_dir.glob('.tmp-step_00000010-*/__0_0.distcp') if path.stat().st_size]:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.communicate()
    [partial] = hidden(run_dir)
    assert partial.startswith('.tmp-step_00000010-77-')
    assert not (run_dir / partial / train.MARKER).exists() and not (run_dir / 'step_00000010').exists()
    assert train.discover_checkpoints(str(run_dir))[0] == [(5, str(run_dir / 'step_00000005'))]
    assert (scratch / 'llmforge-train-77' / 'rank-0' / 'step_00000010').is_dir()  # the node's copy of the dead run
    codes, stdout = run_ranks(1, run_dir, *args, '--steps', '7', SLURM_JOB_ID='77')
    assert codes == [0]
    assert f'removed interrupted checkpoint write {partial}' in stdout
    assert f'removed the local leftover {scratch}/llmforge-train-77/rank-0' in stdout
    summary = summary_of(stdout)
    assert (summary['resumed_step'], summary['first_step'], summary['last_step']) == (5, 6, 7)
    assert hidden(run_dir) == [] and list(scratch.iterdir()) == []


def test_a_stop_signal_waits_for_the_copy_and_the_requeued_job_has_it(dirs):
    run_dir, scratch = dirs
    [process] = start_ranks(1, run_dir, *TINY, '--steps', '100000', '--ckpt-every-steps', '0', '--local-dir',
                            str(scratch), '--drill-copy-mbps', '0.5')
    deadline, seen = time.monotonic() + RUN_TIMEOUT, []
    while not seen or not seen[-1].startswith('step=3 '):
        seen.append(process.stdout.readline())
        assert seen[-1] and time.monotonic() < deadline, ''.join(seen)
    process.send_signal(signal.SIGUSR1)
    codes, stdout, _stderr = finish([process])
    assert codes == [train.REQUEUE_EXIT]
    [stopped] = [int(step) for step in re.findall(r'^signal: checkpointed at step (\d+), exiting', stdout, re.M)]
    order = [line_index(stdout, start) for start in (
        f'waiting up to 300s for the copy of step {stopped} to be committed', f'checkpoint step={stopped} seconds=',
        'summary ')]
    assert order == sorted(order), stdout
    summary = summary_of(stdout)
    assert (summary['exit_reason'], summary['checkpoints'][-1]['committed']) == ('signal', True)
    assert marker_of(run_dir / f'step_{stopped:08d}')['step'] == stopped


def test_a_copy_that_outlasts_the_drain_bound_is_given_up_and_the_job_is_requeued(dirs):
    run_dir, scratch = dirs
    codes, stdout, _stderr = finish(start_ranks(1, run_dir, *TINY, '--steps', '2', '--ckpt-every-steps', '0',
                                                '--local-dir', str(scratch), '--drill-copy-mbps', '0.01',
                                                '--local-drain-seconds', '1'))
    assert codes == [train.REQUEUE_EXIT]
    assert ('checkpoint step=2 not committed: the copy to the run directory took more than --local-drain-seconds 1; '
            'the next run resumes from the newest committed checkpoint') in stdout
    assert 'target step 2 reached, its checkpoint not committed: exiting for requeue' in stdout
    summary = summary_of(stdout)
    assert (summary['exit_reason'], summary['checkpoints'][-1]['committed']) == ('target', False)
    assert summary['checkpoints'][-1]['commit_s'] is None
    assert train.discover_checkpoints(str(run_dir))[0] == [] and list(scratch.iterdir()) == []


# The trainer run as its program does (main, leaving with os._exit), with a bug that strikes at step 3.
FAILING_AT_STEP_3 = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location('llmforge_train', {str(TRAINER)!r})
train = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train)

def fail_at_step_3(trainer, computes):
    if trainer.step_now == 3:
        raise RuntimeError('a bug at step 3')

train.Trainer.watch_stragglers = fail_at_step_3
train.main(sys.argv[1:], leave_at_once=True)
"""


def test_a_failing_run_still_waits_for_the_copy_in_flight(dirs):
    """The step after a checkpoint fails; the rank reports its error, then the checkpoint reaches the run directory."""
    run_dir, scratch = dirs
    done = subprocess.run([sys.executable, '-c', FAILING_AT_STEP_3, '--run-dir', str(run_dir), *TINY, '--steps', '10',
                           '--ckpt-every-steps', '2', '--local-dir', str(scratch), '--drill-copy-mbps', '0.5'],
                          env=clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.rstrip().endswith('RuntimeError: a bug at step 3'), done.stderr
    order = [line_index(done.stdout, start) for start in (
        'local checkpoint step=2 ', 'waiting up to 300s for the copy of step 2 to be committed',
        'checkpoint step=2 seconds=')]
    assert order == sorted(order), done.stdout
    assert 'step=3 ' not in done.stdout  # it failed before its log line
    assert json.loads((run_dir / 'failed' / 'rank-0.json').read_text())['error'] == 'RuntimeError: a bug at step 3'
    assert train.discover_checkpoints(str(run_dir))[0] == [(2, str(run_dir / 'step_00000002'))]
    assert hidden(run_dir) == [] and list(scratch.iterdir()) == []


def refused(run_dir, *args):
    done = subprocess.run([sys.executable, str(TRAINER), '--run-dir', str(run_dir), *TINY, '--steps', '2', *args],
                          env=clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == train.REFUSED_EXIT, done.stdout + done.stderr
    assert 'step=' not in done.stdout
    return done.stderr.strip()


def test_an_untrusted_local_directory_or_too_little_space_stops_the_run_before_training(dirs):
    run_dir, scratch = dirs
    scratch.mkdir()
    stderr = refused(run_dir, '--local-dir', str(scratch), '--local-min-free-gb', '1000000')
    assert re.fullmatch(rf'llmforge-train: refusing the local checkpoint directory: {scratch}/llmforge-train-local-\S+ '
                        r'has [0-9.]+ GB free on its file system, less than --local-min-free-gb 1000000.00 '
                        r'\(as given\): free some space, point --local-dir elsewhere or lower the bound',
                        stderr), stderr
    assert list(scratch.iterdir()) == []  # the job's directory it made is gone again
    scratch.chmod(0o777)
    assert refused(run_dir, '--local-dir', str(scratch)) == (
        f'llmforge-train: refusing the local checkpoint directory: {scratch} (above the local checkpoint directory) '
        'is writable by group or others without the sticky bit (mode 0777): another user could replace the local '
        'checkpoint directory')


@as_root
def test_a_local_directory_of_another_user_stops_the_run_before_training(dirs):
    run_dir, scratch = dirs
    scratch.mkdir(mode=0o1777)
    theirs = scratch / 'llmforge-train-31'
    theirs.mkdir(mode=0o700)
    os.chown(theirs, OTHER_UID, OTHER_UID)
    done = subprocess.run([sys.executable, str(TRAINER), '--run-dir', str(run_dir), *TINY, '--steps', '2',
                           '--local-dir', str(scratch)], env=clean_env(SLURM_JOB_ID='31'), capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, check=False)
    assert done.returncode == train.REFUSED_EXIT, done.stdout + done.stderr
    assert done.stderr.strip() == (f'llmforge-train: refusing the local checkpoint directory: {theirs} is owned by uid '
                                   f"{OTHER_UID}, not by this job's uid 0")
    assert 'step=' not in done.stdout and not list(theirs.iterdir())
