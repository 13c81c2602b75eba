# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The infiniband role on two Debian 13 containers: packages, limits, modules, IPoIB files, opensm, RoCE, refusals."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
import testinfra

from scenario_helpers import recaps, run_playbook, said

NODES = ('ib-1', 'ib-2')
PACKAGES = ('rdma-core', 'ibverbs-providers', 'infiniband-diags', 'perftest', 'ibverbs-utils')
# ib-1: index 0 (first in the group); ib-2: node_index 5. Rail ib0 is 10.10.0.0/16, rail ib1 10.11.0.0/24.
ADDRESSES = {
    'ib-1': {'ib0': '10.10.0.1/16', 'ib1': '10.11.0.1/24'},
    'ib-2': {'ib0': '10.10.0.6/16', 'ib1': '10.11.0.6/24'},
}
MODES = {'ib0': ('4092', 'datagram'), 'ib1': ('65520', 'connected')}
NETWORK_DIR = '/etc/systemd/network'


def node(name):
    return testinfra.get_host(f'docker://{name}')


@pytest.fixture(scope='module', params=NODES)
def host(request):
    return node(request.param)


def recap(result: subprocess.CompletedProcess) -> dict[str, dict[str, int]]:
    """The PLAY RECAP counters of every node."""
    found = recaps(result)
    assert set(NODES) <= set(found), result.stdout[-3000:] + result.stderr[-3000:]
    return found


def snapshot(host) -> str:
    """Checksums of every file the role manages, to prove a refused run changed none of them."""
    return host.check_output(
        'find /etc/systemd/network /etc/security/limits.d /etc/modules-load.d /etc/opensm /etc/default/opensm '
        '/usr/local/sbin /etc/systemd/system -maxdepth 1 -type f -name "*" 2>/dev/null | sort | xargs -r md5sum')


def test_rdma_userspace_is_installed(host):
    for package in PACKAGES:
        assert host.package(package).is_installed, package
    assert host.file('/usr/bin/ibv_devinfo').exists
    assert host.file('/usr/bin/ib_write_bw').exists


def test_opensm_is_installed_only_where_asked(host):
    assert host.package('opensm').is_installed == (host.backend.name == 'ib-1')


def test_memlock_is_unlimited_for_every_user_and_root(host):
    limits = host.file('/etc/security/limits.d/90-llmforge-rdma.conf')
    assert limits.user == 'root' and limits.mode == 0o644
    rules = [line.split() for line in limits.content_string.splitlines() if line and not line.startswith('#')]
    assert sorted(rules) == sorted([[who, kind, 'memlock', 'unlimited'] for who in ('*', 'root') for kind in ('soft', 'hard')])


def test_rdma_modules_load_at_boot(host):
    modules = host.file('/etc/modules-load.d/llmforge-infiniband.conf')
    assert modules.mode == 0o644
    assert [line for line in modules.content_string.splitlines() if not line.startswith('#')] == ['ib_umad', 'ib_ipoib', 'rdma_ucm']


def test_each_rail_has_a_networkd_file_with_this_hosts_address_mtu_and_mode(host):
    name = host.backend.name
    for interface, cidr in ADDRESSES[name].items():
        network = host.file(f'{NETWORK_DIR}/60-llmforge-ipoib-{interface}.network')
        assert network.user == 'root' and network.mode == 0o644
        lines = network.content_string.splitlines()
        mtu, mode = MODES[interface]
        for expected in (f'Name={interface}', f'Address={cidr}', f'MTUBytes={mtu}', f'Mode={mode}'):
            assert expected in lines, f'{interface}: {expected}'
        assert not [line for line in lines if line.startswith(('Gateway', 'DHCP'))]


def test_the_two_nodes_get_different_addresses():
    found = {}
    for name in NODES:
        content = node(name).file(f'{NETWORK_DIR}/60-llmforge-ipoib-ib0.network').content_string
        found[name] = re.search(r'^Address=(\S+)$', content, re.M).group(1)
    assert found == {name: ADDRESSES[name]['ib0'] for name in NODES}


def test_networkd_is_enabled_and_the_management_network_untouched(host):
    assert host.service('systemd-networkd').is_enabled
    assert sorted(host.file(NETWORK_DIR).listdir()) == ['60-llmforge-ipoib-ib0.network', '60-llmforge-ipoib-ib1.network']
    assert host.check_output('ip -o -4 route show default')


