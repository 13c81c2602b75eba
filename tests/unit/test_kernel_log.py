# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel-log fault finder over every fixture of tests/fixtures/kernel_log: the Xid/SXid classes, each format and
event type, the drain reasons, reading since the last look (journal cursor, file offset) with faults kept until the
log starts over or they are cleared, the bounds (event cap, a 1,000,000-line log) and bad input."""

from __future__ import annotations

import json
import os
import pathlib
import re
import time
import tracemalloc
import typing as t

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog as catalog
from ansible_collections.llmforge.cluster.plugins.module_utils import _kernel_log as kl
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _nodecheck as nc

TESTS = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = TESTS / 'fixtures' / 'kernel_log'
SHIM = FIXTURES / 'journalctl-shim'
GPU = TESTS / 'fixtures' / 'gpu'
SMI_SHIM = GPU / 'nvidia-smi-shim'
XML = (GPU / 'hgx-h200-8' / 'smi_q.xml').read_text(encoding='utf-8')
# The 8-GPU HGX H200 fixture's GPUs as nvidia-smi names them: {00000000:18:00.0: 0, ...}.
GPUS = {bus_id: index for index, bus_id in enumerate(re.findall(r'<gpu id="([^"]+)"', XML))}
HCAS = ['0000:1a:00.0', '0000:5e:00.0']


def read(name: str) -> list[str]:
    return (FIXTURES / name).read_text(encoding='utf-8').splitlines()


def summary(events: list[dict]) -> list[tuple]:
    return [(event['type'], event['code'], event['device'], event['fatal'], event['node_fault'], event['tier'])
            for event in events]


def faults_of(events: list[dict]) -> list[dict]:
    return [event for event in events if event['node_fault']]


# --- the Xid and SXid classes of the GPU catalog ---------------------------------------------------------------------

def test_one_record_per_xid_code_every_field_set():
    assert len(catalog.XID_RECORDS) == len(catalog.XID_CLASSES), 'a code is listed twice'
    for record in catalog.XID_RECORDS:
        assert record.tier in catalog.TIERS and record.title and record.action and record.sources, record
        assert (record.tier == 'none') == (not record.node_fault), record
        assert not (record.hardware and not record.node_fault), record


@pytest.mark.parametrize('code', [8, 13, 31, 43, 45, 68, 137])
def test_application_xids_are_not_node_faults(code):
    record = catalog.xid_class(code)
    assert (record.node_fault, record.tier, record.hardware) == (False, 'none', False)


@pytest.mark.parametrize('code, tier, hardware', [
    (46, 'reset', False), (48, 'reset', True), (54, 'rma', True), (63, 'reset', True), (64, 'reset', True),
    (74, 'reset', True), (79, 'reboot', True), (92, 'reset', True), (94, 'reset', True), (95, 'reset', True),
    (110, 'reboot', True), (119, 'reset', False), (120, 'reset', False), (136, 'reset', True), (140, 'reset', True),
    (143, 'reset', False), (144, 'reset', True), (150, 'reset', True), (154, 'reboot', False), (155, 'reset', False),
])
def test_node_fault_xids_and_their_repair(code, tier, hardware):
    record = catalog.xid_class(code)
    assert (record.node_fault, record.tier, record.hardware) == (True, tier, hardware)
    assert record.sources.startswith("NVIDIA Xid catalog")


def test_an_unknown_xid_is_a_node_fault_that_needs_a_reboot_not_an_rma():
    record = catalog.xid_class(9999)
    assert (record.code, record.node_fault, record.tier, record.hardware) == (9999, True, 'reboot', False)
    assert 'unknown' in record.title


@pytest.mark.parametrize('text, node_fault, tier', [
    ('GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)', True, 'reboot'),
    ('GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)', True, 'reset'),
    ('GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)', False, 'none'),
    ('GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)', True, 'reset'),
    ('garbled', True, 'reboot'),
])
def test_xid_154_is_judged_by_the_action_it_names(text, node_fault, tier):
    record = catalog.xid154_class(text)
    assert (record.node_fault, record.tier) == (node_fault, tier)


def test_a_fatal_sxid_is_a_node_fault_a_non_fatal_one_is_not():
    fatal, non_fatal = catalog.sxid_class(24007, True), catalog.sxid_class(12028, False)
    assert (fatal.node_fault, fatal.tier, non_fatal.node_fault, non_fatal.tier) == (True, 'reboot', False, 'none')
    assert 'SXid' in fatal.sources and fatal.code == 24007


# --- every fixture -----------------------------------------------------------------------------------------------

EXPECTED = {
    'journal-short-iso-precise.txt': [
        ('xid', 13, 'GPU0', False, False, 'none'), ('xid', 13, 'GPU0', False, False, 'none'),
        ('xid', 43, 'GPU0', False, False, 'none'), ('xid', 31, 'GPU1', False, False, 'none'),
        ('xid', 79, 'GPU3', True, True, 'reboot'), ('xid', 48, 'GPU4', True, True, 'reset'),
        ('xid', 63, 'GPU4', True, True, 'reset'), ('xid', 94, 'GPU4', True, True, 'reset'),
        ('xid', 45, 'GPU4', False, False, 'none')],
    'journal-short.txt': [
        ('sxid', 12028, 'nvswitch1', False, False, 'none'), ('sxid', 24007, 'nvswitch2', True, True, 'reboot'),
        ('xid', 74, 'GPU6', True, True, 'reset'), ('xid', 45, 'GPU6', False, False, 'none')],
    'journal-short-precise.txt': [('xid', 119, 'GPU2', True, True, 'reset'), ('xid', 154, 'GPU2', True, True, 'reset')],
    'journal-short-iso.txt': [('xid', 95, 'GPU7', True, True, 'reset'), ('xid', 154, 'GPU7', True, True, 'reboot')],
    'dmesg-ctime.txt': [('aer', None, '0000:ab:00.0', True, True, 'reboot'),
                        ('fallen_off_bus', None, 'GPU1', True, True, 'reboot')],
    'dmesg-raw.txt': [('xid', 79, 'GPU6', True, True, 'reboot'), ('xid', 120, 'GPU2', True, True, 'reset'),
                      ('xid', 62, 'GPU2', True, True, 'reset'), ('xid', 177, 'GPU0', True, True, 'reboot')],
    'kmsg.txt': [('sxid', 20034, 'nvswitch0', True, True, 'reboot'), ('aer', None, '0000:1a:00.0', False, True, 'reboot'),
                 ('fallen_off_bus', None, 'GPU7', True, True, 'reboot'), ('xid', 92, 'GPU5', True, True, 'reset')],
    'journal-empty.txt': [],
}


@pytest.mark.parametrize('name', sorted(EXPECTED))
def test_every_fixture(name):
    lines = read(name)
    found = kl.scan(lines, GPUS, HCAS)
    assert summary(found['events']) == EXPECTED[name]
    assert found['lines_read'] == len(lines) and found['events_dropped'] == 0
    for event in found['events']:
        assert event['line'] and '\n' not in event['line'].split('\n')[0]
        if event['type'] != 'aer':  # an AER event names its PCI address, GPU or not
            assert event['gpu'] == (int(event['device'][3:]) if event['device'].startswith('GPU') else None)


def test_every_fixture_is_covered():
    assert {path.name for path in FIXTURES.glob('*.txt')} == set(EXPECTED)


@pytest.mark.parametrize('name, when, boot_seconds', [
    ('journal-short-iso-precise.txt', time.mktime((2026, 12, 5, 8, 3, 17, 0, 0, -1)) + 0.998214, None),
    ('journal-short-iso.txt', None, None),
    ('dmesg-raw.txt', None, 1843.310022),
    ('kmsg.txt', None, 2204.118822),
])
def test_stamps_give_a_wall_clock_or_seconds_since_boot(name, when, boot_seconds):
    event = next(event for event in kl.scan(read(name), GPUS, HCAS)['events'] if event['node_fault'])
    if name == 'journal-short-iso-precise.txt':
        # The fixture's stamps carry +00:00: compare in UTC.
        assert event['time'] == pytest.approx(1796457797.998214)
    elif when is None and boot_seconds is None:
        assert event['time'] == 1796467209.0
    else:
        assert event['time'] is None and event['boot_seconds'] == pytest.approx(boot_seconds)


@pytest.mark.parametrize('line, expected', [
    ('Dec  5 07:00:01 gpu1 kernel: x', (time.mktime((time.localtime().tm_year, 12, 5, 7, 0, 1, 0, 0, -1)), None)),
    ('Dec 05 07:00:01.250000 gpu1 kernel: x', (time.mktime((time.localtime().tm_year, 12, 5, 7, 0, 1, 0, 0, -1)) + 0.25,
                                               None)),
    ('2024-08-30T11:43:09+0200 gpu1 kernel: x', (1725010989.0, None)),
    ('2024-08-30T11:43:09,500000+02:00 x', (1725010989.5, None)),
    ('2024-08-30T09:43:09Z x', (1725010989.0, None)),
    ('[Fri Aug 30 11:43:09 2024] x', (time.mktime((2024, 8, 30, 11, 43, 9, 0, 0, -1)), None)),
    ('[    0.000000] x', (None, 0.0)),
    ('<3>[ 1843.308145] x', (None, 1843.308145)),
    ('6,1201,9734511,-;x', (None, 9.734511)),
    ('garbage', (None, None)),
    ('[Fri Foo 30 11:43:09 2024] x', (None, None)),
    ('2024-13-30T11:43:09Z x', (None, None)),
])
def test_stamp_of_each_format(line, expected):
    found = kl.stamp(line)
    if expected[0] is not None and line.startswith('Dec') and found[0] > time.time() + 86400:
        pytest.skip('the test ran in late December in a zone where this date is ahead')
    assert found == (pytest.approx(expected[0]) if expected[0] is not None else None, expected[1])


@pytest.mark.parametrize('text, key', [
    ('0000:18:00', (0, 0x18, 0, 0)),
    ('00000000:18:00.0', (0, 0x18, 0, 0)),
    ('0000:5D:00.1', (0, 0x5d, 0, 1)),
    ('18:00.0', (0, 0x18, 0, 0)),
    ('0001:c8:00.0', (1, 0xc8, 0, 0)),
    ('not a bus id', None),
    (None, None),
])
def test_pci_addresses_compare_numerically(text, key):
    assert kl.pci_key(text) == key


def test_the_xid_form_of_a_bus_id_finds_nvidia_smis_index():
    line = "NVRM: Xid (PCI:0000:5d:00): 48, pid=1, name=x, DBE"
    assert kl.scan([line], {'00000000:5D:00.0': 3})['events'][0]['gpu'] == 3
    assert kl.scan([line], {'0000:5d:00': 3})['events'][0]['device'] == 'GPU3'
    unknown = kl.scan([line])['events'][0]
    assert (unknown['gpu'], unknown['device'], unknown['pci']) == (None, '0000:5d:00.0', '0000:5d:00')


# --- one event per fault -----------------------------------------------------------------------------------------

def test_the_three_line_message_is_one_event_per_gpu():
    found = kl.scan(read('dmesg-ctime.txt'), GPUS, HCAS)
    (event,) = [event for event in found['events'] if event['type'] == 'fallen_off_bus']
    assert event['line'].startswith('[Sat Dec  5 11:07:40 2026] NVRM: The NVIDIA GPU 0000:2a:00.0')
    assert event['line'].endswith('NVRM: fallen off the bus and is not responding to commands.')
    assert event['time'] == time.mktime((2026, 12, 5, 11, 7, 40, 0, 0, -1))


def test_an_xid_79_and_the_fallen_off_the_bus_lines_of_one_gpu_are_one_event_either_order():
    before = kl.scan(read('dmesg-raw.txt'), GPUS)['events']
    assert [event['type'] for event in before if event['gpu'] == 6] == ['xid']
    after = kl.scan(read('journal-short-iso-precise.txt'), GPUS)['events']
    assert [(event['type'], event['code']) for event in after if event['gpu'] == 3] == [('xid', 79)]


def test_one_line_forms_of_the_fallen_off_the_bus_message():
    lines = ['[ 5.0] NVRM: The NVIDIA GPU 0000:05:00.0 installed in this system has fallen off the bus and is not '
             'responding to commands.',
             '[ 6.0] NVRM: GPU at PCI:0000:18:00: GPU-cd57429b-a4d9-917d-72d6-1d9b6c4f6a3a',
             '[ 6.1] NVRM: GPU at 0000:18:00.0 has fallen off the bus.',
             '[ 7.0] NVRM: fallen off the bus and is not responding to commands.']  # no GPU named: nothing
    found = kl.scan(lines, {'00000000:18:00.0': 0})
    assert [(event['type'], event['device']) for event in found['events']] == [
        ('fallen_off_bus', '0000:05:00.0'), ('fallen_off_bus', 'GPU0')]


def test_the_start_of_the_message_is_forgotten_after_a_window_of_lines():
    lines = ['[ 1.0] NVRM: The NVIDIA GPU 0000:18:00.0'] + [f'[ 1.{n}] other' for n in range(kl.WINDOW + 1)] + [
        '[ 2.0] NVRM: fallen off the bus and is not responding to commands.']
    assert kl.scan(lines, GPUS)['events'] == []


def test_sxid_detail_lines_fold_into_their_event():
    found = kl.scan(read('journal-short.txt'), GPUS)
    assert [event['line'].split(': SXid ')[1] for event in found['events'] if event['type'] == 'sxid'] == [
        '(PCI:0000:06:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)',
        '(PCI:0000:07:00.0): 24007, Fatal, Link 30 sourcetrack timeout error (First)']


def test_pcie_errors_count_only_on_the_nodes_gpus_and_hcas():
    found = kl.scan(read('dmesg-ctime.txt'), GPUS, HCAS)
    assert [event['pci'] for event in found['events'] if event['type'] == 'aer'] == ['0000:ab:00.0']
    assert found['corrected_aer'] == 1  # the corrected error of GPU0 (two lines: one report)
    assert kl.scan(read('dmesg-ctime.txt'), GPUS, HCAS + ['0000:c1:00.0'])['events'][1]['pci'] == '0000:c1:00.0'
    assert [event for event in kl.scan(read('kmsg.txt'), GPUS)['events'] if event['type'] == 'aer'] == []
    assert kl.scan(read('dmesg-ctime.txt'))['corrected_aer'] == 0


@pytest.mark.parametrize('line', [
    'pcieport 0000:17:01.0: AER: Uncorrectable (Fatal) error message received from 0000:18:00.0',
    'pcieport 0000:17:01.0: AER: Multiple Uncorrected (Fatal) error received: 0000:18:00.0',
    'pcieport 0000:17:01.0: AER: Uncorrected (Fatal) error received: id=1800',
    'nvidia 0000:18:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Receiver ID)',
    'nvidia 0000:18:00.0: AER: PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, (Receiver ID)',
])
def test_aer_wordings_of_older_and_newer_kernels(line):
    (event,) = kl.scan([line], GPUS)['events']
    assert (event['type'], event['gpu'], event['fatal'], event['pci']) == ('aer', 0, True, '0000:18:00.0')


def test_a_non_fatal_pcie_error_on_a_gpu_needs_a_reset_on_an_hca_a_reboot():
    gpu = kl.scan(['nvidia 0000:18:00.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer'],
                  GPUS)['events'][0]
    hca = kl.scan(read('kmsg.txt'), GPUS, HCAS)['events'][1]
    assert (gpu['tier'], gpu['fatal'], hca['tier'], hca['fatal']) == ('reset', False, 'reboot', False)


def test_kmsg_continuation_lines_are_not_records():
    found = kl.scan(read('kmsg.txt'), GPUS, HCAS)
    assert found['lines_read'] == 15 and all(' SUBSYSTEM=' not in event['line'] for event in found['events'])


# --- checks and drain reasons ------------------------------------------------------------------------------------

@pytest.mark.parametrize('name, reason', [
    ('journal-short-iso-precise.txt', 'llmforge: xid GPU3 79'),
    ('journal-short.txt', 'llmforge: sxid nvswitch2 24007'),
    ('dmesg-ctime.txt', 'llmforge: fallen_off_bus GPU1'),
    ('dmesg-raw.txt', 'llmforge: xid GPU6 79'),
    ('kmsg.txt', 'llmforge: fallen_off_bus GPU7'),
])
def test_drain_reason_of_each_fixture(name, reason):
    events = kl.scan(read(name), GPUS, HCAS)['events']
    checks = sorted(kl.judge(faults_of(events), events), key=lambda item: item['status'] != 'fail')
    assert drain.drain_reason(checks) == reason


@pytest.mark.parametrize('events, reason', [
    ([{'type': 'xid', 'code': 79, 'device': 'GPU3'}], 'llmforge: xid GPU3 79'),
    ([{'type': 'xid', 'code': 94, 'device': 'GPU3'}, {'type': 'xid', 'code': 48, 'device': 'GPU3'}],
     'llmforge: xid GPU3 48,94'),
    ([{'type': 'sxid', 'code': 12028, 'device': 'nvswitch1'}], 'llmforge: sxid nvswitch1 12028'),
    ([{'type': 'aer', 'code': None, 'device': '0000:18:00.0', 'fatal': True}], 'llmforge: aer 0000:18:00.0 fatal'),
    ([{'type': 'fallen_off_bus', 'code': None, 'device': 'GPU3'}], 'llmforge: fallen_off_bus GPU3'),
])
def test_the_shared_drain_reason_of_each_kind(events, reason):
    faults = [dict({'fatal': True, 'node_fault': True, 'tier': 'reboot', 'hardware': False, 'title': 't',
                    'pci': '0000:18:00', 'time': None, 'boot_seconds': None}, **event) for event in events]
    checks = kl.judge(faults)
    assert drain.drain_reason(checks) == reason
    failing = [item for item in checks if item['status'] == 'fail']
    assert len(failing) == 1, 'one check per kind and device: a metric series each'


def test_application_xids_warn_and_leave_the_node_healthy():
    events = kl.scan(read('journal-short-iso-precise.txt')[:10], GPUS)['events']
    checks = kl.judge(faults_of(events), events)
    assert [(c['status'], c['name'], c['subject'], c['actual']) for c in checks if c['status'] != 'pass'] == [
        ('warn', 'xid', 'GPU0', '13,43'), ('warn', 'xid', 'GPU1', '31')]
    assert drain.drain_reason(checks) == ''
    assert [c['name'] for c in checks if c['status'] == 'pass'] == list(kl.CHECK_NAMES)


def test_a_clean_log_passes_every_kind_so_our_drain_is_lifted():
    checks = kl.judge([], [])
    assert [(c['name'], c['status'], c['subject']) for c in checks] == [
        (name, 'pass', 'node') for name in kl.CHECK_NAMES]
    drained = {'name': 'gpu1', 'state': 'IDLE+DRAIN', 'reason': 'llmforge: xid GPU3 79', 'drained': True}
    assert drain.drain_action(checks, drained)['action'] == 'resume'


# --- bounds ------------------------------------------------------------------------------------------------------

def test_the_event_cap_keeps_node_faults_and_counts_the_rest():
    lines = [f'[ {n}.0] NVRM: Xid (PCI:0000:18:00): 13, pid={n}, name=python3, Out Of Range Address' for n in range(10)]
    lines.append("[ 99.0] NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")
    lines += [f'[ {n}.5] NVRM: Xid (PCI:0000:18:00): 31, pid={n}, name=python3, MMU Fault' for n in range(100, 105)]
    found = kl.scan(lines, GPUS, max_events=5)
    assert len(found['events']) == 5 and found['events_dropped'] == 11
    assert [event['code'] for event in found['events']] == [13, 13, 13, 13, 79]
    full_of_faults = kl.scan([lines[10].replace('5d', f'{n:02x}') for n in range(20)], max_events=3)
    assert len(full_of_faults['events']) == 3 and full_of_faults['events_dropped'] == 17
    assert kl.scan(lines, GPUS, max_events=0) == {'events': [], 'events_dropped': 16, 'lines_read': 16,
                                                  'corrected_aer': 0, 'cursor': None}


def test_long_lines_are_cut():
    line = "[ 1.0] NVRM: Xid (PCI:0000:18:00): 48, pid=1, name=x, " + 'x' * 100000
    (event,) = kl.scan([line], GPUS)['events']
    assert len(event['line']) == kl.MAX_LINE


def test_since_skips_events_logged_before_it_and_keeps_those_without_a_clock():
    lines = read('journal-short-iso-precise.txt') + read('dmesg-raw.txt')
    since = 1796458000.0  # 2026-12-05T08:06:40Z: after the Xid 79 on GPU3, before the Xid 48 on GPU4
    found = kl.scan(lines, GPUS, since=since)
    assert [(event['code'], event['device']) for event in found['events']] == [
        (48, 'GPU4'), (63, 'GPU4'), (94, 'GPU4'), (45, 'GPU4'), (79, 'GPU6'), (120, 'GPU2'), (62, 'GPU2'), (177, 'GPU0')]


def million_lines(events: int = 250, total: int = 1_000_000) -> t.Iterator[str]:
    """A raw dmesg log of `total` lines with `events` Xid lines spread over it (application faults and node faults
    on every GPU), built from one period of prepared lines so that making it costs next to nothing."""
    every = total // events
    period = []
    for number in range(every):
        stamp = f'[{number / 100:12.6f}] '
        if number % 3 == 0:
            period.append(f'{stamp}NVRM: nvidia-smi[{number}] GPU 0000:18:00.0 query took longer than expected')
        else:
            period.append(f'{stamp}audit: type=1400 audit({number}.123:{number}): apparmor="DENIED" operation="open"')
    xids = [f'[{n:12.6f}] NVRM: Xid (PCI:0000:{gpu}:00): {code}, pid={n}, name=python3, text'
            for n, (gpu, code) in enumerate(zip(('18', '2a', '3a', '5d', '9a', 'ab', 'ba', 'db') * 5,
                                                (13, 31, 43, 48, 94) * 8))]
    for round_ in range(events):
        yield xids[round_ % len(xids)]
        yield from period[1:]


def test_a_million_line_log_is_read_in_bounded_memory():
    tracemalloc.start()
    try:
        found = kl.scan(million_lines(), GPUS, HCAS)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found['lines_read'] == 1_000_000
    assert len(found['events']) == 250 and found['events_dropped'] == 0
    # The log is ~90 MB of text; what is kept is 250 events.
    assert peak < 4 * 1024 * 1024, f'peak {peak / 1e6:.1f} MB'


# --- reading since the last look ---------------------------------------------------------------------------------

@pytest.fixture(name='node')
def fixture_node(tmp_path):
    """A node: the journalctl and nvidia-smi shims, a boot id, a sysfs tree with two HCAs, a state file path."""
    boot_id = tmp_path / 'boot_id'
    boot_id.write_text('e64ee1b5-80f0-4dc2-83c8-a3d36cfb8ce3\n', encoding='utf-8')
    smi = tmp_path / 'nvidia-smi'
    smi.write_text(f'#!/bin/sh\nNVIDIA_SMI_SHIM_DIR={GPU / "hgx-h200-8"} exec {SMI_SHIM} "$@"\n', encoding='utf-8')
    smi.chmod(0o755)
    sysfs = tmp_path / 'sys'
    real = sysfs / 'devices' / 'pci0000:17' / '0000:17:01.0' / '0000:1a:00.0'
    real.mkdir(parents=True)
    (sysfs / 'class' / 'infiniband' / 'mlx5_0').mkdir(parents=True)
    (sysfs / 'class' / 'infiniband' / 'mlx5_0' / 'device').symlink_to(real)
    (sysfs / 'class' / 'infiniband' / 'mlx5_3' / 'device').mkdir(parents=True)
    (sysfs / 'class' / 'infiniband' / 'mlx5_3' / 'device' / 'uevent').write_text(
        'DRIVER=mlx5_core\nPCI_CLASS=20000\nPCI_SLOT_NAME=0000:5e:00.0\n', encoding='utf-8')
    journal = tmp_path / 'journal.txt'
    journal.write_text('', encoding='utf-8')
    calls = tmp_path / 'calls'

    class Node:
        path = tmp_path
        state = tmp_path / 'state' / 'kernel_faults.json'
        settings = {'journalctl': str(SHIM), 'boot_id_file': str(boot_id), 'nvidia_smi': str(smi),
                    'sysfs_root': str(sysfs), 'state_file': str(tmp_path / 'state' / 'kernel_faults.json')}

        def __init__(self):
            self.boot_id = boot_id
            self.journal = journal
            self.calls = calls

        def look(self, monkeypatch=None, **settings):
            return kl.read_faults(dict(self.settings, **settings), 10)

        def append(self, *names):
            with open(journal, 'a', encoding='utf-8') as handle:
                for name in names:
                    handle.write((FIXTURES / name).read_text(encoding='utf-8'))

        def args(self):
            return calls.read_text(encoding='utf-8').splitlines() if calls.exists() else []

    return Node()


@pytest.fixture(name='shim_env')
def fixture_shim_env(node, monkeypatch):
    monkeypatch.setenv('JOURNALCTL_SHIM_JOURNAL', str(node.journal))
    monkeypatch.setenv('JOURNALCTL_SHIM_LOG', str(node.calls))
    return node


def test_hcas_are_read_from_sysfs_links_and_uevent(node):
    assert kl.sysfs_hcas(node.settings['sysfs_root']) == ['0000:1a:00.0', '0000:5e:00.0']
    assert kl.sysfs_hcas(str(node.path / 'nowhere')) == []


def test_gpu_indexes_from_nvidia_smi_then_sysfs(node):
    assert kl.smi_gpus(node.settings['nvidia_smi'], 10) == GPUS
    with pytest.raises(kl.KernelLogError, match='not found'):
        kl.smi_gpus('no-such-nvidia-smi', 10)
    drivers = node.path / 'sys' / 'bus' / 'pci' / 'drivers' / 'nvidia'
    drivers.mkdir(parents=True)
    for name in ('0000:5d:00.0', '0000:18:00.0', 'bind', 'new_id', 'module'):
        (drivers / name).mkdir()
    assert kl.sysfs_gpus(str(node.path / 'sys')) == {'0000:18:00.0': 0, '0000:5d:00.0': 1}


def test_the_journal_is_read_since_the_last_look_and_faults_persist(shim_env):
    node = shim_env
    node.append('journal-short-iso-precise.txt')
    first = node.look(source='journal')
    assert first['reason'] == 'llmforge: xid GPU3 79' and not first['healthy']
    assert first['cursor'] == 's=shim;i=18' and first['lines_read'] == 21
    assert [(f['code'], f['device']) for f in first['faults']] == [
        (79, 'GPU3'), (48, 'GPU4'), (63, 'GPU4'), (94, 'GPU4')]
    second = node.look(source='journal')
    assert second['events'] == [] and second['lines_read'] == 1  # -- No entries --
    assert not second['healthy'] and second['reason'] == 'llmforge: xid GPU3 79', 'faults outlive the look that saw them'
    assert second['cursor'] == 's=shim;i=18'
    node.append('journal-short-iso.txt')
    third = node.look(source='journal')
    assert [event['code'] for event in third['events']] == [95, 154] and third['cursor'] == 's=shim;i=20'
    assert [f['device'] for f in third['faults']] == ['GPU3', 'GPU4', 'GPU4', 'GPU4', 'GPU7', 'GPU7']
    assert node.args() == [
        '-k -o short-iso-precise --no-pager --show-cursor -b',
        '-k -o short-iso-precise --no-pager --show-cursor -b --after-cursor s=shim;i=18',
        '-k -o short-iso-precise --no-pager --show-cursor -b --after-cursor s=shim;i=18']
    state = json.loads(node.state.read_text(encoding='utf-8'))
    assert (state['source'], state['log'], state['cursor']) == ('journal', 'e64ee1b5-80f0-4dc2-83c8-a3d36cfb8ce3',
                                                                's=shim;i=20')
    assert oct(node.state.stat().st_mode & 0o777) == '0o644'


def test_a_new_boot_forgets_the_faults_and_the_cursor(shim_env):
    node = shim_env
    node.append('journal-short-iso-precise.txt')
    assert not node.look(source='journal')['healthy']
    node.boot_id.write_text('0b7c2d11-0000-4000-8000-000000000001\n', encoding='utf-8')
    node.journal.write_text('', encoding='utf-8')  # the new boot's journal: nothing yet
    after = node.look(source='journal')
    assert after['healthy'] and after['faults'] == [] and after['reason'] == ''
    assert node.args()[-1].endswith('--show-cursor -b'), 'no cursor of the old boot'


def test_a_cursor_the_journal_no_longer_has_reads_the_whole_boot_again(shim_env):
    node = shim_env
    node.append('journal-short.txt')
    node.look(source='journal')
    state = json.loads(node.state.read_text(encoding='utf-8'))
    node.state.write_text(json.dumps(dict(state, cursor='s=rotated;i=1')), encoding='utf-8')
    again = node.look(source='journal')
    assert node.args()[-2:] == ['-k -o short-iso-precise --no-pager --show-cursor -b --after-cursor s=rotated;i=1',
                                '-k -o short-iso-precise --no-pager --show-cursor -b']
    assert again['cursor'] == 's=shim;i=9'
    assert [(f['code'], f.get('count')) for f in again['faults']] == [(24007, 2), (74, 2)], 'read again, not doubled'


def test_since_goes_to_journalctl_and_filters_what_comes_back(shim_env):
    node = shim_env
    node.append('journal-short-iso-precise.txt')
    found = node.look(source='journal', state_file='', since=1796458000.5)
    assert node.args() == ['-k -o short-iso-precise --no-pager --show-cursor -b --since @1796458000']
    assert [event['code'] for event in found['events']] == [48, 63, 94, 45]


def test_a_node_without_journal_files_warns(shim_env, monkeypatch):
    monkeypatch.setenv('JOURNALCTL_SHIM_MODE', 'nofiles')
    found = shim_env.look(source='journal')
    assert found['healthy'] and found['events'] == []
    (warning,) = [c for c in found['checks'] if c['status'] == 'warn']
    assert (warning['name'], warning['message']) == (
        'kernel_log', 'journalctl has no kernel log of this boot (No journal files were found.): none was read')


def test_a_failing_journalctl_is_an_error_naming_the_command(shim_env, monkeypatch):
    monkeypatch.setenv('JOURNALCTL_SHIM_MODE', 'fail')
    with pytest.raises(kl.KernelLogError, match=r"^'.*journalctl-shim -k .* exited with 1: Failed to open journal: "
                                                r"Permission denied$"):
        shim_env.look(source='journal', state_file='')


def test_a_hung_journalctl_is_killed_at_the_deadline(shim_env, monkeypatch):
    monkeypatch.setenv('JOURNALCTL_SHIM_MODE', 'hang')
    started = time.monotonic()
    with pytest.raises(kl.KernelLogTimeout, match='did not finish within'):
        kl.read_faults(dict(shim_env.settings, state_file=''), 1.5)
    assert time.monotonic() - started < 3


def test_journalctl_not_installed(node):
    with pytest.raises(kl.KernelLogError, match='journalctl no-such-journalctl not found: is systemd installed'):
        node.look(journalctl='no-such-journalctl')


def test_a_file_is_read_from_its_offset_and_starts_over_when_replaced_or_shrunk(node):
    log = node.path / 'kernel.log'
    log.write_text((FIXTURES / 'dmesg-raw.txt').read_text(encoding='utf-8'), encoding='utf-8')
    first = node.look(source=str(log))
    size = log.stat().st_size
    assert first['cursor'] == size and first['lines_read'] == 9
    assert [f['code'] for f in first['faults']] == [79, 120, 62, 177]
    complete = '[ 2000.000001] NVRM: Xid (PCI:0000:18:00): 13, pid=3, name=python3, Out Of Range Address\n'
    with open(log, 'a', encoding='utf-8') as handle:
        handle.write(complete + '[ 2000.5] NVRM: Xid (PCI:0000:2a:00): 48, pid=3, name=python3, DBE')  # being written
    second = node.look(source=str(log))
    assert second['lines_read'] == 2 and [e['code'] for e in second['events']] == [13, 48]
    assert second['cursor'] == size + len(complete), 'the unfinished last line is read again next time'
    assert [f['code'] for f in second['faults']] == [79, 120, 62, 177, 48]
    assert not second['healthy']
    third = node.look(source=str(log))
    assert third['lines_read'] == 1 and [f['code'] for f in third['faults']] == [79, 120, 62, 177, 48]
    # The stand-in kernel log in /run after a restart: another file, empty.
    log.unlink()
    log.write_text('[    9.734511] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n',
                   encoding='utf-8')
    fresh = node.look(source=str(log))
    assert fresh['healthy'] and fresh['faults'] == [] and fresh['lines_read'] == 1
    # The same file, truncated in place: it starts over too.
    with open(log, 'a', encoding='utf-8') as handle:
        handle.write('[   12.0] NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.\n')
    assert not node.look(source=str(log))['healthy']
    log.write_text('', encoding='utf-8')
    assert node.look(source=str(log))['healthy']


def test_clear_forgets_the_faults_of_a_repaired_gpu(node):
    log = node.path / 'kernel.log'
    log.write_text('\n'.join(read('dmesg-raw.txt') + read('journal-short.txt')) + '\n', encoding='utf-8')
    assert [f['device'] for f in node.look(source=str(log))['faults']] == ['GPU6', 'GPU2', 'GPU2', 'GPU0', 'nvswitch2',
                                                                           'GPU6']
    assert kl.clear_faults(str(node.state), [2]) == 2
    assert kl.clear_faults(str(node.state), [2]) == 0
    after = node.look(source=str(log))
    assert [f['device'] for f in after['faults']] == ['GPU6', 'GPU0', 'nvswitch2', 'GPU6'], 'cleared faults stay cleared'
    in_memory = kl.read_faults(dict(node.settings, source=str(log)), 10, write_state=False, clear=[6, 0])
    assert [f['device'] for f in in_memory['faults']] == ['nvswitch2'] and in_memory['cleared'] == 3
    assert len(json.loads(node.state.read_text(encoding='utf-8'))['faults']) == 4, 'check mode writes nothing'
    assert kl.clear_faults(str(node.state), None) == 4
    assert node.look(source=str(log))['healthy']
    assert kl.clear_faults('', None) == 0 and kl.clear_faults(str(node.path / 'none.json'), [1]) == 0


def test_without_a_state_file_every_look_reads_everything(node):
    log = node.path / 'kernel.log'
    log.write_text((FIXTURES / 'kmsg.txt').read_text(encoding='utf-8'), encoding='utf-8')
    for _look in range(2):
        found = node.look(source=str(log), state_file='')
        assert found['lines_read'] == 15 and found['reason'] == 'llmforge: fallen_off_bus GPU7'
        # The most severe first: reboot and hardware, reboot, reset.
        assert [c['subject'] for c in found['checks'] if c['status'] == 'fail'] == [
            'GPU7', '0000:1a:00.0', 'nvswitch0', 'GPU5']
    assert not node.state.exists()


@pytest.mark.parametrize('content', ['{not json', '[]', '{"faults": "x"}', '{"faults": [{"type": "oops"}]}'])
def test_a_bad_state_file_is_set_aside_and_rebuilt(node, content):
    log = node.path / 'kernel.log'
    log.write_text((FIXTURES / 'dmesg-raw.txt').read_text(encoding='utf-8'), encoding='utf-8')
    node.state.parent.mkdir()
    node.state.write_text(content, encoding='utf-8')
    found = node.look(source=str(log))
    assert found['lines_read'] == 9 and [f['code'] for f in found['faults']] == [79, 120, 62, 177]
    (note,) = [c for c in found['checks'] if c['name'] == 'kernel_log']
    assert note['status'] == 'warn' and f'state file {node.state}' in note['message'] and 'rebuilt' in note['message']
    assert json.loads(node.state.read_text(encoding='utf-8'))['offset'] == log.stat().st_size


def test_an_unwritable_state_file_warns(node):
    log = node.path / 'kernel.log'
    log.write_text('', encoding='utf-8')
    blocker = node.path / 'file'
    blocker.write_text('', encoding='utf-8')
    found = node.look(source=str(log), state_file=str(blocker / 'state.json'))
    assert found['healthy'] and any('cannot be written' in c['message'] for c in found['checks'] if c['status'] == 'warn')


def test_nvidia_smi_failing_names_gpus_by_pci_address(node):
    log = node.path / 'kernel.log'
    log.write_text((FIXTURES / 'dmesg-raw.txt').read_text(encoding='utf-8'), encoding='utf-8')
    found = node.look(source=str(log), state_file='', nvidia_smi='/nonexistent/nvidia-smi')
    assert found['reason'] == 'llmforge: xid 0000:ba:00.0 79'
    (note,) = [c for c in found['checks'] if c['name'] == 'kernel_log']
    assert note['message'].startswith('GPU indexes unknown (/nonexistent/nvidia-smi not found')
    given = node.look(source=str(log), state_file='', nvidia_smi='/nonexistent/nvidia-smi',
                      gpus={'0000:ba:00': 6})
    assert given['reason'] == 'llmforge: xid GPU6 79'


@pytest.mark.parametrize('settings, message', [
    ({'source': 'kernel.log'}, "source must be 'journal' or the absolute path of a kernel log file"),
    ({'source': '/nonexistent/kernel.log'}, 'source /nonexistent/kernel.log: no such file'),
    ({'source': '/'}, 'source /: is a directory'),
    ({'gpus': {'GPU3': 3}}, "gpus: 'GPU3' is not a PCI bus id"),
    ({'gpus': {'0000:18:00': -1}}, 'gpus: the index of 0000:18:00 must be a GPU index'),
    ({'since': 'yesterday'}, 'validators.kernel_faults.since must be a number of 0 or more'),
    ({'journalctl': 'bin/journalctl'}, 'journalctl must be a command name .* got the relative path'),
    ({'level': 3}, 'validators.kernel_faults: unknown field.s. level'),
    ({'boot_id_file': '/nonexistent/boot_id'}, 'boot_id_file /nonexistent/boot_id: cannot be read'),
])
def test_bad_settings_name_what_is_wrong(node, shim_env, settings, message):
    with pytest.raises(kl.KernelLogError, match=message):
        node.look(**settings)


def test_scan_refuses_a_bad_cap_or_since():
    with pytest.raises(kl.KernelLogError, match='max_events must be a whole number'):
        kl.scan([], max_events=-1)
    with pytest.raises(kl.KernelLogError, match='since must be a Unix time'):
        kl.scan([], since=float('nan'))


# --- as a node validator -----------------------------------------------------------------------------------------

def test_registered_for_the_health_check_and_the_hardware_stage():
    validator = validators.registry()['kernel_faults']
    assert validator is kl.VALIDATOR and validator.stages == ('health_check', 'hardware')
    assert list(validators.registry())[-1] == 'kernel_faults' and validator.module == 'kernel_faults'
    assert validator.checked_settings({}) == {
        'source': 'journal', 'journalctl': 'journalctl', 'state_file': '', 'since': None,
        'boot_id_file': '/proc/sys/kernel/random/boot_id', 'gpus': {}, 'nvidia_smi': 'nvidia-smi', 'sysfs_root': '/sys'}
    assert validator.checked_settings({'source': None, 'since': None})['source'] == 'journal'


def test_the_health_check_drains_on_a_kernel_fault(node):
    log = node.path / 'kernel.log'
    log.write_text((FIXTURES / 'journal-short.txt').read_text(encoding='utf-8'), encoding='utf-8')
    settings = dict(node.settings, source=str(log))
    config = nc.check_config({'validators': {'kernel_faults': settings}, 'timeout': 10})
    result = nc.run(config, 'gpu1', use_slurm=False, dry_run=False)
    assert not result['healthy'] and result['reason'] == 'llmforge: sxid nvswitch2 24007'
    assert 'llmforge_validator_check_failed{validator="nodecheck",check="sxid",subject="nvswitch2"} 1' in \
        nc.metrics_text(result)
    again = nc.run(config, 'gpu1', use_slurm=False, dry_run=False)
    assert again['reason'] == 'llmforge: sxid nvswitch2 24007', 'the next look keeps the node drained'


def test_the_health_check_refuses_bad_settings_naming_the_field():
    with pytest.raises(nc.ConfigError, match="validators.kernel_faults: source must be 'journal' or"):
        nc.check_config({'validators': {'kernel_faults': {'source': 'relative.log'}}})


def test_a_hung_journal_is_the_health_checks_timeout_check(shim_env, monkeypatch):
    monkeypatch.setenv('JOURNALCTL_SHIM_MODE', 'hang')
    config = nc.check_config({'validators': {'kernel_faults': dict(shim_env.settings, state_file='')}, 'timeout': 2})
    started = time.monotonic()
    result = nc.run(config, 'gpu1', use_slurm=False, dry_run=False)
    assert time.monotonic() - started < 4.5
    (failing,) = [c for c in result['checks'] if c['status'] == 'fail']
    assert (failing['name'], failing['subject']) == ('timeout', 'kernel log')


def test_the_docs_table_row():
    assert '| `kernel_faults` |' in validators.markdown_table()
    assert '`since` (number, default `null`)' in validators.markdown_table()


def test_nothing_but_the_state_file_is_written(node):
    """read_faults makes the state file's directory, the file and its lock, and nothing else."""
    log = node.path / 'kernel.log'
    log.write_text('', encoding='utf-8')
    before = sorted(os.listdir(node.path))
    node.look(source=str(log))
    assert sorted(os.listdir(node.path)) == sorted(before + ['state'])
    assert sorted(os.listdir(node.path / 'state')) == ['kernel_faults.json', 'kernel_faults.json.lock']


def test_a_clear_waits_for_a_look_in_progress(node):
    log = node.path / 'kernel.log'
    log.write_text((FIXTURES / 'dmesg-raw.txt').read_text(encoding='utf-8'), encoding='utf-8')
    node.look(source=str(log))
    with kl.locked(str(node.state), 1):
        started = time.monotonic()
        # Another holder of the lock (this process's second open file description): waits, then goes on unlocked.
        with kl.locked(str(node.state), 0.3):
            assert time.monotonic() - started >= 0.25
    assert kl.clear_faults(str(node.state), [2]) == 2
