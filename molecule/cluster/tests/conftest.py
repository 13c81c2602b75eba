# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster scenario's test files share: the hosts, polling, Slurm drain reasons, simulated hardware."""

from __future__ import annotations

import os

import pytest

from scenario_helpers import docker_hosts

# The scenario's containers: controller, first and second GPU node (cluster: ctl1,gpu1,gpu2; others name theirs).
CONTROLLER, FIRST, SECOND = (os.environ.get('LLMFORGE_CLUSTER_HOSTS') or 'ctl1,gpu1,gpu2').split(',')
NODES = (FIRST, SECOND)
# The login node (login_nodes); a scenario without one sets LLMFORGE_LOGIN_HOST to an empty string.
LOGIN = os.environ.get('LLMFORGE_LOGIN_HOST', 'login1')
ALL_HOSTS = (CONTROLLER,) + NODES + ((LOGIN,) if LOGIN else ())
# The simulated hardware molecule/resources/prepare.yml gives each GPU node; the demo inventory points the
# validators (validate_*) and the health check (slurm_node_health_check_*) at it.
SIM = '/usr/local/share/llmforge-sim'
SYSFS = '/srv/llmforge-sim'
SIM_NVIDIA_SMI = '/usr/bin/nvidia-smi'


@pytest.fixture(scope='module')
def hosts():
    return docker_hosts(ALL_HOSTS)


@pytest.fixture(scope='module')
def ctl(hosts):
    return hosts[CONTROLLER]


def drain_reasons(ctl):
    """{node: reason} of every drained/down node."""
    out = ctl.check_output("sinfo -R -h -o '%N|%E'")
    return dict(line.split('|', 1) for line in out.splitlines() if '|' in line)


def set_hardware(node, gpu_x8=False, sysfs_case='ndr8_healthy'):
    """A node's simulated hardware: healthy, or GPU0 trained at PCIe x8; and a fake sysfs case."""
    node.check_output(f'cp {SIM}/gpu-healthy/* {SIM}/gpu/')
    if gpu_x8:
        node.check_output(f"sed -i '0,/<current_link_width>16x</s//<current_link_width>8x</' {SIM}/gpu/smi_q.xml")
    node.check_output(f'rm -rf {SYSFS}/build && python3 {SIM}/make_sysfs_trees.py {SYSFS}/build {sysfs_case}'
                      f' && rm -rf {SYSFS}/sys && mv {SYSFS}/build/{sysfs_case} {SYSFS}/sys && rmdir {SYSFS}/build')
