# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_tests: the parser and checks over the real H200 captures and synthetic 8-GPU / 2-node runs, and the
module run through Ansible with a saved output and with a command."""

from __future__ import annotations

import pathlib
import re

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_tests as nccl
from module_runner import run_module as run_ansible_module

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'nccl-tests'
ALL = sorted(FIXTURES.glob('*.txt'))


def facts_of(name: str) -> dict:
    return nccl.parse_output((FIXTURES / name).read_text(encoding='utf-8'))


def judged(name: str, **kwargs) -> dict:
    return nccl.evaluate(facts_of(name), **kwargs)


def status(result: dict, name: str) -> str:
    found = [c['status'] for c in result['checks'] if c['name'] == name]
    assert len(found) == 1, result['checks']
    return found[0]


def message(result: dict, name: str) -> str:
    return next(c['message'] for c in result['checks'] if c['name'] == name)


# --- parser -------------------------------------------------------------------------------------

@pytest.mark.parametrize('path', ALL, ids=[p.name for p in ALL])
def test_every_fixture_parses(path):
    facts = nccl.parse_output(path.read_text(encoding='utf-8'))
    assert facts['rows'] and facts['devices']
    assert facts['nccl_tests_version'] == '2.19.6' and facts['nccl_version'] == '2.28.9'
    assert facts['out_of_bounds'] is not None and facts['avg_busbw_gbps'] is not None
    assert all(row['size'] > 0 for row in facts['rows'])


def test_real_capture_rows_exact():
    facts = facts_of('all_reduce_perf_1gpu.txt')
    assert len(facts['rows']) == 14 and facts['collective'] == 'all_reduce_perf'
    assert facts['rows'][-1] == {
        'size': 536870912, 'count': 134217728, 'type': 'float', 'redop': 'sum', 'root': -1,
        'out_of_place': {'time_us': 257.56, 'algbw_gbps': 2084.4, 'busbw_gbps': 0.0, 'wrong': 0},
        'in_place': {'time_us': 1.07, 'algbw_gbps': 503726.0, 'busbw_gbps': 0.0, 'wrong': 0}}
    assert facts['devices'] == [{'rank': 0, 'host': 'vm', 'device': 0, 'bus_id': '0000:00:06', 'name': 'NVIDIA H200'}]
    assert facts['avg_busbw_gbps'] == 0.0 and facts['out_of_bounds'] == 0


def test_in_place_wrong_na_is_null():
    facts = facts_of('sendrecv_perf_1gpu.txt')
    assert [row['in_place']['wrong'] for row in facts['rows']] == [None] * 6
    assert facts['rows'][0]['out_of_place'] == {'time_us': 7.93, 'algbw_gbps': 132.22, 'busbw_gbps': 132.22, 'wrong': 0}
    assert facts['avg_busbw_gbps'] == 57570.4
    alltoall = facts_of('alltoall_perf_1gpu.txt')
    assert alltoall['rows'][0]['redop'] == 'none' and alltoall['rows'][0]['in_place']['wrong'] is None


def test_synthetic_8gpu_rows_and_plateau():
    result = judged('all_reduce_perf_8gpu.txt')
    assert len(result['rows']) == 32 and result['rows'][0]['size'] == 8 and result['rows'][-1]['size'] == 16 << 30
    assert result['rows'][-1]['out_of_place'] == {'time_us': 63449.8, 'algbw_gbps': 270.76, 'busbw_gbps': 473.84,
                                                  'wrong': 0}
    assert result['plateau_busbw_gbps'] == 477.49 and result['plateau_bytes'] == 8 << 30
    assert result['avg_busbw_gbps'] == 177.722
    assert [d['device'] for d in result['devices']] == list(range(8))
    assert status(result, 'busbw') == 'skip' and '477.49' in message(result, 'busbw')
    assert result['healthy'] is True


def test_plateau_falls_back_to_the_largest_size_and_says_so():
    result = judged('all_reduce_perf_1gpu.txt', min_busbw_gbps=0.0)
    assert result['plateau_bytes'] == 536870912 and result['plateau_busbw_gbps'] == 0.0
    assert 'the largest size run, as no size >= 1 GiB was run' in message(result, 'busbw')
    assert status(result, 'busbw') == 'pass'


def test_plateau_min_bytes_moves_the_window():
    result = judged('all_reduce_perf_8gpu.txt', plateau_min_bytes=16 << 30)
    assert result['plateau_bytes'] == 16 << 30 and result['plateau_busbw_gbps'] == 473.84


def test_two_node_devices_span_two_hosts():
    result = judged('all_reduce_perf_2node_16gpu.txt', min_busbw_gbps=360)
    assert len(result['devices']) == 16
    assert {d['host'] for d in result['devices']} == {'gpu-node-01', 'gpu-node-02'}
    assert result['devices'][8] == {'rank': 8, 'host': 'gpu-node-02', 'device': 0, 'bus_id': '0000:18:00',
                                    'name': 'NVIDIA H200'}
    assert 360 <= result['plateau_busbw_gbps'] <= 390 and result['healthy'] is True


def test_alltoall_8gpu():
    result = judged('alltoall_perf_8gpu.txt')
    assert result['collective'] == 'alltoall_perf' and result['rows'][0]['redop'] == 'none'
    assert result['plateau_bytes'] == 4 << 30 and result['plateau_busbw_gbps'] == 347.04


# --- checks -------------------------------------------------------------------------------------

def test_degraded_run_fails_busbw():
    result = judged('all_reduce_perf_8gpu_degraded.txt', min_busbw_gbps=430)
    assert status(result, 'busbw') == 'fail' and result['healthy'] is False
    assert 230 <= result['plateau_busbw_gbps'] <= 250
    assert 'expected at least 430 GB/s' in message(result, 'busbw')
    assert nccl.failure_summary(result['checks']).startswith('1 nccl-tests check(s) failed: busbw (all_reduce_perf)')


def test_wrong_elements_fail_wrong_out_of_bounds_and_exit():
    result = judged('all_reduce_perf_8gpu_wrong.txt', min_busbw_gbps=430)
    assert status(result, 'busbw') == 'pass'
    assert status(result, 'wrong') == 'fail' and '64 MiB out-of-place: 4096' in message(result, 'wrong')
    assert status(result, 'out_of_bounds') == 'fail' and result['out_of_bounds'] == 2
    assert status(result, 'exit') == 'fail' and 'FAILED' in message(result, 'exit')


def test_min_bw_failure_fails_exit_quoting_the_line():
    result = judged('all_reduce_minbw_fail.txt')
    assert status(result, 'exit') == 'fail' and result['exit_code'] == 7
    assert "'# Avg bus bandwidth    : 0 FAILED'" in message(result, 'exit')
    assert status(result, 'wrong') == 'pass' and status(result, 'out_of_bounds') == 'pass'


def test_non_zero_exit_alone_fails_exit():
    result = judged('all_reduce_perf_8gpu.txt', exit_code=1)
    assert status(result, 'exit') == 'fail' and message(result, 'exit') == 'exited with status 1'


def test_validation_off_skips_wrong():
    text = (FIXTURES / 'all_reduce_perf_8gpu.txt').read_text(encoding='utf-8')
    text = re.sub(r'^(\s*(?:\S+\s+){8})0(\s+(?:\S+\s+){3})0$', r'\1N/A\2N/A', text, flags=re.M)
    assert text.count('N/A') == 64
    assert status(nccl.evaluate(nccl.parse_output(text)), 'wrong') == 'skip'


def test_missing_out_of_bounds_line_skips():
    text = (FIXTURES / 'all_reduce_perf_8gpu.txt').read_text(encoding='utf-8').replace('# Out of bounds values : 0 OK\n', '')
    assert status(nccl.evaluate(nccl.parse_output(text)), 'out_of_bounds') == 'skip'


# --- parser errors ------------------------------------------------------------------------------

def test_no_rows_quotes_the_first_error_line():
    text = ('# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n'
            'srun: error: Unable to allocate resources: Requested node configuration is not available\n')
    with pytest.raises(nccl.NcclTestsError, match='first error line: .srun: error: Unable to allocate'):
        nccl.parse_output(text)


def test_garbage_and_empty_are_errors():
    with pytest.raises(nccl.NcclTestsError, match="output starts with 'hello world'"):
        nccl.parse_output('hello world\n')
    with pytest.raises(nccl.NcclTestsError, match='empty output'):
        nccl.parse_output('')


def test_malformed_row_names_the_line():
    text = (FIXTURES / 'all_reduce_perf_1gpu.txt').read_text(encoding='utf-8')
    text = text.replace('    6.88    0.00    0.00       0', '    6.88    0.00', 1)
    with pytest.raises(nccl.NcclTestsError, match=r'line 11: a result row has 13 columns.*got 11'):
        nccl.parse_output(text)
    with pytest.raises(nccl.NcclTestsError, match=r"line 1: 'x' is not a number"):
        nccl.parse_output('8 2 float sum -1 x 0 0 0 1 0 0 0\n')


@pytest.mark.parametrize('value', ['nan', 'inf', '-inf', '-nan'])
@pytest.mark.parametrize('size', [8 << 30, 1 << 30], ids=['best-size', 'other-size'])
def test_non_finite_busbw_in_the_plateau_fails(value, size):
    facts = facts_of('all_reduce_perf_8gpu.txt')
    row = next(row for row in facts['rows'] if row['size'] == size)
    row['out_of_place']['busbw_gbps'] = float(value)
    result = nccl.evaluate(facts, min_busbw_gbps=100.0)
    assert status(result, 'busbw') == 'fail' and 'not a finite number' in message(result, 'busbw')
    assert result['healthy'] is False


def test_non_finite_busbw_fails_without_a_threshold_too():
    facts = facts_of('all_reduce_perf_8gpu.txt')
    facts['rows'][-1]['out_of_place']['busbw_gbps'] = float('inf')
    result = nccl.evaluate(facts)
    assert status(result, 'busbw') == 'fail' and 'not a finite number' in message(result, 'busbw')


def test_non_ascii_digits_are_not_rows_or_devices():
    text = (FIXTURES / 'all_reduce_perf_1gpu.txt').read_text(encoding='utf-8')
    rows = nccl.parse_output(text + '\u0668 2 float sum -1 6.88 0.00 0.00 0 6.88 0.00 0.00 0\n')['rows']
    assert len(rows) == 14
    facts = nccl.parse_output(text.replace('device  0', 'device  \u0663', 1))
    assert facts['devices'] == []
    with pytest.raises(nccl.NcclTestsError, match=r"line 1: '\u0664\u0667\u0667' is not a number"):
        nccl.parse_output('8 2 float sum -1 6.88 0.00 \u0664\u0667\u0667 0 6.88 0.00 0.00 0\n')
    with pytest.raises(nccl.NcclTestsError, match='average bus bandwidth is not a number'):
        nccl.parse_output(text.replace('# Avg bus bandwidth    : 0', '# Avg bus bandwidth    : \u0660', 1))


def test_nccl_version_string():
    assert nccl.nccl_version_string('22809') == '2.28.9' and nccl.nccl_version_string('21903') == '2.19.3'


# --- the module through Ansible -----------------------------------------------------------------

def run_module(args: dict, check: bool = False) -> dict:
    return run_ansible_module('nccl_tests', args, check=check)


def test_module_output_file_healthy():
    result = run_module({'output_file': str(FIXTURES / 'all_reduce_perf_8gpu.txt'), 'min_busbw_gbps': 430})
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False and result['healthy'] is True
    assert result['plateau_busbw_gbps'] == 477.49 and len(result['rows']) == 32
    assert result['rows'][0]['in_place']['wrong'] == 0 and result['exit_code'] is None


def test_module_output_file_degraded_fails_then_reports():
    args = {'output_file': str(FIXTURES / 'all_reduce_perf_8gpu_degraded.txt'), 'min_busbw_gbps': 430}
    result = run_module(args)
    assert result['failed'] is True and 'busbw (all_reduce_perf): plateau busbw 242.81 GB/s' in result['msg']
    assert result['healthy'] is False and result['rows']
    result = run_module(dict(args, fail_on_mismatch=False))
    assert not result.get('failed') and result['healthy'] is False


def test_module_command_cat_in_check_mode():
    result = run_module({'command': ['cat', str(FIXTURES / 'all_reduce_perf_2node_16gpu.txt')], 'min_busbw_gbps': 360},
                        check=True)
    assert not result.get('failed'), result.get('msg')
    assert result['exit_code'] == 0 and len(result['devices']) == 16 and result['changed'] is False


def test_module_command_exit_7(tmp_path):
    script = tmp_path / 'fake_all_reduce_perf'
    fixture = FIXTURES / 'all_reduce_minbw_fail.txt'
    script.write_text(f"#!/bin/sh\ncat '{fixture}'\nexit 7\n", encoding='utf-8')
    script.chmod(0o755)
    result = run_module({'command': [str(script)], 'fail_on_mismatch': False})
    assert not result.get('failed') and result['healthy'] is False and result['exit_code'] == 7
    exit_check = next(c for c in result['checks'] if c['name'] == 'exit')
    assert exit_check['status'] == 'fail' and 'exited with status 7' in exit_check['message']
    result = run_module({'command': [str(script)]})
    assert result['failed'] is True and 'exit (all_reduce_perf): exited with status 7' in result['msg']


def test_module_command_timeout_names_command_and_limit():
    result = run_module({'command': ['sleep', '30'], 'timeout': 1})
    assert result['failed'] is True
    assert result['msg'] == "'sleep 30' did not finish within 1 s (timeout); a hung rank or fabric?"
    assert 'Traceback (most recent call last)' not in str(result)


@pytest.mark.parametrize('args, expected', [
    ({'command': ['true'], 'output_file': '/tmp/x'}, 'mutually exclusive'),
    ({'timeout': 5}, 'one of the following is required'),
    ({'output_file': '/nonexistent/nccl.txt'}, 'cannot read output_file /nonexistent/nccl.txt: No such file'),
    ({'command': ['/nonexistent/all_reduce_perf']}, '/nonexistent/all_reduce_perf not found'),
    ({'command': []}, 'command is empty'),
    ({'output_file': '', 'timeout': 0}, 'timeout must be a positive number'),
])
def test_module_bad_input_fails_without_traceback(args, expected):
    result = run_module(args)
    assert result['failed'] is True and expected in result['msg']
    assert 'Traceback (most recent call last)' not in str(result) and 'module_stderr' not in result


def test_module_garbage_file_fails_quoting_it(tmp_path):
    garbage = tmp_path / 'garbage.txt'
    garbage.write_text('Segmentation fault (core dumped)\n', encoding='utf-8')
    result = run_module({'output_file': str(garbage)})
    assert result['failed'] is True
    assert "first error line: 'Segmentation fault (core dumped)'" in result['msg']
    assert 'Traceback (most recent call last)' not in str(result)
