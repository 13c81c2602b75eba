# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Jobs in containers through Slurm's OCI support (srun --container, crun rootless) on the cluster.

The jobs are a directory user's (alice, logged in on the login node). The scenario publishes a busybox image tarball
and its checksum file on each GPU node (molecule/resources/prepare_containers.yml); the containers role unpacks it
into the bundle "test", the controllers serve oci.conf to the configless nodes, and the prolog gives each job user
its crun state directory.
"""

from __future__ import annotations

import json

import pytest

from conftest import NODES
from scenario_helpers import run_playbook, said

BUNDLE = '/var/lib/llmforge/containers/test'


@pytest.fixture(scope='module')
def job_user(user):
    """The directory user whose container jobs these are, logged in on the login node."""
    return user


def srun_as(session, command):
    return session.run(f'timeout 120 {command}')


def test_oci_conf_is_served_to_the_nodes(hosts, ctl):
    conf = ctl.file('/etc/slurm/oci.conf')
    assert conf.exists and conf.mode == 0o644
    assert 'RunTimeRun="crun --rootless=true --root=/run/user/%U/ run' in conf.content_string
    # Configless: slurmd fetched it with slurm.conf.
    for name in NODES:
        assert hosts[name].file('/run/slurm/conf/oci.conf').content_string == conf.content_string


def test_bundle_is_built_on_every_node(hosts):
    for name in NODES:
        config = json.loads(hosts[name].file(f'{BUNDLE}/config.json').content_string)
        assert [ns['type'] for ns in config['linux']['namespaces']] == ['user', 'mount']
        assert hosts[name].file(f'{BUNDLE}/rootfs/etc/os-release').contains('llmforge-container-test')
        assert hosts[name].file(f'{BUNDLE}/rootfs/run/slurm').is_directory


def test_two_node_job_runs_inside_the_container(job_user):
    result = srun_as(job_user, f'srun -N2 --container={BUNDLE} sh -c "echo \\$(hostname) \\$(grep ^ID= /etc/os-release)"')
    assert result.rc == 0, result.stdout + result.stderr
    lines = sorted(result.stdout.split('\n')[:-1])
    assert lines == sorted(f'{name} ID=llmforge-container-test' for name in NODES)


def test_container_sees_the_allocated_gpus_and_host_network(job_user):
    result = srun_as(job_user, f'srun -N1 --gres=gpu:2 --container={BUNDLE} sh -c '
                     '"ls /dev/nvidia0 /dev/nvidia1 && echo CUDA_VISIBLE_DEVICES=\\$CUDA_VISIBLE_DEVICES && ip -o link | grep -c eth"')
    assert result.rc == 0, result.stdout + result.stderr
    assert 'CUDA_VISIBLE_DEVICES=0,1' in result.stdout, result.stdout


def test_job_files_belong_to_the_user_on_the_host(hosts, job_user):
    result = srun_as(job_user, f'srun -N1 -w {NODES[0]} --container={BUNDLE} touch /tmp/ctr-owned')
    assert result.rc == 0, result.stdout + result.stderr
    # job_container/tmpfs gives each job its own /tmp; without it the file lands in the node's /tmp.
    owned = hosts[NODES[0]].run('find /tmp /var/tmp -name ctr-owned -printf "%u\\n" 2>/dev/null')
    assert owned.stdout.split() and set(owned.stdout.split()) == {job_user.name}, owned.stdout


def test_pyxis_without_package_source_is_refused_naming_the_variable():
    result = run_playbook('-e', '{"containers_pyxis_enabled": true}', '--tags', 'containers_preflight',
                          '--limit', NODES[0], playbook='llmforge.cluster.training')
    assert result.returncode != 0
    assert 'containers_pyxis_package_urls' in said(result)
    assert 'containers_pyxis_package_names' in said(result)


def test_bad_bundle_checksum_is_refused_naming_the_variable():
    result = run_playbook('-e', '{"containers_bundles": [{"name": "x", "src": "file:///srv/x.tar", "checksum": "md5:1"}]}',
                          '--tags', 'containers_preflight', '--limit', NODES[0],
                          playbook='llmforge.cluster.training')
    assert result.returncode != 0
    assert 'containers_bundles' in said(result)


def test_prolog_gives_the_job_user_a_runtime_directory(hosts, job_user):
    uid = job_user.check_output('id -u')
    hosts[NODES[1]].check_output(f'rm -rf /run/user/{uid}')
    result = srun_as(job_user, f'srun -N1 -w {NODES[1]} stat -c "%U %a" /run/user/{uid}')
    assert result.rc == 0, result.stdout + result.stderr
    assert result.stdout.split() == [job_user.name, '700']
