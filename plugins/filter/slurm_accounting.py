# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_accounting_problems: what is wrong with declared Slurm accounts, users and QoS (see module_utils/_sacctmgr.py)."""

from __future__ import annotations

from ansible_collections.llmforge.cluster.plugins.plugin_utils._lazy_module_utils import module_utils

_sacctmgr = module_utils('_sacctmgr')


def slurm_accounting_problems(value, variable='slurm_accounting'):
    """One sentence per problem with the declared {qos, accounts, users}, each naming its path; [] when none."""
    try:
        _sacctmgr.validate(value, str(variable))
    except _sacctmgr.AccountingError as err:
        return err.problems
    return []


class FilterModule:
    """Slurm accounting filters."""

    def filters(self):
        return {'slurm_accounting_problems': slurm_accounting_problems}
