# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""validate.yml's DCGM stage on the cluster: a failing fast diagnostic quarantines the node, the long one decides.

The GPU nodes have no GPUs: /usr/bin/dcgmi is molecule/resources/files/dcgmi_shim.py, replaying the fixtures of
tests/fixtures/dcgm/ from /etc/llmforge-sim/dcgm-fixtures; /etc/llmforge-sim/dcgmi-diag-<level> chooses what a level
prints (a fixture name, or `hang`); without it a level passes. Runs after test_validate.py (file order): every test
leaves the selection files removed, the reservation deleted and both nodes resumed, for the tests after it.
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from conftest import FIRST, NODES, SECOND, drain_reasons, set_hardware
from scenario_helpers import run_playbook, said, wait_for

STATE = '/etc/llmforge-sim'
RESERVATION = 'llmforge_quarantine'
L3_FAIL = 'llmforge: dcgm L3 fail: memory GPU3; targeted_power GPU6'
# How many dcgmi diag processes run on a node (the health check's own may still be hanging after a `hang` test);
# the needles are built at run time so that this command's own shell does not count.
BUSY = ("python3 -c \"import os; cmd = lambda p: open('/proc/' + p + '/cmdline', 'rb').read(); "
        "print(sum(1 for p in os.listdir('/proc') if p.isdigit() and b'dcg' + b'mi' in cmd(p) "
        "and b'di' + b'ag' in cmd(p)))\"")


def select(node, level, what):
    node.check_output(f'mkdir -p {STATE} && echo {what} > {STATE}/dcgmi-diag-{level}')


def no_dcgmi(node):
    return lambda: node.run(BUSY).stdout.strip() == '0'


def reset(hosts, ctl):
    """No selection file, no dcgmi left running, no reservation, both nodes resumed."""
    for name in NODES:
        hosts[name].run(f'rm -f {STATE}/dcgmi-diag-1 {STATE}/dcgmi-diag-2 {STATE}/dcgmi-diag-3 {STATE}/dcgmi-diag-4')
    for name in NODES:
        wait_for(no_dcgmi(hosts[name]), timeout=180)
    ctl.run(f'scontrol delete ReservationName={RESERVATION}')
    ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")


@pytest.fixture(scope='module')
def cluster(hosts, ctl, tmp_path_factory):
    """Healthy simulated hardware on both nodes; everything the DCGM tests change undone afterwards."""
    for name in NODES:
        set_hardware(hosts[name])
    reset(hosts, ctl)
    yield {'reports': str(tmp_path_factory.mktemp('validate-dcgm') / 'reports')}
    reset(hosts, ctl)


@pytest.fixture
def clean(hosts, ctl, cluster):
    yield cluster
    reset(hosts, ctl)


