# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plan and write a set of text files below one directory in one pass: what the file_tree module runs on a node.

Standard library only, no Ansible import. Copying a package of N files with one task per file costs N round trips
to every host; this compares all of them on the node at once and rewrites only those whose content differs, each
through `_files.write_atomic` (a reader never sees half a file).
"""

from __future__ import annotations

import grp
import os
import posixpath
import pwd
import re
import stat
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils._files import write_atomic


class FileTreeError(ValueError):
    """A relative path that would leave the root, or a file that cannot be read or written."""


# What may stand where a file is written, other than a regular file or a symbolic link (both replaced): refused.
_NOT_FILES = ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket'),
              (stat.S_ISCHR, 'a character device'), (stat.S_ISBLK, 'a block device'))
# A mode given as text: 3 or 4 octal digits, as chmod takes it.
_OCTAL_MODE = re.compile(r'[0-7]{3,4}')
_NUMERIC_ID = re.compile(r'[0-9]+')


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


def existing(path: str) -> t.Optional[str]:
    """What stands at `path`, never followed or opened: None (nothing), 'file' or 'link' (replaced by the new file,
    its target never read). A directory, FIFO, socket or device is refused: opening a FIFO would block for good."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        raise FileTreeError(f'{path} cannot be read: {err.strerror or err}') from None
    if stat.S_ISREG(info.st_mode):
        return 'file'
    if stat.S_ISLNK(info.st_mode):
        return 'link'
    kind = next((name for test, name in _NOT_FILES if test(info.st_mode)), 'something other than a file')
    raise FileTreeError(f'{path} is {kind} where a file belongs')


def read_bytes(path: str) -> bytes:
    """The content of the regular file at `path`, read without following a link or waiting on a FIFO that took its
    place since `existing` looked."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(handle, 'rb') as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise FileTreeError(f'{path} is not a regular file where a file belongs')
            return stream.read()
    except OSError as err:
        raise FileTreeError(f'{path} cannot be read: {err.strerror or err}') from None


def compare(path: str, relative: str, content: str) -> t.Optional[dict[str, t.Any]]:
    """The change that makes `path` hold `content` ({path, relative, before, after, link}), or None when it does.

    Bytes are compared: content that is not UTF-8 differs from any text. `before` is None for a new file or a
    replaced link, else the old content decoded for the diff (bad bytes replaced)."""
    kind = existing(path)
    before = read_bytes(path) if kind == 'file' else None
    if before == content.encode('utf-8'):
        return None
    return {'path': path, 'relative': relative, 'after': content, 'link': kind == 'link',
            'before': None if before is None else before.decode('utf-8', errors='replace')}


def diff(changes: t.Iterable[t.Mapping[str, t.Any]]) -> list[dict[str, str]]:
    """The diff of each change; a replaced symbolic link shows as empty (its target is never read)."""
    return [{'before_header': change['path'] + (' (symbolic link, replaced by a file)' if change['link'] else ''),
             'after_header': change['path'], 'before': change['before'] or '', 'after': change['after']}
            for change in changes]


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
        try:
            change = compare(os.path.join(root, clean), clean, content)
        except FileTreeError as err:
            raise FileTreeError(f"files['{clean}']: {err}") from None
        if change:
            changes.append(change)
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


def write(changes: t.Iterable[t.Mapping[str, t.Any]], mode: int, uid: int = -1, gid: int = -1) -> None:
    """Write each planned change atomically with `mode`, owned by `uid` and `gid` (-1: see `replacement_ids`); its
    directory must exist."""
    for change in changes:
        try:
            write_atomic(change['path'], change['after'], mode, *replacement_ids(change['path'], uid, gid))
        except OSError as err:
            raise FileTreeError(f"{change['path']} cannot be written: {err.strerror or err}") from None


def replacement_ids(path: str, uid: int, gid: int) -> tuple[int, int]:
    """(uid, gid) of the file that replaces `path`: those asked (not -1), else those of the regular file replaced
    where this process may give them (as Ansible keeps them), else -1: the process's own, as for a new file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return uid, gid
    if not stat.S_ISREG(info.st_mode):
        return uid, gid
    privileged = os.geteuid() == 0
    if uid == -1 and privileged:
        uid = info.st_uid
    if gid == -1 and (privileged or info.st_gid in (os.getegid(), *os.getgroups())):
        gid = info.st_gid
    return uid, gid


def user_id(owner: t.Optional[str], field: str) -> int:
    """The uid of `owner`, a name or a number (as Ansible takes it); -1 when omitted. An unknown name is refused."""
    if owner is None:
        return -1
    if _NUMERIC_ID.fullmatch(owner):
        return int(owner)
    try:
        return pwd.getpwnam(owner).pw_uid
    except KeyError:
        raise FileTreeError(f"{field}: no user '{owner}' on this host") from None


def group_id(group: t.Optional[str], field: str) -> int:
    """The gid of `group`, a name or a number (as Ansible takes it); -1 when omitted. An unknown name is refused."""
    if group is None:
        return -1
    if _NUMERIC_ID.fullmatch(group):
        return int(group)
    try:
        return grp.getgrnam(group).gr_gid
    except KeyError:
        raise FileTreeError(f"{field}: no group '{group}' on this host") from None


def normalise_absolute(path: str) -> str:
    """`path` normalised, a leading '//' made '/' (POSIX lets '//' differ from '/'; Linux does not)."""
    return '/' + posixpath.normpath(path).lstrip('/')


def octal_mode(value: t.Any, field: str) -> int:
    """A file mode as Ansible's file modules read it: text is 3 or 4 octal digits ('0644'), a number is the mode
    itself (unquoted YAML 0644 arrives as 420); 0 to 0o7777. `field` names it in the error."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 0o7777:
            raise FileTreeError(f"{field}: {value!r} is not a mode from 0 to 0o7777 (4095); quote an octal mode such as "
                                "'0644'")
        return value
    if isinstance(value, str) and _OCTAL_MODE.fullmatch(value):
        return int(value, 8)
    raise FileTreeError(f"{field}: {value!r} is not an octal mode such as '0644'")


def settle(module: t.Any, path: str, owner: t.Optional[str], group: t.Optional[str], mode: int,
           changed: bool = False) -> bool:
    """Give `path` the owner, group and mode asked for through an AnsibleModule's file helpers (check mode and diff
    included); `changed`, or whether this changed (or in check mode would change) it."""
    attributes = module.load_file_common_arguments({'owner': owner, 'group': group, 'mode': mode}, path=path)
    return module.set_fs_attributes_if_different(attributes, changed)
