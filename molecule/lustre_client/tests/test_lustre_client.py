# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lustre_client role on a Debian 13 container, client packages from the local test repository."""

from __future__ import annotations

import json
import re

import pytest
import testinfra

from scenario_helpers import recap_of, run_playbook, said

NODE = 'lus-1'
recap = recap_of(NODE)
PRUNE = '/usr/local/sbin/llmforge-checkpoint-prune'
PRUNE_CONFIG = '/etc/llmforge/checkpoint-prune.json'
PRUNE_LOG = '/var/log/llmforge-checkpoint-prune.log'
UNIT = 'llmforge-checkpoint-prune'
TREE = '/srv/ckpt-test'
STANDIN_LOG = '/var/log/lustre-standin.log'

# Test tree: run-a checkpoints every 500 steps, the newest still being written (no COMPLETE marker), one
# modified a minute ago, and a 'latest' link; run-b holds checkpoint-N directories and a non-checkpoint.
MAKE_TREE = r'''
import os, sys, time
root = sys.argv[1]
old = time.time() - 86400
def make(run, name, complete=True, mtime=old):
    path = os.path.join(root, run, name)
    os.makedirs(path)
    open(os.path.join(path, 'model.safetensors'), 'w').close()
    if complete:
        open(os.path.join(path, 'COMPLETE'), 'w').close()
    for item in [os.path.join(path, entry) for entry in os.listdir(path)] + [path]:
        os.utime(item, (mtime, mtime))
for step in range(500, 4001, 500):
    make('run-a', 'step_%06d' % step)
make('run-a', 'step_004500', complete=False)
make('run-a', 'step_005000', mtime=time.time() - 60)
os.symlink('step_001500', os.path.join(root, 'run-a', 'latest'))
for step in (100, 200, 300, 1000, 1100):
    make('run-b', 'checkpoint-%d' % step)
os.makedirs(os.path.join(root, 'run-b', 'logs'))
'''
RUN_A_ALL = ['latest'] + [f'step_{step:06d}' for step in range(500, 5001, 500)]
RUN_B_ALL = ['checkpoint-100', 'checkpoint-1000', 'checkpoint-1100', 'checkpoint-200', 'checkpoint-300', 'logs']
# Kept in run-a: the newest 2 complete ones older than min_age (3500, 4000), every step % 1000 == 0, the link
# target 1500, the unfinished 4500 and the young 5000; in run-b: 1000 and 1100.
RUN_A_KEPT = ['latest', 'step_001000', 'step_001500', 'step_002000', 'step_003000', 'step_003500', 'step_004000',
              'step_004500', 'step_005000']
RUN_B_KEPT = ['checkpoint-1000', 'checkpoint-1100', 'logs']


@pytest.fixture(scope='module')
def host():
    return testinfra.get_host(f'docker://{NODE}')


def listing(host, path):
    return sorted(host.check_output(f'ls -1A {path}').splitlines())


def test_the_repository_is_an_apt_source(host):
    sources = host.file('/etc/apt/sources.list.d/llmforge-lustre.sources')
    assert sources.user == 'root' and sources.mode == 0o644
    expected = ['Types: deb', 'URIs: file:/srv/lustre-test-repo', 'Suites: ./', 'Trusted: yes']
    assert sources.content_string.splitlines()[1:] == expected


def test_the_client_utilities_are_installed_and_held(host):
    assert host.check_output("dpkg-query -W -f='${Version} ${Status}' lustre-client-utils") == '2.15.6-1 hold ok installed'
    assert host.file('/usr/bin/lfs').is_file and host.file('/usr/sbin/lnetctl').is_file


def test_the_kernel_module_package_is_skipped_in_the_container(host):
    assert not host.package('lustre-client-modules-dkms').is_installed


def test_lnet_networks_are_module_options(host):
    conf = host.file('/etc/modprobe.d/lustre.conf')
    assert conf.mode == 0o644
    assert 'options lnet networks="o2ib0(ib0),tcp0(eth0)"' in conf.content_string.splitlines()
    assert not host.file('/etc/lnet.conf').exists


def test_fstab_lines_carry_the_default_options(host):
    lines = [line.split() for line in host.file('/etc/fstab').content_string.splitlines() if ' lustre ' in line]
    assert lines == [
        ['10.0.0.1@o2ib,10.1.0.1@tcp:10.0.0.2@o2ib,10.1.0.2@tcp:/scratch', '/lustre/scratch', 'lustre',
         '_netdev,flock,noatime,x-systemd.automount', '0', '0'],
        ['10.0.0.1@o2ib1:/home', '/lustre/home', 'lustre', '_netdev,localflock,noatime', '0', '0'],
    ]
    assert host.file('/lustre/scratch').is_directory and host.file('/lustre/home').mode == 0o755


def test_nothing_was_mounted_nor_striped(host):
    assert host.run('findmnt --noheadings --types lustre').stdout.strip() == ''
    # The stand-in lfs and lnetctl record every call: none, since nothing is mounted.
    assert not host.file(STANDIN_LOG).exists
    assert not host.file('/lustre/scratch/checkpoints').exists


def test_pruning_timer_and_service_are_installed_and_enabled(host):
    timer = host.service(f'{UNIT}.timer')
    assert timer.is_enabled and timer.is_running
    service = host.file(f'/etc/systemd/system/{UNIT}.service').content_string
    assert f'ExecStart={PRUNE} --config {PRUNE_CONFIG}' in service
    assert 'OnCalendar=hourly' in host.file(f'/etc/systemd/system/{UNIT}.timer').content_string
    assert host.file(PRUNE).mode == 0o755
    assert host.file('/usr/local/lib/llmforge/python/ansible_collections/llmforge/cluster/plugins/module_utils/'
                     'programs/_checkpoint_prune.py').mode == 0o644
    assert json.loads(host.file(PRUNE_CONFIG).content_string)['dry_run'] is True


