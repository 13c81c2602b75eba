# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/validate.yml on the converged cluster, with simulated GPUs (nvidia-smi shim) and HCAs (fake sysfs).

Runs after test_cluster.py (file order). gpu1 gets a healthy HGX H200 and 8 healthy NDR ports; gpu2 one GPU
trained at PCIe x8 and mlx5_3 port down. Nothing named nvidia-smi is put in PATH: the playbook is pointed at a
wrapper through validate_nvidia_smi, so the real (converged) nvidia-smi package stays untouched.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
import testinfra

CONTROLLER = 'ctl1'
NODES = ('gpu1', 'gpu2')
PROJECT = os.environ.get('MOLECULE_PROJECT_DIRECTORY') or os.path.abspath(
    os.path.join(os.path.dirname(__file__), '..', '..', '..'))
SIM = '/usr/local/share/llmforge-test'
WRAPPER = '/usr/local/sbin/llmforge-test-nvidia-smi'
SYSFS = {'gpu1': 'ndr8_healthy', 'gpu2': 'ndr8_port_down'}
RECAP = re.compile(r'^(ctl1|gpu1|gpu2|localhost)\s+:\s+(.*)$', re.M)


@pytest.fixture(scope='module')
def hosts():
    return {name: testinfra.get_host(f'docker://{name}') for name in (CONTROLLER,) + NODES}


@pytest.fixture(scope='module')
def ctl(hosts):
    return hosts[CONTROLLER]


def docker_cp(source, node, dest):
    subprocess.run(['docker', 'cp', source, f'{node}:{dest}'], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope='module')
def simulated(hosts, ctl, tmp_path_factory):
    """Simulated hardware on both nodes and an extra inventory pointing the validators at it."""
    fixtures = os.path.join(PROJECT, 'tests', 'fixtures')
    for name in NODES:
        node = hosts[name]
        node.check_output(f'rm -rf {SIM}/gpu-healthy {SIM}/gpu-current && mkdir -p {SIM} /srv/fake-sys')
        docker_cp(os.path.join(fixtures, 'gpu', 'nvidia-smi-shim'), name, f'{SIM}/nvidia-smi-shim')
        docker_cp(os.path.join(fixtures, 'gpu', 'hgx-h200-8'), name, f'{SIM}/gpu-healthy')
        docker_cp(os.path.join(fixtures, 'rdma', 'make_sysfs_trees.py'), name, f'{SIM}/make_sysfs_trees.py')
        node.check_output(f'cp -r {SIM}/gpu-healthy {SIM}/gpu-current && chmod 0755 {SIM}/nvidia-smi-shim')
        node.check_output(f"printf '#!/bin/sh\\nNVIDIA_SMI_SHIM_DIR={SIM}/gpu-current exec {SIM}/nvidia-smi-shim \"$@\"\\n'"
                          f' > {WRAPPER} && chmod 0755 {WRAPPER}')
        node.check_output(f'rm -rf /srv/fake-sys/{SYSFS[name]} && python3 {SIM}/make_sysfs_trees.py /srv/fake-sys {SYSFS[name]}')
    # gpu2: GPU0 trained at PCIe x8 instead of x16.
    hosts['gpu2'].check_output(f"sed -i '0,/<current_link_width>16x</s//<current_link_width>8x</' {SIM}/gpu-current/smi_q.xml")
    assert 'Gen' in hosts['gpu2'].check_output(f'{WRAPPER} -q -x | grep -c "<current_link_width>8x<" && echo Gen')

    tmp = tmp_path_factory.mktemp('validate')
    host_vars = {
        name: {'gpu_profile': 'h200-sxm-8', 'validate_nvidia_smi': WRAPPER,
               'validate_sysfs_root': f'/srv/fake-sys/{SYSFS[name]}',
               'rdma_expected': {'devices': '^mlx5_[0-7]$', 'hca_count': 8, 'rate_gbps': 400}}
        for name in NODES}
    (tmp / 'inventory.yml').write_text(json.dumps({'gpu_nodes': {'hosts': host_vars}}))
    yield {'inventory': str(tmp / 'inventory.yml'), 'reports': str(tmp / 'reports')}
    ctl.run('scontrol update NodeName=gpu1,gpu2 State=RESUME')


