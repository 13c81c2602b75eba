# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the cluster scenario's test files share: the hosts, polling, Slurm drain reasons, simulated hardware."""

from __future__ import annotations

import os
import shlex

import pytest

from scenario_helpers import docker_hosts

# The scenario's containers: controller, first and second GPU node (cluster: ctl1,gpu1,gpu2; others name theirs).
CONTROLLER, FIRST, SECOND = (os.environ.get('LLMFORGE_CLUSTER_HOSTS') or 'ctl1,gpu1,gpu2').split(',')
NODES = (FIRST, SECOND)
# The login node (login_nodes); a scenario without one sets LLMFORGE_LOGIN_HOST to an empty string.
LOGIN = os.environ.get('LLMFORGE_LOGIN_HOST', 'login1')
ALL_HOSTS = (CONTROLLER,) + NODES + ((LOGIN,) if LOGIN else ())
# Who runs the users' jobs: a directory user (the scenario's LDAP users, the same uid on every host, home on the
# shared storage), logged in on the login node; on the controller where a scenario has no login node. Root submits
# only where a test is about root.
JOB_USER = os.environ.get('LLMFORGE_JOB_USER', 'alice')
SUBMIT_HOST = LOGIN or CONTROLLER
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


class Session:
    """A user logged in on a host: each command runs in a login shell of theirs (their environment, their home)."""

    def __init__(self, host, name, where):
        self.host, self.name, self.where = host, name, where

    def run(self, command):
        return self.host.run(f'runuser -l {self.name} -c {shlex.quote(command)}')

    def check_output(self, command):
        result = self.run(command)
        assert result.rc == 0, f'{self.name}@{self.where}: {command}: rc {result.rc}\n' \
                               f'{result.stdout}{result.stderr}'
        return result.stdout.rstrip('\r\n')


def login_as(hosts, name):
    """`name` logged in where users submit (the login node)."""
    return Session(hosts[SUBMIT_HOST], name, SUBMIT_HOST)


@pytest.fixture(scope='module')
def user(hosts):
    """The job user, logged in on the login node."""
    session = login_as(hosts, JOB_USER)
    assert session.host.run(f'getent passwd {JOB_USER}').rc == 0, f'{JOB_USER} is not a user on {SUBMIT_HOST}'
    return session


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
