# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firewall role's ruleset per node role, rendered as a play renders it for a synthetic cluster.

Controller (and accounting), metrics host, login node and two GPU nodes, with management, storage and training
networks; the GPU nodes' facts hold no storage or training address yet (the fabric play comes after the firewall).
Each host's file is parsed into its address sets and input rules, and, where nft can check it here, `nft -c` checks it.
"""

from __future__ import annotations

import copy
import re
import shutil
import subprocess

import pytest

from role_render import render

NETWORKS = {
    'management': {'cidr': '10.10.0.0/16', 'interface': 'eno1'},
    'storage': {'cidr': '10.20.0.0/16', 'interface': 'ib1', 'groups': ['gpu_nodes', 'login_nodes']},
    'training': {'cidr': '10.30.0.0/16', 'interface': 'ib0', 'groups': ['gpu_nodes']},
}
ADMIN = ['192.0.2.0/24', '2001:db8::/32']
MANAGEMENT = {'ctl1': '10.10.0.2', 'mon1': '10.10.0.3', 'login1': '10.10.0.4', 'gpu1': '10.10.1.1', 'gpu2': '10.10.1.2'}
GROUPS = {
    'cluster': list(MANAGEMENT),
    'slurm_controllers': ['ctl1'],
    'slurm_dbd': ['ctl1'],
    'monitoring': ['mon1'],
    'login_nodes': ['login1'],
    'gpu_nodes': ['gpu1', 'gpu2'],
}
RESTRICTED = 'tcp dport { 22, 9100, 9400, 9090, 9093, 3000 } jump refuse'


def facts(address: str) -> dict:
    """Gathered facts of a host whose only address is its management one on eno1."""
    ipv4 = {'address': address, 'netmask': '255.255.0.0', 'network': '10.10.0.0', 'prefix': '16'}
    return {'default_ipv4': dict(ipv4, interface='eno1', gateway='10.10.0.1'), 'all_ipv4_addresses': [address],
            'interfaces': ['lo', 'eno1'], 'eno1': {'device': 'eno1', 'active': True, 'ipv4': ipv4}}


def inventory(**variables) -> dict:
    hosts = {host: {'ansible_facts': facts(address), **copy.deepcopy(variables)} for host, address in MANAGEMENT.items()}
    return {'hosts': hosts, 'groups': copy.deepcopy(GROUPS)}


def rendered(**variables) -> dict[str, str]:
    result = render('firewall', 'llmforge.nft.j2', inventory(**variables))
    assert 'error' not in result, result['error']
    return result['hosts']


def refusal(inv: dict, **extra_vars) -> str:
    result = render('firewall', 'llmforge.nft.j2', inv, extra_vars=extra_vars)
    assert 'error' in result, 'expected a refusal'
    return result['error']


def parse(text: str) -> tuple[dict[str, list[str]], list[str]]:
    """The address sets (name -> elements) and the input chain's rules of one file."""
    sets = {}
    for match in re.finditer(r'^\tset (\w+) \{\n(.*?)^\t\}', text, re.S | re.M):
        elements = re.search(r'elements = \{\n(.*?)\n\t\t\}', match.group(2), re.S)
        sets[match.group(1)] = [line.strip().rstrip(',') for line in elements.group(1).splitlines()] if elements else []
    chain = re.search(r'^\tchain input \{\n(.*?)^\t\}', text, re.S | re.M).group(1)
    rules = [line.strip() for line in chain.splitlines() if line.strip() and not line.strip().startswith('#')]
    return sets, rules


@pytest.fixture(scope='module')
def files() -> dict[str, str]:
    return rendered(cluster_networks=NETWORKS, cluster_admin_cidrs=ADMIN)


@pytest.fixture(scope='module')
def parsed(files) -> dict[str, tuple[dict[str, list[str]], list[str]]]:
    return {host: parse(text) for host, text in files.items()}


def test_each_file_replaces_its_own_table_and_nothing_else(files):
    for host, text in files.items():
        statements = [line for line in text.splitlines() if line and not line.startswith('#')]
        assert statements[:3] == ['table inet llmforge', 'delete table inet llmforge', 'table inet llmforge {'], host
        assert not [line for line in statements if 'flush' in line or 'ruleset' in line], host
        assert len([line for line in statements if 'table ' in line]) == 3, host
        assert 'type filter hook input priority filter; policy drop;' in text, host
        assert 'hook output' not in text and 'hook forward' not in text, host


