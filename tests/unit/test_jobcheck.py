# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-jobcheck: the prolog's start record and the epilog's bounded verdict, against the nvidia-smi shim (8-GPU
HGX H200 fixture, with processes and ECC errors written into it) and a kernel log file; and how the health check
and the drain rules take over from Slurm's generic "Epilog error"."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import time

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _jobcheck as jc

TESTS = pathlib.Path(__file__).resolve().parents[1]
REPO = TESTS.parent
GPU = TESTS / 'fixtures' / 'gpu'
SHIM = GPU / 'nvidia-smi-shim'
XML = (GPU / 'hgx-h200-8' / 'smi_q.xml').read_text(encoding='utf-8')
BUS3 = re.findall(r'<gpu id="0000([0-9A-Fa-f]{4}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})', XML)[3]


def _gpu_blocks(xml):
    return xml.split('<gpu id=')


def with_process(xml, gpu, pid=4711, used_mib=None):
    parts = _gpu_blocks(xml)
    block = parts[gpu + 1]
    block = block.replace('<processes>\n', '<processes>\n<process_info><gpu_instance_id>N/A</gpu_instance_id>'
                          f'<compute_instance_id>N/A</compute_instance_id><pid>{pid}</pid><type>C</type>'
                          '<process_name>python3</process_name><used_memory>2048 MiB</used_memory></process_info>\n', 1)
    if used_mib is not None:
        block = re.sub(r'(<fb_memory_usage>.*?<used>)\d+ MiB', rf'\g<1>{used_mib} MiB', block, count=1, flags=re.S)
    parts[gpu + 1] = block
    return '<gpu id='.join(parts)


def with_ecc(xml, gpu, count):
    parts = _gpu_blocks(xml)
    parts[gpu + 1] = re.sub(r'(<volatile>.*?<dram_uncorrectable>)0<', rf'\g<1>{count}<', parts[gpu + 1], count=1, flags=re.S)
    return '<gpu id='.join(parts)


@pytest.fixture
def node(tmp_path):
    """A node: an nvidia-smi answering from a copy of the fixture, a kernel log file, the health check's expectation."""
    fixture = tmp_path / 'gpu'
    fixture.mkdir()
    for name in ('smi_q.xml', 'topo_m.txt', 'smi_version.txt', 'list_gpus.txt'):
        (fixture / name).write_text((GPU / 'hgx-h200-8' / name).read_text(encoding='utf-8'), encoding='utf-8')
    smi = tmp_path / 'nvidia-smi'
    smi.write_text(f'#!/bin/sh\nNVIDIA_SMI_SHIM_DIR={fixture} exec {SHIM} "$@"\n', encoding='utf-8')
    smi.chmod(0o755)
    kernel = tmp_path / 'kernel.log'
    kernel.write_text('[Sun Dec  6 06:00:00 2026] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n',
                      encoding='utf-8')
    config = tmp_path / 'nodecheck.json'
    config.write_text(json.dumps({'validators': {'gpu_topology': {'nvidia_smi': str(smi)},
                                                 'kernel_faults': {'source': str(kernel), 'nvidia_smi': str(smi)}}}),
                      encoding='utf-8')

    class Node:
        path = tmp_path
        xml = fixture / 'smi_q.xml'
        log = kernel
        conf = str(config)
        records = str(tmp_path / 'jobs')
        fault = str(tmp_path / 'run' / 'epilog-fault.json')

        def epilog(self, env, **kwargs):
            return jc.epilog(env, self.conf, self.records, self.fault, **kwargs)

        def prolog(self, env, now=None):
            return jc.prolog(env, self.conf, self.records, now=now)

    return Node()


ENV = {'SLURM_JOB_ID': '42', 'SLURM_JOB_GPUS': '2,3'}


def test_job_gpus_and_id_take_only_ascii_digits():
    assert jc.job_gpus({'SLURM_JOB_GPUS': '3,0, 7,x,\u00b2'}) == [0, 3, 7]
    assert jc.job_gpus({}) == []
    assert jc.job_id({'SLURM_JOB_ID': '42'}) == '42'
    assert jc.job_id({'SLURM_JOB_ID': '4/2'}) == ''


def test_prolog_records_start_gpus_and_ecc_counts_0600(node):
    record = node.prolog(ENV, now=1000.0)
    assert record['errors'] == []
    path = pathlib.Path(node.records) / '42.json'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text(encoding='utf-8'))
    assert saved['start'] == 1000.0 and saved['gpus'] == [2, 3]
    assert saved['ecc'] == {str(index): 0 for index in range(8)}


def test_prolog_never_fails_a_job(node, tmp_path):
    broken = tmp_path / 'broken.json'
    broken.write_text(json.dumps({'validators': {'gpu_topology': {'nvidia_smi': str(tmp_path / 'missing')}}}), encoding='utf-8')
    record = jc.prolog(ENV, str(broken), node.records)
    assert record['errors'] and 'nvidia-smi' in record['errors'][0]
    assert jc.prolog({}, node.conf, node.records)['errors'] == ['SLURM_JOB_ID is not set']


def test_epilog_clean_job_passes_and_removes_its_record(node):
    node.prolog(ENV)
    result = node.epilog(ENV)
    assert result['healthy'], result
    assert not os.path.exists(node.fault)
    assert not (pathlib.Path(node.records) / '42.json').exists()
    assert result['duration_seconds'] < jc.EPILOG_SECONDS


