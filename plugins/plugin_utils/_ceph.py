# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check and normalise the ceph_client role's cluster identity, client key and CephFS mounts.

Pure Python with no Ansible import; ``plugins/filter/ceph.py`` wraps these functions so a bad value fails the
play before anything changes, with a message naming the variable and the item.

A CephFS mount is made by the kernel client (fstab type ``ceph``, mount.ceph from ceph-common) where the kernel has
the module, or by ceph-fuse (fstab type ``fuse.ceph``, mount.fuse.ceph from ceph-fuse) where it has not, as in a
container. Both read the monitors from ceph.conf and the key from the client's keyring in /etc/ceph, so neither the
key nor a secret file name appears in fstab.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
import typing as t
import uuid

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lustre import mount_options, systemd_unit_name

DRIVERS = ('kernel', 'fuse')
DEFAULT_MOUNT_OPTIONS = ('_netdev', 'noatime')
CONF_PATH = '/etc/ceph/ceph.conf'
MON_PORT = 6789
# A cephx secret as `ceph auth get-key` prints it: base64 of 28 bytes (type 1 as 2 bytes, creation time 8, length 2,
# the 16-byte AES key).
KEY_BYTES = 28
_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,63}')
_FS_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9_.-]{0,63}')
_HOSTNAME = re.compile(r'(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*')
_PATH = re.compile(r'/[A-Za-z0-9_.@+/-]*')
_SIZE = re.compile(r'(?P<number>[0-9]{1,12})(?P<unit>[kKmMgG]?)')
_UNITS = {'': 1, 'k': 1024, 'm': 1024 ** 2, 'g': 1024 ** 3}


class CephConfigError(ValueError):
    """A value the role cannot use; the message names the variable and the item."""


def check_fsid(value: t.Any, variable: str = 'ceph_client_fsid') -> str:
    """The cluster's fsid (`ceph fsid`), a UUID, in lower case."""
    if isinstance(value, str) and re.fullmatch(r'[0-9A-Fa-f]{8}(-[0-9A-Fa-f]{4}){3}-[0-9A-Fa-f]{12}', value.strip()):
        return str(uuid.UUID(value.strip()))
    raise CephConfigError(f"{variable}: {value!r} is not a Ceph fsid: the cluster's UUID as `ceph fsid` prints it, "
                          'e.g. 2f7c4e52-6c1f-4c3a-9f0e-3b1d2a4c5e6f')


def check_mon_hosts(value: t.Any, variable: str = 'ceph_client_mon_hosts') -> list[str]:
    """The monitors as ``address[:port]`` items (IPv6 in brackets), each with its port made explicit."""
    if isinstance(value, str):
        value = [part for part in re.split(r'[,\s]+', value) if part]
    if not isinstance(value, (list, tuple)) or not value:
        raise CephConfigError(f'{variable} must be a non-empty list of monitor addresses such as '
                              f'["10.0.0.1", "10.0.0.2:6789"]; got {value!r}')
    result = []
    for index, item in enumerate(value):
        where = f'{variable}[{index}]'
        if not isinstance(item, str):
            raise CephConfigError(f'{where}: {item!r} is not a monitor address such as "10.0.0.1" or "mon1:6789"')
        match = re.fullmatch(r'\[(?P<v6>[0-9A-Fa-f:.]+)\](?::(?P<port6>[0-9]{1,5}))?|(?P<host>[^:\[\]]+)(?::(?P<port>[0-9]{1,5}))?',
                             item.strip())
        if not match:
            raise CephConfigError(f'{where}: {item!r} is not written address[:port] (an IPv6 address in brackets)')
        if match.group('v6'):
            host, port = match.group('v6'), match.group('port6')
        else:
            host, port = match.group('host'), match.group('port')
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            address = None
            if not _HOSTNAME.fullmatch(host):
                raise CephConfigError(f'{where}: {host!r} is neither an IP address nor a host name') from None
        port_number = int(port) if port else MON_PORT
        if not 0 < port_number < 65536:
            raise CephConfigError(f'{where}: port {port_number} is not a TCP port')
        shown = f'[{address}]' if address is not None and address.version == 6 else str(address or host)
        result.append(f'{shown}:{port_number}')
    if len(set(result)) != len(result):
        raise CephConfigError(f'{variable}: a monitor is listed twice ({", ".join(result)})')
    return result


def check_client_name(value: t.Any, variable: str = 'ceph_client_name') -> str:
    """The cephx client id, without its ``client.`` prefix (``llmforge`` for client.llmforge)."""
    if not isinstance(value, str) or value.startswith('client.') or not _NAME.fullmatch(value):
        raise CephConfigError(f'{variable}: {value!r} is not a cephx client id: the name after "client." '
                              '(letters, digits, _, . or -), e.g. llmforge for client.llmforge')
    return value


def check_key(value: t.Any, variable: str = 'ceph_client_key') -> str:
    """The client's cephx secret as `ceph auth get-key client.<name>` prints it."""
    if not isinstance(value, str) or not value.strip():
        raise CephConfigError(f'{variable} is empty: set the key `ceph auth get-key client.<name>` prints (keep it in '
                              'Ansible Vault)')
    text = value.strip()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b''
    # Never echo the value: it is a secret.
    if len(raw) != KEY_BYTES or raw[:2] != b'\x01\x00':
        raise CephConfigError(f'{variable} is not a cephx key: expected the base64 of {KEY_BYTES} bytes (40 characters '
                              'starting AQ) that `ceph auth get-key client.<name>` prints; got '
                              f'{len(text)} characters')
    return text


