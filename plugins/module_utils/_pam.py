# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""sshd's PAM file with or without pam_slurm_adopt, computed from its current text (standard library only).

`sshd_adopt` returns the text that ansible.builtin.blockinfile (the account lines between two markers) followed by
ansible.builtin.lineinfile (the session include) would leave, byte for byte, so that the file is written by one task
and a file those modules converged is left exactly as it is. The edits work on the UTF-8 bytes, as the modules do:
their line splitting, regular expressions (compiled as bytes) and newline rules are theirs.
"""

from __future__ import annotations

import io
import re
import typing as t

_NEWLINE = b'\n'


class PamError(ValueError):
    """An argument that is not what sshd_adopt takes."""


def sshd_adopt(text: str, *, adopt: bool, marker: str, account_after: str, account_lines: t.Sequence[str],
               session_include: str, session_line: str, session_line_without_systemd: str) -> str:
    """sshd's PAM file `text` with pam_slurm_adopt set up (`adopt`) or undone.

    With `adopt`: `account_lines` between the markers (`marker` with ``{mark}`` standing for BEGIN and END), in the
    place of the marked block or else after the last line matching `account_after` (at the end when none does), and
    the last line matching `session_include` replaced by `session_line_without_systemd` (appended when none does).
    Without: the marked block removed, and a line that is exactly `session_line_without_systemd` replaced by
    `session_line`. Raises PamError for an argument of the wrong type, a marker without ``{mark}`` and a pattern that
    is not a regular expression."""
    if not isinstance(text, str):
        raise PamError(f'the PAM file must be text, got {type(text).__name__}')
    if not isinstance(adopt, bool):
        raise PamError(f'adopt must be true or false, got {type(adopt).__name__}')
    strings = {'marker': marker, 'account_after': account_after, 'session_include': session_include,
               'session_line': session_line, 'session_line_without_systemd': session_line_without_systemd}
    for name, value in strings.items():
        if not isinstance(value, str):
            raise PamError(f'{name} must be a string, got {type(value).__name__}')
    if '{mark}' not in marker:
        raise PamError(f"marker {marker!r} must contain {{mark}} (BEGIN and END take its place)")
    if isinstance(account_lines, (str, bytes)) or not isinstance(account_lines, t.Sequence):
        raise PamError(f'account_lines must be a list of lines, got {type(account_lines).__name__}')
    for line in account_lines:
        if not isinstance(line, str):
            raise PamError(f'account_lines must hold strings, got {type(line).__name__} ({line!r})')
    after_re = _compile('account_after', account_after)
    session_re = _compile('session_include', session_include)

    data = _encode(text)
    block = _encode('\n'.join(account_lines)) if adopt else b''
    data = _blockinfile(data, _encode(marker), after_re, block)
    if adopt:
        data = _lineinfile(data, session_re, _encode(session_line_without_systemd))
    # As the role's task ran it: only when the original file holds the line (its lines as Python splits text).
    elif session_line_without_systemd in text.splitlines():
        exact = re.compile(b'^' + re.escape(_encode(session_line_without_systemd)) + b'$')
        data = _lineinfile(data, exact, _encode(session_line))
    return data.decode('utf-8', 'surrogateescape')


def _encode(text: str) -> bytes:
    return text.encode('utf-8', 'surrogateescape')


def _compile(name: str, pattern: str) -> re.Pattern[bytes]:
    try:
        return re.compile(_encode(pattern))
    except re.error as err:
        raise PamError(f'{name} {pattern!r} is not a regular expression: {err}') from None


def _blockinfile(original: bytes, marker: bytes, insertafter: re.Pattern[bytes], block: bytes) -> bytes:
    """blockinfile with `insertafter`, state present with `block` (absent: empty `block`), on an existing file."""
    lines = original.splitlines(True)
    marker0 = marker.replace(b'{mark}', b'BEGIN') + _NEWLINE
    marker1 = marker.replace(b'{mark}', b'END') + _NEWLINE
    if block:
        if not block.endswith(_NEWLINE):
            block += _NEWLINE
        blocklines = [marker0] + block.splitlines(True) + [marker1]
    else:
        blocklines = []

    n0 = n1 = None
    for index, line in enumerate(lines):
        if line == marker0:
            n0 = index
        if line == marker1:
            n1 = index

    if n0 is None or n1 is None:
        n0 = None
        if insertafter.flags & re.MULTILINE:
            match = insertafter.search(original)
            if match:
                n0 = original.decode('utf-8', 'surrogateescape').count('\n', 0, match.end())
        else:
            for index, line in enumerate(lines):
                if insertafter.search(line):
                    n0 = index
        n0 = len(lines) if n0 is None else n0 + 1
    elif n0 < n1:
        lines[n0:n1 + 1] = []
    else:
        lines[n1:n0 + 1] = []
        n0 = n1

    # A line separator before the block, even when there is no block to insert.
    if n0 > 0 and not lines[n0 - 1].endswith(_NEWLINE):
        lines[n0 - 1] += _NEWLINE
    lines[n0:n0] = blocklines
    return b''.join(lines)


def _lineinfile(original: bytes, regexp: re.Pattern[bytes], line: bytes) -> bytes:
    """lineinfile with `regexp` and `line`, state present, inserted at the end (its default), on an existing file."""
    lines = io.BytesIO(original).readlines()
    found = -1
    match = None
    for index, current in enumerate(lines):
        match_found = regexp.search(current)
        if match_found:
            found, match = index, match_found
    if not match:
        for index, current in enumerate(lines):
            if line == current.rstrip(b'\r\n'):
                found = index
    if found != -1:
        new_line = line if line.endswith(_NEWLINE) else line + _NEWLINE
        if lines[found] != new_line:
            lines[found] = new_line
    else:
        if lines and lines[-1][-1:] not in (b'\n', b'\r'):
            lines.append(_NEWLINE)
        lines.append(line + _NEWLINE)
    return b''.join(lines)
