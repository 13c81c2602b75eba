# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run headless Chromium on a local page: screenshot, serialised DOM, and layout facts measured in the page.

Every run gets its own profile directory, its own process group and a hard timeout, so a hung browser fails the
test with its stderr instead of blocking the suite.
"""

from __future__ import annotations

import html
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import typing as t

INSTALL_HINT = ('Chromium is not installed: run `bash scripts/ensure-chromium.sh` (installs Debian\'s chromium '
                'package) or set CHROMIUM to a Chromium binary, then rerun `pytest -q tests/browser`.')
WIDTH = 1280
FIRST_SCREEN = 2000  # the height of the first screenshot: what a person sees on opening the report
MAX_HEIGHT = 16000  # a full-page screenshot taller than this would mean the page itself is broken
RUN_TIMEOUT = 45  # seconds one Chromium run may take before it is killed and the test fails
PROBE_ID = 'layout-probe'

# Flags for a container or CI runner: no sandbox (root, no user namespaces), no GPU, /tmp instead of a small
# /dev/shm, a throwaway profile, device pixels equal to CSS pixels, and nothing that reaches the network.
FLAGS = (
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--hide-scrollbars',
    '--force-device-scale-factor=1', '--no-first-run', '--no-default-browser-check', '--disable-extensions',
    '--disable-sync', '--disable-background-networking', '--disable-component-update',
    '--disable-default-apps', '--mute-audio', '--metrics-recording-only', '--password-store=basic',
    '--run-all-compositor-stages-before-draw',
)

# Measures, in the page, what a person sees: rendered text (innerText), computed colours, boxes in page
# coordinates (they equal screenshot pixels at scale factor 1), overflow, and every resource the page loaded.
PROBE_SCRIPT = r"""
(function () {
  function box(el) {
    var r = el.getBoundingClientRect();
    return {x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};
  }
  function describe(el) {
    var s = getComputedStyle(el);
    return {tag: el.tagName.toLowerCase(), cls: el.className, data: Object.assign({}, el.dataset), box: box(el),
            text: el.innerText, bg: s.backgroundColor, color: s.color, border_top: s.borderTopColor,
            font_size: s.fontSize, display: s.display, visibility: s.visibility,
            clipped: el.scrollWidth > el.clientWidth + 1 && s.overflowX !== 'visible'};
  }
  function all(selector) { return Array.prototype.map.call(document.querySelectorAll(selector), describe); }
  var root = document.documentElement;
  var wide = Array.prototype.filter.call(document.querySelectorAll('body *'), function (el) {
    return el.id !== '%(probe)s' && el.getBoundingClientRect().right > window.innerWidth + 0.5;
  }).map(function (el) { return el.tagName.toLowerCase() + '.' + el.className; });
  var facts = {
    viewport: {w: window.innerWidth, h: window.innerHeight},
    page: {w: root.scrollWidth, h: root.scrollHeight},
    body_bg: getComputedStyle(document.body).backgroundColor,
    resources: performance.getEntriesByType('resource').map(function (e) { return e.name; }),
    wider_than_viewport: wide,
    title: document.title,
    h1: all('h1'),
    verdict: all('#summary .verdict'),
    cards: all('#summary .card'),
    status_cells: all('#nodes tr.node td.status'),
    node_rows: all('#nodes tr.node'),
    failure_rows: all('#failures tr.fail'),
    failure_cells: all('#failures tr.fail td'),
    matrices: all('table.matrix'),
    cells: all('section.topology td.rel'),
    headers: all('table.matrix th'),
    legends: all('ul.legend'),
    legend_swatches: all('ul.legend .rel')
  };
  var out = document.createElement('pre');
  out.id = '%(probe)s';
  out.hidden = true;
  out.textContent = JSON.stringify(facts);
  document.body.appendChild(out);
})();
""" % {'probe': PROBE_ID}


class BrowserUnavailable(RuntimeError):
    """Chromium is missing, crashed, hung or wrote nothing; the message says which and what to do."""


def find_chromium() -> t.Optional[str]:
    configured = os.environ.get('CHROMIUM')
    if configured:
        return shutil.which(configured) or (configured if os.access(configured, os.X_OK) else None)
    for name in ('chromium', 'chromium-browser'):
        found = shutil.which(name)
        if found:
            return found
    return None


def version(binary: str) -> str:
    return subprocess.run([binary, '--version'], capture_output=True, text=True, timeout=RUN_TIMEOUT,
                          check=False).stdout.strip()


def run(binary: str, url: str, workdir: pathlib.Path, label: str, extra: t.Sequence[str],
        height: int = FIRST_SCREEN) -> str:
    """One headless Chromium run on url; returns stdout. Kills the whole process group on timeout."""
    profile = workdir / f'profile-{label}'
    argv = [binary, *FLAGS, f'--user-data-dir={profile}', f'--window-size={WIDTH},{height}', *extra, url]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                               start_new_session=True, cwd=workdir)
    try:
        stdout, stderr = process.communicate(timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise BrowserUnavailable(f'chromium ({label}) did not finish within {RUN_TIMEOUT} s and was killed; '
                                 f'argv: {argv}\nstderr tail:\n{_tail(stderr)}') from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if process.returncode != 0:
        raise BrowserUnavailable(f'chromium ({label}) exited {process.returncode}; argv: {argv}\n'
                                 f'stderr tail:\n{_tail(stderr)}')
    return stdout.decode('utf-8', errors='replace')


def _tail(stderr: bytes, lines: int = 25) -> str:
    # The D-Bus complaints of a machine without a session bus are noise; keep everything else.
    text = stderr.decode('utf-8', errors='replace').splitlines()
    return '\n'.join(line for line in text if 'dbus' not in line.lower())[-4000:] or '(empty)'


def screenshot(binary: str, page: pathlib.Path, png: pathlib.Path, workdir: pathlib.Path, label: str,
               height: int = FIRST_SCREEN) -> None:
    if png.exists():
        png.unlink()
    run(binary, page.as_uri(), workdir, label, [f'--screenshot={png}'], height)
    if not png.is_file() or png.stat().st_size == 0:
        raise BrowserUnavailable(f'chromium ({label}) exited 0 but wrote no screenshot at {png}')


def dump_dom(binary: str, page: pathlib.Path, workdir: pathlib.Path, label: str) -> str:
    dom = run(binary, page.as_uri(), workdir, label, ['--dump-dom'])
    if '<html' not in dom.lower():
        raise BrowserUnavailable(f'chromium ({label}) --dump-dom printed no document: {dom[:500]!r}')
    return dom


def with_probe(page_text: str) -> str:
    """A copy of the page with the probe script as the last element of <body>."""
    script = f'<script>{PROBE_SCRIPT}</script>'
    at = page_text.lower().rfind('</body>')
    assert at >= 0, 'the page has no </body>'
    return page_text[:at] + script + page_text[at:]


def measure(binary: str, page: pathlib.Path, workdir: pathlib.Path) -> dict[str, t.Any]:
    """Layout facts of page as rendered at WIDTH x FIRST_SCREEN, read back through --dump-dom."""
    probe_page = page.with_name(page.stem + '.probe.html')
    probe_page.write_text(with_probe(page.read_text(encoding='utf-8')), encoding='utf-8')
    dom = dump_dom(binary, probe_page, workdir, 'probe')
    match = re.search(rf'<pre id="{PROBE_ID}"[^>]*>(.*?)</pre>', dom, re.S)
    if not match:
        raise BrowserUnavailable('the layout probe wrote nothing: did Chromium run the inline script?')
    # The JSON comes back HTML-escaped as the text of <pre>.
    return json.loads(html.unescape(match.group(1)))
