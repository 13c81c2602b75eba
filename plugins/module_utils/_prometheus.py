# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition for node_exporter's textfile collector: rendering, escaping, writing.

Standard library only, no Ansible import. Metrics are given as a list of `Family` (name, type, help, samples),
rendered as ``# HELP``/``# TYPE`` lines followed by the samples, and written with one rename (`write_textfile`).

The validators' vocabulary is here too (`validator_families`, `validators_text`), so that every writer of validator
metrics (the validate role's llmforge_validate.prom, the node health check's llmforge_nodecheck.prom) uses the same
names, labels and help texts: node_exporter refuses a metric whose help text differs between two of its files.
"""

from __future__ import annotations

import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL

Labels = t.Mapping[str, str]
Value = t.Union[int, float]

VALIDATOR_HEALTHY = 'llmforge_validator_healthy'
VALIDATOR_CHECK_FAILED = 'llmforge_validator_check_failed'
VALIDATOR_DURATION = 'llmforge_validator_duration_seconds'
VALIDATOR_LAST_RUN = 'llmforge_validator_last_run_timestamp_seconds'
VALIDATOR_HELP = {
    VALIDATOR_HEALTHY: '1 when every check of the validator passed on this node at the last run.',
    VALIDATOR_CHECK_FAILED: '1 for each check that failed at the last run.',
    VALIDATOR_DURATION: 'How long the last run of the validator took on this node.',
    VALIDATOR_LAST_RUN: 'When the validator last ran on this node (Unix time).',
}


class PrometheusError(ValueError):
    """Malformed validator results; the message names the validator."""


class Family(t.NamedTuple):
    """One metric: its name, type (gauge, counter, ...), help text and (labels, value) samples."""

    name: str
    kind: str
    help: str
    samples: t.Sequence[t.Tuple[Labels, Value]]


def escape_label_value(value: str) -> str:
    """A label value as the text format wants it: backslash, double quote and line feed escaped."""
    return value.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def labels_text(labels: Labels) -> str:
    """``{name="value",...}`` in the given order; '' without labels."""
    if not labels:
        return ''
    return '{' + ','.join(f'{name}="{escape_label_value(str(value))}"' for name, value in labels.items()) + '}'


def value_text(value: Value) -> str:
    """Integers (and booleans) as integers, anything else as Python's shortest float text."""
    if isinstance(value, (bool, int)):
        return str(int(value))
    return repr(float(value))


def render(families: t.Iterable[Family]) -> str:
    """The exposition text of the families, in order; a family without samples keeps its HELP and TYPE."""
    lines = []
    for family in families:
        lines.append(f'# HELP {family.name} {family.help}')
        lines.append(f'# TYPE {family.name} {family.kind}')
        lines.extend(f'{family.name}{labels_text(labels)} {value_text(value)}' for labels, value in family.samples)
    return '\n'.join(lines) + '\n'


def merged(families: t.Iterable[Family]) -> list[Family]:
    """One family per name, in order of first appearance, with the samples of every family of that name.

    A name must appear once per exposition: the families of several validators become one per metric.
    """
    by_name: dict[str, Family] = {}
    for family in families:
        first = by_name.get(family.name)
        by_name[family.name] = family._replace(samples=list(family.samples)) if first is None else \
            first._replace(samples=[*first.samples, *family.samples])
    return list(by_name.values())


def write_textfile(path: str, text: str) -> None:
    """Replace `path` (name it ``*.prom``) atomically and world-readable, as the textfile collector needs."""
    _files.write_atomic(path, text, mode=0o644)


def validator_families(validator: str, checks: t.Iterable[t.Mapping[str, t.Any]], healthy: bool,
                       duration_seconds: t.Optional[float] = None,
                       finished_at: t.Optional[float] = None) -> list[Family]:
    """A validator's verdict on this node, its failing checks and, when given, its duration and end time."""
    base = {'validator': validator}
    families = [Family(VALIDATOR_HEALTHY, 'gauge', VALIDATOR_HELP[VALIDATOR_HEALTHY], [(base, 1 if healthy else 0)])]
    if duration_seconds is not None:
        families.append(Family(VALIDATOR_DURATION, 'gauge', VALIDATOR_HELP[VALIDATOR_DURATION],
                               [(base, round(duration_seconds, 3))]))
    if finished_at is not None:
        families.append(Family(VALIDATOR_LAST_RUN, 'gauge', VALIDATOR_HELP[VALIDATOR_LAST_RUN], [(base, round(finished_at))]))
    failed = [(dict(base, check=str(item['name']), subject=str(item.get('subject', 'node'))), 1)
              for item in checks if item['status'] == FAIL]
    families.append(Family(VALIDATOR_CHECK_FAILED, 'gauge', VALIDATOR_HELP[VALIDATOR_CHECK_FAILED], failed))
    return families


_NO_CHECKS = ({'name': 'run', 'subject': 'node', 'status': FAIL},)


def _validator_checks(validator: t.Any, result: t.Any) -> list[t.Mapping[str, t.Any]]:
    if not isinstance(result, t.Mapping):
        raise PrometheusError(f"validator '{validator}': the result must be a mapping, got {type(result).__name__}")
    checks = result['checks'] if 'checks' in result else _NO_CHECKS
    if not isinstance(checks, (list, tuple)):
        raise PrometheusError(f"validator '{validator}': checks must be a list, got {type(checks).__name__}")
    for item in checks:
        if not isinstance(item, t.Mapping):
            raise PrometheusError(f"validator '{validator}': a check must be a mapping, got {item!r}")
        if item.get('status') == FAIL and 'name' not in item:
            raise PrometheusError(f"validator '{validator}': a failing check has no name: {item!r}")
    return [item for item in checks if 'status' in item]


FamiliesOf = t.Callable[[str, t.List[t.Mapping[str, t.Any]], bool], t.List[Family]]


def validators_text(results: t.Mapping[str, t.Any], families_of: t.Optional[FamiliesOf] = None) -> str:
    """The textfile of one node's ``{validator: result}`` (llmforge_validate.prom), validators in the given order.

    A validator is healthy when its result says healthy and not failed; a result without checks (the validator
    errored or the node was not reached) counts as one failing ``run`` check of the node. `families_of(validator,
    checks, healthy)` gives a validator's families (the registry's, _validators.families); default
    `validator_families`.
    """
    families_of = families_of or validator_families
    if not isinstance(results, t.Mapping):
        raise PrometheusError(f'expected a mapping of validator name to result, got {type(results).__name__}')
    families = []
    for validator, result in results.items():
        checks = _validator_checks(validator, result)
        healthy = bool(result.get('healthy', False)) and not result.get('failed', False)
        families += families_of(str(validator), checks, healthy)
    if not families:
        families = validator_families('', [], False)
        families = [family._replace(samples=[]) for family in families]
    return render(merged(families))
