# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dcgmi diag JSON parser over every fixture of tests/fixtures/dcgm, both DCGM generations and bad input."""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / 'tests' / 'fixtures' / 'dcgm'
SHIM = ROOT / 'molecule' / 'resources' / 'files' / 'dcgmi_shim.py'


def read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding='utf-8')


def doc(name: str) -> dict:
    return json.loads(read(name))


def parse_doc(document: dict, level: int = 1, prefix: str = dcgm.REASON_PREFIX) -> dcgm.DiagResult:
    return dcgm.parse(json.dumps(document), level, prefix)


# --- every fixture ---------------------------------------------------------------------------------

# fixture, level, verdict, failing GPUs, reason, counts that matter
EXPECTED = [
    ('l1-pass.json', 1, 'pass', [], 'llmforge: dcgm L1 pass: 1 test on 8 GPUs', {'pass': 8, 'tests': 1}),
    ('l1-fail.json', 1, 'fail', [3], 'llmforge: dcgm L1 fail: software GPU3', {'pass': 7, 'fail': 1}),
    ('l2-pass.json', 2, 'pass', [], 'llmforge: dcgm L2 pass: 3 tests on 8 GPUs', {'pass': 24}),
    ('l2-pass-warnings.json', 2, 'warn', [], 'llmforge: dcgm L2 warn: pcie GPU2; memory GPU5',
     {'tests': 11, 'results': 25, 'pass': 25, 'warnings': 2, 'gpus': 8}),
    ('l2-skip.json', 2, 'warn', [], 'llmforge: dcgm L2 warn: memory GPU0-7 skipped', {'pass': 16, 'skip': 8}),
    ('l3-pass.json', 3, 'pass', [], 'llmforge: dcgm L3 pass: 7 tests on 8 GPUs', {'pass': 56}),
    ('l3-fail.json', 3, 'fail', [3, 6], 'llmforge: dcgm L3 fail: memory GPU3; targeted_power GPU6',
     {'pass': 54, 'fail': 2, 'warnings': 2}),
    ('l4-pass.json', 4, 'pass', [], 'llmforge: dcgm L4 pass: 9 tests on 8 GPUs', {'pass': 72}),
    ('error-hostengine.json', 1, 'error', [],
     'llmforge: dcgm L1 error: Host engine connection invalid/disconnected (-21)', {'tests': 0}),
]


@pytest.mark.parametrize('name, level, verdict, failing, reason, counts', EXPECTED, ids=[e[0] for e in EXPECTED])
def test_every_fixture(name, level, verdict, failing, reason, counts):
    result = dcgm.parse(read(name), level)
    assert result.verdict == verdict
    assert result.healthy is (verdict in ('pass', 'warn'))
    assert result.failing_gpus == failing
    assert result.reason == reason
    assert {key: result.counts[key] for key in counts} == counts
    assert len(result.reason) <= 200 and len(result.reason) <= dcgm.MAX_REASON
    assert '\n' not in result.reason and '"' not in result.reason


@pytest.mark.parametrize('name, level, verdict, failing, reason, counts', EXPECTED, ids=[e[0] for e in EXPECTED])
def test_as_check_drains_with_the_modules_reason(name, level, verdict, failing, reason, counts):
    """The check the health check and validate.yml act on gives the module's reason through _slurm_drain."""
    check = dcgm.as_check(dcgm.parse(read(name), level))
    assert (check['name'], check['subject'], check['expected']) == ('dcgm', f'L{level}', 'pass')
    assert check['status'] == {'pass': 'pass', 'warn': 'warn'}.get(verdict, 'fail')
    assert drain.drain_reason([check]) == (reason if check['status'] == 'fail' else '')
    assert check['message'].startswith(f'dcgmi diag -r {level}: ')
    hang = dcgm.as_check(dcgm.hang_result(1, 45))
    assert hang['status'] == 'fail' and drain.drain_reason([hang]) == 'llmforge: dcgm L1 hang: timed out after 45 s'


def test_every_fixture_in_the_directory_is_covered():
    covered = {entry[0] for entry in EXPECTED} | {'no-hostengine.txt'}
    fixtures = {path.name for path in FIXTURES.iterdir() if path.suffix in ('.json', '.txt')} - {'exit_codes.json'}
    assert fixtures == covered


