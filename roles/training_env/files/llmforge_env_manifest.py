#!/usr/bin/env python3
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record what this node sees of a training environment: Python, torch, CUDA, NCCL, the GPU driver, packages.

Run with the environment's own interpreter. Without --write it prints the manifest as JSON. With --write PATH (what
the training_env role runs, PATH being <environment>/manifests/<host>.json) it keeps that file up to date and prints
one JSON line: {"changed": ..., "reason": ...}. Nothing in a manifest changes between two runs on an unchanged node,
so nodes can be compared file by file. Values a node cannot know (no GPU driver, a CPU build of torch) are null.

Importing torch takes seconds, so --write reads the environment again only when something the manifest reports may
have changed: beside the manifest, .<host>.inputs keeps a digest of what it was read from (the interpreter, every
Python distribution the interpreter can import, the NCCL and cuDNN libraries, the driver's version) and of the
manifest's bytes. A manifest edited, removed or given another mode or owner, or any of those inputs changed, and it
is read and written again. --check says what it would do and writes nothing.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

# Where the NCCL and cuDNN that torch may load from the system live (besides LD_LIBRARY_PATH).
LIBRARY_DIRS = ('/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib',
                '/usr/local/cuda/lib64', '/usr/local/cuda/targets/x86_64-linux/lib')
LIBRARY_PATTERNS = ('libnccl.so*', 'libcudnn.so*')
DRIVER_VERSION_FILE = '/proc/driver/nvidia/version'


def driver_version() -> str | None:
    """The NVIDIA driver version, from the kernel module or else nvidia-smi --version; None without a driver."""
    try:
        with open(DRIVER_VERSION_FILE, encoding='utf-8', errors='replace') as handle:
            found = re.search(r'Kernel Module(?: for [^ ]+)?\s+([0-9][0-9.]+)', handle.read())
            if found:
                return found.group(1)
    except OSError:
        pass
    try:
        proc = subprocess.run(['nvidia-smi', '--version'], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'^DRIVER version\s*:\s*(\S+)', proc.stdout, re.M)
    return found.group(1) if proc.returncode == 0 and found else None


def torch_facts() -> dict:
    try:
        import torch  # noqa: PLC0415 - optional: an environment without torch still gets a manifest
    except Exception as err:  # pylint: disable=broad-except
        return {'torch': None, 'torch_error': f'{type(err).__name__}: {err}'[:200]}
    facts = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'cudnn': None, 'nccl': None}
    if torch.version.cuda:
        try:
            facts['cudnn'] = torch.backends.cudnn.version()
            facts['nccl'] = '.'.join(str(part) for part in torch.cuda.nccl.version())
        except Exception:  # pylint: disable=broad-except
            pass
    facts['distributed_backends'] = sorted(name for name, available in (
        ('gloo', torch.distributed.is_available() and torch.distributed.is_gloo_available()),
        ('nccl', torch.distributed.is_available() and torch.distributed.is_nccl_available()),
        ('mpi', torch.distributed.is_available() and torch.distributed.is_mpi_available())) if available)
    return facts


def _canonical(name: str) -> str:
    return re.sub(r'[-_.]+', '-', name).lower()


def packages() -> list[str]:
    """name==version of what the environment installed itself, and of everything torch and those need.

    Packages of the OS that a system-site-packages environment sees but does not use are left out: whatever a later
    role installs on the node must not change the manifest.
    """
    dists = {}
    for dist in importlib.metadata.distributions():
        if dist.metadata['Name']:
            dists.setdefault(_canonical(dist.metadata['Name']), dist)
    prefix = os.path.realpath(sys.prefix) + os.sep
    wanted = {name for name, dist in dists.items()
              if os.path.realpath(str(dist.locate_file(''))).startswith(prefix)}
    queue = sorted(wanted | ({'torch'} & set(dists)))
    wanted.update(queue)
    while queue:
        for requirement in dists[queue.pop()].requires or []:
            if re.search(r'\bextra\s*==', requirement):  # optional extras are not part of the environment
                continue
            found = re.match(r'\s*([A-Za-z0-9][A-Za-z0-9._-]*)', requirement)
            name = _canonical(found.group(1)) if found else ''
            if name in dists and name not in wanted:
                wanted.add(name)
                queue.append(name)
    return sorted((f"{dists[name].metadata['Name']}=={dists[name].version}" for name in wanted), key=str.lower)


def manifest(name: str, digest: str) -> dict:
    return {
        'environment': name,
        'lock_sha256': digest,
        'python': platform.python_version(),
        'python_executable': sys.executable,
        'machine': platform.machine(),
        **torch_facts(),
        'driver': driver_version(),
        'packages': packages(),
    }


