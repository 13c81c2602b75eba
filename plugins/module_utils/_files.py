# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Replace a file in one rename, so a reader sees the old content or the new, never half of either.

Standard library only, no Ansible import: the node programs (llmforge-nodecheck, llmforge-slurm-metrics) write
their state and metrics files with it.
"""

from __future__ import annotations

import os
import tempfile
import typing as t


def write_atomic(path: str, text: t.Union[str, bytes], mode: int = 0o644, uid: int = -1, gid: int = -1) -> None:
    """Write `text` (UTF-8; bytes as they are) to `path` through a hidden temporary file in the same directory,
    synced and renamed.

    The temporary file sits beside `path` (a rename does not cross file systems) and is named
    ``.<name>.<random>.tmp``: neither node_exporter's textfile collector (``*.prom``) nor a reader of ``*.json``
    picks it up. `mode`, and `uid` and `gid` where not -1 (-1: the process's own), are applied before the rename
    (0644 by default: node_exporter runs as its own user), so the new file never shows with other ones.
    The rename replaces whatever entry `path` is, a symbolic link included: its target is left alone.
    A failure leaves `path` as it was and removes the temporary file; the error is raised.
    """
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=f'.{os.path.basename(path)}.', suffix='.tmp')
    try:
        with (os.fdopen(handle, 'wb') if isinstance(text, bytes) else os.fdopen(handle, 'w', encoding='utf-8')) as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        if (uid, gid) != (-1, -1):
            os.chown(temporary, uid, gid)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
