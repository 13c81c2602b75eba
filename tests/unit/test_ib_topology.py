# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ib_topology's parser and tree over real ibnetdiscover output (simulated fabrics) and generated fat-trees."""

from __future__ import annotations

import importlib.util
import pathlib
import re

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils import _ib_topology as ib

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'ibnetdiscover'
_spec = importlib.util.spec_from_file_location('make_fat_tree', FIXTURES / 'make_fat_tree.py')
fat_tree = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fat_tree)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding='utf-8')


def rebuilt(result: dict) -> dict:
    """The parser's tree in the generator's shape: leaves -> hosts, switch -> children, switch -> level."""
    leaves = {s['name']: s['hosts'] for s in result['switches'] if s['level'] == 0}
    children = {s['name']: sorted(s['switches']) for s in result['switches'] if s['level'] > 0}
    levels = {s['name']: s['level'] for s in result['switches']}
    return {'leaves': leaves, 'children': children, 'levels': levels}


def want(tree: dict) -> dict:
    return {'leaves': tree['leaves'], 'children': {k: sorted(v) for k, v in tree['children'].items()},
            'levels': tree['levels']}


# real output of simulated fabrics ------------------------------------------------------

def test_ibsim_two_level_plane_is_rebuilt():
    result = ib.analyse(fixture('ibsim-2level-rail0.txt'))
    expected = fat_tree.expected(16, 2, 8, 8)['mlx5_0']
    assert rebuilt(result) == want(expected)
    assert result['rail'] == 'mlx5_0' and result['rails'] == ['mlx5_0']
    assert result['counts'] == {'switches': 8, 'cas': 16, 'routers': 0, 'links': 32}
    assert result['topology_conf'] == [
        'SwitchName=r0-leaf001 Nodes=gpu[0001-0004]', 'SwitchName=r0-leaf002 Nodes=gpu[0005-0008]',
        'SwitchName=r0-leaf003 Nodes=gpu[0009-0012]', 'SwitchName=r0-leaf004 Nodes=gpu[0013-0016]',
        'SwitchName=r0-spine001 Switches=r0-leaf[001-004]', 'SwitchName=r0-spine002 Switches=r0-leaf[001-004]',
        'SwitchName=r0-spine003 Switches=r0-leaf[001-004]', 'SwitchName=r0-spine004 Switches=r0-leaf[001-004]']
    assert result['warnings'] == []


def test_ibsim_three_level_plane_with_a_partial_pod_is_rebuilt():
    result = ib.analyse(fixture('ibsim-3level-rail3.txt'))
    assert result['rail'] == 'mlx5_3'
    assert rebuilt(result) == want(fat_tree.expected(24, 3, 4, 8)['mlx5_3'])
    assert 'SwitchName=r3-spine005 Switches=r3-leaf[005-006]' in result['topology_conf']
    assert result['topology_conf'][-1] == 'SwitchName=r3-core004 Switches=r3-spine[004,008]'


@pytest.mark.parametrize('rail, name', [(None, 'mlx5_0'), ('mlx5_3', 'mlx5_3'), (3, 'mlx5_3'), ('7', 'mlx5_7')])
def test_concatenated_dumps_of_eight_subnets_choose_a_rail(rail, name):
    result = ib.analyse(fixture('ibsim-2level-8rails.txt'), rail=rail)
    assert result['rail'] == name and result['rails'] == [f'mlx5_{r}' for r in range(8)]
    assert rebuilt(result) == want(fat_tree.expected(16, 2, 8, 8)[name])
    assert result['counts'] == {'switches': 64, 'cas': 128, 'routers': 0, 'links': 256}


