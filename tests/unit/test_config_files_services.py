# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""config_files' services: a role's units enabled, started, stopped or masked in the same step as its files, with
one `systemctl show` for all of them and a `systemctl` call only for what differs (a stand-in systemctl on PATH
records every call); a daemon-reload only after a unit's file changed; check mode reads and runs nothing else; bad
input refused before any file is written."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _units
from module_runner import run_module

FAKE = pathlib.Path(__file__).with_name('fake_systemctl.py')


@pytest.fixture
def systemd(tmp_path):
    """Units in a JSON file and a systemctl on PATH that reads and changes them; `calls()` the verbs run since."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'systemctl').write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n', encoding='utf-8')
    os.chmod(bin_dir / 'systemctl', 0o755)
    state, log = tmp_path / 'units.json', tmp_path / 'calls.log'
    log.write_text('', encoding='utf-8')

    class Systemd:
        env = {'PATH': f'{bin_dir}:{os.environ["PATH"]}', 'FAKE_SYSTEMCTL_STATE': str(state),
               'FAKE_SYSTEMCTL_LOG': str(log)}

        @staticmethod
        def units(value=None):
            if value is not None:
                state.write_text(json.dumps(value), encoding='utf-8')
            return json.loads(state.read_text(encoding='utf-8'))

        @staticmethod
        def calls():
            lines = log.read_text(encoding='utf-8').splitlines()
            log.write_text('', encoding='utf-8')
            return [' '.join(word for word in line.split() if not word.startswith('--')) for line in lines]

    return Systemd


def unit(file_state='disabled', active='inactive', **extra):
    return dict({'LoadState': 'loaded', 'UnitFileState': file_state, 'ActiveState': active}, **extra)


SERVICES = [{'name': 'munge', 'enabled': True, 'state': 'started'},
            {'name': 'node-exporter.timer', 'enabled': True, 'state': 'started'},
            {'name': 'systemd-logind', 'masked': True, 'state': 'stopped'}]


def test_one_show_then_each_verb_once_for_what_differs_and_a_second_run_only_reads(tmp_path, systemd):
    systemd.units({'munge.service': unit(), 'node-exporter.timer': unit('enabled'),
                   'systemd-logind.service': unit('static', 'active')})
    files = [{'path': str(tmp_path / 'munge.conf'), 'content': 'x\n'}]
    result = run_module('config_files', {'files': files, 'services': SERVICES}, env=systemd.env)
    assert result['changed'] is True, result
    assert result['changed_services'] == ['munge.service', 'node-exporter.timer', 'systemd-logind.service']
    assert result['started_services'] == ['munge.service', 'node-exporter.timer']
    assert systemd.calls() == ['show munge.service node-exporter.timer systemd-logind.service',
                               'enable munge.service', 'mask systemd-logind.service',
                               'start munge.service node-exporter.timer', 'stop systemd-logind.service']
    units = systemd.units()
    assert units['munge.service']['ActiveState'] == 'active' and units['munge.service']['UnitFileState'] == 'enabled'
    assert units['systemd-logind.service']['UnitFileState'] == 'masked'
    again = run_module('config_files', {'files': files, 'services': SERVICES}, env=systemd.env)
    assert again['changed'] is False and again['changed_services'] == [] and again['changed_files'] == []
    assert again['started_services'] == []
    assert systemd.calls() == ['show munge.service node-exporter.timer systemd-logind.service']


def test_a_unit_whose_file_changed_on_disk_reloads_systemd_before_the_units_are_read_again(systemd):
    # A drop-in that systemd has not read yet: systemctl says so (NeedDaemonReload), whoever wrote it.
    systemd.units({'munge.service': unit('enabled', 'active', NeedDaemonReload='yes')})
    result = run_module('config_files', {'services': SERVICES[:1]}, env=systemd.env)
    assert result['changed'] is False, result
    assert systemd.calls() == ['show munge.service', 'daemon-reload', 'show munge.service']
    assert systemd.units()['munge.service']['NeedDaemonReload'] == 'no'


def test_check_mode_reports_the_drift_runs_only_show_and_counts_an_unknown_unit_as_to_start(systemd):
    systemd.units({'munge.service': unit('enabled', 'failed', NeedDaemonReload='yes')})
    services = SERVICES[:1] + [{'name': 'slurmd', 'enabled': True, 'state': 'started'}]
    check = run_module('config_files', {'services': services}, check=True, env=systemd.env)
    assert check['changed'] is True and check['changed_services'] == ['munge.service', 'slurmd.service'], check
    assert check['started_services'] == ['munge.service', 'slurmd.service']
    assert systemd.calls() == ['show munge.service slurmd.service']
    assert systemd.units()['munge.service']['ActiveState'] == 'failed'


def test_a_unit_systemd_does_not_know_fails_naming_it_after_the_files_are_written(tmp_path, systemd):
    systemd.units({})
    result = run_module('config_files', {'files': [{'path': str(tmp_path / 'a'), 'content': 'a\n'}],
                                         'services': [{'name': 'slurmd', 'state': 'started'}]}, env=systemd.env)
    assert result.get('failed') is True
    assert result['msg'] == 'services[0].name: systemd has no unit slurmd.service on this host (LoadState not-found)'
    assert result['changed_files'] == [str(tmp_path / 'a')]


def test_a_failed_start_fails_the_task_naming_the_command_and_systemds_words(systemd):
    systemd.units({'munge.service': unit('enabled', fail_start=True)})
    result = run_module('config_files', {'services': SERVICES[:1]}, env=systemd.env)
    assert result.get('failed') is True
    assert result['msg'].startswith("services: 'systemctl start -- munge.service' failed (rc 1): Job for munge.service")


@pytest.mark.parametrize(('services', 'message'), [
    ([{'name': 'munge', 'masked': True, 'enabled': True}], 'services[0]: munge.service cannot be masked and enabled'),
    ([{'name': 'munge', 'masked': True, 'state': 'started'}], 'services[0]: munge.service cannot be masked and started'),
    ([{'name': 'munge'}], 'services[0]: munge.service needs one of enabled, state, masked'),
    ([{'name': 'munge', 'state': 'started'}, {'name': 'munge.service', 'enabled': True}],
     'services[1].name: munge.service is already services[0]'),
    ([{'name': '--now', 'state': 'started'}], "services[0].name: '--now' is not a systemd unit name"),
    ([{'name': 'a b', 'state': 'started'}], "services[0].name: 'a b' is not a systemd unit name"),
])
def test_bad_services_are_refused_before_any_file_is_written(tmp_path, systemd, services, message):
    systemd.units({})
    path = tmp_path / 'a.conf'
    result = run_module('config_files', {'files': [{'path': str(path), 'content': 'a\n'}], 'services': services},
                        env=systemd.env)
    assert result.get('failed') is True and result['msg'] == message
    assert not path.exists() and systemd.calls() == []


# The planning itself, on what `systemctl show` prints.
SHOW = """Id=munge.service
LoadState=loaded
UnitFileState=masked
ActiveState=inactive
NeedDaemonReload=no

