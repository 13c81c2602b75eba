# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An OCI bundle's rootfs: unpacked again only when the tarball changes, mount points never made through a link.

The helpers run on real tarballs in a temporary directory; the module runs through the `ansible` CLI.
"""

from __future__ import annotations

import hashlib
import io
import os
import pathlib
import stat
import subprocess
import tarfile

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _oci_rootfs as rootfs
from module_runner import run_module

MOUNT_POINTS = ['/run/slurm', '/var/run/slurm', '/proc', '/dev', '/sys', '/tmp']


def make_tarball(path: pathlib.Path, files: dict[str, str], links: dict[str, str] | None = None,
                 mode: str = 'w') -> str:
    """A rootfs tarball holding `files` (name: text) and symbolic `links` (name: target); its 'sha256:<hex>'."""
    with tarfile.open(path, mode) as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type = tarfile.SYMTYPE
            info.linkname = target
            archive.addfile(info)
    return 'sha256:' + hashlib.sha256(path.read_bytes()).hexdigest()


def run(argv: list[str]) -> tuple[int, str, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture()
def bundle(tmp_path: pathlib.Path) -> pathlib.Path:
    directory = tmp_path / 'bundle'
    directory.mkdir()
    return directory


def test_first_unpack_records_the_checksum_last(bundle, tmp_path):
    tarball = tmp_path / 'rootfs.tar.gz'
    checksum = make_tarball(tarball, {'usr/bin/busybox': 'bb', 'etc/os-release': 'ID=test\n'}, mode='w:gz')
    assert rootfs.recorded_checksum(str(bundle)) == ''
    assert rootfs.sha256_file(str(tarball)) == checksum
    rootfs.unpack(str(bundle), str(tarball), checksum, run)
    assert (bundle / 'rootfs' / 'usr' / 'bin' / 'busybox').read_text() == 'bb'
    assert rootfs.recorded_checksum(str(bundle)) == checksum
    assert stat.S_IMODE((bundle / 'rootfs').stat().st_mode) == 0o755
    assert stat.S_IMODE((bundle / rootfs.RECORD).stat().st_mode) == 0o644


def test_a_new_tarball_replaces_the_rootfs_whole(bundle, tmp_path):
    old, new = tmp_path / 'old.tar', tmp_path / 'new.tar'
    rootfs.unpack(str(bundle), str(old), make_tarball(old, {'etc/old': 'x', 'etc/kept': 'old'}), run)
    checksum = make_tarball(new, {'etc/kept': 'new'})
    rootfs.unpack(str(bundle), str(new), checksum, run)
    assert not (bundle / 'rootfs' / 'etc' / 'old').exists()
    assert (bundle / 'rootfs' / 'etc' / 'kept').read_text() == 'new'
    assert rootfs.recorded_checksum(str(bundle)) == checksum


def test_a_failed_unpack_leaves_no_record(bundle, tmp_path):
    good, broken = tmp_path / 'good.tar', tmp_path / 'broken.tar'
    rootfs.unpack(str(bundle), str(good), make_tarball(good, {'etc/x': 'x'}), run)
    broken.write_bytes(b'not a tarball at all' * 100)
    with pytest.raises(rootfs.RootfsError, match=r'tar could not unpack .*broken\.tar'):
        rootfs.unpack(str(bundle), str(broken), 'sha256:' + '0' * 64, run)
    assert rootfs.recorded_checksum(str(bundle)) == ''


def test_mount_points_skip_a_symbolic_link_out_of_the_rootfs(bundle, tmp_path):
    """Debian's /var/run -> /run: /var/run/slurm followed from outside would land in the host's /run."""
    tarball = tmp_path / 'debian.tar'
    rootfs.unpack(str(bundle), str(tarball), make_tarball(tarball, {'etc/x': 'x'}, links={'var/run': '/run'}), run)
    root = str(bundle / 'rootfs')
    os.makedirs(bundle / 'rootfs' / 'tmp', mode=0o1777)
    os.chmod(bundle / 'rootfs' / 'tmp', 0o1777)
    todo = rootfs.mount_points_to_make(root, rootfs.check_mount_points(MOUNT_POINTS))
    assert todo == [root + point for point in ['/run/slurm', '/proc', '/dev', '/sys', '/tmp']]
    rootfs.make_mount_points(root, todo)
    for point in ['/run', '/run/slurm', '/proc', '/tmp']:
        assert stat.S_IMODE(os.lstat(root + point).st_mode) == 0o755, point
    assert os.path.islink(root + '/var/run')
    assert rootfs.mount_points_to_make(root, MOUNT_POINTS) == []


@pytest.mark.parametrize('points, message', [
    (['run/slurm'], r"mount_points\[0\]: 'run/slurm' must be an absolute path"),
    (['/proc', '/data/../etc'], r"mount_points\[1\]: '/data/\.\./etc'"),
    (['/'], r"mount_points\[0\]: '/'"),
], ids=['relative', 'dotdot', 'root'])
def test_bad_mount_points_are_refused_by_index(points, message):
    with pytest.raises(rootfs.RootfsError, match=message):
        rootfs.check_mount_points(points)


def test_mount_points_are_normalised():
    assert rootfs.check_mount_points(['//data//sets/', '/tmp']) == ['/data/sets', '/tmp']


def test_module_unpacks_once_then_reports_nothing(bundle, tmp_path):
    tarball = tmp_path / 'rootfs.tar'
    checksum = make_tarball(tarball, {'usr/bin/busybox': 'bb'}, links={'var/run': '/run'})
    args = {'bundle': str(bundle), 'tarball': str(tarball), 'mount_points': MOUNT_POINTS}
    check = run_module('oci_rootfs', args, check=True)
    assert check['changed'] and check['unpacked'] and check['checksum'] == checksum, check
    assert not (bundle / 'rootfs').exists()
    first = run_module('oci_rootfs', args)
    assert first['changed'] and first['unpacked'], first
    assert str(bundle / 'rootfs' / 'run' / 'slurm') in first['mount_points_made']
    assert (bundle / rootfs.RECORD).read_text() == checksum + '\n'
    again = run_module('oci_rootfs', args)
    assert not again['changed'] and not again['unpacked'] and again['mount_points_made'] == [], again
    os.chmod(bundle / 'rootfs' / 'proc', 0o700)
    drift = run_module('oci_rootfs', args, check=True)
    assert drift['changed'] and not drift['unpacked'], drift
    assert drift['mount_points_made'] == [str(bundle / 'rootfs' / 'proc')]


def test_module_names_a_missing_tarball_outside_check_mode(bundle, tmp_path):
    args = {'bundle': str(bundle), 'tarball': str(tmp_path / 'missing.tar')}
    result = run_module('oci_rootfs', args)
    assert result.get('failed') and 'tarball:' in result['msg'] and 'missing.tar does not exist' in result['msg']
    check = run_module('oci_rootfs', args, check=True)
    assert not check.get('failed') and check['changed'] and check['checksum'] == '', check


def test_module_names_a_bad_mount_point(bundle, tmp_path):
    tarball = tmp_path / 'rootfs.tar'
    make_tarball(tarball, {'etc/x': 'x'})
    result = run_module('oci_rootfs', {'bundle': str(bundle), 'tarball': str(tarball), 'mount_points': ['proc']})
    assert result.get('failed') and result['msg'].startswith("mount_points[0]: 'proc'"), result


def test_module_in_check_mode_before_the_bundle_exists(tmp_path):
    """A first --check run: the directories and the tarball are still to come."""
    args = {'bundle': str(tmp_path / 'new'), 'tarball': str(tmp_path / 'new.tar'), 'mount_points': ['/proc']}
    check = run_module('oci_rootfs', args, check=True)
    assert not check.get('failed') and check['changed'] and check['unpacked'], check
    assert check['mount_points_made'] == [str(tmp_path / 'new' / 'rootfs' / 'proc')]
    result = run_module('oci_rootfs', args)
    assert result.get('failed') and result['msg'] == f"bundle: {tmp_path / 'new'} is not a directory", result
