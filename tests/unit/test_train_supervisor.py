# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for what the reference job watches itself with, without torch: straggler detection, heartbeats and hangs,
failed ranks, the Slurm job comment, the stacks of a hung job's processes, node verdicts and the restart budget."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINER = ROOT / 'roles' / 'training_env' / 'files' / 'llmforge_train.py'


def load_trainer():
    spec = importlib.util.spec_from_file_location('llmforge_train_supervisor', TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load_trainer()
NODES = ('gpu1', 'gpu2', 'gpu3', 'gpu4')


# Stragglers -----------------------------------------------------------------------------------------

def test_each_rank_is_compared_with_the_median_of_the_others():
    assert train.others_median([1.0, 2.0, 3.0, 10.0]) == [3.0, 3.0, 2.0, 2.0]
    assert train.others_median([1.0, 2.0]) == [2.0, 1.0]
    assert train.others_median([5.0, 5.0, 5.0]) == [5.0, 5.0, 5.0]


def feed(detector, rows, nodes=NODES):
    return [sighting for row in rows for sighting in detector.observe(row, list(nodes[:len(row)]))]


def test_a_rank_slow_for_enough_steps_in_a_row_is_reported_once_per_node():
    detector = train.StragglerDetector(factor=1.5, steps=3)
    slow = [1.0, 1.0, 2.0, 1.1]
    assert feed(detector, [slow, slow]) == []
    [sighting] = feed(detector, [slow])
    assert sighting == {'kind': 'straggler', 'node': 'gpu3', 'rank': 2, 'factor': 2.0, 'steps': 3}
    assert feed(detector, [slow] * 10) == []  # the node was reported: no more for this run


def test_a_slow_run_that_is_broken_starts_again_and_a_rank_at_the_factor_is_not_slow():
    detector = train.StragglerDetector(factor=1.5, steps=3)
    slow, fine, edge = [1.0, 1.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.5, 1.0]
    assert feed(detector, [slow, slow, fine, slow, slow, edge, slow]) == []
    assert [s['rank'] for s in feed(detector, [slow, slow])] == [2]


def test_two_ranks_suffice_and_one_rank_or_steps_zero_never_report():
    assert [s['rank'] for s in feed(train.StragglerDetector(1.5, 2), [[1.0, 1.6]] * 2)] == [1]
    assert feed(train.StragglerDetector(1.5, 2), [[3.0]] * 5) == []
    assert feed(train.StragglerDetector(1.5, 0), [[1.0, 9.0]] * 5) == []


def test_two_slow_ranks_on_one_node_make_one_report():
    detector = train.StragglerDetector(factor=1.5, steps=2)
    nodes = ['gpu1', 'gpu1', 'gpu2', 'gpu2', 'gpu3', 'gpu3']
    row = [3.0, 3.0, 1.0, 1.0, 1.0, 1.0]
    assert [(s['node'], s['rank']) for s in feed(detector, [row, row], nodes)] == [('gpu1', 0)]


# Heartbeats, hangs and lost ranks -----------------------------------------------------------------

def beat(rank, step, when, phase='forward', node=None):
    return {'rank': rank, 'step': step, 'time': when, 'phase': phase, 'node': node or f'gpu{rank + 1}'}


def test_no_heartbeat_yet_is_waiting_and_fresh_ones_are_running():
    assert train.progress_state([], [], now=1000, hang_seconds=60)['state'] == 'waiting'
    state = train.progress_state([beat(0, 7, 990), beat(1, 8, 995)], [], now=1000, hang_seconds=60)
    assert state == {'state': 'running', 'ranks': 2, 'step': 8, 'stale_seconds': 5.0}


def test_a_hang_names_the_rank_that_stopped_first():
    # Rank 2 is still in step 12's forward pass while the others wait for it in the backward pass's collective, though
    # it reached that phase later than rank 0 reached the backward pass.
    heartbeats = [beat(0, 12, 880, 'backward'), beat(1, 12, 900, 'backward'), beat(2, 12, 885), beat(3, 12, 890, 'backward')]
    state = train.progress_state(heartbeats, [], now=1000, hang_seconds=60)
    assert (state['state'], state['rank'], state['node'], state['step'], state['phase']) == ('hung', 2, 'gpu3', 12, 'forward')
    assert state['stale_seconds'] == 100.0 and state['stopped_seconds'] == 115.0
    # Behind by a step, whatever the phase; in the same place, the oldest heartbeat, then the lowest rank.
    assert train.progress_state([beat(0, 12, 880), beat(1, 11, 890, 'sync')], [], 1000, 60)['rank'] == 1
    assert train.progress_state([beat(0, 12, 885), beat(1, 12, 880), beat(2, 12, 880)], [], 1000, 60)['rank'] == 1
    # Rank 1 was stopped while computing its gradients; rank 0 waits for it in DDP's gradient all-reduce.
    assert train.progress_state([beat(0, 12, 880, 'allreduce'), beat(1, 12, 879, 'backward')], [], 1000, 60)['rank'] == 1


def test_a_hang_names_the_rank_whose_process_stopped_even_ahead_of_the_others():
    # Rank 1 started its all-reduce, beat 'sync' and was stopped (SIGSTOP): rank 0 waits in the all-reduce that needs
    # rank 1's process, its own thread still saying it is alive; rank 1's last sign of life is as old as its stop.
    heartbeats = [beat(0, 11, 930, 'allreduce'), beat(1, 11, 931, 'sync')]
    alive = [{'rank': 0, 'time': 998}, {'rank': 1, 'time': 929}]
    state = train.progress_state(heartbeats, [], now=1000, hang_seconds=60, alive=alive)
    assert (state['rank'], state['node'], state['unresponsive_ranks']) == (1, 'gpu2', [1])
    # Without signs of life, or with every process silent (or alive), the heartbeats alone decide.
    assert train.progress_state(heartbeats, [], now=1000, hang_seconds=60)['rank'] == 0
    silent = [{'rank': 0, 'time': 930}, {'rank': 1, 'time': 929}]
    assert 'unresponsive_ranks' not in train.progress_state(heartbeats, [], 1000, 60, alive=silent)
    fresh = [{'rank': 0, 'time': 999}, {'rank': 1, 'time': 999}]
    assert train.progress_state(heartbeats, [], 1000, 60, alive=fresh)['rank'] == 0


def test_every_rank_says_it_is_alive_from_a_thread_of_its_own(tmp_path):
    for name in train.SUPERVISION_DIRS:
        (tmp_path / name).mkdir(mode=0o700)
    records = train.RankRecords(str(tmp_path), 3, environ={'SLURM_JOB_ID': '7', 'SLURMD_NODENAME': 'gpu4'})
    stop = threading.Event()
    thread = records.keep_alive(interval=0.05, stop=stop)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (tmp_path / 'alive' / 'rank-3.json').exists():
        time.sleep(0.02)
    # Stopped, so that it does not go on renaming files beside the later tests of this process.
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
    [alive] = train.heartbeats_of(str(tmp_path), '7', 0, train.ALIVE_DIR)
    assert (alive['rank'], alive['node'], alive['job_id']) == (3, 'gpu4', '7')


def test_hang_seconds_zero_turns_the_watch_off():
    assert train.progress_state([beat(0, 1, 0)], [], now=10 ** 9, hang_seconds=0)['state'] == 'running'


def test_a_failed_rank_is_a_lost_node_only_after_the_grace():
    failures = [{'rank': 3, 'node': 'gpu4', 'time': 990, 'error': 'RuntimeError: Connection closed by peer'},
                {'rank': 1, 'node': 'gpu2', 'time': 995, 'error': 'RuntimeError: x'}]
    fresh = [beat(0, 5, 999)]
    assert train.progress_state(fresh, failures, now=1000, hang_seconds=60, lost_grace=30)['state'] == 'running'
    assert train.progress_state(fresh, failures, now=1000, hang_seconds=60)['state'] == 'running'  # not asked
    lost = train.progress_state(fresh, failures, now=1020, hang_seconds=60, lost_grace=30)
    assert lost == {'state': 'lost', 'rank': 3, 'node': 'gpu4', 'error': 'RuntimeError: Connection closed by peer',
                    'failed_seconds': 30.0, 'failed_ranks': [1, 3]}


def write_json(path, document):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    return path


def test_only_this_job_runs_records_count_and_links_are_not_followed(tmp_path):
    run_dir = tmp_path / 'run'
    write_json(run_dir / 'heartbeat' / 'rank-0.json', {**beat(0, 9, 100), 'job_id': '42', 'restart': 1})
    write_json(run_dir / 'heartbeat' / 'rank-1.json', {**beat(1, 3, 50), 'job_id': '42', 'restart': 0})  # last run
    write_json(run_dir / 'heartbeat' / 'rank-2.json', {**beat(2, 9, 100), 'job_id': '41', 'restart': 1})  # other job
    (run_dir / 'heartbeat' / 'rank-3.json').write_text('{"cut sho')
    write_json(tmp_path / 'elsewhere.json', {**beat(4, 1, 1), 'job_id': '42', 'restart': 1})
    (run_dir / 'heartbeat' / 'rank-4.json').symlink_to(tmp_path / 'elsewhere.json')
    (run_dir / 'heartbeat' / '.rank-5.json.tmp-77').write_text(json.dumps({**beat(5, 1, 1), 'job_id': '42', 'restart': 1}))
    assert [record['rank'] for record in train.heartbeats_of(str(run_dir), '42', 1)] == [0]
    assert len(train.heartbeats_of(str(run_dir), None, 0)) == 3  # outside Slurm: every readable one
    assert train.failures_of(str(run_dir), '42', 1) == []


# The job comment ---------------------------------------------------------------------------------

def test_sightings_read_as_suspect_entries():
    assert train.suspect_entry({'kind': 'straggler', 'node': 'gpu7', 'rank': 5, 'factor': 1.83}) == \
        'llmforge-suspect gpu7 straggler x1.83 rank5'
    assert train.suspect_entry({'kind': 'hang', 'node': 'gpu 2;x', 'rank': 1, 'step': 57}) == \
        'llmforge-suspect gpu_2_x hang rank1 step57'


def test_entries_are_added_once_beside_what_the_comment_held():
    entry = 'llmforge-suspect gpu2 hang rank1 step57'
    assert train.merge_comment('', [entry]) == entry
    assert train.merge_comment('project x', [entry]) == f'project x;{entry}'
    assert train.merge_comment(f'project x; {entry}', [entry]) == f'project x; {entry}'  # unchanged: no update
    assert train.merge_comment(f'{entry};other', ['llmforge-suspect gpu3 lost', 'llmforge-suspect gpu3 lost']) == \
        f'other;{entry};llmforge-suspect gpu3 lost'


def test_a_full_comment_loses_its_oldest_suspects_first_then_the_rest():
    old = [f'llmforge-suspect gpu{n} straggler x1.6 rank{n}' for n in range(10)]
    new = 'llmforge-suspect gpu99 hang rank99 step1000'
    merged = train.merge_comment(';'.join(['keep me'] + old), [new], cap=120)
    assert len(merged) <= 120 and merged.startswith('keep me;') and merged.endswith(new)
    assert old[-1] in merged and old[0] not in merged
    assert train.merge_comment('x' * 300, [new], cap=120) == new
    assert train.merge_comment('', ['y' * 300], cap=120) == 'y' * 120


SHOW_JOB = ('JobId=42 JobName=llmforge-train\n'
            '   UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A\n'
            '   JobState=RUNNING Reason=None Dependency=(null)\n'
            '   Comment=project x;llmforge-suspect gpu2 lost \n'  # scontrol ends each field with a space
            '   StdOut=/runs/alice/llmforge-train-42.out\n')


def test_the_comment_is_read_from_scontrol_show_job():
    assert train.comment_of(SHOW_JOB) == 'project x;llmforge-suspect gpu2 lost'
    assert train.comment_of(SHOW_JOB.replace('   Comment=project x;llmforge-suspect gpu2 lost \n', '')) == ''
    assert train.comment_of('   Comment=(null)\n') == ''


class FakeScontrol:
    def __init__(self, show=SHOW_JOB, show_rc=0, update_rc=0, raises=None):
        self.calls, self.show, self.show_rc, self.update_rc, self.raises = [], show, show_rc, update_rc, raises

    def __call__(self, argv, **kwargs):
        self.calls.append(argv)
        assert kwargs['timeout'] > 0
        if self.raises:
            raise self.raises
        code = self.show_rc if argv[1] == 'show' else self.update_rc
        return subprocess.CompletedProcess(argv, code, self.show if argv[1] == 'show' else '', '')


@pytest.fixture
def scontrol_on_path(tmp_path, monkeypatch):
    (tmp_path / 'scontrol').write_text('#!/bin/sh\n')
    (tmp_path / 'scontrol').chmod(0o755)
    monkeypatch.setenv('PATH', f"{tmp_path}:{os.environ['PATH']}")


def test_a_report_updates_the_comment_of_the_job(scontrol_on_path):
    run = FakeScontrol()
    merged = train.report_to_slurm(['llmforge-suspect gpu3 hang rank4 step9'], {'SLURM_JOB_ID': '42'}, run)
    assert merged == 'project x;llmforge-suspect gpu2 lost;llmforge-suspect gpu3 hang rank4 step9'
    assert run.calls == [['scontrol', 'show', 'job', '42'], ['scontrol', 'update', 'jobid=42', f'comment={merged}']]


@pytest.mark.parametrize('environ, run, expected_calls', [
    ({}, FakeScontrol(), 0),
    ({'SLURM_JOB_ID': '42'}, FakeScontrol(show_rc=1), 1),
    ({'SLURM_JOB_ID': '42'}, FakeScontrol(update_rc=1), 2),
    ({'SLURM_JOB_ID': '42'}, FakeScontrol(raises=subprocess.TimeoutExpired('scontrol', 30)), 1),
    ({'SLURM_JOB_ID': '42'}, FakeScontrol(raises=OSError('gone')), 1),
], ids=['not-under-slurm', 'show-failed', 'update-failed', 'timeout', 'oserror'])
def test_a_report_that_cannot_be_made_is_skipped_without_an_error(scontrol_on_path, environ, run, expected_calls):
    assert train.report_to_slurm(['llmforge-suspect gpu3 lost'], environ, run) is None
    assert len(run.calls) == expected_calls


def test_without_scontrol_nothing_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))
    run = FakeScontrol()
    assert train.report_to_slurm(['llmforge-suspect gpu3 lost'], {'SLURM_JOB_ID': '42'}, run) is None
    assert run.calls == []