def test_edge_cases_router_duplicate_names_plain_and_hash_descriptions():
    fabric = ib.parse(fixture('ibsim-edge-cases.txt'))
    router = fabric.nodes['0c42a10300b00001']
    assert (router.kind, router.description, router.links) == ('Rt', 'ib-router-1', {1: ('0c42a10300a00001', 36)})
    spine = fabric.nodes['0c42a10300a00002']
    assert (spine.description, spine.lid, spine.ports) == ('spine #2 (row 7) MQM8700', 2, 36)
    assert fabric.nodes['0c42a10300c00001'].description == 'node001 mlx5_0'
    result = ib.analyse(fixture('ibsim-edge-cases.txt'))
    names = {s['guid']: s['name'] for s in result['switches']}
    # Two switches share leaf01: both take their GUID.
    assert names['0x0c42a10300a00011'] == 'ib-0c42a10300a00011'
    assert names['0x0c42a10300a00012'] == 'ib-0c42a10300a00012'
    assert names['0x0c42a10300a00013'] == 'Quantum-Mellanox-Technologies'
    assert names['0x0c42a10300a00002'] == 'spine-2-row-7-MQM8700'
    assert names['0x0c42a10300a00001'] == 'spine-a'
    assert result['topology_conf'][0] == ('SwitchName=Quantum-Mellanox-Technologies '
                                          'Nodes=node004.cluster.example,storage01')
    assert result['topology_conf'][-1] == ('SwitchName=spine-a '
                                           'Switches=Quantum-Mellanox-Technologies,ib-0c42a10300a[00011-00012]')
    assert result['counts'] == {'switches': 5, 'cas': 5, 'routers': 1, 'links': 15}


def test_every_topology_conf_line_is_what_slurm_reads():
    for name in ('ibsim-2level-rail0.txt', 'ibsim-3level-rail3.txt', 'ibsim-edge-cases.txt'):
        for line in ib.analyse(fixture(name))['topology_conf']:
            found = re.fullmatch(r'SwitchName=([A-Za-z0-9._-]+) (Nodes|Switches)=(\S+)', line)
            assert found, line
            assert hostlist.expand(found.group(3))


# generated fat-trees -----------------------------------------------------------------------

@pytest.fixture(scope='module')
def eight_rails() -> tuple[str, dict]:
    """128 hosts, 3 levels, 8 rails of radix-16 switches: 4 leaves of 8 hosts per pod, 4 pods per plane."""
    return fat_tree.generate(128, 3, 8, 16), fat_tree.expected(128, 3, 8, 16)


@pytest.mark.parametrize('rail', ['mlx5_0', 'mlx5_3'])
def test_three_level_eight_rail_round_trip(eight_rails, rail):
    text, expected = eight_rails
    result = ib.analyse(text, rail=rail)
    assert rebuilt(result) == want(expected[rail])
    assert result['rail'] == rail and len(result['rails']) == 8
    levels = [s['level'] for s in result['switches']]
    assert levels == sorted(levels) and set(levels) == {0, 1, 2}
    assert result['counts']['cas'] == 128 * 8 and result['warnings'] == []


@pytest.mark.parametrize('hosts, radix, spines', [(64, 16, None), (2, 8, None), (16, 8, 2)])
def test_two_level_round_trip(hosts, radix, spines):
    options = {} if spines is None else {'spines': spines}
    text = fat_tree.generate(hosts, 2, 2, radix, **options)
    expected = fat_tree.expected(hosts, 2, 2, radix, **options)
    for rail in ('mlx5_0', 'mlx5_1'):
        assert rebuilt(ib.analyse(text, rail=rail)) == want(expected[rail])


def test_parallel_links_count_once_as_children():
    result = ib.analyse(fat_tree.generate(16, 2, 1, 8, spines=2))
    assert result['counts']['links'] == 16 + 16
    assert result['topology_conf'][4:] == ['SwitchName=r0-spine001 Switches=r0-leaf[001-004]',
                                           'SwitchName=r0-spine002 Switches=r0-leaf[001-004]']


def test_generator_counts_match_the_parse():
    tree = fat_tree.FatTree(96, 3, 2, 8)
    counts = ib.parse(tree.text()).counts()
    assert counts == dict(tree.counts(), routers=0)


# names -----------------------------------------------------------------------------------

def test_missing_descriptions_become_guid_names():
    text = fat_tree.generate(8, 2, 1, 8).replace('"MF0;r0-leaf001:MQM9700/U1"', '""')
    result = ib.analyse(text)
    leaf = result['switches'][0]
    expected_hosts = [f'gpu000{n}' for n in range(1, 5)]
    assert (leaf['name'], leaf['description'], leaf['hosts']) == ('ib-fc6a1c0300010000', '', expected_hosts)
    assert result['topology_conf'][0] == 'SwitchName=ib-fc6a1c0300010000 Nodes=gpu[0001-0004]'
    assert 'SwitchName=r0-spine001 Switches=ib-fc6a1c0300010000,r0-leaf002' in result['topology_conf']


