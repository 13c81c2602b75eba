# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge.cluster.storage_bench run through Ansible: real fio on a temporary directory with tiny sizes, and the
fio-shim of fixtures/fio for what real fio cannot be made to do here (O_DIRECT refused, a hang)."""

from __future__ import annotations

import json
import pathlib
import re
import shutil

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.module_utils import _fio as fio
from ansible_collections.llmforge.cluster.plugins.modules import storage_bench
from module_runner import run_module

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'fio'
SHIM = str(FIXTURES / 'fio-shim')
FIO = shutil.which('fio')
needs_fio = pytest.mark.skipif(FIO is None, reason='fio is not installed (Debian: apt-get install fio)')
ALL = ['scratch_seq_write', 'scratch_seq_read', 'scratch_rand_read', 'shared_seq_read', 'shared_ckpt_write']


@needs_fio
def test_every_profile_with_real_fio(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'profiles': ALL, 'size': '16M', 'runtime': 1,
                                          'timeout': 60})
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False
    assert sorted(result['profiles']) == sorted(ALL)
    for name, figures in result['profiles'].items():
        assert figures['mib_s'] > 0 and figures['iops'] > 0, name
        assert figures['lat_p99_ms'] is not None and figures['lat_p99_ms'] > 0, name
        assert figures['fio_version'].startswith('fio-3'), name
        assert figures['command'][0] == 'fio' and figures['size_bytes'] == 16 * 1024 * 1024
    assert result['profiles']['scratch_rand_read']['jobs'] == 4
    assert result['profiles']['scratch_rand_read']['figure'] == 'iops'
    assert result['profiles']['shared_ckpt_write']['io_mib'] == 16.0  # written once, whole
    assert result['profiles']['shared_ckpt_write']['direct'] is False
    assert result['profiles']['scratch_seq_read']['direct'] is True
    assert result['work_dir'].startswith(str(tmp_path) + '/.llmforge-fio-')
    assert list(tmp_path.iterdir()) == [], 'the test files and the temporary directory are removed'


@needs_fio
def test_keep_files(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'profiles': ['scratch_seq_read'], 'size': '1M',
                                          'runtime': 1, 'keep_files': True})
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is True
    kept = pathlib.Path(result['work_dir'])
    assert [path.name for path in (kept / 'scratch_seq_read').iterdir()] == ['llmforge-scratch_seq_read.0.0']


@needs_fio
def test_directory_with_a_colon(tmp_path):
    directory = tmp_path / 'scratch:2026'
    directory.mkdir()
    result = run_module('storage_bench', {'directory': str(directory), 'profiles': ['scratch_seq_write'], 'size': '1M',
                                          'runtime': 1})
    assert not result.get('failed'), result.get('msg')
    assert result['profiles']['scratch_seq_write']['mib_s'] > 0
    assert f"--directory={result['work_dir'].replace(':', chr(92) + ':')}/scratch_seq_write" in \
        result['profiles']['scratch_seq_write']['command']
    assert list(directory.iterdir()) == [] and [path.name for path in tmp_path.iterdir()] == ['scratch:2026']


def test_check_mode_does_not_run(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'fio_path': '/nonexistent/fio'}, check=True)
    assert result['skipped'] is True and result['changed'] is False
    assert result['msg'] == f'storage_bench writes test files in {tmp_path}: not run in check mode'
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('check', [False, True])
def test_saved_output(check):
    result = run_module('storage_bench', {'output': str(FIXTURES / 'note_psync_iodepth.txt')}, check=check)
    assert not result.get('failed'), result.get('msg')
    assert list(result['profiles']) == ['scratch_seq_write']
    assert result['profiles']['scratch_seq_write']['io_mib'] == 16.0 and result['directory'] is None


def test_saved_output_with_a_job_error():
    result = run_module('storage_bench', {'output': str(FIXTURES / 'error_einval.txt')})
    assert result['failed'] is True
    assert result['msg'] == (f"{FIXTURES / 'error_einval.txt'}: fio job llmforge-scratch_seq_write failed with EINVAL "
                             '(Invalid argument)')


def test_saved_output_cut_off():
    result = run_module('storage_bench', {'output': str(FIXTURES / 'truncated.txt')})
    assert result['failed'] is True and 'the fio JSON output is cut off at line' in result['msg']


def test_missing_directory(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path / 'scratch'), 'fio_path': SHIM})
    assert result['failed'] is True
    assert result['msg'] == f'directory {tmp_path}/scratch does not exist or is not a directory'


def test_not_enough_space(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'size': '1000T', 'fio_path': SHIM,
                                          'profiles': ['shared_ckpt_write']})
    assert result['failed'] is True
    assert result['msg'].startswith(f'directory {tmp_path} has ')
    assert 'free; the test files need 1000.0 TiB (shared_ckpt_write: 1 file(s) of 1000.0 TiB)' in result['msg']
    assert list(tmp_path.iterdir()) == []


def test_o_direct_refused_falls_back_with_a_warning(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'profiles': ['scratch_seq_write'],
                                          'fio_path': SHIM, 'size': '1M'},
                        env={'FIO_SHIM_DIRECT1': 'error_einval.txt', 'FIO_SHIM_OUTPUT': 'scratch_seq_write.json'})
    assert not result.get('failed'), result.get('msg')
    assert result['profiles']['scratch_seq_write']['direct'] is False
    assert any('refused O_DIRECT (EINVAL' in warning for warning in result['warnings'])
    assert list(tmp_path.iterdir()) == []


def test_timeout_removes_the_files(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'profiles': ['scratch_seq_read'],
                                          'fio_path': SHIM, 'runtime': 1, 'timeout': 2},
                        env={'FIO_SHIM_HANG': '1'})
    assert result['failed'] is True
    assert result['msg'].startswith('scratch_seq_read: fio did not finish within 2 s and was killed')
    assert list(tmp_path.iterdir()) == []


def test_missing_fio(tmp_path):
    result = run_module('storage_bench', {'directory': str(tmp_path), 'fio_path': '/nonexistent/fio'})
    assert result['failed'] is True
    assert result['msg'].startswith('/nonexistent/fio not found: install fio')
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize('args, message', [
    ({'size': '1GB'}, 'size must be a whole number of bytes or one with K, M, G or T'),
    ({'runtime': 30, 'timeout': 30}, r'timeout \(30 s\) must be longer than runtime \(30 s\)'),
    ({'profiles': ['scratch_seq_reed']}, 'value of profiles must be one or more of'),
    ({'numjobs': 0}, 'numjobs must be a whole number of at least 1'),
    ({'size': '1M', 'profiles': ['shared_ckpt_write']},
     r'size \(1.0 MiB\) must be at least the block size of shared_ckpt_write, 16M'),
])
def test_bad_parameters(tmp_path, args, message):
    result = run_module('storage_bench', dict({'directory': str(tmp_path), 'fio_path': SHIM}, **args))
    assert result['failed'] is True
    assert re.search(message, result['msg']), result['msg']
    assert list(tmp_path.iterdir()) == []


# --- the last resort, in this process (as test_last_resort_module.py) -------------------------------

def run_in_process(args: dict, capsys) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        storage_bench.main()
    return json.loads(capsys.readouterr().out)


def crash(*_args, **_kwargs):
    raise OverflowError('cannot convert float infinity to integer')


def test_parser_crash_on_a_saved_output(monkeypatch, capsys):
    monkeypatch.setattr(fio, 'parse_output', crash)
    output = FIXTURES / 'scratch_seq_read.json'
    result = run_in_process({'output': str(output)}, capsys)
    assert result['failed'] is True
    assert result['msg'] == (f'unexpected OverflowError while reading output {output}: cannot convert float infinity '
                             'to integer')


def test_parser_crash_during_a_run_still_removes_the_files(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(fio, 'parse_output', crash)
    result = run_in_process({'directory': str(tmp_path), 'fio_path': SHIM, 'size': '1M'}, capsys)
    assert result['failed'] is True
    assert result['msg'] == (f"unexpected OverflowError while reading fio's output for {tmp_path}: cannot convert "
                             'float infinity to integer')
    assert list(tmp_path.iterdir()) == []
