# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-remediate: the decision function on its own, whole ticks against a fake Slurm, the ledger, the metrics,
the configuration and the installed program."""

from __future__ import annotations

import io
import json
import os
import pathlib
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import types

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _remediate as rem
from ansible_collections.llmforge.cluster.plugins.plugin_utils._report import build_report, render_html
from node_install import LAUNCHERS, install, run_launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
LAUNCHER = LAUNCHERS['programs._remediate']
NOW = 1_800_000_000.0
BOOT = NOW - 86400
# The GPU catalog's own classes, before the fixture below stands in for them.
REAL_XID_CLASS = getattr(rem.gpu_catalog, 'xid_class', None)
REAL_SXID_CLASS = getattr(rem.gpu_catalog, 'sxid_class', None)


def stamp(when: float) -> str:
    return rem.format_slurm_time(when)


# --- a fake Slurm ------------------------------------------------------------------------------------------------

class FakeSlurm:
    """scontrol, sbatch, squeue, sacct and scancel over an in-memory cluster, as the tick calls them."""

    def __init__(self, count: int = 4, partitions: str = 'gpu') -> None:
        self.now = NOW
        self.nodes = {f'gpu{index:03d}': {'state': 'IDLE', 'flags': set(), 'reason': '', 'reason_time': None,
                                          'partitions': partitions, 'boot': BOOT} for index in range(1, count + 1)}
        self.reservation = None
        self.jobs: dict[str, dict] = {}
        self.next_id = 100
        self.calls: list[list[str]] = []
        self.failing: set[str] = set()
        self.comments: list[str] = []
        self.sacct_down = False

    # the cluster's changes
    def drain(self, node: str, reason: str, when: float = None, state: str = 'IDLE') -> None:
        self.nodes[node].update(state=state, reason=reason, reason_time=NOW - 60 if when is None else when)
        self.nodes[node]['flags'].add('DRAIN')

    def finish(self, job_id: str, exit_code: int, admin_comment: str = '') -> None:
        job = self.jobs[job_id]
        job.update(state='COMPLETED' if exit_code == 0 else 'FAILED', exit=exit_code, end=self.now,
                   admin=admin_comment)

    def start_all(self) -> None:
        for job in self.jobs.values():
            if job['state'] == 'PENDING':
                job['state'] = 'RUNNING'

    def rebooted(self, node: str) -> None:
        entry = self.nodes[node]
        entry['flags'] -= {'REBOOT_REQUESTED', 'REBOOT_ISSUED', 'DRAIN'}
        entry.update(boot=self.now - 30, reason='', reason_time=None, state='IDLE')

    # the commands
    def __call__(self, argv, timeout):
        argv = list(argv)
        self.calls.append(argv)
        name = argv[0]
        if name in self.failing or ' '.join(argv[:3]) in self.failing:
            return proc.Completed(1, '', f'{name}: error: forced failure')
        handler = getattr(self, f'_{name}')
        return handler(argv[1:])

    def node_line(self, name: str) -> str:
        entry = self.nodes[name]
        state = '+'.join([entry['state'], *sorted(entry['flags'])])
        reason = ''
        if entry['reason']:
            who = f" [root@{stamp(entry['reason_time'])}]" if entry['reason_time'] else ''
            reason = f" Reason={entry['reason']}{who}"
        return (f'NodeName={name} Arch=x86_64 CoresPerSocket=32 CPUAlloc=0 CPUTot=64 Gres=gpu:h200:8 '
                f'NodeAddr={name} State={state} ThreadsPerCore=1 Partitions={entry["partitions"]} '
                f'BootTime={stamp(entry["boot"])} SlurmdStartTime={stamp(entry["boot"] + 5)} '
                f'CfgTRES=cpu=64,mem=1000G AllocTRES={reason}')

    def _scontrol(self, args):
        if args[:2] == ['show', 'node']:
            return proc.Completed(0, '\n'.join(self.node_line(name) for name in self.nodes) + '\n', '')
        if args[:2] == ['show', 'reservation']:
            if self.reservation is None:
                return proc.Completed(1, '', f'Reservation {args[2]} not found')
            nodes = ','.join(self.reservation) or '(null)'
            return proc.Completed(0, f'ReservationName={args[2]} StartTime=2026-01-01T00:00:00 Nodes={nodes} '
                                     f'NodeCnt={len(self.reservation)} Flags=MAINT,IGNORE_JOBS Users=root\n', '')
        if args[0] == 'create':
            nodes = next(arg for arg in args if arg.startswith('Nodes='))[6:]
            self.reservation = nodes.split(',')
            return proc.Completed(0, 'Reservation created\n', '')
        if args[0] == 'update' and args[1].startswith('ReservationName='):
            self.reservation = next(arg for arg in args if arg.startswith('Nodes='))[6:].split(',')
            return proc.Completed(0, '', '')
        if args[0] == 'delete':
            self.reservation = None
            return proc.Completed(0, '', '')
        if args[0] == 'update' and args[1].startswith('NodeName='):
            entry = self.nodes[args[1][9:]]
            if 'State=DRAIN' in args:
                entry['flags'].add('DRAIN')
                entry['reason'] = next(arg for arg in args if arg.startswith('Reason='))[7:]
                entry['reason_time'] = self.now
            elif 'State=RESUME' in args:
                entry['flags'].discard('DRAIN')
                entry['reason'], entry['reason_time'] = '', None
            return proc.Completed(0, '', '')
        if args[0] == 'reboot':
            entry = self.nodes[args[-1]]
            entry['flags'] |= {'REBOOT_REQUESTED', 'DRAIN'}
            entry['reason'] = next(arg for arg in args if arg.startswith('reason='))[7:]
            entry['reason_time'] = self.now
            return proc.Completed(0, '', '')
        raise AssertionError(args)

    def _sbatch(self, args):
        job_id = str(self.next_id)
        self.next_id += 1
        options = dict(arg[2:].split('=', 1) for arg in args if arg.startswith('--') and '=' in arg)
        self.jobs[job_id] = {'state': 'PENDING', 'exit': None, 'user': 'root', 'name': options['job-name'],
                             'reservation': options['reservation'], 'comment': options['comment'], 'admin': '',
                             'nodes': options['nodelist'], 'wrap': options['wrap'], 'start': self.now, 'end': None}
        return proc.Completed(0, f'{job_id}\n', '')

    def _squeue(self, args):
        rows = [f"{job_id}|{job['state']}|{job['user']}|{job['reservation']}|{job['comment']}"
                for job_id, job in self.jobs.items() if job['name'] == rem.JOB_NAME]
        return proc.Completed(0, '\n'.join(rows) + '\n', '')

    def _sacct(self, args):
        if self.sacct_down:
            return proc.Completed(1, '', 'sacct: error: slurmdbd not responding')
        if any(arg.startswith('--name=') for arg in args):
            rows = [f"{job_id}|{job['state']}|{'' if job['exit'] is None else job['exit']}:0|{stamp(job['start'])}|"
                    f"{stamp(job['end']) if job['end'] else 'Unknown'}|{job['user']}|{job['reservation']}|"
                    f"{job['comment']}|{job['admin']}" for job_id, job in self.jobs.items()]
            return proc.Completed(0, '\n'.join(rows) + '\n', '')
        return proc.Completed(0, '\n'.join(self.comments) + '\n', '')

    def _scancel(self, args):
        self.jobs[args[0]].update(state='CANCELLED', end=self.now)
        return proc.Completed(0, '', '')

    def submitted(self, kind: str = None) -> list[tuple[str, dict]]:
        return [(job_id, job) for job_id, job in self.jobs.items() if kind is None or f' {kind} ' in job['comment']]


@pytest.fixture
def config(tmp_path):
    return rem.check_config({'ledger': str(tmp_path / 'state' / 'ledger.sqlite'), 'textfile_dir': str(tmp_path)})


@pytest.fixture
def ledger(config):
    opened = rem.Ledger(config['ledger'])
    yield opened
    opened.close()


def tick(slurm: FakeSlurm, config, ledger, dry_run=False):
    out = io.StringIO()
    result = rem.tick(config, ledger, slurm, now=slurm.now, dry_run=dry_run, out=out)
    result['out'] = out.getvalue()
    return result


def state(ledger, node):
    return ledger.snapshot(rem.check_config({}), NOW).nodes[node].state


def report(gpus=None, ok=True, failed=(), command='burnin'):
    gpus = gpus if gpus is not None else {'3': ['1650123456789', 'GPU-aaaa-3']}
    return rem.REPORT_PREFIX + json.dumps({'command': command, 'ok': ok, 'gpus': gpus, 'failed': list(failed)})


@pytest.fixture(autouse=True)
def catalog(monkeypatch):
    """A GPU catalog with the Xid and SXid classes the decisions read (whatever the real catalog holds)."""
    classes = {13: ('none', False), 48: ('reset', True), 79: ('reboot', True), 94: ('reset', True),
               119: ('reset', False), 54: ('rma', True)}

    def xid_class(code):
        tier, hardware = classes.get(code, ('reboot', False))
        return types.SimpleNamespace(code=code, tier=tier, hardware=hardware)

    def sxid_class(code, fatal):
        return types.SimpleNamespace(code=code, tier='reboot' if fatal else 'none', hardware=False)

    monkeypatch.setattr(rem.gpu_catalog, 'xid_class', xid_class, raising=False)
    monkeypatch.setattr(rem.gpu_catalog, 'sxid_class', sxid_class, raising=False)


# --- reasons -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(('reason', 'kind', 'device', 'tier', 'hardware'), [
    ('llmforge: xid GPU3 79', 'xid', 'GPU3', 'reboot', True),
    ('llmforge: xid 79 GPU3', 'xid', 'GPU3', 'reboot', True),
    ('llmforge: xid GPU2 48,94', 'xid', 'GPU2', 'reset', True),
    ('llmforge: xid GPU5 119', 'xid', 'GPU5', 'reset', False),
    ('llmforge: xid GPU1 13', 'xid', 'GPU1', 'none', False),
    ('llmforge: fallen_off_bus GPU6', 'fallen_off_bus', 'GPU6', 'reboot', True),
    ('llmforge: sxid nvswitch1 12028', 'sxid', 'nvswitch1', 'reboot', False),
    ('llmforge: sxid 12028 nvswitch1', 'sxid', 'nvswitch1', 'reboot', False),
    ('llmforge: aer 0000:18:00.0 fatal', 'aer', '0000:18:00.0', 'reboot', True),
    ('llmforge: dcgm L1 fail: memory GPU4', 'dcgm', 'GPU4', 'reset', False),
    ('llmforge: dcgm L1 fail: software node', 'dcgm', 'node', 'reboot', False),
    ('llmforge: epilog GPU2 leftover processes 4711', 'epilog', 'GPU2', 'reset', False),
    ('Kill task failed', 'killtask', 'node', 'reboot', False),
    ('Epilog error', 'epilog', 'node', 'reboot', False),
])
def test_fault_reasons_are_classified(reason, kind, device, tier, hardware):
    fault = rem.classify(reason)
    assert (fault.kind, fault.device, fault.tier, fault.hardware) == (kind, device, tier, hardware)
    assert fault.grace == (reason == 'Epilog error')


@pytest.mark.parametrize('reason', [
    'maintenance by bob', 'Not responding', 'llmforge: nodecheck error gpu_topology: ValueError',
    'llmforge: timeout nvidia-smi', 'llmforge: nvlink GPU3 12/18', 'llmforge: dcgm L3 pending: fast tier failed',
    'llmforge: dcgm L3 fail: memory GPU3', 'llmforge: rma 1650 repeated', 'llmforge: repair reboot xid GPU3 79',
    'llmforge: quarantine suspect 3 jobs', '', 'llmforge:'])
def test_reasons_that_are_not_repaired(reason):
    assert rem.classify(reason) is None


def test_the_real_catalogs_classes(monkeypatch):
    if REAL_XID_CLASS is None or REAL_SXID_CLASS is None:
        pytest.skip('the GPU catalog has no Xid classes')
    monkeypatch.setattr(rem.gpu_catalog, 'xid_class', REAL_XID_CLASS)
    monkeypatch.setattr(rem.gpu_catalog, 'sxid_class', REAL_SXID_CLASS)
    assert rem.catalog_class('xid', 79) == ('reboot', True)
    assert rem.catalog_class('xid', 48) == ('reset', True)
    assert rem.catalog_class('xid', 13) == ('none', False)
    assert rem.catalog_class('xid', 99999)[0] == 'reboot'
    assert rem.classify('llmforge: sxid nvswitch0 12028').tier == 'reboot'
    assert rem.classify('llmforge: xid GPU2 13,48').tier == 'reset'


def test_the_catalog_without_fault_classes_means_reboot(monkeypatch):
    monkeypatch.delattr(rem.gpu_catalog, 'xid_class', raising=False)
    assert rem.catalog_class('xid', 48) == ('reboot', False)


def test_ours_and_the_administrators():
    assert rem.is_ours('llmforge: xid GPU3 79') and rem.is_ours('Epilog error') and rem.is_ours('Not responding')
    assert rem.is_ours('Kill task failed')
    assert not rem.is_ours('RMA ticket 42') and not rem.is_ours('') and not rem.is_ours('LLMFORGE: x')


# --- parsing Slurm -----------------------------------------------------------------------------------------------

def test_scontrol_nodes_are_parsed():
    slurm = FakeSlurm(2, partitions='gpu,debug')
    slurm.drain('gpu002', 'llmforge: xid GPU3 79', when=NOW - 120, state='MIXED')
    nodes = rem.parse_nodes(''.join(slurm.node_line(name) + '\n' for name in slurm.nodes))
    node = nodes['gpu002']
    assert (node.state, node.drained, node.busy, node.idle) == ('MIXED', True, True, False)
    assert node.reason == 'llmforge: xid GPU3 79' and node.reason_time == NOW - 120
    assert node.partitions == ('gpu', 'debug') and node.boot_time == BOOT
    assert node.drain_key == f'llmforge: xid GPU3 79@{NOW - 120:.0f}'
    assert nodes['gpu001'].idle and not nodes['gpu001'].drained and nodes['gpu001'].drain_key == ''


def test_flags_of_not_responding_and_rebooting_nodes():
    nodes = rem.parse_nodes('NodeName=a State=DOWN*+DRAIN Reason=Not responding [slurm@2026-01-01T00:00:00]\n'
                            'NodeName=b State=IDLE+DRAIN+REBOOT_REQUESTED Reason=llmforge: repair reboot x\n'
                            'NodeName=c State=ALLOCATED+COMPLETING\n')
    assert not nodes['a'].responding and nodes['a'].down and nodes['a'].reason == 'Not responding'
    assert nodes['b'].rebooting and nodes['b'].idle
    assert nodes['c'].busy and not nodes['c'].idle


def test_reservations_jobs_and_comments_are_parsed():
    assert rem.parse_reservation('ReservationName=q StartTime=x Nodes=gpu[001-003] NodeCnt=3\n') == [
        'gpu001', 'gpu002', 'gpu003']
    assert rem.parse_reservation('') is None
    jobs = rem.parse_sacct_jobs('7|FAILED|1:0|2026-01-01T00:00:00|2026-01-01T00:10:00|root|q|'
                                'llmforge-remediate gpu001 burnin abcd|llmforge-repair {"ok": false}\n'
                                '8|COMPLETED|0:0|x|y|alice|q|llmforge-remediate gpu001 burnin abcd|\n'
                                '9|COMPLETED|0:0|x|y|root|other|c|\n'
                                # slurmdbd had not yet recorded the reservation made in the job's second
                                '10|FAILED|1:0|x|y|root||llmforge-remediate gpu002 burnin ef01|\n', 'q')
    assert list(jobs) == ['7', '10'] and jobs['7'].exit_code == 1 and jobs['7'].token == 'abcd'
    assert jobs['10'].token == 'ef01'
    squeued = rem.parse_squeue_jobs('7|RUNNING|root|q|llmforge-remediate gpu001 reset ef01\n8|RUNNING|bob|q|x\n', 'q')
    assert list(squeued) == ['7'] and squeued['7'].active
    rows = rem.parse_sacct_comments('10|alice|gpu[001-002]|2026-01-01T00:00:00|llmforge-suspect gpu002 hang rank 7 '
                                    'stuck; llmforge-suspect gpu001 straggler 30% slow|x\n11|bob|gpu003|Unknown|hello\n')
    assert [row['job'] for row in rows] == ['10']
    assert rem.parse_sightings(rows[0]['comment']) == [
        ('gpu002', 'hang', 'rank 7 stuck'), ('gpu001', 'straggler', '30% slow x')]
    assert rem.parse_sightings('llmforge-suspect gpu001 melted x; llmforge-suspect ../x hang') == []


# --- the decision function ---------------------------------------------------------------------------------------

def view(slurm: FakeSlurm, jobs=None, comments=()) -> rem.SlurmView:
    nodes = rem.parse_nodes('\n'.join(slurm.node_line(name) for name in slurm.nodes))
    return rem.SlurmView(nodes, slurm.reservation, jobs or {}, True,
                         rem.parse_sacct_comments('\n'.join(comments)))


def decide(slurm, config, records=None, jobs=None, comments=(), sightings=None, repairs=(), hardware=()):
    snapshot = rem.Snapshot({record.name: record for record in records or []}, sightings or {}, list(repairs),
                            list(hardware))
    plan = rem.decide(snapshot, view(slurm, jobs, comments), config, NOW)
    return plan, {item.node: item for item in plan.decisions}


def test_a_fault_drain_goes_to_quarantine_and_its_cheapest_tier(config):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    plan, found = decide(slurm, config)
    item = found['gpu002']
    assert (item.old, item.new) == ('healthy', 'repairing')
    assert [command.kind for command in item.commands] == ['resume', 'submit']
    submit = item.commands[1].argv
    assert '--reservation=llmforge_quarantine' in submit and '--nodelist=gpu002' in submit
    assert submit[-1] == '--wrap=exec /usr/local/sbin/llmforge-repair reset --gpu 3 --report'
    assert item.reserve is True and plan.reservation[:3] == ['scontrol', 'create', 'reservation']
    assert item.record.plan['step']['kind'] == 'reset' and item.record.plan['step']['token']
    kinds = [event['kind'] for event in item.events]
    assert kinds[:2] == ['drain', 'fault'] and 'transition' in kinds and 'action' in kinds
    assert item.line() == ('llmforge-remediate: gpu002 healthy -> repairing: llmforge: xid GPU3 48 (reset first): '
                           'reset job submitted in reservation llmforge_quarantine')


def test_a_fault_that_needs_a_reboot_starts_with_it(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: sxid nvswitch1 12028')
    _plan, found = decide(slurm, config)
    item = found['gpu001']
    assert [command.kind for command in item.commands] == ['reboot']
    assert item.commands[0].argv == ('scontrol', 'reboot', 'ASAP', 'nextstate=RESUME',
                                     'reason=llmforge: repair reboot sxid nvswitch1 12028', 'gpu001')
    assert item.record.plan['step']['kind'] == 'reboot' and item.record.plan['tiers_done'] == ['reboot']


def test_an_application_xid_gets_a_burnin_only(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: xid GPU1 13')
    _plan, found = decide(slurm, config)
    assert 'burnin --level 3 --report' in found['gpu001'].commands[-1].argv[-1]


def test_an_administrators_drain_and_a_down_node_are_never_touched(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'bad DIMM, ticket 42')
    slurm.nodes['gpu002'].update(state='DOWN', flags={'NOT_RESPONDING'})
    records = [rem.NodeRecord('gpu003', rem.REPAIRING, NOW - 600, plan={'held': True, 'step': {
        'kind': 'reset', 'job_id': '55', 'token': 't', 'at': NOW - 600}})]
    slurm.drain('gpu003', 'firmware update (alice)')
    slurm.reservation = ['gpu003']
    plan, found = decide(slurm, config, records)
    assert all(not item.commands for item in plan.decisions) and plan.reservation == []
    assert 'left alone' in found['gpu003'].why and found['gpu003'].new == rem.REPAIRING
    assert found['gpu001'].record.state == rem.HEALTHY and found['gpu001'].events[0]['action'] == 'admin'


def test_the_dcgm_stages_quarantine_is_left_to_validate(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: dcgm L3 pending: fast tier failed')
    slurm.reservation = ['gpu001']
    plan, found = decide(slurm, config)
    assert not found.get('gpu001') or not found['gpu001'].commands
    assert plan.reservation == []


def test_a_waiting_node_resumed_by_someone_else_is_healthy_again(config):
    slurm = FakeSlurm()
    record = rem.NodeRecord('gpu001', rem.QUARANTINED, NOW - 600, plan={'held': False, 'trigger': 'fault', 'next': 'reset'})
    _plan, found = decide(slurm, config, [record])
    assert found['gpu001'].new == rem.HEALTHY and 'resumed by someone else' in found['gpu001'].why
    assert not found['gpu001'].commands


def test_busy_drained_nodes_wait_for_their_jobs(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: xid GPU3 48', state='MIXED')
    _plan, found = decide(slurm, config)
    item = found['gpu001']
    assert item.new == rem.QUARANTINED and not item.commands and item.reserve is None
    assert item.why.endswith('reset waits for the jobs on the node to end')
    assert item.record.plan['held'] is False


def test_at_most_max_concurrent_nodes_are_held(config):
    slurm = FakeSlurm(8)
    for name in ('gpu001', 'gpu002', 'gpu003', 'gpu004'):
        slurm.drain(name, 'llmforge: xid GPU0 48')
    config = dict(config, max_percent=100)
    plan, found = decide(slurm, config)
    started = [name for name, item in found.items() if item.commands]
    assert started == ['gpu001', 'gpu002'] and plan.held == 2 and plan.waiting == 2
    assert found['gpu003'].new == rem.QUARANTINED and 'waits for a repair slot (2/2 nodes held)' in found['gpu003'].why
    assert sorted(plan.reservation[-1][6:].split(',')) == ['gpu001', 'gpu002']


def test_held_nodes_count_against_the_cap(config):
    slurm = FakeSlurm(8)
    slurm.reservation = ['gpu005', 'gpu006']
    records = [rem.NodeRecord(name, rem.REPAIRING, NOW - 60, plan={'held': True, 'step': {
        'kind': 'burnin', 'job_id': '9', 'token': 'x', 'at': NOW - 60}}) for name in ('gpu005', 'gpu006')]
    slurm.drain('gpu001', 'llmforge: xid GPU0 48')
    plan, found = decide(slurm, dict(config, max_percent=100), records,
                         jobs={'9': rem.JobInfo('9', 'RUNNING', None, None, None, '', '', 'squeue')})
    assert not found['gpu001'].commands and plan.waiting == 1


def test_at_most_max_percent_of_a_partition(config):
    slurm = FakeSlurm(20)
    for index in range(1, 6):
        slurm.drain(f'gpu{index:03d}', 'llmforge: xid GPU0 48')
    plan, found = decide(slurm, dict(config, max_concurrent=10, max_percent=10))
    assert [name for name, item in found.items() if item.commands] == ['gpu001', 'gpu002']
    assert 'partition gpu at its limit of 2' in found['gpu003'].why
    _plan, found = decide(slurm, dict(config, max_concurrent=10, partition_limits={'gpu': 3}))
    assert len([item for item in found.values() if item.commands]) == 3


def test_a_small_partition_still_repairs_one_node(config):
    slurm = FakeSlurm(3)
    for name in slurm.nodes:
        slurm.drain(name, 'llmforge: xid GPU0 48')
    plan, _found = decide(slurm, config)
    assert plan.held == 1 and plan.waiting == 2


def test_max_concurrent_zero_pauses_repairs(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: xid GPU0 48')
    plan, found = decide(slurm, dict(config, max_concurrent=0))
    assert not found['gpu001'].commands and plan.waiting == 1


def test_epilog_error_waits_for_the_precise_reason(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'Epilog error', when=NOW - 100)
    _plan, found = decide(slurm, config)
    assert not found['gpu001'].commands and "precise reason" in found['gpu001'].why
    slurm.drain('gpu001', 'Epilog error', when=NOW - 1000)
    _plan, found = decide(slurm, config)
    assert [command.kind for command in found['gpu001'].commands] == ['reboot']


def repairing(step, plan=None, **extra):
    base = {'held': True, 'trigger': 'fault', 'entered': NOW - 3600, 'tiers_done': [],
            'fault': {'kind': 'xid', 'code': 48, 'device': 'GPU3', 'gpu': 3, 'tier': 'reset', 'hardware': True,
                      'reason': 'llmforge: xid GPU3 48'}, 'step': dict({'at': NOW - 600, 'attempts': 1}, **step)}
    base.update(plan or {})
    return rem.NodeRecord('gpu001', extra.get('state', rem.REPAIRING), NOW - 3600, plan=base)


def job(job_id, state, exit_code, admin='', token='tok'):
    return {job_id: rem.JobInfo(job_id, state, exit_code, NOW - 500, NOW - 10, f'llmforge-remediate gpu001 x {token}',
                                admin, 'sacct')}


def test_a_passed_reset_goes_on_to_the_burnin(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reset', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'COMPLETED', 0, report(command='reset')))
    item = found['gpu001']
    assert item.record.plan['step']['kind'] == 'burnin' and item.record.gpus == {
        '3': {'serial': '1650123456789', 'uuid': 'GPU-aaaa-3'}}
    outcome = next(event for event in item.events if event['kind'] == 'outcome')
    assert (outcome['action'], outcome['outcome'], outcome['gpu_serial']) == ('reset', 'pass', '1650123456789')


def test_a_failed_reset_escalates_to_a_reboot(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reset', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'FAILED', 1))
    item = found['gpu001']
    assert [command.kind for command in item.commands] == ['reboot'] and item.new == rem.REPAIRING
    assert item.record.plan['tiers_done'] == ['reset', 'reboot']


def test_a_job_error_is_retried_once_then_escalated(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reset', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'NODE_FAIL', None))
    item = found['gpu001']
    step = item.record.plan['step']
    assert (step['kind'], step['attempts']) == ('reset', 2) and 'retry 1' in item.why
    record = repairing({'kind': 'reset', 'job_id': '8', 'token': 'tok', 'attempts': 2}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('8', 'TIMEOUT', None))
    assert [command.kind for command in found['gpu001'].commands] == ['reboot']


def test_a_passed_burnin_returns_the_node_to_service(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001', 'gpu004']
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    plan, found = decide(slurm, config, [record], jobs=job('7', 'COMPLETED', 0))
    item = found['gpu001']
    assert (item.new, item.reserve, item.record.plan) == (rem.HEALTHY, False, {})
    assert item.record.cleared_at == NOW
    assert plan.reservation == ['scontrol', 'update', 'ReservationName=llmforge_quarantine', 'Nodes=gpu004']
    repaired = next(event for event in item.events if event['kind'] == 'repaired')
    assert repaired['value'] == 3600


def test_the_last_node_out_deletes_the_reservation_and_a_drained_node_is_resumed(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    slurm.drain('gpu001', 'llmforge: xid GPU3 48', when=NOW - 3000)
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    plan, found = decide(slurm, config, [record], jobs=job('7', 'COMPLETED', 0))
    assert plan.reservation == ['scontrol', 'delete', 'ReservationName=llmforge_quarantine']
    assert [command.kind for command in found['gpu001'].commands] == ['resume']


def test_a_node_drained_again_during_its_burnin_is_not_returned(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    slurm.drain('gpu001', 'llmforge: xid GPU3 48', when=NOW - 100)
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'COMPLETED', 0))
    assert [command.kind for command in found['gpu001'].commands] == ['reboot']


def test_a_failed_burnin_after_the_reboot_means_rma_with_evidence(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset', 'reboot']})
    record.gpus = {'3': {'serial': '1650123456789', 'uuid': 'GPU-aaaa-3'}}
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'FAILED', 1, report(ok=False, failed=['dcgm: L3 fail GPU3'])))
    item = found['gpu001']
    assert item.new == rem.RMA
    assert item.record.reason == 'llmforge: rma 1650123456789 burn-in fail (dcgm: L3 fail GPU3) (job 7 failed exit 1); no repair tier left'
    assert '--wrap=exec /usr/local/sbin/llmforge-repair evidence --out /var/lib/llmforge/evidence --reason' in \
        item.commands[-1].argv[-1]
    assert item.record.plan['step']['kind'] == 'evidence' and item.reserve is None
    # The evidence job ends: drained with the RMA reason first, then out of the reservation.
    record = item.record
    record.plan['step']['job_id'] = '8'
    plan, found = decide(slurm, config, [record], jobs=job('8', 'COMPLETED', 0))
    item = found['gpu001']
    assert [command.kind for command in item.commands] == ['drain'] and item.commands[0].phase == 0
    assert item.commands[0].argv[-1] == f'Reason={record.reason}' and item.reserve is False
    assert plan.reservation == ['scontrol', 'delete', 'ReservationName=llmforge_quarantine']
    assert item.record.plan['evidence'] == 'done' and item.record.plan['final']


def test_rma_without_evidence_drains_at_once(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset', 'reboot']})
    _plan, found = decide(slurm, dict(config, evidence_dir=''), [record], jobs=job('7', 'FAILED', 1))
    item = found['gpu001']
    assert [command.kind for command in item.commands] == ['drain'] and item.reserve is False
    assert item.commands[0].argv[-1].startswith('Reason=llmforge: rma GPU3 burn-in fail')


def test_rma_after_k_repairs_of_the_same_gpu_in_d_days(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: xid GPU3 119')
    record = rem.NodeRecord('gpu001', rem.HEALTHY, NOW - 86400, gpus={'3': {'serial': 'S3', 'uuid': 'U3'}})
    repairs = [('gpu001', 'GPU3', 'S3', NOW - day * 86400) for day in (1, 5, 9)]
    _plan, found = decide(slurm, dict(config, evidence_dir=''), [record], repairs=repairs)
    assert found['gpu001'].new == rem.RMA
    assert found['gpu001'].record.reason == 'llmforge: rma S3 3 repairs of S3 within 30 days'
    # Outside the window, or of another GPU (serial), they do not count.
    old = [('gpu001', 'GPU3', 'S3', NOW - 40 * 86400)] * 3
    other = [('gpu001', 'GPU3', 'S9', NOW - 86400)] * 3
    for rows in (old, other, repairs[:2]):
        _plan, found = decide(slurm, config, [record], repairs=rows)
        assert found['gpu001'].new == rem.REPAIRING
    # The serial follows the GPU to another node.
    moved = [('gpu077', 'GPU0', 'S3', NOW - day * 86400) for day in (1, 2, 3)]
    _plan, found = decide(slurm, config, [record], repairs=moved)
    assert found['gpu001'].new == rem.RMA


def test_rma_when_a_hardware_fault_repeats_on_the_same_gpu(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: xid GPU3 48')
    hardware = [('gpu001', 'GPU3', None, NOW - 86400)]
    _plan, found = decide(slurm, config, hardware=hardware)
    assert found['gpu001'].new == rem.RMA and 'hardware fault xid 48 repeats on GPU3' in found['gpu001'].why
    _plan, found = decide(slurm, config, hardware=[('gpu001', 'GPU5', None, NOW - 86400)])
    assert found['gpu001'].new == rem.REPAIRING
    # A software class does not go to RMA on a repeat.
    slurm.drain('gpu001', 'llmforge: xid GPU3 119')
    _plan, found = decide(slurm, config, hardware=[('gpu001', 'GPU3', None, NOW - 86400)])
    assert found['gpu001'].new == rem.REPAIRING


def test_an_rma_class_goes_straight_to_rma(config):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'llmforge: xid GPU2 54')
    _plan, found = decide(slurm, dict(config, evidence_dir=''))
    assert found['gpu001'].new == rem.RMA and found['gpu001'].record.reason == 'llmforge: rma GPU2 xid 54 is an RMA class'


def test_an_administrator_returns_an_rma_node(config):
    slurm = FakeSlurm()
    record = rem.NodeRecord('gpu001', rem.RMA, NOW - 86400, 'llmforge: rma S3 x', plan={'final': True, 'held': False})
    _plan, found = decide(slurm, config, [record])
    item = found['gpu001']
    assert item.new == rem.HEALTHY and item.record.plan == {'returned_at': NOW} and not item.commands
    # Drained with the RMA reason, it stays.
    slurm.drain('gpu001', 'llmforge: rma S3 x')
    _plan, found = decide(slurm, config, [record])
    assert 'gpu001' not in found or found['gpu001'].new == rem.RMA


def test_a_reboot_that_comes_back_goes_on_to_the_burnin(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reboot', 'boot_time': BOOT}, {'tiers_done': ['reset', 'reboot']})
    slurm.nodes['gpu001']['flags'].add('REBOOT_ISSUED')
    _plan, found = decide(slurm, config, [record])
    assert not found.get('gpu001') or not found['gpu001'].commands
    slurm.nodes['gpu001']['flags'].clear()
    slurm.nodes['gpu001']['boot'] = NOW - 100
    _plan, found = decide(slurm, config, [record])
    assert found['gpu001'].record.plan['step']['kind'] == 'burnin'
    assert [command.kind for command in found['gpu001'].commands] == ['submit']


def test_a_reboot_that_does_not_come_back_is_rma(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    slurm.nodes['gpu001'].update(state='DOWN', flags={'NOT_RESPONDING', 'REBOOT_ISSUED'}, reason='reboot timed out',
                                 reason_time=NOW - 10)
    record = repairing({'kind': 'reboot', 'boot_time': BOOT, 'at': NOW - 4000}, {'tiers_done': ['reset', 'reboot']})
    _plan, found = decide(slurm, config, [record])
    item = found['gpu001']
    assert item.new == rem.RMA and 'did not come back from its repair reboot' in item.why
    assert [command.kind for command in item.commands] == ['drain']


def test_a_reboot_request_lost_in_a_crash_is_made_again(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reboot', 'boot_time': BOOT, 'at': NOW - 600}, {'tiers_done': ['reset', 'reboot']})
    _plan, found = decide(slurm, config, [record])
    assert [command.kind for command in found['gpu001'].commands] == ['reboot']
    assert found['gpu001'].record.plan['step']['attempts'] == 2


def test_a_submission_lost_in_a_crash_is_found_by_its_token_or_made_again(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reset', 'job_id': None, 'token': 'tok', 'at': NOW - 30}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('41', 'RUNNING', None))
    assert found['gpu001'].record.plan['step']['job_id'] == '41' and not found['gpu001'].commands
    _plan, found = decide(slurm, config, [record])
    assert not found['gpu001'].commands and 'not listed yet' in found['gpu001'].why
    record.plan['step']['at'] = NOW - 600
    _plan, found = decide(slurm, config, [record])
    assert [command.kind for command in found['gpu001'].commands] == ['submit']


def test_a_job_pending_too_long_is_cancelled(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'reset', 'job_id': '7', 'token': 'tok', 'at': NOW - 5000}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'PENDING', None))
    assert found['gpu001'].commands[0] == rem.Command('cancel', ('scancel', '7'))


def test_a_pending_job_on_a_node_drained_again_resumes_it(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    slurm.drain('gpu001', 'llmforge: xid GPU3 48')
    record = repairing({'kind': 'reset', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'PENDING', None))
    assert [command.kind for command in found['gpu001'].commands] == ['resume']


def test_a_node_removed_from_the_reservation_is_put_back(config):
    slurm = FakeSlurm()
    record = repairing({'kind': 'reset', 'job_id': '7', 'token': 'tok'}, {'tiers_done': ['reset']})
    plan, found = decide(slurm, config, [record], jobs=job('7', 'RUNNING', None))
    assert found['gpu001'].reserve is True and plan.reservation[1] == 'create'


# --- sightings ---------------------------------------------------------------------------------------------------

def comment(job_id, user, nodelist, text, end=NOW - 600):
    return f'{job_id}|{user}|{nodelist}|{stamp(end)}|{text}'


def test_sightings_make_a_node_suspect_and_never_drain_it(config):
    slurm = FakeSlurm()
    rows = [comment('11', 'alice', 'gpu[001-004]', 'llmforge-suspect gpu002 straggler 20% slower')]
    plan, found = decide(slurm, config, comments=rows)
    item = found['gpu002']
    assert item.new == rem.SUSPECT and not item.commands and item.reserve is None
    sighting = next(event for event in item.events if event['kind'] == 'sighting')
    assert (sighting['job_id'], sighting['user'], sighting['action'], sighting['observe']) == ('11', 'alice', 'straggler', True)
    assert sighting['dedup'] == 'sighting|11|gpu002|straggler'


def test_a_sighting_of_a_node_outside_the_jobs_nodelist_is_ignored(config):
    slurm = FakeSlurm()
    rows = [comment(str(20 + index), 'mallory', 'gpu001', 'llmforge-suspect gpu003 hang x') for index in range(5)]
    plan, found = decide(slurm, config, comments=rows)
    assert 'gpu003' not in found and plan.ignored_sightings == 5


def test_n_sightings_from_distinct_jobs_quarantine_the_node_for_a_burnin(config):
    slurm = FakeSlurm()
    rows = [comment(str(30 + index), 'alice', 'gpu[001-002]', 'llmforge-suspect gpu002 hang rank 3') for index in range(3)]
    plan, found = decide(slurm, config, comments=rows)
    item = found['gpu002']
    assert item.new == rem.REPAIRING and item.reserve is True
    assert 'burnin --level 3 --report' in item.commands[-1].argv[-1]
    assert item.record.plan['trigger'] == 'suspect'
    # The same job three times is one sighting.
    rows = [comment('30', 'alice', 'gpu[001-002]', 'llmforge-suspect gpu002 hang rank 3')] * 3
    _plan, found = decide(slurm, config, comments=rows)
    assert found['gpu002'].new == rem.SUSPECT and len(found['gpu002'].events) == 2


def test_a_busy_suspect_is_drained_and_waits_for_its_jobs(config):
    slurm = FakeSlurm()
    slurm.nodes['gpu002']['state'] = 'ALLOCATED'
    sightings = {'gpu002': {str(job): ('alice', NOW - 60) for job in range(3)}}
    _plan, found = decide(slurm, config, sightings=sightings)
    item = found['gpu002']
    assert item.new == rem.QUARANTINED and [command.kind for command in item.commands] == ['drain']
    assert item.commands[0].argv[-1] == 'Reason=llmforge: quarantine suspect 3 jobs' and item.reserve is None
    assert item.record.plan['held'] is True


def test_suspect_min_users_guards_against_one_user(config):
    slurm = FakeSlurm()
    sightings = {'gpu002': {str(job): ('mallory', NOW - 60) for job in range(5)}}
    _plan, found = decide(slurm, dict(config, suspect_min_users=2), sightings=sightings)
    assert found['gpu002'].new == rem.SUSPECT and not found['gpu002'].commands


def test_a_suspect_with_no_sighting_left_is_healthy_again(config):
    slurm = FakeSlurm()
    record = rem.NodeRecord('gpu002', rem.SUSPECT, NOW - 86400 * 8)
    _plan, found = decide(slurm, config, [record])
    assert found['gpu002'].new == rem.HEALTHY


def test_a_failed_suspect_burnin_goes_to_the_repair_tiers(config):
    slurm = FakeSlurm()
    slurm.reservation = ['gpu001']
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'fault': None, 'trigger': 'suspect'})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'FAILED', 1, report(ok=False, failed=['nccl: GPU6 slow'])))
    item = found['gpu001']
    assert item.record.plan['step']['kind'] == 'reset' and '--gpu 6' in item.commands[-1].argv[-1]
    record = repairing({'kind': 'burnin', 'job_id': '7', 'token': 'tok'}, {'fault': None, 'trigger': 'suspect'})
    _plan, found = decide(slurm, config, [record], jobs=job('7', 'FAILED', 1))
    assert [command.kind for command in found['gpu001'].commands] == ['reboot']


# --- whole ticks against the fake Slurm --------------------------------------------------------------------------

def test_a_whole_repair_through_ticks(config, ledger, tmp_path):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    first = tick(slurm, config, ledger)
    assert first['ok'] and 'gpu002 healthy -> repairing' in first['out']
    assert slurm.reservation == ['gpu002'] and 'DRAIN' not in slurm.nodes['gpu002']['flags']
    [(job_id, submitted)] = slurm.submitted('reset')
    assert submitted['reservation'] == 'llmforge_quarantine' and submitted['nodes'] == 'gpu002'
    assert ledger.snapshot(config, NOW).nodes['gpu002'].plan['step']['job_id'] == job_id
    # Re-running the tick does not submit again.
    slurm.start_all()
    tick(slurm, config, ledger)
    assert len(slurm.jobs) == 1
    slurm.now += 300
    slurm.finish(job_id, 0, report(command='reset'))
    tick(slurm, config, ledger)
    [(burnin_id, job)] = slurm.submitted('burnin')
    assert 'burnin --level 3' in job['wrap']
    slurm.now += 3000
    slurm.finish(burnin_id, 0)
    last = tick(slurm, config, ledger)
    assert 'gpu002 repairing -> healthy: burn-in pass' in last['out']
    assert slurm.reservation is None and state(ledger, 'gpu002') == rem.HEALTHY
    metrics = (tmp_path / rem.METRICS_FILE).read_text(encoding='utf-8')
    assert 'llmforge_remediate_repairs_total{tier="reset",outcome="pass"} 1' in metrics
    assert 'llmforge_remediate_repairs_total{tier="burnin",outcome="pass"} 1' in metrics
    assert 'llmforge_remediate_time_to_repair_seconds_count 1' in metrics
    assert 'llmforge_remediate_node_state{node="gpu002",state="healthy"} 1' in metrics
    kinds = [event['kind'] for event in ledger.history('gpu002', 100)]
    for kind in ('drain', 'fault', 'action', 'outcome', 'diagnostic', 'transition', 'repaired'):
        assert kind in kinds
    assert ledger.snapshot(config, NOW).nodes['gpu002'].gpus['3']['serial'] == '1650123456789'


def test_a_whole_escalation_to_rma_through_ticks(config, ledger, tmp_path):
    slurm = FakeSlurm()
    slurm.drain('gpu003', 'llmforge: xid GPU1 119')
    tick(slurm, config, ledger)
    [(reset_id, _job)] = slurm.submitted('reset')
    slurm.now += 300
    slurm.finish(reset_id, 1, report(command='reset', ok=False, gpus={'1': ['SER1', 'GPU-1']}))
    tick(slurm, config, ledger)
    assert 'REBOOT_REQUESTED' in slurm.nodes['gpu003']['flags'] and slurm.reservation == ['gpu003']
    assert slurm.nodes['gpu003']['reason'] == 'llmforge: repair reboot xid GPU1 119'
    slurm.now += 600
    tick(slurm, config, ledger)
    assert not slurm.submitted('burnin')
    slurm.rebooted('gpu003')
    tick(slurm, config, ledger)
    [(burnin_id, _job)] = slurm.submitted('burnin')
    slurm.now += 3000
    slurm.finish(burnin_id, 1, report(ok=False, failed=['dcgm: L3 fail: memory GPU1'], gpus={'1': ['SER1', 'GPU-1']}))
    result = tick(slurm, config, ledger)
    assert 'gpu003 repairing -> rma' in result['out']
    [(evidence_id, job)] = slurm.submitted('evidence')
    assert "--reason 'llmforge: rma SER1 burn-in fail" in job['wrap'] and slurm.reservation == ['gpu003']
    # The node's ledger history goes into the bundle through the job's script, oldest event first.
    script, _sep, rest = job['wrap'].partition(" --history - <<'LLMFORGE_LEDGER_HISTORY'\n")
    body, _sep, end = rest.rpartition('\n')
    assert script.startswith('exec ') and end == 'LLMFORGE_LEDGER_HISTORY'
    events = [json.loads(line) for line in body.splitlines()]
    assert events[0]['kind'] == 'drain' and any(event['kind'] == 'rma' for event in events)
    assert all(event['node'] == 'gpu003' for event in events)
    assert 'DRAIN' not in slurm.nodes['gpu003']['flags']
    slurm.now += 200
    slurm.finish(evidence_id, 0, report(command='evidence'))
    result = tick(slurm, config, ledger)
    assert slurm.nodes['gpu003']['reason'].startswith('llmforge: rma SER1 burn-in fail')
    assert 'DRAIN' in slurm.nodes['gpu003']['flags'] and slurm.reservation is None
    # The drain came before the reservation let go of the node.
    order = [' '.join(call[:3]) for call in slurm.calls if call[0] == 'scontrol' and call[1] in ('update', 'delete')]
    assert order[-2:] == ['scontrol update NodeName=gpu003', 'scontrol delete ReservationName=llmforge_quarantine']
    assert state(ledger, 'gpu003') == rem.RMA
    metrics = (tmp_path / rem.METRICS_FILE).read_text(encoding='utf-8')
    assert 'llmforge_remediate_rma_total 1' in metrics and 'llmforge_remediate_nodes{state="rma"} 1' in metrics
    assert 'llmforge_remediate_repairs_total{tier="reboot",outcome="pass"} 1' in metrics
    assert 'llmforge_remediate_repairs_total{tier="reset",outcome="fail"} 1' in metrics
    # Nothing more happens to it; an administrator's resume after the repair returns it.
    calls = len(slurm.calls)
    tick(slurm, config, ledger)
    assert not [call for call in slurm.calls[calls:] if call[0] in ('sbatch', 'scancel') or call[1] in ('update', 'reboot')]
    slurm.nodes['gpu003']['flags'].discard('DRAIN')
    tick(slurm, config, ledger)
    assert state(ledger, 'gpu003') == rem.HEALTHY


def test_rereading_the_same_drain_and_comments_adds_nothing(config, ledger):
    slurm = FakeSlurm()
    slurm.drain('gpu001', 'maintenance (bob)')
    slurm.comments = [comment('11', 'alice', 'gpu[001-004]', 'llmforge-suspect gpu003 straggler x')]
    tick(slurm, config, ledger)
    count = ledger.db.execute('SELECT COUNT(*) FROM events').fetchone()[0]
    for _again in range(3):
        tick(slurm, config, ledger)
    assert ledger.db.execute('SELECT COUNT(*) FROM events').fetchone()[0] == count
    kinds = sorted(row[0] for row in ledger.db.execute('SELECT kind FROM events'))
    assert kinds == ['drain', 'sighting', 'transition']


def test_a_dry_run_changes_neither_slurm_nor_states(config, ledger):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    slurm.comments = [comment('11', 'alice', 'gpu[001-004]', 'llmforge-suspect gpu003 straggler x')]
    result = tick(slurm, config, ledger, dry_run=True)
    assert 'gpu002 healthy -> repairing' in result['out'] and '(dry run)' in result['out']
    assert 'would run: sbatch --parsable --job-name=llmforge-repair' in result['out']
    assert 'would run: scontrol create reservation' in result['out']
    changing = [call for call in slurm.calls if call[0] in ('sbatch', 'scancel') or call[1] in ('update', 'create', 'reboot')]
    assert not changing and slurm.reservation is None
    assert state(ledger, 'gpu002') == rem.HEALTHY and state(ledger, 'gpu003') == rem.HEALTHY
    # Observations are kept, and the fault seen by the dry run is no earlier fault of the real run.
    kinds = sorted(row[0] for row in ledger.db.execute('SELECT kind FROM events'))
    assert kinds == ['drain', 'fault', 'sighting']
    tick(slurm, config, ledger)
    assert state(ledger, 'gpu002') == rem.REPAIRING and len(slurm.jobs) == 1


def test_a_failing_reservation_update_resumes_nothing(config, ledger):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    slurm.failing.add('scontrol create reservation')
    result = tick(slurm, config, ledger)
    assert 'not done this tick' in result['out']
    assert 'DRAIN' in slurm.nodes['gpu002']['flags'] and not slurm.jobs
    assert state(ledger, 'gpu002') == rem.HEALTHY
    slurm.failing.clear()
    tick(slurm, config, ledger)
    assert slurm.reservation == ['gpu002'] and len(slurm.jobs) == 1


def test_a_failing_sbatch_is_tried_again_after_the_lookup_time(config, ledger):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    slurm.failing.add('sbatch')
    tick(slurm, config, ledger)
    assert state(ledger, 'gpu002') == rem.REPAIRING and not slurm.jobs
    slurm.failing.clear()
    tick(slurm, config, ledger)
    assert not slurm.jobs
    slurm.now += 600
    tick(slurm, config, ledger)
    assert len(slurm.jobs) == 1


def test_sacct_down_keeps_waiting_for_results(config, ledger):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    tick(slurm, config, ledger)
    [(job_id, _job)] = slurm.submitted()
    slurm.finish(job_id, 1)
    slurm.jobs[job_id]['name'] = 'gone-from-squeue'
    slurm.sacct_down = True
    slurm.now += 5000
    result = tick(slurm, config, ledger)
    assert result['ok'] and 'sacct (repair jobs)' in result['out'] and len(slurm.jobs) == 1
    assert state(ledger, 'gpu002') == rem.REPAIRING


def test_slurm_unreadable_is_exit_3_with_metrics(config, ledger, tmp_path):
    slurm = FakeSlurm()
    slurm.failing.add('scontrol show node')
    result = tick(slurm, config, ledger)
    assert not result['ok'] and 'Slurm not read' in result['out']
    assert 'llmforge_remediate_up 0' in (tmp_path / rem.METRICS_FILE).read_text(encoding='utf-8')


def test_the_tick_budget_stops_new_commands(config, ledger):
    slurm = FakeSlurm(8)
    for name in slurm.nodes:
        slurm.drain(name, 'llmforge: xid GPU0 48')
    result = tick(slurm, dict(config, max_concurrent=8, max_percent=100, timeouts=dict(config['timeouts'], tick=1e-9)), ledger)
    assert 'tick budget' in result['out'] and not slurm.jobs


# --- ledger ------------------------------------------------------------------------------------------------------

def test_ledger_schema_wal_indexes_and_permissions(config, ledger):
    path = config['ledger']
    assert ledger.db.execute('PRAGMA journal_mode').fetchone()[0] == 'wal'
    assert ledger.db.execute('PRAGMA user_version').fetchone()[0] == rem.SCHEMA_VERSION
    assert ledger.meta('schema_version') == str(rem.SCHEMA_VERSION)
    indexes = {row[0] for row in ledger.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {'events_node_ts', 'events_kind_ts', 'events_serial_ts', 'events_uuid_ts'} <= indexes
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    plan = ledger.db.execute("EXPLAIN QUERY PLAN SELECT * FROM events WHERE gpu_serial = 'x' AND ts > 0").fetchall()
    assert 'events_serial_ts' in str(plan)


def test_a_newer_schema_is_refused(config, ledger):
    ledger.db.execute('PRAGMA user_version = 99')
    with pytest.raises(rem.LedgerError, match='schema version 99 is newer'):
        rem.Ledger(config['ledger'])


def test_backup_is_a_consistent_copy(config, ledger, tmp_path):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    tick(slurm, config, ledger)
    target = tmp_path / 'backups' / 'ledger.sqlite'
    ledger.backup(str(target))
    assert os.stat(target).st_mode & 0o777 == 0o600
    copy = sqlite3.connect(target)
    assert copy.execute('PRAGMA integrity_check').fetchone()[0] == 'ok'
    assert copy.execute('SELECT COUNT(*) FROM events').fetchone()[0] == \
        ledger.db.execute('SELECT COUNT(*) FROM events').fetchone()[0]
    assert copy.execute("SELECT state FROM nodes WHERE name = 'gpu002'").fetchone()[0] == rem.REPAIRING
    copy.close()


def test_events_are_deduplicated_and_pruned(ledger):
    events = [{'ts': NOW, 'node': 'n', 'kind': 'sighting', 'dedup': 'sighting|1|n|hang'}] * 3
    assert ledger.add_events(events) == 1
    assert ledger.add_events([{'ts': NOW - 10 * 86400, 'node': 'n', 'kind': 'action'}]) == 1
    assert ledger.prune(NOW - 86400) == 1


# --- metrics -----------------------------------------------------------------------------------------------------

def test_metrics_pass_promtool(config, ledger, tmp_path):
    slurm = FakeSlurm()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48')
    tick(slurm, config, ledger)
    text = (tmp_path / rem.METRICS_FILE).read_text(encoding='utf-8')
    assert 'llmforge_remediate_nodes{state="repairing"} 1' in text
    assert 'llmforge_remediate_node_state_since_timestamp_seconds{node="gpu002",state="repairing"}' in text
    assert 'llmforge_remediate_up 1' in text and 'llmforge_remediate_rma_total 0' in text
    assert re.search(r'llmforge_remediate_time_to_repair_seconds_bucket\{le="\+Inf"\} 0', text)
    promtool = shutil.which('promtool') or (str(ROOT / 'build/tools/usr/bin/promtool')
                                            if (ROOT / 'build/tools/usr/bin/promtool').exists() else None)
    if not promtool:
        pytest.skip('promtool is not installed')
    done = subprocess.run([promtool, 'check', 'metrics'], input=text, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


# --- configuration -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(('data', 'message'), [
    ({'max_concurrent': -1}, 'max_concurrent must be a whole number from 0'),
    ({'max_percent': 150}, 'max_percent must be a number from 0 to 100'),
    ({'suspect_sightings': 0}, 'suspect_sightings must be a whole number from 1'),
    ({'rma_repairs': 'three'}, 'rma_repairs must be a whole number'),
    ({'rma_window_days': True}, 'rma_window_days must be a number'),
    ({'burnin_level': 5}, 'burnin_level must be a whole number from 1 to 4'),
    ({'burnin_peer': 'a b'}, 'burnin_peer must be a Slurm node name'),
    ({'reservation': 'a,b'}, 'reservation must be one word'),
    ({'partition_limits': {'gpu': -2}}, 'partition_limits.gpu must be a whole number'),
    ({'partition_limits': []}, 'partition_limits must be an object'),
    ({'timeouts': {'reset': 0}}, 'timeouts.reset must be a number'),
    ({'timeouts': {'nap': 3}}, 'timeouts: unknown field(s) nap'),
    ({'timeouts': {'command': 500}}, 'timeouts.command must not exceed timeouts.tick'),
    ({'ledger': 'relative.sqlite'}, 'ledger must be an absolute path'),
    ({'ledger': ''}, 'ledger must be an absolute path'),
    ({'evidence_dir': 'x'}, 'evidence_dir must be an absolute path or empty'),
    ({'sbatch': 'bin/sbatch'}, 'sbatch must be a command name'),
    ({'colour': 'blue'}, 'unknown field(s) colour'),
])
def test_config_errors_name_the_field(data, message):
    with pytest.raises(rem.ConfigError, match=re.escape(message)):
        rem.check_config(data)


def test_config_file_errors_name_the_file(tmp_path):
    path = tmp_path / 'remediate.json'
    path.write_text('{"max_percent": 101}', encoding='utf-8')
    with pytest.raises(rem.ConfigError, match=f'{re.escape(str(path))}: max_percent'):
        rem.load_config(str(path))
    path.write_text('{', encoding='utf-8')
    with pytest.raises(rem.ConfigError, match='cannot be read as JSON'):
        rem.load_config(str(path))
    with pytest.raises(rem.ConfigError, match='not found'):
        rem.load_config(str(tmp_path / 'none.json'))


def test_the_defaults_are_valid():
    config = rem.check_config({})
    assert config['reservation'] == 'llmforge_quarantine' and config['max_concurrent'] == 2
    assert config['suspect_sightings'] == 3 and config['rma_repairs'] == 3 and config['rma_window_days'] == 30


# --- the program -------------------------------------------------------------------------------------------------

def test_main_runs_a_tick_backs_up_and_prints_history(tmp_path, capsys):
    config_path = tmp_path / 'remediate.json'
    config_path.write_text(json.dumps({'ledger': str(tmp_path / 'l' / 'ledger.sqlite'), 'textfile_dir': str(tmp_path)}),
                           encoding='utf-8')
    slurm = FakeSlurm()
    slurm.now = time.time()
    slurm.drain('gpu002', 'llmforge: xid GPU3 48', when=slurm.now - 60)
    assert rem.main(['--config', str(config_path)], runner=slurm) == 0
    assert 'gpu002 healthy -> repairing' in capsys.readouterr().out
    assert rem.main(['--config', str(config_path), '--backup', str(tmp_path / 'copy.sqlite')]) == 0
    assert (tmp_path / 'copy.sqlite').exists()
    assert rem.main(['--config', str(config_path), '--history', 'gpu002']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[1])['state'] == 'repairing' and any('"fault"' in line for line in lines)
    assert rem.main(['--config', str(config_path), '--check-config']) == 0
    capsys.readouterr()
    assert rem.main(['--config', str(config_path), '--fleet']) == 0
    stage = json.loads(capsys.readouterr().out)
    assert stage['nodes'] == {'gpu002': {'state': 'repairing', 'since': stage['nodes']['gpu002']['since'],
                                         'reason': 'llmforge: xid GPU3 48'}}
    assert [(item['subject'], item['status'], item['actual']) for item in stage['checks']] == [
        ('gpu002', 'warn', 'repairing')]
    assert stage['healthy'] and stage['facts']['repairing'] == 1
    # The validate report takes it as a cluster-level stage.
    report = build_report({}, 'demo', '2026-12-06T00:00:00Z', {'fleet_health': stage})
    assert report['summary']['healthy'] and report['stages']['fleet_health']['counts']['warn'] == 1
    assert 'Fleet health (llmforge-remediate)' in render_html(report)
    slurm.failing.add('scontrol show node')
    assert rem.main(['--config', str(config_path)], runner=slurm) == 3
    config_path.write_text('{"max_percent": -1}', encoding='utf-8')
    assert rem.main(['--config', str(config_path)]) == 2
    assert 'max_percent' in capsys.readouterr().err


def test_the_installed_program_runs_from_its_code_alone(tmp_path):
    library = install('programs._remediate', tmp_path / 'python')
    done = run_launcher('programs._remediate', library, '--help')
    assert done.returncode == 0 and done.stdout.startswith('usage: llmforge-remediate ')
    config_path = tmp_path / 'remediate.json'
    config_path.write_text(json.dumps({'ledger': str(tmp_path / 'ledger.sqlite'), 'textfile_dir': ''}), encoding='utf-8')
    done = run_launcher('programs._remediate', library, '--config', str(config_path), '--check-config')
    assert done.returncode == 0, done.stderr
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    text = LAUNCHER.read_text(encoding='utf-8')
    assert text.startswith('#!/usr/bin/python3 -I\n') and os.stat(LAUNCHER).st_mode & 0o111
    assert "LIBRARY = '/usr/local/lib/llmforge/python'\n" in text and 'os.environ' not in text
    done = subprocess.run([sys.executable, '-I', str(LAUNCHER), '--help'], capture_output=True, text=True, env=env,
                          timeout=60, check=False) if not os.path.exists('/usr/local/lib/llmforge/python') else None
    if done is not None:
        assert done.returncode == 2 and 'llmforge-remediate: cannot load its code from' in done.stderr


# --- the role's wiring -------------------------------------------------------------------------------------------

def _remediate_block():
    import yaml  # pylint: disable=import-outside-toplevel
    tasks = yaml.safe_load((ROOT / 'roles' / 'slurm_controller' / 'tasks' / 'remediate.yml').read_text(encoding='utf-8'))
    return tasks[0]


def _render(text, extra=None):
    from role_render import render  # pylint: disable=import-outside-toplevel
    inventory = {'hosts': {'ctl1': {}}, 'groups': {'slurm_controllers': ['ctl1']}}
    result = render('slurm_controller', '', inventory, tasks='absent.yml', text=text, base_roles=['slurm_common'],
                    extra_vars=extra or {})
    assert 'error' not in result, result.get('error')
    return result['hosts']['ctl1']


def _settings(extra):
    """The block's remediate.json expression, rendered."""
    expression = _remediate_block()['vars']['_slurm_controller_remediation_settings'].strip()
    assert expression.startswith('{{') and expression.endswith('}}')
    return json.loads(_render('{{ (' + expression[2:-2] + ') | to_json }}', extra))


