# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""file_tree: a package of files written in one step, only what differs, check and diff mode, bad paths refused."""

from __future__ import annotations

import os
import pathlib

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _file_tree
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
