# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sshd's PAM file computed for pam_slurm_adopt: Debian 13's file as distributed and as converged, adopt on and off,
and the same bytes as ansible.builtin.blockinfile and lineinfile (run here in-process) leave, which the role ran."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError
from ansible.module_utils.testing import patch_module_args
from ansible.modules import blockinfile, lineinfile

from ansible_collections.llmforge.cluster.plugins.filter.pam import FilterModule
from ansible_collections.llmforge.cluster.plugins.module_utils import _pam

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / 'tests/fixtures/pam'
# /etc/pam.d/sshd of Debian 13 as openssh-server installs it, and as the role leaves it with adopt on.
BEFORE = (FIXTURES / 'debian13-sshd.before').read_text(encoding='utf-8')
AFTER = (FIXTURES / 'debian13-sshd.after').read_text(encoding='utf-8')
sshd_pam_adopt = FilterModule().filters()['sshd_pam_adopt']

MODULE = '/usr/lib/x86_64-linux-gnu/security/pam_slurm_adopt.so'
OPTIONS = 'action_no_jobs=deny action_unknown=newest action_adopt_failure=deny action_generic_failure=deny'
WITHOUT_SYSTEMD = '@include common-session-noninteractive  # llmforge.cluster: without pam_systemd (pam_slurm_adopt)'
# The role's arguments on Debian (roles/slurm_common/vars/Debian.yml, roles/slurm_node/vars/main.yml).
DEBIAN = {
    'marker': '# {mark} llmforge.cluster: root and the admin group pass, other users need a Slurm job here',
    'account_after': r'^@include\s+common-account\s*$',
    'account_lines': ['account    sufficient    pam_access.so accessfile=/etc/security/llmforge-adopt-access.conf',
                      f'account    required      {MODULE} {OPTIONS}'],
    'session_include': r'^@include\s+common-session(-noninteractive)?(\s.*)?$',
    'session_line': '@include common-session',
    'session_line_without_systemd': WITHOUT_SYSTEMD,
}


def adopt(text, on=True, **changes):
    return _pam.sshd_adopt(text, adopt=on, **{**DEBIAN, **changes})


def _run(module, args):
    """Run an ansible.builtin module's main() in this process; its result."""
    out = io.StringIO()
    with patch_module_args(args), contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        module.main()
    result = json.loads(out.getvalue())
    assert not result.get('failed'), result
    return result


def ansible_modules(tmp_path, text, on=True, **changes):
    """The file as the role's former tasks left it: blockinfile, then one of its two lineinfile tasks."""
    args = {**DEBIAN, **changes}
    path = tmp_path / 'sshd'
    path.write_bytes(text.encode('utf-8', 'surrogateescape'))
    _run(blockinfile, {'path': str(path), 'marker': args['marker'], 'insertafter': args['account_after'],
                       'block': '\n'.join(args['account_lines']), 'state': 'present' if on else 'absent'})
    if on:
        _run(lineinfile, {'path': str(path), 'regexp': args['session_include'],
                          'line': args['session_line_without_systemd']})
    elif args['session_line_without_systemd'] in text.splitlines():
        _run(lineinfile, {'path': str(path), 'regexp': '^' + re.escape(args['session_line_without_systemd']) + '$',
                          'line': args['session_line']})
    return path.read_bytes().decode('utf-8', 'surrogateescape')


def test_the_distributed_file_gets_the_block_after_common_account_and_the_session_include_without_systemd():
    assert adopt(BEFORE) == AFTER


def test_a_converged_file_is_left_byte_for_byte():
    assert adopt(AFTER) == AFTER


def test_adopt_off_restores_the_distributed_file():
    assert adopt(AFTER, on=False) == BEFORE
    assert adopt(BEFORE, on=False) == BEFORE


def test_another_module_path_replaces_the_block_in_place():
    lines = DEBIAN['account_lines'][:1] + [f'account    required      /lib/security/pam_slurm_adopt.so {OPTIONS}']
    result = adopt(AFTER, account_lines=lines)
    assert result == AFTER.replace(MODULE, '/lib/security/pam_slurm_adopt.so')
    assert result.count('# BEGIN llmforge.cluster') == 1


def test_a_file_without_its_final_newline():
    # Its last line is neither the account line nor the session include: left without its newline, as the modules do.
    assert adopt(BEFORE.rstrip('\n')) == AFTER.rstrip('\n')
    assert adopt(AFTER.rstrip('\n')) == AFTER.rstrip('\n')
    assert adopt(AFTER.rstrip('\n'), on=False) == BEFORE.rstrip('\n')


