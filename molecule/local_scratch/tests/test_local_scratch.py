# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local_scratch role on a Debian 13 container, with lsblk replaced by recorded outputs of real node layouts."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import testinfra

from scenario_helpers import recap_of, run_playbook, said

NODE = 'scr-1'
recap = recap_of(NODE)
SHIMS = '/usr/local/share/llmforge-test/lsblk'
NVME8 = ' '.join(f'/dev/nvme{index}n1' for index in range(8))


@pytest.fixture(scope='module')
def host():
    return testinfra.get_host(f'docker://{NODE}')


def with_fixture(fixture: str, *args: str, **extra: object) -> subprocess.CompletedProcess:
    """Check mode over the recorded lsblk output of one node layout."""
    variables = dict(local_scratch_lsblk_path=f'{SHIMS}/lsblk-{fixture}', **extra)
    return run_playbook('--check', '--diff', '-e', json.dumps(variables), *args)


def run_module(args: dict) -> dict:
    """llmforge.cluster.scratch_devices run ad hoc in the container; its result."""
    result = subprocess.run(
        ['ansible', NODE, '-i', os.environ['MOLECULE_INVENTORY_FILE'], '-m', 'llmforge.cluster.scratch_devices',
         '-a', json.dumps(args)],
        capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS='1', ANSIBLE_STDOUT_CALLBACK='ansible.builtin.json',
                 ANSIBLE_NOCOLOR='1'))
    return json.loads(result.stdout)['plays'][0]['tasks'][0]['hosts'][NODE]


@pytest.mark.parametrize('package', ['mdadm', 'xfsprogs', 'e2fsprogs'])
def test_the_tools_are_installed(host, package):
    assert host.package(package).is_installed


def test_the_scratch_root_is_open_to_every_user_like_tmp(host):
    root = host.file('/scratch')
    assert root.is_directory and root.user == 'root' and root.group == 'root' and root.mode == 0o1777


def test_the_slurm_job_tmp_directory_is_private_to_root(host):
    slurm = host.file('/scratch/slurm')
    assert slurm.is_directory and slurm.user == 'root' and slurm.group == 'root' and slurm.mode == 0o700


def test_no_disk_was_touched_in_the_container(host):
    assert not host.mount_point('/scratch').exists
    assert 'scratch' not in host.file('/etc/fstab').content_string
    conf = host.file('/etc/mdadm/mdadm.conf')
    assert not conf.exists or not re.search(r'^ARRAY', conf.content_string, re.M)
    assert not host.file('/dev/md/scratch').exists


def test_check_mode_reports_no_change_and_says_what_the_container_skipped():
    result = run_playbook('--check', '--diff')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert recap(result)['changed'] == 0, result.stdout[-3000:]
    text = said(result)
    assert 'Skipped in a container (docker): the scratch device steps (' in text
    assert (f'mdadm --create /dev/md/scratch --run --level=0 --metadata=1.2 --raid-devices=8 --chunk=512 '
            f'--name=scratch {NVME8}; mkfs.xfs -L scratch /dev/md/scratch;') in text
    assert 'mount /dev/md/scratch at /scratch (noatime,nofail) by UUID through /etc/fstab' in text
    assert 'Left out: sda: OS disk: holds /, /boot/efi, [SWAP]; sdb: OS disk: holds /, [SWAP].' in text


def test_the_module_chooses_the_eight_nvme_and_never_the_os_raid1():
    result = run_module({'lsblk_path': f'{SHIMS}/lsblk-hgx8_sata_os', 'transports': ['nvme'], 'min_size': '100G'})
    assert result['changed'] is False and result['healthy'] is True
    assert [device['path'] for device in result['devices']] == NVME8.split()
    assert result['os_disks'] == ['sda', 'sdb']


def test_the_module_reads_the_real_lsblk_in_the_container_without_choosing_the_hosts_disks():
    result = run_module({'transports': ['nvme'], 'fail_on_mismatch': False})
    assert 'failed' not in result or not result['failed'], result.get('msg')
    assert all(device['tran'] == 'nvme' for device in result['devices'])


def test_disks_holding_data_are_refused_naming_local_scratch_force():
    result = with_fixture('hgx8_dirty', '--tags', 'local_scratch_preflight')
    assert result.returncode != 0
    text = said(result)
    assert 'Refusing to touch 5 disk(s): /dev/nvme1n1 holds a gpt partition table (1 partition(s));' in text
    assert '/dev/nvme3n1 holds a xfs filesystem labelled ckpt;' in text
    assert 'Set local_scratch_force: true to wipe nvme1n1, nvme3n1, nvme5n1 (everything on them is lost).' in text
    assert 'local_scratch_force never touches a disk in use (nvme6n1, nvme7n1)' in text
    assert 'OS disk: holds /, /boot, /boot/efi, [SWAP]' in text  # the Dell BOSS-N1 NVMe boot disk


def test_force_with_the_free_disks_listed_plans_a_wipe_first():
    devices = [f'/dev/nvme{index}n1' for index in range(6)]
    result = with_fixture('hgx8_dirty', local_scratch_force=True, local_scratch_devices=devices)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = said(result)
    assert 'wipefs --all /dev/nvme1n1 /dev/nvme3n1 /dev/nvme5n1; mdadm --create /dev/md/scratch' in text
    assert 'mkfs.xfs -L scratch -f /dev/md/scratch' in text


def test_force_without_a_device_list_is_refused_before_discovery():
    result = with_fixture('hgx8_dirty', '--tags', 'local_scratch_preflight', local_scratch_force=True)
    assert result.returncode != 0
    text = said(result)
    assert 'local_scratch_force: true wipes disks, so it needs the disks named in local_scratch_devices' in text, text[-3000:]
    assert 'discovery never wipes' in text
    assert recap(result)['failed'] == 1


def test_the_scratch_built_by_an_earlier_run_is_recognised_not_rebuilt():
    result = with_fixture('hgx8_scratch', '--tags', 'local_scratch_preflight')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = said(result)
    assert 'nvme0n1 member' in text and 'mdadm --create' not in text and 'mkfs' not in text
    assert 'mount /dev/md127 at /scratch' in text


def test_a_single_nvme_is_used_without_an_array():
    result = with_fixture('single_nvme', '--tags', 'local_scratch_preflight')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    text = said(result)
    assert 'Steps: mkfs.xfs -L scratch /dev/nvme1n1; mount /dev/nvme1n1 at /scratch' in text
    assert 'nvme0n1: OS disk: holds /, /boot/efi, [SWAP]' in text


def test_bad_input_is_refused_naming_the_variable_before_anything_changes():
    result = with_fixture('hgx8_sata_os', '--tags', 'local_scratch_preflight', local_scratch_mount_point='/var')
    assert result.returncode != 0 and 'local_scratch_mount_point must be an absolute path' in said(result)
    result = with_fixture('hgx8_sata_os', '--tags', 'local_scratch_preflight', local_scratch_model_regex='[a-')
    assert result.returncode != 0
    assert "model_regex '[a-' is not a valid regular expression" in said(result)
    assert 'Check local_scratch_devices, local_scratch_model_regex' in said(result)
