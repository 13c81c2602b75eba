# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's training stage: the srun plan, the verdicts on each node and on the all-node run, the report.

Outputs are the trainer's own (fixtures/training): other cases rewrite fields of its `summary` line.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import training_fleet as filters
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _training_fleet as fleet

OUTPUT = (pathlib.Path(__file__).resolve().parents[1] / 'fixtures' / 'training' / 'llmforge_train_cpu_1rank.txt').read_text()
TRAINER = '/opt/llmforge/envs/llmforge-train/bin/llmforge-train'
ARGS = ['--steps', '30', '--ckpt-every-steps', '0', '--log-every', '10']
OPTIONS = {'repeats': 1, 'timeout': 900, 'immediate': 300, 'srun_args': [], 'args': ARGS, 'local_root': '/tmp'}
WHEN = '2026-11-30T01:00:00Z'


def output(**fields) -> str:
    """The captured output with fields of its summary line replaced."""
    lines = OUTPUT.splitlines()
    summary = json.loads(lines[-1][len('summary '):])
    summary.update(fields)
    return '\n'.join(lines[:-1] + ['summary ' + json.dumps(summary)]) + '\n'


def settings(names, gpus=8, tasks=None, run_root='/shared/runs'):
    return {name: {'gpus': gpus, 'tasks': tasks, 'trainer': TRAINER, 'run_root': run_root} for name in names}


def plan(names, **kwargs):
    return fleet.plan_runs(settings(names, **kwargs), OPTIONS)


def finished(run, stdout=None, rc=0, stderr='', tokens=None, **fields):
    """A registered run as async_status returns it; stdout by default: the capture, shaped like the plan."""
    if stdout is None:
        shape = {'world_size': len(run['nodes']) * run['tasks_per_node'], 'nodes': run['nodes'], **fields}
        if tokens is not None:
            shape['tokens_per_s'] = tokens
        stdout = output(**shape)
    return {'item': {'ansible_job_id': f"j{run['label']}", 'item': run}, 'finished': True, 'rc': rc,
            'stdout': stdout, 'stderr': stderr}


def judged(planned, overrides=None, tokens=None, tolerance=10, floor=0):
    """Every planned run finished as the capture did, tokens/s per node from `tokens`, except `overrides[label]`."""
    results = []
    for run in planned['runs']:
        node = run['nodes'][0] if run['kind'] == 'single' else None
        override = (overrides or {}).get(run['label'])
        results.append(override(run) if override else finished(run, tokens=(tokens or {}).get(node)))
    return fleet.judge(results, planned, tolerance, floor)


def failing(result):
    return [(c['name'], c['subject']) for c in result['checks'] if c['status'] == 'fail']


# --- plan ------------------------------------------------------------------------------------------

def test_one_gpu_node_runs_alone_on_all_its_gpus_and_no_all_node_run():
    planned = plan(['gpu1'])
    run, = planned['runs']
    assert run['argv'] == [
        'timeout', '--kill-after=30', '900',
        'srun', '--exclusive', '--immediate=300', '--job-name=llmforge-train-validate',
        '--nodes=1', '--nodelist=gpu1', '--ntasks-per-node=8', '--gres=gpu:8', '--kill-on-bad-exit=1',
        'bash', '-c', fleet.RUN_WRAPPER, 'llmforge-train-validate', '/tmp', TRAINER] + ARGS
    assert planned['all_nodes_skipped'] == 'needs at least 2 ready nodes, 1 ready'


def test_two_cpu_nodes_request_no_gres_and_share_the_run_root_for_the_all_node_run():
    planned = plan(['gpu2', 'gpu1'], gpus=0)
    assert [(r['kind'], r['nodes']) for r in planned['runs']] == [
        ('single', ['gpu1']), ('single', ['gpu2']), ('all', ['gpu1', 'gpu2'])]
    single, _second, everyone = (r['argv'] for r in planned['runs'])
    assert not any(arg.startswith('--gres') for argv in (single, everyone) for arg in argv)
    assert '--ntasks-per-node=1' in single and '/tmp' in single
    where = everyone[everyone.index('--nodes=2'):everyone.index('bash')]
    assert where == ['--nodes=2', '--nodelist=gpu1,gpu2', '--ntasks-per-node=1', '--kill-on-bad-exit=1']
    assert everyone[everyone.index(fleet.RUN_WRAPPER) + 2] == '/shared/runs'


