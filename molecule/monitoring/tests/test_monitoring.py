# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Behaviour of the converged monitoring scenario, seen through Prometheus's and Alertmanager's APIs.

Every API call goes over HTTPS, checked against the CA the role made on mon1, as a user of monitoring_web_users
(the test credentials of molecule.yml); other tests prove what is refused and what listens where.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.parse

import pytest
import yaml

from scenario_helpers import PROJECT, docker_hosts, reach, recaps, wait_for

MONITOR = 'mon1'
NODES = ('node1', 'node2')
ALL_HOSTS = (MONITOR,) + NODES
# molecule.yml's fixed addresses; node1 is inside cluster_admin_cidrs, node2 outside.
ADDRESSES = {'mon1': '10.214.0.10', 'node1': '10.214.0.11', 'node2': '10.214.0.12'}
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
CA_FILE = '/etc/prometheus/tls/ca.crt'
WEB_PORTS = {9090: 'Prometheus', 9093: 'Alertmanager', 3000: 'Grafana', 9100: 'node_exporter', 9400: 'dcgm-exporter'}
# The scenario's inventory: its test users and Grafana secrets.
SETTINGS = yaml.safe_load(open(os.path.join(PROJECT, 'molecule', 'monitoring', 'molecule.yml'), encoding='utf-8'))[
    'provisioner']['inventory']['group_vars']['all']
USERS = SETTINGS['monitoring_web_users']
USER, PASSWORD = USERS[0]['name'], USERS[0]['password']
SECRETS = [user['password'] for user in USERS] + [SETTINGS['monitoring_grafana_admin_password'],
                                                  SETTINGS['monitoring_grafana_secret_key']]
# node1's BMC, simulated by ipmi_sim on mon1 (prepare.yml, files/bmc_sim.emu); node2 has none.
BMC_HOST, BMC_ADDRESS, BMC_RACK = 'node1', '127.0.0.2', 'r01'
BMC_PASSWORD = SETTINGS['monitoring_ipmi_password']
IPMI_EXPORTER = 'http://127.0.0.1:9290'
BMC_INLET_FILE = '/var/lib/llmforge-test-bmc/inlet'
# Runs inside the container: the image has python3 but no curl. Prints {"status": HTTP status or 0, "body": text}.
HTTP_CLIENT = r'''
import base64, json, ssl, sys, urllib.error, urllib.request
url, method, user, password, cafile = sys.argv[1:6]
data = sys.argv[6].encode() if len(sys.argv) > 6 else None
headers = {'Content-Type': 'application/json'}
if user:
    headers['Authorization'] = 'Basic ' + base64.b64encode(f'{user}:{password}'.encode()).decode()
context = ssl.create_default_context(cafile=cafile or None)
request = urllib.request.Request(url, data=data, method=method, headers=headers)
try:
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        status, body = answer.status, answer.read().decode()
except urllib.error.HTTPError as err:
    status, body = err.code, err.read().decode()
except urllib.error.URLError as err:
    status, body = 0, str(err.reason)
print(json.dumps({'status': status, 'body': body}))
'''


@pytest.fixture(scope='module')
def hosts():
    return docker_hosts(ALL_HOSTS)


@pytest.fixture(scope='module')
def mon(hosts):
    return hosts[MONITOR]


def listen_address(host, defaults_file):
    """address:port from the --web.listen-address option the role wrote."""
    args = host.file(defaults_file).content_string
    return re.search(r'--web\.listen-address=(\S+?)"?(\s|$)', args).group(1)


def listen_url(host, defaults_file):
    return 'https://' + listen_address(host, defaults_file)


def node_exporter_url(host):
    return 'http://' + listen_address(host, '/etc/default/prometheus-node-exporter') + '/metrics'


@pytest.fixture(scope='module')
def prometheus(mon):
    return listen_url(mon, '/etc/default/prometheus')


@pytest.fixture(scope='module')
def alertmanager(mon):
    return listen_url(mon, '/etc/default/prometheus-alertmanager')


