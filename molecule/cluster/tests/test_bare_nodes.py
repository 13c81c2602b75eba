# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU nodes started bare (prepare.yml checks it): no driver package, no /dev/nvidia*, no nvidia-smi.

The driver came through the gpu_driver role from the nodes' package repository, and its package created the
device nodes, as on a real server; slurm.conf and gres.conf were rendered from the inventory before it arrived.
"""

from __future__ import annotations

import re

import pytest

from conftest import NODES
from scenario_helpers import recap_of, run_playbook, said

FIRST_RELEASE = '580.159.04-1'
REPO = 'file:/srv/llmforge-driver-repo'


@pytest.mark.parametrize('name', NODES)
def test_driver_came_from_the_configured_repository(hosts, name):
    node = hosts[name]
    assert node.check_output("dpkg-query -W -f '${Version}' nvidia-smi") == FIRST_RELEASE
    policy = node.check_output('apt-cache policy nvidia-smi')
    assert re.search(rf'\*\*\* {re.escape(FIRST_RELEASE)} 1001\n\s+\d+ {REPO} ', policy), policy
    sources = node.file('/etc/apt/sources.list.d/llmforge-gpu-driver.sources').content_string
    assert f'URIs: {REPO}' in sources and 'Components' not in sources, sources


@pytest.mark.parametrize('name', NODES)
def test_driver_package_created_the_device_nodes(hosts, name):
    node = hosts[name]
    found = node.check_output("stat -c '%n %F %t:%T' /dev/nvidia[0-9]* /dev/nvidiactl").splitlines()
    assert sorted(found) == sorted([f'/dev/nvidia{i} character special file c3:{i:x}' for i in range(8)]
                                   + ['/dev/nvidiactl character special file c3:ff']), found
    assert node.check_output('nvidia-smi --list-gpus').count('NVIDIA H200') == 8
    assert 'DRIVER version      : 580.159.04' in node.check_output('nvidia-smi --version')


def test_a_node_with_fewer_gpus_than_gpu_count_is_refused(hosts):
    """A GPU lost after bring-up: slurm_node stops before touching slurmd and names the variable."""
    node = hosts[NODES[-1]]
    before = node.check_output('stat -c %Y /etc/default/slurmd')
    node.check_output('rm /dev/nvidia7')
    try:
        result = run_playbook('--limit', NODES[-1], playbook='llmforge.cluster.compute')
    finally:
        node.check_output('mknod -m 0666 /dev/nvidia7 c 195 7')
    assert result.returncode != 0
    message = said(result)
    assert (f'gpu_count is 8 for {NODES[-1]}, but only 7 /dev/nvidiaN devices exist (/dev/nvidia0, /dev/nvidia1, '
            '/dev/nvidia2, /dev/nvidia3, /dev/nvidia4, /dev/nvidia5, /dev/nvidia6)') in message, message[-3000:]
    assert recap_of(NODES[-1])(result)['failed'] == 1
    assert node.check_output('stat -c %Y /etc/default/slurmd') == before
    assert node.service('slurmd').is_running
