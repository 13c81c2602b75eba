# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge.cluster.kernel_faults run through Ansible against kernel log files, the journalctl shim and the
nvidia-smi shim (8-GPU HGX H200 fixture): results, the state file (not in check mode), clear, and bad input."""

from __future__ import annotations

import json
import pathlib

import pytest

from module_runner import run_module as run_ansible_module

TESTS = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = TESTS / 'fixtures' / 'kernel_log'
GPU = TESTS / 'fixtures' / 'gpu'


@pytest.fixture(name='node')
def fixture_node(tmp_path):
    smi = tmp_path / 'nvidia-smi'
    smi.write_text(f'#!/bin/sh\nNVIDIA_SMI_SHIM_DIR={GPU / "hgx-h200-8"} exec {GPU / "nvidia-smi-shim"} "$@"\n',
                   encoding='utf-8')
    smi.chmod(0o755)
    boot_id = tmp_path / 'boot_id'
    boot_id.write_text('e64ee1b5-80f0-4dc2-83c8-a3d36cfb8ce3\n', encoding='utf-8')
    log = tmp_path / 'kernel.log'
    log.write_text((FIXTURES / 'dmesg-raw.txt').read_text(encoding='utf-8'), encoding='utf-8')
    journal = tmp_path / 'journal.txt'
    journal.write_text((FIXTURES / 'journal-short-iso-precise.txt').read_text(encoding='utf-8'), encoding='utf-8')

    class Node:
        path = tmp_path
        state = tmp_path / 'state' / 'kernel_faults.json'
        base = {'nvidia_smi_path': str(smi), 'sysfs_root': str(tmp_path / 'sys'), 'boot_id_file': str(boot_id)}
        env = {'JOURNALCTL_SHIM_JOURNAL': str(journal), 'JOURNALCTL_SHIM_LOG': str(tmp_path / 'calls')}

        def __init__(self):
            self.log = log

        def run(self, args: dict, check: bool = False) -> dict:
            return run_ansible_module('kernel_faults', dict(self.base, **args), check=check, env=self.env)

    return Node()


def test_a_file_judged_without_state(node):
    result = node.run({'source': str(node.log), 'fail_on_mismatch': False})
    assert not result.get('failed'), result.get('msg')
    assert (result['healthy'], result['changed'], result['reason']) == (False, False, 'llmforge: xid GPU6 79')
    assert [(e['type'], e['code'], e['gpu']) for e in result['events']] == [
        ('xid', 79, 6), ('xid', 120, 2), ('xid', 62, 2), ('xid', 177, 0)]
    assert (result['lines_read'], result['events_dropped'], result['cursor']) == (9, 0, node.log.stat().st_size)
    assert not node.state.exists()


def test_a_node_fault_fails_the_task_with_every_failing_check(node):
    result = node.run({'source': str(node.log)})
    assert result['failed'] is True
    assert result['msg'].startswith('3 kernel log check(s) failed: xid (GPU6): GPU6 (0000:ba:00): xid 79 (GPU has '
                                    'fallen off the bus)')
    assert 'xid (GPU0)' in result['msg'] and 'unknown Xid 177' in result['msg']
    assert result['checks'][0]['status'] == 'fail' and 'Traceback' not in json.dumps(result)


def test_the_journal_with_a_state_file_and_check_mode(node):
    args = {'source': 'journal', 'journalctl_path': str(FIXTURES / 'journalctl-shim'), 'state_file': str(node.state),
            'fail_on_mismatch': False}
    looked = node.run(args, check=True)
    assert not looked.get('failed'), looked.get('msg')
    assert looked['reason'] == 'llmforge: xid GPU3 79' and looked['cursor'] == 's=shim;i=18'
    assert not node.state.exists(), 'check mode reads but does not write the bookmark'
    first = node.run(args)
    assert first['changed'] is False and node.state.exists()
    second = node.run(args)
    assert second['events'] == [] and second['reason'] == 'llmforge: xid GPU3 79', 'faults persist'
    calls = (node.path / 'calls').read_text(encoding='utf-8').splitlines()
    assert calls[-1].endswith('-b --after-cursor s=shim;i=18') and len(calls) == 3
    state = json.loads(node.state.read_text(encoding='utf-8'))
    assert state['log'] == 'e64ee1b5-80f0-4dc2-83c8-a3d36cfb8ce3' and len(state['faults']) == 4


def test_clear_after_a_repair(node):
    args = {'source': str(node.log), 'state_file': str(node.state), 'fail_on_mismatch': False}
    assert not node.run(args)['healthy']
    would = node.run(dict(args, clear=['6', '2']), check=True)
    assert (would['changed'], would['cleared'], would['reason']) == (True, 3, 'llmforge: xid GPU0 177')
    assert len(json.loads(node.state.read_text(encoding='utf-8'))['faults']) == 4
    cleared = node.run(dict(args, clear=['all']))
    assert (cleared['changed'], cleared['cleared'], cleared['healthy']) == (True, 4, True)
    assert node.run(args)['healthy'] and node.run(args)['changed'] is False


def test_gpus_given_and_since(node):
    log = node.path / 'journal.log'
    log.write_text((FIXTURES / 'journal-short-iso-precise.txt').read_text(encoding='utf-8'), encoding='utf-8')
    result = node.run({'source': str(log), 'gpus': {'0000:9a:00': 1}, 'since': 1796458000, 'fail_on_mismatch': False,
                       'nvidia_smi_path': '/nonexistent/nvidia-smi'})
    assert not result.get('failed'), result.get('msg')
    assert [(e['code'], e['device']) for e in result['events']] == [(48, 'GPU1'), (63, 'GPU1'), (94, 'GPU1'),
                                                                    (45, 'GPU1')]
    assert result['reason'] == 'llmforge: xid GPU1 48,63,94'


@pytest.mark.parametrize('args, fragment', [
    ({'source': 'kernel.log'}, "source must be 'journal' or the absolute path of a kernel log file, got 'kernel.log'"),
    ({'source': '/nonexistent/kernel.log'}, 'source /nonexistent/kernel.log: no such file'),
    ({'source': '/'}, 'source /: is a directory, not a kernel log file'),
    ({'journalctl_path': 'no-such-journalctl'}, 'journalctl_path no-such-journalctl: not found: is systemd installed?'),
    ({'clear': ['3']}, 'clear needs state_file'),
    ({'clear': ['GPU3'], 'state_file': '/tmp/x.json'}, "clear must be 'all' or GPU indexes (0 or more), got 'GPU3'"),
    ({'gpus': {'0000:18:00': 'zero'}}, "gpus must map PCI bus ids to GPU indexes (0 or more), got 0000:18:00: 'zero'"),
    ({'gpus': {'GPU0': 0}, 'source': '/etc/hostname'}, "gpus: 'GPU0' is not a PCI bus id"),
    ({'timeout': 0}, 'timeout must be a positive number of seconds, got 0'),
    ({'since': -1}, 'since must be a Unix time (0 or more), got -1.0'),
], ids=['relative-source', 'missing-file', 'directory', 'no-journalctl', 'clear-without-state', 'bad-clear',
        'bad-gpu-index', 'bad-bus-id', 'bad-timeout', 'bad-since'])
def test_bad_input_fails_naming_the_option(node, args, fragment):
    result = node.run(args)
    assert result['failed'] is True and fragment in result['msg'], result['msg']
    assert 'Traceback' not in result['msg'] and result['events'] == []


def test_a_bad_state_file_is_rebuilt_with_a_warning(node):
    node.state.parent.mkdir()
    node.state.write_text('{"faults": 3', encoding='utf-8')
    result = node.run({'source': str(node.log), 'state_file': str(node.state), 'fail_on_mismatch': False})
    assert not result.get('failed'), result.get('msg')
    (note,) = [c for c in result['checks'] if c['name'] == 'kernel_log']
    assert note['status'] == 'warn' and note['message'].startswith(f'state file {node.state} cannot be read')
    assert json.loads(node.state.read_text(encoding='utf-8'))['offset'] == node.log.stat().st_size