def test_three_nodes_in_natural_order_repeated_singles_first_with_a_task_override():
    planned = fleet.plan_runs(settings(['gpu10', 'gpu2', 'gpu9'], tasks='1'),
                              dict(OPTIONS, repeats=2, srun_args=['--partition=gpu'], immediate=60, timeout=120))
    assert [r['label'] for r in planned['runs']] == ['gpu2 #1', 'gpu2 #2', 'gpu9 #1', 'gpu9 #2', 'gpu10 #1', 'gpu10 #2',
                                                     '3 nodes #1', '3 nodes #2']
    everyone = planned['runs'][-1]['argv']
    assert everyone[:9] == ['timeout', '--kill-after=30', '120', 'srun', '--exclusive', '--immediate=60',
                            '--job-name=llmforge-train-validate', '--partition=gpu', '--nodes=3']
    assert '--nodelist=gpu2,gpu9,gpu10' in everyone and '--ntasks-per-node=1' in everyone and '--gres=gpu:8' in everyone


def test_the_all_node_run_takes_the_smallest_node_shape():
    shapes = settings(['a1', 'a2']) | {'a3': {'gpus': 4, 'tasks': None, 'trainer': TRAINER, 'run_root': '/shared/runs'}}
    everyone = fleet.plan_runs(shapes, OPTIONS)['runs'][-1]
    assert (everyone['tasks_per_node'], everyone['gpus_per_node']) == (4, 4)


@pytest.mark.parametrize('shapes, why', [
    (settings(['a1', 'a2'], run_root=''), 'no run directory shared by the nodes'),
    (settings(['a1']) | settings(['a2'], run_root='/other'), 'disagree on validate_training_run_root'),
    ({}, 'needs at least 2 ready nodes, 0 ready'),
])
def test_all_node_run_is_skipped_with_the_reason(shapes, why):
    planned = fleet.plan_runs(shapes, OPTIONS)
    assert all(r['kind'] == 'single' for r in planned['runs']) and why in planned['all_nodes_skipped']
    cluster = fleet.judge([], planned, 10)['cluster']
    assert cluster['healthy'] and cluster['checks'][0]['status'] == 'skip' and why in cluster['checks'][0]['message']


@pytest.mark.parametrize('shape, options, message', [
    ({'gpus': 8, 'trainer': 'bin/llmforge-train'}, {}, 'gpu1: the trainer must be an absolute path'),
    ({'gpus': 'eight', 'trainer': TRAINER}, {}, 'gpu1: validate_training_gpus_per_node (or gpu_count) must be a whole number'),
    ({'gpus': 8, 'tasks': 0, 'trainer': TRAINER}, {}, 'validate_training_tasks_per_node must be at least 1'),
    ({'gpus': 8, 'trainer': TRAINER, 'run_root': 'runs'}, {}, 'validate_training_run_root must be an absolute path'),
    ({'gpus': 8, 'trainer': TRAINER}, {'args': ['--run-dir', '/x']}, 'must not set --run-dir'),
    ({'gpus': 8, 'trainer': TRAINER}, {'args': '--steps 30'}, 'validate_training_args must be a list'),
    ({'gpus': 8, 'trainer': TRAINER}, {'repeats': 0}, 'must be at least 1'),
])
def test_bad_settings_name_the_variable(shape, options, message):
    with pytest.raises(fleet.TrainingFleetError, match=message.replace('(', r'\(').replace(')', r'\)')):
        fleet.plan_runs({'gpu1': shape}, dict(OPTIONS, **options))


def test_the_wrapper_keeps_the_trainers_exit_code_and_removes_its_run_dir(tmp_path):
    """The srun payload itself, run by bash as rank 0 of job 77 with a stand-in trainer that exits 5."""
    trainer = tmp_path / 'trainer'
    # Called as `--steps 3 --new-run-dir --run-dir <dir>`: it makes the run directory and leaves a checkpoint there,
    # which the wrapper must remove.
    trainer.write_text('#!/bin/sh\nmkdir -m 0700 "$5" && mkdir "$5/step_00000030" && echo "$@" && exit 5\n')
    trainer.chmod(0o755)
    done = subprocess.run(['bash', '-c', fleet.RUN_WRAPPER, 'x', str(tmp_path), str(trainer), '--steps', '3'],
                          env={'SLURM_JOB_ID': '77', 'SLURM_PROCID': '0', 'PATH': '/usr/bin:/bin'},
                          capture_output=True, text=True, check=False)
    assert done.returncode == 5
    assert done.stdout.split() == ['--steps', '3', '--new-run-dir', '--run-dir', f'{tmp_path}/llmforge-validate-77']
    assert not (tmp_path / 'llmforge-validate-77').exists()


