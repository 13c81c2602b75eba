# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn the validators' results of a whole cluster into one report: JSON, JUnit XML and a self-contained HTML page.

Pure Python (standard library only, no Ansible import). The input is what the control host collects per node:
``{node: {validator: result}}``, each result holding ``checks`` (see ``_checks.check``), ``healthy`` and, for
``gpu_topology``, ``topology`` and ``nics``. Stages that judge the cluster as a whole (the validate role's training
stage: its all-node run) add ``{stage: {checks, healthy, title, facts, nodes, columns}}``: cluster-level checks, a
table of per-node measurements and a few facts.

The HTML page is built from strings, every value through one escaping helper (`_e`); the page is small, and
keeping it in Python keeps the whole report testable without a template engine.
"""

from __future__ import annotations

import html
import json
import re
import typing as t
import xml.etree.ElementTree as ET

from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import finite

STATUSES = ('fail', 'warn', 'skip', 'pass')  # also the order checks are listed in: problems first
RELATIONS = ('nv', 'pix', 'pxb', 'phb', 'node', 'sys', 'self')
_RELATION_LEGEND = (
    ('nv', 'NV#', 'NVLink: a bonded set of # NVLinks'),
    ('pix', 'PIX', 'at most one PCIe bridge'),
    ('pxb', 'PXB', 'several PCIe bridges, no host bridge'),
    ('phb', 'PHB', 'through a PCIe host bridge (the CPU)'),
    ('node', 'NODE', 'between PCIe host bridges within a NUMA node'),
    ('sys', 'SYS', 'across the interconnect between NUMA nodes (QPI/UPI)'),
    ('self', 'X', 'the device itself'),
)
_XML_INVALID = re.compile('[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]')
_DIGITS = re.compile(r'([0-9]{1,30})')  # ASCII and bounded: int() reads every run
_CHECK_TEXT_FIELDS = ('name', 'subject', 'message')


class _HardwareResults(t.Mapping[str, str]):
    """The node validators of the validate role's hardware stage (the registry's, stage `hardware`), each to the
    variable its result is registered in (`__validate_<name>`); read from the registry at each use."""

    def _names(self) -> dict[str, str]:
        return {name: f'__validate_{name}' for name in validators.in_stage('hardware')}

    def __getitem__(self, name: str) -> str:
        return self._names()[name]

    def __iter__(self) -> t.Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


REGISTERED_VALIDATORS: t.Mapping[str, str] = _HardwareResults()
# What stands for a node validator whose result is missing: the node was not reached.
UNREACHABLE = {'unreachable': True, 'msg': 'host unreachable', 'healthy': False}


class ReportError(ValueError):
    """Malformed input; the message names the node, validator and field."""


# --- collecting ------------------------------------------------------------------------------------

def collect_results(registered: t.Mapping[str, t.Mapping[str, t.Any]],
                    verdicts: t.Optional[t.Mapping[str, t.Mapping[str, t.Any]]] = None) -> dict[str, dict[str, t.Any]]:
    """`{node: {validator: result}}`, build_report's input, from each node's own validators and the stages' verdicts.

    `registered` is `{node: {validator: result or None}}` (None: never registered, the node was not reached);
    `verdicts` is `{validator: {node: result}}` of the stages that judge nodes from elsewhere (validate.yml's NCCL
    and training stages), added after the node's own validators for the nodes they judged.
    """
    if not isinstance(registered, t.Mapping):
        raise ReportError(f'registered must map node names to {{validator: result}}, got {type(registered).__name__}')
    verdicts = verdicts or {}
    if not isinstance(verdicts, t.Mapping) or not all(isinstance(per_node, t.Mapping) for per_node in verdicts.values()):
        raise ReportError(f'verdicts must map validator names to {{node: result}}, got {verdicts!r}')
    collected = {}
    for node, own in registered.items():
        if not isinstance(own, t.Mapping):
            raise ReportError(f"node '{node}': expected a mapping of validator name to result, got {own!r}")
        results = {validator: dict(UNREACHABLE) if result is None else result for validator, result in own.items()}
        results.update((validator, per_node[node]) for validator, per_node in verdicts.items() if node in per_node)
        collected[node] = results
    return collected


# --- building --------------------------------------------------------------------------------------

def _natural(name: str) -> tuple[t.Any, ...]:
    """Sort key that puts gpu2 before gpu10."""
    return tuple((0, int(part), '') if index % 2 else (1, 0, part)
                 for index, part in enumerate(_DIGITS.split(name)) if part)


def _device_key(name: str) -> tuple[t.Any, ...]:
    kind = 0 if name.startswith('GPU') else 1 if name.startswith('NIC') else 2
    return (kind,) + _natural(name)


def _plain(value: t.Any) -> t.Any:
    """A JSON-ready copy: mappings become dicts with string keys, sequences lists, other objects their text.

    NaN and infinities become 'nan', 'inf', '-inf': JSON has no such numbers, and json.dumps would write invalid JSON.
    """
    if isinstance(value, float) and finite(value) is None:
        return str(value)
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, t.Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(item) for item in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    return str(value)


def _text(value: t.Any, where: str) -> str:
    if not isinstance(value, str):
        raise ReportError(f'{where} must be a string, got {type(value).__name__} {value!r}')
    return str(value)


def _checks_of(result: t.Mapping[str, t.Any], where: str) -> list[t.Mapping[str, t.Any]]:
    """The result's checks; a failed or skipped task without checks becomes one check saying so."""
    if 'checks' not in result:
        if result.get('failed') or result.get('unreachable'):
            why = result.get('msg') or ('host unreachable' if result.get('unreachable') else 'the validator failed')
            return [{'name': 'run', 'status': 'fail', 'subject': 'node', 'expected': None, 'actual': None,
                     'message': str(why)}]
        if result.get('skipped'):
            return [{'name': 'run', 'status': 'skip', 'subject': 'node', 'expected': None, 'actual': None,
                     'message': str(result.get('skip_reason') or 'the validator was skipped')}]
        raise ReportError(f'{where}: the result has no checks (keys: {", ".join(sorted(map(str, result))) or "none"})')
    checks = result['checks']
    if isinstance(checks, (str, bytes)) or not isinstance(checks, t.Sequence):
        raise ReportError(f'{where}.checks must be a list, got {type(checks).__name__}')
    return list(checks)


