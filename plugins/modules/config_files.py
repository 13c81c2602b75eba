#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: config_files
short_description: Write a role's configuration files, anywhere on the host, in one step
version_added: "0.1.0"
description:
  - Makes each file of O(files) hold its text with its owner, group and mode, and rewrites only the files whose
    content differs, each through a temporary file and a rename (a reader never sees half a file).
  - One task for a role's configuration files instead of one template task per file; every task costs a round trip
    to every host, which dominates a re-run on hundreds of hosts. Render the content on the control host
    (C(lookup('ansible.builtin.template', ...))).
  - RV(changed_files) lists the files (and directories) whose content, owner, group or mode was (or in check mode
    would be) changed, so that handlers can act on the files that concern them.
  - For a file that holds a secret, set the task keywords C(no_log) to V(true), which hides the task's arguments
    and result, and C(diff) to V(false), so that the module computes no diff even under C(--diff).
  - A symbolic link where a file belongs is replaced by the file (the link itself, through the rename); its target is
    neither read, shown in the diff nor changed. A directory, FIFO, socket or device there fails the task, naming
    the file, before anything is written; it is never opened.
  - Paths are normalised before use and before the checks for a path listed twice or both written and in O(absent)
    (V(//etc/x) and V(/etc//x) are V(/etc/x)); a relative path is refused.
  - Every owner and group is looked up before anything is written; an unknown one fails the task, naming its entry
    and field, in check mode too.
options:
  directories:
    description:
      - Directories to create when missing and give their owner, group and mode, before any file is written. Missing
        parents are created with mode 0755.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the directory.
        type: path
        required: true
      owner:
        description: Owner of the directory, a name or a number; unchanged when omitted.
        type: str
      group:
        description: Group of the directory, a name or a number; unchanged when omitted.
        type: str
      mode:
        description:
          - Mode of the directory, as a quoted string of 3 or 4 octal digits such as V('0755'), or a number taken as
            the mode itself, as M(ansible.builtin.file) takes it (unquoted, YAML reads V(0755) as 493, mode 0755).
          - From 0 to 07777; anything else fails the task, naming the entry and field.
        type: raw
        default: '0755'
  absent:
    description:
      - Absolute paths of files to remove when present (settings that turn a file off), after the files are
        written. Listing a path of O(files) here is refused. A symbolic link is removed, not its target.
    type: list
    elements: path
    default: []
  files:
    description: The files, in the order they are written.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description: The file's text (UTF-8).
        type: str
        required: true
      owner:
        description:
          - Owner of the file (and of the directories created for it), a name or a number.
          - When omitted, a file that exists keeps its owner and a new file (or one replacing a symbolic link) gets
            the user the module runs as, as with M(ansible.builtin.copy).
        type: str
      group:
        description:
          - Group of the file (and of the directories created for it), a name or a number.
          - When omitted, a file that exists keeps its group and a new file gets the group the module runs as.
        type: str
      mode:
        description:
          - Mode of the file, as a quoted string of 3 or 4 octal digits such as V('0644'), or a number taken as the
            mode itself, as M(ansible.builtin.file) takes it (unquoted, YAML reads V(0644) as 420, mode 0644).
          - From 0 to 07777; anything else, such as V('-644') or V('0o644'), fails the task, naming the entry and
            field.
        type: raw
        default: '0644'
      directory_mode:
        description:
          - Create the missing directories above the file with this mode (read as O(files[].mode)).
          - When omitted, a missing directory fails the task, naming the file; in check mode the file counts as one
            to write (an earlier task, such as a package install, would have made the directory).
        type: raw
      validate:
        description:
          - Command that checks the new content before any file is written, with V(%s) standing for a temporary
            file that holds it (as M(ansible.builtin.template)'s C(validate)), such as V(/usr/sbin/sshd -t -f %s).
          - Run only for a file whose content changes, and not in check mode. When it fails, no file of the task is
            written and the task fails naming the file and the command's output.
        type: str
  services:
    description:
      - systemd units to keep enabled at boot, running, stopped or masked, once the files are written and removed
        (the services the files belong to), so that a role's files and services take one step.
      - One C(systemctl show) reads them all; C(systemctl) then masks, unmasks, enables, disables, starts or stops
        only the units that differ, each verb once for all its units. Before that, systemd reloads its units
        (C(daemon-reload)) when this task changed a file under a unit directory (such as V(/etc/systemd/system/)) or a
        listed unit says its file changed on disk.
      - A restart for changed files stays with a handler.
      - In check mode nothing is run but C(systemctl show); a unit systemd does not know yet (an earlier step would
        have installed it) counts as one to enable or start. Otherwise such a unit fails the task, naming it.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The unit; V(.service) is added to a name without a unit suffix.
        type: str
        required: true
      enabled:
        description: Whether the unit starts at boot; unchanged when omitted.
        type: bool
      state:
        description: V(started) or V(stopped); unchanged when omitted.
        type: str
        choices: [started, stopped]
      masked:
        description: Whether the unit is masked (nothing can start it); unchanged when omitted.
        type: bool
notes:
  - Check mode and diff mode are supported; the diff shows each changed file. Existing content is compared as
    bytes, so a file that is not UTF-8 is rewritten (its diff shows the bytes that are not UTF-8 replaced).
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Write slurmd's configuration, then keep slurmd enabled and running
  llmforge.cluster.config_files:
    files:
      - path: /etc/default/slurmd
        content: "{{ lookup('ansible.builtin.template', 'slurmd.default.j2') }}"
      - path: /etc/systemd/system/slurmd.service.d/llmforge.conf
        content: "{{ lookup('ansible.builtin.template', 'slurmd-restart.conf.j2') }}"
        directory_mode: "0755"
    services:
      - name: slurmd
        enabled: true
        state: started
  register: __example_files
  notify: Restart slurmd

# The handler restarts slurmd only when one of its files changed:
#   - name: Restart slurmd
#     ansible.builtin.systemd_service: {name: slurmd, state: restarted, daemon_reload: true}
#     when: __example_files.changed_files | length > 0
"""

RETURN = r"""
changed_files:
  description:
    - Directories, then files, whose content, owner, group or mode was (or in check mode would be) changed, in the
      order of O(directories) and O(files), then the files of O(absent) that were (or would be) removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/default/slurmd]
changed_services:
  description: Units of O(services) that were (or in check mode would be) masked, unmasked, enabled, disabled,
    started or stopped, with their full names, in the order of O(services).
  returned: always
  type: list
  elements: str
  sample: [slurmd.service]
started_services:
  description:
    - Units of O(services) that were (or in check mode would be) started because they were not running, with their
      full names, in the order of O(services); a subset of RV(changed_services).
    - A unit started here has read the files this task wrote, so a handler's restart or reload for those files can
      skip it.
  returned: always
  type: list
  elements: str
  sample: [llmforge-firewall.service]
"""

import os
import shlex
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _file_tree, _units
from ansible_collections.llmforge.cluster.plugins.module_utils._module_errors import last_resort


def _make_directories(module: AnsibleModule, directories: list[str], settings: tuple, parent_settings: tuple = None) -> bool:
    """Create each of `directories` (parents first) that is missing: the last with `settings` (owner, group, mode),
    the ones above it with `parent_settings` (default: the same). Whether any was missing; in check mode nothing is
    created."""
    missing = [directory for directory in directories if not os.path.isdir(directory)]
    if not module.check_mode:
        for directory in missing:
            owner, group, mode = settings if directory == directories[-1] or parent_settings is None else parent_settings
            os.mkdir(directory, mode)
            _file_tree.settle(module, directory, owner, group, mode)
    return bool(missing)


def _owner_ids(entry: dict, field: str) -> tuple[int, int]:
    """The uid and gid of the entry's owner and group (-1 where omitted); an unknown one is refused, naming `field`."""
    return (_file_tree.user_id(entry['owner'], f'{field}.owner'), _file_tree.group_id(entry['group'], f'{field}.group'))


def _validate(module: AnsibleModule, field: str, path: str, content: str, command: str, result: dict) -> None:
    """Run `command` (it holds %s, checked with the other input) on a temporary file holding `content`; fail the task
    naming `field` and `path` unless it passes. Called for every file before any is written."""
    handle, temporary = tempfile.mkstemp(prefix='.llmforge-validate-', suffix=os.path.basename(path))
    try:
        with os.fdopen(handle, 'w', encoding='utf-8') as stream:
            stream.write(content)
        returncode, out, err = module.run_command(command.replace('%s', shlex.quote(temporary)), use_unsafe_shell=False)
    finally:
        os.unlink(temporary)
    if returncode != 0:
        module.fail_json(msg=f"{field}: the new content of {path} fails '{command}' (rc {returncode}): "
                             f"{(err or out).strip()}", **result)


def _systemctl(module: AnsibleModule, systemctl: str, args: list[str], result: dict) -> str:
    """Run `systemctl <args>`; its output, or the task fails naming the command."""
    returncode, out, err = module.run_command([systemctl] + args)
    if returncode != 0:
        module.fail_json(msg=f"services: 'systemctl {' '.join(args)}' failed (rc {returncode}): {(err or out).strip()}",
                         **result)
    return out


def _ensure_units(module: AnsibleModule, systemctl: str, wanted: list[dict], result: dict) -> tuple[list[str], list[str]]:
    """Make the units of `wanted` as asked (after a daemon-reload where a unit's file changed); the units changed and
    the units started."""
    names = [entry['name'] for entry in wanted]
    show = ['show', '--property=' + ','.join(_units.SHOW_PROPERTIES), '--'] + names
    try:
        states = _units.parse_show(_systemctl(module, systemctl, show, result), names)
        if not module.check_mode and _units.needs_reload(states, result['changed_files']):
            _systemctl(module, systemctl, ['daemon-reload'], result)
            states = _units.parse_show(_systemctl(module, systemctl, show, result), names)
        steps, changed = _units.plan(wanted, states, module.check_mode)
    except _units.UnitError as err:
        module.fail_json(msg=str(err), **result)
    if not module.check_mode:
        for verb, units in steps:
            _systemctl(module, systemctl, [verb, '--'] + units, result)
    return changed, dict(steps).get('start', [])


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            'directories': {'type': 'list', 'elements': 'dict', 'default': [], 'options': {
                'path': {'type': 'path', 'required': True},
                'owner': {'type': 'str'},
                'group': {'type': 'str'},
                'mode': {'type': 'raw', 'default': '0755'},
            }},
            'absent': {'type': 'list', 'elements': 'path', 'default': []},
            'files': {'type': 'list', 'elements': 'dict', 'default': [], 'options': {
                'path': {'type': 'path', 'required': True},
                'content': {'type': 'str', 'required': True},
                'owner': {'type': 'str'},
                'group': {'type': 'str'},
                'mode': {'type': 'raw', 'default': '0644'},
                'directory_mode': {'type': 'raw'},
                'validate': {'type': 'str'},
            }},
            'services': {'type': 'list', 'elements': 'dict', 'default': [], 'options': {
                'name': {'type': 'str', 'required': True},
                'enabled': {'type': 'bool'},
                'state': {'type': 'str', 'choices': ['started', 'stopped']},
                'masked': {'type': 'bool'},
            }},
        },
        supports_check_mode=True,
    )
    files = module.params['files']
    directories = module.params['directories']
    result = {'changed': False, 'changed_files': [], 'changed_services': [], 'started_services': []}
    with last_resort(module.fail_json, what='files', **result):
        # Every input is checked, every owner and group looked up, before anything is read or written.
        try:
            directory_paths = [_file_tree.check_absolute(entry['path'], f'directories[{index}].path', 'directory')
                               for index, entry in enumerate(directories)]
            directory_own_modes = [_file_tree.octal_mode(entry['mode'], f'directories[{index}].mode')
                                   for index, entry in enumerate(directories)]
            for index, entry in enumerate(directories):
                _owner_ids(entry, f'directories[{index}]')
            modes = [_file_tree.octal_mode(entry['mode'], f'files[{index}].mode') for index, entry in enumerate(files)]
            directory_modes = [None if entry['directory_mode'] is None
                               else _file_tree.octal_mode(entry['directory_mode'], f'files[{index}].directory_mode')
                               for index, entry in enumerate(files)]
            file_ids = [_owner_ids(entry, f'files[{index}]') for index, entry in enumerate(files)]
            absent = [_file_tree.check_absolute(path, f'absent[{index}]')
                      for index, path in enumerate(module.params['absent'])]
            changes = {change['path']: change for change in _file_tree.plan_files(files)}
            wanted = _units.check_wanted(module.params['services'])
        except (_file_tree.FileTreeError, _units.UnitError) as err:
            module.fail_json(msg=str(err), **result)
        # Found before anything is written: a host without systemctl fails with nothing changed.
        systemctl = module.get_bin_path('systemctl', required=True) if wanted else None
        for index, entry in enumerate(files):
            if entry['validate'] is not None and '%s' not in entry['validate']:
                module.fail_json(msg=f"files[{index}].validate: '{entry['validate']}' must contain %s (the file to check)",
                                 **result)
        # plan_files checked them: the same normalised paths, '//etc/x' being '/etc/x'.
        paths = [_file_tree.normalise_absolute(entry['path']) for entry in files]
        # Every file's directories are checked before anything is written: a missing one fails the task as a whole.
        missing = {}
        listed = set(directory_paths)
        for index, entry in enumerate(files):
            missing[index] = [directory for directory in _file_tree.missing_directories(paths[index])
                              if directory not in listed and not any(other.startswith(directory + '/') for other in listed)]
            # In check mode an earlier task (a package) would have made it: the file counts as one to write.
            if missing[index] and directory_modes[index] is None and not module.check_mode:
                module.fail_json(msg=f"files[{index}].path: the directory {missing[index][0]} of {entry['path']} does not "
                                     'exist (set directory_mode to create it)', **result)
        written = set(paths)
        both = [path for path in absent if path in written]
        if both:
            module.fail_json(msg=f'absent: {both[0]} is also one of files', **result)
        if not module.check_mode:
            for index, (entry, path) in enumerate(zip(files, paths)):
                if entry['validate'] and path in changes:
                    _validate(module, f'files[{index}]', path, changes[path]['after'], entry['validate'], result)
        changed = []
        for index, (entry, path) in enumerate(zip(directories, directory_paths)):
            # Missing parents get 0755 and root's ownership; the listed directory its own settings.
            own = (entry['owner'], entry['group'], directory_own_modes[index])
            chain = _file_tree.missing_directories(path) + [path]
            touched = _make_directories(module, chain, own, parent_settings=(None, None, 0o755))
            if os.path.isdir(path):
                touched = _file_tree.settle(module, path, *own) or touched
            if touched:
                changed.append(path)
        for index, (entry, path) in enumerate(zip(files, paths)):
            touched = _make_directories(module, missing[index],
                                        (entry['owner'], entry['group'], directory_modes[index])) or path in changes
            if path in changes and not module.check_mode:
                try:
                    _file_tree.write([changes[path]], modes[index], *file_ids[index])
                except _file_tree.FileTreeError as err:
                    result.update(changed=bool(changed), changed_files=changed)
                    module.fail_json(msg=str(err), **result)
            # A link still in place (check mode) is a change already; its target is never looked at.
            if os.path.isfile(path) and not os.path.islink(path):
                touched = _file_tree.settle(module, path, entry['owner'], entry['group'], modes[index]) or touched
            if touched:
                changed.append(path)
        for path in absent:
            if os.path.lexists(path):
                if os.path.isdir(path) and not os.path.islink(path):
                    result.update(changed=bool(changed), changed_files=changed)
                    module.fail_json(msg=f'absent: {path} is a directory, not a file', **result)
                changed.append(path)
                if not module.check_mode:
                    os.unlink(path)
        result['changed_files'] = changed
        result['changed'] = bool(changed)
        if wanted:
            result['changed_services'], result['started_services'] = _ensure_units(module, systemctl, wanted, result)
            result['changed'] = bool(changed or result['changed_services'])
        if module._diff:
            result['diff'] = _file_tree.diff(changes.values())
    module.exit_json(**result)


if __name__ == '__main__':
    main()
