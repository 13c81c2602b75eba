# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Turn the validators' results of a whole cluster into one report: JSON, JUnit XML and a self-contained HTML page.

Pure Python (standard library only, no Ansible import). The input is what the control host collects per node:
``{node: {validator: result}}``, each result holding ``checks`` (see ``_checks.check``), ``healthy`` and, for
``gpu_topology``, ``topology`` and ``nics``. Stages that judge the cluster as a whole (the validate role's training
stage: its all-node run) add ``{stage: {checks, healthy, title, facts, nodes, columns}}``: cluster-level checks, a
table of per-node measurements and a few facts.

The HTML page is built from strings, every value through one escaping helper (`_e`), which keeps the whole report
testable without a template engine. It reads top down: the summary (verdict; counts of healthy, failing and not
validated nodes; the cluster stages; the failing checks and the warnings grouped by check, with their nodes as a
Slurm hostlist; the not validated nodes by reason), then the nodes, failing ones first, then every failing check and
warning with its expected and actual value, the cluster stages' sections and the GPU topology matrices.

A node is healthy when no check of it fails and at least one passed or warned; not validated when it is not failing
and none did (every check skipped, e.g. a node the Slurm path left alone because it was busy or down). The page's
"healthy nodes" counts only validated ones; report.json's summary.healthy_nodes counts every node not failing.

How much the page shows depends on the cluster's size, so that a fleet's page stays a few MiB and opens in a
browser in well under two seconds (bench/bench_report_html.py: 4,096 nodes):

- at most FULL_PAGE_NODES (64) nodes: everything, as one table of every node with each validator's counts and
  every node's topology matrix;
