# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sssd role's LDAP settings: usable ones pass, each wrong one is named, the bind password never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.sssd import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _sssd

REPO = Path(__file__).resolve().parents[2]
# A self-signed CA certificate made with openssl req -x509 (EC P-256, CA:TRUE), like the test LDAP server's.
CA_PEM = (REPO / 'tests' / 'fixtures' / 'ldap' / 'test-ca.pem').read_text(encoding='utf-8')
PASSWORD = 'Wq9rT2mXv7LpN4sBz8Kd'
sssd_problems = FilterModule().filters()['sssd_problems']

GOOD = {
    'sssd_ldap_uri': ['ldaps://ldap1'],
    'sssd_ldap_start_tls': True,
    'sssd_ldap_base_dn': 'dc=llmforge,dc=test',
    'sssd_ldap_user_search_base': '',
    'sssd_ldap_group_search_base': '',
    'sssd_ldap_bind_dn': 'cn=sssd,dc=llmforge,dc=test',
    'sssd_ldap_bind_password': PASSWORD,
    'sssd_ldap_ca_cert': CA_PEM,
    'sssd_domain': 'ldap',
    'sssd_home_base': '/shared/home',
    'sssd_override_homedir': False,
}


def _with(**changes):
    values = dict(GOOD)
    values.update(changes)
    return values


@pytest.mark.parametrize('changes', [
    pytest.param({}, id='ldaps-with-bind-and-ca'),
    pytest.param({'sssd_ldap_uri': ['ldap://ldap1.example.org', 'ldap://10.0.0.5:3389/']}, id='starttls'),
    pytest.param({'sssd_ldap_uri': ['ldaps://[fd00::5]:636'], 'sssd_ldap_start_tls': False}, id='ldaps-only-ipv6'),
    pytest.param({'sssd_ldap_bind_dn': '', 'sssd_ldap_bind_password': ''}, id='anonymous'),
    pytest.param({'sssd_ldap_bind_dn': '', 'sssd_ldap_bind_password': None}, id='anonymous-password-null'),
    pytest.param({'sssd_ldap_ca_cert': ''}, id='system-ca-bundle'),
    pytest.param({'sssd_ldap_ca_cert': 'Subject: CN=llmforge test LDAP CA\n' + CA_PEM + CA_PEM}, id='bundle-with-text'),
    pytest.param({'sssd_ldap_base_dn': 'ou=HPC\\, Research,o=Example+l=Paris,c=FR'}, id='escaped-and-multivalued-dn'),
    pytest.param({'sssd_ldap_user_search_base': 'ou=people,dc=llmforge,dc=test?subtree?(loginShell=/bin/bash)',
                  'sssd_ldap_group_search_base': 'ou=groups,dc=llmforge,dc=test'}, id='search-bases'),
    pytest.param({'sssd_override_homedir': True, 'sssd_home_base': '/lustre/home'}, id='override-homedir'),
    pytest.param({'sssd_ldap_bind_dn': '2.5.4.3=sssd,dc=llmforge,dc=test'}, id='oid-attribute'),
])
def test_usable_settings_pass(changes):
    assert sssd_problems(_with(**changes)) == []


def test_the_password_may_be_missing_when_binding_anonymously():
    values = _with(sssd_ldap_bind_dn='')
    del values['sssd_ldap_bind_password']
    assert _sssd.problems(values) == []


