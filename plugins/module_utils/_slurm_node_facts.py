# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What slurm.conf, gres.conf and cgroup.conf need to know of a compute node, read on the node (standard library only,
no Ansible import).

- its GPU device files, ``/dev/nvidiaN`` (the GPUs a Gres line may promise before the driver reports them);
- whether an NVIDIA driver is loaded (``/proc/driver/nvidia/version``: GPU autodetection needs one);
- which cgroup controllers Slurm can confine jobs with. On the unified hierarchy (v2) cores and memory are those
  ``/sys/fs/cgroup/cgroup.controllers`` lists, and devices are confined with eBPF programs slurmd attaches itself,
  which a container's slurmd may not do; on v1 a controller counts where its hierarchy is writable.

``root`` stands for ``/`` so that tests read a tree of their own.
"""

from __future__ import annotations

import os
import re
import typing as t

GPU_DEVICE = re.compile(r'nvidia[0-9]+')
# The cgroup controllers Slurm's task/cgroup uses: cpuset (cores), memory, devices.
V1_CONTROLLERS = ('cpuset', 'memory', 'devices')


class NodeFacts(t.NamedTuple):
    gpu_devices: list[str]
    nvidia_driver_loaded: bool
    cgroup: dict[str, t.Any]


def _under(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip('/'))


def gpu_devices(root: str = '/') -> list[str]:
    """The /dev/nvidiaN files, in name order (/dev/nvidia0, /dev/nvidia1, /dev/nvidia10 ...); none without /dev."""
    try:
        names = os.listdir(_under(root, '/dev'))
    except OSError:
        return []
    return sorted(f'/dev/{name}' for name in names if GPU_DEVICE.fullmatch(name))


def nvidia_driver_loaded(root: str = '/') -> bool:
    """The NVIDIA kernel driver is loaded: it publishes its version under /proc/driver/nvidia."""
    return os.path.exists(_under(root, '/proc/driver/nvidia/version'))


def cgroup(root: str = '/', in_container: bool = False) -> dict[str, t.Any]:
    """{version, cores, memory, devices}: the cgroup version and whether Slurm can confine each resource with it."""
    base = _under(root, '/sys/fs/cgroup')
    controllers_file = os.path.join(base, 'cgroup.controllers')
    if os.path.exists(controllers_file):
        try:
            with open(controllers_file, encoding='utf-8') as stream:
                controllers = stream.read().split()
        except OSError:
            controllers = []
        return {'version': 2, 'cores': 'cpuset' in controllers, 'memory': 'memory' in controllers,
                'devices': not in_container}
    writable = {name for name in V1_CONTROLLERS if os.access(os.path.join(base, name), os.W_OK)}
    return {'version': 1, 'cores': 'cpuset' in writable, 'memory': 'memory' in writable,
            'devices': 'devices' in writable}


def read(root: str = '/', in_container: bool = False) -> NodeFacts:
    """The node's GPU device files, driver and cgroup support."""
    return NodeFacts(gpu_devices=gpu_devices(root), nvidia_driver_loaded=nvidia_driver_loaded(root),
                     cgroup=cgroup(root, in_container))
