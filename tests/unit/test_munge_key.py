# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The munge key as slurm_common installs it: the key's bytes from base64, written whole through a rename, owned by
munge alone, and a restart marker that stays until munge has restarted with the key."""

from __future__ import annotations

import base64
import grp
import json
import os
import pwd
import stat

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.module_utils import _munge_key as munge_key
from ansible_collections.llmforge.cluster.plugins.modules import munge_key as module

KEY = bytes(range(256)) * 4  # 1024 bytes, every byte value: what a key from /dev/urandom looks like to the code
ENCODED = base64.b64encode(KEY).decode()
UID, GID = os.getuid(), os.getgid()


def install(tmp_path, data=KEY, marker=True):
    path, mark = str(tmp_path / 'munge.key'), str(tmp_path / '.restart-pending') if marker else ''
    chosen = munge_key.plan(path, data, UID, GID, mark)
    munge_key.install(path, data, UID, GID, chosen, mark)
    return path, mark, chosen


def test_the_key_is_read_from_base64_with_white_space_ignored():
    wrapped = '\n'.join(ENCODED[i:i + 76] for i in range(0, len(ENCODED), 76))
    assert munge_key.decode(wrapped) == KEY


@pytest.mark.parametrize('text, message', [
    ('not base64!', 'key: not valid base64'),
    ('', 'key: the key is empty'),
])
def test_a_bad_key_is_refused_naming_the_option(text, message):
    with pytest.raises(munge_key.MungeKeyError, match=message):
        munge_key.decode(text)


def test_a_new_key_is_written_readable_by_its_owner_alone_with_a_restart_marker(tmp_path):
    path, mark, chosen = install(tmp_path)
    assert chosen == munge_key.Plan(write=True, settle=False, restart_pending=True)
    assert open(path, 'rb').read() == KEY and stat.S_IMODE(os.stat(path).st_mode) == 0o400
    assert os.path.exists(mark)
    assert sorted(os.listdir(tmp_path)) == ['.restart-pending', 'munge.key'], 'a temporary file was left behind'


def test_the_same_key_changes_nothing_and_the_restart_stays_pending_until_the_marker_is_removed(tmp_path):
    path, mark, _chosen = install(tmp_path)
    assert munge_key.plan(path, KEY, UID, GID, mark) == munge_key.Plan(write=False, settle=False, restart_pending=True)
    os.unlink(mark)
    assert munge_key.plan(path, KEY, UID, GID, mark) == munge_key.Plan(write=False, settle=False, restart_pending=False)


def test_a_key_whose_mode_drifted_is_given_back_to_its_owner_alone(tmp_path):
    path, mark, _chosen = install(tmp_path)
    os.unlink(mark)
    os.chmod(path, 0o644)
    chosen = munge_key.plan(path, KEY, UID, GID, mark)
    assert chosen == munge_key.Plan(write=False, settle=True, restart_pending=True)
    munge_key.install(path, KEY, UID, GID, chosen, mark)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o400 and os.path.exists(mark)


def test_another_key_is_replaced_whole(tmp_path):
    path, _mark, _chosen = install(tmp_path)
    other = bytes(reversed(KEY))
    chosen = munge_key.plan(path, other, UID, GID)
    assert chosen.write
    munge_key.install(path, other, UID, GID, chosen)
    assert open(path, 'rb').read() == other


@pytest.mark.parametrize('make', [
    pytest.param(os.mkdir, id='directory'),
    pytest.param(lambda path: os.symlink('/etc/passwd', path), id='symbolic-link'),
])
def test_something_else_than_a_file_where_the_key_belongs_is_refused(tmp_path, make):
    path = str(tmp_path / 'munge.key')
    make(path)
    with pytest.raises(munge_key.MungeKeyError, match='is not a regular file'):
        munge_key.plan(path, KEY, UID, GID)


def test_a_missing_directory_is_refused_naming_it(tmp_path):
    path = str(tmp_path / 'munge' / 'munge.key')
    chosen = munge_key.plan(path, KEY, UID, GID)
    with pytest.raises(munge_key.MungeKeyError, match='is munge installed'):
        munge_key.install(path, KEY, UID, GID, chosen)


def run(args: dict, capsys) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def test_check_mode_before_munge_is_installed_reports_the_key_to_write_and_writes_nothing(tmp_path, capsys):
    path = str(tmp_path / 'munge.key')
    result = run({'key': ENCODED, 'path': path, 'owner': 'no-such-user-here', 'group': 'no-such-group-here',
                  '_ansible_check_mode': True}, capsys)
    assert result['changed'] is True and result['restart_pending'] is True and not os.path.exists(path)


def test_the_module_writes_the_key_then_reports_no_change(tmp_path, capsys):
    path, mark = str(tmp_path / 'munge.key'), str(tmp_path / '.restart-pending')
    args = {'key': ENCODED, 'path': path, 'restart_marker': mark,
            'owner': pwd.getpwuid(UID).pw_name, 'group': grp.getgrgid(GID).gr_name}
    first = run(args, capsys)
    assert first['changed'] is True and first['restart_pending'] is True and open(path, 'rb').read() == KEY
    assert ENCODED not in json.dumps(first), 'the key reached the result'
    os.unlink(mark)
    second = run(args, capsys)
    assert second['changed'] is False and second['restart_pending'] is False


def test_an_unknown_owner_outside_check_mode_is_refused_naming_the_option(tmp_path, capsys):
    result = run({'key': ENCODED, 'path': str(tmp_path / 'munge.key'), 'owner': 'no-such-user-here'}, capsys)
    assert result['failed'] is True and result['msg'].startswith('owner: no-such-user-here is not known')


def test_a_missing_cluster_key_is_generated_once_and_then_left_as_it_is(tmp_path, capsys):
    path = str(tmp_path / 'cluster.key')
    args = {'path': path, 'random_bytes': 1024, 'owner': pwd.getpwuid(UID).pw_name, 'group': grp.getgrgid(GID).gr_name}
    checked = run({**args, '_ansible_check_mode': True}, capsys)
    assert checked['changed'] is True and not os.path.exists(path)
    first = run(args, capsys)
    generated = open(path, 'rb').read()
    assert first['changed'] is True and len(generated) == 1024 and stat.S_IMODE(os.stat(path).st_mode) == 0o400
    assert len(set(generated)) > 200, 'the key is not random'
    assert run(args, capsys)['changed'] is False and open(path, 'rb').read() == generated


def test_a_generated_key_below_munges_minimum_is_refused(tmp_path, capsys):
    result = run({'path': str(tmp_path / 'cluster.key'), 'random_bytes': 16}, capsys)
    assert result['failed'] is True and result['msg'] == 'random_bytes: munge needs at least 32 bytes, got 16'
