# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sssd role's check that SSSD reaches the directory, from the sssd_status module's reading to the message that
stops a play.

`_sssd_status.check` runs with stand-ins for getent, sssctl and the pause that answer as a host would and record each
call; its result then goes through the role's own asserts (role_render runs tasks/service.yml's asserts with the
role's defaults and vars), so the messages tested are the ones an operator reads. The module itself runs once in a
child process, as Ansible runs it, with stand-in commands on PATH.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _sssd_status as sssd_status
from role_render import ROOT, render

TASKS = yaml.safe_load((ROOT / 'roles' / 'sssd' / 'tasks' / 'service.yml').read_text(encoding='utf-8'))
STATUS_TASK = next(task for task in TASKS if 'llmforge.cluster.sssd_status' in task)
MODULE = ROOT / 'plugins' / 'modules' / 'sssd_status.py'

ONLINE = 'Online status: Online\n\nActive servers:\nLDAP: ldap1.example.org\n'
OFFLINE = 'Online status: Offline\n\nActive servers:\nLDAP: not connected\n'
ENTRY = 'hpcadmins:*:5000:alice,bob'


class Host:
    """getent finds the group from its Nth call (0: never); sssctl says online from its Nth call (0: never)."""

    def __init__(self, group_found_on: int, online_on: int) -> None:
        self.group_found_on, self.online_on = group_found_on, online_on
        self.calls: list[str] = []

    def run(self, argv, timeout):
        self.calls.append(argv[0])
        count = self.calls.count(argv[0])
        if argv[0] == 'getent':
            found = self.group_found_on and count >= self.group_found_on
            return _proc.Completed(0 if found else 2, ENTRY + '\n' if found else '', '')
        online = self.online_on and count >= self.online_on
        return _proc.Completed(0, ONLINE if online else OFFLINE, '')

    def sleep(self, seconds):
        assert seconds == 3
        self.calls.append('sleep')


def probe(*, group_found_on: int, online_on: int, admin_group: bool) -> tuple[sssd_status.Status, list[str]]:
    """The module's reading with the tries the role passes."""
    assert STATUS_TASK['llmforge.cluster.sssd_status']['group_tries'] == (
        "{{ 11 if sssd_admin_group | length > 0 else 1 }}")
    host = Host(group_found_on, online_on)
    status = sssd_status.check('ldap', 'hpcadmins', group_tries=11 if admin_group else 1, run=host.run,
                               sleep=host.sleep)
    return status, host.calls


def checked(status: sssd_status.Status, **settings) -> dict:
    """The role's asserts after the module returned `status`: {'hosts': ...} when they pass, {'error': message}."""
    host = dict({'sssd_ldap_uri': ['ldaps://ldap1.example.org', 'ldaps://ldap2.example.org'],
                 'sssd_ldap_base_dn': 'dc=example,dc=org', 'sssd_admin_group': 'hpcadmins',
                 '__sssd_status': status._asdict()}, **settings)
    return render('sssd', 'sssd.service.conf.j2', {'hosts': {'gpu1': host}, 'groups': {}}, tasks='service.yml',
                  extra_vars={'_sssd_installed': True})


def test_a_directory_that_answers_at_once_costs_one_lookup_and_one_state_read():
    status, calls = probe(group_found_on=1, online_on=1, admin_group=True)
    assert calls == ['getent', 'sssctl']
    assert status.online and status.group_resolved and status.group_entry == ENTRY
    assert status.messages == ['sssctl domain-status --online ldap: Online status: Online Active servers: LDAP: '
                               'ldap1.example.org', f'getent group hpcadmins: {ENTRY}']
    assert 'hosts' in checked(status), checked(status)


def test_a_restarting_sssd_is_given_time_before_the_group_counts_as_missing():
    status, calls = probe(group_found_on=4, online_on=2, admin_group=True)
    assert calls == ['getent', 'sleep'] * 3 + ['getent', 'sssctl', 'sleep', 'sssctl']
    assert 'hosts' in checked(status)


