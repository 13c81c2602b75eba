#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dcgm_diag
short_description: Run NVIDIA DCGM GPU diagnostics at a level and judge the result
version_added: "0.1.0"
description:
  - "Runs C(dcgmi diag -r <level> -j) (optionally on some GPUs only) with a timeout, or reads a saved copy of its
    output, and returns one verdict for the node, the result of every test on every GPU, the failing GPUs and a
    one-line reason fit for a Slurm drain (C(llmforge: dcgm L1 fail: software GPU3))."
  - "Verdicts: C(pass); C(warn) (nothing failed, but a result carries warnings or a test was skipped); C(fail)
    (a test failed on a GPU); C(error) (dcgmi reported a runtime error such as a lost host engine connection,
    exited non-zero without results, or ran no test); C(hang) (dcgmi did not finish within O(timeout) and was
    killed). A timeout is a verdict, not a module error."
  - Reads the JSON of DCGM 2.x/3.x (C(DCGM GPU Diagnostic), C(gpu_id)) and of DCGM 4.x (C(DCGM Diagnostic),
    entities and test summaries). Output that is not that JSON (truncated, an unknown status) fails the module
    with a message naming the field at fault.
  - Level 1 takes seconds and fits a health check; level 2 about two minutes; level 3 ten to thirty minutes and
    level 4 hours, for a node taken out of service. Run levels 3 and 4 with C(async).
  - The parser lives in C(plugins/module_utils/_dcgm_diag.py), which has no Ansible import, so the same code runs
    on nodes outside Ansible.
options:
  level:
    description: Diagnostic level, the C(-r) of C(dcgmi diag) (1 short, 2 medium, 3 long, 4 extended).
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  timeout:
    description:
      - Seconds C(dcgmi diag) may run before it is killed and the verdict is C(hang).
      - Default by level, with a margin over DCGM's own durations on an 8-GPU node; 120 (level 1), 600 (level 2),
        2700 (level 3), 10800 (level 4).
    type: int
  dcgmi_path:
    description: Path or name (searched in PATH) of C(dcgmi).
    type: path
    default: dcgmi
  output:
    description:
      - Path of a saved C(dcgmi diag -r <level> -j) output on the managed node, judged instead of running dcgmi.
      - O(level) still names the level in the reason.
    type: path
  gpus:
    description: GPU indices to test (C(dcgmi diag -i 0,1,...)); all GPUs when omitted. Not used with O(output).
    type: list
    elements: int
  reason_prefix:
    description:
      - Text that starts RV(reason), the tag by which the collection's drains are found again and lifted.
      - An empty string leaves the reason without a prefix.
    type: str
    default: "llmforge:"
extends_documentation_fragment:
  - llmforge.cluster.validator
  - llmforge.cluster.validator.read_only
notes:
  - O(fail_on_mismatch) fails the task when the node is not healthy (verdict C(fail), C(error) or C(hang)); the
    results are returned either way.
  - "dcgmi's exit status is weighed with its JSON: 0, 226 (a test failed) and 205 (a failure that asks to isolate
    the GPU) come with results; a non-zero exit with JSON that shows no failure is the verdict C(error)."
  - A killed dcgmi may leave its diagnostic running inside nv-hostengine until it finishes; a run started meanwhile
    gets C(DCGM_ST_DIAG_ALREADY_RUNNING) (exit 217), the verdict C(error).
  - Do not run level 2 or above in a Slurm prolog; they take minutes and hang jobs on large nodes.
requirements:
  - C(dcgmi) of NVIDIA DCGM 2.x, 3.x or 4.x on the managed node, with nv-hostengine running or embeddable
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Short diagnostic, fail the task when a GPU fails
  llmforge.cluster.dcgm_diag:
    level: 1

- name: Long diagnostic of a quarantined node, judged afterwards
  llmforge.cluster.dcgm_diag:
    level: 3
    fail_on_mismatch: false
  async: 3600
  poll: 30
  register: dcgm_l3

- name: Drain the node with the diagnostic's reason when it failed
  ansible.builtin.command:
    argv: [scontrol, update, "NodeName={{ inventory_hostname }}", State=DRAIN, "Reason={{ dcgm_l3.reason }}"]
  delegate_to: "{{ slurm_controller }}"
  when: not dcgm_l3.healthy
  changed_when: true

- name: Medium diagnostic of two GPUs only
  llmforge.cluster.dcgm_diag:
    level: 2
    gpus: [0, 1]

- name: Judge a saved output
  llmforge.cluster.dcgm_diag:
    level: 2
    output: /var/log/llmforge/dcgm-diag-2.json
    fail_on_mismatch: false
"""

RETURN = r"""
verdict:
  description: C(pass), C(warn), C(fail), C(error) or C(hang).
  returned: always
  type: str
  sample: fail
healthy:
  description: True when the verdict is C(pass) or C(warn).
  returned: always
  type: bool
  sample: false
