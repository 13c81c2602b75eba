# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's training stage on the cluster: the reference trainer per node and across both nodes, judged.

The nodes are CPU-only containers with 8 simulated GPUs: one task per node, no --gres (the demo inventory's
validate_training_tasks_per_node/gpus_per_node), the trainer on CPU. The all-node run writes to the demo's
training_env_job_run_root (/shared/llmforge/runs), read from the GPU nodes' variables.
"""

from __future__ import annotations

import json
import os
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import NODES, drain_reasons, set_hardware
from scenario_helpers import run_playbook

RUNS = '/shared/llmforge/runs'
# The fleet comparison is widened here: the two nodes are containers sharing two CPU cores with the single-host
# Ceph, so one 20-step CPU run's tokens/s differs between nodes by up to ~20 % with nothing wrong (6,746 against
# 8,077 in one run). The comparison itself is unit-tested (tests/unit/test_training_fleet.py); the floor test
# below proves a slow node is drained with its figure.
TRAINING = {'validate_training': True, 'validate_training_tasks_per_node': 1, 'validate_training_gpus_per_node': 0,
            'validate_training_args': ['--steps', '20', '--ckpt-every-steps', '0', '--device', 'cpu'],
            'validate_training_timeout': 300, 'validate_training_fleet_tolerance_pct': 50}
TEXTFILE = '/var/lib/node_exporter/textfile/llmforge_validate.prom'


def validate(reports, **extra):
    result = run_playbook('-e', json.dumps({'validate_report_dir': reports, **TRAINING, **extra}),
                          playbook='llmforge.cluster.validate', timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result


@pytest.fixture(scope='module')
def trained(hosts, ctl, tmp_path_factory):
    """validate.yml with the training stage on healthy simulated hardware: the report and when the run began."""
    for name in NODES:
        set_hardware(hosts[name])
    ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")
    started = ctl.check_output('date +%Y-%m-%dT%H:%M:%S')
    reports = str(tmp_path_factory.mktemp('validate-training') / 'reports')
    result = validate(reports)
    with open(os.path.join(reports, 'report.json'), encoding='utf-8') as handle:
        report = json.load(handle)
    return {'result': result, 'report': report, 'reports': reports, 'started': started}


def test_every_node_trains_alone_and_passes(trained):
    report = trained['report']
    stage = report['stages']['training']
    assert sorted(stage['nodes']) == sorted(NODES), trained['result'].stdout[-3000:]
    for node in report['nodes']:
        training = [c for c in node['checks'] if c['validator'] == 'training']
        assert {c['name'] for c in training} == {'training_run', 'training_loss', 'training_tokens_per_s'}, node['name']
        assert all(c['status'] == 'pass' for c in training), training
        assert stage['nodes'][node['name']]['tokens_per_s'] > 0


def test_the_all_node_run_passes_across_both_nodes(trained):
    stage = trained['report']['stages']['training']
    assert stage['healthy'], stage['checks']
    assert stage['facts']['world_size'] == len(NODES) and stage['facts']['nodes'] == sorted(NODES)
    assert stage['facts']['device'] == 'cpu'
    run = next(c for c in stage['checks'] if c['name'] == 'training_run')
    assert (run['subject'], run['status']) == ('all-nodes', 'pass')
    assert trained['report']['summary']['failing_stages'] == [] and trained['report']['summary']['healthy']


def test_junit_and_metrics_carry_the_training_validator(trained, hosts):
    junit = ET.parse(os.path.join(trained['reports'], 'junit.xml')).getroot()
    suite = next(s for s in junit.iter('testsuite') if s.get('name') == 'llmforge.training')
    classes = {case.get('classname') for case in suite.iter('testcase')}
    assert set(NODES) <= classes and 'demo' in classes and suite.get('failures') == '0'
    for name in NODES:
        assert 'llmforge_validator_healthy{validator="training"} 1' in hosts[name].file(TEXTFILE).content_string


def test_runs_ask_slurm_for_no_gpu_and_leave_no_run_directory(trained, hosts, ctl):
    jobs = ctl.check_output(f"sacct -X -n -P -S {trained['started']} --name=llmforge-train-validate -o NodeList,ReqTRES,State")
    lines = [line.split('|') for line in jobs.splitlines() if line]
    assert len(lines) == len(NODES) + 1, jobs  # each node alone, then both
    # Requested, not allocated: --exclusive gives a job the whole node, its GPUs included.
    assert all(state == 'COMPLETED' and 'gres/gpu' not in tres for _nodes, tres, state in lines), jobs
    assert not ctl.run(f'ls -d {RUNS}/llmforge-validate-* 2>/dev/null').stdout.strip()
    for name in NODES:
        assert not hosts[name].run('ls -d /tmp/llmforge-validate-* 2>/dev/null').stdout.strip()


def test_a_node_below_the_floor_is_drained_with_its_tokens_per_s(trained, ctl):
    """An absolute floor no CPU reaches fails both nodes; they drain with the training reason and stay drained for
    the next runs (left out while drained) until an administrator resumes them."""
    try:
        validate(trained['reports'], validate_training_min_tokens_per_s=1e12)
        reasons = drain_reasons(ctl)
        for name in NODES:
            assert re.match(r'llmforge: training_tokens_per_s single \d+(\.\d+)?$', reasons.get(name, '')), reasons
        with open(os.path.join(trained['reports'], 'report.json'), encoding='utf-8') as handle:
            assert json.load(handle)['summary']['failing'] == sorted(NODES)
        result = validate(trained['reports'])
        assert 'left out: ' + ', '.join(sorted(NODES)) in ' '.join(result.stdout.split())
        assert all(drain_reasons(ctl).get(name, '').startswith('llmforge: training_tokens_per_s') for name in NODES)
    finally:
        ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")