def _one_check(item: t.Any, validator: str, where: str) -> dict[str, t.Any]:
    if not isinstance(item, t.Mapping):
        raise ReportError(f'{where} must be a mapping, got {type(item).__name__} {item!r}')
    missing = [key for key in ('name', 'status') if key not in item]
    if missing:
        raise ReportError(f'{where} has no {" and no ".join(missing)}')
    status = item['status']
    if status not in STATUSES:
        raise ReportError(f'{where}.status must be one of {", ".join(STATUSES)}, got {status!r}')
    record = {'validator': validator, 'status': str(status)}
    for key in _CHECK_TEXT_FIELDS:
        value = item.get(key, 'node' if key == 'subject' else '')
        record[key] = _text('' if value is None else value, f'{where}.{key}')
    if not record['name']:
        raise ReportError(f'{where}.name is empty')
    record['expected'] = _plain(item.get('expected'))
    record['actual'] = _plain(item.get('actual'))
    return record


def _topology(result: t.Mapping[str, t.Any], where: str) -> t.Optional[dict[str, t.Any]]:
    matrix = result.get('topology')
    if not matrix:
        return None
    if not isinstance(matrix, t.Mapping):
        raise ReportError(f'{where}.topology must be a mapping of device to {{peer: relation}}, got {type(matrix).__name__}')
    clean: dict[str, dict[str, str]] = {}
    for device, peers in matrix.items():
        if not isinstance(peers, t.Mapping):
            raise ReportError(f'{where}.topology.{device} must be a mapping of peer to relation, got {peers!r}')
        clean[str(device)] = {str(peer): _text(rel, f'{where}.topology.{device}.{peer}') for peer, rel in peers.items()}
    nics = result.get('nics') or {}
    if not isinstance(nics, t.Mapping):
        raise ReportError(f'{where}.nics must be a mapping of NICn to a device name, got {type(nics).__name__}')
    devices = set(clean)
    for peers in clean.values():
        devices.update(peers)
    return {
        'devices': sorted(devices, key=_device_key),
        'matrix': clean,
        'nics': {str(nic): _text(name, f'{where}.nics.{nic}') for nic, name in nics.items()},
    }


