# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Choose the local disks for the scratch filesystem from `lsblk --json` output.

Pure Python, no Ansible import: the scratch_devices module calls it, and the unit tests feed it
lsblk fixtures. It never touches a device; it says which disks to use, which it refused and why, and
what is left to do (wipe, create or assemble the md array, make the filesystem).
"""

from __future__ import annotations

import json
import os
import re
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _checks as ck
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc

# The columns the module asks lsblk for (util-linux 2.37 or later: MOUNTPOINTS lists every mount).
COLUMNS = ('NAME', 'KNAME', 'PATH', 'TYPE', 'SIZE', 'MODEL', 'SERIAL', 'TRAN', 'RM', 'RO', 'FSTYPE', 'PTTYPE',
           'UUID', 'LABEL', 'MOUNTPOINTS')
# A disk with anything of the running system on it is the OS disk, never scratch.
SYSTEM_MOUNTS = re.compile(r'^(/|/boot(/.*)?|/usr(/.*)?|/var(/.*)?|/etc|/opt|/home|/srv|\[SWAP\])$')
SYSTEM_MOUNT_POINTS = ('/', '/boot', '/boot/efi', '/usr', '/var', '/opt', '/home', '/srv')
# lsblk TYPE of an md array, by RAID level.
MD_TYPES = re.compile(r'^(raid[0-9]+|linear|md|multipath)$')
ACTIONS = ('wipe', 'create_array', 'assemble_array', 'make_filesystem')


class ScratchDevicesError(Exception):
    """Bad input or an unusable command result; the message says which and why."""


# ---------------------------------------------------------------------------------------------------------
# Parsing


def _flag(value: t.Any, field: str, name: str) -> bool:
    """lsblk 2.33+ prints booleans; older releases print "0"/"1"."""
    if isinstance(value, bool):
        return value
    if value in (None, '', '0', 0):
        return False
    if value in ('1', 1):
        return True
    raise ScratchDevicesError(f'lsblk: {name}: {field} is {value!r}, expected true/false')


def _size(value: t.Any, name: str) -> int:
    if isinstance(value, bool):
        raise ScratchDevicesError(f'lsblk: {name}: size is {value!r}, expected a number of bytes')
    if isinstance(value, int):
        return value
    # ASCII digits only: str.isdigit() also takes a superscript digit, which int() refuses.
    number = ck.whole_number(value)
    if number is not None:
        return number
    if value is None:
        return 0
    raise ScratchDevicesError(f'lsblk: {name}: size is {value!r}, expected a number of bytes (lsblk --bytes)')


def _text(value: t.Any) -> str:
    return '' if value is None else str(value).strip()


def _mountpoints(raw: t.Mapping[str, t.Any]) -> list[str]:
    """MOUNTPOINTS is [null] (2.37-2.38) or [] (2.39+) when unmounted; MOUNTPOINT alone before 2.37."""
    values = raw.get('mountpoints')
    if values is None:
        values = [raw.get('mountpoint')]
    if not isinstance(values, list):
        values = [values]
    return [str(value) for value in values if value]


def _device(raw: t.Any, parent: str) -> dict[str, t.Any]:
    if not isinstance(raw, dict) or not raw.get('name'):
        raise ScratchDevicesError(f'lsblk: a device under {parent} has no name: {str(raw)[:80]}')
    name = str(raw['name'])
    if not raw.get('type'):
        raise ScratchDevicesError(f'lsblk: {name} has no type column')
    kname = _text(raw.get('kname')) or name
    children = raw.get('children') or []
    if not isinstance(children, list):
        raise ScratchDevicesError(f'lsblk: {name}: children is not a list')
    return {
        'name': name,
        'kname': kname,
        'path': _text(raw.get('path')) or f'/dev/{name}',
        'type': _text(raw['type']),
        'size': _size(raw.get('size'), name),
        'model': _text(raw.get('model')),
        'serial': _text(raw.get('serial')),
        'tran': _text(raw.get('tran')),
        'rm': _flag(raw.get('rm'), 'rm', name),
        'ro': _flag(raw.get('ro'), 'ro', name),
        'fstype': _text(raw.get('fstype')),
        'pttype': _text(raw.get('pttype')),
        'uuid': _text(raw.get('uuid')),
        'label': _text(raw.get('label')),
        'mountpoints': _mountpoints(raw),
        'children': [_device(child, name) for child in children],
    }


def parse_lsblk(text: str) -> list[dict[str, t.Any]]:
    """`lsblk --json --bytes` output as a tree of normalised devices (sizes in bytes, flags as bools)."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ScratchDevicesError(f'lsblk printed malformed JSON: {err}') from None
    if not isinstance(data, dict) or not isinstance(data.get('blockdevices'), list):
        raise ScratchDevicesError('lsblk JSON has no "blockdevices" list')
    return [_device(raw, 'blockdevices') for raw in data['blockdevices']]


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash in octal (\\040)."""
    return re.sub(r'\\([0-7]{3})', lambda match: chr(int(match.group(1), 8)), field)


def system_sources(mounts_text: str, swaps_text: str) -> list[str]:
    """Devices the running system lives on: sources of /, /boot, /usr, /var ... in /proc/mounts, and swap."""
    sources = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and _unescape(fields[1]) in SYSTEM_MOUNT_POINTS and fields[0].startswith('/dev/'):
            sources.append(_unescape(fields[0]))
    for line in swaps_text.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 2 and fields[1] == 'partition':
            sources.append(_unescape(fields[0]))
    return sources


def _hex_uuid(uuid: str) -> str:
    """md UUIDs are 8:8:8:8 hex in mdadm.conf and 8-4-4-4-12 in blkid/lsblk: compare the bare digits."""
    return re.sub(r'[^0-9a-f]', '', uuid.lower())


def scratch_array_uuids(mdadm_conf: str, name: str) -> list[str]:
    """UUIDs of the ARRAY lines of mdadm.conf that carry our array name (name=<host>:<name> or /dev/md/<name>)."""
    uuids = []
    for line in mdadm_conf.splitlines():
        fields = line.split()
        if not fields or fields[0] != 'ARRAY':
            continue
        words = dict(field.split('=', 1) for field in fields[1:] if '=' in field)
        ours = words.get('name', '').split(':')[-1] == name or (len(fields) > 1 and fields[1] == f'/dev/md/{name}')
        if ours and words.get('UUID'):
            uuids.append(_hex_uuid(words['UUID']))
    return uuids


# ---------------------------------------------------------------------------------------------------------
# Judging one disk


def _walk(device: dict[str, t.Any]) -> t.Iterator[dict[str, t.Any]]:
    yield device
    for child in device['children']:
        yield from _walk(child)


def _holds(device: dict[str, t.Any], sources: t.Collection[str]) -> bool:
    """A mount source names this device by path, kernel name or device-mapper name."""
    names = {device['path'], f"/dev/{device['kname']}", f"/dev/{device['name']}", f"/dev/mapper/{device['name']}"}
    return bool(names & set(sources))


def os_disk_reason(disk: dict[str, t.Any], sources: t.Collection[str]) -> str:
    """Why this disk carries the running system ('' when it does not)."""
    mounts = sorted({mount for node in _walk(disk) for mount in node['mountpoints'] if SYSTEM_MOUNTS.match(mount)})
    if mounts:
        return 'OS disk: holds ' + ', '.join(mounts)
    held = sorted({node['path'] for node in _walk(disk) if _holds(node, sources)})
    if held:
        return 'OS disk: ' + ', '.join(held) + ' is mounted as a system filesystem or swap'
    return ''


def _name_of(label: str) -> str:
    """An md member's LABEL is the array name, <homehost>:<name>."""
    return label.split(':')[-1]