reason:
  description:
    - "One line for a Slurm drain, C(<reason_prefix> dcgm L<level> <verdict>: <detail>), ASCII without quotes, at
      most 120 characters. The detail names the failing tests with their GPUs, the tests with warnings or skips,
      dcgmi's error, or the timeout."
  returned: always
  type: str
  sample: "llmforge: dcgm L3 fail: memory GPU3; targeted_power GPU6"
level:
  description: The diagnostic level.
  returned: always
  type: int
  sample: 3
failing_gpus:
  description: Indices of the GPUs with a failing result.
  returned: always
  type: list
  elements: int
  sample: [3, 6]
messages:
  description: "dcgmi's runtime error and every warning of every result, as C(<test> <entity>: <text>)."
  returned: always
  type: list
  elements: str
  sample: ["memory GPU3: Found 4 faulty memory elements on GPU 3"]
counts:
  description:
    - Numbers of the run; C(tests), C(results) (one per test per entity), C(pass), C(fail), C(warn), C(skip)
      (results by status), C(warnings) (warning entries) and C(gpus) (distinct GPUs with a result).
  returned: always
  type: dict
  sample: {"tests": 7, "results": 56, "pass": 54, "fail": 2, "warn": 0, "skip": 0, "warnings": 2, "gpus": 8}
tests:
  description: Every test dcgmi reported, in its order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Test name as dcgmi printed it (4.x plugin names such as C(memory); 3.x display names such as
        C(GPU Memory)).
      type: str
      sample: memory
    key:
      description: The name the reason uses; the 4.x plugin name, or a 3.x display name in lower_snake case.
      type: str
      sample: memory
    category:
      description: dcgmi's category, C(Deployment), C(Integration), C(Hardware) or C(Stress).
      type: str
      sample: Hardware
    status:
      description: C(fail), C(warn), C(pass) or C(skip) (every result skipped) for the whole test.
      type: str
      sample: fail
    results:
      description: The test's outcome per entity.
      type: list
      elements: dict
      contains:
        entity:
          description: C(GPU3), C(CPU0), C(GPU0-7) for a 3.x result that covers several GPUs, or C(node).
          type: str
          sample: GPU3
        gpus:
          description: GPU indices the result is about.
          type: list
          elements: int
          sample: [3]
        status:
          description: C(pass), C(fail), C(warn) or C(skip).
          type: str
          sample: fail
        warnings:
          description: dcgmi's warnings with their DCGM error id, category and severity (null when not given).
          type: list
          elements: dict
          sample: [{"message": "Found 4 faulty memory elements on GPU 3", "error_id": 52, "error_category": 10,
                    "error_severity": 2}]
        info:
          description: dcgmi's informational messages.
          type: list
          elements: str
    warnings:
      description: Warnings of the test not tied to an entity (4.x C(test_summary)).
      type: list
      elements: dict
    info:
      description: Informational messages of the test not tied to an entity.
      type: list
      elements: str
dcgm_version:
  description: DCGM version dcgmi reported; null when absent.
  returned: always
  type: str
  sample: 4.2.3
driver_version:
  description: NVIDIA driver version dcgmi detected; null when absent.
  returned: always
  type: str
  sample: 570.133.20
runtime_error:
  description: dcgmi's runtime error text (the run could not complete); null otherwise.
  returned: always
  type: str
  sample: "Error: Unable to complete diagnostic for group 2147483647. Return: (-21) : Host engine connection
    invalid/disconnected"
exit_code:
  description: dcgmi's exit status; null when the output was read from O(output) or dcgmi was killed.
  returned: always
  type: int
  sample: 205
duration_seconds:
  description: Seconds dcgmi ran (the timeout for C(hang)); null when the output was read from O(output).
  returned: always
  type: float
  sample: 41.7
command:
  description: The command run; empty when the output was read from O(output).
  returned: always
  type: list
  elements: str
  sample: [dcgmi, diag, -r, "3", -j]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _dcgm_diag as dcgm
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors


def main():
    module = AnsibleModule(
        argument_spec=errors.validator_options(
            level=dict(type='int', choices=list(dcgm.LEVELS), default=1),
            timeout=dict(type='int'),
            dcgmi_path=dict(type='path', default='dcgmi'),
            output=dict(type='path'),
            gpus=dict(type='list', elements='int'),
            reason_prefix=dict(type='str', default=dcgm.REASON_PREFIX),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    if '/' not in params['dcgmi_path']:
        params['dcgmi_path'] = module.get_bin_path(params['dcgmi_path'], opt_dirs=['/usr/bin', '/usr/local/bin']) \
            or params['dcgmi_path']
    with errors.last_resort(module.fail_json, **dcgm.empty_result(params['level'])) as current:
        try:
            outcome = dcgm.module_work(params, current)
        except dcgm.DcgmDiagError as err:
            module.fail_json(msg=str(err), **dcgm.empty_result(params['level'], current.argv))
        if params['fail_on_mismatch'] and not outcome['healthy']:
            details = '; '.join(outcome['messages'][:5])
            module.fail_json(msg=outcome['reason'] + (f' ({details})' if details else ''), **outcome)
    module.exit_json(**outcome)


if __name__ == '__main__':
    main()
