# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-host hardware description: every variable checked, gpu_profile against gpu_type and gpu_count."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter.hardware import FilterModule
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _hardware

REPO = Path(__file__).resolve().parents[2]
hardware_problems = FilterModule().filters()['hardware_problems']
hardware_variables = FilterModule().filters()['hardware_variables']

HGX_H200 = {'gpu_type': 'h200', 'gpu_count': 8, 'gpu_profile': 'h200-sxm-8',
            'rdma_expected': {'devices': '^mlx5_[0-7]$', 'hca_count': 8, 'rate_gbps': 400}}


@pytest.mark.parametrize('values', [
    pytest.param({}, id='nothing-set'),
    pytest.param(HGX_H200, id='hgx-h200'),
    pytest.param({'gpu_type': 'h200', 'gpu_count': 1, 'gpu_profile': 'h200-1'}, id='one-h200'),
    pytest.param({'gpu_type': 'a100', 'gpu_count': '8', 'gpu_profile': 'a100-sxm4-80gb-8'}, id='count-as-string'),
    pytest.param({'gpu_profile': 'h200-sxm-8'}, id='profile-alone'),
    pytest.param({'gpu_profile': 'gb200-nvl72-4', 'gpu_count': 4}, id='untested-profile'),
    pytest.param({'gpu_type': 'h100', 'gpu_count': 8}, id='type-and-count-without-profile'),
    pytest.param({'gpu_type': 'h100', 'gpu_count': 4, 'gpu_profile': 'h100-sxm-8', 'gpu_expected': {'gpu_count': 4}},
                 id='count-overridden-by-gpu-expected'),
    pytest.param({'gpu_count': 0}, id='cpu-node'),
    pytest.param({'gpu_type': None, 'gpu_count': None, 'gpu_profile': '', 'gpu_expected': {}, 'rdma_expected': {}},
                 id='null-and-empty'),
    pytest.param({'node_index': 5}, id='node-index'),
    pytest.param({'node_index': '12'}, id='node-index-string'),
    pytest.param({'monitoring_address': '10.0.0.7'}, id='address-ipv4'),
    pytest.param({'monitoring_address': 'gpu001.mgmt.example.com'}, id='address-name'),
    pytest.param({'monitoring_address': '[fd00::7]'}, id='address-ipv6'),
])
def test_good_descriptions_pass(values):
    assert _hardware.problems('gpu001', values) == []


@pytest.mark.parametrize(('values', 'expected'), [
    pytest.param({'gpu_count': -1}, "host 'gpu001': gpu_count must not be negative", id='negative-count'),
    pytest.param({'gpu_count': 'eight'}, "host 'gpu001': gpu_count must be a whole number", id='word-count'),
    pytest.param({'gpu_count': True}, "host 'gpu001': gpu_count must be a whole number", id='bool-count'),
    pytest.param({'gpu_type': 'h200 sxm'}, "host 'gpu001': gpu_type 'h200 sxm' may hold only", id='type-with-space'),
    pytest.param({'gpu_profile': 'h300-sxm-8'}, "host 'gpu001': gpu_profile 'h300-sxm-8' is not a profile of the GPU catalog",
                 id='unknown-profile'),
    pytest.param({'gpu_expected': {'gpus': 8}}, "host 'gpu001': gpu_expected: unknown key 'expected.gpus'",
                 id='unknown-gpu-expectation'),
    pytest.param({'gpu_expected': ['gpu_count']}, "host 'gpu001': gpu_expected must be a mapping", id='gpu-expected-list'),
    pytest.param({'rdma_expected': {'rate_gbps': 'fast'}}, "host 'gpu001': rdma_expected: expected.rate_gbps must be",
                 id='bad-rdma-rate'),
    pytest.param({'rdma_expected': 'mlx5_0'}, "host 'gpu001': rdma_expected must be a mapping", id='rdma-expected-string'),
    pytest.param({'node_index': -3}, "host 'gpu001': node_index must be a whole number of 0 or more", id='negative-index'),
    pytest.param({'node_index': 'first'}, "host 'gpu001': node_index must be a whole number", id='word-index'),
    pytest.param({'monitoring_address': 'http://10.0.0.7'}, "host 'gpu001': monitoring_address must be", id='address-url'),
    pytest.param({'monitoring_address': '10.0.0.7:9100'}, "host 'gpu001': monitoring_address must be",
                 id='address-with-port'),
    pytest.param({'monitoring_address': ''}, "host 'gpu001': monitoring_address must be", id='address-empty'),
    pytest.param({'gpu_type': 'h100', 'gpu_profile': 'h200-sxm-8'},
                 "host 'gpu001': gpu_type is 'h100', but gpu_profile h200-sxm-8 has GRES type 'h200'", id='type-mismatch'),
    pytest.param({'gpu_type': 'H200', 'gpu_profile': 'h200-sxm-8'},
                 "host 'gpu001': gpu_type is 'H200', but gpu_profile h200-sxm-8 has GRES type 'h200'",
                 id='type-in-other-case'),
    pytest.param({'gpu_count': 4, 'gpu_profile': 'h200-sxm-8'},
                 "host 'gpu001': gpu_count is 4, but gpu_profile h200-sxm-8 expects 8 GPUs", id='count-mismatch'),
    pytest.param({'gpu_count': 8, 'gpu_profile': 'h200-sxm-8', 'gpu_expected': {'gpu_count': 4}},
                 "host 'gpu001': gpu_count is 8, but gpu_profile h200-sxm-8 with gpu_expected expects 4 GPUs",
                 id='count-mismatch-with-override'),
    pytest.param({'gpu_count': 2, 'gpu_expected': {'gpu_count': 1}},
                 "host 'gpu001': gpu_count is 2, but gpu_expected expects 1 GPUs", id='count-mismatch-no-profile'),
])
def test_bad_descriptions_are_named(values, expected):
    found = _hardware.problems('gpu001', values)
    assert len(found) == 1, found
    assert found[0].startswith(expected), found


