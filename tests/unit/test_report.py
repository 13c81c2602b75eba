# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster validation report: its JSON, JUnit XML and HTML page, built from real validator results."""

from __future__ import annotations

import copy
import html.parser
import importlib.util
import json
import os
import pathlib
import subprocess
import typing as t
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.filter import report as report_filters
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu
from ansible_collections.llmforge.cluster.plugins.module_utils import _rdma_links as rdma
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / 'fixtures'
HGX = FIXTURES / 'gpu' / 'hgx-h200-8'
HOSTILE = FIXTURES / 'report' / 'hostile_result.json'
NDR = {'devices': r'^mlx5_(?!bond)', 'hca_count': 8, 'link_layer': 'InfiniBand', 'rate_gbps': 400,
       'require_sm': True, 'require_netdev': True}
WHEN = '2026-11-30T01:00:00Z'

_spec = importlib.util.spec_from_file_location('make_sysfs_trees', FIXTURES / 'rdma' / 'make_sysfs_trees.py')
builder = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(builder)


def gpu_result(topo_file: str) -> dict[str, t.Any]:
    facts = gpu.parse_smi_xml((HGX / 'smi_q.xml').read_text(encoding='utf-8'))
    topo = gpu.parse_topo_matrix((HGX / topo_file).read_text(encoding='utf-8'))
    return gpu.evaluate(facts, topo, gpu.resolve_expectation('h200-sxm-8', None))


@pytest.fixture(scope='module')
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, t.Any]]:
    """gpu10 healthy; gpu2 with one NV12 pair and mlx5_3 down (natural order puts gpu2 first)."""
    root = tmp_path_factory.mktemp('sysfs')
    healthy_tree = builder.build('ndr8_healthy', root / 'healthy')
    down_tree = builder.build('ndr8_port_down', root / 'down')
    return {
        'gpu10': {'gpu_topology': gpu_result('topo_m.txt'), 'rdma_links': rdma.evaluate(str(healthy_tree), NDR)},
        'gpu2': {'rdma_links': rdma.evaluate(str(down_tree), NDR), 'gpu_topology': gpu_result('topo_m_nv12.txt')},
    }


@pytest.fixture(scope='module')
def report(results) -> dict[str, t.Any]:
    return rep.build_report(results, 'hgx<prod>', WHEN)


def hostile() -> dict[str, t.Any]:
    return json.loads(HOSTILE.read_text(encoding='utf-8'))


# --- a tiny DOM from html.parser, enough to ask what a person sees ---------------------------------

VOID = {'meta', 'br', 'hr', 'img', 'input', 'link'}


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: t.Optional['Element']):
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []
        self.parts: list[t.Any] = []

    @property
    def classes(self) -> set[str]:
        return set((self.attrs.get('class') or '').split())

    def text(self) -> str:
        return ' '.join(' '.join(p.text() if isinstance(p, Element) else p for p in self.parts).split())

    def walk(self) -> t.Iterator['Element']:
        for child in self.children:
            yield child
            yield from child.walk()

    def find_all(self, tag: str, cls: t.Optional[str] = None, **attrs: str) -> list['Element']:
        return [el for el in self.walk() if el.tag == tag and (cls is None or cls in el.classes)
                and all(el.attrs.get(key.replace('_', '-')) == value for key, value in attrs.items())]

    def find(self, tag: str, cls: t.Optional[str] = None, **attrs: str) -> 'Element':
        found = self.find_all(tag, cls, **attrs)
        assert len(found) == 1, (tag, cls, attrs, len(found))
        return found[0]


class Dom(html.parser.HTMLParser):
    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.root = self.current = Element('#document', {}, None)
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = Element(tag, {k: v or '' for k, v in attrs}, self.current)
        self.current.children.append(element)
        self.current.parts.append(element)
        if tag not in VOID:
            self.current = element

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None, f'</{tag}> closes nothing'
        self.current = node.parent

    def handle_data(self, data):
        self.current.parts.append(data)


# --- the report ------------------------------------------------------------------------------------