def test_the_wrapper_leaves_a_run_dir_it_does_not_own_and_a_link_alone(tmp_path):
    """Another user's directory at the next job's name is refused by the trainer and not removed by root either."""
    trainer = tmp_path / 'trainer'
    trainer.write_text('#!/bin/sh\nexit 2\n')
    trainer.chmod(0o755)
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    (elsewhere / 'keep').write_text('')
    (tmp_path / 'llmforge-validate-78').symlink_to(elsewhere)
    env = {'SLURM_PROCID': '0', 'PATH': '/usr/bin:/bin'}
    linked = subprocess.run(['bash', '-c', fleet.RUN_WRAPPER, 'x', str(tmp_path), str(trainer)],
                            env=dict(env, SLURM_JOB_ID='78'), check=False)
    assert linked.returncode == 2 and (tmp_path / 'llmforge-validate-78').is_symlink() and (elsewhere / 'keep').exists()
    if os.geteuid() == 0:
        foreign = tmp_path / 'llmforge-validate-79'
        foreign.mkdir()
        os.chown(foreign, 20002, 20002)
        done = subprocess.run(['bash', '-c', fleet.RUN_WRAPPER, 'x', str(tmp_path), str(trainer)],
                              env=dict(env, SLURM_JOB_ID='79'), check=False)
        assert done.returncode == 2 and foreign.is_dir()


# --- verdicts --------------------------------------------------------------------------------------

def test_healthy_fleet_passes_and_the_all_node_run_is_a_cluster_result():
    planned = plan(['gpu1', 'gpu2', 'gpu3'], gpus=0)
    verdict = judged(planned, tokens={'gpu1': 5000.0, 'gpu2': 4900.0, 'gpu3': 5100.0})
    assert all(node['healthy'] for node in verdict['nodes'].values())
    gpu2 = verdict['nodes']['gpu2']
    assert [c['name'] for c in gpu2['checks']] == ['training_run', 'training_loss', 'training_tokens_per_s']
    assert (gpu2['tokens_per_s'], gpu2['fleet_median_tokens_per_s']) == (4900.0, 5000.0)
    cluster = verdict['cluster']
    assert cluster['healthy'] and cluster['facts']['world_size'] == 3 and cluster['facts']['nodes'] == ['gpu1', 'gpu2', 'gpu3']
    assert cluster['facts']['tokens_per_s'] == pytest.approx(4934.7)
    assert {c['subject'] for c in cluster['checks']} == {'all-nodes'}
    assert set(cluster['nodes']) == {'gpu1', 'gpu2', 'gpu3'} and cluster['nodes']['gpu1']['tokens_per_s'] == 5000.0


def test_slow_node_fails_against_the_fleet_median_and_drains_with_its_tokens_per_s():
    planned = plan(['gpu1', 'gpu2', 'gpu3'])
    speeds = {'gpu1': 48000.0, 'gpu2': 41000.0, 'gpu3': 47000.0}
    verdict = judged(planned, tokens=speeds)
    bad = verdict['nodes']['gpu2']
    assert not bad['healthy'] and failing(bad) == [('training_tokens_per_s', 'single')]
    assert 'more than 10% below the fleet median 47000.0' in bad['checks'][0]['message']
    assert drain.drain_reason(bad['checks']) == 'llmforge: training_tokens_per_s single 41000.0'
    assert verdict['nodes']['gpu1']['healthy'] and verdict['nodes']['gpu3']['healthy']
    # 15% tolerance lets 41000 through (12.8% below 47000).
    assert judged(planned, tokens=speeds, tolerance=15)['nodes']['gpu2']['healthy']


def test_with_two_nodes_the_fleet_median_is_their_mean():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    # Mean 4500: 4000 is 11% below it and fails at 10%; 4100 is 8.9% below and passes.
    slow = judged(planned, tokens={'gpu1': 5000.0, 'gpu2': 4000.0})['nodes']
    assert slow['gpu2']['fleet_median_tokens_per_s'] == 4500.0 and not slow['gpu2']['healthy'] and slow['gpu1']['healthy']
    assert judged(planned, tokens={'gpu1': 5000.0, 'gpu2': 4100.0})['nodes']['gpu2']['healthy']