def test_duplicate_descriptions_become_guid_names():
    text = fat_tree.generate(8, 2, 1, 8).replace('r0-spine002', 'r0-spine001')
    names = [s['name'] for s in ib.analyse(text)['switches']]
    assert names[:2] == ['r0-leaf001', 'r0-leaf002']
    assert 'r0-spine001' not in names and {'ib-fc6a1c0300020000', 'ib-fc6a1c0300020001'} <= set(names)


@pytest.mark.parametrize('description, name', [
    ('MF0;leaf01:MQM9700/U1', 'leaf01'),
    ('MF0;ib-sw 12/a:MQM9700/U1', 'ib-sw-12-a'),
    ('Quantum Mellanox Technologies', 'Quantum-Mellanox-Technologies'),
    ('  #leaf "7"  ', 'leaf-7'),
    ('###', 'ib-0000000000000abc'),
    ('', 'ib-0000000000000abc'),
])
def test_switch_name_rule(description, name):
    fabric = ib.Fabric()
    fabric.nodes['0000000000000abc'] = ib.Node('Switch', '0000000000000abc', 36, description, 1, 1)
    assert ib.switch_names(fabric) == {'0000000000000abc': name}


# hosts, rails and the inventory ----------------------------------------------------------------

def test_inventory_filters_nodes_and_reports_both_ways():
    text = fat_tree.generate(16, 2, 1, 8)
    inventory = [f'gpu{n:04d}' for n in range(1, 5)] + ['gpu0010', 'gpu0099', 'gpu0100']
    result = ib.analyse(text, hosts=inventory)
    assert result['topology_conf'] == [
        'SwitchName=r0-leaf001 Nodes=gpu[0001-0004]', 'SwitchName=r0-leaf003 Nodes=gpu0010',
        'SwitchName=r0-spine001 Switches=r0-leaf[001,003]', 'SwitchName=r0-spine002 Switches=r0-leaf[001,003]',
        'SwitchName=r0-spine003 Switches=r0-leaf[001,003]', 'SwitchName=r0-spine004 Switches=r0-leaf[001,003]']
    assert result['hosts_missing_from_fabric'] == ['gpu0099', 'gpu0100']
    assert result['fabric_hosts_not_in_inventory'] == ['gpu0005', 'gpu0006', 'gpu0007', 'gpu0008', 'gpu0009',
                                                       'gpu0011', 'gpu0012', 'gpu0013', 'gpu0014', 'gpu0015',
                                                       'gpu0016']


def test_inventory_drops_upper_switches_left_without_children():
    text = fat_tree.generate(64, 3, 1, 8)  # 16 leaves, 4 pods
    result = ib.analyse(text, hosts=['gpu0001', 'gpu0005'])
    assert [s['name'] for s in result['switches']] == [
        'r0-leaf001', 'r0-leaf002', 'r0-spine001', 'r0-spine002', 'r0-spine003', 'r0-spine004',
        'r0-core001', 'r0-core002', 'r0-core003', 'r0-core004', 'r0-core005', 'r0-core006', 'r0-core007',
        'r0-core008']
    assert result['switches'][-1]['switches'] == ['r0-spine004']


def test_empty_inventory_leaves_nothing():
    result = ib.analyse(fat_tree.generate(8, 2, 1, 8), hosts=[])
    assert result['topology_conf'] == [] and result['switches'] == []
    assert len(result['fabric_hosts_not_in_inventory']) == 8
    assert result['warnings'] == ['none of the 0 inventory host(s) has a CA on rail mlx5_0: '
                                  'topology.conf would be empty']


