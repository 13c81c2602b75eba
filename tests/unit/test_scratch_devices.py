# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scratch disk selection over `lsblk --json` fixtures: OS disk excluded, data detected, a second run recognised."""

from __future__ import annotations

import copy
import importlib.util
import json
import pathlib
import typing as t

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _scratch_devices as sd

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'lsblk'
DISCOVER = {'transports': ['nvme'], 'min_size': 100 * 1024 ** 3}


def tree(name: str) -> list[dict[str, t.Any]]:
    return sd.parse_lsblk((FIXTURES / f'{name}.json').read_text(encoding='utf-8'))


def choose(name: str, **kwargs: t.Any) -> dict[str, t.Any]:
    return sd.select(tree(name), **dict(DISCOVER, **kwargs))


def names(items: list[dict[str, t.Any]]) -> list[str]:
    return [item['name'] for item in items]


def reasons(result: dict[str, t.Any]) -> dict[str, str]:
    return {item['name']: item['reason'] for item in result['rejected']}


def failing(result: dict[str, t.Any]) -> list[tuple[str, str]]:
    return [(c['name'], c['subject']) for c in result['checks'] if c['status'] == 'fail']


def test_fixtures_are_what_the_generator_writes():
    spec = importlib.util.spec_from_file_location('make_lsblk_fixtures', FIXTURES / 'make_lsblk_fixtures.py')
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    for name, (release, devices) in generator.fixtures().items():
        assert (FIXTURES / f'{name}.json').read_text(encoding='utf-8') == generator.render(devices, release), name


def test_parse_normalises_types_and_both_mountpoints_spellings():
    old = tree('hgx8_sata_os')  # util-linux 2.38: [null] when unmounted
    new = tree('hgx8_scratch')  # util-linux 2.41: []
    assert old[2]['mountpoints'] == [] and new[1]['mountpoints'] == []
    assert old[2]['size'] == 3840755982336 and old[2]['rm'] is False and old[2]['tran'] == 'nvme'
    assert old[0]['children'][1]['children'][0]['mountpoints'] == ['/']


def test_parse_accepts_the_older_string_spelling_and_mountpoint_column():
    text = json.dumps({'blockdevices': [{'name': 'sdc', 'type': 'disk', 'size': '1000204886016', 'rm': '0',
                                         'ro': '1', 'mountpoint': None}]})
    [disk] = sd.parse_lsblk(text)
    assert disk['size'] == 1000204886016 and disk['rm'] is False and disk['ro'] is True
    assert disk['path'] == '/dev/sdc' and disk['mountpoints'] == [] and disk['children'] == []


@pytest.mark.parametrize('text, fragment', [
    ('{"blockdevices": [', 'malformed JSON'),
    ('{"devices": []}', 'no "blockdevices" list'),
    ('{"blockdevices": [{"type": "disk"}]}', 'has no name'),
    ('{"blockdevices": [{"name": "sda"}]}', 'sda has no type'),
    ('{"blockdevices": [{"name": "sda", "type": "disk", "size": "3.5T"}]}', "size is '3.5T', expected a number"),
    ('{"blockdevices": [{"name": "sda", "type": "disk", "rm": "maybe"}]}', "rm is 'maybe'"),
], ids=['truncated', 'no-list', 'no-name', 'no-type', 'human-size', 'bad-flag'])
def test_bad_lsblk_output_is_a_clear_error(text, fragment):
    with pytest.raises(sd.ScratchDevicesError, match=fragment.replace('[', r'\[').replace('(', r'\(')):
        sd.parse_lsblk(text)


@pytest.mark.parametrize('size', ['\u00b2', '1\u0663', '9' * 5000, '-1'],
                         ids=['superscript', 'arabic-indic', '5000-digits', 'negative'])
def test_a_size_string_of_hostile_digits_is_a_clear_error(size):
    text = json.dumps({'blockdevices': [{'name': 'sdc', 'type': 'disk', 'size': size}]})
    with pytest.raises(sd.ScratchDevicesError, match='sdc: size is .* expected a number of bytes'):
        sd.parse_lsblk(text)