def test_sightings_go_to_the_run_directory_only_when_it_is_trusted(tmp_path, monkeypatch):
    monkeypatch.setenv('PATH', str(tmp_path))  # no scontrol: the comment part is skipped
    run_dir, said = tmp_path / 'run', []
    run_dir.mkdir(mode=0o700)
    environ = {'SLURM_JOB_ID': '42', 'SLURM_RESTART_COUNT': '2'}
    train.record_sightings(str(run_dir), [{'kind': 'lost', 'node': 'gpu2'}], environ, said.append)
    [line] = (run_dir / 'sightings.jsonl').read_text().splitlines()
    assert json.loads(line) == {'kind': 'lost', 'node': 'gpu2', 'time': json.loads(line)['time'], 'job_id': '42',
                                'restart': 2}
    assert stat.S_IMODE((run_dir / 'sightings.jsonl').stat().st_mode) == 0o600
    assert said == []  # a lost node is not for the job comment: its health check deals with it
    train.record_sightings(str(run_dir), [{'kind': 'hang', 'node': 'gpu2', 'rank': 1, 'step': 5}], environ, said.append)
    assert said == ['the job comment was not updated (scontrol failed or is missing)']
    run_dir.chmod(0o777)
    said.clear()
    train.record_sightings(str(run_dir), [{'kind': 'lost', 'node': 'gpu3'}], {}, said.append)
    assert len((run_dir / 'sightings.jsonl').read_text().splitlines()) == 2
    assert said == [f'sightings not written to {run_dir}: {run_dir} is writable by group or others (mode 0777)']


