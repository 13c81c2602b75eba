# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the checkpoint pruning policy and the llmforge-checkpoint-prune program on temporary trees."""

from __future__ import annotations

import json
import os
import pathlib
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _checkpoint_prune as prune
from ansible_collections.llmforge.cluster.plugins.module_utils.programs._checkpoint_prune import Checkpoint, PruneConfigError
from node_install import install, run_launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE = ROOT / 'plugins' / 'module_utils' / 'programs' / '_checkpoint_prune.py'
NOW = 1_000_000_000.0
OLD = NOW - 86400


def checkpoints(*steps, complete=True, mtime=OLD):
    return [Checkpoint(f'step_{step:06d}', step, mtime, complete) for step in steps]


def kept(decisions):
    return [decision.checkpoint.step for decision in decisions if decision.keep]


# The policy --------------------------------------------------------------------------------------


def test_keep_last_keeps_the_highest_steps_whatever_the_input_order():
    decisions = prune.plan(checkpoints(300, 100, 500, 200, 400), keep_last=2, now=NOW)
    assert [decision.checkpoint.step for decision in decisions] == [100, 200, 300, 400, 500]
    assert kept(decisions) == [400, 500]
    assert {decision.reason for decision in decisions if decision.keep} == {'one of the newest 2'}


def test_order_is_by_step_number_not_by_mtime_nor_name():
    # step_9 sorts after step_10 as text and is the most recently touched; it is still the oldest step.
    items = [Checkpoint('step_9', 9, NOW - 7200, True), Checkpoint('step_10', 10, OLD, True), Checkpoint('step_11', 11, OLD, True)]
    assert kept(prune.plan(items, keep_last=2, now=NOW)) == [10, 11]


def test_keep_every_uses_step_numbers_so_the_decision_never_changes_between_runs():
    items = checkpoints(*range(500, 5001, 500))
    first = prune.plan(items, keep_last=2, keep_every=2000, now=NOW)
    assert kept(first) == [2000, 4000, 4500, 5000]
    assert [d.reason for d in first if d.checkpoint.step == 2000] == ['step 2000 is a multiple of keep_every 2000']
    survivors = [decision.checkpoint for decision in first if decision.keep]
    assert kept(prune.plan(survivors, keep_last=2, keep_every=2000, now=NOW)) == [2000, 4000, 4500, 5000]


def test_checkpoints_without_the_marker_are_kept_and_do_not_count_among_the_newest():
    items = checkpoints(100, 200, 300) + checkpoints(400, complete=False)
    decisions = prune.plan(items, keep_last=2, now=NOW)
    assert kept(decisions) == [200, 300, 400]
    assert decisions[-1].reason == 'in progress: no completion marker'


def test_young_checkpoints_are_in_progress():
    items = checkpoints(100, 200, 300) + checkpoints(400, mtime=NOW - 60)
    decisions = prune.plan(items, keep_last=1, min_age=600, now=NOW)
    assert kept(decisions) == [300, 400]
    assert decisions[-1].reason == 'in progress: modified 60 s ago (< min_age 600 s)'


def test_the_target_of_a_symbolic_link_is_kept():
    items = checkpoints(100, 300) + [Checkpoint('step_000200', 200, OLD, True, linked=True)]
    assert kept(prune.plan(items, keep_last=1, now=NOW)) == [200, 300]


def test_fewer_checkpoints_than_keep_last_removes_nothing():
    assert kept(prune.plan(checkpoints(1, 2), keep_last=3, now=NOW)) == [1, 2]
    assert prune.plan([], keep_last=3, now=NOW) == []


@pytest.mark.parametrize('keep_last, keep_every, min_age', [(0, 0, 0), (1, -1, 0), (1, 0, -5), (True, 0, 0), ('2', 0, 0)])
def test_bad_policies_are_refused(keep_last, keep_every, min_age):
    with pytest.raises(PruneConfigError):
        prune.plan([], keep_last, keep_every, min_age)