def validate(simulated, *extra):
    result = subprocess.run(
        ['ansible-playbook', 'playbooks/validate.yml', '-i', 'inventories/demo', '-i', simulated['inventory'],
         '-e', json.dumps({'validate_report_dir': simulated['reports']}), *extra],
        cwd=PROJECT, capture_output=True, text=True, timeout=300, check=False,
        env=dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1'))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
    return result


def drain_reasons(ctl):
    """{node: reason} of every drained/down node."""
    out = ctl.check_output("sinfo -R -h -o '%N|%E'")
    return dict(line.split('|', 1) for line in out.splitlines() if '|' in line)


def recap(result):
    return dict(RECAP.findall(result.stdout))


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
    assert re.search(r'would drain gpu2: llmforge: ', result.stdout), result.stdout[-4000:]
    assert 'would drain gpu1' not in result.stdout
    assert 'changed=0' in recap(result)['ctl1']
    assert 'gpu2' not in drain_reasons(ctl)


def test_validate_drains_only_the_failing_node(simulated, ctl):
    validate(simulated)
    reasons = drain_reasons(ctl)
    assert 'gpu1' not in reasons, reasons
    assert re.match(r'llmforge: (pcie_width GPU0|state mlx5_3/1|phys_state mlx5_3/1)', reasons.get('gpu2', '')), reasons
    assert len(reasons['gpu2']) <= 120


def test_report_files_say_gpu1_healthy_gpu2_failing(simulated):
    report = json.load(open(os.path.join(simulated['reports'], 'report.json'), encoding='utf-8'))
    assert {node['name']: node['healthy'] for node in report['nodes']} == {'gpu1': True, 'gpu2': False}
    assert report['summary']['failing'] == ['gpu2'] and report['cluster'] == 'demo'
    junit = ET.parse(os.path.join(simulated['reports'], 'junit.xml')).getroot()
    failed = {case.get('classname') for case in junit.iter('testcase') if case.find('failure') is not None}
    assert failed == {'gpu2'}
    parser = RowParser()
    with open(os.path.join(simulated['reports'], 'report.html'), encoding='utf-8') as handle:
        parser.feed(handle.read())
    assert ('gpu2', 'fail') in parser.rows and ('gpu1', 'pass') in parser.rows, parser.rows


def test_textfile_metrics_on_the_nodes(hosts):
    path = '/var/lib/node_exporter/textfile/llmforge_validate.prom'
    bad = hosts['gpu2'].file(path)
    assert bad.mode == 0o644
    assert 'llmforge_validator_healthy{validator="gpu_topology"} 0' in bad.content_string
    assert 'llmforge_validator_healthy{validator="rdma_links"} 0' in bad.content_string
    assert 'llmforge_validator_check_failed{validator="gpu_topology",check="pcie_width",subject="GPU0"} 1' in bad.content_string
    good = hosts['gpu1'].file(path).content_string
    assert 'llmforge_validator_healthy{validator="gpu_topology"} 1' in good
    assert 'llmforge_validator_healthy{validator="rdma_links"} 1' in good
    assert 'llmforge_validator_check_failed' not in good.replace('# HELP llmforge_validator_check_failed', '').replace(
        '# TYPE llmforge_validator_check_failed', '')


def test_repaired_node_is_resumed(simulated, hosts, ctl):
    gpu2 = hosts['gpu2']
    gpu2.check_output(f'rm -rf {SIM}/gpu-current && cp -r {SIM}/gpu-healthy {SIM}/gpu-current')
    # The inventory keeps pointing gpu2 at /srv/fake-sys/ndr8_port_down: replace that tree with a healthy one.
    gpu2.check_output(f'rm -rf /srv/fake-sys/ndr8_healthy && python3 {SIM}/make_sysfs_trees.py /srv/fake-sys ndr8_healthy'
                      ' && rm -rf /srv/fake-sys/ndr8_port_down'
                      ' && cp -a /srv/fake-sys/ndr8_healthy /srv/fake-sys/ndr8_port_down')
    result = validate(simulated)
    assert 'gpu2' not in drain_reasons(ctl), result.stdout[-3000:]
    state = ctl.check_output('sinfo -N -h -n gpu2 -o %T').split()
    assert state and 'drain' not in state[0], state


def test_admin_drain_survives_a_validate_run(simulated, ctl):
    ctl.check_output('scontrol update NodeName=gpu1 State=DRAIN Reason="admin: fan swap"')
    try:
        result = validate(simulated)
        assert drain_reasons(ctl).get('gpu1') == 'admin: fan swap', result.stdout[-3000:]
        assert 'changed=0' in recap(result)['ctl1']
    finally:
        ctl.run('scontrol update NodeName=gpu1 State=RESUME')
