# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's validation verdicts as a Prometheus textfile for node_exporter (llmforge_validate.prom).

Pure Python, standard library only. The input is one node's `{validator: result}` (see _report.collect_results);
the output has two gauges, in the order of the validators:

    llmforge_validator_healthy{validator="gpu_topology"} 0
    llmforge_validator_check_failed{validator="gpu_topology",check="pcie_width",subject="GPU0"} 1

A validator is healthy when its result says healthy and not failed; a result without checks (the validator
errored or the node was not reached) counts as one failing `run` check of the node.
"""

from __future__ import annotations

import typing as t

_HEALTHY = ('# HELP llmforge_validator_healthy 1 when every check of the validator passed on this node at the last run.',
            '# TYPE llmforge_validator_healthy gauge')
_CHECK_FAILED = ('# HELP llmforge_validator_check_failed 1 for each check that failed at the last run.',
                 '# TYPE llmforge_validator_check_failed gauge')
_NO_CHECKS = ({'name': 'run', 'subject': 'node', 'status': 'fail'},)


class ValidatorMetricsError(ValueError):
    """Malformed input; the message names the validator."""


def label_value(value: t.Any) -> str:
    """A label value in the text exposition format: backslash and double quote escaped, a newline as a space."""
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', ' ')


def _result(validator: t.Any, result: t.Any) -> t.Mapping[str, t.Any]:
    if not isinstance(result, t.Mapping):
        raise ValidatorMetricsError(f"validator '{validator}': the result must be a mapping, got {type(result).__name__}")
    return result


def metrics_text(results: t.Mapping[str, t.Any]) -> str:
    """The textfile of one node's `{validator: result}`."""
    if not isinstance(results, t.Mapping):
        raise ValidatorMetricsError(f'expected a mapping of validator name to result, got {type(results).__name__}')
    lines = list(_HEALTHY)
    for validator, result in results.items():
        result = _result(validator, result)
        healthy = 1 if result.get('healthy', False) and not result.get('failed', False) else 0
        lines.append(f'llmforge_validator_healthy{{validator="{validator}"}} {healthy}')
    lines += _CHECK_FAILED
    for validator, result in results.items():
        checks = _result(validator, result)['checks'] if 'checks' in result else _NO_CHECKS
        for check in checks:
            if check.get('status') != 'fail':
                continue
            if 'name' not in check:
                raise ValidatorMetricsError(f"validator '{validator}': a failing check has no name: {check!r}")
            subject = check['subject'] if 'subject' in check else 'node'
            lines.append(f'llmforge_validator_check_failed{{validator="{validator}",check="{label_value(check["name"])}",'
                         f'subject="{label_value(subject)}"}} 1')
    return '\n'.join(lines) + '\n'
