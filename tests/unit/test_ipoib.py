# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""IPoIB addressing: addresses per host and rail, and every refusal naming its variable."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.ipoib import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _ipoib

FILTERS = FilterModule().filters()
TWO_RAILS = [{'interface': 'ib0', 'cidr': '10.10.0.0/16'}, {'interface': 'ib1', 'cidr': '10.11.0.0/16'}]
HOSTS = ['gpu001', 'gpu002', 'gpu003']


def addresses(result, host):
    return [entry['cidr'] for entry in result[host]]


def test_inventory_order_gives_consecutive_addresses_on_every_rail():
    result = _ipoib.compute_addresses(TWO_RAILS, HOSTS)
    assert addresses(result, 'gpu001') == ['10.10.0.1/16', '10.11.0.1/16']
    assert addresses(result, 'gpu002') == ['10.10.0.2/16', '10.11.0.2/16']
    assert addresses(result, 'gpu003') == ['10.10.0.3/16', '10.11.0.3/16']


def test_an_entry_carries_everything_the_network_config_needs():
    entry = _ipoib.compute_addresses(TWO_RAILS[:1], HOSTS, mtu=2044, mode='connected')['gpu002'][0]
    assert entry == {'interface': 'ib0', 'address': '10.10.0.2', 'prefix': 16, 'cidr': '10.10.0.2/16',
                     'network': '10.10.0.0/16', 'netmask': '255.255.0.0', 'mtu': 2044, 'mode': 'connected'}


def test_per_rail_mtu_and_mode_override_the_defaults():
    rails = [{'interface': 'ib0', 'cidr': '10.10.0.0/16', 'mtu': 65520, 'mode': 'connected'}, TWO_RAILS[1]]
    entries = _ipoib.compute_addresses(rails, HOSTS, mtu=4092)['gpu001']
    assert [(e['mtu'], e['mode']) for e in entries] == [(65520, 'connected'), (4092, 'datagram')]


def test_null_mtu_and_mode_mean_the_defaults():
    rails = [{'interface': 'ib0', 'cidr': '10.10.0.0/16', 'mtu': None, 'mode': None}]
    entry = _ipoib.compute_addresses(rails, HOSTS, mtu=2044, mode='connected')['gpu001'][0]
    assert (entry['mtu'], entry['mode']) == (2044, 'connected')


def test_explicit_node_index_wins_over_the_position():
    result = _ipoib.compute_addresses(TWO_RAILS[:1], HOSTS, node_indexes={'gpu001': 100, 'gpu003': '7'})
    assert [addresses(result, host) for host in HOSTS] == [['10.10.0.101/16'], ['10.10.0.2/16'], ['10.10.0.8/16']]


def test_host_offset_shifts_every_host():
    result = _ipoib.compute_addresses(TWO_RAILS[:1], HOSTS, host_offset=10)
    assert addresses(result, 'gpu001') == ['10.10.0.10/16']
    assert addresses(result, 'gpu003') == ['10.10.0.12/16']


def test_a_subnet_exactly_big_enough_is_accepted():
    # A /30 has two usable addresses (.1 and .2).
    result = _ipoib.compute_addresses([{'interface': 'ib0', 'cidr': '10.10.0.0/30'}], HOSTS[:2])
    assert addresses(result, 'gpu002') == ['10.10.0.2/30']


def test_ipv6_rails_are_supported():
    result = _ipoib.compute_addresses([{'interface': 'ib0', 'cidr': 'fd00:10::/64'}], HOSTS)
    assert addresses(result, 'gpu003') == ['fd00:10::3/64']


def test_only_returns_one_host_but_validates_the_whole_group():
    result = _ipoib.compute_addresses(TWO_RAILS, HOSTS, only='gpu002')
    assert list(result) == ['gpu002']
    with pytest.raises(ValueError, match='too small'):
        _ipoib.compute_addresses([{'interface': 'ib0', 'cidr': '10.10.0.0/30'}], HOSTS, only='gpu001')


def test_management_addresses_outside_the_rails_and_host_names_are_accepted():
    management = {'gpu001': ['192.168.1.11/24', 'gpu001.example.com'], 'gpu002': '192.168.1.12', 'gpu003': None}
    result = _ipoib.compute_addresses(TWO_RAILS, HOSTS, management=management)
    assert addresses(result, 'gpu001') == ['10.10.0.1/16', '10.11.0.1/16']


def test_no_rails_gives_no_addresses():
    assert _ipoib.compute_addresses([], HOSTS) == {host: [] for host in HOSTS}