def test_summary_counts(report, results):
    summary = report['summary']
    assert (summary['nodes'], summary['healthy_nodes'], summary['failing_nodes']) == (2, 1, 1)
    assert summary['failing'] == ['gpu2'] and summary['healthy'] is False
    assert summary['validators'] == ['gpu_topology', 'rdma_links']
    every = [c for node in results.values() for result in node.values() for c in result['checks']]
    for status in ('pass', 'fail', 'warn', 'skip'):
        assert summary['checks'][status] == sum(1 for c in every if c['status'] == status)
    assert summary['checks']['total'] == len(every)
    assert summary['checks']['fail'] >= 2
    assert sum(v['total'] for v in summary['by_validator'].values()) == len(every)


def test_nodes_and_checks_ordering(report):
    assert [node['name'] for node in report['nodes']] == ['gpu2', 'gpu10']
    bad, good = report['nodes']
    assert bad['healthy'] is False and good['healthy'] is True
    assert bad['validators']['gpu_topology']['healthy'] is False and bad['validators']['rdma_links']['healthy'] is False
    statuses = [c['status'] for c in bad['checks']]
    assert statuses == sorted(statuses, key=rep.STATUSES.index)
    failing = [(c['validator'], c['name']) for c in bad['checks'] if c['status'] == 'fail']
    assert ('gpu_topology', 'nvlink') in failing
    assert {v for v, n in failing} == {'gpu_topology', 'rdma_links'}
    assert failing == sorted(failing, key=lambda pair: pair[0])
    assert all(set(c) == {'validator', 'name', 'status', 'subject', 'expected', 'actual', 'message'} for c in bad['checks'])
    assert good['topology']['devices'][:9] == [f'GPU{i}' for i in range(8)] + ['NIC0']
    assert good['topology']['nics']['NIC0'] == 'mlx5_0'


def test_building_is_deterministic_and_leaves_input_alone(results):
    before = copy.deepcopy(results)
    reordered = {node: dict(reversed(list(v.items()))) for node, v in reversed(list(results.items()))}
    first = rep.render_json(rep.build_report(results, 'c', WHEN))
    assert first == rep.render_json(rep.build_report(reordered, 'c', WHEN))
    assert results == before


def test_json_is_sorted_and_round_trips(report):
    text = rep.render_json(report)
    assert text.endswith('}\n') and text.startswith('{\n    "cluster": "hgx<prod>"')
    assert json.loads(text) == report


def test_json_is_what_to_nice_json_writes(report):
    """report.json keeps the bytes validate.yml wrote with `to_nice_json`, non-ASCII text included."""
    core = pytest.importorskip('ansible.plugins.filter.core')
    accented = rep.build_report({'gpu\u00e9': {'rdma_links': {'checks': [
        {'name': 'rate', 'status': 'fail', 'subject': 'mlx5_0/1', 'expected': 400, 'actual': 200.5,
         'message': 'rate 200.5 \u2264 400 Gb/s'}], 'healthy': False}}}, 'caf\u00e9', WHEN)
    for built in (report, accented):
        assert rep.render_json(built) == core.to_nice_json(built) + '\n'


def test_failed_task_without_checks_is_a_failing_node():
    report = rep.build_report({'n1': {'rdma_links': {'failed': True, 'msg': 'ssh: no route'}},
                               'n2': {'rdma_links': {'skipped': True}}}, 'c', WHEN)
    first, second = report['nodes']
    assert first['healthy'] is False and first['checks'][0]['message'] == 'ssh: no route'
    assert second['healthy'] is True and second['checks'][0]['status'] == 'skip'


def _strict(constant: str) -> None:
    raise ValueError(f'{constant} is not JSON')


def test_non_finite_values_are_text_so_the_json_stays_json():
    checks = [{'name': 'busbw', 'status': 'fail', 'subject': 'node', 'expected': float('inf'),
               'actual': float('nan'), 'message': 'busbw nan is not a finite number'}]
    report = rep.build_report({'n1': {'nccl': {'checks': checks, 'healthy': False, 'busbw': [float('-inf')]}}}, 'c',
                              WHEN)
    parsed = json.loads(rep.render_json(report), parse_constant=_strict)
    check = parsed['nodes'][0]['checks'][0]
    assert (check['expected'], check['actual']) == ('inf', 'nan') and parsed['nodes'][0]['healthy'] is False


