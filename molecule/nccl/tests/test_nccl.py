# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl role on a Debian 13 container with 8 simulated NDR rails and 2 RoCE storage NICs."""

from __future__ import annotations

import json

import pytest
import testinfra

from scenario_helpers import recap_of, run_playbook, said

NODE = 'nccl-1'
recap = recap_of(NODE)
CONF = '/etc/nccl.conf'
PINNED = '2.22.3-1-1'
COMPUTE_HCAS = '=' + ','.join(f'mlx5_{index}:1' for index in range(8))
TUNABLES = {
    'NCCL_IB_QPS_PER_CONNECTION': '4',
    'NCCL_NET_GDR_LEVEL': 'PXB',
    'NCCL_CROSS_NIC': '0',
    'NCCL_IB_TIMEOUT': '22',
    'NCCL_IB_RETRY_CNT': '7',
}


@pytest.fixture(scope='module')
def host():
    return testinfra.get_host(f'docker://{NODE}')


@pytest.fixture(scope='module')
def conf(host):
    """/etc/nccl.conf as {name: value}, comment lines left out, every line split at its first '='."""
    settings = {}
    for line in host.file(CONF).content_string.splitlines():
        if line.startswith('#') or not line.strip():
            continue
        name, _separator, value = line.partition('=')
        assert name not in settings, f'{name} is set twice'
        settings[name] = value
    return settings


def test_libnccl2_is_installed_at_the_pinned_version_and_held(host):
    status = host.check_output("dpkg-query -W -f='${Version} ${Status}' libnccl2")
    assert status == f'{PINNED} hold ok installed'


def test_headers_are_not_installed_without_nccl_dev(host):
    assert not host.package('libnccl-dev').is_installed


def test_the_contrib_non_free_source_was_added_because_the_image_lacked_it(host):
    sources = host.file('/etc/apt/sources.list.d/llmforge-nccl-nonfree.sources')
    assert sources.user == 'root' and sources.mode == 0o644
    lines = sources.content_string.splitlines()
    # ansible.builtin.deb822_repository's field order, which common's apt_source keeps: a source written by an
    # earlier release is left as it is.
    assert [line.split(':')[0] for line in lines] == ['Components', 'X-Repolib-Name', 'Signed-By', 'Suites', 'Types',
                                                      'URIs']
    assert lines[:3] == ['Components: contrib non-free non-free-firmware', 'X-Repolib-Name: llmforge-nccl-nonfree',
                         'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg']
    assert lines[3:5] == ['Suites: trixie trixie-updates', 'Types: deb'] and sources.content_string.endswith('\n')
    # Written as a text file: nothing was installed to write it.
    assert not host.package('python3-debian').is_installed
    assert PINNED in host.check_output('apt-cache policy libnccl2')


def test_nccl_conf_is_managed_and_world_readable(host):
    conf_file = host.file(CONF)
    assert conf_file.user == 'root' and conf_file.group == 'root' and conf_file.mode == 0o644
    assert conf_file.content_string.splitlines()[0] == '# Ansible managed'


def test_nccl_conf_holds_exactly_the_generated_values_and_tunables(host, conf):
    interface = host.check_output("ip -o -4 route show default | awk '{print $5}'")
    assert interface
    assert conf == {'NCCL_IB_HCA': COMPUTE_HCAS, 'NCCL_SOCKET_IFNAME': f'={interface}', **TUNABLES}


def test_storage_rails_are_excluded_and_infiniband_needs_no_gid_index(conf):
    assert 'mlx5_8' not in conf['NCCL_IB_HCA'] and 'mlx5_9' not in conf['NCCL_IB_HCA']
    assert 'NCCL_IB_GID_INDEX' not in conf


def test_no_topology_file_is_set(host, conf):
    assert 'NCCL_TOPO_FILE' not in conf
    assert 'NCCL_TOPO_FILE' not in host.file(CONF).content_string


def test_nccl_tests_are_not_built_without_cuda(host):
    assert not host.exists('nvcc')
    assert not host.file('/opt/nccl-tests').exists


def test_check_mode_on_the_converged_node_reports_no_change():
    result = run_playbook('--check', '--diff')
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counters = recap(result)
    assert counters['changed'] == 0 and counters['failed'] == 0, result.stdout[-3000:]
    assert 'nccl-tests skipped: CUDA is not installed on this node' in said(result)


def test_roce_ports_get_a_gid_index():
    extra = {'nccl_sysfs_root': '/srv/fake-sys/roce_2port', 'nccl_exclude_hcas': []}
    result = run_playbook('--check', '--diff', '--tags', 'nccl_configure', '-e', json.dumps(extra))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert '+NCCL_IB_HCA==mlx5_0:1,mlx5_1:1' in result.stdout.splitlines()
    assert '+NCCL_IB_GID_INDEX=3' in result.stdout.splitlines()


def test_missing_rdma_facts_are_named_and_nccl_ib_hca_is_the_fallback():
    extra = {'nccl_sysfs_root': '/srv/fake-sys/no_infiniband', 'nccl_ib_hca': ['mlx5_0:1', 'mlx5_1:1']}
    result = run_playbook('--check', '--diff', '--tags', 'nccl_configure', '-e', json.dumps(extra))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert 'no RDMA device under /srv/fake-sys/no_infiniband/class/infiniband' in said(result)
    assert 'Missing fact for NCCL_IB_HCA' in said(result)
    assert 'Falling back to nccl_ib_hca (mlx5_0:1, mlx5_1:1)' in said(result)
    assert '+NCCL_IB_HCA==mlx5_0:1,mlx5_1:1' in result.stdout.splitlines()


def test_preflight_refuses_a_topology_file_unless_allowed():
    extra = {'nccl_tunables': {'NCCL_TOPO_FILE': '/etc/nccl-topo.xml'}}
    refused = run_playbook('--check', '--tags', 'nccl_preflight', '-e', json.dumps(extra))
    assert refused.returncode != 0
    assert 'NCCL_TOPO_FILE is set in the tunables' in said(refused)
    allowed = run_playbook('--check', '--diff', '--tags', 'nccl_configure',
                           '-e', json.dumps({**extra, 'nccl_allow_topo_file': True}))
    assert allowed.returncode == 0, allowed.stdout[-3000:] + allowed.stderr[-3000:]
    assert '+NCCL_TOPO_FILE=/etc/nccl-topo.xml' in allowed.stdout.splitlines()
