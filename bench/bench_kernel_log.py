# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time and memory of kernel_faults on a 1,000,000-line kernel log with a few hundred events.

Two figures, each the median wall time of 5 runs and the peak of Python's allocations (tracemalloc, in a 6th run):
`scan` of the lines in memory (the parser alone), and `read_faults` of the same log as a file on disk, as the
health check reads it (open, decode, scan, judge; no state file). The log is journalctl's short-iso-precise format
(what the module asks journalctl for), ~170 MB; 300 Xid lines spread over it, application faults and node faults
on the 8 GPUs of the HGX H200 fixture. Target: a few seconds at most (a health check has 10 s by default) and memory
that does not grow with the log. Run from the repository root:
PYTHONPATH=collections .venv/bin/python bench/bench_kernel_log.py
"""

from __future__ import annotations

import pathlib
import re
import tempfile
import tracemalloc

from benchlib import median_seconds

from ansible_collections.llmforge.cluster.plugins.module_utils import _kernel_log as kernel_log

LINES = 1_000_000
EVENTS = 300
REPEATS = 5
REPO = pathlib.Path(__file__).resolve().parents[1]
XML = (REPO / 'tests' / 'fixtures' / 'gpu' / 'hgx-h200-8' / 'smi_q.xml').read_text(encoding='utf-8')
GPUS = {bus_id: index for index, bus_id in enumerate(re.findall(r'<gpu id="([^"]+)"', XML))}
BUSES = ('18', '2a', '3a', '5d', '9a', 'ab', 'ba', 'db')
CODES = (13, 31, 43, 48, 94, 74)


def log_lines() -> list[str]:
    every = LINES // EVENTS
    lines = []
    for number in range(LINES):
        second = 1796454000 + number // 50
        stamp = f'2026-12-05T{(second // 3600) % 24:02d}:{(second // 60) % 60:02d}:{second % 60:02d}.{number % 1000000:06d}+00:00 gpu07 kernel: '
        if number % every == 0 and number // every < EVENTS:
            event = number // every
            lines.append(f'{stamp}NVRM: Xid (PCI:0000:{BUSES[event % 8]}:00): {CODES[event % 6]}, pid={number}, '
                         f'name=python3, text of the event')
        elif number % 7 == 0:
            lines.append(f'{stamp}NVRM: GPU at PCI:0000:18:00: GPU-2ac7255b-1207-037b-618f-32ebea4b8c67')
        elif number % 11 == 0:
            lines.append(f'{stamp}pcieport 0000:00:01.1: AER: Corrected error message received from 0000:c1:00.0')
        else:
            lines.append(f'{stamp}audit: type=1400 audit({number}.123:{number}): apparmor="DENIED" operation="open" '
                         f'profile="snap.x" name="/proc/{number}/status" pid={number} comm="x"')
    return lines


def peak_bytes(operation) -> int:
    tracemalloc.start()
    try:
        operation()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main() -> None:
    lines = log_lines()
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / 'kernel.log'
        path.write_text('\n'.join(lines) + '\n', encoding='utf-8')
        size_mb = path.stat().st_size / 1e6
        settings = {'source': str(path), 'gpus': GPUS, 'sysfs_root': tmp}
        found = kernel_log.scan(lines, GPUS)
        looked = kernel_log.read_faults(settings, 50)
        assert len(found['events']) == EVENTS and found['lines_read'] == LINES
        assert looked['lines_read'] == LINES and not looked['healthy']
        cases = {
            'scan (lines in memory)': lambda: kernel_log.scan(lines, GPUS),
            'read_faults (file on disk)': lambda: kernel_log.read_faults(settings, 50),
        }
        print(f'{LINES} lines ({size_mb:.0f} MB), {EVENTS} events, {REPEATS} runs each')
        for name, operation in cases.items():
            seconds = median_seconds(operation, REPEATS)
            peak = peak_bytes(operation)
            print(f'{name:28s} median {seconds:.2f} s ({LINES / seconds / 1e6:.2f} M lines/s), '
                  f'peak Python memory {peak / 1e6:.2f} MB')
        print(f"reason: {looked['reason']}; {len(looked['faults'])} distinct node faults; "
              f"{sum(1 for c in looked['checks'] if c['status'] == 'warn')} warnings")


if __name__ == '__main__':
    main()
