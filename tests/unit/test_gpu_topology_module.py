# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge.cluster.gpu_topology run through Ansible against an nvidia-smi shim replaying fixtures."""

from __future__ import annotations

import json
import pathlib

import pytest

from module_runner import run_module as run_ansible_module

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'gpu'
SHIM = FIXTURES / 'nvidia-smi-shim'


def run_module(args: dict, fixture: str = 'h200-1gpu-vm', check: bool = False, **shim_env: str) -> dict:
    """gpu_topology against the nvidia-smi shim replaying one fixture directory."""
    env = dict(NVIDIA_SMI_SHIM_DIR=str(FIXTURES / fixture), **shim_env)
    return run_ansible_module('gpu_topology', dict({'nvidia_smi_path': str(SHIM)}, **args), check=check, env=env)


def statuses(result: dict, name: str) -> list[str]:
    return [c['status'] for c in result['checks'] if c['name'] == name]


def test_real_h200_capture_is_healthy_against_h200_1():
    result = run_module({'profile': 'h200-1'})
    assert not result.get('failed'), result.get('msg')
    assert result['healthy'] is True and result['changed'] is False
    assert result['driver_version'] == '580.159.04' and result['cuda_version'] == '13.0'
    assert result['gpus'][0]['name'] == 'NVIDIA H200'
    assert statuses(result, 'nvlink') == ['skip']


def test_check_mode_runs_the_same_read_only_checks():
    result = run_module({'profile': 'h200-1'}, check=True)
    assert result['healthy'] is True and result['changed'] is False
    assert len(result['checks']) > 10


def test_exactly_the_two_documented_commands_run(tmp_path):
    log = tmp_path / 'calls'
    run_module({'profile': 'h200-1'}, NVIDIA_SMI_SHIM_LOG=str(log))
    assert log.read_text().splitlines() == ['-q -x', 'topo -m']


def test_wrong_gpu_count_fails_naming_the_check_but_still_returns_facts():
    result = run_module({'profile': 'h200-1', 'expected': {'gpu_count': 8}})
    assert result['failed'] is True
    assert 'gpu_count (node): 1 GPUs visible, expected 8' in result['msg']
    assert result['healthy'] is False and result['gpus'][0]['memory_total_mib'] == 143771


def test_fail_on_mismatch_false_reports_without_failing():
    result = run_module({'profile': 'h200-1', 'expected': {'gpu_count': 8}, 'fail_on_mismatch': False})
    assert not result.get('failed') and result['healthy'] is False
    assert statuses(result, 'gpu_count') == ['fail']


def test_hgx_fixture_is_healthy_against_h200_sxm_8():
    result = run_module({'profile': 'h200-sxm-8', 'expected': {
        'gpu_nic_affinity': [{'gpu': f'GPU{i}', 'nic': f'mlx5_{i}', 'max_hops': 'PIX'} for i in range(8)]}},
        fixture='hgx-h200-8')
    assert not result.get('failed'), result.get('msg')
    assert statuses(result, 'nvlink') == ['pass'] * 28
    assert statuses(result, 'gpu_nic_affinity') == ['pass'] * 8


def test_one_degraded_nvlink_pair_fails_the_node():
    result = run_module({'profile': 'h200-sxm-8'}, fixture='hgx-h200-8', NVIDIA_SMI_SHIM_TOPO='topo_m_nv12.txt')
    assert result['failed'] is True
    failing = [c for c in result['checks'] if c['status'] == 'fail']
    assert [(c['name'], c['subject'], c['actual']) for c in failing] == [('nvlink', 'GPU2-GPU5', 'NV12')]


@pytest.mark.parametrize('args, shim_env, fragment', [
    ({'profile': 'h200-1', 'timeout': 2}, {'NVIDIA_SMI_SHIM_HANG': '1'}, '-q -x\' did not finish within 2 s'),
    ({'profile': 'h200-1'}, {'NVIDIA_SMI_SHIM_FAIL': '9'}, "exited with 9: NVIDIA-SMI has failed"),
    ({'profile': 'h200-1', 'nvidia_smi_path': '/nonexistent/nvidia-smi'}, {}, 'not found'),
    ({'profile': 'h300-sxm-8'}, {}, 'value of profile must be one of'),
    ({'expected': {'gpu_cnt': 8}}, {}, "unknown key 'expected.gpu_cnt'"),
    ({'expected': {'gpu_count': 'eight'}}, {}, 'expected.gpu_count must be a whole number'),
    ({'expected': {'gpu_nic_affinity': [{'gpu': 'GPU0', 'nic': 'mlx5_0', 'max_hops': 'FAR'}]}}, {},
     'max_hops must be one of PIX, PXB, PHB, NODE, SYS'),
], ids=['hang', 'driver-down', 'missing-binary', 'unknown-profile', 'bad-key', 'bad-type', 'bad-hops'])
def test_bad_input_fails_with_a_precise_message(args, shim_env, fragment):
    result = run_module(args, **shim_env)
    assert result['failed'] is True
    assert fragment in result['msg']
    assert 'Traceback' not in json.dumps(result)


def test_garbage_xml_is_a_clear_failure(tmp_path):
    (tmp_path / 'smi_q.xml').write_text('<nvidia_smi_log><gpu>')
    (tmp_path / 'topo_m.txt').write_text('')
    result = run_module({'profile': 'h200-1'}, fixture=str(tmp_path))
    assert result['failed'] is True and 'malformed XML' in result['msg']
