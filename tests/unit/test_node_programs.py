# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the node programs are installed: the import closure of their module, copied by the node_programs role."""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.node_programs import MODULE_UTILS_DIR, node_program_files
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _node_programs as np
from node_install import LAUNCHERS, install, run_launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS = sorted(LAUNCHERS)


def test_each_program_gets_its_imports_and_nothing_else():
    assert np.closure(MODULE_UTILS_DIR, 'programs._nodecheck') == [
        '_checks.py', '_dcgm_diag.py', '_files.py', '_gpu_catalog.py', '_gpu_topology.py', '_kernel_log.py',
        '_module_errors.py', '_proc.py', '_prometheus.py', '_rdma_links.py', '_slurm_drain.py', '_validators.py',
        'programs/_jobcheck.py', 'programs/_nodecheck.py']
    assert np.closure(MODULE_UTILS_DIR, 'programs._slurm_metrics') == [
        '_checks.py', '_files.py', '_proc.py', '_prometheus.py', 'programs/_slurm_metrics.py']
    assert np.closure(MODULE_UTILS_DIR, 'programs._checkpoint_prune') == ['programs/_checkpoint_prune.py']


def test_the_filter_gives_sources_and_package_paths():
    files = node_program_files('programs._slurm_metrics')
    assert [item['dest'] for item in files] == [
        f'ansible_collections/llmforge/cluster/plugins/module_utils/{name}'
        for name in ('_checks.py', '_files.py', '_proc.py', '_prometheus.py', 'programs/_slurm_metrics.py')]
    assert all(pathlib.Path(item['src']).is_file() and item['src'].endswith(item['dest'].rsplit('/', 1)[1]) for item in files)
    assert pathlib.Path(MODULE_UTILS_DIR).resolve() == (ROOT / 'plugins' / 'module_utils').resolve()


@pytest.mark.parametrize('module', ['_nowhere', 'programs._nowhere', 'nodecheck.py', '../x', 'programs..x', '', None])
def test_the_filter_refuses_unknown_modules(module):
    with pytest.raises(AnsibleFilterError, match='node_program_files: '):
        node_program_files(module)


@pytest.mark.parametrize(('source', 'found'), [
    ('import os\nfrom ansible_collections.llmforge.cluster.plugins.module_utils import _a, _b as b\n', {'_a', '_b'}),
    ('from ansible_collections.llmforge.cluster.plugins.module_utils._c import X\n', {'_c'}),
    ('import ansible_collections.llmforge.cluster.plugins.module_utils._d as d\n', {'_d'}),
    ('from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _e\n', {'programs._e'}),
    ('from ansible_collections.llmforge.cluster.plugins.module_utils.programs._f import g\n', {'programs._f'}),
    ('def later():\n    from ansible_collections.llmforge.cluster.plugins.module_utils import _g\n', {'_g'}),
    ('from __future__ import annotations\nimport xml.etree.ElementTree as ET\nimport typing as t\n', set()),
])
def test_imports(source, found):
    assert np.imports(source) == found


@pytest.mark.parametrize(('source', 'message'), [
    ('from ansible.module_utils.basic import AnsibleModule\n', '`from ansible.module_utils.basic import AnsibleModule`'),
    ('try:\n    import netaddr\nexcept ImportError:\n    netaddr = None\n', '`import netaddr` is neither'),
    ('from ansible_collections.other.coll.plugins.module_utils import x\n', 'neither the standard library'),
    ('from .. import x\n', 'relative import (level 2)'),
    ('from . import _e\n', 'relative import (level 1)'),
    ('def broken(:\n', 'cannot be parsed'),
])
def test_imports_a_node_cannot_satisfy_are_refused(source, message):
    with pytest.raises(np.NodeProgramError, match=re.escape(message)):
        np.imports(source, 'x.py')


