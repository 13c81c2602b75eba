# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the lustre_client checks: LNet networks, NIDs, mounts, striped directories, and their filters."""

from __future__ import annotations

import subprocess

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import lustre as lustre_filter
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _lustre
from ansible_collections.llmforge.cluster.plugins.plugin_utils._lustre import LustreConfigError

IPOIB = [{'interface': 'ib0', 'cidr': '10.10.0.0/16'}, {'interface': 'ib1', 'cidr': '10.11.0.0/16'}]


def networks(*items):
    return _lustre.check_networks(list(items))


# LNet networks -----------------------------------------------------------------------------------


@pytest.mark.parametrize('item, net, interfaces', [
    ('o2ib0(ib0)', 'o2ib0', ['ib0']),
    ('o2ib(ib0)', 'o2ib0', ['ib0']),
    ('o2ib1(ib1,ib2)', 'o2ib1', ['ib1', 'ib2']),
    ('tcp0(eth0)', 'tcp0', ['eth0']),
    ('tcp(bond0.100)', 'tcp0', ['bond0.100']),
    (' tcp2(enp1s0f0) ', 'tcp2', ['enp1s0f0']),
])
def test_networks_are_parsed_and_numbered(item, net, interfaces):
    [network] = networks(item)
    assert network['net'] == net and network['interfaces'] == interfaces
    assert network['spec'] == f"{net}({','.join(interfaces)})"


@pytest.mark.parametrize('item, message', [
    ('o2ib0', 'is not written <network>(<interface>'),
    ('ib0(ib0)', 'is not an LNet network'),
    ('gni0(ipogif0)', 'is not an LNet network'),
    ('o2ib0()', 'names no valid network interface'),
    ('o2ib0(ib0,ib0)', 'names an interface twice'),
    ('o2ib0(ib 0)', 'names no valid network interface'),
    ('o2ib0(ib0', 'is not written'),
    (42, 'is not a string'),
])
def test_bad_networks_are_refused_naming_the_variable_and_item(item, message):
    with pytest.raises(LustreConfigError, match=r'^lustre_client_lnet_networks\[1\]: ') as error:
        networks('tcp0(eth0)', item)
    assert message in str(error.value)


def test_empty_or_non_list_networks_are_refused():
    for value in ([], None, 'o2ib0(ib0)'):
        with pytest.raises(LustreConfigError, match='lustre_client_lnet_networks must be a non-empty list'):
            _lustre.check_networks(value)


def test_a_network_declared_twice_or_an_interface_on_two_networks_is_refused():
    with pytest.raises(LustreConfigError, match=r'\[1\].*declares network o2ib0 a second time'):
        networks('o2ib(ib0)', 'o2ib0(ib1)')
    with pytest.raises(LustreConfigError, match=r'\[1\].*puts ib0 on o2ib1, but o2ib0 already uses it'):
        networks('o2ib0(ib0)', 'o2ib1(ib0)')


def test_o2ib_interfaces_must_be_ipoib_interfaces_when_the_infiniband_role_declares_them():
    ok = lustre_filter.lustre_lnet_networks(['o2ib0(ib0)', 'o2ib1(ib1)', 'tcp0(eth0)'], IPOIB)
    assert [network['net'] for network in ok] == ['o2ib0', 'o2ib1', 'tcp0']
    with pytest.raises(AnsibleFilterError) as error:
        lustre_filter.lustre_lnet_networks(['tcp0(eth0)', 'o2ib0(ib0,ib2)'], IPOIB)
    assert str(error.value).startswith("lustre_client_lnet_networks[1]: 'o2ib0(ib0,ib2)' names ib2, which infiniband_ipoib_networks")
    assert 'its IPoIB interfaces: ib0, ib1' in str(error.value)


def test_without_infiniband_ipoib_networks_any_interface_is_accepted():
    assert lustre_filter.lustre_lnet_networks(['o2ib0(ib7)'])[0]['interfaces'] == ['ib7']
    assert lustre_filter.lustre_lnet_networks(['o2ib0(ib7)'], None)[0]['interfaces'] == ['ib7']
    # [] is the infiniband role's default (no IPoIB configured by it), seen by every later role of the play.
    assert lustre_filter.lustre_lnet_networks(['o2ib0(ib7)'], [])[0]['interfaces'] == ['ib7']


