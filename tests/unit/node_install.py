# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install a node program's code into a directory as the node_programs role does, and run its launcher there."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import typing as t

from ansible_collections.llmforge.cluster.plugins.filter.node_programs import node_program_files

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCHERS = {
    '_nodecheck': ROOT / 'roles' / 'slurm_node' / 'files' / 'llmforge-nodecheck',
    '_slurm_metrics': ROOT / 'roles' / 'monitoring' / 'files' / 'llmforge-slurm-metrics',
    '_checkpoint_prune': ROOT / 'roles' / 'lustre_client' / 'files' / 'llmforge-checkpoint-prune',
}


def install(module: str, python_dir: pathlib.Path) -> pathlib.Path:
    """Copy the files the role copies for `module` below `python_dir`; return `python_dir`."""
    for item in node_program_files(module):
        dest = python_dir / item['dest']
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(item['src'], dest)
    return python_dir


def run_launcher(module: str, python_dir: pathlib.Path, *args: str, env: t.Optional[dict] = None,
                 **kwargs: t.Any) -> subprocess.CompletedProcess:
    """The installed program: its launcher in an isolated Python (-I: no PYTHON* variables, no user site) with
    LLMFORGE_PYTHON_DIR naming where its code was installed; `env` replaces the environment (PATH kept)."""
    base = env if env is not None else {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    full_env = dict(base, LLMFORGE_PYTHON_DIR=str(python_dir))
    kwargs.setdefault('timeout', 60)
    return subprocess.run([sys.executable, '-I', str(LAUNCHERS[module]), *args], capture_output=True, text=True,
                          env=full_env, check=False, **kwargs)
