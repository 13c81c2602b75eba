#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: scratch_devices
short_description: Choose a node's local disks for the scratch filesystem, never the OS disk
version_added: "0.1.0"
description:
  - Reads C(lsblk --json --bytes) (columns NAME, KNAME, PATH, TYPE, SIZE, MODEL, SERIAL, TRAN, RM, RO, FSTYPE,
    PTTYPE, UUID, LABEL, MOUNTPOINTS), the system mounts in C(<proc_root>/mounts) and C(<proc_root>/swaps),
    and mdadm.conf, and says which whole disks the scratch filesystem should use.
  - The OS disk (any disk under C(/), C(/boot), C(/usr), C(/var), swap, directly or through md, LVM or
    dm-crypt) is never chosen. A disk that is mounted or held by another md array or LVM is refused. A disk
    that holds a partition table, a filesystem or another array's signature is refused unless O(force) is set.
  - Recognises a scratch already built by an earlier run (members of an md array named O(name), or a bare
    disk whose filesystem is labelled O(name) or mounted at O(mount_point)) so a second run does nothing.
  - Read-only, it never changes a device; the plan it returns (RV(scratch.actions)) is carried out by the
    llmforge.cluster.local_scratch role. The logic lives in C(plugins/module_utils/_scratch_devices.py).
options:
  devices:
    description:
      - Whole disks to use, as paths (symlinks such as C(/dev/disk/by-id/...) are resolved). When set,
        discovery (O(model_regex), O(min_size), O(transports)) is not used and every listed disk must be usable.
    type: list
    elements: path
    default: []
  model_regex:
    description: Discovery - regular expression searched in the disk model; empty accepts any model.
    type: str
    default: ""
  min_size:
    description: Discovery - smallest disk to use, in bytes or with a unit (C(100G), C(3T)).
    type: str
    default: "0"
  transports:
    description: Discovery - lsblk TRAN values to accept, such as C(nvme) or C(sata); empty accepts any.
    type: list
    elements: str
    default: []
  name:
    description: Name of the md array (C(/dev/md/<name>)) and label of the filesystem that mark our scratch.
    type: str
    default: scratch
  fstype:
    description: Filesystem the scratch should carry.
    type: str
    choices: [xfs, ext4]
    default: xfs
  mount_point:
    description: Where the scratch is mounted; a disk mounted there is ours, not busy.
    type: path
    default: /scratch
  force:
    description: Choose disks that hold a partition table, a filesystem or another array's signature; they are returned in RV(scratch.wipe).
    type: bool
    default: false
  lsblk_path:
    description: Path or name (searched in PATH) of C(lsblk). Only tests point it at a stand-in.
    type: path
    default: lsblk
  proc_root:
    description: Where C(mounts) and C(swaps) are read to find the system's devices. Only tests point it elsewhere.
    type: path
    default: /proc
  mdadm_conf_path:
    description: mdadm.conf files whose ARRAY lines named O(name) mark our array; missing files are skipped.
    type: list
    elements: path
    default: [/etc/mdadm/mdadm.conf, /etc/mdadm.conf]
  timeout:
    description: Seconds C(lsblk) may run.
    type: int
    default: 30
extends_documentation_fragment:
  - llmforge.cluster.validator
  - llmforge.cluster.validator.read_only
requirements:
  - C(lsblk) from util-linux 2.37 or later (the C(MOUNTPOINTS) column) on the managed node, found through O(lsblk_path)
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Find the NVMe disks of at least 1 TB for scratch
  llmforge.cluster.scratch_devices:
    transports: [nvme]
    min_size: 1T
  register: scratch

- name: Use two named disks, wiping what they hold
  llmforge.cluster.scratch_devices:
    devices:
      - /dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S64CNA0T100001
      - /dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S64CNA0T100002
    force: true
    fail_on_mismatch: false
  register: scratch

- name: Show the plan
  ansible.builtin.debug:
    msg: "{{ scratch.scratch.actions }} on {{ scratch.devices | map(attribute='path') | list }}"
"""

RETURN = r"""
devices:
  description: The chosen whole disks, in lsblk order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Kernel device name.
      type: str
      sample: nvme1n1
    path:
      description: Device path.
      type: str
      sample: /dev/nvme1n1
    size:
      description: Size in bytes.
      type: int
      sample: 3840755982336
    model:
      description: Model.
      type: str
    serial:
      description: Serial number.
      type: str
    tran:
      description: Transport, such as C(nvme) or C(sata).
      type: str
    state:
      description: C(blank), C(member) of our array, C(filesystem) (our bare-disk scratch) or C(wipe) (holds data, O(force) set).
      type: str
