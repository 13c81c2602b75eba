# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's storage stage on the cluster: fio on each node's scratch and on the shared volume, all nodes at once.

The containers' figures mean nothing (one disk, 2 cores); the plumbing is what is proven: fio installed and run on
every node, the figures per node and the shared filesystem's aggregate in the report, expectations judged, nothing
left behind. Report-only (validate_drain false): the stage's drain reasons are the report's, tested in unit tests.
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import CONTROLLER, NODES
from scenario_helpers import run_playbook

SHARED = '/shared/llmforge/storage-test'
PROFILES = {'scratch_seq_write', 'scratch_seq_read', 'scratch_rand_read', 'shared_seq_read', 'shared_ckpt_write'}


def validate(reports, **extra):
    extra_vars = {'validate_report_dir': reports, 'validate_storage': True, 'validate_drain': False,
                  'validate_storage_scratch_dir': '/var/tmp', 'validate_storage_shared_dir': SHARED,
                  'validate_storage_size': '32M', 'validate_storage_shared_size': '16M',
                  'validate_storage_runtime': 2,
                  # Two containers on one disk: the fleet comparison would judge noise.
                  'validate_storage_fleet_fraction': 0.01, **extra}
    result = run_playbook('-e', json.dumps(extra_vars), playbook='llmforge.cluster.validate', timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    with open(os.path.join(reports, 'report.json'), encoding='utf-8') as handle:
        return json.load(handle)


@pytest.fixture(scope='module')
def reports(hosts, tmp_path_factory):
    hosts[CONTROLLER].run(f'mkdir -p {SHARED}')
    yield tmp_path_factory.mktemp('storage')
    hosts[CONTROLLER].run(f'rm -rf {SHARED}')


def storage_checks(report, node):
    (entry,) = [item for item in report['nodes'] if item['name'] == node]
    return [check for check in entry['checks'] if check['validator'] == 'storage']


def test_every_node_measures_scratch_and_the_shared_volume(reports, hosts):
    report = validate(str(reports / 'pass'))
    for node in NODES:
        checks = storage_checks(report, node)
        measured = {check['subject'] for check in checks if check['name'] == 'storage_throughput'}
        assert measured == PROFILES, checks
        assert all(check['status'] != 'fail' for check in checks), checks
        assert all(check['actual'] for check in checks if check['name'] == 'storage_throughput'), checks
        leftovers = hosts[node].run('find /var/tmp /shared/llmforge/storage-test -name ".llmforge-fio-*"').stdout
        assert leftovers.strip() == '', leftovers
    assert 'storage' in report['stages'], report['stages'].keys()


def test_a_node_below_its_expectation_is_reported_failing(reports):
    report = validate(str(reports / 'fail'), storage_expected={'scratch_rand_read_iops': 10 ** 9})
    for node in NODES:
        failed = [check for check in storage_checks(report, node) if check['status'] == 'fail']
        assert [check['subject'] for check in failed] == ['scratch_rand_read'], failed
    assert set(report['summary']['failing']) == set(NODES)
