# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""training_env's manifest program: --write reads the environment again only when the manifest or its inputs changed."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import stat

import pytest
from ansible.plugins.filter.core import to_nice_json

PROGRAM = pathlib.Path(__file__).resolve().parents[2] / 'roles/training_env/files/llmforge_env_manifest.py'
SPEC = importlib.util.spec_from_file_location('llmforge_env_manifest', PROGRAM)
manifest_program = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(manifest_program)

DIGEST = 'a' * 64
DATA = {'environment': 'llmforge-train-aaaaaaaaaaaa', 'lock_sha256': DIGEST, 'python': '3.13.5', 'torch': '2.6.0',
        'cuda': None, 'driver': '570.195.03', 'packages': ['numpy==2.2.4', 'torch==2.6.0']}


@pytest.fixture(name='reads')
def fixture_reads(monkeypatch):
    """Count the (expensive) reads of the environment; they return DATA."""
    calls = []

    def fake_manifest(name, digest):
        calls.append((name, digest))
        return dict(DATA, environment=name, lock_sha256=digest)

    monkeypatch.setattr(manifest_program, 'manifest', fake_manifest)
    monkeypatch.setattr(manifest_program, 'inputs_digest', lambda name, digest: 'inputs-1')
    return calls


def write(path, check=False):
    return manifest_program.write(str(path), DATA['environment'], DIGEST, check)


def test_the_file_is_what_ansible_to_nice_json_wrote_so_converged_hosts_see_no_change():
    assert manifest_program.render(DATA) == (to_nice_json(DATA) + '\n').encode()


def test_the_first_write_reads_the_environment_and_the_second_does_not(tmp_path, reads):
    path = tmp_path / 'manifests' / 'gpu1.json'
    first = write(path)
    assert first['changed'] and first['reason'] == 'no manifest yet'
    assert json.loads(path.read_text()) == DATA
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o755 == 0o755
    assert (tmp_path / 'manifests' / '.gpu1.json.inputs').exists()
    assert write(path) == {'changed': False, 'reason': 'the manifest and what it was read from are unchanged'}
    assert len(reads) == 1
    assert sorted(os.listdir(path.parent)) == ['.gpu1.json.inputs', 'gpu1.json'], 'no temporary file is left'


def test_an_edited_manifest_is_read_again_and_restored(tmp_path, reads):
    path = tmp_path / 'gpu1.json'
    write(path)
    path.write_text('{"torch": "tampered"}\n')
    result = write(path)
    assert result == {'changed': True, 'reason': 'the manifest differs from what the node sees'}
    assert json.loads(path.read_text()) == DATA
    assert len(reads) == 2
    assert not write(path)['changed']


def test_a_manifest_with_another_mode_is_written_again(tmp_path, reads):
    path = tmp_path / 'gpu1.json'
    write(path)
    path.chmod(0o600)
    assert write(path)['changed']
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_changed_inputs_read_the_environment_again_and_an_equal_manifest_is_no_change(tmp_path, reads, monkeypatch):
    path = tmp_path / 'gpu1.json'
    write(path)
    before = path.stat().st_mtime_ns
    monkeypatch.setattr(manifest_program, 'inputs_digest', lambda name, digest: 'inputs-2')
    assert write(path) == {'changed': False, 'reason': 'the manifest was read again and is the same'}
    assert path.stat().st_mtime_ns == before
    assert len(reads) == 2
    assert write(path)['reason'] == 'the manifest and what it was read from are unchanged'
    assert len(reads) == 2


def test_check_mode_says_what_would_change_and_writes_nothing(tmp_path, reads):
    path = tmp_path / 'manifests' / 'gpu1.json'
    assert write(path, check=True)['changed']
    assert not path.parent.exists()
    write(path)
    path.write_text('{}\n')
    assert write(path, check=True)['changed']
    assert path.read_text() == '{}\n'


def test_the_inputs_digest_follows_a_package_installed_or_upgraded_on_the_path(tmp_path, monkeypatch):
    site = tmp_path / 'site-packages'
    (site / 'torch-2.6.0.dist-info').mkdir(parents=True)
    monkeypatch.setattr(manifest_program.sys, 'path', [str(site)])
    monkeypatch.setattr(manifest_program, 'LIBRARY_DIRS', ())
    monkeypatch.setattr(manifest_program, 'DRIVER_VERSION_FILE', str(tmp_path / 'no-driver'))
    monkeypatch.delenv('LD_LIBRARY_PATH', raising=False)
    first = manifest_program.inputs_digest('env', DIGEST)
    assert manifest_program.inputs_digest('env', DIGEST) == first
    (site / 'torch-2.6.0.dist-info').rename(site / 'torch-2.7.0.dist-info')
    upgraded = manifest_program.inputs_digest('env', DIGEST)
    assert upgraded != first
    (site / 'numpy-2.2.4.dist-info').mkdir()
    assert manifest_program.inputs_digest('env', DIGEST) != upgraded
    assert manifest_program.inputs_digest('env', 'b' * 64) != manifest_program.inputs_digest('env', DIGEST)


def test_the_inputs_digest_follows_the_nccl_library_and_the_driver(tmp_path, monkeypatch):
    libs = tmp_path / 'lib'
    libs.mkdir()
    driver = tmp_path / 'version'
    driver.write_text('NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.195.03\n')
    monkeypatch.setattr(manifest_program.sys, 'path', [])
    monkeypatch.setattr(manifest_program, 'LIBRARY_DIRS', (str(libs),))
    monkeypatch.setattr(manifest_program, 'DRIVER_VERSION_FILE', str(driver))
    first = manifest_program.inputs_digest('env', DIGEST)
    (libs / 'libnccl.so.2.26.5').write_bytes(b'\x7fELF')
    with_nccl = manifest_program.inputs_digest('env', DIGEST)
    assert with_nccl != first
    driver.write_text('NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08\n')
    assert manifest_program.inputs_digest('env', DIGEST) != with_nccl


def test_main_writes_and_prints_one_json_line(tmp_path, reads, capsys, monkeypatch):
    path = tmp_path / 'gpu1.json'
    monkeypatch.setattr(manifest_program.sys, 'argv', ['llmforge_env_manifest.py', '--name', DATA['environment'],
                                                       '--digest', DIGEST, '--write', str(path)])
    assert manifest_program.main() == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {'changed': True, 'path': str(path), 'reason': 'no manifest yet'}