rejected:
  description: Every other top-level device with the reason; C(refused) is true for a disk discovery or O(devices) wanted but could not use.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "nvme3n1", "path": "/dev/nvme3n1", "reason": "holds a xfs filesystem labelled ckpt", "refused": true, "forceable": true}]
os_disks:
  description: Names of the disks that carry the running system.
  returned: always
  type: list
  elements: str
  sample: [sda, sdb]
scratch:
  description: What exists of the scratch and what is left to do.
  returned: always
  type: dict
  contains:
    present:
      description: A scratch built by an earlier run was found.
      type: bool
    target:
      description: The device to carry the filesystem - the md array, or the single disk.
      type: str
      sample: /dev/md/scratch
    array:
      description: The md array device, empty for a single disk.
      type: str
    members:
      description: Paths of the chosen disks.
      type: list
      elements: str
    fstype:
      description: Filesystem found on the target, empty when none or not known yet.
      type: str
    uuid:
      description: Filesystem UUID found on the target.
      type: str
    mounted:
      description: The target is mounted at O(mount_point).
      type: bool
    actions:
      description: Steps left, in order, among C(wipe), C(create_array), C(assemble_array), C(make_filesystem); empty when a check failed.
      type: list
      elements: str
    wipe:
      description: Disks whose signatures must be wiped first (only with O(force)).
      type: list
      elements: str
checks:
  description:
    - C(device_free) per candidate disk, C(requested_device) per listed disk not found, C(scratch_array) and
      C(scratch_devices) for the node.
    - Each check is the record every validator of this collection returns (docs/validate.md) with C(name), C(subject),
      C(status) (C(pass), C(fail), C(warn) or C(skip)), C(expected), C(actual) and C(message) (one sentence for
      people).
    - C(subject) is the disk name or C(node).
  returned: always
  type: list
  elements: dict
healthy:
  description: True when no disk or node check failed.
  returned: always
  type: bool
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.formatters import human_to_bytes

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _scratch_devices as sd


def main():
    module = AnsibleModule(
        argument_spec=errors.validator_options(
            devices=dict(type='list', elements='path', default=[]),
            model_regex=dict(type='str', default=''),
            min_size=dict(type='str', default='0'),
            transports=dict(type='list', elements='str', default=[]),
            name=dict(type='str', default='scratch'),
            fstype=dict(type='str', choices=['xfs', 'ext4'], default='xfs'),
            mount_point=dict(type='path', default='/scratch'),
            force=dict(type='bool', default=False),
            lsblk_path=dict(type='path', default='lsblk'),
            proc_root=dict(type='path', default='/proc'),
            mdadm_conf_path=dict(type='list', elements='path', default=['/etc/mdadm/mdadm.conf', '/etc/mdadm.conf']),
            timeout=dict(type='int', default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(devices=[], rejected=[], os_disks=[], scratch={}, checks=[], healthy=False)
    errors.positive(module, 'timeout', **empty)
    try:
        min_size = human_to_bytes(params['min_size'])
    except ValueError as err:
        module.fail_json(msg=f"min_size {params['min_size']!r} is not a size such as 100G or 3840755982336: {err}",
                         **empty)
    lsblk = params['lsblk_path']
    if '/' not in lsblk:
        lsblk = module.get_bin_path(lsblk, opt_dirs=['/usr/bin', '/bin', '/usr/sbin', '/sbin']) or lsblk
    what = f"the output of '{lsblk}', {params['proc_root']} and {', '.join(params['mdadm_conf_path'])}"

    def work(current):
        requested = [os.path.realpath(path) for path in params['devices']]
        roots, sources, uuids = sd.gather(lsblk, params['timeout'], params['proc_root'], params['mdadm_conf_path'],
                                          params['name'])
        return sd.select(roots, requested=requested, model_regex=params['model_regex'], min_size=min_size,
                         transports=params['transports'], name=params['name'], fstype=params['fstype'],
                         mount_point=params['mount_point'], force=params['force'], sources=sources,
                         scratch_uuids=uuids)

    errors.run_validator(module, work, (sd.ScratchDevicesError,), sd.failure_summary, what, **empty)


if __name__ == '__main__':
    main()
