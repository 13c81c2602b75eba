# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge.cluster.scratch_devices run through Ansible against an lsblk shim replaying fixtures."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from module_runner import run_module as run_ansible_module

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'lsblk'
SHIM = FIXTURES / 'lsblk-shim'
COLUMNS = 'NAME,KNAME,PATH,TYPE,SIZE,MODEL,SERIAL,TRAN,RM,RO,FSTYPE,PTTYPE,UUID,LABEL,MOUNTPOINTS'


@pytest.fixture()
def proc(tmp_path: pathlib.Path) -> pathlib.Path:
    """An empty stand-in for /proc: the fixtures' own mount points mark the OS disk."""
    root = tmp_path / 'proc'
    root.mkdir()
    (root / 'mounts').write_text('overlay / overlay rw 0 0\n')
    (root / 'swaps').write_text('Filename\tType\tSize\tUsed\tPriority\n')
    return root


def run_module(args: dict, proc: pathlib.Path, fixture: str = 'hgx8_sata_os', check: bool = False,
               **shim_env: str) -> dict:
    env = dict({'LSBLK_SHIM_JSON': str(FIXTURES / f'{fixture}.json')}, **shim_env)
    base = {'lsblk_path': str(SHIM), 'proc_root': str(proc), 'mdadm_conf_path': [str(proc / 'mdadm.conf')],
            'transports': ['nvme'], 'min_size': '100G'}
    return run_ansible_module('scratch_devices', dict(base, **args), check=check, env=env)


def test_blank_hgx_node_plan_in_check_mode(proc):
    result = run_module({}, proc, check=True)
    assert not result.get('failed'), result.get('msg')
    assert result['changed'] is False and result['healthy'] is True
    assert [d['path'] for d in result['devices']] == [f'/dev/nvme{i}n1' for i in range(8)]
    assert result['scratch']['actions'] == ['create_array', 'make_filesystem']
    assert result['os_disks'] == ['sda', 'sdb']


def test_exactly_one_lsblk_command_runs(proc, tmp_path):
    log = tmp_path / 'calls'
    run_module({}, proc, LSBLK_SHIM_LOG=str(log))
    assert log.read_text().splitlines() == [f'--json --bytes --output {COLUMNS}']


def test_the_os_disk_is_read_from_proc_mounts_and_swaps(proc, tmp_path):
    stripped = json.loads((FIXTURES / 'single_nvme.json').read_text())
    for part in stripped['blockdevices'][0]['children']:
        part['mountpoints'] = [None]
    fixture = tmp_path / 'stripped.json'
    fixture.write_text(json.dumps(stripped))
    (proc / 'mounts').write_text('/dev/nvme0n1p2 / ext4 rw,relatime 0 0\n')
    result = run_module({'transports': [], 'min_size': '0'}, proc, LSBLK_SHIM_JSON=str(fixture))
    assert result['os_disks'] == ['nvme0n1'] and [d['name'] for d in result['devices']] == ['nvme1n1']


def test_a_disk_with_a_filesystem_is_refused_with_each_reason(proc):
    result = run_module({}, proc, fixture='hgx8_dirty')
    assert result['failed'] is True and result['healthy'] is False
    assert result['msg'].startswith('5 scratch device check(s) failed: device_free (nvme1n1): /dev/nvme1n1 holds')
    assert 'device_free (nvme3n1): /dev/nvme3n1 holds a xfs filesystem labelled ckpt' in result['msg']
    report = run_module({'fail_on_mismatch': False}, proc, fixture='hgx8_dirty')
    assert not report.get('failed') and report['scratch']['actions'] == []


def test_requested_devices_through_symlinks_with_force(proc, tmp_path):
    links = tmp_path / 'by-id'
    links.mkdir()
    (links / 'nvme-KIOXIA_KCM6XRUL7T68_X2L0A031T7H8').symlink_to('/dev/nvme3n1')
    devices = [str(links / 'nvme-KIOXIA_KCM6XRUL7T68_X2L0A031T7H8'), '/dev/nvme0n1']
    result = run_module({'devices': devices, 'force': True}, proc, fixture='hgx8_dirty')
    assert not result.get('failed'), result.get('msg')
    assert result['scratch']['wipe'] == ['/dev/nvme3n1']
    assert result['scratch']['actions'] == ['wipe', 'create_array', 'make_filesystem']


def test_our_array_named_in_mdadm_conf_is_recognised(proc, tmp_path):
    fixture = json.loads((FIXTURES / 'hgx8_scratch.json').read_text())
    for disk in fixture['blockdevices'][1:]:
        disk['label'] = 'other:data'
        disk['children'][0]['mountpoints'] = []
    path = tmp_path / 'renamed.json'
    path.write_text(json.dumps(fixture))
    (proc / 'mdadm.conf').write_text(
        'ARRAY /dev/md/scratch metadata=1.2 name=scr-1:scratch UUID=cfec2308:34a461b7:aa991413:755eb0e6\n')
    result = run_module({}, proc, LSBLK_SHIM_JSON=str(path))
    assert not result.get('failed'), result.get('msg')
    assert result['scratch']['present'] is True and result['scratch']['actions'] == []


@pytest.mark.skipif(shutil.which('lsblk') is None, reason='no lsblk on this machine')
def test_the_real_lsblk_of_this_machine_parses(proc):
    """The production path: this machine's own lsblk, read-only; whatever it holds, the answer is structured."""
    result = run_module({'lsblk_path': 'lsblk', 'fail_on_mismatch': False}, proc)
    assert not result.get('failed'), result.get('msg')
    assert isinstance(result['rejected'], list) and 'Traceback' not in json.dumps(result)


@pytest.mark.parametrize('args, shim_env, fragment', [
    ({'timeout': 2}, {'LSBLK_SHIM_HANG': '1'}, 'did not finish within 2 s'),
    ({}, {'LSBLK_SHIM_FAIL': '32'}, 'exited with 32: lsblk: failed to access sysfs directory'),
    ({'lsblk_path': '/nonexistent/lsblk'}, {}, '/nonexistent/lsblk not found'),
    ({'min_size': 'lots'}, {}, "min_size 'lots' is not a size"),
    ({'model_regex': '[a-'}, {}, "model_regex '[a-' is not a valid regular expression"),
    ({'fstype': 'btrfs'}, {}, 'value of fstype must be one of: xfs, ext4'),
    ({'timeout': 0}, {}, 'timeout must be a positive number'),
], ids=['hang', 'lsblk-fails', 'missing-binary', 'bad-size', 'bad-regex', 'bad-fstype', 'bad-timeout'])
def test_bad_input_fails_with_a_precise_message(proc, args, shim_env, fragment):
    result = run_module(args, proc, **shim_env)
    assert result['failed'] is True
    assert fragment in result['msg']
    assert 'Traceback' not in json.dumps(result)


def test_garbage_json_is_a_clear_failure(proc, tmp_path):
    path = tmp_path / 'garbage.json'
    path.write_text('{"blockdevices": [')
    result = run_module({}, proc, LSBLK_SHIM_JSON=str(path))
    assert result['failed'] is True and 'lsblk printed malformed JSON' in result['msg']
