# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one rule for rendered values (plugin_utils/_config_values.py), and the checks and filters built on it.

Every hostile value here once reached a file: a newline in slurm_node_config added a root Prolog line to slurm.conf,
a newline after a search base's ?scope? a line to sssd.conf, a trailing newline slipped past every `^...$`
validator, and an IPv6 scope id passed the firewall's preflight and then broke nft.
"""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.config_values import FilterModule as ConfigValueFilters
from ansible_collections.llmforge.cluster.plugins.filter.networks import FilterModule as NetworkFilters
from ansible_collections.llmforge.cluster.plugins.filter.slurm_config import FilterModule as SlurmFilters
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _config_values, _hardware, _ipoib, _networks
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _slurm_config, _sssd

CONFIG_VALUE_PROBLEMS = ConfigValueFilters().filters()['config_value_problems']
NETWORK_FILTERS = NetworkFilters().filters()
SLURM_FILTERS = SlurmFilters().filters()

# Characters that end a value in every syntax, as the messages name them.
CONTROL = {'\n': 'a line feed', '\r': 'a carriage return', '\0': 'a NUL character', '\x1b': '0x1b', '\x7f': '0x7f',
           '\v': '0x0b'}


@pytest.mark.parametrize('syntax', sorted(_config_values.SYNTAXES))
@pytest.mark.parametrize(('char', 'named'), sorted(CONTROL.items()))
def test_control_characters_are_refused_in_every_syntax(syntax, char, named):
    problem = _config_values.text_problem('some_variable', f'value{char}Prolog=/tmp/x', syntax)
    assert problem is not None and problem.startswith('some_variable holds ') and named in problem
    assert 'at position 5' in problem


@pytest.mark.parametrize('syntax', sorted(_config_values.SYNTAXES))
def test_a_trailing_newline_is_refused(syntax):
    assert 'a line feed (\\n) at position 4' in _config_values.text_problem('v', 'ldap\n', syntax)


@pytest.mark.parametrize(('syntax', 'value', 'refused'), [
    ('slurm', 'nvlink State=DOWN', 'a space'),
    ('slurm', 'nvlink#comment', "'#'"),
    ('slurm', 'a\tb', 'a tab'),
    ('fields', '/mnt/lustre data', 'a space'),
    ('nft', '10.0.0.0/8 accept', 'a space'),
    ('nft', '10.0.0.0/8;accept', "';'"),
    ('nft', '{10.0.0.0/8}', "'{'"),
    ('ini', '#dc=example', "starts with '#'"),
    ('ini', ';dc=example', "starts with ';'"),
])
def test_the_files_separators_and_comments_are_refused(syntax, value, refused):
    assert refused in _config_values.text_problem('v', value, syntax)


@pytest.mark.parametrize(('syntax', 'value'), [
    ('line', 'ENROOT_DATA_PATH /var/lib/enroot # and a comment'),
    ('line', '"crun --rootless=true run %b"'),
    ('ini', 'cn=John Smith,dc=example,dc=org'),
    ('ini', 'ou=people,dc=example,dc=org?subtree?(objectClass=posixAccount)'),
    ('slurm', 'cred_expire=30'),
    ('slurm', '/etc/slurm/prolog.d/*'),
    ('fields', '_netdev,flock,noatime'),
    ('nft', '2001:db8::/32'),
])
def test_values_the_file_can_hold_pass(syntax, value):
    assert _config_values.text_problem('v', value, syntax) is None


@pytest.mark.parametrize('key', ['Features\nProlog', 'State DOWN', 'a=b', 'Weight#', '1Weight', '', 'Feat%', 3])
def test_keys_must_be_identifiers(key):
    assert 'is not an identifier' in _config_values.key_problem('slurm_node_config', key)


@pytest.mark.parametrize('key', ['Features', 'NCCL_IB_HCA', '_private', 'CPUs'])
def test_identifiers_are_keys(key):
    assert _config_values.key_problem('slurm_node_config', key) is None


def test_lists_and_mappings_are_walked_naming_the_path():
    value = {'Features': ['h200', 'nv link'], 'Weight': 10, 'Extra': {'deep': 'a\nb'}}
    assert _config_values.value_problems('slurm_node_config', value, 'slurm', keys=True) == [
        "slurm_node_config.Features[1] holds a space at position 2: in Slurm's files white space separates "
        "Key=Value pairs and '#' starts a comment",
        "slurm_node_config.Extra.deep holds a line feed (\\n) at position 1: in Slurm's files white space separates "
        "Key=Value pairs and '#' starts a comment",
    ]


def test_keys_that_are_not_identifiers_are_checked_as_values_unless_keys_is_set():
    assert _config_values.value_problems('v', {'a b': 1}) == []
    assert _config_values.value_problems('v', {'a\nb': 1}) == ["a key of v holds a line feed (\\n) at position 1: "
                                                               'the value must stay on its line']
    assert _config_values.value_problems('v', {'a b': 1}, keys=True)[0].startswith("v has the key 'a b'")


def test_numbers_booleans_and_none_are_fine():
    assert _config_values.problems({'a': 1, 'b': 2.5, 'c': True, 'd': None, 'e': []}, 'slurm', keys=True) == []


def test_the_host_comes_first_and_the_value_is_never_shown():
    problems = _config_values.problems({'sssd_ldap_bind_password': 'Secret\nPassw0rd'}, 'ini', host='gpu001')
    assert problems == ['gpu001: sssd_ldap_bind_password holds a line feed (\\n) at position 6: '
                        "sssd.conf's value must stay on its line and not start a comment"]
    assert 'Secret' not in problems[0]


def test_an_unknown_syntax_is_an_error():
    with pytest.raises(ValueError, match='unknown syntax'):
        _config_values.value_problems('v', 'x', 'toml')


def test_the_filter_checks_a_mapping_of_variables():
    assert CONFIG_VALUE_PROBLEMS({'slurm_common_cluster_name': 'llm forge'}, 'slurm', host='ctl1') == [
        "ctl1: slurm_common_cluster_name holds a space at position 3: in Slurm's files white space separates "
        "Key=Value pairs and '#' starts a comment"]
    assert CONFIG_VALUE_PROBLEMS({'x': 'fine'}) == []
    with pytest.raises(AnsibleFilterError, match='expected a mapping'):
        CONFIG_VALUE_PROBLEMS(['x'])
    with pytest.raises(AnsibleFilterError, match='unknown syntax'):
        CONFIG_VALUE_PROBLEMS({'x': 'y'}, 'yaml')


# slurm.conf: slurm_node_config's keys and values end up on a NodeName line.
H200_FACTS = {'processor_count': 2, 'processor_cores': 56, 'processor_threads_per_core': 2, 'memtotal_mb': 2063731}


def _hostvars(node_config):
    return {'gpu1': {'ansible_facts': H200_FACTS, 'gpu_type': 'h200', 'gpu_count': 8, 'slurm_node_config': node_config},
            'gpu2': {'ansible_facts': H200_FACTS, 'gpu_type': 'h200', 'gpu_count': 8}}


HOSTILE_NODE_CONFIGS = {
    'newline-in-value': ({'Features': 'nvlink\nProlog=/tmp/own-every-node'}, 'slurm_node_config.Features holds a line feed'),
    'space-in-value': ({'Features': 'nvlink State=DOWN'}, 'slurm_node_config.Features holds a space'),
    'hash-in-value': ({'Features': 'nvlink#'}, "slurm_node_config.Features holds '#'"),
    'space-in-list-item': ({'Features': ['h200', 'x State=DOWN']}, 'slurm_node_config.Features[1] holds a space'),
    'newline-in-key': ({'Weight=1\nProlog': '/tmp/x'}, "slurm_node_config has the key 'Weight=1\\nProlog'"),
    'space-in-key': ({'State=DOWN Weight': 1}, "slurm_node_config has the key 'State=DOWN Weight'"),
    'trailing-newline': ({'Features': 'nvlink\n'}, 'slurm_node_config.Features holds a line feed (\\n) at position 6'),
}


@pytest.mark.parametrize(('node_config', 'message'), HOSTILE_NODE_CONFIGS.values(), ids=HOSTILE_NODE_CONFIGS)
def test_slurm_node_config_cannot_add_a_line_or_a_pair(node_config, message):
    with pytest.raises(AnsibleFilterError) as caught:
        SLURM_FILTERS['slurm_node_lines'](_hostvars(node_config), {'gpu_nodes': ['gpu1', 'gpu2']}, ['gpu_nodes'])
    assert f"host 'gpu1': {message}" in str(caught.value)
    problems = SLURM_FILTERS['slurm_node_config_problems'](_hostvars(node_config), {'gpu_nodes': ['gpu1', 'gpu2']},
                                                           ['gpu_nodes'])
    assert len(problems) == 1 and problems[0].startswith(f"host 'gpu1': {message}")


def test_a_usable_slurm_node_config_renders():
    lines = SLURM_FILTERS['slurm_node_lines'](_hostvars({'Features': ['h200', 'nvlink'], 'Weight': 10}),
                                              {'gpu_nodes': ['gpu1', 'gpu2']}, ['gpu_nodes'])
    assert 'Features=h200,nvlink' in lines[0] and 'Weight=10' in lines[0]
    assert SLURM_FILTERS['slurm_node_config_problems'](_hostvars({'Features': 'nvlink'}), {'gpu_nodes': ['gpu1']},
                                                       ['gpu_nodes', 'absent']) == []


@pytest.mark.parametrize(('keyword', 'name', 'attrs'), [
    ('PartitionName', 'gpu\nNodeName=evil', {'Nodes': 'gpu1'}),
    ('PartitionName', 'gpu', {'MaxTime': 'INFINITE State=DOWN'}),
    ('PartitionName', 'gpu', {'Max Time': 'INFINITE'}),
])
def test_render_line_refuses_what_would_break_out_of_the_line(keyword, name, attrs):
    with pytest.raises(ValueError):
        _slurm_config.render_line(keyword, name, attrs)


@pytest.mark.parametrize('mapping', [{'ClusterName': 'llm\nProlog=/tmp/x'}, {'Prolog=/tmp/x ClusterName': 'x'},
                                     {'SlurmctldParameters': 'enable_configless #'}])
def test_slurm_conf_lines_refuse_pairs_lines_and_comments(mapping):
    with pytest.raises(AnsibleFilterError, match='slurm_conf_lines: the settings'):
        SLURM_FILTERS['slurm_conf_lines'](mapping)


def test_partition_names_cannot_add_lines():
    with pytest.raises(AnsibleFilterError, match='PartitionName'):
        SLURM_FILTERS['slurm_partition_lines']([{'name': 'gpu\nNodeName=x'}], {'gpu_nodes': ['gpu1']}, ['gpu_nodes'])


def test_a_switch_name_ending_in_a_newline_is_refused():
    with pytest.raises(ValueError, match=r"slurm_controller_topology_switches\[0\]: name 'leaf1\\n'"):
        _slurm_config.topology_lines([{'name': 'leaf1\n', 'nodes': 'gpu1'}], ['gpu1'])


# sssd.conf
SSSD_BASE = {'sssd_ldap_uri': ['ldaps://ldap1.example.org'], 'sssd_ldap_base_dn': 'dc=example,dc=org',
             'sssd_domain': 'ldap', 'sssd_home_base': '/shared/home'}


@pytest.mark.parametrize(('overrides', 'message'), [
    ({'sssd_ldap_user_search_base': 'ou=people,dc=example,dc=org?subtree?\nldap_access_filter = (uid=*)'},
     'sssd_ldap_user_search_base holds a line feed (\\n) at position 36'),
    ({'sssd_ldap_group_search_base': 'ou=groups,dc=example,dc=org?sub?(cn=*)\r'},
     'sssd_ldap_group_search_base holds a carriage return'),
    ({'sssd_domain': 'ldap\n'}, "sssd_domain must be a name of letters"),
    ({'sssd_ldap_uri': ['ldaps://ldap1.example.org\n']}, "sssd_ldap_uri: 'ldaps://ldap1.example.org\\n' is not"),
    ({'sssd_ldap_base_dn': 'dc=exa\x01mple,dc=org'}, 'it holds a line break, NUL or other control character'),
    ({'sssd_override_homedir': True, 'sssd_home_base': '/shared/home\x01'}, 'sssd_home_base must be an absolute'),
])
def test_sssd_values_that_would_add_lines_are_refused(overrides, message):
    problems = _sssd.problems({**SSSD_BASE, **overrides})
    assert any(message in problem for problem in problems), problems


def test_a_search_base_with_scope_and_filter_passes():
    assert _sssd.problems({**SSSD_BASE,
                           'sssd_ldap_user_search_base': 'ou=people,dc=example,dc=org?subtree?(objectClass=posixAccount)'}) == []


# Networks: names and interfaces reach the firewall and the network files; CIDRs the nftables sets.
@pytest.mark.parametrize(('networks', 'message'), [
    ({'management\n': {'cidr': '10.0.0.0/16'}}, "network names are letters, digits and underscores"),
    ({'management': {'cidr': '10.0.0.0/16', 'interface': 'eno1\n'}}, 'cluster_networks.management.interface'),
    ({'management': {'cidr': '10.0.0.0/16\n'}}, 'cluster_networks.management.cidr is not a valid IPv4 network'),
])
def test_network_names_interfaces_and_cidrs_ending_in_a_newline_are_refused(networks, message):
    with pytest.raises(ValueError, match=message.replace('.', r'\.')):
        _networks.parse_networks(networks)


def test_a_host_interface_ending_in_a_newline_is_refused():
    hostvars = {'inventory_hostname': 'gpu1', 'cluster_network_interfaces': {'management': 'eno1\n'}}
    with pytest.raises(ValueError, match='cluster_network_interfaces.management of gpu1'):
        _networks.host_address(hostvars, 'management', {'management': {'cidr': '10.0.0.0/16'}})


@pytest.mark.parametrize('value', ['fe80::1%eth0', 'fe80::/64%eth0', 'fe80::1%eth0 accept', '10.0.0.0/8\n',
                                   ' 10.0.0.0/8', '10.0.0.0/8; accept'])
def test_cidr_problems_refuse_scope_ids_and_anything_around_the_network(value):
    problems = NETWORK_FILTERS['cidr_problems'](['10.0.0.0/8', value], 'firewall_ssh_extra_cidrs')
    assert len(problems) == 1 and problems[0].startswith('firewall_ssh_extra_cidrs[1] is not a network')
    with pytest.raises(AnsibleFilterError, match=r'normalized_cidrs: firewall_ssh_extra_cidrs\[1\]'):
        NETWORK_FILTERS['normalized_cidrs'](['10.0.0.0/8', value], 'firewall_ssh_extra_cidrs')


def test_cidrs_are_rendered_normalised():
    assert NETWORK_FILTERS['normalized_cidrs'](['10.0.0.5', '2001:DB8:0:0::/64', '0.0.0.0/0', '::/0'], 'v') == [
        '10.0.0.5/32', '2001:db8::/64', '0.0.0.0/0', '::/0']


def test_ipoib_interfaces_ending_in_a_newline_are_refused():
    with pytest.raises(ValueError, match='infiniband_ipoib_networks'):
        _ipoib.parse_rails([{'interface': 'ib0\n', 'cidr': '10.20.0.0/16'}])


def test_a_monitoring_address_ending_in_a_newline_is_refused():
    problems = _hardware.problems('gpu1', {'monitoring_address': 'gpu1.example.org\n'})
    assert any('monitoring_address must be the host name' in problem for problem in problems), problems


def test_the_firewall_renders_networks_normalised_and_refuses_scope_ids():
    from test_firewall_rules import NETWORKS, inventory, parse, refusal, rendered

    files = rendered(cluster_networks=NETWORKS, cluster_admin_cidrs=['192.0.2.7', '2001:DB8:0::/32'],
                     firewall_ssh_extra_cidrs=['198.51.100.1'])
    sets, _rules = parse(files['ctl1'])
    assert sets['ssh_v4'] == ['198.51.100.1/32', '192.0.2.7/32', '10.10.0.4']
    assert sets['ssh_v6'] == ['2001:db8::/32']
    message = refusal(inventory(), firewall_ssh_extra_cidrs=['fe80::1%eth0'])
    assert message.startswith("firewall_ssh_extra_cidrs[0] is not a network in CIDR notation such as 10.0.0.0/8 "
                              "(an IPv6 scope id (%...) has no place in a network): 'fe80::1%eth0'")
