# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm accounts, users and QoS: validation of the declared state, sacctmgr's output, the commands between."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.llmforge.cluster.plugins.filter.slurm_accounting import slurm_accounting_problems
from ansible_collections.llmforge.cluster.plugins.module_utils import _sacctmgr as acct

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / 'tests' / 'fixtures' / 'slurm' / 'sacctmgr'
VAR = 'slurm_controller_accounting'


def declared(path: str) -> dict:
    return yaml.safe_load((REPO / path).read_text())[VAR]


DEMO = declared('inventories/demo/group_vars/all/accounts.yml')
EXAMPLE = declared('inventories/example/group_vars/all/accounts.yml')


def state(name: str) -> dict:
    outputs = {key: (FIXTURES / name / f'{key}.txt').read_text() for key in ('qos', 'accounts', 'users', 'assocs')}
    return acct.current_state(outputs, 'demo')


def commands(spec: dict, current: str) -> list[str]:
    desired = acct.validate(spec, VAR)
    return [' '.join(change['args']) for change in acct.plan(desired, state(current), 'demo', VAR)]


def problems(spec) -> list[str]:
    with pytest.raises(acct.AccountingError) as err:
        acct.validate(spec, VAR)
    return err.value.problems


# ------------------------------------------------------------------------------------------------ value syntax

@pytest.mark.parametrize('text, minutes', [
    ('30', 30), ('00:30:00', 30), ('1:30', 2), ('01:30:00', 90), ('2-00:00:00', 2880), ('1-12', 2160),
    ('1-00:30', 1470), ('7-00:00:00', 10080), ('UNLIMITED', -1), ('-1', -1), (-1, -1),
])
def test_slurm_times_are_minutes(text, minutes):
    assert acct.parse_time(text) == minutes


@pytest.mark.parametrize('minutes, text', [(30, '00:30:00'), (90, '01:30:00'), (1440, '1-00:00:00'), (-1, '-1')])
def test_times_are_written_as_sacctmgr_prints_them(minutes, text):
    assert acct.format_time(minutes) == text


@pytest.mark.parametrize('value', [1800, '30 minutes', '1:2:3:4', '', True])
def test_bad_times_are_refused(value):
    with pytest.raises(ValueError):
        acct.parse_time(value)


@pytest.mark.parametrize('value, parsed', [
    ('gres/gpu=8', {'gres/gpu': 8}),
    ('cpu=64,gres/gpu=2,mem=100G', {'cpu': 64, 'gres/gpu': 2, 'mem': 102400}),
    ('mem=2G,gres/gpu=2048', {'mem': 2048, 'gres/gpu': 2048}),
    ('gres/gpu:h100=4,license/matlab=1', {'gres/gpu:h100': 4, 'license/matlab': 1}),
    ({'gres/gpu': 16, 'cpu': -1}, {'gres/gpu': 16, 'cpu': -1}),
    ('node=2K', {'node': 2048}),
])
def test_tres_lists(value, parsed):
    assert acct.parse_tres(value) == parsed


@pytest.mark.parametrize('value', ['gpu=8', 'gres/gpu', 'gres/gpu=eight', 'gres/gpu=1.5', '', ['gres/gpu=8']])
def test_bad_tres_lists_are_refused(value):
    with pytest.raises(ValueError):
        acct.parse_tres(value)


# ------------------------------------------------------------------------------------------------ validation

def test_the_demo_and_example_declarations_are_valid():
    assert slurm_accounting_problems(DEMO, VAR) == []
    assert slurm_accounting_problems(EXAMPLE, VAR) == []
    assert slurm_accounting_problems({}, VAR) == [] and slurm_accounting_problems(None, VAR) == []


def test_problems_name_the_variable_path():
    found = problems({'accounts': [{'name': 'ok'}, {'name': 'ok2'}, {'name': 'Team-A', 'colour': 'red'}]})
    assert found == [
        f'{VAR}.accounts[2].colour: unknown key (allowed: name, parent, description, organization, fairshare, '
        'qos, default_qos, limits, state)',
        f"{VAR}.accounts[2].name: 'Team-A' is not a Slurm name (lower-case letters, digits, '_', '-', '.'; "
        'sacctmgr keeps names in lower case)',
    ]


