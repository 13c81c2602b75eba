# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Behaviour of the converged monitoring scenario, seen through Prometheus's and Alertmanager's APIs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.parse

import pytest
import yaml

from scenario_helpers import PROJECT, docker_hosts, wait_for

MONITOR = 'mon1'
NODES = ('node1', 'node2')
ALL_HOSTS = (MONITOR,) + NODES
TEXTFILE_DIR = '/var/lib/node_exporter/textfile'
WEBHOOK_LOG = '/var/tmp/alerts.log'
ALERT_TESTS_DIR = '/var/tmp/llmforge-alerts'
DCGM_FIELDS = {
    'DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_GPU_TEMP',
    'DCGM_FI_DEV_MEMORY_TEMP', 'DCGM_FI_DEV_POWER_USAGE', 'DCGM_FI_DEV_XID_ERRORS',
    'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', 'DCGM_FI_DEV_ROW_REMAP_FAILURE',
    'DCGM_FI_DEV_ROW_REMAP_PENDING',
    'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS', 'DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS',
    'DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL', 'DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL',
    'DCGM_FI_DEV_THERMAL_VIOLATION', 'DCGM_FI_DEV_POWER_VIOLATION', 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS',
    'DCGM_FI_PROF_PIPE_TENSOR_ACTIVE',
}
# Runs inside the container: the image has python3 but no curl.
HTTP_CLIENT = r'''
import sys, urllib.request
url, method = sys.argv[1], sys.argv[2]
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
request = urllib.request.Request(url, data=data, method=method, headers={'Content-Type': 'application/json'})
print(urllib.request.urlopen(request, timeout=10).read().decode())
'''


@pytest.fixture(scope='module')
def hosts():
    return docker_hosts(ALL_HOSTS)


@pytest.fixture(scope='module')
def mon(hosts):
    return hosts[MONITOR]


def listen_url(host, defaults_file):
    """http://address:port from the --web.listen-address option the role wrote."""
    args = host.file(defaults_file).content_string
    address = re.search(r'--web\.listen-address=(\S+?)"?(\s|$)', args).group(1)
    return 'http://' + re.sub(r'^(0\.0\.0\.0)?:', '127.0.0.1:', address)


@pytest.fixture(scope='module')
def prometheus(mon):
    return listen_url(mon, '/etc/default/prometheus')


@pytest.fixture(scope='module')
def alertmanager(mon):
    return listen_url(mon, '/etc/default/prometheus-alertmanager')


def call(host, url, method='GET', body=None):
    """JSON answer of an HTTP request made from inside `host`."""
    args = [url, method] + ([json.dumps(body)] if body is not None else [])
    out = host.check_output('python3 -c ' + ' '.join(['%s'] * (len(args) + 1)), HTTP_CLIENT, *args)
    return json.loads(out) if out.strip() else None


def query(mon, prometheus, promql):
    answer = call(mon, f'{prometheus}/api/v1/query?query={urllib.parse.quote(promql)}')
    assert answer['status'] == 'success', answer
    return answer['data']['result']


def firing(mon, prometheus, alertname, instance):
    alerts = call(mon, f'{prometheus}/api/v1/alerts')['data']['alerts']
    return [a for a in alerts if a['labels'].get('alertname') == alertname
            and a['labels'].get('instance') == instance and a['state'] == 'firing']


def notified(mon, alertname, instance):
    """Webhook notifications that carried a firing `alertname` for `instance`."""
    log = mon.file(WEBHOOK_LOG)
    if not log.exists:
        return []
    found = []
    for line in log.content_string.splitlines():
        payload = json.loads(line)
        found += [a for a in payload.get('alerts', []) if a['status'] == 'firing'
                  and a['labels'].get('alertname') == alertname and a['labels'].get('instance') == instance]
    return found


@pytest.mark.parametrize('name', ALL_HOSTS)
def test_node_exporter_reads_the_textfile_directory(hosts, name):
    host = hosts[name]
    directory = host.file(TEXTFILE_DIR)
    assert directory.is_directory and directory.mode == 0o755 and directory.user == 'root'
    args = host.file('/etc/default/prometheus-node-exporter').content_string
    assert f'--collector.textfile.directory={TEXTFILE_DIR}' in args
    assert 'no-collector.infiniband' not in args
    service = host.service('prometheus-node-exporter')
    assert service.is_running and service.is_enabled
    metrics = host.check_output('python3 -c %s %s GET', HTTP_CLIENT, 'http://127.0.0.1:9100/metrics')
    assert re.search(r'^node_textfile_scrape_error 0$', metrics, re.M), 'textfile collector is not reading'


