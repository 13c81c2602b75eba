# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster networks: each host's address on management, storage and training, and every refusal naming its cause."""

from __future__ import annotations

import copy

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.networks import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _networks

FILTERS = FilterModule().filters()

NETWORKS = {
    'management': {'cidr': '10.10.0.0/16', 'interface': 'eno1', 'groups': ['cluster']},
    'storage': {'cidr': '10.20.0.0/16', 'interface': 'ib1', 'groups': ['gpu_nodes', 'login_nodes']},
    'training': {'cidr': '10.30.0.0/16', 'interface': 'ib0', 'groups': ['gpu_nodes']},
}


def interface(address, prefix=16, **extra):
    """One interface's facts as the setup module gathers them."""
    network = {16: '255.255.0.0', 24: '255.255.255.0'}[prefix]
    return {'device': extra.pop('device', 'eno1'), 'active': True, 'type': 'ether', 'mtu': 1500,
            'ipv4': {'address': address, 'netmask': network, 'prefix': str(prefix), 'broadcast': '', 'network': ''},
            **extra}


def host_vars(name, interfaces, default_interface='eno1', **variables):
    """hostvars[name] after fact gathering: ansible_facts with default_ipv4, all_ipv4_addresses, one key per interface."""
    facts = {'hostname': name, 'interfaces': ['lo'] + list(interfaces)}
    addresses = []
    for device, entry in interfaces.items():
        entry = dict(entry, device=device)
        facts[device.replace('-', '_')] = entry
        addresses += [entry['ipv4']['address']] + [item['address'] for item in entry.get('ipv4_secondaries', [])]
    facts['all_ipv4_addresses'] = addresses
    if default_interface:
        default = interfaces[default_interface]['ipv4']
        facts['default_ipv4'] = {'address': default['address'], 'netmask': default['netmask'],
                                 'interface': default_interface, 'gateway': '10.10.0.1', 'alias': default_interface}
    return {'inventory_hostname': name, 'ansible_facts': facts, **variables}


def cluster_hostvars():
    return {
        'ctl1': host_vars('ctl1', {'eno1': interface('10.10.0.2')}),
        'login1': host_vars('login1', {'eno1': interface('10.10.0.3'), 'ib1': interface('10.20.0.3')}),
        'gpu1': host_vars('gpu1', {'eno1': interface('10.10.1.1'), 'ib0': interface('10.30.1.1'),
                                   'ib1': interface('10.20.1.1')}),
        'gpu2': host_vars('gpu2', {'eno1': interface('10.10.1.2'), 'ib0': interface('10.30.1.2'),
                                   'ib1': interface('10.20.1.2')}),
    }


GROUPS = {
    'all': ['ctl1', 'login1', 'gpu1', 'gpu2'],
    'cluster': ['ctl1', 'login1', 'gpu1', 'gpu2'],
    'slurm_controllers': ['ctl1'],
    'login_nodes': ['login1'],
    'gpu_nodes': ['gpu1', 'gpu2'],
}


def plan(hostvars=None, groups=None, networks=None):
    return FILTERS['cluster_network_plan'](cluster_hostvars() if hostvars is None else hostvars,
                                           GROUPS if groups is None else groups, NETWORKS if networks is None else networks)


def refusal(*args, **kwargs) -> str:
    with pytest.raises(AnsibleFilterError) as caught:
        plan(*args, **kwargs)
    return str(caught.value)


def with_network(name, **entry):
    networks = copy.deepcopy(NETWORKS)
    networks[name] = entry
    return networks


# network_address ----------------------------------------------------------------------------------------------------

def test_the_networks_interface_gives_the_address():
    gpu1 = cluster_hostvars()['gpu1']
    assert [FILTERS['network_address'](gpu1, name, NETWORKS) for name in NETWORKS] == ['10.10.1.1', '10.20.1.1', '10.30.1.1']


def test_an_explicit_address_wins_over_facts():
    gpu1 = cluster_hostvars()['gpu1']
    gpu1['cluster_network_addresses'] = {'training': '10.30.9.9'}
    assert FILTERS['network_address'](gpu1, 'training', NETWORKS) == '10.30.9.9'


