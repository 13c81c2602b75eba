# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html of a 4,096-node cluster opened in headless Chromium: summary first, failing nodes before the others,
the healthy and not validated nodes collapsed, and the time it took to load and render.

The cluster: the nodes of browser_report.py copied to 4,096 names (gpu0001 ..): FAILING nodes degraded as gpu2,
UNREACHABLE ones as gpu3, BUSY ones not validated (as the Slurm path records a busy node), the others healthy as gpu1.
The render bound here is generous (LOAD_LIMIT) for a noisy shared machine; bench/bench_report_html.py holds the
tight one. Set REPORT_SCREENSHOT_DIR to keep the page.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import typing as t

import pytest

import browser_chromium as chromium
import browser_report

from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep

NODES = 4096
FAILING = ['gpu0100', 'gpu1500', 'gpu3001']
UNREACHABLE = ['gpu2048', 'gpu4000']
BUSY = [f'gpu{index:04d}' for index in range(4081, 4097)]
LOAD_LIMIT = 10.0  # seconds from navigation to the page rendered
SIZE_LIMIT = 4 * 2**20  # bytes of report.html

# What the page shows, read in it once it is rendered (browser_chromium.timed_load's expression).
FACTS = r"""(function () {
  // The content of a closed <details> is skipped for rendering (content-visibility), which checkVisibility() tells.
  function shown(el) { return el.checkVisibility() && el.getClientRects().length > 0; }
  function state(el) {
    return ['fail', 'skip', 'pass'].filter(function (name) { return el.classList.contains(name); }).join(' ');
  }
  var main = document.querySelector('main');
  return {
    sections: Array.prototype.map.call(main.children, function (el) { return el.tagName.toLowerCase() + '#' + el.id; }),
    summary_top: document.getElementById('summary').getBoundingClientRect().top,
    rows: Array.prototype.map.call(document.querySelectorAll('#nodes tr.node'), function (tr) {
      return [tr.dataset.node, state(tr), shown(tr)];
    }),
    details: Array.prototype.map.call(document.querySelectorAll('#nodes details'), function (el) {
      return {id: el.id, open: el.open, height: el.getBoundingClientRect().height, text: el.querySelector('summary').innerText};
    }),
    grouped: Array.prototype.map.call(document.querySelectorAll('#summary table.by-check.fail tbody tr'), function (tr) {
      return {check: tr.dataset.check, validator: tr.dataset.validator, hosts: tr.querySelector('td.hosts').innerText};
    }),
    verdict: document.querySelector('#summary .verdict').innerText,
    failure_rows: document.querySelectorAll('#failures tr.fail').length,
    topologies: Array.prototype.map.call(document.querySelectorAll('section.topology'), function (el) { return el.dataset.node; }),
    page: {w: document.documentElement.scrollWidth, h: document.documentElement.scrollHeight},
    viewport: window.innerWidth,
    resources: performance.getEntriesByType('resource').length
  };
})()"""


@dataclasses.dataclass
class Loaded:
    report: dict[str, t.Any]
    page: pathlib.Path
    timing: dict[str, t.Any]  # browser_chromium.timed_load's answer, FACTS as its value

    @property
    def facts(self) -> dict[str, t.Any]:
        return self.timing['value']


def fleet_results(workdir: pathlib.Path) -> dict[str, dict[str, t.Any]]:
    nodes = browser_report.results(workdir)
    why = 'not validated: busy in Slurm (MIXED); its jobs are not waited for'
    busy = {validator: {'skipped': True, 'skip_reason': why, 'changed': False} for validator in nodes['gpu1']}
    results = {}
    for index in range(1, NODES + 1):
        name = f'gpu{index:04d}'
        like = 'gpu2' if name in FAILING else 'gpu3' if name in UNREACHABLE else 'gpu1'
        results[name] = busy if name in BUSY else nodes[like]
    return results


