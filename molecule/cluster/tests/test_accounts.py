# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm accounts, users and QoS of the demo inventory (group_vars/all/accounts.yml), enforced by slurm.conf.

The jobs here are submitted from the login node by bob, a directory user in team-b, and by noassoc, a local user
(the same uid on the login node and the controller) declared in no account. Over-limit jobs never start. The
molecule idempotence step converges a second time; test_applying_again_changes_nothing re-runs the accounts tasks
alone.
"""

from __future__ import annotations

import json

import pytest

from conftest import CONTROLLER, SUBMIT_HOST, login_as
from scenario_helpers import recap_of, run_playbook, said, slurm_knows_user, wait_for

CLUSTER = 'demo'
USER = 'bob'
STRANGER, STRANGER_UID = 'noassoc', 2903
ASSOC_FORMAT = 'Account,User,ParentName,Share,QOS,DefaultQOS,GrpTRES'


def rows(ctl, command: str) -> list[list[str]]:
    return [line.split('|') for line in ctl.check_output(command).splitlines() if line]


@pytest.fixture(scope='module')
def bob(hosts):
    if hosts[SUBMIT_HOST].run(f'getent passwd {USER}').rc != 0:
        pytest.skip(f'no directory user {USER} in this scenario')
    assert slurm_knows_user(hosts[CONTROLLER], USER), f'slurmctld never resolved {USER} to its uid'
    return login_as(hosts, USER)


@pytest.fixture(scope='module')
def stranger(hosts, ctl):
    for host in dict.fromkeys((ctl, hosts[SUBMIT_HOST])):
        host.run(f'id {STRANGER} || useradd --create-home --uid {STRANGER_UID} {STRANGER}')
    return login_as(hosts, STRANGER)


def submit(session, *args: str):
    return session.run(' '.join(['sbatch', '--parsable', '-o', '/dev/null', *args]))


def job_field(ctl, job_id: str, field: str) -> str:
    return ctl.run(f'squeue -h -j {job_id} -o "{field}"').stdout.strip()


def test_slurm_conf_enforces_associations_limits_and_qos(ctl):
    config = ctl.check_output('scontrol show config')
    assert 'AccountingStorageEnforce = associations,limits,qos,safe' in config
    assert 'PriorityType            = priority/multifactor' in config


def test_sacctmgr_shows_the_declared_qos(ctl):
    qos = {name: rest for name, *rest in rows(ctl, 'sacctmgr -n -P show qos format=Name,Priority,MaxTRESPerUser,MaxWall')}
    assert qos['normal'] == ['0', 'gres/gpu=8', '']
    assert qos['debug'] == ['1000', 'gres/gpu=2', '00:30:00']
    assert qos['ops'] == ['100', '', '']


def test_sacctmgr_shows_the_declared_accounts_and_users(ctl):
    assocs = {(account, user): rest for account, user, *rest in
              rows(ctl, f'sacctmgr -n -P show assoc where cluster={CLUSTER} WOPLimits format={ASSOC_FORMAT}')}
    for team in ('team-a', 'team-b'):
        assert assocs[(team, '')] == ['root', '50', 'debug,normal', 'normal', 'gres/gpu=16']
    assert assocs[('admin', '')] == ['root', '10', 'debug,normal,ops', 'normal', '']
    members = {user: account for (account, user) in assocs if user}
    assert members == {'root': 'root', 'alice': 'team-a', 'bob': 'team-b', 'carol': 'admin', 'ctrtest': 'team-a',
                       'qostest': 'team-b'}
    assert assocs[('root', 'root')][2:4] == ['normal,ops', 'ops']
    users = {user: rest for user, *rest in
             rows(ctl, f'sacctmgr -n -P show user where cluster={CLUSTER} format=User,DefaultAccount,AdminLevel')}
    assert users['bob'] == ['team-b', 'None'] and users['carol'] == ['admin', 'Operator']


def test_a_job_over_its_qos_gpu_limit_stays_pending_with_the_qos_reason(ctl, bob):
    # normal allows 8 GPUs per user; two whole nodes are 16.
    result = submit(bob, '--qos=normal', '-N2', '--gres=gpu:8', '-t', '5', '--wrap', '"sleep 60"')
    assert result.rc == 0, result.stderr
    job = result.stdout.strip()
    try:
        state = wait_for(lambda: job_field(ctl, job, '%T %r') == 'PENDING QOSMaxGRESPerUser', timeout=120)
        assert state, f"{job_field(ctl, job, '%T %r')}; {ctl.run('squeue; sinfo').stdout}"
        # It stays so: limits do not lapse.
        assert job_field(ctl, job, '%T %r %q %a') == 'PENDING QOSMaxGRESPerUser normal team-b'
    finally:
        ctl.run(f'scancel {job}')


def test_a_user_without_an_association_is_refused_at_submission(stranger):
    result = submit(stranger, '--wrap', 'true')
    assert result.rc != 0
    assert 'Invalid account or account/partition combination specified' in result.stderr


def test_the_debug_qos_goes_first(ctl, bob):
    # Held back by a begin time an hour away, both wait; the one in debug ranks first.
    jobs = {}
    try:
        for qos in ('debug', 'normal'):
            result = submit(bob, f'--qos={qos}', '--begin=now+3600', '-t', '10', '--wrap', 'true')
            assert result.rc == 0, result.stderr
            jobs[qos] = result.stdout.strip()
        priority = {qos: int(job_field(ctl, job, '%Q')) for qos, job in jobs.items()}
        assert priority['debug'] > priority['normal'], priority
    finally:
        ctl.run(f"scancel {' '.join(jobs.values())}")


def test_debug_refuses_nothing_but_holds_jobs_over_its_wall_time(ctl, bob):
    result = submit(bob, '--qos=debug', '-t', '60', '--wrap', 'true')
    assert result.rc == 0, result.stderr
    job = result.stdout.strip()
    try:
        assert wait_for(lambda: job_field(ctl, job, '%r') == 'QOSMaxWallDurationPerJobLimit', timeout=120), \
            job_field(ctl, job, '%T %r')
    finally:
        ctl.run(f'scancel {job}')


def test_root_runs_in_ops_on_every_gpu(ctl):
    # validate.yml and the repair lifecycle's burn-in jobs run as root: ops has no per-user GPU limit.
    job = ctl.check_output('sbatch --parsable -N2 --gres=gpu:8 -t 5 -o /dev/null --wrap true').strip()

    def finished():
        out = ctl.run(f'sacct -X -n -P -j {job} -o State,QOS,Account').stdout.strip()
        return out if out.startswith(('COMPLETED', 'FAILED', 'CANCELLED')) else ''

    assert wait_for(finished, timeout=120) == 'COMPLETED|ops|root'


def test_applying_again_changes_nothing():
    result = run_playbook('--tags', 'slurm_controller_accounts', '--limit', CONTROLLER,
                          playbook='llmforge.cluster.controller')
    assert result.returncode == 0, said(result)[-3000:]
    assert recap_of(CONTROLLER)(result)['changed'] == 0


def test_a_bad_declaration_is_refused_naming_its_path():
    bad = {'slurm_controller_accounting': {'qos': [{'name': 'debug', 'limits': {'MaxWall': 1800}}]}}
    result = run_playbook('-e', json.dumps(bad), '--tags', 'slurm_controller_preflight', '--limit', CONTROLLER,
                          playbook='llmforge.cluster.controller')
    assert result.returncode != 0
    assert 'slurm_controller_accounting.qos[0].limits.MaxWall: 1800 is not a quoted time' in said(result)