def test_hgx_node_as_delivered_gets_a_raid0_over_the_eight_nvme():
    result = choose('hgx8_sata_os')
    assert result['healthy'] is True
    assert names(result['devices']) == [f'nvme{i}n1' for i in range(8)]
    assert {d['state'] for d in result['devices']} == {'blank'}
    assert result['os_disks'] == ['sda', 'sdb']
    assert reasons(result)['sda'] == 'OS disk: holds /, /boot/efi, [SWAP]'
    assert reasons(result)['sdb'] == 'OS disk: holds /, [SWAP]'
    scratch = result['scratch']
    assert scratch['actions'] == ['create_array', 'make_filesystem'] and scratch['wipe'] == []
    assert scratch['target'] == scratch['array'] == '/dev/md/scratch' and scratch['present'] is False
    assert scratch['members'] == [f'/dev/nvme{i}n1' for i in range(8)]


def test_the_os_disk_is_never_chosen_even_when_it_matches_every_pattern():
    result = choose('hgx8_sata_os', transports=[], min_size=0)
    assert 'sda' not in names(result['devices']) and 'sdb' not in names(result['devices'])
    result = choose('hgx8_dirty', model_regex='BOSS', force=True)
    assert result['devices'] == [] and result['os_disks'] == ['nvme8n1']
    assert reasons(result)['nvme8n1'] == 'OS disk: holds /, /boot, /boot/efi, [SWAP]'


def test_an_os_disk_is_found_from_the_mount_sources_when_lsblk_shows_no_mounts():
    roots = tree('hgx8_sata_os')
    for disk in roots:
        for node in sd._walk(disk):  # pylint: disable=protected-access
            node['mountpoints'] = []
    mounts = '/dev/md0 / ext4 rw,relatime 0 0\nproc /proc proc rw 0 0\n/dev/sda1 /boot/efi vfat rw 0 0\n'
    swaps = 'Filename\tType\tSize\tUsed\tPriority\n/dev/md1 partition 8388604 0 -2\n/swap.img file 1024 0 -3\n'
    sources = sd.system_sources(mounts, swaps)
    assert sources == ['/dev/md0', '/dev/sda1', '/dev/md1']
    result = sd.select(roots, sources=sources, **DISCOVER)
    assert result['os_disks'] == ['sda', 'sdb']
    assert reasons(result)['sdb'] == 'OS disk: /dev/md0, /dev/md1 is mounted as a system filesystem or swap'
    assert len(result['devices']) == 8


def test_device_mapper_sources_are_matched_by_their_mapper_path():
    roots = tree('hgx8_dirty')
    for node in sd._walk(roots[-1]):  # pylint: disable=protected-access
        node['mountpoints'] = []
    result = sd.select(roots, sources=['/dev/mapper/vg0-root'], model_regex='BOSS', **DISCOVER)
    assert result['os_disks'] == ['nvme8n1'] and result['devices'] == []


def test_disks_holding_data_are_refused_without_force_and_each_is_named():
    result = choose('hgx8_dirty')
    assert result['healthy'] is False and result['scratch']['actions'] == []
    refused = {r['name']: (r['reason'], r['forceable']) for r in result['rejected'] if r['refused']}
    assert refused == {
        'nvme1n1': ('holds a gpt partition table (1 partition(s))', True),
        'nvme3n1': ('holds a xfs filesystem labelled ckpt', True),
        'nvme5n1': ('holds the signature of md array gpu-old:data (not assembled)', True),
        'nvme6n1': ('in use by md126 (raid0)', False),
        'nvme7n1': ('in use by md126 (raid0)', False),
    }
    assert failing(result) == [('device_free', f'nvme{i}n1') for i in (1, 3, 5, 6, 7)]
    summary = sd.failure_summary(result['checks'])
    assert summary.startswith('5 scratch device check(s) failed: device_free (nvme1n1): /dev/nvme1n1 holds a gpt')