# The packaged default configuration scrapes localhost until the role's replaces it; those series stay
# visible for Prometheus's 5-minute lookback, so queries select the role's targets by their cluster label.
def test_every_node_target_is_up_with_inventory_labels(mon, prometheus):
    def node_targets():
        result = query(mon, prometheus, 'up{job="node", cluster="llmforge"}')
        return result if len(result) == 3 and all(r['value'][1] == '1' for r in result) else None
    result = wait_for(node_targets)
    assert result, query(mon, prometheus, 'up{job="node"}')
    labels = {r['metric']['instance']: (r['metric']['role'], r['metric']['cluster']) for r in result}
    assert labels == {'mon1': ('monitoring', 'llmforge'), 'node1': ('gpu_nodes', 'llmforge'),
                      'node2': ('gpu_nodes', 'llmforge')}


def test_targets_are_generated_from_the_inventory(mon):
    def targets(job):
        groups = yaml.safe_load(mon.file(f'/etc/prometheus/file_sd/{job}.yml').content_string)
        return {group['labels']['instance']: group['targets'] for group in groups}
    assert targets('node') == {'mon1': ['mon1:9100'], 'node1': ['node1:9100'], 'node2': ['node2:9100']}
    assert targets('dcgm') == {'node1': ['node1:9400'], 'node2': ['node2:9400']}
    assert targets('prometheus') == {'mon1': ['mon1:9090']}
    assert targets('alertmanager') == {'mon1': ['mon1:9093']}


def test_prometheus_and_alertmanager_scrape_themselves(mon, prometheus):
    def up():
        result = query(mon, prometheus, 'up{job=~"prometheus|alertmanager", cluster="llmforge"} == 1')
        return sorted(r['metric']['job'] for r in result) == ['alertmanager', 'prometheus']
    assert wait_for(up), query(mon, prometheus, 'up')


def test_rules_are_loaded_with_the_test_for_duration(mon, prometheus):
    groups = call(mon, f'{prometheus}/api/v1/rules')['data']['groups']
    assert any('llmforge' in group['name'] for group in groups), [g['name'] for g in groups]
    alerts = [rule for group in groups for rule in group['rules'] if rule['type'] == 'alerting']
    names = {rule['name'] for rule in alerts}
    assert {'LlmforgeValidatorFailed', 'NodeDown'} <= names, names
    assert all(rule['duration'] in (0, 5) for rule in alerts), {r['name']: r['duration'] for r in alerts}


def test_configuration_checks_pass_and_reloads_succeeded(mon, prometheus, alertmanager):
    mon.check_output('promtool check rules /etc/prometheus/rules/llmforge.rules.yml')
    mon.check_output('promtool check config /etc/prometheus/prometheus.yml')
    mon.check_output('amtool check-config /etc/prometheus/alertmanager.yml')
    assert query(mon, prometheus, 'prometheus_config_last_reload_successful')[0]['value'][1] == '1'
    assert query(mon, prometheus, 'alertmanager_config_last_reload_successful')[0]['value'][1] == '1'


def test_alert_rule_unit_tests_pass_on_the_monitoring_host(mon):
    """The rules' own promtool tests, run by the promtool the cluster runs (against the unmodified rules)."""
    source = os.path.join(PROJECT, 'roles', 'monitoring', 'files', 'alerts')
    mon.check_output('rm -rf %s', ALERT_TESTS_DIR)
    subprocess.run(['docker', 'cp', source, f'{MONITOR}:{ALERT_TESTS_DIR}'], check=True)
    tests = mon.check_output('cd %s/tests && ls *.yml', ALERT_TESTS_DIR).split()
    assert tests, 'no promtool test files in roles/monitoring/files/alerts/tests'
    result = mon.run('cd %s/tests && promtool test rules ' + ' '.join(['%s'] * len(tests)), ALERT_TESTS_DIR, *tests)
    assert result.rc == 0, result.stdout + result.stderr


