# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node's edits of sshd's PAM file for pam_slurm_adopt, run as the role runs them.

The blockinfile, lineinfile and replace tasks of roles/slurm_node/tasks/adopt.yml are read from the task file,
their arguments templated with Debian's values (roles/slurm_common/vars/Debian.yml, roles/slurm_node/vars and
defaults), and run in this process by ansible.builtin's own modules on Debian 13's /etc/pam.d/sshd as distributed
(tests/fixtures/pam/debian13-sshd.before) and as converged (debian13-sshd.after): the admins' exemption and
pam_slurm_adopt end the account stack, the sessions leave pam_systemd out, a second run changes nothing, and adopt
off gives the distributed file back.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args
from ansible.modules import blockinfile, lineinfile, replace
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / 'tests/fixtures/pam'
ROLE = REPO / 'roles/slurm_node'
# /etc/pam.d/sshd of Debian 13 as openssh-server installs it, and as the role leaves it with adopt on.
BEFORE = (FIXTURES / 'debian13-sshd.before').read_text(encoding='utf-8')
AFTER = (FIXTURES / 'debian13-sshd.after').read_text(encoding='utf-8')
MODULE = '/usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so'
MODULES = {'ansible.builtin.blockinfile': blockinfile, 'ansible.builtin.lineinfile': lineinfile,
           'ansible.builtin.replace': replace}


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding='utf-8'))


def _pam_tasks() -> list[dict]:
    """adopt.yml's tasks that edit sshd's PAM file, in their order."""
    return [task for task in _load(ROLE / 'tasks/adopt.yml')
            if any(name in task for name in MODULES) and 'pam_file' in str(task)]


def _variables(adopt: bool, module_found: str = MODULE) -> dict:
    ssh = _load(REPO / 'roles/slurm_common/vars/Debian.yml')['_slurm_common_ssh']
    ssh = {**ssh, 'pam_module_dirs': ['/usr/lib/x86_64-linux-gnu/security', '/lib/security', '/usr/lib/security']}
    variables = {**_load(ROLE / 'defaults/main.yml'), **_load(ROLE / 'vars/main.yml'), 'slurm_common_os': {'ssh': ssh}}
    variables['_slurm_node_adopt'] = adopt
    variables['__slurm_node_sshd_pam'] = {'content': 'present'}
    variables['__slurm_node_adopt_module_stat'] = {'results': [
        {'item': directory, 'stat': {'exists': f'{directory}/pam_slurm_adopt.so' == module_found,
                                     'path': f'{directory}/pam_slurm_adopt.so'}}
        for directory in ssh['pam_module_dirs']]}
    return {name: trust_as_template(value) if isinstance(value, str) else value for name, value in variables.items()}


def _run(module, args: dict) -> dict:
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.main()
    result = json.loads(out.getvalue())
    assert not result.get('failed'), result
    return result


def converge(tmp_path: Path, text: str, adopt: bool = True, module_found: str = MODULE) -> tuple[str, bool]:
    """The file after the role's PAM tasks ran on `text`; (its text, whether any task changed it)."""
    path = tmp_path / 'sshd'
    path.write_bytes(text.encode('utf-8', 'surrogateescape'))
    changed = False
    for task in _pam_tasks():
        variables = _variables(adopt, module_found)
        variables.update({name: trust_as_template(value) if isinstance(value, str) else value
                          for name, value in (task.get('vars') or {}).items()})
        templar = Templar(loader=DataLoader(), variables=variables)
        if not templar.template(trust_as_template('{{ ' + task['when'] + ' }}'
                                                  if isinstance(task['when'], str) else '{{ true }}')):
            continue
        name = next(name for name in MODULES if name in task)
        args = templar.template({key: trust_as_template(value) if isinstance(value, str) else value
                                 for key, value in task[name].items()})
        args['path'] = str(path)
        args.pop('owner', None), args.pop('group', None)
        changed |= _run(MODULES[name], args)['changed']
    return path.read_bytes().decode('utf-8', 'surrogateescape'), changed


def test_the_role_edits_the_file_with_blockinfile_then_lineinfile_or_replace():
    assert [next(name for name in MODULES if name in task) for task in _pam_tasks()] == [
        'ansible.builtin.blockinfile', 'ansible.builtin.lineinfile', 'ansible.builtin.replace']


def test_the_distributed_file_gets_the_block_after_common_account_and_the_session_include_without_systemd(tmp_path):
    assert converge(tmp_path, BEFORE) == (AFTER, True)


def test_a_converged_file_is_left_as_it_is(tmp_path):
    assert converge(tmp_path, AFTER) == (AFTER, False)


def test_pam_slurm_adopt_is_the_last_account_line(tmp_path):
    text, _changed = converge(tmp_path, BEFORE)
    account = [line for line in text.splitlines() if re.match(r'^(account|@include\s+common-account)', line)]
    assert account[-2:] == [
        'account    sufficient    pam_access.so accessfile=/etc/security/llmforge-adopt-access.conf',
        f'account    required      {MODULE} action_no_jobs=deny action_unknown=newest action_adopt_failure=deny '
        'action_generic_failure=deny']
    assert '@include common-session-noninteractive  # llmforge.cluster: without pam_systemd' in text
    assert not re.search(r'^@include common-session\s*$', text, re.M)


def test_adopt_off_restores_the_distributed_file(tmp_path):
    assert converge(tmp_path, AFTER, adopt=False) == (BEFORE, True)
    assert converge(tmp_path, BEFORE, adopt=False) == (BEFORE, False)


def test_the_module_is_named_where_it_is_installed_and_a_new_path_replaces_the_block_in_place(tmp_path):
    text, changed = converge(tmp_path, AFTER, module_found='/lib/security/pam_slurm_adopt.so')
    assert changed and text == AFTER.replace(MODULE, '/lib/security/pam_slurm_adopt.so')
    assert text.count('# BEGIN llmforge.cluster') == 1


def test_an_administrators_session_include_by_hand_is_still_replaced(tmp_path):
    text = BEFORE.replace('@include common-session\n', '@include common-session-noninteractive\n')
    assert converge(tmp_path, text)[0] == AFTER