def test_reported_unhealthy_without_failing_check_counts_as_failing():
    result = {'checks': [{'name': 'x', 'status': 'pass', 'subject': 'node', 'expected': 1, 'actual': 1, 'message': ''}],
              'healthy': False}
    assert rep.build_report({'n1': {'v': result}}, 'c', WHEN)['summary']['failing'] == ['n1']


@pytest.mark.parametrize('results, fragments', [
    ([], ['results must be a mapping']),
    ({'gpu7': []}, ["node 'gpu7'"]),
    ({'gpu7': {}}, ["node 'gpu7'"]),
    ({'gpu7': {'rdma_links': 'oops'}}, ["node 'gpu7'", "validator 'rdma_links'", 'must be a mapping']),
    ({'gpu7': {'rdma_links': {'healthy': True}}}, ["node 'gpu7'", "validator 'rdma_links'", 'no checks']),
    ({'gpu7': {'rdma_links': {'checks': 'x'}}}, ["node 'gpu7'", 'checks must be a list']),
    ({'gpu7': {'rdma_links': {'checks': [{'name': 'mtu'}]}}}, ["node 'gpu7'", 'checks[0]', 'no status']),
    ({'gpu7': {'rdma_links': {'checks': [{'name': 'mtu', 'status': 'ok'}]}}}, ["node 'gpu7'", 'checks[0].status', "'ok'"]),
    ({'gpu7': {'rdma_links': {'checks': [{'name': 'mtu', 'status': 'pass', 'subject': 3}]}}}, ["node 'gpu7'", 'checks[0].subject']),
    ({'gpu7': {'rdma_links': {'checks': [], 'healthy': 'yes'}}}, ["node 'gpu7'", 'healthy must be true or false']),
    ({'gpu7': {'gpu_topology': {'checks': [], 'topology': {'GPU0': 'NV18'}}}}, ["node 'gpu7'", 'topology.GPU0']),
    ({'': {'v': {'checks': []}}}, ['node names must be non-empty strings']),
])
def test_malformed_input_is_named(results, fragments):
    with pytest.raises(rep.ReportError) as caught:
        rep.build_report(results, 'c', WHEN)
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert isinstance(caught.value, ValueError)


# --- JUnit -----------------------------------------------------------------------------------------

def test_junit_parses_and_counts_match(report):
    root = ET.fromstring(rep.render_junit(report))
    assert root.tag == 'testsuites'
    suites = root.findall('testsuite')
    assert [s.get('name') for s in suites] == ['llmforge.gpu_topology', 'llmforge.rdma_links']
    for suite in suites:
        cases = suite.findall('testcase')
        assert int(suite.get('tests')) == len(cases)
        assert int(suite.get('failures')) == sum(1 for c in cases if c.find('failure') is not None)
        assert int(suite.get('skipped')) == sum(1 for c in cases if c.find('skipped') is not None)
        assert {c.get('classname') for c in cases} == {'gpu2', 'gpu10'}
    counts = report['summary']['checks']
    assert (int(root.get('tests')), int(root.get('failures')), int(root.get('skipped'))) == (
        counts['total'], counts['fail'], counts['skip'])
    nv = [c for c in root.iter('testcase') if c.get('classname') == 'gpu2' and c.find('failure') is not None
          and c.get('name').startswith('nvlink ')]
    assert nv and 'expected: ' in nv[0].find('failure').text and nv[0].find('failure').get('message')


def test_junit_escapes_and_warns():
    root = ET.fromstring(rep.render_junit(rep.build_report({'n<1>&': hostile()}, 'c"&', WHEN)))
    cases = list(root.iter('testcase'))
    names = {c.get('name') for c in cases}
    assert 'script <script>alert("x")</script>' in names
    assert all(c.get('classname') == 'n<1>&' for c in cases)
    warn = next(c for c in cases if c.find('system-out') is not None)
    assert warn.find('failure') is None and 'WARNING: ' in warn.find('system-out').text
    assert any('\ufffd' in (c.find('failure').get('message') if c.find('failure') is not None else '') for c in cases)


# --- HTML ------------------------------------------------------------------------------------------

@pytest.fixture(scope='module')
def page(report) -> str:
    return rep.render_html(report)