def test_the_role_writes_settings_the_program_accepts_and_bounded_hardened_units():
    block = _remediate_block()
    assert block['when'] == 'slurm_controller_remediation | bool'
    settings = _settings({'slurm_controller_remediation_config': {'burnin_level': 2, 'timeouts': {'tick': 120}}})
    config = rem.check_config(settings)
    assert (config['max_concurrent'], config['max_percent'], config['suspect_sightings'], config['rma_repairs'],
            config['rma_window_days'], config['burnin_level']) == (2, 10, 3, 3, 30, 2)
    assert config['ledger'] == '/var/lib/llmforge/remediate/ledger.sqlite'
    assert config['timeouts']['tick'] == 120 and config['timeouts']['reset'] == rem.DEFAULT_TIMEOUTS['reset']
    assert config['textfile_dir'] == '/var/lib/node_exporter/textfile'
    templates = ROOT / 'roles' / 'slurm_controller' / 'templates'
    unit_vars = {'_slurm_controller_remediation_settings': settings,
                 '_slurm_controller_remediation_ledger_dir': block['vars']['_slurm_controller_remediation_ledger_dir'],
                 '_slurm_controller_remediation_textfile_dir': settings['textfile_dir']}
    service = _render((templates / 'llmforge-remediate.service.j2').read_text(encoding='utf-8'), unit_vars)
    assert 'ExecStart=/usr/local/sbin/llmforge-remediate --config /etc/llmforge/remediate.json' in service
    assert 'TimeoutStartSec=180' in service and 'ProtectSystem=strict' in service and 'PrivateTmp=true' in service
    assert 'ReadWritePaths=/var/lib/llmforge/remediate\n' in service
    assert 'ReadWritePaths=-/var/lib/node_exporter/textfile' in service
    timer = _render((templates / 'llmforge-remediate.timer.j2').read_text(encoding='utf-8'))
    assert 'OnUnitInactiveSec=5min' in timer and 'WantedBy=timers.target' in timer


def test_the_roles_install_the_programs_through_node_programs():
    controller = (ROOT / 'roles' / 'slurm_controller' / 'tasks' / 'remediate.yml').read_text(encoding='utf-8')
    node = (ROOT / 'roles' / 'slurm_node' / 'tasks' / 'repair.yml').read_text(encoding='utf-8')
    assert 'name: llmforge.cluster.node_programs' in controller and 'node_programs_module: programs._remediate' in controller
    assert 'name: llmforge.cluster.node_programs' in node and 'node_programs_module: programs._repair' in node
    assert 'validate: /usr/local/sbin/llmforge-remediate --check-config --config %s' in controller
    main = (ROOT / 'roles' / 'slurm_controller' / 'tasks' / 'main.yml').read_text(encoding='utf-8')
    assert 'file: remediate.yml' in main and 'inventory_hostname == _slurm_controller_primary' in main
    assert 'import_tasks: repair.yml' in (ROOT / 'roles' / 'slurm_node' / 'tasks' / 'main.yml').read_text(encoding='utf-8')