def test_opensm_is_configured_enabled_and_not_started_in_a_container():
    host = node('ib-1')
    conf = host.file('/etc/opensm/opensm.conf').content_string.splitlines()
    assert 'sm_priority 14' in conf
    assert 'partition_config_file /etc/opensm/partitions.conf' in conf
    partitions = host.file('/etc/opensm/partitions.conf').content_string
    # The 65520-byte connected-mode rail needs the 4096-byte IB MTU (code 5).
    assert 'Default=0x7fff, ipoib, mtu=5, defmember=full' in partitions
    assert 'PORTS="ALL"' in host.file('/etc/default/opensm').content_string
    assert host.service('opensm').is_enabled
    assert not host.service('opensm@*').is_running


def test_no_opensm_configuration_where_it_is_not_asked():
    assert not node('ib-2').file('/etc/opensm/opensm.conf').exists


def test_roce_settings_are_written_for_boot_only_where_asked():
    host = node('ib-2')
    script = host.file('/usr/local/sbin/llmforge-roce-qos')
    assert script.mode == 0o755
    assert '--trust dscp --pfc 0,0,0,1,0,0,0,0' in script.content_string
    assert 'ecn/$point/enable/3' in script.content_string
    assert host.run('sh -n /usr/local/sbin/llmforge-roce-qos').rc == 0
    assert host.service('llmforge-roce-qos').is_enabled
    # Without RDMA ports the script finds nothing to change and succeeds.
    assert host.run('/usr/local/sbin/llmforge-roce-qos').rc == 0
    assert not node('ib-1').file('/usr/local/sbin/llmforge-roce-qos').exists


def test_check_mode_reports_no_change_and_says_what_was_skipped():
    result = run_playbook('--check', '--diff')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name, counters in recap(result).items():
        assert counters['changed'] == 0 and counters['failed'] == 0, (name, result.stdout[-3000:])
    text = said(result)
    assert 'Skipped in a container (docker): modprobe ib_umad, ib_ipoib, rdma_ucm' in text
    assert 'Skipped in a container (docker): starting systemd-networkd and networkctl reload' in text
    assert 'Skipped in a container (docker): starting opensm' in text
    assert 'Skipped in a container (docker): applying trust dscp, PFC on priorities 3 and ECN on priorities 3' in text


REFUSED = [
    pytest.param({'infiniband_ipoib_networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/15'},
                                                {'interface': 'ib1', 'cidr': '10.10.0.0/16'}]},
                 'infiniband_ipoib_networks[1].cidr 10.10.0.0/16 overlaps infiniband_ipoib_networks[0].cidr 10.10.0.0/15',
                 id='overlapping-rails'),
    pytest.param({'infiniband_ipoib_networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/30'}]},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/30 is too small: from infiniband_ipoib_host_offset 1 on it '
                 'holds 2 address(es), but ib-2 has index 5 (2 host(s) in group ib_nodes)',
                 id='subnet-too-small'),
    pytest.param({'infiniband_stack': 'doca', 'infiniband_doca_repo_url': 'http://doca.invalid/doca/2.9.1/debian13/x86_64/'},
                 'The DOCA-OFED repository in infiniband_doca_repo_url cannot be reached', id='doca-unreachable'),
    pytest.param({'infiniband_stack': 'doca'}, 'infiniband_doca_repo_url must be the DOCA-OFED repository', id='doca-no-url'),
]


@pytest.mark.parametrize(('extra', 'message'), REFUSED)
def test_bad_input_fails_before_any_change(extra, message):
    before = {name: snapshot(node(name)) for name in NODES}
    result = run_playbook('-e', json.dumps(extra))
    assert result.returncode != 0
    assert message in said(result), result.stdout[-3000:]
    for name, counters in recap(result).items():
        assert counters['changed'] == 0 and counters['failed'] == 1, (name, counters)
    assert {name: snapshot(node(name)) for name in NODES} == before


def test_a_rail_over_the_management_network_is_refused():
    host = node('ib-1')
    address = host.check_output("ip -o -4 route show default | awk '{print $5}' | xargs -I{} ip -o -4 addr show dev {}")
    cidr = re.search(r'inet (\S+)', address).group(1)
    network = host.check_output(f"python3 -c \"import ipaddress; print(ipaddress.ip_interface('{cidr}').network)\"")
    result = run_playbook('-e', json.dumps({'infiniband_ipoib_networks': [{'interface': 'ib0', 'cidr': network}]}))
    assert result.returncode != 0
    assert f'infiniband_ipoib_networks[0].cidr {network} overlaps the management network' in said(result)