def test_runtime_error_is_kept_verbatim():
    result = dcgm.parse(read('error-hostengine.json'), 1)
    assert result.runtime_error == ('Error: Unable to complete diagnostic for group 2147483647. '
                                    'Return: (-21) : Host engine connection invalid/disconnected')


def test_versions_of_both_generations():
    new = dcgm.parse(read('l3-fail.json'), 3)
    old = dcgm.parse(read('l2-pass-warnings.json'), 2)
    assert (new.dcgm_version, new.driver_version) == ('4.2.3', '570.133.20')
    assert (old.dcgm_version, old.driver_version) == ('3.3.9', '550.127.08')
    assert dcgm.parse(read('error-hostengine.json'), 1).dcgm_version == '4.2.3'


def test_per_test_per_gpu_results_of_the_4x_failure():
    result = dcgm.parse(read('l3-fail.json'), 3)
    memory = next(test for test in result.tests if test.key == 'memory')
    assert (memory.name, memory.category, memory.status) == ('memory', 'Hardware', 'fail')
    assert [(r.entity, r.gpus, r.status) for r in memory.results][2:5] == [
        ('GPU2', [2], 'pass'), ('GPU3', [3], 'fail'), ('GPU4', [4], 'pass')]
    assert memory.results[3].warnings == [{'message': 'Found 4 faulty memory elements on GPU 3', 'error_id': 52,
                                           'error_category': 10, 'error_severity': 2}]
    assert [test.key for test in result.tests] == ['software', 'pcie', 'memory', 'diagnostic', 'targeted_stress',
                                                   'targeted_power', 'memory_bandwidth']
    assert result.messages == [
        'memory GPU3: Found 4 faulty memory elements on GPU 3',
        'targeted_power GPU6: Max power of 512.4 did not reach desired power minimum target_power of 630.0 for GPU 6']


def test_3x_names_results_and_node_wide_deployment_tests():
    result = dcgm.parse(read('l2-pass-warnings.json'), 2)
    by_key = {test.key: test for test in result.tests}
    assert by_key['memory'].name == 'GPU Memory' and by_key['pcie'].name == 'PCIe'
    assert by_key['page_retirement_row_remap'].results[0].entity == 'node'
    assert by_key['memory'].results[5].info == ['Allocated 81004347392 bytes (94.7%)']
    assert by_key['pcie'].results[2].warnings[0]['error_id'] == 3


def test_the_skipped_memory_test_keeps_dcgms_explanation():
    result = dcgm.parse(read('l2-skip.json'), 2)
    memory = next(test for test in result.tests if test.key == 'memory')
    assert memory.status == 'skip'
    assert memory.results[0].info == ['Skipping test memory because ECC is not enabled on GPU 0']


def test_as_dict_is_plain_data_with_healthy():
    data = dcgm.parse(read('l1-fail.json'), 1).as_dict()
    json.dumps(data)
    assert data['healthy'] is False and data['tests'][0]['results'][3]['status'] == 'fail'


# --- variants of the format ----------------------------------------------------------------------

def v3_document(results: list, name: str = 'GPU Memory', root: str = 'DCGM GPU Diagnostic') -> dict:
    return {root: {'test_categories': [{'category': 'Hardware', 'tests': [{'name': name, 'results': results}]}]},
            'version': '3.1.0'}


def test_nvvs_style_capitals_null_tests_and_csv_gpu_ids():
    document = {'DCGM GPU Diagnostic': {'test_categories': [
        {'category': 'Deployment', 'tests': [
            {'name': 'Denylist', 'results': [{'gpu_ids': '0,1,2,3,4,5,6,7', 'status': 'PASS'}]}, None,
            {'name': 'NVML Library', 'results': [{'gpu_ids': '0,1,2,3,4,5,6,7', 'status': 'PASS'}]}]},
        {'category': 'Custom', 'tests': [{'name': 'software', 'results': [
            {'gpu_ids': gpu, 'status': 'PASS'} for gpu in range(8)]}]}],
        'version': '3.1.0'}}
    result = parse_doc(document)
    assert result.verdict == 'pass' and result.dcgm_version == '3.1.0'
    assert result.tests[0].results[0].entity == 'GPU0-7' and result.tests[0].results[0].gpus == list(range(8))
    assert [r.entity for r in result.tests[2].results] == [f'GPU{gpu}' for gpu in range(8)]