REFUSALS = [
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/15'}, {'interface': 'ib1', 'cidr': '10.10.0.0/16'}]},
                 'infiniband_ipoib_networks[1].cidr 10.10.0.0/16 overlaps infiniband_ipoib_networks[0].cidr 10.10.0.0/15',
                 id='overlapping-rails'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/30'}]},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/30 is too small: from infiniband_ipoib_host_offset 1 on it '
                 'holds 2 address(es), but gpu003 has index 2 (3 host(s) in group cluster)',
                 id='subnet-too-small'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/24'}], 'host_offset': 253},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/24 is too small: from infiniband_ipoib_host_offset 253 on',
                 id='offset-pushes-past-the-end'),
    pytest.param({'node_indexes': {'gpu001': 254}, 'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/24'}]},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/24 is too small', id='node-index-past-the-end'),
    pytest.param({'host_offset': 0},
                 'infiniband_ipoib_host_offset 0 puts index 0 on 10.10.0.0, below the first usable address of '
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/16', id='offset-on-network-address'),
    pytest.param({'host_offset': 'one'}, "infiniband_ipoib_host_offset must be an integer, got 'one'", id='offset-not-int'),
    pytest.param({'management': {'gpu002': '10.11.3.4/24'}},
                 'infiniband_ipoib_networks[1].cidr 10.11.0.0/16 overlaps the management network 10.11.3.0/24 of gpu002',
                 id='management-network-inside-a-rail'),
    pytest.param({'management': {'gpu001': ['10.10.7.7']}},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/16 overlaps the management network 10.10.7.7/32 of gpu001',
                 id='management-address-inside-a-rail'),
    pytest.param({'management': {'gpu001': '10.0.0.0/8'}},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.0/16 overlaps the management network 10.0.0.0/8 of gpu001',
                 id='management-network-around-the-rails'),
    pytest.param({'node_indexes': {'gpu003': 0}},
                 'node_index 0 of gpu003 is also the index of gpu001 (its position in the group)', id='index-clashes-with-position'),
    pytest.param({'node_indexes': {'gpu001': 5, 'gpu002': 5}},
                 'node_index 5 of gpu002 is also the index of gpu001 (its node_index)', id='duplicate-node-index'),
    pytest.param({'node_indexes': {'gpu002': -1}}, 'node_index of gpu002 must not be negative, got -1', id='negative-index'),
    pytest.param({'node_indexes': {'gpu002': 'x'}}, "node_index of gpu002 must be an integer, got 'x'", id='index-not-int'),
    pytest.param({'node_indexes': {'gpu002': True}}, 'node_index of gpu002 must be an integer, got True', id='index-bool'),
    pytest.param({'node_indexes': {'login1': 3}},
                 'node_index is set for login1, not in group cluster (infiniband_ipoib_group)', id='index-outside-group'),
    pytest.param({'only': 'login1'}, 'login1 is not in group cluster (infiniband_ipoib_group)', id='host-outside-group'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/16'}, {'interface': 'ib0', 'cidr': '10.11.0.0/16'}]},
                 'infiniband_ipoib_networks[1].interface ib0 is already used by infiniband_ipoib_networks[0].interface',
                 id='duplicate-interface'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.5/16'}]},
                 'infiniband_ipoib_networks[0].cidr 10.10.0.5/16 has host bits set; the network is 10.10.0.0/16',
                 id='host-bits-set'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0'}]},
                 "infiniband_ipoib_networks[0].cidr must be a network in CIDR notation such as 10.10.0.0/16, got '10.10.0.0'",
                 id='cidr-without-prefix'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.300.0.0/16'}]},
                 "infiniband_ipoib_networks[0].cidr '10.300.0.0/16' is not a network in CIDR notation", id='cidr-invalid'),
    pytest.param({'networks': [{'interface': 'ib0'}]},
                 'infiniband_ipoib_networks[0].cidr must be a network in CIDR notation', id='cidr-missing'),
    pytest.param({'networks': [{'interface': 'ib0 ', 'cidr': '10.10.0.0/16'}]},
                 "infiniband_ipoib_networks[0].interface must be a network interface name such as ib0", id='bad-interface'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/16', 'netmask': 16}]},
                 'infiniband_ipoib_networks[0] has unknown key(s) netmask', id='unknown-key'),
    pytest.param({'networks': ['ib0']}, "infiniband_ipoib_networks[0] must be a mapping with interface and cidr, got 'ib0'",
                 id='item-not-mapping'),
    pytest.param({'networks': {'interface': 'ib0'}}, 'infiniband_ipoib_networks must be a list', id='not-a-list'),
    pytest.param({'mtu': 9000},
                 'infiniband_ipoib_mtu 9000 is outside 1280..4092, the range IPoIB datagram mode carries '
                 '(infiniband_ipoib_mode datagram)', id='mtu-too-big-for-datagram'),
    pytest.param({'networks': [{'interface': 'ib0', 'cidr': '10.10.0.0/16', 'mtu': 70000, 'mode': 'connected'}]},
                 'infiniband_ipoib_networks[0].mtu 70000 is outside 1280..65520, the range IPoIB connected mode carries '
                 '(infiniband_ipoib_networks[0].mode connected)', id='mtu-too-big-for-connected'),
    pytest.param({'mtu': 576}, 'infiniband_ipoib_mtu 576 is outside 1280..4092', id='mtu-too-small'),
    pytest.param({'mode': 'reliable'}, "infiniband_ipoib_mode must be one of datagram, connected, got 'reliable'",
                 id='bad-mode'),
]


