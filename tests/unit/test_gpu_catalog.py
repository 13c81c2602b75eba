# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU catalog: every profile complete and coherent, and a node's gpu_type/gpu_count derived from gpu_profile."""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.hardware import FilterModule
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog as catalog
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / 'tests' / 'fixtures' / 'gpu'
FILTERS = FilterModule().filters()
# Profiles built from public specifications, never run on the hardware.
UNTESTED = {'b300-sxm-8', 'gb200-nvl72-4'}


@pytest.mark.parametrize('name', sorted(catalog.CATALOG))
def test_every_profile_is_complete_and_coherent(name):
    record = catalog.CATALOG[name]
    assert record.profile == name
    for field in dataclasses.fields(record):
        if field.name not in ('pcie_gen', 'pcie_width'):
            assert getattr(record, field.name) is not None, (name, field.name)
    assert record.gpu_count > 0 and record.memory_gib > 0
    assert 0 < record.min_memory_mib <= record.memory_gib * 1024 * 1.08, 'the floor is at most what was bought'
    assert catalog.GRES_TYPE.fullmatch(record.gres_type), 'a Slurm GRES type name'
    re.compile(record.product_name)
    assert record.nvlink_domain_gpus >= record.gpu_count
    # An NVSwitch board needs Fabric Manager; a lone card has no NVLink peers.
    assert record.fabric_manager == (record.nvswitch_count > 0)
    assert (record.nvlinks_per_pair == 0) == (record.nvlink_domain_gpus == 1)
    assert (record.pcie_gen is None) == (record.pcie_width is None)
    assert record.tested == (name not in UNTESTED)
    assert ('untested' in record.description) == (not record.tested)
    assert record.sources


def test_a_gres_type_and_count_name_at_most_one_profile():
    pairs = [(record.gres_type, record.gpu_count) for record in catalog.CATALOG.values()]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize('name, gpus, fabric_manager, open_module', [
    ('h200-sxm-8', 8, True, True),
    ('a100-sxm4-80gb-8', 8, True, False),
    ('b300-sxm-8', 8, True, True),
    ('gb200-nvl72-4', 4, False, True),
    ('h200-1', 1, False, True),
])
def test_what_the_roles_read_from_a_profile(name, gpus, fabric_manager, open_module):
    record = FILTERS['gpu_model'](name)
    assert (record['gpu_count'], record['fabric_manager'], record['open_kernel_module']) == (
        gpus, fabric_manager, open_module)


def test_gb200_tray_sits_in_a_72_gpu_nvlink_domain():
    record = catalog.CATALOG['gb200-nvl72-4']
    assert (record.nvlink_domain_gpus, record.nvswitch_count, record.gres_type) == (72, 0, 'gb200')
    assert catalog.expectation('gb200-nvl72-4')['pcie_gen'] is None


def test_unknown_profile_names_the_known_ones():
    known = r"gpu_profile 'h300' is not a profile of the GPU catalog; known profiles: a100-sxm4-80gb-8, b200-sxm-8, "
    with pytest.raises(catalog.GpuCatalogError, match=known):
        catalog.model('h300')
    with pytest.raises(AnsibleFilterError, match="gpu_model: profile 'h300' is not a profile"):
        FILTERS['gpu_model']('h300')


def test_the_real_h200_capture_passes_the_catalogs_h200_profile():
    facts = _gpu_topology.parse_smi_xml((FIXTURES / 'h200-1gpu-vm' / 'smi_q.xml').read_text(encoding='utf-8'))
    topo = _gpu_topology.parse_topo_matrix((FIXTURES / 'h200-1gpu-vm' / 'topo_m.txt').read_text(encoding='utf-8'))
    result = _gpu_topology.evaluate(facts, topo, _gpu_topology.resolve_expectation('h200-1', None))
    assert result['healthy'], [c for c in result['checks'] if c['status'] == 'fail']
    record = catalog.CATALOG['h200-1']
    assert re.search(record.product_name, facts['gpus'][0]['name'])
    assert facts['gpus'][0]['memory_total_mib'] >= record.min_memory_mib


# --- a node's GPUs ------------------------------------------------------------------------------

@pytest.mark.parametrize('values, gpu_type, gpu_count, profile', [
    pytest.param({'gpu_profile': 'h200-sxm-8'}, 'h200', 8, 'h200-sxm-8', id='profile-alone'),
    pytest.param({'gpu_profile': 'h200-sxm-8', 'gpu_type': 'h200', 'gpu_count': '8'}, 'h200', 8, 'h200-sxm-8',
                 id='profile-with-agreeing-values'),
    pytest.param({'gpu_profile': 'h100-sxm-8', 'gpu_count': 4, 'gpu_expected': {'gpu_count': 4}}, 'h100', 4,
                 'h100-sxm-8', id='count-from-gpu-expected'),
    pytest.param({'gpu_type': 'h100', 'gpu_count': 8}, 'h100', 8, 'h100-sxm-8', id='inferred-profile'),
    pytest.param({'gpu_type': 'h100-nvl', 'gpu_count': 2}, 'h100-nvl', 2, None, id='no-matching-profile'),
    pytest.param({'gpu_count': 0}, None, 0, None, id='cpu-node'),
    pytest.param({}, None, None, None, id='nothing'),
    pytest.param({'gpu_profile': '', 'gpu_type': None, 'gpu_count': None}, None, None, None, id='empty-and-null'),
])
def test_a_nodes_gpus_follow_its_profile(values, gpu_type, gpu_count, profile):
    facts = FILTERS['gpu_node'](values, 'gpu1')
    assert (facts['gpu_type'], facts['gpu_count'], facts['profile']) == (gpu_type, gpu_count, profile)
    assert facts['fabric_manager'] is (profile in ('h200-sxm-8', 'h100-sxm-8'))


