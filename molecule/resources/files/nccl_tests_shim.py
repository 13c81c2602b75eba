# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test stand-in for nccl-tests binaries (all_reduce_perf, alltoall_perf) run through srun on simulated nodes.

Called as `python3 nccl_tests_shim.py <binary name> <nccl-tests arguments...>` by the bin/<binary> wrappers
molecule/resources/prepare.yml writes.

Rank 0 prints a captured nccl-tests output (the one-node 8-GPU fixture, or the two-node one when the job spans
two nodes); other ranks print nothing, as nccl-tests does. When a node of the job is listed in
<dir>/nccl_slow_nodes (names separated by blanks, the same file on every node), the bandwidth columns are scaled
by 0.5: a slow node, as a bad NIC or a downtrained link would make it. Arguments are ignored.
"""

import os
import re
import subprocess
import sys

SIM = os.path.dirname(os.path.realpath(__file__))
ROW = re.compile(r'^(\s+\d+\s+\d+\s+\S+\s+\S+\s+-?\d+)((?:\s+\S+){8})\s*$')


def job_nodes():
    nodelist = os.environ.get('SLURM_JOB_NODELIST', '')
    if not nodelist:
        return []
    out = subprocess.run(['scontrol', 'show', 'hostnames', nodelist], capture_output=True, text=True, timeout=10, check=False)
    return out.stdout.split()


def scaled(line, factor):
    match = ROW.match(line)
    if not match:
        return line
    time_a, alg_a, bus_a, wrong_a, time_b, alg_b, bus_b, wrong_b = match.group(2).split()
    fields = [f'{float(time_a) / factor:.1f}', f'{float(alg_a) * factor:.2f}', f'{float(bus_a) * factor:.2f}', wrong_a,
              f'{float(time_b) / factor:.1f}', f'{float(alg_b) * factor:.2f}', f'{float(bus_b) * factor:.2f}', wrong_b]
    return match.group(1) + ''.join(f'{field:>9}' for field in fields) + '\n'


def main():
    if os.environ.get('SLURM_PROCID', '0') != '0':
        return 0
    binary = sys.argv[1] if len(sys.argv) > 1 else ''
    nodes = job_nodes()
    two = len(nodes) > 1
    fixtures = {('all_reduce_perf', False): 'all_reduce_perf_8gpu.txt', ('all_reduce_perf', True): 'all_reduce_perf_2node_16gpu.txt',
                ('alltoall_perf', False): 'alltoall_perf_8gpu.txt', ('alltoall_perf', True): 'alltoall_perf_8gpu.txt'}
    if (binary, two) not in fixtures:
        sys.stderr.write(f'nccl_tests_shim: unknown test {binary!r}\n')
        return 2
    fixture = fixtures[(binary, two)]
    try:
        with open(os.path.join(SIM, 'nccl_slow_nodes'), encoding='utf-8') as handle:
            slow = set(handle.read().split())
    except FileNotFoundError:
        slow = set()
    factor = 0.5 if slow & set(nodes) else 1.0
    with open(os.path.join(SIM, 'nccl-fixtures', fixture), encoding='utf-8') as handle:
        for line in handle:
            sys.stdout.write(scaled(line, factor) if factor != 1.0 else line)
    return 0


if __name__ == '__main__':
    sys.exit(main())
