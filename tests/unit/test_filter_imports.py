# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter files import their module_utils when a filter first uses them (plugins/plugin_utils/_lazy_module_utils).

Ansible imports every filter file of the collection to find one filter, in each worker process, compiling collection
code from source each time; these tests keep the files cheap to import and every lazy reference pointing at a module.
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILTERS = sorted((ROOT / 'plugins' / 'filter').glob('*.py'))
PACKAGE = 'ansible_collections.llmforge.cluster.plugins'


# The lazy references a filter file may make: module_utils('programs._x') is plugins/module_utils/programs/_x.py.
LOADERS = {'module_utils': 'module_utils', 'plugin_utils': 'plugin_utils'}


def lazy_names(path):
    """The (folder, name) a filter file passes to module_utils() or plugin_utils(), and what it imports directly."""
    tree = ast.parse(path.read_text(encoding='utf-8'))
    names = [(LOADERS[node.func.id], node.args[0].value) for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(node.func, 'id', None) in LOADERS]
    direct = [node.module for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module
              and ('.module_utils' in node.module or ('.plugin_utils.' in node.module
                                                      and not node.module.endswith('._lazy_module_utils')))]
    return names, direct


@pytest.mark.parametrize('path', FILTERS, ids=[path.stem for path in FILTERS])
def test_filter_files_import_no_module_utils_directly_and_name_existing_ones(path):
    names, direct = lazy_names(path)
    assert direct == [], f'{path.name} imports {direct} at load; use module_utils() or plugin_utils() instead'
    for folder, name in names:
        assert (ROOT / 'plugins' / folder / (name.replace('.', '/') + '.py')).is_file(), f'{path.name}: no {folder} {name}'


def test_loading_every_filter_file_imports_no_module_utils_until_a_filter_runs():
    """What Ansible's lookup of one filter does in a worker: load every file and list its filters."""
    program = f"""
import importlib, sys
names = {[path.stem for path in FILTERS]!r}
for name in names:
    importlib.import_module('{PACKAGE}.filter.' + name).FilterModule().filters()
loaded = sorted(m for m in sys.modules if m.startswith(('{PACKAGE}.module_utils.', '{PACKAGE}.plugin_utils._'))
           and not m.endswith('._lazy_module_utils'))
assert loaded == [], loaded
hostlist = importlib.import_module('{PACKAGE}.filter.hostlist').FilterModule().filters()
assert hostlist['hostlist_compress'](['gpu1', 'gpu2']) == 'gpu[1-2]'
loaded = sorted(m for m in sys.modules if m.startswith('{PACKAGE}.module_utils.'))
assert loaded == ['{PACKAGE}.module_utils._hostlist'], loaded
"""
    result = subprocess.run([sys.executable, '-c', program], cwd=ROOT, capture_output=True, text=True, check=False,
                            env={'PYTHONPATH': str(ROOT / 'collections'), 'PATH': '/usr/bin:/bin'})
    assert result.returncode == 0, result.stderr


def test_an_explicit_none_is_refused_as_before_not_taken_for_the_default():
    """Defaults read from module_utils at call time (UNSET) leave None to the checks it always met."""
    from ansible.errors import AnsibleFilterError
    from ansible_collections.llmforge.cluster.plugins.filter import storage

    with pytest.raises(AnsibleFilterError, match=r'storage_judge: the fleet fraction must be a number .* got None'):
        storage.storage_judge(['gpu1'], {'gpu1': {}}, ['storage_scratch'], None)
    from ansible_collections.llmforge.cluster.plugins.module_utils import _fio

    hostvars = {'gpu1': {'storage_scratch': None}}
    assert storage.storage_judge(['gpu1'], hostvars, ['storage_scratch']) == \
        storage.storage_judge(['gpu1'], hostvars, ['storage_scratch'], _fio.DEFAULT_FRACTION)
