# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find GPU, NVSwitch and PCIe faults in the kernel log, remember them, and judge the node by them.

Standard library only, no Ansible import: the `llmforge.cluster.kernel_faults` module, the node health check
(llmforge-nodecheck, the `kernel_faults` validator) and the job epilog share this code.

What is found (one event each, see `scan`):

- ``xid``: ``NVRM: Xid (PCI:0000:18:00): 79, pid=..., name=..., <text>``, judged by the Xid classes of the GPU
  catalog (_gpu_catalog.xid_class: application faults such as 13, 31, 43 are not node faults; 48, 63, 64, 74, 79,
  92, 94, 95, 119, 120 and their successors are). Xid 154's text names the recovery action it asks for.
- ``sxid``: ``nvidia-nvswitchN: SXid (PCI:<BDF>): <code>, Fatal|Non-fatal, <text>``; the detail lines that follow
  with the same code (``Severity 0 Engine instance ...``, ``Data {...}``) are folded into it. Fatal is a node fault.
- ``fallen_off_bus``: a GPU that fell off the bus without an Xid, either as newer drivers print it over three lines
  (``NVRM: The NVIDIA GPU 0000:18:00.0`` / ``NVRM: (PCI ID: 10de:2335) installed in this system has`` / ``NVRM:
  fallen off the bus and is not responding to commands.``) or in one (``NVRM: GPU 0000:18:00.0: GPU has fallen off
  the bus.``). One event per GPU: repeats are folded, and an Xid 79 of the same GPU stands for it (the Xid replaces
  an earlier fallen_off_bus event and a later message is folded into the Xid).
- ``aer``: a PCIe uncorrected error (``pcieport <port>: AER: Uncorrected (Fatal) error message received from
  <BDF>``, ``<driver> <BDF>: PCIe Bus Error: severity=Uncorrected (Non-Fatal), ...``; newer kernels say
  Uncorrectable) of one of the node's GPUs or HCAs; the lines of one report are one event. Corrected errors are
  counted (``corrected_aer``), not events; errors of other devices are ignored.

Formats, line by line, in one pass (any mix): ``journalctl -k`` short, short-precise, short-iso and
short-iso-precise (``2024-08-30T11:43:09.123456+02:00 host kernel: MSG``, with the ``-- cursor: ...`` line that
--show-cursor prints last and the ``-- No entries --`` / ``-- Boot ... --`` lines, which are skipped); ``dmesg -T``
/ ``--ctime`` (``[Fri Aug 30 11:43:09 2024] MSG``); raw ``dmesg`` (``[ 1843.308145] MSG``, also ``dmesg -r``'s
``<3>`` prefix); ``/dev/kmsg`` records (``PRIO,SEQ,USEC,FLAGS;MSG`` with `` KEY=value`` lines). A line that starts
with white space continues the record above it (a multi-line message) and takes its time. A wall-clock stamp gives
an event's ``time`` (Unix seconds; local time where the format has no zone, the current year for journalctl's
short format); a raw or kmsg stamp gives only ``boot_seconds`` (seconds since boot), and ``time`` is null.

Bounded on any log: one line at a time, a substring test before any regular expression, lines cut to MAX_LINE
characters, at most `max_events` events kept (node faults first: a node fault pushes out the newest application
event once the list is full) and the rest counted in ``events_dropped``.

Reading "since the last look" (`read_faults`): ``source: journal`` runs ``journalctl -k -o short-iso-precise
--no-pager --show-cursor -b`` with ``--after-cursor <cursor>`` from the state file (and ``--since @<since>``); a
``source`` that is an absolute path reads a file holding kernel log text in any of the formats above, from the
offset in the state file when it is the same file (device and inode) and has not shrunk. The state file (JSON,
replaced atomically, 0644) holds ``{source, log, cursor | offset, faults}``: ``log`` is the boot id for the journal
(/proc/sys/kernel/random/boot_id) and ``<st_dev>:<st_ino>`` for a file.

