# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage acceptance with fio: job argv, the JSON parser on real captures (fixtures/fio), and the fleet judging.

bench() runs against fixtures/fio/fio-shim here (O_DIRECT refused, a hang, cleanup); test_storage_bench_module.py
runs real fio.
"""

from __future__ import annotations

import copy
import json
import pathlib
import shutil
import typing as t

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import storage as filters
from ansible_collections.llmforge.cluster.plugins.module_utils import _fio as fio
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain

from mutations import assert_own_error, mutated_structure, mutated_text

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'fio'
SHIM = FIXTURES / 'fio-shim'
CAPTURES = ['scratch_seq_write', 'scratch_seq_read', 'scratch_rand_read', 'shared_seq_read', 'shared_ckpt_write']
MIB = 1024 * 1024


def text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding='utf-8')


def raw(name: str) -> dict:
    return json.loads(text(name))


def examples(count: int):
    return settings(max_examples=count, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fleet() -> dict:
    return json.loads(text('fleet.json'))


# --- jobs ------------------------------------------------------------------------------------------

def test_argv_of_scratch_seq_read():
    job = fio.build_job('scratch_seq_read', '/scratch/t', '10G', 30)
    assert fio.job_argv(job, '/usr/bin/fio') == [
        '/usr/bin/fio', '--output-format=json', '--eta=never', '--name=llmforge-scratch_seq_read',
        '--directory=/scratch/t',
        '--rw=read', '--bs=1M', '--size=10737418240', '--numjobs=1', '--ioengine=libaio', '--iodepth=32', '--direct=1',
        '--runtime=30', '--time_based']
    assert job['size_bytes'] == 10 * 1024 ** 3 and job['direct'] is True


def test_argv_of_random_read_and_overrides():
    argv = fio.job_argv(fio.build_job('scratch_rand_read', '/d', '64M', 5, numjobs=8, iodepth=128, direct=False))
    assert '--rw=randread' in argv and '--bs=4k' in argv
    assert '--numjobs=8' in argv and '--iodepth=128' in argv and '--direct=0' in argv
    assert '--randrepeat=0' in argv and '--norandommap' in argv


def test_checkpoint_write_is_buffered_synchronous_and_synced_once():
    job = fio.build_job('shared_ckpt_write', '/shared/t', '20G', 30, iodepth=64, direct=True)
    argv = fio.job_argv(job)
    assert '--direct=0' in argv and '--ioengine=psync' in argv and '--iodepth=1' in argv
    assert '--end_fsync=1' in argv and '--bs=16M' in argv
    assert not any(arg.startswith('--runtime') or arg == '--time_based' for arg in argv), 'written once, whole'
    assert job['direct'] is False


def test_job_file_says_the_same_as_the_argv():
    job = fio.build_job('shared_seq_read', '/shared/t', '1G', 30)
    assert fio.job_file(job) == ('[llmforge-shared_seq_read]\ndirectory=/shared/t\nrw=read\nbs=1M\nsize=1073741824\n'
                                 'numjobs=4\nioengine=libaio\niodepth=16\ndirect=1\nruntime=30\ntime_based\n')


@pytest.mark.parametrize('size, expected', [('64M', 64 * MIB), ('1g', 1024 ** 3), ('512k', 512 * 1024), ('4096', 4096),
                                            (4096, 4096), (' 2T ', 2 * 1024 ** 4)])
def test_sizes(size, expected):
    assert fio.parse_size(size) == expected


@pytest.mark.parametrize('size', ['1GB', '1GiB', '10%', '-1M', '0', '', '1.5G', True, None])
def test_sizes_refused(size):
    with pytest.raises(fio.FioError, match='size'):
        fio.parse_size(size)


@pytest.mark.parametrize('kwargs, message', [
    ({'profile': 'nope'}, "unknown profile 'nope'"),
    ({'runtime': 0}, 'runtime must be a whole number of at least 1'),
    ({'numjobs': 0}, 'numjobs'),
    ({'iodepth': 'deep'}, 'iodepth'),
    ({'profile': 'scratch_rand_read', 'size': '2k'},
     r'size \(2.0 KiB\) must be at least the block size of scratch_rand_read, 4k'),
])
def test_bad_job_settings(kwargs, message):
    args = dict({'profile': 'scratch_seq_read', 'directory': '/d', 'size': '1G', 'runtime': 30}, **kwargs)
    with pytest.raises(fio.FioError, match=message):
        fio.build_job(**args)


def test_space_needed():
    jobs = [fio.build_job('scratch_seq_read', '/d', '1G', 30), fio.build_job('scratch_rand_read', '/d', '1G', 30)]
    assert fio.space_needed(jobs, keep_files=False) == 4 * 1024 ** 3  # the largest profile: 4 jobs
    assert fio.space_needed(jobs, keep_files=True) == 5 * 1024 ** 3


# --- parsing the real captures ---------------------------------------------------------------------

@pytest.mark.parametrize('name', CAPTURES)
def test_real_captures_parse(name):
    parsed = fio.parse_output(text(f'{name}.json'))
    assert parsed['fio_version'] == 'fio-3.33'
    assert fio.profile_in(parsed) == name
    assert parsed['errors'] == [] and parsed['notes'] == []
    figures = fio.figures(parsed, name)
    direction = 'write' if name.endswith('write') else 'read'
    jobs = raw(f'{name}.json')['jobs']
    assert figures['jobs'] == len(jobs)
    assert figures['mib_s'] == round(sum(job[direction]['bw_bytes'] for job in jobs) / MIB, 1)
    assert figures['mib_s'] == pytest.approx(sum(job[direction]['bw'] for job in jobs) / 1024, abs=0.1)
    assert figures['iops'] == round(sum(job[direction]['iops'] for job in jobs), 1)
    p99s = [job[direction]['clat_ns']['percentile']['99.000000'] for job in jobs]
    assert figures['lat_p99_ms'] == round(max(p99s) / 1e6, 3)
    assert figures['mib_s'] > 0 and figures['iops'] > 0 and figures['runtime_s'] > 0
    assert figures['ended_at'] == raw(f'{name}.json')['timestamp_ms'] / 1000
    assert figures['started_at'] == pytest.approx(figures['ended_at'] - figures['runtime_s'], abs=0.001)


def test_several_jobs_add_up():
    """The random read capture has 4 jobs: IOPS summed, runtime the longest, the mean weighted by I/Os."""
    parsed = fio.parse_output(text('scratch_rand_read.json'))
    jobs = [job['read'] for job in raw('scratch_rand_read.json')['jobs']]
    assert len(jobs) == 4
    assert parsed['read']['runtime_ms'] == max(job['runtime'] for job in jobs)
    assert parsed['read']['total_ios'] == sum(job['total_ios'] for job in jobs)
    weighted = sum(job['clat_ns']['mean'] * job['total_ios'] for job in jobs) / sum(job['total_ios'] for job in jobs)
    assert parsed['read']['clat_mean_ns'] == pytest.approx(weighted)
    assert parsed['write']['io_bytes'] == 0 and parsed['write']['clat_p99_ns'] is None


def test_checkpoint_write_time_covers_the_fsync():
    figures = fio.figures(fio.parse_output(text('shared_ckpt_write.json')), 'shared_ckpt_write')
    assert figures['io_mib'] == 64.0  # the whole file, once
    assert figures['mib_s'] == pytest.approx(64.0 / figures['runtime_s'], rel=0.02)


def test_text_before_the_json_is_kept_as_notes():
    parsed = fio.parse_output(text('note_psync_iodepth.txt'))
    assert parsed['notes'] == ['note: both iodepth >= 1 and synchronous I/O engine are selected, queue depth will be '
                               'capped at 1']
    assert fio.figures(parsed, 'scratch_seq_write')['io_mib'] == 16.0


def test_job_error_is_reported():
    parsed = fio.parse_output(text('error_einval.txt'))
    assert parsed['errors'] == [{'job': 'llmforge-scratch_seq_write', 'index': 0, 'errno': 22,
                                 'error': 'EINVAL (Invalid argument)'}]
    assert parsed['notes'][0].startswith('fio: pid=') and 'err=22' in parsed['notes'][0]


def test_truncated_output():
    with pytest.raises(fio.FioError, match=r'the fio JSON output is cut off at line \d+ column \d+'):
        fio.parse_output(text('truncated.txt'))


@pytest.mark.parametrize('output, message', [
    ('', r'no JSON object in the fio output \(the output is empty\)'),
    ('fio: unrecognized option --bogus\n', 'no JSON object in the fio output; it printed: fio: unrecognized option'),
    ('{\n  "jobs" : [ }\n}\n', 'the fio JSON output is malformed at line 2'),
    ('{"jobs": []}\n', 'the fio JSON output has no jobs'),
    ('{"jobs": [1]}\n', r'jobs\[0\] must be an object'),
    ('{"jobs": [{"error": 0}]}\n', r'jobs\[0\].jobname must be a string'),
    ('{"jobs": [{"jobname": "x", "error": "22"}]}\n', r'jobs\[0\].error must be a whole number'),
    ('{"jobs": [{"jobname": "x", "error": 0, "read": {"bw": 1, "iops": 1}}]}\n', r'jobs\[0\].write must be an object'),
])
def test_malformed_output(output, message):
    with pytest.raises(fio.FioError, match=message):
        fio.parse_output(output)


def test_missing_figure_names_its_field():
    data = raw('scratch_seq_read.json')
    del data['jobs'][0]['read']['iops']
    with pytest.raises(fio.FioError, match=r'jobs\[0\].read.iops must be a number, got None'):
        fio.parse_output(json.dumps(data))


def test_other_job_names_name_no_profile():
    data = raw('scratch_seq_read.json')
    data['jobs'][0]['jobname'] = 'seqread'
    assert fio.profile_in(fio.parse_output(json.dumps(data))) is None


# --- bench() against the shim ----------------------------------------------------------------------

def shim_env(monkeypatch, **values):
    for key, value in values.items():
        monkeypatch.setenv(f'FIO_SHIM_{key}', value)


def test_bench_runs_each_profile_and_removes_its_files(tmp_path, monkeypatch):
    log = tmp_path / 'calls'
    target = tmp_path / 'scratch'
    target.mkdir()
    shim_env(monkeypatch, LOG=str(log))
    result = fio.bench(str(target), ['scratch_seq_read', 'scratch_seq_write'], '1M', 1, 30, fio_path=str(SHIM))
    assert list(result['profiles']) == ['scratch_seq_read', 'scratch_seq_write']
    assert result['profiles']['scratch_seq_read']['mib_s'] == 1145.7
    assert list(target.iterdir()) == []
    calls = log.read_text().splitlines()
    assert len(calls) == 2
    assert f"--directory={result['work_dir']}/scratch_seq_read" in calls[0].split()
    assert pathlib.Path(result['work_dir']).parent == target


def test_bench_falls_back_when_o_direct_is_refused(tmp_path, monkeypatch):
    warnings = []
    shim_env(monkeypatch, DIRECT1='error_einval.txt', OUTPUT='scratch_seq_write.json', LOG=str(tmp_path / 'calls'))
    target = tmp_path / 'tmpfs'
    target.mkdir()
    result = fio.bench(str(target), ['scratch_seq_write'], '1M', 1, 30, fio_path=str(SHIM), warn=warnings.append)
    figures = result['profiles']['scratch_seq_write']
    assert figures['direct'] is False and '--direct=0' in figures['command'] and figures['mib_s'] == 1685.7
    assert len(warnings) == 1 and 'refused O_DIRECT (EINVAL' in warnings[0] and 'ran again buffered' in warnings[0]
    assert [line.split()[-3] for line in (tmp_path / 'calls').read_text().splitlines()] == ['--direct=1', '--direct=0']
    assert list(target.iterdir()) == []


def test_bench_job_error_without_direct_fails(tmp_path, monkeypatch):
    shim_env(monkeypatch, OUTPUT='error_einval.txt')
    with pytest.raises(fio.FioError, match='scratch_seq_write: fio job llmforge-scratch_seq_write failed with EINVAL'):
        fio.bench(str(tmp_path), ['scratch_seq_write'], '1M', 1, 30, fio_path=str(SHIM), direct=False)
    assert list(tmp_path.iterdir()) == []


def test_bench_timeout_kills_fio_and_removes_the_files(tmp_path, monkeypatch):
    shim_env(monkeypatch, HANG='1')
    with pytest.raises(fio.FioError, match=r'scratch_seq_read: fio did not finish within 1 s and was killed'):
        fio.bench(str(tmp_path), ['scratch_seq_read'], '1M', 1, 1, fio_path=str(SHIM))
    assert list(tmp_path.iterdir()) == []


def test_bench_unreadable_output(tmp_path, monkeypatch):
    shim_env(monkeypatch, OUTPUT='truncated.txt')
    cut = r'scratch_seq_read: fio exited 0 without usable JSON \(the fio JSON output is cut off'
    with pytest.raises(fio.FioError, match=cut):
        fio.bench(str(tmp_path), ['scratch_seq_read'], '1M', 1, 30, fio_path=str(SHIM))
    assert list(tmp_path.iterdir()) == []


def test_bench_refuses_an_unknown_profile_before_running(tmp_path, monkeypatch):
    shim_env(monkeypatch, LOG=str(tmp_path / 'calls'))
    target = tmp_path / 'scratch'
    target.mkdir()
    with pytest.raises(fio.FioError, match="unknown profile 'nope'; profiles: scratch_seq_write, "):
        fio.bench(str(target), ['scratch_seq_read', 'nope'], '1M', 1, 30, fio_path=str(SHIM))
    assert not (tmp_path / 'calls').exists() and list(target.iterdir()) == []


def test_bench_partial_results(tmp_path, monkeypatch):
    calls = tmp_path / 'calls'
    wrapper = tmp_path / 'fio'
    # The first call succeeds, the second hangs.
    wrapper.write_text(f'#!/bin/sh\nif [ -e {calls} ]; then export FIO_SHIM_HANG=1; fi\n'
                       f'touch {calls}\nexec {SHIM} "$@"\n')
    wrapper.chmod(0o755)
    target = tmp_path / 'scratch'
    target.mkdir()
    with pytest.raises(fio.FioError, match='scratch_seq_write: fio did not finish') as caught:
        fio.bench(str(target), ['scratch_seq_read', 'scratch_seq_write'], '1M', 1, 2, fio_path=str(wrapper))
    assert list(caught.value.partial) == ['scratch_seq_read']
    assert list(target.iterdir()) == []


def test_bench_keep_files(tmp_path):
    result = fio.bench(str(tmp_path), ['scratch_seq_read'], '1M', 1, 30, fio_path=str(SHIM), keep_files=True)
    kept = pathlib.Path(result['work_dir'])
    assert (kept / 'scratch_seq_read' / 'llmforge-shim.0.0').is_file()
    assert kept.name.startswith('.llmforge-fio-')
    shutil.rmtree(kept)


def test_bench_refuses_a_missing_directory(tmp_path):
    with pytest.raises(fio.FioError, match=f'directory {tmp_path}/none does not exist'):
        fio.bench(str(tmp_path / 'none'), ['scratch_seq_read'], '1M', 1, 30, fio_path=str(SHIM))


def test_bench_refuses_without_space(tmp_path, monkeypatch):
    monkeypatch.setattr(fio, 'free_bytes', lambda directory: 3 * 1024 ** 3)
    with pytest.raises(fio.FioError) as caught:
        fio.bench(str(tmp_path), ['scratch_seq_read', 'scratch_rand_read'], '1G', 1, 30, fio_path=str(SHIM))
    assert str(caught.value) == (f'directory {tmp_path} has 3.0 GiB free; the test files need 4.0 GiB '
                                 '(scratch_rand_read: 4 file(s) of 1.0 GiB): lower size or free some space')
    assert list(tmp_path.iterdir()) == []


def test_bench_fio_without_output(tmp_path):
    wrapper = tmp_path / 'fio'
    wrapper.write_text('#!/bin/sh\necho "fio: unrecognized option \'--eta=never\'" >&2\nexit 1\n')
    wrapper.chmod(0o755)
    target = tmp_path / 'scratch'
    target.mkdir()
    with pytest.raises(fio.FioError) as caught:
        fio.bench(str(target), ['scratch_seq_read'], '1M', 1, 30, fio_path=str(wrapper))
    assert str(caught.value) == "scratch_seq_read: fio exited 1 without output: fio: unrecognized option '--eta=never'"


def test_bench_cannot_create_its_directory(tmp_path, monkeypatch):
    def refuse(**_kwargs):
        raise PermissionError(13, 'Permission denied')
    monkeypatch.setattr(fio.tempfile, 'mkdtemp', refuse)
    with pytest.raises(fio.FioError, match=f'cannot create a temporary directory in {tmp_path}: Permission denied'):
        fio.bench(str(tmp_path), ['scratch_seq_read'], '1M', 1, 30, fio_path=str(SHIM))


def test_bench_missing_fio(tmp_path):
    with pytest.raises(fio.FioError, match='/nonexistent/fio not found: install fio'):
        fio.bench(str(tmp_path), ['scratch_seq_read'], '1M', 1, 30, fio_path='/nonexistent/fio')
    assert list(tmp_path.iterdir()) == []


# --- judging ---------------------------------------------------------------------------------------

def by_name(checks, name, subject):
    found = [c for c in checks if c['name'] == name and c['subject'] == subject]
    assert len(found) == 1, checks
    return found[0]


def test_fleet_judging():
    expected = {'gpu3': {'scratch_rand_read_p99_ms': 2}, 'gpu1': {'scratch_seq_write_mib_s': 3000}}
    verdict = fio.judge(fleet(), expected)
    nodes = verdict['nodes']
    assert list(nodes) == ['gpu1', 'gpu2', 'gpu3', 'gpu4']
    assert nodes['gpu1']['healthy'] and nodes['gpu2']['healthy']
    # gpu3: 1800 MiB/s against a fleet median of 6350 (0.7 of it: 4445).
    slow = by_name(nodes['gpu3']['checks'], 'storage_throughput', 'scratch_seq_read')
    assert slow['status'] == 'fail' and slow['actual'] == 1800.0 and slow['expected'] == '>= 4445.0 MiB/s'
    assert slow['message'] == ('gpu3: scratch_seq_read 1800.0 MiB/s is below 0.7 of the fleet median 6350.0 MiB/s '
                               '(fleet median 6350.0 over 4 node(s))')
    latency = by_name(nodes['gpu3']['checks'], 'storage_latency', 'scratch_rand_read')
    assert latency['status'] == 'fail' and latency['actual'] == 3.2
    assert by_name(nodes['gpu3']['checks'], 'storage_throughput', 'scratch_rand_read')['status'] == 'pass'
    assert not nodes['gpu3']['healthy'] and nodes['gpu3']['checks'][0]['status'] == 'fail'
    floor = by_name(nodes['gpu1']['checks'], 'storage_throughput', 'scratch_seq_write')
    assert floor['status'] == 'pass' and floor['expected'] == '>= 3000.0 MiB/s'
    # gpu4's shared run failed: its scratch figures are still judged.
    run = by_name(nodes['gpu4']['checks'], 'storage_run', '/shared/scratch-test')
    assert run['status'] == 'fail' and 'does not exist' in run['message']
    assert by_name(nodes['gpu4']['checks'], 'storage_throughput', 'scratch_seq_read')['status'] == 'pass'
    assert 'shared_seq_read' not in nodes['gpu4']['profiles']


def test_random_read_is_judged_on_iops():
    data = fleet()
    data['gpu2'][0]['profiles']['scratch_rand_read']['iops'] = 500000.0  # median 895000 -> floor 626500
    checks = fio.judge(data, {})['nodes']['gpu2']['checks']
    slow = by_name(checks, 'storage_throughput', 'scratch_rand_read')
    assert slow['status'] == 'fail' and slow['expected'] == '>= 626500.0 IOPS'
    assert 'scratch_rand_read 500000.0 IOPS is below 0.7 of the fleet median 895000.0 IOPS' in slow['message']


def test_both_floor_and_fleet_named():
    verdict = fio.judge(fleet(), {'gpu3': {'scratch_seq_read_mib_s': 5000, 'scratch_seq_read_iops': 2000}})
    slow = by_name(verdict['nodes']['gpu3']['checks'], 'storage_throughput', 'scratch_seq_read')
    assert slow['message'].startswith('gpu3: scratch_seq_read 1800.0 MiB/s is below the expected 5000 MiB/s and '
                                      'below 0.7 of the fleet median 6350.0 MiB/s and 1800.0 IOPS below the expected '
                                      '2000 IOPS')
    assert slow['expected'] == '>= 5000.0 MiB/s'


def test_fraction_changes_the_fleet_floor():
    nodes = fio.judge(fleet(), {}, fraction=0.25)['nodes']
    assert nodes['gpu3']['healthy'] is True


def test_no_fleet_with_one_node():
    data = {'gpu3': fleet()['gpu3']}
    checks = fio.judge(data, {})['nodes']['gpu3']['checks']
    seq = by_name(checks, 'storage_throughput', 'scratch_seq_read')
    assert seq['status'] == 'pass' and seq['expected'] is None
    assert 'fleet median 1800.0 over 1 node(s)' in seq['message']


def test_expected_profile_not_measured_is_skipped():
    verdict = fio.judge(fleet(), {'gpu4': {'shared_seq_read_mib_s': 1000}})
    skipped = by_name(verdict['nodes']['gpu4']['checks'], 'storage_throughput', 'shared_seq_read')
    assert skipped['status'] == 'skip' and 'not measured' in skipped['message']


def test_unreachable_skipped_and_missing_results():
    data = {'gpu1': fleet()['gpu1'], 'gpu5': [None], 'gpu6': [{'unreachable': True, 'msg': 'ssh: timed out'}],
            'gpu7': [{'skipped': True, 'changed': False, 'msg': 'storage_bench writes test files in /scratch: not run '
                                                                'in check mode'}]}
    data['gpu8'] = [{'changed': False, 'skipped': True, 'skip_reason': 'Conditional result was False',
                     'false_condition': 'validate_storage_shared_dir | length > 0'}]
    nodes = fio.judge(data, {})['nodes']
    assert nodes['gpu5'] == {'checks': [], 'healthy': True, 'profiles': {}}
    assert nodes['gpu8'] == {'checks': [], 'healthy': True, 'profiles': {}}
    assert nodes['gpu6']['checks'][0]['status'] == 'fail' and 'ssh: timed out' in nodes['gpu6']['checks'][0]['message']
    assert nodes['gpu7']['checks'][0]['status'] == 'skip' and nodes['gpu7']['healthy']


def test_loop_results_are_flattened():
    data = fleet()
    data['gpu1'] = [{'results': data['gpu1'], 'changed': False, 'msg': 'All items completed'}]
    looped = fio.judge(data, {})['nodes']['gpu1']
    assert looped == fio.judge(fleet(), {})['nodes']['gpu1'] and len(looped['profiles']) == 5


def test_shared_aggregate():
    verdict = fio.judge(fleet(), {}, cluster_expected={'shared_seq_read_aggregate_mib_s': 8000})
    cluster = verdict['cluster']
    read = by_name(cluster['checks'], 'storage_aggregate', 'shared_seq_read')
    assert read['status'] == 'fail' and read['actual'] == 7050.0
    assert read['message'] == ('shared_seq_read: 7050.0 MiB/s from 3 node(s) at once is below the expected '
                               '8000 MiB/s')
    ckpt = by_name(cluster['checks'], 'storage_aggregate', 'shared_ckpt_write')
    assert ckpt['status'] == 'pass' and ckpt['actual'] == 4490.0 and 'reported, not judged' in ckpt['message']
    assert cluster['facts']['shared_seq_read'] == {'nodes': 3, 'aggregate_mib_s': 7050.0, 'overlap_pct': 97}
    assert cluster['facts']['fleet_median']['scratch_seq_read'] == 6350.0
    assert cluster['columns'] == ['healthy', 'scratch_seq_write_mib_s', 'scratch_seq_read_mib_s',
                                  'scratch_rand_read_iops', 'shared_seq_read_mib_s', 'shared_ckpt_write_mib_s']
    assert cluster['nodes']['gpu4']['shared_seq_read_mib_s'] is None
    assert cluster['nodes']['gpu3'] == {'healthy': False, 'scratch_seq_write_mib_s': 2950.0,
                                        'scratch_seq_read_mib_s': 1800.0, 'scratch_rand_read_iops': 880000.0,
                                        'shared_seq_read_mib_s': 2300.0, 'shared_ckpt_write_mib_s': 1510.0}
    assert not cluster['healthy']
    passing = fio.judge(fleet(), {}, cluster_expected={'shared_seq_read_aggregate_mib_s': 7000})['cluster']
    assert passing['healthy'] is True


def test_aggregate_of_runs_that_did_not_overlap_is_a_warning():
    data = fleet()
    shifted = data['gpu2'][1]['profiles']['shared_seq_read']
    shifted['started_at'] += 25.0
    shifted['ended_at'] += 25.0
    cluster = fio.judge(data, {}, cluster_expected={'shared_seq_read_aggregate_mib_s': 8000})['cluster']
    read = by_name(cluster['checks'], 'storage_aggregate', 'shared_seq_read')
    assert read['status'] == 'warn'
    assert 'is no aggregate: the runs shared only 18% of their time' in read['message']
    assert cluster['healthy'] is True


@pytest.mark.parametrize('args, message', [
    ({'fraction': 0}, r'fleet fraction must be a number in \(0, 1\]'),
    ({'fraction': 1.5}, 'fleet fraction'),
    ({'fraction': True}, 'fleet fraction'),
    ({'expected': {'gpu1': {'scratch_seq_reed_mib_s': 1}}},
     'storage_expected of node gpu1: scratch_seq_reed_mib_s is not a storage figure; use one of'),
    ({'expected': {'gpu1': {'scratch_seq_read_mib_s': '2000'}}},
     "storage_expected of node gpu1: scratch_seq_read_mib_s must be a number >= 0, got '2000'"),
    ({'expected': {'gpu1': [1]}}, 'storage_expected of node gpu1 must map figures'),
    ({'expected': {'gpu1': {'scratch_seq_read_mib_s': float('nan')}}}, 'scratch_seq_read_mib_s must be a number >= 0'),
    ({'expected': {'gpu1': {'scratch_seq_read_mib_s': 10 ** 400}}}, 'scratch_seq_read_mib_s must be a number >= 0'),
    ({'expected': {'gpu1': {'scratch_seq_read_mib_s': -1}}}, 'scratch_seq_read_mib_s must be a number >= 0'),
    ({'cluster_expected': {'scratch_seq_read_aggregate_mib_s': 1}},
     'cluster_expected: scratch_seq_read_aggregate_mib_s is not a storage figure; use one of '
     'shared_ckpt_write_aggregate_mib_s, shared_seq_read_aggregate_mib_s'),
    ({'results': {'gpu1': 'oops'}}, 'the results of node gpu1 must be a list'),
    ({'results': {'gpu1': [['x']]}}, 'a result of node gpu1 must be a registered storage_bench result'),
    ({'results': [1]}, 'results must map node names'),
])
def test_bad_judge_input(args, message):
    call = dict({'results': fleet(), 'expected': {}}, **args)
    with pytest.raises(fio.FioError, match=message):
        fio.judge(**call)


def test_report_and_drain_take_the_verdicts():
    verdict = fio.judge(fleet(), {'gpu3': {'scratch_rand_read_p99_ms': 2}})
    results = rep.collect_results({node: {} for node in verdict['nodes']}, {'storage': verdict['nodes']})
    report = rep.build_report(results, 'demo', '2026-12-01T00:00:00Z', {'storage': verdict['cluster']})
    nodes = {node['name']: node for node in report['nodes']}
    assert nodes['gpu3']['healthy'] is False and nodes['gpu1']['healthy'] is True
    assert report['stages']['storage']['title'] == 'Storage'
    assert report['summary']['failing'] == ['gpu3', 'gpu4']
    assert 'Storage' in rep.render_html(report) and 'storage_aggregate' in rep.render_junit(report)
    assert drain.drain_reason(nodes['gpu3']['checks']) == 'llmforge: storage_throughput scratch_seq_read 1800.0'


# --- the filter ------------------------------------------------------------------------------------

def test_filter_reads_hostvars():
    data = fleet()
    hostvars = {node: {'storage_scratch': results[0], 'storage_shared': results[1]} for node, results in data.items()}
    hostvars['gpu3']['storage_expected'] = {'scratch_rand_read_p99_ms': 2}
    hostvars['gpu5'] = {}
    nodes = ['gpu1', 'gpu2', 'gpu3', 'gpu4', 'gpu5']
    verdict = filters.storage_judge(nodes, hostvars, ['storage_scratch', 'storage_shared'], 0.7,
                                    {'shared_seq_read_aggregate_mib_s': 8000})
    assert verdict == fio.judge(dict(data, gpu5=[None, None]), {'gpu3': {'scratch_rand_read_p99_ms': 2}}, 0.7,
                                {'shared_seq_read_aggregate_mib_s': 8000})
    assert filters.storage_judge(['gpu1'], hostvars, 'storage_scratch')['nodes']['gpu1']['healthy'] is True


def test_filter_errors_name_the_filter():
    with pytest.raises(AnsibleFilterError, match='storage_judge: .*fleet fraction'):
        filters.storage_judge(['gpu1'], {'gpu1': {}}, ['storage_scratch'], 2)
    with pytest.raises(AnsibleFilterError, match="storage_judge: 'gpu9'"):
        filters.storage_judge(['gpu9'], {'gpu1': {}}, ['storage_scratch'])


def test_fleet_fixture_is_not_changed_by_judging():
    data = fleet()
    before = copy.deepcopy(data)
    fio.judge(data, {})
    assert data == before


# --- damaged inputs (tests/unit/mutations.py, as test_property_parsers.py) --------------------------

CAPTURE_BYTES = [path.read_bytes() for path in sorted(FIXTURES.glob('*.json')) + sorted(FIXTURES.glob('*.txt'))
                 if path.name != 'fleet.json']


def _hostile_fleet(value: t.Any) -> dict:
    """The fleet with every figure and timestamp of gpu1's shared read replaced by `value`."""
    data = fleet()
    shared = data['gpu1'][1]['profiles']['shared_seq_read']
    shared.update({key: value for key in ('mib_s', 'iops', 'lat_p99_ms', 'started_at', 'ended_at')})
    return {'results': data, 'expected': {'gpu1': {'shared_seq_read_mib_s': 1}}, 'fraction': 0.7,
            'cluster': {'shared_seq_read_aggregate_mib_s': 8000}}