def _arrays(disk: dict[str, t.Any]) -> list[dict[str, t.Any]]:
    return [child for child in disk['children'] if MD_TYPES.match(child['type'])]


def _describe_data(disk: dict[str, t.Any]) -> str:
    """What a disk not in use holds ('' when blank): partition table, filesystem or RAID/LVM signature."""
    found = []
    if disk['pttype']:
        parts = [child for child in disk['children'] if child['type'] == 'part']
        found.append(f"a {disk['pttype']} partition table ({len(parts)} partition(s))")
    if disk['fstype'] == 'linux_raid_member':
        found.append(f"the signature of md array {disk['label'] or disk['uuid']} (not assembled)")
    elif disk['fstype'] == 'LVM2_member':
        found.append('an LVM physical volume')
    elif disk['fstype']:
        label = f" labelled {disk['label']}" if disk['label'] else ''
        found.append(f"a {disk['fstype']} filesystem{label}")
    for child in disk['children']:
        if child['type'] == 'part' and child['fstype']:
            found.append(f"{child['fstype']} on {child['name']}")
    return ', '.join(found)


def _in_use(disk: dict[str, t.Any], mount_point: str, ours: bool) -> str:
    """Why the disk is busy ('' when it is not): mounted, or held by an array, LVM or dm device not ours."""
    mounts = sorted({mount for node in _walk(disk) for mount in node['mountpoints']})
    foreign_mounts = [mount for mount in mounts if not (ours and mount == mount_point)]
    if foreign_mounts:
        return 'mounted at ' + ', '.join(foreign_mounts)
    holders = [node for node in _walk(disk) if node is not disk and node['type'] != 'part']
    if holders and not ours:
        return 'in use by ' + ', '.join(sorted({f"{node['name']} ({node['type']})" for node in holders}))
    return ''


