# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the ceph_client checks: fsid, monitors, client name and key, CephFS mounts, and their filters."""

from __future__ import annotations

import base64
import struct

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import ceph as ceph_filter
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _ceph
from ansible_collections.llmforge.cluster.plugins.plugin_utils._ceph import CephConfigError

FSID = '2f7c4e52-6c1f-4c3a-9f0e-3b1d2a4c5e6f'
MONS = ['10.0.0.1:6789', '10.0.0.2:6789']
# A cephx secret as Ceph encodes it: type 1 (AES), creation time (seconds, nanoseconds), length 16, the key.
KEY = base64.b64encode(struct.pack('<HIIH', 1, 1767225600, 0, 16) + bytes(range(16))).decode()


def mounts(*items, driver='fuse', **kwargs):
    return _ceph.check_mounts(list(items), 'llmforge', MONS, driver, **kwargs)


def test_a_key_as_ceph_prints_it_is_accepted():
    assert KEY.startswith('AQ') and len(KEY) == 40
    assert _ceph.check_key(f' {KEY}\n') == KEY


@pytest.mark.parametrize('key', ['', 'not base64!', base64.b64encode(b'x' * 28).decode(), KEY[:-4], None])
def test_a_bad_key_is_refused_naming_the_variable_without_echoing_it(key):
    with pytest.raises(CephConfigError, match='ceph_client_key') as caught:
        _ceph.check_key(key)
    if key:
        assert key not in str(caught.value)


@pytest.mark.parametrize('fsid', ['', 'abc', FSID[:-1], FSID + '0', 42])
def test_a_bad_fsid_is_refused(fsid):
    with pytest.raises(CephConfigError, match='ceph_client_fsid: .* is not a Ceph fsid'):
        _ceph.check_fsid(fsid)


def test_the_fsid_is_lower_cased():
    assert _ceph.check_fsid(FSID.upper()) == FSID


@pytest.mark.parametrize('given, expected', [
    (['10.0.0.1'], ['10.0.0.1:6789']),
    ('10.0.0.1, 10.0.0.2:3300', ['10.0.0.1:6789', '10.0.0.2:3300']),
    (['mon1.example.org:6789'], ['mon1.example.org:6789']),
    (['[fd00::1]:6789', '[fd00::2]'], ['[fd00::1]:6789', '[fd00::2]:6789']),
])
def test_monitors_get_their_port(given, expected):
    assert _ceph.check_mon_hosts(given) == expected


@pytest.mark.parametrize('given, said', [
    ([], 'non-empty list'),
    (['10.0.0.1:70000'], 'not a TCP port'),
    (['bad host'], 'neither an IP address nor a host name'),
    (['10.0.0.1', '10.0.0.1:6789'], 'listed twice'),
    ([7], 'is not a monitor address'),
])
def test_bad_monitors_are_refused_naming_the_item(given, said):
    with pytest.raises(CephConfigError, match=said) as caught:
        _ceph.check_mon_hosts(given)
    assert str(caught.value).startswith('ceph_client_mon_hosts')


@pytest.mark.parametrize('name', ['client.llmforge', '', 'a b', None])
def test_a_bad_client_name_is_refused(name):
    with pytest.raises(CephConfigError, match='ceph_client_name: .* is not a cephx client id'):
        _ceph.check_client_name(name)


def test_a_fuse_mount_reads_monitors_and_key_from_etc_ceph():
    [mount] = mounts({'fs_name': 'shared', 'mount_point': '/shared/'})
    assert mount['src'] == 'none' and mount['fstype'] == 'fuse.ceph'
    assert mount['opts'] == ('ceph.id=llmforge,ceph.client_fs=shared,ceph.conf=/etc/ceph/ceph.conf,_netdev,noatime,'
                             'x-systemd.automount')
    assert (mount['mount_point'], mount['automount_unit'], mount['mount_unit']) == \
        ('/shared', 'shared.automount', 'shared.mount')