def test_custom_host_pattern_on_fqdn_descriptions():
    text = fat_tree.generate(8, 2, 2, 8)
    text = re.sub(r'"(gpu\d+) (mlx5_\d)"', r'"\1.cluster.example \2"', text)
    default = ib.analyse(text)
    assert default['topology_conf'][0] == 'SwitchName=r0-leaf001 Nodes=gpu[0001-0004].cluster.example'
    result = ib.analyse(text, host_pattern=r'^(?P<host>[a-z]+\d+)\.', rail='mlx5_1')
    assert result['topology_conf'][0] == 'SwitchName=r1-leaf001 Nodes=gpu[0001-0004]'


def test_host_pattern_with_an_hca_group():
    text = fat_tree.generate(4, 2, 2, 8)
    text = re.sub(r'"(gpu\d+) (mlx5_\d)"', r'"\2 on \1"', text)
    result = ib.analyse(text, host_pattern=r'^(?P<hca>\S+) on (?P<host>\S+)', rail='mlx5_1')
    assert result['rails'] == ['mlx5_0', 'mlx5_1']
    assert result['topology_conf'][0] == 'SwitchName=r1-leaf001 Nodes=gpu[0001-0004]'


def test_rails_by_guid_order_when_descriptions_name_no_hca():
    text = re.sub(r'"(gpu\d+) mlx5_\d"', r'"\1"', fat_tree.generate(8, 2, 3, 8))
    result = ib.analyse(text, rail=2)
    assert result['rails'] == ['0', '1', '2'] and result['rail'] == '2'
    assert result['topology_conf'][0] == 'SwitchName=r2-leaf001 Nodes=gpu[0001-0004]'
    assert ib.analyse(text, rail='1')['rail'] == '1'


def test_mlx5_names_sort_naturally():
    text = fat_tree.generate(4, 2, 12, 8)
    assert ib.analyse(text)['rails'][:3] == ['mlx5_0', 'mlx5_1', 'mlx5_2']
    assert ib.analyse(text)['rails'][-1] == 'mlx5_11'


def test_a_host_with_two_cas_on_one_rail_is_placed_once_with_a_warning():
    text = fat_tree.generate(8, 2, 1, 8).replace('"gpu0002 mlx5_0"', '"gpu0001 mlx5_0"')
    result = ib.analyse(text)
    assert result['topology_conf'][0] == 'SwitchName=r0-leaf001 Nodes=gpu[0001,0003-0004]'
    assert any('host gpu0001 has two CAs on rail mlx5_0' in w for w in result['warnings'])


def test_cas_the_pattern_does_not_match_are_not_hosts():
    text = fat_tree.generate(8, 2, 1, 8).replace('"gpu0008 mlx5_0"', '""')
    result = ib.analyse(text)
    assert result['topology_conf'][1] == 'SwitchName=r0-leaf002 Nodes=gpu[0005-0007]'
    assert any("1 CA(s) whose description host_pattern does not match" in w for w in result['warnings'])


def test_leaves_without_a_common_parent_are_warned_about():
    result = ib.analyse(fixture('ibsim-2level-rail0.txt').replace('"MF0;r0-spine', '"MF0;x'), hosts=None)
    assert result['warnings'] == []
    fabric_text = fat_tree.generate(8, 2, 1, 8)
    # Only the leaves: strip every block but the CAs' and the leaves' uplinks.
    kept = [line for line in fabric_text.split('\n') if 'spine' not in line]
    result = ib.analyse('\n'.join(kept))
    assert result['topology_conf'] == ['SwitchName=r0-leaf001 Nodes=gpu[0001-0004]',
                                       'SwitchName=r0-leaf002 Nodes=gpu[0005-0008]']
    assert any('no switch of the tree is above all its 2 leaves' in w for w in result['warnings'])


@pytest.mark.parametrize('kwargs, message', [
    ({'rail': 'mlx5_9'}, "rail 'mlx5_9' is not on the fabric; rails seen: mlx5_0, mlx5_1"),
    ({'rail': 5}, 'rail index 5 is out of range: the fabric shows 2 rail(s): mlx5_0, mlx5_1'),
    ({'host_pattern': '(?P<host>'}, "host_pattern '(?P<host>' is not a valid regular expression"),
    ({'host_pattern': r'^\S+'}, 'has no named group "host"'),
    ({'host_pattern': r'^(?P<host>zzz\d+)'}, 'no hosts found: no CA description on the fabric matches host_pattern'),
])
def test_request_errors_name_their_parameter(kwargs, message):
    with pytest.raises(ib.TopologyError, match=re.escape(message)):
        ib.analyse(fat_tree.generate(4, 2, 2, 8), **kwargs)