def test_3x_failure_with_string_gpu_id():
    document = doc('l2-pass-warnings.json')
    memory = document['DCGM GPU Diagnostic']['test_categories'][2]['tests'][0]['results']
    memory[5]['status'] = 'Fail'
    memory[6]['status'] = 'Fail'
    result = parse_doc(document, 2)
    assert result.verdict == 'fail' and result.failing_gpus == [5, 6]
    assert result.reason == 'llmforge: dcgm L2 fail: memory GPU5,6'


def test_3x_deployment_failure_with_the_misnamed_warning_key():
    document = doc('l2-pass-warnings.json')
    persistence = document['DCGM GPU Diagnostic']['test_categories'][0]['tests'][4]
    persistence['results'] = [{'gpu_id': 4, 'status': 'Fail', 'warnings': [
        {'warnings': 'Persistence mode for GPU 4 is disabled.', 'error_id': 29, 'error_category': 3,
         'error_severity': 5}]}]
    result = parse_doc(document, 2)
    assert result.verdict == 'fail' and result.failing_gpus == [4]
    assert result.reason.startswith('llmforge: dcgm L2 fail: persistence_mode GPU4')
    assert 'persistence_mode GPU4: Persistence mode for GPU 4 is disabled.' in result.messages


def test_3x_runtime_error_object():
    result = parse_doc({'DCGM GPU Diagnostic': {
        'runtime_error': 'Error: Diagnostic could not be run while DCGM is paused.'}})
    assert result.verdict == 'error' and not result.healthy
    assert result.runtime_error == 'Error: Diagnostic could not be run while DCGM is paused.'
    assert result.reason == 'llmforge: dcgm L1 error: Diagnostic could not be run while DCGM is paused.'
    assert result.messages == ['Error: Diagnostic could not be run while DCGM is paused.']


def test_a_warn_status_and_bare_warning_strings():
    result = parse_doc(v3_document([{'gpu_ids': '1', 'status': 'WARN', 'warnings': ['Clocks are being throttled']},
                                    {'gpu_ids': '0', 'status': 'Pass'}]))
    assert result.verdict == 'warn' and result.reason == 'llmforge: dcgm L1 warn: memory GPU1'
    assert result.tests[0].results[0].warnings[0] == {'message': 'Clocks are being throttled', 'error_id': None,
                                                      'error_category': None, 'error_severity': None}


def test_not_run_is_a_skip():
    result = parse_doc(v3_document([{'gpu_id': '0', 'status': 'Not Run'}, {'gpu_id': '1', 'status': 'Pass'}]))
    assert [r.status for r in result.tests[0].results] == ['skip', 'pass']
    assert result.reason == 'llmforge: dcgm L1 warn: memory GPU0 skipped'


def test_4x_test_summary_failure_without_a_failing_entity():
    document = doc('l1-pass.json')
    test = document['DCGM Diagnostic']['test_categories'][0]['tests'][0]
    test['test_summary'] = {'status': 'Fail', 'warnings': [
        {'warning': 'Found driver on the denylist: nouveau', 'error_id': 23, 'error_category': 3,
         'error_severity': 2}]}
    result = parse_doc(document)
    assert result.verdict == 'fail' and result.failing_gpus == []
    assert result.reason == 'llmforge: dcgm L1 fail: software node'
    assert result.messages == ['software: Found driver on the denylist: nouveau']


def test_4x_cpu_entities_and_group_ids_only():
    document = doc('l1-pass.json')
    results = document['DCGM Diagnostic']['test_categories'][0]['tests'][0]['results']
    results.append({'entity_group_id': 7, 'entity_id': 0, 'status': 'Fail'})
    result = parse_doc(document)
    assert result.tests[0].results[-1].entity == 'CPU0' and result.failing_gpus == []
    assert result.reason == 'llmforge: dcgm L1 fail: software CPU0'


