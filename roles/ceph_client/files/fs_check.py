# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write, fsync, read back and remove one file on a shared file system, as the user running it.

Argument: the file's path (its directory must exist and be the user's). Prints one line with what it measured;
exits 1 with the step that failed. Run by the storage client roles after mounting.
"""
import hashlib
import os
import sys
import time

SIZE = 4 << 20
path = sys.argv[1]
temporary = f'{path}.tmp-{os.getpid()}'
data = os.urandom(SIZE)
step = 'write'
try:
    started = time.monotonic()
    with open(temporary, 'wb') as handle:
        handle.write(data)
        handle.flush()
        step = 'fsync'
        os.fsync(handle.fileno())
    step = 'rename'
    os.replace(temporary, path)
    written = time.monotonic() - started
    step = 'read'
    with open(path, 'rb') as handle:
        back = handle.read()
    if hashlib.sha256(back).digest() != hashlib.sha256(data).digest():
        raise OSError(f'read back {len(back)} bytes that differ from the {SIZE} written')
    step = 'remove'
    os.unlink(path)
except OSError as err:
    sys.exit(f'{path}: {step} failed as uid {os.getuid()}: {err}')
print(f'{path}: wrote, fsynced, read back and removed {SIZE >> 20} MiB as uid {os.getuid()} '
      f'({SIZE / (1 << 20) / max(written, 1e-6):.0f} MiB/s written)')
