# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter writing a node's validation verdicts as node_exporter textfile metrics."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

_prometheus = module_utils('_prometheus')
_validators = module_utils('_validators')


def validator_metrics(results):
    """The llmforge_validate.prom text of one node's `{validator: result}`, each registered validator's metrics as it
    defines them (_validators.py)."""
    try:
        return _prometheus.validators_text(results, _validators.families)
    except _prometheus.PrometheusError as err:
        raise AnsibleFilterError(f'validator_metrics: {err}') from err


class FilterModule:
    """Validation metrics filter."""

    def filters(self):
        return {'validator_metrics': validator_metrics}
