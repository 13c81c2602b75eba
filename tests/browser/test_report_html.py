# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""report.html opened in headless Chromium: what a person sees, from the DOM, the layout and the screenshot.

The cluster (browser_report.py): gpu1 healthy, gpu2 with GPU3 at PCIe x8 and mlx5_3/1 down, gpu3 unreachable.
Chromium is required: without it every test here fails and says to run scripts/ensure-chromium.sh.
Set REPORT_SCREENSHOT_DIR to keep report.html, the DOM dump, the layout facts and both screenshots.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import pathlib
import re
import shutil
import time
import typing as t

import pytest
from PIL import Image

import browser_chromium as chromium
import browser_dom
import browser_report

from ansible_collections.llmforge.cluster.plugins.plugin_utils import _report as rep

RGB = tuple[int, int, int]
SLOW_LIMIT = 60.0  # seconds all Chromium runs of this module may take together


# --- the report's own colours, read from its CSS -------------------------------------------------------

def css_colour(selector: str, prop: str = 'background') -> RGB:
    """The #rrggbb value of prop in the rule of _report.py's CSS whose selector list contains selector."""
    for selectors, body in re.findall(r'([^{}]+)\{([^{}]*)\}', rep._CSS):
        if selector in [s.strip() for s in selectors.split(',')]:
            match = re.search(rf'(?:^|;){re.escape(prop)}:#([0-9a-fA-F]{{6}})', body)
            if match:
                value = match.group(1)
                return int(value[0:2], 16), int(value[2:4], 16), int(value[4:6], 16)
    raise AssertionError(f'no {prop} colour for {selector!r} in the CSS of _report.py')


def rgb_css(colour: RGB) -> str:
    return 'rgb({}, {}, {})'.format(*colour)


PASS_BG = css_colour('tr.node.pass td.status')  # status cell of a healthy node
FAIL_BG = css_colour('tr.node.fail td.status')  # status cell of a failing node
VERDICT_BAD = css_colour('.verdict.bad')
CARD_HEALTHY = css_colour('.card.healthy', 'border-top-color')
CARD_FAILING = css_colour('.card.failing', 'border-top-color')
FAIL_TEXT = css_colour('td.fail', 'color')
NV_BG = css_colour('.rel.nv')
PIX_BG = css_colour('.rel.pix')
SELF_BG = css_colour('.rel.self')
PAGE_BG = css_colour('body')
WHITE = (255, 255, 255)


def near(colour: RGB, want: RGB, tolerance: int = 2) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(colour, want))


def count(histogram: collections.Counter, want: RGB, tolerance: int = 2) -> int:
    return sum(n for colour, n in histogram.items() if near(colour, want, tolerance))


def read_png(path: pathlib.Path) -> Image.Image:
    """A screenshot's pixels as RGB triples (an alpha channel is dropped)."""
    with Image.open(path) as image:
        return image.convert('RGB')


def colours(image: Image.Image, box: t.Optional[tuple[int, int, int, int]] = None) -> collections.Counter:
    """Pixel count per (r, g, b) in box (left, top, right, bottom; right and bottom excluded), default all."""
    left, top, right, bottom = box or (0, 0, image.width, image.height)
    left, top = max(left, 0), max(top, 0)
    right, bottom = min(right, image.width), min(bottom, image.height)
    if right <= left or bottom <= top:
        return collections.Counter()
    area = image.crop((left, top, right, bottom))
    # getcolors returns None when there are more colours than its limit; every pixel its own colour is the most.
    return collections.Counter({colour: n for n, colour in area.getcolors(area.width * area.height)})


# --- one browser session for the module -----------------------------------------------------------

@dataclasses.dataclass
class Rendered:
    workdir: pathlib.Path
    report: dict[str, t.Any]
    page: pathlib.Path  # report.html as the validate role writes it (rep.report_files)
    dom: browser_dom.Element  # the DOM Chromium built, from --dump-dom
    dom_text: str
    facts: dict[str, t.Any]  # layout measured in the page (browser_chromium.PROBE_SCRIPT)
    first_screen: Image.Image  # 1280 x 2000, RGB
    full_page: Image.Image  # 1280 x the page's height, RGB
    seconds: float
    version: str

    def box(self, item: t.Mapping[str, t.Any]) -> tuple[int, int, int, int]:
        """The pixel box (left, top, right, bottom) of a probed element, shrunk by 2 px against anti-aliasing."""
        b = item['box']
        return int(b['x']) + 2, int(b['y']) + 2, int(b['x'] + b['w']) - 2, int(b['y'] + b['h']) - 2


