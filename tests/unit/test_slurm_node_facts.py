# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What slurm_node_facts reads of a compute node for slurm.conf, gres.conf and cgroup.conf, on trees made to look like
a GPU node's /dev, /proc and /sys (cgroup v2 as on Debian 13, v1 as on the hosts of these test machines)."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_node_facts as facts
from ansible_collections.llmforge.cluster.plugins.modules import slurm_node_facts

# /sys/fs/cgroup/cgroup.controllers of a Debian 13 host (root cgroup) and of a container's delegated subtree.
HOST_V2 = 'cpuset cpu io memory hugetlb pids rdma misc\n'
DELEGATED_V2 = 'cpu io memory pids\n'


def tree(root: pathlib.Path, files: dict[str, str] = None, dirs: tuple[str, ...] = ()) -> str:
    for name in dirs:
        (root / name).mkdir(parents=True, exist_ok=True)
    for name, text in (files or {}).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding='utf-8')
    return str(root)


def test_gpu_device_files_are_the_numbered_nvidia_devices_in_name_order(tmp_path):
    names = ['nvidia1', 'nvidia10', 'nvidia0', 'nvidiactl', 'nvidia-uvm', 'nvidia-modeset', 'nvidia2x', 'nvme0']
    root = tree(tmp_path, {f'dev/{name}': '' for name in names}, dirs=('dev/nvidia-caps',))
    assert facts.gpu_devices(root) == ['/dev/nvidia0', '/dev/nvidia1', '/dev/nvidia10']


def test_no_dev_directory_means_no_gpu_device_files(tmp_path):
    assert facts.gpu_devices(str(tmp_path)) == []


def test_the_driver_counts_as_loaded_where_it_publishes_its_version(tmp_path):
    assert facts.nvidia_driver_loaded(str(tmp_path)) is False
    root = tree(tmp_path, {'proc/driver/nvidia/version': 'NVRM version: NVIDIA UNIX Open Kernel Module  570.133.20\n'})
    assert facts.nvidia_driver_loaded(root) is True


@pytest.mark.parametrize('controllers, in_container, expected', [
    pytest.param(HOST_V2, False, {'version': 2, 'cores': True, 'memory': True, 'devices': True}, id='host'),
    pytest.param(HOST_V2, True, {'version': 2, 'cores': True, 'memory': True, 'devices': False}, id='container'),
    pytest.param(DELEGATED_V2, True, {'version': 2, 'cores': False, 'memory': True, 'devices': False},
                 id='delegated-without-cpuset'),
    pytest.param('', False, {'version': 2, 'cores': False, 'memory': False, 'devices': True}, id='no-controllers'),
])
def test_cgroup_v2_counts_the_listed_controllers(tmp_path, controllers, in_container, expected):
    root = tree(tmp_path, {'sys/fs/cgroup/cgroup.controllers': controllers})
    assert facts.cgroup(root, in_container) == expected


def test_cgroup_v1_counts_the_hierarchies_that_exist_and_are_writable(tmp_path):
    root = tree(tmp_path, dirs=('sys/fs/cgroup/cpuset', 'sys/fs/cgroup/memory', 'sys/fs/cgroup/cpu,cpuacct'))
    assert facts.cgroup(root) == {'version': 1, 'cores': True, 'memory': True, 'devices': False}


@pytest.mark.skipif(os.geteuid() == 0, reason='root may write a read-only directory')
def test_cgroup_v1_leaves_out_a_read_only_hierarchy(tmp_path):
    root = tree(tmp_path, dirs=('sys/fs/cgroup/cpuset', 'sys/fs/cgroup/memory', 'sys/fs/cgroup/devices'))
    (tmp_path / 'sys/fs/cgroup/memory').chmod(0o555)
    assert facts.cgroup(root)['memory'] is False


def test_the_module_returns_the_node_facts_and_changes_nothing(tmp_path, capsys):
    root = tree(tmp_path, {'dev/nvidia0': '', 'dev/nvidia1': '', 'proc/driver/nvidia/version': 'NVRM\n',
                           'sys/fs/cgroup/cgroup.controllers': HOST_V2})
    with patch_module_args({'root': root, 'in_container': True, '_ansible_check_mode': True}), pytest.raises(SystemExit):
        slurm_node_facts.main()
    result = json.loads(capsys.readouterr().out)
    assert result['changed'] is False
    assert result['gpu_devices'] == ['/dev/nvidia0', '/dev/nvidia1'] and result['nvidia_driver_loaded'] is True
    assert result['cgroup'] == {'version': 2, 'cores': True, 'memory': True, 'devices': False}