def test_a_test_without_results_or_summary_is_skipped():
    document = doc('l2-pass.json')
    document['DCGM Diagnostic']['test_categories'][1]['tests'].append({'name': 'nvbandwidth'})
    result = parse_doc(document, 2)
    assert result.verdict == 'warn' and result.reason == 'llmforge: dcgm L2 warn: nvbandwidth node skipped'


def test_every_result_skipped_is_an_error():
    result = parse_doc(v3_document([{'gpu_id': str(gpu), 'status': 'Skip'} for gpu in range(8)]), 2)
    assert result.verdict == 'error' and not result.healthy
    assert result.reason == 'llmforge: dcgm L2 error: no test ran (every result skipped)'


def test_no_categories_at_all_is_an_error():
    result = parse_doc({'DCGM Diagnostic': {'test_categories': []}})
    assert result.verdict == 'error' and result.reason == 'llmforge: dcgm L1 error: no test results'


def test_text_before_the_json_and_bytes():
    text = 'Warning: something dcgmi logged\n' + read('l1-fail.json')
    assert dcgm.parse(text.encode(), 1).verdict == 'fail'


# --- reasons --------------------------------------------------------------------------------------

def test_reason_prefix_is_the_callers():
    assert dcgm.parse(read('l1-fail.json'), 1, '').reason == 'dcgm L1 fail: software GPU3'
    assert dcgm.parse(read('l1-fail.json'), 1, 'site "x"\nnodecheck:').reason == (
        'site x nodecheck: dcgm L1 fail: software GPU3')


def test_long_reasons_drop_whole_parts():
    document = doc('l3-pass.json')
    for category in document['DCGM Diagnostic']['test_categories']:
        for test in category['tests']:
            test['name'] = test['name'] + '_with_a_rather_long_plugin_name'
            for result in test['results'][::2]:
                result['status'] = 'Fail'
    result = parse_doc(document, 3)
    assert len(result.reason) <= dcgm.MAX_REASON and '\n' not in result.reason
    assert result.reason.startswith('llmforge: dcgm L3 fail: software_with_a_rather_long_plugin_name GPU0,2,4,6; ')
    assert result.reason.endswith(' more') and result.failing_gpus == [0, 2, 4, 6]


def test_hostile_messages_never_break_the_reason():
    result = dcgm.error_result(2, 'exit 1: bad \x00 "quoted"\nsecond line ünïcode ' + 'x' * 300)
    assert len(result.reason) <= dcgm.MAX_REASON
    assert all(32 <= ord(char) < 127 for char in result.reason) and '"' not in result.reason


@pytest.mark.parametrize('gpus, text', [([3], 'GPU3'), ([1, 6], 'GPU1,6'), (range(8), 'GPU0-7'),
                                        ([0, 1, 2, 5, 6], 'GPU0-2,5,6'), ([], 'node')])
def test_subject(gpus, text):
    assert dcgm.subject(gpus) == text


def test_hang_result():
    result = dcgm.hang_result(2, 600)
    assert (result.verdict, result.healthy, result.duration_seconds) == ('hang', False, 600.0)
    assert result.reason == 'llmforge: dcgm L2 hang: timed out after 600 s'


# --- malformed input -------------------------------------------------------------------------------

def mutated(name: str, change) -> str:
    document = doc(name)
    change(document)
    return json.dumps(document)


def results_of(document: dict, category: int = 0, test: int = 0) -> list:
    return document['DCGM Diagnostic']['test_categories'][category]['tests'][test]['results']