def _keep(workdir: pathlib.Path, names: t.Iterable[str]) -> None:
    target = os.environ.get('REPORT_SCREENSHOT_DIR')
    if not target:
        return
    os.makedirs(target, exist_ok=True)
    for name in names:
        if (workdir / name).exists():
            shutil.copy2(workdir / name, os.path.join(target, name))


def _render(workdir: pathlib.Path) -> Rendered:
    binary = chromium.find_chromium()
    if binary is None:
        raise chromium.BrowserUnavailable(chromium.INSTALL_HINT)
    report = browser_report.report(workdir)
    page = workdir / 'out' / 'report.html'
    page.parent.mkdir()
    page.write_text(next(f['content'] for f in rep.report_files(report) if f['name'] == page.name), encoding='utf-8')
    shutil.copy2(page, workdir / 'report.html')
    started = time.monotonic()
    try:
        dom_text = chromium.dump_dom(binary, page, workdir, 'dom')
        (workdir / 'dom.html').write_text(dom_text, encoding='utf-8')
        facts = chromium.measure(binary, page, workdir)
        (workdir / 'layout.json').write_text(json.dumps(facts, indent=1), encoding='utf-8')
        chromium.screenshot(binary, page, workdir / 'first-screen.png', workdir, 'first-screen')
        height = min(int(facts['page']['h']), chromium.MAX_HEIGHT)
        chromium.screenshot(binary, page, workdir / 'full-page.png', workdir, 'full-page', height)
    finally:
        _keep(workdir, ('report.html', 'dom.html', 'layout.json', 'first-screen.png', 'full-page.png'))
    seconds = time.monotonic() - started
    return Rendered(workdir, report, page, browser_dom.parse(dom_text), dom_text, facts,
                    read_png(workdir / 'first-screen.png'), read_png(workdir / 'full-page.png'),
                    seconds, chromium.version(binary))


@pytest.fixture(scope='module')
def browser(tmp_path_factory: pytest.TempPathFactory) -> t.Union[Rendered, chromium.BrowserUnavailable]:
    workdir = tmp_path_factory.mktemp('browser')
    try:
        return _render(workdir)
    except chromium.BrowserUnavailable as problem:
        return problem


def opened(browser: t.Union[Rendered, chromium.BrowserUnavailable]) -> Rendered:
    """The rendered report; a missing or broken Chromium fails the calling test (never skips it)."""
    if isinstance(browser, chromium.BrowserUnavailable):
        pytest.fail(str(browser), pytrace=False)
    return browser


def probed(shown: Rendered, key: str, **data: str) -> list[dict[str, t.Any]]:
    return [item for item in shown.facts[key] if all(item['data'].get(k) == v for k, v in data.items())]


# --- the browser itself ---------------------------------------------------------------------------

def test_chromium_renders_the_report_quickly(browser):
    shown = opened(browser)
    assert shown.version.lower().startswith(('chromium', 'google chrome')), shown.version
    assert shown.seconds < SLOW_LIMIT, f'four Chromium runs took {shown.seconds:.1f} s'
    print(f'{shown.version}: 4 runs in {shown.seconds:.1f} s; artefacts in {shown.workdir}')


# --- the DOM --------------------------------------------------------------------------------------

def test_title_and_heading(browser):
    shown = opened(browser)
    title = f'Cluster validation: {browser_report.CLUSTER} ({browser_report.WHEN})'
    assert shown.dom.find('title').text() == title and shown.facts['title'] == title
    assert [h['text'] for h in shown.facts['h1']] == [f'Cluster validation: {browser_report.CLUSTER}']
    assert f'Generated {browser_report.WHEN}' in shown.dom.find('p', 'generated').text()


