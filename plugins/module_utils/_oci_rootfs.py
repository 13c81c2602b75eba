# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An OCI bundle's rootfs: unpacked from a checked tarball and replaced whole when the tarball changes, and the mount
points of the job's container made inside it without following a symbolic link out of it.

The bundle directory holds ``rootfs/`` and ``.rootfs-checksum``, the tarball's sha256 recorded once the unpack has
finished: an interrupted unpack leaves no record, so the next run unpacks again. Standard library only, no Ansible
import (the module oci_rootfs calls it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import typing as t

RECORD = '.rootfs-checksum'
ROOTFS = 'rootfs'
MOUNT_POINT_MODE = 0o755
_CHUNK = 1 << 20

# Runs an argv; returns (rc, stdout, stderr).
Runner = t.Callable[[t.List[str]], t.Tuple[int, str, str]]


class RootfsError(Exception):
    """Input the module cannot use, or a step that failed; the message names the option or the file."""


def check_mount_points(points: t.Sequence[str]) -> list[str]:
    """The mount points, each an absolute path without '..' below the rootfs; otherwise an error naming the item."""
    checked = []
    for index, point in enumerate(points):
        parts = point.split('/')
        if not point.startswith('/') or '..' in parts or point.strip('/') == '':
            raise RootfsError(f"mount_points[{index}]: '{point}' must be an absolute path below / without '..'")
        checked.append('/' + '/'.join(part for part in parts if part))
    return checked


def sha256_file(path: str) -> str:
    """'sha256:<hex>' of the file's content."""
    digest = hashlib.sha256()
    with open(path, 'rb') as stream:
        for chunk in iter(lambda: stream.read(_CHUNK), b''):
            digest.update(chunk)
    return 'sha256:' + digest.hexdigest()


def recorded_checksum(bundle: str) -> str:
    """The checksum recorded by the last finished unpack; empty before the first one."""
    try:
        with open(os.path.join(bundle, RECORD), encoding='utf-8') as stream:
            return stream.read().strip()
    except FileNotFoundError:
        return ''


def unpack(bundle: str, tarball: str, checksum: str, run: Runner) -> None:
    """Replace the rootfs with the tarball's content (as root, owners kept; tar recognises the compression), then
    record `checksum`. The record goes first, so a failure anywhere leaves none."""
    record = os.path.join(bundle, RECORD)
    rootfs = os.path.join(bundle, ROOTFS)
    if os.path.lexists(record):
        os.unlink(record)
    if os.path.islink(rootfs) or os.path.isfile(rootfs):
        os.unlink(rootfs)
    elif os.path.isdir(rootfs):
        shutil.rmtree(rootfs)
    os.mkdir(rootfs, MOUNT_POINT_MODE)
    os.chmod(rootfs, MOUNT_POINT_MODE)
    returncode, out, err = run(['tar', '-xf', tarball, '-C', rootfs])
    if returncode != 0:
        raise RootfsError(f'tar could not unpack {tarball} into {rootfs} (rc {returncode}): {(err or out).strip()}')
    temporary = record + '.tmp'
    with open(temporary, 'w', encoding='utf-8') as stream:
        stream.write(checksum + '\n')
    os.chmod(temporary, 0o644)
    os.replace(temporary, record)


def _under_link(rootfs: str, point: str) -> bool:
    """Whether a directory on the way from the rootfs to `point` is a symbolic link (Debian's /var/run -> /run):
    followed from outside the container it would lead into the host."""
    path = rootfs
    for part in point.strip('/').split('/'):
        path = os.path.join(path, part)
        if os.path.islink(path):
            return True
        if not os.path.lexists(path):
            return False
    return False


def mount_points_to_make(rootfs: str, points: t.Sequence[str]) -> list[str]:
    """The paths below `rootfs` of the mount points that are missing or not mode 0755, in the order given; a mount
    point under a symbolic link is left out."""
    paths = []
    for point in points:
        if _under_link(rootfs, point):
            continue
        path = rootfs + point
        if not os.path.isdir(path) or stat.S_IMODE(os.lstat(path).st_mode) != MOUNT_POINT_MODE:
            paths.append(path)
    return paths


def make_mount_points(rootfs: str, paths: t.Sequence[str]) -> None:
    """Create each directory below `rootfs` (and its missing parents) with mode 0755, or set an existing one to 0755."""
    for path in paths:
        current = rootfs
        for part in path[len(rootfs):].strip('/').split('/'):
            current = os.path.join(current, part)
            if not os.path.lexists(current):
                os.mkdir(current, MOUNT_POINT_MODE)
                os.chmod(current, MOUNT_POINT_MODE)
        os.chmod(path, MOUNT_POINT_MODE)
