# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Directory users: every host reads alice, bob and carol from ldap1 over TLS, with the same UIDs and shared homes.

ldap1 runs slapd (molecule/resources/ldap_server.yml); the sssd role configured every cluster host against it. A
scenario without ldap1 (molecule/cluster_debian12) has no directory users: these tests are skipped there.
"""

from __future__ import annotations

import pathlib

import pytest

from conftest import ALL_HOSTS, CONTROLLER, NODES
from scenario_helpers import PROJECT

USERS = {
    'alice': 'alice:*:20001:21001:Alice Example:/shared/home/alice:/bin/bash',
    'bob': 'bob:*:20002:21002:Bob Example:/shared/home/bob:/bin/bash',
    'carol': 'carol:*:20003:21000:Carol Example:/shared/home/carol:/bin/bash',
}
# A CA that did not sign ldap1's certificate: the unit tests' self-signed test CA.
OTHER_CA = pathlib.Path(PROJECT, 'tests', 'fixtures', 'ldap', 'test-ca.pem').read_text(encoding='utf-8')
CA = '/etc/sssd/llmforge-ldap-ca.pem'
ROOT_DSE = 'ldapsearch -LLL -x -H {uri} -b "" -s base namingContexts'


@pytest.fixture(scope='module', autouse=True)
def directory(hosts):
    if hosts[CONTROLLER].run('getent hosts ldap1').rc != 0:
        pytest.skip('no ldap1 in this scenario: the hosts keep local accounts')


@pytest.mark.parametrize('name', ALL_HOSTS)
def test_every_host_has_the_same_directory_users(hosts, name):
    host = hosts[name]
    for user, entry in USERS.items():
        assert host.check_output(f'getent passwd {user}') == entry, name
    assert host.check_output('id bob') == 'uid=20002(bob) gid=21002(team-b) groups=21002(team-b)'
    assert host.check_output('getent group team-a') == 'team-a:*:21001:alice'
    assert host.check_output('getent group hpcadmins') == 'hpcadmins:*:21000:carol'


@pytest.mark.parametrize('name', ALL_HOSTS)
def test_sssd_is_online_and_its_secrets_are_private(hosts, name):
    host = hosts[name]
    assert 'Online status: Online' in host.check_output('sssctl domain-status --online ldap')
    for path in ('/etc/sssd/sssd.conf', '/etc/sssd/conf.d/llmforge-bind.conf'):
        secret = host.file(path)
        assert (secret.user, secret.group, secret.mode) == ('root', 'root', 0o600), f'{name}:{path}'
    assert 'ldap_default_authtok =' not in host.file('/etc/sssd/sssd.conf').content_string
    assert 'ldap_tls_reqcert = demand' in host.file('/etc/sssd/sssd.conf').content_string


def test_homes_are_on_shared_storage_owned_by_their_users(hosts):
    for name in ALL_HOSTS:
        home = hosts[name].file('/shared/home/alice')
        assert (home.uid, home.gid, home.mode) == (20001, 21001, 0o700), name
        assert (home.user, home.group) == ('alice', 'team-a'), name


@pytest.mark.parametrize('name', NODES)
def test_a_login_session_of_a_directory_user_starts_in_the_shared_home(hosts, name):
    assert hosts[name].check_output("su - alice -c 'id -un; pwd'").split() == ['alice', '/shared/home/alice']


def test_ldap1_answers_over_tls_only_and_only_with_its_ca(hosts):
    ctl = hosts[CONTROLLER]
    tls = ctl.run(f'LDAPTLS_CACERT={CA} ' + ROOT_DSE.format(uri='ldap://ldap1') + ' -ZZ')
    assert tls.rc == 0 and 'namingContexts: dc=llmforge,dc=test' in tls.stdout, tls.stderr
    ldaps = ctl.run(f'LDAPTLS_CACERT={CA} ' + ROOT_DSE.format(uri='ldaps://ldap1'))
    assert ldaps.rc == 0 and 'dc=llmforge,dc=test' in ldaps.stdout, ldaps.stderr
    plain = ctl.run(ROOT_DSE.format(uri='ldap://ldap1'))
    assert plain.rc != 0 and 'Confidentiality required' in plain.stdout + plain.stderr
    ctl.check_output(f"printf '%s' '{OTHER_CA}' > /root/llmforge-other-ca.pem")
    wrong = ctl.run('LDAPTLS_CACERT=/root/llmforge-other-ca.pem ' + ROOT_DSE.format(uri='ldap://ldap1') + ' -ZZ')
    ctl.run('rm -f /root/llmforge-other-ca.pem')
    assert wrong.rc != 0 and 'certificate verify failed' in wrong.stderr
