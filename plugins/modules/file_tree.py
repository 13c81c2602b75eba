#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_tree
short_description: Write the files of a Python package below one directory, comparing them all in one step
version_added: "0.1.0"
description:
  - Makes every file of O(files) hold the given text below O(root), creating the directories it needs, and
    rewrites only the files whose content differs, each through a temporary file and a rename.
  - One task for a whole package of files instead of one per file; on hundreds of hosts the round trips a copy
    loop costs dominate a run.
  - Files below O(root) that O(files) does not list are left alone.
  - A symbolic link where a file belongs is replaced by the file (the link itself, through the rename); its target is
    neither read, shown in the diff nor changed. A directory, FIFO, socket or device there fails the task, naming
    the file, before anything is written; it is never opened.
options:
  root:
    description: Absolute directory the paths of O(files) are relative to; created when missing.
    type: path
    required: true
  files:
    description:
      - Relative path (no C(..), not absolute) to the file's text (UTF-8).
    type: dict
    required: true
  owner:
    description:
      - Owner of the files and of the directories the module creates or manages, a name or a number.
      - When omitted, a file that exists keeps its owner and a new file gets the user the module runs as. An unknown
        name fails the task before anything is written, in check mode too.
    type: str
  group:
    description:
      - Group of the files and directories, a name or a number.
      - When omitted, a file that exists keeps its group and a new file gets the group the module runs as.
    type: str
  mode:
    description:
      - Mode of the files, as a quoted string of 3 or 4 octal digits such as V('0644'), or a number taken as the mode
        itself, as M(ansible.builtin.file) takes it (unquoted, YAML reads V(0644) as 420, mode 0644).
      - From 0 to 07777; anything else, such as V('-644') or V('0o644'), fails the task.
    type: raw
    default: '0644'
  directory_mode:
    description: Mode of O(root) and the directories below it that hold the files, read as O(mode).
    type: raw
    default: '0755'
notes:
  - Check mode and diff mode are supported; the diff shows each changed file. Existing content is compared as
    bytes, so a file that is not UTF-8 is rewritten.
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Install a Python package in one step
  llmforge.cluster.file_tree:
    root: /usr/local/lib/example/python
    files:
      example/__init__.py: ""
      example/main.py: "{{ lookup('ansible.builtin.file', 'main.py') }}"
    owner: root
    group: root
    mode: "0644"
"""

RETURN = r"""
changed_files:
  description: Paths relative to O(root) whose content was (or in check mode would be) written.
  returned: always
  type: list
  elements: str
  sample: [example/main.py]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _file_tree
from ansible_collections.llmforge.cluster.plugins.module_utils._module_errors import last_resort


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            'root': {'type': 'path', 'required': True},
            'files': {'type': 'dict', 'required': True},
            'owner': {'type': 'str'},
            'group': {'type': 'str'},
            'mode': {'type': 'raw', 'default': '0644'},
            'directory_mode': {'type': 'raw', 'default': '0755'},
        },
        supports_check_mode=True,
    )
    root = module.params['root']
    if not os.path.isabs(root):
        module.fail_json(msg=f'root: {root!r} must be an absolute path')
    root = _file_tree.normalise_absolute(root)
    owner, group = module.params['owner'], module.params['group']
    # Checked, and the owner and group looked up, before anything is read or written (check mode too).
    try:
        file_mode = _file_tree.octal_mode(module.params['mode'], 'mode')
        dir_mode = _file_tree.octal_mode(module.params['directory_mode'], 'directory_mode')
        ids = (_file_tree.user_id(owner, 'owner'), _file_tree.group_id(group, 'group'))
    except _file_tree.FileTreeError as err:
        module.fail_json(msg=str(err))
    result = {'changed': False, 'changed_files': []}
    with last_resort(module.fail_json, what=root, **result):
        try:
            changes = _file_tree.plan(root, module.params['files'])
            dirs = _file_tree.directories(root, module.params['files'])
        except _file_tree.FileTreeError as err:
            module.fail_json(msg=str(err), **result)
        result['changed_files'] = [change['relative'] for change in changes]
        result['changed'] = bool(changes)
        if module._diff:
            result['diff'] = _file_tree.diff(changes)
        for directory in dirs:
            if not os.path.isdir(directory):
                result['changed'] = True
                if module.check_mode:
                    continue
                os.makedirs(directory, exist_ok=True)
            result['changed'] = _file_tree.settle(module, directory, owner, group, dir_mode, result['changed'])
        if not module.check_mode:
            try:
                _file_tree.write(changes, file_mode, *ids)
            except _file_tree.FileTreeError as err:
                module.fail_json(msg=str(err), **result)
        for relative in module.params['files']:
            path = os.path.join(root, _file_tree.check_relative(relative))
            # In check mode a missing file or a link still in place is a change already; a link's target is never
            # looked at.
            if module.check_mode and (not os.path.exists(path) or os.path.islink(path)):
                continue
            result['changed'] = _file_tree.settle(module, path, owner, group, file_mode, result['changed'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