@pytest.mark.parametrize('pattern, name, step', [
    (prune.DEFAULT_PATTERN, 'step_000123', 123),
    (prune.DEFAULT_PATTERN, 'checkpoint-5000', 5000),
    (prune.DEFAULT_PATTERN, 'global_step42', 42),
    (prune.DEFAULT_PATTERN, 'step_000123.tmp', None),
    (prune.DEFAULT_PATTERN, 'latest', None),
    (r'ckpt_(\d+)_rank(\d+)', 'ckpt_7_rank3', 7),
    (r'epoch(?P<epoch>\d+)-step(?P<step>\d+)', 'epoch2-step900', 900),
])
def test_step_numbers_come_from_the_step_group_or_the_first_group(pattern, name, step):
    assert prune.step_of(prune.compile_pattern(pattern), name) == step


@pytest.mark.parametrize('pattern', ['step_[0-9]+', '(', '', None])
def test_patterns_need_a_group_and_must_compile(pattern):
    with pytest.raises(PruneConfigError, match='^pattern: '):
        prune.compile_pattern(pattern)


# The program on a temporary tree ------------------------------------------------------------------


def make_tree(root: pathlib.Path, steps, marker='COMPLETE', age=7200, incomplete=()):
    root.mkdir(parents=True, exist_ok=True)
    old = time.time() - age
    for step in steps:
        path = root / f'step_{step:06d}'
        path.mkdir()
        (path / 'model.pt').write_text('weights')
        if marker and step not in incomplete:
            (path / marker).write_text('')
        for item in [*path.iterdir(), path]:
            os.utime(item, (old, old))


def names(root: pathlib.Path):
    return sorted(path.name for path in root.iterdir())


def run(tmp_path, *args):
    """The program as installed: its code where the lustre_client role puts it (node_programs), run by the launcher."""
    library = tmp_path / 'lib'
    if not library.exists():
        install('programs._checkpoint_prune', library)
    return run_launcher('programs._checkpoint_prune', library, '--lock-file', str(tmp_path / 'lock'), *args)


def test_dry_run_prints_what_it_would_remove_and_removes_nothing(tmp_path):
    make_tree(tmp_path / 'run', [100, 200, 300, 400])
    result = run(tmp_path, '--root', str(tmp_path / 'run'), '--keep-last', '2', '--dry-run')
    assert result.returncode == 0, result.stderr
    assert names(tmp_path / 'run') == ['step_000100', 'step_000200', 'step_000300', 'step_000400']
    lines = result.stdout.splitlines()
    assert f"[dry-run] would remove {tmp_path / 'run' / 'step_000100'} (step 100): beyond the retention policy" in lines
    assert f"[dry-run] {tmp_path / 'run'}: 4 checkpoints, kept 2, would remove 2" in lines


def test_the_configuration_file_drives_a_real_run_with_a_log_file(tmp_path):
    make_tree(tmp_path / 'a', [1000, 1500, 2000, 2500, 3000, 3500], incomplete=(3500,))
    make_tree(tmp_path / 'b', [5, 10])
    (tmp_path / 'a' / 'latest').symlink_to('step_001500')
    (tmp_path / 'a' / 'notes').mkdir()
    log = tmp_path / 'prune.log'
    config = {'roots': [str(tmp_path / '*')], 'keep_last': 2, 'keep_every': 1000, 'min_age': 600,
              'complete_marker': 'COMPLETE', 'dry_run': True, 'log_file': str(log)}
    (tmp_path / 'config.json').write_text(json.dumps(config))
    result = run(tmp_path, '--config', str(tmp_path / 'config.json'), '--no-dry-run')
    assert result.returncode == 0, result.stderr
    assert names(tmp_path / 'a') == ['latest', 'notes', 'step_001000', 'step_001500', 'step_002000', 'step_002500',
                                     'step_003000', 'step_003500']
    make_tree(tmp_path / 'a', [4000, 4500])
    result = run(tmp_path, '--config', str(tmp_path / 'config.json'), '--no-dry-run')
    assert result.returncode == 0, result.stderr
    # Kept: multiples of 1000, the link target, the newest two complete, the incomplete one; removed: 2500.
    assert names(tmp_path / 'a') == ['latest', 'notes', 'step_001000', 'step_001500', 'step_002000', 'step_003000',
                                     'step_003500', 'step_004000', 'step_004500']
    assert names(tmp_path / 'b') == ['step_000005', 'step_000010']
    text = log.read_text()
    assert f"removed {tmp_path / 'a' / 'step_002500'} (step 2500): beyond the retention policy" in text
    assert 'in progress: no completion marker' in text and 'a symbolic link in the root points to it' in text
    assert '[dry-run]' not in text


