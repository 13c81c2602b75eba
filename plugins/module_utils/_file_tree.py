# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan and write a set of text files below one directory in one pass: what the file_tree module runs on a node.

Standard library only, no Ansible import. Copying a package of N files with one task per file costs N round trips
to every host; this compares all of them on the node at once and rewrites only those whose content differs, each
through `_files.write_atomic` (a reader never sees half a file).
"""

from __future__ import annotations

import os
import posixpath
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils._files import write_atomic


class FileTreeError(ValueError):
    """A relative path that would leave the root, or a file that cannot be read or written."""


def check_relative(path: t.Any) -> str:
    """A relative POSIX path below the root (no absolute path, no `..`, no empty part), normalised."""
    if not isinstance(path, str) or not path:
        raise FileTreeError(f'files: the path {path!r} must be a non-empty string')
    if path.startswith('/'):
        raise FileTreeError(f"files: '{path}' is absolute; give paths relative to root")
    parts = path.split('/')
    if any(part in ('', '.', '..') for part in parts):
        raise FileTreeError(f"files: '{path}' must not contain empty, '.' or '..' parts")
    return posixpath.normpath(path)


def read_text(path: str) -> t.Optional[str]:
    """The file's text, or None when it does not exist (or is not valid UTF-8, which counts as different)."""
    try:
        with open(path, encoding='utf-8') as stream:
            return stream.read()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        return ''
    except IsADirectoryError:
        raise FileTreeError(f'{path} is a directory where a file belongs') from None
    except OSError as err:
        raise FileTreeError(f'{path} cannot be read: {err.strerror or err}') from None


def plan(root: str, files: t.Mapping[str, str]) -> list[dict[str, t.Any]]:
    """[{path, relative, before, after}] for every file whose content differs from `files` (before None: new)."""
    if not isinstance(files, t.Mapping):
        raise FileTreeError(f'files must be a dictionary of relative path to content, got {type(files).__name__}')
    changes = []
    for relative in sorted(files):
        content = files[relative]
        clean = check_relative(relative)
        if not isinstance(content, str):
            raise FileTreeError(f"files: the content of '{relative}' must be text, got {type(content).__name__}")
        path = os.path.join(root, clean)
        before = read_text(path)
        if before != content:
            changes.append({'path': path, 'relative': clean, 'before': before, 'after': content})
    return changes


def directories(root: str, files: t.Iterable[str]) -> list[str]:
    """The root and every directory below it that holds one of `files`, parents first."""
    found = {root}
    for relative in files:
        parent = posixpath.dirname(check_relative(relative))
        while parent:
            found.add(os.path.join(root, parent))
            parent = posixpath.dirname(parent)
    return sorted(found, key=lambda path: (path.count('/'), path))


def write(changes: t.Iterable[t.Mapping[str, t.Any]], mode: int) -> None:
    """Write each planned change atomically with `mode`; its directory must exist."""
    for change in changes:
        try:
            write_atomic(change['path'], change['after'], mode)
        except OSError as err:
            raise FileTreeError(f"{change['path']} cannot be written: {err.strerror or err}") from None


def check_absolute(path: t.Any, field: str, kind: str = 'file') -> str:
    """An absolute POSIX path without `.` or `..` parts (a file or directory of config_files), normalised; `field`
    names it in the error."""
    if not isinstance(path, str) or not path.startswith('/') or path.endswith('/'):
        raise FileTreeError(f'{field}: {path!r} must be the absolute path of a {kind}')
    if any(part in ('.', '..') for part in path.split('/')):
        raise FileTreeError(f"{field}: '{path}' must not contain '.' or '..' parts")
    return posixpath.normpath(path)


def plan_files(files: t.Sequence[t.Mapping[str, t.Any]]) -> list[dict[str, t.Any]]:
    """[{path, before, after}] for each of `files` ({path, content}: absolute paths) whose content differs, in order.

    A path listed twice is refused: which content wins would depend on the order of the list."""
    changes, seen = [], set()
    for index, entry in enumerate(files):
        path = check_absolute(entry.get('path'), f'files[{index}].path')
        if path in seen:
            raise FileTreeError(f"files[{index}].path: '{path}' is listed twice")
        seen.add(path)
        content = entry.get('content')
        if not isinstance(content, str):
            raise FileTreeError(f"files[{index}].content of '{path}' must be text, got {type(content).__name__}")
        before = read_text(path)
        if before != content:
            changes.append({'path': path, 'relative': path, 'before': before, 'after': content})
    return changes


def missing_directories(path: str) -> list[str]:
    """The directories above `path` that do not exist yet, parents first."""
    missing = []
    parent = posixpath.dirname(path)
    while parent not in ('', '/') and not os.path.isdir(parent):
        missing.append(parent)
        parent = posixpath.dirname(parent)
    return missing[::-1]


def octal_mode(value: t.Any, field: str) -> int:
    """A file mode given as octal text ('0644') or a number read as octal digits; `field` names it in the error."""
    try:
        return int(str(value), 8)
    except ValueError:
        raise FileTreeError(f"{field}: {value!r} is not an octal mode such as '0644'") from None


def settle(module: t.Any, path: str, owner: t.Optional[str], group: t.Optional[str], mode: int,
           changed: bool = False) -> bool:
    """Give `path` the owner, group and mode asked for through an AnsibleModule's file helpers (check mode and diff
    included); `changed`, or whether this changed (or in check mode would change) it."""
    attributes = module.load_file_common_arguments({'owner': owner, 'group': group, 'mode': mode}, path=path)
    return module.set_fs_attributes_if_different(attributes, changed)
