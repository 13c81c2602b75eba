# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/validate.yml on the converged cluster, with simulated GPUs (nvidia-smi shim) and HCAs (fake sysfs).

Runs after test_cluster.py and test_nodecheck.py (file order). The first GPU node keeps its healthy HGX H200 and 8
healthy NDR ports; the second gets one GPU trained at PCIe x8 and mlx5_3 port down, by editing the simulated
hardware that molecule/resources/prepare.yml installed (the demo inventory points validate_nvidia_smi and
validate_sysfs_root at it). The real (converged) nvidia-smi package stays untouched.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest

import time

from conftest import CONTROLLER, FIRST, NODES, SECOND, SIM, SIM_NVIDIA_SMI, drain_reasons, set_hardware
from scenario_helpers import recaps, run_playbook, said, wait_for


@pytest.fixture(scope='module')
def simulated(hosts, ctl, tmp_path_factory):
    """The first node healthy; the second with GPU0 at PCIe x8 and mlx5_3 port down. Restored afterwards."""
    set_hardware(hosts[FIRST])
    set_hardware(hosts[SECOND], gpu_x8=True, sysfs_case='ndr8_port_down')
    assert '1' == hosts[SECOND].check_output(f'{SIM_NVIDIA_SMI} -q -x | grep -c "<current_link_width>8x<"')
    yield {'reports': str(tmp_path_factory.mktemp('validate') / 'reports')}
    for name in NODES:
        set_hardware(hosts[name])
    ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")


