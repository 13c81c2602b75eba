# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a pip lock (a requirements file with exact versions and hashes) and name the environment built from it.

Standard library only, no Ansible import. The training_env role calls ``plan`` through the
``llmforge.cluster.training_env_plan`` filter before anything is installed.

A lock is what ``pip-compile --generate-hashes`` or ``pip freeze`` plus ``pip hash`` produce: one requirement per
logical line (backslash continuations joined), each ``name==version`` with an optional ``[extras]`` and an optional
environment marker after ``;``, and one or more ``--hash=sha256:<64 hex>`` options. Anything else is refused
with the line number: ranges (``>=``), URLs and paths, options that change where pip looks (the index and the
wheelhouse are the role's variables), a requirement without a hash, a name pinned twice. The environment's name
is ``<base>-<12 hex digits>`` of a digest over the requirements as read (sorted, so order and comments do not
matter) and the interpreter settings, so two locks give two directories side by side and the same lock gives
the same directory on every node and every run.
"""

from __future__ import annotations

import hashlib
import re
import typing as t

_NAME = r'[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?'
_REQUIREMENT = re.compile(
    rf'^(?P<name>{_NAME})(?:\[(?P<extras>[A-Za-z0-9._,\s-]*)\])?\s*==\s*(?P<version>[A-Za-z0-9.+!_-]+)'
    r'\s*(?:;\s*(?P<marker>[^#]+?))?\s*$')
_HASH = re.compile(r'^--hash[=\s]sha256:(?P<hex>[0-9a-fA-F]{64})$')
_BASE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')
DIGEST_LENGTH = 12


class LockError(ValueError):
    """The lock or the environment settings cannot be used; the message names the variable and the line."""


def canonical_name(name: str) -> str:
    """PEP 503 normalised project name: Torch_Audio and torch-audio are the same project."""
    return re.sub(r'[-_.]+', '-', name).lower()


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: continuations joined, comments and blanks dropped."""
    lines: list[tuple[int, str]] = []
    pending, start = '', 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(' #', 1)[0] if not raw.lstrip().startswith('#') else ''
        line = line.strip()
        if not pending:
            start = number
        if line.endswith('\\'):
            pending += line[:-1] + ' '
            continue
        line = (pending + line).strip()
        pending = ''
        if line:
            lines.append((start, line))
    if pending.strip():
        lines.append((start, pending.strip()))
    return lines


def parse(text: t.Any, variable: str = 'training_env_requirements') -> list[dict[str, t.Any]]:
    """The requirements of a lock as [{name, version, extras, marker, hashes}]; LockError lists every bad line."""
    if not isinstance(text, str):
        raise LockError(f'{variable} must be the text of a requirements lock, got {type(text).__name__}')
    errors: list[str] = []
    requirements: list[dict[str, t.Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in logical_lines(text):
        words: list[str] = []
        for word in line.split():
            # "--hash sha256:..." (two words) is the same option as "--hash=sha256:...".
            if words and words[-1] == '--hash' and not word.startswith('-'):
                words[-1] = f'--hash={word}'
            else:
                words.append(word)
        options = [word for word in words if word.startswith('-')]
        spec = ' '.join(word for word in words if not word.startswith('-'))
        if not spec or (words[0].startswith('-') and not words[0].startswith('--hash')):
            errors.append(f'line {number}: {line[:80]!r} is an option, not a requirement (the index and the '
                          'wheelhouse come from training_env_index_url and training_env_wheelhouse)')
            continue
        match = _REQUIREMENT.match(spec)
        if not match:
            errors.append(f'line {number}: {spec[:80]!r} is not pinned as name==version')
            continue
        hashes, bad = [], []
        for option in options:
            found = _HASH.match(option)
            if found:
                hashes.append(found['hex'].lower())
            else:
                bad.append(option)
        if bad:
            errors.append(f'line {number}: {match["name"]}: options other than --hash=sha256:<64 hex digits> are not '
                          f'accepted ({", ".join(bad)[:80]})')
            continue
        if not hashes:
            errors.append(f'line {number}: {match["name"]}=={match["version"]} has no --hash=sha256:... '
                          '(every requirement needs one, so pip checks what it installs)')
            continue
        marker = ' '.join((match['marker'] or '').split())
        key = (canonical_name(match['name']), marker)
        if key in seen:
            errors.append(f'line {number}: {match["name"]} is pinned again (first on line {seen[key]})')
            continue
        seen[key] = number
        extras = sorted(canonical_name(item) for item in (match['extras'] or '').replace(',', ' ').split())
        requirements.append({'name': key[0], 'version': match['version'], 'extras': extras, 'marker': marker,
                             'hashes': sorted(set(hashes))})
    if errors:
        raise LockError(f'{variable}: ' + '; '.join(errors))
    return sorted(requirements, key=lambda item: (item['name'], item['marker']))


def lock_text(requirements: list[dict[str, t.Any]]) -> str:
    """The requirements written back in one canonical form, as the environment keeps it (llmforge-lock.txt)."""
    out = []
    for item in requirements:
        line = item['name'] + (f"[{','.join(item['extras'])}]" if item['extras'] else '') + f"=={item['version']}"
        if item['marker']:
            line += f" ; {item['marker']}"
        out.append(' \\\n    '.join([line] + [f'--hash=sha256:{digest}' for digest in item['hashes']]))
    return ''.join(line + '\n' for line in out)


def plan(text: t.Any, base: t.Any, root: t.Any, python: t.Any = '/usr/bin/python3', system_site_packages: bool = False,
         os_packages: t.Optional[list[t.Any]] = None) -> dict[str, t.Any]:
    """Where the environment of this lock lives and what goes into it; LockError names the bad variable."""
    if not isinstance(base, str) or not _BASE.match(base):
        raise LockError(f'training_env_name must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or '
                        f'digit; got {base!r}')
    if not isinstance(root, str) or not root.startswith('/') or root.rstrip('/') == '' or '\n' in root:
        raise LockError(f'training_env_root must be an absolute directory other than /; got {root!r}')
    if not isinstance(python, str) or not python.startswith('/'):
        raise LockError(f'training_env_python must be the absolute path of a Python interpreter; got {python!r}')
    packages = [str(item) for item in (os_packages or [])]
    requirements = parse(text)
    if not requirements and not system_site_packages:
        raise LockError('training_env_requirements is empty: list at least one pinned package (torch==...), or set '
                        'training_env_system_site_packages to build on the packages of the OS')
    canonical = lock_text(requirements)
    settings = f'python={python}\nsystem_site_packages={bool(system_site_packages)}\nos_packages={sorted(packages)}\n'
    digest = hashlib.sha256((settings + canonical).encode('utf-8')).hexdigest()
    name = f'{base}-{digest[:DIGEST_LENGTH]}'
    root = root.rstrip('/')
    return {
        'name': name,
        'dir': f'{root}/{name}',
        'current': f'{root}/{base}',
        'digest': digest,
        'lock': canonical,
        'packages': [f"{item['name']}=={item['version']}" for item in requirements],
        'count': len(requirements),
    }
