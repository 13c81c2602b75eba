# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests for the Slurm metrics parsers and renderer, and the llmforge-slurm-metrics collector run against fake sinfo/squeue."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _slurm_metrics
from ansible_collections.llmforge.cluster.plugins.module_utils.programs._slurm_metrics import SlurmMetricsError
from node_install import LAUNCHERS, install, run_launcher

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'fixtures' / 'slurm'
COLLECTOR = LAUNCHERS['programs._slurm_metrics']

SAMPLE = re.compile(r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')
UNESCAPE = {'\\\\': '\\', '\\"': '"', '\\n': '\n'}


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding='utf-8')


def parse_exposition(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Read Prometheus text back into {metric: [(labels, value)]}, checking each sample follows its HELP and TYPE."""
    assert text.endswith('\n')
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    helped, typed = set(), set()
    for line in text.splitlines():
        if line.startswith('# HELP '):
            helped.add(line.split()[2])
        elif line.startswith('# TYPE '):
            typed.add(line.split()[2])
            assert line.split()[3] == 'gauge'
        else:
            match = SAMPLE.fullmatch(line)
            assert match, line
            name = match.group('name')
            assert name in helped and name in typed, f'{name} has no HELP or TYPE before its samples'
            raw = match.group('labels') or ''
            labels = {key: re.sub(r'\\[\\"n]', lambda escape: UNESCAPE[escape.group(0)], value) for key, value in LABEL.findall(raw)}
            assert ''.join(f'{key}="{value}",' for key, value in LABEL.findall(raw)).rstrip(',') == raw, f'bad labels in {line!r}'
            samples.setdefault(name, []).append((labels, float(match.group('value'))))
    return samples


def by_labels(samples: list[tuple[dict[str, str], float]], *keys: str) -> dict[tuple[str, ...], float]:
    return {tuple(labels[key] for key in keys): value for labels, value in samples}


# node states ---------------------------------------------------------------

STATE_CASES = [
    pytest.param('idle', 'idle', id='idle'),
    pytest.param('idle*', 'idle', id='idle-not-responding'),
    pytest.param('idle~', 'idle', id='idle-powered-off'),
    pytest.param('idle#', 'idle', id='idle-powering-up'),
    pytest.param('idle%', 'idle', id='idle-powering-down'),
    pytest.param('idle!', 'idle', id='idle-power-down-pending'),
    pytest.param('planned', 'idle', id='planned-is-idle'),
    pytest.param('mixed', 'mixed', id='mixed'),
    pytest.param('mixed-', 'mixed', id='mixed-planned'),
    pytest.param('mixed$', 'mixed', id='mixed-maintenance'),
    pytest.param('allocated', 'allocated', id='allocated'),
    pytest.param('allocated+', 'allocated', id='allocated-completing'),
    pytest.param('completing', 'completing', id='completing'),
    pytest.param('drained', 'drained', id='drained'),
    pytest.param('drained*', 'drained', id='drained-not-responding'),
    pytest.param('draining', 'draining', id='draining'),
    pytest.param('draining@', 'draining', id='draining-reboot-pending'),
    pytest.param('down', 'down', id='down'),
    pytest.param('down*', 'down', id='down-not-responding'),
    pytest.param('down~', 'down', id='down-powered-off'),
    pytest.param('reboot^', 'reboot', id='reboot-issued'),
    pytest.param('reboot_issued', 'reboot_issued', id='reboot-issued-long'),
    pytest.param('powered_down', 'powered_down', id='powered-down'),
    pytest.param('fail*', 'fail', id='fail'),
    pytest.param('unknown*', 'unknown', id='unknown-not-responding'),
    pytest.param('inval', 'inval', id='invalid-registration'),
    pytest.param('?', 'unknown', id='question-mark'),
    pytest.param('DRAINED', 'drained', id='upper-case'),
    pytest.param(' idle ', 'idle', id='padded'),
]


@pytest.mark.parametrize(('raw', 'expected'), STATE_CASES)
def test_normalise_state(raw, expected):
    assert _slurm_metrics.normalise_state(raw) == expected


@pytest.mark.parametrize('raw', ['', '*', '42', 'idle drained', 'idle/2'])
def test_normalise_state_rejects(raw):
    with pytest.raises(ValueError, match=re.escape(repr(raw))):
        _slurm_metrics.normalise_state(raw)


# GRES ----------------------------------------------------------------------

GRES_CASES = [
    pytest.param('gpu:h200:8(S:0-1)', 8, id='node-gres'),
    pytest.param('gpu:h200:8', 8, id='node-gres-unregistered'),
    pytest.param('gpu:h200:5(IDX:0-1,4-6)', 5, id='used-with-commas-in-index'),
    pytest.param('gpu:h200:0(IDX:N/A)', 0, id='used-none'),
    pytest.param('gpu:8', 8, id='untyped'),
    pytest.param('gpu:h200:4(S:0),gpu:l40s:2(S:1)', 6, id='two-types'),
    pytest.param('gpu:h200:8(S:0-1),shard:h200:32(S:0-1)', 8, id='shards-not-counted'),
    pytest.param('gpu:h200:2(IDX:0-1),nic:mlx5:1', 2, id='other-gres-after'),
    pytest.param('shard:8', 0, id='shards-only'),
    pytest.param('gpunode:4', 0, id='name-must-be-gpu'),
    pytest.param('(null)', 0, id='null'),
    pytest.param('N/A', 0, id='not-applicable'),
    pytest.param('', 0, id='empty'),
    pytest.param('gres/gpu:h200:8', 8, id='tres-typed'),
    pytest.param('gres/gpu:2', 2, id='tres-untyped'),
    pytest.param('gres:gpu:2', 2, id='tres-old-prefix'),
    pytest.param('gres/gpu', 1, id='tres-count-left-out'),
    pytest.param('gres/gpu:h200', 1, id='tres-typed-count-left-out'),
    pytest.param('gres/gpu:4,gres/shard:2', 4, id='tres-two'),
]


@pytest.mark.parametrize(('gres', 'expected'), GRES_CASES)
def test_count_gpus(gres, expected):
    assert _slurm_metrics.count_gpus(gres) == expected


@pytest.mark.parametrize('gres', ['gpu:h200:8(S:0-1', 'gpu h200', 'gpu:h200:8)', 'gpu::8'])
def test_count_gpus_rejects(gres):
    with pytest.raises(ValueError, match='GRES entry'):
        _slurm_metrics.count_gpus(gres)


# sinfo ---------------------------------------------------------------------

CLUSTER16_NODES = [
    ('gpu001', 'gpu', 'allocated', 8, 8, ''),
    ('gpu002', 'gpu', 'allocated', 8, 8, ''),
    ('gpu003', 'gpu', 'allocated', 8, 8, ''),
    ('gpu004', 'gpu', 'mixed', 8, 4, ''),
    ('gpu005', 'gpu', 'mixed', 8, 2, ''),
    ('gpu006', 'gpu', 'idle', 8, 0, ''),
    ('gpu007', 'gpu', 'idle', 8, 0, ''),
    ('gpu008', 'gpu', 'idle', 8, 0, ''),
    ('gpu009', 'gpu', 'drained', 8, 0, 'llmforge: gpu_topology failed: nvlink GPU3<->GPU5 inactive'),
    ('gpu010', 'gpu', 'draining', 8, 4, 'llmforge: Xid 79 on GPU2 (fell off the bus)'),
    ('gpu011', 'gpu', 'down', 8, 0, 'Not responding'),
    ('gpu012', 'gpu', 'down', 8, 0, 'admin | PSU swap, ticket #4242'),
    ('gpu013', 'gpu', 'idle', 8, 0, ''),
    ('gpu014', 'gpu', 'drained', 8, 0, 'llmforge: rdma_links failed: mlx5_3 port 1 phys_state "Polling"'),
    ('gpu015', 'gpu', 'idle', 8, 0, ''),
    ('gpu015', 'debug', 'idle', 8, 0, ''),
    ('gpu016', 'gpu', 'mixed', 8, 1, ''),
    ('gpu016', 'debug', 'mixed', 8, 1, ''),
]


def test_parse_sinfo_cluster16():
    nodes = _slurm_metrics.parse_sinfo(fixture('cluster16-sinfo.txt'))
    assert [(node.name, node.partition, node.state, node.gpus_total, node.gpus_alloc, node.reason) for node in nodes] == CLUSTER16_NODES
    draining = nodes[9]
    assert (draining.cpus_alloc, draining.cpus_idle, draining.cpus_other, draining.cpus_total) == (64, 0, 160, 224)


def test_parse_sinfo_real_capture():
    nodes = _slurm_metrics.parse_sinfo(fixture('container-24.11-sinfo.txt'))
    assert len(nodes) == 19
    assert {(node.partition, node.state) for node in nodes if node.name == 'gpu001'} == {('gpu', 'draining'), ('debug', 'draining')}
    assert nodes[0].gpus_alloc == 3 and nodes[0].gpus_total == 8
    states = {node.name: node.state for node in nodes}
    assert (states['gpu002'], states['gpu003'], states['gpu004']) == ('unknown', 'drained', 'down')
    assert {node.name: node.reason for node in nodes}['gpu004'] == 'admin | cable swap, ticket #42'


def test_parse_sinfo_skips_blank_lines_and_accepts_default_partition_marker():
    nodes = _slurm_metrics.parse_sinfo('\n  \ngpu001|idle|gpu*|0/8/0/8|(null)|(null)|none\n\n')
    assert nodes == [_slurm_metrics.SlurmNode('gpu001', 'idle', 'gpu', 0, 8, 0, 8, 0, 0, '')]


def test_parse_sinfo_empty():
    assert _slurm_metrics.parse_sinfo('') == []


SINFO_ERRORS = [
    pytest.param('gpu001|idle|gpu|0/8/0/8|(null)|(null)', "line 1: expected 7 '|'-separated fields, found 6", id='too-few-fields'),
    pytest.param('gpu001 idle gpu 0/8/0/8', 'line 1: expected 7', id='space-separated'),
    pytest.param('gpu001|idle|gpu|0/8/0|(null)|(null)|none', "line 1: CPUs '0/8/0' are not allocated/idle/other/total", id='three-cpu-counts'),
    pytest.param('|idle|gpu|0/8/0/8|(null)|(null)|none', 'line 1: the node name is empty', id='no-node-name'),
    pytest.param('gpu001||gpu|0/8/0/8|(null)|(null)|none', "line 1: node state '' is not a Slurm state", id='no-state'),
    pytest.param('gpu001|idle|gpu|0/8/0/8|gpu:h200:8(S:0-1|(null)|none', "line 1: GRES entry 'gpu:h200:8(S:0-1' is not", id='bad-gres'),
    pytest.param('gpu001|idle|gpu|0/8/0/8|(null)|(null)|none\ngpu002|idle|gpu|x/8/0/8|(null)|(null)|none', 'line 2: CPUs', id='second-line'),
]


@pytest.mark.parametrize(('text', 'message'), SINFO_ERRORS)
def test_parse_sinfo_rejects(text, message):
    with pytest.raises(SlurmMetricsError, match='^' + re.escape(f'sinfo {message}')) as excinfo:
        _slurm_metrics.parse_sinfo(text)
    assert isinstance(excinfo.value, ValueError)
    assert repr(text.splitlines()[-1]) in str(excinfo.value)


# squeue --------------------------------------------------------------------


def test_parse_squeue_cluster16():
    jobs = _slurm_metrics.parse_squeue(fixture('cluster16-squeue.txt'))
    assert [(job.state, job.partition, job.gpus) for job in jobs] == [
        ('running', 'gpu', 16), ('completing', 'gpu', 8), ('running', 'gpu', 4), ('running', 'gpu', 2), ('running', 'gpu', 4),
        ('running', 'debug', 1), ('pending', 'gpu', 32), ('pending', 'gpu', 1), ('pending', 'gpu', 1), ('pending', 'gpu', 1),
        ('pending', 'gpu,debug', 1), ('pending', 'debug', 0),
    ]


def test_parse_squeue_real_capture():
    jobs = _slurm_metrics.parse_squeue(fixture('container-24.11-squeue.txt'))
    assert [(job.state, job.partition, job.nodes, job.tasks, job.gpus) for job in jobs] == [
        ('pending', 'debug', 1, 2, 2), ('pending', 'debug', 1, 2, 1), ('pending', 'gpu', 1, 1, 8), ('pending', 'gpu', 2, 2, 16),
        ('running', 'gpu', 1, 1, 1), ('running', 'gpu', 1, 1, 1), ('running', 'gpu', 1, 1, 1),
    ]


SQUEUE_GPU_CASES = [
    pytest.param('RUNNING|gpu|2|16|gres/gpu:8|N/A|N/A', 16, id='per-node-times-nodes'),
    pytest.param('RUNNING|gpu|2|16|N/A|gres/gpu:4|N/A', 4, id='per-job'),
    pytest.param('RUNNING|gpu|2|6|N/A|N/A|gres/gpu:1', 6, id='per-task-times-tasks'),
    pytest.param('RUNNING|gpu|2|16|gres/gpu:8|gres/gpu:12|N/A', 12, id='per-job-wins'),
    pytest.param('PENDING|gpu|1|N/A|N/A|N/A|gres/gpu:1', 0, id='tasks-unknown'),
    pytest.param('PENDING|cpu|1|1|N/A|N/A|N/A', 0, id='no-gpus'),
]


@pytest.mark.parametrize(('line', 'gpus'), SQUEUE_GPU_CASES)
def test_parse_squeue_gpus(line, gpus):
    assert _slurm_metrics.parse_squeue(line)[0].gpus == gpus


SQUEUE_ERRORS = [
    pytest.param('RUNNING|gpu|2|16|gres/gpu:8|N/A', "line 1: expected 7 '|'-separated fields, found 6", id='too-few-fields'),
    pytest.param('RUNNING|gpu|2|16|gres/gpu:8|N/A|N/A|extra', "line 1: expected 7 '|'-separated fields, found 8", id='too-many-fields'),
    pytest.param('RUNNING|gpu|two|16|gres/gpu:8|N/A|N/A', "line 1: node count 'two' is not a number", id='bad-node-count'),
    pytest.param('R|gpu|2|16|gres/gpu:8|N/A|N/A\n4242|gpu|2|16|gres/gpu:8|N/A|N/A', "line 2: job state '4242' is not", id='bad-state'),
]


@pytest.mark.parametrize(('text', 'message'), SQUEUE_ERRORS)
def test_parse_squeue_rejects(text, message):
    with pytest.raises(SlurmMetricsError, match='^' + re.escape(f'squeue {message}')):
        _slurm_metrics.parse_squeue(text)


# rendering -----------------------------------------------------------------


@pytest.fixture(name='cluster16')
def cluster16_metrics():
    nodes = _slurm_metrics.parse_sinfo(fixture('cluster16-sinfo.txt'))
    jobs = _slurm_metrics.parse_squeue(fixture('cluster16-squeue.txt'))
    return _slurm_metrics.render_metrics(nodes, jobs, timestamp=1767225600.5)


def test_render_node_states(cluster16):
    samples = parse_exposition(cluster16)
    states = by_labels(samples['llmforge_slurm_node_state'], 'node', 'partition', 'state')
    assert sorted(states) == sorted((node, partition, state) for node, partition, state, *rest in CLUSTER16_NODES)
    assert set(states.values()) == {1.0}
    assert all(set(labels) == {'node', 'partition', 'state'} for labels, value in samples['llmforge_slurm_node_state'])


def test_render_reasons_once_per_node_and_escaped(cluster16):
    reasons = by_labels(parse_exposition(cluster16)['llmforge_slurm_node_reason_info'], 'node', 'reason')
    assert sorted(reasons) == sorted((node, reason) for node, partition, state, total, used, reason in CLUSTER16_NODES if reason)
    assert 'reason="llmforge: rdma_links failed: mlx5_3 port 1 phys_state \\"Polling\\""' in cluster16


def test_render_partition_totals(cluster16):
    samples = parse_exposition(cluster16)
    assert by_labels(samples['llmforge_slurm_partition_cpus'], 'partition', 'state') == {
        ('debug', 'alloc'): 32, ('debug', 'idle'): 416, ('debug', 'other'): 0, ('debug', 'total'): 448,
        ('gpu', 'alloc'): 896, ('gpu', 'idle'): 1632, ('gpu', 'other'): 1056, ('gpu', 'total'): 3584,
    }
    assert by_labels(samples['llmforge_slurm_partition_gpus'], 'partition', 'state') == {
        ('debug', 'alloc'): 1, ('debug', 'total'): 16, ('gpu', 'alloc'): 35, ('gpu', 'total'): 128,
    }


def test_render_allocated_gpus_once_per_node(cluster16):
    """One sample per node, not per partition: the idle-GPU alert joins it with the node's GPU utilisation."""
    samples = parse_exposition(cluster16)['llmforge_slurm_node_gpus_allocated']
    assert all(set(labels) == {'node'} for labels, value in samples)
    expected = {(node,): used for node, partition, state, total, used, reason in CLUSTER16_NODES}
    assert by_labels(samples, 'node') == expected
    assert len(samples) == 16
    assert sum(value for labels, value in samples) == 35


def test_render_allocated_gpus_of_a_draining_node_in_two_partitions():
    nodes = _slurm_metrics.parse_sinfo(fixture('container-24.11-sinfo.txt'))
    text = _slurm_metrics.render_metrics(nodes, [], cluster='prod-a')
    samples = parse_exposition(text)['llmforge_slurm_node_gpus_allocated']
    allocated = {labels['node']: value for labels, value in samples}
    assert allocated['gpu001'] == 3 and set(allocated.values()) == {0, 3} and len(allocated) == 16
    gpu001 = [labels for labels, value in samples if labels['node'] == 'gpu001']
    assert gpu001 == [{'cluster': 'prod-a', 'node': 'gpu001'}]


def test_render_queue(cluster16):
    samples = parse_exposition(cluster16)
    assert by_labels(samples['llmforge_slurm_jobs'], 'partition', 'state') == {
        ('debug', 'pending'): 1, ('debug', 'running'): 1, ('gpu', 'completing'): 1, ('gpu', 'pending'): 4, ('gpu', 'running'): 4,
        ('gpu,debug', 'pending'): 1,
    }
    assert by_labels(samples['llmforge_slurm_job_gpus'], 'partition', 'state') == {
        ('debug', 'pending'): 0, ('debug', 'running'): 1, ('gpu', 'completing'): 8, ('gpu', 'pending'): 35, ('gpu', 'running'): 26,
        ('gpu,debug', 'pending'): 1,
    }


def test_render_empty_queue_writes_zero_for_each_partition():
    nodes = _slurm_metrics.parse_sinfo(fixture('cluster16-sinfo.txt'))
    samples = parse_exposition(_slurm_metrics.render_metrics(nodes, []))
    assert by_labels(samples['llmforge_slurm_jobs'], 'partition', 'state') == {
        ('debug', 'pending'): 0, ('debug', 'running'): 0, ('gpu', 'pending'): 0, ('gpu', 'running'): 0,
    }


def test_render_status(cluster16):
    samples = parse_exposition(cluster16)
    assert samples['llmforge_slurm_up'] == [({}, 1.0)]
    assert samples['llmforge_slurm_scrape_timestamp_seconds'] == [({}, 1767225600.5)]


def test_render_cluster_label_on_every_sample():
    nodes = _slurm_metrics.parse_sinfo(fixture('container-24.11-sinfo.txt'))
    jobs = _slurm_metrics.parse_squeue(fixture('container-24.11-squeue.txt'))
    samples = parse_exposition(_slurm_metrics.render_metrics(nodes, jobs, cluster='prod-a'))
    assert all(labels['cluster'] == 'prod-a' for family in samples.values() for labels, value in family)


def test_render_failure():
    samples = parse_exposition(_slurm_metrics.render_failure(cluster='prod-a', timestamp=1767225600))
    assert samples == {'llmforge_slurm_up': [({'cluster': 'prod-a'}, 0.0)],
                       'llmforge_slurm_scrape_timestamp_seconds': [({'cluster': 'prod-a'}, 1767225600.0)]}


def test_render_round_trips_awkward_reason():
    reason = 'bad "cable" at C:\\rack4 | swap'
    nodes = [_slurm_metrics.SlurmNode('gpu001', 'drained', 'gpu', 0, 0, 8, 8, 0, 0, reason)]
    samples = parse_exposition(_slurm_metrics.render_metrics(nodes, []))
    assert samples['llmforge_slurm_node_reason_info'] == [({'node': 'gpu001', 'reason': reason}, 1.0)]


# the collector program -----------------------------------------------------


@pytest.fixture(name='library')
def installed_library(tmp_path):
    """The collector's code installed as the monitoring role installs it (node_programs)."""
    return install('programs._slurm_metrics', tmp_path / 'lib')


def fake_command(directory: pathlib.Path, name: str, body: str) -> None:
    directory.mkdir(exist_ok=True)
    script = directory / name
    script.write_text(f'#!/bin/sh\n{body}\n', encoding='utf-8')
    script.chmod(0o755)


def fake_slurm(directory: pathlib.Path, sinfo: str = 'cluster16-sinfo.txt', squeue: str = 'cluster16-squeue.txt') -> None:
    """sinfo and squeue that record their arguments, one per line, and print a fixture."""
    for name, output in (('sinfo', sinfo), ('squeue', squeue)):
        fake_command(directory, name, f'printf "%s\\n" "$@" > "{directory}/{name}.args"\ncat "{FIXTURES / output}"')


def run_collector(library: pathlib.Path, path_dir: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    return run_launcher('programs._slurm_metrics', library, *args, env={'PATH': f'{path_dir}:/usr/bin:/bin', 'LC_ALL': 'C.UTF-8'})


def without_timestamp(text: str) -> str:
    return re.sub(r'(?m)^(llmforge_slurm_scrape_timestamp_seconds(?:\{[^}]*\})?) \S+$', r'\1 T', text)


def test_collector_is_executable_python3_without_collection_imports():
    text = COLLECTOR.read_text(encoding='utf-8')
    assert text.startswith('#!/usr/bin/python3 -I\n')
    assert os.access(COLLECTOR, os.X_OK)
    assert 'ansible' not in re.findall(r'(?m)^\s*(?:from|import)\s+(\w+)', text)


def test_collector_writes_metrics_atomically(tmp_path, library):
    fake_slurm(tmp_path / 'bin')
    output = tmp_path / 'textfile' / 'slurm.prom'
    output.parent.mkdir()
    result = run_collector(library, tmp_path / 'bin', '--output', str(output))
    assert (result.returncode, result.stdout, result.stderr) == (0, '', '')
    expected = _slurm_metrics.render_metrics(_slurm_metrics.parse_sinfo(fixture('cluster16-sinfo.txt')),
                                             _slurm_metrics.parse_squeue(fixture('cluster16-squeue.txt')))
    assert without_timestamp(output.read_text(encoding='utf-8')) == without_timestamp(expected)
    assert os.listdir(output.parent) == ['slurm.prom']


def test_collector_runs_the_documented_commands(tmp_path, library):
    fake_slurm(tmp_path / 'bin')
    assert run_collector(library, tmp_path / 'bin').returncode == 0
    for command in (_slurm_metrics.SINFO_COMMAND, _slurm_metrics.SQUEUE_COMMAND):
        assert (tmp_path / 'bin' / f'{command[0]}.args').read_text(encoding='utf-8').splitlines() == list(command[1:])
        # The module docstring and the fixtures README show the commands as a shell line: keep them in step.
        *words, format_option = command
        option, value = format_option.split('=', 1)
        shell_line = ' '.join(words) + f" {option}='{value}'"
        assert shell_line in _slurm_metrics.__doc__
        assert shell_line in fixture('README.md')


def test_collector_prints_to_stdout_with_cluster_label(tmp_path, library):
    fake_slurm(tmp_path / 'bin', 'container-24.11-sinfo.txt', 'container-24.11-squeue.txt')
    result = run_collector(library, tmp_path / 'bin', '--cluster', 'prod-a')
    assert result.returncode == 0, result.stderr
    samples = parse_exposition(result.stdout)
    assert samples['llmforge_slurm_up'] == [({'cluster': 'prod-a'}, 1.0)]
    assert len(samples['llmforge_slurm_node_state']) == 19


FAILURES = [
    pytest.param(None, 'sinfo not found (PATH=', id='sinfo-missing'),
    pytest.param('echo "slurm_load_partitions: Unable to contact slurm controller (connect failure)" >&2\nexit 1',
                 'sinfo exited with status 1: slurm_load_partitions: Unable to contact slurm controller (connect failure)', id='sinfo-fails'),
    pytest.param('exec sleep 30', 'sinfo did not answer within 0.5 s', id='sinfo-hangs'),
    pytest.param('echo "gpu001 idle"', "sinfo line 1: expected 7 '|'-separated fields, found 1: 'gpu001 idle'", id='sinfo-garbage'),
]


@pytest.mark.parametrize(('sinfo', 'message'), FAILURES)
def test_collector_failure_still_writes_slurm_up_zero(tmp_path, library, sinfo, message):
    fake_slurm(tmp_path / 'bin')
    if sinfo is None:
        (tmp_path / 'bin' / 'sinfo').unlink()
    else:
        fake_command(tmp_path / 'bin', 'sinfo', sinfo)
    output = tmp_path / 'slurm.prom'
    output.write_text('llmforge_slurm_up 1\n', encoding='utf-8')
    result = run_collector(library, tmp_path / 'bin', '--output', str(output), '--timeout', '0.5')
    assert result.returncode == 1
    assert result.stderr.startswith(f'llmforge-slurm-metrics: {message}') and result.stderr.count('\n') == 1
    assert parse_exposition(output.read_text(encoding='utf-8'))['llmforge_slurm_up'] == [({}, 0.0)]


def test_collector_squeue_failure(tmp_path, library):
    fake_slurm(tmp_path / 'bin')
    fake_command(tmp_path / 'bin', 'squeue', 'exit 1')
    result = run_collector(library, tmp_path / 'bin')
    assert (result.returncode, result.stderr) == (1, 'llmforge-slurm-metrics: squeue exited with status 1: no message\n')
    assert 'llmforge_slurm_up 0\n' in result.stdout


def test_collector_survives_undecodable_reason(tmp_path, library):
    fake_slurm(tmp_path / 'bin')
    fake_command(tmp_path / 'bin', 'sinfo', r"printf 'gpu001|drained|gpu|0/0/8/8|(null)|(null)|caf\351 spill\n'")
    result = run_collector(library, tmp_path / 'bin')
    assert result.returncode == 0, result.stderr
    assert parse_exposition(result.stdout)['llmforge_slurm_node_reason_info'] == [({'node': 'gpu001', 'reason': 'caf\ufffd spill'}, 1.0)]


def test_collector_cannot_write_output(tmp_path, library):
    fake_slurm(tmp_path / 'bin')
    result = run_collector(library, tmp_path / 'bin', '--output', str(tmp_path / 'absent' / 'slurm.prom'))
    assert result.returncode == 1
    assert result.stderr.startswith(f"llmforge-slurm-metrics: cannot write {tmp_path / 'absent' / 'slurm.prom'}: ")


@pytest.mark.parametrize('timeout', ['0', '-1', 'soon', 'inf', 'nan', '1e400', '\u0665'])
def test_collector_rejects_bad_timeout(tmp_path, library, timeout):
    result = run_collector(library, tmp_path, '--timeout', timeout)
    assert result.returncode == 2
    assert f"'{timeout}' is not a positive number of seconds" in result.stderr


def test_collector_without_its_library(tmp_path):
    result = run_collector(tmp_path, tmp_path)
    assert result.returncode == 1
    assert f'llmforge-slurm-metrics: cannot load its code from {tmp_path}' in result.stderr


def test_collector_output_passes_promtool(tmp_path, library):
    promtool = shutil.which('promtool')
    if not promtool:
        pytest.skip('promtool is not installed (Debian package prometheus); the exposition is still checked by parse_exposition')
    fake_slurm(tmp_path / 'bin')
    for args in ((), ('--cluster', 'prod-a')):
        metrics = run_collector(library, tmp_path / 'bin', *args).stdout
        result = subprocess.run([promtool, 'check', 'metrics'], input=metrics, capture_output=True, text=True, timeout=60, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