def test_alertmanager_configuration_is_private(mon):
    config = mon.file('/etc/prometheus/alertmanager.yml')
    assert (config.user, config.group, config.mode) == ('root', 'prometheus', 0o640)
    data = yaml.safe_load(config.content_string)
    assert data['route']['group_by'] == ['cluster', 'instance']
    assert data['route']['receiver'] == 'test-webhook'


def test_failing_validator_fires_an_alert_and_notifies_the_webhook(hosts, mon, prometheus):
    node = hosts['node1']
    metric = 'llmforge_validator_healthy{validator="gpu_topology"} 0\n'
    node.check_output("printf '%%s' %s > %s/.llmforge_validate.prom.tmp && mv %s/.llmforge_validate.prom.tmp %s/llmforge_validate.prom",
                      metric, TEXTFILE_DIR, TEXTFILE_DIR, TEXTFILE_DIR)
    try:
        assert wait_for(lambda: firing(mon, prometheus, 'LlmforgeValidatorFailed', 'node1')), \
            call(mon, f'{prometheus}/api/v1/alerts')
        assert wait_for(lambda: notified(mon, 'LlmforgeValidatorFailed', 'node1'), timeout=60), \
            mon.run('cat %s', WEBHOOK_LOG).stdout[-3000:]
    finally:
        node.run('rm -f %s/llmforge_validate.prom', TEXTFILE_DIR)


def test_node_down_inhibits_the_other_alerts_of_that_node(hosts, mon, prometheus, alertmanager):
    node = hosts['node2']
    probe = 'LlmforgeInhibitionProbe'
    node.check_output('systemctl stop prometheus-node-exporter')
    try:
        assert wait_for(lambda: firing(mon, prometheus, 'NodeDown', 'node2')), call(mon, f'{prometheus}/api/v1/alerts')
        alerts = [{'labels': {'alertname': probe, 'severity': 'warning', 'instance': name, 'cluster': 'llmforge'}}
                  for name in ('node1', 'node2')]
        call(mon, f'{alertmanager}/api/v2/alerts', 'POST', alerts)

        def states():
            found = call(mon, f'{alertmanager}/api/v2/alerts?filter=' + urllib.parse.quote(f'alertname="{probe}"'))
            by_instance = {a['labels']['instance']: a['status'] for a in found}
            return by_instance if len(by_instance) == 2 else None
        status = wait_for(states, timeout=30)
        assert status, 'probe alerts did not reach Alertmanager'
        assert status['node2']['state'] == 'suppressed' and status['node2']['inhibitedBy'], status
        assert status['node1']['state'] == 'active', status
    finally:
        node.check_output('systemctl start prometheus-node-exporter')


@pytest.mark.parametrize('name', NODES)
def test_dcgm_counters_are_written_and_exporter_skipped_without_dcgm(hosts, name):
    host = hosts[name]
    counters = host.file('/etc/dcgm-exporter/llmforge-counters.csv').content_string
    rows = [line.split(',') for line in counters.splitlines() if line.strip() and not line.startswith('#')]
    assert {row[0].strip() for row in rows} == DCGM_FIELDS
    assert all(len(row) >= 3 and row[1].strip() in ('gauge', 'counter') for row in rows)
    assert not host.file('/etc/systemd/system/llmforge-dcgm-exporter.service').exists


def test_grafana_is_skipped_but_provisioned_when_its_repository_does_not_answer(mon, prometheus):
    assert not mon.package('grafana').is_installed
    datasource = yaml.safe_load(mon.file('/etc/grafana/provisioning/datasources/llmforge.yml').content_string)
    assert datasource['datasources'][0]['url'] == prometheus
    assert mon.file('/etc/grafana/provisioning/dashboards/llmforge.yml').exists


def test_check_mode_on_the_converged_hosts_reports_no_change():
    inventory = os.path.dirname(os.environ['MOLECULE_INVENTORY_FILE'])
    playbook = os.path.join(PROJECT, 'molecule', 'monitoring', 'converge.yml')
    result = subprocess.run(
        ['ansible-playbook', playbook, '-i', inventory, '--check', '--diff'],
        cwd=PROJECT, capture_output=True, text=True, timeout=600, check=False,
        env=dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1'))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    recap = [line for line in result.stdout.splitlines() if re.match(r'^(mon1|node1|node2)\s+:', line)]
    assert len(recap) == 3, result.stdout[-3000:]
    assert all('changed=0' in line for line in recap), '\n'.join(recap)
