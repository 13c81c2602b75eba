# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read Slurm's node and queue state from ``sinfo`` and ``squeue`` and write it as Prometheus text.

Pure Python with no Ansible import, and the program ``llmforge-slurm-metrics`` itself (``main``): the monitoring
role installs it on the Slurm controllers with the collection's node programs (see the node_programs role),
run by a systemd timer. Output that cannot be read raises ``SlurmMetricsError`` (a ``ValueError``) naming the
command, the line number and the line.

The program runs sinfo and squeue (each bounded by ``--timeout``) and prints the metrics, or with ``--output``
replaces that file in one rename. When Slurm cannot be read it still writes ``llmforge_slurm_up 0``, says why on
stderr and exits 1; usage errors exit 2.

The collector runs exactly these two commands (``SINFO_COMMAND`` and ``SQUEUE_COMMAND``)::

    sinfo --all --noheader --Node --Format='NodeList:|,StateLong:|,PartitionName:|,CPUsState:|,Gres:|,GresUsed:|,Reason:'
    squeue --all --array --noheader --Format='State:|,Partition:|,NumNodes:|,NumTasks:|,tres-per-node:|,tres-per-job:|,tres-per-task:'

A ``--Format`` field written ``Name:|`` has no width, so Slurm prints it unpadded and untruncated, followed
by the suffix ``|`` (checked on Slurm 24.11). Two fields can hold free text: ``Reason`` may contain ``|`` and
so comes last, and a pending job's ``Partition`` lists every partition it may run in (``gpu,debug``).
``sinfo --Node`` prints one line per node and partition; ``squeue --array`` one line per array task, so
queue depth counts tasks rather than arrays. ``--all`` includes hidden partitions.

``sinfo`` lines look like ``gpu001|mixed|gpu|8/8/0/16|gpu:h200:8(S:0-1)|gpu:h200:5(IDX:0-1,4-6)|none``:
CPUs are allocated/idle/other/total, GRES entries are ``name[:type]:count`` with a parenthesised detail
whose commas do not separate entries. ``StateLong`` is the lower-cased ``node_state_string`` of Slurm
(``src/common/slurm_protocol_defs.c``): a base state followed by at most one flag character,
``*`` not responding, ``~`` powered off, ``#`` powering up, ``%`` powering down, ``!`` power down pending,
``$`` maintenance reservation, ``@`` reboot pending, ``^`` reboot issued, ``+`` completing, ``-`` planned
by the backfill scheduler. ``squeue`` lines look like ``PENDING|gpu|2|2|gres/gpu:8|N/A|N/A``.