RESULTS_PATH = 'DCGM Diagnostic.test_categories[0].tests[0].results'
BAD = [
    ('', 'printed nothing'),
    ('Error: Unable to connect to host engine.\n', 'is not JSON'),
    (read('l3-fail.json')[:4000], 'is truncated JSON'),
    (read('l1-pass.json') + '\nextra words', 'text after the JSON object'),
    ('[1, 2]', 'is not JSON'),
    ('{"tests": []}', "no 'DCGM Diagnostic' or 'DCGM GPU Diagnostic' object (top-level keys: 'tests')"),
    ('{"iterations": [], "Overall Result": "Pass"}', 'run one iteration'),
    ('{"DCGM Diagnostic": {"version": "4.2.3"}}', "neither 'test_categories' nor 'runtime_error'"),
    ('{"DCGM Diagnostic": []}', 'DCGM Diagnostic: expected an object, found array'),
    ('{"DCGM Diagnostic": {"runtime_error": 7}}', 'DCGM Diagnostic.runtime_error: expected a string'),
    (mutated('l1-pass.json', lambda d: results_of(d)[3].update(status='Maybe')),
     f"{RESULTS_PATH}[3].status: unknown status 'Maybe'"),
    (mutated('l1-pass.json', lambda d: results_of(d)[3].update(status='')), f'{RESULTS_PATH}[3].status: unknown'),
    (mutated('l1-pass.json', lambda d: results_of(d)[2].pop('status')), f"{RESULTS_PATH}[2]: no 'status'"),
    (mutated('l1-pass.json', lambda d: results_of(d)[1].update(entity_id=-1)),
     f'{RESULTS_PATH}[1].entity_id: expected a GPU or entity index, found -1'),
    (mutated('l1-pass.json', lambda d: results_of(d)[1].update(entity_id=10 ** 30)), f'{RESULTS_PATH}[1].entity_id'),
    (mutated('l1-pass.json', lambda d: results_of(d)[0].update(warnings=[{'error_id': 3}])),
     f"{RESULTS_PATH}[0].warnings[0]: a warning without its text"),
    (mutated('l1-pass.json', lambda d: results_of(d)[0].update(warnings=[{'warning': 'x', 'error_id': 'three'}])),
     f'{RESULTS_PATH}[0].warnings[0].error_id: expected a whole number, found string'),
    (mutated('l1-pass.json', lambda d: results_of(d)[0].update(info={'a': 1})),
     f'{RESULTS_PATH}[0].info: expected an array, found object'),
    (mutated('l1-pass.json', lambda d: d['DCGM Diagnostic']['test_categories'][0].pop('category')),
     'DCGM Diagnostic.test_categories[0].category: expected a string, found null'),
    (mutated('l1-pass.json', lambda d: d['DCGM Diagnostic']['test_categories'][0]['tests'][0].update(results={})),
     f'{RESULTS_PATH}: expected an array, found object'),
    (mutated('l1-pass.json', lambda d: d['DCGM Diagnostic']['test_categories'][0]['tests'][0].update(name=5)),
     'DCGM Diagnostic.test_categories[0].tests[0].name: expected a string, found number 5'),
    (json.dumps(v3_document([{'gpu_id': 'three', 'status': 'Pass'}])),
     "DCGM GPU Diagnostic.test_categories[0].tests[0].results[0].gpu_id: expected a GPU or entity index"),
    ('{"DCGM Diagnostic": ' * 5000 + '{}' + '}' * 5000, 'nests too deeply'),
]


@pytest.mark.parametrize('text, fragment', BAD, ids=range(len(BAD)))
def test_malformed_output_names_what_is_wrong(text, fragment):
    with pytest.raises(dcgm.DcgmDiagError) as caught:
        dcgm.parse(text, 1)
    assert fragment in str(caught.value)


GPU_ID_PATH = 'DCGM GPU Diagnostic.test_categories[0].tests[0].results[0].gpu_id'


@pytest.mark.parametrize('gpu_id', ['\u00b2', '3\u00b2', '\u0663', '\uff13', '0,\u00b9', '9' * 5000, '1' * 400],
                         ids=['superscript', 'digit-superscript', 'arabic-indic', 'fullwidth', 'csv-superscript',
                              '5000-digits', '400-digits'])
def test_gpu_id_of_other_digits_is_refused_by_the_parsers_own_error(gpu_id):
    with pytest.raises(dcgm.DcgmDiagError, match=r'gpu_id: expected a GPU or entity index'):
        parse_doc(v3_document([{'gpu_id': gpu_id, 'status': 'Fail'}]))