def request(host, url, method='GET', body=None, user=USER, password=PASSWORD, cafile=CA_FILE):
    """(status, text) of an HTTP request made from inside `host`; status 0 when no HTTP answer came (TLS refused)."""
    args = [url, method, user or '', password or '', cafile or ''] + ([json.dumps(body)] if body is not None else [])
    out = host.check_output('python3 -c ' + ' '.join(['%s'] * (len(args) + 1)), HTTP_CLIENT, *args)
    answer = json.loads(out)
    return answer['status'], answer['body']


def call(host, url, method='GET', body=None):
    """JSON answer of an authenticated HTTPS request made from inside `host`."""
    status, text = request(host, url, method, body)
    assert 200 <= status < 300, (url, status, text[:500])
    return json.loads(text) if text.strip() else None


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
    status, metrics = request(host, node_exporter_url(host), user=None, cafile=None)
    assert status == 200
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
    targets = call(mon, f'{prometheus}/api/v1/targets?state=active')['data']['activeTargets']
    own = {t['labels']['job']: t for t in targets if t['labels']['job'] in ('prometheus', 'alertmanager')
           and t['labels'].get('cluster') == 'llmforge'}
    assert {job: (t['scrapeUrl'].split(':')[0], t['health']) for job, t in own.items()} == {
        'prometheus': ('https', 'up'), 'alertmanager': ('https', 'up')}, own
    alertmanagers = call(mon, f'{prometheus}/api/v1/alertmanagers')['data']['activeAlertmanagers']
    assert [a['url'].split(':')[0] for a in alertmanagers] == ['https'], alertmanagers


@pytest.mark.parametrize('service', ['prometheus', 'alertmanager'])
def test_every_web_user_is_let_in(mon, prometheus, alertmanager, service):
    url = {'prometheus': f'{prometheus}/api/v1/status/buildinfo', 'alertmanager': f'{alertmanager}/api/v2/status'}[service]
    for user in USERS:
        assert request(mon, url, user=user['name'], password=user['password'])[0] == 200, user['name']


@pytest.mark.parametrize('service', ['prometheus', 'alertmanager'])
@pytest.mark.parametrize(('case', 'user', 'password'), [
    pytest.param('no-credentials', None, None, id='no-credentials'),
    pytest.param('wrong-password', USER, PASSWORD + 'x', id='wrong-password'),
    pytest.param('unknown-user', 'nobody', PASSWORD, id='unknown-user'),
])
def test_a_call_without_valid_credentials_is_refused(mon, prometheus, alertmanager, service, case, user, password):
    url = {'prometheus': f'{prometheus}/api/v1/query?query=up', 'alertmanager': f'{alertmanager}/api/v2/alerts'}[service]
    status, text = request(mon, url, user=user, password=password)
    assert status == 401, (case, status, text[:300])


@pytest.mark.parametrize('service', ['prometheus', 'alertmanager'])
def test_plain_http_and_an_unknown_certificate_authority_are_refused(mon, prometheus, alertmanager, service):
    url = {'prometheus': prometheus, 'alertmanager': alertmanager}[service]
    status, _text = request(mon, url.replace('https://', 'http://') + '/-/healthy')
    assert status == 400, 'plain HTTP must be refused'
    status, text = request(mon, url + '/-/healthy', cafile=None)
    assert status == 0 and 'CERTIFICATE_VERIFY_FAILED' in text, text


def test_silences_need_credentials(mon, alertmanager):
    silence = {'matchers': [{'name': 'alertname', 'value': 'NodeDown', 'isRegex': False}], 'startsAt': '2026-01-01T00:00:00Z',
               'endsAt': '2099-01-01T00:00:00Z', 'createdBy': 'anyone', 'comment': 'unauthenticated'}
    status, _text = request(mon, f'{alertmanager}/api/v2/silences', 'POST', silence, user=None)
    assert status == 401
    silences = call(mon, f'{alertmanager}/api/v2/silences')
    assert not [s for s in silences if s.get('comment') == 'unauthenticated'], silences


def test_lifecycle_api_is_off_and_quit_is_refused(mon, prometheus):
    assert 'enable-lifecycle' not in mon.file('/etc/default/prometheus').content_string
    assert request(mon, f'{prometheus}/-/quit', 'POST', user=None)[0] == 401
    status, text = request(mon, f'{prometheus}/-/quit', 'POST')
    assert status == 403 and 'Lifecycle API is not enabled' in text, (status, text)
    assert request(mon, f'{prometheus}/-/reload', 'POST')[0] == 403
    assert mon.service('prometheus').is_running
    assert request(mon, f'{prometheus}/-/ready')[0] == 200


