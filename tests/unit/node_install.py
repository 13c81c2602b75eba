# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install a node program's code into a directory as the node_programs role does, and run its launcher there."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import typing as t

from ansible_collections.llmforge.cluster.plugins.filter.node_programs import node_program_files
from ansible_collections.llmforge.cluster.plugins.module_utils import _file_tree

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCHERS = {
    'programs._nodecheck': ROOT / 'roles' / 'slurm_node' / 'files' / 'llmforge-nodecheck',
    'programs._jobcheck': ROOT / 'roles' / 'slurm_node' / 'files' / 'llmforge-jobcheck',
    'programs._slurm_metrics': ROOT / 'roles' / 'monitoring' / 'files' / 'llmforge-slurm-metrics',
    'programs._checkpoint_prune': ROOT / 'roles' / 'lustre_client' / 'files' / 'llmforge-checkpoint-prune',
    'programs._checkpoint_archive': ROOT / 'roles' / 'checkpoint_archive' / 'files' / 'llmforge-checkpoint-archive',
    'programs._remediate': ROOT / 'roles' / 'slurm_controller' / 'files' / 'llmforge-remediate',
    'programs._repair': ROOT / 'roles' / 'slurm_node' / 'files' / 'llmforge-repair',
    'programs._validate_node': ROOT / 'roles' / 'slurm_node' / 'files' / 'llmforge-validate-node',
    'programs._pull_node': ROOT / 'roles' / 'slurm_node' / 'files' / 'llmforge-pull-node',
}


def install(module: str, python_dir: pathlib.Path) -> pathlib.Path:
    """Write the files the role writes for `module` below `python_dir`, with the same code; return `python_dir`."""
    files = {item['dest']: item['content'] for item in node_program_files(module)}
    for directory in _file_tree.directories(str(python_dir), files):
        os.makedirs(directory, exist_ok=True)
    _file_tree.write(_file_tree.plan(str(python_dir), files), 0o644)
    return python_dir


# A launcher whose code directory is fixed (no variable of the environment can change it).
FIXED_LIBRARY = "LIBRARY = '/usr/local/lib/llmforge/python'\n"


def launcher_for(module: str, python_dir: pathlib.Path) -> pathlib.Path:
    """The launcher itself, or for one with a fixed code directory a copy beside `python_dir` pointed at it."""
    launcher = LAUNCHERS[module]
    text = launcher.read_text(encoding='utf-8')
    if FIXED_LIBRARY not in text:
        return launcher
    copy = python_dir.parent / f'{launcher.name}.launcher'
    copy.write_text(text.replace(FIXED_LIBRARY, f'LIBRARY = {str(python_dir)!r}\n'), encoding='utf-8')
    return copy


def run_launcher(module: str, python_dir: pathlib.Path, *args: str, env: t.Optional[dict] = None,
                 **kwargs: t.Any) -> subprocess.CompletedProcess:
    """The installed program: its launcher in an isolated Python (-I: no PYTHON* variables, no user site) finding
    its code in `python_dir` (a launcher with a fixed directory: a copy pointed there; the others: through
    LLMFORGE_PYTHON_DIR); `env` replaces the environment (PATH kept)."""
    base = env if env is not None else {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    full_env = dict(base, LLMFORGE_PYTHON_DIR=str(python_dir))
    kwargs.setdefault('timeout', 60)
    return subprocess.run([sys.executable, '-I', str(launcher_for(module, python_dir)), *args], capture_output=True,
                          text=True, env=full_env, check=False, **kwargs)
