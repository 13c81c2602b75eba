# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find the files that hold a secret, without being told the secret.

test_secrets.py runs this file on each node (`python3 -c <this file> <spec>`) and imports it for the files on the
Molecule runner. A secret would show in the process list if it were passed on a command line, so the scan gets a
fingerprint of each one instead: its first bytes (PREFIX), its length and its SHA-256. A file holds the secret where
the prefix is found and the bytes from there have that length and digest. Every regular file under the roots is read
in chunks (binary files too); symbolic links, devices, sockets and pipes are left alone.

Standard library only: it runs on the nodes' Python.
"""

from __future__ import annotations

import grp
import hashlib
import json
import os
import pwd
import stat
import sys
import typing as t

PREFIX = 4
CHUNK = 8 << 20


def fingerprint(secret: bytes, name: str) -> dict:
    """What the scan needs to find `secret` (named `name` in the hits), and no more of it than PREFIX bytes."""
    if len(secret) < 2 * PREFIX:
        raise ValueError(f'{name}: too short to look for ({len(secret)} bytes)')
    return {'name': name, 'prefix': secret[:PREFIX].hex(), 'length': len(secret),
            'sha256': hashlib.sha256(secret).hexdigest()}


def scan(roots: t.Iterable[str], needles: list[dict], skip: t.Iterable[str] = ()) -> tuple[list[dict], list[str]]:
    """(hits, errors): one hit per file and secret found in it, with the file's owner and mode; unreadable files.

    A root may be a directory (every regular file below it) or a file.
    """
    skipped = tuple(path.rstrip('/') + '/' for path in skip)
    hits: list[dict] = []
    errors: list[str] = []
    for path in _files(roots, skipped, errors):
        try:
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                continue
            found = sorted(find_in_file(path, needles))
        except OSError as err:
            errors.append(f'{path}: {err.strerror}')
            continue
        hits += [dict(describe(path, info), secret=secret) for secret in found]
    return hits, errors


def _files(roots: t.Iterable[str], skipped: tuple, errors: list[str]) -> t.Iterator[str]:
    for root in roots:
        if os.path.isfile(root):
            yield root
            continue
        for directory, subdirectories, files in os.walk(root, onerror=lambda err: errors.append(str(err))):
            subdirectories[:] = [name for name in subdirectories
                                 if not (os.path.join(directory, name) + '/').startswith(skipped)]
            for name in files:
                yield os.path.join(directory, name)


def find_in_file(path: str, needles: list[dict]) -> set[str]:
    """The names of the needles (see fingerprint) whose secret the file holds."""
    wanted = [(bytes.fromhex(needle['prefix']), needle['length'], needle['sha256'], needle['name']) for needle in needles]
    longest = max(length for _prefix, length, _digest, _name in wanted)
    found: set[str] = set()
    with open(path, 'rb') as stream:
        tail = b''
        while True:
            chunk = stream.read(CHUNK)
            if not chunk:
                return found
            data = tail + chunk
            for prefix, length, digest, name in wanted:
                start = data.find(prefix)
                while start != -1 and name not in found:
                    window = data[start:start + length]
                    if len(window) == length and hashlib.sha256(window).hexdigest() == digest:
                        found.add(name)
                    start = data.find(prefix, start + 1)
            # A secret cut by the chunk boundary starts in the last longest-1 bytes.
            tail = data[-(longest - 1):]


def describe(path: str, info: t.Optional[os.stat_result] = None) -> dict:
    """A file's path, owner, group and permission bits."""
    info = info or os.lstat(path)
    return {'path': path, 'mode': stat.S_IMODE(info.st_mode), 'owner': _name(pwd.getpwuid, info.st_uid),
            'group': _name(grp.getgrgid, info.st_gid)}


def _name(lookup: t.Callable[[int], t.Any], number: int) -> str:
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def main(argv: list[str]) -> int:
    """Scan as the JSON spec in argv[1] says ({roots, needles, skip}) and print {hits, errors} as JSON."""
    spec = json.loads(argv[1])
    hits, errors = scan(spec['roots'], spec['needles'], spec.get('skip', ()))
    json.dump({'hits': hits, 'errors': errors}, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
