# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sshd_pam_adopt: sshd's PAM file with or without pam_slurm_adopt, from its current text (see module_utils/_pam.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

_pam = module_utils('_pam')


def sshd_pam_adopt(text, adopt, marker, account_after, account_lines, session_include, session_line,
                   session_line_without_systemd):
    """The PAM file's new text: the marked account lines and the session include without pam_systemd (adopt), or
    both undone, exactly as blockinfile and lineinfile would leave it."""
    try:
        return _pam.sshd_adopt(text, adopt=adopt, marker=marker, account_after=account_after,
                               account_lines=account_lines, session_include=session_include,
                               session_line=session_line, session_line_without_systemd=session_line_without_systemd)
    except _pam.PamError as err:
        raise AnsibleFilterError(f'sshd_pam_adopt: {err}') from None


class FilterModule:
    """PAM configuration filters."""

    def filters(self):
        return {'sshd_pam_adopt': sshd_pam_adopt}
