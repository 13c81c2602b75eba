# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkpoint pruner never leaves the root it was given: directories swapped for symbolic links (or for
other directories) between listing and pruning are left alone, and a victim's checkpoints outside every
root survive. The swaps happen at fixed points of a run, through the program's own functions."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _checkpoint_prune as prune

STEPS = (1, 2, 3, 4)


def make_run(path: pathlib.Path, steps=STEPS) -> None:
    old = time.time() - 86400
    for step in steps:
        checkpoint = path / f'step_{step:06d}'
        checkpoint.mkdir(parents=True)
        (checkpoint / 'model.pt').write_text('weights')
        os.utime(checkpoint, (old, old))


def names(path: pathlib.Path) -> list[str]:
    return sorted(entry.name for entry in path.iterdir())


@pytest.fixture(name='tree')
def fixture_tree(tmp_path):
    """A world-writable parent of run directories (as on scratch), and a victim's checkpoints outside it."""
    runs = tmp_path / 'ckpt'
    runs.mkdir()
    runs.chmod(0o1777)
    make_run(runs / 'run-a')
    make_run(tmp_path / 'victim')
    return tmp_path


def prune_for_real(tree: pathlib.Path, *roots: str) -> int:
    args = [arg for root in roots for arg in ('--root', root)]
    return prune.main([*args, '--keep-last', '1', '--min-age', '0', '--no-dry-run', '--lock-file', str(tree / 'lock')])


VICTIM = ['step_000001', 'step_000002', 'step_000003', 'step_000004']


def test_a_run_directory_swapped_for_a_link_between_listing_and_pruning_is_skipped(tree, monkeypatch, capsys):
    listed = prune.expand_roots

    def list_then_swap(roots, log):
        found = listed(roots, log)
        # The owner of run-a moves it aside and puts a link to someone else's checkpoints in its place.
        (tree / 'ckpt' / 'run-a').rename(tree / 'ckpt' / 'run-a.moved')
        (tree / 'ckpt' / 'run-a').symlink_to(tree / 'victim')
        return found

    monkeypatch.setattr(prune, 'expand_roots', list_then_swap)
    assert prune_for_real(tree, str(tree / 'ckpt' / '*')) == 1
    assert names(tree / 'victim') == VICTIM
    assert names(tree / 'ckpt' / 'run-a.moved') == VICTIM
    stderr = capsys.readouterr().err
    assert (f"ERROR: {tree / 'ckpt' / 'run-a'}: cannot read the checkpoint directory: it is a symbolic link, "
            'which is never followed; skipped') in stderr


def test_a_run_directory_swapped_for_another_directory_is_skipped(tree, monkeypatch, capsys):
    listed = prune.expand_roots

    def list_then_swap(roots, log):
        found = listed(roots, log)
        (tree / 'ckpt' / 'run-a').rename(tree / 'ckpt' / 'run-a.moved')
        make_run(tree / 'ckpt' / 'run-a', (7, 8))
        return found

    monkeypatch.setattr(prune, 'expand_roots', list_then_swap)
    assert prune_for_real(tree, str(tree / 'ckpt' / '*')) == 1
    assert names(tree / 'ckpt' / 'run-a') == ['step_000007', 'step_000008']
    assert 'it changed since it was listed (another directory is there now); skipped' in capsys.readouterr().err


def test_a_run_directory_swapped_after_it_was_opened_is_pruned_where_it_went(tree, monkeypatch, capsys):
    scanned = prune.scan

    def swap_then_scan(root_fd, root, *args):
        (tree / 'ckpt' / 'run-a').rename(tree / 'ckpt' / 'run-a.moved')
        (tree / 'ckpt' / 'run-a').symlink_to(tree / 'victim')
        return scanned(root_fd, root, *args)

    monkeypatch.setattr(prune, 'scan', swap_then_scan)
    assert prune_for_real(tree, str(tree / 'ckpt' / '*')) == 0, capsys.readouterr()
    # The directory that was opened is the one pruned, wherever its owner moved it; the link's target is untouched.
    assert names(tree / 'victim') == VICTIM
    assert names(tree / 'ckpt' / 'run-a.moved') == ['step_000004']


