#!/usr/bin/env python3
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Print, as JSON, what this node sees of a training environment: Python, torch, CUDA, NCCL, the GPU driver, packages.

Run with the environment's own interpreter; the training_env role writes the output to
<environment>/manifests/<host>.json. Nothing in it changes between two runs on an unchanged node, so nodes can be
compared file by file. Values a node cannot know (no GPU driver, a CPU build of torch) are null.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys


def driver_version() -> str | None:
    """The NVIDIA driver version, from the kernel module or else nvidia-smi --version; None without a driver."""
    try:
        with open('/proc/driver/nvidia/version', encoding='utf-8', errors='replace') as handle:
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--name', required=True, help='the environment name')
    parser.add_argument('--digest', required=True, help='the sha256 of its lock')
    args = parser.parse_args()
    manifest = {
        'environment': args.name,
        'lock_sha256': args.digest,
        'python': platform.python_version(),
        'python_executable': sys.executable,
        'machine': platform.machine(),
        **torch_facts(),
        'driver': driver_version(),
        'packages': packages(),
    }
    json.dump(manifest, sys.stdout, indent=None, sort_keys=True)
    sys.stdout.write('\n')
    return 0


if __name__ == '__main__':
    sys.exit(main())