@pytest.mark.parametrize('number', ['9' * 5000, '-' + '9' * 5000, 'NaN', 'Infinity', '1e400'],
                         ids=['5000-digits', 'negative-5000-digits', 'NaN', 'Infinity', '1e400'])
@pytest.mark.parametrize('field', ['entity_id', 'error_id'])
def test_hostile_numbers_in_the_json_raise_the_parsers_own_error(number, field):
    text = read('l1-fail.json')
    key = '"entity_id" : ' if field == 'entity_id' else '"error_id" : '
    assert key in text
    with pytest.raises(dcgm.DcgmDiagError, match=field + '|cannot be read'):
        dcgm.parse(re.sub(re.escape(key) + r'-?[0-9]+', key + number, text, count=1), 1)


@pytest.mark.parametrize('level', [0, 5, '1', True, None])
def test_level_must_be_one_to_four(level):
    with pytest.raises(dcgm.DcgmDiagError, match='level must be 1, 2, 3 or 4'):
        dcgm.parse(read('l1-pass.json'), level)


# --- a finished run: exit status and output together -----------------------------------------------

def test_isolate_exit_with_results():
    result = dcgm.judge_run(1, 205, read('l1-fail.json'))
    assert result.verdict == 'fail' and result.exit_code == 205
    assert 'isolate the GPU' in result.messages[0]


def test_text_error_with_non_zero_exit_is_the_error_verdict():
    result = dcgm.judge_run(1, 235, read('no-hostengine.txt'))
    assert (result.verdict, result.exit_code) == ('error', 235)
    assert result.reason == ('llmforge: dcgm L1 error: exit 235: Unable to connect to host engine. '
                             'Host engine connection invalid/disconnected.')
    assert 'DCGM_ST_CONNECTION_NOT_VALID' in result.messages[0]


def test_text_with_exit_zero_is_not_understood():
    with pytest.raises(dcgm.DcgmDiagError, match='is not JSON'):
        dcgm.judge_run(1, 0, 'Successfully ran diagnostic for group.\n')


def test_non_zero_exit_without_a_failure_in_the_json_is_an_error():
    result = dcgm.judge_run(2, 226, read('l2-pass.json'))
    assert result.verdict == 'error'
    assert result.reason == ('llmforge: dcgm L2 error: dcgmi exited 226 (a test failed (DCGM_ST_NVVS_ERROR)) '
                             'but its JSON shows no failure')


def test_command():
    assert dcgm.command('dcgmi', 3) == ['dcgmi', 'diag', '-r', '3', '-j']
    assert dcgm.command('dcgmi', 1, [3, 0, 3]) == ['dcgmi', 'diag', '-r', '1', '-j', '-i', '0,3']
    with pytest.raises(dcgm.DcgmDiagError, match='gpus must be GPU indices'):
        dcgm.command('dcgmi', 1, [-1])


# --- the shim and run_diag ---------------------------------------------------------------------------

@pytest.fixture(name='shim_env')
def fixture_shim_env(tmp_path, monkeypatch):
    """The shim's environment in this process (run_diag runs it as a child): fixtures and a state directory."""
    monkeypatch.setenv('DCGMI_SHIM_FIXTURES', str(FIXTURES))
    monkeypatch.setenv('DCGMI_SHIM_STATE', str(tmp_path))
    return tmp_path


def test_run_diag_through_the_shim(shim_env):
    (shim_env / 'dcgmi-diag-3').write_text('l3-fail\n')
    result = dcgm.run_diag(str(SHIM), 3, timeout=60)
    assert (result.verdict, result.exit_code, result.failing_gpus) == ('fail', 205, [3, 6])
    assert result.duration_seconds is not None and result.duration_seconds < 60


def test_run_diag_hang_is_a_result(shim_env):
    (shim_env / 'dcgmi-diag-2').write_text('hang\n')
    result = dcgm.run_diag(str(SHIM), 2, timeout=1)
    assert result.verdict == 'hang' and result.reason == 'llmforge: dcgm L2 hang: timed out after 1 s'


def test_run_diag_missing_binary(tmp_path):
    with pytest.raises(dcgm.DcgmDiagError, match='not found: is DCGM'):
        dcgm.run_diag(str(tmp_path / 'dcgmi'), 1)


