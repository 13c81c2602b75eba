#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_accounting
short_description: Slurm accounts, users and QoS declared in variables, applied with sacctmgr
version_added: "0.1.0"
description:
  - Reads the accounting database with four C(sacctmgr --noheader --parsable2 show) commands (qos, account, user and
    assoc of O(cluster)), compares it with the declared O(qos), O(accounts) and O(users), and runs the
    C(sacctmgr --immediate add|modify|delete) commands that bring it there, in order - QoS, accounts (parents first),
    users and their memberships, then removals.
  - Only what is declared is managed. A setting left out is left as it is; a QoS, account, user or membership the
    lists do not name is never touched; only one marked C(state=absent) is removed. A second run changes nothing.
  - Limits use Slurm's own names (V(GrpTRES), V(MaxTRESPerUser), V(MaxWall)...). Each association's own values are
    compared (C(WOPLimits)), not those inherited from its parent account, and -1 clears a limit.
  - The declared lists are checked first; a problem fails the module naming the variable path
    (C(slurm_accounting.accounts[2].name)), before any command runs. The logic lives in
    C(plugins/module_utils/_sacctmgr.py).
  - sacctmgr does not check that a user exists on the system. slurmctld, however, maps user names to uids when it
    learns of an association; a user that appears on the controller later (SSSD set up afterwards) cannot submit
    until C(scontrol reconfigure) or slurmctld's hourly refresh. The module warns about such users.
options:
  cluster:
    description: The cluster (ClusterName) whose associations are managed; it must be registered in accounting.
    type: str
    required: true
  qos:
    description:
      - QoS, each C({name, description, priority, flags, limits, state}). C(flags) is the full list of QoS
        flags (V([]) clears them); C(limits) maps Slurm QoS limit names (V(MaxTRESPerUser), V(MaxWall),
        V(GrpTRES), V(MaxJobsPerUser)...) to values - TRES as V(gres/gpu=8,cpu=64) or a mapping, times as quoted
        strings such as V("00:30:00").
    type: list
    elements: dict
    default: []
  accounts:
    description:
      - Accounts, each C({name, parent, description, organization, fairshare, qos, default_qos, limits, state}).
        C(qos) is the full list of QoS the account's jobs may use; C(limits) maps association
        limit names (V(GrpTRES), V(MaxTRESPerJob), V(MaxWall), V(GrpJobs)...) to values.
    type: list
    elements: dict
    default: []
  users:
    description:
      - Users, each C({name, accounts, default_account, admin_level, fairshare, qos, default_qos, limits, state}).
        C(accounts) lists the accounts the user is a member of, as names or as
        C({name, fairshare, qos, default_qos, limits, state}) with settings of its own for that membership; a
        membership marked C(state=absent) is removed. C(default_account) defaults to the first account.
    type: list
    elements: dict
    default: []
  variable:
    description: The name the declared lists have in the inventory, used in error messages.
    type: str
    default: slurm_accounting
  sacctmgr_path:
    description: Path or name (searched in PATH) of C(sacctmgr).
    type: str
    default: sacctmgr
  timeout:
    description: Seconds each sacctmgr command may run.
    type: int
    default: 60
attributes:
  check_mode:
    support: full
    description: Reads the database and returns the commands it would run in RV(commands), running none.
  diff_mode:
    support: full
    description: One line per change, before and after.
requirements:
  - C(sacctmgr) on the managed node, able to reach slurmdbd as a Slurm administrator (root or SlurmUser).
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Two teams sharing the GPUs by fair share, a debug QoS for short jobs
  llmforge.cluster.slurm_accounting:
    cluster: prod
    qos:
      - name: normal
        limits: {MaxTRESPerUser: gres/gpu=16}
      - name: debug
        priority: 1000
        flags: [DenyOnLimit]
        limits: {MaxTRESPerUser: gres/gpu=2, MaxWall: "00:30:00"}
    accounts:
      - name: research
        fairshare: 60
        qos: [normal, debug]
        default_qos: normal
        limits: {GrpTRES: gres/gpu=64}
      - name: production
        fairshare: 40
        qos: [normal, debug]
        default_qos: normal
    users:
      - name: alice
        accounts: [research]
      - name: bob
        accounts: [production, {name: research, fairshare: 5}]
        default_account: production
      - name: mallory
        state: absent

- name: See what would change
  llmforge.cluster.slurm_accounting:
    cluster: prod
    users: [{name: carol, accounts: [research]}]
  check_mode: true
  diff: true
  register: accounting

- name: Show the commands
  ansible.builtin.debug:
    var: accounting.commands