def test_essentials_come_first_and_everything_else_ends_in_the_counted_drop(parsed):
    for host, (_sets, rules) in parsed.items():
        assert rules[1:4] == ['iif "lo" accept', 'ct state established,related accept', 'ct state invalid drop'], host
        assert rules[4].startswith('icmp type { echo-request,') and 'nd-neighbor-solicit' in rules[5], host
        assert rules[-3:] == [RESTRICTED, 'ip saddr @trusted_v4 accept', 'jump refuse'], host


@pytest.mark.parametrize('host, v4, v6', [
    # GPU nodes: only from login nodes and controllers, never from the admin networks or other GPU nodes.
    ('gpu1', ['10.10.0.4', '10.10.0.2'], []),
    # Login nodes: users log in from anywhere by default.
    ('login1', ['192.0.2.0/24', '0.0.0.0/0'], ['2001:db8::/32', '::/0']),
    # Controllers and the metrics host: admins and login nodes.
    ('ctl1', ['192.0.2.0/24', '10.10.0.4'], ['2001:db8::/32']),
    ('mon1', ['192.0.2.0/24', '10.10.0.4'], ['2001:db8::/32']),
])
def test_ssh_sources_per_node_role(parsed, host, v4, v6):
    sets, rules = parsed[host]
    assert (sets['ssh_v4'], sets['ssh_v6']) == (v4, v6)
    assert 'tcp dport 22 ip saddr @ssh_v4 accept' in rules and 'tcp dport 22 ip6 saddr @ssh_v6 accept' in rules
    assert rules.index('tcp dport 22 ip saddr @ssh_v4 accept') < rules.index(RESTRICTED)


@pytest.mark.parametrize('host, rule', [
    ('gpu1', 'tcp dport { 9100, 9400 } ip saddr @monitoring_v4 accept'),
    ('ctl1', 'tcp dport 9100 ip saddr @monitoring_v4 accept'),
    ('login1', 'tcp dport 9100 ip saddr @monitoring_v4 accept'),
    ('mon1', 'tcp dport 9100 ip saddr @monitoring_v4 accept'),
])
def test_exporters_only_from_the_metrics_host(parsed, host, rule):
    sets, rules = parsed[host]
    assert sets['monitoring_v4'] == ['10.10.0.3']
    assert rule in rules and [r for r in rules if '@monitoring_v4' in r] == [rule]


def test_prometheus_alertmanager_and_grafana_only_on_the_metrics_host_from_the_admins(parsed):
    sets, rules = parsed['mon1']
    assert sets['monitoring_clients_v4'] == ['192.0.2.0/24', '10.10.0.3']
    assert sets['monitoring_clients_v6'] == ['2001:db8::/32']
    assert 'tcp dport { 9090, 9093, 3000 } ip saddr @monitoring_clients_v4 accept' in rules
    assert 'tcp dport { 9090, 9093, 3000 } ip6 saddr @monitoring_clients_v6 accept' in rules
    for host in ('ctl1', 'login1', 'gpu1'):
        sets, rules = parsed[host]
        assert 'monitoring_clients_v4' not in sets and not any('9090' in rule and 'accept' in rule for rule in rules)


def test_every_other_port_only_from_cluster_hosts_and_on_gpu_nodes_the_fabric_networks(parsed):
    cluster = sorted(MANAGEMENT.values())
    for host in ('ctl1', 'mon1', 'login1'):
        assert sorted(parsed[host][0]['trusted_v4']) == cluster, host
    for host in ('gpu1', 'gpu2'):
        assert sorted(parsed[host][0]['trusted_v4']) == sorted(cluster + ['10.20.0.0/16', '10.30.0.0/16']), host


def test_large_sets_list_one_element_per_line(files):
    block = re.search(r'set trusted_v4 \{.*?\n\t\}', files['gpu1'], re.S).group(0)
    assert '\t\t\t10.10.1.1,\n' in block and '\t\t\t10.30.0.0/16\n' in block