@examples(300)
@example(text('scratch_seq_read.json').replace('"iops" : ', '"iops" : NaN, "x" : ', 1), 'scratch_seq_read')
@example(text('scratch_seq_read.json').replace('"bw" : ', '"bw" : ' + '9' * 5000 + ', "x" : ', 1), 'scratch_seq_read')
@example(text('scratch_seq_read.json').replace('"jobname" : "', '"jobname" : "\u00b2', 1), 'scratch_seq_read')
@given(mutated_text(CAPTURE_BYTES), st.sampled_from(CAPTURES))
def test_damaged_output(output, profile):
    def call():
        parsed = fio.parse_output(output)
        fio.profile_in(parsed)
        fio.figures(parsed, profile)
    assert_own_error(call, fio.FioError)


@examples(300)
@given(mutated_structure([{'results': json.loads((FIXTURES / 'fleet.json').read_text()),
                           'expected': {'gpu3': {'scratch_rand_read_p99_ms': 2, 'scratch_seq_read_mib_s': 5000}},
                           'fraction': 0.7, 'cluster': {'shared_seq_read_aggregate_mib_s': 8000}}]))
@example(_hostile_fleet(float('nan')))
@example(_hostile_fleet(float('inf')))
@example(_hostile_fleet(10 ** 400))
@example(_hostile_fleet('\u00b2'))
@example(_hostile_fleet(0))
def test_damaged_fleet(values):
    def call():
        values_ = values if isinstance(values, dict) else {}
        fio.judge(values_.get('results'), values_.get('expected'), values_.get('fraction', 0.7), values_.get('cluster'))
    assert_own_error(call, fio.FioError)


