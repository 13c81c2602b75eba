# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rdma_links over fake sysfs trees in the kernel's formats: the reader, the checks and the module."""

from __future__ import annotations

import importlib.util
import pathlib
import typing as t

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from module_runner import run_module

BUILDER_PATH = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'rdma' / 'make_sysfs_trees.py'
_spec = importlib.util.spec_from_file_location('make_sysfs_trees', BUILDER_PATH)
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)

NDR = {'devices': r'^mlx5_(?!bond)', 'hca_count': 8, 'link_layer': 'InfiniBand', 'rate_gbps': 400,
       'require_sm': True, 'require_netdev': True}


@pytest.fixture(scope='module')
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp('sysfs')
    return {case: str(builder.build(case, root / case)) for case in builder.CASES}


def evaluate(trees: dict[str, str], case: str, expected: t.Optional[dict] = None) -> dict:
    return rdma.evaluate(trees[case], NDR if expected is None else expected)


def not_passing(result: dict) -> list[tuple[str, str, str]]:
    return [(c['name'], c['subject'], c['status']) for c in result['checks'] if c['status'] in ('fail', 'warn')]


def test_healthy_ndr_node_reads_every_port(trees):
    result = evaluate(trees, 'ndr8_healthy')
    assert result['healthy'] and not_passing(result) == []
    assert [p['device'] for p in result['ports']] == [f'mlx5_{i}' for i in range(8)]
    port = result['ports'][0]
    assert port['state'] == 'ACTIVE' and port['phys_state'] == 'LinkUp'
    assert (port['rate_gbps'], port['width'], port['speed_name']) == (400.0, '4X', 'NDR')
    assert port['link_layer'] == 'InfiniBand' and port['sm_lid'] == 1 and port['lid'] > 0
    assert port['fw_ver'] == '28.39.1002' and port['hca_type'] == 'MT4129' and port['numa_node'] == 0
    assert port['pcie'] == {'speed': 32.0, 'width': 16, 'max_speed': 32.0, 'max_width': 16}
    assert port['netdev'] and port['mtu'] == 4092
    assert port['counters']['symbol_error'] == 0 and port['counters']['port_xmit_data'] > 0
    assert result['ports'][4]['numa_node'] == 1


@pytest.mark.parametrize('case, expected', [
    ('ndr8_port_down', [('state', 'mlx5_3/1', 'fail'), ('phys_state', 'mlx5_3/1', 'fail'), ('sm', 'mlx5_3/1', 'fail')]),
    ('ndr8_slow_link', [('rate', 'mlx5_5/1', 'fail')]),
    ('ndr8_bad_counters', [('counters', 'mlx5_2/1', 'fail'), ('counters', 'mlx5_6/1', 'fail')]),
    ('ndr8_pcie_downtrained', [('pcie_link', 'mlx5_1', 'fail'), ('pcie_link', 'mlx5_4', 'fail')]),
    ('ndr8_mixed_fw', [('fw_consistency', 'MT4129', 'warn')]),
])
def test_each_fault_is_caught_by_its_check(trees, case, expected):
    result = evaluate(trees, case)
    assert not_passing(result) == expected
    assert result['healthy'] is all(status == 'warn' for _name, _subject, status in expected)


def test_a_down_port_is_not_judged_on_its_rate(trees):
    rate = [c for c in evaluate(trees, 'ndr8_port_down')['checks'] if c['name'] == 'rate' and c['subject'] == 'mlx5_3/1']
    assert rate[0]['status'] == 'skip' and 'judged only on ACTIVE ports' in rate[0]['message']


def test_counters_name_values_and_saturation(trees):
    checks = {c['subject']: c for c in evaluate(trees, 'ndr8_bad_counters')['checks'] if c['name'] == 'counters'}
    assert checks['mlx5_2/1']['actual'] == {'symbol_error': 1234, 'link_downed': 3}
    assert 'symbol_error 1234 (max 10)' in checks['mlx5_2/1']['message']
    assert 'symbol_error at least 65535 (max 10), saturated at its 16-bit maximum' in checks['mlx5_6/1']['message']
    assert 'link_error_recovery at least 255 (max 10), saturated at its 8-bit maximum' in checks['mlx5_6/1']['message']
    assert 'local_link_integrity_errors at least 15 (max 0), saturated at its 4-bit maximum' in checks['mlx5_6/1']['message']