def size_bytes(value: t.Any, variable: str) -> int:
    """A size such as 64M, 4194304 or 1G, in bytes."""
    match = _SIZE.fullmatch(str(value).strip()) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if not match or int(match.group('number')) == 0:
        raise CephConfigError(f'{variable}: {value!r} is not a size such as 64M, 1G or a number of bytes')
    return int(match.group('number')) * _UNITS[match.group('unit').lower()]


def check_mounts(mounts: t.Any, client_name: str, mon_hosts: t.Sequence[str], driver: str,
                 default_options: t.Sequence[str] = DEFAULT_MOUNT_OPTIONS, automount: bool = True,
                 readahead: t.Any = '64M', variable: str = 'ceph_client_mounts') -> list[dict[str, t.Any]]:
    """Every CephFS mount, checked and completed with its fstab source, type and options for `driver`.

    kernel: ``<mon>,<mon>:<path>  ceph  name=<client>,fs=<fs_name>,rasize=<readahead>,...``;
    fuse: ``none  fuse.ceph  ceph.id=<client>,ceph.client_fs=<fs_name>,ceph.client_mountpoint=<path>,...``
    (ceph-fuse's own readahead is set in ceph.conf's [client] section).
    """
    if driver not in DRIVERS:
        raise CephConfigError(f'ceph_client_driver: {driver!r} must be auto, kernel or fuse')
    if not isinstance(mounts, (list, tuple)):
        raise CephConfigError(f'{variable} must be a list of {{fs_name, mount_point}} items; got {mounts!r}')
    readahead_bytes = size_bytes(readahead, 'ceph_client_readahead')
    result: list[dict[str, t.Any]] = []
    for index, mount in enumerate(mounts):
        where = f'{variable}[{index}]'
        if not isinstance(mount, dict):
            raise CephConfigError(f'{where}: {mount!r} is not a mapping with fs_name and mount_point')
        unknown = sorted(set(mount) - {'fs_name', 'path', 'mount_point', 'options', 'automount'})
        if unknown:
            raise CephConfigError(f'{where}: unknown keys {unknown}; allowed: fs_name, path, mount_point, options, automount')
        fs_name = mount.get('fs_name')
        if not isinstance(fs_name, str) or not _FS_NAME.fullmatch(fs_name):
            raise CephConfigError(f'{where}.fs_name: {fs_name!r} is not a CephFS name (`ceph fs ls` lists them)')
        path = mount.get('path', '/')
        if not isinstance(path, str) or not _PATH.fullmatch(path) or '/../' in f'{path}/' or '/./' in f'{path}/':
            raise CephConfigError(f'{where}.path: {path!r} is not an absolute path inside the file system '
                                  '(letters, digits, _ . @ + - and /)')
        path = '/' + '/'.join(part for part in path.split('/') if part)
        mount_point = mount.get('mount_point')
        if not isinstance(mount_point, str) or not mount_point.startswith('/') or mount_point.rstrip('/') == '' \
                or re.search(r'[\s,#]', mount_point):
            raise CephConfigError(f'{where}.mount_point: {mount_point!r} is not an absolute path other than / without '
                                  'spaces, commas or #')
        mount_point = '/' + '/'.join(part for part in mount_point.split('/') if part)
        if any(seen['mount_point'] == mount_point for seen in result):
            raise CephConfigError(f'{where}.mount_point: {mount_point} is mounted twice')
        options = mount_options(mount, where, default_options, automount, filesystem='CephFS', error=CephConfigError)
        named = sorted(option.split('=', 1)[0] for option in options
                       if option.split('=', 1)[0] in ('name', 'fs', 'secret', 'secretfile', 'mds_namespace')
                       or option.startswith('ceph.'))
        if named:
            raise CephConfigError(f'{where}.options: {named} are set by the role from ceph_client_name and fs_name '
                                  '(and the keyring); leave them out')
        if driver == 'kernel':
            own = [f'name={client_name}', f'fs={fs_name}']
            if not any(option.startswith('rasize=') for option in options):
                own.append(f'rasize={readahead_bytes}')
            src, fstype = f"{','.join(mon_hosts)}:{path}", 'ceph'
        else:
            own = [f'ceph.id={client_name}', f'ceph.client_fs={fs_name}', f'ceph.conf={CONF_PATH}']
            if path != '/':
                own.append(f'ceph.client_mountpoint={path}')
            src, fstype = 'none', 'fuse.ceph'
        chosen = own + options
        result.append({
            'fs_name': fs_name,
            'path': path,
            'mount_point': mount_point,
            'src': src,
            'fstype': fstype,
            'options': chosen,
            'opts': ','.join(chosen),
            'automount': 'x-systemd.automount' in chosen,
            'automount_unit': systemd_unit_name(mount_point, 'automount'),
            'mount_unit': systemd_unit_name(mount_point, 'mount'),
        })
    return result