# --- honest verdicts: empty runs, NaN and infinite figures -----------------------------------------

@pytest.mark.parametrize('windows', [
    [(100.0, 100.0), (100.0, 130.0)],   # a run of no length shares nothing
    [(100.0, 130.0), (130.0, 100.0)],   # an inverted run
    [(100.0, 100.0), (100.0, 100.0)],
])
def test_empty_or_inverted_runs_do_not_overlap(windows):
    assert fio._overlap(windows) == 0.0


@pytest.mark.parametrize('started, ended', [(1796150230.4, 1796150230.4), (1796150230.4, 1796150200.4)])
def test_aggregate_of_a_run_without_length_is_no_aggregate(started, ended):
    data = fleet()
    empty = data['gpu1'][1]['profiles']['shared_seq_read']
    empty['started_at'], empty['ended_at'] = started, ended
    cluster = fio.judge(data, {}, cluster_expected={'shared_seq_read_aggregate_mib_s': 7000})['cluster']
    read = by_name(cluster['checks'], 'storage_aggregate', 'shared_seq_read')
    assert read['status'] == 'warn' and 'the runs shared only 0% of their time' in read['message']
    assert cluster['facts']['shared_seq_read']['overlap_pct'] == 0


@pytest.mark.parametrize('value', [float('nan'), float('inf'), float('-inf'), 10 ** 400],
                         ids=['nan', 'inf', '-inf', '400-digits'])