def test_summary_says_one_healthy_two_failing(browser):
    shown = opened(browser)
    summary = shown.dom.find('section', id='summary')
    verdict = summary.find('p', 'verdict')
    assert 'bad' in verdict.classes and verdict.text() == '1 of 3 nodes healthy \u2014 failing: gpu2, gpu3'
    cards = {card.find('span', 'label').text(): card.find('span', 'value').text()
             for card in summary.find_all('div', 'card')}
    assert cards['nodes'] == '3' and cards['healthy nodes'] == '1' and cards['failing nodes'] == '2'
    counts = shown.report['summary']['checks']
    assert cards['checks failed'] == str(counts['fail']) == '6'
    assert cards['checks passed'] == str(counts['pass'])
    # As rendered: the text a person reads, in the report's colours.
    (shown_verdict,) = shown.facts['verdict']
    assert shown_verdict['text'] == '1 of 3 nodes healthy \u2014 failing: gpu2, gpu3' and shown_verdict['bg'] == rgb_css(VERDICT_BAD)
    borders = {item['text'].split('\n')[-1]: item['border_top'] for item in shown.facts['cards']}
    assert borders['healthy nodes'] == rgb_css(CARD_HEALTHY) and borders['failing nodes'] == rgb_css(CARD_FAILING)


def test_node_rows_have_the_right_status(browser):
    shown = opened(browser)
    nodes = shown.dom.find('section', id='nodes')
    rows = nodes.find_all('tr', 'node')
    assert [row.attrs['data-node'] for row in rows] == ['gpu2', 'gpu3', 'gpu1']  # failing nodes first
    want = {'gpu1': ('pass', 'healthy'), 'gpu2': ('fail', 'FAILING'), 'gpu3': ('fail', 'FAILING')}
    for row in rows:
        state, label = want[row.attrs['data-node']]
        assert state in row.classes and row.find('td', 'status').text() == label
    gpu2 = nodes.find('tr', 'node', data_node='gpu2')
    assert [td.text() for td in gpu2.find_all('td')][1:3] == ['116 passed, 1 failed', '62 passed, 3 failed']
    gpu3 = nodes.find('tr', 'node', data_node='gpu3')
    assert [td.text() for td in gpu3.find_all('td')][1:3] == ['0 passed, 1 failed', '0 passed, 1 failed']
    cells = shown.facts['status_cells']
    assert [(c['text'], c['bg']) for c in cells] == [
        ('FAILING', rgb_css(FAIL_BG)), ('FAILING', rgb_css(FAIL_BG)), ('healthy', rgb_css(PASS_BG))]


def failure_rows(shown: Rendered) -> list[dict[str, str]]:
    section = shown.dom.find('section', id='failures')
    columns = ['node', 'validator', 'check', 'subject', 'expected', 'actual', 'message']
    assert [th.text().lower() for th in section.find('thead').find_all('th')] == columns
    return [dict(zip(columns, (td.text() for td in row.find_all('td')))) for row in section.find_all('tr', 'fail')]


def test_failing_checks_show_expected_and_actual(browser):
    shown = opened(browser)
    rows = failure_rows(shown)
    assert shown.dom.find('section', id='failures').find('h2').text() == 'Failing checks (6)'
    assert {row['node'] for row in rows} == {'gpu2', 'gpu3'}
    by_check = {(row['node'], row['check'], row['subject']): row for row in rows}
    pcie = by_check['gpu2', 'pcie_width', f'GPU{browser_report.DEGRADED_GPU}']
    assert (pcie['validator'], pcie['expected'], pcie['actual']) == ('gpu_topology', '16', '8')
    assert 'PCIe x8' in pcie['message']
    port = by_check['gpu2', 'state', browser_report.DOWN_PORT]
    assert (port['validator'], port['expected'], port['actual']) == ('rdma_links', 'ACTIVE', 'DOWN')
    phys = by_check['gpu2', 'phys_state', browser_report.DOWN_PORT]
    assert (phys['expected'], phys['actual']) == ('LinkUp', 'Polling')
    for validator in ('gpu_topology', 'rdma_links'):
        run = next(row for row in rows if row['node'] == 'gpu3' and row['validator'] == validator)
        assert (run['check'], run['expected'], run['actual'], run['message']) == ('run', '-', '-', 'host unreachable')
    # Rendered: every failing row is visible, and its check name is in the failure colour.
    assert len(shown.facts['failure_rows']) == 6
    assert all(r['box']['h'] > 10 and r['visibility'] == 'visible' for r in shown.facts['failure_rows'])
    names = [c for c in shown.facts['failure_cells'] if 'fail' in c['cls'].split()]
    assert len(names) == 6 and all(c['color'] == rgb_css(FAIL_TEXT) for c in names)