def _summary(disk: dict[str, t.Any]) -> dict[str, t.Any]:
    return {key: disk[key] for key in ('name', 'path', 'size', 'model', 'serial', 'tran')}


def _disk_state(disk: dict[str, t.Any], name: str, fstype: str, mount_point: str,
                scratch_uuids: t.Collection[str]) -> tuple[str, str]:
    """(state, reason): 'blank', 'member' of our array, 'filesystem' ours on the bare disk, 'busy' or 'data'."""
    member = disk['fstype'] == 'linux_raid_member' and (
        _name_of(disk['label']) == name or (disk['uuid'] and _hex_uuid(disk['uuid']) in scratch_uuids)
        or any(mount_point in array['mountpoints'] for array in _arrays(disk)))
    bare_ours = (disk['fstype'] not in ('', 'linux_raid_member') and not disk['pttype']
                 and (disk['label'] == name or mount_point in disk['mountpoints']))
    busy = _in_use(disk, mount_point, member or bare_ours)
    if busy:
        return 'busy', busy
    if member:
        return 'member', f"member of our md array {disk['label'] or disk['uuid']}"
    if bare_ours:
        if disk['fstype'] != fstype:
            return 'data', f"holds our {disk['fstype']} scratch filesystem, but the wanted type is {fstype}"
        return 'filesystem', f"holds our {fstype} scratch filesystem"
    data = _describe_data(disk)
    if data:
        return 'data', 'holds ' + data
    return 'blank', 'blank'


# ---------------------------------------------------------------------------------------------------------
# Choosing


def _compile(pattern: str) -> t.Optional[t.Pattern[str]]:
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as err:
        raise ScratchDevicesError(f'model_regex {pattern!r} is not a valid regular expression: {err}') from None


def _filter_reason(disk: dict[str, t.Any], model: t.Optional[t.Pattern[str]], min_size: int,
                   transports: t.Collection[str]) -> str:
    """Why discovery leaves a disk out ('' when it is a candidate)."""
    if disk['rm']:
        return 'removable'
    if disk['ro']:
        return 'read-only'
    if transports and disk['tran'] not in transports:
        return f"transport {disk['tran'] or 'unknown'} is not one of {', '.join(transports)}"
    if disk['size'] < min_size:
        return f"{disk['size']} bytes is below the minimum size {min_size}"
    if model and not model.search(disk['model']):
        return f"model {disk['model'] or '(none)'!r} does not match {model.pattern!r}"
    return ''


