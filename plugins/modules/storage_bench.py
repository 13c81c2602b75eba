#!/usr/bin/python
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: storage_bench
short_description: Measure node-local scratch and shared file system throughput with fio
version_added: "0.1.0"
description:
  - Runs fio profiles in a directory and returns each profile's throughput in MiB/s and IOPS and its p99
    completion latency, for storage acceptance (see P(llmforge.cluster.storage_judge#filter), which judges the
    figures of every node against the inventory and the fleet median).
  - Node-local scratch profiles are V(scratch_seq_write) and V(scratch_seq_read) (1 MiB blocks, libaio, queue
    depth 32, one job) and V(scratch_rand_read) (random 4 KiB reads, libaio, 4 jobs of queue depth 64, judged on IOPS).
  - Shared file system profiles are V(shared_seq_read) (dataset streaming, 1 MiB blocks, 4 jobs of queue depth 16;
    run it on every node at once so the sum of the nodes' figures is the aggregate) and V(shared_ckpt_write)
    (checkpoint-sized write, 16 MiB blocks, one file per node written once through the page cache with an fsync
    at the end, which fio counts in the time).
  - The module writes only its own test files, in a new temporary directory C(.llmforge-fio-*) inside
    O(directory); each profile's files are removed once it is measured, and the temporary directory at the end,
    also when fio fails or times out, unless O(keep_files) is set. Nothing else in O(directory) is touched.
  - It refuses a O(directory) that does not exist or lacks the free space for the test files (O(size) for each
    fio job of the largest profile; of all profiles with O(keep_files)), naming the directory and both amounts.
  - With O(output) it reads a saved C(fio --output-format=json) output instead of running fio, and writes nothing.
  - The job building, the JSON parsing and the judging live in C(plugins/module_utils/_fio.py), which has no
    Ansible import.
options:
  directory:
    description:
      - Directory to test in, such as the node-local scratch mount or a directory of the shared file system.
      - Required unless O(output) is given.
    type: path
  profiles:
    description: The profiles to run, in this order.
    type: list
    elements: str
    choices: [scratch_seq_write, scratch_seq_read, scratch_rand_read, shared_seq_read, shared_ckpt_write]
    default: [scratch_seq_write, scratch_seq_read, scratch_rand_read]
  size:
    description:
      - Size of each fio job's file, in bytes or with K, M, G or T (powers of 1024), such as V(10G).
      - The time-based profiles loop over it for O(runtime) seconds; V(shared_ckpt_write) writes it once, so set
        it to a checkpoint shard's size. Larger than the node's RAM keeps buffered reads honest.
    type: str
    default: 1G
  runtime:
    description: Seconds each time-based profile runs (every profile but V(shared_ckpt_write)).
    type: int
    default: 30
  timeout:
    description:
      - Seconds one profile's fio run may take, laying out its files included; then fio and its job processes are
        killed, the test files removed and the module fails naming the profile and the limit.
    type: int
    default: 600
  numjobs:
    description: fio jobs (processes, one file each) of every profile, instead of the profile's own count.
    type: int
  iodepth:
    description: Queue depth of the libaio profiles instead of their own (V(shared_ckpt_write) is synchronous).
    type: int
  direct:
    description:
      - Use O_DIRECT, bypassing the page cache, in every profile but V(shared_ckpt_write).
      - When the file system refuses O_DIRECT (EINVAL; tmpfs on older kernels, some overlay and network file
        systems), the profile runs again buffered and the module warns; its C(direct) figure says which it was.
    type: bool
    default: true
  fio_path:
    description: The fio program.
    type: str
    default: fio
  keep_files:
    description: Keep the test files (and the temporary directory, returned as RV(work_dir)) for inspection.
    type: bool
    default: false
  output:
    description:
      - Path of a saved C(fio --output-format=json) output to read instead of running fio (text fio printed before
        the JSON is allowed).
      - Its profile is read from the job name (C(llmforge-<profile>)); for other job names give exactly one profile
        in O(profiles).
    type: path
attributes:
  check_mode:
    support: partial
    description: Can run in check mode and return the status without running the benchmark.
    details:
      - The benchmark writes test files, so in check mode it is not run and the module returns C(skipped=true).
      - With O(output) nothing is written and check mode reads the saved output as usual.
  diff_mode:
    support: none
    description: The test files are removed again, so there is nothing to diff.
notes:
  - Give V(shared_seq_read) and V(shared_ckpt_write) a task each, run on every node at once (forks at least the
    number of nodes) - Ansible starts a task on all nodes together, while the profiles of one task run one after
    the other and drift apart. The judging filter checks that the nodes' runs overlapped before calling their sum
    an aggregate.
  - A task killed from outside (an C(async) limit, a lost connection) can leave the temporary directory behind;
    it is named C(.llmforge-fio-*) inside O(directory).
  - The figures are fio's. With several jobs, MiB/s and IOPS are summed, and the p99 latency is the worst job's.
requirements:
  - fio 3.x (Debian package C(fio)) on the managed node, unless O(output) is given
author:
  - llmforge.cluster maintainers (@llmforge)
"""

EXAMPLES = r"""
- name: Measure the node-local scratch
  llmforge.cluster.storage_bench:
    directory: /scratch
    size: 10G
    runtime: 30
  register: scratch

- name: Stream from the shared file system, on every node at once
  llmforge.cluster.storage_bench:
    directory: /shared/llmforge-acceptance
    profiles: [shared_seq_read]
    size: 20G
  register: shared_read

- name: Write a checkpoint shard to the shared file system, on every node at once
  llmforge.cluster.storage_bench:
    directory: /shared/llmforge-acceptance
    profiles: [shared_ckpt_write]
    size: 40G
  register: shared_ckpt

- name: Show the scratch read bandwidth
  ansible.builtin.debug:
    msg: "{{ read.mib_s }} MiB/s, p99 {{ read.lat_p99_ms }} ms"
  vars:
    read: "{{ scratch.profiles.scratch_seq_read }}"

- name: Read a saved fio output again
  llmforge.cluster.storage_bench:
    output: /var/log/llmforge/fio-scratch_seq_read.json
"""

RETURN = r"""
profiles:
  description: The figures of each profile measured, by profile name.
  returned: success, and when a later profile failed, the ones measured before it
  type: dict
  contains:
    mib_s:
      description: Throughput in MiB/s (all the profile's jobs together).
      type: float
      sample: 6400.2
    iops:
      description: I/O operations per second (all the profile's jobs together).
      type: float
    lat_p99_ms:
      description: The 99th percentile completion latency in ms (the worst job's), null when no I/O completed.
      type: float
    lat_mean_ms:
      description: The mean completion latency in ms, weighted by each job's I/O count.
      type: float
    io_mib:
      description: MiB moved during the measurement (files laid out beforehand not counted).
      type: float
    runtime_s:
      description: Seconds the measurement lasted (the longest job; with V(shared_ckpt_write), the fsync included).
      type: float
    started_at:
      description: When the measurement started, in seconds since the epoch (fio's report time less the runtime).
      type: float
    ended_at:
      description: When fio reported, in seconds since the epoch.
      type: float
    jobs:
      description: The fio jobs in the output.
      type: int
    fio_version:
      description: fio's version, such as C(fio-3.33).
      type: str
    figure:
      description: The figure the profile is judged on, C(mib_s) or C(iops).
      type: str
    rw:
      description: fio's rw of the profile, such as C(randread).
      type: str
    bs:
      description: The block size.
      type: str
    numjobs:
      description: fio jobs run (not with O(output)).
      type: int
    iodepth:
      description: Queue depth of each job (not with O(output)).
      type: int
    size_bytes:
      description: Size of each job's file (not with O(output)).
      type: int
    direct:
      description: Whether the profile ran with O_DIRECT (not with O(output)).
      type: bool
    command:
      description: The fio argv that was run (not with O(output)).
      type: list
      elements: str
directory:
  description: The directory tested (with O(output), null).
  returned: always
  type: str
work_dir:
  description: The temporary directory the test files were written to; removed unless O(keep_files).
  returned: when fio ran
  type: str
  sample: /scratch/.llmforge-fio-k2x9d1
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.llmforge.cluster.plugins.module_utils import _fio as fio
from ansible_collections.llmforge.cluster.plugins.module_utils import _module_errors as errors


def _read_saved(path, profiles):
    """The figures of a saved fio output: {profile: figures}."""
    parsed = errors.read_output(path, fio.parse_output, fio.FioError, 'output')
    profile = fio.profile_in(parsed)
    if profile is None:
        if len(profiles) != 1:
            raise fio.FioError(f"{path}: the job name ({', '.join(sorted(set(parsed['jobs'])))}) names no profile; "
                               f'give exactly one in profiles')
        profile = profiles[0]
    if parsed['errors']:
        first = parsed['errors'][0]
        raise fio.FioError(f"{path}: fio job {first['job']} failed with {first['error']}")
    spec = fio.PROFILES[profile]
    return {profile: dict(fio.figures(parsed, profile), figure=spec.figure, rw=spec.rw, bs=spec.bs)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            directory=dict(type='path'),
            profiles=dict(type='list', elements='str', choices=list(fio.PROFILES), default=fio.SCRATCH_PROFILES),
            size=dict(type='str', default='1G'),
            runtime=dict(type='int', default=30),
            timeout=dict(type='int', default=600),
            numjobs=dict(type='int'),
            iodepth=dict(type='int'),
            direct=dict(type='bool', default=True),
            fio_path=dict(type='str', default='fio'),
            keep_files=dict(type='bool', default=False),
            output=dict(type='path'),
        ),
        required_one_of=[('directory', 'output')],
        supports_check_mode=True,
    )
    params = module.params
    empty = dict(profiles={}, directory=params['directory'])
    if params['output'] is not None:
        with errors.last_resort(module.fail_json, f"output {params['output']}", **empty):
            try:
                profiles = _read_saved(params['output'], params['profiles'])
            except fio.FioError as err:
                module.fail_json(msg=str(err), **empty)
        module.exit_json(changed=False, profiles=profiles, directory=None)
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, **empty,
                         msg=f"storage_bench writes test files in {params['directory']}: not run in check mode")
    if params['timeout'] <= params['runtime']:
        module.fail_json(msg=f"timeout ({params['timeout']} s) must be longer than runtime ({params['runtime']} s): "
                             'it also covers laying out the files', **empty)
    what = f"fio's output for {params['directory']}"
    with errors.last_resort(module.fail_json, what, **empty):
        try:
            result = fio.bench(os.path.abspath(params['directory']), params['profiles'], params['size'],
                               params['runtime'], params['timeout'], fio_path=params['fio_path'],
                               direct=params['direct'], numjobs=params['numjobs'], iodepth=params['iodepth'],
                               keep_files=params['keep_files'], warn=module.warn)
        except fio.FioError as err:
            module.fail_json(msg=str(err), profiles=err.partial, directory=params['directory'])
    module.exit_json(changed=params['keep_files'], directory=params['directory'], **result)


if __name__ == '__main__':
    main()
