# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""common's apt_source refuses a source name that is not a sources.list.d file name as it is, naming the variable,
before it downloads, installs or writes anything.

One ansible-playbook --check run on localhost: each case is an inventory host (connection local) with its own name.
Every case here is refused by the first task, so nothing on this machine is read or changed.
"""

from __future__ import annotations

import sys

import pytest

from preflight_play import run_preflight

CASES = {
    'upper-case': 'LLMforge-nccl',
    'space': 'llmforge nccl',
    'path': '../../etc/passwd',
    'underscore': 'llmforge_nccl',
    'leading-dash': '-llmforge',
    'empty': '',
}

PLAYBOOK = [{
    'name': 'Add an apt source as the roles do',
    'hosts': 'all',
    'gather_facts': False,
    'tasks': [
        {'name': 'Add the source',
         'ansible.builtin.include_role': {'name': 'llmforge.cluster.common', 'tasks_from': 'apt_source'},
         'vars': {'common_apt_source_name': '{{ case_source_name }}',
                  'common_apt_source_uris': ['http://127.0.0.1:9/debian'],
                  'common_apt_source_suites': ['trixie'],
                  'common_apt_source_signed_by': '/usr/share/keyrings/debian-archive-keyring.gpg'}},
    ],
}]


@pytest.fixture(scope='module')
def run(tmp_path_factory) -> dict:
    inventory = {'all': {'hosts': {host: {'case_source_name': name, 'ansible_connection': 'local',
                                          'ansible_python_interpreter': sys.executable}
                                   for host, name in CASES.items()}}}
    return run_preflight(tmp_path_factory.mktemp('apt-source-name'), inventory, PLAYBOOK, 'common apt_source')


@pytest.mark.parametrize('host', CASES)
def test_a_name_apt_would_not_take_as_it_is_is_refused_naming_the_variable(run, host):
    assert run[host]['failed'] == 'Check the name of the apt source (common_apt_source_name)', run[host]['msg']
    assert 'common_apt_source_name' in run[host]['msg'] and 'lower-case letters, digits and dashes' in run[host]['msg']
    # Refused first: no task after the check ran on the host (before it: the include and its argument spec).
    assert run[host]['messages'][-1] == run[host]['msg'], run[host]['messages']
    assert 'The arg spec validation passed' in run[host]['messages'][:-1]