def test_html_title_and_summary(page):
    dom = Dom(page).root
    assert dom.find('title').text() == f'Cluster validation: hgx<prod> ({WHEN})'
    assert 'hgx<prod>' in dom.find('h1').text()
    summary = dom.find('section', id='summary')
    assert '1 of 2 nodes healthy' in summary.text()
    cards = {el.find('span', 'label').text(): el.find('span', 'value').text() for el in summary.find_all('div', 'card')}
    assert cards['nodes'] == '2' and cards['healthy nodes'] == '1' and cards['failing nodes'] == '1'


def test_html_node_rows(page):
    nodes = Dom(page).root.find('section', id='nodes')
    bad = nodes.find('tr', 'node', data_node='gpu2')
    good = nodes.find('tr', 'node', data_node='gpu10')
    assert 'fail' in bad.classes and 'pass' not in bad.classes and 'FAILING' in bad.text()
    assert 'pass' in good.classes and 'healthy' in good.text()
    assert [row.attrs['data-node'] for row in nodes.find_all('tr', 'node')] == ['gpu2', 'gpu10']


def test_html_failures_show_expected_and_actual(page, report):
    failures = Dom(page).root.find('section', id='failures')
    rows = failures.find_all('tr', 'fail')
    assert len(rows) == report['summary']['checks']['fail']
    assert {row.attrs['data-node'] for row in rows} == {'gpu2'}
    nv = [row for row in rows if row.find_all('td')[2].text() == 'nvlink']
    assert nv
    check = next(c for c in report['nodes'][0]['checks'] if c['name'] == 'nvlink' and c['status'] == 'fail')
    assert nv[0].find('td', 'expected').text() == rep.value_text(check['expected'])
    assert nv[0].find('td', 'actual').text() == rep.value_text(check['actual'])
    assert 'mlx5_3' in failures.text()


def test_html_topology_grid(page):
    dom = Dom(page).root
    sections = dom.find_all('section', 'topology')
    assert [s.attrs['data-node'] for s in sections] == ['gpu2', 'gpu10']
    for section in sections:
        cells = section.find_all('td', 'rel')
        gpu_cells = [c for c in cells if c.attrs['data-row'].startswith('GPU') and c.attrs['data-col'].startswith('GPU')]
        assert len(gpu_cells) == 64
        assert len(cells) == 18 * 18
        assert all('self' in c.classes and c.text() == 'X' for c in cells if c.attrs['data-row'] == c.attrs['data-col'])
        assert any('sys' in c.classes and c.text() == 'SYS' for c in cells)
        assert any('pix' in c.classes and c.text() == 'PIX' for c in cells)
        assert all('mlx5_0' in th.text() for th in section.find_all('th', data_device='NIC0'))
        legend = section.find('ul', 'legend')
        assert {k for li in legend.find_all('span', 'rel') for k in li.classes} >= set(rep.RELATIONS)
    healthy = [c for c in sections[1].find_all('td', 'rel') if c.attrs['data-row'].startswith('GPU')
               and c.attrs['data-col'].startswith('GPU') and c.attrs['data-row'] != c.attrs['data-col']]
    assert len(healthy) == 56 and all(c.text() == 'NV18' and 'nv' in c.classes for c in healthy)
    degraded = sections[0].find('td', 'rel', data_row='GPU2', data_col='GPU5')
    assert degraded.text() == 'NV12' and 'nv' in degraded.classes
    # The failing nvlink check's cells are outlined, both ways; nothing else is.
    outlined = sorted((c.attrs['data-row'], c.attrs['data-col']) for s in sections for c in s.find_all('td', 'rel') if 'bad' in c.classes)
    assert outlined == [('GPU2', 'GPU5'), ('GPU5', 'GPU2')]


def test_html_is_self_contained(page):
    lowered = page.lower()
    assert '<script' not in lowered and 'http://' not in lowered and 'https://' not in lowered
    assert '<link' not in lowered and ' src=' not in lowered and '<style>' in lowered