def test_no_warnings_section_noise(browser):
    shown = opened(browser)
    warnings = shown.dom.find('section', id='warnings')
    assert warnings.find('h2').text() == 'Warnings (0)' and warnings.find('p', 'none').text() == 'No warnings.'


def topology_cells(shown: Rendered, node: str) -> dict[tuple[str, str], browser_dom.Element]:
    section = shown.dom.find('section', 'topology', data_node=node)
    return {(td.attrs['data-row'], td.attrs['data-col']): td for td in section.find_all('td', 'rel')}


def test_topology_grid_of_gpu1(browser):
    shown = opened(browser)
    sections = shown.dom.find_all('section', 'topology')
    assert [s.attrs['data-node'] for s in sections] == ['gpu1', 'gpu2']  # unreachable gpu3 has none
    cells = topology_cells(shown, 'gpu1')
    gpus = [f'GPU{i}' for i in range(8)]
    grid = {(r, c): td for (r, c), td in cells.items() if r in gpus and c in gpus}
    assert len(grid) == 64
    for (row, col), td in grid.items():
        if row == col:
            assert td.text() == 'X' and 'self' in td.classes
        else:
            assert td.text() == 'NV18' and 'nv' in td.classes, (row, col, td.text())
    for i in range(8):
        assert cells[f'GPU{i}', f'NIC{i}'].text() == 'PIX' and 'pix' in cells[f'GPU{i}', f'NIC{i}'].classes
        assert cells[f'NIC{i}', f'GPU{i}'].text() == 'PIX'
    section = sections[0]
    assert 'mlx5_0' in section.find('th', scope='col', data_device='NIC0').text()
    legend = {span.text() for span in section.find('ul', 'legend').find_all('span', 'rel')}
    assert {'NV#', 'PIX', 'SYS', 'X'} <= legend


def test_topology_grid_is_laid_out_as_a_grid(browser):
    """The 64 GPU cells of gpu1 sit on 8 columns and 8 rows, are big enough to read, and show NV18 in green."""
    shown = opened(browser)
    cells = [c for c in probed(shown, 'cells') if c['data']['row'].startswith('GPU') and c['data']['col'].startswith('GPU')]
    gpu1 = [c for c in cells if c['box']['y'] < probed(shown, 'matrices')[1]['box']['y']]
    assert len(gpu1) == 64
    assert len({round(c['box']['x']) for c in gpu1}) == 8 and len({round(c['box']['y']) for c in gpu1}) == 8
    assert all(c['box']['w'] >= 24 and c['box']['h'] >= 14 and not c['clipped'] for c in gpu1)
    assert all(c['font_size'] == '12px' for c in gpu1)
    nv = [c for c in gpu1 if c['data']['row'] != c['data']['col']]
    assert all(c['text'] == 'NV18' and c['bg'] == rgb_css(NV_BG) for c in nv)
    diagonal = [c for c in gpu1 if c['data']['row'] == c['data']['col']]
    assert all(c['text'] == 'X' and c['bg'] == rgb_css(SELF_BG) for c in diagonal)
    assert all(s['box']['w'] > 0 for s in shown.facts['legend_swatches'])
    assert len(shown.facts['legends']) == 2 and all(legend['box']['h'] > 0 for legend in shown.facts['legends'])