def test_an_explicit_address_works_without_facts():
    bare = {'inventory_hostname': 'gpu9', 'cluster_network_addresses': {'management': '10.10.9.9'}}
    assert FILTERS['network_address'](bare, 'management', NETWORKS) == '10.10.9.9'
    assert FILTERS['network_address'](bare, 'management', {}) == '10.10.9.9'


def test_the_interface_address_in_the_cidr_wins_over_other_addresses_in_it():
    # Two addresses in the management network: the one on the network's interface (a secondary one) is chosen.
    facts = {'eth9': interface('10.10.5.5'),
             'eno1': interface('192.168.1.5', 24, ipv4_secondaries=[{'address': '10.10.7.7', 'netmask': '255.255.0.0'}])}
    host = host_vars('odd1', facts, default_interface='eth9')
    assert FILTERS['network_address'](host, 'management', NETWORKS) == '10.10.7.7'


def test_a_per_host_interface_overrides_the_networks_interface():
    host = host_vars('gpu7', {'eno1': interface('10.10.7.1'), 'eth-mgmt': interface('10.10.7.2')},
                     cluster_network_interfaces={'management': 'eth-mgmt'})
    assert FILTERS['network_address'](host, 'management', NETWORKS) == '10.10.7.2'


def test_any_address_in_the_cidr_serves_when_the_interface_has_none():
    host = host_vars('gpu8', {'eno1': interface('10.10.8.1'), 'bond0': interface('10.30.8.1')})
    assert FILTERS['network_address'](host, 'training', NETWORKS) == '10.30.8.1'


def test_facts_injected_as_variables_are_read_too():
    host = {'inventory_hostname': 'old1', 'ansible_all_ipv4_addresses': ['10.30.3.3'],
            'ansible_default_ipv4': {'address': '10.10.3.3', 'netmask': '255.255.0.0'}}
    assert FILTERS['network_address'](host, 'training', NETWORKS) == '10.30.3.3'
    assert FILTERS['network_address'](host, 'management', {}) == '10.10.3.3'


@pytest.mark.parametrize('networks', [{}, None, {'training': NETWORKS['training']}])
def test_an_undeclared_network_is_the_default_routes(networks):
    gpu1 = cluster_hostvars()['gpu1']
    assert FILTERS['network_address'](gpu1, 'management', networks) == '10.10.1.1'
    assert FILTERS['network_cidr'](gpu1, 'management', networks) == '10.10.0.0/16'


def test_a_declared_cidr_needs_no_facts():
    assert FILTERS['network_cidr']({'inventory_hostname': 'x'}, 'storage', NETWORKS) == '10.20.0.0/16'


def test_no_address_names_host_network_cidr_and_interface():
    ctl1 = cluster_hostvars()['ctl1']
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS['network_address'](ctl1, 'training', NETWORKS)
    message = str(caught.value)
    for word in ('ctl1', 'training', '10.30.0.0/16', 'ib0', '10.10.0.2'):
        assert word in message
    assert 'none of its addresses (10.10.0.2) lies in it' in message


def test_no_facts_and_no_explicit_address_say_what_to_do():
    with pytest.raises(AnsibleFilterError, match=r'gpu9 has no address on the management network.*no default_ipv4 facts.*'
                                                 r'cluster_network_addresses\.management'):
        FILTERS['network_address']({'inventory_hostname': 'gpu9'}, 'management', {})
    with pytest.raises(AnsibleFilterError, match=r'gpu9.*no gathered network facts'):
        FILTERS['network_address']({'inventory_hostname': 'gpu9'}, 'storage', NETWORKS)
    with pytest.raises(AnsibleFilterError, match=r'gpu9 has no default_ipv4.*declare cluster_networks\.management\.cidr'):
        FILTERS['network_cidr']({'inventory_hostname': 'gpu9'}, 'management', {})


