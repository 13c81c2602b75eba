#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: slurm_node_facts
short_description: Read a compute node's GPU device files, NVIDIA driver and cgroup support for its Slurm configuration
version_added: "0.1.0"
description:
  - Reads what slurm.conf, gres.conf and cgroup.conf need to know of a compute node that M(ansible.builtin.setup)
    does not report, in one read-only step.
  - RV(gpu_devices), the C(/dev/nvidiaN) files; RV(nvidia_driver_loaded), whether C(/proc/driver/nvidia/version)
    exists; RV(cgroup), the cgroup version and whether Slurm can confine cores, memory and devices with it.
  - On the unified hierarchy (cgroup v2) cores and memory count where C(/sys/fs/cgroup/cgroup.controllers) lists
    C(cpuset) and C(memory); devices are confined with eBPF programs slurmd attaches itself, which a container's
    slurmd may not do, so they count outside a container (O(in_container)). On cgroup v1 a controller counts where
    its hierarchy (C(/sys/fs/cgroup/cpuset), C(memory), C(devices)) is writable.
  - The reading lives in C(plugins/module_utils/_slurm_node_facts.py), which has no Ansible import.
options:
  in_container:
    description: The node is a container (devices cannot be confined on cgroup v2 there).
    type: bool
    default: false
  root:
    description: Directory that stands for C(/) (a copy of C(/dev), C(/proc) and C(/sys) for tests).
    type: path
    default: /
extends_documentation_fragment:
  - llmforge.cluster.validator.read_only
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Read the node's GPU device files, NVIDIA driver and cgroup controllers
  llmforge.cluster.slurm_node_facts:
    in_container: "{{ ansible_virtualization_type in ['docker', 'container', 'podman'] }}"
  register: node

- name: Say how many GPU device files the node has
  ansible.builtin.debug:
    msg: "{{ node.gpu_devices | length }} GPU device files; cgroup v{{ node.cgroup.version }}"
"""

RETURN = r"""
gpu_devices:
  description: The C(/dev/nvidiaN) files, in name order.
  returned: always
  type: list
  elements: str
  sample: [/dev/nvidia0, /dev/nvidia1]
nvidia_driver_loaded:
  description: An NVIDIA kernel driver is loaded (C(/proc/driver/nvidia/version) exists).
  returned: always
  type: bool
cgroup:
  description: The cgroup version and whether Slurm can confine cores, memory and devices with it.
  returned: always
  type: dict
  contains:
    version:
      description: 2 on the unified hierarchy, else 1.
      type: int
    cores:
      description: The cpuset controller is usable.
      type: bool
    memory:
      description: The memory controller is usable.
      type: bool
    devices:
      description: Devices can be confined.
      type: bool
  sample: {version: 2, cores: true, memory: true, devices: true}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_node_facts as node_facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            in_container=dict(type='bool', default=False),
            root=dict(type='path', default='/'),
        ),
        supports_check_mode=True,
    )
    with errors.last_resort(module.fail_json, 'the GPU device files, NVIDIA driver and cgroup controllers'):
        facts = node_facts.read(module.params['root'], module.params['in_container'])
    module.exit_json(changed=False, **facts._asdict())


if __name__ == '__main__':
    main()