@pytest.mark.parametrize('timeout', [0, -5, True])
def test_run_diag_timeout_must_be_positive(timeout):
    with pytest.raises(dcgm.DcgmDiagError, match='timeout must be a positive number'):
        dcgm.run_diag('dcgmi', 1, timeout)


def run_shim(args: list, state: pathlib.Path, **env: str) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, DCGMI_SHIM_FIXTURES=str(FIXTURES), DCGMI_SHIM_STATE=str(state), **env)
    return subprocess.run([sys.executable, str(SHIM)] + args, capture_output=True, text=True, env=full_env,
                          timeout=30, check=False)


def test_shim_defaults_levels_aliases_and_exit_codes(tmp_path):
    assert run_shim(['diag', '-r', 'long', '-j'], tmp_path).stdout == read('l3-pass.json')
    (tmp_path / 'dcgmi-diag-1').write_text('l1-fail')
    done = run_shim(['diag', '--run', 'short', '--json'], tmp_path)
    assert (done.returncode, done.stdout) == (205, read('l1-fail.json'))
    (tmp_path / 'dcgmi-diag-1').write_text('l1-fail.json 226\n')
    assert run_shim(['diag', '-r', '1', '-j'], tmp_path).returncode == 226
    (tmp_path / 'dcgmi-diag-2').write_text('no-hostengine')
    done = run_shim(['diag', '-r', '2', '-j'], tmp_path)
    assert (done.returncode, done.stdout) == (235, read('no-hostengine.txt'))


def test_shim_keeps_only_the_requested_gpus(tmp_path):
    (tmp_path / 'dcgmi-diag-3').write_text('l3-fail')
    log = tmp_path / 'calls'
    done = run_shim(['diag', '-r', '3', '-j', '-i', '2,3'], tmp_path, DCGMI_SHIM_LOG=str(log))
    result = dcgm.judge_run(3, done.returncode, done.stdout)
    assert result.failing_gpus == [3] and result.counts['gpus'] == 2
    assert log.read_text() == 'diag -r 3 -j -i 2,3\n'


@pytest.mark.parametrize('args, fragment', [
    (['diag', '-r', '1'], 'only JSON output'),
    (['diag', '-r', 'memory', '-j'], 'only levels 1-4'),
    (['diag', '-j'], '-r <level> is required'),
    (['diag', '-r', '1', '-j', '--frobnicate'], "unknown argument '--frobnicate'"),
    (['discovery', '-l'], "only 'dcgmi diag' is simulated"),
])
def test_shim_refuses_what_it_does_not_simulate(tmp_path, args, fragment):
    done = run_shim(args, tmp_path)
    assert done.returncode == 2 and fragment in done.stderr


def test_shim_bad_selection(tmp_path):
    (tmp_path / 'dcgmi-diag-1').write_text('../etc/passwd')
    assert 'plain file names' in run_shim(['diag', '-r', '1', '-j'], tmp_path).stderr
    (tmp_path / 'dcgmi-diag-1').write_text('l9-nothing')
    assert "fixture 'l9-nothing' not found" in run_shim(['diag', '-r', '1', '-j'], tmp_path).stderr


# --- the fixtures are what their generator writes ---------------------------------------------------

def test_fixtures_match_their_generator():
    spec = importlib.util.spec_from_file_location('make_dcgm_fixtures', FIXTURES / 'make_dcgm_fixtures.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, text in module.fixtures().items():
        assert read(name) == text, f'{name} differs from make_dcgm_fixtures.py: rerun it'


def test_fixtures_are_jsoncpp_styled():
    """dcgmi prints through jsoncpp: sorted keys, tabs, `"key" : value`."""
    text = read('l1-pass.json')
    assert text.startswith('{\n\t"DCGM Diagnostic" : \n\t{\n\t\t"test_categories" : \n\t\t[\n')
    document = json.loads(text)
    assert list(document) == sorted(document)
    assert list(document['DCGM Diagnostic']['test_categories'][0]['tests'][0]['results'][0]) == [
        'entity_group', 'entity_group_id', 'entity_id', 'status']