def test_a_missing_admin_group_is_looked_up_eleven_times_then_named():
    status, calls = probe(group_found_on=0, online_on=1, admin_group=True)
    assert calls.count('getent') == 11 and calls[:21].count('sleep') == 10 and calls[21:] == ['sssctl']
    assert not status.group_resolved and status.group_entry == ''
    assert status.messages[1] == 'getent group hpcadmins: nothing after 11 tries'
    message = checked(status, sssd_ldap_group_search_base='ou=groups,dc=example,dc=org')['error']
    assert message.startswith('getent group hpcadmins (sssd_admin_group) finds nothing on gpu1 although SSSD '
                              'reaches the directory'), message
    assert 'ou=groups,dc=example,dc=org' in message and 'sssd_min_id (1000)' in message


def test_without_an_admin_group_one_lookup_of_a_name_nobody_needs_makes_sssd_connect():
    status, calls = probe(group_found_on=0, online_on=1, admin_group=False)
    assert calls == ['getent', 'sssctl']
    assert 'hosts' in checked(status, sssd_admin_group='')


def test_an_offline_directory_is_read_six_times_then_reported_with_what_sssctl_said():
    status, calls = probe(group_found_on=0, online_on=0, admin_group=False)
    assert calls == ['getent'] + ['sssctl', 'sleep'] * 5 + ['sssctl']
    assert not status.online
    message = checked(status, sssd_admin_group='')['error']
    assert message.startswith('SSSD on gpu1 is offline after 15 s: it cannot use ldaps://ldap1.example.org, '
                              'ldaps://ldap2.example.org (sssctl domain-status --online ldap: Online status: Offline'), message
    assert 'LDAP: not connected' in message
    for cause in ('certificate verify failed', 'Invalid credentials', '/var/log/sssd/sssd_ldap.log'):
        assert cause in message


@pytest.mark.parametrize('admin_group', ['hpcadmins', ''])
def test_offline_is_reported_before_a_missing_group(admin_group):
    """An unreachable directory finds no group either: the message names the connection, not the group."""
    status, _calls = probe(group_found_on=0, online_on=0, admin_group=bool(admin_group))
    assert checked(status, sssd_admin_group=admin_group)['error'].startswith('SSSD on gpu1 is offline')


def test_a_missing_or_hanging_command_counts_as_a_failed_try():
    def run(argv, timeout):
        raise _proc.CommandError(argv, _proc.MISSING if argv[0] == 'sssctl' else _proc.TIMEOUT, timeout)

    status = sssd_status.check('ldap', 'hpcadmins', group_tries=2, status_tries=2, run=run, sleep=lambda _s: None)
    assert not status.online and not status.group_resolved
    assert status.domain_status == 'sssctl not found'


@pytest.mark.parametrize('text', ['Online status: Offline', 'Online status: Online-ish', '', 'error: no such domain'])
def test_only_online_is_online(text):
    assert not sssd_status.is_online(text)


def test_the_module_reads_through_the_commands_on_path_and_changes_nothing(tmp_path):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for name, script in (('getent', f'echo "{ENTRY}"'), ('sssctl', f'printf "{ONLINE}"')):
        path = bin_dir / name
        path.write_text(f'#!/bin/sh\n{script}\n', encoding='utf-8')
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    args = tmp_path / 'args.json'
    args.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': {'domain': 'ldap', 'group': 'hpcadmins',
                                                        '_ansible_check_mode': True}}), encoding='utf-8')
    env = dict(os.environ, PATH=f'{bin_dir}:{os.environ["PATH"]}',
               PYTHONPATH=str(pathlib.Path(ROOT) / 'collections') + os.pathsep + os.environ.get('PYTHONPATH', ''))
    done = subprocess.run([sys.executable, str(MODULE), str(args)], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    result = json.loads(done.stdout)
    assert result['changed'] is False and result['online'] and result['group_entry'] == ENTRY, result