@pytest.mark.parametrize(('changes', 'variable', 'words'), [
    pytest.param({'sssd_ldap_uri': 'ldaps://ldap1'}, 'sssd_ldap_uri', 'must be a list', id='uri-string'),
    pytest.param({'sssd_ldap_uri': ['https://ldap1']}, 'sssd_ldap_uri', 'is not ldaps://', id='uri-scheme'),
    pytest.param({'sssd_ldap_uri': ['ldaps://ldap1/dc=x']}, 'sssd_ldap_uri', 'nothing after the port', id='uri-path'),
    pytest.param({'sssd_ldap_uri': ['ldaps://ldap1, ldaps://ldap2']}, 'sssd_ldap_uri', 'is not ldaps://',
                 id='uri-two-in-one'),
    pytest.param({'sssd_ldap_uri': ['ldaps://ldap1:70000']}, 'sssd_ldap_uri', 'not 1 to 65535', id='uri-port'),
    pytest.param({'sssd_ldap_uri': ['ldaps://ldap1', 'ldaps://ldap1']}, 'sssd_ldap_uri', 'more than once',
                 id='uri-duplicate'),
    pytest.param({'sssd_ldap_uri': ['ldap://ldap1'], 'sssd_ldap_start_tls': False}, 'sssd_ldap_start_tls',
                 'in clear', id='plain-ldap'),
    pytest.param({'sssd_ldap_base_dn': ''}, 'sssd_ldap_base_dn', 'it is empty', id='base-empty'),
    pytest.param({'sssd_ldap_base_dn': 'llmforge.test'}, 'sssd_ldap_base_dn', "has no '='", id='base-domain-name'),
    pytest.param({'sssd_ldap_base_dn': 'dc=llmforge,,dc=test'}, 'sssd_ldap_base_dn', "has no '='", id='base-empty-rdn'),
    pytest.param({'sssd_ldap_base_dn': 'dc=llmforge,dc='}, 'sssd_ldap_base_dn', 'empty value', id='base-empty-value'),
    pytest.param({'sssd_ldap_base_dn': ' dc=llmforge,dc=test'}, 'sssd_ldap_base_dn', 'white space', id='base-space'),
    pytest.param({'sssd_ldap_base_dn': 'dc=llm forge!,d c=test'}, 'sssd_ldap_base_dn', 'not an attribute name',
                 id='base-attribute'),
    pytest.param({'sssd_ldap_user_search_base': 'people?subtree'}, 'sssd_ldap_user_search_base',
                 "'people' has no '='", id='user-base'),
    pytest.param({'sssd_ldap_bind_dn': 'sssd'}, 'sssd_ldap_bind_dn', "has no '='", id='bind-dn'),
    pytest.param({'sssd_ldap_bind_password': ''}, 'sssd_ldap_bind_password', 'is required', id='bind-no-password'),
    pytest.param({'sssd_ldap_bind_dn': ''}, 'sssd_ldap_bind_dn', 'is empty', id='password-without-dn'),
    pytest.param({'sssd_ldap_bind_password': PASSWORD + ' '}, 'sssd_ldap_bind_password', 'white space',
                 id='password-trailing-space'),
    pytest.param({'sssd_ldap_bind_password': 'Wq9rT2mX\nv7LpN4sBz8Kd'}, 'sssd_ldap_bind_password', 'line break',
                 id='password-newline'),
    pytest.param({'sssd_ldap_bind_password': 12345678901234567}, 'sssd_ldap_bind_password', 'must be a string',
                 id='password-number'),
    pytest.param({'sssd_ldap_ca_cert': '/etc/ssl/certs/ldap-ca.pem'}, 'sssd_ldap_ca_cert', 'no -----BEGIN CERTIFICATE',
                 id='ca-file-name'),
    pytest.param({'sssd_ldap_ca_cert': CA_PEM.replace('MIIB', 'MI!B')}, 'sssd_ldap_ca_cert', 'not valid base64',
                 id='ca-broken-base64'),
    pytest.param({'sssd_ldap_ca_cert': '-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n'},
                 'sssd_ldap_ca_cert', 'does not decode to a certificate', id='ca-not-der'),
    pytest.param({'sssd_ldap_ca_cert': CA_PEM + '-----BEGIN PRIVATE KEY-----\nMIGH\n-----END PRIVATE KEY-----\n'},
                 'sssd_ldap_ca_cert', 'private key', id='ca-with-key'),
    pytest.param({'sssd_ldap_ca_cert': '-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----'},
                 'sssd_ldap_ca_cert', 'CERTIFICATE REQUEST block', id='ca-csr'),
    pytest.param({'sssd_ldap_ca_cert': ['pem']}, 'sssd_ldap_ca_cert', 'must be PEM text', id='ca-list'),
    pytest.param({'sssd_domain': 'my domain'}, 'sssd_domain', 'letters, digits', id='domain'),
    pytest.param({'sssd_override_homedir': True, 'sssd_home_base': 'shared/home'}, 'sssd_home_base',
                 'absolute path', id='home-relative'),
    pytest.param({'sssd_override_homedir': True, 'sssd_home_base': '/shared/%u'}, 'sssd_home_base',
                 'absolute path', id='home-percent'),
])
def test_each_problem_names_its_variable(changes, variable, words):
    found = sssd_problems(_with(**changes))
    assert len(found) == 1, found
    assert variable in found[0] and words in found[0], found[0]


def test_every_problem_is_reported_at_once():
    found = _sssd.problems({'sssd_ldap_uri': ['ldap://ldap1'], 'sssd_ldap_start_tls': False, 'sssd_ldap_base_dn': '',
                            'sssd_ldap_bind_dn': 'cn=sssd', 'sssd_ldap_ca_cert': 'ca.pem', 'sssd_domain': 'ldap'})
    assert [problem.split(' ', 1)[0].rstrip(':') for problem in found] == [
        'sssd_ldap_uri', 'sssd_ldap_base_dn', 'sssd_ldap_bind_dn', 'sssd_ldap_ca_cert']


@pytest.mark.parametrize('password', [PASSWORD + ' ', 'Wq9rT2mX\nv7LpN4sBz8Kd', PASSWORD])
def test_the_password_is_never_in_a_message(password):
    found = sssd_problems(_with(sssd_ldap_bind_dn='', sssd_ldap_bind_password=password))
    assert found and not any(password.strip() in problem or 'v7LpN4sBz8Kd' in problem for problem in found)


def test_the_certificate_bundle_is_counted():
    assert _sssd.pem_certificates(CA_PEM + CA_PEM) == (2, [])


@pytest.mark.parametrize(('text', 'separator', 'parts'), [
    ('cn=a,dc=b', ',', ['cn=a', 'dc=b']),
    ('ou=a\\,b,dc=c', ',', ['ou=a\\,b', 'dc=c']),
    ('ou=a\\\\,dc=c', ',', ['ou=a\\\\', 'dc=c']),
    ('o=x+l=y', '+', ['o=x', 'l=y']),
])
def test_split_unescaped(text, separator, parts):
    assert _sssd.split_unescaped(text, separator) == parts


def test_the_filter_wants_a_mapping():
    with pytest.raises(AnsibleFilterError, match='mapping'):
        sssd_problems(['ldaps://ldap1'])