def test_every_problem_is_reported_at_once():
    found = _hardware.problems('gpu007', {'gpu_count': -1, 'gpu_profile': 'nope', 'node_index': -1,
                                          'monitoring_address': 'a b'})
    assert [problem.split(':')[1].split()[0] for problem in found] == ['gpu_count', 'gpu_profile', 'node_index',
                                                                       'monitoring_address']
    assert all(problem.startswith("host 'gpu007': ") for problem in found)


def test_the_filter_names_the_host():
    assert hardware_problems(HGX_H200, 'gpu1') == []
    assert hardware_problems({'gpu_count': 7, 'gpu_profile': 'h200-sxm-8'}, 'gpu2') == [
        "host 'gpu2': gpu_count is 7, but gpu_profile h200-sxm-8 expects 8 GPUs; leave gpu_count unset (it follows "
        "gpu_profile): the validators would drain a node Slurm offers with 7"]


def test_the_filter_refuses_what_is_not_a_mapping():
    with pytest.raises(AnsibleFilterError, match='expected a mapping'):
        hardware_problems(['gpu_count'], 'gpu9')


def test_hardware_variables_picks_the_names_the_check_reads():
    names = ['node_index', 'ansible_facts', 'gpu_profile', 'gpu_profile']
    assert hardware_variables(names) == ['gpu_profile', 'node_index']
    assert hardware_variables([]) == []
    with pytest.raises(AnsibleFilterError, match='expected a list of variable names'):
        hardware_variables('gpu_profile')


def test_common_reads_the_variable_names_from_the_check():
    common_vars = (REPO / 'roles' / 'common' / 'vars' / 'main.yml').read_text(encoding='utf-8')
    assert 'llmforge.cluster.hardware_variables' in common_vars
    assert not any(f'[{name},' in common_vars for name in _hardware.VARIABLES)


def _inventory_values(path: Path) -> dict:
    values: dict = {}
    for vars_file in sorted(path.glob('group_vars/**/*.yml')) + sorted(path.glob('host_vars/**/*.yml')):
        data = yaml.safe_load(vars_file.read_text(encoding='utf-8'))
        if isinstance(data, dict):  # a vaulted file loads as a string
            values.update(data)
    return values


@pytest.mark.parametrize('inventory', sorted(p.name for p in (REPO / 'inventories').iterdir() if p.is_dir()))
def test_the_inventories_describe_their_hardware_correctly(inventory):
    assert _hardware.problems('any', _inventory_values(REPO / 'inventories' / inventory)) == []


@pytest.mark.parametrize('scenario', sorted(p.parent.name for p in (REPO / 'molecule').glob('*/molecule.yml')))
def test_the_molecule_scenarios_describe_their_hardware_correctly(scenario):
    config = yaml.safe_load((REPO / 'molecule' / scenario / 'molecule.yml').read_text(encoding='utf-8'))
    inventory = (config.get('provisioner') or {}).get('inventory') or {}
    for host, values in {**(inventory.get('group_vars') or {}), **(inventory.get('host_vars') or {})}.items():
        assert _hardware.problems(host, values) == []
