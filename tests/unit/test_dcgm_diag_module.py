# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge.cluster.dcgm_diag run through Ansible against the dcgmi shim replaying tests/fixtures/dcgm."""

from __future__ import annotations

import json
import pathlib
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.modules import dcgm_diag
from module_runner import run_module as run_ansible_module

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'fixtures' / 'dcgm'
SHIM = ROOT / 'molecule' / 'resources' / 'files' / 'dcgmi_shim.py'


@pytest.fixture(name='state')
def fixture_state(tmp_path):
    """The shim's state directory: write dcgmi-diag-<level> files into it to choose fixtures."""
    return tmp_path


def run_module(args: dict, state_dir: pathlib.Path, check: bool = False, **env: str) -> dict:
    shim_env = dict(DCGMI_SHIM_FIXTURES=str(FIXTURES), DCGMI_SHIM_STATE=str(state_dir), **env)
    return run_ansible_module('dcgm_diag', dict({'dcgmi_path': str(SHIM)}, **args), check=check, env=shim_env)


def test_level_1_pass_in_check_mode(state):
    result = run_module({}, state, check=True)
    assert not result.get('failed'), result.get('msg')
    assert (result['verdict'], result['healthy'], result['changed'], result['exit_code']) == ('pass', True, False, 0)
    assert result['reason'] == 'llmforge: dcgm L1 pass: 1 test on 8 GPUs'
    assert result['command'] == [str(SHIM), 'diag', '-r', '1', '-j']
    assert result['level'] == 1 and result['failing_gpus'] == [] and result['counts']['pass'] == 8
    assert result['dcgm_version'] == '4.2.3' and result['driver_version'] == '570.133.20'
    assert 0 <= result['duration_seconds'] < 60


def test_a_failing_gpu_fails_the_task_with_the_reason_and_the_results(state):
    (state / 'dcgmi-diag-1').write_text('l1-fail\n')
    result = run_module({'level': 1}, state)
    assert result['failed'] is True
    assert result['msg'] == ('llmforge: dcgm L1 fail: software GPU3 (dcgmi exited 205: the failure asks to isolate '
                             'the GPU (DCGM_ST_NVVS_ISOLATE_ERROR); software GPU3: GPU 3 had memory errors and row '
                             'remappings are pending)')
    assert (result['verdict'], result['failing_gpus'], result['exit_code']) == ('fail', [3], 205)
    assert 'Traceback' not in json.dumps(result)


def test_report_without_failing_returns_every_test(state):
    (state / 'dcgmi-diag-3').write_text('l3-fail')
    result = run_module({'level': 3, 'fail_on_mismatch': False, 'reason_prefix': 'site:'}, state)
    assert not result.get('failed'), result.get('msg')
    assert result['healthy'] is False and result['reason'] == 'site: dcgm L3 fail: memory GPU3; targeted_power GPU6'
    memory = next(test for test in result['tests'] if test['key'] == 'memory')
    assert memory['status'] == 'fail' and memory['results'][3]['warnings'][0]['error_id'] == 52
    assert [test['category'] for test in result['tests']][:3] == ['Deployment', 'Integration', 'Hardware']


def test_a_hang_is_a_verdict_after_the_timeout(state):
    (state / 'dcgmi-diag-2').write_text('hang')
    started = time.monotonic()
    result = run_module({'level': 2, 'timeout': 2, 'fail_on_mismatch': False}, state)
    assert time.monotonic() - started < 60
    assert not result.get('failed'), result.get('msg')
    assert (result['verdict'], result['healthy']) == ('hang', False)
    assert result['reason'] == 'llmforge: dcgm L2 hang: timed out after 2 s'
    assert result['exit_code'] is None and result['duration_seconds'] == 2.0


def test_a_hang_fails_the_task_when_asked(state):
    (state / 'dcgmi-diag-1').write_text('hang')
    result = run_module({'timeout': 1}, state)
    assert result['failed'] is True and result['verdict'] == 'hang'
    assert result['msg'].startswith('llmforge: dcgm L1 hang: timed out after 1 s')


def test_gpus_go_to_dcgmi_as_entity_ids(state):
    (state / 'dcgmi-diag-3').write_text('l3-fail')
    log = state / 'calls'
    result = run_module({'level': 3, 'gpus': [6, 5], 'fail_on_mismatch': False}, state, DCGMI_SHIM_LOG=str(log))
    assert log.read_text() == 'diag -r 3 -j -i 5,6\n'
    assert result['failing_gpus'] == [6] and result['counts']['gpus'] == 2