"""

RETURN = r"""
commands:
  description: The sacctmgr commands run (in check mode, those that would run), in order, as shell-quoted strings.
  returned: always
  type: list
  elements: str
  sample: ["sacctmgr --immediate add qos debug Priority=1000 MaxTRESPerUser=gres/gpu=2 MaxWall=00:30:00"]
changes:
  description: What each command changes.
  returned: always
  type: list
  elements: dict
  contains:
    object:
      description: V(qos), V(account) or V(user).
      type: str
    name:
      description: The QoS, account or user; C(user/account) for a user's membership of an account.
      type: str
      sample: alice/research
    action:
      description: V(add), V(modify) or V(delete).
      type: str
    args:
      description: The sacctmgr arguments after C(--immediate).
      type: list
      elements: str
    before:
      description: The changed settings before, one line.
      type: str
    after:
      description: The changed settings after, one line.
      type: str
unknown_users:
  description: Declared users the controller cannot resolve to a uid now (slurmctld refuses their jobs until it can).
  returned: always
  type: list
  elements: str
"""

import pwd
import shlex

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _sacctmgr as acct


def run(sacctmgr, args, timeout):
    """(rc, stdout, stderr) of one sacctmgr command, or (None, '', why) when it could not run or timed out."""
    try:
        return proc.run([sacctmgr] + list(args), timeout)
    except proc.CommandError as err:
        return None, '', str(err)


def read_state(module, sacctmgr, cluster, timeout):
    outputs = {}
    for name, args in acct.show_commands(cluster).items():
        rc, out, err = run(sacctmgr, args, timeout)
        if rc != 0:
            module.fail_json(msg=f'reading the accounting database failed: {shlex.join([sacctmgr] + args)}: '
                                 f"{'' if rc is None else f'rc {rc}: '}{(err or out).strip()}",
                             changed=False, commands=[], changes=[], unknown_users=[])
        outputs[name] = out
    return acct.current_state(outputs, cluster)


def unknown_users(desired):
    missing = []
    for name, user in desired['users'].items():
        if user['state'] != 'present':
            continue
        try:
            pwd.getpwnam(name)
        except KeyError:
            missing.append(name)
    return missing


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cluster=dict(type='str', required=True),
            qos=dict(type='list', elements='dict', default=[]),
            accounts=dict(type='list', elements='dict', default=[]),
            users=dict(type='list', elements='dict', default=[]),
            variable=dict(type='str', default='slurm_accounting'),
            sacctmgr_path=dict(type='str', default='sacctmgr'),
            timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(changed=False, commands=[], changes=[], unknown_users=[])
    if params['timeout'] <= 0:
        module.fail_json(msg=f"timeout must be a positive number of seconds, got {params['timeout']}", **empty)
    sacctmgr = params['sacctmgr_path']
    if '/' not in sacctmgr:
        sacctmgr = module.get_bin_path(sacctmgr, opt_dirs=['/usr/bin', '/usr/sbin', '/usr/local/bin']) or sacctmgr
    spec = {key: params[key] for key in ('qos', 'accounts', 'users')}
    with errors.last_resort(module.fail_json, 'the declared accounting state and sacctmgr output', **empty):
        try:
            desired = acct.validate(spec, params['variable'])
            current = read_state(module, sacctmgr, params['cluster'], params['timeout'])
            changes = acct.plan(desired, current, params['cluster'], params['variable'])
        except acct.AccountingError as err:
            module.fail_json(msg='; '.join(err.problems), **empty)
        except acct.OutputError as err:
            module.fail_json(msg=f'unexpected sacctmgr output: {err}', **empty)
        missing = unknown_users(desired)
        if missing:
            module.warn(f"users unknown on this host: {', '.join(missing)}; slurmctld refuses their jobs until they "
                        'resolve here and it is reconfigured (scontrol reconfigure) or refreshes within an hour')
        done = []
        result = dict(changed=bool(changes), changes=changes, unknown_users=missing,
                      commands=[acct.command_text(sacctmgr, change) for change in changes])
        if module._diff:
            result['diff'] = acct.diff(changes)
        if not module.check_mode:
            for change in changes:
                rc, out, err = run(sacctmgr, ['--immediate'] + change['args'], params['timeout'])
                if rc != 0:
                    result.update(changed=bool(done), changes=done,
                                  commands=[acct.command_text(sacctmgr, c) for c in done])
                    module.fail_json(msg=f"{acct.command_text(sacctmgr, change)} failed"
                                         f"{'' if rc is None else f' (rc {rc})'}: {(err or out).strip()}", **result)
                done.append(change)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
