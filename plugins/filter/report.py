# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that gather the validators' results of a cluster and turn them into a report and its files."""

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import plugin_utils

rep = plugin_utils('_report')


def _wrap(name: str, func: t.Callable[..., t.Any], *args: t.Any) -> t.Any:
    try:
        return func(*args)
    except rep.ReportError as err:
        raise AnsibleFilterError(f'{name}: {err}') from err


def validator_results(nodes, hostvars, verdicts=None, hardware=None):
    """`{node: {validator: result}}` of the nodes: their registered hardware stage results (missing: the node was not
    reached), or those of `hardware` (`{node: {validator: result}}`: the nodes the stage ran through Slurm, or left
    alone), then the `{validator: {node: result}}` verdicts of the stages that judged them."""
    registered = {}
    for node in nodes:
        if hardware and node in hardware:
            registered[node] = {validator: hardware[node].get(validator) for validator in rep.REGISTERED_VALIDATORS}
            continue
        facts = hostvars[node]
        registered[node] = {validator: facts.get(variable) if hasattr(facts, 'get') else None
                            for validator, variable in rep.REGISTERED_VALIDATORS.items()}
    return _wrap('validator_results', rep.collect_results, registered, verdicts)


def llmforge_report(results, cluster, generated_at, stages=None):
    """The report dict of `{node: {validator: result}}` and cluster-level `{stage: result}` (see _report.build_report)."""
    return _wrap('llmforge_report', rep.build_report, results, cluster, generated_at, stages)


def report_junit(report):
    """The report as JUnit XML text."""
    return _wrap('report_junit', rep.render_junit, report)


def report_html(report):
    """The report as one self-contained HTML page."""
    return _wrap('report_html', rep.render_html, report)


def report_files(report):
    """`[{name, content}]`: report.json, junit.xml and report.html of the report."""
    return _wrap('report_files', rep.report_files, report)


class FilterModule:
    """Validation report filters."""

    def filters(self):
        return {
            'llmforge_report': llmforge_report,
            'report_junit': report_junit,
            'report_html': report_html,
            'report_files': report_files,
            'validator_results': validator_results,
        }