@pytest.mark.parametrize('values, message', [
    pytest.param({'gpu_profile': 'h200-sxm-8', 'gpu_type': 'h100'},
                 "host 'gpu1': gpu_type is 'h100', but gpu_profile h200-sxm-8 has GRES type 'h200'; leave gpu_type "
                 "unset", id='type'),
    pytest.param({'gpu_profile': 'h200-sxm-8', 'gpu_count': 4},
                 "host 'gpu1': gpu_count is 4, but gpu_profile h200-sxm-8 expects 8 GPUs; leave gpu_count unset",
                 id='count'),
    pytest.param({'gpu_profile': 'h200-sxm-8', 'gpu_count': 8, 'gpu_expected': {'gpu_count': 4}},
                 "host 'gpu1': gpu_count is 8, but gpu_profile h200-sxm-8 with gpu_expected expects 4 GPUs",
                 id='count-with-override'),
    pytest.param({'gpu_count': 2, 'gpu_expected': {'gpu_count': 1}},
                 "host 'gpu1': gpu_count is 2, but gpu_expected expects 1 GPUs", id='count-no-profile'),
    pytest.param({'gpu_profile': 'x200'}, "host 'gpu1': gpu_profile 'x200' is not a profile of the GPU catalog",
                 id='unknown-profile'),
    pytest.param({'gpu_count': 'eight'}, "host 'gpu1': gpu_count must be a whole number", id='bad-count'),
])
def test_a_disagreeing_node_is_refused_naming_the_variable(values, message):
    with pytest.raises(ValueError) as err:
        catalog.node_gpus('gpu1', values)
    assert str(err.value).startswith(message), err.value
    with pytest.raises(AnsibleFilterError, match=re.escape('gpu_node: ' + message)):
        FILTERS['gpu_node'](values, 'gpu1')


def test_gpu_node_refuses_what_is_not_a_mapping():
    with pytest.raises(AnsibleFilterError, match='expected a mapping'):
        FILTERS['gpu_node'](['gpu_profile'], 'gpu1')


# --- everything else derives from the catalog ---------------------------------------------------

def test_the_gpu_topology_module_offers_exactly_the_catalogs_profiles():
    source = (REPO / 'plugins' / 'modules' / 'gpu_topology.py').read_text(encoding='utf-8')
    documentation = yaml.safe_load(source.split('DOCUMENTATION = r"""', 1)[1].split('"""', 1)[0])
    assert documentation['options']['profile']['choices'] == catalog.profiles()


def test_the_docs_table_has_a_row_per_profile():
    section = (REPO / 'docs' / 'validate.md').read_text(encoding='utf-8').split('## GPU profiles', 1)[1].split('\n## ')[0]
    rows = [line for line in section.splitlines() if line.startswith('| `')]
    assert [row.split('`')[1] for row in rows] == catalog.profiles()
    for row in rows:
        record = catalog.CATALOG[row.split('`')[1]]
        cells = [cell.strip() for cell in row.strip('|').split('|')]
        assert (cells[2], cells[3], cells[-1]) == (str(record.gpu_count), f'`{record.gres_type}`',
                                                   'yes' if record.tested else '**no**'), row


def test_inventories_name_only_the_profile():
    for inventory in ('demo', 'example'):
        hardware = yaml.safe_load((REPO / 'inventories' / inventory / 'group_vars' / 'gpu_nodes' / 'hardware.yml')
                                  .read_text(encoding='utf-8'))
        assert hardware['gpu_profile'] in catalog.CATALOG
        assert 'gpu_type' not in hardware and 'gpu_count' not in hardware, inventory


def test_no_profile_or_gpu_model_list_outside_the_catalog():
    """No other Python or role vars file holds its own list of profiles or GPU models (the module's documentation
    must list them literally; the test above keeps it equal to the catalog)."""
    pattern = re.compile(r'b200.{0,40}b300|h100\|h200|a100\|')
    offenders = [str(path.relative_to(REPO)) for path in
                 list((REPO / 'plugins').rglob('*.py')) + list((REPO / 'roles').glob('*/vars/*.yml'))
                 if path.name not in ('_gpu_catalog.py', 'gpu_topology.py') and pattern.search(path.read_text(encoding='utf-8'))]
    assert offenders == []