Id=slurmd.service
LoadState=loaded
UnitFileState=enabled
ActiveState=active
NeedDaemonReload=no
"""


def test_an_unmasked_unit_is_enabled_again_and_a_running_one_asked_stopped_is_stopped():
    states = _units.parse_show(SHOW, ['munge.service', 'slurmd.service'])
    wanted = _units.check_wanted([{'name': 'munge', 'masked': False, 'enabled': True, 'state': 'started'},
                                  {'name': 'slurmd', 'enabled': False, 'state': 'stopped'}])
    steps, changed = _units.plan(wanted, states, check_mode=False)
    assert steps == [('unmask', ['munge.service']), ('enable', ['munge.service']), ('disable', ['slurmd.service']),
                     ('start', ['munge.service']), ('stop', ['slurmd.service'])]
    assert changed == ['munge.service', 'slurmd.service']


def test_static_and_activating_units_need_nothing_and_show_output_must_match_the_units_asked():
    states = {'a.service': {'LoadState': 'loaded', 'UnitFileState': 'static', 'ActiveState': 'activating'}}
    assert _units.plan(_units.check_wanted([{'name': 'a', 'enabled': True, 'state': 'started'}]), states,
                       check_mode=False) == ([], [])
    with pytest.raises(_units.UnitError, match=r'systemctl show: 2 blocks for 1 units \(munge.service\)'):
        _units.parse_show(SHOW, ['munge.service'])


def test_a_unit_systemd_does_not_know_is_already_stopped_and_disabled():
    # The pruning timer turned off on a host that never had it: nothing to do, no error.
    states = {'llmforge-checkpoint-prune.timer': {'LoadState': 'not-found', 'UnitFileState': '', 'ActiveState': 'inactive'}}
    wanted = _units.check_wanted([{'name': 'llmforge-checkpoint-prune.timer', 'enabled': False, 'state': 'stopped'}])
    assert _units.plan(wanted, states, check_mode=False) == ([], [])


def test_a_unit_file_or_drop_in_among_the_changed_paths_needs_a_reload_other_files_do_not():
    states = {'a.service': {'NeedDaemonReload': 'no'}}
    assert _units.needs_reload(states, ['/etc/systemd/system/slurmd.service.d/llmforge.conf'])
    assert _units.needs_reload(states, ['/usr/lib/systemd/system/llmforge-firewall.service'])
    assert not _units.needs_reload(states, ['/etc/default/slurmd', '/etc/systemd/systemx'])