def test_a_missing_root_is_an_error_but_the_other_roots_are_pruned(tmp_path):
    make_tree(tmp_path / 'run', [1, 2, 3])
    result = run(tmp_path, '--root', str(tmp_path / 'gone'), '--root', str(tmp_path / 'run'),
                 '--keep-last', '1', '--min-age', '0', '--no-dry-run')
    assert result.returncode == 1
    assert f"ERROR: {tmp_path / 'gone'}: cannot read the checkpoint directory" in result.stderr
    assert names(tmp_path / 'run') == ['step_000003']


def test_a_leftover_of_an_interrupted_removal_is_finished(tmp_path):
    make_tree(tmp_path / 'run', [1, 2])
    (tmp_path / 'run' / '.llmforge-pruning-step_000000').mkdir()
    result = run(tmp_path, '--root', str(tmp_path / 'run'), '--keep-last', '2', '--no-dry-run')
    assert result.returncode == 0, result.stderr
    assert names(tmp_path / 'run') == ['step_000001', 'step_000002']
    assert 'finished removing' in result.stdout


@pytest.mark.parametrize('args, message', [
    (['--keep-last', '0', '--root', '/x'], 'keep_last: 0 must be an integer of at least 1'),
    (['--root', 'relative'], 'roots: '),
    ([], 'roots: [] must be a non-empty list'),
    (['--root', '/x', '--pattern', 'step_[0-9]+'], 'pattern: '),
    (['--root', '/x', '--complete-marker', 'a/b'], 'complete_marker: '),
])
def test_bad_arguments_exit_2_with_a_message(tmp_path, args, message):
    result = run(tmp_path, *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_bad_configuration_files_exit_2(tmp_path):
    (tmp_path / 'bad.json').write_text(json.dumps({'roots': ['/x'], 'keep': 2}))
    result = run(tmp_path, '--config', str(tmp_path / 'bad.json'))
    assert result.returncode == 2 and "unknown settings ['keep']" in result.stderr
    result = run(tmp_path, '--config', str(tmp_path / 'missing.json'))
    assert result.returncode == 2 and 'cannot read the configuration' in result.stderr


def test_a_second_run_waits_for_no_one_and_does_nothing(tmp_path):
    make_tree(tmp_path / 'run', [1, 2, 3])
    with open(tmp_path / 'lock', 'a', encoding='utf-8') as lock:
        import fcntl  # pylint: disable=import-outside-toplevel
        fcntl.flock(lock, fcntl.LOCK_EX)
        result = run(tmp_path, '--root', str(tmp_path / 'run'), '--keep-last', '1', '--no-dry-run')
    assert result.returncode == 1 and 'another run holds' in result.stderr
    assert names(tmp_path / 'run') == ['step_000001', 'step_000002', 'step_000003']


def test_the_program_runs_standalone_without_the_collection(tmp_path):
    """Installed alone on a node: only the standard library may be imported."""
    result = run(tmp_path, '--help')
    assert result.returncode == 0, result.stderr
    assert sorted(path.name for path in (tmp_path / 'lib').rglob('*.py')) == ['_checkpoint_prune.py']
    assert 'keep_last' in MODULE.read_text() and 'ansible' not in MODULE.read_text().replace('Ansible', '')