def test_absolute_floor_applies_to_a_lone_node():
    planned = plan(['gpu1'], gpus=0)
    assert judged(planned, floor=1000)['nodes']['gpu1']['healthy']
    alone = judged(planned, floor=6000)['nodes']['gpu1']
    assert failing(alone) == [('training_tokens_per_s', 'single')] and 'below the floor 6000' in alone['checks'][0]['message']


def test_loss_that_does_not_decrease_fails_the_node():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    verdict = judged(planned, overrides={'gpu2 #1': lambda run: finished(run, loss_first=2.5, loss_last=2.6)})
    bad = verdict['nodes']['gpu2']
    assert failing(bad) == [('training_loss', 'single')]
    assert bad['checks'][0]['message'] == 'gpu2: the loss did not decrease: 2.5000 -> 2.6000'
    assert drain.drain_reason(bad['checks']) == 'llmforge: training_loss single 2.6'


@pytest.mark.parametrize('first, last', [(5.5, float('nan')), (float('nan'), float('nan')), (5.5, float('-inf')),
                                         (float('inf'), 2.0)])
def test_a_loss_that_is_not_finite_fails_the_node(first, last):
    """NaN compares false with everything: a GPU producing NaNs must fail, not pass as 'decreased: 5.5 -> nan'."""
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    summary = output(world_size=1, nodes=['gpu2'], loss_first=first, loss_last=last)
    verdict = judged(planned, overrides={'gpu2 #1': lambda run: finished(run, stdout=summary)})
    bad = verdict['nodes']['gpu2']
    assert failing(bad) == [('training_loss', 'single')] and not bad['healthy']
    assert bad['checks'][0]['message'] == f'gpu2: the loss is not a finite number: {first} -> {last} (NaN or inf: ' \
                                          'suspect the GPU or its numerics)'
    assert verdict['nodes']['gpu1']['healthy']
    # The report stays JSON: non-finite numbers are left out of its table, never written as NaN.
    json.dumps(verdict['cluster'], allow_nan=False)


@pytest.mark.parametrize('tokens', [float('nan'), float('inf'), 0, -5.0])
def test_tokens_per_s_that_is_not_a_positive_finite_number_fails_the_run(tokens):
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    summary = output(world_size=1, nodes=['gpu2'], tokens_per_s=tokens)
    bad = judged(planned, overrides={'gpu2 #1': lambda run: finished(run, stdout=summary)})['nodes']['gpu2']
    assert failing(bad) == [('training_run', 'single')]
    assert 'tokens/s is not a positive finite number' in bad['checks'][0]['message']


SRUN_FAILED = 'srun: error: gpu2: task 0: Exited with exit code 1\n'
NO_NODES = 'srun: error: Unable to allocate resources: Requested node configuration is not available\n'


@pytest.mark.parametrize('registered, cause', [
    (lambda run: finished(run, stdout=''.join(OUTPUT.splitlines(True)[:-1])), 'no summary line in the output (last line: checkpoint step=30'),
    (lambda run: finished(run, stdout='summary {"world_size": 1, "tokens_'), "the summary line is not JSON: '{\"world_size\": 1, \"tokens_'"),
    (lambda run: finished(run, stdout='summary [1, 2]'), 'the summary line is not a JSON object'),
    (lambda run: finished(run, rc=1, stdout='starting fresh\n', stderr=SRUN_FAILED), 'exit code 1: srun: error: gpu2: task 0: Exited with exit code 1'),
    (lambda run: finished(run, rc=1, stdout='', stderr=NO_NODES), 'exit code 1: srun: error: Unable to allocate resources'),
    (lambda run: finished(run, rc=127, stdout='', stderr='bash: line 1: /opt/x/bin/llmforge-train: No such file or directory'),
     'exit code 127 (is the training_env role applied?): bash: line 1'),
    (lambda run: finished(run, rc=124), 'timed out after 900 s, waiting for the node(s) included'),
    (lambda run: {'item': {'ansible_job_id': 'j', 'item': run}, 'finished': False, 'attempts': 198}, 'did not finish within 900 s'),
    (lambda run: {'item': {'ansible_job_id': 'j', 'item': run}, 'failed': True, 'msg': 'Timeout exceeded', 'finished': True},
     'did not finish within 900 s'),
    (lambda run: finished(run, world_size=1, stdout=output(world_size=1, nodes=['gpu2'], last_step=12, exit_reason='signal')),
     "stopped at step 12 of 30 (exit_reason 'signal')"),
    (lambda run: finished(run, stdout=output(world_size=8, nodes=['gpu2'])), 'world size 8, 1 planned'),
    (lambda run: finished(run, stdout=output(world_size=1, nodes=['gpu2'], tokens_per_s=None)), 'the summary has no numeric tokens_per_s'),
])
def test_a_failed_run_fails_its_node_with_the_cause_never_a_traceback(registered, cause):
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    verdict = judged(planned, overrides={'gpu2 #1': registered})
    bad = verdict['nodes']['gpu2']
    assert not bad['healthy'] and bad['checks'][0]['name'] == 'training_run'
    assert bad['checks'][0]['message'].startswith('gpu2: run 1 of 1 failed: ')
    assert cause in bad['checks'][0]['message'], bad['checks'][0]['message']
    assert drain.drain_reason(bad['checks']).startswith('llmforge: training_run single ')
    assert verdict['nodes']['gpu1']['healthy']
    # No tokens/s from a failed run: the node's throughput check is skipped, not judged on nothing.
    assert [c['status'] for c in bad['checks'] if c['name'] == 'training_tokens_per_s'] == ['skip']