@pytest.mark.parametrize(('overrides', 'message'), REFUSALS)
def test_refusals_name_the_variable(overrides, message):
    kwargs = {'networks': TWO_RAILS, 'hosts': HOSTS, **overrides}
    with pytest.raises(ValueError) as caught:
        _ipoib.compute_addresses(**kwargs)
    assert message in str(caught.value)


HOSTVARS = {
    'gpu001': {'ansible_host': '192.168.1.11', 'node_index': 4,
               'ansible_facts': {'default_ipv4': {'address': '192.168.1.11', 'netmask': '255.255.255.0',
                                                  'interface': 'eno1'}}},
    'gpu002': {'ansible_host': 'gpu002.example.com', 'ansible_facts': {}},
    'gpu003': {},
}


def test_host_inputs_reads_node_index_and_management_addresses_from_hostvars():
    assert _ipoib.host_inputs(HOSTVARS, HOSTS) == {
        'node_indexes': {'gpu001': 4},
        'management': {'gpu001': ['192.168.1.11', '192.168.1.11/255.255.255.0'], 'gpu002': ['gpu002.example.com'],
                       'gpu003': []},
        'management_interfaces': {'gpu001': 'eno1'},
    }


def test_the_filter_computes_one_hosts_addresses_from_hostvars():
    result = FILTERS['ipoib_addresses'](TWO_RAILS, HOSTVARS, HOSTS, 'gpu001', 1, 4092, 'datagram', 'gpu_nodes')
    assert addresses(result, 'gpu001') == ['10.10.0.5/16', '10.11.0.5/16']
    assert list(result) == ['gpu001']


def test_the_filter_refuses_a_rail_over_the_management_network_from_facts():
    rails = [{'interface': 'ib0', 'cidr': '192.168.0.0/16'}]
    with pytest.raises(AnsibleFilterError, match=r'infiniband_ipoib_networks\[0\]\.cidr 192\.168\.0\.0/16 overlaps '
                                                 r'the management network 192\.168\.1\.11/32 of gpu001'):
        FILTERS['ipoib_addresses'](rails, HOSTVARS, HOSTS)


def test_the_filter_refuses_a_rail_on_the_management_interface():
    rails = [{'interface': 'eno1', 'cidr': '10.10.0.0/16'}]
    with pytest.raises(AnsibleFilterError, match=r'infiniband_ipoib_networks\[0\]\.interface eno1 is the management '
                                                 r'interface of gpu001'):
        FILTERS['ipoib_addresses'](rails, HOSTVARS, HOSTS)


def test_the_filter_raises_ansible_filter_error_with_the_message():
    rails = [{'interface': 'ib0', 'cidr': '10.10.0.0/15'}, {'interface': 'ib1', 'cidr': '10.10.0.0/16'}]
    with pytest.raises(AnsibleFilterError, match=r'ipoib_addresses: infiniband_ipoib_networks\[1\]\.cidr 10\.10\.0\.0/16 '
                                                 r'overlaps infiniband_ipoib_networks\[0\]\.cidr 10\.10\.0\.0/15'):
        FILTERS['ipoib_addresses'](rails, {}, HOSTS)


def test_the_group_name_appears_in_size_errors():
    with pytest.raises(AnsibleFilterError, match='in group gpu_nodes'):
        FILTERS['ipoib_addresses']([{'interface': 'ib0', 'cidr': '10.10.0.0/31'}], {}, HOSTS, group='gpu_nodes')


def test_four_thousand_nodes_on_eight_rails():
    hosts = [f'gpu{index:04d}' for index in range(4096)]
    rails = [{'interface': f'ib{rail}', 'cidr': f'10.{rail}.0.0/19'} for rail in range(8)]
    result = _ipoib.compute_addresses(rails, hosts, only='gpu4095')
    assert addresses(result, 'gpu4095')[7] == '10.7.16.0/19'
    with pytest.raises(ValueError, match=r'infiniband_ipoib_networks\[0\]\.cidr 10\.0\.0\.0/20 is too small'):
        _ipoib.compute_addresses([{'interface': 'ib0', 'cidr': '10.0.0.0/20'}], hosts)


def test_a_missing_netaddr_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_ipoib, 'netaddr', None)
    with pytest.raises(AnsibleFilterError, match='needs the Python library netaddr on the Ansible controller'):
        FILTERS['ipoib_addresses'](TWO_RAILS, {}, HOSTS)