@pytest.mark.parametrize('fixture, verdict, reason', [
    ('error-hostengine', 'error', 'llmforge: dcgm L1 error: Host engine connection invalid/disconnected (-21)'),
    ('no-hostengine', 'error', 'llmforge: dcgm L1 error: exit 235: Unable to connect to host engine. '
                               'Host engine connection invalid/disconnected.'),
], ids=['json-error-object', 'text-error'])
def test_dcgm_errors_are_the_error_verdict(state, fixture, verdict, reason):
    (state / 'dcgmi-diag-1').write_text(fixture)
    result = run_module({'fail_on_mismatch': False}, state)
    assert not result.get('failed'), result.get('msg')
    assert (result['verdict'], result['reason'], result['exit_code']) == (verdict, reason, 235)


def test_saved_output_is_judged_without_running_dcgmi(state):
    result = run_module({'level': 2, 'output': str(FIXTURES / 'l2-pass-warnings.json'),
                         'dcgmi_path': '/nonexistent/dcgmi'}, state)
    assert not result.get('failed'), result.get('msg')
    assert (result['verdict'], result['healthy'], result['command']) == ('warn', True, [])
    assert result['reason'] == 'llmforge: dcgm L2 warn: pcie GPU2; memory GPU5'
    assert result['exit_code'] is None and result['duration_seconds'] is None


@pytest.mark.parametrize('args, fragment', [
    ({'dcgmi_path': '/nonexistent/dcgmi'}, '/nonexistent/dcgmi not found: is DCGM'),
    ({'output': '/nonexistent/dcgm.json'}, 'cannot read output /nonexistent/dcgm.json'),
    ({'output': str(FIXTURES / 'no-hostengine.txt')}, 'no-hostengine.txt: dcgmi diag -j output is not JSON'),
    ({'level': 5}, 'value of level must be one of: 1, 2, 3, 4'),
    ({'timeout': 0}, 'timeout must be a positive number of seconds, got 0'),
    ({'gpus': [-1]}, 'gpus must be GPU indices'),
], ids=['missing-binary', 'missing-output', 'text-output', 'bad-level', 'bad-timeout', 'bad-gpu'])
def test_bad_input_fails_with_a_precise_message(state, args, fragment):
    result = run_module(args, state)
    assert result['failed'] is True
    assert fragment in result['msg']
    assert 'Traceback' not in json.dumps(result)


def test_malformed_json_names_the_field(state, tmp_path):
    saved = tmp_path / 'saved.json'
    document = json.loads((FIXTURES / 'l1-pass.json').read_text())
    document['DCGM Diagnostic']['test_categories'][0]['tests'][0]['results'][4]['status'] = 'Maybe'
    saved.write_text(json.dumps(document))
    result = run_module({'output': str(saved)}, state)
    assert result['failed'] is True
    assert ("DCGM Diagnostic.test_categories[0].tests[0].results[4].status: unknown status 'Maybe'"
            in result['msg'])


# --- the last resort: an exception nobody foresaw is a failure with a message ------------------------

def crash(*_args, **_kwargs):
    raise OverflowError('cannot convert float infinity to integer')


def run_in_process(args: dict, capsys) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        dcgm_diag.main()
    return json.loads(capsys.readouterr().out)


def test_a_parser_crash_on_saved_output_names_the_file(monkeypatch, capsys):
    monkeypatch.setattr(dcgm, 'parse', crash)
    saved = FIXTURES / 'l1-pass.json'
    result = run_in_process({'output': str(saved)}, capsys)
    assert result['failed'] is True and result['verdict'] == 'error' and result['tests'] == []
    assert result['msg'] == (f'unexpected OverflowError while reading the saved dcgmi diag output {saved}: '
                             'cannot convert float infinity to integer')


def test_a_crash_while_running_names_the_command(monkeypatch, capsys, state):
    monkeypatch.setenv('DCGMI_SHIM_FIXTURES', str(FIXTURES))
    monkeypatch.setenv('DCGMI_SHIM_STATE', str(state))
    monkeypatch.setattr(dcgm, 'judge_run', crash)
    result = run_in_process({'dcgmi_path': str(SHIM), 'level': 2}, capsys)
    assert result['failed'] is True
    assert result['msg'].startswith(f"unexpected OverflowError while reading the output of '{SHIM} diag -r 2 -j'")
