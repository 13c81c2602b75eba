#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nccl_tests
short_description: Run or re-judge an nccl-tests benchmark and prove its bus bandwidth and correctness
version_added: "0.1.0"
description:
  - Runs one nccl-tests command (such as C(all_reduce_perf) under C(srun) or C(mpirun)), or reads the saved
    stdout of one, and parses the per-size result rows, the devices, the out-of-bounds count and the average
    bus bandwidth.
  - Judges the bus bandwidth at the plateau, the best out-of-place busbw over the large sizes, never the
    C(# Avg bus bandwidth) line, which averages every size including latency-bound ones.
  - Every check is returned with a status C(pass), C(fail) or C(skip) so a playbook or a report can act on it.
  - The parser lives in C(plugins/module_utils/_nccl_tests.py), which has no Ansible import.
options:
  command:
    description:
      - The argv to run, the program first, without a shell, for example
        C([srun, -N1, --gres=gpu:8, all_reduce_perf, -b, '8', -e, 16G, -f, '2', -g, '8']).
      - Exactly one of O(command) and O(output_file) is required.
    type: list
    elements: str
  output_file:
    description:
      - Path of a saved nccl-tests stdout to judge again instead of running a command.
      - A saved output carries no exit status, so the C(exit) check relies on the C(FAILED) and C(Test failure)
        lines (and on a trailing C([rc=N]) line where the capture recorded one).
    type: path
  timeout:
    description: Seconds the command may run before the module kills it and fails naming the command and the limit.
    type: int
    default: 600
  min_busbw_gbps:
    description:
      - Minimum plateau bus bandwidth in GB/s. Without it the C(busbw) check is C(skip) and only reports the figure.
      - Published 8-GPU H100/H200 SXM all-reduce plateaus are about 430-480 GB/s; two nodes about 360-390 GB/s.
    type: float
  plateau_min_bytes:
    description:
      - The plateau is the best out-of-place busbw over the sizes of at least this many bytes. When no size that
        large was run, the largest size run is used and the C(busbw) check message says so.
    type: int
    default: 1073741824
extends_documentation_fragment:
  - llmforge.cluster.validator
  - llmforge.cluster.validator.read_only
notes:
  - nccl-tests only reads GPU state (it moves data between buffers it allocates), so O(command) runs in check mode
    too and the module always reports C(changed=false).
  - A non-zero exit, a C(FAILED) line (such as C(# Avg bus bandwidth ... FAILED) with C(NCCL_TESTS_MIN_BW)) or a
    C(Test failure) line fails the C(exit) check; a run that printed no result rows fails the task quoting the
    first error line.
  - Keep the sizes up to at least O(plateau_min_bytes), such as C(-e 16G), so the plateau is reached.
requirements:
  - With O(command), the nccl-tests binaries (such as C(all_reduce_perf)) and their launcher (such as C(srun) or
    C(mpirun)) on the managed node; with O(output_file), only the saved output
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Prove an 8-GPU node's all-reduce bandwidth
  llmforge.cluster.nccl_tests:
    command: [srun, -N1, --gres=gpu:8, all_reduce_perf, -b, "8", -e, 16G, -f, "2", -g, "8"]
    min_busbw_gbps: 430
    timeout: 900

- name: Judge a saved two-node run again, reporting instead of failing
  llmforge.cluster.nccl_tests:
    output_file: /var/log/llmforge/all_reduce_2node.txt
    min_busbw_gbps: 350
    fail_on_mismatch: false
  register: nccl

- name: Show the plateau
  ansible.builtin.debug:
    msg: "{{ nccl.plateau_busbw_gbps }} GB/s at {{ nccl.plateau_bytes }} bytes"
"""

RETURN = r"""
rows:
  description: One result row per message size, in the printed order.
  returned: success
  type: list
  elements: dict
  contains:
    size:
      description: Message size in bytes.
      type: int
    count:
      description: Elements per rank.
      type: int
    type:
      description: Data type, such as C(float).
      type: str
    redop:
      description: Reduction operation, C(none) for collectives that do not reduce.
      type: str
    root:
      description: Root rank, C(-1) when the collective has none.
      type: int
    out_of_place:
      description: C({time_us, algbw_gbps, busbw_gbps, wrong}) of the out-of-place run; C(wrong) is null for C(N/A).
      type: dict
    in_place:
      description: The same for the in-place run.
      type: dict
avg_busbw_gbps:
  description: The C(# Avg bus bandwidth) figure, the mean over all sizes.
  returned: success
  type: float
plateau_busbw_gbps:
  description: The busbw judged, the best out-of-place busbw over sizes of at least O(plateau_min_bytes).
  returned: success
  type: float
plateau_bytes:
  description: The size the plateau busbw was measured at.
  returned: success
  type: int
out_of_bounds:
  description: The C(# Out of bounds values) count, null when not printed.
  returned: success
  type: int
nccl_tests_version:
  description: nccl-tests version.
  returned: success
  type: str
  sample: 2.19.6
nccl_version:
  description: NCCL library version, null when not printed.
  returned: success
  type: str
  sample: 2.28.9
collective:
  description: The test binary, such as C(all_reduce_perf).
  returned: success
  type: str
exit_code:
  description: Exit status of O(command); with O(output_file) the recorded C([rc=N]) or null.
  returned: success
  type: int
devices:
  description: The C(# Using devices) lines.
  returned: success
  type: list
  elements: dict
  contains:
    rank:
      description: Rank.
      type: int
    host:
      description: Host name.
      type: str
    device:
      description: CUDA device index on the host.
      type: int
    bus_id:
      description: PCI bus id as printed.
      type: str
      sample: "0000:18:00"
    name:
      description: GPU name.
      type: str
      sample: NVIDIA H200
checks:
  description:
    - Every check with its verdict.
    - Each check is the record every validator of this collection returns (docs/validate.md) with C(name), C(subject),
      C(status) (C(pass), C(fail) or C(skip)), C(expected), C(actual) and C(message) (one sentence for people).
    - C(name) is C(busbw), C(wrong), C(out_of_bounds) or C(exit).
    - C(subject) is the collective, such as C(all_reduce_perf), or C(node) for a skipped check.
  returned: always
  type: list
  elements: dict
healthy:
  description: True when no collective failed its bandwidth or correctness check.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors
from ansible_collections.llmforge.cluster.plugins.module_utils import _nccl_tests as nccl


def main():
    module = AnsibleModule(
        argument_spec=errors.validator_options(
            command=dict(type='list', elements='str'),
            output_file=dict(type='path'),
            timeout=dict(type='int', default=600),
            min_busbw_gbps=dict(type='float'),
            plateau_min_bytes=dict(type='int', default=1073741824),
        ),
        mutually_exclusive=[('command', 'output_file')],
        required_one_of=[('command', 'output_file')],
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(checks=[], healthy=False)
    errors.positive(module, 'timeout', **empty)
    if params['plateau_min_bytes'] < 0:
        module.fail_json(msg=f"plateau_min_bytes must not be negative, got {params['plateau_min_bytes']}", **empty)
    source = f"the output of {' '.join(params['command'])!r}" if params['command'] is not None else f"output_file {params['output_file']}"

    def work(current):
        if params['command'] is not None:
            if not params['command']:
                raise nccl.NcclTestsError('command is empty: give the program and its arguments')
            return nccl.run_and_judge(params['command'], params['timeout'], params['min_busbw_gbps'],
                                      params['plateau_min_bytes'])
        facts = errors.read_output(params['output_file'], nccl.parse_output, nccl.NcclTestsError, 'output_file')
        return nccl.evaluate(facts, params['min_busbw_gbps'], params['plateau_min_bytes'])

    errors.run_validator(module, work, (nccl.NcclTestsError,), nccl.failure_summary, source, **empty)


if __name__ == '__main__':
    main()
