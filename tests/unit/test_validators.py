# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validator registry: its schemas, its runner, and a validator added by one registration only.

The toy validator below is defined and registered here, and nothing else changes: the node health check accepts
its settings and runs it, the report and the metrics writer take its results. That is all a new validator needs
besides its own module_utils file, its thin module, its line in `_validators.registry` and a changelog fragment.
"""

from __future__ import annotations

import json
import pathlib
import time
import typing as t

import pytest

from ansible_collections.llmforge.cluster.plugins.filter import report as report_filters
from ansible_collections.llmforge.cluster.plugins.filter import validator_metrics as metrics_filter
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _nodecheck as nc
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as report
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, PASS, check


class ToyError(Exception):
    """Input the toy validator refuses."""


def _toy_collect(settings: t.Mapping[str, t.Any], timeout: float) -> list[validators.Reading]:
    def read() -> str:
        if settings['behaviour'] == 'hang':
            time.sleep(30)
        if settings['behaviour'] == 'crash':
            raise OverflowError('a number too large')
        if settings['behaviour'] == 'refuse':
            raise ToyError('the log is not a kernel log')
        return 'oops\nfine\noops\n'
    return [validators.Reading('toy log', read, settings['timeout'], 'toy')]


def _toy_judge(outputs: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any], current: t.Any) -> list[dict[str, t.Any]]:
    count = outputs['toy log'].count('oops')
    status = PASS if count <= settings['max_oops'] else FAIL
    return [check('oops', status, 'node', f"<= {settings['max_oops']}", count, f'{count} oops in the log')]


TOY = validators.Validator(
    name='toy', title='Counts oopses in a log',
    settings=(
        validators.Setting('max_oops', 'seconds', 5, 'How many oopses are fine.'),
        validators.Setting('behaviour', 'text', 'read', 'How the reading behaves (read, hang, crash, refuse).'),
        validators.Setting('timeout', 'seconds', 1, 'Time limit of the reading.'),
    ),
    collect=_toy_collect, judge=_toy_judge, errors=(ToyError,))


@pytest.fixture
def toy() -> t.Iterator[validators.Validator]:
    validators.register(TOY)
    yield TOY
    validators.unregister('toy')


def _run(settings: dict[str, t.Any]) -> dict[str, t.Any]:
    config = nc.check_config({'validators': {'toy': settings}, 'timeout': 5})
    return nc.run(config, 'gpu1', use_slurm=False, dry_run=False)


# --- the registry ----------------------------------------------------------------------------------

def test_the_registry_lists_the_collections_validators_in_order():
    assert list(validators.registry()) == ['gpu_topology', 'rdma_links', 'dcgm', 'kernel_faults']
    assert list(validators.in_stage('hardware')) == ['gpu_topology', 'rdma_links', 'kernel_faults']
    assert list(validators.in_stage('health_check')) == ['gpu_topology', 'rdma_links', 'dcgm', 'kernel_faults']
    assert dict(report.REGISTERED_VALIDATORS) == {'gpu_topology': '__validate_gpu_topology',
                                                  'rdma_links': '__validate_rdma_links',
                                                  'kernel_faults': '__validate_kernel_faults'}


@pytest.mark.parametrize('validator', list(validators.registry().values()), ids=lambda v: v.name)
def test_every_validator_states_a_whole_schema(validator):
    assert validator.title and validator.stages and set(validator.stages) <= set(validators.STAGES)
    for setting in validator.settings:
        assert setting.kind in validators.KINDS, setting
        assert setting.description.endswith('.'), setting
        if setting.kind == 'command':
            assert setting.package, f'{validator.name}.{setting.name}: say what installs the command'
    # The defaults pass their own schema.
    assert validator.checked_settings({}) == {s.name: s.default for s in validator.settings}


def test_a_validator_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="'toy' is already registered"):
        validators.register(toy)
    with pytest.raises(ValueError, match="'gpu_topology' is already registered"):
        validators.register(validators.registry()['gpu_topology'])


@pytest.mark.parametrize('settings, message', [
    ('x', 'validators.dcgm must be an object, got string'),
    ({'dcgmi': 'bin/dcgmi'}, 'validators.dcgm.dcgmi must be a command name .* got the relative path'),
    ({'timeout': 51}, r'validators.dcgm.timeout must be a number of seconds in \(0, 50\], got 51'),
    ({'level': 3}, 'validators.dcgm: unknown field.s. level; known: dcgmi, timeout'),
])
def test_settings_errors_name_the_field(settings, message):
    with pytest.raises(validators.SettingsError, match=message):
        validators.registry()['dcgm'].checked_settings(settings)


def test_null_and_empty_settings_stand_for_their_defaults():
    gpu = validators.registry()['gpu_topology']
    assert gpu.checked_settings({'nvidia_smi': None, 'profile': None}) == {
        'profile': None, 'expected': {}, 'nvidia_smi': 'nvidia-smi'}
    assert validators.registry()['rdma_links'].checked_settings({'sysfs_root': ''})['sysfs_root'] == '/sys'
    with pytest.raises(validators.SettingsError, match='validators.gpu_topology.expected must be an object, got null'):
        gpu.checked_settings({'expected': None})


# --- one registration: health check, report and metrics take it -----------------------------------

def test_the_health_check_refuses_an_unregistered_validator():
    with pytest.raises(nc.ConfigError, match='validators must be an object with keys among gpu_topology, rdma_links, dcgm'):
        nc.check_config({'validators': {'toy': {}}})


def test_the_health_check_checks_a_registered_validators_settings(toy):
    with pytest.raises(nc.ConfigError, match='validators.toy.max_oops must be a number of seconds'):
        nc.check_config({'validators': {'toy': {'max_oops': 'many'}}})
    assert nc.check_config({'validators': {'toy': {}}})['validators'] == {
        'toy': {'max_oops': 5, 'behaviour': 'read', 'timeout': 1}}


def test_the_health_check_runs_a_registered_validator_and_drains_on_it(toy):
    assert _run({})['healthy']
    result = _run({'max_oops': 1})
    assert not result['healthy']
    assert result['reason'] == 'llmforge: oops node 2'
    assert 'llmforge_validator_check_failed{validator="nodecheck",check="oops",subject="node"} 1' in nc.metrics_text(result)


@pytest.mark.parametrize('behaviour, name, actual', [
    ('hang', 'timeout', '> 1s'),
    ('refuse', 'run', 'the log is not a kernel log'),
    ('crash', 'run', 'nodecheck error toy log: OverflowError'),
])
def test_a_registered_validator_that_hangs_refuses_or_crashes_fails_its_node(toy, behaviour, name, actual):
    started = time.monotonic()
    result = _run({'behaviour': behaviour})
    assert time.monotonic() - started < 4  # the reading's 1 s limit and 1 s of grace
    (failing,) = [c for c in result['checks'] if c['status'] == 'fail']
    assert (failing['name'], failing['actual']) == (name, actual)
    assert json.loads(json.dumps(result, default=str))['healthy'] is False


def test_the_report_and_the_metrics_take_a_registered_validators_results(toy):
    assert report.REGISTERED_VALIDATORS['toy'] == '__validate_toy'
    toy_result = {'checks': [check('oops', FAIL, 'node', '<= 1', 2, '2 oops in the log')], 'healthy': False}
    hostvars = {'gpu1': {'__validate_toy': toy_result}}
    collected = report_filters.validator_results(['gpu1'], hostvars)
    assert collected['gpu1']['toy'] == toy_result
    assert collected['gpu1']['gpu_topology']['unreachable']  # not registered: the node was not reached
    built = report_filters.llmforge_report(collected, 'c1', '2026-12-05T00:00:00+00:00')
    (node,) = built['nodes']
    assert [c['name'] for c in node['checks'] if c['validator'] == 'toy'] == ['oops']
    assert node['validators']['toy']['healthy'] is False
    text = metrics_filter.validator_metrics({'toy': toy_result})
    assert 'llmforge_validator_healthy{validator="toy"} 0' in text
    assert 'llmforge_validator_check_failed{validator="toy",check="oops",subject="node"} 1' in text


def test_the_docs_table_is_the_registry():
    docs = pathlib.Path(__file__).resolve().parents[2] / 'docs' / 'validate.md'
    assert validators.markdown_table() in docs.read_text(encoding='utf-8'), \
        'docs/validate.md: paste _validators.markdown_table() under "Node validators"'
