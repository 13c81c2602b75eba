# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared storage from a real Ceph, where a scenario has one (molecule/cluster_debian12: d12-ceph1 serves CephFS and
S3; LLMFORGE_ARCHIVE_HOST names the host of the checkpoint_archive role).

/shared (homes, the training environment, run directories) is CephFS on every host, mounted by the ceph_client role
with ceph-fuse. A directory user's job writes its checkpoints there; the archive copies them to the S3 gateway and
verifies them; the run's shared copies lost, `llmforge-restore` brings a step back and the job, requeued by its user,
resumes at that step. A wrong CephFS key, a wrong bucket or an endpoint that does not answer is refused by the
roles naming the variable, before anything on the host changes (the other settings' messages, a refused S3 key or a
wrong region among them, are the unit tests').
"""

from __future__ import annotations

import base64
import json
import os
import re
import struct

import pytest

from conftest import ALL_HOSTS, JOB_USER, SECOND
from scenario_helpers import run_playbook, said, wait_for
from test_self_healing import resumed_after, runs, timeline
from test_training import checkpoints, job_fields, log_of, run_dir, submit, wait_finished

ARCHIVER = os.environ.get('LLMFORGE_ARCHIVE_HOST', '')
# The test Ceph's settings as prepare.yml wrote them (the role variables, keys included).
CEPH_VARS = os.environ.get('LLMFORGE_CEPH_VARS', '')
pytestmark = pytest.mark.skipif(not ARCHIVER, reason='no Ceph in this scenario (LLMFORGE_ARCHIVE_HOST)')
KEYRING = '/etc/ceph/ceph.client.llmforge.keyring'
ARCHIVE_CONFIG = '/etc/llmforge/archive/archive.json'
ARCHIVE_KEYS = '/etc/llmforge/archive/credentials.json'


def ceph_vars():
    with open(CEPH_VARS, encoding='utf-8') as handle:
        return json.load(handle)


def digests(host, *paths):
    return host.check_output(f'sha256sum {" ".join(paths)}')


def test_shared_is_cephfs_on_every_host(hosts):
    for name in ALL_HOSTS:
        host = hosts[name]
        fstype, source = host.check_output('findmnt -n -o FSTYPE,SOURCE /shared').split()[:2]
        assert fstype == 'fuse.ceph-fuse', f'{name}: /shared is {fstype} from {source}'
        line = next(line for line in host.file('/etc/fstab').content_string.splitlines()
                    if line.split()[1:2] == ['/shared'])
        assert line.split()[2] == 'fuse.ceph' and '_netdev' in line.split()[3], line
        keyring = host.file(KEYRING)
        assert (keyring.user, keyring.group, keyring.mode) == ('root', 'root', 0o600), name
    # The users' homes are there, each the user's own.
    home = hosts[ALL_HOSTS[0]].file(f'/shared/home/{JOB_USER}')
    assert (home.user, home.mode) == (JOB_USER, 0o700)


def test_a_users_checkpoints_are_archived_verified_restored_and_the_requeued_job_resumes(hosts, ctl, user):
    archiver = hosts[ARCHIVER]
    job = submit(user, trainer_args=['--steps', '20', '--ckpt-every-steps', '10'])
    state = wait_finished(ctl, job, timeout=600)
    assert state == 'COMPLETED', f'{state}\n{log_of(ctl, job)[-3000:]}'
    directory = run_dir(job)
    assert checkpoints(ctl, directory) == [10, 20]
    assert ctl.check_output(f'findmnt -n -o FSTYPE -T {directory}') == 'fuse.ceph-fuse'
    run = f'{JOB_USER}/llmforge-train-{job}'

    # The archive's service, as its timer starts it: every complete checkpoint uploaded and verified.
    archiver.check_output('systemctl start llmforge-checkpoint-archive.service')
    archived = archiver.check_output('journalctl -u llmforge-checkpoint-archive.service -n 40 --no-pager -o cat')
    listing = archiver.check_output(f'llmforge-checkpoint-archive list {run}')
    print(f'archive:\n{archived}\nlist:\n{listing}')
    assert [int(step) for step in re.findall(rf'^{re.escape(run)} step (\d+): verified', listing, re.M)] == [10, 20]

    # The shared copies lost (the user removed them): step 10 comes back from S3 as the user's, complete.
    user.check_output(f'rm -rf {directory}/step_*')
    assert checkpoints(ctl, directory) == []
    restored = archiver.check_output(f'llmforge-restore {run} --step 10')
    print(f'restore:\n{restored}')
    assert checkpoints(ctl, directory) == [10]
    owners = ctl.check_output(f'find {directory}/step_00000010 -printf "%u\\n" | sort -u').split()
    assert owners == [JOB_USER], owners

    # Requeued by its user, the job resumes at the restored step and trains to its target.
    user.check_output(f'scontrol requeue {job}')
    assert wait_for(lambda: job_fields(ctl, job).get('Restarts') == '1', timeout=60, interval=1)
    state = wait_finished(ctl, job, timeout=600)
    assert state == 'COMPLETED', f'{state}\n{log_of(ctl, job)[-3000:]}'
    assert resumed_after(ctl, job, 1) == 10, log_of(ctl, job)[-3000:]
    assert checkpoints(ctl, directory) == [10, 20]
    timeline(f'job {job}, restored from S3 at step 10', [
        (f"run {index} {item['state'].lower()}", item[key]) for index, item in enumerate(runs(ctl, job))
        for key in ('start', 'end') if re.match(r'\d{4}-', item[key])])

    # The archived step 10 never replaces the newer step 20 without --force.
    older = archiver.run(f'llmforge-restore {run} --step 10')
    assert older.rc != 0 and '--force' in older.stdout + older.stderr, older.stdout + older.stderr
    assert checkpoints(ctl, directory) == [10, 20]


def wrong_cephx_key():
    """A well-formed cephx key (type 1, no creation time, 16 bytes) that the cluster never issued."""
    return base64.b64encode(struct.pack('<HIIH', 1, 0, 0, 16) + os.urandom(16)).decode()


def test_a_wrong_cephfs_key_is_refused_naming_it_and_nothing_changes(hosts):
    node = hosts[SECOND]
    before = digests(node, '/etc/ceph/ceph.conf', KEYRING, '/etc/fstab')
    result = run_playbook('-e', f'@{CEPH_VARS}', '-e', json.dumps({'ceph_client_key': wrong_cephx_key()}),
                          '--limit', SECOND, playbook='llmforge.cluster.storage')
    text = said(result)
    assert result.returncode != 0, text[-3000:]
    monitors = ', '.join(f'{host}:6789' for host in ceph_vars()['ceph_client_mon_hosts'])
    assert f'ceph_client_key: the monitors {monitors} refused client.llmforge' in text, text[-3000:]
    assert 'permission denied' in text, text[-3000:]
    assert digests(node, '/etc/ceph/ceph.conf', KEYRING, '/etc/fstab') == before
    assert node.check_output('findmnt -n -o FSTYPE /shared') == 'fuse.ceph-fuse'


@pytest.mark.parametrize('change, message', [
    ({'checkpoint_archive_bucket': 'llmforge-no-such-bucket', 'checkpoint_archive_create_bucket': False},
     'bucket llmforge-no-such-bucket: no such bucket at {url} (create it, or set create_bucket: true)'),
    ({'checkpoint_archive_endpoint_url': '{closed}'}, 'endpoint_url {closed}: cannot connect'),
])
def test_a_wrong_bucket_or_an_endpoint_that_does_not_answer_is_refused_before_the_archive_is_configured(hosts, change, message):
    archiver = hosts[ARCHIVER]
    url = ceph_vars()['checkpoint_archive_endpoint_url']
    closed = re.sub(r':\d+$', ':7481', url)  # the gateway's host, a port nothing listens on
    change = {name: value.format(closed=closed) if isinstance(value, str) else value for name, value in change.items()}
    before = digests(archiver, ARCHIVE_CONFIG, ARCHIVE_KEYS)
    result = run_playbook('-e', f'@{CEPH_VARS}', '-e', json.dumps(change), '--limit', ARCHIVER,
                          playbook='llmforge.cluster.storage')
    text = said(result)
    assert result.returncode != 0, text[-3000:]
    assert message.format(url=url, closed=closed) in text, text[-3000:]
    assert ceph_vars()['checkpoint_archive_secret_key'] not in text
    assert digests(archiver, ARCHIVE_CONFIG, ARCHIVE_KEYS) == before
    assert archiver.check_output('ls -A /tmp | grep -c llmforge-archive-trial || true') == '0'