def test_site_rules_come_before_the_restrictions_and_logging_can_be_off():
    rules_file = rendered(cluster_networks=NETWORKS, cluster_admin_cidrs=ADMIN, firewall_log_drops=False,
                          firewall_ssh_port=2222,
                          firewall_extra_rules=['tcp dport 988 ip saddr 10.20.0.0/16 accept'])['gpu1']
    _sets, rules = parse(rules_file)
    assert rules.index('tcp dport 988 ip saddr 10.20.0.0/16 accept') < rules.index('tcp dport 2222 ip saddr @ssh_v4 accept')
    assert 'tcp dport { 2222, 9100, 9400, 9090, 9093, 3000 } jump refuse' in rules
    assert ' log ' not in rules_file and 'counter name "dropped" drop' in rules_file


def test_without_declared_networks_the_default_route_network_is_management_and_admin():
    files = rendered()
    sets, _rules = parse(files['ctl1'])
    assert sets['ssh_v4'] == ['10.10.0.0/16', '10.10.0.4']
    assert sorted(parse(files['gpu2'])[0]['trusted_v4']) == sorted(MANAGEMENT.values())


def test_explicit_addresses_serve_hosts_without_facts():
    inv = inventory(cluster_networks=NETWORKS, cluster_admin_cidrs=ADMIN)
    inv['hosts']['gpu2'] = {'cluster_network_addresses': {'management': '10.10.9.9'}, 'cluster_networks': NETWORKS,
                            'cluster_admin_cidrs': ADMIN}
    result = render('firewall', 'llmforge.nft.j2', inv)
    assert 'error' not in result, result['error']
    assert '10.10.9.9' in parse(result['hosts']['gpu1'])[0]['trusted_v4']


def test_the_play_s_first_host_with_its_firewall_off_leaves_the_others_their_rules():
    # The address lookups run once, on the play's first host (ctl1): with its firewall off they still run for the
    # hosts that keep theirs.
    inv = inventory(cluster_networks=NETWORKS, cluster_admin_cidrs=ADMIN)
    inv['hosts']['ctl1']['firewall_enabled'] = False
    result = render('firewall', 'llmforge.nft.j2', inv)
    assert 'error' not in result, result['error']
    sets, _rules = parse(result['hosts']['gpu1'])
    assert sorted(sets['trusted_v4']) == sorted(list(MANAGEMENT.values()) + ['10.20.0.0/16', '10.30.0.0/16'])
    assert sets['ssh_v4'] == ['10.10.0.4', '10.10.0.2']
    assert parse(result['hosts']['login1'])[0]['monitoring_v4'] == ['10.10.0.3']


def test_a_host_without_an_address_stops_the_play_named():
    inv = inventory(cluster_networks=NETWORKS)
    inv['hosts']['gpu2']['ansible_facts']['all_ipv4_addresses'] = ['192.168.7.2']
    inv['hosts']['gpu2']['ansible_facts']['eno1']['ipv4']['address'] = '192.168.7.2'
    assert 'gpu2 has no address on the management network (cluster_networks.management: 10.10.0.0/16, interface eno1)' \
        in refusal(inv)


def test_bad_admin_cidrs_and_extra_rules_are_refused_by_name():
    message = refusal(inventory(), cluster_admin_cidrs=['10.0.0.1/8'])
    assert message.startswith('cluster_admin_cidrs[0] is not a network in CIDR notation')
    message = refusal(inventory(), firewall_extra_rules=['accept', 'accept; flush ruleset'])
    assert message.startswith('firewall_extra_rules[1] must be one nft rule on one line')


def _nft_check_works() -> bool:
    if shutil.which('nft') is None:
        return False
    probe = subprocess.run(['nft', '-c', '-f', '-'], input='table inet llmforge_probe\n', capture_output=True,
                           text=True, timeout=30, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _nft_check_works(), reason='nft -c needs nftables and CAP_NET_ADMIN on this machine')
def test_nft_accepts_every_rendered_ruleset(files, tmp_path):
    for host, text in files.items():
        path = tmp_path / f'{host}.nft'
        path.write_text(text, encoding='utf-8')
        check = subprocess.run(['nft', '-c', '-f', str(path)], capture_output=True, text=True, timeout=60, check=False)
        assert check.returncode == 0, f'{host}: {check.stderr}'
