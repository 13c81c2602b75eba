# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsing code in plugins/module_utils/_*.py imports nothing from Ansible: it runs on nodes without it."""

from __future__ import annotations

import ast
import pathlib

import pytest

MODULE_UTILS = pathlib.Path(__file__).resolve().parents[2] / 'plugins' / 'module_utils'


def ansible_imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [name for name in names if name == 'ansible' or name.startswith('ansible.')]


@pytest.mark.parametrize('path', sorted(MODULE_UTILS.glob('_*.py')), ids=lambda path: path.name)
def test_no_ansible_import(path):
    assert ansible_imports(path) == []


def test_the_check_sees_an_ansible_import(tmp_path):
    source = tmp_path / '_x.py'
    source.write_text('import os\nfrom ansible.module_utils.basic import AnsibleModule\n'
                      'from ansible_collections.llmforge.cluster.plugins.module_utils import _files\n')
    assert ansible_imports(source) == ['ansible.module_utils.basic']
