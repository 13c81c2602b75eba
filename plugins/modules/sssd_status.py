#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sssd_status
short_description: Read whether SSSD reaches its directory, after a group lookup that makes it connect
version_added: "0.1.0"
description:
  - SSSD reports a domain online until a lookup fails and then answers from its cache, so its state is read after a
    lookup. The module looks O(group) up with C(getent group) (up to O(group_tries) times), then reads
    C(sssctl domain-status --online O(domain)) (up to O(status_tries) times, until it says online), O(delay) seconds
    apart, which gives a freshly restarted SSSD the seconds it needs.
  - Reads only; it never fails because the directory is offline or the group is missing. The caller judges
    RV(online) and RV(group_resolved) (the sssd role stops with messages that name its variables).
  - The reading lives in C(plugins/module_utils/_sssd_status.py), which has no Ansible import.
options:
  domain:
    description: The SSSD domain, the C([domain/<name>]) section of C(sssd.conf).
    type: str
    required: true
  group:
    description: Group looked up to make SSSD connect, for example the cluster's admin group.
    type: str
    required: true
  group_tries:
    description: How many times the group is looked up before it counts as missing.
    type: int
    default: 1
  status_tries:
    description: How many times the domain's state is read before it counts as offline.
    type: int
    default: 6
  delay:
    description: Seconds between two tries.
    type: float
    default: 3
  timeout:
    description: Seconds each C(getent) or C(sssctl) call may take; one that takes longer counts as a failed try.
    type: float
    default: 10
extends_documentation_fragment:
  - llmforge.cluster.validator.read_only
requirements:
  - C(sssctl) (Debian and Ubuntu C(sssd-tools), Rocky/RHEL C(sssd-tools)) and the InfoPipe responder it asks
    (C(sssd-dbus)).
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Ask whether SSSD reaches the directory, after a lookup of the admin group
  llmforge.cluster.sssd_status:
    domain: ldap
    group: hpcadmins
    group_tries: 11
  register: sssd_state

- name: Stop when it does not
  ansible.builtin.assert:
    that: sssd_state.online and sssd_state.group_resolved
    fail_msg: "{{ sssd_state.messages | join('; ') }}"
"""

RETURN = r"""
online:
  description: sssctl says the domain is online.
  returned: always
  type: bool
domain_status:
  description: What the last C(sssctl domain-status --online) printed (its error, when it could not run).
  returned: always
  type: str
  sample: "Online status: Online\n\nActive servers:\nLDAP: ldap1.example.org"
group_resolved:
  description: C(getent group) found O(group).
  returned: always
  type: bool
group_entry:
  description: The group's entry as C(getent group) printed it; empty when it was not found.
  returned: always
  type: str
  sample: "hpcadmins:*:5000:alice,bob"
messages:
  description: One line for the domain's state and one for the lookup, as found.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _sssd_status as sssd_status


def main():
    module = AnsibleModule(
        argument_spec=dict(
            domain=dict(type='str', required=True),
            group=dict(type='str', required=True),
            group_tries=dict(type='int', default=1),
            status_tries=dict(type='int', default=6),
            delay=dict(type='float', default=3),
            timeout=dict(type='float', default=10),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for name in ('group_tries', 'status_tries'):
        if params[name] < 1:
            module.fail_json(msg=f'{name} must be at least 1, got {params[name]}')
    for name in ('delay', 'timeout'):
        if params[name] < 0 or (name == 'timeout' and params[name] == 0):
            module.fail_json(msg=f'{name} must be a positive number of seconds, got {params[name]:g}')
    with errors.last_resort(module.fail_json, f'the state of the SSSD domain {params["domain"]}'):
        status = sssd_status.check(params['domain'], params['group'], params['group_tries'], params['status_tries'],
                                   params['delay'], params['timeout'])
    module.exit_json(changed=False, **status._asdict())


if __name__ == '__main__':
    main()