# the format ---------------------------------------------------------------------------------

def test_crlf_line_endings():
    text = fixture('ibsim-2level-rail0.txt')
    assert ib.analyse(text.replace('\n', '\r\n'))['topology_conf'] == ib.analyse(text)['topology_conf']


def test_ext_port_numbers_and_port_guids():
    text = ('Switch\t36 "S-0c42a10300a00011"\t\t# "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 11 lmc 0\n'
            '[1][ext 1]\t"H-0c42a10300c00001"[1](c42a10300c00002) \t\t# "gpu01 mlx5_0" lid 3 4xHDR\n'
            '[35][ext 17]\t"S-0c42a10300a00001"[3][ext 2]\t\t# "MF0;spine01:MQM8700/U1" lid 1 4xHDR\n'
            '\n'
            'Ca\t2 "H-0c42a10300c00001"\t\t# "gpu01 mlx5_0"\n'
            '[1](c42a10300c00002) \t"S-0c42a10300a00011"[1][ext 1]\t\t'
            '# lid 3 lmc 0 "MF0;leaf01:MQM8700/U1" lid 11 4xHDR\n')
    fabric = ib.parse(text)
    assert fabric.nodes['0c42a10300a00011'].links == {1: ('0c42a10300c00001', 1), 35: ('0c42a10300a00001', 3)}
    assert fabric.nodes['0c42a10300c00001'].lid == 3
    stub = fabric.nodes['0c42a10300a00001']
    assert (stub.kind, stub.description, stub.lid) == ('Switch', 'MF0;spine01:MQM8700/U1', 1)
    assert any('has no block of its own' in w for w in fabric.warnings)
    assert ib.analyse(text)['topology_conf'] == ['SwitchName=leaf01 Nodes=gpu01', 'SwitchName=spine01 Switches=leaf01']


def test_descriptions_with_quotes_and_hashes():
    text = ('Switch\t36 "S-0000000000000001"\t\t# "a "quoted" # name" enhanced port 0 lid 1 lmc 0\n'
            '[1]\t"H-0000000000000002"[1](2) \t\t# "gpu1 "x" mlx5_0" lid 2 4xNDR\n\n'
            'Ca\t1 "H-0000000000000002"\t\t# "gpu1 "x" mlx5_0"\n'
            '[1](2) \t"S-0000000000000001"[1]\t\t# lid 2 lmc 0 "a "quoted" # name" lid 1 4xNDR\n')
    fabric = ib.parse(text)
    assert fabric.nodes['0000000000000001'].description == 'a "quoted" # name'
    assert fabric.nodes['0000000000000002'].description == 'gpu1 "x" mlx5_0'
    assert ib.analyse(text)['topology_conf'] == ['SwitchName=a-quoted-name Nodes=gpu1']


def test_trailing_garbage_is_skipped_and_reported():
    text = fixture('ibsim-2level-rail0.txt') + 'ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0)\n$ \n'
    result = ib.analyse(text)
    assert len(result['topology_conf']) == 8
    assert result['warnings'] == ['skipped 2 line(s) that are not ibnetdiscover output: line 213, 214']


def test_no_trailing_newline():
    text = fixture('ibsim-2level-rail0.txt').rstrip('\n')
    assert len(ib.analyse(text)['topology_conf']) == 8


@pytest.mark.parametrize('line, reason', [
    ('[5]\t"S-fc6a1c03', 'a port line that is not'),
    ('[x]\t"S-fc6a1c0300020000"[1]', 'a port line that is not'),
    ('Switch\t8 S-fc6a1c0300010000', 'a node line that is not'),
    ('Ca\t1 "S-fc6a1c0300010000"\t\t# "x"', 'a Ca line whose id starts with S-'),
])
def test_malformed_lines_are_named(line, reason):
    lines = fixture('ibsim-2level-rail0.txt').split('\n')
    lines.insert(20, line)
    with pytest.raises(ib.IbnetdiscoverError) as caught:
        ib.parse('\n'.join(lines))
    assert str(caught.value).startswith(f'ibnetdiscover output line 21: {reason}')
    assert repr(line) in str(caught.value)


