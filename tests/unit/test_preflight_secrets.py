# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_controller's preflight refuses placeholder and weak secrets, naming the variable to fix, never the value.

One ansible-playbook run on localhost covers every case: each case is an inventory host (connection local)
with its own secrets, in a group of its own that serves as its controller and accounting group. The play
includes the real task files, os_vars then preflight (which includes slurm_common's munge_preflight), in
check mode; they only assert, so nothing on this machine changes.
"""

from __future__ import annotations

import base64
import sys

import pytest

from preflight_play import run_preflight

# The ansible-playbook installed beside the Python running the tests.
GOOD_PASSWORD = 'Xq7vLp2RzT9mKw4NbH6sJd3F'  # 24 characters
GOOD_KEY = base64.b64encode(bytes(range(256)) * 4).decode()  # 1024 bytes, like the generated key
UNSET = None  # the variable is left out of the inventory

# host -> (slurm_controller_db_password, slurm_common_munge_key)
CASES = {
    'db-placeholder': ('CHANGE_ME', GOOD_KEY),
    'db-placeholder-inside': ('my-changeme-password', GOOD_KEY),
    'db-short': ('Abcdef123456', GOOD_KEY),
    'db-hash': ('Abcdef123456#7890xyz', GOOD_KEY),
    'db-stock-words': ('Admin-Passw0rd-2024-example', GOOD_KEY),
    'db-one-class': ('83920174659201837465', GOOD_KEY),
    'db-number': (83920174659201837465, GOOD_KEY),
    'db-unset': (UNSET, GOOD_KEY),
    'db-from-unset-vault': ('{{ vault_slurm_db_password }}', GOOD_KEY),
    'munge-placeholder': (GOOD_PASSWORD, 'CHANGE_ME'),
    'munge-placeholder-lower': (GOOD_PASSWORD, 'changeme'),
    'munge-short': (GOOD_PASSWORD, base64.b64encode(b'x' * 16).decode()),
    'munge-not-base64': (GOOD_PASSWORD, GOOD_KEY[:600] + '!' + GOOD_KEY[600:]),
    'munge-zeros': (GOOD_PASSWORD, base64.b64encode(bytes(1024)).decode()),
    'good': (GOOD_PASSWORD, GOOD_KEY),
    'good-generated-key': (GOOD_PASSWORD, ''),
}

PLAYBOOK = [{
    'name': 'Check the secrets as slurm_controller does',
    'hosts': 'all',
    'gather_facts': True,
    'gather_subset': ['!all', 'min'],
    'tasks': [
        {'name': 'Load OS names shared by the Slurm roles',
         'ansible.builtin.include_role': {'name': 'llmforge.cluster.slurm_common', 'tasks_from': 'os_vars', 'public': True}},
        {'name': 'Check inputs',
         'ansible.builtin.include_role': {'name': 'llmforge.cluster.slurm_controller', 'tasks_from': 'preflight'}},
    ],
}]


def _inventory() -> dict:
    hosts = {}
    children = {}
    for host, (password, key) in CASES.items():
        group = 'case_' + host.replace('-', '_')
        hosts[host] = {
            'ansible_connection': 'local',
            'ansible_python_interpreter': sys.executable,
            'slurm_common_controller_group': group,
            'slurm_controller_dbd_group': group,
            'slurm_common_munge_key': key,
        }
        if password is not UNSET:
            hosts[host]['slurm_controller_db_password'] = password
        children[group] = {'hosts': {host: None}}
    return {'all': {'hosts': hosts, 'children': children}}


@pytest.fixture(scope='module')
def run(tmp_path_factory) -> dict:
    """host -> {'failed': name of the failed task or None, 'msg': its message, 'output': all of stdout}."""
    return run_preflight(tmp_path_factory.mktemp('preflight'), _inventory(), PLAYBOOK, 'the Slurm roles', timeout=120)


DB = ('slurm_controller_db_password', 'vault_slurm_db_password')
MUNGE = ('slurm_common_munge_key', 'vault_slurm_munge_key')


DB_TASK = 'Check the accounting database password'
MUNGE_TASK = 'Check the munge key the operator provided'


@pytest.mark.parametrize(('host', 'task', 'variables', 'hint'), [
    ('db-placeholder', DB_TASK, DB, 'a placeholder'),
    ('db-placeholder-inside', DB_TASK, DB, 'a placeholder'),
    ('db-short', DB_TASK, DB, 'at least 16 characters'),
    ('db-hash', DB_TASK, DB, "cannot hold (one of: newline, '#')"),
    ('db-stock-words', DB_TASK, DB, 'stock words'),
    ('db-one-class', DB_TASK, DB, 'digits only'),
    ('db-number', DB_TASK, DB, 'must be a string'),
    ('db-unset', DB_TASK, DB, 'slurm_controller_db_password is not defined'),
    ('db-from-unset-vault', DB_TASK, DB, 'it refers to vault_slurm_db_password, which is not defined'),
    ('munge-placeholder', MUNGE_TASK, MUNGE, 'a placeholder'),
    ('munge-placeholder-lower', MUNGE_TASK, MUNGE, 'a placeholder'),
    ('munge-short', MUNGE_TASK, MUNGE, 'at least 32 bytes'),
    ('munge-not-base64', MUNGE_TASK, MUNGE, 'not valid base64'),
    ('munge-zeros', MUNGE_TASK, MUNGE, 'distinct byte value'),
])
def test_bad_secret_is_refused_naming_the_variables(run, host, task, variables, hint):
    assert run[host]['failed'] == task
    msg = run[host]['msg']
    assert all(variable in msg for variable in variables), msg
    assert hint in msg
    # What to do: how to generate a good one.
    assert ('openssl rand -hex 24' if variables == DB else 'head -c 1024 /dev/urandom | base64 -w0') in msg


@pytest.mark.parametrize('host', ['good', 'good-generated-key'])
def test_good_secrets_pass(run, host):
    assert run[host]['failed'] is None, run[host]['msg']


def test_no_secret_reaches_the_output(run):
    """The checks print what to fix, never the values they judged."""
    placeholders = {'CHANGE_ME', 'changeme', ''}
    secrets = {str(value) for pair in CASES.values() for value in pair if value is not UNSET} - placeholders
    # The output of every host's run is the one JSON document: the refusals' messages are in it too.
    leaked = sorted(secret for secret in secrets if secret in run['good']['output'])
    assert not leaked
