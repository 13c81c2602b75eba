# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-remediate: the repair lifecycle of the GPU nodes, run on the first Slurm controller by a systemd timer.

Each run (a tick) reads Slurm (`scontrol show node -o`, the quarantine reservation, its own repair jobs with squeue
and sacct, and the jobs' suspect sightings with sacct), records what it saw in a durable ledger (SQLite), decides
what to do with each node (`decide`, a pure function of the ledger snapshot, the Slurm view, the configuration and
the time), and does it through an injectable command runner. Standard library only, no Ansible.

States of a node: healthy -> suspect -> quarantined -> repairing -> healthy, or rma.

- A node drained by us for a fault (the health check's `llmforge: xid GPU3 79`, `sxid nvswitch1 12028`, `aer
  <device> fatal`, `fallen_off_bus GPU3`, `dcgm L1 ...`, `epilog GPU2 ...`; Slurm's `Kill task failed`, and
  Slurm's `Epilog error` once the health check had timeouts.epilog_grace to replace it: see `classify`) is
  quarantined and repaired from the cheapest tier its fault needs (the GPU catalog's `xid_class`/`sxid_class`):
  GPU reset (a job running `llmforge-repair reset --gpu N`), then a reboot through Slurm (`scontrol reboot ASAP
  nextstate=RESUME ...`), each followed by a burn-in job (`llmforge-repair burnin --level L`); a failed tier
  escalates to the next one, a passing burn-in returns the node to service. Nothing is left after the reboot: rma.
- Suspect sightings written by jobs in their Comment (`llmforge-suspect <node> <straggler|hang> <detail>`, entries
  separated by `;`) count only for a node in that job's NodeList. `suspect_sightings` of them from distinct jobs
  within `suspect_window_days` quarantine the node for a burn-in (a failing one goes on to the repair tiers); fewer
  make it `suspect`, which drains nothing. A sighting never drains, repairs or quarantines by itself.
- RMA: a fault whose class says rma, `rma_repairs` repairs of the same GPU (serial when known) within
  `rma_window_days`, or a hardware fault class repeating on the same GPU: the node stays drained with
  `llmforge: rma <serial> <reason>`, after an evidence job (`llmforge-repair evidence`) when `evidence_dir` is set.

Repair jobs run as root in the maintenance reservation `reservation` (by default the one validate.yml's DCGM stage
uses, `llmforge_quarantine`): a quarantined node is added to it before it is resumed, so no user job reaches it,
and removed when its burn-in passed. Only the reservation's nodes this program put there are ever removed.

Never touched: a node drained by an administrator (a reason neither ours, `llmforge: ...`, nor Slurm's own
`Epilog error`, `Not responding`, `Kill task failed`), a DOWN node without a reason of ours, the DCGM stage's own
`llmforge: dcgm L<n> ...` quarantine at levels 2-4, and drains of ours that are not faults (a validator's check,
the health check's own errors: the health check lifts those). At most `max_concurrent` nodes, and `max_percent` of any partition (at
least one), are held (in the reservation or drained for quarantine) at once; the others wait, logged. Only idle
nodes are repaired. Every command is bounded (timeouts.command), a job id or reboot request is recorded before the
command runs and looked up (squeue, sacct: the job's Comment carries a token) after a crash, so a re-run tick never
submits twice. Each decision is logged as `llmforge-remediate: <node> <state> -> <state>: <why>`.

Exit status: 0 tick done (or another tick holds the lock); 2 configuration or usage error; 3 Slurm could not be
read; 4 the ledger cannot be opened or written.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import fcntl
import functools
import json
import math
import os
import re
import secrets
import shlex
import sqlite3
import sys
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _gpu_catalog as gpu_catalog
from ansible_collections.llmforge.cluster.plugins.module_utils import _hostlist as hostlist
from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils import _slurm_drain as drain
from ansible_collections.llmforge.cluster.plugins.module_utils import _validators as validators
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import natural_key
from ansible_collections.llmforge.cluster.plugins.module_utils._prometheus import Family

PROGRAM = 'llmforge-remediate'
DEFAULT_CONFIG = '/etc/llmforge/remediate.json'
SCHEMA_VERSION = 1
METRICS_FILE = 'llmforge_remediate.prom'
# The repair jobs' name, their owner and the prefix of their Comment (`llmforge-remediate <node> <step> <token>`).
JOB_NAME = 'llmforge-repair'
JOB_USER = 'root'
TOKEN_PREFIX = 'llmforge-remediate'
# A job's AdminComment that llmforge-repair --report wrote: `llmforge-repair {json}` (only an administrator can set it).
REPORT_PREFIX = 'llmforge-repair '
SIGHTING_PREFIX = 'llmforge-suspect'
SIGHTING_KINDS = ('straggler', 'hang')
MAX_SIGHTINGS_PER_JOB = 64

STATES = ('healthy', 'suspect', 'quarantined', 'repairing', 'rma')
HEALTHY, SUSPECT, QUARANTINED, REPAIRING, RMA = STATES
# Repair tiers, cheapest first; a burn-in follows each. The catalog's tiers: none < reset < reboot < rma.
TIERS = ('reset', 'reboot')
CATALOG_TIERS = ('none', 'reset', 'reboot', 'rma')
JOB_STEPS = ('reset', 'burnin', 'evidence')
STEPS = ('reset', 'reboot', 'burnin', 'evidence')
OUTCOMES = ('pass', 'fail', 'error')
# Slurm's own drain reasons after which a node is ours to repair (see _slurm_drain's notion of ours).
SLURM_REASONS = ('Epilog error', 'Not responding', 'Kill task failed')
# Our own lifecycle reasons: `llmforge: quarantine ...`, `llmforge: repair reboot ...`, `llmforge: rma ...`.
LIFECYCLE_WORDS = ('quarantine', 'repair', 'rma')
ACTIVE_JOB_STATES = ('PENDING', 'CONFIGURING', 'RUNNING', 'COMPLETING', 'SUSPENDED', 'REQUEUED', 'REQUEUE_HOLD',
                     'REQUEUE_FED', 'RESIZING', 'SIGNALING', 'STAGE_OUT', 'STOPPED')
TIME_TO_REPAIR_BUCKETS = (900, 1800, 3600, 7200, 14400, 28800, 86400, 259200)

_NODE_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]{0,254}')
_RESERVATION_NAME = re.compile(r'[A-Za-z0-9_.-]{1,64}')
_JOB_ID = re.compile(r'[0-9]{1,12}(?:[_+][0-9]{1,12})?')
_SLURM_TIME = re.compile(r'([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})')
_FIELD = re.compile(r'(?:^|\s)([A-Za-z]+)=')
_REASON_STAMP = re.compile(r'\s*\[([^\]@]*)@([^\]]*)\]\s*$')
_GPU_WORD = re.compile(r'\bGPU\s?([0-9]{1,3})\b')
_NUMBER = re.compile(r'[0-9]{1,9}')


class ConfigError(validators.SettingsError):
    """The configuration file is unusable; the message names the file and the field."""


class SlurmError(Exception):
    """A Slurm command failed or timed out; the message names it."""


class LedgerError(Exception):
    """The ledger cannot be opened, read or written."""


# --- configuration ----------------------------------------------------------------------------------------------

DEFAULT_TIMEOUTS = {
    # Any one Slurm command (scontrol, sbatch, squeue, sacct, scancel).
    'command': 30,
    # A whole tick: no new command is started after it (the systemd unit's TimeoutStartSec is above it).
    'tick': 240,
    # Time limits of the repair jobs (their --time) and of a reboot until the node is back.
    'reset': 600,
    'reboot': 2700,
    'burnin': 7200,
    'evidence': 1200,
    # How long a repair job may wait to start before it is cancelled.
    'pending': 3600,
    # How long a submitted job or a reboot request may be missing from Slurm before it is submitted again.
    'lookup': 180,
    # How long Slurm's `Epilog error` may stand before the health check's precise reason replaces it.
    'epilog_grace': 900,
}
DEFAULTS: dict[str, t.Any] = {
    'reservation': 'llmforge_quarantine',
    'max_concurrent': 2,
    'max_percent': 10,
    'partition_limits': {},
    'suspect_sightings': 3,
    'suspect_window_days': 7,
    'suspect_min_users': 1,
    'rma_repairs': 3,
    'rma_window_days': 30,
    'step_retries': 1,
    'burnin_level': 3,
    'burnin_peer': '',
    'timeouts': DEFAULT_TIMEOUTS,
    'evidence_dir': '/var/lib/llmforge/evidence',
    'ledger': '/var/lib/llmforge/remediate/ledger.sqlite',
    'textfile_dir': '/var/lib/node_exporter/textfile',
    'retention_days': 400,
    'sacct_lookback_hours': 24,
    'job_output': '/var/log/llmforge-repair/%j.out',
    'repair_program': '/usr/local/sbin/llmforge-repair',
    'scontrol': 'scontrol',
    'sbatch': 'sbatch',
    'squeue': 'squeue',
    'sacct': 'sacct',
    'scancel': 'scancel',
}


def _whole(value: t.Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(f'{field} must be a whole number from {low} to {high}, got {value!r}')
    return value


def _number(value: t.Any, field: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigError(f'{field} must be a number from {low:g} to {high:g}, got {value!r}')
    return float(value)


def _absolute(value: t.Any, field: str, empty: bool = False) -> str:
    path = validators.directory(value, field)
    if not path and not empty:
        raise ConfigError(f'{field} must be an absolute path, got an empty string')
    return path


def check_config(data: t.Any) -> dict[str, t.Any]:
    """The configuration with its defaults filled in, every field checked; ConfigError names the field."""
    try:
        return _checked(data)
    except ConfigError:
        raise
    except validators.SettingsError as err:
        raise ConfigError(str(err)) from None


def _checked(data: t.Any) -> dict[str, t.Any]:
    if not isinstance(data, dict):
        raise ConfigError(f'expected a JSON object, got {validators.type_name(data)}')
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f'unknown field(s) {", ".join(unknown)}; known: {", ".join(sorted(DEFAULTS))}')
    config = json.loads(json.dumps(DEFAULTS))
    for key, value in data.items():
        if key == 'timeouts':
            if not isinstance(value, dict):
                raise ConfigError(f'timeouts must be an object, got {validators.type_name(value)}')
            extra = sorted(set(value) - set(DEFAULT_TIMEOUTS))
            if extra:
                raise ConfigError(f'timeouts: unknown field(s) {", ".join(extra)}; known: {", ".join(sorted(DEFAULT_TIMEOUTS))}')
            config['timeouts'].update(value)
        else:
            config[key] = value
    reservation = validators.text(config['reservation'], 'reservation')
    if not _RESERVATION_NAME.fullmatch(reservation):
        raise ConfigError(f'reservation must be one word of letters, digits, _ . -, got {reservation!r}')
    _whole(config['max_concurrent'], 'max_concurrent', 0, 100000)
    _number(config['max_percent'], 'max_percent', 0, 100)
    limits = validators.mapping(config['partition_limits'], 'partition_limits')
    for name, limit in limits.items():
        _whole(limit, f'partition_limits.{name}', 0, 100000)
    _whole(config['suspect_sightings'], 'suspect_sightings', 1, 1000)
    _number(config['suspect_window_days'], 'suspect_window_days', 0.01, 365)
    _whole(config['suspect_min_users'], 'suspect_min_users', 1, 1000)
    _whole(config['rma_repairs'], 'rma_repairs', 1, 1000)
    _number(config['rma_window_days'], 'rma_window_days', 0.01, 3650)
    _whole(config['step_retries'], 'step_retries', 0, 10)
    _whole(config['burnin_level'], 'burnin_level', 1, 4)
    peer = validators.text(config['burnin_peer'], 'burnin_peer', 'a node name or empty')
    if peer and not _NODE_NAME.fullmatch(peer):
        raise ConfigError(f'burnin_peer must be a Slurm node name or empty, got {peer!r}')
    for key, value in config['timeouts'].items():
        _number(value, f'timeouts.{key}', 1, 7 * 86400)
    if config['timeouts']['command'] > config['timeouts']['tick']:
        raise ConfigError('timeouts.command must not exceed timeouts.tick')
    _absolute(config['evidence_dir'], 'evidence_dir', empty=True)
    _absolute(config['ledger'], 'ledger')
    _absolute(config['textfile_dir'], 'textfile_dir', empty=True)
    _number(config['retention_days'], 'retention_days', 1, 36500)
    _number(config['sacct_lookback_hours'], 'sacct_lookback_hours', 1, 24 * 60)
    _absolute(config['job_output'], 'job_output')
    _absolute(config['repair_program'], 'repair_program')
    for key in ('scontrol', 'sbatch', 'squeue', 'sacct', 'scancel'):
        if not validators.command(config[key], key):
            raise ConfigError(f'{key} must be a command name or an absolute path, got an empty string')
    return config


def load_config(path: str) -> dict[str, t.Any]:
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise ConfigError(f'{path}: not found (the slurm_controller role writes it)') from None
    except (OSError, ValueError, RecursionError) as err:
        raise ConfigError(f'{path}: cannot be read as JSON: {err}') from None
    try:
        return check_config(data)
    except validators.SettingsError as err:
        raise ConfigError(f'{path}: {err}') from None


# --- reading Slurm -----------------------------------------------------------------------------------------------

def slurm_time(text: t.Any) -> t.Optional[float]:
    """Unix time of Slurm's local `YYYY-MM-DDTHH:MM:SS`; None for Unknown, None, (null) or anything else."""
    return _slurm_time(str(text or '').strip())


@functools.lru_cache(maxsize=65536)
def _slurm_time(text: str) -> t.Optional[float]:
    match = _SLURM_TIME.fullmatch(text)
    if not match:
        return None
    year, month, day, hour, minute, second = (int(part) for part in match.groups())
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 62):
        return None
    try:
        return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
    except (ValueError, OverflowError):
        return None


def format_slurm_time(stamp: float) -> str:
    return time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(stamp))


@dataclasses.dataclass(frozen=True)
class SlurmNode:
    """One node of `scontrol show node -o`."""

    name: str
    state: str
    flags: t.FrozenSet[str]
    reason: str
    reason_time: t.Optional[float]
    partitions: t.Tuple[str, ...]
    boot_time: t.Optional[float]

    @property
    def drained(self) -> bool:
        return 'DRAIN' in self.flags

    @property
    def down(self) -> bool:
        return self.state == 'DOWN'

    @property
    def responding(self) -> bool:
        return 'NOT_RESPONDING' not in self.flags and self.state not in ('DOWN', 'UNKNOWN', 'FUTURE')

    @property
    def busy(self) -> bool:
        """Jobs still run or complete on it (an allocated or mixed node, drained or not)."""
        return self.state in ('ALLOCATED', 'MIXED') or 'COMPLETING' in self.flags

    @property
    def idle(self) -> bool:
        return self.state == 'IDLE' and not self.busy and self.responding

    @property
    def rebooting(self) -> bool:
        return bool(self.flags & {'REBOOT_REQUESTED', 'REBOOT_ISSUED'}) or self.state == 'REBOOT'

    @property
    def drain_key(self) -> str:
        """What identifies this drain: its reason and when it was set ('' when not drained or down)."""
        if not (self.drained or self.down):
            return ''
        return f'{self.reason}@{self.reason_time:.0f}' if self.reason_time else self.reason


def _fields(line: str) -> dict[str, str]:
    """`Key=value` pairs of one `-o` line; a value runs to the next ` Key=` (Reason holds blanks)."""
    found: dict[str, str] = {}
    matches = list(_FIELD.finditer(line))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        found.setdefault(match.group(1), line[match.end():end].strip())
    return found


def parse_nodes(text: str) -> dict[str, SlurmNode]:
    """{name: SlurmNode} of `scontrol show node -o` (every node, one line each)."""
    nodes = {}
    for line in text.splitlines():
        if 'NodeName=' not in line:
            continue
        fields = _fields(line)
        basic = drain.parse_node(line)
        name = basic['name'] or ''
        if not _NODE_NAME.fullmatch(name):
            continue
        words = [word for word in basic['state'].upper().replace('*', '+NOT_RESPONDING').split('+') if word]
        state = words[0] if words else 'UNKNOWN'
        reason_text = fields.get('Reason', '')
        stamp = _REASON_STAMP.search(reason_text)
        reason_time = slurm_time(stamp.group(2)) if stamp else None
        partitions = tuple(word for word in fields.get('Partitions', '').split(',') if word and word != '(null)')
        nodes[name] = SlurmNode(name, state, frozenset(words[1:]), basic['reason'], reason_time, partitions,
                                slurm_time(fields.get('BootTime')))
    return nodes


def parse_reservation(text: str) -> t.Optional[list[str]]:
    """The nodes of `scontrol show reservation <name> -o`; None when it does not exist."""
    if 'ReservationName=' not in text:
        return None
    value = _fields(text.strip().splitlines()[0] if text.strip() else '').get('Nodes', '')
    if value in ('', '(null)'):
        return []
    try:
        return hostlist.expand(value)
    except hostlist.HostlistError:
        return []


@dataclasses.dataclass(frozen=True)
class JobInfo:
    """One of our repair jobs as squeue or sacct show it."""

    job_id: str
    state: str
    exit_code: t.Optional[int]
    start: t.Optional[float]
    end: t.Optional[float]
    comment: str
    admin_comment: str
    source: str

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_JOB_STATES

    @property
    def token(self) -> str:
        words = self.comment.split()
        return words[3] if len(words) == 4 and words[0] == TOKEN_PREFIX else ''


SQUEUE_FORMAT = '%i|%T|%u|%v|%k'
SACCT_JOB_FIELDS = 'JobID,State,ExitCode,Start,End,User,Reservation,Comment,AdminComment'
SACCT_COMMENT_FIELDS = 'JobID,User,NodeList,End,Comment'


def parse_squeue_jobs(text: str, reservation: str) -> dict[str, JobInfo]:
    """Our jobs in `squeue -h -n llmforge-repair -u root -o '%i|%T|%u|%v|%k'`: root's, in our reservation."""
    jobs = {}
    for line in text.splitlines():
        parts = line.strip().split('|', 4)
        if len(parts) != 5 or not _JOB_ID.fullmatch(parts[0]) or parts[2] != JOB_USER or parts[3] != reservation:
            continue
        state = parts[1].strip().upper()
        exit_code = 0 if state == 'COMPLETED' else None
        jobs[parts[0]] = JobInfo(parts[0], state, exit_code, None, None, parts[4].strip(), '', 'squeue')
    return jobs


def parse_sacct_jobs(text: str, reservation: str) -> dict[str, JobInfo]:
    """Our jobs in `sacct -X -n -P --format=JobID,State,ExitCode,Start,End,User,Reservation,Comment,AdminComment`.
    The Reservation column may be empty: slurmdbd learns of a reservation created in the same second as the job
    after the job's record (the job's token in its Comment still names it ours)."""
    jobs = {}
    for line in text.splitlines():
        parts = line.rstrip('\n').split('|', 8)
        if len(parts) != 9 or not _JOB_ID.fullmatch(parts[0]) or parts[5] != JOB_USER \
                or parts[6] not in (reservation, ''):
            continue
        state = parts[1].split()[0].upper() if parts[1].strip() else 'UNKNOWN'
        code = parts[2].split(':')[0]
        exit_code = int(code) if _NUMBER.fullmatch(code) else None
        jobs[parts[0]] = JobInfo(parts[0], state, exit_code, slurm_time(parts[3]), slurm_time(parts[4]),
                                 parts[7].strip(), parts[8].strip(), 'sacct')
    return jobs


def parse_sacct_comments(text: str) -> list[dict[str, t.Any]]:
    """Rows of `sacct -X -n -P --format=JobID,User,NodeList,End,Comment` whose Comment holds a sighting."""
    rows = []
    for line in text.splitlines():
        parts = line.rstrip('\n').split('|', 4)
        if len(parts) != 5 or not _JOB_ID.fullmatch(parts[0]) or SIGHTING_PREFIX not in parts[4]:
            continue
        rows.append({'job': parts[0], 'user': parts[1], 'nodelist': parts[2], 'end': slurm_time(parts[3]),
                     'comment': parts[4]})
    return rows


def parse_sightings(comment: str) -> list[tuple[str, str, str]]:
    """(node, kind, detail) of each `llmforge-suspect <node> <kind> <detail>` entry of a job Comment."""
    found = []
    for entry in str(comment).split(';'):
        words = entry.strip().split(None, 3)
        if len(words) < 3 or words[0] != SIGHTING_PREFIX:
            continue
        node, kind = words[1], words[2].lower()
        if not _NODE_NAME.fullmatch(node) or kind not in SIGHTING_KINDS:
            continue
        detail = clean_text(words[3] if len(words) > 3 else '', 200)
        found.append((node, kind, detail))
        if len(found) >= MAX_SIGHTINGS_PER_JOB:
            break
    return found


def parse_report(admin_comment: str) -> dict[str, t.Any]:
    """llmforge-repair's summary in a job's AdminComment (`llmforge-repair {json}`); {} when absent or unreadable."""
    if not admin_comment.startswith(REPORT_PREFIX):
        return {}
    try:
        data = json.loads(admin_comment[len(REPORT_PREFIX):])
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def clean_text(text: t.Any, limit: int = drain.MAX_REASON) -> str:
    """ASCII, no quotes, no control characters, blanks squeezed, at most `limit` characters."""
    text = re.sub(r'[\s\x00-\x1f\x7f|]+', ' ', str(text).replace('"', '').replace("'", '')).strip()
    return text.encode('ascii', 'replace').decode('ascii')[:limit].rstrip()


@dataclasses.dataclass
class SlurmView:
    """What one tick read of Slurm: every node, the reservation's nodes (None: it does not exist), our repair jobs
    by id (squeue and sacct; `jobs_read`: sacct answered) and the sacct rows carrying sightings."""

    nodes: dict[str, SlurmNode]
    reservation: t.Optional[list[str]] = None
    jobs: dict[str, JobInfo] = dataclasses.field(default_factory=dict)
    jobs_read: bool = True
    comments: list[dict[str, t.Any]] = dataclasses.field(default_factory=list)


# --- faults -----------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Fault:
    """What a drain reason says is wrong: its kind (xid, sxid, aer, dcgm, epilog, killtask), code, device (GPU3,
    nvswitch1, a PCI address, node), GPU index when one is named, the cheapest tier and whether the class is
    hardware; `grace`: wait timeouts.epilog_grace for a more precise reason first."""

    kind: str
    code: int
    device: str
    gpu: t.Optional[int]
    tier: str
    hardware: bool
    reason: str
    grace: bool = False

    def as_dict(self) -> dict[str, t.Any]:
        return dataclasses.asdict(self)


def _record_field(record: t.Any, name: str) -> t.Any:
    if isinstance(record, t.Mapping):
        return record.get(name)
    return getattr(record, name, None)


def catalog_class(kind: str, code: int, fatal: bool = True) -> tuple[str, bool]:
    """(tier, hardware) of an Xid or SXid from the GPU catalog; ('reboot', False) for a code it does not know."""
    function = getattr(gpu_catalog, 'xid_class' if kind == 'xid' else 'sxid_class', None)
    record = None
    if function is not None:
        try:
            record = function(code) if kind == 'xid' else function(code, fatal)
        except (KeyError, ValueError, TypeError, LookupError):
            record = None
    tier = _record_field(record, 'tier') if record is not None else None
    if tier not in CATALOG_TIERS:
        return 'reboot', False
    return str(tier), bool(_record_field(record, 'hardware'))


def _codes(words: t.Sequence[str]) -> list[int]:
    """The fault codes among the words of a reason: `79`, `48,94`."""
    found = []
    for word in words:
        for part in word.strip(',;:').split(','):
            if _NUMBER.fullmatch(part):
                found.append(int(part))
    return found


def _worst(classes: t.Sequence[tuple[str, bool]]) -> tuple[str, bool]:
    """The costliest tier of several codes and whether any of them is hardware."""
    if not classes:
        return 'reboot', False
    tier = max((tier for tier, _hardware in classes), key=CATALOG_TIERS.index)
    return tier, any(hardware for _tier, hardware in classes)


def classify(reason: str) -> t.Optional[Fault]:
    """The fault a drain reason names, or None for a reason this program does not repair (a validator's drain, the
    health check's own errors, our lifecycle reasons, the DCGM stage's quarantine, an administrator's).

    The health check's kernel-log reasons read `llmforge: xid GPU3 79` (several codes: `48,94`), `llmforge: sxid
    nvswitch1 12028`, `llmforge: aer 0000:18:00.0 fatal`, `llmforge: fallen_off_bus GPU3`; the code may also come
    before the device (`llmforge: xid 79 GPU3`). `llmforge: dcgm L1 ...` and `llmforge: epilog GPU2 ...` come from
    the health check's DCGM level 1 and the epilog's record; `Kill task failed` and `Epilog error` from Slurm."""
    reason = str(reason or '').strip()
    if reason.startswith('Kill task failed'):
        return Fault('killtask', 0, 'node', None, 'reboot', False, reason)
    if reason.startswith('Epilog error'):
        return Fault('epilog', 0, 'node', None, 'reboot', False, reason, grace=True)
    if not reason.startswith(drain.REASON_PREFIX):
        return None
    words = reason[len(drain.REASON_PREFIX):].split()
    if not words:
        return None
    head, rest = words[0].lower(), words[1:]
    gpu_match = _GPU_WORD.search(' '.join(rest))
    gpu = int(gpu_match.group(1)) if gpu_match else None
    gpu_device = f'GPU{gpu}' if gpu is not None else 'node'
    if head == 'xid':
        codes = _codes(rest)
        tier, hardware = _worst([catalog_class('xid', code) for code in codes])
        return Fault('xid', max(codes) if codes else 0, gpu_device, gpu, tier, hardware, reason)
    if head == 'fallen_off_bus':
        tier, hardware = catalog_class('xid', 79)
        return Fault('fallen_off_bus', 79, gpu_device, gpu, tier, hardware, reason)
    if head == 'sxid':
        codes = _codes(rest)
        fatal = not any(word.lower().strip(',') in ('non-fatal', 'nonfatal') for word in rest)
        switch = next((word for word in rest if 'nvswitch' in word.lower()), 'nvswitch')
        tier, hardware = _worst([catalog_class('sxid', code, fatal) for code in codes])
        if tier == 'none':
            tier = 'reboot'
        return Fault('sxid', max(codes) if codes else 0, switch, None, tier, hardware, reason)
    if head == 'aer':
        fatal = any(word.lower().strip(',') == 'fatal' or word.lower().startswith('fatal,') for word in rest)
        device = gpu_device if gpu is not None else next(
            (word for word in rest if word.lower().strip(',') not in ('fatal', 'non-fatal', 'fatal,non-fatal')), 'node')
        return Fault('aer', 0, device, gpu, 'reboot', fatal, reason)
    if head == 'dcgm' and rest[:1] == ['L1'] and 'pending' not in ' '.join(rest[1:2]):
        return Fault('dcgm', 1, gpu_device, gpu, 'reset' if gpu is not None else 'reboot', False, reason)
    if head == 'epilog':
        return Fault('epilog', 0, gpu_device, gpu, 'reset' if gpu is not None else 'reboot', False, reason)
    return None


def is_ours(reason: str) -> bool:
    """A drain reason this program may act on: ours (`llmforge: ...`) or one of Slurm's own SLURM_REASONS."""
    reason = str(reason or '')
    return reason.startswith(drain.REASON_PREFIX) or reason.startswith(SLURM_REASONS)


def validate_owns(reason: str) -> bool:
    """The validate role's DCGM quarantine (`llmforge: dcgm L3 pending: ...`) and its verdicts at levels 2-4."""
    words = str(reason or '')[len(drain.REASON_PREFIX):].split() if str(reason or '').startswith(drain.REASON_PREFIX) else []
    return len(words) > 1 and words[0] == 'dcgm' and words[1] != 'L1'


def lifecycle_reason(reason: str) -> bool:
    words = str(reason or '')[len(drain.REASON_PREFIX):].split() if str(reason or '').startswith(drain.REASON_PREFIX) else []
    return bool(words) and words[0] in LIFECYCLE_WORDS


# --- the ledger snapshot and the decisions ----------------------------------------------------------------------

@dataclasses.dataclass
class NodeRecord:
    """A node's row in the ledger. `plan` (JSON) holds the repair episode: fault, trigger, held, tiers_done, step,
    next, evidence, rma_reason, entered, retries."""

    name: str
    state: str = HEALTHY
    since: float = 0.0
    reason: str = ''
    plan: dict[str, t.Any] = dataclasses.field(default_factory=dict)
    drain_key: str = ''
    drain_seen: float = 0.0
    cleared_at: float = 0.0
    gpus: dict[str, t.Any] = dataclasses.field(default_factory=dict)

    def copy(self) -> 'NodeRecord':
        return NodeRecord(self.name, self.state, self.since, self.reason, json.loads(json.dumps(self.plan)),
                          self.drain_key, self.drain_seen, self.cleared_at, dict(self.gpus))


@dataclasses.dataclass
class Snapshot:
    """What decide() needs of the ledger: every node's record; per node the sightings within the suspect window and
    after its last return to service ({job: (user, time)}); the repairs (reset, reboot) and hardware faults within
    the RMA window as (node, device, serial, time[, dedup key])."""

    nodes: dict[str, NodeRecord]
    sightings: dict[str, dict[str, tuple[str, float]]] = dataclasses.field(default_factory=dict)
    repairs: list[tuple[t.Any, ...]] = dataclasses.field(default_factory=list)
    hardware_faults: list[tuple[t.Any, ...]] = dataclasses.field(default_factory=list)

    def device_rows(self, which: str, node: str, device: str, serial: t.Optional[str]) -> list[tuple[t.Any, ...]]:
        """The rows of `repairs` or `hardware_faults` that may concern a device: of its serial, or of its place."""
        index = self.__dict__.setdefault(f'_{which}_index', {})
        if not index:
            for row in getattr(self, which):
                index.setdefault(('place', row[0], row[1]), []).append(row)
                if row[2]:
                    index.setdefault(('serial', row[2]), []).append(row)
            index[None] = []
        rows = list(index.get(('place', node, device), []))
        if serial:
            rows += [row for row in index.get(('serial', serial), []) if (row[0], row[1]) != (node, device)]
        return rows


class Command(t.NamedTuple):
    """One Slurm command of a decision: `kind` (drain, resume, submit, reboot, cancel), its argv, and its phase
    (0 before the reservation is changed, 1 after)."""

    kind: str
    argv: t.Tuple[str, ...]
    phase: int = 1


@dataclasses.dataclass
class Decision:
    """What happens to one node in this tick. `record`: its new ledger row (None: unchanged); `events`: ledger
    events (those with observe=True are recorded in a dry run too); `reserve`: True add to / False remove from the
    reservation; `log`: print the journal line."""

    node: str
    old: str
    new: str
    why: str
    record: t.Optional[NodeRecord] = None
    events: list[dict[str, t.Any]] = dataclasses.field(default_factory=list)
    commands: list[Command] = dataclasses.field(default_factory=list)
    reserve: t.Optional[bool] = None
    log: bool = True

    def line(self, dry_run: bool = False) -> str:
        suffix = ' (dry run)' if dry_run and (self.commands or self.record is not None) else ''
        return f'{PROGRAM}: {self.node} {self.old} -> {self.new}: {self.why}{suffix}'


@dataclasses.dataclass
class Plan:
    """decide()'s result: one decision per node that needs one, the reservation command ([] none), and counts."""

    decisions: list[Decision]
    reservation: list[str]
    held: int
    waiting: int
    ignored_sightings: int = 0


def reservation_argv(scontrol: str, name: str, current: t.Optional[t.Sequence[str]],
                     wanted: t.Sequence[str]) -> list[str]:
    """The scontrol argv that makes the reservation hold `wanted`; [] when nothing changes. Created (as the validate
    role's DCGM stage creates it: maintenance, root only, ignoring running jobs) when absent, deleted when empty."""
    wanted = sorted(set(wanted), key=natural_key)
    if current is None:
        if not wanted:
            return []
        return [scontrol, 'create', 'reservation', f'ReservationName={name}', 'StartTime=now', 'Duration=UNLIMITED',
                f'Users={JOB_USER}', 'Flags=MAINT,IGNORE_JOBS', f"Nodes={','.join(wanted)}"]
    if not wanted:
        return [scontrol, 'delete', f'ReservationName={name}']
    if sorted(set(current), key=natural_key) == wanted:
        return []
    return [scontrol, 'update', f'ReservationName={name}', f"Nodes={','.join(wanted)}"]


class _Context:
    """Per-tick values decide()'s node rules share."""

    def __init__(self, snapshot: Snapshot, slurm: SlurmView, config: t.Mapping[str, t.Any], now: float) -> None:
        self.snapshot = snapshot
        self.slurm = slurm
        self.config = config
        self.now = now
        self.timeouts = config['timeouts']
        self.in_reservation = set(slurm.reservation or [])
        self.by_token = {job.token: job for job in slurm.jobs.values() if job.token}

    def event(self, node: str, kind: str, **fields: t.Any) -> dict[str, t.Any]:
        fields.setdefault('ts', self.now)
        return dict(fields, node=node, kind=kind)

    def scontrol(self, *args: str) -> tuple[str, ...]:
        return (self.config['scontrol'], *args)


def _device_of(record: NodeRecord, device: str) -> tuple[t.Optional[str], t.Optional[str]]:
    """(serial, uuid) of a device of the node (GPU3) when a repair job reported them."""
    known = record.gpus.get(device[3:]) if device.startswith('GPU') else None
    if isinstance(known, dict):
        return known.get('serial') or None, known.get('uuid') or None
    return None, None


def _same_device(node: str, device: str, serial: t.Optional[str], row: tuple[t.Any, ...]) -> bool:
    other_node, other_device, other_serial = row[:3]
    if serial and other_serial:
        return serial == other_serial
    return node == other_node and device == other_device


def rma_verdict(record: NodeRecord, fault: Fault, snapshot: Snapshot, config: t.Mapping[str, t.Any],
                now: float, returned_at: float = 0.0, this_fault: str = '') -> str:
    """Why this fault means RMA ('' when it does not): the catalog's tier, K repairs of the device within the
    window, or a hardware class repeating on it. A device known only by its place (no serial) counts from the
    node's last return from RMA (`returned_at`): its part may have been replaced. The fault's own event (its
    dedup key `this_fault`, recorded by an earlier tick or a dry run) is no repeat of itself."""
    if fault.tier == 'rma':
        return f'{fault.kind} {fault.code} is an RMA class'
    serial, _uuid = _device_of(record, fault.device)
    since = now - config['rma_window_days'] * 86400
    back = max(since, returned_at)
    repairs = [row for row in snapshot.device_rows('repairs', record.name, fault.device, serial)
               if row[3] >= back and _same_device(record.name, fault.device, serial, row)]
    if fault.device != 'node' and len(repairs) >= config['rma_repairs']:
        return f"{len(repairs)} repairs of {serial or fault.device} within {config['rma_window_days']:g} days"
    if fault.hardware and fault.device != 'node':
        earlier = [row for row in snapshot.device_rows('hardware_faults', record.name, fault.device, serial)
                   if row[3] >= back and _same_device(record.name, fault.device, serial, row)
                   and not (len(row) > 4 and row[4] == this_fault)]
        if earlier:
            return f'hardware fault {fault.kind} {fault.code} repeats on {serial or fault.device}'
    return ''


def _first_step(fault: t.Optional[Fault]) -> str:
    """The first step of a repair episode: the fault's cheapest tier, a burn-in for a fault that needs none."""
    if fault is None or fault.tier == 'none':
        return 'burnin'
    if fault.tier == 'reset' and fault.gpu is None:
        return 'reboot'
    return fault.tier


def _escalate(plan: dict[str, t.Any]) -> str:
    """The next tier after a failure: the first tier not yet tried at or above the fault's own, else rma."""
    fault = plan.get('fault') or {}
    start = fault.get('tier') if fault.get('tier') in TIERS else 'reset'
    done = plan.get('tiers_done') or []
    for tier in TIERS[TIERS.index(start):]:
        if tier in done:
            continue
        if tier == 'reset' and fault.get('gpu') is None:
            continue
        return tier
    return 'rma'


def _rma_text(record: NodeRecord, plan: dict[str, t.Any], why: str) -> str:
    fault = plan.get('fault') or {}
    device = fault.get('device') or 'node'
    serial, _uuid = _device_of(record, device)
    return clean_text(f"{drain.REASON_PREFIX} rma {serial or device} {why}")


class _NodeRules:
    """The rules of one node in one tick: builds its Decision from its record and Slurm state."""

    def __init__(self, record: NodeRecord, node: SlurmNode, ctx: _Context) -> None:
        self.old = record
        self.rec = record.copy()
        self.node = node
        self.ctx = ctx
        self.decision = Decision(record.name, record.state, record.state, '')
        self.changed = False

    # helpers ----------------------------------------------------------------------------------------------------

    @property
    def plan(self) -> dict[str, t.Any]:
        return self.rec.plan

    def set_state(self, state: str, why: str, reason: t.Optional[str] = None) -> None:
        if state != self.rec.state:
            self.decision.events.append(self.ctx.event(self.rec.name, 'transition', action=self.rec.state,
                                                       outcome=state, detail=why))
            self.rec.state = state
            self.rec.since = self.ctx.now
        if reason is not None:
            self.rec.reason = reason
        self.changed = True
        self.decision.new = state
        self.decision.why = why

    def wait(self, why: str, log: bool = True) -> Decision:
        if why and self.rec.state != self.old.state and self.decision.why:
            why = f'{self.decision.why}; {why}'
        self.decision.why = why
        self.decision.log = log
        return self.finish()

    def finish(self) -> Decision:
        if self.changed:
            self.decision.record = self.rec
        self.decision.new = self.rec.state
        return self.decision

    def command(self, kind: str, argv: t.Sequence[str], phase: int = 1) -> None:
        self.decision.commands.append(Command(kind, tuple(argv), phase))
        self.changed = True

    def drain(self, reason: str) -> None:
        self.command('drain', self.ctx.scontrol('update', f'NodeName={self.rec.name}', 'State=DRAIN',
                                                f'Reason={reason}'), phase=0)

    def resume_if_drained(self) -> None:
        """Resume a node we drained (it is in the reservation, so no user job reaches it)."""
        if self.node.drained and is_ours(self.node.reason):
            self.command('resume', self.ctx.scontrol('update', f'NodeName={self.rec.name}', 'State=RESUME'))

    def hold(self, value: bool, reserve: bool = True) -> None:
        if bool(self.plan.get('held')) != value:
            self.plan['held'] = value
            self.changed = True
        if value and reserve and self.rec.name not in self.ctx.in_reservation:
            self.decision.reserve = True
        if not value and self.old.plan.get('held') and self.rec.name in self.ctx.in_reservation:
            self.decision.reserve = False

    def action_event(self, step: str, why: str, **fields: t.Any) -> None:
        fault = self.plan.get('fault') or {}
        device = fault.get('device') or 'node'
        serial, uuid = _device_of(self.rec, device)
        self.decision.events.append(self.ctx.event(self.rec.name, 'action', action=step, device=device,
                                                   gpu_serial=serial, gpu_uuid=uuid, detail=why, **fields))

    # steps ------------------------------------------------------------------------------------------------------

    def start_step(self, step: str, why: str) -> Decision:
        """Start `step` on the node (held, in the reservation, idle): a job or a reboot; state repairing (rma for
        the evidence job)."""
        self.hold(True)
        config = self.ctx.config
        if step == 'rma':
            return self.enter_rma(why)
        self.plan['next'] = None
        if step == 'reboot':
            reason = clean_text(f"{drain.REASON_PREFIX} repair reboot {self.fault_text()}")
            self.plan['step'] = {'kind': 'reboot', 'at': self.ctx.now, 'boot_time': self.node.boot_time,
                                 'attempts': self.retries('reboot')}
            self.tried('reboot')
            self.action_event('reboot', why)
            self.command('reboot', self.ctx.scontrol('reboot', 'ASAP', 'nextstate=RESUME', f'reason={reason}',
                                                     self.rec.name))
            self.set_state(REPAIRING, f'{why}: reboot requested through Slurm')
            return self.finish()
        self.resume_if_drained()
        token = secrets.token_hex(8)
        argv = self.sbatch(step, token)
        self.plan['step'] = {'kind': step, 'token': token, 'job_id': None, 'at': self.ctx.now,
                             'attempts': self.retries(step)}
        if step == 'reset':
            self.tried('reset')
        self.action_event(step, why)
        self.command('submit', argv)
        state = RMA if step == 'evidence' else REPAIRING
        self.set_state(state, f'{why}: {step} job submitted in reservation {config["reservation"]}')
        return self.finish()

    def tried(self, tier: str) -> None:
        done = self.plan.setdefault('tiers_done', [])
        if tier not in done:
            done.append(tier)

    def retries(self, step: str) -> int:
        """The attempt number of a step about to start: one more than a failed attempt of the same step."""
        previous = self.plan.get('step') or {}
        if previous.get('kind') == step and previous.get('retry'):
            return int(previous.get('attempts', 1)) + 1
        pending = self.plan.pop('retry', None) or {}
        return int(pending.get('attempts', 1)) + 1 if pending.get('kind') == step else 1

    def fault_text(self) -> str:
        fault = self.plan.get('fault') or {}
        if fault.get('reason'):
            return clean_text(str(fault['reason'])[len(drain.REASON_PREFIX):] if str(fault['reason']).startswith(
                drain.REASON_PREFIX) else fault['reason'], 80)
        return clean_text(self.plan.get('trigger') or 'repair', 80)

    def sbatch(self, step: str, token: str) -> list[str]:
        config = self.ctx.config
        words = [config['repair_program'], step]
        nodelist = self.rec.name
        if step == 'reset':
            words += ['--gpu', str((self.plan.get('fault') or {}).get('gpu'))]
        elif step == 'burnin':
            words += ['--level', str(config['burnin_level'])]
            peer = config['burnin_peer']
            if peer and peer != self.rec.name and peer in self.ctx.in_reservation:
                words += ['--peer', peer]
                nodelist = f'{self.rec.name},{peer}'
        elif step == 'evidence':
            words += ['--out', config['evidence_dir'], '--reason', self.plan.get('rma_reason') or 'rma']
        words.append('--report')
        minutes = max(1, math.ceil(config['timeouts'][step] / 60))
        argv = [config['sbatch'], '--parsable', f'--job-name={JOB_NAME}', f'--reservation={config["reservation"]}',
                f'--nodelist={nodelist}', f'--nodes={nodelist.count(",") + 1}', '--exclusive', '--no-requeue',
                f'--time={minutes}', f'--comment={TOKEN_PREFIX} {self.rec.name} {step} {token}',
                f'--output={config["job_output"]}', '--chdir=/', '--export=NONE']
        if self.node.partitions:
            argv.append(f'--partition={self.node.partitions[0]}')
        argv.append('--wrap=exec ' + ' '.join(shlex.quote(word) for word in words))
        return argv

    def enter_rma(self, why: str) -> Decision:
        """RMA: the node stays drained with `llmforge: rma <serial> <why>`; an evidence job first when configured
        and the node can run one."""
        reason = _rma_text(self.rec, self.plan, why)
        self.plan['rma_reason'] = reason
        self.plan['step'] = None
        self.plan['next'] = None
        fault = self.plan.get('fault') or {}
        serial, uuid = _device_of(self.rec, fault.get('device') or 'node')
        self.decision.events.append(self.ctx.event(self.rec.name, 'rma', device=fault.get('device') or 'node',
                                                   gpu_serial=serial, gpu_uuid=uuid, detail=reason))
        wanted = bool(self.ctx.config['evidence_dir'])
        self.plan['evidence'] = 'wanted' if wanted else 'off'
        self.set_state(RMA, why, reason=reason)
        if wanted and self.plan.get('held') and self.node.idle:
            return self.start_step('evidence', f'rma ({why})')
        if wanted and self.node.responding and not self.node.down:
            if self.node.drained:
                self.drain(reason)
            self.decision.why = f'rma ({why}): evidence job waits for the node to be idle'
            return self.finish()
        return self.finalize_rma(why if not wanted else f'{why}; no evidence (node not responding)')

    def finalize_rma(self, why: str) -> Decision:
        reason = self.plan.get('rma_reason') or _rma_text(self.rec, self.plan, why)
        if self.plan.get('evidence') == 'wanted':
            self.plan['evidence'] = 'failed'
        self.plan['step'] = None
        self.plan['final'] = True
        self.drain(reason)
        self.hold(False)
        self.set_state(RMA, f'{why}: drained with "{reason}"', reason=reason)
        return self.finish()

    def release(self, why: str) -> Decision:
        """Back to service: out of the reservation (before the resume), resumed when drained by us."""
        entered = float(self.plan.get('entered') or self.rec.since or self.ctx.now)
        self.hold(False)
        self.resume_if_drained()
        self.decision.events.append(self.ctx.event(self.rec.name, 'repaired', value=max(0.0, self.ctx.now - entered),
                                                   detail=why, action=self.plan.get('trigger') or ''))
        self.rec.plan = {}
        self.rec.cleared_at = self.ctx.now
        self.set_state(HEALTHY, why, reason='')
        return self.finish()

    # the rules --------------------------------------------------------------------------------------------------

    def observe_drain(self) -> None:
        key = self.node.drain_key
        if key != self.rec.drain_key:
            if key:
                self.decision.events.append(self.ctx.event(
                    self.rec.name, 'drain', detail=clean_text(self.node.reason, 200), observe=True,
                    action='ours' if is_ours(self.node.reason) else 'admin', dedup=f'drain|{self.rec.name}|{key}'))
            self.rec.drain_key = key
            self.rec.drain_seen = self.ctx.now if key else 0.0
            self.changed = True

    def decide(self) -> t.Union[Decision, '_Candidate']:
        self.observe_drain()
        node = self.node
        admin = (node.drained or node.down) and not is_ours(node.reason)
        step = self.plan.get('step') or {}
        if admin and self.rec.state == REPAIRING and step.get('kind') == 'reboot' and (node.down or node.rebooting):
            # Slurm's own words during our reboot (reboot timed out, ...): the reboot's progress decides.
            return self.repairing()
        if admin:
            if self.rec.state != HEALTHY:
                return self.wait(f'drained or down by someone else ({node.reason or "no reason"}): left alone',
                                 log=bool(self.decision.events))
            return self.wait('', log=False)
        if self.rec.state in (HEALTHY, SUSPECT):
            return self.healthy()
        if self.rec.state == QUARANTINED:
            return self.quarantined()
        if self.rec.state == REPAIRING:
            return self.repairing()
        return self.rma()

    def healthy(self) -> t.Union[Decision, '_Candidate']:
        node, ctx = self.node, self.ctx
        if node.drained or node.down:
            if validate_owns(node.reason):
                return self.wait('', log=False)
            fault = classify(node.reason)
            if fault is None:
                return self.wait(f'drained for {clean_text(node.reason, 80)}: not a fault this program repairs',
                                 log=bool(self.decision.events))
            since = node.reason_time or self.rec.drain_seen or ctx.now
            if fault.grace and ctx.now - since < ctx.timeouts['epilog_grace']:
                return self.wait(f'{fault.reason}: waiting for the health check\'s precise reason',
                                 log=bool(self.decision.events))
            return self.intake(fault)
        return self.sightings()

    def intake(self, fault: Fault) -> t.Union[Decision, '_Candidate']:
        ctx = self.ctx
        serial, uuid = _device_of(self.rec, fault.device)
        key = f'fault|{self.rec.name}|{self.node.drain_key}'
        self.decision.events.append(ctx.event(
            self.rec.name, 'fault', action=fault.kind, value=fault.code, device=fault.device, gpu_serial=serial,
            gpu_uuid=uuid, outcome='hardware' if fault.hardware else '', detail=clean_text(fault.reason, 200),
            observe=True, dedup=key))
        self.rec.plan = {'fault': fault.as_dict(), 'trigger': 'fault', 'held': False, 'tiers_done': [],
                         'entered': ctx.now, 'step': None, 'next': _first_step(fault)}
        verdict = rma_verdict(self.rec, fault, ctx.snapshot, ctx.config, ctx.now,
                              float(self.old.plan.get('returned_at') or 0), key)
        if verdict:
            return self.enter_rma(verdict)
        self.set_state(QUARANTINED, f'{clean_text(fault.reason, 80)} ({self.plan["next"]} first)')
        return self.want_start(self.plan['next'], priority=0)

    def sightings(self) -> t.Union[Decision, '_Candidate']:
        ctx = self.ctx
        seen = ctx.snapshot.sightings.get(self.rec.name, {})
        jobs = len(seen)
        users = len({user for user, _when in seen.values()})
        if jobs >= ctx.config['suspect_sightings'] and users >= ctx.config['suspect_min_users']:
            if self.rec.state != SUSPECT:
                self.set_state(SUSPECT, f'suspect: sightings from {jobs} jobs')
            return _Candidate(self, 1, self.rec.since, 'burnin', suspect=(jobs, users))
        if jobs and self.rec.state == HEALTHY:
            self.set_state(SUSPECT, f'suspect: sightings from {jobs} job(s) (a burn-in at {ctx.config["suspect_sightings"]})')
            return self.finish()
        if not jobs and self.rec.state == SUSPECT:
            self.set_state(HEALTHY, 'no sighting left within the suspect window')
            return self.finish()
        return self.wait('', log=False)

    def want_start(self, step: str, priority: int) -> t.Union[Decision, '_Candidate']:
        """A step that needs the node idle and, unless it is held already, a free slot."""
        node = self.node
        if node.busy:
            return self.wait(f'{step} waits for the jobs on the node to end')
        if not node.responding or node.down:
            return self.wait(f'{step} waits for the node to respond')
        if self.plan.get('held'):
            return self.start_step(step, self.decision.why or f'quarantined for {self.plan.get("trigger")}')
        return _Candidate(self, priority, float(self.plan.get('entered') or self.rec.since), step)

    def quarantined(self) -> t.Union[Decision, '_Candidate']:
        node = self.node
        if not self.plan.get('held') and not node.drained and node.name not in self.ctx.in_reservation:
            self.rec.plan = {}
            self.set_state(HEALTHY, 'resumed by someone else before its repair started')
            return self.finish()
        if self.plan.get('held') and self.plan.get('drained') and not node.drained \
                and node.name not in self.ctx.in_reservation:
            self.rec.plan = {}
            self.set_state(HEALTHY, 'resumed by someone else while waiting for its burn-in')
            return self.finish()
        step = self.plan.get('next') or 'burnin'
        self.decision.why = ''
        return self.want_start(step, priority=0 if self.plan.get('trigger') == 'fault' else 1)

    def repairing(self) -> Decision:
        step = self.plan.get('step') or {}
        if self.rec.name not in self.ctx.in_reservation:
            self.decision.reserve = True
        if step.get('kind') == 'reboot':
            return self.reboot_progress(step)
        if step.get('kind') in JOB_STEPS:
            return self.job_progress(step)
        nxt = self.plan.get('next') or 'burnin'
        if self.node.busy or not self.node.idle:
            return self.wait(f'{nxt} waits for the node to be idle')
        return self.start_step(nxt, 'continuing the repair')

    def rma(self) -> t.Union[Decision, '_Candidate']:
        node = self.node
        step = self.plan.get('step') or {}
        if step.get('kind') == 'evidence':
            if node.name not in self.ctx.in_reservation:
                self.decision.reserve = True
            return self.job_progress(step)
        returned = not node.drained and node.name not in self.ctx.in_reservation and not self.plan.get('held')
        if self.plan.get('evidence') == 'wanted' and not returned:
            if not node.responding or node.down:
                if self.ctx.now - self.rec.since > self.ctx.timeouts['evidence'] + self.ctx.timeouts['pending']:
                    return self.finalize_rma('no evidence (the node did not respond)')
                return self.wait('evidence job waits for the node to respond')
            return self.want_start('evidence', priority=0)
        if returned:
            self.rec.plan = {'returned_at': self.ctx.now}
            self.rec.cleared_at = self.ctx.now
            self.decision.events.append(self.ctx.event(self.rec.name, 'returned', detail='resumed by an administrator'))
            self.set_state(HEALTHY, 'returned to service by an administrator after rma', reason='')
            return self.finish()
        if not node.drained:
            # In our reservation, not drained: finish what a crashed tick left.
            return self.finalize_rma(self.rec.reason or 'rma')
        return self.wait('', log=False)

    # progress of a step -----------------------------------------------------------------------------------------

    def job_progress(self, step: dict[str, t.Any]) -> Decision:
        ctx, node = self.ctx, self.node
        kind = step['kind']
        job = ctx.slurm.jobs.get(str(step.get('job_id'))) if step.get('job_id') else None
        if job is None and step.get('token'):
            job = ctx.by_token.get(step['token'])
            if job is not None and step.get('job_id') != job.job_id:
                step['job_id'] = job.job_id
                self.changed = True
        age = ctx.now - float(step.get('at') or ctx.now)
        if job is None:
            if not ctx.slurm.jobs_read or age < ctx.timeouts['lookup']:
                return self.wait(f'{kind} job {step.get("job_id") or "(submission not confirmed)"} not listed yet')
            return self.step_done(kind, 'error', 'the job is in neither squeue nor sacct', None)
        if job.active:
            if age > ctx.timeouts[kind] + ctx.timeouts['pending']:
                self.command('cancel', (ctx.config['scancel'], job.job_id))
                return self.step_done(kind, 'error', f'job {job.job_id} {job.state.lower()} for {age:.0f} s: cancelled', job)
            if job.state == 'PENDING' and node.drained and is_ours(node.reason):
                self.resume_if_drained()
                return self.wait(f'{kind} job {job.job_id} pending: node resumed in the reservation')
            return self.wait(f'{kind} job {job.job_id} {job.state.lower()}', log=False)
        if job.exit_code is None and job.state == 'FAILED':
            # squeue's FAILED: exit 1 (a failing test) and other exits (an error) differ; sacct tells them apart.
            if ctx.slurm.jobs_read and age > ctx.timeouts[kind] + ctx.timeouts['lookup']:
                return self.step_done(kind, 'fail', f'job {job.job_id} failed (exit code unknown)', job)
            return self.wait(f'{kind} job {job.job_id} failed: waiting for its exit code')
        if job.state == 'COMPLETED' and (job.exit_code in (0, None)):
            outcome = 'pass'
        elif job.state == 'FAILED' and job.exit_code == 1:
            outcome = 'fail'
        else:
            outcome = 'error'
        return self.step_done(kind, outcome, f'job {job.job_id} {job.state.lower()} exit {job.exit_code}', job)

    def learn(self, job: t.Optional[JobInfo]) -> dict[str, t.Any]:
        """The report in the job's AdminComment: the GPUs' serials and UUIDs are kept on the node's record."""
        report = parse_report(job.admin_comment) if job else {}
        gpus = report.get('gpus')
        if isinstance(gpus, dict):
            for index, ids in gpus.items():
                if _NUMBER.fullmatch(str(index)) and isinstance(ids, list) and len(ids) == 2:
                    entry = {'serial': clean_text(ids[0], 64), 'uuid': clean_text(ids[1], 80)}
                    if self.rec.gpus.get(str(index)) != entry:
                        self.rec.gpus[str(index)] = entry
                        self.changed = True
        if report:
            self.decision.events.append(self.ctx.event(self.rec.name, 'diagnostic', job_id=job.job_id if job else None,
                                                       action=str(report.get('command') or ''),
                                                       outcome='pass' if report.get('ok') else 'fail',
                                                       detail=json.dumps(report, sort_keys=True)[:2000]))
        return report

    def step_done(self, kind: str, outcome: str, why: str, job: t.Optional[JobInfo]) -> Decision:
        ctx = self.ctx
        step = self.plan.get('step') or {}
        report = self.learn(job)
        self.action_event(kind, why, outcome=outcome, value=ctx.now - float(step.get('at') or ctx.now),
                          job_id=job.job_id if job else step.get('job_id'))
        self.decision.events[-1]['kind'] = 'outcome'
        retries = int(step.get('attempts', 1))
        if kind == 'evidence':
            self.plan['evidence'] = 'done' if outcome == 'pass' else 'failed'
            self.plan['step'] = None
            return self.finalize_rma(f'evidence {outcome} ({why})')
        if outcome == 'error' and retries <= ctx.config['step_retries']:
            step['retry'] = True
            self.plan['step'] = step
            if kind == 'reset':
                self.plan['tiers_done'] = [tier for tier in self.plan.get('tiers_done', []) if tier != 'reset']
            if self.node.idle or (self.node.drained and is_ours(self.node.reason) and not self.node.busy
                                  and self.node.responding):
                return self.start_step(kind, f'{kind} {outcome} ({why}), retry {retries}')
            self.plan['next'] = kind
            self.plan['step'] = None
            self.plan['retry'] = {'kind': kind, 'attempts': retries}
            self.set_state(REPAIRING, f'{kind} {outcome} ({why}): retry waits for the node to be idle')
            return self.finish()
        self.plan['step'] = None
        if kind == 'reset':
            if outcome == 'pass':
                return self.next_step('burnin', f'reset pass ({why})')
            return self.next_step(_escalate(self.plan), f'reset {outcome} ({why})')
        # burn-in
        if outcome == 'pass':
            late = classify(self.node.reason) if self.node.drained else None
            started = float(step.get('at') or 0)
            if late is not None and (self.node.reason_time or ctx.now) >= started:
                return self.next_step(_escalate(self.plan), f'burn-in passed but the node drained again ({late.reason})')
            return self.release(f'burn-in pass ({why}): back in service')
        failing = report.get('failed') if isinstance(report.get('failed'), list) else []
        gpu = next((int(match.group(1)) for text in failing for match in [_GPU_WORD.search(str(text))] if match), None)
        fault = self.plan.setdefault('fault', None) or {}
        if fault.get('gpu') is None and gpu is not None:
            fault.update({'gpu': gpu, 'device': f'GPU{gpu}'})
            fault.setdefault('tier', 'reset')
            self.plan['fault'] = fault
        elif not fault:
            self.plan['fault'] = {'kind': 'burnin', 'code': 0, 'device': 'node', 'gpu': None, 'tier': 'reset',
                                  'hardware': False, 'reason': f'{drain.REASON_PREFIX} burnin fail'}
        detail = f' ({"; ".join(clean_text(text, 60) for text in failing[:2])})' if failing else ''
        return self.next_step(_escalate(self.plan), f'burn-in {outcome}{detail} ({why})')

    def next_step(self, step: str, why: str) -> Decision:
        if step == 'rma':
            return self.enter_rma(f'{why}; no repair tier left')
        node = self.node
        if node.busy or not node.responding or node.down:
            self.plan['next'] = step
            self.set_state(REPAIRING, f'{why}: {step} waits for the node to be idle')
            return self.finish()
        return self.start_step(step, why)

    def reboot_progress(self, step: dict[str, t.Any]) -> Decision:
        ctx, node = self.ctx, self.node
        at = float(step.get('at') or ctx.now)
        age = ctx.now - at
        before = step.get('boot_time')
        booted = node.boot_time is not None and node.boot_time >= at - 5 and node.boot_time != before
        if booted and not node.rebooting and node.responding and not node.down:
            self.action_event('reboot', 'node booted again', outcome='pass', value=age)
            self.decision.events[-1]['kind'] = 'outcome'
            self.plan['step'] = None
            return self.start_step('burnin', 'reboot pass') if node.idle or node.drained else \
                self.next_step('burnin', 'reboot pass')
        if node.rebooting or booted or node.down or not node.responding or (
                node.drained and node.reason.startswith(f'{drain.REASON_PREFIX} repair reboot')):
            if age > ctx.timeouts['reboot']:
                self.action_event('reboot', f'not back after {age:.0f} s', outcome='fail', value=age)
                self.decision.events[-1]['kind'] = 'outcome'
                self.plan['step'] = None
                return self.enter_rma(f'did not come back from its repair reboot within {ctx.timeouts["reboot"]:g} s')
            return self.wait(f'reboot in progress ({age:.0f} s)', log=False)
        if age < ctx.timeouts['lookup']:
            return self.wait('reboot requested, not seen in Slurm yet', log=False)
        attempts = int(step.get('attempts', 1))
        if attempts > ctx.config['step_retries']:
            self.plan['step'] = None
            return self.enter_rma('the repair reboot was never carried out')
        step['retry'] = True
        return self.start_step('reboot', f'reboot request not seen by Slurm, again (attempt {attempts + 1})')


class _Candidate:
    """A node that waits for a slot (held nodes, by max_concurrent and each partition's limit) to start `step`."""

    def __init__(self, rules: _NodeRules, priority: int, since: float, step: str,
                 suspect: t.Optional[tuple[int, int]] = None) -> None:
        self.rules = rules
        self.priority = priority
        self.since = since
        self.step = step
        self.suspect = suspect

    def start(self) -> Decision:
        rules = self.rules
        if self.suspect is not None:
            jobs, users = self.suspect
            rules.rec.plan = {'fault': None, 'trigger': 'suspect', 'held': True, 'tiers_done': [],
                              'entered': rules.ctx.now, 'step': None, 'next': 'burnin'}
            why = f'sightings from {jobs} jobs of {users} user(s)'
            if rules.node.idle:
                return rules.start_step('burnin', why)
            rules.plan['drained'] = True
            rules.drain(clean_text(f'{drain.REASON_PREFIX} quarantine suspect {jobs} jobs'))
            # Into the reservation only once idle (start_step): its jobs run on until they end.
            rules.hold(True, reserve=False)
            rules.set_state(QUARANTINED, f'{why}: drained, burn-in waits for its jobs to end')
            return rules.finish()
        why = rules.decision.why or f'{rules.fault_text()}'
        return rules.start_step(self.step, why)

    def wait(self, why: str) -> Decision:
        return self.rules.wait(why)


def _limits(slurm: SlurmView, config: t.Mapping[str, t.Any]) -> dict[str, int]:
    sizes = collections.Counter(partition for node in slurm.nodes.values() for partition in node.partitions)
    limits = {}
    for partition, size in sizes.items():
        if partition in config['partition_limits']:
            limits[partition] = int(config['partition_limits'][partition])
        else:
            limits[partition] = max(1, int(size * config['max_percent'] / 100))
    return limits


def _new_sightings(snapshot: Snapshot, slurm: SlurmView, config: t.Mapping[str, t.Any], now: float,
                   decisions: dict[str, Decision]) -> tuple[dict[str, dict[str, tuple[str, float]]], int]:
    """The sightings of the sacct rows: checked against each job's NodeList, new ones as observation events; the
    counts decide() uses (the snapshot's plus the new ones within the window)."""
    window = now - config['suspect_window_days'] * 86400
    counted = {node: dict(jobs) for node, jobs in snapshot.sightings.items()}
    ignored = 0
    expanded: dict[str, set[str]] = {}
    for row in slurm.comments:
        entries = parse_sightings(row['comment'])
        if not entries:
            continue
        if row['nodelist'] not in expanded:
            try:
                expanded[row['nodelist']] = set(hostlist.expand(row['nodelist']))
            except hostlist.HostlistError:
                expanded[row['nodelist']] = set()
        allowed = expanded[row['nodelist']]
        when = row['end'] or now
        for node, kind, detail in entries:
            record = snapshot.nodes.get(node)
            if node not in allowed or record is None:
                ignored += 1
                continue
            jobs = counted.setdefault(node, {})
            if row['job'] in jobs:
                continue
            if when >= window and when > record.cleared_at:
                jobs[row['job']] = (row['user'], when)
            decision = decisions.setdefault(node, Decision(node, record.state, record.state, '', log=False))
            decision.events.append({'ts': when, 'node': node, 'kind': 'sighting', 'job_id': row['job'],
                                    'user': clean_text(row['user'], 64), 'action': kind, 'detail': detail,
                                    'observe': True, 'dedup': f'sighting|{row["job"]}|{node}|{kind}'})
    return counted, ignored


def decide(snapshot: Snapshot, slurm: SlurmView, config: t.Mapping[str, t.Any], now: float) -> Plan:
    """What to do with every node: a pure function of the ledger snapshot, the Slurm view (parsed `scontrol show
    node -o`, the reservation, our jobs and the sacct rows with sightings), the checked configuration and the time.

    Nodes Slurm knows and the ledger does not start healthy. Returns the decisions (the ones with nothing to do or
    say are left out), the reservation's scontrol command, and the held and waiting counts."""
    records = dict(snapshot.nodes)
    for name in slurm.nodes:
        records.setdefault(name, NodeRecord(name, HEALTHY, now))
    observed: dict[str, Decision] = {}
    counted, ignored = _new_sightings(Snapshot(records, snapshot.sightings, snapshot.repairs,
                                               snapshot.hardware_faults), slurm, config, now, observed)
    ctx = _Context(Snapshot(records, counted, snapshot.repairs, snapshot.hardware_faults), slurm, config, now)
    decisions: dict[str, Decision] = {}
    candidates: list[_Candidate] = []
    for name in sorted(records, key=natural_key):
        node = slurm.nodes.get(name)
        if node is None:
            continue
        result = _NodeRules(records[name], node, ctx).decide()
        if isinstance(result, _Candidate):
            candidates.append(result)
            continue
        decisions[name] = result
    held_nodes = {name for name, record in records.items() if record.plan.get('held') and name in slurm.nodes}
    for name, decision in decisions.items():
        if decision.record is not None:
            if decision.record.plan.get('held'):
                held_nodes.add(name)
            else:
                held_nodes.discard(name)
    limits = _limits(slurm, config)
    by_partition = collections.Counter(partition for name in held_nodes for partition in slurm.nodes[name].partitions)
    waiting = 0
    for candidate in sorted(candidates, key=lambda item: (item.priority, item.since, natural_key(item.rules.rec.name))):
        node = candidate.rules.node
        full = [partition for partition in node.partitions if by_partition[partition] >= limits.get(partition, 1)]
        if len(held_nodes) >= config['max_concurrent']:
            decisions[node.name] = candidate.wait(
                f'{candidate.step} waits for a repair slot ({len(held_nodes)}/{config["max_concurrent"]} nodes held)')
            waiting += 1
        elif full:
            decisions[node.name] = candidate.wait(
                f'{candidate.step} waits for a repair slot (partition {full[0]} at its limit of {limits[full[0]]})')
            waiting += 1
        else:
            decisions[node.name] = candidate.start()
            held_nodes.add(node.name)
            by_partition.update(node.partitions)
    for name, decision in observed.items():
        if name in decisions:
            decisions[name].events[:0] = decision.events
        else:
            decisions[name] = decision
    ordered = [decisions[name] for name in sorted(decisions, key=natural_key)]
    ordered = [item for item in ordered if item.log or item.record is not None or item.events or item.commands
               or item.reserve is not None]
    plan = Plan(ordered, [], len(held_nodes), waiting, ignored)
    plan.reservation = planned_reservation(plan, slurm, config)
    return plan


def planned_reservation(plan: Plan, slurm: SlurmView, config: t.Mapping[str, t.Any],
                        skipped: t.Collection[str] = ()) -> list[str]:
    """The reservation command of the decisions (those in `skipped` left out)."""
    add = {item.node for item in plan.decisions if item.reserve is True and item.node not in skipped}
    remove = {item.node for item in plan.decisions if item.reserve is False and item.node not in skipped}
    current = slurm.reservation
    wanted = (set(current or []) - remove) | add
    if not add and not remove:
        return []
    return reservation_argv(config['scontrol'], config['reservation'], current, sorted(wanted, key=natural_key))


# --- the ledger -------------------------------------------------------------------------------------------------

SCHEMA = (
    'CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)',
    'CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, state TEXT NOT NULL, since REAL NOT NULL, '
    "reason TEXT NOT NULL DEFAULT '', plan TEXT NOT NULL DEFAULT '{}', drain_key TEXT NOT NULL DEFAULT '', "
    "drain_seen REAL NOT NULL DEFAULT 0, cleared_at REAL NOT NULL DEFAULT 0, gpus TEXT NOT NULL DEFAULT '{}', "
    'updated_at REAL NOT NULL)',
    # One row per observation or action: kind drain, fault, sighting, diagnostic, action, outcome, transition,
    # repaired, rma, returned. dedup (unique when set) makes re-reading the same drain or job comment a no-op.
    'CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, ts REAL NOT NULL, node TEXT NOT NULL, '
    'kind TEXT NOT NULL, device TEXT, gpu_serial TEXT, gpu_uuid TEXT, job_id TEXT, user TEXT, action TEXT, '
    "outcome TEXT, value REAL, detail TEXT NOT NULL DEFAULT '', dedup TEXT UNIQUE)",
    'CREATE INDEX IF NOT EXISTS events_node_ts ON events (node, ts)',
    'CREATE INDEX IF NOT EXISTS events_kind_ts ON events (kind, ts)',
    'CREATE INDEX IF NOT EXISTS events_serial_ts ON events (gpu_serial, ts) WHERE gpu_serial IS NOT NULL',
    'CREATE INDEX IF NOT EXISTS events_uuid_ts ON events (gpu_uuid, ts) WHERE gpu_uuid IS NOT NULL',
    'CREATE INDEX IF NOT EXISTS events_job ON events (job_id) WHERE job_id IS NOT NULL',
    # The sightings of the suspect window, read every tick, from the index alone.
    "CREATE INDEX IF NOT EXISTS events_sightings ON events (ts, node, job_id, user) WHERE kind = 'sighting'",
)
EVENT_COLUMNS = ('ts', 'node', 'kind', 'device', 'gpu_serial', 'gpu_uuid', 'job_id', 'user', 'action', 'outcome',
                 'value', 'detail', 'dedup')
_INSERT_EVENT = (f'INSERT OR IGNORE INTO events ({", ".join(EVENT_COLUMNS)}) '
                 f'VALUES ({", ".join("?" * len(EVENT_COLUMNS))})')


class Ledger:
    """The SQLite ledger (WAL): nodes, events, meta; schema version in PRAGMA user_version."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, mode=0o700, exist_ok=True)
            fresh = not os.path.exists(path)
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
            if fresh:
                os.chmod(path, 0o600)
            self.db.execute('PRAGMA journal_mode=WAL')
            self.db.execute('PRAGMA synchronous=NORMAL')
            self._migrate()
        except (sqlite3.Error, OSError) as err:
            raise LedgerError(f'{path}: {err}') from None

    def _migrate(self) -> None:
        version = self.db.execute('PRAGMA user_version').fetchone()[0]
        if version > SCHEMA_VERSION:
            raise LedgerError(f'{self.path}: schema version {version} is newer than this program ({SCHEMA_VERSION})')
        if version < SCHEMA_VERSION:
            self.db.execute('BEGIN IMMEDIATE')
            for statement in SCHEMA:
                self.db.execute(statement)
            self.db.execute('INSERT OR REPLACE INTO meta VALUES (?, ?)', ('schema_version', str(SCHEMA_VERSION)))
            self.db.execute(f'PRAGMA user_version = {SCHEMA_VERSION}')
            self.db.execute('COMMIT')

    def close(self) -> None:
        self.db.close()

    def meta(self, key: str, default: str = '') -> str:
        row = self.db.execute('SELECT value FROM meta WHERE key = ?', (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute('INSERT OR REPLACE INTO meta VALUES (?, ?)', (key, value))

    def snapshot(self, config: t.Mapping[str, t.Any], now: float) -> Snapshot:
        nodes = {}
        for row in self.db.execute('SELECT name, state, since, reason, plan, drain_key, drain_seen, cleared_at, gpus '
                                   'FROM nodes'):
            nodes[row[0]] = NodeRecord(row[0], row[1], row[2], row[3], json.loads(row[4] or '{}'), row[5], row[6],
                                       row[7], json.loads(row[8] or '{}'))
        sightings: dict[str, dict[str, tuple[str, float]]] = {}
        window = now - config['suspect_window_days'] * 86400
        for node, job, user, when in self.db.execute(
                "SELECT e.node, e.job_id, e.user, e.ts FROM events e JOIN nodes n ON n.name = e.node "
                "WHERE e.kind = 'sighting' AND e.ts >= ? AND e.ts > n.cleared_at", (window,)):
            sightings.setdefault(node, {}).setdefault(job, (user, when))
        since = now - config['rma_window_days'] * 86400
        repairs = list(self.db.execute(
            "SELECT node, device, gpu_serial, ts FROM events WHERE kind = 'action' AND action IN ('reset', 'reboot') "
            'AND ts >= ?', (since,)))
        hardware = list(self.db.execute(
            "SELECT node, device, gpu_serial, ts, dedup FROM events WHERE kind = 'fault' AND outcome = 'hardware' "
            'AND ts >= ?',
            (since,)))
        return Snapshot(nodes, sightings, repairs, hardware)

    def add_events(self, events: t.Iterable[t.Mapping[str, t.Any]]) -> int:
        """Insert events; one whose dedup key is already there is skipped. The number inserted."""
        rows = [tuple('' if column == 'detail' and event.get(column) is None else event.get(column)
                      for column in EVENT_COLUMNS) for event in events]
        before = self.db.total_changes
        self.db.executemany(_INSERT_EVENT, rows)
        return self.db.total_changes - before

    def ensure_nodes(self, names: t.Iterable[str], now: float) -> None:
        self.db.executemany('INSERT OR IGNORE INTO nodes (name, state, since, updated_at) VALUES (?, ?, ?, ?)',
                            [(name, HEALTHY, now, now) for name in names])

    def save_node(self, record: NodeRecord, now: float) -> None:
        self.db.execute('INSERT OR REPLACE INTO nodes (name, state, since, reason, plan, drain_key, drain_seen, '
                        'cleared_at, gpus, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
                        (record.name, record.state, record.since, record.reason, json.dumps(record.plan, sort_keys=True),
                         record.drain_key, record.drain_seen, record.cleared_at, json.dumps(record.gpus, sort_keys=True),
                         now))

    def transaction(self) -> '_Transaction':
        return _Transaction(self.db)

    def backup(self, destination: str) -> None:
        """A consistent copy through SQLite's online backup API, readable by root only."""
        directory = os.path.dirname(os.path.abspath(destination))
        os.makedirs(directory, mode=0o700, exist_ok=True)
        temporary = f'{destination}.partial'
        if os.path.exists(temporary):
            os.unlink(temporary)
        handle = os.open(temporary, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
        os.close(handle)
        target = sqlite3.connect(temporary)
        try:
            self.db.backup(target, pages=1024)
            target.execute('PRAGMA journal_mode=DELETE')
        finally:
            target.close()
        os.replace(temporary, destination)

    def prune(self, before: float) -> int:
        with self.transaction():
            return self.db.execute('DELETE FROM events WHERE ts < ?', (before,)).rowcount

    def counts(self) -> dict[str, t.Any]:
        """What the metrics count: nodes by state, step outcomes, RMAs, times to repair."""
        states = dict.fromkeys(STATES, 0)
        for state, count in self.db.execute('SELECT state, COUNT(*) FROM nodes GROUP BY state'):
            states[state] = count
        outcomes = {(step, outcome): 0 for step in STEPS for outcome in OUTCOMES}
        for step, outcome, count in self.db.execute(
                "SELECT action, outcome, COUNT(*) FROM events WHERE kind = 'outcome' GROUP BY action, outcome"):
            outcomes[(step, outcome)] = count
        rma = self.db.execute("SELECT COUNT(*) FROM events WHERE kind = 'rma'").fetchone()[0]
        repaired = [row[0] for row in self.db.execute("SELECT value FROM events WHERE kind = 'repaired'")]
        nodes = [(row[0], row[1], row[2]) for row in self.db.execute('SELECT name, state, since FROM nodes')]
        return {'states': states, 'outcomes': outcomes, 'rma': rma, 'repaired': repaired, 'nodes': nodes}

    def history(self, node: str, limit: int = 50) -> list[dict[str, t.Any]]:
        rows = self.db.execute(f'SELECT {", ".join(EVENT_COLUMNS)} FROM events WHERE node = ? ORDER BY ts DESC, id DESC '
                               'LIMIT ?', (node, limit)).fetchall()
        return [{column: value for column, value in zip(EVENT_COLUMNS, row) if value not in (None, '')} for row in rows]


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute('BEGIN IMMEDIATE')

    def __exit__(self, kind: t.Any, value: t.Any, trace: t.Any) -> None:
        self.db.execute('COMMIT' if kind is None else 'ROLLBACK')


# --- running a tick ---------------------------------------------------------------------------------------------

Runner = t.Callable[[t.Sequence[str], float], proc.Completed]


def system_runner(argv: t.Sequence[str], timeout: float) -> proc.Completed:
    """Run a command as the tick does: the first word resolved in the fixed system directories, never PATH."""
    return proc.run([validators.find_command(argv[0]) or argv[0], *argv[1:]], timeout)


def run_slurm(runner: Runner, argv: t.Sequence[str], timeout: float) -> str:
    try:
        done = runner(argv, timeout)
    except proc.CommandError as err:
        raise SlurmError(str(err)) from None
    if done.rc != 0:
        detail = (done.stderr.strip() or done.stdout.strip() or 'no output').splitlines()[0]
        raise SlurmError(f"'{' '.join(argv)}' exited with {done.rc}: {detail}")
    return done.stdout


def read_slurm(config: t.Mapping[str, t.Any], runner: Runner, snapshot: Snapshot, now: float,
               since_comments: float) -> tuple[SlurmView, list[str]]:
    """The Slurm view of a tick and the warnings of what could not be read (nodes unreadable: SlurmError)."""
    timeout = float(config['timeouts']['command'])
    warnings = []
    nodes = parse_nodes(run_slurm(runner, [config['scontrol'], 'show', 'node', '-o'], timeout))
    if not nodes:
        raise SlurmError('scontrol show node -o listed no node')
    try:
        reservation = parse_reservation(run_slurm(runner, [config['scontrol'], 'show', 'reservation',
                                                           config['reservation'], '-o'], timeout))
    except SlurmError as err:
        if 'not found' in str(err).lower() or 'invalid reservation' in str(err).lower():
            reservation = None
        else:
            raise
    view = SlurmView(nodes, reservation)
    steps = [record.plan.get('step') for record in snapshot.nodes.values() if (record.plan or {}).get('step')]
    job_steps = [step for step in steps if step.get('kind') in JOB_STEPS]
    if job_steps:
        try:
            view.jobs.update(parse_squeue_jobs(run_slurm(runner, [config['squeue'], '-h', '-a', '-t', 'all', '-n',
                                                                  JOB_NAME, '-u', JOB_USER, '-o', SQUEUE_FORMAT], timeout),
                                               config['reservation']))
        except SlurmError as err:
            warnings.append(f'squeue: {err}')
        oldest = min(float(step.get('at') or now) for step in job_steps) - 3600
        try:
            found = parse_sacct_jobs(run_slurm(runner, [
                config['sacct'], '-X', '-n', '-P', f'--name={JOB_NAME}', '-u', JOB_USER, '-S',
                format_slurm_time(oldest), f'--format={SACCT_JOB_FIELDS}'], timeout), config['reservation'])
            for job_id, job in found.items():
                current = view.jobs.get(job_id)
                if current is None or not job.active or current.source != 'squeue' or not current.active:
                    view.jobs[job_id] = job
        except SlurmError as err:
            view.jobs_read = False
            warnings.append(f'sacct (repair jobs): {err}')
    try:
        view.comments = parse_sacct_comments(run_slurm(runner, [
            config['sacct'], '-X', '-n', '-P', '-a', '-S', format_slurm_time(since_comments),
            f'--format={SACCT_COMMENT_FIELDS}'], timeout))
    except SlurmError as err:
        warnings.append(f'sacct (sightings): {err}')
    return view, warnings


_SBATCH_ID = re.compile(r'^([0-9]{1,12})(?:;\S+)?\s*$', re.M)


def fleet_stage(records: t.Mapping[str, NodeRecord]) -> dict[str, t.Any]:
    """The validate report's "Fleet health" stage: every node the ledger does not hold healthy (suspect, quarantined,
    repairing, rma) as a warning with its state, since when and why; the counts per state as facts. Never failing:
    these nodes are out of service or watched already, by this program."""
    rows: dict[str, dict[str, t.Any]] = {}
    checks: list[dict[str, t.Any]] = []
    for name in sorted(records):
        record = records[name]
        if record.state == HEALTHY:
            continue
        why = clean_text(record.reason or (record.plan.get('fault') or {}).get('reason') or record.plan.get('trigger') or '')
        rows[name] = {'state': record.state, 'since': format_slurm_time(record.since), 'reason': why}
        checks.append({'name': 'repair_state', 'subject': name, 'status': 'warn', 'expected': HEALTHY,
                       'actual': record.state, 'message': f'{name} {record.state} since {rows[name]["since"]}'
                                                          + (f': {why}' if why else '')})
    if not checks:
        checks.append({'name': 'repair_state', 'subject': 'cluster', 'status': 'pass', 'expected': HEALTHY,
                       'actual': HEALTHY, 'message': f'all {len(records)} nodes in the ledger healthy'})
    return {'title': 'Fleet health (llmforge-remediate)', 'healthy': True, 'checks': checks,
            'columns': ['state', 'since', 'reason'], 'nodes': rows,
            'facts': {state: sum(1 for record in records.values() if record.state == state) for state in STATES}}


# The node's latest ledger events that go into its RMA evidence bundle.
HISTORY_IN_EVIDENCE = 200
HISTORY_END = 'LLMFORGE_LEDGER_HISTORY'


def with_history(argv: t.Sequence[str], events: t.Sequence[t.Mapping[str, t.Any]]) -> tuple[str, ...]:
    """The evidence job's sbatch argv with the node's ledger history (JSON lines, oldest first) handed to
    `llmforge-repair evidence --history -` on its standard input, in the batch script itself (a here-document:
    the node cannot read the ledger, which stays on the controller)."""
    lines = [json.dumps(event, sort_keys=True) for event in reversed(events)]  # json.dumps: one line each
    out = []
    for word in argv:
        if word.startswith('--wrap='):
            word = f"{word} --history - <<'{HISTORY_END}'\n" + ''.join(line + '\n' for line in lines) + HISTORY_END
        out.append(word)
    return tuple(out)


def apply(plan: Plan, slurm: SlurmView, config: t.Mapping[str, t.Any], ledger: Ledger, runner: Runner, now: float,
          dry_run: bool, out: t.TextIO, deadline: float) -> dict[str, t.Any]:
    """Record the observations, then (not in a dry run) each decision: drains first, the reservation, then per node
    its ledger row (with the step it starts) before its commands; a submitted job's id right after sbatch."""
    timeout = float(config['timeouts']['command'])
    done = {'commands': 0, 'failed': 0, 'skipped': 0}
    with ledger.transaction():
        ledger.ensure_nodes(slurm.nodes, now)
        ledger.add_events(event for item in plan.decisions for event in item.events if event.get('observe'))
    if dry_run:
        for item in plan.decisions:
            if item.log:
                out.write(item.line(True) + '\n')
            for command in item.commands:
                out.write(f'{PROGRAM}: would run: {shlex.join(command.argv)}\n')
        if plan.reservation:
            out.write(f'{PROGRAM}: would run: {shlex.join(plan.reservation)}\n')
        return done

    def run(command: t.Sequence[str], node: str) -> t.Optional[str]:
        if time.monotonic() > deadline:
            raise TimeoutError
        done['commands'] += 1
        try:
            return run_slurm(runner, command, timeout)
        except SlurmError as err:
            done['failed'] += 1
            out.write(f'{PROGRAM}: {node}: {err}\n')
            return None

    skipped: set[str] = set()
    try:
        for item in plan.decisions:
            for command in item.commands:
                if command.phase == 0 and run(command.argv, item.node) is None:
                    skipped.add(item.node)
                    break
        reservation = planned_reservation(plan, slurm, config, skipped)
        if reservation and run(reservation, config['reservation']) is None:
            skipped |= {item.node for item in plan.decisions if item.reserve is not None}
        for item in plan.decisions:
            if item.node in skipped:
                done['skipped'] += 1
                out.write(f'{PROGRAM}: {item.node} {item.old} -> {item.old}: not done this tick (a command failed)\n')
                continue
            if item.record is not None:
                with ledger.transaction():
                    ledger.save_node(item.record, now)
                    ledger.add_events(event for event in item.events if not event.get('observe'))
            elif item.events:
                with ledger.transaction():
                    ledger.add_events(event for event in item.events if not event.get('observe'))
            if item.log:
                out.write(item.line() + '\n')
            for command in item.commands:
                if command.phase != 1:
                    continue
                argv = command.argv
                if command.kind == 'submit' and item.record is not None \
                        and (item.record.plan.get('step') or {}).get('kind') == 'evidence':
                    argv = with_history(argv, ledger.history(item.node, HISTORY_IN_EVIDENCE))
                answer = run(argv, item.node)
                if command.kind == 'submit' and answer is not None and item.record is not None:
                    match = _SBATCH_ID.search(answer)
                    step = item.record.plan.get('step') or {}
                    if match:
                        step['job_id'] = match.group(1)
                        with ledger.transaction():
                            ledger.save_node(item.record, now)
                            ledger.add_events([{'ts': now, 'node': item.node, 'kind': 'action', 'action': 'submitted',
                                                'job_id': match.group(1), 'detail': step.get('kind', '')}])
                if answer is None and command.kind in ('submit', 'resume'):
                    break
    except TimeoutError:
        out.write(f'{PROGRAM}: tick budget of {config["timeouts"]["tick"]:g} s spent: the rest waits for the next tick\n')
    return done


# --- metrics ----------------------------------------------------------------------------------------------------

def metrics_text(counts: t.Mapping[str, t.Any], tick: t.Mapping[str, t.Any]) -> str:
    """llmforge_remediate_* for node_exporter's textfile collector."""
    nodes = sorted(counts['nodes'], key=lambda row: natural_key(row[0]))
    families = [
        Family('llmforge_remediate_up', 'gauge', '1 when the last tick read Slurm and the ledger, else 0.',
               [({}, 1 if tick.get('ok') else 0)]),
        Family('llmforge_remediate_last_tick_timestamp_seconds', 'gauge', 'When the last tick ran (Unix time).',
               [({}, round(float(tick.get('at', 0)), 3))]),
        Family('llmforge_remediate_last_success_timestamp_seconds', 'gauge',
               'When a tick last read Slurm and applied its decisions (Unix time).',
               [({}, round(float(tick.get('last_success', 0)), 3))]),
        Family('llmforge_remediate_tick_duration_seconds', 'gauge', 'How long the last tick took.',
               [({}, round(float(tick.get('duration', 0)), 3))]),
        Family('llmforge_remediate_nodes', 'gauge', 'Nodes by repair lifecycle state.',
               [({'state': state}, counts['states'].get(state, 0)) for state in STATES]),
        Family('llmforge_remediate_waiting_nodes', 'gauge', 'Nodes waiting for a repair slot at the last tick.',
               [({}, int(tick.get('waiting', 0)))]),
        Family('llmforge_remediate_node_state', 'gauge', 'Repair lifecycle state of a node; 1 for its state, else 0.',
               [({'node': name, 'state': state}, 1 if state == current else 0) for name, current, _since in nodes
                for state in STATES]),
        Family('llmforge_remediate_node_state_since_timestamp_seconds', 'gauge',
               'Since when a node not healthy has been in its state (Unix time).',
               [({'node': name, 'state': state}, round(since, 3)) for name, state, since in nodes if state != HEALTHY]),
        Family('llmforge_remediate_repairs_total', 'counter',
               'Repair steps (reset, reboot, burnin, evidence) that ended, by outcome (pass, fail, error), from the ledger.',
               [({'tier': step, 'outcome': outcome}, count) for (step, outcome), count in sorted(counts['outcomes'].items())]),
        Family('llmforge_remediate_rma_total', 'counter', 'Nodes sent to RMA, from the ledger.', [({}, counts['rma'])]),
    ]
    text = prometheus.render(families)
    repaired = sorted(counts['repaired'])
    name = 'llmforge_remediate_time_to_repair_seconds'
    lines = [f'# HELP {name} Time from quarantine to back in service of the repaired nodes, from the ledger.',
             f'# TYPE {name} histogram']
    for bound in TIME_TO_REPAIR_BUCKETS:
        count = sum(1 for value in repaired if value <= bound)
        lines.append(f'{name}_bucket{prometheus.labels_text({"le": str(bound)})} {count}')
    lines.append(f'{name}_bucket{prometheus.labels_text({"le": "+Inf"})} {len(repaired)}')
    lines.append(f'{name}_sum {prometheus.value_text(round(sum(repaired), 3))}')
    lines.append(f'{name}_count {len(repaired)}')
    return text + '\n'.join(lines) + '\n'


# --- the program ------------------------------------------------------------------------------------------------

def tick(config: t.Mapping[str, t.Any], ledger: Ledger, runner: Runner = system_runner, now: t.Optional[float] = None,
         dry_run: bool = False, out: t.Optional[t.TextIO] = None) -> dict[str, t.Any]:
    """One tick: read Slurm, record, decide, apply, write the metrics. {'ok', 'plan', 'warnings', 'done', ...}."""
    out = sys.stdout if out is None else out
    started = time.monotonic()
    now = time.time() if now is None else now
    deadline = started + float(config['timeouts']['tick'])
    result: dict[str, t.Any] = {'ok': False, 'at': now, 'warnings': [], 'plan': None, 'done': None, 'waiting': 0,
                                'last_success': float(ledger.meta('last_success', '0') or 0)}
    try:
        snapshot = ledger.snapshot(config, now)
        last = float(ledger.meta('last_sacct', '0') or 0)
        since = max(now - config['sacct_lookback_hours'] * 3600, last - 3600)
        slurm, warnings = read_slurm(config, runner, snapshot, now, since)
        result['warnings'] = warnings
        for warning in warnings:
            out.write(f'{PROGRAM}: {warning}\n')
        plan = decide(snapshot, slurm, config, now)
        result['plan'] = plan
        result['waiting'] = plan.waiting
        result['done'] = apply(plan, slurm, config, ledger, runner, now, dry_run, out, deadline)
        if not dry_run:
            with ledger.transaction():
                if not any(warning.startswith('sacct (sightings)') for warning in warnings):
                    ledger.set_meta('last_sacct', repr(now))
                ledger.set_meta('last_success', repr(now))
                result['last_success'] = now
            if now - float(ledger.meta('last_prune', '0') or 0) > 86400:
                ledger.prune(now - config['retention_days'] * 86400)
                with ledger.transaction():
                    ledger.set_meta('last_prune', repr(now))
        result['ok'] = True
    except SlurmError as err:
        result['error'] = str(err)
        out.write(f'{PROGRAM}: Slurm not read: {err}\n')
    result['duration'] = time.monotonic() - started
    if config['textfile_dir'] and not dry_run:
        try:
            prometheus.write_textfile(os.path.join(config['textfile_dir'], METRICS_FILE),
                                      metrics_text(ledger.counts(), result))
        except OSError as err:
            out.write(f'{PROGRAM}: cannot write metrics: {err}\n')
    return result


def main(argv: t.Optional[t.Sequence[str]] = None, runner: Runner = system_runner) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--config', default=DEFAULT_CONFIG, help=f'configuration (default {DEFAULT_CONFIG})')
    parser.add_argument('--dry-run', action='store_true', help='print the decisions; change neither Slurm nor states')
    parser.add_argument('--check-config', action='store_true', help='check the configuration and exit')
    parser.add_argument('--backup', metavar='PATH', help="write a consistent copy of the ledger to PATH and exit")
    parser.add_argument('--history', metavar='NODE', help="print a node's state and latest ledger events and exit")
    parser.add_argument('--fleet', action='store_true',
                        help="print the nodes not healthy in the ledger (the validate report's stage, JSON) and exit")
    args = parser.parse_args(argv)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors='backslashreplace')  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            pass
    try:
        config = load_config(args.config)
    except ConfigError as err:
        sys.stderr.write(f'{PROGRAM}: {err}\n')
        return 2
    if args.check_config:
        sys.stdout.write(f'{PROGRAM}: {args.config}: valid\n')
        return 0
    try:
        ledger = Ledger(config['ledger'])
    except LedgerError as err:
        sys.stderr.write(f'{PROGRAM}: ledger: {err}\n')
        return 4
    try:
        if args.backup:
            ledger.backup(args.backup)
            sys.stdout.write(f'{PROGRAM}: ledger copied to {args.backup}\n')
            return 0
        if args.fleet:
            sys.stdout.write(json.dumps(fleet_stage(ledger.snapshot(config, time.time()).nodes), sort_keys=True) + '\n')
            return 0
        if args.history:
            record = ledger.snapshot(config, time.time()).nodes.get(args.history)
            if record is not None:
                sys.stdout.write(json.dumps(dataclasses.asdict(record), sort_keys=True) + '\n')
            for event in ledger.history(args.history):
                sys.stdout.write(json.dumps(event, sort_keys=True) + '\n')
            return 0
        lock_path = config['ledger'] + '.lock'
        with open(lock_path, 'a', encoding='utf-8') as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                sys.stdout.write(f'{PROGRAM}: another tick holds {lock_path}: nothing done\n')
                return 0
            result = tick(config, ledger, runner, dry_run=args.dry_run)
        return 0 if result['ok'] else 3
    except (sqlite3.Error, OSError) as err:
        sys.stderr.write(f'{PROGRAM}: ledger: {err}\n')
        return 4
    finally:
        ledger.close()