def test_force_wipes_data_but_never_takes_a_disk_in_use():
    result = choose('hgx8_dirty', force=True)
    assert failing(result) == [('device_free', 'nvme6n1'), ('device_free', 'nvme7n1')]
    assert result['scratch']['actions'] == []
    result = choose('hgx8_dirty', force=True, requested=[f'/dev/nvme{i}n1' for i in range(6)])
    assert result['healthy'] is True
    assert names(result['devices']) == [f'nvme{i}n1' for i in range(6)]
    assert result['scratch']['wipe'] == ['/dev/nvme1n1', '/dev/nvme3n1', '/dev/nvme5n1']
    assert result['scratch']['actions'] == ['wipe', 'create_array', 'make_filesystem']
    warned = [c['subject'] for c in result['checks'] if c['status'] == 'warn']
    assert warned == ['nvme1n1', 'nvme3n1', 'nvme5n1']


def test_requested_devices_replace_discovery_and_must_all_be_usable():
    result = choose('hgx8_sata_os', requested=['/dev/nvme2n1', '/dev/nvme3n1'], model_regex='^nothing$')
    assert result['healthy'] is True and names(result['devices']) == ['nvme2n1', 'nvme3n1']
    assert reasons(result)['nvme0n1'] == 'not in the requested devices'
    result = choose('hgx8_sata_os', requested=['/dev/nvme2n1', '/dev/sda', '/dev/sda2', '/dev/nvme9n1'])
    assert failing(result) == [('requested_device', '/dev/sda2'), ('requested_device', '/dev/nvme9n1'),
                               ('device_free', 'sda')]
    messages = [c['message'] for c in result['checks'] if c['status'] == 'fail']
    assert messages == ['/dev/sda2 is a part, not a whole disk', '/dev/nvme9n1 is not a block device lsblk shows',
                        '/dev/sda OS disk: holds /, /boot/efi, [SWAP]']


def test_the_second_run_recognises_our_array_and_does_nothing():
    result = choose('hgx8_scratch')
    assert result['healthy'] is True
    assert {d['state'] for d in result['devices']} == {'member'} and len(result['devices']) == 8
    scratch = result['scratch']
    assert scratch['present'] is True and scratch['mounted'] is True and scratch['actions'] == []
    assert scratch['target'] == scratch['array'] == '/dev/md127' and scratch['fstype'] == 'xfs'
    assert result['os_disks'] == ['sda']


def test_our_array_is_recognised_by_its_mount_point_or_mdadm_conf_when_the_label_names_another():
    roots = tree('hgx8_scratch')
    for disk in roots[1:]:
        disk['label'] = 'renamed-node:data'
    assert sd.select(roots, **DISCOVER)['scratch']['present'] is True
    for disk in roots[1:]:
        disk['children'][0]['mountpoints'] = []
    conf = ('# mdadm.conf\nARRAY /dev/md/0 metadata=1.2 name=scr-1:0 UUID=11111111:22222222:33333333:44444444\n'
            'ARRAY /dev/md/scratch metadata=1.2 name=scr-1:scratch UUID=cfec2308:34a461b7:aa991413:755eb0e6\n')
    uuids = sd.scratch_array_uuids(conf, 'scratch')
    assert uuids == ['cfec230834a461b7aa991413755eb0e6']
    assert sd.select(roots, scratch_uuids=uuids, **DISCOVER)['scratch']['actions'] == []
    refused = sd.select(roots, **DISCOVER)
    assert {r['reason'] for r in refused['rejected'] if r['refused']} == {'in use by md127 (raid0)'}


def test_our_array_unmounted_after_a_reboot_is_mounted_not_rebuilt():
    roots = tree('hgx8_scratch')
    for disk in roots[1:]:
        disk['children'][0]['mountpoints'] = []
    scratch = sd.select(roots, **DISCOVER)['scratch']
    assert scratch['present'] is True and scratch['mounted'] is False and scratch['actions'] == []


def test_our_array_not_assembled_is_assembled():
    roots = tree('hgx8_scratch')
    for disk in roots[1:]:
        disk['children'] = []
    scratch = sd.select(roots, **DISCOVER)['scratch']
    assert scratch['actions'] == ['assemble_array'] and scratch['target'] == '/dev/md/scratch'


def test_our_array_without_a_filesystem_gets_one_without_force():
    roots = tree('hgx8_scratch')
    for disk in roots[1:]:
        disk['children'][0].update(fstype='', uuid='', label='', mountpoints=[])
    assert sd.select(roots, **DISCOVER)['scratch']['actions'] == ['make_filesystem']