def test_an_explicit_address_outside_its_network_is_refused():
    host = {'inventory_hostname': 'gpu9', 'cluster_network_addresses': {'storage': '10.30.0.9'}}
    with pytest.raises(AnsibleFilterError, match=r'cluster_network_addresses\.storage of gpu9 is 10\.30\.0\.9, outside '
                                                 r'cluster_networks\.storage \(10\.20\.0\.0/16\)'):
        FILTERS['network_address'](host, 'storage', NETWORKS)


@pytest.mark.parametrize('value', ['10.10.0', 'gpu1', '2001:db8::1', 17])
def test_an_explicit_address_that_is_no_ipv4_address_is_refused(value):
    host = {'inventory_hostname': 'gpu9', 'cluster_network_addresses': {'management': value}}
    with pytest.raises(AnsibleFilterError, match=r'cluster_network_addresses\.management of gpu9 must be an IPv4 address'):
        FILTERS['network_address'](host, 'management', NETWORKS)


# cluster_network_plan -----------------------------------------------------------------------------------------------

def test_the_plan_gives_every_host_its_networks():
    result = plan()
    assert result['networks'] == {'management': '10.10.0.0/16', 'storage': '10.20.0.0/16', 'training': '10.30.0.0/16'}
    assert result['hosts'] == {
        'ctl1': {'management': '10.10.0.2'},
        'login1': {'management': '10.10.0.3', 'storage': '10.20.0.3'},
        'gpu1': {'management': '10.10.1.1', 'storage': '10.20.1.1', 'training': '10.30.1.1'},
        'gpu2': {'management': '10.10.1.2', 'storage': '10.20.1.2', 'training': '10.30.1.2'},
    }


@pytest.mark.parametrize('networks', [{}, None])
def test_without_networks_every_cluster_host_has_its_default_address(networks):
    result = plan(networks=networks) if networks is not None else FILTERS['cluster_network_plan'](cluster_hostvars(), GROUPS)
    assert result == {'hosts': {'ctl1': {'management': '10.10.0.2'}, 'login1': {'management': '10.10.0.3'},
                                'gpu1': {'management': '10.10.1.1'}, 'gpu2': {'management': '10.10.1.2'}},
                      'networks': {}}


def test_management_without_groups_means_the_cluster_group_and_others_none():
    networks = {'management': {'cidr': '10.10.0.0/16'}, 'training': {'cidr': '10.30.0.0/16'}}
    result = plan(networks=networks)
    assert {host: sorted(nets) for host, nets in result['hosts'].items()} == {
        'ctl1': ['management'], 'login1': ['management'], 'gpu1': ['management'], 'gpu2': ['management']}


def test_hosts_without_facts_but_with_explicit_addresses_are_planned():
    hostvars = cluster_hostvars()
    hostvars['gpu3'] = {'inventory_hostname': 'gpu3',
                        'cluster_network_addresses': {'management': '10.10.1.3', 'storage': '10.20.1.3',
                                                      'training': '10.30.1.3'}}
    groups = dict(GROUPS, all=GROUPS['all'] + ['gpu3'], cluster=GROUPS['cluster'] + ['gpu3'],
                  gpu_nodes=['gpu1', 'gpu2', 'gpu3'])
    assert plan(hostvars, groups)['hosts']['gpu3'] == {'management': '10.10.1.3', 'storage': '10.20.1.3',
                                                       'training': '10.30.1.3'}


def test_a_host_missing_from_hostvars_is_named():
    groups = dict(GROUPS, gpu_nodes=['gpu1', 'gpu2', 'ghost'])
    assert 'ghost has no address on the storage network' in refusal(groups=groups)


def test_a_missing_address_names_host_network_cidr_and_interface():
    hostvars = cluster_hostvars()
    del hostvars['gpu2']['ansible_facts']['ib0']
    hostvars['gpu2']['ansible_facts']['all_ipv4_addresses'].remove('10.30.1.2')
    message = refusal(hostvars)
    assert 'gpu2 has no address on the training network (cluster_networks.training: 10.30.0.0/16, interface ib0)' in message


