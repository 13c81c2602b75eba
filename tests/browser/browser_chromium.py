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
import select
import shutil
import signal
import subprocess
import time
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


class LoadTimeout(BrowserUnavailable):
    """A page did not load and render within the time timed_load was given."""


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


# --- load and render time, over the DevTools protocol ------------------------------------------------

# Evaluated once the page has loaded, two animation frames later (style, layout and a paint of the first screen
# done): the times since navigation started, in milliseconds, and the value of the caller's expression.
_TIMED_SCRIPT = r"""new Promise(function (done) {
  requestAnimationFrame(function () { requestAnimationFrame(function () {
    var nav = performance.getEntriesByType('navigation')[0];
    done({rendered_ms: performance.now(), loaded_ms: nav.loadEventEnd, dom_ms: nav.domContentLoadedEventEnd,
          value: (function () { return %s; })()});
  }); });
})"""


class _DevTools:
    """Headless Chromium driven over --remote-debugging-pipe: commands on its fd 3, answers and events on fd 4,
    each message JSON ended by a NUL byte."""

    def __init__(self, binary: str, workdir: pathlib.Path, label: str, height: int) -> None:
        self.profile = workdir / f'profile-{label}'
        self.stderr_path = workdir / f'{label}.stderr'
        self.argv = [binary, *FLAGS, f'--user-data-dir={self.profile}', f'--window-size={WIDTH},{height}',
                     '--remote-debugging-pipe', 'about:blank']
        commands_read, self.commands = os.pipe()
        self.answers, answers_write = os.pipe()

        def onto_3_and_4() -> None:  # in the child, before exec: the pipe ends where Chromium looks for them
            read_copy, write_copy = os.dup(commands_read), os.dup(answers_write)
            os.dup2(read_copy, 3)
            os.dup2(write_copy, 4)

        with open(self.stderr_path, 'wb') as stderr:
            self.process = subprocess.Popen(  # pylint: disable=subprocess-popen-preexec-fn
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True,
                cwd=workdir, preexec_fn=onto_3_and_4, pass_fds=(3, 4))
        os.close(commands_read)
        os.close(answers_write)
        self.buffer = b''
        self.last_id = 0
        self.events: list[dict[str, t.Any]] = []

    def _message(self, deadline: float) -> dict[str, t.Any]:
        while b'\0' not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready = select.select([self.answers], [], [], left)[0]
            if ready:
                chunk = os.read(self.answers, 1 << 20)
                if not chunk:
                    raise BrowserUnavailable(f'chromium exited (status {self.process.poll()}) while driven over its '
                                             f'DevTools pipe; argv: {self.argv}\nstderr tail:\n{self.stderr_tail()}')
                self.buffer += chunk
        text, self.buffer = self.buffer.split(b'\0', 1)
        return json.loads(text)

    def call(self, method: str, params: t.Optional[dict[str, t.Any]], deadline: float,
             session: t.Optional[str] = None) -> dict[str, t.Any]:
        self.last_id += 1
        message: dict[str, t.Any] = {'id': self.last_id, 'method': method, 'params': params or {}}
        if session:
            message['sessionId'] = session
        os.write(self.commands, json.dumps(message).encode('utf-8') + b'\0')
        while True:
            answer = self._message(deadline)
            if answer.get('id') != self.last_id:
                self.events.append(answer)
                continue
            if 'error' in answer:
                raise BrowserUnavailable(f'chromium answered {method} with {answer["error"]}')
            return answer.get('result') or {}

    def event(self, method: str, deadline: float) -> dict[str, t.Any]:
        while True:
            found = next((event for event in self.events if event.get('method') == method), None)
            if found is not None:
                self.events.remove(found)
                return found
            self.events.append(self._message(deadline))

    def stderr_tail(self) -> str:
        try:
            return _tail(self.stderr_path.read_bytes())
        except OSError:
            return '(none)'

    def close(self) -> None:
        try:
            self.call('Browser.close', None, time.monotonic() + 10)
        except (BrowserUnavailable, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for fd in (self.commands, self.answers):
            os.close(fd)
        shutil.rmtree(self.profile, ignore_errors=True)


def timed_load(binary: str, page: pathlib.Path, workdir: pathlib.Path, label: str = 'timed',
               expression: str = 'null', height: int = FIRST_SCREEN,
               timeout: float = RUN_TIMEOUT) -> dict[str, t.Any]:
    """Open page in a fresh headless Chromium and time it, in the page: `dom_ms` (parsed), `loaded_ms` (its load
    event done) and `rendered_ms` (two animation frames after the load: styled, laid out and painted), all since
    navigation started; `wall_s`, the seconds from the navigation command to that answer; and `value`, what the
    JavaScript `expression` gives then (JSON values only). The browser's own start is not in any of them."""
    browser = _DevTools(binary, workdir, label, height)
    deadline = time.monotonic() + timeout
    try:
        target = browser.call('Target.createTarget', {'url': 'about:blank', 'newWindow': True, 'width': WIDTH, 'height': height}, deadline)
        session = browser.call('Target.attachToTarget', {'targetId': target['targetId'], 'flatten': True},
                               deadline)['sessionId']
        browser.call('Page.enable', None, deadline, session)
        started = time.monotonic()
        browser.call('Page.navigate', {'url': page.as_uri()}, deadline, session)
        browser.event('Page.loadEventFired', deadline)
        answer = browser.call('Runtime.evaluate', {'expression': _TIMED_SCRIPT % expression, 'awaitPromise': True,
                                                   'returnByValue': True}, deadline, session)
        wall = time.monotonic() - started
    except TimeoutError:
        raise LoadTimeout(f'chromium ({label}) did not load and render {page} within {timeout} s; '
                          f'argv: {browser.argv}\nstderr tail:\n{browser.stderr_tail()}') from None
    finally:
        browser.close()
    if 'exceptionDetails' in answer:
        raise BrowserUnavailable(f'the timing script failed in the page: {answer["exceptionDetails"]}')
    return dict(answer['result']['value'], wall_s=wall)