def validate(simulated, *extra):
    result = run_playbook('-e', json.dumps({'validate_report_dir': simulated['reports']}), *extra,
                          playbook='llmforge.cluster.validate', timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result


class RowParser(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get('class') or '').split()
        if tag == 'tr' and 'node' in classes:
            self.rows.add((attrs.get('data-node'), 'pass' if 'pass' in classes else 'fail' if 'fail' in classes else '?'))


def test_check_mode_says_it_would_drain_and_changes_nothing(simulated, ctl):
    result = validate(simulated, '--check')
    assert re.search(rf'would drain {SECOND}: llmforge: ', result.stdout), result.stdout[-4000:]
    assert f'would drain {FIRST}' not in result.stdout
    assert recaps(result)[CONTROLLER]['changed'] == 0
    assert SECOND not in drain_reasons(ctl)


def test_validate_drains_only_the_failing_node(simulated, ctl):
    validate(simulated)
    reasons = drain_reasons(ctl)
    assert FIRST not in reasons, reasons
    assert re.match(r'llmforge: (pcie_width GPU0|state mlx5_3/1|phys_state mlx5_3/1)', reasons.get(SECOND, '')), reasons
    assert len(reasons[SECOND]) <= 120


def test_report_files_say_the_first_node_healthy_the_second_failing(simulated):
    report = json.load(open(os.path.join(simulated['reports'], 'report.json'), encoding='utf-8'))
    assert {node['name']: node['healthy'] for node in report['nodes']} == {FIRST: True, SECOND: False}
    assert report['summary']['failing'] == [SECOND] and report['cluster'] == 'demo'
    junit = ET.parse(os.path.join(simulated['reports'], 'junit.xml')).getroot()
    failed = {case.get('classname') for case in junit.iter('testcase') if case.find('failure') is not None}
    assert failed == {SECOND}
    parser = RowParser()
    with open(os.path.join(simulated['reports'], 'report.html'), encoding='utf-8') as handle:
        parser.feed(handle.read())
    assert (SECOND, 'fail') in parser.rows and (FIRST, 'pass') in parser.rows, parser.rows


def test_textfile_metrics_on_the_nodes(hosts):
    path = '/var/lib/node_exporter/textfile/llmforge_validate.prom'
    bad = hosts[SECOND].file(path)
    assert bad.mode == 0o644
    assert 'llmforge_validator_healthy{validator="gpu_topology"} 0' in bad.content_string
    assert 'llmforge_validator_healthy{validator="rdma_links"} 0' in bad.content_string
    assert 'llmforge_validator_check_failed{validator="gpu_topology",check="pcie_width",subject="GPU0"} 1' in bad.content_string
    good = hosts[FIRST].file(path).content_string
    assert 'llmforge_validator_healthy{validator="gpu_topology"} 1' in good
    assert 'llmforge_validator_healthy{validator="rdma_links"} 1' in good
    assert 'llmforge_validator_check_failed' not in good.replace('# HELP llmforge_validator_check_failed', '').replace(
        '# TYPE llmforge_validator_check_failed', '')


def test_repaired_node_is_resumed(simulated, hosts, ctl):
    set_hardware(hosts[SECOND])
    result = validate(simulated)
    assert SECOND not in drain_reasons(ctl), result.stdout[-3000:]
    state = ctl.check_output(f'sinfo -N -h -n {SECOND} -o %T').split()
    assert state and 'drain' not in state[0], state


def test_the_slurm_path_and_the_ansible_path_give_the_same_report(simulated, hosts, ctl, tmp_path):
    """Both nodes healthy and idle in Slurm: validate_path=auto runs the hardware stage as one srun step
    (llmforge-validate-node on each node), validate_path=ansible as three module tasks per node; report.json is the
    same byte for byte apart from its generated_at, and each run says which path it took."""
    for name in NODES:
        set_hardware(hosts[name])
    ctl.run(f"scontrol update NodeName={','.join(NODES)} State=RESUME")
    # The Slurm path takes the nodes that are idle when it plans: wait until the earlier tests' steps have left both
    # (a node still completing would be reported busy, and the two reports would rightly differ).
    states = wait_for(lambda: all(state == 'idle' for state in
                                  ctl.check_output(f"sinfo -N -h -n {','.join(NODES)} -o %T").split()), timeout=120)
    assert states, ctl.check_output(f"sinfo -N -n {','.join(NODES)} -o '%N %T %E'")
    reports, took = {}, {}
    for path in ('ansible', 'auto'):
        directory = str(tmp_path / path)
        started = time.monotonic()
        result = run_playbook('-e', json.dumps({'validate_report_dir': directory, 'validate_path': path}),
                              playbook='llmforge.cluster.validate', timeout=300)
        took[path] = time.monotonic() - started
        assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
        with open(os.path.join(directory, 'report.json'), encoding='utf-8') as handle:
            reports[path] = re.sub(r'"generated_at": "[^"]*"', '"generated_at": ""', handle.read())
        assert json.loads(reports[path])['summary']['healthy'], said(result)[-4000:]
        if path == 'auto':
            assert 'hardware stage through Slurm on 2 node(s)' in said(result), said(result)[-3000:]
        else:
            assert 'hardware stage with Ansible on every node (validate_path=ansible)' in said(result), \
                said(result)[-3000:]
    assert reports['auto'] == reports['ansible'], '\n'.join(difflib.unified_diff(
        reports['ansible'].splitlines(), reports['auto'].splitlines(), 'ansible', 'auto', lineterm=''))
    assert json.loads(reports['auto'])['summary']['healthy'] is True
    # slurmdbd records the step's end a moment after it ends.
    query = 'sacct -X -n -P -u root --name=llmforge-validate -o NNodes,State -S now-10minutes'
    assert wait_for(lambda: '2|COMPLETED' in ctl.check_output(query).splitlines(), timeout=60), ctl.check_output(query)
    print(f"validate.yml on 2 nodes: Ansible path {took['ansible']:.1f} s, Slurm path {took['auto']:.1f} s (wall)")


def test_a_busy_node_is_listed_not_validated_and_not_waited_for(simulated, hosts, ctl, user):
    """A job of alice's holds the first node: the run validates the second through Slurm and reports the first as
    not validated (busy), draining and resuming nothing and waiting for no job."""
    job = user.check_output(f'sbatch --parsable --nodelist={FIRST} --exclusive --time=5 --wrap="sleep 240"').strip()
    try:
        deadline = time.monotonic() + 60
        while ctl.check_output(f'squeue -h -j {job} -o %T').strip() != 'RUNNING':
            assert time.monotonic() < deadline, ctl.check_output(f'squeue -j {job}')
            time.sleep(1)
        started = time.monotonic()
        result = validate(simulated)
        assert time.monotonic() - started < 200
        assert f'not validated: busy 1 ({FIRST})' in said(result), said(result)[-3000:]
        report = json.load(open(os.path.join(simulated['reports'], 'report.json'), encoding='utf-8'))
        first = next(node for node in report['nodes'] if node['name'] == FIRST)
        assert {(check['name'], check['status']) for check in first['checks']} == {('run', 'skip')}, first['checks']
        assert 'not validated: busy in Slurm (ALLOCATED)' in first['checks'][0]['message']
        assert ctl.check_output(f'squeue -h -j {job} -o %T').strip() == 'RUNNING'
        assert FIRST not in drain_reasons(ctl)
    finally:
        ctl.run(f'scancel {job}')
        deadline = time.monotonic() + 60
        while (ctl.check_output(f'sinfo -h -n {FIRST} -o %T').split() or [''])[0] != 'idle' and time.monotonic() < deadline:
            time.sleep(1)


def test_admin_drain_survives_a_validate_run(simulated, ctl):
    ctl.check_output(f'scontrol update NodeName={FIRST} State=DRAIN Reason="admin: fan swap"')
    try:
        result = validate(simulated)
        assert drain_reasons(ctl).get(FIRST) == 'admin: fan swap', result.stdout[-3000:]
        assert recaps(result)[CONTROLLER]['changed'] == 0
    finally:
        ctl.run(f'scontrol update NodeName={FIRST} State=RESUME')


def test_nccl_stage_drains_the_slow_node_and_resumes_it_when_fast_again(simulated, hosts, ctl):
    """validate_nccl: all_reduce_perf and alltoall_perf through srun on each node and on the pair (stand-ins that
    replay captured nccl-tests outputs; the second node listed as slow halves every bandwidth its jobs print)."""
    for name in NODES:
        set_hardware(hosts[name])
        hosts[name].check_output(f'echo {SECOND} > {SIM}/nccl-tests/nccl_slow_nodes')
    try:
        result = validate(simulated, '-e', 'validate_nccl=true')
        report = json.load(open(os.path.join(simulated['reports'], 'report.json'), encoding='utf-8'))
        nodes = {node['name']: node for node in report['nodes']}
        assert nodes[FIRST]['healthy'] and not nodes[SECOND]['healthy'], result.stdout[-3000:]
        failing = [(c['name'], c['subject']) for c in nodes[SECOND]['checks'] if c['status'] == 'fail']
        assert ('nccl_busbw', 'all_reduce_perf single') in failing, failing
        assert all(name.startswith('nccl_') for name, _subject in failing), failing
        assert re.match(r'llmforge: nccl_(busbw|pair) ', drain_reasons(ctl).get(SECOND, '')), drain_reasons(ctl)
        assert FIRST not in drain_reasons(ctl)
        metrics = hosts[SECOND].file('/var/lib/node_exporter/textfile/llmforge_validate.prom').content_string
        assert 'llmforge_validator_healthy{validator="nccl_tests"} 0' in metrics, metrics
        assert 'llmforge_validator_check_failed{validator="nccl_tests",check="nccl_busbw",subject="all_reduce_perf single"} 1' in metrics
        for name in NODES:
            hosts[name].check_output(f'rm -f {SIM}/nccl-tests/nccl_slow_nodes')
        # The second node is drained, so its own runs cannot be scheduled: only what ran is judged; hardware passes,
        # and the NCCL drain stays until an NCCL run proves the node (here: the admin resumes it, validate no longer
        # drains).
        ctl.check_output(f'scontrol update NodeName={SECOND} State=RESUME')
        validate(simulated, '-e', 'validate_nccl=true')
        assert SECOND not in drain_reasons(ctl), drain_reasons(ctl)
    finally:
        for name in NODES:
            hosts[name].run(f'rm -f {SIM}/nccl-tests/nccl_slow_nodes')
