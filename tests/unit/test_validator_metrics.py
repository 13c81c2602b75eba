# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge_validate.prom: one node's validation verdicts as node_exporter textfile metrics (_prometheus.validators_text)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import validator_metrics as filters
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prom

HEAD_HEALTHY = ('# HELP llmforge_validator_healthy 1 when every check of the validator passed on this node at the last run.\n'
                '# TYPE llmforge_validator_healthy gauge\n')
HEAD_FAILED = ('# HELP llmforge_validator_check_failed 1 for each check that failed at the last run.\n'
               '# TYPE llmforge_validator_check_failed gauge\n')


def check(name, status, subject='GPU0'):
    return {'name': name, 'status': status, 'subject': subject, 'expected': 16, 'actual': 8, 'message': 'x'}


def test_failing_node_of_the_cluster_test():
    """The lines molecule/cluster's test_validate.py reads on the node with GPU0 at x8 and mlx5_3 down."""
    results = {
        'gpu_topology': {'healthy': False, 'changed': False,
                         'checks': [check('gpu_count', 'pass', 'node'), check('pcie_width', 'fail'), check('ecc', 'warn')]},
        'rdma_links': {'healthy': False, 'checks': [check('state', 'fail', 'mlx5_3/1'), check('phys_state', 'fail', 'mlx5_3/1')]},
        'nccl_tests': {'healthy': False, 'checks': [check('nccl_busbw', 'fail', 'all_reduce_perf single')]},
        'training': {'healthy': True, 'checks': [check('training_run', 'pass', 'single')]},
    }
    assert prom.validators_text(results) == (
        HEAD_HEALTHY
        + 'llmforge_validator_healthy{validator="gpu_topology"} 0\n'
        + 'llmforge_validator_healthy{validator="rdma_links"} 0\n'
        + 'llmforge_validator_healthy{validator="nccl_tests"} 0\n'
        + 'llmforge_validator_healthy{validator="training"} 1\n'
        + HEAD_FAILED
        + 'llmforge_validator_check_failed{validator="gpu_topology",check="pcie_width",subject="GPU0"} 1\n'
        + 'llmforge_validator_check_failed{validator="rdma_links",check="state",subject="mlx5_3/1"} 1\n'
        + 'llmforge_validator_check_failed{validator="rdma_links",check="phys_state",subject="mlx5_3/1"} 1\n'
        + 'llmforge_validator_check_failed{validator="nccl_tests",check="nccl_busbw",subject="all_reduce_perf single"} 1\n')


def test_healthy_node_has_no_failed_series():
    text = prom.validators_text({'gpu_topology': {'healthy': True, 'checks': [check('nvlink', 'pass')]},
                                 'rdma_links': {'healthy': True, 'checks': []}})
    assert text == (HEAD_HEALTHY + 'llmforge_validator_healthy{validator="gpu_topology"} 1\n'
                    + 'llmforge_validator_healthy{validator="rdma_links"} 1\n' + HEAD_FAILED)


def test_a_validator_that_did_not_run_is_unhealthy_with_one_failing_run_check():
    text = prom.validators_text({'gpu_topology': {'failed': True, 'msg': 'nvidia-smi: not found', 'healthy': True},
                                 'rdma_links': rep.UNREACHABLE,
                                 'training': {'checks': []}})
    assert 'llmforge_validator_healthy{validator="gpu_topology"} 0\n' in text  # failed wins over healthy
    assert 'llmforge_validator_healthy{validator="rdma_links"} 0\n' in text
    assert 'llmforge_validator_healthy{validator="training"} 0\n' in text  # no healthy key: not healthy
    assert text.endswith(HEAD_FAILED
                         + 'llmforge_validator_check_failed{validator="gpu_topology",check="run",subject="node"} 1\n'
                         + 'llmforge_validator_check_failed{validator="rdma_links",check="run",subject="node"} 1\n')


def test_label_values_are_escaped_and_a_missing_subject_is_the_node():
    text = prom.validators_text({'rdma_links': {'healthy': False, 'checks': [
        {'name': 'st"a\\te', 'status': 'fail', 'subject': 'mlx5_3/1\nport'},
        {'name': 'rate', 'status': 'fail'},
        {'name': 7, 'status': 'fail', 'subject': None},
        {'status': 'pass'}]}})
    assert text.endswith(HEAD_FAILED
                         + 'llmforge_validator_check_failed{validator="rdma_links",check="st\\"a\\\\te",subject="mlx5_3/1\\nport"} 1\n'
                         + 'llmforge_validator_check_failed{validator="rdma_links",check="rate",subject="node"} 1\n'
                         + 'llmforge_validator_check_failed{validator="rdma_links",check="7",subject="None"} 1\n')


def test_no_validators_gives_the_headers_only():
    assert prom.validators_text({}) == HEAD_HEALTHY + HEAD_FAILED


@pytest.mark.parametrize('results, message', [
    (['gpu_topology'], 'expected a mapping'),
    ({'gpu_topology': 'ok'}, "validator 'gpu_topology': the result must be a mapping"),
    ({'gpu_topology': {'checks': [{'status': 'fail'}]}}, 'a failing check has no name'),
    ({'gpu_topology': {'checks': None}}, 'checks must be a list'),
    ({'gpu_topology': {'checks': ['pcie_width']}}, 'a check must be a mapping'),
])
def test_bad_input_is_named(results, message):
    with pytest.raises(prom.PrometheusError, match=message):
        prom.validators_text(results)


def test_filter():
    results = {'gpu_topology': {'healthy': True, 'checks': []}}
    assert filters.FilterModule().filters() == {'validator_metrics': filters.validator_metrics}
    assert filters.validator_metrics(results) == prom.validators_text(results)
    with pytest.raises(AnsibleFilterError, match='^validator_metrics: '):
        filters.validator_metrics({'gpu_topology': {'checks': None}})