def listeners(host):
    """(local address, port) of every listening TCP socket, from ss."""
    found = []
    for line in host.check_output('ss -Hltn').splitlines():
        local = line.split()[3]
        address, _sep, port = local.rpartition(':')
        found.append((address.strip('[]'), int(port)))
    return found


@pytest.mark.parametrize('name', ALL_HOSTS)
def test_monitoring_services_listen_on_the_management_address_only(hosts, name):
    host = hosts[name]
    address = listen_address(host, '/etc/default/prometheus-node-exporter').rpartition(':')[0]
    assert address == host.check_output("python3 -c %s", 'import socket; print(socket.gethostbyname(socket.gethostname()))')
    ours = [(a, port) for a, port in listeners(host) if port in WEB_PORTS or port == 9094]
    assert all(a == address for a, _port in ours), (address, ours, host.check_output('ss -ltnp'))
    expected = {9100} | ({9090, 9093} if name == MONITOR else set())
    assert {port for _a, port in ours} == expected, host.check_output('ss -ltnp')


def test_exporters_answer_the_metrics_host_only(hosts):
    """The host firewall: node_exporter on a node takes connections from the monitoring host, not from others."""
    for node in NODES:
        assert reach(hosts[MONITOR], ADDRESSES[node], 9100) == 'open', node
    assert reach(hosts['node2'], ADDRESSES['node1'], 9100) == 'filtered'
    assert reach(hosts['node1'], ADDRESSES['node2'], 9100) == 'filtered'


def test_prometheus_and_alertmanager_answer_the_admin_cidrs_only(hosts):
    """node1 is inside cluster_admin_cidrs, node2 is a cluster host outside it: only node1 gets through."""
    for port in (9090, 9093):
        assert reach(hosts['node1'], ADDRESSES[MONITOR], port) == 'open', port
        assert reach(hosts['node2'], ADDRESSES[MONITOR], port) == 'filtered', port
    table = hosts[MONITOR].check_output('nft list table inet llmforge')
    assert '10.214.0.11' in table and 'dport' in table, table


def test_web_configuration_and_credentials_files_are_private(mon):
    expected = {
        '/etc/prometheus/web.yml': ('root', 'prometheus', 0o640),
        '/etc/prometheus/prometheus.yml': ('root', 'prometheus', 0o640),
        '/etc/prometheus/llmforge-web-client.password': ('root', 'prometheus', 0o640),
        '/etc/prometheus/tls/server.key': ('root', 'prometheus', 0o640),
        '/etc/prometheus/tls/ca.key': ('root', 'root', 0o600),
        '/etc/prometheus/tls': ('root', 'prometheus', 0o750),
    }
    found = {path: (mon.file(path).user, mon.file(path).group, mon.file(path).mode) for path in expected}
    assert found == expected
    assert mon.file('/etc/prometheus/llmforge-web-client.password').content_string == PASSWORD
    config = yaml.safe_load(mon.file('/etc/prometheus/web.yml').content_string)
    assert set(config['basic_auth_users']) == {user['name'] for user in USERS}
    assert config['tls_server_config']['min_version'] == 'TLS12'
    for user in USERS:
        hashed = config['basic_auth_users'][user['name']]
        assert hashed.startswith('$2b$12$')
        assert mon.run('python3 -c %s %s %s', 'import bcrypt, sys; sys.exit(0 if bcrypt.checkpw(sys.argv[1].encode(), '
                       'sys.argv[2].encode()) else 1)', user['password'], hashed).rc == 0, user['name']
    # Outside the password file, no test secret is written in plain text under /etc/prometheus.
    for secret in SECRETS:
        hits = mon.run('grep -rlF -e %s /etc/prometheus /etc/default', secret).stdout.split()
        assert hits in ([], ['/etc/prometheus/llmforge-web-client.password']), hits