def test_html_escapes_everything():
    page = rep.render_html(rep.build_report({'n<1>&': hostile()}, '<b>c</b>', WHEN))
    lowered = page.lower()
    assert '<script' not in lowered and 'http://' not in lowered and 'https://' not in lowered and '<b>' not in page
    assert '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;' in page
    dom = Dom(page).root
    failures = dom.find('section', id='failures')
    assert '<script>alert("x")</script>' in failures.text()
    assert dom.find('tr', 'node', data_node='n<1>&')
    assert dom.find('section', 'topology', data_node='n<1>&').find('td', 'rel', data_row='GPU0', data_col='GPU1').text() == '<NV4>'
    assert dom.find('section', id='warnings').find_all('tr', 'warn')


def test_empty_cluster_renders():
    report = rep.build_report({}, 'empty', WHEN)
    assert report['summary']['nodes'] == 0 and report['summary']['healthy'] is True
    assert '0 of 0 nodes healthy' in Dom(rep.render_html(report)).root.find('section', id='summary').text()
    assert ET.fromstring(rep.render_junit(report)).get('tests') == '0'


@pytest.mark.skipif(not os.path.exists('/usr/bin/chromium'), reason='/usr/bin/chromium is not installed (absent on CI)')
def test_html_screenshot(report, tmp_path):
    page = tmp_path / 'report.html'
    page.write_text(rep.render_html(report), encoding='utf-8')
    shot = tmp_path / 'r.png'
    subprocess.run(['/usr/bin/chromium', '--headless', '--no-sandbox', '--disable-gpu', f'--screenshot={shot}',
                    '--window-size=1280,2000', page.as_uri()],
                   check=True, timeout=120, capture_output=True)
    assert shot.exists() and shot.stat().st_size > 10 * 1024


# --- files -----------------------------------------------------------------------------------------

def test_report_files_are_the_three_renderings(report):
    files = rep.report_files(report)
    assert [item['name'] for item in files] == ['report.json', 'junit.xml', 'report.html']
    content = {item['name']: item['content'] for item in files}
    assert json.loads(content['report.json']) == report and content['report.json'] == rep.render_json(report)
    assert ET.fromstring(content['junit.xml']).get('tests') == str(report['summary']['checks']['total'])
    assert content['report.html'] == rep.render_html(report)
    with pytest.raises(rep.ReportError, match='expected a report made by build_report'):
        rep.report_files({'nodes': []})


# --- collecting ------------------------------------------------------------------------------------

def test_collect_results_adds_stage_verdicts_after_the_node_validators(results):
    gpu1 = results['gpu10']
    nccl = {'checks': [], 'healthy': True}
    collected = rep.collect_results(
        {'gpu1': dict(gpu1), 'gpu9': {'gpu_topology': None, 'rdma_links': None}},
        {'nccl_tests': {'gpu1': nccl}, 'training': {}})
    assert list(collected) == ['gpu1', 'gpu9']
    assert list(collected['gpu1']) == list(gpu1) + ['nccl_tests'] and collected['gpu1']['nccl_tests'] is nccl
    assert collected['gpu9'] == {'gpu_topology': rep.UNREACHABLE, 'rdma_links': rep.UNREACHABLE}
    assert collected['gpu9']['gpu_topology'] is not rep.UNREACHABLE
    built = rep.build_report(collected, 'c', WHEN)
    unreachable = next(node for node in built['nodes'] if node['name'] == 'gpu9')
    assert not unreachable['healthy'] and {c['message'] for c in unreachable['checks']} == {'host unreachable'}
    assert rep.collect_results({'n': {'rdma_links': None}}) == {'n': {'rdma_links': rep.UNREACHABLE}}


@pytest.mark.parametrize('registered, verdicts, message', [
    (['gpu1'], None, 'registered must map'),
    ({'gpu1': 'text'}, None, "node 'gpu1'"),
    ({'gpu1': {}}, {'nccl_tests': ['gpu1']}, 'verdicts must map'),
])
def test_collect_results_rejects(registered, verdicts, message):
    with pytest.raises(rep.ReportError, match=message):
        rep.collect_results(registered, verdicts)


# --- filters ---------------------------------------------------------------------------------------