def test_epilog_finds_leftover_processes_on_the_jobs_gpus_only(node):
    node.prolog(ENV)
    node.xml.write_text(with_process(XML, 5), encoding='utf-8')  # another job's GPU
    assert node.epilog(ENV)['healthy']
    node.prolog(ENV)
    node.xml.write_text(with_process(XML, 3, pid=4711, used_mib=2048), encoding='utf-8')
    result = node.epilog(ENV)
    assert not result['healthy']
    assert result['reason'] == 'epilog GPU3 leftover processes 4711'
    assert any('memory not released 2048 MiB' == item['actual'] for item in result['checks'])
    record = json.loads(pathlib.Path(node.fault).read_text(encoding='utf-8'))
    assert record['job_id'] == '42' and record['reason'] == result['reason']


def test_epilog_counts_uncorrectable_ecc_errors_since_the_prolog(node):
    node.prolog(ENV)
    node.xml.write_text(with_ecc(XML, 2, 3), encoding='utf-8')
    result = node.epilog(ENV)
    assert result['reason'] == 'epilog GPU2 ecc uncorrectable +3'


def test_epilog_finds_kernel_faults_since_the_job_began(node):
    node.prolog(ENV, now=time.time() - 5)
    stamp = time.strftime('%a %b %e %H:%M:%S %Y', time.localtime())
    bus = f'{BUS3[0]}:{BUS3[1]}:{BUS3[2]}'.lower()
    with open(node.log, 'a', encoding='utf-8') as handle:
        handle.write(f"[{stamp}] NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    result = node.epilog({'SLURM_JOB_ID': '42'})  # a CPU job: no GPU checks, the kernel log still counts
    assert not result['healthy']
    assert result['reason'] == 'epilog xid GPU3 79', result


def test_a_fault_the_health_check_drained_for_during_the_job_does_not_fail_the_epilog(node):
    """The job's own node check (after a failed srun) drained the node `llmforge: xid GPU3 79`: Slurm's "Epilog error"
    must not replace that reason, so the epilog does not fail for the same fault; a fault it has not drained for,
    or a drain from before the job began, still fails it."""
    node.prolog(ENV, now=time.time() - 5)
    stamp = time.strftime('%a %b %e %H:%M:%S %Y', time.localtime())
    bus = f'{BUS3[0]}:{BUS3[1]}:{BUS3[2]}'.lower()
    with open(node.log, 'a', encoding='utf-8') as handle:
        handle.write(f"[{stamp}] NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n")
    state = node.path / 'nodecheck-state.json'
    config = json.loads(pathlib.Path(node.conf).read_text(encoding='utf-8'))
    pathlib.Path(node.conf).write_text(json.dumps({**config, 'state_file': str(state)}), encoding='utf-8')

    def health_check(finished_at, subject='GPU3'):
        state.write_text(json.dumps({
            'healthy': False, 'finished_at': finished_at, 'reason': f'llmforge: xid {subject} 79',
            'slurm': {'action': 'drain', 'done': True, 'reason': f'llmforge: xid {subject} 79'},
            'checks': [{'name': 'xid', 'subject': subject, 'actual': '79', 'status': 'fail'}]}), encoding='utf-8')

    health_check(time.time())
    result = node.epilog({'SLURM_JOB_ID': '42'})
    assert result['healthy'] and not pathlib.Path(node.fault).exists(), result
    for stale in ({'finished_at': time.time() - 3600}, {'finished_at': time.time(), 'subject': 'GPU1'}):
        node.prolog(ENV, now=time.time() - 5)
        health_check(**stale)
        assert node.epilog({'SLURM_JOB_ID': '42'})['reason'] == 'epilog xid GPU3 79', stale


def test_epilog_is_bounded_when_nvidia_smi_hangs(node, tmp_path):
    hang = tmp_path / 'hang-smi'
    hang.write_text('#!/bin/sh\nexec sleep 30\n', encoding='utf-8')
    hang.chmod(0o755)
    pathlib.Path(node.conf).write_text(json.dumps({'validators': {'gpu_topology': {'nvidia_smi': str(hang)}}}), encoding='utf-8')
    started = time.monotonic()
    result = node.epilog(ENV)
    assert time.monotonic() - started < jc.EPILOG_SECONDS + 0.5
    assert result['reason'] == 'epilog nvidia-smi nvidia-smi hung'


def test_fault_record_is_the_health_checks_failing_epilog_check_until_cleared(node):
    assert jc.fault_check(node.fault)['status'] == 'pass'
    jc.record_fault(node.fault, '42', [], 'epilog GPU3 leftover processes 4711')
    found = jc.fault_check(node.fault)
    assert found['status'] == 'fail'
    assert drain.drain_reason([found]) == 'llmforge: epilog GPU3 leftover processes 4711'
    assert jc.clear_fault(node.fault) and not jc.clear_fault(node.fault)
    assert jc.fault_check(node.fault)['status'] == 'pass'


def test_the_precise_reason_replaces_slurms_epilog_error():
    found = {'name': 'epilog', 'status': 'fail', 'subject': 'GPU3', 'expected': 'clean', 'actual': 'leftover processes 4711',
             'message': ''}
    generic = {'name': 'gpu1', 'state': 'IDLE+DRAIN', 'reason': 'Epilog error', 'drained': True}
    decision = drain.drain_action([found], generic)
    assert decision['action'] == 'drain' and decision['reason'] == 'llmforge: epilog GPU3 leftover processes 4711'
    # Healthy on Slurm's reason alone: left alone (the record is what proves the epilog's finding gone).
    clean = dict(found, status='pass', actual='clean')
    assert drain.drain_action([clean], generic)['action'] is None
    ours = dict(generic, reason='llmforge: epilog GPU3 leftover processes 4711')
    assert drain.drain_action([clean], ours)['action'] == 'resume'
    admin = dict(generic, reason='admin: fan swap')
    assert drain.drain_action([found], admin)['action'] is None
