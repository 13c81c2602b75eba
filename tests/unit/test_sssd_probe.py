# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sssd role's check that SSSD reaches the directory, from the probe's command to the message that stops a play.

The probe is the role's own script (vars/main.yml, _sssd_probe_script), run by /bin/sh as tasks/service.yml runs
it, with stand-ins for getent, sssctl and sleep on PATH that answer as a host would and record each call; its output
then goes through the role's own asserts (role_render runs them with the role's defaults and vars), so the messages
tested are the ones an operator reads. configure.yml's read of nsswitch.conf and the PAM stack runs the same probe
after its grep where nothing changed; the asserts then read the probe's lines from it.
"""

from __future__ import annotations

import os
import pathlib
import stat
import subprocess

import jinja2
import pytest
import yaml

from role_render import ROOT, render

TASKS = ROOT / 'roles' / 'sssd' / 'tasks' / 'service.yml'
PROBE = next(task for task in yaml.safe_load(TASKS.read_text(encoding='utf-8'))
             if task['name'].startswith('Make SSSD connect'))
VARS = yaml.safe_load((ROOT / 'roles' / 'sssd' / 'vars' / 'main.yml').read_text(encoding='utf-8'))

ONLINE = 'Online status: Online\n\nActive servers:\nLDAP: ldap1.example.org\n'
OFFLINE = 'Online status: Offline\n\nActive servers:\nLDAP: not connected\n'
ENTRY = 'hpcadmins:*:5000:alice,bob'


def stand_in(directory: pathlib.Path, name: str, script: str) -> None:
    path = directory / name
    path.write_text('#!/bin/sh\necho "$0 $*" >> "$CALLS"\n' + script, encoding='utf-8')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def probe(tmp_path: pathlib.Path, *, group_found_on: int, online_on: int, admin_group: bool) -> tuple[list[str], list[str]]:
    """Run the role's probe; getent finds the group from its Nth call (0: never), sssctl says online from its Nth.

    Returns (the probe's output lines, the commands it called in order).
    """
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    calls = tmp_path / 'calls'
    calls.touch()
    count = 'n=$(grep -c "^$0 " "$CALLS")\n'
    stand_in(bin_dir, 'getent', count + (f'[ "$n" -ge {group_found_on} ] && echo "{ENTRY}" && exit 0\n'
                                         if group_found_on else '') + 'exit 2\n')
    stand_in(bin_dir, 'sssctl', count + (f'if [ "$n" -ge {online_on} ]; then printf "{ONLINE}"; '
                                         f'else printf "{OFFLINE}"; fi\n' if online_on else f'printf "{OFFLINE}"\n'))
    stand_in(bin_dir, 'sleep', '')
    assert PROBE['environment'] == '{{ _sssd_probe_environment }}'
    environment = {name: str(value) for name, value in VARS['_sssd_probe_environment'].items()}
    assert set(environment) == {'PROBE_GROUP', 'DOMAIN', 'LOOKUP_TRIES'}
    env = {'PATH': f'{bin_dir}:{os.environ["PATH"]}', 'CALLS': str(calls), 'PROBE_GROUP': 'hpcadmins',
           'DOMAIN': 'ldap', 'LOOKUP_TRIES': '11' if admin_group else '1'}
    # The role passes the tries as a template; this is what it renders to for each case.
    assert environment['LOOKUP_TRIES'] == "{{ 11 if sssd_admin_group | length > 0 else 1 }}"
    shell = PROBE['ansible.builtin.shell']
    assert shell['cmd'] == '{{ _sssd_probe_script }}'
    result = subprocess.run([shell['executable'], '-c', VARS['_sssd_probe_script']], env=env, capture_output=True,
                            text=True, timeout=60, check=True)
    return result.stdout.splitlines(), [pathlib.Path(line.split()[0]).name for line in calls.read_text().splitlines()]


def checked(lines: list[str], **settings) -> dict:
    """The role's asserts after the probe printed `lines`: {'hosts': ...} when they pass, {'error': message}."""
    host = dict({'sssd_ldap_uri': ['ldaps://ldap1.example.org', 'ldaps://ldap2.example.org'],
                 'sssd_ldap_base_dn': 'dc=example,dc=org', 'sssd_admin_group': 'hpcadmins',
                 '__sssd_probe': {'stdout_lines': lines}}, **settings)
    return render('sssd', 'sssd.service.conf.j2', {'hosts': {'gpu1': host}, 'groups': {}}, tasks='service.yml',
                  extra_vars={'_sssd_installed': True})


def test_a_directory_that_answers_at_once_costs_one_lookup_and_one_state_read(tmp_path):
    lines, calls = probe(tmp_path, group_found_on=1, online_on=1, admin_group=True)
    assert calls == ['getent', 'sssctl']
    assert lines[0] == ENTRY and lines[1] == 'Online status: Online'
    assert 'hosts' in checked(lines), checked(lines)


def test_a_restarting_sssd_is_given_time_before_the_group_counts_as_missing(tmp_path):
    lines, calls = probe(tmp_path, group_found_on=4, online_on=2, admin_group=True)
    assert calls == ['getent', 'sleep'] * 3 + ['getent', 'sssctl', 'sleep', 'sssctl']
    assert 'hosts' in checked(lines)


def test_a_missing_admin_group_is_looked_up_eleven_times_then_named(tmp_path):
    lines, calls = probe(tmp_path, group_found_on=0, online_on=1, admin_group=True)
    assert calls.count('getent') == 11 and calls[:21].count('sleep') == 10 and calls[21:] == ['sssctl']
    assert lines[0] == ''
    message = checked(lines, sssd_ldap_group_search_base='ou=groups,dc=example,dc=org')['error']
    assert message.startswith('getent group hpcadmins (sssd_admin_group) finds nothing on gpu1 although SSSD '
                              'reaches the directory'), message
    assert 'ou=groups,dc=example,dc=org' in message and 'sssd_min_id (1000)' in message


def test_without_an_admin_group_one_lookup_of_a_name_nobody_needs_makes_sssd_connect(tmp_path):
    lines, calls = probe(tmp_path, group_found_on=0, online_on=1, admin_group=False)
    assert calls == ['getent', 'sssctl']
    assert 'hosts' in checked(lines, sssd_admin_group='')


def test_an_offline_directory_is_read_six_times_then_reported_with_what_sssctl_said(tmp_path):
    lines, calls = probe(tmp_path, group_found_on=0, online_on=0, admin_group=False)
    assert calls == ['getent'] + ['sssctl', 'sleep'] * 5 + ['sssctl']
    message = checked(lines, sssd_admin_group='')['error']
    assert message.startswith('SSSD on gpu1 is offline after 15 s: it cannot use ldaps://ldap1.example.org, '
                              'ldaps://ldap2.example.org (sssctl domain-status --online ldap: Online status: Offline'), message
    assert 'LDAP: not connected' in message
    for cause in ('certificate verify failed', 'Invalid credentials', '/var/log/sssd/sssd_ldap.log'):
        assert cause in message


@pytest.mark.parametrize('admin_group', ['hpcadmins', ''])
def test_offline_is_reported_before_a_missing_group(tmp_path, admin_group):
    """An unreachable directory finds no group either: the message names the connection, not the group."""
    lines, _calls = probe(tmp_path, group_found_on=0, online_on=0, admin_group=bool(admin_group))
    assert checked(lines, sssd_admin_group=admin_group)['error'].startswith('SSSD on gpu1 is offline')


def test_the_read_of_nsswitch_and_pam_runs_the_probe_after_its_lines_and_the_asserts_read_it_there(tmp_path):
    """configure.yml's one read: grep's lines, the marker, then the probe's; grep's exit status stays the step's."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    calls = tmp_path / 'calls'
    calls.touch()
    stand_in(bin_dir, 'getent', f'echo "{ENTRY}"\n')
    stand_in(bin_dir, 'sssctl', f'printf "{ONLINE}"\n')
    nsswitch = tmp_path / 'nsswitch.conf'
    nsswitch.write_text('passwd: files systemd\ngroup: files sss\n', encoding='utf-8')
    script = jinja2.Template(VARS['_sssd_read_script']).render(VARS)
    env = {'PATH': f'{bin_dir}:{os.environ["PATH"]}', 'CALLS': str(calls), 'PROBE_GROUP': 'hpcadmins',
           'DOMAIN': 'ldap', 'LOOKUP_TRIES': '11'}
    pattern = '^(passwd|group|shadow):|pam_(sss|mkhomedir)[.]so'
    for flag, expected in (('1', ['getent', 'sssctl']), ('0', [])):
        calls.write_text('', encoding='utf-8')
        result = subprocess.run(['sh', '-c', script, 'sh', pattern, str(nsswitch), str(tmp_path / 'missing')],
                                env=dict(env, PROBE=flag), capture_output=True, text=True, timeout=60, check=False)
        # grep's 2: a file it reads is missing (the role accepts 0, 1 and 2).
        assert result.returncode == 2, result
        lines = result.stdout.splitlines()
        assert lines[:2] == [f'{nsswitch}:passwd: files systemd', f'{nsswitch}:group: files sss'], lines
        assert [pathlib.Path(line.split()[0]).name for line in calls.read_text().splitlines()] == expected
        if flag == '1':
            assert lines[2] == VARS['_sssd_probe_marker'] and lines[3] == ENTRY and lines[4] == 'Online status: Online'
            host = {'sssd_ldap_uri': ['ldaps://ldap1.example.org'], 'sssd_ldap_base_dn': 'dc=example,dc=org',
                    'sssd_admin_group': 'hpcadmins', '__sssd_nss_pam_lines': {'stdout_lines': lines}}
            assert 'hosts' in render('sssd', 'sssd.service.conf.j2', {'hosts': {'gpu1': host}, 'groups': {}},
                                     tasks='service.yml', extra_vars={'_sssd_installed': True})
            offline = lines[:4] + ['Online status: Offline']
            host['__sssd_nss_pam_lines'] = {'stdout_lines': offline}
            failed = render('sssd', 'sssd.service.conf.j2', {'hosts': {'gpu1': host}, 'groups': {}},
                            tasks='service.yml', extra_vars={'_sssd_installed': True})
            assert failed['error'].startswith('SSSD on gpu1 is offline'), failed
        else:
            assert len(lines) == 2