def validate(cluster, fast_timeout=5, long_timeout=5):
    extra = {'validate_report_dir': cluster['reports'], 'validate_dcgm': True,
             'validate_dcgm_fast_timeout': fast_timeout, 'validate_dcgm_long_timeout': long_timeout}
    result = run_playbook('-e', json.dumps(extra), playbook='llmforge.cluster.validate', timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result


def reservation(ctl):
    """The reservation's `scontrol show reservation -o` line; '' when it does not exist."""
    shown = ctl.run(f'scontrol show reservation {RESERVATION} -o')
    return shown.stdout.strip() if shown.rc == 0 and 'ReservationName=' in shown.stdout else ''


def report_of(cluster):
    with open(os.path.join(cluster['reports'], 'report.json'), encoding='utf-8') as handle:
        return json.load(handle)


def node_state(ctl, name):
    return ctl.check_output(f'sinfo -N -h -n {name} -o %T').split()[0]


def test_failing_node_is_quarantined_and_returns_once_the_long_diagnostic_passes(clean, hosts, ctl):
    select(hosts[SECOND], 1, 'l1-fail')
    select(hosts[SECOND], 3, 'l3-fail')
    result = validate(clean)
    reasons = drain_reasons(ctl)
    assert reasons.get(SECOND) == L3_FAIL, (reasons, said(result)[-3000:])
    assert FIRST not in reasons, reasons
    assert re.search(rf'\bNodes={SECOND}\b', reservation(ctl)), reservation(ctl)
    report = report_of(clean)
    nodes = {node['name']: node for node in report['nodes']}
    assert not nodes[SECOND]['healthy'] and nodes[FIRST]['healthy'], said(result)[-3000:]
    dcgm = {(c['subject'], c['status']) for c in nodes[SECOND]['checks'] if c['validator'] == 'dcgm'}
    assert dcgm == {('L1', 'fail'), ('L3', 'fail')}, nodes[SECOND]['checks']
    stage = report['stages']['dcgm']
    assert stage['nodes'][SECOND]['quarantined'] is True and stage['nodes'][FIRST]['quarantined'] is False
    assert stage['facts']['quarantined'] == [SECOND]
    metrics = hosts[SECOND].file('/var/lib/node_exporter/textfile/llmforge_validate.prom').content_string
    assert 'llmforge_dcgm_quarantined 1' in metrics and 'llmforge_dcgm_diag_healthy{level="3"} 0' in metrics, metrics
    assert 'llmforge_dcgm_quarantined 0' in hosts[FIRST].file(
        '/var/lib/node_exporter/textfile/llmforge_validate.prom').content_string

    # Repaired: both levels pass now. The node is still drained for L3, so it is a candidate and is retested.
    hosts[SECOND].check_output(f'rm -f {STATE}/dcgmi-diag-1 {STATE}/dcgmi-diag-3')
    result = validate(clean)
    assert SECOND not in drain_reasons(ctl), (drain_reasons(ctl), said(result)[-3000:])
    state = node_state(ctl, SECOND)
    assert 'drain' not in state and 'maint' not in state and state.startswith('idle'), state
    assert reservation(ctl) == '', reservation(ctl)
    report = report_of(clean)
    assert all(node['healthy'] for node in report['nodes']), report['summary']
    assert report['stages']['dcgm']['nodes'][SECOND]['quarantined'] is False


def test_administrators_drain_is_left_alone(clean, hosts, ctl):
    ctl.check_output(f'scontrol update NodeName={FIRST} State=DRAIN Reason="admin: fan swap"')
    select(hosts[FIRST], 1, 'l1-fail')
    result = validate(clean)
    assert drain_reasons(ctl).get(FIRST) == 'admin: fan swap', (drain_reasons(ctl), said(result)[-3000:])
    assert not re.search(rf'\bNodes=\S*{FIRST}\b', reservation(ctl)), reservation(ctl)
    assert 'drained by someone else (admin: fan swap)' in said(result)
    stage = report_of(clean)['stages']['dcgm']
    assert stage['nodes'][FIRST]['quarantined'] is False


def test_hung_dcgmi_is_bounded_and_quarantines_the_node(clean, hosts, ctl):
    select(hosts[SECOND], 1, 'hang')
    select(hosts[SECOND], 3, 'hang')
    started = time.monotonic()
    result = validate(clean, fast_timeout=5, long_timeout=5)
    elapsed = time.monotonic() - started
    assert elapsed < 150, f'validate.yml took {elapsed:.0f} s with a hung dcgmi'
    assert drain_reasons(ctl).get(SECOND) == 'llmforge: dcgm L3 hang: timed out after 5 s', (
        drain_reasons(ctl), said(result)[-3000:])
    assert re.search(rf'\bNodes={SECOND}\b', reservation(ctl)), reservation(ctl)
    stage = report_of(clean)['stages']['dcgm']
    assert stage['nodes'][SECOND]['quarantined'] is True
    assert stage['nodes'][SECOND]['L1'] == 'hang: timed out after 5 s', stage['nodes'][SECOND]