def test_a_malformed_infiniband_ipoib_networks_is_named():
    with pytest.raises(AnsibleFilterError, match='infiniband_ipoib_networks must be a list'):
        lustre_filter.lustre_lnet_networks(['o2ib0(ib0)'], [{'cidr': '10.0.0.0/8'}])


# NIDs --------------------------------------------------------------------------------------------


@pytest.mark.parametrize('text, nodes', [
    ('10.0.0.1@o2ib', [['10.0.0.1@o2ib']]),
    ('10.0.0.1@o2ib1', [['10.0.0.1@o2ib1']]),
    ('10.0.0.1@tcp', [['10.0.0.1@tcp']]),
    ('192.168.1.254@tcp0', [['192.168.1.254@tcp0']]),
    ('10.0.0.1@o2ib:10.0.0.2@o2ib', [['10.0.0.1@o2ib'], ['10.0.0.2@o2ib']]),
    ('10.0.0.1@o2ib,10.1.0.1@tcp:10.0.0.2@o2ib,10.1.0.2@tcp',
     [['10.0.0.1@o2ib', '10.1.0.1@tcp'], ['10.0.0.2@o2ib', '10.1.0.2@tcp']]),
])
def test_mgs_nids_failover_and_multi_rail(text, nodes):
    parsed = _lustre.parse_mgs_nids(text, 'x')
    assert [[nid['nid'] for nid in node] for node in parsed] == nodes


def test_nid_networks_are_numbered():
    nid = _lustre.parse_nid('10.0.0.1@o2ib', 'x')
    assert (nid['address'], nid['type'], nid['number'], nid['net']) == ('10.0.0.1', 'o2ib', 0, 'o2ib0')


@pytest.mark.parametrize('text, message', [
    ('10.0.0.1', 'is not a NID: expected <IPv4 address>@<network>'),
    ('10.0.0.256@o2ib', "'10.0.0.256' is not an IPv4 address"),
    ('10.0.0@o2ib', 'is not an IPv4 address'),
    ('mgs01@o2ib', 'is not an IPv4 address'),
    ('10.0.0.1@ib0', 'is not an LNet network'),
    ('10.0.0.1@', 'is not an LNet network'),
    ('10.0.0.1@o2ib::10.0.0.2@o2ib', 'empty MGS node'),
    ('10.0.0.1@o2ib,', 'empty NID'),
    ('', 'no MGS NID given'),
])
def test_bad_nids_are_refused(text, message):
    with pytest.raises(LustreConfigError, match='^where') as error:
        _lustre.parse_mgs_nids(text, 'where')
    assert message in str(error.value)


# Mounts ------------------------------------------------------------------------------------------


def mounts(items, nets=('o2ib0(ib0)', 'tcp0(eth0)'), **kwargs):
    return _lustre.check_mounts(items, _lustre.check_networks(list(nets)), **kwargs)


def test_a_mount_gets_its_fstab_source_and_default_options():
    [mount] = mounts([{'fsname': 'scratch', 'mgs_nids': ['10.0.0.1@o2ib,10.1.0.1@tcp', '10.0.0.2@o2ib'],
                       'mount_point': '/lustre/scratch/'}])
    assert mount['src'] == '10.0.0.1@o2ib,10.1.0.1@tcp:10.0.0.2@o2ib:/scratch'
    assert mount['mount_point'] == '/lustre/scratch'
    assert mount['opts'] == '_netdev,flock,noatime,x-systemd.automount'
    assert mount['automount_unit'] == 'lustre-scratch.automount'


def test_mount_options_can_be_replaced_and_automount_turned_off():
    [mount] = mounts([{'fsname': 'home', 'mgs_nids': '10.0.0.1@o2ib1', 'mount_point': '/home/lustre',
                       'options': ['_netdev', 'localflock', 'user_xattr'], 'automount': False}])
    assert mount['opts'] == '_netdev,localflock,user_xattr' and not mount['automount']
    [mount] = mounts([{'fsname': 'a', 'mgs_nids': ['10.0.0.1@tcp'], 'mount_point': '/a'}], automount=False)
    assert mount['opts'] == '_netdev,flock,noatime'


