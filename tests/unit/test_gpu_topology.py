# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers and checks of gpu_topology over the real H200 capture and synthetic 8-GPU HGX fixtures."""

from __future__ import annotations

import pathlib
import typing as t
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'gpu'
REAL = FIXTURES / 'h200-1gpu-vm'
HGX = FIXTURES / 'hgx-h200-8'


def read(path: pathlib.Path) -> str:
    return path.read_text(encoding='utf-8')


def degraded_xml(edits: t.Mapping[tuple[int, str], str], drop_gpu: t.Optional[int] = None) -> str:
    """The HGX fixture with element texts changed per (gpu index, path), or one GPU removed."""
    root = ET.fromstring(read(HGX / 'smi_q.xml'))
    gpus = root.findall('gpu')
    for (index, path), value in edits.items():
        node = gpus[index].find(path)
        assert node is not None, path
        node.text = value
    if drop_gpu is not None:
        root.remove(gpus[drop_gpu])
        root.find('attached_gpus').text = str(len(gpus) - 1)
    return ET.tostring(root, encoding='unicode')


def drop_last_gpu(topo_text: str) -> str:
    """topo -m after a GPU fell off the bus: nvidia-smi renumbers, so GPU7's row and column disappear."""
    lines = []
    for line in topo_text.split('\n'):
        if line.startswith('GPU7\t'):
            continue
        if line.startswith(('GPU', 'NIC')) and '\t' in line:
            cells = line.split('\t')
            line = '\t'.join(cells[:8] + cells[9:])
        lines.append(line.replace('\tGPU7\t', '\t', 1))
    return '\n'.join(lines)


def run_checks(xml_text: str, topo_text: str, profile: str, expected: t.Optional[dict] = None) -> dict:
    return gpu.evaluate(gpu.parse_smi_xml(xml_text), gpu.parse_topo_matrix(topo_text),
                        gpu.resolve_expectation(profile, expected))


def not_passing(result: dict) -> list[tuple[str, str, str]]:
    return [(c['name'], c['subject'], c['status']) for c in result['checks'] if c['status'] in ('fail', 'warn')]


# --- parsing the real capture ---

def test_real_capture_gpu_facts():
    facts = gpu.parse_smi_xml(read(REAL / 'smi_q.xml'))
    assert facts['driver_version'] == '580.159.04' and facts['cuda_version'] == '13.0'
    assert facts['gpus'] == [{
        'index': 0, 'name': 'NVIDIA H200', 'uuid': 'GPU-2ac7255b-1207-037b-618f-32ebea4b8c67',
        'serial': '1654524132079', 'pci_bus_id': '00000000:00:06.0', 'memory_total_mib': 143771,
        'memory_used_mib': 0, 'processes': [], 'persistence_mode': True, 'ecc_enabled': True, 'ecc_uncorrected_volatile': 0, 'ecc_corrected_volatile': 0,
        'remapped_rows_pending': False, 'remapped_rows_failure': False, 'mig_enabled': False,
        'pcie_gen_current': 5, 'pcie_gen_max': 5, 'pcie_width_current': 16, 'pcie_width_max': 16,
        'temperature_c': 39, 'power_limit_w': 700.0, 'recovery_action': 'None', 'clocks_event_reasons': ['gpu_idle'],
    }]


def test_real_topology_strips_ansi_and_reads_affinity():
    topo = gpu.parse_topo_matrix(read(REAL / 'topo_m.txt'))
    assert topo['topology'] == {'GPU0': {}}
    assert topo['nics'] == {}
    assert topo['affinity'] == {'GPU0': {'CPU Affinity': '0-15', 'NUMA Affinity': '0', 'GPU NUMA ID': None}}


