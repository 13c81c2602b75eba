# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsing code in plugins/module_utils/_*.py imports nothing from Ansible: it runs on nodes without it."""

from __future__ import annotations

import ast
import pathlib

import pytest

PLUGINS = pathlib.Path(__file__).resolve().parents[2] / 'plugins'
MODULE_UTILS = PLUGINS / 'module_utils'
# The three parts: node-side checks (module_utils), node programs (module_utils/programs), controller-side planning
# (plugin_utils, loaded by the filters).
NODE_SIDE = sorted(MODULE_UTILS.glob('_*.py')) + sorted((MODULE_UTILS / 'programs').glob('_*.py'))
PLANNING = sorted((PLUGINS / 'plugin_utils').glob('_*.py'))


def ansible_imports(path: pathlib.Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [name for name in names if name == 'ansible' or name.startswith('ansible.')]


@pytest.mark.parametrize('path', NODE_SIDE + PLANNING, ids=lambda path: f'{path.parent.name}/{path.name}')
def test_no_ansible_import(path):
    assert ansible_imports(path) == []


@pytest.mark.parametrize('path', NODE_SIDE, ids=lambda path: f'{path.parent.name}/{path.name}')
def test_node_side_code_never_imports_the_controller_side(path):
    """Modules ship module_utils to the nodes, and node programs are installed with their imports: plugin_utils is
    not there."""
    text = path.read_text(encoding='utf-8')
    assert 'plugin_utils' not in text, f'{path} imports controller-side planning'


def test_programs_and_planning_hold_their_parts():
    assert {path.stem for path in (MODULE_UTILS / 'programs').glob('_*.py')} == {
        '_nodecheck', '_slurm_metrics', '_checkpoint_prune', '_checkpoint_archive', '_jobcheck', '_remediate', '_repair',
        '_validate_node', '_pull_node'}
    assert PLANNING and not set(path.name for path in PLANNING) & set(path.name for path in NODE_SIDE)


def test_the_check_sees_an_ansible_import(tmp_path):
    source = tmp_path / '_x.py'
    source.write_text('import os\nfrom ansible.module_utils.basic import AnsibleModule\n'
                      'from ansible_collections.llmforge.cluster.plugins.module_utils import _files\n')
    assert ansible_imports(source) == ['ansible.module_utils.basic']