def test_a_fuse_mount_of_a_subdirectory_names_it():
    [mount] = mounts({'fs_name': 'shared', 'path': '/datasets//', 'mount_point': '/datasets', 'automount': False})
    assert 'ceph.client_mountpoint=/datasets' in mount['options'] and not mount['automount']


def test_a_kernel_mount_names_the_monitors_the_fs_and_a_large_readahead():
    [mount] = mounts({'fs_name': 'shared', 'path': '/homes', 'mount_point': '/home'}, driver='kernel')
    assert mount['src'] == '10.0.0.1:6789,10.0.0.2:6789:/homes' and mount['fstype'] == 'ceph'
    assert mount['options'][:3] == ['name=llmforge', 'fs=shared', f'rasize={64 << 20}']
    [own] = mounts({'fs_name': 'shared', 'mount_point': '/x', 'options': ['_netdev', 'rasize=8388608']}, driver='kernel')
    assert [option for option in own['options'] if option.startswith('rasize')] == ['rasize=8388608']


@pytest.mark.parametrize('item, said', [
    ({'fs_name': 'shared'}, r'ceph_client_mounts\[0\].mount_point'),
    ({'fs_name': 'a b', 'mount_point': '/x'}, r'ceph_client_mounts\[0\].fs_name'),
    ({'fs_name': 'shared', 'mount_point': '/'}, r'mount_point: .* other than /'),
    ({'fs_name': 'shared', 'mount_point': '/x', 'path': 'rel'}, r'\.path: .* absolute path'),
    ({'fs_name': 'shared', 'mount_point': '/x', 'path': '/a/../etc'}, r'\.path'),
    ({'fs_name': 'shared', 'mount_point': '/x', 'options': ['noatime']}, 'must include _netdev: CephFS'),
    ({'fs_name': 'shared', 'mount_point': '/x', 'options': ['_netdev', 'secretfile=/k']}, 'set by the role'),
    ({'fs_name': 'shared', 'mount_point': '/x', 'options': ['_netdev', 'ceph.id=admin']}, 'set by the role'),
    ({'fs_name': 'shared', 'mount_point': '/x', 'server': 'y'}, 'unknown keys'),
])
def test_bad_mounts_are_refused_naming_the_item(item, said):
    with pytest.raises(CephConfigError, match=said):
        mounts(item)


def test_a_mount_point_used_twice_is_refused():
    with pytest.raises(CephConfigError, match=r'ceph_client_mounts\[1\].mount_point: /x is mounted twice'):
        mounts({'fs_name': 'a', 'mount_point': '/x'}, {'fs_name': 'b', 'mount_point': '/x/'})


def test_an_unknown_driver_and_a_bad_readahead_are_refused():
    with pytest.raises(CephConfigError, match='ceph_client_driver'):
        mounts({'fs_name': 'a', 'mount_point': '/x'}, driver='nfs')
    with pytest.raises(CephConfigError, match='ceph_client_readahead'):
        mounts({'fs_name': 'a', 'mount_point': '/x'}, readahead='lots')


def test_the_filters_raise_ansible_errors_naming_the_variable():
    cluster = ceph_filter.ceph_cluster({'fsid': FSID, 'mon_hosts': '10.0.0.1', 'name': 'llmforge', 'key': KEY})
    assert cluster == {'fsid': FSID, 'mon_hosts': ['10.0.0.1:6789'], 'name': 'llmforge', 'key': KEY}
    with pytest.raises(AnsibleFilterError, match='ceph_client_key'):
        ceph_filter.ceph_cluster({'fsid': FSID, 'mon_hosts': '10.0.0.1', 'name': 'llmforge', 'key': 'x'})
    [mount] = ceph_filter.ceph_mounts([{'fs_name': 'shared', 'mount_point': '/shared'}], 'llmforge', MONS, 'kernel')
    assert mount['fstype'] == 'ceph'
    with pytest.raises(AnsibleFilterError, match='ceph_client_mounts'):
        ceph_filter.ceph_mounts([{'mount_point': '/x'}], 'llmforge', MONS, 'fuse')
