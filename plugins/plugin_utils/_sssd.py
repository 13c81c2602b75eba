# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sssd role's LDAP settings, checked before anything is installed.

`problems` reads the role's variables by name (sssd_ldap_uri, sssd_ldap_base_dn, ...) and returns one sentence per
problem, each naming the variable to fix. It never repeats the bind password. The rules are those of the
sssd.conf the role writes: a comma-separated ldap_uri, TLS on every connection (ldaps://, or ldap:// with StartTLS),
DNs in RFC 4514 string form, one line per value. Pure Python with no Ansible import.
"""

from __future__ import annotations

import base64
import binascii
import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _config_values

# ldap:// or ldaps://, a host name, IPv4 address or bracketed IPv6 address, an optional port, an optional final slash.
_URI = re.compile(r'^(?P<scheme>ldaps?)://(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])'
                  r'(?::(?P<port>[0-9]{1,5}))?/?$')
# An attribute type: a name (cn, dc, ou, uid ...) or a numeric OID.
_ATTRIBUTE_TYPE = re.compile(r'^(?:[A-Za-z][A-Za-z0-9-]*|[0-9]+(?:\.[0-9]+)*)$')
# A PEM block: BEGIN and END lines of the same label around base64.
_PEM_BLOCK = re.compile(r'-----BEGIN (?P<label>[A-Z0-9 ]+)-----(?P<body>.*?)-----END (?P=label)-----', re.S)
_DOMAIN = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]*$')


def split_unescaped(text: str, separator: str) -> list[str]:
    """text split at each separator not escaped with a backslash (RFC 4514 escapes)."""
    parts, current, escaped = [], [], False
    for char in text:
        if escaped:
            current.append(char)
            escaped = False
        elif char == '\\':
            current.append(char)
            escaped = True
        elif char == separator:
            parts.append(''.join(current))
            current = []
        else:
            current.append(char)
    parts.append(''.join(current))
    return parts


def dn_problem(dn: str) -> t.Optional[str]:
    """Why dn is not a distinguished name in string form (cn=sssd,dc=example,dc=org), or None when it is one."""
    if dn != dn.strip():
        return 'it begins or ends with white space'
    if _config_values.CONTROL.search(dn):
        return 'it holds a line break, NUL or other control character'
    if dn.endswith('\\') and not dn.endswith('\\\\'):
        return 'it ends with a lone backslash'
    for rdn in split_unescaped(dn, ','):
        for part in split_unescaped(rdn, '+'):
            attribute, equals, value = part.partition('=')
            if not equals:
                return f"'{part.strip()}' has no '=' (each part is attribute=value, e.g. dc=example)"
            if not _ATTRIBUTE_TYPE.fullmatch(attribute.strip()):
                return f"'{attribute.strip()}' is not an attribute name"
            if not value.strip():
                return f"'{part.strip()}' has an empty value"
    return None


def pem_certificates(text: str) -> tuple[int, list[str]]:
    """How many certificates the PEM text holds, and what is wrong with it (empty when it is a certificate bundle)."""
    wrong: list[str] = []
    count = 0
    for block in _PEM_BLOCK.finditer(text):
        label = block.group('label')
        if 'PRIVATE KEY' in label:
            wrong.append(f'it holds a private key ({label}); give only the CA certificate, and keep the key off '
                         f'the cluster')
            continue
        if label not in ('CERTIFICATE', 'TRUSTED CERTIFICATE'):
            wrong.append(f'it holds a {label} block, not a certificate')
            continue
        try:
            der = base64.b64decode(''.join(block.group('body').split()), validate=True)
        except (binascii.Error, ValueError):
            wrong.append(f'certificate {count + 1} is not valid base64')
            continue
        # A certificate is a DER SEQUENCE.
        if not der.startswith(b'\x30'):
            wrong.append(f'certificate {count + 1} does not decode to a certificate')
            continue
        count += 1
    if count == 0 and not wrong:
        wrong.append('it holds no -----BEGIN CERTIFICATE----- block')
    return count, wrong


def uri_problems(uris: t.Any, start_tls: bool) -> list[str]:
    """What is wrong with sssd_ldap_uri: a list of ldaps:// URIs, or ldap:// ones when StartTLS is on."""
    if isinstance(uris, str) or not isinstance(uris, t.Sequence):
        return [f'sssd_ldap_uri must be a list of URIs such as [ldaps://ldap1.example.org], got {uris!r}']
    found = []
    for uri in uris:
        match = _URI.fullmatch(uri) if isinstance(uri, str) else None
        if match is None:
            found.append(f'sssd_ldap_uri: {uri!r} is not ldaps://host[:port] or ldap://host[:port] (a host name, '
                         f'IPv4 address or [IPv6] address, nothing after the port)')
            continue
        port = match.group('port')
        if port is not None and not 1 <= int(port) <= 65535:
            found.append(f'sssd_ldap_uri: {uri!r} has port {port}, not 1 to 65535')
        if match.group('scheme') == 'ldap' and not start_tls:
            found.append(f'sssd_ldap_uri: {uri!r} is plain LDAP and sssd_ldap_start_tls is false: the bind password '
                         f'and every login password would cross the network in clear; use ldaps:// or set '
                         f'sssd_ldap_start_tls: true')
    duplicates = sorted({uri for uri in uris if isinstance(uri, str) and list(uris).count(uri) > 1})
    if duplicates:
        found.append(f'sssd_ldap_uri lists {", ".join(duplicates)} more than once')
    return found


def _text(values: t.Mapping[str, t.Any], name: str) -> str:
    value = values.get(name)
    return '' if value is None else value


def problems(values: t.Mapping[str, t.Any]) -> list[str]:
    """What is wrong with the sssd role's LDAP settings, one sentence each naming the variable.

    values maps the role's variable names to their values; sssd_ldap_bind_password may be missing (it has no
    default). Only called when sssd_ldap_uri is not empty: with no URI the role changes nothing.
    """
    found = uri_problems(values.get('sssd_ldap_uri'), bool(values.get('sssd_ldap_start_tls', True)))

    base_dn = _text(values, 'sssd_ldap_base_dn')
    if not isinstance(base_dn, str) or not base_dn:
        found.append('sssd_ldap_base_dn must be the search base of the directory, e.g. dc=example,dc=org; it is empty')
    else:
        found += _dn_problems('sssd_ldap_base_dn', base_dn)

    for name in ('sssd_ldap_user_search_base', 'sssd_ldap_group_search_base'):
        search_base = _text(values, name)
        if not isinstance(search_base, str):
            found.append(f'{name} must be a string (a DN, optionally ?scope?filter), got {search_base!r}')
        elif search_base:
            # sssd's search bases may carry ?scope?filter after the DN: that part too stays on its line.
            found += (_dn_problems(name, search_base.split('?', 1)[0])
                      or _config_values.value_problems(name, search_base, 'ini'))

    found += _bind_problems(values)

    ca_cert = _text(values, 'sssd_ldap_ca_cert')
    if not isinstance(ca_cert, str):
        found.append(f'sssd_ldap_ca_cert must be PEM text, got a {type(ca_cert).__name__}')
    elif ca_cert.strip():
        _count, wrong = pem_certificates(ca_cert)
        found += [f'sssd_ldap_ca_cert is not the PEM of a CA certificate: {why}' for why in wrong]

    domain = _text(values, 'sssd_domain')
    if not isinstance(domain, str) or not _DOMAIN.fullmatch(domain):
        found.append(f'sssd_domain must be a name of letters, digits, _, . and - (the [domain/<name>] section of '
                     f'sssd.conf), got {domain!r}')

    home_base = _text(values, 'sssd_home_base')
    if values.get('sssd_override_homedir'):
        if not isinstance(home_base, str) or not home_base.startswith('/') \
                or re.search(r'[\s%\0-\x1f\x7f]', home_base):
            found.append(f'sssd_home_base must be an absolute path without white space or % (homes are '
                         f'<sssd_home_base>/<user> with sssd_override_homedir), got {home_base!r}')
    return found


def _dn_problems(name: str, dn: str) -> list[str]:
    why = dn_problem(dn)
    return [] if why is None else [f'{name} {dn!r} is not a DN: {why}']


def _bind_problems(values: t.Mapping[str, t.Any]) -> list[str]:
    bind_dn = _text(values, 'sssd_ldap_bind_dn')
    password = _text(values, 'sssd_ldap_bind_password')
    found = []
    if not isinstance(bind_dn, str):
        return [f'sssd_ldap_bind_dn must be a DN string, got a {type(bind_dn).__name__}']
    if bind_dn:
        found += _dn_problems('sssd_ldap_bind_dn', bind_dn)
    if not isinstance(password, str):
        # Never the value: it is a secret.
        return found + [f'sssd_ldap_bind_password must be a string, got a {type(password).__name__}']
    if bind_dn and not password:
        found.append(f'sssd_ldap_bind_dn is {bind_dn!r}, so sssd_ldap_bind_password is required: the password of '
                     f'that DN, kept in Ansible Vault (vault_sssd_ldap_bind_password in the example inventory)')
    if password and not bind_dn:
        found.append('sssd_ldap_bind_password is set but sssd_ldap_bind_dn is empty: set the DN the password belongs '
                     'to, or remove the password to bind anonymously')
    if password and (password != password.strip() or any(char in password for char in '\r\n\0')):
        found.append('sssd_ldap_bind_password begins or ends with white space or holds a line break: sssd.conf '
                     'cannot carry it unchanged; choose another password')
    return found
