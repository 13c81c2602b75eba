# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks of the monitoring role's static files: the alert rules, their promtool tests and the Grafana dashboards."""

from __future__ import annotations

import itertools
import json
import pathlib
import re
import shutil
import subprocess
import typing as t

import pytest
import yaml

from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils.programs import _remediate, _slurm_metrics

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = ROOT / 'roles' / 'monitoring' / 'files'
ALERTS = FILES / 'alerts'
RULES = ALERTS / 'llmforge.rules.yml'
RULE_TESTS = ALERTS / 'tests' / 'llmforge.rules.test.yml'
DASHBOARDS = sorted((FILES / 'dashboards').glob('*.json'))
DCGM_COUNTERS = ROOT / 'roles' / 'monitoring' / 'templates' / 'dcgm-counters.csv.j2'
SLURM_FIXTURES = ROOT / 'tests' / 'fixtures' / 'slurm'

# Metrics the rules and dashboards may use besides llmforge_slurm_* (read from the collector's own output below)
# and the rules' recording rules. Each name is one its exporter exports; a typo or a renamed field fails here.
PROMETHEUS_METRICS = {'up', 'ALERTS'}
NODE_EXPORTER_METRICS = {
    # textfile collector
    'node_textfile_mtime_seconds',
    # infiniband collector (checked against node_exporter 1.9.0 of Debian 13)
    'node_infiniband_state_id', 'node_infiniband_physical_state_id', 'node_infiniband_link_downed_total',
    'node_infiniband_symbol_error_total', 'node_infiniband_port_errors_received_total',
    'node_infiniband_port_data_received_bytes_total', 'node_infiniband_port_data_transmitted_bytes_total',
    'node_infiniband_port_transmit_wait_total',
    # filesystem collector
    'node_filesystem_avail_bytes', 'node_filesystem_size_bytes',
    # textfile collector: each node's power budget, written by the role's installer side
    'llmforge_node_power_budget_watts',
}
# prometheus-ipmi-exporter (job "ipmi"): checked against 1.6.1 of Debian 12 and upstream's current source.
IPMI_METRICS = {
    'ipmi_up', 'ipmi_temperature_celsius', 'ipmi_temperature_state', 'ipmi_fan_speed_rpm', 'ipmi_fan_speed_state',
    'ipmi_sensor_state', 'ipmi_dcmi_power_consumption_watts',
}
DCGM_METRICS = {
    'DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_FB_USED', 'DCGM_FI_DEV_FB_FREE', 'DCGM_FI_DEV_GPU_TEMP', 'DCGM_FI_DEV_XID_ERRORS',
    'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL', 'DCGM_FI_DEV_ROW_REMAP_FAILURE', 'DCGM_FI_DEV_ROW_REMAP_PENDING',
    'DCGM_FI_DEV_THERMAL_VIOLATION',
}
# Written by the validators (validate.yml, llmforge-nodecheck) into the textfile directory; the rules file documents them.
VALIDATOR_METRICS = set(_prometheus.VALIDATOR_HELP)
SEVERITIES = {'critical', 'warning'}
DATASOURCE_UIDS = {'prometheus', '${DS_PROMETHEUS}'}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_LABEL_LIST = re.compile(r'\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)')
_IDENTIFIER = re.compile(r'(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?')
_KEYWORDS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'offset', 'bool', 'atan2',
             'inf', 'nan', 'Inf', 'NaN'}
