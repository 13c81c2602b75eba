# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_driver role on a converged Debian 13 container: no GPU, no kernel of its own."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess

import pytest
import testinfra

NAME = 'gpu-driver-1'
SCENARIO = pathlib.Path(__file__).resolve().parent.parent
PROJECT = pathlib.Path(os.environ.get('MOLECULE_PROJECT_DIRECTORY') or SCENARIO.parent.parent)
USERSPACE = ('nvidia-smi', 'libnvidia-ml1', 'nvidia-persistenced', 'libnvidia-cfg1', 'firmware-nvidia-gsp')
KERNEL_MODULE = ('nvidia-open-kernel-dkms', 'nvidia-kernel-dkms')
PEERMEM_CONF = '/etc/modules-load.d/nvidia-peermem.conf'


@pytest.fixture(scope='module')
def host():
    return testinfra.get_host(f'docker://{NAME}')


def playbook(path: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    """Run a playbook against the container with molecule's inventory."""
    env = dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=str(PROJECT / 'collections'))
    return subprocess.run(
        ['ansible-playbook', str(path), '-i', os.environ['MOLECULE_INVENTORY_FILE'], *args],
        cwd=PROJECT, capture_output=True, text=True, timeout=900, check=False, env=env)


def converge(*args: str) -> subprocess.CompletedProcess:
    """Run the scenario's converge playbook, as molecule does."""
    return playbook(SCENARIO / 'converge.yml', *args)


def flat(result: subprocess.CompletedProcess) -> str:
    """stdout and stderr with whitespace runs folded (the yaml callback wraps long messages)."""
    return ' '.join((result.stdout + result.stderr).split())


def changed(result: subprocess.CompletedProcess) -> int:
    """The changed count of the container's PLAY RECAP line."""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    recap = re.search(rf'^{NAME}\s+:\s+ok=\d+\s+changed=(\d+)', result.stdout, re.M)
    assert recap, result.stdout[-4000:]
    return int(recap.group(1))


@pytest.fixture(scope='module')
def rerun():
    """A second real converge run: it must change nothing, and its output carries the skip messages."""
    return converge()


@pytest.mark.parametrize('package', USERSPACE)
def test_userspace_packages_of_branch_550_are_installed(host, package):
    pkg = host.package(package)
    assert pkg.is_installed
    assert pkg.version.startswith('550.'), pkg.version


@pytest.mark.parametrize('package', KERNEL_MODULE)
def test_kernel_module_package_is_not_installed_in_a_container(host, package):
    assert not host.package(package).is_installed
    assert not host.package('dkms').is_installed


def test_driver_components_come_from_the_distribution_archive(host):
    sources = host.file('/etc/apt/sources.list.d/llmforge-gpu-driver.sources').content_string
    assert re.search(r'^Components: contrib non-free non-free-firmware$', sources, re.M), sources
    assert re.search(r'^Suites: trixie trixie-updates$', sources, re.M), sources
    assert re.search(r'^Suites: trixie-security$', sources, re.M), sources
    assert re.search(r'^Signed-By: /usr/share/keyrings/debian-archive-keyring\.pgp$', sources, re.M), sources
    policy = host.check_output('apt-cache policy nvidia-smi')
    assert re.search(r'\b\d+ http://deb\.debian\.org/debian trixie/non-free amd64 Packages', policy), policy
    assert not host.file('/etc/apt/sources.list.d/llmforge-nvidia-cuda.sources').exists


def test_driver_packages_are_pinned_to_the_branch(host):
    prefs = host.file('/etc/apt/preferences.d/llmforge-gpu-driver').content_string
    assert re.search(r'^Pin: version 550\.\*$', prefs, re.M), prefs
    assert 'Candidate: 550.' in host.check_output('apt-cache policy libnvidia-ml1')


def test_driver_packages_are_held(host):
    assert set(host.check_output('apt-mark showhold').split()) >= set(USERSPACE)
    # apt (and so unattended-upgrades) refuses to change a held package.
    result = host.run('apt-get --simulate --yes remove nvidia-smi')
    assert result.rc != 0 and 'Held packages were changed' in result.stderr, result.stdout + result.stderr


def test_nouveau_is_blacklisted(host):
    lines = [line for line in host.file('/etc/modprobe.d/blacklist-nouveau.conf').content_string.splitlines()
             if line and not line.startswith('#')]
    assert lines == ['blacklist nouveau', 'options nouveau modeset=0']


def test_nvidia_persistenced_is_enabled_but_not_started_without_a_driver(host):
    service = host.service('nvidia-persistenced')
    assert service.is_enabled
    assert not service.is_running
    assert not host.file('/proc/driver/nvidia/version').exists


def test_nvidia_peermem_loads_at_boot_on_a_node_with_infiniband(host):
    conf = host.file(PEERMEM_CONF)
    assert conf.exists and conf.mode == 0o644
    assert [line for line in conf.content_string.splitlines() if not line.startswith('#')] == ['nvidia-peermem']


