# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sssd role stops on bad LDAP settings naming the variable, does nothing without a URI, and shows no password.

One ansible-playbook run on localhost covers every case: each case is an inventory host (connection local) with its
own settings. The play runs the real role in check mode with --tags sssd_preflight, so only its argument validation,
the "no URI" path, the OS names and the preflight run; nothing on this machine changes.
"""

from __future__ import annotations

import sys

import pytest

from preflight_play import ROOT, run_preflight

PASSWORD = 'Hq4mZt8RvW2xLc6NpB9k'

BASE = {'sssd_ldap_uri': ['ldaps://ldap1.example.org'], 'sssd_ldap_base_dn': 'dc=example,dc=org'}
BIND = dict(BASE, sssd_ldap_bind_dn='cn=sssd,dc=example,dc=org')
CASES = {
    'off': {},
    'good-anonymous': BASE,
    'good-bind': dict(BIND, sssd_ldap_bind_password=PASSWORD),
    'plain-ldap': dict(BASE, sssd_ldap_uri=['ldap://ldap1.example.org'], sssd_ldap_start_tls=False),
    'no-base-dn': dict(BASE, sssd_ldap_base_dn=''),
    'ca-file-name': dict(BASE, sssd_ldap_ca_cert='/etc/ssl/certs/ldap-ca.pem'),
    'bind-without-password': BIND,
    'bind-placeholder': dict(BIND, sssd_ldap_bind_password='CHANGE_ME'),
    'password-without-bind-dn': dict(BASE, sssd_ldap_bind_password=PASSWORD),
}
# Cases whose outcome comes from llmforge.cluster.secret_problems.
STRENGTH_CASES = {'good-bind', 'bind-placeholder'}
PREFLIGHT = 'Check the LDAP settings and the bind password'

PLAYBOOK = [{
    'name': 'Check the settings as the sssd role does',
    'hosts': 'all',
    'gather_facts': True,
    'gather_subset': ['!all', 'min'],
    'roles': [{'role': 'llmforge.cluster.sssd'}],
}]


@pytest.fixture(scope='module')
def run(tmp_path_factory) -> dict:
    """host -> {'failed': name of the failed task or None, 'msg': its message, 'messages': every msg it printed}."""
    hosts = {host: dict(settings, ansible_connection='local', ansible_python_interpreter=sys.executable)
             for host, settings in CASES.items()}
    results = run_preflight(tmp_path_factory.mktemp('preflight-sssd'), {'all': {'hosts': hosts}}, PLAYBOOK,
                            'the sssd role', '--tags', 'sssd_preflight')
    results['_stdout'] = results[next(iter(CASES))]['output']
    return results


# The password's strength is judged by the secrets filter; without it those cases cannot run.
HAS_SECRET_PROBLEMS = any("'secret_problems'" in path.read_text(encoding='utf-8')
                          for path in (ROOT / 'plugins' / 'filter').glob('*.py'))


def _strength_checked(run, host):
    if not HAS_SECRET_PROBLEMS:
        pytest.skip('the filter llmforge.cluster.secret_problems is not in this collection')


def test_no_uri_changes_nothing_and_says_so(run):
    assert run['off']['failed'] is None, run['off']['msg']
    assert any('sssd_ldap_uri is empty' in message for message in run['off']['messages'])


@pytest.mark.parametrize('host', ['good-anonymous', 'good-bind'])
def test_usable_settings_pass(run, host):
    if host in STRENGTH_CASES:
        _strength_checked(run, host)
    assert run[host]['failed'] is None, run[host]['msg']


@pytest.mark.parametrize(('host', 'variable', 'words'), [
    ('plain-ldap', 'sssd_ldap_uri', 'in clear'),
    ('no-base-dn', 'sssd_ldap_base_dn', 'it is empty'),
    ('ca-file-name', 'sssd_ldap_ca_cert', 'BEGIN CERTIFICATE'),
    ('bind-without-password', 'sssd_ldap_bind_password', 'is required'),
    ('bind-placeholder', 'sssd_ldap_bind_password', ''),
    ('password-without-bind-dn', 'sssd_ldap_bind_dn', 'is empty'),
])
def test_bad_settings_stop_the_play_naming_the_variable(run, host, variable, words):
    if host in STRENGTH_CASES:
        _strength_checked(run, host)
    assert run[host]['failed'] == PREFLIGHT, run[host]
    assert variable in run[host]['msg'] and words in run[host]['msg']


def test_no_password_reaches_the_output(run):
    assert PASSWORD not in run['_stdout']