def test_certificate_names_the_metrics_host_and_chains_to_the_ca(mon, prometheus):
    address = prometheus.split('//')[1].rpartition(':')[0]
    text = mon.check_output('openssl x509 -in /etc/prometheus/tls/server.crt -noout -ext subjectAltName')
    names = set(re.findall(r'(?:DNS|IP Address):([^,\s]+)', text))
    issuer = mon.check_output('openssl x509 -in /etc/prometheus/tls/server.crt -noout -issuer')
    assert 'monitoring CA (mon1)' in issuer, issuer
    mon.check_output('openssl verify -CAfile %s /etc/prometheus/tls/server.crt', CA_FILE)
    assert {'mon1', 'localhost', '127.0.0.1', address} <= names, names
    # Scrape targets use the inventory name: the certificate is valid for it.
    assert request(mon, 'https://mon1:9090/-/healthy')[0] == 200


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


def test_grafana_is_skipped_and_no_secret_of_it_is_written_without_it(mon):
    """Grafana's repository cannot answer here: its dashboards are provisioned, its secret-bearing files are not."""
    assert not mon.package('grafana').is_installed
    assert mon.file('/etc/grafana/provisioning/dashboards/llmforge.yml').exists
    assert not mon.file('/etc/grafana/provisioning/datasources/llmforge.yml').exists
    assert not mon.file('/etc/grafana/grafana.ini').exists
    assert not mon.file('/etc/grafana/llmforge-tls.key').exists
    for secret in SECRETS[-2:]:
        assert mon.run('grep -rlF -e %s /etc /var/lib /tmp', secret).stdout.split() == []


def ipmi_probe(mon):
    status, text = request(mon, f'{IPMI_EXPORTER}/ipmi?target={BMC_ADDRESS}&module=default', user=None, cafile=None)
    assert status == 200, (status, text[:500])
    return text


def sample(text, metric, **labels):
    """Value of the first series of `metric` in exposition `text` whose labels include `labels`, or None."""
    for line in text.splitlines():
        match = re.match(r'^(\w+)(?:\{(.*)\})? (\S+)$', line)
        if not match or match.group(1) != metric:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(2) or ''))
        if all(found.get(key) == value for key, value in labels.items()):
            return float(match.group(3))
    return None


def test_ipmi_exporter_reads_the_simulated_bmc(mon):
    """The exporter on the metrics host logs into the BMC over IPMI LAN and reads its inlet, fan and PSU sensors."""
    assert mon.service('prometheus-ipmi-exporter').is_running
    assert ('127.0.0.1', 9290) in listeners(mon), mon.check_output('ss -ltnp')

    def read():
        probe = ipmi_probe(mon)
        return probe if sample(probe, 'ipmi_up', collector='ipmi') == 1 else None

    text = wait_for(read, timeout=60)
    assert text, ipmi_probe(mon)[-3000:] + mon.run('journalctl -u prometheus-ipmi-exporter -n 30 --no-pager').stdout
    assert sample(text, 'ipmi_temperature_celsius', name='Inlet Temp') == 24, text[-3000:]
    assert sample(text, 'ipmi_fan_speed_rpm', name='Fan 1') == 8000, text[-3000:]
    assert sample(text, 'ipmi_sensor_state', name='PSU1 Status', type='Power Supply') == 0, text[-3000:]


def test_ipmi_configuration_holds_the_bmc_login_privately(mon):
    config = mon.file('/etc/prometheus/ipmi_exporter.yml')
    assert (config.user, config.group, config.mode) == ('root', 'prometheus', 0o640)
    module = yaml.safe_load(config.content_string)['modules']['default']
    assert (module['user'], module['pass'], module['driver']) == (SETTINGS['monitoring_ipmi_username'], BMC_PASSWORD,
                                                                  'LAN_2_0')
    assert module['collectors'] == ['ipmi', 'dcmi'] and module['workaround_flags'] == ['opensesspriv']
    hits = mon.run('grep -rlF -e %s /etc/prometheus /etc/default', BMC_PASSWORD).stdout.split()
    assert hits == ['/etc/prometheus/ipmi_exporter.yml'], hits


def test_ipmi_targets_are_the_bmcs_of_the_inventory(mon):
    groups = yaml.safe_load(mon.file('/etc/prometheus/file_sd/ipmi.yml').content_string)
    assert groups == [{'targets': [BMC_ADDRESS], 'labels': {
        'cluster': 'llmforge', 'role': 'gpu_nodes', 'instance': BMC_HOST, 'rack': BMC_RACK, 'bmc': BMC_ADDRESS}}]
    node_groups = yaml.safe_load(mon.file('/etc/prometheus/file_sd/node.yml').content_string)
    assert {g['labels']['instance']: g['labels']['rack'] for g in node_groups} == {
        'mon1': '', 'node1': BMC_RACK, 'node2': ''}