def _counts(checks: t.Iterable[t.Mapping[str, t.Any]]) -> dict[str, int]:
    counts = dict.fromkeys(STATUSES, 0)
    for item in checks:
        counts[item['status']] += 1
    counts['total'] = sum(counts.values())
    return counts


def _node(node: str, validators: t.Any) -> dict[str, t.Any]:
    if not isinstance(validators, t.Mapping) or not validators:
        raise ReportError(f"node '{node}': expected a non-empty mapping of validator name to result, got {validators!r}")
    checks: list[dict[str, t.Any]] = []
    per_validator: dict[str, dict[str, t.Any]] = {}
    topology = None
    for validator in sorted(validators, key=str):
        where = f"node '{node}', validator '{validator}'"
        if not isinstance(validator, str) or not validator:
            raise ReportError(f"node '{node}': validator names must be non-empty strings, got {validator!r}")
        result = validators[validator]
        if not isinstance(result, t.Mapping):
            raise ReportError(f'{where}: the result must be a mapping, got {type(result).__name__}')
        own = [_one_check(item, validator, f'{where}: checks[{index}]')
               for index, item in enumerate(_checks_of(result, where))]
        reported = result.get('healthy', True)
        if not isinstance(reported, bool):
            raise ReportError(f'{where}: healthy must be true or false, got {reported!r}')
        validator_healthy = reported and not any(item['status'] == 'fail' for item in own)
        per_validator[validator] = {'healthy': validator_healthy, 'counts': _counts(own)}
        checks.extend(own)
        if topology is None:
            topology = _topology(result, where)
    # Failing checks first, then warnings, skips and passes; within a status by validator, in the validator's order.
    order = {validator: index for index, validator in enumerate(per_validator)}
    ranked = sorted(enumerate(checks), key=lambda pair: (STATUSES.index(pair[1]['status']), order[pair[1]['validator']], pair[0]))
    record = {
        'name': node,
        'healthy': all(v['healthy'] for v in per_validator.values()),
        'counts': _counts(checks),
        'validators': per_validator,
        'checks': [item for index, item in ranked],
    }
    if topology is not None:
        record['topology'] = topology
    return record


def _ranked(checks: t.Sequence[dict[str, t.Any]]) -> list[dict[str, t.Any]]:
    return [item for index, item in sorted(enumerate(checks), key=lambda pair: (STATUSES.index(pair[1]['status']), pair[0]))]


def _stage(name: t.Any, stage: t.Any) -> dict[str, t.Any]:
    """A cluster-level stage result: its checks (validator = the stage), healthy, and its table and facts as JSON."""
    if not isinstance(name, str) or not name:
        raise ReportError(f'stage names must be non-empty strings, got {name!r}')
    where = f"stage '{name}'"
    if not isinstance(stage, t.Mapping):
        raise ReportError(f'{where}: the result must be a mapping, got {type(stage).__name__}')
    checks = [_one_check(item, name, f'{where}: checks[{index}]') for index, item in enumerate(_checks_of(stage, where))]
    reported = stage.get('healthy', True)
    if not isinstance(reported, bool):
        raise ReportError(f'{where}: healthy must be true or false, got {reported!r}')
    nodes = stage.get('nodes') or {}
    if not isinstance(nodes, t.Mapping) or not all(isinstance(row, t.Mapping) for row in nodes.values()):
        raise ReportError(f'{where}.nodes must map node names to {{column: value}}, got {nodes!r}')
    columns = stage.get('columns') or sorted({str(key) for row in nodes.values() for key in row})
    return {
        'title': _text(stage.get('title') or name, f'{where}.title'),
        'healthy': reported and not any(item['status'] == 'fail' for item in checks),
        'counts': _counts(checks),
        'checks': _ranked(checks),
        'facts': _plain(stage.get('facts') or {}),
        'columns': [_text(column, f'{where}.columns') for column in columns],
        'nodes': {str(node): _plain(nodes[node]) for node in sorted(nodes, key=lambda n: _natural(str(n)))},
    }