# Files a rank writes -------------------------------------------------------------------------------

def test_supervision_directories_are_private_and_a_link_is_refused(tmp_path):
    made = train.private_dir(str(tmp_path / 'steps'), os.geteuid())
    assert stat.S_IMODE(os.lstat(made).st_mode) == 0o700
    assert train.private_dir(made, os.geteuid()) == made
    (tmp_path / 'elsewhere').mkdir(mode=0o700)
    (tmp_path / 'heartbeat').symlink_to(tmp_path / 'elsewhere')
    with pytest.raises(train.RefusedRunDir, match='heartbeat is a symbolic link'):
        train.private_dir(str(tmp_path / 'heartbeat'), os.geteuid())


def test_the_step_log_is_rotated_at_its_cap(tmp_path):
    log = train.StepLog(str(tmp_path / 'rank-0.jsonl'), max_bytes=200)
    for step in range(1, 21):  # about 30 bytes a line: two rotations
        log.write({'step': step, 'seconds': 0.5})
    log.close()
    current = [json.loads(line)['step'] for line in (tmp_path / 'rank-0.jsonl').read_text().splitlines()]
    previous = [json.loads(line)['step'] for line in (tmp_path / 'rank-0.jsonl.1').read_text().splitlines()]
    assert previous + current == list(range(previous[0], 21)) and previous[0] > 1 and current
    assert (tmp_path / 'rank-0.jsonl').stat().st_size < 200
    assert stat.S_IMODE((tmp_path / 'rank-0.jsonl').stat().st_mode) == 0o600


