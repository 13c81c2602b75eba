#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bcrypt_hash
short_description: Hash a password with bcrypt, keeping a hash already in place that still matches it
version_added: "0.1.0"
description:
  - Returns a bcrypt hash of O(password), as the C(basic_auth_users) of a Prometheus, Alertmanager or
    node_exporter web configuration file takes it.
  - A bcrypt hash has a random salt, so hashing again on every run would change the file every run. When
    O(current) is a bcrypt hash of the same password and cost, it is returned unchanged (RV(reused) is true);
    otherwise a new hash is made.
  - Computes only; it changes nothing on the managed node and always reports C(changed=false).
  - The decision lives in C(plugins/module_utils/_bcrypt_hash.py), which has no Ansible import.
options:
  password:
    description: The password to hash, at most 72 bytes in UTF-8 (bcrypt reads no more).
    type: str
    required: true
  current:
    description:
      - The hash in use now, for example read from the web configuration file; empty when there is none.
      - Returned as it is when it is a bcrypt hash of O(password) at cost O(cost). Any other value, including a
        hash of the right shape that bcrypt cannot check (such as one with an invalid salt), is replaced by a new
        hash (RV(reused) is false).
    type: str
    default: ""
  cost:
    description: bcrypt cost factor (2^cost rounds), 4 to 31. A hash of another cost is replaced.
    type: int
    default: 12
attributes:
  check_mode:
    support: full
    description: Computes the same hash in check mode; nothing is written in either mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show.
notes:
  - Run the task with C(no_log) so that the password is not logged.
requirements:
  - The Python C(bcrypt) package on the managed node (Debian and Ubuntu C(python3-bcrypt), Rocky/RHEL C(python3-bcrypt)).
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Hash the web users' passwords, keeping the hashes already in web.yml
  llmforge.cluster.bcrypt_hash:
    password: "{{ item.password }}"
    current: "{{ (current_web_config.basic_auth_users | default({}))[item.name] | default('') }}"
  loop: "{{ web_users }}"
  loop_control:
    label: "{{ item.name }}"
  register: web_hashes
  no_log: true
"""

RETURN = r"""
hash:
  description: The bcrypt hash of the password (O(current) when that one still matches).
  returned: success
  type: str
  sample: $2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW
reused:
  description:
    - True when O(current) matched the password and the cost and is returned unchanged.
    - False when a new hash was made, also when bcrypt could not check O(current).
  returned: success
  type: bool
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.llmforge.cluster.plugins.module_utils import _bcrypt_hash as bcrypt_hash
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors

try:
    import bcrypt
except ImportError:
    bcrypt = None
    BCRYPT_IMPORT_ERROR = traceback.format_exc()
else:
    BCRYPT_IMPORT_ERROR = None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            password=dict(type='str', required=True, no_log=True),
            current=dict(type='str', default=''),
            cost=dict(type='int', default=12),
        ),
        supports_check_mode=True,
    )
    if bcrypt is None:
        module.fail_json(msg=missing_required_lib('bcrypt (Debian/Ubuntu: python3-bcrypt)'), exception=BCRYPT_IMPORT_ERROR)
    # The message of a last-resort failure names what was being done, never the password.
    with errors.last_resort(module.fail_json, 'the password to hash'):
        try:
            hashed, reused = bcrypt_hash.password_hash(bcrypt, module.params['password'], module.params['current'],
                                                       module.params['cost'])
        except bcrypt_hash.BcryptHashError as err:
            module.fail_json(msg=f'cannot hash the password: {err}')
    module.exit_json(changed=False, hash=hashed, reused=reused)


if __name__ == '__main__':
    main()