- more: the failing nodes in that table; the not validated and the healthy nodes each in one collapsed
  `<details>` section, one line a node (its reason, or "N checks passed"), their checks not repeated; at most
  MAX_DETAIL_ROWS failing checks (and as many warnings) listed one by one, whole nodes at a time, the further nodes
  named as a hostlist (the summary's grouping counts every check); the topology matrices of failing nodes only, at
  most MAX_TOPOLOGY_GRIDS; a stage's per-node table and its passing checks collapsed past FULL_PAGE_NODES rows.

report.json keeps every check of every node, and junit.xml every testcase: they are the complete record.
"""

from __future__ import annotations

import html
import json
import re
import typing as t
import xml.etree.ElementTree as ET

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
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

FULL_PAGE_NODES = 64  # the most nodes whose page shows everything (see the module docstring)
MAX_DETAIL_ROWS = 1000  # a larger cluster's page lists this many failing checks (and warnings) one by one, at most
MAX_TOPOLOGY_GRIDS = 16  # and the topology matrices of this many failing nodes, at most
MAX_LISTED_NAMES = 8  # the verdict names this many nodes one by one; more as a hostlist
NODE_STATES = {'fail': 'FAILING', 'skip': 'not validated', 'pass': 'healthy'}  # in the order nodes are listed

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
tr.node.skip td.status{background:#e4e7eb;color:#3e4c59;font-weight:700}
.card.unvalidated{border-top-color:#616e7c}
ul.stages{padding-left:20px}li.fail a{color:#a61b1b;font-weight:600}
td.hosts{max-width:640px}td.count{text-align:right}.more{color:#52606d}
details.nodes,details.stage-nodes,details.stage-checks{margin:12px 0}
details>summary{cursor:pointer;font-weight:600;padding:6px 0}
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
    return f'<div class="card {kind}"><span class="value">{value:,}</span><span class="label">{_e(label)}</span></div>'


def _node_state(node: t.Mapping[str, t.Any]) -> str:
    """'fail' (failing), 'skip' (not validated: no check of it passed or warned, e.g. a busy node the Slurm path left
    alone) or 'pass' (healthy)."""
    if not node['healthy']:
        return 'fail'
    counts = node['counts']
    return 'pass' if counts['pass'] or counts['warn'] else 'skip'


def _by_state(report: t.Mapping[str, t.Any]) -> dict[str, list[t.Mapping[str, t.Any]]]:
    """The report's nodes by _node_state, each list in the report's (natural) order."""
    grouped: dict[str, list[t.Mapping[str, t.Any]]] = {state: [] for state in NODE_STATES}
    for node in report['nodes']:
        grouped[_node_state(node)].append(node)
    return grouped


def _hostlist(names: t.Sequence[str]) -> str:
    """The names as a Slurm hostlist (`gpu[0001-0040,0042]`); names a hostlist cannot hold, comma-separated."""
    try:
        return hostlist.compress(names)
    except hostlist.HostlistError:
        return ', '.join(names)


def _named(names: t.Sequence[str]) -> str:
    """Nodes in a sentence: one by one when they are few, else as a hostlist with their count."""
    if len(names) <= MAX_LISTED_NAMES:
        return ', '.join(names)
    return f'{_hostlist(names)} ({len(names):,} nodes)'


def _plural(count: int, word: str) -> str:
    return f'{count} {word}' if count == 1 else f'{count} {word}s'


def _why_not_validated(node: t.Mapping[str, t.Any]) -> str:
    """The message of a not validated node's first skipped check (the Slurm path's reason), or that it has none."""
    return next((item['message'] for item in node['checks'] if item['status'] == 'skip' and item['message']),
                'no checks were run')


def _grouped_checks(nodes: t.Iterable[t.Mapping[str, t.Any]], status: str) -> list[tuple[tuple[str, str], dict[str, t.Any]]]:
    """The nodes' checks of one status by (validator, check name): the nodes (each once, in order), the number of
    checks and the first one; the groups of most nodes first."""
    groups: dict[tuple[str, str], dict[str, t.Any]] = {}
    for node in nodes:
        for item in node['checks']:
            if item['status'] != status:
                continue
            key = (item['validator'], item['name'])
            group = groups.get(key)
            if group is None:
                group = groups[key] = {'nodes': [], 'checks': 0, 'first': (node['name'], item)}
            if not group['nodes'] or group['nodes'][-1] != node['name']:
                group['nodes'].append(node['name'])
            group['checks'] += 1
    return sorted(groups.items(), key=lambda pair: (-len(pair[1]['nodes']), pair[0]))


def _grouped_html(nodes: t.Sequence[t.Mapping[str, t.Any]], status: str, title: str) -> list[str]:
    """A summary table of the checks of one status grouped by check, the nodes of each as a hostlist."""
    groups = _grouped_checks(nodes, status)
    if not groups:
        return []
    out = [f'<h3>{_e(title)}</h3>', f'<table class="by-check {status}">',
           '<thead><tr><th>Validator</th><th>Check</th><th>Nodes</th><th>Host list</th><th>Checks</th>'
           '<th>Example</th></tr></thead>', '<tbody>']
    for (validator, name), group in groups:
        node, item = group['first']
        first = f"{node} {item['subject']}: {item['message']}" if item['message'] else f"{node} {item['subject']}"
        out.append(f'<tr data-validator="{_e(validator)}" data-check="{_e(name)}"><td>{_e(validator)}</td>'
                   f'<td class="{status}">{_e(name)}</td><td class="count">{len(group["nodes"])}</td>'
                   f'<td class="hosts"><code>{_e(_hostlist(group["nodes"]))}</code></td>'
                   f'<td class="count">{group["checks"]}</td><td class="message">{_e(first)}</td></tr>')
    out += ['</tbody>', '</table>']
    return out


def _unvalidated_html(nodes: t.Sequence[t.Mapping[str, t.Any]]) -> list[str]:
    """A summary table of the not validated nodes by reason."""
    if not nodes:
        return []
    reasons: dict[str, list[str]] = {}
    for node in nodes:
        reasons.setdefault(_why_not_validated(node), []).append(node['name'])
    out = ['<h3>Not validated</h3>', '<table class="by-reason">',
           '<thead><tr><th>Why</th><th>Nodes</th><th>Host list</th></tr></thead>', '<tbody>']
    for why, names in sorted(reasons.items(), key=lambda pair: (-len(pair[1]), pair[0])):
        out.append(f'<tr><td class="message">{_e(why)}</td><td class="count">{len(names)}</td>'
                   f'<td class="hosts"><code>{_e(_hostlist(names))}</code></td></tr>')
    out += ['</tbody>', '</table>']
    return out


def _summary_html(report: t.Mapping[str, t.Any], by_state: t.Mapping[str, t.Sequence[t.Mapping[str, t.Any]]]) -> list[str]:
    summary = report['summary']
    counts = summary['checks']
    failing, unvalidated, healthy = by_state['fail'], by_state['skip'], by_state['pass']
    verdict = f"{len(healthy):,} of {summary['nodes']:,} nodes healthy"
    if failing:
        verdict += ' \u2014 failing: ' + _named([node['name'] for node in failing])
    if unvalidated:
        verdict += ' \u2014 not validated: ' + _named([node['name'] for node in unvalidated])
    if summary.get('failing_stages'):
        verdict += ' \u2014 failing cluster stages: ' + ', '.join(summary['failing_stages'])
    out = [
        '<section id="summary">', '<h2>Summary</h2>',
        f'<p class="verdict {"ok" if summary["healthy"] else "bad"}">{_e(verdict)}</p>',
        '<div class="cards">',
        _card('nodes', summary['nodes'], 'nodes'),
        _card('healthy', len(healthy), 'healthy nodes'),
        _card('failing', len(failing), 'failing nodes'),
        _card('unvalidated', len(unvalidated), 'not validated'),
        _card('pass', counts['pass'], 'checks passed'),
        _card('fail', counts['fail'], 'checks failed'),
        _card('warn', counts['warn'], 'warnings'),
        _card('skip', counts['skip'], 'skipped'),
        '</div>',
    ]
    stages = report.get('stages') or {}
    if stages:
        out.append('<ul class="stages">')
        out += [f'<li class="{"pass" if stage["healthy"] else "fail"}"><a href="#stage-{_e(name)}">{_e(stage["title"])}</a>: '
                f'{"passed" if stage["healthy"] else "FAILED"}</li>' for name, stage in stages.items()]
        out.append('</ul>')
    out += _grouped_html(failing, 'fail', 'Failing checks by check')
    out += _grouped_html([node for state in NODE_STATES for node in by_state[state]], 'warn', 'Warnings by check')
    out += _unvalidated_html(unvalidated)
    out.append('</section>')
    return out


def _node_row(node: t.Mapping[str, t.Any], state: str, columns: t.Sequence[str]) -> str:
    """A node's row of the nodes table: its status and the counts of each validator of `columns`."""
    cells = []
    for validator in columns:
        own = node['validators'].get(validator)
        if own is None:
            cells.append('<td class="absent">not run</td>')
            continue
        counts = own['counts']
        text = f"{counts['pass']} passed, {counts['fail']} failed" + (f", {counts['warn']} warnings" if counts['warn'] else '')
        cells.append(f'<td class="{"pass" if own["healthy"] else "fail"}">{_e(text)}</td>')
    counts = node['counts']
    return (f'<tr class="node {state}" data-node="{_e(node["name"])}"><th scope="row">{_e(node["name"])}</th>'
            f'<td class="status">{NODE_STATES[state]}</td>{"".join(cells)}'
            f"<td>{counts['pass']}</td><td>{counts['fail']}</td><td>{counts['warn']}</td><td>{counts['skip']}</td></tr>")