@pytest.mark.parametrize('spec, expected', [
    ({'qos': [{'name': 'q', 'limits': {'MaxWall': 1800}}]},
     f'{VAR}.qos[0].limits.MaxWall: 1800 is not a quoted time'),
    ({'qos': [{'name': 'q', 'limits': {'MaxTRESPerUser': 'gpu=8'}}]},
     f"{VAR}.qos[0].limits.MaxTRESPerUser: 'gpu' is not a TRES name"),
    ({'qos': [{'name': 'q', 'limits': {'MaxJobs': 3}}]}, f'{VAR}.qos[0].limits.MaxJobs: unknown limit'),
    ({'accounts': [{'name': 'a', 'limits': {'MaxTRESPerUser': 'gres/gpu=8'}}]},
     f'{VAR}.accounts[0].limits.MaxTRESPerUser: unknown limit'),
    ({'qos': [{'name': 'q', 'flags': ['DenyOnLimits']}]}, f"{VAR}.qos[0].flags[0]: 'DenyOnLimits' is not a QoS flag"),
    ({'qos': [{'name': 'q', 'priority': -3}]}, f'{VAR}.qos[0].priority: -3 must be a whole number of at least 0'),
    ({'qos': [{'name': 'q'}, {'name': 'q'}]}, f"{VAR}.qos[1].name: 'q' is declared twice (also {VAR}.qos[0])"),
    ({'qos': [{'description': 'no name'}]}, f'{VAR}.qos[0].name: required'),
    ({'qos': [{'name': 'q', 'state': 'gone'}]}, f"{VAR}.qos[0].state: 'gone' must be present or absent"),
    ({'qos': [{'name': 'q', 'description': 'say "hi"'}]}, f'{VAR}.qos[0].description:'),
    ({'accounts': [{'name': 'a', 'qos': ['debug', 'high']}]},
     f'{VAR}.accounts[0].default_qos: required with several QoS'),
    ({'accounts': [{'name': 'a', 'qos': ['normal'], 'default_qos': 'debug'}]},
     f"{VAR}.accounts[0].default_qos: 'debug' is not in {VAR}.accounts[0].qos"),
    ({'accounts': [{'name': 'a', 'parent': 'b'}, {'name': 'b', 'parent': 'a'}]},
     f'{VAR}.accounts[0].parent: accounts form a loop: a -> b -> a'),
    ({'accounts': [{'name': 'root', 'state': 'absent'}]}, f'{VAR}.accounts[0]: the root account'),
    ({'accounts': [{'name': 'a', 'fairshare': 'half'}]}, f"{VAR}.accounts[0].fairshare: 'half' must be a whole"),
    ({'users': [{'name': 'alice'}]}, f'{VAR}.users[0].accounts: required'),
    ({'users': [{'name': 'alice', 'accounts': ['a'], 'default_account': 'b'}]},
     f"{VAR}.users[0].default_account: 'b' is not one of the accounts the user is a member of (a)"),
    ({'users': [{'name': 'alice', 'accounts': [{'name': 'a', 'state': 'absent'}]}]},
     f'{VAR}.users[0].accounts: a present user needs at least one account'),
    ({'users': [{'name': 'alice', 'accounts': 'a'}]}, f"{VAR}.users[0].accounts: must be a list, got 'a'"),
    ({'users': [{'name': 'alice', 'accounts': ['a'], 'admin_level': 'boss'}]},
     f"{VAR}.users[0].admin_level: 'boss' must be one of None, Operator, Administrator"),
    ({'users': [{'name': 'root', 'state': 'absent'}]}, f'{VAR}.users[0].state: the root user cannot be removed'),
    ({'accounts': [{'name': 'old', 'state': 'absent'}], 'users': [{'name': 'alice', 'accounts': ['old']}]},
     f"{VAR}.users[0].accounts[0].name: 'old' is an account marked absent"),
    ({'qos': [{'name': 'old', 'state': 'absent'}], 'accounts': [{'name': 'a', 'qos': ['old']}]},
     f"{VAR}.accounts[0]: uses the QoS 'old', which {VAR}.qos marks absent"),
    ({'teams': []}, f'{VAR}.teams: unknown key (allowed: qos, accounts, users)'),
    ([], f'{VAR}: must be a mapping'),
])
def test_each_problem_is_named(spec, expected):
    found = problems(spec)
    assert any(problem.startswith(expected) for problem in found), found


def test_limit_names_are_matched_without_case_and_by_alias():
    limits = {'maxtrespu': 'gres/gpu=8', 'MaxWallDurationPerJob': '1:00:00', 'maxjobsperuser': 2}
    desired = acct.validate({'qos': [{'name': 'q', 'limits': limits}]}, VAR)
    assert desired['qos']['q']['limits'] == {'MaxTRESPerUser': {'gres/gpu': 8}, 'MaxWall': 60, 'MaxJobsPerUser': 2}


