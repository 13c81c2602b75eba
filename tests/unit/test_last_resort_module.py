# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every module's last resort: an exception its own error handling did not foresee becomes fail_json with a
message naming the exception, its text and the input, the traceback in `exception`, never a MODULE FAILURE.

The modules run in this process (their parsers replaced by ones that raise); one case runs through the real
`ansible` CLI on input that crashed a parser.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_tests as nccl
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.module_utils import _scratch_devices as sd
from ansible_collections.llmforge.cluster.plugins.modules import gpu_topology, nccl_tests, rdma_links, scratch_devices
from module_runner import run_module

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures'
SHIM = FIXTURES / 'gpu' / 'nvidia-smi-shim'


def run_in_process(module, args: dict, capsys) -> dict:
    """The module's main() with these arguments; its JSON result."""
    with patch_module_args(args), pytest.raises(SystemExit):
        module.main()
    return json.loads(capsys.readouterr().out)


def crash(*_args, **_kwargs):
    raise OverflowError('cannot convert float infinity to integer')


def assert_handled(result: dict, input_fragment: str) -> None:
    assert result['failed'] is True
    assert result['msg'].startswith('unexpected OverflowError while reading '), result['msg']
    assert result['msg'].endswith(': cannot convert float infinity to integer') and input_fragment in result['msg']
    assert 'Traceback' not in result['msg']


def test_gpu_topology_parser_crash(monkeypatch, capsys):
    monkeypatch.setenv('NVIDIA_SMI_SHIM_DIR', str(FIXTURES / 'gpu' / 'h200-1gpu-vm'))
    monkeypatch.setattr(gpu, 'parse_smi_xml', crash)
    result = run_in_process(gpu_topology, {'profile': 'h200-1', 'nvidia_smi_path': str(SHIM)}, capsys)
    assert_handled(result, f"the output of '{SHIM} -q -x' and '{SHIM} topo -m'")
    assert result['checks'] == [] and result['healthy'] is False


def test_gpu_topology_evaluate_crash_is_inside_the_handler(monkeypatch, capsys):
    monkeypatch.setenv('NVIDIA_SMI_SHIM_DIR', str(FIXTURES / 'gpu' / 'h200-1gpu-vm'))
    monkeypatch.setattr(gpu, 'judge', crash)
    result = run_in_process(gpu_topology, {'profile': 'h200-1', 'nvidia_smi_path': str(SHIM)}, capsys)
    assert_handled(result, "the GPU facts against profile 'h200-1'")


def test_rdma_links_reader_crash(monkeypatch, capsys, tmp_path):
    (tmp_path / 'class' / 'infiniband').mkdir(parents=True)
    monkeypatch.setattr(rdma, 'read_ports', crash)
    result = run_in_process(rdma_links, {'sysfs_root': str(tmp_path), 'expected': {'hca_count': 8}}, capsys)
    assert_handled(result, f"sysfs under {tmp_path} against expected {{'hca_count': 8}}")
    assert result['ports'] == [] and result['checks'] == []


def test_nccl_tests_parser_crash(monkeypatch, capsys):
    output = FIXTURES / 'nccl-tests' / 'all_reduce_perf_8gpu.txt'
    monkeypatch.setattr(nccl, 'parse_output', crash)
    result = run_in_process(nccl_tests, {'output_file': str(output)}, capsys)
    assert_handled(result, f'output_file {output}')


def test_scratch_devices_parser_crash(monkeypatch, capsys, tmp_path):
    (tmp_path / 'mounts').write_text('overlay / overlay rw 0 0\n')
    (tmp_path / 'swaps').write_text('Filename\tType\tSize\tUsed\tPriority\n')
    monkeypatch.setenv('LSBLK_SHIM_JSON', str(FIXTURES / 'lsblk' / 'hgx8_sata_os.json'))
    monkeypatch.setattr(sd, 'parse_lsblk', crash)
    lsblk = str(FIXTURES / 'lsblk' / 'lsblk-shim')
    result = run_in_process(scratch_devices, {'lsblk_path': lsblk, 'proc_root': str(tmp_path),
                                              'mdadm_conf_path': [str(tmp_path / 'mdadm.conf')]}, capsys)
    assert_handled(result, f"the output of '{lsblk}', {tmp_path}")
    assert result['devices'] == [] and result['scratch'] == {}


def test_the_traceback_goes_to_exception_not_to_the_message():
    failures = []

    def fail(**kwargs):
        failures.append(kwargs)

    with pytest.raises(KeyError):
        with errors.last_resort(fail, 'the input', checks=[]) as handling:
            handling.what = "'lsblk' output"
            raise KeyError('x' * 1000)
    (failure,) = failures
    assert failure['msg'].startswith("unexpected KeyError while reading 'lsblk' output: 'xxx") and len(failure['msg']) < 400
    assert failure['exception'].startswith('Traceback (most recent call last):') and 'KeyError' in failure['exception']
    assert failure['checks'] == []


def test_exit_and_fail_pass_through_untouched():
    with pytest.raises(SystemExit):
        with errors.last_resort(lambda **kwargs: pytest.fail(f'called with {kwargs}')):
            raise SystemExit(0)


def test_a_crashing_input_through_ansible_is_a_clean_failure(tmp_path):
    """A 400-digit number in `nvidia-smi -q -x`: a failure with a message, not a MODULE FAILURE traceback."""
    fixture = tmp_path / 'gpu'
    fixture.mkdir()
    for name in ('smi_q.xml', 'topo_m.txt'):
        (fixture / name).write_text((FIXTURES / 'gpu' / 'h200-1gpu-vm' / name).read_text())
    xml = fixture / 'smi_q.xml'
    xml.write_text(re.sub(r'<total>\d+ MiB</total>', '<total>' + '9' * 400 + ' MiB</total>', xml.read_text(), count=1))
    result = run_module('gpu_topology', {'profile': 'h200-1', 'nvidia_smi_path': str(SHIM)},
                        env={'NVIDIA_SMI_SHIM_DIR': str(fixture)})
    assert result['failed'] is True and 'Module failed' not in result['msg'] and 'Traceback' not in result['msg']
    # Whichever handles it, the parser's own error or the last resort, the message names the input.
    assert '-q -x' in result['msg'], result['msg']