def _find_requested(roots: list[dict[str, t.Any]], requested: t.Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """Requested paths mapped to the name of the whole disk they name; the ones not found, or not whole disks."""
    by_path = {}
    for root in roots:
        for node in _walk(root):
            for alias in (node['path'], f"/dev/{node['kname']}", f"/dev/{node['name']}"):
                by_path.setdefault(alias, node)
    found, problems = {}, []
    for path in requested:
        node = by_path.get(path)
        if node is None:
            problems.append(f'{path} is not a block device lsblk shows')
        elif node['type'] != 'disk' or node not in roots:
            problems.append(f"{path} is a {node['type']}, not a whole disk")
        else:
            found[node['name']] = path
    return found, problems


def select(roots: list[dict[str, t.Any]], *, requested: t.Sequence[str] = (), model_regex: str = '',
           min_size: int = 0, transports: t.Sequence[str] = (), name: str = 'scratch', fstype: str = 'xfs',
           mount_point: str = '/scratch', force: bool = False, sources: t.Collection[str] = (),
           scratch_uuids: t.Collection[str] = ()) -> dict[str, t.Any]:
    """Choose the scratch disks and say what is left to do.

    `roots` is parse_lsblk's tree; `requested` whole-disk paths replace discovery (model, size, transport);
    `sources` are the devices system_sources read from /proc; `scratch_uuids` the md UUIDs mdadm.conf
    records under our array name. Nothing is ever chosen from the OS disk or from a disk in use; a disk
    that holds a partition table, a filesystem or another array's signature is refused unless `force`.
    """
    model = _compile(model_regex)
    wanted, missing = _find_requested(roots, requested) if requested else ({}, [])
    checks = [ck.check('requested_device', ck.FAIL, problem.split()[0], 'a whole disk', None, problem)
              for problem in missing]
    chosen, rejected, os_disks = [], [], []
    for disk in roots:
        summary = _summary(disk)
        if disk['type'] != 'disk':
            rejected.append(dict(summary, reason=f"not a disk ({disk['type']})", refused=False))
            continue
        os_reason = os_disk_reason(disk, sources)
        if os_reason:
            os_disks.append(disk['name'])
        if requested:
            reason = '' if disk['name'] in wanted else 'not in the requested devices'
        else:
            reason = os_reason or _filter_reason(disk, model, min_size, transports)
        if reason:
            rejected.append(dict(summary, reason=reason, refused=False))
            continue
        state, why = ('busy', os_reason) if os_reason else _disk_state(disk, name, fstype, mount_point, scratch_uuids)
        if state == 'busy' or (state == 'data' and not force):
            rejected.append(dict(summary, reason=why, refused=True, forceable=state == 'data'))
            checks.append(ck.check('device_free', ck.FAIL, disk['name'], 'blank or our scratch', why,
                                   f"{disk['path']} {why}"))
            continue
        if state == 'data':
            state, why = 'wipe', why + '; wiped because force is set'
            checks.append(ck.check('device_free', ck.WARN, disk['name'], 'blank or our scratch', why,
                                   f"{disk['path']} {why}"))
        else:
            checks.append(ck.check('device_free', ck.PASS, disk['name'], 'blank or our scratch', why,
                                   f"{disk['path']} {why}"))
        chosen.append(dict(summary, state=state, disk=disk))
    scratch, plan_checks = _plan(chosen, name, fstype, mount_point)
    checks.extend(plan_checks)
    if not chosen and not any(c['status'] == ck.FAIL for c in checks):
        checks.append(ck.check('scratch_devices', ck.FAIL, 'node', 'at least one disk', 0,
                               'no disk qualifies for scratch: ' + (', '.join(
                                   f"{r['name']} ({r['reason']})" for r in rejected) or 'lsblk shows no disk')))
    elif chosen:
        checks.append(ck.check('scratch_devices', ck.PASS, 'node', 'at least one disk', len(chosen),
                               f'{len(chosen)} disk(s) for scratch: ' + ', '.join(c['name'] for c in chosen)))
    healthy = ck.healthy(checks)
    if not healthy:
        scratch = dict(scratch, actions=[], wipe=[])
    return {
        'devices': [{key: value for key, value in item.items() if key != 'disk'} for item in chosen],
        'rejected': rejected,
        'os_disks': os_disks,
        'scratch': scratch,
        'checks': checks,
        'healthy': healthy,
    }


def _plan(chosen: list[dict[str, t.Any]], name: str, fstype: str,
          mount_point: str) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    """What exists of our scratch and what is left to do, from the chosen disks' states."""
    plan = {'present': False, 'target': '', 'array': '', 'members': [c['path'] for c in chosen], 'fstype': '',
            'uuid': '', 'mounted': False, 'actions': [], 'wipe': [c['path'] for c in chosen if c['state'] == 'wipe']}
    if not chosen:
        return plan, []
    states = {c['state'] for c in chosen}
    existing = states & {'member', 'filesystem'}
    if existing and states - existing or len(existing) > 1 or ('filesystem' in states and len(chosen) > 1):
        ours = [c['name'] for c in chosen if c['state'] in existing]
        others = [c['name'] for c in chosen if c['state'] not in existing]
        message = (f"the existing scratch on {', '.join(ours)} does not span {', '.join(others) or 'the same disks'}: "
                   'a RAID0 cannot grow; stop it and wipe the disks to rebuild over all of them')
        return plan, [ck.check('scratch_array', ck.FAIL, 'node', 'one scratch over every chosen disk', ours, message)]
    if states == {'filesystem'}:
        disk = chosen[0]['disk']
        plan.update(present=True, target=disk['path'], fstype=disk['fstype'], uuid=disk['uuid'],
                    mounted=mount_point in disk['mountpoints'])
        return plan, [ck.check('scratch_array', ck.PASS, 'node', 'existing scratch', disk['path'],
                               f"{disk['path']} already holds the {fstype} scratch filesystem")]
    if states == {'member'}:
        return _plan_existing_array(plan, chosen, name, fstype, mount_point)
    plan['actions'] = (['wipe'] if plan['wipe'] else []) + (['create_array'] if len(chosen) > 1 else []) + [
        'make_filesystem']
    plan['target'] = f'/dev/md/{name}' if len(chosen) > 1 else chosen[0]['path']
    plan['array'] = plan['target'] if len(chosen) > 1 else ''
    return plan, []


def _plan_existing_array(plan: dict[str, t.Any], chosen: list[dict[str, t.Any]], name: str, fstype: str,
                         mount_point: str) -> tuple[dict[str, t.Any], list[dict[str, t.Any]]]:
    disks = [c['disk'] for c in chosen]
    uuids = {_hex_uuid(disk['uuid']) for disk in disks}
    if len(uuids) > 1:
        return plan, [ck.check('scratch_array', ck.FAIL, 'node', 'one scratch array', sorted(uuids),
                               f"the chosen disks are members of {len(uuids)} different md arrays named {name}")]
    assembled = {array['kname']: array for disk in disks for array in _arrays(disk)}
    if not assembled:
        plan.update(present=True, array=f'/dev/md/{name}', target=f'/dev/md/{name}', actions=['assemble_array'])
        return plan, [ck.check('scratch_array', ck.PASS, 'node', 'existing scratch', f'/dev/md/{name}',
                               f"our md array {name} exists on {len(disks)} disk(s) but is not assembled")]
    if len(assembled) > 1 or any(not _arrays(disk) for disk in disks):
        return plan, [ck.check('scratch_array', ck.FAIL, 'node', 'one assembled scratch array', sorted(assembled),
                               f"our md array {name} is assembled only partly ({', '.join(sorted(assembled))}): "
                               'check /proc/mdstat')]
    array = next(iter(assembled.values()))
    plan.update(present=True, array=array['path'], target=array['path'], fstype=array['fstype'],
                uuid=array['uuid'], mounted=mount_point in array['mountpoints'])
    if not array['fstype']:
        plan['actions'] = ['make_filesystem']
    elif array['fstype'] != fstype:
        return plan, [ck.check('scratch_array', ck.FAIL, 'node', fstype, array['fstype'],
                               f"our md array {array['path']} holds {array['fstype']}, not {fstype}: "
                               'reformat it by hand or set the filesystem type to match')]
    return plan, [ck.check('scratch_array', ck.PASS, 'node', 'existing scratch', array['path'],
                           f"{array['path']} ({array['type']} over {len(disks)} disk(s)) is our scratch array")]


def failure_summary(checks: t.Iterable[t.Mapping[str, t.Any]]) -> str:
    return ck.failure_summary(checks, 'scratch device')


# ---------------------------------------------------------------------------------------------------------
# Reading the node (the module's side; kept here so a node can run it without Ansible)


def run_lsblk(lsblk: str, timeout: float) -> str:
    argv = [lsblk, '--json', '--bytes', '--output', ','.join(COLUMNS)]
    try:
        done = proc.run(argv, timeout)
    except proc.CommandError as err:
        if err.reason == proc.TIMEOUT:
            raise ScratchDevicesError(f"'{' '.join(argv)}' did not finish within {timeout} s") from None
        if err.reason == proc.MISSING:
            raise ScratchDevicesError(f'{lsblk} not found: install util-linux') from None
        raise ScratchDevicesError(str(err)) from None
    if done.rc != 0:
        detail = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ScratchDevicesError(f"'{' '.join(argv)}' exited with {done.rc}: {detail[0] if detail else ''}")
    return done.stdout


def read_text(path: str) -> str:
    """A file's text, '' when it does not exist."""
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            return handle.read()
    except FileNotFoundError:
        return ''
    except OSError as err:
        raise ScratchDevicesError(f'cannot read {path}: {err.strerror}') from None


def gather(lsblk: str, timeout: float, proc_root: str, mdadm_conf_paths: t.Sequence[str],
           name: str) -> tuple[list[dict[str, t.Any]], list[str], list[str]]:
    """The lsblk tree, the system's mount sources (symlinks resolved) and the md UUIDs recorded as ours."""
    roots = parse_lsblk(run_lsblk(lsblk, timeout))
    sources = system_sources(read_text(os.path.join(proc_root, 'mounts')), read_text(os.path.join(proc_root, 'swaps')))
    sources = sorted(set(sources) | {os.path.realpath(source) for source in sources})
    uuids = [uuid for path in mdadm_conf_paths for uuid in scratch_array_uuids(read_text(path), name)]
    return roots, sources, uuids