def test_a_checkpoint_swapped_for_a_link_before_its_removal_is_left_alone(tree, monkeypatch, capsys):
    planned = prune.plan

    def plan_then_swap(*args, **kwargs):
        decisions = planned(*args, **kwargs)
        run = tree / 'ckpt' / 'run-a'
        (run / 'step_000001').rename(tree / 'ckpt' / 'elsewhere')
        (run / 'step_000001').symlink_to(tree / 'victim' / 'step_000001')
        return decisions

    monkeypatch.setattr(prune, 'plan', plan_then_swap)
    assert prune_for_real(tree, str(tree / 'ckpt' / 'run-a')) == 1
    assert names(tree / 'victim') == VICTIM and names(tree / 'victim' / 'step_000001') == ['model.pt']
    run = tree / 'ckpt' / 'run-a'
    # The link keeps its name and its target; the other checkpoints beyond the policy are gone.
    assert names(run) == ['step_000001', 'step_000004'] and (run / 'step_000001').is_symlink()
    stderr = capsys.readouterr().err
    assert (f"ERROR: cannot remove {run / 'step_000001'}: it is a symbolic link, which is never followed; "
            'left in place') in stderr


def test_a_checkpoint_swapped_for_another_directory_before_its_removal_is_left_alone(tree, monkeypatch, capsys):
    planned = prune.plan

    def plan_then_swap(*args, **kwargs):
        decisions = planned(*args, **kwargs)
        run = tree / 'ckpt' / 'run-a'
        (run / 'step_000002').rename(tree / 'ckpt' / 'elsewhere')
        (run / 'step_000002').mkdir()
        (run / 'step_000002' / 'keep-me').write_text('')
        return decisions

    monkeypatch.setattr(prune, 'plan', plan_then_swap)
    assert prune_for_real(tree, str(tree / 'ckpt' / 'run-a')) == 1
    run = tree / 'ckpt' / 'run-a'
    assert names(run) == ['step_000002', 'step_000004'] and names(run / 'step_000002') == ['keep-me']
    assert 'it changed since it was listed' in capsys.readouterr().err


def test_links_inside_a_checkpoint_are_removed_not_followed(tree):
    run = tree / 'ckpt' / 'run-a'
    (run / 'step_000001' / 'data').symlink_to(tree / 'victim')
    (run / 'step_000002' / 'weights.pt').symlink_to(tree / 'victim' / 'step_000001' / 'model.pt')
    assert prune_for_real(tree, str(run)) == 0
    assert names(run) == ['step_000004']
    assert names(tree / 'victim') == VICTIM and (tree / 'victim' / 'step_000001' / 'model.pt').read_text() == 'weights'


def test_a_root_given_as_a_link_is_refused(tree, capsys):
    (tree / 'link').symlink_to(tree / 'victim')
    assert prune_for_real(tree, str(tree / 'link')) == 1
    assert names(tree / 'victim') == VICTIM
    assert 'cannot read the checkpoint directory: it is a symbolic link, which is never followed' in capsys.readouterr().err


def test_a_tree_deeper_than_the_limit_is_left_for_the_next_run(tree, capsys):
    run = tree / 'ckpt' / 'run-a'
    deep = run / 'step_000001'
    for _level in range(prune.MAX_DEPTH + 1):
        deep = deep / 'd'
    deep.mkdir(parents=True)
    os.utime(run / 'step_000001', (0, 0))
    assert prune_for_real(tree, str(run)) == 1
    assert f'more than {prune.MAX_DEPTH} directory levels' in capsys.readouterr().err
    # Hidden under the pruning prefix, never again a checkpoint; everything else is done.
    assert names(run) == ['.llmforge-pruning-step_000001', 'step_000004']


@pytest.mark.parametrize('pattern', [r'step_(\d+)', r'step_(.+)', r'step_(?P<step>\w+)'])
def test_non_ascii_digits_never_make_a_step_nor_stop_the_run(tree, pattern, capsys):
    run = tree / 'ckpt' / 'run-a'
    for odd in ('step_\u00b2', 'step_\u0663', 'step_\uff17', 'step_1\u00b2'):
        (run / odd).mkdir()
    rc = prune.main(['--root', str(run), '--pattern', pattern, '--keep-last', '1', '--min-age', '0', '--no-dry-run',
                     '--lock-file', str(tree / 'lock')])
    assert rc == 0, capsys.readouterr()
    assert names(run) == sorted(['step_\u00b2', 'step_\u0663', 'step_\uff17', 'step_1\u00b2', 'step_000004'])
    compiled = prune.compile_pattern(pattern)
    assert [prune.step_of(compiled, name) for name in ('step_\u00b2', 'step_\u0663', 'step_12')] == [None, None, 12]
