#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: oci_rootfs
short_description: Unpack an OCI bundle's rootfs from a tarball, replacing it whole when the tarball changes
version_added: "0.1.0"
description:
  - Makes C(<bundle>/rootfs) hold the content of O(tarball). The tarball's sha256 is compared with the one recorded in
    C(<bundle>/.rootfs-checksum) by the last unpack; where they differ (or nothing is recorded) the record and the
    old rootfs are removed, the tarball is unpacked into a new rootfs as root (owners kept; C(tar) recognises the
    compression), and its checksum is recorded last, so an interrupted unpack leaves no record and the next run
    unpacks again.
  - Then creates each of O(mount_points) below the rootfs with mode 0755, or sets an existing one to 0755, because a
    job's container runs rootless and cannot create them in the root-owned rootfs. A mount point under a symbolic link of
    the rootfs (Debian's C(/var/run -> /run)) is skipped, since followed from outside the container it would lead into the
    host.
  - M(ansible.builtin.unarchive) neither removes the files of the previous tarball nor records which tarball it
    unpacked, and M(ansible.builtin.file) follows a symbolic link of the rootfs into the host.
  - The decisions live in C(plugins/module_utils/_oci_rootfs.py), which has no Ansible import.
options:
  bundle:
    description: The bundle's directory (it holds C(config.json)); it must exist, except in check mode.
    type: path
    required: true
  tarball:
    description:
      - The rootfs tarball on the node, already checked (M(ansible.builtin.get_url) with a checksum).
      - In check mode a missing tarball (not downloaded yet) counts as one to unpack; otherwise it fails the task.
    type: path
    required: true
  mount_points:
    description: Absolute paths inside the container to create below the rootfs with mode 0755.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reads the checksums and the mount points and reports what it would change.
  diff_mode:
    support: none
    description: A rootfs is too large to show.
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Unpack the rootfs of bundle ubuntu and create its mount points
  llmforge.cluster.oci_rootfs:
    bundle: /var/lib/llmforge/containers/ubuntu
    tarball: /var/lib/llmforge/containers/.tarballs/ubuntu.tar
    mount_points: [/run/slurm, /var/run/slurm, /proc, /dev, /sys, /tmp]
"""

RETURN = r"""
checksum:
  description: The tarball's sha256 as C(sha256:<hex>); empty in check mode when the tarball is missing.
  returned: always
  type: str
  sample: sha256:6c3e...
unpacked:
  description: Whether the rootfs was (or in check mode would be) unpacked again.
  returned: always
  type: bool
mount_points_made:
  description: The directories below the rootfs created or set to 0755 (in check mode, that would be).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/llmforge/containers/ubuntu/rootfs/run/slurm]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _oci_rootfs as rootfs
from ansible_collections.llmforge.cluster.plugins.module_utils._module_errors import last_resort


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            'bundle': {'type': 'path', 'required': True},
            'tarball': {'type': 'path', 'required': True},
            'mount_points': {'type': 'list', 'elements': 'str', 'default': []},
        },
        supports_check_mode=True,
    )
    bundle, tarball = module.params['bundle'], module.params['tarball']
    result = {'changed': False, 'checksum': '', 'unpacked': False, 'mount_points_made': []}
    with last_resort(module.fail_json, what=f'the bundle {bundle}', **result):
        try:
            points = rootfs.check_mount_points(module.params['mount_points'])
            # In check mode an earlier task would have made the directory.
            if not os.path.isdir(bundle) and not module.check_mode:
                raise rootfs.RootfsError(f'bundle: {bundle} is not a directory')
            if os.path.isfile(tarball):
                result['checksum'] = rootfs.sha256_file(tarball)
            elif not module.check_mode:
                raise rootfs.RootfsError(f'tarball: {tarball} does not exist')
            result['unpacked'] = not result['checksum'] or rootfs.recorded_checksum(bundle) != result['checksum']
            rootfs_dir = os.path.join(bundle, rootfs.ROOTFS)
            if result['unpacked'] and not module.check_mode:
                rootfs.unpack(bundle, tarball, result['checksum'], module.run_command)
            if result['unpacked'] and module.check_mode:
                # The new rootfs is not there to look at: every mount point counts as one to make.
                result['mount_points_made'] = [rootfs_dir + point for point in points]
            else:
                result['mount_points_made'] = rootfs.mount_points_to_make(rootfs_dir, points)
                if not module.check_mode:
                    rootfs.make_mount_points(rootfs_dir, result['mount_points_made'])
        except (rootfs.RootfsError, OSError) as err:
            result['changed'] = result['unpacked'] and not module.check_mode
            module.fail_json(msg=str(err), **result)
    result['changed'] = result['unpacked'] or bool(result['mount_points_made'])
    module.exit_json(**result)


if __name__ == '__main__':
    main()