def build_report(results: t.Mapping[str, t.Mapping[str, t.Any]], cluster: str, generated_at: str,
                 stages: t.Optional[t.Mapping[str, t.Any]] = None) -> dict[str, t.Any]:
    """The machine-readable report of `{node: {validator: result}}` and the cluster-level `{stage: result}`;
    raises ReportError on malformed input."""
    if not isinstance(results, t.Mapping):
        raise ReportError(f'results must be a mapping of node to {{validator: result}}, got {type(results).__name__}')
    if stages is not None and not isinstance(stages, t.Mapping):
        raise ReportError(f'stages must be a mapping of stage name to its result, got {type(stages).__name__}')
    cluster = _text(cluster, 'cluster')
    generated_at = _text(generated_at, 'generated_at')
    for node in results:
        if not isinstance(node, str) or not node:
            raise ReportError(f'node names must be non-empty strings, got {node!r}')
    nodes = [_node(str(node), results[node]) for node in sorted(results, key=_natural)]
    cluster_stages = {str(name): _stage(name, (stages or {})[name]) for name in sorted(stages or {}, key=str)}
    validators = sorted({v for node in nodes for v in node['validators']} | set(cluster_stages))
    every_check = [item for node in nodes for item in node['checks']]
    every_check += [item for stage in cluster_stages.values() for item in stage['checks']]
    failing_stages = [name for name, stage in cluster_stages.items() if not stage['healthy']]
    return {
        'cluster': cluster,
        'generated_at': generated_at,
        'summary': {
            'nodes': len(nodes),
            'healthy_nodes': sum(1 for node in nodes if node['healthy']),
            'failing_nodes': sum(1 for node in nodes if not node['healthy']),
            'failing': [node['name'] for node in nodes if not node['healthy']],
            'failing_stages': failing_stages,
            'healthy': all(node['healthy'] for node in nodes) and not failing_stages,
            'validators': validators,
            'checks': _counts(every_check),
            'by_validator': {v: _counts(item for item in every_check if item['validator'] == v) for v in validators},
        },
        'nodes': nodes,
        'stages': cluster_stages,
    }


def _checked_report(report: t.Any) -> t.Mapping[str, t.Any]:
    if not isinstance(report, t.Mapping) or not {'cluster', 'generated_at', 'summary', 'nodes'} <= set(report):
        raise ReportError('expected a report made by build_report (cluster, generated_at, summary, nodes)')
    return report


# --- JSON ------------------------------------------------------------------------------------------

def render_json(report: t.Mapping[str, t.Any]) -> str:
    """report.json: keys sorted, 4-space indents, non-ASCII escaped (the text of Ansible's to_nice_json)."""
    return json.dumps(_checked_report(report), sort_keys=True, indent=4) + '\n'


# --- JUnit XML ---------------------------------------------------------------------------------------

def value_text(value: t.Any) -> str:
    """How an expected or actual value is shown to a person: strings as they are, the rest as compact JSON."""
    if value is None:
        return '-'
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _xml(value: t.Any) -> str:
    """Text XML 1.0 can hold: control characters it forbids become U+FFFD."""
    return _XML_INVALID.sub('\ufffd', str(value))


