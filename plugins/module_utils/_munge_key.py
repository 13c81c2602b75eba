# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Install a munge key on a host (standard library only, no Ansible import).

The key is binary (munge's own keys are random bytes), given in base64. It is written to a temporary file next to
the key, owned by munge and readable by it alone (0400), flushed to disk, then renamed over the key: a reader sees the
old key or the new one, never half of one. A key file whose bytes already match but whose owner or mode drifted is
given back to munge alone.

munge reads its key when it starts, so a new key needs a restart. A marker file next to the key is created before
the key changes and removed by the caller once munge answers with the new key: a run interrupted between the two
(key written, munge still on the old key) still finds the restart pending on the next run.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
import tempfile
import typing as t

MODE = 0o400
# munge refuses shorter keys (MUNGE_KEY_LEN_MIN_BYTES).
MIN_BYTES = 32


class MungeKeyError(Exception):
    """Bad input or a key file that cannot be written; the message names the option or the file."""


class Plan(t.NamedTuple):
    write: bool      # the key's bytes differ (or there is no key file yet)
    settle: bool     # same bytes, but the owner, group or mode differ
    restart_pending: bool  # the marker exists now or will once the key changes


def decode(key: str, option: str = 'key') -> bytes:
    """The key's bytes from its base64 text (white space ignored); an empty or malformed one is refused."""
    text = ''.join(key.split())
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as err:
        raise MungeKeyError(f'{option}: not valid base64 ({err})') from err
    if not data:
        raise MungeKeyError(f'{option}: the key is empty')
    return data


def plan(path: str, data: bytes, uid: t.Optional[int], gid: t.Optional[int], marker: str = '') -> Plan:
    """What installing `data` at `path` for uid:gid takes (None: the owner is not known yet, as in check mode before
    munge is installed: the key counts as one to write)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and not stat.S_ISREG(info.st_mode):
        raise MungeKeyError(f'{path} is not a regular file: remove it first')
    if info is None or uid is None or gid is None:
        write = True
    else:
        with open(path, 'rb') as stream:
            write = stream.read() != data
    settle = (not write and info is not None
              and (info.st_uid != uid or info.st_gid != gid or stat.S_IMODE(info.st_mode) != MODE))
    pending = write or settle or bool(marker and os.path.lexists(marker))
    return Plan(write=write, settle=settle, restart_pending=pending)


def touch(marker: str) -> None:
    """Create the restart marker (empty, root's) if it is not there."""
    if marker and not os.path.lexists(marker):
        with open(marker, 'wb'):
            pass


def install(path: str, data: bytes, uid: int, gid: int, chosen: Plan, marker: str = '') -> None:
    """Carry out `chosen`: write the key through a temporary file and a rename, or set its owner and mode; the
    marker is created first."""
    if not (chosen.write or chosen.settle):
        return
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        raise MungeKeyError(f'the directory {directory} of {path} does not exist (is munge installed?)')
    touch(marker)
    if chosen.settle:
        os.chown(path, uid, gid)
        os.chmod(path, MODE)
        return
    handle, temporary = tempfile.mkstemp(prefix='.munge.key.', dir=directory)
    try:
        with os.fdopen(handle, 'wb') as stream:
            os.fchown(stream.fileno(), uid, gid)
            os.fchmod(stream.fileno(), MODE)
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.rename(temporary, path)
    except BaseException:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        raise