def test_a_membership_takes_the_users_settings_under_its_own():
    desired = acct.validate({'users': [{'name': 'bob', 'fairshare': 5, 'limits': {'MaxJobs': 4},
                                        'accounts': ['a', {'name': 'b', 'fairshare': 1, 'limits': {'MaxWall': '60'}}]}]},
                            VAR)
    bob = desired['users']['bob']
    assert bob['default_account'] == 'a'
    assert bob['memberships']['a']['fairshare'] == 5 and bob['memberships']['a']['limits'] == {'MaxJobs': 4}
    assert bob['memberships']['b']['fairshare'] == 1
    assert bob['memberships']['b']['limits'] == {'MaxJobs': 4, 'MaxWall': 60}


# ------------------------------------------------------------------------------------------- sacctmgr output

def test_fresh_database_holds_slurms_own_root_and_normal():
    fresh = state('fresh')
    assert fresh['qos'] == {'normal': {'description': 'Normal QOS default', 'priority': 0, 'flags': frozenset(),
                                       'limits': {key: ({} if kind == acct.TRES else -1)
                                                  for key, kind in acct.QOS_LIMITS.items()}}}
    assert fresh['records'] == {'root': {'description': 'default root account', 'organization': 'root'}}
    assert fresh['users'] == {'root': {'default_account': 'root', 'admin_level': 'Administrator'}}
    assert fresh['accounts']['root']['qos'] == frozenset({'normal'}) and fresh['accounts']['root']['parent'] is None
    # WOPLimits: root's user association shows no QoS of its own.
    assert fresh['memberships'] == {('root', 'root'): {'fairshare': 1, 'qos': frozenset(), 'default_qos': None,
                                                       'limits': fresh['memberships'][('root', 'root')]['limits']}}


def test_drifted_database_values():
    drifted = state('drifted')
    normal, legacy = drifted['qos']['normal'], drifted['qos']['legacy']
    assert normal['priority'] == 5 and normal['flags'] == frozenset({'DenyOnLimit'})
    assert normal['limits']['MaxTRESPerUser'] == {'cpu': 64, 'gres/gpu': 16}
    assert drifted['qos']['debug']['limits']['MaxWall'] == 1440
    assert legacy['limits']['GrpTRES'] == {'gres/gpu': 4, 'mem': 524288}
    assert legacy['limits']['GrpWall'] == 90 and legacy['limits']['MaxJobsPerUser'] == 3
    assert drifted['accounts']['legacy']['parent'] == 'team-a'
    assert drifted['accounts']['legacy']['fairshare'] == 'parent'
    assert drifted['accounts']['team-a']['limits']['MaxWall'] == 10080
    alice = drifted['memberships'][('alice', 'team-a')]
    assert alice['qos'] == frozenset({'debug'}) and alice['default_qos'] == 'debug' and alice['limits']['MaxJobs'] == 4
    # dave's association limited to partition gpu is not managed here.
    assert [key for key in drifted['memberships'] if key[0] == 'dave'] == [('dave', 'legacy')]
    assert drifted['users']['bob']['default_account'] == 'legacy'
    assert drifted['records']['team-b']['description'] == 'team b (old)'


def test_other_clusters_associations_are_ignored():
    text = 'demo|root||||1|normal|' + '|' * 14 + '\nother|team-x||||1||' + '|' * 14 + '\n'
    assert list(acct.parse_assocs(text, 'demo')['accounts']) == ['root']


def test_output_with_other_columns_is_refused_naming_the_line():
    with pytest.raises(acct.OutputError, match=r'line 1 of `sacctmgr show qos` has 3 fields'):
        acct.parse_qos('normal|Normal QOS default|0\n')
    with pytest.raises(acct.OutputError, match='priority'):
        acct.parse_qos('normal|x|high' + '|' * 19 + '\n')


def test_show_commands_read_own_association_values_of_one_cluster():
    show = acct.show_commands('demo')
    assert show['assocs'][:7] == ['--noheader', '--parsable2', 'show', 'assoc', 'where', 'cluster=demo', 'WOPLimits']
    assert show['qos'][-1] == 'format=' + ','.join(acct.QOS_FIELDS)
    assert 'format=Name,Description,Priority,Flags,GrpJobs,' in show['qos'][-1]


# ------------------------------------------------------------------------------------------------------ plan