def render_junit(report: t.Mapping[str, t.Any]) -> str:
    """JUnit XML: a testsuite per validator, a testcase per node and check; warnings pass with their message.

    A stage's cluster-level checks join the suite of the same name, with the cluster's name as their class."""
    report = _checked_report(report)
    root = ET.Element('testsuites', name=_xml(f"llmforge.cluster {report['cluster']}"))
    totals = dict.fromkeys(('tests', 'failures', 'skipped'), 0)
    owners = [(node['name'], node['checks']) for node in report['nodes']]
    owners += [(report['cluster'], stage['checks']) for stage in (report.get('stages') or {}).values()]
    for validator in report['summary']['validators']:
        suite = ET.SubElement(root, 'testsuite', name=_xml(f'llmforge.{validator}'), timestamp=_xml(report['generated_at']))
        counts = dict.fromkeys(('tests', 'failures', 'skipped'), 0)
        for owner, checks in owners:
            for item in checks:
                if item['validator'] != validator:
                    continue
                counts['tests'] += 1
                case = ET.SubElement(suite, 'testcase', classname=_xml(owner),
                                     name=_xml(f"{item['name']} {item['subject']}"), time='0')
                if item['status'] == 'fail':
                    counts['failures'] += 1
                    failure = ET.SubElement(case, 'failure', message=_xml(item['message']), type='fail')
                    failure.text = _xml(f"expected: {value_text(item['expected'])}\nactual: {value_text(item['actual'])}\n"
                                        f"{item['message']}")
                elif item['status'] == 'skip':
                    counts['skipped'] += 1
                    ET.SubElement(case, 'skipped', message=_xml(item['message']))
                elif item['status'] == 'warn':
                    ET.SubElement(case, 'system-out').text = _xml(f"WARNING: {item['message']}\n"
                                                                  f"expected: {value_text(item['expected'])}\n"
                                                                  f"actual: {value_text(item['actual'])}")
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set('errors', '0')
    for key, value in totals.items():
        root.set(key, str(value))
    root.set('errors', '0')
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding='unicode') + '\n'


