# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's preflight refuses missing, placeholder and weak web and Grafana secrets, naming the variable.

One ansible-playbook run on localhost covers every case: each case is an inventory host (connection local) with its
own settings, in a group of its own that serves as its metrics host group (monitoring_server_group). The play includes
the role's os_vars and preflight task files in check mode; they only assert, so nothing on this machine changes.
"""

from __future__ import annotations

import sys

import pytest

from preflight_play import run_preflight

GOOD = 'Xq7vLp2RzT9mKw4NbH6sJd3F'
GOOD_KEY = 'c9f2e7a4b1d8f3a6e0b5c2d9f4a7e1b8c3d6f0a9'
USERS = [{'name': 'prometheus', 'password': GOOD}]
GRAFANA = {'monitoring_grafana': True, 'monitoring_grafana_admin_password': 'Ag4Mv9Lq2Xw7Pz3Kd8Rn',
           'monitoring_grafana_secret_key': GOOD_KEY,
           'monitoring_grafana_repo_key_fingerprint': 'B53AE77BADB630A683046005963FA27710458545'}

# host -> (is it the metrics host, its settings)
CASES = {
    'good': (True, {'monitoring_web_users': USERS + [{'name': 'operator', 'password': 'Hf5jW8qT1zYc6Ud9Ge2S'}]}),
    'good-grafana': (True, dict(GRAFANA, monitoring_web_users=USERS)),
    'exporters-only': (False, {}),
    'no-users': (True, {}),
    'bad-user-name': (True, {'monitoring_web_users': [{'name': 'a b', 'password': GOOD}]}),
    'duplicate-user': (True, {'monitoring_web_users': USERS + USERS}),
    'placeholder': (True, {'monitoring_web_users': [{'name': 'prometheus', 'password': 'CHANGE_ME'}]}),
    'short': (True, {'monitoring_web_users': [{'name': 'prometheus', 'password': 'Ab3$kd9'}]}),
    'too-long': (True, {'monitoring_web_users': [{'name': 'prometheus', 'password': GOOD * 4}]}),
    'grafana-no-admin-password': (True, dict(GRAFANA, monitoring_web_users=USERS, monitoring_grafana_admin_password='')),
    'grafana-short-key': (True, dict(GRAFANA, monitoring_web_users=USERS, monitoring_grafana_secret_key='Zq8Lm3Xv7Kp2Wn5R')),
    'cert-without-key': (True, {'monitoring_web_users': USERS,
                                'monitoring_tls_cert': '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n'}),
}

PLAYBOOK = [{
    'name': 'Check the inputs as the monitoring role does',
    'hosts': 'all',
    'gather_facts': True,
    'gather_subset': ['!all', 'min', 'network'],
    'tasks': [
        {'name': 'Load OS names',
         'ansible.builtin.include_role': {'name': 'llmforge.cluster.monitoring', 'tasks_from': 'os_vars'}},
        {'name': 'Check inputs',
         'ansible.builtin.include_role': {'name': 'llmforge.cluster.monitoring', 'tasks_from': 'preflight'}},
    ],
}]


def _inventory() -> dict:
    hosts, children = {}, {}
    for host, (server, settings) in CASES.items():
        group = 'case_' + host.replace('-', '_')
        hosts[host] = dict(settings, ansible_connection='local', ansible_python_interpreter=sys.executable,
                           monitoring_server_group=group if server else 'no_such_group',
                           monitoring_alertmanager_receivers=[{'name': 'hook', 'webhook_url': 'http://127.0.0.1:9/'}])
        children[group] = {'hosts': {host: None}}
    return {'all': {'hosts': hosts, 'children': children}}


@pytest.fixture(scope='module')
def run(tmp_path_factory) -> dict:
    """host -> {'failed': name of the failed task or None, 'msg': its message, 'output': all of stdout}."""
    return run_preflight(tmp_path_factory.mktemp('monitoring-preflight'), _inventory(), PLAYBOOK, 'the monitoring role')


USERS_TASK = 'Check the users of Prometheus and Alertmanager (monitoring_web_users)'
SECRETS_TASK = 'Refuse placeholder and weak monitoring secrets'


@pytest.mark.parametrize(('host', 'task', 'words'), [
    ('no-users', USERS_TASK, ['monitoring_web_users', 'vault_monitoring_web_password']),
    ('bad-user-name', USERS_TASK, ['monitoring_web_users', "'a b'"]),
    ('duplicate-user', USERS_TASK, ['monitoring_web_users', 'unique']),
    ('placeholder', SECRETS_TASK, ['monitoring_web_users[0].password (user prometheus)', 'placeholder']),
    ('short', SECRETS_TASK, ['monitoring_web_users[0].password (user prometheus)', 'at least 16']),
    ('too-long', SECRETS_TASK, ['monitoring_web_users[0].password (user prometheus)', 'longer than 72']),
    ('grafana-no-admin-password', SECRETS_TASK, ['monitoring_grafana_admin_password']),
    ('grafana-short-key', SECRETS_TASK, ['monitoring_grafana_secret_key', 'at least 32']),
    ('cert-without-key', SECRETS_TASK, ['monitoring_tls_cert and monitoring_tls_key go together']),
])
def test_bad_input_is_refused_naming_the_variable(run, host, task, words):
    assert run[host]['failed'] == task, run[host]['msg']
    assert all(word in run[host]['msg'] for word in words), run[host]['msg']


@pytest.mark.parametrize('host', ['good', 'good-grafana', 'exporters-only'])
def test_good_input_passes(run, host):
    assert run[host]['failed'] is None, run[host]['msg']


def test_no_secret_reaches_the_output(run):
    secrets = {GOOD, GOOD_KEY, 'Ag4Mv9Lq2Xw7Pz3Kd8Rn', 'Hf5jW8qT1zYc6Ud9Ge2S', 'Ab3$kd9', 'Zq8Lm3Xv7Kp2Wn5R'}
    leaked = sorted(secret for secret in secrets if secret in run['good']['output'])
    assert not leaked