def test_filters(results):
    filters = report_filters.FilterModule().filters()
    assert set(filters) == {'llmforge_report', 'report_junit', 'report_html', 'report_files', 'validator_results'}
    report = filters['llmforge_report'](results, 'c', WHEN)
    assert report == rep.build_report(results, 'c', WHEN)
    assert filters['report_junit'](report) == rep.render_junit(report)
    assert filters['report_html'](report) == rep.render_html(report)
    assert filters['report_files'](report) == rep.report_files(report)


def test_validator_results_reads_the_registered_results_from_hostvars(results):
    kernel = {'checks': [], 'healthy': True, 'events': []}
    hostvars = {
        'gpu1': {'__validate_gpu_topology': results['gpu10']['gpu_topology'],
                 '__validate_rdma_links': results['gpu10']['rdma_links'], '__validate_kernel_faults': kernel,
                 'gpu_count': 8},
        'gpu2': {'__validate_rdma_links': results['gpu10']['rdma_links']},
    }
    training = {'checks': [], 'healthy': True}
    collected = report_filters.validator_results(['gpu1', 'gpu2'], hostvars, {'training': {'gpu2': training}})
    assert collected['gpu1'] == {'gpu_topology': results['gpu10']['gpu_topology'],
                                 'rdma_links': results['gpu10']['rdma_links'], 'kernel_faults': kernel}
    assert collected['gpu2'] == {'gpu_topology': rep.UNREACHABLE, 'rdma_links': results['gpu10']['rdma_links'],
                                 'kernel_faults': rep.UNREACHABLE, 'training': training}
    assert report_filters.validator_results([], hostvars) == {}
    with pytest.raises(AnsibleFilterError, match='^validator_results: verdicts'):
        report_filters.validator_results(['gpu1'], hostvars, {'training': 'x'})


def test_filter_errors_name_the_filter_and_node():
    filters = report_filters.FilterModule().filters()
    with pytest.raises(AnsibleFilterError, match=r"^llmforge_report: node 'gpu7'"):
        filters['llmforge_report']({'gpu7': {'rdma_links': {}}}, 'c', WHEN)
    with pytest.raises(AnsibleFilterError, match='^report_html: '):
        filters['report_html']({'nodes': []})
    with pytest.raises(AnsibleFilterError, match='^report_junit: '):
        filters['report_junit']('text')
    with pytest.raises(AnsibleFilterError, match='^report_files: '):
        filters['report_files']({})


def test_relation_kinds():
    assert rep.relation_kind('NV18') == 'nv' and rep.relation_kind(' X ') == 'self' and rep.relation_kind('??') == 'other'


def test_failing_gpu_nic_affinity_outlines_the_cell_under_the_nic_label():
    node = {'checks': [
        {'name': 'gpu_nic_affinity', 'status': 'fail', 'subject': 'GPU3-mlx5_3'},
        {'name': 'gpu_nic_affinity', 'status': 'pass', 'subject': 'GPU4-mlx5_4'},
        {'name': 'nvlink', 'status': 'fail', 'subject': 'node'},
        {'name': 'pcie_width', 'status': 'fail', 'subject': 'GPU0'},
    ]}
    assert rep._failing_pairs(node, {'NIC3': 'mlx5_3', 'NIC4': 'mlx5_4'}) == {frozenset({'GPU3', 'NIC3'})}  # pylint: disable=protected-access


# --- HTML of a cluster larger than FULL_PAGE_NODES -------------------------------------------------------

def fleet(results, size: int, failing=(), unreachable=(), busy=()) -> dict[str, t.Any]:
    """A report of `size` nodes gpu01..: the fixture's healthy gpu10 everywhere, its failing gpu2 on `failing`."""
    why = 'not validated: busy in Slurm (MIXED); its jobs are not waited for'
    nodes = {}
    for index in range(1, size + 1):
        name = f'gpu{index:02d}'
        if name in busy:
            nodes[name] = {v: {'skipped': True, 'skip_reason': why} for v in results['gpu10']}
        elif name in unreachable:
            nodes[name] = {v: dict(rep.UNREACHABLE) for v in results['gpu10']}
        else:
            nodes[name] = results['gpu2' if name in failing else 'gpu10']
    return rep.build_report(nodes, 'fleet', WHEN)