def _compact_row(node: t.Mapping[str, t.Any], state: str) -> str:
    """A healthy or not validated node's row of its collapsed table: a line, not its checks."""
    counts = node['counts']
    if state == 'skip':
        text = _why_not_validated(node)
    else:
        text = _plural(counts['pass'], 'check') + ' passed'
        text += f", {_plural(counts['warn'], 'warning')}" if counts['warn'] else ''
        text += f", {counts['skip']} skipped" if counts['skip'] else ''
    return (f'<tr class="node {state}" data-node="{_e(node["name"])}"><th scope="row">{_e(node["name"])}</th>'
            f'<td class="status">{NODE_STATES[state]}</td><td>{_e(text)}</td></tr>')


def _nodes_html(report: t.Mapping[str, t.Any], by_state: t.Mapping[str, t.Sequence[t.Mapping[str, t.Any]]],
                full: bool) -> list[str]:
    """The nodes, failing ones first; on a full page all in one table, else the others collapsed by state."""
    columns = report['summary']['validators']
    listed = [(state, node) for state in (NODE_STATES if full else ('fail',)) for node in by_state[state]]
    out = ['<section id="nodes">', '<h2>Nodes</h2>']
    if listed or not report['nodes']:
        head = ''.join(f'<th>{_e(v)}</th>' for v in columns)
        out += ['<table class="nodes">',
                f'<thead><tr><th>Node</th><th>Status</th>{head}<th>Passed</th><th>Failed</th><th>Warnings</th>'
                '<th>Skipped</th></tr></thead>', '<tbody>']
        out += [_node_row(node, state, columns) for state, node in listed]
        if not report['nodes']:
            out.append(f'<tr><td colspan="{6 + len(columns)}" class="none">No nodes reported.</td></tr>')
        out += ['</tbody>', '</table>']
    else:
        out.append('<p class="none">No failing nodes.</p>')
    if not full:
        for state, ident, title in (('skip', 'unvalidated-nodes', 'not validated'), ('pass', 'healthy-nodes', 'healthy')):
            group = by_state[state]
            if not group:
                continue
            names = _hostlist([node['name'] for node in group])
            out += [f'<details class="nodes {state}" id="{ident}">',
                    f'<summary>{len(group):,} {title} nodes: <code>{_e(names)}</code></summary>',
                    '<table class="compact">', '<thead><tr><th>Node</th><th>Status</th><th>Checks</th></tr></thead>',
                    '<tbody>']
            out += [_compact_row(node, state) for node in group]
            out += ['</tbody>', '</table>', '</details>']
    out.append('</section>')
    return out