def test_a_port_line_before_any_node():
    with pytest.raises(ib.IbnetdiscoverError, match=r'line 2: a port line before any Switch, Ca or Rt line'):
        ib.parse('#\n[1]\t"S-fc6a1c0300020000"[1]\n')


@pytest.mark.parametrize('text, message', [
    ('', 'the ibnetdiscover output is empty'),
    ('\r\n  \n', 'the ibnetdiscover output is empty'),
    ('#\n# Topology file: generated on Tue Dec  1 14:00:00 2026\n#\n', 'no Switch, Ca or Rt block'),
    ('CA    14    1 0x0002c903000a0b0d 4x NDR - SW    12   1 0xfc6a1c0300e1b2a0 ( )\n', 'ports report'),
])
def test_empty_and_foreign_input(text, message):
    with pytest.raises(ib.IbnetdiscoverError, match=re.escape(message)):
        ib.parse(text)


def test_a_node_seen_as_two_kinds_is_an_error():
    text = 'Switch\t8 "S-0000000000000001"\t\t# "a"\n\nCa\t1 "H-0000000000000001"\t\t# "b"\n'
    with pytest.raises(ib.IbnetdiscoverError, match='line 3: 0000000000000001 was a Switch on line 1'):
        ib.parse(text)


# hostile numbers: the parser's own errors, never int()'s ValueError ----------------------------------

HOSTILE_TEXT = ('Switch\t36 "S-0c42a10300a00011"\t\t# "MF0;leaf01:MQM8700/U1" enhanced port 0 lid 11 lmc 0\n'
                '[1]\t"H-0c42a10300c00001"[1]\t\t# "gpu01 mlx5_0" lid 3 4xHDR\n'
                '\n'
                'Ca\t2 "H-0c42a10300c00001"\t\t# "gpu01 mlx5_0"\n'
                '[1]\t"S-0c42a10300a00011"[1]\t\t# lid 3 lmc 0 "MF0;leaf01:MQM8700/U1" lid 11 4xHDR\n')


@pytest.mark.parametrize('old, new', [
    ('[1]\t"H-', '[' + '9' * 5000 + ']\t"H-'),
    ('"H-0c42a10300c00001"[1]\t', '"H-0c42a10300c00001"[' + '9' * 5000 + ']\t'),
    ('Switch\t36 ', 'Switch\t' + '9' * 5000 + ' '),
    ('[1]\t"H-', '[\u0663]\t"H-'),
    ('Switch\t36 ', 'Switch\t\u0663\u0666 '),
], ids=['port-5000-digits', 'remote-port-5000-digits', 'ports-5000-digits', 'port-arabic-indic',
        'ports-arabic-indic'])
def test_hostile_port_numbers_raise_the_parsers_error(old, new):
    assert old in HOSTILE_TEXT
    with pytest.raises(ib.IbnetdiscoverError):
        ib.parse(HOSTILE_TEXT.replace(old, new, 1))


@pytest.mark.parametrize('lid', ['9' * 5000, '\u0663'], ids=['5000-digits', 'arabic-indic'])
def test_hostile_lids_are_no_lid(lid):
    fabric = ib.parse(HOSTILE_TEXT.replace('lid 3 lmc 0', f'lid {lid} lmc 0').replace('lid 11 lmc 0', f'lid {lid} lmc 0'))
    assert fabric.nodes['0c42a10300c00001'].lid is None and fabric.nodes['0c42a10300a00011'].lid is None


@pytest.mark.parametrize('rail', ['\u00b2', '\u0661', '9' * 5000], ids=['superscript', 'arabic-indic', '5000-digits'])
def test_a_rail_of_hostile_digits_is_not_on_the_fabric(rail):
    with pytest.raises(ib.TopologyError, match='is not on the fabric|out of range'):
        ib.analyse(fat_tree.generate(4, 2, 2, 8), rail=rail)