def test_html_of_a_small_cluster_lists_failing_nodes_first_and_shows_everything(results):
    built = fleet(results, 5, failing=['gpu04'], busy=['gpu02'])
    dom = Dom(rep.render_html(built)).root
    sections = [el.attrs.get('id') for el in dom.find('main').children]
    assert sections[:4] == ['summary', 'nodes', 'failures', 'warnings']
    rows = dom.find('section', id='nodes').find_all('tr', 'node')
    assert [(row.attrs['data-node'], row.find('td', 'status').text()) for row in rows] == [
        ('gpu04', 'FAILING'), ('gpu02', 'not validated'), ('gpu01', 'healthy'), ('gpu03', 'healthy'), ('gpu05', 'healthy')]
    assert not dom.find_all('details')
    assert [s.attrs['data-node'] for s in dom.find_all('section', 'topology')] == ['gpu01', 'gpu03', 'gpu04', 'gpu05']
    summary = dom.find('section', id='summary')
    assert summary.find('p', 'verdict').text() == '3 of 5 nodes healthy \u2014 failing: gpu04 \u2014 not validated: gpu02'
    cards = {el.find('span', 'label').text(): el.find('span', 'value').text() for el in summary.find_all('div', 'card')}
    assert (cards['healthy nodes'], cards['failing nodes'], cards['not validated']) == ('3', '1', '1')
    reasons = summary.find('table', 'by-reason').find_all('tr')[1:]
    assert [[td.text() for td in row.find_all('td')] for row in reasons] == [
        ['not validated: busy in Slurm (MIXED); its jobs are not waited for', '1', 'gpu02']]


def test_html_of_a_large_cluster_collapses_the_healthy_nodes(results):
    failing, unreachable, busy = ['gpu07', 'gpu30', 'gpu31'], ['gpu50'], ['gpu60', 'gpu61', 'gpu62']
    built = fleet(results, rep.FULL_PAGE_NODES + 6, failing, unreachable, busy)
    text = rep.render_html(built)
    dom = Dom(text).root
    assert [el.attrs.get('id') for el in dom.find('main').children][:2] == ['summary', 'nodes']
    # The summary: failing checks grouped by check, the nodes of each as a hostlist.
    summary = dom.find('section', id='summary')
    assert summary.find('p', 'verdict').text() == (
        '63 of 70 nodes healthy \u2014 failing: gpu07, gpu30, gpu31, gpu50 \u2014 not validated: gpu60, gpu61, gpu62')
    grouped = {(row.attrs['data-validator'], row.attrs['data-check']): [td.text() for td in row.find_all('td')]
               for row in summary.find('table', 'by-check').find_all('tr') if 'data-check' in row.attrs}
    nvlink = grouped[('gpu_topology', 'nvlink')]
    assert nvlink[2:4] == ['3', 'gpu[07,30-31]'] and nvlink[5].startswith('gpu07 ')
    assert grouped[('rdma_links', 'run')][2:4] == ['1', 'gpu50']
    # The nodes: failing ones in the table, the others collapsed, one line each.
    nodes = dom.find('section', id='nodes')
    table = nodes.find('table', 'nodes')
    assert [row.attrs['data-node'] for row in table.find_all('tr', 'node')] == failing + unreachable
    healthy = nodes.find('details', id='healthy-nodes')
    assert 'open' not in healthy.attrs
    assert healthy.find('summary').text() == '63 healthy nodes: gpu[01-06,08-29,32-49,51-59,63-70]'
    rows = healthy.find_all('tr', 'node')
    counts = built['nodes'][0]['counts']
    assert len(rows) == 63 and all(len(row.find_all('td')) == 2 for row in rows)
    assert rows[0].find_all('td')[1].text() == f"{counts['pass']} checks passed, {counts['skip']} skipped"
    unvalidated = nodes.find('details', id='unvalidated-nodes')
    assert [row.attrs['data-node'] for row in unvalidated.find_all('tr', 'node')] == busy
    assert all('skip' in row.classes and 'busy in Slurm' in row.text() for row in unvalidated.find_all('tr', 'node'))
    # Every failing check, and the topology matrices of the failing nodes only.
    failures = dom.find('section', id='failures')
    assert len(failures.find_all('tr', 'fail')) == built['summary']['checks']['fail']
    assert not failures.find_all('p', 'more')
    assert [s.attrs['data-node'] for s in dom.find_all('section', 'topology')] == failing
    assert 'not shown here' in dom.find('section', id='topologies').find('p', 'more').text()
    # A passing check of a healthy node is not in the page.
    assert text.count('data-node="gpu01"') == 1