# --- HTML ------------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;padding:24px 32px;color:#1f2933;background:#f5f7fa}
h1{margin:0 0 4px;font-size:26px}h2{font-size:20px;margin:32px 0 12px}h3{font-size:16px;margin:16px 0 8px}
.generated{color:#52606d;margin:0 0 16px}
.verdict{font-size:18px;font-weight:600;padding:10px 14px;border-radius:6px;display:inline-block}
.verdict.ok{background:#e3f9e5;color:#05400a}.verdict.bad{background:#ffe3e3;color:#610404}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin-top:16px}
.card{background:#fff;border-radius:8px;padding:12px 18px;min-width:120px;box-shadow:0 1px 3px rgba(0,0,0,.15);border-top:4px solid #9aa5b1}
.card .value{display:block;font-size:28px;font-weight:700}.card .label{color:#52606d}
.card.pass,.card.healthy{border-top-color:#3f9142}.card.fail,.card.failing{border-top-color:#cf1124}
.card.warn{border-top-color:#de911d}.card.skip{border-top-color:#9aa5b1}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 3px rgba(0,0,0,.15)}
th,td{border:1px solid #d9e2ec;padding:6px 10px;text-align:left;vertical-align:top}
thead th{background:#e4e7eb}
tr.node.fail td.status{background:#ffe3e3;color:#610404;font-weight:700}
tr.node.pass td.status{background:#e3f9e5;color:#05400a;font-weight:700}
td.fail{color:#a61b1b;font-weight:600}td.warn{color:#8d2b0b;font-weight:600}
code{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:13px;white-space:pre-wrap;word-break:break-word}
.none{color:#52606d;font-style:italic}
table.matrix th,table.matrix td{text-align:center;padding:4px 6px;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
table.matrix small{display:block;color:#52606d;font-weight:400}
.rel.nv{background:#2f8132;color:#fff;font-weight:700}.rel.pix{background:#a3d9a5}.rel.pxb{background:#e6f4a2}
.rel.phb{background:#fce588}.rel.node{background:#f9c784}.rel.sys{background:#bcccdc;color:#102a43;font-weight:700}
.rel.self{background:#cbd2d9;color:#52606d}.rel.other{background:#fff;color:#52606d}
.rel.bad{outline:3px solid #cf1124;outline-offset:-3px}section.topology{overflow-x:auto}
ul.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:8px 18px}
ul.legend .rel{display:inline-block;min-width:40px;text-align:center;padding:2px 6px;border-radius:4px;margin-right:6px;font-family:monospace}
"""


def _e(value: t.Any) -> str:
    return html.escape(str(value), quote=True)


def relation_kind(relation: str) -> str:
    """The CSS class of a `nvidia-smi topo -m` relation: nv, pix, pxb, phb, node, sys, self, or other."""
    text = relation.strip().upper()
    if text in ('X', 'SELF'):
        return 'self'
    if re.match(r'^NV[0-9]+$', text):
        return 'nv'
    return text.lower() if text.lower() in RELATIONS else 'other'


def _card(kind: str, value: int, label: str) -> str:
    return f'<div class="card {kind}"><span class="value">{value}</span><span class="label">{_e(label)}</span></div>'


def _summary_html(report: t.Mapping[str, t.Any]) -> list[str]:
    summary = report['summary']
    counts = summary['checks']
    verdict = f"{summary['healthy_nodes']} of {summary['nodes']} nodes healthy"
    if summary.get('failing'):
        verdict += ' \u2014 failing: ' + ', '.join(summary['failing'])
    if summary.get('failing_stages'):
        verdict += ' \u2014 failing cluster stages: ' + ', '.join(summary['failing_stages'])
    return [
        '<section id="summary">', '<h2>Summary</h2>',
        f'<p class="verdict {"ok" if summary["healthy"] else "bad"}">{_e(verdict)}</p>',
        '<div class="cards">',
        _card('nodes', summary['nodes'], 'nodes'),
        _card('healthy', summary['healthy_nodes'], 'healthy nodes'),
        _card('failing', summary['failing_nodes'], 'failing nodes'),
        _card('pass', counts['pass'], 'checks passed'),
        _card('fail', counts['fail'], 'checks failed'),
        _card('warn', counts['warn'], 'warnings'),
        _card('skip', counts['skip'], 'skipped'),
        '</div>', '</section>',
    ]


def _nodes_html(report: t.Mapping[str, t.Any]) -> list[str]:
    validators = report['summary']['validators']
    head = ''.join(f'<th>{_e(v)}</th>' for v in validators)
    out = ['<section id="nodes">', '<h2>Nodes</h2>', '<table>',
           f'<thead><tr><th>Node</th><th>Status</th>{head}<th>Passed</th><th>Failed</th><th>Warnings</th>'
           '<th>Skipped</th></tr></thead>', '<tbody>']
    for node in report['nodes']:
        state = 'pass' if node['healthy'] else 'fail'
        cells = []
        for validator in validators:
            own = node['validators'].get(validator)
            if own is None:
                cells.append('<td class="absent">not run</td>')
                continue
            counts = own['counts']
            text = f"{counts['pass']} passed, {counts['fail']} failed" + (f", {counts['warn']} warnings" if counts['warn'] else '')
            cells.append(f'<td class="{"pass" if own["healthy"] else "fail"}">{_e(text)}</td>')
        counts = node['counts']
        out.append(f'<tr class="node {state}" data-node="{_e(node["name"])}"><th scope="row">{_e(node["name"])}</th>'
                   f'<td class="status">{"healthy" if node["healthy"] else "FAILING"}</td>{"".join(cells)}'
                   f"<td>{counts['pass']}</td><td>{counts['fail']}</td><td>{counts['warn']}</td><td>{counts['skip']}</td></tr>")
    if not report['nodes']:
        out.append(f'<tr><td colspan="{6 + len(validators)}" class="none">No nodes reported.</td></tr>')
    out += ['</tbody>', '</table>', '</section>']
    return out


def _problems_html(report: t.Mapping[str, t.Any], status: str, section_id: str, title: str) -> list[str]:
    rows = [(node, item) for node in report['nodes'] for item in node['checks'] if item['status'] == status]
    out = [f'<section id="{section_id}">', f'<h2>{_e(title)} ({len(rows)})</h2>']
    if not rows:
        out += [f'<p class="none">No {_e(title.lower())}.</p>', '</section>']
        return out
    out += ['<table>', '<thead><tr><th>Node</th><th>Validator</th><th>Check</th><th>Subject</th><th>Expected</th>'
            '<th>Actual</th><th>Message</th></tr></thead>', '<tbody>']
    for node, item in rows:
        out.append(f'<tr class="{status}" data-node="{_e(node["name"])}"><td>{_e(node["name"])}</td>'
                   f'<td>{_e(item["validator"])}</td><td class="{status}">{_e(item["name"])}</td><td>{_e(item["subject"])}</td>'
                   f'<td class="expected"><code>{_e(value_text(item["expected"]))}</code></td>'
                   f'<td class="actual"><code>{_e(value_text(item["actual"]))}</code></td>'
                   f'<td class="message">{_e(item["message"])}</td></tr>')
    out += ['</tbody>', '</table>', '</section>']
    return out


def _cell(value: t.Any) -> str:
    if isinstance(value, bool):
        return f'<td class="{"pass" if value else "fail"}">{"yes" if value else "NO"}</td>'
    return f'<td>{_e(value_text(value))}</td>'


def _stage_html(name: str, stage: t.Mapping[str, t.Any]) -> list[str]:
    """A cluster-level stage: its verdict, facts, per-node measurements and its own checks."""
    state = 'ok' if stage['healthy'] else 'bad'
    out = [f'<section class="stage" id="stage-{_e(name)}" data-stage="{_e(name)}">', f'<h2>{_e(stage["title"])}</h2>',
           f'<p class="verdict {state}">{_e(stage["title"])}: {"passed" if stage["healthy"] else "FAILED"}</p>']
    facts = {key: value for key, value in stage['facts'].items() if value is not None}
    if facts:
        out.append('<table class="facts"><tbody>')
        out += [f'<tr><th scope="row">{_e(key)}</th>{_cell(value)}</tr>' for key, value in facts.items()]
        out.append('</tbody></table>')
    if stage['nodes']:
        head = ''.join(f'<th>{_e(column)}</th>' for column in stage['columns'])
        out += ['<h3>Per node</h3>', '<table class="stage-nodes">', f'<thead><tr><th>Node</th>{head}</tr></thead>', '<tbody>']
        for node, row in stage['nodes'].items():
            cells = ''.join(_cell(row.get(column)) for column in stage['columns'])
            out.append(f'<tr data-node="{_e(node)}"><th scope="row">{_e(node)}</th>{cells}</tr>')
        out += ['</tbody>', '</table>']
    out += ['<h3>Cluster checks</h3>', '<table class="stage-checks">',
            '<thead><tr><th>Status</th><th>Check</th><th>Subject</th><th>Expected</th><th>Actual</th><th>Message</th></tr></thead>',
            '<tbody>']
    for item in stage['checks']:
        status = item['status']
        out.append(f'<tr class="{status}"><td class="{status}">{_e(status)}</td><td>{_e(item["name"])}</td>'
                   f'<td>{_e(item["subject"])}</td><td class="expected"><code>{_e(value_text(item["expected"]))}</code></td>'
                   f'<td class="actual"><code>{_e(value_text(item["actual"]))}</code></td>'
                   f'<td class="message">{_e(item["message"])}</td></tr>')
    out += ['</tbody>', '</table>', '</section>']
    return out


def _device_header(device: str, nics: t.Mapping[str, str]) -> str:
    name = nics.get(device)
    return _e(device) + (f'<small>{_e(name)}</small>' if name else '')


def _failing_pairs(node: t.Mapping[str, t.Any], nics: t.Mapping[str, str]) -> set[frozenset[str]]:
    """Matrix cells of the node's failing nvlink (`GPU0-GPU1`) and gpu_nic_affinity (`GPU3-mlx5_3`) checks."""
    by_name = {name: nic for nic, name in nics.items()}
    pairs = set()
    for item in node.get('checks') or []:
        if item.get('status') != 'fail' or item.get('name') not in ('nvlink', 'gpu_nic_affinity'):
            continue
        ends = str(item.get('subject') or '').split('-', 1)
        if len(ends) == 2:
            pairs.add(frozenset(by_name.get(end, end) for end in ends))
    return pairs


def _topology_html(node: t.Mapping[str, t.Any]) -> list[str]:
    topo = node['topology']
    devices, matrix, nics = topo['devices'], topo['matrix'], topo['nics']
    bad = _failing_pairs(node, nics)
    head = ''.join(f'<th scope="col" data-device="{_e(d)}">{_device_header(d, nics)}</th>' for d in devices)
    out = [f'<section class="topology" data-node="{_e(node["name"])}">', f'<h3>GPU topology of {_e(node["name"])}</h3>',
           '<table class="matrix">', f'<thead><tr><th></th>{head}</tr></thead>', '<tbody>']
    for row in devices:
        cells = []
        for col in devices:
            relation = 'X' if row == col else matrix.get(row, {}).get(col) or matrix.get(col, {}).get(row) or ''
            kind = relation_kind(relation) if relation else 'other'
            kind += ' bad' if frozenset((row, col)) in bad else ''
            cells.append(f'<td class="rel {kind}" data-row="{_e(row)}" data-col="{_e(col)}" '
                         f'title="{_e(row)} to {_e(col)}: {_e(relation or "unknown")}">{_e(relation or "?")}</td>')
        out.append(f'<tr><th scope="row" data-device="{_e(row)}">{_device_header(row, nics)}</th>{"".join(cells)}</tr>')
    out += ['</tbody>', '</table>', '<ul class="legend">']
    out += [f'<li><span class="rel {kind}">{_e(label)}</span>{_e(meaning)}</li>' for kind, label, meaning in _RELATION_LEGEND]
    out += ['</ul>', '</section>']
    return out


def render_html(report: t.Mapping[str, t.Any]) -> str:
    """One self-contained page: inline CSS, no scripts, no external resources; every value escaped."""
    report = _checked_report(report)
    cluster, generated = _e(report['cluster']), _e(report['generated_at'])
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f'<title>Cluster validation: {cluster} ({generated})</title>', f'<style>{_CSS}</style>', '</head>', '<body>',
           '<header>', f'<h1>Cluster validation: {cluster}</h1>', f'<p class="generated">Generated {generated}</p>', '</header>',
           '<main>']
    out += _summary_html(report)
    out += _nodes_html(report)
    out += _problems_html(report, 'fail', 'failures', 'Failing checks')
    out += _problems_html(report, 'warn', 'warnings', 'Warnings')
    for name, stage in (report.get('stages') or {}).items():
        out += _stage_html(name, stage)
    with_topology = [node for node in report['nodes'] if node.get('topology')]
    if with_topology:
        out += ['<section id="topologies">', '<h2>GPU topology</h2>']
        for node in with_topology:
            out += _topology_html(node)
        out.append('</section>')
    out += ['</main>', '</body>', '</html>']
    return '\n'.join(out) + '\n'


# --- files -----------------------------------------------------------------------------------------

REPORT_FILES = (('report.json', render_json), ('junit.xml', render_junit), ('report.html', render_html))


def report_files(report: t.Mapping[str, t.Any]) -> list[dict[str, str]]:
    """`[{name, content}]` of report.json, junit.xml and report.html, for the playbook to write."""
    report = _checked_report(report)
    return [{'name': name, 'content': render(report)} for name, render in REPORT_FILES]