def test_real_capture_is_healthy_against_h200_1():
    result = run_checks(read(REAL / 'smi_q.xml'), read(REAL / 'topo_m.txt'), 'h200-1')
    assert result['healthy'] and not_passing(result) == []
    skipped = {c['name'] for c in result['checks'] if c['status'] == 'skip'}
    assert skipped == {'nvlink', 'driver_version', 'gpu_nic_affinity'}


# --- parsing the synthetic HGX node ---

def test_hgx_topology_matrix_nics_and_legend():
    topo = gpu.parse_topo_matrix(read(HGX / 'topo_m.txt'))
    assert sorted(topo['topology'], key=lambda d: (d[:3], int(d[3:]))) == \
        [f'GPU{i}' for i in range(8)] + [f'NIC{i}' for i in range(10)]
    assert topo['topology']['GPU0']['GPU7'] == 'NV18'
    assert topo['topology']['GPU0']['NIC0'] == 'PIX' and topo['topology']['GPU0']['NIC4'] == 'SYS'
    assert topo['topology']['NIC3']['GPU3'] == 'PIX' and 'NIC3' not in topo['topology']['NIC3']
    assert topo['nics'] == {f'NIC{i}': f'mlx5_{i}' for i in range(10)}
    assert topo['affinity']['GPU5'] == {'CPU Affinity': '56-111,168-223', 'NUMA Affinity': '1', 'GPU NUMA ID': None}
    assert 'NIC0' not in topo['affinity']


def test_hgx_fixture_is_healthy_with_nic_affinity():
    pairs = [{'gpu': f'GPU{i}', 'nic': f'mlx5_{i}'} for i in range(8)]
    result = run_checks(read(HGX / 'smi_q.xml'), read(HGX / 'topo_m.txt'), 'h200-sxm-8', {'gpu_nic_affinity': pairs})
    assert result['healthy'] and not_passing(result) == []
    assert len([c for c in result['checks'] if c['name'] == 'nvlink']) == 28
    assert len(result['gpus']) == 8 and len({g['uuid'] for g in result['gpus']}) == 8


# --- one degraded variant per check ---

DEGRADED = [
    pytest.param({(3, 'pci/pci_gpu_link_info/link_widths/current_link_width'): '8x'}, None,
                 [('pcie_width', 'GPU3', 'fail')], id='x8-link'),
    pytest.param({(1, 'ecc_errors/volatile/dram_uncorrectable'): '2'}, None,
                 [('ecc_errors', 'GPU1', 'fail')], id='uncorrectable-ecc'),
    pytest.param({(6, 'ecc_errors/volatile/sram_uncorrectable_parity'): '1'}, None,
                 [('ecc_errors', 'GPU6', 'fail')], id='uncorrectable-sram'),
    pytest.param({(5, 'remapped_rows/remapped_row_failure'): 'Yes'}, None,
                 [('row_remap', 'GPU5', 'fail')], id='remap-failure'),
    pytest.param({(5, 'remapped_rows/remapped_row_pending'): 'Yes'}, None,
                 [('row_remap', 'GPU5', 'warn')], id='remap-pending'),
    pytest.param({(0, 'persistence_mode'): 'Disabled'}, None,
                 [('persistence_mode', 'GPU0', 'fail')], id='persistence-off'),
    pytest.param({(2, 'ecc_mode/current_ecc'): 'Disabled'}, None, [('ecc_mode', 'GPU2', 'fail')], id='ecc-off'),
    pytest.param({(7, 'mig_mode/current_mig'): 'Enabled'}, None, [('mig_mode', 'GPU7', 'fail')], id='mig-on'),
    pytest.param({(4, 'gpu_recovery_action'): 'Drain and Reset'}, None,
                 [('recovery_action', 'GPU4', 'fail')], id='recovery-action'),
    pytest.param({(2, 'product_name'): 'NVIDIA H100 80GB HBM3'}, None, [('model', 'GPU2', 'fail')], id='wrong-model'),
    pytest.param({(2, 'fb_memory_usage/total'): '97871 MiB'}, None, [('memory', 'GPU2', 'fail')], id='small-memory'),
    pytest.param({(1, 'clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown'): 'Active'}, None,
                 [('clocks_event', 'GPU1', 'warn')], id='thermal-slowdown'),
    pytest.param({}, 4, [('gpu_count', 'node', 'fail')], id='missing-gpu'),
]