def test_prometheus_scrapes_the_bmc_as_its_node(mon, prometheus):
    def scraped():
        result = query(mon, prometheus, 'ipmi_up{job="ipmi", collector="ipmi", cluster="llmforge"} == 1')
        return result or None
    result = wait_for(scraped)
    assert result, call(mon, f'{prometheus}/api/v1/targets?state=active')
    assert [{k: r['metric'][k] for k in ('instance', 'rack', 'bmc', 'role')} for r in result] == [
        {'instance': BMC_HOST, 'rack': BMC_RACK, 'bmc': BMC_ADDRESS, 'role': 'gpu_nodes'}]
    inlet = query(mon, prometheus, 'llmforge:bmc_inlet_temperature:celsius{instance="node1"}')
    assert [r['value'][1] for r in inlet] == ['24'], inlet


def test_power_budget_reaches_prometheus_for_nodes_that_have_one(hosts, mon, prometheus):
    budget = hosts['node1'].file(f'{TEXTFILE_DIR}/llmforge_power_budget.prom')
    assert re.search(r'^llmforge_node_power_budget_watts 1500(\.0)?$', budget.content_string, re.M)
    assert not hosts['node2'].file(f'{TEXTFILE_DIR}/llmforge_power_budget.prom').exists

    def budgets():
        result = query(mon, prometheus, 'llmforge_node_power_budget_watts{job="node", cluster="llmforge"}')
        return {r['metric']['instance']: r['value'][1] for r in result} or None
    assert wait_for(budgets) == {'node1': '1500'}


def set_inlet(mon, celsius):
    """The simulated BMC polls its inlet reading from this file every second."""
    mon.check_output("echo %s > %s.tmp && mv %s.tmp %s", str(celsius), BMC_INLET_FILE, BMC_INLET_FILE, BMC_INLET_FILE)


def test_hot_inlet_air_fires_and_notifies_the_webhook(mon, prometheus):
    set_inlet(mon, 36)  # degrees C: above the warning (30) and the critical (35) thresholds
    try:
        for alert in ('InletTemperatureCritical', 'InletTemperatureHigh'):
            assert wait_for(lambda: firing(mon, prometheus, alert, BMC_HOST), timeout=120), \
                (alert, call(mon, f'{prometheus}/api/v1/alerts'))
        found = wait_for(lambda: notified(mon, 'InletTemperatureCritical', BMC_HOST), timeout=60)
        assert found, mon.run('cat %s', WEBHOOK_LOG).stdout[-3000:]
        labels = found[0]['labels']
        assert (labels['rack'], labels['bmc'], labels['name']) == (BMC_RACK, BMC_ADDRESS, 'Inlet Temp'), labels
    finally:
        set_inlet(mon, 24)


def test_a_full_scratch_filesystem_fires_and_notifies_the_webhook(hosts, mon, prometheus):
    """node1's /scratch (an 8 MiB tmpfs here) filled to its last 1 %: FilesystemAlmostFull and FilesystemFull."""
    node = hosts['node1']
    assert node.mount_point('/scratch').exists
    # Leave 1 % of the filesystem free: below FilesystemFull's 3 %.
    node.check_output("python3 -c 'import os; s = os.statvfs(\"/scratch\"); "
                      "n = s.f_bavail * s.f_frsize - s.f_blocks * s.f_frsize // 100; "
                      "open(\"/scratch/llmforge-fill\", \"wb\").write(bytes(n))'")
    try:
        for alert in ('FilesystemFull', 'FilesystemAlmostFull'):
            assert wait_for(lambda: firing(mon, prometheus, alert, 'node1'), timeout=120), \
                (alert, query(mon, prometheus, 'llmforge:filesystem_avail:ratio'))
        found = wait_for(lambda: notified(mon, 'FilesystemFull', 'node1'), timeout=60)
        assert found, mon.run('cat %s', WEBHOOK_LOG).stdout[-3000:]
        assert found[0]['labels']['mountpoint'] == '/scratch' and found[0]['labels']['severity'] == 'critical'
        assert not firing(mon, prometheus, 'FilesystemFull', 'node2')
    finally:
        node.run('rm -f /scratch/llmforge-fill')