def test_html_of_a_large_cluster_names_the_failing_nodes_past_the_detail_limit(results, monkeypatch):
    built = fleet(results, rep.FULL_PAGE_NODES + 1, failing=[f'gpu{i:02d}' for i in range(10, 20)])
    per_node = built['nodes'][9]['counts']['fail']
    monkeypatch.setattr(rep, 'MAX_DETAIL_ROWS', 3 * per_node)
    monkeypatch.setattr(rep, 'MAX_TOPOLOGY_GRIDS', 2)
    dom = Dom(rep.render_html(built)).root
    failures = dom.find('section', id='failures')
    assert failures.find('h2').text() == f'Failing checks ({10 * per_node})'
    assert {row.attrs['data-node'] for row in failures.find_all('tr', 'fail')} == {'gpu10', 'gpu11', 'gpu12'}
    more = failures.find('p', 'more').text()
    assert '7 more nodes' in more and f'({7 * per_node} checks)' in more and 'gpu[13-19]' in more
    assert len(dom.find_all('section', 'topology')) == 2
    # The summary still counts every one.
    assert dom.find('section', id='summary').find('table', 'by-check').find('tr', data_check='nvlink').find_all('td')[2].text() == '10'


def test_html_of_a_large_cluster_collapses_a_long_stage_table():
    nodes = {f'n{index}': {'training': {'checks': [{'name': 'tokens', 'status': 'pass', 'subject': f'n{index}'}]}}
             for index in range(rep.FULL_PAGE_NODES + 1)}
    stage = {'title': 'Training', 'checks': [{'name': 'tokens', 'status': 'pass', 'subject': f'n{index}'}
                                             for index in range(rep.FULL_PAGE_NODES + 1)]
             + [{'name': 'run', 'status': 'fail', 'subject': 'all-nodes', 'message': 'rc 1'}],
             'healthy': False, 'nodes': {name: {'ok': True} for name in nodes}}
    built = rep.build_report(nodes, 'c', WHEN, {'training': stage})
    dom = Dom(rep.render_html(built)).root
    section = dom.find('section', 'stage', data_stage='training')
    assert section.find('details', 'stage-nodes').find('summary').text() == f'{rep.FULL_PAGE_NODES + 1} nodes'
    assert len(section.find('details', 'stage-nodes').find_all('tr', data_node='n0')) == 1
    listed = section.find_all('table', 'stage-checks')[0]  # the second, collapsed, holds the passing checks
    assert [row.find_all('td')[1].text() for row in listed.find_all('tr', 'fail')] == ['run'] and not listed.find_all('tr', 'pass')
    assert len(section.find('details', 'stage-checks').find_all('tr', 'pass')) == rep.FULL_PAGE_NODES + 1
    stages = dom.find('ul', 'stages')
    assert stages.find('li', 'fail').find('a', href='#stage-training').text() == 'Training' and 'FAILED' in stages.text()


def test_html_of_a_large_cluster_escapes_names_a_hostlist_cannot_hold():
    names = [f'n<{index}>&' for index in range(rep.FULL_PAGE_NODES)] + ['<script>x</script>,y', 'a b']
    given = {}
    for name in names:
        status = 'fail' if ',' in name or ' ' in name else 'pass'
        check = {'name': '<b>c</b>', 'status': status, 'subject': '"s"', 'message': '<i>m</i>'}
        given[name] = {'rdma_links': {'checks': [check]}}
    text = rep.render_html(rep.build_report(given, 'c', WHEN))
    assert '<script' not in text.lower() and '<b>' not in text and '<i>' not in text
    dom = Dom(text).root
    grouped = dom.find('section', id='summary').find('table', 'by-check').find('tr', data_check='<b>c</b>')
    assert grouped.find('td', 'hosts').text() == '<script>x</script>,y, a b'
    assert dom.find('details', id='healthy-nodes').find('summary').text().startswith('64 healthy nodes: n<[0-63]>&')