def test_pruning_dry_run_through_the_service_then_for_real(host):
    host.check_output(f'rm -rf {TREE}/run-a {TREE}/run-b {PRUNE_LOG}')
    host.check_output(f"python3 - {TREE} <<'EOF'\n{MAKE_TREE}\nEOF")
    assert listing(host, f'{TREE}/run-a') == sorted(RUN_A_ALL)

    since = host.check_output('date +%s')
    host.check_output(f'systemctl start {UNIT}.service')
    assert listing(host, f'{TREE}/run-a') == sorted(RUN_A_ALL)
    assert listing(host, f'{TREE}/run-b') == sorted(RUN_B_ALL)
    journal = host.check_output(f'journalctl --no-pager -o cat -u {UNIT}.service --since @{since}')
    assert f'[dry-run] would remove {TREE}/run-a/step_000500 (step 500): beyond the retention policy' in journal
    assert f'[dry-run] {TREE}/run-a: 10 checkpoints, kept 8, would remove 2' in journal
    log = host.file(PRUNE_LOG).content_string
    assert f'[dry-run] would remove {TREE}/run-b/checkpoint-100 (step 100): beyond the retention policy' in log

    result = host.run(f'{PRUNE} --config {PRUNE_CONFIG} --no-dry-run')
    assert result.rc == 0, result.stderr
    assert listing(host, f'{TREE}/run-a') == RUN_A_KEPT
    assert listing(host, f'{TREE}/run-b') == RUN_B_KEPT
    removed = sorted(re.findall(r'llmforge-checkpoint-prune: removed (\S+) ', host.file(PRUNE_LOG).content_string))
    assert removed == [f'{TREE}/run-a/step_000500', f'{TREE}/run-a/step_002500',
                       f'{TREE}/run-b/checkpoint-100', f'{TREE}/run-b/checkpoint-200', f'{TREE}/run-b/checkpoint-300']
    log = host.file(PRUNE_LOG).content_string
    assert f'keep {TREE}/run-a/step_004500 (step 4500): in progress: no completion marker' in log
    assert f'keep {TREE}/run-a/step_001500 (step 1500): a symbolic link in the root points to it' in log
    assert f'keep {TREE}/run-a/step_003000 (step 3000): step 3000 is a multiple of keep_every 1000' in log
    assert re.search(rf'keep {TREE}/run-a/step_005000 \(step 5000\): in progress: modified \d+ s ago', log)

    # A second real run has nothing left to remove.
    again = host.run(f'{PRUNE} --config {PRUNE_CONFIG} --no-dry-run')
    assert again.rc == 0 and f'{TREE}/run-a: 8 checkpoints, kept 8, removed 0' in again.stdout


def test_pruning_exits_non_zero_on_errors(host):
    result = host.run(f'{PRUNE} --root {TREE}/no-such-run --keep-last 1 --dry-run')
    assert result.rc == 1 and f'{TREE}/no-such-run: cannot read the checkpoint directory' in result.stderr
    assert host.run(f'{PRUNE} --root {TREE} --keep-last 0').rc == 2


def test_check_mode_on_the_converged_node_reports_no_change():
    result = run_playbook('--check', '--diff')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counters = recap(result)
    assert counters['changed'] == 0 and counters['failed'] == 0, result.stdout[-3000:]
    text = said(result)
    assert 'Skipped in a container (docker): lustre-client-modules-dkms' in text
    assert 'Skipped in a container (docker): mounting scratch on /lustre/scratch (no lustre kernel module' in text
    assert 'Striping of /lustre/scratch/checkpoints skipped: /lustre/scratch is not a mounted Lustre file system' in text


def test_a_bad_nid_is_rejected_before_any_change(host):
    fstab = host.file('/etc/fstab').content_string
    mounts = [{'fsname': 'scratch', 'mgs_nids': ['10.0.0.1@o2ib:10.0.0.300@o2ib'], 'mount_point': '/lustre/bad'}]
    result = run_playbook('-e', json.dumps({'lustre_client_mounts': mounts}))
    assert result.returncode != 0
    assert "lustre_client_mounts[0].mgs_nids: '10.0.0.300@o2ib' is not a NID: '10.0.0.300' is not an IPv4 address" in said(result)
    assert recap(result)['changed'] == 0
    assert host.file('/etc/fstab').content_string == fstab and not host.file('/lustre/bad').exists


def test_an_o2ib_interface_the_infiniband_role_does_not_configure_is_rejected():
    result = run_playbook('--check', '-e', json.dumps({'lustre_client_lnet_networks': ['o2ib0(ib1)', 'tcp0(eth0)']}))
    assert result.returncode != 0
    assert ("lustre_client_lnet_networks[0]: 'o2ib0(ib1)' names ib1, which infiniband_ipoib_networks does not configure "
            'on this host (its IPoIB interfaces: ib0)') in said(result)


def test_a_version_the_repository_does_not_offer_is_named():
    result = run_playbook('--check', '--tags', 'lustre_client_install', '-e', 'lustre_client_version=9.9.9-1')
    assert result.returncode != 0
    assert ('The package lustre-client-utils=9.9.9-1 is not offered by lustre_client_repository (file:/srv/lustre-test-repo)'
            in said(result))
