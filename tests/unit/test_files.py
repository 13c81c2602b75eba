# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one atomic file writer of the node programs (_files.write_atomic) and its textfile form."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _files, _prometheus

WRITERS = [pytest.param(_files.write_atomic, id='write_atomic'), pytest.param(_prometheus.write_textfile, id='write_textfile')]


@pytest.mark.parametrize('write', WRITERS)
def test_replaces_and_leaves_no_temporary_file(tmp_path, write):
    target = tmp_path / 'slurm.prom'
    target.write_text('old\n', encoding='utf-8')
    write(str(target), 'new\n')
    assert target.read_text(encoding='utf-8') == 'new\n'
    assert os.listdir(tmp_path) == ['slurm.prom']
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


@pytest.mark.parametrize('write', WRITERS)
def test_temporary_name_is_not_read_by_the_textfile_collector(tmp_path, monkeypatch, write):
    renames = []
    real_replace = os.replace

    def recording_replace(source, destination, *args, **kwargs):
        # Only renames into this test's directory (see test_owner_and_group_are_given_before_the_rename).
        if pathlib.Path(destination).parent == tmp_path:
            renames.append((pathlib.Path(source), pathlib.Path(destination)))
        real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, 'replace', recording_replace)
    write(str(tmp_path / 'slurm.prom'), 'x 1\n')
    [(source, destination)] = renames
    assert source.parent == destination.parent == tmp_path
    assert not source.name.endswith('.prom') and source.name.startswith('.slurm.prom.')


@pytest.mark.parametrize('write', WRITERS)
def test_failure_keeps_old_file_and_removes_temporary(tmp_path, write):
    target = tmp_path / 'slurm.prom'
    target.write_text('old\n', encoding='utf-8')
    with pytest.raises(TypeError):
        write(str(target), None)
    assert target.read_text(encoding='utf-8') == 'old\n'
    assert os.listdir(tmp_path) == ['slurm.prom']


def test_failed_rename_keeps_old_file_and_removes_temporary(tmp_path, monkeypatch):
    target = tmp_path / 'nodecheck.json'
    target.write_text('old\n', encoding='utf-8')

    real_replace = os.replace

    def broken(source, destination, *args, **kwargs):
        if os.fspath(destination) != str(target):
            return real_replace(source, destination, *args, **kwargs)
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(os, 'replace', broken)
    with pytest.raises(OSError, match='No space left'):
        _files.write_atomic(str(target), 'new\n')
    assert target.read_text(encoding='utf-8') == 'old\n'
    assert os.listdir(tmp_path) == ['nodecheck.json']


@pytest.mark.parametrize('write', WRITERS)
def test_missing_directory(tmp_path, write):
    with pytest.raises(FileNotFoundError):
        write(str(tmp_path / 'absent' / 'slurm.prom'), 'x 1\n')


def test_mode_and_relative_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _files.write_atomic('state.json', '{}\n', mode=0o600)
    assert stat.S_IMODE((tmp_path / 'state.json').stat().st_mode) == 0o600
    assert (tmp_path / 'state.json').read_text(encoding='utf-8') == '{}\n'


def test_text_is_written_as_utf8(tmp_path):
    _files.write_atomic(str(tmp_path / 'x.prom'), 'reason="café"\n')
    assert (tmp_path / 'x.prom').read_bytes() == 'reason="café"\n'.encode('utf-8')


def test_owner_and_group_are_given_before_the_rename(tmp_path, monkeypatch):
    target = tmp_path / 'a.conf'
    seen = []
    real_replace = os.replace

    def recording_replace(source, destination, *args, **kwargs):
        # Only this file's rename: a thread another test left in this worker may rename its own files meanwhile.
        if os.fspath(destination) == str(target):
            info = os.stat(source)
            seen.append((info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)))
        real_replace(source, destination, *args, **kwargs)

    monkeypatch.setattr(os, 'replace', recording_replace)
    _files.write_atomic(str(target), 'x\n', mode=0o640, uid=os.getuid(), gid=os.getgid())
    assert seen == [(os.getuid(), os.getgid(), 0o640)]


@pytest.mark.skipif(os.geteuid() != 0, reason='giving a file to another user needs root')
def test_another_owner_is_given_as_asked(tmp_path):
    target = tmp_path / 'a.conf'
    _files.write_atomic(str(target), 'x\n', uid=65534, gid=65534)
    assert (target.stat().st_uid, target.stat().st_gid) == (65534, 65534)


def test_a_symlink_is_replaced_and_its_target_left_alone(tmp_path):
    secret = tmp_path / 'secret'
    secret.write_text('secret\n', encoding='utf-8')
    link = tmp_path / 'a.conf'
    link.symlink_to(secret)
    _files.write_atomic(str(link), 'new\n')
    assert not link.is_symlink() and link.read_text(encoding='utf-8') == 'new\n'
    assert secret.read_text(encoding='utf-8') == 'secret\n'