Node faults persist across looks: each look adds the node faults it finds to those of the state file and judges the
node by all of them, so a health check that runs every few minutes keeps a node drained after the look that saw the
fault, instead of resuming it on its next clean look. They are forgotten when the log starts over: a new boot id
(the node rebooted: the reboot was the repair), another file or a file that shrank (a stand-in kernel log in /run
is new and empty after a restart), or when they are cleared (`clear_faults`, the module's ``clear``): the repair
that reset GPU 3 clears GPU 3's faults. Without a state file every look reads the whole boot (or file) and judges
what it finds. A state file that cannot be read is set aside and rebuilt: the look reads the whole boot again, so
no fault of this boot is lost (but faults cleared by hand come back).

Checks (_checks.check): one failing check per faulty device and kind, named so that the shared drain reason
(_slurm_drain) reads ``llmforge: xid GPU3 79``, ``llmforge: sxid nvswitch1 12028``, ``llmforge: aer 0000:18:00.0
fatal``, ``llmforge: fallen_off_bus GPU3`` (name, subject, actual); a ``warn`` check per device for application
Xids and non-fatal SXids; a ``pass`` check for each of the four names without a failure, so that a drain one of
them caused is lifted once the node is clean again. ``healthy`` is false exactly when a node fault is known.
"""

from __future__ import annotations

import calendar
import contextlib
import fcntl
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog as catalog
from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_topology as gpu_topology
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import FAIL, PASS, WARN, check, finite, natural_key
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import failure_summary as _failure_summary

JOURNAL = 'journal'
DEFAULT_BOOT_ID_FILE = '/proc/sys/kernel/random/boot_id'
# Events kept per look (and node faults kept in the state file); the rest are counted.
MAX_EVENTS = 1000
# Characters of a line looked at (and kept in an event); a longer line is cut.
MAX_LINE = 2048
# Lines within which the parts of one message belong together (the fallen-off-the-bus message, one AER report).
WINDOW = 12
# The names of the failing checks, one per event type, in the order they are reported.
CHECK_NAMES = ('xid', 'sxid', 'fallen_off_bus', 'aer')
# Seconds a look keeps for itself after its commands (parsing, the state file).
_MARGIN = 0.3
# What journalctl says when it has nothing of this boot at all (no journal files, a journal without this boot): a
# warning, not a failure (a container, a node whose journald keeps nothing).
_EMPTY_JOURNAL = ('No journal files were found', 'No such boot ID', 'no persistent journal was found')
# Seconds clear_faults waits for a look in progress to finish (a look is bounded by its timeout).
CLEAR_WAIT = 15.0

_MONTHS = {name: number for number, name in enumerate(
    ('Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'), start=1)}
_HEX_BDF = r'[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?'
_BDF = re.compile(r'(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?')
_BDF_IN_TEXT = re.compile(r'(?<![0-9a-fA-F])(' + _HEX_BDF + r')(?![0-9a-fA-F])')
_XID = re.compile(r'NVRM: Xid \((?:PCI:)?(' + _HEX_BDF + r')\): ([0-9]{1,9})\b,?\s*(.*)')
_SXID = re.compile(r'(nvidia-nvswitch[0-9]{1,4}): SXid \((?:PCI:)?(' + _HEX_BDF + r')\): ([0-9]{1,9}),\s*(.*)')
_SXID_SEVERITY = re.compile(r'(non-fatal|fatal)\b', re.I)
_THE_GPU = re.compile(r'The NVIDIA GPU (' + _HEX_BDF + ')')
_AER_RECEIVED = re.compile(r'AER: (?:Multiple )?(?:Uncorrect(?:ed|able) \((Fatal|Non-Fatal)\)|(Correct(?:ed|able))) '
                           r'error (?:message )?received(?: from|:)? (?:id=([0-9a-fA-F]{4})\b|(' + _HEX_BDF + '))')
_AER_BUS_ERROR = re.compile(r'(' + _HEX_BDF + r'): (?:AER: )?PCIe Bus Error: severity='
                            r'(?:Uncorrect(?:ed|able) \((Fatal|Non-Fatal)\)|(Correct(?:ed|able)))')
# Stamps: journalctl short-iso(-precise) and dmesg --time-format iso; journalctl short(-precise); dmesg -T; raw
# dmesg (and dmesg -r, journalctl short-monotonic); /dev/kmsg.
_ISO = re.compile(r'([0-9]{4})-([0-9]{2})-([0-9]{2})[T ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:[.,]([0-9]{1,9}))?'
                  r'(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?')
_SHORT = re.compile(r'([A-Z][a-z]{2}) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))? ')
_CTIME = re.compile(r'\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) +([0-9]{1,2}) ([0-9]{2}):([0-9]{2}):([0-9]{2}) ([0-9]{4})\]')
_MONOTONIC = re.compile(r'(?:<[0-9]{1,3}>)?\[ *([0-9]{1,12})\.([0-9]{1,9})\]')
_KMSG = re.compile(r'([0-9]{1,3}),([0-9]{1,20}),([0-9]{1,20}),[^;]{0,16};')
_TIER_ORDER = {tier: rank for rank, tier in enumerate(catalog.TIERS)}


class KernelLogError(Exception):
    """The kernel log cannot be read (a missing file, journalctl failing, a bad setting); the message says which."""


class KernelLogTimeout(KernelLogError):
    """Reading the kernel log did not finish in time."""


# --- PCI addresses ------------------------------------------------------------------------------------------------

def pci_key(text: t.Any) -> t.Optional[tuple[int, int, int, int]]:
    """(domain, bus, device, function) of a PCI address as the kernel, the driver or nvidia-smi print it: 0000:18:00
    (Xid), 00000000:18:00.0 (nvidia-smi), 0000:18:00.1; the function is 0 when not printed. None for anything else."""
    if not isinstance(text, str):
        return None
    match = _BDF.fullmatch(text.strip())
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return int(domain or '0', 16), int(bus, 16), int(device, 16), int(function or '0')


def bdf_text(key: tuple[int, int, int, int]) -> str:
    """The kernel's form of a PCI address key: 0000:18:00.0."""
    return f'{key[0]:04x}:{key[1]:02x}:{key[2]:02x}.{key[3]}'


def gpu_keys(gpus: t.Optional[t.Mapping[str, int]]) -> dict[tuple[int, int, int], int]:
    """{(domain, bus, device): GPU index} of a {PCI bus id: index} mapping; KernelLogError naming a bad entry."""
    keys: dict[tuple[int, int, int], int] = {}
    for bus_id, index in (gpus or {}).items():
        key = pci_key(bus_id)
        if key is None:
            raise KernelLogError(f'gpus: {bus_id!r} is not a PCI bus id (00000000:18:00.0)')
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise KernelLogError(f'gpus: the index of {bus_id} must be a GPU index (0 or more), got {index!r}')
        keys[key[:3]] = index
    return keys


# --- stamps -------------------------------------------------------------------------------------------------------

def _fraction(digits: t.Optional[str]) -> float:
    return int(digits) / 10 ** len(digits) if digits else 0.0


def _local(year: int, month: int, day: int, hour: int, minute: int, second: int) -> t.Optional[float]:
    try:
        return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (OverflowError, ValueError):
        return None


def _iso_time(match: t.Match[str]) -> t.Optional[float]:
    year, month, day, hour, minute, second = (int(group) for group in match.groups()[:6])
    zone = match.group(8)
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    if zone is None:
        base = _local(year, month, day, hour, minute, second)
    else:
        try:
            base = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
        except (OverflowError, ValueError):
            return None
        if zone != 'Z':
            digits = zone[1:].replace(':', '')
            offset = int(digits[:2]) * 3600 + (int(digits[2:4]) * 60 if len(digits) >= 4 else 0)
            base -= offset if zone[0] == '+' else -offset
    return None if base is None else base + _fraction(match.group(7))


def _short_time(match: t.Match[str], now: float) -> t.Optional[float]:
    """journalctl's short format has no year: this year, or last year for a date more than a day ahead."""
    month = _MONTHS.get(match.group(1))
    day, hour, minute, second = (int(group) for group in match.groups()[1:5])
    if month is None or not (1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    year = time.localtime(now).tm_year
    found = _local(year, month, day, hour, minute, second)
    if found is not None and found > now + 86400:
        found = _local(year - 1, month, day, hour, minute, second)
    return None if found is None else found + _fraction(match.group(6))


def stamp(line: str, now: t.Optional[float] = None) -> tuple[t.Optional[float], t.Optional[float]]:
    """(Unix time, seconds since boot) of a kernel log line's stamp; None for what the format does not carry."""
    first = line[:1]
    if first in ('[', '<'):
        match = _MONOTONIC.match(line)
        if match:
            return None, int(match.group(1)) + _fraction(match.group(2))
        match = _CTIME.match(line)
        if match:
            month = _MONTHS.get(match.group(1))
            day, hour, minute, second, year = (int(group) for group in match.groups()[1:])
            if month is None or not (1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
                return None, None
            return _local(year, month, day, hour, minute, second), None
        return None, None
    if first.isdigit():
        match = _KMSG.match(line)
        if match:
            return None, int(match.group(3)) / 1e6
        match = _ISO.match(line)
        if match:
            return _iso_time(match), None
        return None, None
    match = _SHORT.match(line)
    if match:
        return _short_time(match, time.time() if now is None else now), None
    return None, None


# --- scanning -----------------------------------------------------------------------------------------------------

def _tier_rank(tier: str) -> int:
    return _TIER_ORDER.get(tier, len(_TIER_ORDER))


class Scanner:
    """The events of a kernel log fed one line at a time (`feed`); `result` is scan's dict."""

    def __init__(self, gpus: t.Optional[t.Mapping[str, int]] = None, hcas: t.Iterable[str] = (),
                 since: t.Optional[float] = None, max_events: int = MAX_EVENTS) -> None:
        if isinstance(max_events, bool) or not isinstance(max_events, int) or max_events < 0:
            raise KernelLogError(f'max_events must be a whole number of 0 or more, got {max_events!r}')
        if since is not None and finite(since) is None:
            raise KernelLogError(f'since must be a Unix time (a number), got {since!r}')
        self.gpus = gpu_keys(gpus)
        self.hcas = {key for key in (pci_key(bdf) for bdf in hcas) if key is not None}
        self.since = since
        self.max_events = max_events
        self.events: list[dict[str, t.Any]] = []
        self.dropped = 0
        self.lines_read = 0
        self.corrected_aer = 0
        self.cursor: t.Optional[str] = None
        self._non_faults = 0
        self._head = ''
        self._head_stamp: tuple[str, tuple[t.Optional[float], t.Optional[float]]] = ('', (None, None))
        self._now = time.time()
        # GPU (domain, bus, device) -> its bus-loss event (Xid 79 or fallen_off_bus): one per GPU.
        self._lost: dict[tuple[int, int, int], dict[str, t.Any]] = {}
        # The start of a multi-line fallen-off-the-bus message: (PCI key, text, head, line number).
        self._pending: t.Optional[tuple[tuple[int, int, int, int], str, str, int]] = None
        # The last AER report: (PCI key, severity, line number), so that its other lines are folded into it.
        self._last_aer: t.Optional[tuple[tuple[int, int, int, int], str, int]] = None

    # -- the loop --

    def feed(self, line: str) -> None:
        self.lines_read += 1
        if len(line) > MAX_LINE:
            line = line[:MAX_LINE]
        first = line[:1]
        if first == '-' and line.startswith('-- '):
            if line.startswith('-- cursor: '):
                self.cursor = line[len('-- cursor: '):].strip() or None
            return
        if first not in (' ', '\t'):
            self._head = line
        if 'Xid' in line:
            self._xid_line(line)
        elif 'NVRM' in line:
            if 'fallen off the bus' in line or 'The NVIDIA GPU' in line:
                self._bus_line(line)
        elif 'AER' in line or 'PCIe Bus Error' in line:
            self._aer_line(line)

    def result(self) -> dict[str, t.Any]:
        return {'events': self.events, 'events_dropped': self.dropped, 'lines_read': self.lines_read,
                'corrected_aer': self.corrected_aer, 'cursor': self.cursor}

    # -- events --

    def _stamp(self, head: str) -> tuple[t.Optional[float], t.Optional[float]]:
        if self._head_stamp[0] is not head:
            self._head_stamp = (head, stamp(head, self._now))
        return self._head_stamp[1]

    def _gpu(self, key: tuple[int, int, int, int]) -> t.Optional[int]:
        return self.gpus.get(key[:3])

    def _make(self, kind: str, code: t.Optional[int], pci: str, key: t.Optional[tuple[int, int, int, int]],
              device: t.Optional[str], fatal: bool, fault: catalog.FaultClass, text: str,
              head: t.Optional[str] = None) -> t.Optional[dict[str, t.Any]]:
        """The event of a line (None when `since` skips it); not added yet."""
        when, boot_seconds = self._stamp(self._head if head is None else head)
        if self.since is not None and when is not None and when < self.since:
            return None
        gpu = self._gpu(key) if key is not None else None
        if device is None:
            device = f'GPU{gpu}' if gpu is not None else (bdf_text(key) if key is not None else pci)
        return {'type': kind, 'code': code, 'pci': pci, 'gpu': gpu, 'device': device, 'fatal': fatal,
                'node_fault': fault.node_fault, 'tier': fault.tier, 'hardware': fault.hardware, 'title': fault.title,
                'time': when, 'boot_seconds': boot_seconds, 'line': text.rstrip()[:MAX_LINE]}

    def _add(self, event: dict[str, t.Any]) -> None:
        if len(self.events) < self.max_events:
            self.events.append(event)
            self._non_faults += not event['node_fault']
            return
        self.dropped += 1
        if not event['node_fault'] or not self._non_faults:
            return
        # Full: a node fault takes the place of the newest event that is not one.
        for index in range(len(self.events) - 1, -1, -1):
            if not self.events[index]['node_fault']:
                del self.events[index]
                self._non_faults -= 1
                self.events.append(event)
                return

    def _replace(self, old: dict[str, t.Any], new: dict[str, t.Any]) -> None:
        """`new` in the place of `old` (both node faults); added when `old` is no longer kept."""
        for index, event in enumerate(self.events):
            if event is old:
                self.events[index] = new
                return
        self._add(new)

    # -- Xid and SXid --

    def _xid_line(self, line: str) -> None:
        if 'SXid' in line:
            match = _SXID.search(line)
            if match is None:
                return
            switch, pci, code, rest = match.groups()
            severity = _SXID_SEVERITY.match(rest)
            if severity is None:  # a detail line of the SXid above it
                return
            fatal = severity.group(1).lower() == 'fatal'
            fault = catalog.sxid_class(int(code), fatal)
            event = self._make('sxid', int(code), pci, pci_key(pci), switch.replace('nvidia-', ''), fatal, fault, line)
            if event is not None:
                self._add(event)
            return
        match = _XID.search(line)
        if match is None:
            return
        pci, code, rest = match.group(1), int(match.group(2)), match.group(3)
        key = pci_key(pci)
        fault = catalog.xid154_class(rest) if code == 154 else catalog.xid_class(code)
        event = self._make('xid', code, pci, key, None, fault.node_fault, fault, line)
        if event is None:
            return
        if code != 79 or key is None:
            self._add(event)
            return
        earlier = self._lost.get(key[:3])
        if earlier is None:
            self._add(event)
        elif earlier['type'] == 'xid':
            return
        else:  # the Xid stands for the fallen_off_bus message seen before it
            self._replace(earlier, event)
        self._lost[key[:3]] = event

    # -- a GPU fallen off the bus without an Xid --

    def _bus_line(self, line: str) -> None:
        text = line[line.find('NVRM'):]
        start = _THE_GPU.search(text)
        falling = 'fallen off the bus' in text
        if start is not None and not falling:
            key = pci_key(start.group(1))
            if key is not None:
                self._pending = (key, line.rstrip(), self._head, self.lines_read)
            return
        if not falling:
            return
        found = _BDF_IN_TEXT.search(text)
        head, message = None, line
        key = pci_key(found.group(1)) if found else None
        pending = self._pending
        if key is None and pending is not None and self.lines_read - pending[3] <= WINDOW:
            key, head, message = pending[0], pending[2], f'{pending[1]}\n{line.rstrip()}'
        self._pending = None
        if key is None or key[:3] in self._lost:
            return
        event = self._make('fallen_off_bus', None, bdf_text(key), key, None, True, catalog.xid_class(79), message,
                           head)
        if event is not None:
            event['title'] = 'GPU has fallen off the bus (no Xid)'
            self._add(event)
            self._lost[key[:3]] = event

    # -- PCIe AER --

    def _aer_line(self, line: str) -> None:
        match = _AER_RECEIVED.search(line)
        if match is not None:
            severity = match.group(1) or 'Corrected'
            if match.group(3):
                number = int(match.group(3), 16)
                key: t.Optional[tuple[int, int, int, int]] = (0, number >> 8, (number >> 3) & 0x1f, number & 7)
            else:
                key = pci_key(match.group(4))
        else:
            match = _AER_BUS_ERROR.search(line)
            if match is None:
                return
            severity = match.group(2) or 'Corrected'
            key = pci_key(match.group(1))
        if key is None or not (key[:3] in self.gpus or key in self.hcas):
            return
        last = self._last_aer
        self._last_aer = (key, severity, self.lines_read)
        if last is not None and last[:2] == (key, severity) and self.lines_read - last[2] <= WINDOW:
            return
        if severity == 'Corrected':
            self.corrected_aer += 1
            return
        fatal = severity == 'Fatal'
        gpu = self._gpu(key)
        tier = 'reboot' if fatal or gpu is None else 'reset'
        fault = catalog.FaultClass(0, f'PCIe uncorrected {"fatal" if fatal else "non-fatal"} error', True, tier, True,
                                   'AER', 'the kernel PCIe AER driver')
        bdf = bdf_text(key)
        event = self._make('aer', None, bdf, key, bdf, fatal, fault, line)
        if event is not None:
            self._add(event)


def scan(lines: t.Iterable[str], gpus: t.Optional[t.Mapping[str, int]] = None, hcas: t.Iterable[str] = (),
         since: t.Optional[float] = None, max_events: int = MAX_EVENTS) -> dict[str, t.Any]:
    """The events of kernel log lines: {events, events_dropped, lines_read, corrected_aer, cursor}.

    `gpus` maps PCI bus ids (any form: 00000000:18:00.0, 0000:18:00) to GPU indexes; `hcas` lists the PCI addresses
    of the node's HCAs (PCIe errors count only on these and the GPUs); `since` skips events whose wall-clock time is
    earlier (events without one are kept). ``cursor`` is the journal cursor of a ``-- cursor: ...`` line, if any.
    Each event: {type, code, pci, gpu, device, fatal, node_fault, tier, hardware, title, time, boot_seconds, line}.
    """
    scanner = Scanner(gpus, hcas, since, max_events)
    for line in lines:
        scanner.feed(line)
    return scanner.result()


# --- judging ------------------------------------------------------------------------------------------------------

_EXPECTED = {'xid': 'no node-fault Xid', 'sxid': 'no fatal SXid', 'fallen_off_bus': 'on the bus',
             'aer': 'no uncorrected PCIe error'}


def _when(event: t.Mapping[str, t.Any]) -> str:
    if isinstance(event.get('time'), (int, float)):
        return time.strftime('%Y-%m-%dT%H:%M:%S%z', time.localtime(event['time']))
    if isinstance(event.get('boot_seconds'), (int, float)):
        return f"{event['boot_seconds']:.0f} s after boot"
    return 'at an unknown time'


def _actual(kind: str, events: t.Sequence[t.Mapping[str, t.Any]]) -> str:
    if kind in ('xid', 'sxid'):
        codes = {event.get('code') for event in events}
        return ','.join(str(code) for code in sorted(code for code in codes if isinstance(code, int)))
    if kind == 'aer':
        return ','.join(sorted({'fatal' if event.get('fatal') else 'non-fatal' for event in events}))
    return ''


def _describe(kind: str, device: str, events: t.Sequence[t.Mapping[str, t.Any]]) -> str:
    parts = []
    for event in events[:3]:
        what = f"{kind} {event['code']}" if event.get('code') is not None else kind
        count = event.get('count', 1)
        times = f', {count} times' if isinstance(count, int) and count > 1 else ''
        parts.append(f"{what} ({event.get('title') or ''}) {_when(event)}{times}")
    if len(events) > 3:
        parts.append(f'+{len(events) - 3} more')
    tier = max((str(event.get('tier')) for event in events), key=_tier_rank)
    hardware = any(event.get('hardware') for event in events)
    where = device if not events[0].get('pci') or events[0]['pci'] == device else f"{device} ({events[0]['pci']})"
    if tier == 'none':
        return f"{where}: {'; '.join(parts)}"
    repeat = '; a hardware fault: a repeat after the repair means RMA' if hardware else ''
    return f"{where}: {'; '.join(parts)}; repair: {tier}{repeat}"


def judge(faults: t.Sequence[t.Mapping[str, t.Any]], events: t.Sequence[t.Mapping[str, t.Any]] = (),
          notes: t.Sequence[str] = ()) -> list[dict[str, t.Any]]:
    """The checks of the node's known node faults (`faults`) and of this look's other `events`, failures first.

    One failing check per kind and device (``xid GPU3 48,94``), the most severe first (the repair it needs, then
    whether the hardware failed: the drain reason names it), one warning per kind and device for events that are
    not node faults, a `kernel_log` warning per note (a state file set aside, an empty journal), and a passing check
    for each kind without a failure.
    """
    failing: dict[tuple[str, str], list[t.Mapping[str, t.Any]]] = {}
    warning: dict[tuple[str, str], list[t.Mapping[str, t.Any]]] = {}
    for event in faults:
        failing.setdefault((event['type'], str(event['device'])), []).append(event)
    for event in events:
        if not event['node_fault']:
            warning.setdefault((event['type'], str(event['device'])), []).append(event)

    def order(item: tuple[tuple[str, str], list[t.Mapping[str, t.Any]]]) -> tuple[t.Any, ...]:
        (kind, device), found = item
        return CHECK_NAMES.index(kind), natural_key(device)

    def severity(item: tuple[tuple[str, str], list[t.Mapping[str, t.Any]]]) -> tuple[t.Any, ...]:
        found = item[1]
        rank = max(_tier_rank(str(event.get('tier'))) for event in found)
        return (-rank, not any(event.get('hardware') for event in found)) + order(item)

    checks = []
    # The most severe first (the repair it needs, then hardware): the drain reason names it.
    for (kind, device), found in sorted(failing.items(), key=severity):
        checks.append(check(kind, FAIL, device, _EXPECTED[kind], _actual(kind, found), _describe(kind, device, found)))
    for (kind, device), found in sorted(warning.items(), key=order):
        checks.append(check(kind, WARN, device, _EXPECTED[kind], _actual(kind, found),
                            f'not a node fault: {_describe(kind, device, found)}'))
    checks.extend(check('kernel_log', WARN, 'node', None, None, note) for note in notes)
    failed = {kind for kind, _device in failing}
    checks.extend(check(kind, PASS, 'node', _EXPECTED[kind], 'none', f'no {kind} node fault in the kernel log')
                  for kind in CHECK_NAMES if kind not in failed)
    return checks


def failure_summary(checks: t.Iterable[t.Mapping[str, t.Any]]) -> str:
    """`2 kernel log check(s) failed: xid (GPU3): ...`, or '' when nothing failed."""
    return _failure_summary(checks, 'kernel log')


# --- the node's GPUs and HCAs -------------------------------------------------------------------------------------

def smi_gpus(nvidia_smi: str, timeout: float) -> dict[str, int]:
    """{PCI bus id: index} from `nvidia-smi -q -x` (the GPUs in index order); KernelLogError when it cannot say."""
    path = validators.find_command(nvidia_smi)
    if path is None:
        raise KernelLogError(f'{nvidia_smi} not found')
    try:
        facts = gpu_topology.parse_smi_xml(gpu_topology.run_command([path, '-q', '-x'], timeout))
    except gpu_topology.GpuTopologyError as err:
        raise KernelLogError(str(err)) from None
    return {str(gpu['pci_bus_id']): gpu['index'] for gpu in facts['gpus'] if pci_key(gpu['pci_bus_id'])}


def sysfs_gpus(sysfs_root: str) -> dict[str, int]:
    """{PCI address: index} of the devices bound to the nvidia driver in sysfs, in PCI order (nvidia-smi's)."""
    found = []
    try:
        names = os.listdir(os.path.join(sysfs_root, 'bus', 'pci', 'drivers', 'nvidia'))
    except OSError:
        return {}
    for name in names:
        key = pci_key(name)
        if key is not None and name.count(':') == 2:
            found.append(key)
    return {bdf_text(key): index for index, key in enumerate(sorted(found))}


def sysfs_hcas(sysfs_root: str) -> list[str]:
    """The PCI addresses of the RDMA devices under <sysfs_root>/class/infiniband (their `device` link's target, or
    PCI_SLOT_NAME in its uevent)."""
    base = os.path.join(sysfs_root, 'class', 'infiniband')
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return []
    found = []
    for name in names:
        device = os.path.join(base, name, 'device')
        candidates = [os.path.basename(os.path.realpath(device))] if os.path.islink(device) else []
        try:
            with open(os.path.join(device, 'uevent'), encoding='utf-8', errors='replace') as handle:
                candidates += [line.split('=', 1)[1].strip() for line in handle.read(4096).splitlines()
                               if line.startswith('PCI_SLOT_NAME=')]
        except OSError:
            pass
        found.extend(candidate for candidate in candidates[:1] if pci_key(candidate))
    return found


# --- reading the log ----------------------------------------------------------------------------------------------

def _lines(handle: t.BinaryIO, position: t.Optional[list[int]] = None) -> t.Iterator[str]:
    """The lines of a binary stream, decoded (bad bytes replaced), cut to MAX_LINE characters without holding a longer
    line in memory. `position[0]`, when given, starts at the stream's offset and follows the offset after the last
    complete line (a last line still being written is read again next time)."""
    limit = MAX_LINE * 4
    consumed = position[0] if position is not None else 0
    while True:
        chunk = handle.readline(limit)
        if not chunk:
            return
        consumed += len(chunk)
        complete = chunk.endswith(b'\n')
        if not complete and len(chunk) == limit:  # an over-long line: skip the rest of it
            while True:
                rest = handle.readline(limit)
                consumed += len(rest)
                if not rest or rest.endswith(b'\n'):
                    complete = bool(rest)
                    break
        if position is not None and complete:
            position[0] = consumed
        yield chunk.decode('utf-8', 'replace').rstrip('\r\n')


class _Deadline:
    """Raises KernelLogTimeout from `check` once the monotonic deadline has passed."""

    def __init__(self, deadline: float, what: str) -> None:
        self.deadline, self.what = deadline, what

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        if time.monotonic() > self.deadline:
            raise KernelLogTimeout(f'{self.what} did not finish in time')


def _bounded(lines: t.Iterable[str], deadline: _Deadline) -> t.Iterator[str]:
    for number, line in enumerate(lines):
        if not number % 8192:
            deadline.check()
        yield line


def _read_file(path: str, offset: int, scanner: Scanner, deadline: _Deadline) -> int:
    """Scan `path` from `offset`; the offset after its last complete line."""
    try:
        with open(path, 'rb') as handle:
            handle.seek(offset)
            position = [offset]
            for line in _bounded(_lines(handle, position), deadline):
                scanner.feed(line)
            return position[0]
    except IsADirectoryError:
        raise KernelLogError(f'source {path}: is a directory, not a kernel log file') from None
    except OSError as err:
        raise KernelLogError(f'source {path}: cannot be read: {err.strerror or err}') from None


def _journal(argv: list[str], scanner: Scanner, deadline: _Deadline) -> tuple[int, str]:
    """Run journalctl, feeding its output to `scanner` as it comes; (exit status, start of stderr).

    The command runs in its own session; when the deadline passes its process group is killed and KernelLogTimeout
    raised (the output is streamed rather than collected, so a long journal costs no memory).
    """
    timeout = max(0.1, deadline.left())
    with tempfile.TemporaryFile() as errors:
        try:
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                                     start_new_session=True)
        except FileNotFoundError:
            raise KernelLogError(f'{argv[0]} not found: is systemd (journalctl) installed?') from None
        except PermissionError:
            raise KernelLogError(f'{argv[0]} is not executable (permission denied)') from None
        except OSError as err:
            raise KernelLogError(f'{argv[0]} cannot be run: {err.strerror or err}') from None
        fired = threading.Event()

        def kill() -> None:
            fired.set()
            try:
                os.killpg(child.pid, signal.SIGKILL)
            except OSError:
                pass

        timer = threading.Timer(timeout, kill)
        timer.daemon = True
        timer.start()
        try:
            for line in _lines(t.cast(t.BinaryIO, child.stdout)):
                scanner.feed(line)
                if fired.is_set():
                    break
            try:
                rc = child.wait(timeout=max(0.1, deadline.left()) + proc.KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                kill()
                rc = child.wait(timeout=proc.KILL_GRACE_S)
        except BaseException:
            kill()
            child.wait(timeout=proc.KILL_GRACE_S)
            raise
        finally:
            timer.cancel()
            if child.stdout is not None:
                child.stdout.close()
        if fired.is_set():
            raise KernelLogTimeout(f"'{' '.join(argv)}' did not finish within {timeout:.3g} s")
        errors.seek(0)
        return rc, errors.read(4096).decode('utf-8', 'replace')


def journal_command(journalctl: str, cursor: t.Optional[str], since: t.Optional[float]) -> list[str]:
    """`journalctl -k -o short-iso-precise --no-pager --show-cursor -b [--after-cursor C] [--since @S]`."""
    argv = [journalctl, '-k', '-o', 'short-iso-precise', '--no-pager', '--show-cursor', '-b']
    if cursor:
        argv += ['--after-cursor', cursor]
    if since is not None:
        argv += ['--since', f'@{int(since)}']
    return argv


# --- the state file -----------------------------------------------------------------------------------------------

def load_state(path: str) -> tuple[dict[str, t.Any], str]:
    """The state file's content ({} when there is none) and a note when it had to be set aside ('' otherwise)."""
    if not path:
        return {}, ''
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}, ''
    except (OSError, ValueError, RecursionError) as err:
        return {}, f'state file {path} cannot be read ({err}): ignored, rebuilt from the whole log'
    faults = data.get('faults') if isinstance(data, dict) else None
    if not isinstance(faults, list) or not all(isinstance(item, dict) and item.get('type') in CHECK_NAMES
                                               and 'device' in item for item in faults):
        return {}, f'state file {path} is not a kernel_faults state: ignored, rebuilt from the whole log'
    return data, ''


def save_state(path: str, state: t.Mapping[str, t.Any]) -> None:
    """Replace the state file atomically (0644), creating its directory (0755) when missing."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    files.write_atomic(path, json.dumps(state, sort_keys=True, default=str) + '\n', mode=0o644)


@contextlib.contextmanager
def locked(state_file: str, wait: float) -> t.Iterator[None]:
    """An exclusive lock on `<state_file>.lock` for a look or a clear (the health check, a repair and the module may
    meet), waited for at most `wait` seconds: past that, or without a state file, the work goes on unlocked."""
    if not state_file:
        yield
        return
    try:
        directory = os.path.dirname(state_file)
        if directory:
            os.makedirs(directory, mode=0o755, exist_ok=True)
        handle = open(state_file + '.lock', 'a+', encoding='utf-8')  # pylint: disable=consider-using-with
    except OSError:
        yield
        return
    with handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        yield


def _fault_key(event: t.Mapping[str, t.Any]) -> tuple[t.Any, ...]:
    if event['type'] == 'fallen_off_bus' or (event['type'] == 'xid' and event.get('code') == 79):
        return ('bus', event.get('device'))
    return (event['type'], event.get('code'), event.get('device'), event.get('fatal'))


def merge_faults(known: t.Sequence[dict[str, t.Any]], events: t.Iterable[t.Mapping[str, t.Any]],
                 limit: int = MAX_EVENTS) -> list[dict[str, t.Any]]:
    """The node faults known before with this look's added: one per fault (type, code, device), counted."""
    merged = [dict(item) for item in known][:limit]
    index = {_fault_key(item): item for item in merged}
    for event in events:
        if not event['node_fault']:
            continue
        found = index.get(_fault_key(event))
        if found is not None:
            found['count'] = int(found.get('count') or 1) + 1
        elif len(merged) < limit:
            item = dict(event, count=1)
            merged.append(item)
            index[_fault_key(item)] = item
    return merged


def _selected(fault: t.Mapping[str, t.Any], gpus: t.Optional[t.Collection[int]]) -> bool:
    return gpus is None or fault.get('gpu') in gpus


def clear_faults(state_file: str, gpus: t.Optional[t.Sequence[int]]) -> int:
    """Forget the known node faults of GPUs `gpus` (None: all of them) in the state file; how many were forgotten.

    What was read stays read (the bookmark is kept): a GPU reset that repaired GPU 3 clears GPU 3's faults and the
    next look judges only what is logged after it. No state file, or one that cannot be read: 0.
    """
    if not state_file:
        return 0
    selection = None if gpus is None else set(gpus)
    with locked(state_file, CLEAR_WAIT):
        state, note = load_state(state_file)
        if note or not state:
            return 0
        faults = state.get('faults') or []
        kept = [fault for fault in faults if not _selected(fault, selection)]
        if len(kept) == len(faults):
            return 0
        save_state(state_file, dict(state, faults=kept))
    return len(faults) - len(kept)


# --- one look -----------------------------------------------------------------------------------------------------

def _read_boot_id(path: str) -> str:
    try:
        with open(path, encoding='utf-8', errors='replace') as handle:
            found = handle.read(256).strip()
    except OSError as err:
        raise KernelLogError(f'boot_id_file {path}: cannot be read: {err.strerror or err}') from None
    if not found:
        raise KernelLogError(f'boot_id_file {path}: empty')
    return found


def _gpu_map(settings: t.Mapping[str, t.Any], timeout: float) -> tuple[dict[str, int], str]:
    """The {PCI bus id: index} of the node's GPUs and, when nvidia-smi could not say, why ('' otherwise)."""
    if settings['gpus']:
        return dict(settings['gpus']), ''
    try:
        return smi_gpus(settings['nvidia_smi'], timeout), ''
    except KernelLogTimeout as err:
        why = str(err)
    except KernelLogError as err:
        why = str(err)
    found = sysfs_gpus(settings['sysfs_root'])
    return found, '' if found else f'GPU indexes unknown ({why}): GPUs are named by their PCI address'


# What the kernel_faults module returns when it could not judge the node: its result's keys, empty.
EMPTY_RESULT: t.Mapping[str, t.Any] = {'events': [], 'events_dropped': 0, 'checks': [], 'healthy': False, 'reason': '',
                                       'lines_read': 0, 'cursor': None, 'faults': [], 'corrected_aer': 0, 'cleared': 0,
                                       'changed': False}


def module_work(params: t.Mapping[str, t.Any], current: t.Any, write_state: bool = True,
                clear: t.Union[bool, t.Sequence[int]] = False) -> dict[str, t.Any]:
    """The kernel_faults module's work (`params`: its options, journalctl_path and nvidia_smi_path resolved, gpus as
    {bus id: index}): one look at the kernel log, ``changed`` when known faults were cleared."""
    source = params['source']
    current.what = 'the kernel log' if source == JOURNAL else f'the kernel log {source}'
    settings = dict(source=source, journalctl=params['journalctl_path'], state_file=params['state_file'] or '',
                    since=params['since'], boot_id_file=params['boot_id_file'], gpus=params['gpus'] or {},
                    nvidia_smi=params['nvidia_smi_path'], sysfs_root=params['sysfs_root'])
    result = read_faults(settings, params['timeout'], write_state=write_state, clear=clear)
    result['changed'] = bool(result['cleared'])
    return result


def read_faults(settings: t.Mapping[str, t.Any], timeout: float, write_state: bool = True,
                clear: t.Union[bool, t.Sequence[int]] = False) -> dict[str, t.Any]:
    """One look at the kernel log since the last one: {events, events_dropped, checks, healthy, reason, lines_read,
    cursor, faults, corrected_aer}.

    `settings` are the validator's (missing ones take their defaults). `timeout` bounds the whole look (nvidia-smi,
    journalctl, reading the file); KernelLogTimeout when it is exceeded. `write_state` false reads without moving
    the bookmark or writing the state file (check mode). `clear` forgets known faults before judging: True all of
    them, a list those of these GPU indexes (written only with `write_state`; see `clear_faults`). ``events`` are
    this look's, ``faults`` every node fault known for this boot (or file), ``cursor`` the journal cursor or the file
    offset read up to.
    """
    deadline = _Deadline(time.monotonic() + max(0.2, float(timeout) - _MARGIN), 'reading the kernel log')
    try:
        settings = prepare(VALIDATOR.checked_settings(dict(settings)))
    except validators.SettingsError as err:
        raise KernelLogError(str(err)) from None
    source = settings['source']
    journalctl = ''
    if source == JOURNAL:
        journalctl = validators.find_command(settings['journalctl']) or ''
        if not journalctl:
            raise KernelLogError(f"journalctl {settings['journalctl']} not found: is systemd installed? (looked in "
                                 f"{', '.join(validators.SYSTEM_DIRS)})")
    gpus, why = _gpu_map(settings, max(0.1, min(deadline.left() / 2, 10.0)))
    hcas = sysfs_hcas(settings['sysfs_root'])
    with locked(settings['state_file'] if write_state else '', max(0.0, deadline.left() / 2)):
        return _look(settings, deadline, journalctl, gpus, why, hcas, write_state, clear)


def _look(settings: t.Mapping[str, t.Any], deadline: _Deadline, journalctl: str, gpus: t.Mapping[str, int], why: str,
          hcas: t.Sequence[str], write_state: bool, clear: t.Union[bool, t.Sequence[int]]) -> dict[str, t.Any]:
    source, state_file, since = settings['source'], settings['state_file'], settings['since']
    notes: list[str] = []
    state, note = load_state(state_file)
    if note:
        notes.append(note)
    known = state.get('faults') or []
    scanner = Scanner(gpus, hcas, since)
    if source == JOURNAL:
        log = _read_boot_id(settings['boot_id_file']) if state_file else ''
        if state.get('source') != source or state.get('log') != log:
            known, state = [], {}
        cursor = state.get('cursor') if isinstance(state.get('cursor'), str) else None
        argv = journal_command(journalctl, cursor, since)
        rc, errors = _journal(argv, scanner, deadline)
        if rc != 0 and cursor:
            # The cursor is gone (the journal was rotated or vacuumed): read the whole boot again.
            cursor, scanner = None, Scanner(gpus, hcas, since)
            argv = journal_command(journalctl, None, since)
            rc, errors = _journal(argv, scanner, deadline)
        if rc != 0:
            if any(words in errors for words in _EMPTY_JOURNAL):
                notes.append(f"journalctl has no kernel log of this boot ({errors.strip().splitlines()[0]}): none "
                             f"was read")
            else:
                detail = errors.strip().splitlines()[0] if errors.strip() else 'no message'
                raise KernelLogError(f"'{' '.join(argv)}' exited with {rc}: {detail}")
        position: t.Any = scanner.cursor or cursor
        new_state = {'source': source, 'log': log, 'cursor': position}
    else:
        try:
            info = os.stat(source)
        except FileNotFoundError:
            raise KernelLogError(f'source {source}: no such file') from None
        except OSError as err:
            raise KernelLogError(f'source {source}: cannot be read: {err.strerror or err}') from None
        log = f'{info.st_dev}:{info.st_ino}'
        offset = state.get('offset')
        if (state.get('source') != source or state.get('log') != log or isinstance(offset, bool)
                or not isinstance(offset, int) or not 0 <= offset <= info.st_size):
            known, offset = [], 0
        position = _read_file(source, offset, scanner, deadline)
        new_state = {'source': source, 'log': log, 'offset': position}
    found = scanner.result()
    faults = merge_faults(known, found['events'])
    cleared = 0
    if clear is not False:
        selection = None if clear is True else set(clear)
        kept = [fault for fault in faults if not _selected(fault, selection)]
        cleared, faults = len(faults) - len(kept), kept
    if why and any(event['gpu'] is None and event['type'] in ('xid', 'fallen_off_bus') for event in found['events']):
        notes.append(why)
    if state_file and write_state:
        try:
            save_state(state_file, dict(new_state, faults=faults))
        except OSError as err:
            notes.append(f'state file {state_file} cannot be written ({err.strerror or err}): the next look reads '
                         f'this one again')
    checks = judge(faults, found['events'], notes)
    checks.sort(key=lambda item: item['status'] != FAIL)
    return {'events': found['events'], 'events_dropped': found['events_dropped'], 'checks': checks,
            'healthy': not any(item['status'] == FAIL for item in checks),
            'reason': validators.drain_reason(checks), 'lines_read': found['lines_read'], 'cursor': position,
            'faults': faults, 'corrected_aer': found['corrected_aer'], 'cleared': cleared}


# --- as a node validator (_validators.py) ---------------------------------------------------------------------------

_READING = 'kernel log'


def prepare(settings: dict[str, t.Any]) -> dict[str, t.Any]:
    """The settings checked beyond their kinds: source `journal` or an absolute path, the commands, the GPU map."""
    source = settings['source']
    if source != JOURNAL and not os.path.isabs(source):
        raise KernelLogError(f"source must be 'journal' or the absolute path of a kernel log file, got {source!r}")
    for name in ('journalctl', 'nvidia_smi'):
        try:
            validators.command(settings[name], name)
        except validators.SettingsError as err:
            raise KernelLogError(str(err)) from None
    gpu_keys(settings['gpus'])
    return settings


def _collect(settings: t.Mapping[str, t.Any], timeout: float) -> list[validators.Reading]:
    return [validators.Reading(_READING, lambda: read_faults(settings, timeout), timeout, _READING)]


def _judge(outputs: t.Mapping[str, t.Any], settings: t.Mapping[str, t.Any], current: t.Any) -> list[dict[str, t.Any]]:
    return list(outputs[_READING]['checks'])


VALIDATOR = validators.Validator(
    name='kernel_faults',
    title='GPU Xids, NVSwitch SXids, GPUs fallen off the bus and PCIe uncorrected errors in the kernel log, kept '
          'until a reboot or a repair clears them',
    settings=(
        validators.Setting('source', 'text', JOURNAL, "journal (journalctl -k), or the absolute path of a file "
                           "holding kernel log text.", nullable=True, what="'journal' or an absolute path"),
        validators.Setting('journalctl', 'text', 'journalctl', 'The journalctl command (a name looked up in the '
                           'system directories, or an absolute path).', nullable=True),
        validators.Setting('state_file', 'directory', '', 'Where the bookmark and the known faults are kept; empty: '
                           'none, every look reads the whole boot.'),
        validators.Setting('since', 'number', None, 'Skip events logged before this Unix time; null: none.',
                           nullable=True),
        validators.Setting('boot_id_file', 'directory', DEFAULT_BOOT_ID_FILE, "The kernel's boot id (a new one "
                           "forgets the known faults).", nullable=True),
        validators.Setting('gpus', 'object', {}, 'PCI bus id to GPU index; empty: asked of nvidia-smi.'),
        validators.Setting('nvidia_smi', 'text', 'nvidia-smi', 'The nvidia-smi command that names the GPUs (failing '
                           'it, they are named by PCI address).', nullable=True),
        validators.Setting('sysfs_root', 'directory', '/sys', "Where sysfs is mounted (the HCAs' PCI addresses).",
                           nullable=True),
    ),
    collect=_collect, judge=_judge, prepare=prepare, errors=(KernelLogError,), timeouts=(KernelLogTimeout,),
    module='kernel_faults')