def test_closure_follows_imports_and_names_a_missing_module(tmp_path):
    package = 'ansible_collections.llmforge.cluster.plugins.module_utils'
    (tmp_path / '_main.py').write_text(f'from {package} import _a\n', encoding='utf-8')
    (tmp_path / 'programs').mkdir()
    (tmp_path / 'programs' / '_main.py').write_text(f'from {package} import _a\n', encoding='utf-8')
    (tmp_path / '_a.py').write_text(f'from {package}._b import x\nfrom {package}.programs import _main\n',
                                    encoding='utf-8')
    (tmp_path / '_b.py').write_text('import json\n', encoding='utf-8')
    (tmp_path / '_unused.py').write_text('', encoding='utf-8')
    assert np.closure(str(tmp_path), 'programs._main') == ['_a.py', '_b.py', 'programs/_main.py']
    (tmp_path / '_b.py').write_text(f'from {package} import _gone\n', encoding='utf-8')
    with pytest.raises(np.NodeProgramError, match=r'_gone: no such module in .* \(imported by _b\)'):
        np.closure(str(tmp_path), 'programs._main')


@pytest.mark.parametrize('module', PROGRAMS)
def test_each_program_runs_from_its_installed_code_alone(tmp_path, module):
    """Nothing but the files the role installs (no checkout, no PYTHONPATH, no Ansible on sys.path)."""
    library = install(module, tmp_path / 'python')
    result = run_launcher(module, library, '--help')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f'usage: {LAUNCHERS[module].name} ')
    package = library / np.PACKAGE_PATH
    installed = sorted(str(path.relative_to(package)) for path in library.rglob('*.py'))
    assert installed == np.closure(MODULE_UTILS_DIR, module) and '_report.py' not in installed


@pytest.mark.parametrize('module', PROGRAMS)
def test_each_launcher_is_a_short_python3_program_and_fails_clearly_without_its_code(tmp_path, module):
    launcher = LAUNCHERS[module]
    text = launcher.read_text(encoding='utf-8')
    assert text.startswith(('#!/usr/bin/python3\n', '#!/usr/bin/python3 -I\n')) and launcher.stat().st_mode & 0o111
    assert len([line for line in text.splitlines() if line and not line.startswith('#')]) <= 12
    result = run_launcher(module, tmp_path / 'nowhere')
    assert result.returncode in (1, 2) and f'{launcher.name}: cannot load its ' in result.stderr
    assert str(tmp_path / 'nowhere') in result.stderr


def test_launchers_and_roles_agree_on_the_python_directory():
    role_vars = yaml.safe_load((ROOT / 'roles' / 'node_programs' / 'vars' / 'main.yml').read_text(encoding='utf-8'))
    python_dir = role_vars['_node_programs_python_dir']
    # The programs run as root: their code directory is fixed, in an isolated Python.
    for launcher in LAUNCHERS.values():
        text = launcher.read_text(encoding='utf-8')
        assert f"LIBRARY = '{python_dir}'\n" in text, launcher
        assert 'LLMFORGE_PYTHON_DIR' not in text and 'os.environ' not in text and text.startswith('#!/usr/bin/python3 -I\n')
    slurm_node = yaml.safe_load((ROOT / 'roles' / 'slurm_node' / 'vars' / 'main.yml').read_text(encoding='utf-8'))
    assert slurm_node['_slurm_node_health_check_python_dir'] == python_dir
    assert slurm_node['_slurm_node_health_check_package_path'] == np.PACKAGE_PATH


def test_roles_install_their_program_through_node_programs():
    """One mechanism: each role includes node_programs for its module; no role copies module_utils itself."""
    for role, module in (('slurm_node', 'programs._nodecheck'), ('monitoring', 'programs._slurm_metrics'),
                         ('lustre_client', 'programs._checkpoint_prune')):
        tasks = '\n'.join(path.read_text(encoding='utf-8') for path in (ROOT / 'roles' / role / 'tasks').glob('*.yml'))
        assert 'name: llmforge.cluster.node_programs' in tasks and f'node_programs_module: {module}' in tasks
    for path in (ROOT / 'roles').glob('*/tasks/*.yml'):
        text = path.read_text(encoding='utf-8')
        assert 'plugins/module_utils/' not in text and 'role_path }}/../' not in text, path