def _problems_html(by_state: t.Mapping[str, t.Sequence[t.Mapping[str, t.Any]]], status: str, section_id: str,
                   title: str, full: bool) -> list[str]:
    """Every check of one status, node by node (failing nodes first); past MAX_DETAIL_ROWS rows on a page that is
    not full, the remaining nodes are named instead."""
    per_node = []
    for state in NODE_STATES:
        for node in by_state[state]:
            own = [item for item in node['checks'] if item['status'] == status]
            if own:
                per_node.append((node, own))
    total = sum(len(own) for _node, own in per_node)
    out = [f'<section id="{section_id}">', f'<h2>{_e(title)} ({total})</h2>']
    if not per_node:
        out += [f'<p class="none">No {_e(title.lower())}.</p>', '</section>']
        return out
    out += ['<table>', '<thead><tr><th>Node</th><th>Validator</th><th>Check</th><th>Subject</th><th>Expected</th>'
            '<th>Actual</th><th>Message</th></tr></thead>', '<tbody>']
    shown, left = 0, []
    for node, own in per_node:
        if left or (not full and shown and shown + len(own) > MAX_DETAIL_ROWS):
            left.append(node['name'])
            continue
        shown += len(own)
        for item in own:
            out.append(f'<tr class="{status}" data-node="{_e(node["name"])}"><td>{_e(node["name"])}</td>'
                       f'<td>{_e(item["validator"])}</td><td class="{status}">{_e(item["name"])}</td><td>{_e(item["subject"])}</td>'
                       f'<td class="expected"><code>{_e(value_text(item["expected"]))}</code></td>'
                       f'<td class="actual"><code>{_e(value_text(item["actual"]))}</code></td>'
                       f'<td class="message">{_e(item["message"])}</td></tr>')
    out += ['</tbody>', '</table>']
    if left:
        out.append(f'<p class="more">{_e(title)} of {_plural(len(left), "more node")} ({total - shown} checks) not '
                   f'listed here: <code>{_e(_hostlist(left))}</code>. The summary groups them by check; report.json '
                   'has every one.</p>')
    out.append('</section>')
    return out


def _cell(value: t.Any) -> str:
    if isinstance(value, bool):
        return f'<td class="{"pass" if value else "fail"}">{"yes" if value else "NO"}</td>'
    return f'<td>{_e(value_text(value))}</td>'


def _stage_check_row(item: t.Mapping[str, t.Any]) -> str:
    status = item['status']
    return (f'<tr class="{status}"><td class="{status}">{_e(status)}</td><td>{_e(item["name"])}</td>'
            f'<td>{_e(item["subject"])}</td><td class="expected"><code>{_e(value_text(item["expected"]))}</code></td>'
            f'<td class="actual"><code>{_e(value_text(item["actual"]))}</code></td>'
            f'<td class="message">{_e(item["message"])}</td></tr>')