def test_all_node_run_failing_while_every_node_passes_alone_blames_no_node():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    verdict = judged(planned, overrides={'2 nodes #1': lambda run: finished(
        run, rc=1, stdout='', stderr='torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.')})
    assert all(node['healthy'] for node in verdict['nodes'].values())
    cluster = verdict['cluster']
    assert not cluster['healthy'] and failing(cluster) == [('training_run', 'all-nodes')]
    assert 'every node passed alone: suspect the fabric or the rendezvous' in cluster['checks'][0]['message']
    assert '1/2 clients joined' in cluster['checks'][0]['message']


def test_all_node_run_failing_with_a_failing_node_names_it():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    verdict = judged(planned, overrides={'gpu2 #1': lambda run: finished(run, rc=124),
                                         '2 nodes #1': lambda run: finished(run, rc=124)})
    assert verdict['cluster']['checks'][0]['message'].endswith('; failing alone too: gpu2')


def test_repeats_are_judged_on_their_median():
    planned = fleet.plan_runs(settings(['gpu1', 'gpu2'], gpus=0), dict(OPTIONS, repeats=3))
    speeds = iter([5000.0, 1000.0, 5100.0, 4900.0, 5000.0, 5050.0])
    results = [finished(run, tokens=next(speeds)) if run['kind'] == 'single' else finished(run) for run in planned['runs']]
    nodes = fleet.judge(results, planned, 10)['nodes']
    assert nodes['gpu1']['tokens_per_s'] == 5000.0 and nodes['gpu1']['healthy'] and nodes['gpu1']['repeats'] == 3


def test_bad_judge_input_names_the_field():
    planned = plan(['gpu1'], gpus=0)
    with pytest.raises(fleet.TrainingFleetError, match='tolerance_pct must be a percentage'):
        fleet.judge([], planned, 100)
    with pytest.raises(fleet.TrainingFleetError, match='min_tokens_per_s must be a number'):
        fleet.judge([], planned, 10, -1)
    with pytest.raises(fleet.TrainingFleetError, match=r'results\[0\] has no planned run'):
        fleet.judge([{'item': 'gpu1', 'rc': 0}], planned, 10)


# --- filters, drain, report ------------------------------------------------------------------------

def test_node_settings_read_the_nodes_variables_with_the_documented_defaults():
    assert filters.node_settings({'gpu_count': 4}) == {
        'gpus': 4, 'tasks': None, 'trainer': '/opt/llmforge/envs/llmforge-train/bin/llmforge-train', 'run_root': ''}
    demo = {'gpu_count': 8, 'training_env_root': '/shared/llmforge/envs', 'training_env_job_run_root': '/shared/llmforge/runs',
            'validate_training_gpus_per_node': 0, 'validate_training_tasks_per_node': '1'}
    assert filters.node_settings(demo) == {'gpus': 0, 'tasks': '1', 'run_root': '/shared/llmforge/runs',
                                           'trainer': '/shared/llmforge/envs/llmforge-train/bin/llmforge-train'}
    assert filters.node_settings(dict(demo, validate_training_run_root='/lustre/v'))['run_root'] == '/lustre/v'
    planned = filters.training_plan(['gpu1', 'gpu2'], {'gpu1': demo, 'gpu2': demo}, OPTIONS)
    assert planned['all_nodes_skipped'] is None and '--gres=gpu:8' not in planned['runs'][-1]['argv']


