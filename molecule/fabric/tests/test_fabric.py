# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What validate_fabric.yml found on four nodes where fab3's second rail runs at 180 Gb/s."""

from __future__ import annotations

import collections
import json
import os
import pathlib

import pytest
import testinfra

NODES = ('fab1', 'fab2', 'fab3', 'fab4')


@pytest.fixture(scope='module')
def report() -> dict:
    path = pathlib.Path(os.environ['MOLECULE_EPHEMERAL_DIRECTORY']) / 'fabric-report.json'
    return json.loads(path.read_text())


def test_every_node_was_measured_on_both_rails(report):
    assert report['nodes'] == list(NODES) and report['excluded'] == [] and report['rails'] == 2


def test_ring_pairs_make_each_node_server_and_client_once_per_rail(report):
    pairs = report['results']
    assert len(pairs) == len(NODES) * 2
    for rail in (0, 1):
        on_rail = [p for p in pairs if p['rail'] == rail]
        assert collections.Counter(p['client'] for p in on_rail) == collections.Counter(NODES)
        assert collections.Counter(p['server'] for p in on_rail) == collections.Counter(NODES)
        assert {(p['client'], p['server']) for p in on_rail} == {
            (NODES[i], NODES[(i + 1) % len(NODES)]) for i in range(len(NODES))}
        assert {p['port'] for p in on_rail} == {18515 + rail}


def test_only_the_pairs_on_the_slow_rail_fail(report):
    failing = sorted((p['client'], p['server'], p['rail'], p['average_gbps']) for p in report['results'] if p['status'] == 'fail')
    assert failing == [('fab2', 'fab3', 1, 180.0), ('fab3', 'fab4', 1, 180.0)]
    healthy = [p['average_gbps'] for p in report['results'] if p['status'] == 'pass']
    assert len(healthy) == 6 and all(rate > 390 for rate in healthy)


def test_retests_against_known_good_peers_name_the_bad_node(report):
    assert [v['verdict'] for v in report['verdicts']] == ['bad node fab3', 'bad node fab3']
    assert all(v['suspects'] == ['fab3'] for v in report['verdicts'])
    retested = {(r['client'], r['status']) for r in report['retests']}
    assert ('fab3', 'fail') in retested
    assert {'fab2', 'fab4'} <= {client for client, status in retested if status == 'pass'}
    assert all(r['rail'] == 1 and r['server'] in ('fab1',) for r in report['retests'])


@pytest.mark.parametrize('name', NODES)
def test_no_perftest_process_outlives_the_run(name):
    host = testinfra.get_host(f'docker://{name}')
    assert host.run("pgrep -f 'perftest_shi[m]'").rc == 1