def test_a_new_disk_next_to_our_array_is_refused_because_raid0_cannot_grow():
    roots = tree('hgx8_scratch')
    extra = copy.deepcopy(roots[1])
    extra.update(name='nvme8n1', kname='nvme8n1', path='/dev/nvme8n1', fstype='', uuid='', label='', children=[])
    result = sd.select(roots + [extra], **DISCOVER)
    assert failing(result) == [('scratch_array', 'node')] and result['scratch']['actions'] == []
    message = [c['message'] for c in result['checks'] if c['status'] == 'fail'][0]
    assert message.startswith('the existing scratch on nvme0n1, ') and 'does not span nvme8n1' in message


def test_a_single_nvme_is_used_as_is_and_recognised_on_the_second_run():
    first = choose('single_nvme')
    assert names(first['devices']) == ['nvme1n1'] and first['os_disks'] == ['nvme0n1']
    assert first['scratch']['actions'] == ['make_filesystem']
    assert first['scratch']['target'] == '/dev/nvme1n1' and first['scratch']['array'] == ''
    second = choose('single_nvme_scratch')
    assert second['healthy'] is True and second['devices'][0]['state'] == 'filesystem'
    assert second['scratch']['actions'] == [] and second['scratch']['mounted'] is True


def test_our_single_disk_filesystem_of_another_type_needs_force():
    result = choose('single_nvme_scratch', fstype='ext4')
    assert reasons(result)['nvme1n1'] == 'holds our xfs scratch filesystem, but the wanted type is ext4'
    forced = choose('single_nvme_scratch', fstype='ext4', force=True)
    assert forced['scratch']['actions'] == ['wipe', 'make_filesystem']


def test_a_disk_mounted_elsewhere_is_refused_even_with_force():
    roots = tree('single_nvme')
    roots[1]['fstype'], roots[1]['mountpoints'] = 'ext4', ['/data']
    result = sd.select(roots, force=True, **DISCOVER)
    assert reasons(result)['nvme1n1'] == 'mounted at /data' and result['healthy'] is False


def test_a_node_with_only_its_os_disk_has_nothing_for_scratch():
    result = choose('nvme_os_only')
    assert result['devices'] == [] and result['healthy'] is False
    assert failing(result) == [('scratch_devices', 'node')]
    assert reasons(result) == {'loop0': 'not a disk (loop)', 'sr0': 'not a disk (rom)',
                               'nvme0n1': 'OS disk: holds /, /boot/efi, [SWAP]'}


@pytest.mark.parametrize('kwargs, reason', [
    ({'transports': ['sata']}, 'transport nvme is not one of sata'),
    ({'min_size': 4 * 10 ** 12}, '3840755982336 bytes is below the minimum size 4000000000000'),
    ({'model_regex': '^KIOXIA'}, "model 'SAMSUNG MZWLR3T8HBLS-00007' does not match '^KIOXIA'"),
])
def test_discovery_filters_say_why_a_disk_is_left_out(kwargs, reason):
    result = choose('hgx8_sata_os', **kwargs)
    assert reasons(result)['nvme0n1'] == reason and result['devices'] == []


def test_a_model_pattern_picks_the_data_disks():
    result = choose('hgx8_sata_os', transports=[], model_regex='MZWLR3T8')
    assert len(result['devices']) == 8


def test_a_bad_model_pattern_is_named():
    with pytest.raises(sd.ScratchDevicesError, match=r"model_regex '\(' is not a valid regular expression"):
        choose('hgx8_sata_os', model_regex='(')


def test_removable_and_read_only_disks_are_left_out():
    roots = tree('hgx8_sata_os')
    roots[2]['rm'], roots[3]['ro'] = True, True
    result = sd.select(roots, **DISCOVER)
    assert reasons(result)['nvme0n1'] == 'removable' and reasons(result)['nvme1n1'] == 'read-only'
    assert len(result['devices']) == 6


def test_proc_mount_fields_are_unescaped():
    assert sd.system_sources('/dev/disk\\040one / ext4 rw 0 0\n', '') == ['/dev/disk one']
