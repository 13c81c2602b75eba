# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm health check llmforge-nodecheck on the converged cluster, against the nodes' simulated hardware.

slurmd runs HealthCheckProgram when it starts (the demo inventory spaces the periodic runs 12 hours apart so nothing
else changes node states during the tests): a node whose hardware degrades is drained with the validate.yml reason
after a slurmd restart, and resumed by the next run once repaired; an administrator's drain is left alone.
"""

from __future__ import annotations

import re
import time

import pytest

from conftest import FIRST, NODES, SECOND, drain_reasons, set_hardware
from scenario_helpers import wait_for

PROGRAM = '/usr/local/sbin/llmforge-nodecheck'
CODE = '/usr/local/lib/llmforge/python/ansible_collections/llmforge/cluster/plugins/module_utils'


@pytest.fixture
def restore(hosts, ctl):
    yield
    for name in NODES:
        set_hardware(hosts[name])
        hosts[name].run('rm -f /etc/llmforge-sim/dcgmi-diag-1 /tmp/nodecheck-dcgm.json')
    ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")


def test_slurm_runs_llmforge_nodecheck(ctl):
    config = dict(re.findall(r'^(HealthCheck\w+)\s+=\s+(.*)$', ctl.check_output('scontrol show config'), re.M))
    assert config['HealthCheckProgram'] == PROGRAM and config['HealthCheckInterval'] == '43200 sec', config
    # Slurm prints the flags in its own order (CYCLE,ANY).
    assert set(config['HealthCheckNodeState'].split(',')) == {'ANY', 'CYCLE'}, config


@pytest.mark.parametrize('name', NODES)
def test_healthy_node_passes_quickly_and_writes_metrics(hosts, name):
    node = hosts[name]
    started = time.monotonic()
    result = node.run(f'{PROGRAM} --strict')
    elapsed = time.monotonic() - started
    assert result.rc == 0, result.stdout + result.stderr
    assert re.match(rf'llmforge-nodecheck {name}: healthy \(\d+ pass, 0 fail, ', result.stdout), result.stdout
    # Slurm allows a health check 60 s; a healthy node's takes about 1 s alone (bounds leave room for a loaded host).
    assert elapsed < 10, f'{elapsed:.1f} s'
    metrics = node.file('/var/lib/node_exporter/textfile/llmforge_nodecheck.prom')
    assert metrics.mode == 0o644 and 'llmforge_validator_healthy{validator="nodecheck"} 1\n' in metrics.content_string
    expectation = node.file('/etc/llmforge/nodecheck.json')
    assert expectation.mode == 0o644 and '"profile": "h200-sxm-8"' in expectation.content_string
    # Only the modules the health check imports: not the report renderer of validate.yml.
    assert node.file(f'{CODE}/programs/_nodecheck.py').mode == 0o644 and not node.file(f'{CODE}/_report.py').exists


def test_slurmd_drains_a_node_whose_hardware_degrades_and_resumes_it_when_repaired(hosts, ctl, restore):
    node = hosts[SECOND]
    set_hardware(node, gpu_x8=True)
    node.check_output('systemctl restart slurmd')
    reasons = wait_for(lambda: drain_reasons(ctl).get(SECOND), timeout=90)
    assert reasons == 'llmforge: pcie_width GPU0 8', drain_reasons(ctl)
    assert FIRST not in drain_reasons(ctl)
    # The next run after the repair lifts the drain it set.
    set_hardware(node)
    node.check_output('systemctl restart slurmd')
    assert wait_for(lambda: SECOND not in drain_reasons(ctl), timeout=90), drain_reasons(ctl)
    assert wait_for(lambda: ctl.check_output(f'sinfo -h -N -n {SECOND} -o %T').strip() == 'idle', timeout=60)


def test_an_administrators_drain_survives_the_health_check(hosts, ctl, restore):
    ctl.check_output(f'scontrol update NodeName={FIRST} State=DRAIN Reason="admin: fan swap"')
    result = hosts[FIRST].run(PROGRAM)
    assert result.rc == 0 and 'drained by someone else' in result.stdout, result.stdout + result.stderr
    assert drain_reasons(ctl).get(FIRST) == 'admin: fan swap'


def test_a_hung_nvidia_smi_is_named_and_bounded(hosts):
    started = time.monotonic()
    result = hosts[FIRST].run(f'NVIDIA_SMI_SHIM_HANG=1 {PROGRAM} --no-slurm --strict')
    assert result.rc == 1 and 'FAILING llmforge: timeout nvidia-smi' in result.stdout, result.stdout + result.stderr
    assert time.monotonic() - started < 20


def test_a_dcgm_level_1_failure_drains_the_node_and_its_next_pass_resumes_it(hosts, ctl, restore):
    """The demo inventory adds DCGM's level 1 (a dcgmi stand-in replaying tests/fixtures/dcgm) to the health check."""
    node = hosts[SECOND]
    assert '"dcgm": {' in node.file('/etc/llmforge/nodecheck.json').content_string
    node.check_output('echo l1-fail > /etc/llmforge-sim/dcgmi-diag-1')
    result = node.run(PROGRAM)
    assert result.rc == 0 and 'FAILING llmforge: dcgm L1 fail: software GPU3' in result.stdout, result.stdout + result.stderr
    assert drain_reasons(ctl).get(SECOND) == 'llmforge: dcgm L1 fail: software GPU3', drain_reasons(ctl)
    node.check_output('rm /etc/llmforge-sim/dcgmi-diag-1')
    result = node.run(PROGRAM)
    assert result.rc == 0 and 'resumed' in result.stdout, result.stdout + result.stderr
    assert SECOND not in drain_reasons(ctl)


def test_a_hung_dcgmi_is_killed_at_its_limit(hosts):
    node = hosts[FIRST]
    node.check_output('echo hang > /etc/llmforge-sim/dcgmi-diag-1')
    try:
        # The node's own expectation with a 3 s limit for dcgmi instead of 45 s.
        node.check_output(
            "python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c[\"validators\"][\"dcgm\"][\"timeout\"] = 3; "
            "json.dump(c, open(sys.argv[2], \"w\"))' /etc/llmforge/nodecheck.json /tmp/nodecheck-dcgm.json")
        started = time.monotonic()
        result = node.run(f'{PROGRAM} --config /tmp/nodecheck-dcgm.json --no-slurm --strict')
        elapsed = time.monotonic() - started
        assert result.rc == 1, result.stdout + result.stderr
        assert 'FAILING llmforge: dcgm L1 hang: timed out after 3 s' in result.stdout, result.stdout
        assert elapsed < 15, f'{elapsed:.1f} s'
        assert 'dcgmi diag -r 1' not in node.check_output('ps -eo args'), 'the hung dcgmi outlived the check'
    finally:
        node.run('rm -f /etc/llmforge-sim/dcgmi-diag-1 /tmp/nodecheck-dcgm.json')