def test_second_converge_changes_nothing(rerun):
    assert changed(rerun) == 0


@pytest.mark.parametrize('message', [
    'Skipped in a container (docker): DKMS build of the NVIDIA kernel module (nvidia-open-kernel-dkms not installed)',
    'Skipped in a container (docker): initramfs rebuild (update-initramfs -u)',
    'Skipped in a container (docker): modprobe nvidia-peermem',
    'Skipped in a container (docker): reboot after a driver change; a container cannot reboot its host',
    'NVIDIA driver not loaded (/proc/driver/nvidia/version missing: in a container (docker)): version check skipped.',
    'nvidia-persistenced enabled but not started: the NVIDIA driver is not loaded',
    'Fabric Manager skipped: this node needs it (NVSwitch system: gpu_profile h200-sxm-8), but the Debian 13 '
    'archive has no Fabric Manager package; it must come from the NVIDIA CUDA repository',
], ids=['dkms', 'initramfs', 'modprobe', 'reboot', 'version-check', 'persistenced', 'fabric-manager'])
def test_converge_says_what_it_skipped_and_why(rerun, message):
    output = ' '.join(rerun.stdout.split())
    assert message in output, rerun.stdout[-4000:]


def test_check_mode_on_the_converged_node_reports_no_change():
    assert changed(converge('--check', '--diff')) == 0


def test_node_without_infiniband_would_drop_the_peermem_boot_load(host):
    """Check mode against an empty sysfs tree: exactly the modules-load file would go, nothing else."""
    result = converge('--check', '--diff', '-e', 'gpu_driver_sysfs_root=/srv/no-such-sysfs')
    assert changed(result) == 1
    task = "Remove nvidia-peermem's boot load where there is no InfiniBand"
    assert re.search(rf'TASK \[llmforge\.cluster\.gpu_driver : {task}\][^\n]*\n(?:[^\n]*\n)*?changed: \[{NAME}\]',
                     result.stdout), result.stdout[-4000:]
    assert 'Skipped in a container (docker): modprobe nvidia-peermem' not in result.stdout
    assert host.file(PEERMEM_CONF).exists


@pytest.mark.parametrize('extra_vars, message', [
    ({'gpu_driver_branch': '580'},
     'The package sources of this Debian 13 host offer nvidia-smi 550.163.01-2, not driver branch 580'),
    ({'gpu_driver_kernel_flavor': 'proprietary'},
     'gpu_profile h200-sxm-8 (Hopper, gpu_type h200) needs the open NVIDIA kernel modules'),
    ({'gpu_driver_fabric_manager': True},
     'gpu_driver_fabric_manager is true, but the Debian 13 archive has no Fabric Manager package'),
    ({'gpu_driver_dcgm': True, 'gpu_driver_container_toolkit': True},
     'DCGM (gpu_driver_dcgm) and the NVIDIA Container Toolkit (gpu_driver_container_toolkit): available only '
     'from the NVIDIA CUDA repository, which is not configured on this Debian 13 host'),
], ids=['branch-not-in-archive', 'proprietary-on-hopper', 'fabric-manager-without-repo', 'dcgm-without-repo'])
def test_impossible_settings_stop_the_run_with_a_clear_message(extra_vars, message):
    result = converge('--check', '-e', json.dumps(extra_vars))
    assert result.returncode != 0
    assert re.search(rf'^{NAME}\s+:.*\bfailed=1\b', result.stdout, re.M), result.stdout[-3000:]
    assert message in flat(result), result.stdout[-3000:] + result.stderr


@pytest.mark.parametrize('loaded, pending, failed, message', [
    ('550.163.01', False, False, None),
    ('535.247.01', False, True, 'NVIDIA driver/library version mismatch: the loaded kernel module is 535.247.01, '
                                'but libnvidia-ml1 550.163.01 is installed'),
    ('535.247.01', True, False, 'WARNING: the loaded NVIDIA driver is 535.247.01 and 550.163.01 is installed: '
                                'GPU jobs on this node fail until it reboots (pending).'),
], ids=['match', 'mismatch-fails', 'mismatch-warns-while-reboot-pending'])
def test_loaded_driver_is_checked_against_the_installed_libraries(host, loaded, pending, failed, message):
    """The version check, fed a stand-in for /proc/driver/nvidia/version in the real format."""
    fake = '/root/fake-proc-driver-nvidia-version'
    host.run(f"printf 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {loaded}  Release Build  "
             f"(dvs-builder@U16-I3-B03-4-3)  Sat Apr 12 00:00:00 UTC 2025\\n' > {fake}")
    args = ['-e', f'_gpu_driver_proc_version_path={fake}']
    if pending:
        args += ['-e', f'_gpu_driver_reboot_marker={fake}']
    result = playbook(SCENARIO / 'tests' / 'version_check.yml', *args)
    assert (result.returncode != 0) == failed, result.stdout[-3000:]
    assert 'NVIDIA driver not loaded' not in flat(result)
    if message:
        assert message in flat(result), result.stdout[-3000:] + result.stderr