def test_a_file_without_the_account_line_gets_the_block_at_its_end():
    text = BEFORE.replace('@include common-account\n', '')
    result = adopt(text)
    marker = DEBIAN['marker']
    block = [marker.replace('{mark}', 'BEGIN')] + DEBIAN['account_lines'] + [marker.replace('{mark}', 'END')]
    assert result.endswith('@include common-password\n' + '\n'.join(block) + '\n')
    assert adopt(result) == result
    # Without its final newline, the last line gets one before the block.
    assert adopt(text.rstrip('\n')) == result


# Files the role may meet, each computed against the modules it replaces, with adopt on and off.
VARIANTS = {
    'distributed': BEFORE,
    'converged': AFTER,
    'no-final-newline': BEFORE.rstrip('\n'),
    'converged-no-final-newline': AFTER.rstrip('\n'),
    'no-account-line': BEFORE.replace('@include common-account\n', ''),
    'no-account-line-no-final-newline': BEFORE.replace('@include common-account\n', '').rstrip('\n'),
    'no-session-line': BEFORE.replace('@include common-session\n', ''),
    'no-session-line-no-final-newline': BEFORE.replace('@include common-session\n', '').rstrip('\n'),
    'crlf': BEFORE.replace('\n', '\r\n'),
    'converged-crlf': AFTER.replace('\n', '\r\n'),
    'begin-marker-only': AFTER.replace('# END llmforge.cluster', '# END other'),
    'markers-reversed': AFTER.replace('# BEGIN llmforge', '# TMP llmforge').replace('# END llmforge', '# BEGIN llmforge')
                             .replace('# TMP llmforge', '# END llmforge'),
    'two-account-lines': BEFORE.replace('@include common-account\n', '@include common-account\n@include common-account\n'),
    'two-session-lines': BEFORE.replace('@include common-session\n', '@include common-session\n@include common-session\n'),
    'session-noninteractive-by-hand': BEFORE.replace('@include common-session\n', '@include common-session-noninteractive\n'),
    'marked-line-last': BEFORE.replace('@include common-session\n', '') + WITHOUT_SYSTEMD,
    'marked-line-crlf': AFTER.replace(WITHOUT_SYSTEMD + '\n', WITHOUT_SYSTEMD + '\r\n'),
    'distributed-line-kept-too': AFTER.replace(WITHOUT_SYSTEMD + '\n', WITHOUT_SYSTEMD + '\n@include common-session\n'),
    'empty': '',
    'blank-line': '\n',
    'non-ascii': BEFORE.replace('Secure Shell', 'Secure Shell – sshd\u00a0é'),
}


@pytest.mark.parametrize('on', [True, False], ids=['adopt', 'no-adopt'])
@pytest.mark.parametrize('name', VARIANTS)
def test_the_same_bytes_as_blockinfile_and_lineinfile(tmp_path, name, on):
    text = VARIANTS[name]
    assert adopt(text, on=on) == ansible_modules(tmp_path, text, on=on)


def test_the_filter_returns_the_same_text():
    assert sshd_pam_adopt(BEFORE, True, **DEBIAN) == AFTER
    assert sshd_pam_adopt(AFTER, adopt=False, **DEBIAN) == BEFORE


@pytest.mark.parametrize('changes, message', [
    pytest.param({'text': b'@include common-account\n'}, 'the PAM file must be text, got bytes', id='bytes'),
    pytest.param({'text': None}, 'the PAM file must be text, got NoneType', id='none'),
    pytest.param({'adopt': 'yes'}, 'adopt must be true or false, got str', id='adopt-string'),
    pytest.param({'marker': '# llmforge.cluster'}, r'marker .* must contain \{mark\}', id='marker'),
    pytest.param({'account_after': '^@include (common-account'}, "account_after '.*' is not a regular expression",
                 id='account-after'),
    pytest.param({'session_include': '['}, "session_include '\\[' is not a regular expression", id='session-include'),
    pytest.param({'account_lines': 'account required pam_slurm_adopt.so'}, 'account_lines must be a list of lines',
                 id='account-lines-string'),
    pytest.param({'account_lines': ['account sufficient pam_access.so', 3]}, 'account_lines must hold strings, got int',
                 id='account-lines-number'),
    pytest.param({'session_line': None}, 'session_line must be a string, got NoneType', id='session-line'),
])
def test_bad_input_fails_the_filter_naming_it(changes, message):
    args = {'text': BEFORE, 'adopt': True, **DEBIAN, **changes}
    text = args.pop('text')
    with pytest.raises(AnsibleFilterError, match=f'^sshd_pam_adopt: {message}'):
        sshd_pam_adopt(text, **args)