def scenario_playbook(playbook, *options: str) -> tuple[dict[str, int], str]:
    """ansible-playbook on the scenario's hosts (molecule's inventory directory, the group_vars above included). It
    must pass and recap every host; returns changed per host and the whole output."""
    inventory = os.path.dirname(os.environ['MOLECULE_INVENTORY_FILE'])
    result = subprocess.run(
        ['ansible-playbook', str(playbook), '-i', inventory, *options], cwd=PROJECT, capture_output=True, text=True,
        timeout=600, check=False, env=dict(os.environ, ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1'))
    output = result.stdout + result.stderr
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    changed = {host: counters['changed'] for host, counters in recaps(result).items()}
    assert set(changed) == set(ALL_HOSTS), result.stdout[-3000:]
    return changed, output


def test_check_mode_on_the_converged_hosts_reports_no_change():
    changed, output = scenario_playbook(os.path.join(PROJECT, 'molecule', 'monitoring', 'converge.yml'),
                                        '--check', '--diff')
    assert changed == {host: 0 for host in ALL_HOSTS}, output[-3000:]
    assert BMC_PASSWORD not in output, 'the BMC password is in the output'


def run_firewall(tmp_path, enabled: str) -> tuple[dict[str, int], str]:
    """The firewall role alone on the scenario's hosts, firewall_enabled set per host by the expression `enabled`.
    The hosts go in reverse order, so that the role's lookups, which run once on the play's first host, run on node2,
    whose firewall the test turns off while the others keep theirs. Returns changed per host and the output's end."""
    playbook = tmp_path / 'firewall.yml'
    playbook.write_text(yaml.safe_dump([{
        'name': 'The host firewall', 'hosts': 'cluster', 'order': 'reverse_inventory', 'become': True,
        'gather_facts': True,
        'vars': {'firewall_enabled': '{{ %s }}' % enabled},
        'roles': [{'role': 'llmforge.cluster.firewall'}]}]), encoding='utf-8')
    changed, output = scenario_playbook(playbook)
    return changed, output[-6000:]


def test_firewall_off_removes_table_unit_and_record_then_on_restores_them(hosts, tmp_path):
    """firewall_enabled false on node2 removes its table, its unit, its ruleset and the unit's record of the loaded
    table (also a record left behind once the unit is gone), and leaves the other hosts alone; true again loads the
    same table and records it as loaded. Last: the tests before it expect the firewall on."""
    node = hosts['node2']
    unit, record = '/etc/systemd/system/llmforge-firewall.service', '/run/llmforge-firewall.nft'
    listing = 'nft -s list table inet llmforge'
    off = "inventory_hostname != 'node2'"
    before = node.check_output(listing)
    try:
        changed, output = run_firewall(tmp_path, off)
        assert changed['mon1'] == changed['node1'] == 0 and changed['node2'] >= 2, output
        assert 'table inet llmforge' not in node.check_output('nft list tables')
        for path in (unit, record, '/etc/nftables.d/llmforge.nft'):
            assert not node.file(path).exists, path
        assert reach(hosts['node1'], ADDRESSES['node2'], 9100) == 'open'
        assert reach(hosts['node2'], ADDRESSES['node1'], 9100) == 'filtered'
        # A record whose unit is already gone (its ExecStop removes it otherwise).
        node.check_output('touch %s', record)
        changed, output = run_firewall(tmp_path, off)
        assert changed['mon1'] == changed['node1'] == 0 and changed['node2'] >= 1, output
        assert not node.file(record).exists
        changed, output = run_firewall(tmp_path, off)
        assert changed == {'mon1': 0, 'node1': 0, 'node2': 0}, output
    finally:
        changed, output = run_firewall(tmp_path, 'true')
    assert changed['mon1'] == changed['node1'] == 0 and changed['node2'] >= 1, output
    assert node.check_output(listing) == before
    assert node.check_output('cat %s', record) == before
    assert node.service('llmforge-firewall').is_enabled
    assert reach(hosts['node1'], ADDRESSES['node2'], 9100) == 'filtered'