def make_run_dir(tmp_path):
    run_dir = tmp_path / 'run'
    run_dir.mkdir(mode=0o700)
    for name in train.SUPERVISION_DIRS:
        train.private_dir(str(run_dir / name), os.geteuid())
    return run_dir


def test_a_rank_leaves_its_steps_heartbeat_and_failure(tmp_path):
    run_dir = make_run_dir(tmp_path)
    environ = {'SLURM_JOB_ID': '42', 'SLURM_RESTART_COUNT': '1', 'SLURMD_NODENAME': 'gpu2'}
    records = train.RankRecords(str(run_dir), 3, environ)
    try:
        records.beat(7, 'backward')
        records.step_done(7, 0.25, 0.125)
        heartbeat = json.loads((run_dir / 'heartbeat' / 'rank-3.json').read_text())
        assert heartbeat == {'step': 7, 'phase': 'backward', 'time': heartbeat['time'], 'rank': 3, 'node': 'gpu2',
                             'pid': os.getpid(), 'job_id': '42', 'restart': 1}
        [line] = (run_dir / 'steps' / 'rank-3.jsonl').read_text().splitlines()
        assert json.loads(line) == {'step': 7, 'rank': 3, 'node': 'gpu2', 'seconds': 0.25, 'compute_seconds': 0.125,
                                    'time': json.loads(line)['time'], 'job_id': '42', 'restart': 1}
        records.failed('Traceback (most recent call last):\n  File "x", line 1\nRuntimeError: boom\n')
        [failure] = train.failures_of(str(run_dir), '42', 1)
        assert (failure['rank'], failure['node'], failure['error']) == (3, 'gpu2', 'RuntimeError: boom')
        assert sorted(path.name for path in (run_dir / 'heartbeat').iterdir()) == ['rank-3.json']
        assert 'stacks on SIGUSR2 follow' in (run_dir / 'stacks' / 'rank-3.txt').read_text()
    finally:
        import faulthandler
        faulthandler.unregister(signal.SIGUSR2)