def test_every_problem_is_reported_at_once():
    hostvars = cluster_hostvars()
    for host in ('gpu1', 'gpu2'):
        hostvars[host]['ansible_facts']['all_ipv4_addresses'] = ['10.10.1.9']
        del hostvars[host]['ansible_facts']['ib1']
    message = refusal(hostvars)
    assert 'gpu1 has no address on the storage network' in message
    assert 'gpu2 has no address on the storage network' in message


def test_overlapping_networks_are_named_both():
    message = refusal(networks=with_network('training', cidr='10.20.128.0/17'))
    assert 'cluster_networks.storage (10.20.0.0/16) and cluster_networks.training (10.20.128.0/17) overlap' in message


@pytest.mark.parametrize('value, why', [
    ('10.30.0.1/16', 'host bits set'),
    ('10.30.0.0/33', 'not a valid IPv4 network'),
    ('10.30.0.0', 'CIDR notation'),
    ('fd00::/64', 'must be an IPv4 network'),
    (None, 'CIDR notation'),
])
def test_a_bad_cidr_is_named_with_its_value(value, why):
    message = refusal(networks=with_network('training', cidr=value, groups=['gpu_nodes']))
    assert 'cluster_networks.training.cidr' in message and why in message and repr(value) in message


def test_a_network_without_cidr_is_refused():
    assert 'cluster_networks.training.cidr is missing' in refusal(networks=with_network('training', interface='ib0'))


def test_unknown_keys_are_named():
    message = refusal(networks=with_network('training', cidr='10.30.0.0/16', mtu=4092, vlan=5))
    assert 'cluster_networks.training has unknown keys mtu, vlan' in message


@pytest.mark.parametrize('networks, expected', [
    (['10.10.0.0/16'], 'cluster_networks must be a mapping'),
    ({'training': '10.30.0.0/16'}, 'cluster_networks.training must be a mapping with cidr'),
    ({'training': {'cidr': '10.30.0.0/16', 'interface': 'ib0 ib1'}}, 'cluster_networks.training.interface must be'),
    ({'training': {'cidr': '10.30.0.0/16', 'groups': 'gpu_nodes'}}, 'cluster_networks.training.groups must be a list'),
    ({'2nd': {'cidr': '10.30.0.0/16'}}, "network names are letters, digits and underscores starting with a letter, got '2nd'"),
])
def test_malformed_entries_are_refused(networks, expected):
    assert expected in refusal(networks=networks)


def test_an_explicit_address_of_an_undeclared_network_is_refused():
    hostvars = cluster_hostvars()
    hostvars['gpu1']['cluster_network_addresses'] = {'trainng': '10.30.1.1'}
    message = refusal(hostvars)
    assert 'cluster_network_addresses of gpu1 names networks cluster_networks does not declare: trainng' in message


def test_an_explicit_address_outside_its_cidr_is_refused_by_the_plan():
    hostvars = cluster_hostvars()
    hostvars['login1']['cluster_network_addresses'] = {'storage': '10.30.0.3'}
    assert 'cluster_network_addresses.storage of login1 is 10.30.0.3, outside' in refusal(hostvars)


def test_two_hosts_with_one_address_are_named():
    hostvars = cluster_hostvars()
    hostvars['gpu2']['cluster_network_addresses'] = {'training': '10.30.1.1'}
    assert 'gpu1 and gpu2 have the same address 10.30.1.1 on the training network' in refusal(hostvars)


def test_a_per_host_interface_mapping_must_be_a_mapping():
    hostvars = cluster_hostvars()
    hostvars['gpu1']['cluster_network_interfaces'] = 'ib0'
    assert 'cluster_network_interfaces of gpu1 must be a mapping' in refusal(hostvars)


def test_a_missing_group_has_no_hosts():
    networks = with_network('storage', cidr='10.20.0.0/16', groups=['lustre_clients'])
    assert 'storage' not in plan(networks=networks)['hosts']['gpu1']


# cidr_problems and address_in_networks ------------------------------------------------------------------------------

def test_cidr_problems_name_each_bad_item():
    problems = FILTERS['cidr_problems'](['10.0.0.0/8', '10.0.0.1/8', '::/0', 'anywhere', '192.0.2.7'], 'cluster_admin_cidrs')
    assert len(problems) == 2
    assert problems[0].startswith('cluster_admin_cidrs[1] is not a network') and 'host bits set' in problems[0]
    assert problems[1].startswith('cluster_admin_cidrs[3] is not a network')


