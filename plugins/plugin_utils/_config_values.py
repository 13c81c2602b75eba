# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rule for every inventory value the roles render into a configuration file.

Keys are identifiers. Values hold no control character (CR, LF, NUL, the other C0 characters, DEL), nor the
characters that would end the value in the syntax of the file it goes to (SYNTAXES): a value must never become a
line, a pair or a comment of its own. Each check returns sentences naming the variable (and the host, where given)
and the character at fault, never the value itself, so that a secret checked here is not printed. Pure Python with
no Ansible import: the filters, the module_utils checks and the unit tests share it.
"""

from __future__ import annotations

import re
import typing as t

# An identifier: a slurm.conf, nccl.conf or INI key, a network or section name.
KEY = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
CONTROL = re.compile(r'[\x00-\x1f\x7f]')
_NAMED = {'\n': 'a line feed (\\n)', '\r': 'a carriage return (\\r)', '\0': 'a NUL character', '\t': 'a tab',
          ' ': 'a space', '#': "'#'", ';': "';'", '=': "'='", '%': "'%'", '"': "'\"'"}


class Syntax(t.NamedTuple):
    """What ends a value in one file syntax: characters refused anywhere, and characters refused first."""

    forbidden: str
    leading: str
    why: str


SYNTAXES: dict[str, Syntax] = {
    # A value that runs to the end of its line: INI-like files, PAM, enroot.conf, systemd units, modulefiles.
    'line': Syntax('', '', 'the value must stay on its line'),
    # sssd.conf (INI): a line starting with '#' or ';' is a comment.
    'ini': Syntax('', '#;', "sssd.conf's value must stay on its line and not start a comment"),
    # slurm.conf, gres.conf, cgroup.conf, topology.conf: white space separates Key=Value pairs, '#' starts a comment.
    'slurm': Syntax(' \t#', '', "in Slurm's files white space separates Key=Value pairs and '#' starts a comment"),
    # fstab and other whitespace-separated fields.
    'fields': Syntax(' \t#', '', "white space separates the file's fields and '#' starts a comment"),
    # nftables: only addresses and identifiers, never statement separators, quotes or braces.
    'nft': Syntax(' \t#;{}"', '', 'nftables takes only addresses and names there'),
}


def describe(char: str) -> str:
    """A character as a message shows it."""
    return _NAMED.get(char, f"'{char}'" if char.isprintable() else f'the control character {ord(char):#04x}')


def key_problem(variable: str, key: t.Any) -> t.Optional[str]:
    """Why `key` cannot be a key in `variable` (an identifier: letters, digits and '_', not first a digit), or None."""
    if isinstance(key, str) and KEY.fullmatch(key):
        return None
    return (f'{variable} has the key {key!r}, which is not an identifier (letters, digits and _, not starting with '
            f'a digit)')


def text_problem(variable: str, text: str, syntax: str = 'line') -> t.Optional[str]:
    """Why the string `text` of `variable` cannot be rendered in `syntax`, or None; the value is never quoted."""
    rule = SYNTAXES[syntax]
    for position, char in enumerate(text):
        if CONTROL.fullmatch(char) or char in rule.forbidden:
            return f'{variable} holds {describe(char)} at position {position}: {rule.why}'
    if text[:1] and text[0] in rule.leading:
        return f'{variable} starts with {describe(text[0])}: {rule.why}'
    return None


def value_problems(variable: str, value: t.Any, syntax: str = 'line', keys: bool = False) -> list[str]:
    """Every problem of `value` (a string, number, list or mapping, walked to its leaves) named by its path.

    keys: the mapping keys are identifiers (slurm.conf keys); otherwise they are checked as values.
    """
    if syntax not in SYNTAXES:
        raise ValueError(f'unknown syntax {syntax!r} (known: {", ".join(SYNTAXES)})')
    if isinstance(value, str):
        found = text_problem(variable, value, syntax)
        return [] if found is None else [found]
    if isinstance(value, t.Mapping):
        problems: list[str] = []
        for key, item in value.items():
            path = f'{variable}.{key}' if isinstance(key, str) and KEY.fullmatch(key) else f'{variable}[{key!r}]'
            key_found = key_problem(variable, key) if keys else (
                text_problem(f'a key of {variable}', key, syntax) if isinstance(key, str) else None)
            if key_found is not None:
                problems.append(key_found)
            problems += value_problems(path, item, syntax, keys)
        return problems
    if isinstance(value, (list, tuple)):
        return [problem for index, item in enumerate(value)
                for problem in value_problems(f'{variable}[{index}]', item, syntax, keys)]
    return []


def problems(values: t.Mapping[str, t.Any], syntax: str = 'line', keys: bool = False,
             host: t.Optional[str] = None) -> list[str]:
    """The problems of every variable of `values` (variable name -> value), each sentence naming it (and the host)."""
    found = [problem for variable, value in values.items() for problem in value_problems(variable, value, syntax, keys)]
    return [f'{host}: {problem}' for problem in found] if host else found