def test_a_rank_whose_files_cannot_be_written_says_so_once_and_goes_on(tmp_path, capsys):
    run_dir = make_run_dir(tmp_path)
    (tmp_path / 'outside').write_text('')
    (run_dir / 'steps' / 'rank-0.jsonl').symlink_to(tmp_path / 'outside')
    (run_dir / 'heartbeat').chmod(0o500)
    records = train.RankRecords(str(run_dir), 0, {})
    try:
        if os.geteuid() != 0:
            records.beat(1, 'forward')
            records.beat(2, 'forward')
        records.step_done(1, 0.1, 0.1)
    finally:
        import faulthandler
        faulthandler.unregister(signal.SIGUSR2)
    errors = capsys.readouterr().err
    assert errors.count('cannot write its step log') == 1, errors
    assert (tmp_path / 'outside').read_text() == ''
    if os.geteuid() != 0:
        assert errors.count('cannot write its heartbeat') == 1, errors


def test_allowing_stack_readers_never_fails():
    assert train.allow_stack_readers() in (True, False)


# Stacks of a hung job ----------------------------------------------------------------------------

def fake_process(proc_root, pid, argv, environ, sig_caught=0):
    folder = proc_root / str(pid)
    folder.mkdir(parents=True)
    (folder / 'cmdline').write_bytes(b'\0'.join(part.encode() for part in argv) + b'\0')
    (folder / 'environ').write_bytes(b'\0'.join(f'{k}={v}'.encode() for k, v in environ.items()) + b'\0')
    (folder / 'status').write_text(f'Name:\tpython3\nSigCgt:\t{sig_caught:016x}\n')
    return folder


TRAINER_ARGV = ['/env/bin/python', '/env/lib/llmforge/llmforge_train.py', '--run-dir', '/runs/a/job-42', '--steps', '9']


def test_the_job_trainer_processes_on_a_node_are_found_by_job_program_and_run_directory(tmp_path):
    proc = tmp_path / 'proc'
    job = {'SLURM_JOB_ID': '42', 'PATH': '/usr/bin'}
    fake_process(proc, 300, TRAINER_ARGV, {**job, 'SLURM_PROCID': '9'})
    fake_process(proc, 200, ['/env/bin/python', '-u', '/elsewhere/llmforge_train.py', '--run-dir=/runs/a/job-42/'],
                 {**job, 'RANK': '8'})
    fake_process(proc, 400, TRAINER_ARGV, {'SLURM_JOB_ID': '43', 'SLURM_PROCID': '1'})            # another job
    fake_process(proc, 500, TRAINER_ARGV[:2] + ['--run-dir', '/runs/a/job-7'], {**job, 'SLURM_PROCID': '2'})
    fake_process(proc, 600, TRAINER_ARGV[:2] + ['--dump-stacks', '--run-dir', '/runs/a/job-42'], job)  # a helper
    fake_process(proc, 700, ['/bin/bash', '/runs/a/llmforge-train.sbatch', '--run-dir', '/runs/a/job-42'], job)
    fake_process(proc, 800, TRAINER_ARGV, {**job, 'SLURM_PROCID': '3'})                           # ourselves
    relative = fake_process(proc, 850, TRAINER_ARGV[:2] + ['--run-dir', 'job-42'], {**job, 'SLURM_PROCID': '4'})
    (relative / 'cwd').symlink_to('/runs/a')  # started in /runs/a with a relative run directory
    (proc / 'self').mkdir()
    gone = fake_process(proc, 900, TRAINER_ARGV, job)
    (gone / 'environ').unlink()  # ended while we looked
    found = train.trainer_processes('42', '/runs/a/job-42', os.geteuid(), str(proc), exclude={800})
    assert found == [{'pid': 850, 'rank': 4}, {'pid': 200, 'rank': 8}, {'pid': 300, 'rank': 9}]
    if os.geteuid() == 0:
        os.chown(proc / '300', 20002, 20002)
        assert [process['pid'] for process in train.trainer_processes('42', '/runs/a/job-42', 0, str(proc),
                                                                      exclude={800})] == [850, 200]


