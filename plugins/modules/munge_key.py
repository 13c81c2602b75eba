#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: munge_key
short_description: Install a binary munge key given in base64, readable by munge alone, and say when munge must restart
version_added: "0.1.0"
description:
  - Makes O(path) hold the bytes of O(key) (base64), owned by O(owner) and O(group) with mode 0400. A key that
    differs is written to a temporary file next to it, flushed to disk and renamed over it, so that munge never reads
    half a key; a key whose bytes match but whose owner, group or mode drifted is given back to munge alone.
  - M(ansible.builtin.copy) writes text only, so it cannot hold a key of random bytes without a copy of it on the
    control host's disk.
  - munge reads its key when it starts. When the key changes, O(restart_marker) is created before it does, and
    RV(restart_pending) stays true for as long as that file exists; the caller restarts munge, checks that it answers,
    then removes the file. A run interrupted in between restarts munge on the next run although the key no longer
    changes.
  - With O(random_bytes) instead of O(key), a missing key file is created the same way with that many random bytes
    (a cluster's key generated once); an existing one is left as it is.
  - Set the task keyword C(no_log) to V(true), since the key is a secret (the option is also marked as one).
  - The work lives in C(plugins/module_utils/_munge_key.py), which has no Ansible import.
options:
  key:
    description: The key, base64 encoded (white space is ignored). One of O(key) and O(random_bytes) is required.
    type: str
  random_bytes:
    description: Size in bytes of the key to generate where O(path) does not exist, when O(key) is not given.
    type: int
  path:
    description: The key file munge reads.
    type: path
    default: /etc/munge/munge.key
  owner:
    description: The user munge runs as, who owns the key.
    type: str
    default: munge
  group:
    description: The key's group.
    type: str
    default: munge
  restart_marker:
    description: File created when the key changes and left for the caller to remove once munge has restarted with it;
      empty for none.
    type: path
    default: ''
attributes:
  check_mode:
    support: full
    description: Compares without writing; where the owner does not exist yet (munge not installed), the key counts
      as one to write.
  diff_mode:
    support: none
    description: The key is a secret; no diff is shown.
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Install the cluster munge key
  llmforge.cluster.munge_key:
    key: "{{ vault_munge_key }}"
    restart_marker: /etc/munge/.munge.key.restart-pending
  register: munge_key
  no_log: true

- name: Restart munge with the new key
  ansible.builtin.systemd_service:
    name: munge
    state: restarted
  when: munge_key.restart_pending

- name: Generate a cluster key once
  llmforge.cluster.munge_key:
    path: /etc/munge/cluster.key
    random_bytes: 1024
  no_log: true
"""

RETURN = r"""
restart_pending:
  description: The key changed in this run (or would in check mode), or an earlier change's restart marker is still
    there; munge has to be restarted before it uses the key.
  returned: always
  type: bool
"""

import grp
import os
import pwd

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _munge_key as munge_key


def _lookup(module: AnsibleModule, option: str, database, name: str):
    """The uid or gid of `name`; None in check mode where it is unknown (munge not installed yet)."""
    try:
        return database(name)[2]
    except KeyError:
        if module.check_mode:
            return None
        module.fail_json(msg=f'{option}: {name} is not known on this host (is munge installed?)', restart_pending=False)
    return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            key=dict(type='str', no_log=True),
            random_bytes=dict(type='int'),
            path=dict(type='path', default='/etc/munge/munge.key'),
            owner=dict(type='str', default='munge'),
            group=dict(type='str', default='munge'),
            restart_marker=dict(type='path', default=''),
        ),
        required_one_of=[('key', 'random_bytes')],
        mutually_exclusive=[('key', 'random_bytes')],
        supports_check_mode=True,
    )
    params = module.params
    if params['key'] is None:
        if params['random_bytes'] < munge_key.MIN_BYTES:
            module.fail_json(msg=f'random_bytes: munge needs at least {munge_key.MIN_BYTES} bytes, '
                                 f'got {params["random_bytes"]}', restart_pending=False)
        if os.path.lexists(params['path']):
            module.exit_json(changed=False, restart_pending=False)
    uid = _lookup(module, 'owner', pwd.getpwnam, params['owner'])
    gid = _lookup(module, 'group', grp.getgrnam, params['group'])
    with errors.last_resort(module.fail_json, f'the munge key {params["path"]}', restart_pending=False):
        try:
            data = munge_key.decode(params['key']) if params['key'] is not None else os.urandom(params['random_bytes'])
            chosen = munge_key.plan(params['path'], data, uid, gid, params['restart_marker'])
            if not module.check_mode:
                munge_key.install(params['path'], data, uid, gid, chosen, params['restart_marker'])
        except munge_key.MungeKeyError as err:
            module.fail_json(msg=str(err), restart_pending=False)
    module.exit_json(changed=chosen.write or chosen.settle, restart_pending=chosen.restart_pending)


if __name__ == '__main__':
    main()