def test_filters_name_themselves_in_errors():
    with pytest.raises(AnsibleFilterError, match='^training_plan: gpu1: the trainer'):
        filters.training_plan(['gpu1'], {'gpu1': {'training_env_root': 'rel'}}, OPTIONS)
    with pytest.raises(AnsibleFilterError, match='^training_judge: tolerance_pct'):
        filters.training_judge([], {}, -1)
    assert set(filters.FilterModule().filters()) == {'training_plan', 'training_judge'}


def test_a_training_drain_is_lifted_only_by_a_passing_training_run():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    checks = judged(planned)['nodes']['gpu2']['checks']
    drained = {'drained': True, 'reason': 'llmforge: training_tokens_per_s single 812.0'}
    assert drain.drain_action(checks, drained)['action'] == 'resume'
    hardware_only = [{'name': 'pcie_width', 'status': 'pass', 'subject': 'GPU0'}]
    assert drain.drain_action(hardware_only, drained)['action'] is None


@pytest.fixture(scope='module')
def report():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    verdict = judged(planned, tokens={'gpu1': 5000.0, 'gpu2': 3000.0})
    results = {node: {'training': result} for node, result in verdict['nodes'].items()}
    return rep.build_report(results, 'demo', WHEN, {'training': verdict['cluster']})


def test_report_has_a_training_stage_with_every_node_and_the_all_node_run(report):
    stage = report['stages']['training']
    assert stage['title'] == 'Training' and stage['healthy'] and list(stage['nodes']) == ['gpu1', 'gpu2']
    assert stage['nodes']['gpu2']['healthy'] is False and stage['facts']['world_size'] == 2
    assert report['summary']['failing'] == ['gpu2'] and report['summary']['failing_stages'] == []
    assert report['summary']['validators'] == ['training']
    assert json.loads(rep.render_json(report)) == report


def test_failing_stage_makes_the_cluster_unhealthy():
    planned = plan(['gpu1', 'gpu2'], gpus=0)
    verdict = judged(planned, overrides={'2 nodes #1': lambda run: finished(run, rc=1, stdout='')})
    built = rep.build_report({n: {'training': r} for n, r in verdict['nodes'].items()}, 'demo', WHEN,
                             {'training': verdict['cluster']})
    assert built['summary']['failing'] == [] and built['summary']['failing_stages'] == ['training']
    assert built['summary']['healthy'] is False
    assert 'failing cluster stages: training' in rep.render_html(built)


def test_junit_has_the_nodes_and_the_cluster_in_the_training_suite(report):
    root = ET.fromstring(rep.render_junit(report))
    suite, = root.findall('testsuite')
    assert suite.get('name') == 'llmforge.training'
    cases = {(c.get('classname'), c.get('name')): c for c in suite.findall('testcase')}
    assert ('demo', 'training_run all-nodes') in cases and ('gpu1', 'training_tokens_per_s single') in cases
    assert cases[('gpu2', 'training_tokens_per_s single')].find('failure') is not None
    assert int(suite.get('tests')) == len(cases) == 3 * 2 + 3
    assert int(root.get('failures')) == 1


def test_html_shows_the_training_section(report):
    page = rep.render_html(report)
    section = page[page.index('<section class="stage" id="stage-training"'):]
    section = section[:section.index('</section>')]
    assert '<tr data-node="gpu2"><th scope="row">gpu2</th><td class="fail">NO</td><td>3000.0</td>' in section
    assert 'training_run' in section and 'all-nodes' in section and '<h2>Training</h2>' in section


def test_report_rejects_a_malformed_stage():
    with pytest.raises(rep.ReportError, match="stage 'training': the result has no checks"):
        rep.build_report({}, 'c', WHEN, {'training': {'healthy': True}})
    with pytest.raises(rep.ReportError, match="stage 'training'.nodes must map"):
        rep.build_report({}, 'c', WHEN, {'training': {'checks': [], 'nodes': {'gpu1': 3}}})