def test_a_process_catches_a_signal_only_with_a_handler(tmp_path):
    fake_process(tmp_path, 10, TRAINER_ARGV, {}, sig_caught=1 << (signal.SIGUSR2 - 1))
    fake_process(tmp_path, 11, TRAINER_ARGV, {}, sig_caught=1 << (signal.SIGUSR1 - 1))
    assert train.catches(10, signal.SIGUSR2, str(tmp_path)) and not train.catches(11, signal.SIGUSR2, str(tmp_path))
    assert not train.catches(12, signal.SIGUSR2, str(tmp_path))


def test_py_spy_writes_the_stacks_and_its_failure_falls_back_to_the_ranks_own_handler(tmp_path):
    proc, sent = tmp_path / 'proc', []
    fake_process(proc, 10, TRAINER_ARGV, {}, sig_caught=1 << (signal.SIGUSR2 - 1))
    fake_process(proc, 11, TRAINER_ARGV, {})

    def py_spy(code, out='', err=''):
        def run(argv, **kwargs):
            assert argv[1:] == ['dump', '--pid', argv[3]] and kwargs['timeout'] > 0
            return subprocess.CompletedProcess(argv, code, out, err)
        return run

    spied = tmp_path / 'spied.txt'
    how = train.dump_one({'pid': 10, 'rank': 1}, str(spied), '/env/bin/py-spy', str(proc),
                         py_spy(0, 'Thread 10 (idle): "MainThread"\n    train (llmforge_train.py:900)\n'),
                         lambda pid, signum: sent.append((pid, signum)))
    assert how == 'py-spy' and 'train (llmforge_train.py:900)' in spied.read_text() and sent == []
    assert stat.S_IMODE(spied.stat().st_mode) == 0o600
    how = train.dump_one({'pid': 10, 'rank': 1}, str(spied), '/env/bin/py-spy', str(proc),
                         py_spy(1, err='Error: Operation not permitted (os error 1)'),
                         lambda pid, signum: sent.append((pid, signum)))
    assert how == ('py-spy failed (exit 1): Error: Operation not permitted (os error 1); SIGUSR2 sent: the rank '
                   'appends its own stacks to stacks/rank-1.txt')
    assert sent == [(10, signal.SIGUSR2)] and how in spied.read_text()
    how = train.dump_one({'pid': 11, 'rank': 2}, str(spied), None, str(proc), py_spy(0),
                         lambda pid, signum: sent.append((pid, signum)))
    assert how == 'py-spy is not installed; no stack handler in the process yet, nothing sent' and len(sent) == 1


