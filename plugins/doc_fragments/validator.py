# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    """What the validator modules (gpu_topology, rdma_links, nccl_tests, scratch_devices, dcgm_diag) share; their
    argument_spec gets fail_on_mismatch from _module_errors.validator_options."""

    DOCUMENTATION = r"""
options:
  fail_on_mismatch:
    description: Fail the task, listing each failing check, when any check fails. Results are returned either way.
    type: bool
    default: true
"""

    # Every module that only reads: the validators above, ib_topology, slurm_node_facts and sssd_status
    # (llmforge.cluster.validator.read_only).
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: The module only reads, so check mode runs it unchanged.
  diff_mode:
    support: none
    description: Nothing is changed, so there is nothing to diff.
"""
