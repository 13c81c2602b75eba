# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of storage acceptance: every node's storage_bench figures judged against its inventory and the fleet."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import UNSET, module_utils

fio = module_utils('_fio')

# The inventory variable holding a node's expectations ({scratch_seq_read_mib_s: 2000, ...}).
EXPECTED_VARIABLE = 'storage_expected'


def storage_judge(nodes, hostvars, registered, fraction=UNSET, cluster_expected=None):
    """{nodes: {node: {checks, healthy, profiles}}, cluster: the storage stage} of the nodes' registered results.

    fraction: a node fails below this share of the fleet median; default, fio.DEFAULT_FRACTION.
    """
    fraction = fio.DEFAULT_FRACTION if fraction is UNSET else fraction
    if isinstance(registered, str):
        registered = [registered]
    try:
        results, expected = {}, {}
        for node in nodes:
            facts = hostvars[node]
            results[node] = [facts.get(name) for name in registered or []]
            expected[node] = facts.get(EXPECTED_VARIABLE) or {}
        return fio.judge(results, expected, fraction, cluster_expected or {})
    except (fio.FioError, KeyError, TypeError, AttributeError) as err:
        raise AnsibleFilterError(f'storage_judge: {err}') from err


class FilterModule:
    """Storage acceptance filters."""

    def filters(self):
        return {
            'storage_judge': storage_judge,
        }