# What the module ran on the fresh database of the real Slurm the fixtures come from; `applied` is the result.
DEMO_COMMANDS = [
    "modify qos where name=normal set Description=Default QoS MaxTRESPerUser=gres/gpu=8",
    "add qos debug Description=Short debug jobs Priority=1000 MaxTRESPerUser=gres/gpu=2 MaxWall=00:30:00",
    "add qos ops Description=Operators and acceptance tests Priority=100",
    "add account team-a Cluster=demo Description=Team A Organization=demo Fairshare=50 QOS=debug,normal "
    "DefaultQOS=normal GrpTRES=gres/gpu=16",
    "add account team-b Cluster=demo Description=Team B Organization=demo Fairshare=50 QOS=debug,normal "
    "DefaultQOS=normal GrpTRES=gres/gpu=16",
    "add account admin Cluster=demo Description=Cluster administrators Organization=demo Fairshare=10 "
    "QOS=debug,normal,ops DefaultQOS=normal",
    "modify user where name=root cluster=demo account=root set QOS=normal,ops DefaultQOS=ops",
    "add user alice Cluster=demo Account=team-a DefaultAccount=team-a",
    "add user bob Cluster=demo Account=team-b DefaultAccount=team-b",
    "add user carol Cluster=demo Account=admin DefaultAccount=admin",
    "modify user where name=carol set AdminLevel=Operator",
    "add user ctrtest Cluster=demo Account=team-a DefaultAccount=team-a",
    "add user qostest Cluster=demo Account=team-b DefaultAccount=team-b",
]


def test_demo_on_a_fresh_database():
    assert commands(DEMO, 'fresh') == DEMO_COMMANDS


def test_demo_applied_twice_changes_nothing():
    assert commands(DEMO, 'applied') == []


def test_drift_is_brought_back_and_what_is_not_declared_is_left_alone():
    # normal keeps DenyOnLimit and cpu=64 (not declared); legacy, dave and alice's own settings are not declared.
    assert commands(DEMO, 'drifted') == [
        'modify qos where name=normal set Priority=0 MaxTRESPerUser=gres/gpu=8',
        'modify qos where name=debug set MaxWall=00:30:00',
        'modify account where name=team-a cluster=demo set Fairshare=50',
        'modify account where name=team-b set Description=Team B',
        'modify user where name=bob cluster=demo set DefaultAccount=team-b',
    ]


def test_only_what_is_marked_absent_is_removed_members_before_accounts_before_qos():
    spec = {'qos': [{'name': 'legacy', 'state': 'absent'}], 'accounts': [{'name': 'legacy', 'state': 'absent'}],
            'users': [{'name': 'dave', 'state': 'absent'},
                      {'name': 'bob', 'accounts': ['team-b', {'name': 'legacy', 'state': 'absent'}]}]}
    assert commands(spec, 'drifted') == [
        # bob charges legacy by default: Slurm removes no user's default account, so the default moves first.
        'modify user where name=bob cluster=demo set DefaultAccount=team-b',
        'delete user where name=dave cluster=demo',
        'delete user where name=bob cluster=demo account=legacy',
        'delete account where name=legacy cluster=demo',
        'delete qos where name=legacy',
    ]
    # Already gone: nothing to do.
    assert commands(spec, 'applied') == []


def test_cleared_and_changed_limits_name_only_what_changes():
    spec = {'qos': [{'name': 'normal', 'flags': [], 'limits': {'MaxTRESPerUser': {'cpu': -1, 'gres/gpu': 16}}},
                    {'name': 'legacy', 'limits': {'GrpTRES': 'mem=512G,gres/gpu=8', 'GrpWall': -1}}],
            'users': [{'name': 'alice', 'accounts': [{'name': 'team-a', 'qos': ['debug', 'normal'],
                                                      'default_qos': 'normal', 'limits': {'MaxJobs': -1}}]}]}
    assert commands(spec, 'drifted') == [
        'modify qos where name=normal set Flags=-1 MaxTRESPerUser=cpu=-1',
        'modify qos where name=legacy set GrpTRES=gres/gpu=8 GrpWall=-1',
        'modify user where name=alice cluster=demo account=team-a set QOS=debug,normal DefaultQOS=normal MaxJobs=-1',
    ]


def test_new_accounts_come_after_their_parents_and_new_users_start_with_their_default():
    spec = {'accounts': [{'name': 'sub', 'parent': 'top', 'fairshare': 'parent'}, {'name': 'top'}],
            'users': [{'name': 'erin', 'accounts': ['team-a', {'name': 'sub', 'limits': {'MaxWall': '2-00:00:00'}}],
                       'default_account': 'sub', 'admin_level': 'operator'},
                      {'name': 'bob', 'accounts': ['team-b', 'legacy', 'sub']}]}
    assert commands(spec, 'drifted') == [
        'add account top Cluster=demo',
        'add account sub Cluster=demo Parent=top Fairshare=parent',
        'add user erin Cluster=demo Account=sub DefaultAccount=sub MaxWall=2-00:00:00',
        'add user erin Cluster=demo Account=team-a',
        'modify user where name=erin set AdminLevel=Operator',
        'add user bob Cluster=demo Account=sub',
        'modify user where name=bob cluster=demo set DefaultAccount=team-b',
    ]