def render(data: dict) -> bytes:
    """The manifest file's bytes: indented by 4, keys sorted, a final newline."""
    return (json.dumps(data, indent=4, sort_keys=True, separators=(',', ': ')) + '\n').encode()


def _stat_line(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return f'{path} -'
    return f'{path} {st.st_size} {st.st_mtime_ns} {st.st_ino}'


def inputs_digest(name: str, digest: str) -> str:
    """A digest of everything the manifest is read from, cheap to compute (no import of torch).

    The interpreter; the name and time of every distribution's metadata directory on sys.path (an install, upgrade or
    reinstall of any Python package, pip's or the OS's, changes one); the NCCL and cuDNN libraries in the system's and
    LD_LIBRARY_PATH's directories; the driver's version file, or the nvidia-smi that would report it.
    """
    lines = [name, digest, sys.version, sys.executable, os.path.realpath(sys.prefix), platform.machine()]
    for entry in sys.path:
        try:
            with os.scandir(entry or '.') as found:
                names = sorted(item.name for item in found if item.name.endswith(('.dist-info', '.egg-info')))
        except OSError:
            continue
        lines.append(f'path {entry}')
        lines.extend(_stat_line(os.path.join(entry, item)) for item in names)
    library_dirs = [d for d in os.environ.get('LD_LIBRARY_PATH', '').split(':') if d] + list(LIBRARY_DIRS)
    for directory in library_dirs:
        for pattern in LIBRARY_PATTERNS:
            lines.extend(_stat_line(path) for path in sorted(glob.glob(os.path.join(directory, pattern))))
    try:
        with open(DRIVER_VERSION_FILE, 'rb') as handle:
            lines.append(f'driver {hashlib.sha256(handle.read()).hexdigest()}')
    except OSError:
        smi = shutil.which('nvidia-smi')
        lines.append(_stat_line(os.path.realpath(smi)) if smi else 'driver -')
    return hashlib.sha256('\n'.join(lines).encode()).hexdigest()


def _state_path(path: str) -> str:
    return os.path.join(os.path.dirname(path), '.' + os.path.basename(path) + '.inputs')


def _read(path: str) -> bytes | None:
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except OSError:
        return None


def _atomic_write(path: str, data: bytes) -> None:
    """Write data to path through a temporary file in the same directory, mode 0644, owned by root when root runs."""
    handle, temp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.' + os.path.basename(path) + '.')
    try:
        with os.fdopen(handle, 'wb') as out:
            out.write(data)
        os.chmod(temp, 0o644)
        if os.geteuid() == 0:
            os.chown(temp, 0, 0)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def _file_ok(path: str) -> bool:
    """The manifest's mode and owner are the ones --write gives it."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_mode & 0o7777) == 0o644 and (os.geteuid() != 0 or (st.st_uid, st.st_gid) == (0, 0))


def write(path: str, name: str, digest: str, check: bool) -> dict:
    """Keep the manifest at path up to date; what was (or in check mode would be) done."""
    inputs = inputs_digest(name, digest)
    current = _read(path)
    state = _read(_state_path(path))
    if current is not None and _file_ok(path) and \
            state == f'{inputs} {hashlib.sha256(current).hexdigest()}\n'.encode():
        return {'changed': False, 'reason': 'the manifest and what it was read from are unchanged'}
    data = render(manifest(name, digest))
    if current == data and _file_ok(path):
        reason = 'the manifest was read again and is the same'
        changed = False
    else:
        reason = 'no manifest yet' if current is None else 'the manifest differs from what the node sees'
        changed = True
    if not check:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        if changed:
            _atomic_write(path, data)
        _atomic_write(_state_path(path), f'{inputs} {hashlib.sha256(data).hexdigest()}\n'.encode())
    return {'changed': changed, 'reason': reason}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--name', required=True, help='the environment name')
    parser.add_argument('--digest', required=True, help='the sha256 of its lock')
    parser.add_argument('--write', metavar='PATH', help='keep the manifest file PATH up to date')
    parser.add_argument('--check', action='store_true', help='with --write: say what would change, write nothing')
    args = parser.parse_args()
    if args.write:
        result = write(os.path.abspath(args.write), args.name, args.digest, args.check)
        json.dump({**result, 'path': os.path.abspath(args.write)}, sys.stdout, sort_keys=True)
    else:
        json.dump(manifest(args.name, args.digest), sys.stdout, indent=None, sort_keys=True)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