def test_non_finite_throughput_fails(value):
    data = fleet()
    data['gpu1'][0]['profiles']['scratch_seq_read']['mib_s'] = value
    checks = fio.judge(data, {'gpu1': {'scratch_seq_read_mib_s': 1000}})['nodes']['gpu1']['checks']
    seq = by_name(checks, 'storage_throughput', 'scratch_seq_read')
    assert seq['status'] == 'fail' and 'mib_s is not a finite number' in seq['message']


@pytest.mark.parametrize('value', [float('nan'), float('inf')])
def test_non_finite_latency_fails(value):
    data = fleet()
    data['gpu1'][0]['profiles']['scratch_rand_read']['lat_p99_ms'] = value
    checks = fio.judge(data, {'gpu1': {'scratch_rand_read_p99_ms': 2}})['nodes']['gpu1']['checks']
    latency = by_name(checks, 'storage_latency', 'scratch_rand_read')
    assert latency['status'] == 'fail' and 'lat_p99_ms is not a finite number' in latency['message']


def test_non_finite_figure_fails_the_aggregate():
    data = fleet()
    data['gpu2'][1]['profiles']['shared_seq_read']['mib_s'] = float('nan')
    cluster = fio.judge(data, {}, cluster_expected={'shared_seq_read_aggregate_mib_s': 10})['cluster']
    read = by_name(cluster['checks'], 'storage_aggregate', 'shared_seq_read')
    assert read['status'] == 'fail' and 'gpu2' in read['message'] and 'not a finite number' in read['message']


@pytest.mark.parametrize('number', ['NaN', 'Infinity', '-Infinity', '1e400', '9' * 5000],
                         ids=['NaN', 'Infinity', '-Infinity', '1e400', '5000-digits'])
def test_non_finite_fio_output_is_refused(number):
    output = text('scratch_seq_read.json').replace('"iops" : ', f'"iops" : {number}, "x" : ', 1)
    with pytest.raises(fio.FioError):
        fio.parse_output(output)


@pytest.mark.parametrize('directory, escaped', [
    ('/scratch/a:b', '/scratch/a\\:b'),
    ('/scratch/a:b:c', '/scratch/a\\:b\\:c'),
    ('/scratch/plain', '/scratch/plain'),
])
def test_colon_in_the_directory_is_escaped(directory, escaped):
    job = fio.build_job('scratch_seq_read', directory, '1M', 1)
    assert f'--directory={escaped}' in fio.job_argv(job)
    assert f'directory={escaped}\n' in fio.job_file(job)