def test_moving_an_account_and_changing_its_record():
    spec = {'accounts': [{'name': 'legacy', 'parent': 'root', 'description': 'Old projects', 'organization': 'demo'}]}
    assert commands(spec, 'drifted') == [
        'modify account where name=legacy set Description=Old projects Organization=demo',
        'modify account where name=legacy cluster=demo set Parent=root',
    ]


def test_text_is_compared_as_slurm_stores_it():
    spec = {'qos': [{'name': 'debug', 'description': 'SHORT Debug Jobs'}],
            'accounts': [{'name': 'team-a', 'description': 'Team A', 'organization': 'DEMO'}]}
    assert commands(spec, 'applied') == []


def test_references_to_nothing_are_refused_before_any_command():
    spec = {'accounts': [{'name': 'x', 'parent': 'nowhere', 'qos': ['premium']}],
            'users': [{'name': 'erin', 'accounts': ['lab'], 'default_qos': 'gold'}]}
    with pytest.raises(acct.AccountingError) as err:
        commands(spec, 'applied')
    assert err.value.problems == [
        f"{VAR}.users[0].accounts[0]: the account 'lab' is neither declared in {VAR}.accounts nor in the "
        'accounting database',
        f"{VAR}.accounts[0]: the QoS 'premium' is neither declared in {VAR}.qos nor in the accounting database",
        f"{VAR}.users[0].accounts[0]: the QoS 'gold' is neither declared in {VAR}.qos nor in the accounting database",
        f"{VAR}.accounts[0].parent: the account 'nowhere' is neither declared in {VAR}.accounts nor in the "
        'accounting database',
    ]


def test_diff_shows_each_change_before_and_after():
    desired = acct.validate(DEMO, VAR)
    changes = acct.plan(desired, state('drifted'), 'demo', VAR)
    diff = acct.diff(changes)
    assert diff['before'].splitlines()[:3] == ['qos normal: Priority=5 MaxTRESPerUser=cpu=64,gres/gpu=16',
                                               'qos debug: MaxWall=1-00:00:00', 'account team-a: Fairshare=10']
    assert diff['after'].splitlines()[:3] == ['qos normal: Priority=0 MaxTRESPerUser=cpu=64,gres/gpu=8',
                                              'qos debug: MaxWall=00:30:00', 'account team-a: Fairshare=50']
    assert acct.command_text('sacctmgr', changes[3]) == \
        "sacctmgr --immediate modify account where name=team-b set 'Description=Team B'"


# ------------------------------------------------------------------------------------------------ hostile numbers

@pytest.mark.parametrize('value', ['\u0663\u0660', '1\u00b2', '9' * 5000, '1-' + '9' * 5000, '9' * 5000 + ':00'],
                         ids=['arabic-indic', 'superscript', '5000-digits', 'days-5000-digits', 'minutes-5000-digits'])
def test_times_of_hostile_digits_are_refused_naming_the_value(value):
    with pytest.raises(ValueError, match='is not a Slurm time'):
        acct.parse_time(value)


@pytest.mark.parametrize('value', ['gres/gpu=\u0668', 'gres/gpu=' + '9' * 5000, 'mem=' + '9' * 400 + 'G',
                                   'gres/gpu=1\u00b2'], ids=['arabic-indic', '5000-digits', '400-digits', 'superscript'])
def test_tres_counts_of_hostile_digits_are_refused_naming_the_count(value):
    with pytest.raises(ValueError, match='is not a count'):
        acct.parse_tres(value)


@pytest.mark.parametrize('value', ['\u00b2', '-\u00b2', '\u0663', '9' * 5000])
def test_limits_of_hostile_digits_are_refused_naming_the_value(value):
    with pytest.raises(ValueError, match='is not a whole number'):
        acct.parse_limit('int', value)


@pytest.mark.parametrize('value', ['\u00b2', '\u0663', '9' * 5000])
def test_sacctmgr_numbers_of_hostile_digits_raise_output_error(value):
    with pytest.raises(acct.OutputError, match='priority'):
        acct.parse_qos(f'normal|x|{value}' + '|' * 19 + '\n')
    with pytest.raises(acct.OutputError, match='fairshare'):
        acct.parse_assocs(f'demo|root||||{value}|normal|' + '|' * 14 + '\n', 'demo')