@pytest.mark.parametrize('edits, drop_gpu, expected', DEGRADED)
def test_each_degradation_is_caught_by_its_check_alone(edits, drop_gpu, expected):
    topo_text = read(HGX / 'topo_m.txt')
    if drop_gpu is not None:
        topo_text = drop_last_gpu(topo_text)
    result = run_checks(degraded_xml(edits, drop_gpu), topo_text, 'h200-sxm-8')
    assert not_passing(result) == expected
    assert result['healthy'] is (expected[0][2] != 'fail')


def test_idle_gpu_at_lower_pcie_gen_warns_but_a_link_that_cannot_reach_it_fails():
    idle = degraded_xml({(0, 'pci/pci_gpu_link_info/pcie_gen/current_link_gen'): '1'})
    assert not_passing(run_checks(idle, read(HGX / 'topo_m.txt'), 'h200-sxm-8')) == [('pcie_gen', 'GPU0', 'warn')]
    capped = degraded_xml({(0, 'pci/pci_gpu_link_info/pcie_gen/current_link_gen'): '4',
                           (0, 'pci/pci_gpu_link_info/pcie_gen/max_link_gen'): '4'})
    assert not_passing(run_checks(capped, read(HGX / 'topo_m.txt'), 'h200-sxm-8')) == [('pcie_gen', 'GPU0', 'fail')]


def test_one_nvlink_pair_at_nv12_fails_only_that_pair():
    result = run_checks(read(HGX / 'smi_q.xml'), read(HGX / 'topo_m_nv12.txt'), 'h200-sxm-8')
    assert not_passing(result) == [('nvlink', 'GPU2-GPU5', 'fail')]
    # An A100 board only needs NV12.
    relaxed = run_checks(read(HGX / 'smi_q.xml'), read(HGX / 'topo_m_nv12.txt'), 'h200-sxm-8', {'nvlinks_per_pair': 12})
    assert not_passing(relaxed) == []


def test_far_nic_fails_affinity_by_hca_name_and_by_label():
    pairs = [{'gpu': 'GPU3', 'nic': 'mlx5_3', 'max_hops': 'PXB'}, {'gpu': 'GPU3', 'nic': 'NIC3', 'max_hops': 'SYS'}]
    result = run_checks(read(HGX / 'smi_q.xml'), read(HGX / 'topo_m_nic_far.txt'), 'h200-sxm-8',
                        {'gpu_nic_affinity': pairs})
    checks = [(c['subject'], c['status'], c['actual']) for c in result['checks'] if c['name'] == 'gpu_nic_affinity']
    assert checks == [('GPU3-mlx5_3', 'fail', 'SYS'), ('GPU3-NIC3', 'pass', 'SYS')]


def test_unknown_nic_fails_with_a_message():
    result = run_checks(read(HGX / 'smi_q.xml'), read(HGX / 'topo_m.txt'), 'h200-sxm-8',
                        {'gpu_nic_affinity': [{'gpu': 'GPU0', 'nic': 'mlx5_42'}]})
    check = [c for c in result['checks'] if c['name'] == 'gpu_nic_affinity'][0]
    assert check['status'] == 'fail' and 'not in nvidia-smi topo -m' in check['message']


@pytest.mark.parametrize('minimum, status', [('580.159.04', 'pass'), ('580.95.5', 'pass'), ('580.159.5', 'fail'),
                                             ('590', 'fail'), ('535.104.05', 'pass')])
def test_driver_version_is_compared_numerically(minimum, status):
    result = run_checks(read(HGX / 'smi_q.xml'), read(HGX / 'topo_m.txt'), 'h200-sxm-8', {'driver_version': minimum})
    assert [c['status'] for c in result['checks'] if c['name'] == 'driver_version'] == [status]


