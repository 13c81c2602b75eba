# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The host firewall (llmforge.cluster.firewall) seen from the network.

Each probe is a real TCP connection from one container to another's management address, on a port where a daemon
listens: Slurm's ports answer only cluster hosts, SSH to a GPU node only the login and controller nodes, the
node exporters nobody here (the scenario has no metrics host), while SSH to the login node stays open to everyone.
admin1 (inside cluster_admin_cidrs) and outsider1 (outside) are test clients outside the `cluster` group.
"""

from __future__ import annotations

import os
import pathlib
import re

import pytest

import scenario_helpers
from scenario_helpers import docker_hosts

# molecule.yml gives each container its address on the one test network (the management network here).
ADDRESSES = {'ctl1': '10.213.0.10', 'gpu1': '10.213.0.11', 'gpu2': '10.213.0.12', 'login1': '10.213.0.20'}
CLIENTS = ('ctl1', 'gpu1', 'gpu2', 'login1', 'admin1', 'outsider1')


@pytest.fixture(scope='module')
def hosts():
    return docker_hosts(CLIENTS)


def reach(client, server: str, port: int) -> str:
    return scenario_helpers.reach(client, ADDRESSES[server], port)


def test_every_cluster_host_loads_the_ruleset_and_keeps_name_resolution(hosts):
    for name in ADDRESSES:
        table = hosts[name].run('nft list table inet llmforge')
        assert table.rc == 0, (name, table.stderr)
        # Docker's embedded DNS lives in the same network namespace: the ruleset replaces only its own table.
        assert hosts[name].run('getent hosts ctl1').rc == 0, name
    for name in ('admin1', 'outsider1'):
        assert hosts[name].run('nft list table inet llmforge').rc != 0, name


@pytest.mark.parametrize('server,port', [('ctl1', 6817), ('ctl1', 6819), ('gpu1', 6818)])
def test_slurm_ports_answer_cluster_hosts_only(hosts, server, port):
    insider = 'gpu2' if server == 'ctl1' else 'ctl1'
    assert reach(hosts[insider], server, port) == 'open'
    assert reach(hosts['login1'], server, port) == 'open'
    assert reach(hosts['outsider1'], server, port) != 'open'
    assert reach(hosts['admin1'], server, port) != 'open'


def test_ssh_to_a_gpu_node_only_from_login_and_controller_nodes(hosts):
    assert hosts['gpu1'].socket('tcp://0.0.0.0:22').is_listening or hosts['gpu1'].socket(
        f"tcp://{ADDRESSES['gpu1']}:22").is_listening
    assert reach(hosts['login1'], 'gpu1', 22) == 'open'
    assert reach(hosts['ctl1'], 'gpu1', 22) == 'open'
    for client in ('gpu2', 'admin1', 'outsider1'):
        assert reach(hosts[client], 'gpu1', 22) != 'open', client


def test_ssh_to_the_login_node_stays_open(hosts):
    for client in ('admin1', 'outsider1', 'gpu1'):
        assert reach(hosts[client], 'login1', 22) == 'open', client


def test_node_exporters_answer_no_host_but_the_metrics_host(hosts):
    # No host of the `monitoring` group in this scenario: nobody may scrape (the monitoring scenario proves the
    # metrics host can).
    # node_exporter listens on the management address; the node itself reaches it (loopback traffic).
    assert reach(hosts['gpu1'], 'gpu1', 9100) == 'open'
    for client in ('ctl1', 'gpu2', 'login1', 'admin1', 'outsider1'):
        assert reach(hosts[client], 'gpu1', 9100) != 'open', client


def test_dropped_connections_are_counted(hosts):
    before = hosts['gpu1'].check_output('nft list table inet llmforge')
    reach(hosts['outsider1'], 'gpu1', 6818)
    after = hosts['gpu1'].check_output('nft list table inet llmforge')
    assert before != after, after


# Listeners allowed on every address, each with the reason: the firewall is what limits who reaches them.
ANY_ADDRESS_PORTS = {
    6817: 'slurmctld 24.11 binds every address (it ignores CommunicationParameters=NoInAddrAny)',
    6818: "slurmd on the GPU nodes and sackd on the login node: Slurm's default binding to every address",
    6819: "slurmdbd: Slurm's default binding to every address",
}
ANY_ADDRESS = {('login1', 22): 'sshd on the login node serves users from anywhere (firewall_login_ssh_cidrs)'}
# srun and slurmstepd of a running job listen on ephemeral ports for its steps' I/O (SrunPortRange when set).
ANY_ADDRESS_PROGRAMS = {'srun', 'slurmstepd'}


def _listeners(host) -> list[tuple[str, int, str]]:
    """(address, port, process) of every listening TCP socket, from ss -ltnp."""
    found = []
    for line in host.check_output('ss -ltnpH').splitlines():
        fields = line.split()
        address, port = fields[3].rsplit(':', 1)
        process = re.search(r'users:\(\("([^"]+)"', line)
        found.append((address.strip('[]').split('%')[0], int(port), process.group(1) if process else '?'))
    return found


def test_every_listener_is_on_the_management_address_or_loopback(hosts):
    """Writes the table of listeners to build/molecule/cluster-listeners.txt, then checks each one."""
    table, wrong = [], []
    for name, address in ADDRESSES.items():
        for bound, port, process in sorted(_listeners(hosts[name])):
            table.append(f'{name} {bound}:{port} {process}')
            if bound == '127.0.0.11':
                continue  # Docker's embedded DNS server, in every container's namespace
            loopback = bound.startswith('127.') or bound == '::1'
            anywhere = (name, port) in ANY_ADDRESS or port in ANY_ADDRESS_PORTS or process in ANY_ADDRESS_PROGRAMS
            if not (loopback or bound == address or anywhere):
                wrong.append(f'{name} {bound}:{port} {process}')
    out = pathlib.Path(os.environ.get('MOLECULE_PROJECT_DIRECTORY', '.')) / 'build' / 'molecule'
    out.mkdir(parents=True, exist_ok=True)
    (out / 'cluster-listeners.txt').write_text('\n'.join(table) + '\n', encoding='utf-8')
    assert not wrong, 'listening beyond the management address:\n' + '\n'.join(wrong) + '\nall:\n' + '\n'.join(table)