@pytest.mark.parametrize('value', ['10.0.0.0/8', {'a': 1}, None])
def test_cidr_problems_want_a_list(value):
    assert FILTERS['cidr_problems'](value, 'cluster_admin_cidrs') == [
        f'cluster_admin_cidrs must be a list of networks in CIDR notation such as 10.0.0.0/8, got {value!r}']


@pytest.mark.parametrize('address, networks, expected', [
    ('10.10.0.7', ['10.10.0.0/16'], True),
    ('10.11.0.7', ['10.10.0.0/16', '2001:db8::/32'], False),
    ('2001:db8::5', ['10.0.0.0/8', '2001:db8::/32'], True),
    ('::ffff:10.10.0.7', ['10.10.0.0/16'], True),
    ('10.10.0.7', [], False),
    ('10.10.0.7', ['0.0.0.0/0'], True),
])
def test_address_in_networks(address, networks, expected):
    assert FILTERS['address_in_networks'](address, networks) is expected


def test_address_in_networks_refuses_bad_input():
    with pytest.raises(AnsibleFilterError, match="'gpu1' is not an IP address"):
        FILTERS['address_in_networks']('gpu1', ['10.0.0.0/8'])
    with pytest.raises(AnsibleFilterError, match=r'the networks\[0\] is not a network'):
        FILTERS['address_in_networks']('10.0.0.1', ['10.0.0.1/8'])


def test_module_utils_raise_plain_value_errors():
    with pytest.raises(ValueError, match='overlap'):
        _networks.parse_networks({'a': {'cidr': '10.0.0.0/8'}, 'b': {'cidr': '10.1.0.0/16'}})


def test_resolving_management_only_needs_no_fabric_facts_but_checks_everything_else():
    hostvars = cluster_hostvars()
    for host in ('login1', 'gpu1', 'gpu2'):
        for device in ('ib0', 'ib1'):
            hostvars[host]['ansible_facts'].pop(device, None)
        hostvars[host]['ansible_facts']['all_ipv4_addresses'] = [hostvars[host]['ansible_facts']['eno1']['ipv4']['address']]
    assert 'gpu1 has no address on the storage network' in refusal(hostvars)
    result = FILTERS['cluster_network_plan'](hostvars, GROUPS, NETWORKS, resolve=['management'])
    assert result['hosts'] == {'ctl1': {'management': '10.10.0.2'}, 'login1': {'management': '10.10.0.3'},
                               'gpu1': {'management': '10.10.1.1'}, 'gpu2': {'management': '10.10.1.2'}}
    hostvars['gpu2']['cluster_network_addresses'] = {'training': '10.20.0.9'}
    with pytest.raises(AnsibleFilterError, match=r'cluster_network_addresses\.training of gpu2 is 10\.20\.0\.9, outside'):
        FILTERS['cluster_network_plan'](hostvars, GROUPS, NETWORKS, resolve=['management'])
    with pytest.raises(AnsibleFilterError, match=r'overlap'):
        FILTERS['cluster_network_plan'](hostvars, GROUPS, with_network('training', cidr='10.10.5.0/24'),
                                        resolve=['management'])


def test_resolve_names_known_networks():
    with pytest.raises(AnsibleFilterError, match='resolve names networks cluster_networks does not declare: fabric'):
        FILTERS['cluster_network_plan'](cluster_hostvars(), GROUPS, NETWORKS, resolve=['management', 'fabric'])
    with pytest.raises(AnsibleFilterError, match='resolve must be a list'):
        FILTERS['cluster_network_plan'](cluster_hostvars(), GROUPS, NETWORKS, resolve='management')


def test_a_problem_found_twice_is_reported_once():
    hostvars = cluster_hostvars()
    hostvars['login1']['cluster_network_addresses'] = {'storage': '10.30.0.3'}
    assert refusal(hostvars).count('cluster_network_addresses.storage of login1') == 1