@pytest.mark.parametrize('mount, message', [
    ({'fsname': 'scratch', 'mgs_nids': ['10.0.0.1@o2ib:10.0.0.300@o2ib'], 'mount_point': '/s'},
     "lustre_client_mounts[0].mgs_nids: '10.0.0.300@o2ib' is not a NID"),
    ({'fsname': 'scratch', 'mgs_nids': ['10.0.0.1'], 'mount_point': '/s'}, 'lustre_client_mounts[0].mgs_nids: '),
    ({'fsname': 'scratch', 'mgs_nids': [], 'mount_point': '/s'}, 'lustre_client_mounts[0].mgs_nids must be a non-empty list'),
    ({'fsname': 'scratch', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': 'lustre'}, 'lustre_client_mounts[0].mount_point'),
    ({'fsname': 'scratch', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/'}, 'lustre_client_mounts[0].mount_point'),
    ({'fsname': 'toolongname', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/s'}, 'lustre_client_mounts[0].fsname'),
    ({'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/s'}, 'lustre_client_mounts[0].fsname: None'),
    ({'fsname': 's', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/s', 'options': ['flock']}, 'must include _netdev'),
    ({'fsname': 's', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/s', 'options': ['_netdev,flock']}, 'are not mount options'),
    ({'fsname': 's', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/s', 'mgs': 'x'}, "unknown keys ['mgs']"),
])
def test_bad_mounts_are_refused_naming_the_item(mount, message):
    with pytest.raises(LustreConfigError) as error:
        mounts([mount])
    assert message in str(error.value)


def test_a_nid_on_an_undeclared_network_type_is_refused():
    with pytest.raises(LustreConfigError) as error:
        mounts([{'fsname': 's', 'mgs_nids': ['10.0.0.1@o2ib,10.1.0.1@tcp'], 'mount_point': '/s'}], nets=['o2ib0(ib0)'])
    assert str(error.value) == ('lustre_client_mounts[0].mgs_nids: NID 10.1.0.1@tcp is on a tcp network, but '
                                'lustre_client_lnet_networks declares only o2ib networks: this client could not reach it')


def test_a_mount_point_used_twice_is_refused():
    item = {'fsname': 's', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/s'}
    with pytest.raises(LustreConfigError, match=r'lustre_client_mounts\[1\].mount_point: /s is mounted twice'):
        mounts([item, dict(item, fsname='t', mount_point='/s/')])


def test_the_filter_raises_ansible_filter_errors():
    nets = lustre_filter.lustre_lnet_networks(['o2ib0(ib0)'])
    with pytest.raises(AnsibleFilterError, match=r"^lustre_client_mounts\[0\].mgs_nids: 'x@o2ib' is not a NID"):
        lustre_filter.lustre_mounts([{'fsname': 's', 'mgs_nids': ['x@o2ib'], 'mount_point': '/s'}], nets)


# Systemd unit names, stripe sizes and striped directories -----------------------------------------


@pytest.mark.parametrize('path', ['/lustre/scratch', '/', '/mnt/my-fs', '/a//b/', '/mnt/.hidden', '/mnt/a b', '/mnt/ü'])
def test_unit_names_match_systemd_escape(path):
    expected = None
    try:
        expected = subprocess.run(['systemd-escape', '--path', '--suffix=automount', path],
                                  capture_output=True, text=True, check=True).stdout.strip()
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip('systemd-escape is not available')
    assert _lustre.systemd_unit_name(path, 'automount') == expected


@pytest.mark.parametrize('value, size', [('4M', 4 << 20), ('1m', 1 << 20), ('64k', 65536), (4194304, 4 << 20), ('1G', 1 << 30)])
def test_stripe_sizes(value, size):
    assert _lustre.stripe_size_bytes(value, 'x') == size


@pytest.mark.parametrize('value', ['4MB', '1000', 0, '-4M', True, '32k'])
def test_bad_stripe_sizes(value):
    with pytest.raises(LustreConfigError, match='^x: '):
        _lustre.stripe_size_bytes(value, 'x')


def test_stripe_dirs_are_checked_against_the_mounts():
    declared = mounts([{'fsname': 's', 'mgs_nids': ['10.0.0.1@o2ib'], 'mount_point': '/lustre/s'}])
    [item] = _lustre.check_stripe_dirs([{'path': '/lustre/s/ckpt/'}], declared)
    assert item == {'path': '/lustre/s/ckpt', 'mount_point': '/lustre/s', 'stripe_count': 4, 'stripe_size': 4 << 20,
                    'owner': 'root', 'group': 'root', 'mode': '1777'}
    [item] = _lustre.check_stripe_dirs([{'path': '/lustre/s/c', 'stripe_count': -1, 'stripe_size': '1M', 'mode': '755'}],
                                       declared, default_count=8)
    assert (item['stripe_count'], item['stripe_size'], item['mode']) == (-1, 1 << 20, '0755')
    with pytest.raises(LustreConfigError, match=r"lustre_client_stripe_dirs\[0\].path: '/lustre/other/c' is not below"):
        _lustre.check_stripe_dirs([{'path': '/lustre/other/c'}], declared)
    with pytest.raises(LustreConfigError, match=r'lustre_client_stripe_dirs\[0\].path'):
        _lustre.check_stripe_dirs([{'path': '/lustre/s'}], declared)
    with pytest.raises(LustreConfigError, match=r'lustre_client_stripe_dirs\[0\].stripe_count'):
        _lustre.check_stripe_dirs([{'path': '/lustre/s/c', 'stripe_count': -2}], declared)


def test_lnet_conf_yaml_lists_each_interface_as_a_network_interface():
    yaml = pytest.importorskip('yaml')
    text = lustre_filter.lustre_lnet_conf(networks('o2ib0(ib0,ib1)', 'tcp(eth0)'))
    assert yaml.safe_load(text) == {'net': [
        {'net type': 'o2ib0', 'local NI(s)': [{'interfaces': {0: 'ib0'}}, {'interfaces': {0: 'ib1'}}]},
        {'net type': 'tcp0', 'local NI(s)': [{'interfaces': {0: 'eth0'}}]},
    ]}


def test_prune_config_errors_name_the_role_variables():
    good = {'roots': ['/ckpt'], 'pattern': r'step_(\d+)', 'keep_last': 2, 'keep_every': 0, 'min_age': 0,
            'complete_marker': '', 'dry_run': True, 'log_file': ''}
    assert lustre_filter.lustre_prune_config(good) == good
    for change, name in (({'keep_last': 0}, 'lustre_client_prune_keep_last'), ({'pattern': 'step_[0-9]+'}, 'lustre_client_prune_pattern'),
                         ({'pattern': '('}, 'lustre_client_prune_pattern'), ({'roots': []}, 'lustre_client_prune_roots'),
                         ({'roots': ['ckpt']}, 'lustre_client_prune_roots'), ({'min_age': -1}, 'lustre_client_prune_min_age'),
                         ({'complete_marker': 'a/b'}, 'lustre_client_prune_complete_marker')):
        with pytest.raises(AnsibleFilterError, match=f'^{name}: '):
            lustre_filter.lustre_prune_config(dict(good, **change))


# --- hostile numbers: LustreConfigError, never int()'s own ValueError -------------------------------

@pytest.mark.parametrize('call', [
    lambda: _lustre.check_networks(['o2ib' + '9' * 5000 + '(ib0)']),
    lambda: _lustre.parse_net('tcp' + '1' * 400, 'lnet'),
    lambda: _lustre.parse_net('o2ib\u00b2', 'lnet'),
    lambda: _lustre.parse_nid('10.0.0.1@o2ib' + '9' * 5000, 'mgs_nids'),
    lambda: _lustre.parse_nid('10.0.0.\u00b2@o2ib', 'mgs_nids'),
    lambda: _lustre.parse_nid('10.0.\u0663.1@o2ib', 'mgs_nids'),
    lambda: _lustre.stripe_size_bytes('9' * 5000, 'stripes[0].size'),
    lambda: _lustre.stripe_size_bytes('\u0664M', 'stripes[0].size'),
], ids=['network-5000-digits', 'net-400-digits', 'net-superscript', 'nid-net-5000-digits', 'nid-superscript-octet',
        'nid-arabic-indic-octet', 'stripe-5000-digits', 'stripe-arabic-indic'])
def test_hostile_numbers_raise_lustre_config_error(call):
    with pytest.raises(LustreConfigError) as caught:
        call()
    assert str(caught.value).strip()
