# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm accounts, users and QoS: check a declared state, read sacctmgr's, and plan the sacctmgr commands between.

Pure Python, standard library only (no Ansible import): the llmforge.cluster.slurm_accounting module runs it on the
controller, the slurm_accounting_problems filter checks the inventory with it before anything is installed.

The declared state (the role variable slurm_controller_accounting) has three lists:

- qos: ``{name, description, priority, flags, limits, state}``;
- accounts: ``{name, parent, description, organization, fairshare, qos, default_qos, limits, state}``;
- users: ``{name, accounts, default_account, admin_level, fairshare, qos, default_qos, limits, state}``, where each
  item of ``accounts`` is an account name or ``{name, fairshare, qos, default_qos, limits, state}`` (its own settings
  for that association, over the user's).

``limits`` are Slurm's own limit names (GrpTRES, MaxTRESPerUser, MaxWall...): TRES limits as ``gres/gpu=8,cpu=64``
or a mapping, times as quoted strings (``"00:30:00"``, ``"2-00:00:00"``); -1 clears a limit. Only what is declared is
managed: a setting left out is left as it is, an object the lists do not name is never touched, and only an object
(or a user's membership of an account) marked ``state: absent`` is removed.

The current state comes from four ``sacctmgr --noheader --parsable2 show`` commands (show_commands): the associations
are read with ``WOPLimits`` so each shows its own limits and QoS, not those inherited from its parents, and a limit
declared as -1 on a child is seen as unset even when the parent sets one. Slurm keeps names, descriptions and
organizations in lower case (sacctmgr lowers what it is given): they are compared without regard to case.
"""

from __future__ import annotations

import re
import shlex
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils._checks import ascii_digits

INT, TIME, TRES = 'int', 'time', 'tres'

# QoS limits as sacctmgr spells them (`sacctmgr add/modify qos ... <Limit>=` and `show qos format=<Limit>`).
QOS_LIMITS = {
    'GrpJobs': INT, 'GrpJobsAccrue': INT, 'GrpSubmitJobs': INT, 'GrpTRES': TRES, 'GrpTRESMins': TRES,
    'GrpTRESRunMins': TRES, 'GrpWall': TIME, 'MaxJobsPerAccount': INT, 'MaxJobsPerUser': INT,
    'MaxSubmitJobsPerAccount': INT, 'MaxSubmitJobsPerUser': INT, 'MaxTRESMinsPerJob': TRES,
    'MaxTRESPerAccount': TRES, 'MaxTRESPerJob': TRES, 'MaxTRESPerNode': TRES, 'MaxTRESPerUser': TRES,
    'MaxWall': TIME, 'MinTRESPerJob': TRES,
}
# Association limits (accounts and users' memberships), as sacctmgr spells them.
ASSOC_LIMITS = {
    'GrpJobs': INT, 'GrpJobsAccrue': INT, 'GrpSubmitJobs': INT, 'GrpTRES': TRES, 'GrpTRESMins': TRES,
    'GrpTRESRunMins': TRES, 'GrpWall': TIME, 'MaxJobs': INT, 'MaxJobsAccrue': INT, 'MaxSubmitJobs': INT,
    'MaxTRESMinsPerJob': TRES, 'MaxTRESPerJob': TRES, 'MaxTRESPerNode': TRES, 'MaxWall': TIME,
}
# Other spellings sacctmgr accepts for the same limits.
LIMIT_ALIASES = {
    'maxtres': 'MaxTRESPerJob', 'maxtrespu': 'MaxTRESPerUser', 'maxtrespa': 'MaxTRESPerAccount',
    'maxjobspu': 'MaxJobsPerUser', 'maxjobspa': 'MaxJobsPerAccount', 'maxsubmitjobspu': 'MaxSubmitJobsPerUser',
    'maxsubmitjobspa': 'MaxSubmitJobsPerAccount', 'maxsubmitpu': 'MaxSubmitJobsPerUser',
    'maxsubmitpa': 'MaxSubmitJobsPerAccount', 'maxwalldurationperjob': 'MaxWall', 'maxtresmins': 'MaxTRESMinsPerJob',
    'mintres': 'MinTRESPerJob',
}
# QoS flags as sacctmgr prints them (slurmdb_qos_flags_str).
QOS_FLAGS = ('DenyOnLimit', 'EnforceUsageThreshold', 'NoDecay', 'NoReserve', 'OverPartQOS', 'PartitionMaxNodes',
             'PartitionMinNodes', 'PartitionTimeLimit', 'Relative', 'RequiresReservation', 'UsageFactorSafe')
ADMIN_LEVELS = ('None', 'Operator', 'Administrator')

QOS_KEYS = ('name', 'description', 'priority', 'flags', 'limits', 'state')
ACCOUNT_KEYS = ('name', 'parent', 'description', 'organization', 'fairshare', 'qos', 'default_qos', 'limits',
                'state')
MEMBERSHIP_KEYS = ('name', 'fairshare', 'qos', 'default_qos', 'limits', 'state')
USER_KEYS = ('name', 'accounts', 'default_account', 'admin_level', 'fairshare', 'qos', 'default_qos', 'limits',
             'state')
STATES = ('present', 'absent')

QOS_FIELDS = ('Name', 'Description', 'Priority', 'Flags') + tuple(QOS_LIMITS)
ACCOUNT_FIELDS = ('Account', 'Description', 'Organization')
USER_FIELDS = ('User', 'DefaultAccount', 'AdminLevel')
ASSOC_FIELDS = ('Cluster', 'Account', 'User', 'Partition', 'ParentName', 'Share', 'QOS', 'DefaultQOS') + tuple(
    ASSOC_LIMITS)

# Slurm names: lower case (sacctmgr lowers them), nothing sacctmgr would split on or the parsable output would break.
_NAME = re.compile(r'^[a-z0-9_][a-z0-9_.-]*$')
# A TRES name: one of Slurm's own, or a type/name such as gres/gpu, gres/gpu:h100, license/matlab, fs/lustre.
_TRES_NAME = re.compile(r'^(?:cpu|mem|node|energy|billing|vmem|pages|'
                        r'(?:gres|license|bb|fs|ic)/[a-z0-9_.-]+(?::[a-z0-9_.-]+)?)$')
# Bounded ASCII digits: float() reads other scripts' digits, int() refuses over 4300, and 400 digits are inf.
_TRES_COUNT = re.compile(r'^(-1|[0-9]{1,15}(?:\.[0-9]{1,15})?)([kmgtp]?)$')
_TIME = re.compile(r'^(?:([0-9]{1,9})-([0-9]{1,9})(?::([0-9]{1,9})(?::([0-9]{1,9}))?)?|'
                   r'([0-9]{1,9})(?::([0-9]{1,9})(?::([0-9]{1,9}))?)?)$')
_TEXT_FORBIDDEN = re.compile(r'[|"\'`\n\r\t=]')
_UNITS = {'': 0, 'k': 1, 'm': 2, 'g': 3, 't': 4, 'p': 5}
UNLIMITED = -1


class AccountingError(ValueError):
    """The declared state is not valid; `problems` lists every problem, each naming the variable path."""

    def __init__(self, problems: t.Sequence[str]) -> None:
        super().__init__('; '.join(problems))
        self.problems = list(problems)


class OutputError(ValueError):
    """sacctmgr printed something this parser does not understand."""


# ----------------------------------------------------------------------------------------------- value syntax

def parse_time(value: t.Any) -> int:
    """Minutes of a Slurm time ("30", "00:30:00", "2-00:00:00", "UNLIMITED", -1); ValueError when malformed.

    Slurm reads a bare number as minutes, M:S, H:M:S, D-H, D-H:M and D-H:M:S; seconds round up to a minute.
    """
    if value == UNLIMITED or (isinstance(value, str) and value.strip().upper() in ('-1', 'UNLIMITED', 'INFINITE')):
        return UNLIMITED
    if not isinstance(value, str):
        raise ValueError(f'{value!r} is not a quoted time such as "00:30:00" or "2-00:00:00"')
    match = _TIME.match(value.strip())
    if not match:
        raise ValueError(f'{value!r} is not a Slurm time (minutes, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)')
    days, d_hours, d_mins, d_secs, mins, m_secs, h_secs = match.groups()
    if days is not None:
        seconds = int(days) * 86400 + int(d_hours) * 3600 + int(d_mins or 0) * 60 + int(d_secs or 0)
    elif h_secs is not None:
        seconds = int(mins) * 3600 + int(m_secs) * 60 + int(h_secs)
    elif m_secs is not None:
        seconds = int(mins) * 60 + int(m_secs)
    else:
        seconds = int(mins) * 60
    return (seconds + 59) // 60


def format_time(minutes: int) -> str:
    """Minutes the way sacctmgr prints them: HH:MM:SS, or D-HH:MM:SS from a day on; -1 for unlimited."""
    if minutes == UNLIMITED:
        return '-1'
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    return f'{days}-{hours:02d}:{mins:02d}:00' if days else f'{hours:02d}:{mins:02d}:00'


def _tres_count(name: str, text: str) -> int:
    """A TRES count in Slurm's units: mem in megabytes (1G = 1024), others as numbers (1K = 1024)."""
    match = _TRES_COUNT.match(text.strip().lower())
    if not match:
        raise ValueError(f'{name}={text} is not a count (a number, optionally with K/M/G/T/P, or -1)')
    number, unit = match.groups()
    if number == '-1':
        return UNLIMITED
    power = _UNITS[unit] - (2 if name == 'mem' and unit else 0)
    value = float(number) * (1024 ** power)
    if value != int(value):
        raise ValueError(f'{name}={text} is not a whole count')
    return int(value)


def parse_tres(value: t.Any) -> dict[str, int]:
    """{name: count} of `gres/gpu=8,cpu=64` or of a mapping {gres/gpu: 8}; -1 clears one. ValueError when malformed."""
    if isinstance(value, t.Mapping):
        items = [(str(name), str(count)) for name, count in value.items()]
    elif isinstance(value, str):
        items = []
        for part in value.split(','):
            name, sep, count = part.partition('=')
            if not sep:
                raise ValueError(f'{part.strip()!r} is not name=count (e.g. gres/gpu=8)')
            items.append((name, count))
    else:
        raise ValueError(f'{value!r} is not a TRES list such as "gres/gpu=8,cpu=64"')
    result: dict[str, int] = {}
    for name, count in items:
        name = name.strip().lower()
        if not _TRES_NAME.fullmatch(name):
            raise ValueError(f'{name!r} is not a TRES name (cpu, mem, node, billing, energy, or gres/<name> such as '
                             'gres/gpu, license/<name>...)')
        if isinstance(count, bool):
            raise ValueError(f'{name}={count} is not a count')
        result[name] = _tres_count(name, count)
    if not result:
        raise ValueError('an empty TRES list')
    return result


def format_tres(tres: t.Mapping[str, int]) -> str:
    return ','.join(f'{name}={count}' for name, count in sorted(tres.items()))


def parse_limit(kind: str, value: t.Any) -> t.Any:
    """A limit value in comparable form: an int (-1 unlimited), minutes, or {tres: count}."""
    if kind == TIME:
        return parse_time(value)
    if kind == TRES:
        return parse_tres(value)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not ascii_digits(str(value).strip().lstrip('-')):
        raise ValueError(f'{value!r} is not a whole number (or -1 to clear)')
    number = int(value)
    if number < UNLIMITED:
        raise ValueError(f'{value!r} is negative (only -1 clears a limit)')
    return number


def format_limit(kind: str, value: t.Any) -> str:
    if kind == TIME:
        return format_time(value)
    if kind == TRES:
        return format_tres(value)
    return str(value)


# ------------------------------------------------------------------------------------------------- validation

class _Checker:
    """Collects problems, each prefixed with the variable path it is about."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(f'{path}: {message}')

    def keys(self, path: str, item: t.Any, allowed: t.Sequence[str]) -> bool:
        if not isinstance(item, t.Mapping):
            self.add(path, f'must be a mapping, got {type(item).__name__} {item!r}')
            return False
        for key in item:
            if key not in allowed:
                self.add(f'{path}.{key}', f"unknown key (allowed: {', '.join(allowed)})")
        return True

    def name(self, path: str, value: t.Any) -> str | None:
        if value is None:
            self.add(path, 'required')
            return None
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            self.add(path, f"{value!r} is not a Slurm name (lower-case letters, digits, '_', '-', '.'; "
                           'sacctmgr keeps names in lower case)')
            return None
        return value

    def text(self, path: str, value: t.Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip() or _TEXT_FORBIDDEN.search(value):
            self.add(path, f'{value!r} must be a non-empty string without quotes, |, = or control characters')
            return None
        return value.strip()

    def state(self, path: str, value: t.Any) -> str:
        if value is None:
            return 'present'
        if value not in STATES:
            self.add(path, f'{value!r} must be present or absent')
            return 'present'
        return value

    def integer(self, path: str, value: t.Any, minimum: int = 0) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.add(path, f'{value!r} must be a whole number of at least {minimum}')
            return None
        return value

    def fairshare(self, path: str, value: t.Any) -> t.Any:
        if value is None:
            return None
        if isinstance(value, str) and value.lower() == 'parent':
            return 'parent'
        return self.integer(path, value)

    def qos_list(self, path: str, value: t.Any) -> frozenset | None:
        if value is None:
            return None
        if isinstance(value, str) or not isinstance(value, t.Sequence) or not value:
            self.add(path, f'{value!r} must be a non-empty list of QoS names')
            return None
        names = [self.name(f'{path}[{index}]', item) for index, item in enumerate(value)]
        return frozenset(n for n in names if n)

    def limits(self, path: str, value: t.Any, known: t.Mapping[str, str]) -> dict[str, t.Any]:
        if value is None:
            return {}
        if not isinstance(value, t.Mapping):
            self.add(path, f'must be a mapping of Slurm limits such as {{MaxTRESPerUser: "gres/gpu=8"}}, got {value!r}')
            return {}
        result = {}
        by_lower = {key.lower(): key for key in known}
        for key, raw in value.items():
            canonical = by_lower.get(str(key).lower()) or LIMIT_ALIASES.get(str(key).lower())
            if canonical not in known:
                self.add(f'{path}.{key}', f"unknown limit (allowed: {', '.join(known)})")
                continue
            try:
                result[canonical] = parse_limit(known[canonical], raw)
            except ValueError as err:
                self.add(f'{path}.{key}', str(err))
        return result


def _assoc_settings(check: _Checker, path: str, item: t.Mapping[str, t.Any]) -> dict[str, t.Any]:
    settings = {
        'fairshare': check.fairshare(f'{path}.fairshare', item.get('fairshare')),
        'qos': check.qos_list(f'{path}.qos', item.get('qos')),
        'default_qos': check.name(f'{path}.default_qos', item['default_qos'])
        if item.get('default_qos') is not None else None,
        'limits': check.limits(f'{path}.limits', item.get('limits'), ASSOC_LIMITS),
    }
    return settings


def _check_default_qos(check: _Checker, path: str, settings: t.Mapping[str, t.Any]) -> None:
    qos, default = settings['qos'], settings['default_qos']
    if qos is not None and default is not None and default not in qos:
        check.add(f'{path}.default_qos', f'{default!r} is not in {path}.qos {sorted(qos)}')
    if qos is not None and default is None and len(qos) > 1 and 'normal' not in qos:
        check.add(f'{path}.default_qos', f'required with several QoS {sorted(qos)} and no normal among them: jobs '
                                         'naming no QoS would be refused')


def _named_items(check: _Checker, path: str, items: t.Sequence[t.Any],
                 keys: t.Iterable[str]) -> t.Iterator[tuple[str, t.Any, str | None]]:
    """(item path, item, checked name) of each item of the list at `path` whose keys are valid; once the list is
    walked, a name declared twice is named."""
    names = []
    for index, item in enumerate(items):
        item_path = f'{path}[{index}]'
        if not check.keys(item_path, item, keys):
            continue
        name = check.name(f'{item_path}.name', item.get('name'))
        names.append((index, name))
        yield item_path, item, name
    _unique(check, path, names)


def _unique(check: _Checker, path: str, names: t.Sequence[tuple[int, str | None]]) -> None:
    seen: dict[str, int] = {}
    for index, name in names:
        if name is None:
            continue
        if name in seen:
            check.add(f'{path}[{index}].name', f'{name!r} is declared twice (also {path}[{seen[name]}])')
        seen.setdefault(name, index)


def _list(check: _Checker, path: str, value: t.Any) -> list:
    if value is None:
        return []
    if isinstance(value, (str, t.Mapping)) or not isinstance(value, t.Sequence):
        check.add(path, f'must be a list, got {value!r}')
        return []
    return list(value)


def validate(spec: t.Any, variable: str = 'slurm_accounting') -> dict[str, t.Any]:
    """The declared state, normalized: {'qos': {name: ...}, 'accounts': {...}, 'users': {...}} in declared order.

    Raises AccountingError listing every problem, each naming its path (`<variable>.accounts[2].name`).
    """
    check = _Checker()
    if spec is None:
        spec = {}
    if not check.keys(variable, spec, ('qos', 'accounts', 'users')):
        raise AccountingError(check.problems)
    qos_items = _list(check, f'{variable}.qos', spec.get('qos'))
    account_items = _list(check, f'{variable}.accounts', spec.get('accounts'))
    user_items = _list(check, f'{variable}.users', spec.get('users'))

    qos: dict[str, dict[str, t.Any]] = {}
    for path, item, name in _named_items(check, f'{variable}.qos', qos_items, QOS_KEYS):
        flags = None
        if item.get('flags') is not None:
            flags = _flags(check, f'{path}.flags', item['flags'])
        entry = {
            'path': path, 'state': check.state(f'{path}.state', item.get('state')),
            'description': check.text(f'{path}.description', item.get('description')),
            'priority': check.integer(f'{path}.priority', item.get('priority')),
            'flags': flags,
            'limits': check.limits(f'{path}.limits', item.get('limits'), QOS_LIMITS),
        }
        if name and name not in qos:
            qos[name] = entry

    accounts: dict[str, dict[str, t.Any]] = {}
    for path, item, name in _named_items(check, f'{variable}.accounts', account_items, ACCOUNT_KEYS):
        entry = {
            'path': path, 'state': check.state(f'{path}.state', item.get('state')),
            'parent': check.name(f'{path}.parent', item['parent']) if item.get('parent') is not None else None,
            'description': check.text(f'{path}.description', item.get('description')),
            'organization': check.text(f'{path}.organization', item.get('organization')),
        }
        entry.update(_assoc_settings(check, path, item))
        _check_default_qos(check, path, entry)
        if name == 'root' and (entry['state'] == 'absent' or entry['parent'] is not None):
            check.add(path, 'the root account can be given settings, not a parent nor state: absent')
        if name and entry['parent'] == name:
            check.add(f'{path}.parent', f'{name!r} cannot be its own parent')
        if name and name not in accounts:
            accounts[name] = entry
    _check_account_tree(check, accounts)

    users: dict[str, dict[str, t.Any]] = {}
    for path, item, name in _named_items(check, f'{variable}.users', user_items, USER_KEYS):
        entry = _user(check, path, item, accounts)
        if name == 'root' and entry['state'] == 'absent':
            check.add(f'{path}.state', 'the root user cannot be removed')
        if name and name not in users:
            users[name] = entry

    _check_references(check, variable, qos, accounts, users)
    if check.problems:
        raise AccountingError(check.problems)
    return {'qos': qos, 'accounts': accounts, 'users': users}


def _flags(check: _Checker, path: str, value: t.Any) -> frozenset | None:
    if isinstance(value, str) or not isinstance(value, t.Sequence):
        check.add(path, f'{value!r} must be a list of QoS flags ([] for none)')
        return None
    by_lower = {flag.lower(): flag for flag in QOS_FLAGS}
    flags = set()
    for index, flag in enumerate(value):
        canonical = by_lower.get(str(flag).lower())
        if canonical is None:
            check.add(f'{path}[{index}]', f"{flag!r} is not a QoS flag ({', '.join(QOS_FLAGS)})")
        else:
            flags.add(canonical)
    return frozenset(flags)


def _user(check: _Checker, path: str, item: t.Mapping[str, t.Any], accounts: t.Mapping[str, t.Any]) -> dict:
    state = check.state(f'{path}.state', item.get('state'))
    common = _assoc_settings(check, path, item)
    _check_default_qos(check, path, common)
    admin = item.get('admin_level')
    if admin is not None:
        by_lower = {level.lower(): level for level in ADMIN_LEVELS}
        admin = by_lower.get(str(admin).lower())
        if admin is None:
            check.add(f'{path}.admin_level', f"{item['admin_level']!r} must be one of {', '.join(ADMIN_LEVELS)}")
    memberships: dict[str, dict[str, t.Any]] = {}
    raw = item.get('accounts')
    if raw is None and state == 'present':
        check.add(f'{path}.accounts', 'required: the accounts the user may charge jobs to')
    names = []
    for index, member in enumerate(_list(check, f'{path}.accounts', raw)):
        mpath = f'{path}.accounts[{index}]'
        if isinstance(member, str):
            member = {'name': member}
        if not check.keys(mpath, member, MEMBERSHIP_KEYS):
            continue
        name = check.name(f'{mpath}.name', member.get('name'))
        names.append((index, name))
        own = _assoc_settings(check, mpath, member)
        settings = {key: common[key] if own[key] is None else own[key]
                    for key in ('fairshare', 'qos', 'default_qos')}
        settings['limits'] = dict(common['limits'], **own['limits'])
        _check_default_qos(check, mpath, settings)
        settings['state'] = check.state(f'{mpath}.state', member.get('state'))
        settings['path'] = mpath
        if state == 'absent' and member.get('state') is not None:
            check.add(f'{mpath}.state', 'a user marked absent loses every membership; leave the memberships out')
        if name and name not in memberships:
            memberships[name] = settings
        if name and accounts.get(name, {}).get('state') == 'absent' and settings['state'] == 'present':
            check.add(f'{mpath}.name', f'{name!r} is an account marked absent')
    _unique(check, f'{path}.accounts', names)
    present = [name for name, member in memberships.items() if member['state'] == 'present']
    default = item.get('default_account')
    if default is not None:
        default = check.name(f'{path}.default_account', default)
        if default and default not in present:
            check.add(f'{path}.default_account', f'{default!r} is not one of the accounts the user is a member of '
                                                 f'({", ".join(present) or "none"})')
    elif present:
        default = present[0]
    if state == 'present' and raw is not None and not present:
        check.add(f'{path}.accounts', 'a present user needs at least one account (its default account)')
    return {'path': path, 'state': state, 'admin_level': admin, 'default_account': default,
            'memberships': memberships}


def _check_account_tree(check: _Checker, accounts: t.Mapping[str, t.Any]) -> None:
    for name, entry in accounts.items():
        seen = [name]
        parent = entry['parent']
        while parent in accounts and parent not in seen:
            seen.append(parent)
            parent = accounts[parent]['parent']
        if parent in seen and parent is not None:
            check.add(f"{entry['path']}.parent", f"accounts form a loop: {' -> '.join(seen + [parent])}")
        if entry['state'] == 'present' and entry['parent'] in accounts \
                and accounts[entry['parent']]['state'] == 'absent':
            check.add(f"{entry['path']}.parent", f"{entry['parent']!r} is an account marked absent")


def _check_references(check: _Checker, variable: str, qos: t.Mapping, accounts: t.Mapping, users: t.Mapping) -> None:
    absent_qos = {name for name, entry in qos.items() if entry['state'] == 'absent'}
    holders = [(entry['path'], entry) for entry in accounts.values() if entry['state'] == 'present']
    for user in users.values():
        holders += [(member['path'], member) for member in user['memberships'].values()
                    if user['state'] == 'present' and member['state'] == 'present']
    for path, entry in holders:
        for name in sorted((entry['qos'] or frozenset()) | {entry['default_qos']} - {None}):
            if name in absent_qos:
                check.add(path, f'uses the QoS {name!r}, which {variable}.qos marks absent')


# ------------------------------------------------------------------------------------------- sacctmgr output

def show_commands(cluster: str) -> dict[str, list[str]]:
    """The sacctmgr arguments that read the current state, by object."""
    base = ['--noheader', '--parsable2', 'show']
    return {
        'qos': base + ['qos', 'format=' + ','.join(QOS_FIELDS)],
        'accounts': base + ['account', 'format=' + ','.join(ACCOUNT_FIELDS)],
        'users': base + ['user', 'where', f'cluster={cluster}', 'format=' + ','.join(USER_FIELDS)],
        # WOPLimits: each association's own limits and QoS, not the ones it inherits.
        'assocs': base + ['assoc', 'where', f'cluster={cluster}', 'WOPLimits', 'format=' + ','.join(ASSOC_FIELDS)],
    }


def _rows(text: str, fields: t.Sequence[str], what: str) -> t.Iterator[dict[str, str]]:
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        values = line.split('|')
        if len(values) != len(fields):
            raise OutputError(f'line {number} of `sacctmgr show {what}` has {len(values)} fields where '
                              f"{len(fields)} ({','.join(fields)}) were asked for: {line!r}")
        yield dict(zip(fields, values))


def _current_limit(kind: str, text: str, where: str) -> t.Any:
    text = text.strip()
    if not text:
        return {} if kind == TRES else UNLIMITED
    try:
        return parse_limit(kind, text)
    except ValueError as err:
        raise OutputError(f'{where}: {err}') from None


def _current_limits(row: t.Mapping[str, str], known: t.Mapping[str, str], where: str) -> dict[str, t.Any]:
    return {key: _current_limit(kind, row[key], f'{where} {key}') for key, kind in known.items()}


def _name_set(text: str) -> frozenset:
    return frozenset(part.strip().lower() for part in text.split(',') if part.strip())


def parse_qos(text: str) -> dict[str, dict[str, t.Any]]:
    """{name: {description, priority, flags, limits}} from `sacctmgr -n -P show qos format=<QOS_FIELDS>`."""
    result = {}
    for row in _rows(text, QOS_FIELDS, 'qos'):
        name = row['Name'].strip().lower()
        where = f'QoS {name}'
        priority = row['Priority'].strip()
        if priority and not ascii_digits(priority):
            raise OutputError(f'{where}: priority {priority!r} is not a number')
        by_lower = {flag.lower(): flag for flag in QOS_FLAGS}
        flags = frozenset(by_lower.get(flag.lower(), flag) for flag in row['Flags'].split(',') if flag.strip())
        result[name] = {'description': row['Description'], 'priority': int(priority or 0), 'flags': flags,
                        'limits': _current_limits(row, QOS_LIMITS, where)}
    return result


def parse_accounts(text: str) -> dict[str, dict[str, str]]:
    """{account: {description, organization}} from `sacctmgr -n -P show account format=<ACCOUNT_FIELDS>`."""
    return {row['Account'].strip().lower(): {'description': row['Description'], 'organization': row['Organization']}
            for row in _rows(text, ACCOUNT_FIELDS, 'account')}


def parse_users(text: str) -> dict[str, dict[str, str]]:
    """{user: {default_account, admin_level}} from `sacctmgr -n -P show user format=<USER_FIELDS>`."""
    return {row['User'].strip().lower(): {'default_account': row['DefaultAccount'].strip().lower(),
                                          'admin_level': row['AdminLevel'].strip()}
            for row in _rows(text, USER_FIELDS, 'user')}


def _share(text: str, where: str) -> t.Any:
    text = text.strip()
    if text.lower() == 'parent':
        return 'parent'
    if not ascii_digits(text):
        raise OutputError(f'{where}: fairshare {text!r} is not a number nor parent')
    return int(text)


def parse_assocs(text: str, cluster: str) -> dict[str, dict]:
    """{'accounts': {account: settings}, 'memberships': {(user, account): settings}} of one cluster.

    From `sacctmgr -n -P show assoc where cluster=<c> WOPLimits format=<ASSOC_FIELDS>`; associations limited to a
    partition are not managed here and are skipped.
    """
    accounts, memberships = {}, {}
    for row in _rows(text, ASSOC_FIELDS, 'assoc'):
        if row['Cluster'].strip().lower() != cluster.lower() or row['Partition'].strip():
            continue
        account, user = row['Account'].strip().lower(), row['User'].strip().lower()
        where = f'association {account}/{user}' if user else f'account {account}'
        settings = {'fairshare': _share(row['Share'], where), 'qos': _name_set(row['QOS']),
                    'default_qos': row['DefaultQOS'].strip().lower() or None,
                    'limits': _current_limits(row, ASSOC_LIMITS, where)}
        if user:
            memberships[(user, account)] = settings
        else:
            settings['parent'] = row['ParentName'].strip().lower() or None
            accounts[account] = settings
    return {'accounts': accounts, 'memberships': memberships}


def current_state(outputs: t.Mapping[str, str], cluster: str) -> dict[str, t.Any]:
    """The state read by the SHOW commands, from their outputs by object name.

    {'qos': parse_qos, 'records': parse_accounts (descriptions), 'users': parse_users, 'accounts' and
    'memberships': parse_assocs}.
    """
    state = {'qos': parse_qos(outputs['qos']), 'records': parse_accounts(outputs['accounts']),
             'users': parse_users(outputs['users'])}
    state.update(parse_assocs(outputs['assocs'], cluster))
    return state


# ------------------------------------------------------------------------------------------------------ plan

def _same_text(declared: str | None, current: str | None) -> bool:
    return declared is None or (current or '').strip().lower() == declared.lower()


def _limit_changes(declared: t.Mapping[str, t.Any], current: t.Mapping[str, t.Any],
                   known: t.Mapping[str, str]) -> dict[str, t.Any]:
    """The declared limits whose current value differs (TRES: only the declared TRES that differ)."""
    changes = {}
    for key, value in declared.items():
        kind = known[key]
        now = current.get(key, {} if kind == TRES else UNLIMITED)
        if kind == TRES:
            diff = {name: count for name, count in value.items() if now.get(name, UNLIMITED) != count}
            if diff:
                changes[key] = diff
        elif now != value:
            changes[key] = value
    return changes


def _limit_args(limits: t.Mapping[str, t.Any], known: t.Mapping[str, str], adding: bool = False) -> list[str]:
    args = []
    for key, value in limits.items():
        kind = known[key]
        if adding:
            # A new object has no limit yet: clearing one is nothing to say.
            if kind == TRES:
                value = {name: count for name, count in value.items() if count != UNLIMITED}
                if not value:
                    continue
            elif value == UNLIMITED:
                continue
        args.append(f'{key}={format_limit(kind, value)}')
    return args


def _assoc_args(declared: t.Mapping[str, t.Any], current: t.Mapping[str, t.Any] | None) -> list[str]:
    """fairshare/qos/defaultqos/limit arguments that bring an association from `current` (None: new) to declared."""
    args = []
    adding = current is None
    current = current or {'fairshare': 1, 'qos': frozenset(), 'default_qos': None, 'limits': {}}
    if declared['fairshare'] is not None and declared['fairshare'] != current['fairshare']:
        args.append(f"Fairshare={declared['fairshare']}")
    if declared['qos'] is not None and declared['qos'] != current['qos']:
        args.append('QOS=' + ','.join(sorted(declared['qos'])))
    if declared['default_qos'] is not None and declared['default_qos'] != current['default_qos']:
        args.append(f"DefaultQOS={declared['default_qos']}")
    limits = declared['limits'] if adding else _limit_changes(declared['limits'], current['limits'], ASSOC_LIMITS)
    return args + _limit_args(limits, ASSOC_LIMITS, adding=adding)


def _change(kind: str, name: str, action: str, args: list[str], before: str, after: str) -> dict[str, t.Any]:
    return {'object': kind, 'name': name, 'action': action, 'args': args, 'before': before, 'after': after}


def _describe(args: t.Sequence[str]) -> str:
    return ' '.join(arg for arg in args if '=' in arg and not arg.lower().startswith(('cluster=', 'name=')))


def _plan_qos(desired: t.Mapping, current: t.Mapping) -> tuple[list, list]:
    changes, removals = [], []
    for name, entry in desired.items():
        now = current.get(name)
        if entry['state'] == 'absent':
            if now is not None:
                removals.append(_change('qos', name, 'delete', ['delete', 'qos', 'where', f'name={name}'],
                                        f'qos {name}: present', f'qos {name}: absent'))
            continue
        settings = []
        described = now is not None and _same_text(entry['description'], now['description'])
        if entry['description'] is not None and not described:
            settings.append(f"Description={entry['description']}")
        if entry['priority'] is not None and (now is None or entry['priority'] != now['priority']):
            settings.append(f"Priority={entry['priority']}")
        if entry['flags'] is not None and (now is None or entry['flags'] != now['flags']):
            if entry['flags']:
                settings.append('Flags=' + ','.join(sorted(entry['flags'])))
            elif now is not None:
                settings.append('Flags=-1')
        if now is None:
            args = ['add', 'qos', name] + settings + _limit_args(entry['limits'], QOS_LIMITS, adding=True)
            changes.append(_change('qos', name, 'add', args, f'qos {name}: absent',
                                   f'qos {name}: {_describe(args)}'.rstrip()))
            continue
        settings += _limit_args(_limit_changes(entry['limits'], now['limits'], QOS_LIMITS), QOS_LIMITS)
        if settings:
            args = ['modify', 'qos', 'where', f'name={name}', 'set'] + settings
            changes.append(_change('qos', name, 'modify', args, f'qos {name}: {_shown(now, settings, QOS_LIMITS)}',
                                   f'qos {name}: {_shown(now, settings, QOS_LIMITS, result=True)}'))
    return changes, removals


def _account_order(desired: t.Mapping[str, t.Any]) -> list[str]:
    """Present accounts, parents before their children, otherwise in declared order."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        parent = desired[name]['parent']
        if parent in desired and desired[parent]['state'] == 'present':
            visit(parent)
        order.append(name)

    for name, entry in desired.items():
        if entry['state'] == 'present':
            visit(name)
    return order


def _plan_accounts(desired: t.Mapping, current: t.Mapping, cluster: str) -> tuple[list, list]:
    changes, removals = [], []
    for name in _account_order(desired):
        entry, assoc, record = desired[name], current['accounts'].get(name), current['records'].get(name)
        if assoc is None:
            args = ['add', 'account', name, f'Cluster={cluster}']
            if entry['parent'] is not None:
                args.append(f"Parent={entry['parent']}")
            for key in ('description', 'organization'):
                if entry[key] is not None:
                    args.append(f'{key.capitalize()}={entry[key]}')
            args += _assoc_args(entry, None)
            changes.append(_change('account', name, 'add', args, f'account {name}: absent',
                                   f'account {name}: {_describe(args)}'.rstrip()))
            continue
        texts = [f'{key.capitalize()}={entry[key]}' for key in ('description', 'organization')
                 if record is not None and not _same_text(entry[key], record[key])]
        if texts:
            changes.append(_change('account', name, 'modify',
                                   ['modify', 'account', 'where', f'name={name}', 'set'] + texts,
                                   f'account {name}: ' + ' '.join(f'{k.capitalize()}={record[k]}' for k in (
                                       'description', 'organization') if not _same_text(entry[k], record[k])),
                                   f'account {name}: {_describe(texts)}'))
        settings = []
        if entry['parent'] is not None and entry['parent'] != assoc['parent']:
            settings.append(f"Parent={entry['parent']}")
        settings += _assoc_args(entry, assoc)
        if settings:
            changes.append(_change('account', name, 'modify',
                                   ['modify', 'account', 'where', f'name={name}', f'cluster={cluster}', 'set']
                                   + settings, f'account {name}: {_shown(assoc, settings, ASSOC_LIMITS)}',
                                   f'account {name}: {_shown(assoc, settings, ASSOC_LIMITS, result=True)}'))
    for name, entry in desired.items():
        if entry['state'] == 'absent' and name in current['accounts']:
            removals.append(_change('account', name, 'delete',
                                    ['delete', 'account', 'where', f'name={name}', f'cluster={cluster}'],
                                    f'account {name}: present', f'account {name}: absent'))
    # Children before their parents: the deepest first.
    removals.sort(key=lambda change: -_depth(change['name'], desired, current))
    return changes, removals


def _depth(name: str, desired: t.Mapping, current: t.Mapping) -> int:
    depth, seen = 0, {name}
    parent = (current['accounts'].get(name) or {}).get('parent') or (desired.get(name) or {}).get('parent')
    while parent and parent not in seen:
        seen.add(parent)
        depth += 1
        parent = (current['accounts'].get(parent) or {}).get('parent') or (desired.get(parent) or {}).get('parent')
    return depth


def _shown(values: t.Mapping[str, t.Any], settings: t.Sequence[str], known: t.Mapping[str, str],
           result: bool = False) -> str:
    """The settings about to change as they are now (`values`), or as they will be (`result`), one line.

    `values` holds the current description, priority, flags, parent, fairshare, qos, default_qos and limits. A TRES
    limit shows every TRES, the untouched ones too.
    """
    parts = []
    for setting in settings:
        key, new = setting.split('=', 1)
        if key in known:
            now = values['limits'][key]
            if known[key] == TRES:
                if result:
                    now = {name: count for name, count in dict(now, **parse_tres(new)).items() if count != UNLIMITED}
                parts.append(f"{key}={format_tres(now) or '-1'}")
            else:
                parts.append(setting if result else f'{key}={format_limit(known[key], now)}')
            continue
        if result:
            parts.append(setting)
            continue
        now = values[{'DefaultQOS': 'default_qos'}.get(key, key.lower())]
        if isinstance(now, frozenset):
            now = ','.join(sorted(now)) or '-1'
        parts.append(f"{key}={'' if now is None else now}")
    return ' '.join(parts)


def _plan_users(desired: t.Mapping, current: t.Mapping, cluster: str) -> tuple[list, list]:
    changes, removals = [], []
    for name, user in desired.items():
        members = {account for (member, account) in current['memberships'] if member == name}
        if user['state'] == 'absent':
            if members:
                removals.append(_change('user', name, 'delete',
                                        ['delete', 'user', 'where', f'name={name}', f'cluster={cluster}'],
                                        f'user {name}: {",".join(sorted(members))}', f'user {name}: absent'))
            continue
        record = current['users'].get(name)
        new_user = not members
        present = [account for account, member in user['memberships'].items() if member['state'] == 'present']
        # A new user starts with its default account, which becomes its default.
        if new_user and user['default_account'] in present:
            present.remove(user['default_account'])
            present.insert(0, user['default_account'])
        for index, account in enumerate(present):
            member = user['memberships'][account]
            assoc = current['memberships'].get((name, account))
            if assoc is None:
                args = ['add', 'user', name, f'Cluster={cluster}', f'Account={account}']
                if new_user and index == 0:
                    args.append(f"DefaultAccount={user['default_account']}")
                args += _assoc_args(member, None)
                changes.append(_change('user', f'{name}/{account}', 'add', args,
                                       f'user {name} in {account}: absent',
                                       f'user {name} in {account}: {_describe(args[4:])}'.rstrip()))
                continue
            settings = _assoc_args(member, assoc)
            if settings:
                changes.append(_change('user', f'{name}/{account}', 'modify',
                                       ['modify', 'user', 'where', f'name={name}', f'cluster={cluster}',
                                        f'account={account}', 'set'] + settings,
                                       f'user {name} in {account}: {_shown(assoc, settings, ASSOC_LIMITS)}',
                                       f'user {name} in {account}: '
                                       f'{_shown(assoc, settings, ASSOC_LIMITS, result=True)}'))
        current_default = (record or {}).get('default_account') or ''
        if not new_user and user['default_account'] and user['default_account'] != current_default:
            changes.append(_change('user', name, 'modify',
                                   ['modify', 'user', 'where', f'name={name}', f'cluster={cluster}', 'set',
                                    f"DefaultAccount={user['default_account']}"],
                                   f'user {name}: DefaultAccount={current_default}',
                                   f"user {name}: DefaultAccount={user['default_account']}"))
        current_admin = (record or {}).get('admin_level') or 'None'
        if user['admin_level'] is not None and user['admin_level'].lower() != current_admin.lower():
            changes.append(_change('user', name, 'modify',
                                   ['modify', 'user', 'where', f'name={name}', 'set',
                                    f"AdminLevel={user['admin_level']}"],
                                   f'user {name}: AdminLevel={current_admin}',
                                   f"user {name}: AdminLevel={user['admin_level']}"))
        for account, member in user['memberships'].items():
            if member['state'] == 'absent' and account in members:
                removals.append(_change('user', f'{name}/{account}', 'delete',
                                        ['delete', 'user', 'where', f'name={name}', f'cluster={cluster}',
                                         f'account={account}'],
                                        f'user {name} in {account}: present', f'user {name} in {account}: absent'))
    return changes, removals


def _check_known(desired: t.Mapping, current: t.Mapping, variable: str) -> None:
    """Every QoS and account the declared state refers to exists or is declared present."""
    problems = []
    qos_known = set(current['qos']) | {n for n, e in desired['qos'].items() if e['state'] == 'present'}
    accounts_known = set(current['accounts']) | {n for n, e in desired['accounts'].items()
                                                 if e['state'] == 'present'}
    holders = [(e['path'], e) for e in desired['accounts'].values() if e['state'] == 'present']
    for user in desired['users'].values():
        if user['state'] != 'present':
            continue
        for account, member in user['memberships'].items():
            if member['state'] != 'present':
                continue
            holders.append((member['path'], member))
            if account not in accounts_known:
                problems.append(f"{member['path']}: the account {account!r} is neither declared in "
                                f'{variable}.accounts nor in the accounting database')
    for path, entry in holders:
        for name in sorted((entry['qos'] or frozenset()) | {entry['default_qos']} - {None}):
            if name not in qos_known:
                problems.append(f'{path}: the QoS {name!r} is neither declared in {variable}.qos nor in the '
                                'accounting database')
    for entry in desired['accounts'].values():
        if entry['state'] == 'present' and entry['parent'] is not None and entry['parent'] not in accounts_known:
            problems.append(f"{entry['path']}.parent: the account {entry['parent']!r} is neither declared in "
                            f'{variable}.accounts nor in the accounting database')
    if problems:
        raise AccountingError(problems)


def plan(desired: t.Mapping[str, t.Any], current: t.Mapping[str, t.Any], cluster: str,
         variable: str = 'slurm_accounting') -> list[dict[str, t.Any]]:
    """The sacctmgr changes, in the order they must run, that bring `current` to the `desired` state.

    QoS first (associations name them), then accounts (parents first), users and their memberships; removals last,
    memberships and users before accounts (children before parents) before QoS. Each change is
    {object, name, action: add|modify|delete, args (sacctmgr arguments after --immediate), before, after}.
    Raises AccountingError when a declared object refers to a QoS or account that would not exist.
    """
    _check_known(desired, current, variable)
    qos_changes, qos_removals = _plan_qos(desired['qos'], current['qos'])
    account_changes, account_removals = _plan_accounts(desired['accounts'], current, cluster)
    user_changes, user_removals = _plan_users(desired['users'], current, cluster)
    return qos_changes + account_changes + user_changes + user_removals + account_removals + qos_removals


def command_line(sacctmgr: str, change: t.Mapping[str, t.Any]) -> list[str]:
    """The argv of a change."""
    return [sacctmgr, '--immediate'] + list(change['args'])


def command_text(sacctmgr: str, change: t.Mapping[str, t.Any]) -> str:
    return shlex.join(command_line(sacctmgr, change))


def diff(changes: t.Sequence[t.Mapping[str, t.Any]]) -> dict[str, str]:
    """Ansible's diff: one line per change, before and after."""
    return {'before': ''.join(f"{change['before']}\n" for change in changes),
            'after': ''.join(f"{change['after']}\n" for change in changes)}