def test_raised_counter_limits_let_a_known_count_pass(trees):
    relaxed = dict(NDR, max_counters={'symbol_error': 70000, 'link_downed': 5, 'link_error_recovery': 255,
                                      'local_link_integrity_errors': 15})
    assert not_passing(evaluate(trees, 'ndr8_bad_counters', relaxed)) == []


def test_no_subnet_manager(trees):
    result = evaluate(trees, 'ndr8_no_sm')
    failing = {(name, status) for name, _subject, status in not_passing(result)}
    assert failing == {('state', 'fail'), ('sm', 'fail')}
    sm = [c for c in result['checks'] if c['name'] == 'sm'][0]
    assert 'no subnet manager seen (sm_lid 0)' in sm['message']


def test_roce_ports_with_netdevs_and_jumbo_mtu(trees):
    expected = {'hca_count': 2, 'link_layer': 'Ethernet', 'rate_gbps': 100, 'mtu': 9000, 'require_netdev': True,
                'require_sm': True}
    result = evaluate(trees, 'roce_2port', expected)
    assert not_passing(result) == []
    assert [p['netdev'] for p in result['ports']] == ['ens1f0np0', 'ens1f1np1']
    assert {c['status'] for c in result['checks'] if c['name'] == 'sm'} == {'skip'}


def test_roce_port_without_netdev_fails(trees):
    result = evaluate(trees, 'roce_no_netdev', {'link_layer': 'Ethernet', 'require_netdev': True})
    assert not_passing(result) == [('netdev', 'mlx5_1/1', 'fail')]


def test_old_hca_with_missing_optional_files(trees):
    result = evaluate(trees, 'mlx4_minimal', {'devices': '^mlx4', 'hca_count': 2})
    ports = result['ports']
    assert [(p['port'], p['state'], p['phys_state']) for p in ports] == [(1, 'ACTIVE', 'LinkUp'), (2, 'DOWN', 'Disabled')]
    assert ports[0]['board_id'] is None and ports[0]['numa_node'] == -1 and ports[0]['netdev'] is None
    assert ports[0]['pcie'] == {'speed': None, 'width': None, 'max_speed': None, 'max_width': None}
    assert [c['status'] for c in result['checks'] if c['name'] == 'pcie_link'] == ['skip']
    assert not_passing(result) == [('state', 'mlx4_0/2', 'fail'), ('phys_state', 'mlx4_0/2', 'fail')]


def test_device_filter_counts_only_matching_ports(trees):
    result = evaluate(trees, 'ndr8_healthy', dict(NDR, devices='^mlx5_[0-3]$', hca_count=4))
    assert [p['device'] for p in result['ports']] == ['mlx5_0', 'mlx5_1', 'mlx5_2', 'mlx5_3']
    assert result['healthy']


def test_no_infiniband_directory_is_one_clear_failure(trees):
    result = evaluate(trees, 'no_infiniband')
    assert result['ports'] == [] and result['healthy'] is False
    assert [(c['name'], c['status']) for c in result['checks']] == [('hca_count', 'fail')]
    assert 'class/infiniband does not exist' in result['checks'][0]['message']


def test_empty_infiniband_directory_fails_the_count(trees):
    assert not_passing(evaluate(trees, 'empty')) == [('hca_count', 'node', 'fail')]


@pytest.mark.parametrize('expected, fragment', [
    ({'hca': 8}, "unknown key 'expected.hca'"),
    ({'hca_count': '8'}, 'expected.hca_count must be int'),
    ({'require_sm': 'yes'}, 'expected.require_sm must be bool'),
    ({'rate_gbps': True}, 'expected.rate_gbps must be int or float'),
    ({'devices': '(mlx5'}, 'expected.devices is not a valid regular expression'),
    ({'link_layer': 'IB'}, 'expected.link_layer must be InfiniBand or Ethernet'),
    ({'state': 'UP'}, 'expected.state must be one of NOP, DOWN, INIT, ARMED, ACTIVE'),
    ({'max_counters': {'symbol_error': -1}}, 'expected.max_counters.symbol_error must be a whole number >= 0'),
])
def test_bad_expectations_are_named(expected, fragment):
    with pytest.raises(rdma.RdmaLinksError) as err:
        rdma.resolve_expectation(expected)
    assert fragment in str(err.value)


@pytest.mark.parametrize('value, parsed', [
    ('400 Gb/sec (4X NDR)', (400.0, '4X', 'NDR')),
    ('2.5 Gb/sec (1X SDR)', (2.5, '1X', 'SDR')),
    ('56 Gb/sec (4X FDR)', (56.0, '4X', 'FDR')),
    ('10 Gb/sec (4X)', (10.0, '4X', None)),
    ('garbage', (None, None, None)),
])
def test_rate_strings(value, parsed):
    rate = rdma.parse_rate(value)
    assert (rate['rate_gbps'], rate['width'], rate['speed_name']) == parsed


