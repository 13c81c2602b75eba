# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge.cluster.slurm_accounting run through Ansible against a sacctmgr stand-in replaying real database states.

The stand-in (tests/fixtures/slurm/sacctmgr/sacctmgr-shim) answers the four `show` commands from one fixture
directory and records every call. `fresh` is a new database, `applied` the same database after the module's commands
for the demo inventory ran on a real Slurm: run against `fresh` the module must run exactly those commands, run
again against `applied` it must run none.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from module_runner import run_module as run_ansible_module

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / 'tests' / 'fixtures' / 'slurm' / 'sacctmgr'
SHIM = FIXTURES / 'sacctmgr-shim'
DEMO = yaml.safe_load((REPO / 'inventories/demo/group_vars/all/accounts.yml').read_text())[
    'slurm_controller_accounting']
SHOWS = ['show qos', 'show account', 'show user', 'show assoc']


def run_module(tmp_path: pathlib.Path, state: str, spec: dict | None = None, check: bool = False,
               **env_vars: str) -> tuple[dict, list[str]]:
    log = tmp_path / f'calls-{state}'
    env = dict({'SACCTMGR_SHIM_STATE': str(FIXTURES / state), 'SACCTMGR_SHIM_LOG': str(log)}, **env_vars)
    args = dict({'cluster': 'demo', 'sacctmgr_path': str(SHIM), 'variable': 'slurm_controller_accounting'},
                **(DEMO if spec is None else spec))
    result = run_ansible_module('slurm_accounting', args, check=check, env=env)
    calls = log.read_text().splitlines() if log.exists() else []
    return result, calls


def changes_run(calls: list[str]) -> list[str]:
    return [call.removeprefix('--immediate ') for call in calls if call.startswith('--immediate ')]


def test_first_run_applies_the_demo_and_the_second_changes_nothing(tmp_path):
    result, calls = run_module(tmp_path, 'fresh')
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True
    assert [' '.join(call.split()[2:4]) for call in calls[:4]] == SHOWS
    ran = changes_run(calls)
    assert len(ran) == 13 and len(result['commands']) == 13
    assert ran[0] == 'modify qos where name=normal set Description=Default QoS MaxTRESPerUser=gres/gpu=8'
    assert ran[-1] == 'add user qostest Cluster=demo Account=team-b DefaultAccount=team-b'
    assert result['commands'][0] == (f"{SHIM} --immediate modify qos where name=normal set 'Description=Default QoS' "
                                     'MaxTRESPerUser=gres/gpu=8')
    # The users exist nowhere on this machine: slurmctld would refuse their jobs, and the module says so.
    assert set(result['unknown_users']) == {'alice', 'bob', 'carol', 'ctrtest', 'qostest'}
    assert any('users unknown on this host' in warning for warning in result.get('warnings', []))

    again, calls = run_module(tmp_path, 'applied')
    assert not again.get('failed'), again.get('msg')
    assert again['changed'] is False and again['commands'] == []
    assert changes_run(calls) == [] and len(calls) == 4


def test_check_mode_reports_the_commands_and_diff_without_running_them(tmp_path):
    result, calls = run_module(tmp_path, 'drifted', check=True, ANSIBLE_DIFF_ALWAYS='1')
    assert result['changed'] is True
    assert changes_run(calls) == []
    assert [change['name'] for change in result['changes']] == ['normal', 'debug', 'team-a', 'team-b', 'bob']
    assert [change['action'] for change in result['changes']] == ['modify'] * 5
    assert result['diff']['before'].startswith('qos normal: Priority=5 MaxTRESPerUser=cpu=64,gres/gpu=16\n')
    assert result['diff']['after'].startswith('qos normal: Priority=0 MaxTRESPerUser=cpu=64,gres/gpu=8\n')


def test_a_failing_command_is_named_with_sacctmgrs_error(tmp_path):
    spec = {'users': [{'name': 'bob', 'accounts': ['team-b', {'name': 'legacy', 'state': 'absent'}]}]}
    result, calls = run_module(tmp_path, 'drifted', spec, SACCTMGR_SHIM_FAIL='account=legacy')
    assert result['failed'] is True
    assert result['msg'] == (f'{SHIM} --immediate delete user where name=bob cluster=demo account=legacy failed (rc 1): '
                             'Error with request: You can not remove the default account of a user')
    # What ran before the failure is reported as changed.
    assert result['changed'] is True
    assert result['commands'] == [f'{SHIM} --immediate modify user where name=bob cluster=demo set DefaultAccount=team-b']
    assert changes_run(calls)[-1] == 'delete user where name=bob cluster=demo account=legacy'


def test_a_bad_declaration_fails_naming_the_path_before_sacctmgr_runs(tmp_path):
    spec = {'qos': [{'name': 'debug', 'limits': {'MaxWall': 1800}}]}
    result, calls = run_module(tmp_path, 'applied', spec)
    assert result['failed'] is True
    assert result['msg'].startswith('slurm_controller_accounting.qos[0].limits.MaxWall: 1800 is not a quoted time')
    assert calls == []


def test_an_unreadable_database_fails_naming_the_command(tmp_path):
    result = run_module(tmp_path, 'no-such-state')[0]
    assert result['failed'] is True
    assert result['msg'].startswith(f'reading the accounting database failed: {SHIM} --noheader --parsable2 show qos')
    assert 'no-such-state/qos.txt' in result['msg']


@pytest.mark.parametrize('timeout', [0, -5])
def test_timeout_must_be_positive(tmp_path, timeout):
    result = run_module(tmp_path, 'applied', {'timeout': timeout})[0]
    assert result['failed'] is True and 'timeout must be a positive number' in result['msg']