def test_failure_summary_names_each_failing_check():
    result = run_checks(degraded_xml({(0, 'persistence_mode'): 'Disabled',
                                      (3, 'pci/pci_gpu_link_info/link_widths/current_link_width'): '8x'}),
                        read(HGX / 'topo_m.txt'), 'h200-sxm-8')
    summary = gpu.failure_summary(result['checks'])
    assert summary.startswith('2 GPU check(s) failed: ')
    assert 'pcie_width (GPU3): PCIe x8 (max 16), expected at least 16' in summary
    assert 'persistence_mode (GPU0): persistence mode disabled, expected enabled' in summary


def test_unset_expectations_skip_and_every_check_name_appears():
    facts = gpu.parse_smi_xml(read(HGX / 'smi_q.xml'))
    result = gpu.evaluate(facts, gpu.parse_topo_matrix(read(HGX / 'topo_m.txt')), gpu.resolve_expectation(None, None))
    names = [c['name'] for c in result['checks']]
    assert list(dict.fromkeys(names)) == ['gpu_count', 'model', 'memory', 'nvlink', 'pcie_gen', 'pcie_width',
                                          'persistence_mode', 'ecc_mode', 'ecc_errors', 'row_remap', 'mig_mode',
                                          'driver_version', 'recovery_action', 'clocks_event', 'gpu_nic_affinity']
    skipped = {c['name'] for c in result['checks'] if c['status'] == 'skip'}
    assert skipped >= {'gpu_count', 'model', 'memory', 'nvlink', 'pcie_gen', 'persistence_mode', 'driver_version'}


@pytest.mark.parametrize('reported', ['5\u00b280.159.04', '\u0665\u0668\u0660.159.04', '9' * 5000],
                         ids=['superscript', 'arabic-indic', '5000-digits'])
def test_a_driver_version_that_is_not_one_fails(reported):
    xml = read(HGX / 'smi_q.xml').replace('<driver_version>580.159.04</driver_version>',
                                          f'<driver_version>{reported}</driver_version>')
    result = run_checks(xml, read(HGX / 'topo_m.txt'), 'h200-sxm-8', {'driver_version': '535'})
    check, = [c for c in result['checks'] if c['name'] == 'driver_version']
    assert check['status'] == 'fail' and 'is not a driver version' in check['message']


@pytest.mark.parametrize('minimum', ['\u0665\u0668\u0660', '5\u00b2', '9' * 5000],
                         ids=['arabic-indic', 'superscript', '5000-digits'])
def test_a_driver_version_expectation_of_other_digits_is_refused(minimum):
    with pytest.raises(gpu.GpuTopologyError, match='expected.driver_version must look like'):
        gpu.resolve_expectation(None, {'driver_version': minimum})


@pytest.mark.parametrize('path', ['fb_memory_usage/total', 'ecc_errors/volatile/dram_uncorrectable',
                                  'pci/pci_gpu_link_info/link_widths/current_link_width', 'temperature/gpu_temp'])
@pytest.mark.parametrize('text', ['nan MiB', 'NaN', 'inf', '-inf W', '+Infinity'])
def test_a_non_finite_reading_fails_naming_its_field(path, text):
    with pytest.raises(gpu.GpuTopologyError, match=f'{path} is not a finite number'):
        run_checks(degraded_xml({(2, path): text}), read(HGX / 'topo_m.txt'), 'h200-sxm-8')


# --- bad input ---