# A query inside an annotation template: {{ with printf "metric{label=%q}" ... | query }}.
_TEMPLATE_QUERY = re.compile(r'printf\s+"((?:[^"\\]|\\.)*)"')
_LABEL_VALUES = re.compile(r'label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)')


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (strings, label matchers, ranges and label lists stripped)."""
    expr = _STRING.sub('""', expr)
    expr = re.sub(r'\{[^{}]*\}', '', expr)
    expr = re.sub(r'\[[^\[\]]*\]', '', expr)
    expr = _LABEL_LIST.sub('', expr)
    return {match.group(1) for match in _IDENTIFIER.finditer(expr) if not match.group(2) and match.group(1) not in _KEYWORDS}


@pytest.mark.parametrize(('expr', 'names'), [
    pytest.param('up{job="node"} == 0', {'up'}, id='selector'),
    pytest.param('time() - node_textfile_mtime_seconds > 900', {'node_textfile_mtime_seconds'}, id='function-without-argument'),
    pytest.param('sum by (instance) (rate(a_total{x=~"a|b"}[$__rate_interval])) / 1e6', {'a_total'}, id='aggregation-and-range'),
    pytest.param('label_replace(max by (node) (m{state="down"}), "instance", "$1", "node", "(.+)") == 1', {'m'}, id='strings'),
    pytest.param('(a > 0 unless b:rec) unless (a offset 15m == a)', {'a', 'b:rec'}, id='set-operators-and-offset'),
    pytest.param('x * on (node) group_left (reason) y or vector(0)', {'x', 'y'}, id='matching'),
])
def test_metric_names(expr, names):
    assert metric_names(expr) == names


def load_yaml(path: pathlib.Path):
    return yaml.safe_load(path.read_text(encoding='utf-8'))


def rules() -> list[dict]:
    return [rule for group in load_yaml(RULES)['groups'] for rule in group['rules']]


def alerts() -> list[dict]:
    return [rule for rule in rules() if 'alert' in rule]


def slurm_metric_names() -> set[str]:
    """Every metric llmforge-slurm-metrics writes, from its output over the fixtures and on failure."""
    nodes = _slurm_metrics.parse_sinfo((SLURM_FIXTURES / 'cluster16-sinfo.txt').read_text(encoding='utf-8'))
    jobs = _slurm_metrics.parse_squeue((SLURM_FIXTURES / 'cluster16-squeue.txt').read_text(encoding='utf-8'))
    text = _slurm_metrics.render_metrics(nodes, jobs) + _slurm_metrics.render_failure()
    return set(re.findall(r'(?m)^# TYPE (\S+) ', text))


def remediate_metric_names() -> set[str]:
    """Every metric llmforge-remediate writes (a histogram's as its _bucket, _sum and _count series)."""
    counts = {'states': {}, 'outcomes': {}, 'rma': 0, 'repaired': [60.0], 'nodes': [('gpu001', 'rma', 0.0)]}
    text = _remediate.metrics_text(counts, {'ok': True, 'at': 0})
    names = set()
    for name, kind in re.findall(r'(?m)^# TYPE (\S+) (\S+)', text):
        names |= {f'{name}_bucket', f'{name}_sum', f'{name}_count'} if kind == 'histogram' else {name}
    return names


def known_metrics() -> set[str]:
    recorded = {rule['record'] for rule in rules() if 'record' in rule}
    exporters = PROMETHEUS_METRICS | NODE_EXPORTER_METRICS | IPMI_METRICS | DCGM_METRICS
    return exporters | VALIDATOR_METRICS | slurm_metric_names() | remediate_metric_names() | recorded


# alert rules ---------------------------------------------------------------


def test_rules_load_and_alert_names_are_unique():
    names = [rule['alert'] for rule in alerts()]
    assert len(names) == len(set(names))
    # The monitoring role's integration test waits for this alert on this metric and label.
    [validator_failed] = [rule for rule in alerts() if rule['alert'] == 'LlmforgeValidatorFailed']
    assert validator_failed['expr'] == 'llmforge_validator_healthy == 0'
    assert (validator_failed['labels']['severity'], validator_failed['for']) == ('critical', '1m')


@pytest.mark.parametrize('rule', alerts(), ids=lambda rule: rule['alert'])
def test_alert_has_severity_summary_and_description(rule):
    assert rule['labels']['severity'] in SEVERITIES
    assert set(rule['annotations']) == {'summary', 'description'}
    assert '$labels.instance' in rule['annotations']['summary']
    assert rule['annotations']['description'].strip()


@pytest.mark.parametrize('rule', rules(), ids=lambda rule: rule.get('alert') or rule['record'])
def test_rule_reads_known_metrics(rule):
    used = metric_names(rule['expr'])
    for text in rule.get('annotations', {}).values():
        for query in _TEMPLATE_QUERY.findall(text):
            used |= metric_names(query)
    assert used, rule['expr']
    assert used <= known_metrics(), f'unknown metrics {sorted(used - known_metrics())}: add them to the lists above'


def test_validator_metrics_are_documented_in_the_rules():
    text = RULES.read_text(encoding='utf-8')
    for name in VALIDATOR_METRICS:
        assert re.search(rf'(?m)^#.*\b{name}\{{', text), f'{name} and its labels are not described in the rules file header'


def test_every_alert_has_a_firing_and_a_quiet_promtool_case():
    cases = [case for test in load_yaml(RULE_TESTS)['tests'] for case in test.get('alert_rule_test', [])]
    assert load_yaml(RULE_TESTS)['rule_files'] == ['../llmforge.rules.yml']
    firing = {case['alertname'] for case in cases if case.get('exp_alerts')}
    quiet = {case['alertname'] for case in cases if not case.get('exp_alerts')}
    names = {rule['alert'] for rule in alerts()}
    assert names - firing == set(), 'alerts without a firing case'
    assert names - quiet == set(), 'alerts without a quiet case'
    assert (firing | quiet) - names == set(), 'cases for alerts that do not exist'
    for case in cases:
        for expected in case.get('exp_alerts') or []:
            assert expected['exp_labels']['severity'] in SEVERITIES and set(expected['exp_annotations']) == {'summary', 'description'}


def test_ipmi_metrics_and_their_labels_are_documented_in_the_rules():
    """The installer side (exporter module, scrape job and relabelling) reads the header to match the rules."""
    header = ''.join(re.findall(r'(?m)^#.*\n', RULES.read_text(encoding='utf-8')))
    for name in IPMI_METRICS | {'llmforge_node_power_budget_watts', 'llmforge_slurm_node_gpus_allocated'}:
        assert re.search(rf'\b{name}\b', header), f'{name} is not described in the rules file header'
    for words in ('job "ipmi"', 'bmc', 'rack', '"Power Supply"', '"Power Unit"'):
        assert words in header


# The rules file selects the scratch and checkpoint filesystems with this matcher; the template replaces it.
SHIPPED_MOUNTPOINTS = 'mountpoint=~"/scratch|/checkpoints"'


def test_shipped_mountpoint_matcher_is_the_default_and_the_templates():
    defaults = load_yaml(ROOT / 'roles' / 'monitoring' / 'defaults' / 'main.yml')
    assert SHIPPED_MOUNTPOINTS == f'mountpoint=~"{defaults["monitoring_alert_mountpoint_regex"]}"'
    template = (ROOT / 'roles' / 'monitoring' / 'templates' / 'llmforge.rules.yml.j2').read_text(encoding='utf-8')
    assert f"set shipped_mountpoints = '{SHIPPED_MOUNTPOINTS}'" in template
    rules_text = RULES.read_text(encoding='utf-8')
    # Twice in expressions and nowhere in comments, where the replacement would read oddly.
    assert rules_text.count(SHIPPED_MOUNTPOINTS) == 2
    assert all(SHIPPED_MOUNTPOINTS not in line for line in rules_text.splitlines() if line.lstrip().startswith('#'))


def render_rules(tmp_path: pathlib.Path, **variables: str) -> str:
    """The rules file as the role installs it, written to tmp_path/llmforge.rules.yml."""
    from role_render import render  # pylint: disable=import-outside-toplevel
    inventory = {'hosts': {'metrics1': {}}, 'groups': {'monitoring': ['metrics1']}}
    extra_vars = {'role_path': str(ROOT / 'roles' / 'monitoring'), **variables}
    # No task file: the template needs none of the preflight's facts.
    result = render('monitoring', 'llmforge.rules.yml.j2', inventory, tasks='absent.yml', extra_vars=extra_vars)
    assert 'error' not in result, result.get('error')
    text = result['hosts']['metrics1']
    (tmp_path / 'llmforge.rules.yml').write_text(text, encoding='utf-8')
    return text


@pytest.mark.parametrize(('variables', 'matcher'), [
    pytest.param({}, SHIPPED_MOUNTPOINTS, id='default'),
    pytest.param({'monitoring_alert_mountpoint_regex': '/scratch|/lustre/ckpt.*'},
                 'mountpoint=~"/scratch|/lustre/ckpt.*"', id='custom'),
    pytest.param({'monitoring_alert_mountpoint_regex': r'/data\.d/"x"'},
                 r'mountpoint=~"/data\\.d/\"x\""', id='escaped'),
    pytest.param({'monitoring_alert_mountpoint_regex': '/raid', 'monitoring_alert_for_override': '5s'},
                 'mountpoint=~"/raid"', id='for-override'),
])
def test_installed_rules_watch_the_configured_mountpoints(tmp_path, variables, matcher):
    text = render_rules(tmp_path, **variables)
    assert text.count(matcher) == 2
    if matcher != SHIPPED_MOUNTPOINTS:
        assert SHIPPED_MOUNTPOINTS not in text
    groups = yaml.safe_load(text)['groups']
    installed = [rule for group in groups for rule in group['rules']]
    names = [rule.get('alert') or rule['record'] for rule in installed]
    assert names == [rule.get('alert') or rule['record'] for rule in rules()]
    if 'monitoring_alert_for_override' in variables:
        assert {rule['for'] for rule in installed if 'for' in rule} == {'5s'}
    if shutil.which('promtool'):
        run_promtool('check', 'rules', 'llmforge.rules.yml', cwd=tmp_path)


def test_dcgm_metrics_are_in_the_counters_file():
    if not DCGM_COUNTERS.is_file():
        pytest.skip(f'{DCGM_COUNTERS.relative_to(ROOT)} does not exist yet')
    exported = set(re.findall(r'(?m)^(DCGM_FI_[A-Z0-9_]+)\s*,', DCGM_COUNTERS.read_text(encoding='utf-8')))
    missing = DCGM_METRICS - exported
    assert not missing, f'dcgm-exporter exports only the fields of its counters file; add {sorted(missing)} to {DCGM_COUNTERS.name}'


# dashboards ----------------------------------------------------------------


def test_there_is_a_dashboard():
    assert [path.name for path in DASHBOARDS] == ['llmforge-cluster-overview.json']


def dashboard(path: pathlib.Path) -> dict:
    return json.loads(path.read_text(encoding='utf-8'))


def all_panels(board: dict) -> list[dict]:
    """Top-level panels and the panels of collapsed rows."""
    return [panel for top in board['panels'] for panel in [top] + top.get('panels', [])]


def query_panels(board: dict) -> list[dict]:
    return [panel for panel in all_panels(board) if panel['type'] != 'row']


@pytest.mark.parametrize('path', DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_identity(path):
    board = dashboard(path)
    assert board['schemaVersion'] == 39
    assert board['uid'] == path.stem and board['title']
    ids = [panel['id'] for panel in all_panels(board)]
    assert len(ids) == len(set(ids)), 'panel ids repeat'


@pytest.mark.parametrize('path', DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_panels_query_prometheus(path):
    for panel in query_panels(dashboard(path)):
        assert panel['datasource']['uid'] in DATASOURCE_UIDS, panel['title']
        assert panel['targets'], panel['title']
        ref_ids = [target['refId'] for target in panel['targets']]
        assert len(ref_ids) == len(set(ref_ids)), panel['title']
        for target in panel['targets']:
            assert target['expr'].strip(), panel['title']
            assert target.get('datasource', panel['datasource'])['uid'] in DATASOURCE_UIDS, panel['title']


@pytest.mark.parametrize('path', DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_reads_known_metrics(path):
    board = dashboard(path)
    exprs = [target['expr'] for panel in query_panels(board) for target in panel['targets']]
    exprs += [_LABEL_VALUES.fullmatch(variable['definition']).group(1) for variable in board['templating']['list']]
    for expr in exprs:
        used = metric_names(expr)
        assert used, expr
        assert used <= known_metrics(), f'unknown metrics {sorted(used - known_metrics())} in {expr}'


@pytest.mark.parametrize('path', DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_panels_do_not_overlap(path):
    boxes = [(panel['title'], panel['gridPos']) for panel in all_panels(dashboard(path))]
    for (title, box), (other_title, other) in itertools.combinations(boxes, 2):
        apart = (box['x'] + box['w'] <= other['x'] or other['x'] + other['w'] <= box['x']
                 or box['y'] + box['h'] <= other['y'] or other['y'] + other['h'] <= box['y'])
        assert apart, f'{title!r} overlaps {other_title!r}'
    assert all(box['x'] + box['w'] <= 24 for title, box in boxes)


# promtool, where installed -------------------------------------------------


def promtool() -> str:
    found = shutil.which('promtool')
    if not found:
        pytest.skip('promtool is not installed (Debian package prometheus); see roles/monitoring/files/alerts/tests')
    return found


def run_promtool(*args: str, cwd: pathlib.Path) -> None:
    result = subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_checks_and_tests_the_rules():
    run_promtool('check', 'rules', RULES.name, cwd=ALERTS)
    run_promtool('test', 'rules', str(RULE_TESTS.relative_to(ALERTS)), cwd=ALERTS)


def test_promtool_parses_dashboard_queries(tmp_path):
    """Each dashboard query, with Grafana's variables filled in, as a recording rule that promtool must parse."""
    exprs = [target['expr'] for path in DASHBOARDS for panel in query_panels(dashboard(path)) for target in panel['targets']]
    recorded = [{'record': f'dashboard:query_{number}', 'expr': expr.replace('$__rate_interval', '5m')} for number, expr in enumerate(exprs)]
    (tmp_path / 'dashboards.rules.yml').write_text(yaml.safe_dump({'groups': [{'name': 'dashboards', 'rules': recorded}]}), encoding='utf-8')
    run_promtool('check', 'rules', 'dashboards.rules.yml', cwd=tmp_path)


# Job "ipmi": one target per host with bmc_address, labelled as the alert rules expect (see the rules' header).
IPMI_INVENTORY = {
    'hosts': {
        'mon1': {'ansible_host': '10.0.0.10', 'monitoring_bind_address': '10.0.0.10'},
        'gpu1': {'ansible_host': '10.0.0.11', 'bmc_address': '10.1.0.11', 'rack': 'r07'},
        'gpu2': {'ansible_host': '10.0.0.12'},
    },
    'groups': {'cluster': ['mon1', 'gpu1', 'gpu2'], 'monitoring': ['mon1'], 'gpu_nodes': ['gpu1', 'gpu2']},
}
IPMI_VARS = {'monitoring_ipmi': True, 'monitoring_ipmi_username': 'bmc-reader',
             'monitoring_ipmi_password': 'Zq8vL2mN5xT7kR4w', 'monitoring_web_users': [
                 {'name': 'prometheus', 'password': 'Kx7vQ2mZ9wLp4Rt8Nc3B'}],
             'monitoring_address': '{{ ansible_host }}'}


def render_monitoring(template: str, **extra: t.Any) -> str:
    from role_render import render  # pylint: disable=import-outside-toplevel
    result = render('monitoring', template, IPMI_INVENTORY, tasks='absent.yml', render_hosts=['mon1'],
                    extra_vars={'role_path': str(ROOT / 'roles' / 'monitoring'), **IPMI_VARS, **extra})
    assert 'error' not in result, result.get('error')
    return result['hosts']['mon1']


@pytest.mark.parametrize('job', ['ipmi', 'node'])
def test_file_sd_targets_carry_rack_and_the_ipmi_job_targets_bmcs(job):
    port = {'ipmi': '', 'node': 9100}[job]
    hosts = {'ipmi': ['gpu1'], 'node': ['mon1', 'gpu1', 'gpu2']}[job]
    groups = yaml.safe_load(render_monitoring('file_sd.yml.j2', item={'name': job, 'hosts': hosts, 'port': port}))
    if job == 'ipmi':
        assert groups == [{'targets': ['10.1.0.11'], 'labels': {
            'cluster': 'llmforge', 'role': 'gpu_nodes', 'instance': 'gpu1', 'rack': 'r07', 'bmc': '10.1.0.11'}}]
    else:
        assert {g['labels']['instance']: (g['targets'], g['labels']['rack']) for g in groups} == {
            'mon1': (['10.0.0.10:9100'], ''), 'gpu1': (['10.0.0.11:9100'], 'r07'), 'gpu2': (['10.0.0.12:9100'], '')}


def test_prometheus_probes_bmcs_through_the_local_exporter():
    config = yaml.safe_load(render_monitoring('prometheus.yml.j2'))
    jobs = {job['job_name']: job for job in config['scrape_configs']}
    ipmi = jobs['ipmi']
    assert ipmi['metrics_path'] == '/ipmi' and ipmi['params'] == {'module': ['default']}
    assert ipmi['relabel_configs'] == [
        {'source_labels': ['__address__'], 'target_label': '__param_target'},
        {'target_label': '__address__', 'replacement': '127.0.0.1:9290'}]
    assert 'relabel_configs' not in jobs['node']
    without = yaml.safe_load(render_monitoring('prometheus.yml.j2', monitoring_ipmi=False))
    assert 'ipmi' not in {job['job_name'] for job in without['scrape_configs']}


def test_ipmi_exporter_module_holds_the_login_and_collectors():
    text = render_monitoring('ipmi_exporter.yml.j2', monitoring_ipmi_exclude_sensor_ids=[12, '40'])
    assert yaml.safe_load(text)['modules'] == {'default': {
        'user': 'bmc-reader', 'pass': 'Zq8vL2mN5xT7kR4w', 'driver': 'LAN_2_0', 'privilege': 'user',
        'timeout': 10000, 'collectors': ['ipmi', 'dcmi'], 'workaround_flags': [], 'exclude_sensor_ids': [12, 40]}}
