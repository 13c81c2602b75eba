# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validate role's drain planning at 4,096 nodes: which nodes Slurm drains and resumes after a validation.

The report is bench_report_html.py's fleet (4,096 HGX H200 nodes with the fixture node's real results, a few failing,
unreachable or not validated). Slurm's answer, one `scontrol show node --oneliner` of every node, has most nodes
idle, DRAINED_OURS healthy nodes drained with one of our reasons (to be resumed), ADMIN_DRAINED drained by an
administrator (left alone) and the failing nodes idle (to be drained). Medians of REPEATS runs of the filters the
role calls (module_utils/_slurm_drain.py through plugins/filter/slurm_drain.py):

- plan: drain_plan of the report's nodes (every node's drain reason from its checks), the not validated ones left
  out as the role leaves them out;
- decide: drain_decisions of that plan and the scontrol text (every node's line read, drain/resume/leave decided).

Bounds (exit status 1 past either), about 4 times the figures of the 2-core test machine (plan 0.31 s, decide
0.34 s): PLAN_BOUND_S 1.2 s, DECIDE_BOUND_S 1.4 s.

Run from the repository root: PYTHONPATH=collections:bench .venv/bin/python bench/bench_drain.py [--nodes N]
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import sys
import time

from benchlib import median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'collections'))
# pylint: disable=wrong-import-position
from bench_report_html import NODES, fleet_report  # noqa: E402

from ansible_collections.llmforge.cluster.plugins.filter.slurm_drain import drain_decisions, drain_plan  # noqa: E402

REPEATS = 5
PLAN_BOUND_S = 1.2
DECIDE_BOUND_S = 1.4
DRAINED_OURS = 40  # healthy now, drained by an earlier run for a port down: resumed
ADMIN_DRAINED = 20  # drained by an administrator: left alone


def scontrol_text(names: list[str], failing: set[str]) -> str:
    """`scontrol show node --oneliner` of every node: idle, a few drained by us or by an administrator."""
    healthy = [name for name in names if name not in failing]
    ours = set(healthy[1::len(healthy) // DRAINED_OURS][:DRAINED_OURS])
    admin = set(healthy[2::len(healthy) // ADMIN_DRAINED][:ADMIN_DRAINED])
    lines = []
    for name in names:
        state, reason = 'IDLE', '(null)'
        if name in ours:
            state, reason = 'IDLE+DRAIN', 'llmforge: state mlx5_3/1 DOWN [root@2026-12-06T10:00:00]'
        elif name in admin:
            state, reason = 'IDLE+DRAIN', 'firmware update (ops) [alice@2026-12-06T09:00:00]'
        lines.append(f'NodeName={name} Arch=x86_64 CoresPerSocket=56 CPUAlloc=0 CPUTot=224 Gres=gpu:h200:8 '
                     f'NodeAddr={name} State={state} ThreadsPerCore=2 Partitions=gpu Reason={reason}')
    return '\n'.join(lines) + '\n'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--nodes', type=int, default=NODES)
    args = parser.parse_args()
    started = time.perf_counter()
    report = fleet_report(args.nodes)
    names = [node['name'] for node in report['nodes']]
    text = scontrol_text(names, set(report['summary']['failing']))
    print(f"{len(names)} nodes ({report['summary']['failing_nodes']} failing), {report['summary']['checks']['total']:,} "
          f'checks; scontrol text {len(text) / 2**20:.1f} MiB; set up in {time.perf_counter() - started:.1f} s')
    hostvars: dict = {}
    state: dict = {}
    # The role leaves the nodes it did not validate out of the plan (report.yml: rejectattr on _validate_not_validated).
    not_validated = {node['name'] for node in report['nodes']
                     if node['healthy'] and not node['counts']['pass'] and not node['counts']['warn']}

    def plan():
        state['plan'] = [entry for entry in drain_plan(report['nodes'], hostvars) if entry['host'] not in not_validated]

    def decide():
        state['decisions'] = drain_decisions(state['plan'], text)

    plan_seconds = median_seconds(plan, REPEATS)
    decide_seconds = median_seconds(decide, REPEATS)
    actions = collections.Counter(decision['action'] for decision in state['decisions'])
    # A benchmark of wrong output is worthless: every failing node drained, ours resumed, the administrator's left.
    assert actions['drain'] == report['summary']['failing_nodes'], actions
    assert actions['resume'] == DRAINED_OURS and len(state['decisions']) == len(names) - len(not_validated), actions
    print(f"decisions: {actions['drain']} drain, {actions['resume']} resume, {actions[None]} nothing to do")
    print(f'plan   (drain_plan of the report nodes):           {plan_seconds:.3f} s (median of {REPEATS}), '
          f'bound {PLAN_BOUND_S} s')
    print(f'decide (drain_decisions from one scontrol text):   {decide_seconds:.3f} s (median of {REPEATS}), '
          f'bound {DECIDE_BOUND_S} s')
    failed = [f'{label} took {seconds:.3f} s, over the bound of {bound} s'
              for label, seconds, bound in (('plan', plan_seconds, PLAN_BOUND_S), ('decide', decide_seconds, DECIDE_BOUND_S))
              if seconds > bound]
    for line in failed:
        print(f'FAIL: {line}', file=sys.stderr)
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
