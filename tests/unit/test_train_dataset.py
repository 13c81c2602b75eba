# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dataset staging of the reference trainer: once per node to node-local scratch, by content digest, and training on it."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import array
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRAINER = ROOT / 'roles' / 'training_env' / 'files' / 'llmforge_train.py'


def load_trainer():
    spec = importlib.util.spec_from_file_location('llmforge_train_dataset', TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


train = load_trainer()


@pytest.fixture
def dataset(tmp_path):
    """Token files (uint16) on 'shared storage', and the node's scratch (1777, as local_scratch makes it)."""
    source = tmp_path / 'shared' / 'tokens'
    (source / 'part').mkdir(parents=True)
    (source / 'a.bin').write_bytes(array.array('H', [i % 200 for i in range(100000)]).tobytes())
    (source / 'part' / 'b.bin').write_bytes(array.array('H', [1] * 5000).tobytes())
    (source / 'link.bin').symlink_to('/etc/hostname')  # never followed, never copied
    (tmp_path / 'scratch').mkdir(mode=0o1777)
    os.chmod(tmp_path / 'scratch', 0o1777)
    return source


def stage(source, local, **kwargs):
    return train.stage_dataset(str(source), str(local), os.geteuid(), **kwargs)


def test_a_dataset_is_staged_once_and_found_again_by_its_listing(dataset, tmp_path):
    local = tmp_path / 'scratch' / 'alice'
    first = stage(dataset, local)
    assert not first['cached'] and first['bytes'] == 210000 and first['digest'].startswith('sha256:')
    staged = pathlib.Path(first['path'])
    assert staged.parent == local / 'datasets' and staged.name == first['digest'].split(':')[1]
    assert sorted(str(path.relative_to(staged)) for path in staged.rglob('*.bin')) == ['a.bin', 'part/b.bin']
    assert (staged / '.llmforge-staged.json').exists() and oct(local.stat().st_mode & 0o777) == '0o700'
    manifest = (staged / '.llmforge-manifest').read_text().splitlines()
    assert [line.split()[1:] for line in manifest] == [['200000', 'a.bin'], ['10000', 'part/b.bin']]
    again = stage(dataset, local)
    assert again['cached'] and again['path'] == first['path']
    # Pinned by its digest: found without looking at the source's listing.
    assert stage(dataset, local, expected=first['digest'])['cached']
    # A changed source is a new listing: read again, a new digest.
    (dataset / 'a.bin').write_bytes(array.array('H', [7] * 10).tobytes())
    changed = stage(dataset, local)
    assert not changed['cached'] and changed['digest'] != first['digest']


def test_a_wrong_digest_stages_nothing(dataset, tmp_path):
    local = tmp_path / 'scratch' / 'alice'
    with pytest.raises(train.StageError, match=r'is sha256:[0-9a-f]{64}, not sha256:0{64} \(--digest\)'):
        stage(dataset, local, expected='sha256:' + '0' * 64)
    assert [path.name for path in (local / 'datasets').iterdir() if not path.name.startswith('.')] == []
    assert not list((local / 'datasets').glob('.tmp-*'))
    with pytest.raises(train.StageError, match='is not sha256:<64 hex digits>'):
        stage(dataset, local, expected='md5:abc')


def test_a_full_scratch_is_refused_before_anything_is_copied(dataset, tmp_path):
    local = tmp_path / 'scratch' / 'alice'

    class Full:
        f_bavail, f_frsize = 1000, 4096

    with pytest.raises(train.StageError, match=r'has 0.00 GB free, the dataset .* needs 0.00 GB .* nothing was copied'):
        stage(dataset, local, statvfs=lambda path: Full)
    assert not list((local / 'datasets').glob('*.bin')) and not list((local / 'datasets').glob('.tmp-*'))


def test_a_missing_source_and_another_users_directory_are_refused(dataset, tmp_path):
    with pytest.raises(train.StageError, match='cannot read the dataset'):
        stage(tmp_path / 'nothing', tmp_path / 'scratch' / 'alice')
    other = tmp_path / 'scratch' / 'bob'
    other.mkdir(parents=True, mode=0o700)
    (other / 'datasets').mkdir(mode=0o777)
    os.chmod(other / 'datasets', 0o777)
    with pytest.raises(train.RefusedRunDir, match='writable'):
        stage(dataset, other)


def test_the_command_prints_one_json_line_and_fails_with_its_own_exit(dataset, tmp_path):
    local = tmp_path / 'scratch' / 'alice'
    done = subprocess.run([sys.executable, str(TRAINER), '--stage-dataset', str(dataset), '--local-dir', str(local)],
                          capture_output=True, text=True, check=False, env={**os.environ, 'SLURMD_NODENAME': 'gpu7'})
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert line['node'] == 'gpu7' and not line['cached'] and line['mib_per_s'] > 0
    failed = subprocess.run([sys.executable, str(TRAINER), '--stage-dataset', str(dataset), '--local-dir', str(local),
                             '--digest', 'sha256:' + '1' * 64], capture_output=True, text=True, check=False)
    assert failed.returncode == train.STAGE_FAILED_EXIT and 'cannot stage the dataset' in failed.stderr


@pytest.mark.skipif(train.torch is None, reason='needs torch')
def test_batches_are_windows_of_the_dataset_and_depend_on_seed_step_and_rank_only(dataset):
    tokens = train.token_data(str(dataset), vocab_size=256)
    assert tokens.numel() == 105000 and int(tokens.max()) < 256
    inputs, targets = train.data_batch(tokens, 1, 5, 0, 4, 16)
    assert inputs.shape == (4, 16) and (inputs[:, 1:] == targets[:, :-1]).all()
    again = train.data_batch(tokens, 1, 5, 0, 4, 16)[0]
    other = train.data_batch(tokens, 1, 5, 1, 4, 16)[0]
    assert (again == inputs).all() and not (other == inputs).all()
    with pytest.raises(SystemExit, match='each below --vocab-size 100'):
        train.token_data(str(dataset), vocab_size=100)