def test_page_is_self_contained(browser):
    shown = opened(browser)
    assert shown.facts['resources'] == [], 'the browser fetched resources for a page meant to be self-contained'
    for element in shown.dom.walk():
        assert element.tag not in ('script', 'link', 'iframe', 'object', 'embed', 'img'), element
        for name in ('src', 'href', 'srcset', 'action', 'poster', 'data', 'xlink:href'):
            value = element.attrs.get(name, '')
            assert not re.match(r'\s*(https?:)?//', value, re.I), (element, name, value)
    raw = shown.page.read_text(encoding='utf-8').lower()
    assert 'http://' not in raw and 'https://' not in raw and '@import' not in raw and 'url(' not in raw


def test_page_fits_the_window_width(browser):
    shown = opened(browser)
    # Only the width: new headless reserves part of --window-size's height for (invisible) browser chrome
    # when it prints the DOM, while --screenshot captures exactly the window size.
    assert shown.facts['viewport']['w'] == chromium.WIDTH
    assert shown.facts['page']['w'] <= chromium.WIDTH, f"the page is {shown.facts['page']['w']} px wide"
    assert shown.facts['wider_than_viewport'] == []


# --- the screenshots: what a person sees -------------------------------------------------------------

def test_first_screen_is_not_blank(browser):
    shown = opened(browser)
    image = shown.first_screen
    assert (image.width, image.height) == (chromium.WIDTH, chromium.FIRST_SCREEN)
    histogram = colours(image)
    assert len(histogram) > 200, 'almost no distinct colours: a blank or failed render'
    background, share = histogram.most_common(1)[0]
    assert share < 0.85 * image.width * image.height, f'{background} covers {share} px: the page is mostly empty'
    top = colours(image, (0, 0, image.width, 300))
    ink = sum(n for colour, n in top.items() if not near(colour, PAGE_BG, 8) and not near(colour, WHITE, 8))
    assert ink > 2000, f'the top 300 px hold only {ink} px that are neither background nor white'
    dark = sum(n for colour, n in top.items() if sum(colour) < 200)
    assert dark > 500, 'no dark text in the top 300 px: the heading did not render'


def test_first_screen_shows_pass_and_fail_colours(browser):
    shown = opened(browser)
    histogram = colours(shown.first_screen)
    assert FAIL_BG[0] > FAIL_BG[1] and PASS_BG[1] > PASS_BG[0], 'fail should read as red, pass as green'
    assert count(histogram, FAIL_BG) > 3000, 'the failing colour barely shows'
    assert count(histogram, PASS_BG) > 1000, 'the healthy colour barely shows'
    assert count(histogram, CARD_FAILING) > 200 and count(histogram, CARD_HEALTHY) > 200
    assert count(histogram, NV_BG) > 5000, 'the NVLink cells of the first topology grid are not on the first screen'


def test_status_cells_are_painted_where_the_layout_says(browser):
    """Tie DOM and pixels together: inside each node's status cell the dominant colour is its status colour."""
    shown = opened(browser)
    image = shown.first_screen
    for cell, node in zip(shown.facts['status_cells'], ('gpu2', 'gpu3', 'gpu1')):
        want = PASS_BG if node == 'gpu1' else FAIL_BG
        colour, n = colours(image, shown.box(cell)).most_common(1)[0]
        assert near(colour, want), f'{node}: the status cell is mostly {colour}, expected {want}'
    (verdict,) = shown.facts['verdict']
    assert near(colours(image, shown.box(verdict)).most_common(1)[0][0], VERDICT_BAD)


def test_full_page_shows_both_topology_grids(browser):
    shown = opened(browser)
    image = shown.full_page
    assert image.width == chromium.WIDTH and image.height == min(shown.facts['page']['h'], chromium.MAX_HEIGHT)
    for matrix in shown.facts['matrices']:
        area = colours(image, shown.box(matrix))
        assert count(area, NV_BG) > 56 * 150, 'the NV18 cells are not green in the screenshot'
        assert count(area, PIX_BG) > 8 * 150, 'the GPU-NIC PIX cells are not shown in their colour'
    cell = next(c for c in probed(shown, 'cells', row='GPU0', col='GPU1'))
    assert near(colours(image, shown.box(cell)).most_common(1)[0][0], NV_BG)
