# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node's health-check expectation: which validators run, with which settings, and how an unknown name is
refused before anything is written (roles/slurm_node/vars/main.yml and files/nodecheck_selftest.py)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

from role_render import render

ROOT = pathlib.Path(__file__).resolve().parents[2]
SELFTEST = ROOT / 'roles' / 'slurm_node' / 'files' / 'nodecheck_selftest.py'
HOST = {'gpu_profile': 'h200-sxm-8', 'gpu_expected': {'driver_version': '550'}, 'rdma_expected': {'rate_gbps': 400}}


def validators(**settings) -> dict:
    rendered = render('slurm_node', '', {'hosts': {'gpu1': {**HOST, **settings}}, 'groups': {'gpu_nodes': ['gpu1']}},
                      tasks='none.yml', text='{{ _slurm_node_health_check_config.validators | to_json }}')
    assert 'error' not in rendered, rendered
    return json.loads(rendered['hosts']['gpu1'])


def test_the_default_validators_take_the_inventory_words_validate_uses():
    assert validators() == {
        'gpu_topology': {'profile': 'h200-sxm-8', 'expected': {'driver_version': '550'}, 'nvidia_smi': 'nvidia-smi'},
        'rdma_links': {'sysfs_root': '/sys', 'expected': {'rate_gbps': 400}},
    }


def test_settings_by_name_lie_over_the_inventory_and_only_enabled_validators_run():
    found = validators(
        slurm_node_health_check_validators=['gpu_topology', 'dcgm', 'kernel_log'],
        slurm_node_health_check_validator_settings={
            'gpu_topology': {'expected': {'nvlink': 18}}, 'dcgm': {'timeout': 30}, 'rdma_links': {'sysfs_root': '/x'},
            'kernel_log': {'since_minutes': 5}})
    assert found == {
        'gpu_topology': {'profile': 'h200-sxm-8', 'expected': {'driver_version': '550', 'nvlink': 18},
                         'nvidia_smi': 'nvidia-smi'},
        'dcgm': {'dcgmi': 'dcgmi', 'timeout': 30},
        'kernel_log': {'since_minutes': 5},
    }


def test_a_validator_with_no_settings_anywhere_runs_with_its_defaults():
    assert validators(slurm_node_health_check_validators=['other']) == {'other': {}}


def selftest(config: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-I', '-c', SELFTEST.read_text(encoding='utf-8'), str(ROOT / 'collections')],
                          input=json.dumps(config), capture_output=True, text=True, timeout=60, check=False)


def test_the_selftest_refuses_an_unknown_validator_naming_the_variables():
    done = selftest({'node_name': 'gpu1', 'validators': {'kernel_log': {}}})
    assert done.returncode == 1 and 'Traceback' not in done.stderr, done.stderr
    assert done.stderr.strip() == (
        'health check expectation (gpu_profile, gpu_expected, rdma_expected, slurm_node_health_check_*): '
        'validators must be an object with keys among gpu_topology, rdma_links, dcgm, kernel_faults')


def test_the_selftest_accepts_the_default_expectation():
    done = selftest({'node_name': 'gpu1', 'validators': validators()})
    assert done.returncode == 0, done.stderr
