# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_tree: a package of files written in one step, only what differs, check and diff mode, bad paths refused."""

from __future__ import annotations

import os
import pathlib
import stat
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _file_tree
from fifo_guard import fifo_guard
from module_runner import run_module

FILES = {'pkg/__init__.py': '', 'pkg/main.py': 'print("main")\n', 'pkg/sub/util.py': 'X = 1\n', 'top.txt': 'é\n'}


def tree(root: pathlib.Path) -> dict[str, str]:
    return {str(path.relative_to(root)): path.read_text(encoding='utf-8')
            for path in sorted(root.rglob('*')) if path.is_file()}


def test_first_run_writes_everything_second_changes_nothing(tmp_path):
    root = tmp_path / 'python'
    result = run_module('file_tree', {'root': str(root), 'files': FILES, 'mode': '0640', 'directory_mode': '0750'})
    assert result['changed'] is True
    assert result['changed_files'] == sorted(FILES)
    assert tree(root) == FILES
    assert oct(os.stat(root / 'pkg' / 'main.py').st_mode & 0o777) == '0o640'
    assert oct(os.stat(root / 'pkg' / 'sub').st_mode & 0o777) == '0o750'
    again = run_module('file_tree', {'root': str(root), 'files': FILES, 'mode': '0640', 'directory_mode': '0750'})
    assert again['changed'] is False and again['changed_files'] == []


def test_drift_is_restored_and_unlisted_files_are_left(tmp_path):
    root = tmp_path / 'python'
    run_module('file_tree', {'root': str(root), 'files': FILES})
    (root / 'pkg' / 'main.py').write_text('tampered\n', encoding='utf-8')
    (root / 'pkg' / 'extra.py').write_text('mine\n', encoding='utf-8')
    os.chmod(root / 'top.txt', 0o600)
    check = run_module('file_tree', {'root': str(root), 'files': FILES}, check=True)
    assert check['changed'] is True and check['changed_files'] == ['pkg/main.py']
    assert (root / 'pkg' / 'main.py').read_text(encoding='utf-8') == 'tampered\n'
    result = run_module('file_tree', {'root': str(root), 'files': FILES})
    assert result['changed_files'] == ['pkg/main.py']
    assert (root / 'pkg' / 'main.py').read_text(encoding='utf-8') == FILES['pkg/main.py']
    assert oct(os.stat(root / 'top.txt').st_mode & 0o777) == '0o644'
    assert (root / 'pkg' / 'extra.py').read_text(encoding='utf-8') == 'mine\n'


def test_mode_only_drift_is_a_change(tmp_path):
    root = tmp_path / 'python'
    run_module('file_tree', {'root': str(root), 'files': FILES})
    os.chmod(root / 'pkg' / 'sub' / 'util.py', 0o666)
    result = run_module('file_tree', {'root': str(root), 'files': FILES})
    assert result['changed'] is True and result['changed_files'] == []


def test_check_mode_on_a_bare_host_writes_nothing(tmp_path):
    root = tmp_path / 'python'
    result = run_module('file_tree', {'root': str(root), 'files': FILES}, check=True)
    assert result['changed'] is True and result['changed_files'] == sorted(FILES)
    assert not root.exists()


@pytest.mark.parametrize('path, message', [
    ('/etc/passwd', "'/etc/passwd' is absolute"),
    ('pkg/../../x', "must not contain empty, '.' or '..' parts"),
    ('pkg//x', "must not contain empty"),
    ('', 'must be a non-empty string'),
])
def test_paths_leaving_the_root_are_refused(tmp_path, path, message):
    result = run_module('file_tree', {'root': str(tmp_path / 'r'), 'files': {path: 'x'}})
    assert result.get('failed') is True and message in result['msg']
    assert not (tmp_path / 'r').exists()


def test_bad_mode_and_relative_root_are_named(tmp_path):
    result = run_module('file_tree', {'root': str(tmp_path), 'files': FILES, 'mode': '0899'})
    assert result.get('failed') is True and result['msg'].startswith("mode: '0899' is not an octal mode")
    result = run_module('file_tree', {'root': 'relative/dir', 'files': FILES})
    assert result.get('failed') is True


def test_a_directory_in_a_files_place_is_named(tmp_path):
    (tmp_path / 'pkg' / 'main.py').mkdir(parents=True)
    with pytest.raises(_file_tree.FileTreeError, match='is a directory where a file belongs'):
        _file_tree.plan(str(tmp_path), FILES)


def test_directories_parents_first():
    assert _file_tree.directories('/r', ['a/b/c.py', 'a/d.py', 'e.py']) == ['/r', '/r/a', '/r/a/b']


# Writing files as root: the module does what Ansible's own file modules do.

def test_an_unquoted_mode_is_the_number_ansible_reads(tmp_path):
    root = tmp_path / 'python'
    result = run_module('file_tree', {'root': str(root), 'files': {'a.py': ''}, 'mode': 420, 'directory_mode': 488})
    assert not result.get('failed'), result
    assert oct(os.stat(root / 'a.py').st_mode & 0o7777) == '0o644' and oct(os.stat(root).st_mode & 0o7777) == '0o750'


@pytest.mark.parametrize('field, value', [('mode', '-644'), ('mode', '77777777'), ('directory_mode', 0o10000)])
def test_a_mode_out_of_form_or_range_is_refused_by_field(tmp_path, field, value):
    result = run_module('file_tree', {'root': str(tmp_path / 'r'), 'files': {'a.py': ''}, field: value})
    assert result.get('failed') is True and result['msg'].startswith(f'{field}: {value!r} is not'), result
    assert not (tmp_path / 'r').exists()


