# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html of a 4,096-node fleet: its size, and how long headless Chromium takes to load and render it.

The fleet: every node has the real results of the HGX H200 fixture node through llmforge-validate-node's code
(bench_validate_slurm.one_node); FAILING nodes have mlx5_3 port 1 down (the NDR fixture's port-down tree),
UNREACHABLE ones were not reached, BUSY ones were busy in Slurm and not validated (recorded as the Slurm path records
them), the others are healthy. The filters the play calls build the report (validator_results, llmforge_report) and
the page (report_html), which is written to a file; then the Chromium of the browser tests
(tests/browser/browser_chromium.py, same flags) opens it REPEATS times, each time in a fresh browser driven over
the DevTools protocol, and reports, since navigation started, when the page was parsed, loaded, and rendered (two
animation frames after the load event: styled, laid out, the first screen painted). The browser's own start is not
in the figure.

Bounds (exit status 1 past either, or when a run has not rendered after LOAD_TIMEOUT_S; 2 when Chromium is missing
or fails):

- report.html at most SIZE_BOUND_MIB (4 MiB; measured 0.69 MiB on the 2-core test machine);
- rendered (median of REPEATS) within RENDER_BOUND_S (2 s; measured 0.24 s there, 0.36 to 0.45 s while another job
  ran beside it).

When the page showed every node's checks and topology matrix, this fleet's report.html was 121.3 MiB and took 70 s
to render there (median of 3: 39, 70 and 84 s).

Run from the repository root: PYTHONPATH=collections:bench .venv/bin/python bench/bench_report_html.py
[--nodes N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

from benchlib import median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'collections'))
sys.path.insert(0, str(REPO / 'tests' / 'browser'))
# pylint: disable=wrong-import-position
import browser_chromium as chromium  # noqa: E402
from bench_validate_slurm import one_node  # noqa: E402

from ansible_collections.llmforge.cluster.plugins.filter.report import (  # noqa: E402
    llmforge_report, report_html, validator_results)

NODES = 4096
REPEATS = 3
SIZE_BOUND_MIB = 4.0
RENDER_BOUND_S = 2.0
LOAD_TIMEOUT_S = 120  # a run that has not rendered by then is over the bound: it is stopped
FAILING = 4  # nodes with a port down, spread over the fleet
UNREACHABLE = 2
BUSY = 40  # nodes busy in Slurm: listed, not validated
WHEN = '2026-12-07T00:00:00Z'


def fleet(nodes: int = NODES) -> tuple[list[str], dict, dict]:
    """(names, hostvars, hardware): validator_results' input for a fleet of `nodes` HGX nodes, a few failing,
    unreachable or not validated (their names: gpu0001 .. gpuNNNN)."""
    names = [f'gpu{index:04d}' for index in range(1, nodes + 1)]
    with tempfile.TemporaryDirectory() as first, tempfile.TemporaryDirectory() as second:
        healthy = one_node(pathlib.Path(first))
        port_down = one_node(pathlib.Path(second), 'ndr8_port_down')
    assert all(result['healthy'] for result in healthy.values()) and not port_down['rdma_links']['healthy']
    hardware = {name: healthy for name in names}
    step = max(nodes // (FAILING + UNREACHABLE + 1), 1)
    odd = names[step::step]
    for name in odd[:FAILING]:
        hardware[name] = port_down
    for name in odd[FAILING:FAILING + UNREACHABLE]:
        hardware[name] = dict.fromkeys(healthy)  # None: never registered, the node was not reached
    # What the Slurm path records for a busy node (plugin_utils/_validate_paths.py, not_validated).
    for name in names[-BUSY - 1:-1]:
        why = 'not validated: busy in Slurm (ALLOCATED); its jobs are not waited for'
        hardware[name] = {validator: {'skipped': True, 'skip_reason': why, 'changed': False} for validator in healthy}
    return names, {name: {'gpu_profile': 'h200-sxm-8'} for name in names}, hardware


def fleet_report(nodes: int = NODES) -> dict:
    """The validation report of fleet(nodes), built by the filters the play calls."""
    names, hostvars, hardware = fleet(nodes)
    return llmforge_report(validator_results(names, hostvars, {}, hardware), 'bench', WHEN)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--nodes', type=int, default=NODES)
    parser.add_argument('--keep', type=pathlib.Path, help='write report.html into this directory and keep it')
    args = parser.parse_args()
    binary = chromium.find_chromium()
    if binary is None:
        print(chromium.INSTALL_HINT, file=sys.stderr)
        return 2
    started = time.perf_counter()
    report = fleet_report(args.nodes)
    built = time.perf_counter() - started
    summary = report['summary']
    page_text = report_html(report)
    render_seconds = median_seconds(lambda: report_html(report), repeats=REPEATS)
    size_mib = len(page_text.encode('utf-8')) / 2**20
    print(f"{summary['nodes']} nodes ({summary['failing_nodes']} failing, {BUSY} not validated), "
          f"{summary['checks']['total']:,} checks; report built in {built:.1f} s, report.html rendered to text in "
          f"{render_seconds:.2f} s (median of {REPEATS}): {size_mib:.2f} MiB")
    with tempfile.TemporaryDirectory(prefix='llmforge-bench-report-') as tmp:
        where = args.keep or pathlib.Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        page = where / 'report.html'
        page.write_text(page_text, encoding='utf-8')
        runs = []
        for run in range(REPEATS):
            try:
                runs.append(chromium.timed_load(binary, page, pathlib.Path(tmp), f'run{run}', timeout=LOAD_TIMEOUT_S,
                                                expression="document.querySelectorAll('tr.node').length"))
            except chromium.LoadTimeout as problem:
                print(f'FAIL: {problem}', file=sys.stderr)
                return 1
            except chromium.BrowserUnavailable as problem:
                print(problem, file=sys.stderr)
                return 2
    assert all(run['value'] == summary['nodes'] for run in runs), 'the page does not list every node'
    figures = {key: statistics.median(run[key] for run in runs) for key in ('dom_ms', 'loaded_ms', 'rendered_ms')}
    print(f'{chromium.version(binary)}: parsed {figures["dom_ms"] / 1000:.2f} s, loaded {figures["loaded_ms"] / 1000:.2f} s, '
          f'rendered {figures["rendered_ms"] / 1000:.2f} s after navigation started (medians of {REPEATS}; rendered: '
          + ', '.join(f'{run["rendered_ms"] / 1000:.2f}' for run in runs) + ' s)')
    failed = []
    if size_mib > SIZE_BOUND_MIB:
        failed.append(f'report.html is {size_mib:.2f} MiB, over the bound of {SIZE_BOUND_MIB} MiB')
    if figures['rendered_ms'] / 1000 > RENDER_BOUND_S:
        failed.append(f'rendering took {figures["rendered_ms"] / 1000:.2f} s, over the bound of {RENDER_BOUND_S} s')
    for line in failed:
        print(f'FAIL: {line}', file=sys.stderr)
    if not failed:
        print(f'within the bounds: {SIZE_BOUND_MIB} MiB, {RENDER_BOUND_S} s')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