def test_stacks_of_a_real_process_come_from_its_own_handler_when_py_spy_is_missing(tmp_path):
    """A stand-in rank: a program named like the trainer, with the trainer's stack handler, asleep in a function."""
    run_dir = make_run_dir(tmp_path)
    program = tmp_path / 'bin' / 'llmforge_train.py'
    program.parent.mkdir()
    program.write_text(textwrap.dedent(f'''\
        import faulthandler, signal, sys, time
        handle = open({str(run_dir / 'stacks' / 'rank-0.txt')!r}, 'a')
        faulthandler.register(signal.SIGUSR2, file=handle, all_threads=True)
        def stuck_in_a_collective():
            print('ready', flush=True)
            time.sleep(60)
        stuck_in_a_collective()
        '''))
    environ = {**os.environ, 'SLURM_JOB_ID': '4242', 'SLURM_PROCID': '0', 'SLURMD_NODENAME': 'gpu1'}
    process = subprocess.Popen([sys.executable, str(program), '--run-dir', str(run_dir)], env=environ,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == 'ready\n'
        said = []
        count = train.dump_stacks(str(run_dir), {'SLURM_JOB_ID': '4242', 'SLURMD_NODENAME': 'gpu1'}, py_spy=None,
                                  say=said.append)
        assert count == 1, said
        assert said == [f'stacks on gpu1: rank 0 pid {process.pid} -> {run_dir}/stacks/gpu1-rank0-restart0.txt '
                        '(py-spy is not installed; SIGUSR2 sent: the rank appends its own stacks to stacks/rank-0.txt)']
        deadline = time.monotonic() + 10
        while 'stuck_in_a_collective' not in (run_dir / 'stacks' / 'rank-0.txt').read_text():
            assert time.monotonic() < deadline, 'the rank wrote no stacks'
            time.sleep(0.05)
        assert process.poll() is None  # the signal dumped the stacks and left the rank running
    finally:
        process.kill()
        process.wait()


def test_no_stacks_are_written_into_a_run_directory_that_is_not_trusted(tmp_path):
    run_dir = make_run_dir(tmp_path)
    (run_dir / 'stacks').chmod(0o777)
    said = []
    assert train.dump_stacks(str(run_dir), {'SLURM_JOB_ID': '1', 'SLURMD_NODENAME': 'gpu1'}, say=said.append) == 0
    assert said == [f'stacks on gpu1: not written: {run_dir}/stacks is writable by group or others (mode 0777)']


# Node verdicts and the restart budget ------------------------------------------------------------

def answer(node, healthy, reason=''):
    return json.dumps({'node': node, 'healthy': healthy, 'reason': reason})


@pytest.mark.parametrize('lines, verdict, unhealthy, silent', [
    ([answer('gpu1', True), answer('gpu2', True)], 'healthy', [], []),
    ([answer('gpu1', True), answer('gpu2', False, 'Xid 79 on GPU 3')], 'bad',
     [{'node': 'gpu2', 'reason': 'Xid 79 on GPU 3'}], []),
    ([answer('gpu1', True), 'srun: error: gpu2: task 1: Exited with exit code 255'], 'bad', [], ['gpu2']),
    (['srun: error: execve(): llmforge-nodecheck-request: No such file or directory', '{"not": "an answer"}'],
     'unknown', [], ['gpu1', 'gpu2']),
    ([answer('gpu1.cluster.example', True), answer('gpu2', 'yes')], 'bad', [{'node': 'gpu2', 'reason': 'no reason given'}], []),
], ids=['healthy', 'unhealthy', 'silent', 'no-answer', 'fqdn-and-not-true'])
def test_node_answers_make_a_verdict(lines, verdict, unhealthy, silent):
    judged = train.node_verdict(lines, ['gpu1', 'gpu2'])
    assert (judged['verdict'], judged['unhealthy'], judged['silent']) == (verdict, unhealthy, silent)


def test_failures_count_until_a_newer_checkpoint_is_committed():
    records = [{'job_id': '42', 'checkpoint': 50}, {'job_id': '42', 'checkpoint': 100},
               {'job_id': '42', 'checkpoint': 100}, {'job_id': '41', 'checkpoint': 100}]
    assert train.restart_budget(records, '42', 100, 3) == {'failures': 2, 'max_restarts': 3, 'checkpoint': 100,
                                                           'requeue': True}
    assert train.restart_budget(records + [{'job_id': '42', 'checkpoint': 100}], '42', 100, 3)['requeue'] is False
    assert train.restart_budget(records, '42', 150, 3)['failures'] == 0
    assert train.restart_budget([], '42', None, 0)['requeue'] is False


def helper(*argv, env=None, stdin=''):
    """The trainer's helper mode as the job shell runs it (a program of its own)."""
    return subprocess.run([sys.executable, str(TRAINER), *argv], input=stdin, capture_output=True, text=True,
                          env={**{k: v for k, v in os.environ.items() if not k.startswith('SLURM_')}, **(env or {})},
                          timeout=60, check=False)


def test_the_restart_budget_is_kept_in_the_run_directory(tmp_path):
    run_dir = make_run_dir(tmp_path)
    write_json(run_dir / 'failed' / 'rank-1.json', {'rank': 1, 'node': 'gpu2', 'error': 'RuntimeError: boom',
                                                    'job_id': '42', 'restart': 0})
    env = {'SLURM_JOB_ID': '42', 'SLURM_RESTART_COUNT': '0', 'PATH': os.environ['PATH']}
    codes = [helper('--restart-budget', str(run_dir), '--max-restarts', '2', '--reason', 'srun exit 1', env=env)
             for _attempt in range(3)]
    assert [done.returncode for done in codes] == [0, 0, train.RESTARTS_SPENT_EXIT], codes[-1].stderr
    assert codes[0].stdout.splitlines()[0] == 'rank 1 on gpu2 failed: RuntimeError: boom'
    assert json.loads(codes[2].stdout.splitlines()[-1]) == {'failures': 2, 'max_restarts': 2, 'checkpoint': None,
                                                            'requeue': False}
    lines = [json.loads(line) for line in (run_dir / 'restarts.jsonl').read_text().splitlines()]
    assert [(line['reason'], line['requeued']) for line in lines] == [('srun exit 1', True)] * 2 + [('srun exit 1', False)]
    # A newer checkpoint is progress: the count starts again.
    checkpoint = run_dir / 'step_00000010'
    checkpoint.mkdir()
    write_json(checkpoint / train.MARKER, {'step': 10})
    assert helper('--restart-budget', str(run_dir), '--max-restarts', '2', env=env).returncode == 0


@pytest.mark.parametrize('restarts, code', [('2', 0), ('3', train.RESTARTS_SPENT_EXIT)])
def test_without_a_run_directory_the_jobs_restart_count_is_the_budget(tmp_path, restarts, code):
    done = helper('--restart-budget', str(tmp_path / 'never-made'), '--max-restarts', '3',
                  env={'SLURM_JOB_ID': '42', 'SLURM_RESTART_COUNT': restarts})
    assert done.returncode == code, done.stderr
    assert json.loads(done.stdout)['counted_by'] == 'SLURM_RESTART_COUNT'
    assert not (tmp_path / 'never-made').exists()


def test_the_hang_check_reports_and_answers_in_its_exit_code_without_importing_torch(tmp_path):
    run_dir = make_run_dir(tmp_path)
    env = {'SLURM_JOB_ID': '42', 'PATH': str(tmp_path)}  # no scontrol
    assert helper('--hang-check', str(run_dir), '--seconds', '5', env=env).returncode == 0
    now = time.time()
    write_json(run_dir / 'heartbeat' / 'rank-0.json', {**beat(0, 9, now - 20, 'backward'), 'job_id': '42', 'restart': 0})
    write_json(run_dir / 'heartbeat' / 'rank-1.json', {**beat(1, 9, now - 30), 'job_id': '42', 'restart': 0})
    done = helper('--hang-check', str(run_dir), '--seconds', '60', env=env)
    assert (done.returncode, json.loads(done.stdout)['state']) == (0, 'running')
    done = helper('--hang-check', str(run_dir), '--seconds', '10', '--report', env=env)
    assert done.returncode == train.HUNG_EXIT, done.stderr
    state = json.loads(done.stdout.splitlines()[0])
    assert (state['rank'], state['node'], state['step'], state['phase']) == (1, 'gpu2', 9, 'forward')
    [sighting] = [json.loads(line) for line in (run_dir / 'sightings.jsonl').read_text().splitlines()]
    assert (sighting['kind'], sighting['node'], sighting['rank'], sighting['step']) == ('hang', 'gpu2', 1, 9)
    write_json(run_dir / 'failed' / 'rank-0.json', {'rank': 0, 'node': 'gpu1', 'time': now - 40, 'job_id': '42',
                                                    'restart': 0, 'error': 'RuntimeError: Connection closed by peer'})
    done = helper('--hang-check', str(run_dir), '--seconds', '0', '--lost-grace', '30', env=env)
    assert (done.returncode, json.loads(done.stdout)['state']) == (train.LOST_EXIT, 'lost')
    probe = subprocess.run([sys.executable, '-c', textwrap.dedent(f'''\
        import runpy, sys
        sys.argv = [{str(TRAINER)!r}, '--hang-check', {str(run_dir)!r}, '--seconds', '0']
        try:
            runpy.run_path(sys.argv[0], run_name='__main__')
        except SystemExit:
            pass
        print('torch imported' if 'torch' in sys.modules else 'no torch')
        ''')], capture_output=True, text=True, timeout=60, check=False)
    assert probe.stdout.splitlines()[-1] == 'no torch', probe.stdout + probe.stderr


def test_the_node_verdict_reads_stdin_and_reports_bad_nodes(tmp_path):
    run_dir = make_run_dir(tmp_path)
    env = {'SLURM_JOB_ID': '42', 'PATH': str(tmp_path)}
    done = helper('--node-verdict', str(run_dir), '--nodes', 'gpu[1-3]', '--report', env=env,
                  stdin=answer('gpu1', True) + '\n' + answer('gpu3', False, 'GPU 2 fell off the bus') + '\n')
    assert done.returncode == train.NODES_BAD_EXIT, done.stderr
    assert json.loads(done.stdout.splitlines()[0])['silent'] == ['gpu2']
    sightings = [json.loads(line) for line in (run_dir / 'sightings.jsonl').read_text().splitlines()]
    assert [(s['kind'], s['node']) for s in sightings] == [('unhealthy', 'gpu3'), ('lost', 'gpu2')]
    assert sightings[0]['reason'] == 'GPU 2 fell off the bus'
    assert helper('--node-verdict', str(run_dir), '--nodes', 'gpu[1-2]', env=env,
                  stdin=answer('gpu1', True) + '\n' + answer('gpu2', True)).returncode == 0
    assert helper('--node-verdict', str(run_dir), '--nodes', 'gpu[1-2]', env=env, stdin='').returncode == \
        train.NODES_UNKNOWN_EXIT