@pytest.mark.parametrize('value', ['9' * 5000 + ' Gb/sec (4X NDR)', '\u0664\u0660\u0660 Gb/sec (4X NDR)',
                                   '4\u00b2 Gb/sec (4X NDR)', '400 Gb/sec (\u0664X NDR)'],
                         ids=['5000-digits', 'arabic-indic', 'superscript', 'arabic-indic-width'])
def test_rate_strings_of_hostile_numbers_are_no_rate(value):
    assert rdma.parse_rate(value)['rate_gbps'] is None


@pytest.mark.parametrize('expected', [{'rate_gbps': float('nan')}, {'rate_gbps': float('inf')}, {'rate_gbps': -1}])
def test_rate_expectation_must_be_a_finite_positive_number(expected):
    with pytest.raises(rdma.RdmaLinksError, match='expected.rate_gbps must be a finite number >= 0'):
        rdma.resolve_expectation(expected)


@pytest.fixture
def healthy_copy(trees, tmp_path):
    import shutil
    root = tmp_path / 'sysfs'
    shutil.copytree(trees['ndr8_healthy'], root, symlinks=True)
    return root


def _port_file(root: pathlib.Path, *parts: str) -> pathlib.Path:
    return next(root.glob('class/infiniband/mlx5_0')).resolve().joinpath('ports', '1', *parts)


@pytest.mark.parametrize('text', ['9' * 5000, '\u0663', '1\u00b2', 'nan', '-1'],
                         ids=['5000-digits', 'arabic-indic', 'superscript', 'nan', 'negative'])
def test_an_unreadable_error_counter_fails(healthy_copy, text):
    _port_file(healthy_copy, 'counters', 'symbol_error').write_text(text + '\n')
    result = rdma.evaluate(str(healthy_copy), NDR)
    assert ('counters', 'mlx5_0/1', 'fail') in not_passing(result)
    check = next(c for c in result['checks'] if c['name'] == 'counters' and c['subject'] == 'mlx5_0/1')
    assert 'symbol_error is not a count' in check['message']


@pytest.mark.parametrize('text', ['9' * 5000 + ' Gb/sec (4X NDR)', '\u0664\u0660\u0660 Gb/sec (4X NDR)'],
                         ids=['5000-digits', 'arabic-indic'])
def test_a_hostile_rate_fails_the_rate_check(healthy_copy, text):
    _port_file(healthy_copy, 'rate').write_text(text + '\n')
    assert ('rate', 'mlx5_0/1', 'fail') in not_passing(rdma.evaluate(str(healthy_copy), NDR))


# --- the module through Ansible ---

def test_module_healthy_tree(trees):
    result = run_module('rdma_links', {'sysfs_root': trees['ndr8_healthy'], 'expected': NDR})
    assert not result.get('failed'), result.get('msg')
    assert result['healthy'] is True and result['changed'] is False and len(result['ports']) == 8


def test_module_check_mode_reads_the_same(trees):
    result = run_module('rdma_links', {'sysfs_root': trees['ndr8_healthy'], 'expected': NDR}, check=True)
    assert result['healthy'] is True and result['changed'] is False


def test_module_fails_listing_each_failing_check(trees):
    result = run_module('rdma_links', {'sysfs_root': trees['ndr8_slow_link'], 'expected': NDR})
    assert result['failed'] is True
    assert result['msg'] == ('1 RDMA check(s) failed: rate (mlx5_5/1): 200.0 Gb/s (4X HDR), expected at least 400')
    assert len(result['ports']) == 8


def test_module_reports_without_failing(trees):
    result = run_module('rdma_links', {'sysfs_root': trees['no_infiniband'], 'expected': NDR, 'fail_on_mismatch': False})
    assert not result.get('failed') and result['healthy'] is False


@pytest.mark.parametrize('args, fragment', [
    ({'expected': {'speed': 400}}, "unknown key 'expected.speed'"),
    ({'sysfs_root': '/nonexistent/sys'}, 'sysfs_root /nonexistent/sys does not exist'),
])
def test_module_bad_input(trees, args, fragment):
    result = run_module('rdma_links', dict({'sysfs_root': trees['ndr8_healthy']}, **args))
    assert result['failed'] is True and fragment in result['msg'] and 'Traceback' not in str(result)