@pytest.mark.parametrize('profile, expected, fragment', [
    ('h300-sxm-8', None, "unknown profile 'h300-sxm-8'; known profiles: a100-sxm4-80gb-8"),
    (None, {'gpus': 8}, "unknown key 'expected.gpus'"),
    (None, {'gpu_count': True}, 'expected.gpu_count must be a whole number'),
    (None, {'persistence_mode': 'yes'}, 'expected.persistence_mode must be a bool'),
    (None, {'model': '(H100'}, 'expected.model is not a valid regular expression'),
    (None, {'driver_version': 'latest'}, 'expected.driver_version must look like'),
    (None, {'gpu_nic_affinity': [{'gpu': 'GPU0'}]}, "gpu_nic_affinity[0] needs 'gpu' and 'nic'"),
    (None, {'gpu_nic_affinity': [{'gpu': 'GPU0', 'nic': 'NIC0', 'hops': 'PIX'}]}, 'unknown keys: hops'),
])
def test_bad_expectations_are_named(profile, expected, fragment):
    with pytest.raises(gpu.GpuTopologyError) as err:
        gpu.resolve_expectation(profile, expected)
    assert fragment in str(err.value)


@pytest.mark.parametrize('text, fragment', [
    ('', 'printed nothing'),
    ('<nvidia_smi_log><gpu>', 'malformed XML'),
    ('<html></html>', 'expected <nvidia_smi_log>'),
])
def test_bad_xml_is_named(text, fragment):
    with pytest.raises(gpu.GpuTopologyError) as err:
        gpu.parse_smi_xml(text)
    assert fragment in str(err.value)


@pytest.mark.parametrize('text, fragment', [
    ('', 'no header row with GPU0'),
    ('\tGPU0\tGPU1\nGPU0\t X \n', 'row GPU0 has 1 cells'),
    ('\tGPU0\nbogus\t X\n', "unexpected row 'bogus\\t X'"),
])
def test_bad_topology_is_named(text, fragment):
    with pytest.raises(gpu.GpuTopologyError) as err:
        gpu.parse_topo_matrix(text)
    assert fragment in str(err.value)


_HEALTHY = {'persistence_mode': True, 'ecc_enabled': True, 'mig_enabled': False, 'max_ecc_uncorrected': 0}
# What each profile expected before the GPU catalog held them: the catalog must give the validator the same numbers.
_BEFORE_THE_CATALOG = {
    'h100-sxm-8': dict(_HEALTHY, gpu_count=8, model=r'H100', min_memory_mib=80000, nvlinks_per_pair=18, pcie_gen=5,
                       pcie_width=16),
    'h200-sxm-8': dict(_HEALTHY, gpu_count=8, model=r'H200', min_memory_mib=140000, nvlinks_per_pair=18, pcie_gen=5,
                       pcie_width=16),
    'a100-sxm4-80gb-8': dict(_HEALTHY, gpu_count=8, model=r'A100.*80GB', min_memory_mib=80000, nvlinks_per_pair=12,
                             pcie_gen=4, pcie_width=16),
    'b200-sxm-8': dict(_HEALTHY, gpu_count=8, model=r'B200', min_memory_mib=178000, nvlinks_per_pair=18, pcie_gen=5,
                       pcie_width=16),
    'h200-1': dict(_HEALTHY, gpu_count=1, model=r'H200', min_memory_mib=140000, nvlinks_per_pair=0, pcie_gen=5,
                   pcie_width=16),
}


def test_profiles_are_all_complete():
    for name in _gpu_catalog.CATALOG:
        profile = gpu.resolve_expectation(name, None)
        assert set(profile) == {'gpu_count', 'model', 'min_memory_mib', 'nvlinks_per_pair', 'pcie_gen', 'pcie_width',
                                'persistence_mode', 'ecc_enabled', 'mig_enabled', 'max_ecc_uncorrected'}, name
        assert set(profile) <= set(gpu.EXPECTED_TYPES), name


@pytest.mark.parametrize('name', sorted(_BEFORE_THE_CATALOG))
def test_the_catalog_gives_the_validator_the_same_expectations_as_before(name):
    assert gpu.resolve_expectation(name, None) == _BEFORE_THE_CATALOG[name]