@pytest.mark.parametrize('check', [False, True], ids=['real', 'check'])
def test_a_symlink_in_the_tree_is_replaced_without_reading_its_target(tmp_path, check):
    secret = tmp_path / 'key'
    secret.write_text('-----BEGIN PRIVATE KEY-----\n', encoding='utf-8')
    root = tmp_path / 'python'
    root.mkdir()
    (root / 'a.py').symlink_to(secret)
    result = run_module('file_tree', {'root': str(root), 'files': {'a.py': 'A = 1\n'}}, check=check,
                        env={'ANSIBLE_DIFF_ALWAYS': '1'})
    assert not result.get('failed'), result
    assert 'PRIVATE KEY' not in repr(result) and result['changed_files'] == ['a.py']
    assert [(entry['before'], entry['after']) for entry in result['diff']] == [('', 'A = 1\n')]
    assert secret.read_text(encoding='utf-8') == '-----BEGIN PRIVATE KEY-----\n'
    assert (root / 'a.py').is_symlink() is check
    if not check:
        assert (root / 'a.py').read_text(encoding='utf-8') == 'A = 1\n'


def test_a_fifo_in_the_tree_is_refused_without_opening_it(tmp_path):
    root = tmp_path / 'python'
    root.mkdir()
    fifo = root / 'a.py'
    os.mkfifo(fifo)
    started = time.monotonic()
    with fifo_guard(fifo, 20):
        result = run_module('file_tree', {'root': str(root), 'files': {'a.py': 'A = 1\n', 'b.py': ''}})
    assert time.monotonic() - started < 20, 'the module blocked on the FIFO'
    assert result['failed'] is True and result['msg'] == f"files['a.py']: {fifo} is a FIFO where a file belongs"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (root / 'b.py').exists()


def test_an_existing_file_keeps_its_owner_and_group_when_they_are_omitted(tmp_path):
    root = tmp_path / 'python'
    root.mkdir()
    (root / 'a.py').write_text('old\n', encoding='utf-8')
    os.chown(root / 'a.py', 65534, 65534)
    result = run_module('file_tree', {'root': str(root), 'files': {'a.py': 'new\n', 'b.py': ''}})
    assert result['changed_files'] == ['a.py', 'b.py'] and (root / 'a.py').read_text(encoding='utf-8') == 'new\n'
    assert ((root / 'a.py').stat().st_uid, (root / 'a.py').stat().st_gid) == (65534, 65534)
    assert ((root / 'b.py').stat().st_uid, (root / 'b.py').stat().st_gid) == (os.getuid(), os.getgid())


@pytest.mark.parametrize('check', [False, True], ids=['real', 'check'])
@pytest.mark.parametrize('field, message', [('owner', "owner: no user 'no-such-user-42' on this host"),
                                            ('group', "group: no group 'no-such-user-42' on this host")])
def test_an_unknown_owner_or_group_is_refused_before_anything_is_written(tmp_path, check, field, message):
    root = tmp_path / 'python'
    result = run_module('file_tree', {'root': str(root), 'files': FILES, field: 'no-such-user-42'}, check=check)
    assert result.get('failed') is True and result['msg'] == message, result
    assert not root.exists()


def test_existing_content_that_is_not_utf8_is_rewritten(tmp_path):
    root = tmp_path / 'python'
    root.mkdir()
    (root / 'a.py').write_bytes(b'\xff\n')
    result = run_module('file_tree', {'root': str(root), 'files': {'a.py': ''}})
    assert result['changed_files'] == ['a.py'] and (root / 'a.py').read_bytes() == b''
    assert run_module('file_tree', {'root': str(root), 'files': {'a.py': ''}})['changed'] is False


def test_a_root_with_a_leading_double_slash_is_the_same_directory(tmp_path):
    root = tmp_path / 'python'
    run_module('file_tree', {'root': str(root), 'files': FILES})
    again = run_module('file_tree', {'root': '/' + str(root) + '/', 'files': FILES}, env={'ANSIBLE_DIFF_ALWAYS': '1'})
    assert again['changed'] is False and again['diff'] == []


@pytest.mark.parametrize('lookup, value, expected', [
    (_file_tree.user_id, None, -1), (_file_tree.user_id, 'root', 0), (_file_tree.user_id, '65534', 65534),
    (_file_tree.group_id, None, -1), (_file_tree.group_id, 'root', 0), (_file_tree.group_id, '4242', 4242),
])
def test_owners_and_groups_are_names_or_numbers_as_ansible_takes_them(lookup, value, expected):
    assert lookup(value, 'files[0].owner') == expected


def test_a_replaced_file_keeps_its_ids_a_replaced_link_does_not(tmp_path):
    (tmp_path / 'file').write_text('', encoding='utf-8')
    (tmp_path / 'link').symlink_to(tmp_path / 'file')
    info = os.stat(tmp_path / 'file')
    kept = (info.st_uid, info.st_gid) if os.geteuid() == 0 else (-1, info.st_gid)
    assert _file_tree.replacement_ids(str(tmp_path / 'file'), -1, -1) == kept
    assert _file_tree.replacement_ids(str(tmp_path / 'file'), 7, 8) == (7, 8)
    assert _file_tree.replacement_ids(str(tmp_path / 'link'), -1, -1) == (-1, -1)
    assert _file_tree.replacement_ids(str(tmp_path / 'new'), -1, 8) == (-1, 8)
