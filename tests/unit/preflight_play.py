# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a role's preflight with ansible-playbook --check on the local host, once per case of a test inventory.

Each case is a host of the inventory (ansible_connection local); the play's JSON output says, per host, which task
failed first and with what message, so a test can check that a bad value is refused by the task meant to, naming it.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import typing as t

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(pathlib.Path(sys.executable).parent / 'ansible-playbook')


def run_preflight(tmp: pathlib.Path, inventory: dict[str, t.Any], playbook: list[dict[str, t.Any]], what: str,
                  *args: str, timeout: int = 180) -> dict[str, t.Any]:
    """host -> {'failed': first failed task's name or None, 'msg': its message, 'messages': every msg, 'output':
    all of stdout} for every host of `inventory` (an `all` group); skips the test when `what` (e.g. 'the sssd role')
    does not support this machine's OS."""
    (tmp / 'hosts.yml').write_text(yaml.safe_dump(inventory), encoding='utf-8')
    (tmp / 'play.yml').write_text(yaml.safe_dump(playbook, sort_keys=False), encoding='utf-8')
    hosts = list(inventory['all']['hosts'])
    env = dict(os.environ,
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / 'collections'),
               ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json',
               ANSIBLE_NOCOLOR='1',
               ANSIBLE_FORKS=str(len(hosts)),
               ANSIBLE_LOCAL_TEMP=str(tmp / 'ansible-tmp'),
               ANSIBLE_REMOTE_TEMP=str(tmp / 'ansible-tmp'))
    proc = subprocess.run([ANSIBLE_PLAYBOOK, '-i', 'hosts.yml', 'play.yml', '--check', *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)
    try:
        output = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f'no JSON from ansible-playbook (rc {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}')
    results = {host: {'failed': None, 'msg': '', 'messages': [], 'output': proc.stdout} for host in hosts}
    for task in output['plays'][0]['tasks']:
        for host, result in task['hosts'].items():
            results[host]['messages'].append(str(result.get('msg', '')))
            if result.get('failed') and results[host]['failed'] is None:
                # Task names come as '<role> : <name>'.
                results[host].update(failed=task['task']['name'].rpartition(' : ')[2], msg=result.get('msg', ''))
    unsupported = [r['msg'] for r in results.values() if 'is not supported' in r['msg']]
    if unsupported:
        pytest.skip(f'{what} does not support this machine\'s OS: {unsupported[0]}')
    return results
