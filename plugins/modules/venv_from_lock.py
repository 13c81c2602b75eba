#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: venv_from_lock
short_description: Build a Python virtual environment from a hash-checked pip lock, all or nothing
version_added: "0.1.0"
description:
  - Builds a virtual environment at O(path) with C(python -m venv), keeps the lock in it as C(llmforge-lock.txt) and
    installs it with C(pip install --require-hashes --only-binary=:all:), so that every file pip installs is checked
    against its hash.
  - The environment is complete once its marker C(llmforge-env.json) exists; the marker is written last, through a
    rename. A complete environment is left as it is (the task reports no change). A directory without the marker
    is what an interrupted build left; it is removed and built again.
  - When the environment cannot be created or pip fails, the new directory is removed and the module fails with the
    last lines pip printed. Nothing outside O(path) changes, so a link to the environment in use and other
    environments beside it stay as they were.
  - The parent directory of O(path) is made when missing (root's, mode 0755).
  - The build lives in C(plugins/module_utils/_venv_build.py), which has no Ansible import.
options:
  path:
    description: Absolute directory of the environment, for example C(/opt/envs/train-<digest of the lock>).
    type: path
    required: true
  lock:
    description:
      - The pip lock as text, each requirement C(name==version) with C(--hash=sha256:...) options.
      - Empty builds an environment without packages of its own (with O(system_site_packages), on the OS's ones).
    type: str
    default: ""
  python:
    description: Interpreter the environment is made from.
    type: path
    default: /usr/bin/python3
  system_site_packages:
    description: Let the environment see the interpreter's site packages (C(--system-site-packages)).
    type: bool
    default: false
  wheelhouse:
    description: Directory holding every wheel of the lock; pip then runs with C(--no-index) and never reaches an index.
    type: path
    default: ""
  index_url:
    description: Package index pip installs from, when no O(wheelhouse) is given; empty uses pip's configuration.
    type: str
    default: ""
  marker:
    description: What the marker file C(llmforge-env.json) records, as JSON (for example the lock's name and digest).
    type: dict
    default: {}
  timeout:
    description: Seconds each of C(python -m venv) and C(pip install) may take before it is stopped and the build fails.
    type: int
    default: 3600
attributes:
  check_mode:
    support: full
    description: Reports whether the environment would be built (its marker is missing) and builds nothing.
  diff_mode:
    support: none
    description: A built environment is thousands of files; the module reports only that it was built.
notes:
  - The name of O(path) should change with the lock (the training_env role puts the lock's digest in it), so that a
    new lock builds beside the environment in use instead of replacing it.
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Build the training environment from its lock, from an offline wheelhouse
  llmforge.cluster.venv_from_lock:
    path: /opt/envs/train-3f2a9c1b7d4e
    lock: |
      numpy==2.1.3 \
          --hash=sha256:874bfe7d2ab4c8c2f42ca4fd7b4a1b8c1c0aa4cec8bf7d2b1f1e3bd5a8d05b52
    wheelhouse: /srv/wheels
    marker:
      name: train-3f2a9c1b7d4e
"""

RETURN = r"""
path:
  description: The environment's directory.
  returned: always
  type: str
  sample: /opt/envs/train-3f2a9c1b7d4e
marker:
  description: The marker file whose presence means the environment is complete.
  returned: always
  type: str
  sample: /opt/envs/train-3f2a9c1b7d4e/llmforge-env.json
built:
  description: True when this run built the environment (never in check mode).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _venv_build as venv_build


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            lock=dict(type='str', default=''),
            python=dict(type='path', default='/usr/bin/python3'),
            system_site_packages=dict(type='bool', default=False),
            wheelhouse=dict(type='path', default=''),
            index_url=dict(type='str', default=''),
            marker=dict(type='dict', default={}),
            timeout=dict(type='int', default=3600),
        ),
        supports_check_mode=True,
    )
    settings = venv_build.Settings(**module.params)
    result = dict(changed=False, built=False, path=settings.path, marker=venv_build.marker_path(settings.path))
    problems = venv_build.settings_problems(settings)
    if problems:
        module.fail_json(msg='venv_from_lock: ' + '; '.join(problems), **result)
    if venv_build.is_complete(settings.path):
        module.exit_json(**result)
    result['changed'] = True
    if module.check_mode:
        module.exit_json(**result)
    with errors.last_resort(module.fail_json, f'the build of {settings.path}', **result):
        try:
            venv_build.build(settings)
        except venv_build.BuildError as err:
            module.fail_json(msg=f'{err}. {settings.path} was removed; nothing outside it was changed.', **result)
    result['built'] = True
    module.exit_json(**result)


if __name__ == '__main__':
    main()