Per node it writes its state in each partition, its reason and the GPUs allocated to jobs there
(``llmforge_slurm_node_gpus_allocated{node="gpu001"} 5``, from ``GresUsed``: the alert on allocated but idle
GPUs joins it with dcgm-exporter's utilisation of that node); per partition CPUs, GPUs and the queue.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc as proc
from ansible_collections.llmforge.cluster.plugins.module_utils import _prometheus as prometheus
from ansible_collections.llmforge.cluster.plugins.module_utils._checks import finite
from ansible_collections.llmforge.cluster.plugins.module_utils._prometheus import Family

SINFO_FORMAT = 'NodeList:|,StateLong:|,PartitionName:|,CPUsState:|,Gres:|,GresUsed:|,Reason:'
SQUEUE_FORMAT = 'State:|,Partition:|,NumNodes:|,NumTasks:|,tres-per-node:|,tres-per-job:|,tres-per-task:'
SINFO_COMMAND = ('sinfo', '--all', '--noheader', '--Node', '--Format=' + SINFO_FORMAT)
SQUEUE_COMMAND = ('squeue', '--all', '--array', '--noheader', '--Format=' + SQUEUE_FORMAT)

_SINFO_FIELDS = SINFO_FORMAT.count(',') + 1
_SQUEUE_FIELDS = SQUEUE_FORMAT.count(',') + 1

# The flag characters node_state_string appends to a base state (see the module docstring).
_STATE_FLAGS = '*~#%!$@^+-'
_BASE_STATE = re.compile(r'[a-z][a-z_]*')
# Slurm prints an idle node the backfill scheduler has planned for a job as PLANNED, but a mixed one as MIXED-.
_STATE_ALIASES = {'planned': 'idle', '?': 'unknown'}
_CPU_STATES = ('alloc', 'idle', 'other', 'total')
_CPUS = re.compile(r'([0-9]+)/([0-9]+)/([0-9]+)/([0-9]+)')
# A comma separates GRES entries only outside parentheses: gpu:h200:5(IDX:0-1,4-6),shard:0.
_GRES_SEPARATOR = re.compile(r',(?![^()]*\))')
# name[:type][:count] with an optional (detail); squeue writes gres/gpu:2, older releases gres:gpu:2.
_GRES_ENTRY = re.compile(r'(?:gres[/:])?(?P<name>[A-Za-z0-9_.-]+)(?P<fields>(?:[:=][A-Za-z0-9_.-]+)*)(?:\([^()]*\))?')
_NUMBER = re.compile(r'[0-9]+')
_NO_VALUE = ('', '(null)', 'n/a', 'none')
# Queue depth is written for these states in every partition even when no job is in them, so graphs drop to 0.
_ALWAYS_WRITTEN_JOB_STATES = ('pending', 'running')


class SlurmMetricsError(ValueError):
    """sinfo or squeue output that cannot be read; the message names the command, line number and line."""


class SlurmNode(t.NamedTuple):
    """One line of ``sinfo --Node``: a node as seen in one of its partitions."""

    name: str
    state: str
    partition: str
    cpus_alloc: int
    cpus_idle: int
    cpus_other: int
    cpus_total: int
    gpus_total: int
    gpus_alloc: int
    reason: str


class SlurmJob(t.NamedTuple):
    """One line of ``squeue --array``: a job or array task."""

    state: str
    partition: str
    nodes: int
    tasks: int
    gpus: int


# parsing -------------------------------------------------------------------


def normalise_state(state: str) -> str:
    """Return the base state of a ``StateLong`` value: ``down*`` -> ``down``, ``mixed-`` -> ``mixed``."""
    base = state.strip().lower()
    if base != '?':
        base = base.rstrip(_STATE_FLAGS)
    base = _STATE_ALIASES.get(base, base)
    if not _BASE_STATE.fullmatch(base):
        raise ValueError(f'node state {state!r} is not a Slurm state')
    return base


def count_gpus(gres: str) -> int:
    """Return the number of GPUs in a GRES or TRES list such as ``gpu:h200:8(S:0-1)`` or ``gres/gpu:2``."""
    total = 0
    for entry in _GRES_SEPARATOR.split(gres.strip()):
        entry = entry.strip()
        if entry.lower() in _NO_VALUE:
            continue
        match = _GRES_ENTRY.fullmatch(entry)
        if not match:
            raise ValueError(f'GRES entry {entry!r} is not name[:type]:count')
        if match.group('name') != 'gpu':
            continue
        fields = re.split('[:=]', match.group('fields'))[1:]
        # Slurm leaves out a count of 1 in job requests (gres/gpu, gres/gpu:h200); node GRES always carry it.
        total += int(fields[-1]) if fields and _NUMBER.fullmatch(fields[-1]) else 1
    return total


def _fields(command: str, number: int, line: str, expected: int, free_text_last: bool) -> list[str]:
    # A free-text last field (sinfo's Reason) may hold '|' itself.
    fields = line.split('|', expected - 1) if free_text_last else line.split('|')
    if len(fields) != expected:
        raise SlurmMetricsError(f"{command} line {number}: expected {expected} '|'-separated fields, found {len(fields)}: {line!r}")
    return fields


def _lines(text: str) -> t.Iterator[t.Tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            yield number, line


def parse_sinfo(text: str) -> list[SlurmNode]:
    """Parse the output of ``SINFO_COMMAND`` into one ``SlurmNode`` per line."""
    nodes = []
    for number, line in _lines(text):
        name, state, partition, cpus, gres, gres_used, reason = _fields('sinfo', number, line, _SINFO_FIELDS, True)
        cpu_counts = _CPUS.fullmatch(cpus.strip())
        try:
            if not name.strip():
                raise ValueError('the node name is empty')
            if not cpu_counts:
                raise ValueError(f'CPUs {cpus!r} are not allocated/idle/other/total')
            node = SlurmNode(
                name=name.strip(),
                state=normalise_state(state),
                # PartitionName has no default-partition '*'; strip it anyway in case Partition is used.
                partition=partition.strip().rstrip('*'),
                cpus_alloc=int(cpu_counts.group(1)),
                cpus_idle=int(cpu_counts.group(2)),
                cpus_other=int(cpu_counts.group(3)),
                cpus_total=int(cpu_counts.group(4)),
                gpus_total=count_gpus(gres),
                gpus_alloc=count_gpus(gres_used),
                reason='' if reason.strip().lower() in _NO_VALUE else reason.strip(),
            )
        except ValueError as error:
            raise SlurmMetricsError(f'sinfo line {number}: {error}: {line!r}') from None
        nodes.append(node)
    return nodes


def _count(value: str, what: str) -> int:
    value = value.strip()
    if value.upper() == 'N/A':
        return 0
    if not _NUMBER.fullmatch(value):
        raise ValueError(f'{what} {value!r} is not a number')
    return int(value)


def parse_squeue(text: str) -> list[SlurmJob]:
    """Parse the output of ``SQUEUE_COMMAND`` into one ``SlurmJob`` per line."""
    jobs = []
    for number, line in _lines(text):
        state, partition, nodes, tasks, per_node, per_job, per_task = _fields('squeue', number, line, _SQUEUE_FIELDS, False)
        try:
            if not _BASE_STATE.fullmatch(state.strip().lower()):
                raise ValueError(f'job state {state!r} is not a Slurm state')
            node_count, task_count = _count(nodes, 'node count'), _count(tasks, 'task count')
            # A job asks for GPUs per job (--gpus), per node (--gres, --gpus-per-node) or per task: the first one set counts.
            gpus = count_gpus(per_job) or count_gpus(per_node) * node_count or count_gpus(per_task) * task_count
            job = SlurmJob(state=state.strip().lower(), partition=partition.strip(), nodes=node_count, tasks=task_count, gpus=gpus)
        except ValueError as error:
            raise SlurmMetricsError(f'squeue line {number}: {error}: {line!r}') from None
        jobs.append(job)
    return jobs


# rendering -----------------------------------------------------------------


def _status_families(up: int, cluster: t.Optional[str], timestamp: t.Optional[float]) -> list[Family]:
    base = {'cluster': cluster} if cluster else {}
    now = time.time() if timestamp is None else timestamp
    return [
        Family('llmforge_slurm_up', 'gauge', '1 when sinfo and squeue answered and their output was read, else 0.', [(base, up)]),
        Family('llmforge_slurm_scrape_timestamp_seconds', 'gauge', 'Unix time of the last attempt to read the Slurm state.', [(base, round(now, 3))]),
    ]


def render_metrics(nodes: t.Sequence[SlurmNode], jobs: t.Sequence[SlurmJob], cluster: t.Optional[str] = None,
                   timestamp: t.Optional[float] = None) -> str:
    """Return Prometheus text for parsed sinfo and squeue output.

    ``cluster`` adds a ``cluster`` label to every sample. Leave it out when Prometheus already sets
    ``cluster`` as a target label (the monitoring role does): an exposed label of the same name would be
    renamed ``exported_cluster``.
    """
    base = {'cluster': cluster} if cluster else {}
    state_samples = []
    reasons: dict[str, str] = {}
    # sinfo --Node repeats a node once per partition with the same GresUsed: one value per node.
    node_gpus: dict[str, int] = {}
    cpus: dict[str, dict[str, int]] = {}
    gpus: dict[str, dict[str, int]] = {}
    for node in sorted(nodes, key=lambda item: (item.name, item.partition)):
        state_samples.append((dict(base, node=node.name, partition=node.partition, state=node.state), 1))
        if node.reason:
            reasons.setdefault(node.name, node.reason)
        node_gpus[node.name] = max(node_gpus.get(node.name, 0), node.gpus_alloc)
        partition_cpus = cpus.setdefault(node.partition, dict.fromkeys(_CPU_STATES, 0))
        for state, count in zip(_CPU_STATES, (node.cpus_alloc, node.cpus_idle, node.cpus_other, node.cpus_total)):
            partition_cpus[state] += count
        partition_gpus = gpus.setdefault(node.partition, {'alloc': 0, 'total': 0})
        partition_gpus['alloc'] += node.gpus_alloc
        partition_gpus['total'] += node.gpus_total

    job_counts: dict[t.Tuple[str, str], int] = {}
    job_gpus: dict[t.Tuple[str, str], int] = {}
    for partition in cpus:
        for state in _ALWAYS_WRITTEN_JOB_STATES:
            job_counts[(partition, state)] = job_gpus[(partition, state)] = 0
    for job in jobs:
        key = (job.partition, job.state)
        job_counts[key] = job_counts.get(key, 0) + 1
        job_gpus[key] = job_gpus.get(key, 0) + job.gpus

    families = _status_families(1, cluster, timestamp) + [
        Family('llmforge_slurm_node_state', 'gauge',
               'Slurm base state of a node in a partition (idle, mixed, allocated, draining, drained, down, ...); always 1.',
               state_samples),
        Family('llmforge_slurm_node_reason_info', 'gauge',
               'Reason Slurm records for a node (set when it is drained, down or failed, kept until cleared); always 1.',
               [(dict(base, node=node, reason=reason), 1) for node, reason in sorted(reasons.items())]),
        Family('llmforge_slurm_node_gpus_allocated', 'gauge',
               'GPUs of a node allocated to jobs (sinfo GresUsed), once per node whatever its partitions.',
               [(dict(base, node=node), count) for node, count in sorted(node_gpus.items())]),
        Family('llmforge_slurm_partition_cpus', 'gauge', 'CPUs of the nodes in a partition by state (alloc, idle, other, total).',
               [(dict(base, partition=partition, state=state), count)
                for partition, counts in sorted(cpus.items()) for state, count in counts.items()]),
        Family('llmforge_slurm_partition_gpus', 'gauge', 'GPUs of the nodes in a partition: allocated to jobs (alloc) and configured (total).',
               [(dict(base, partition=partition, state=state), count)
                for partition, counts in sorted(gpus.items()) for state, count in counts.items()]),
        Family('llmforge_slurm_jobs', 'gauge', 'Jobs and array tasks by partition and job state.',
               [(dict(base, partition=partition, state=state), count) for (partition, state), count in sorted(job_counts.items())]),
        Family('llmforge_slurm_job_gpus', 'gauge', 'GPUs requested by the jobs and array tasks of a partition, by job state.',
               [(dict(base, partition=partition, state=state), count) for (partition, state), count in sorted(job_gpus.items())]),
    ]
    return prometheus.render(families)


def render_failure(cluster: t.Optional[str] = None, timestamp: t.Optional[float] = None) -> str:
    """Return Prometheus text that says the Slurm state could not be read (``llmforge_slurm_up 0``)."""
    return prometheus.render(_status_families(0, cluster, timestamp))


# the program -------------------------------------------------------------------------------------------------

PROGRAM = 'llmforge-slurm-metrics'
DESCRIPTION = ("Write Slurm node (state, reason, allocated GPUs), partition and queue metrics as Prometheus text, "
               "for node_exporter's textfile collector.")


class CollectError(Exception):
    """Slurm could not be read; the message says which command failed and how."""


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0, in ASCII (float() also reads other scripts' digits, 'inf' and 1e400)."""
    try:
        seconds = float(text) if text.isascii() else 0.0
    except ValueError:
        seconds = 0.0
    if not seconds > 0 or finite(seconds) is None:
        raise argparse.ArgumentTypeError(f'{text!r} is not a positive number of seconds')
    return seconds


def parse_args(argv: t.Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=DESCRIPTION)
    parser.add_argument('--output', metavar='PATH', help='file to replace atomically (name it *.prom); default: standard output')
    parser.add_argument('--cluster', metavar='NAME', default='',
                        help='add a cluster label to every metric; leave it out when Prometheus sets cluster as a target label')
    parser.add_argument('--timeout', metavar='SECONDS', type=positive_seconds, default=10.0,
                        help='how long sinfo and squeue may each take (default: 10)')
    return parser.parse_args(argv)


def run_slurm(command: t.Sequence[str], timeout: float) -> str:
    """Return the standard output of a Slurm command, or raise CollectError saying why there is none."""
    # Slurm passes node reasons through as typed: the runner replaces undecodable bytes instead of failing.
    try:
        done = proc.run(command, timeout)
    except proc.CommandError as err:
        if err.reason == proc.MISSING:
            raise CollectError(f"{command[0]} not found (PATH={os.environ.get('PATH', '')}): is Slurm installed on this host?") from None
        if err.reason == proc.TIMEOUT:
            raise CollectError(f'{command[0]} did not answer within {timeout:g} s and was stopped: is slurmctld reachable?') from None
        raise CollectError(str(err)) from None
    if done.rc != 0:
        detail = done.stderr.strip().splitlines()
        raise CollectError(f"{command[0]} exited with status {done.rc}: {detail[-1] if detail else 'no message'}")
    return done.stdout


def collect(cluster: str, timeout: float) -> str:
    nodes = parse_sinfo(run_slurm(SINFO_COMMAND, timeout))
    jobs = parse_squeue(run_slurm(SQUEUE_COMMAND, timeout))
    return render_metrics(nodes, jobs, cluster=cluster)


def main(argv: t.Optional[t.Sequence[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    status = 0
    try:
        text = collect(args.cluster, args.timeout)
    except (CollectError, SlurmMetricsError) as error:
        sys.stderr.write(f'{PROGRAM}: {error}\n')
        text, status = render_failure(cluster=args.cluster), 1
    if args.output:
        try:
            prometheus.write_textfile(args.output, text)
        except OSError as error:
            sys.stderr.write(f'{PROGRAM}: cannot write {args.output}: {error}\n')
            return 1
    else:
        sys.stdout.write(text)
    return status