@pytest.fixture(scope='module')
def loaded(tmp_path_factory: pytest.TempPathFactory) -> t.Union[Loaded, chromium.BrowserUnavailable]:
    workdir = tmp_path_factory.mktemp('fleet')
    binary = chromium.find_chromium()
    if binary is None:
        return chromium.BrowserUnavailable(chromium.INSTALL_HINT)
    report = rep.build_report(fleet_results(workdir), browser_report.CLUSTER, browser_report.WHEN)
    page = workdir / 'report.html'
    page.write_text(rep.render_html(report), encoding='utf-8')
    if os.environ.get('REPORT_SCREENSHOT_DIR'):
        os.makedirs(os.environ['REPORT_SCREENSHOT_DIR'], exist_ok=True)
        shutil.copy2(page, os.path.join(os.environ['REPORT_SCREENSHOT_DIR'], 'fleet-report.html'))
    try:
        return Loaded(report, page, chromium.timed_load(binary, page, workdir, 'fleet', FACTS, timeout=120))
    except chromium.BrowserUnavailable as problem:
        return problem


def opened(loaded: t.Union[Loaded, chromium.BrowserUnavailable]) -> Loaded:
    """The loaded page; a missing or broken Chromium fails the calling test (never skips it)."""
    if isinstance(loaded, chromium.BrowserUnavailable):
        pytest.fail(str(loaded), pytrace=False)
    return loaded


def test_the_page_loads_and_renders_in_time(loaded):
    shown = opened(loaded)
    size = shown.page.stat().st_size
    seconds = shown.timing['rendered_ms'] / 1000
    print(f'{NODES} nodes: report.html {size / 2**20:.2f} MiB, parsed {shown.timing["dom_ms"] / 1000:.2f} s, '
          f'loaded {shown.timing["loaded_ms"] / 1000:.2f} s, rendered {seconds:.2f} s after navigation started')
    assert size < SIZE_LIMIT, f'report.html of {NODES} nodes is {size / 2**20:.1f} MiB'
    assert 0 < seconds < LOAD_LIMIT, f'{NODES} nodes: the page took {seconds:.1f} s to load and render'
    assert shown.facts['resources'] == 0


def test_the_summary_is_the_first_section(loaded):
    facts = opened(loaded).facts
    assert facts['sections'][:4] == ['section#summary', 'section#nodes', 'section#failures', 'section#warnings']
    assert facts['summary_top'] < 200
    failing = FAILING + UNREACHABLE
    assert facts['verdict'].startswith(f'{NODES - len(failing) - len(BUSY):,} of {NODES:,} nodes healthy \u2014 failing: ')
    # The failing checks grouped by check, their nodes as a hostlist.
    grouped = {(row['validator'], row['check']): row['hosts'] for row in facts['grouped']}
    assert grouped[('rdma_links', 'state')] == hostlist.compress(FAILING)
    assert grouped[('gpu_topology', 'run')] == hostlist.compress(UNREACHABLE)


def test_failing_nodes_come_first_and_are_shown(loaded):
    shown = opened(loaded)
    facts = shown.facts
    rows = facts['rows']
    assert len(rows) == NODES
    states = [state for _node, state, _shown in rows]
    assert states == sorted(states, key=['fail', 'skip', 'pass'].index), 'failing, not validated, healthy'
    failing = [(node, shown) for node, state, shown in rows if state == 'fail']
    assert failing == [(node, True) for node in sorted(FAILING + UNREACHABLE)]
    assert facts['failure_rows'] == shown.report['summary']['checks']['fail'] == 4 * len(FAILING) + 2 * len(UNREACHABLE)
    assert facts['topologies'] == FAILING  # the unreachable nodes have none; the healthy ones are left out


def test_healthy_and_unvalidated_nodes_are_collapsed(loaded):
    shown = opened(loaded)
    facts = shown.facts
    hidden = [(node, state) for node, state, visible in facts['rows'] if not visible]
    assert len(hidden) == NODES - len(FAILING) - len(UNREACHABLE)
    assert {state for _node, state in hidden} == {'pass', 'skip'}
    details = {item['id']: item for item in facts['details']}
    assert set(details) == {'healthy-nodes', 'unvalidated-nodes'}
    assert all(not item['open'] and item['height'] < 80 for item in details.values())
    healthy = [node['name'] for node in shown.report['nodes'] if node['healthy'] and node['name'] not in BUSY]
    assert details['healthy-nodes']['text'] == f'{len(healthy):,} healthy nodes: {hostlist.compress(healthy)}'
    assert details['unvalidated-nodes']['text'] == f'{len(BUSY)} not validated nodes: {hostlist.compress(BUSY)}'
    assert facts['page']['w'] <= chromium.WIDTH and facts['viewport'] == chromium.WIDTH
    assert facts['page']['h'] < 20000, f"the page is {facts['page']['h']} px high: are the healthy nodes collapsed?"
