# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run one of the collection's modules through the real `ansible` CLI and return its result."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The ansible CLI installed beside the Python running the tests.
ANSIBLE = str(pathlib.Path(sys.executable).parent / 'ansible')


def run_module(module: str, args: dict, check: bool = False, env: dict | None = None) -> dict:
    """`ansible localhost -m llmforge.cluster.<module> -a <json>`; the JSON callback's result for localhost."""
    full_env = dict(os.environ,
                    ANSIBLE_COLLECTIONS_PATH=str(ROOT / 'collections'),
                    ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
                    ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json',
                    ANSIBLE_NOCOLOR='1',
                    ANSIBLE_PYTHON_INTERPRETER='auto_silent',
                    **(env or {}))
    argv = [ANSIBLE, 'localhost', '-m', f'llmforge.cluster.{module}', '-a', json.dumps(args)]
    if check:
        argv.append('--check')
    proc = subprocess.run(argv, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120, check=False)
    try:
        output = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f'no JSON from ansible (rc {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}')
    return output['plays'][0]['tasks'][0]['hosts']['localhost']