def _stage_html(name: str, stage: t.Mapping[str, t.Any], full: bool) -> list[str]:
    """A cluster-level stage: its verdict, facts, per-node measurements and its own checks. On a page that is not
    full, a per-node table and the passing checks of more than FULL_PAGE_NODES rows are collapsed."""
    state = 'ok' if stage['healthy'] else 'bad'
    out = [f'<section class="stage" id="stage-{_e(name)}" data-stage="{_e(name)}">', f'<h2>{_e(stage["title"])}</h2>',
           f'<p class="verdict {state}">{_e(stage["title"])}: {"passed" if stage["healthy"] else "FAILED"}</p>']
    facts = {key: value for key, value in stage['facts'].items() if value is not None}
    if facts:
        out.append('<table class="facts"><tbody>')
        out += [f'<tr><th scope="row">{_e(key)}</th>{_cell(value)}</tr>' for key, value in facts.items()]
        out.append('</tbody></table>')
    if stage['nodes']:
        collapse = not full and len(stage['nodes']) > FULL_PAGE_NODES
        head = ''.join(f'<th>{_e(column)}</th>' for column in stage['columns'])
        out.append('<h3>Per node</h3>')
        if collapse:
            out.append(f'<details class="stage-nodes"><summary>{len(stage["nodes"])} nodes</summary>')
        out += ['<table class="stage-nodes">', f'<thead><tr><th>Node</th>{head}</tr></thead>', '<tbody>']
        for node, row in stage['nodes'].items():
            cells = ''.join(_cell(row.get(column)) for column in stage['columns'])
            out.append(f'<tr data-node="{_e(node)}"><th scope="row">{_e(node)}</th>{cells}</tr>')
        out += ['</tbody>', '</table>'] + (['</details>'] if collapse else [])
    head = ('<thead><tr><th>Status</th><th>Check</th><th>Subject</th><th>Expected</th><th>Actual</th><th>Message</th>'
            '</tr></thead>')
    checks = stage['checks']
    passing = [item for item in checks if item['status'] == 'pass']
    collapse = not full and len(passing) > FULL_PAGE_NODES
    listed = [item for item in checks if item['status'] != 'pass'] if collapse else checks
    out += ['<h3>Cluster checks</h3>', '<table class="stage-checks">', head, '<tbody>']
    out += [_stage_check_row(item) for item in listed]
    out += ['</tbody>', '</table>']
    if collapse:
        out += [f'<details class="stage-checks"><summary>{len(passing)} passed checks</summary>',
                '<table class="stage-checks">', head, '<tbody>']
        out += [_stage_check_row(item) for item in passing]
        out += ['</tbody>', '</table>', '</details>']
    out.append('</section>')
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


def _topologies_html(report: t.Mapping[str, t.Any], full: bool) -> list[str]:
    """Every node's topology matrix on a full page; else those of failing nodes (nodes with an outlined cell first),
    at most MAX_TOPOLOGY_GRIDS of them."""
    with_topology = [node for node in report['nodes'] if node.get('topology')]
    if not with_topology:
        return []
    shown = with_topology
    if not full:
        failing = [node for node in with_topology if not node['healthy']]
        failing.sort(key=lambda node: not _failing_pairs(node, node['topology']['nics']))
        shown = sorted(failing[:MAX_TOPOLOGY_GRIDS], key=lambda node: _natural(node['name']))
    out = ['<section id="topologies">', '<h2>GPU topology</h2>']
    if len(shown) < len(with_topology):
        what = 'failing nodes only' if shown else 'failing nodes only, and none failed'
        out.append(f'<p class="more">Matrices of {what}: {len(with_topology) - len(shown)} of the '
                   f'{len(with_topology)} nodes are not shown here (report.json has every one).</p>')
    for node in shown:
        out += _topology_html(node)
    out.append('</section>')
    return out


def render_html(report: t.Mapping[str, t.Any]) -> str:
    """One self-contained page: inline CSS, no scripts, no external resources; every value escaped.

    The summary comes first, then the nodes (failing ones first), their failing checks and warnings, the cluster
    stages and the topology matrices; a cluster of more than FULL_PAGE_NODES nodes gets the shorter page of the
    module docstring."""
    report = _checked_report(report)
    full = len(report['nodes']) <= FULL_PAGE_NODES
    by_state = _by_state(report)
    cluster, generated = _e(report['cluster']), _e(report['generated_at'])
    out = ['<!DOCTYPE html>', '<html lang="en">', '<head>', '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f'<title>Cluster validation: {cluster} ({generated})</title>', f'<style>{_CSS}</style>', '</head>', '<body>',
           '<header>', f'<h1>Cluster validation: {cluster}</h1>', f'<p class="generated">Generated {generated}</p>', '</header>',
           '<main>']
    out += _summary_html(report, by_state)
    out += _nodes_html(report, by_state, full)
    out += _problems_html(by_state, 'fail', 'failures', 'Failing checks', full)
    out += _problems_html(by_state, 'warn', 'warnings', 'Warnings', full)
    for name, stage in (report.get('stages') or {}).items():
        out += _stage_html(name, stage, full)
    out += _topologies_html(report, full)
    out += ['</main>', '</body>', '</html>']
    return '\n'.join(out) + '\n'


# --- files -----------------------------------------------------------------------------------------

REPORT_FILES = (('report.json', render_json), ('junit.xml', render_junit), ('report.html', render_html))


def report_files(report: t.Mapping[str, t.Any]) -> list[dict[str, str]]:
    """`[{name, content}]` of report.json, junit.xml and report.html, for the playbook to write."""
    report = _checked_report(report)
    return [{'name': name, 'content': render(report)} for name, render in REPORT_FILES]
