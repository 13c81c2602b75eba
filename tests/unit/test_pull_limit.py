# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pull role's plan (roles/pull/tasks/plan.yml) under --limit: only the GPU nodes the run is limited to are
planned, as push mode converges only those.

A real ansible-playbook run on localhost: the first controller is this host (connection local) and a stand-in
`scontrol` on PATH says every node is idle; the GPU nodes are inventory names only (the plan does not reach them).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = str(pathlib.Path(sys.executable).parent / 'ansible-playbook')
NODES = ['g1', 'g2', 'g3', 'g4']
SCONTROL = '''#!/bin/sh
for node in g1 g2 g3 g4; do
    echo "NodeName=$node Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State=IDLE ThreadsPerCore=1 Reason=(null)"
done
'''
PLAYBOOK = [{
    'name': 'Plan as site.yml does',
    'hosts': 'localhost',
    'gather_facts': False,
    'tasks': [
        {'name': 'Plan', 'ansible.builtin.include_role': {'name': 'llmforge.cluster.pull', 'tasks_from': 'plan'}},
        {'name': 'Show', 'ansible.builtin.debug': {'msg': '{{ {"pull": _pull_plan.pull, "push": _pull_plan.push} }}'}},
    ],
}]


@pytest.fixture(scope='module')
def planned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('pull-limit')
    (tmp / 'bin').mkdir()
    (tmp / 'bin' / 'scontrol').write_text(SCONTROL, encoding='utf-8')
    (tmp / 'bin' / 'scontrol').chmod(0o755)
    local = {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}
    inventory = {'all': {'children': {
        'gpu_nodes': {'hosts': {node: dict(local) for node in NODES}},
        'slurm_controllers': {'hosts': {'ctl': dict(local)}},
    }, 'hosts': {'localhost': dict(local)}}}
    (tmp / 'hosts.yml').write_text(yaml.safe_dump(inventory), encoding='utf-8')
    (tmp / 'play.yml').write_text(yaml.safe_dump(PLAYBOOK, sort_keys=False), encoding='utf-8')
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / 'collections'), ANSIBLE_LOAD_CALLBACK_PLUGINS='1',
               ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json', ANSIBLE_NOCOLOR='1',
               ANSIBLE_LOCAL_TEMP=str(tmp / 'ansible-tmp'), ANSIBLE_REMOTE_TEMP=str(tmp / 'ansible-tmp'),
               PATH=f"{tmp / 'bin'}:{os.environ['PATH']}")

    def plan(*args: str) -> dict:
        proc = subprocess.run([ANSIBLE_PLAYBOOK, '-i', 'hosts.yml', 'play.yml', '-e', 'pull_mode=pull', *args],
                              cwd=tmp, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        tasks = json.loads(proc.stdout)['plays'][0]['tasks']
        return tasks[-1]['hosts']['localhost']['msg']
    return plan


def test_without_a_limit_every_idle_gpu_node_pulls(planned):
    assert planned() == {'pull': NODES, 'push': []}


def test_a_limit_plans_only_its_gpu_nodes(planned):
    assert planned('--limit', 'g2:g4:localhost') == {'pull': ['g2', 'g4'], 'push': []}
    assert planned('--limit', 'gpu_nodes[0:1],localhost') == {'pull': ['g1', 'g2'], 'push': []}
