#!/usr/bin/env python3
# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-train: the reference fault-tolerant training job (a small GPT on learnable synthetic tokens).

Copy it to start a real job: launch, resume, checkpoint and requeue are what matters; model and data are tiny.
Needs torch and numpy (torch.distributed's object collectives, which checkpointing uses, need numpy).

    srun llmforge-train --run-dir /shared/runs/job-42 --steps 200 --ckpt-every-steps 50   # one task per GPU
    torchrun --nproc-per-node 2 llmforge_train.py --run-dir /tmp/run --steps 30          # or any RANK... env
    python3 llmforge_train.py --run-dir /tmp/run --steps 30                               # one process

Rank, world size and rendezvous come from RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT when set, else
from srun's SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID, the first host of SLURM_JOB_NODELIST and port
20000 + job id % 20000, else a single process. Under Slurm, always start it with srun.

Checkpoints (torch.distributed.checkpoint: every rank writes its own shard files, resharded on load):
    RUN_DIR/step_00000050/            committed: the state after step 50 (.metadata, __<rank>_0.distcp ...)
        llmforge-complete.json        {"step", "world_size", "time", "job_id"}, written last by rank 0
    RUN_DIR/.tmp-step_00000100-<id>/  being written; renamed to step_00000100 once every rank has finished
The rename is the commit point. Resume takes the newest step_* that has the marker and loads; hidden
directories, directories without the marker and checkpoints that fail to load are passed over.

With --local-dir DIR (node-local scratch, e.g. /scratch) a checkpoint goes to the node first and the training loop
goes on as soon as it is written there; a thread per rank then copies it into the run directory:
    DIR/llmforge-train-<job>/rank-<r>/step_00000100/        rank r's files of the checkpoint in flight, as dcp names
                                                            them (__<r>_0.distcp, rank 0's .metadata): all ranks'
                                                            together are the whole checkpoint
    RUN_DIR/.tmp-step_00000100-<id>/.copied-rank-<r>.json   left by rank r once its files there are fsynced
Rank 0 waits for every rank's, takes them away, writes the marker ("tier": "local-then-copy", "copy_seconds") and
renames, exactly as above. One copy at a time: a checkpoint due while the last one is still being copied waits for
it, so step N+1 is never committed before step N. Before the trainer leaves (target, signal or error) it waits, at
most --local-drain-seconds, for the copy in flight; what it could not commit it says, and a run that reached its
target without committing its last checkpoint exits 3 to be requeued. Resume reads the run directory only (a requeued
job may land on other nodes). DIR/llmforge-train-<job> (<job>: the Slurm job id, which a requeued job keeps; else
this run's own id) is made 0700 with the run directory's trust rules (DIR itself: this user's or root's, writable by
others only with the sticky bit, like /scratch) and emptied at start; a rank's local copy is removed once its files
are on shared storage, the directory when the trainer leaves. Training does not start when DIR's file system has less
free space than --local-min-free-gb (default: twice the checkpoint, the model's parameters and AdamW's two moments).

A checkpoint's metadata is a pickle: loading it runs whatever code it names. So the run directory is a trust
boundary. It is made 0700 when it does not exist (with --new-run-dir it must not exist: made exclusively); a run
directory that is a symbolic link, is not owned by this process's user or is writable by group or others is
refused (exit 2), and so is one below a directory that another user could rename it in (not owned by root or this
user, or writable by others without the sticky bit). A step_* entry that is a link, belongs to another user or is
group- or world-writable, or holds such a file, is passed over with the reason.

What each rank leaves for the job's supervisor (the sbatch script), beside the checkpoints (directories 0700, files
0600, made by rank 0 with the run directory's trust rules; links are never followed):
    RUN_DIR/steps/rank-<r>.jsonl      one line per step: {"step", "rank", "node", "seconds", "compute_seconds", "time",
                                      "job_id", "restart"}; past --step-log-bytes it becomes rank-<r>.jsonl.1 (the older
                                      .1 is dropped), so a rank keeps at most twice that
    RUN_DIR/heartbeat/rank-<r>.json   rewritten (renamed into place) as the rank enters each step's forward, backward
                                      phases, as it enters DDP's gradient all-reduce, as it enters the step's sync and
                                      before a checkpoint: {"step", "phase", "time", "node", "pid",
                                      "rank", "job_id", "restart"}
    RUN_DIR/failed/rank-<r>.json      written by a rank that fails, before it exits: its error and where it ran
    RUN_DIR/stacks/rank-<r>.txt       the rank's own stack dump (faulthandler) on SIGUSR2, the fallback of py-spy
    RUN_DIR/sightings.jsonl           stragglers (rank 0), hangs and bad nodes (the job shell): one JSON object a line
    RUN_DIR/restarts.jsonl            the job shell's record of failed runs, its restart budget
A rank whose compute time (batch and forward pass: the part of a step without collectives; in synchronous training
every rank's wall time is the slowest one's) exceeds --straggler-factor times the other ranks' median for
--straggler-steps steps in a row is a straggler: rank 0 reports it once per node and run, in sightings.jsonl and as
"llmforge-suspect <node> straggler x<factor> rank<r>" in the Slurm job's comment (';'-separated entries, at most 250
characters, kept beside what the comment held). --drill-slow-rank and --drill-hang-rank make a rank slow, or hang it,
on purpose. On start the trainer lets other processes of its user read its memory (prctl PR_SET_PTRACER_ANY, for
py-spy under Yama's ptrace_scope 1); py-spy comes from the environment's lock (Debian does not package it).

The job shell's helpers (no torch is imported; llmforge-train --hang-check x --help lists their options):
    --hang-check RUN_DIR --seconds S [--lost-grace G] [--report]
        one JSON line about this job run's heartbeats and failed ranks; exit 10 (HUNG_EXIT) when no rank advanced for
        S seconds (the rank that stopped first, the one furthest behind, is named, and with --report written to
        sightings.jsonl and the job's comment), 11 (LOST_EXIT) when a rank failed G seconds ago and the step still
        runs, else 0
    --dump-stacks --run-dir RUN_DIR
        on one node: the Python stacks of this job's ranks there, with py-spy dump into
        RUN_DIR/stacks/<node>-rank<r>-restart<k>.txt, else by SIGUSR2 to the rank (faulthandler)
    --node-verdict RUN_DIR --nodes HOSTLIST [--report]
        reads the nodes' llmforge-nodecheck-request answers on stdin; exit 0 every node healthy, 12 (NODES_BAD_EXIT)
        a node unhealthy or silent (with --report: a line each in sightings.jsonl), 13 (NODES_UNKNOWN_EXIT) no node
        answered
    --restart-budget RUN_DIR --max-restarts N --reason TEXT
        records a failed run in RUN_DIR/restarts.jsonl and prints the failed ranks' errors; exit 0 when the job may
        be requeued (fewer than N failed runs since the newest checkpoint was committed), 14 (RESTARTS_SPENT_EXIT)
        when not

Exit codes: 0 target step reached; 3 (REQUEUE_EXIT) stopped by SIGUSR1/SIGTERM after a checkpoint, or the last
checkpoint could not be committed before leaving: requeue the job to continue; 2 (REFUSED_EXIT) the run directory or
the local checkpoint directory was refused (the message says why); anything else is an error.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import ctypes
import errno
import faulthandler
import fcntl
import glob
import hashlib
import importlib.util
import itertools
import json
import os
import re
import secrets
import shutil
import signal
import socket
import stat
import statistics
import subprocess
import sys
import threading
import time
import traceback
import warnings
from typing import NoReturn

# Slurm's stop signals (USR1 before the time limit, TERM on preemption) may come while torch is still being
# imported: sbatch's --signal is sent up to a minute early, so a requeued job can get it in its first second.
# Remember them from the first moment; the step loop acts on them at the first step boundary.
STOP_SIGNALS = (signal.SIGUSR1, signal.SIGTERM)
STOPS_RECEIVED = []


def remember_stop(signum, _frame) -> None:
    STOPS_RECEIVED.append(signum)


# The job shell's helpers run every few seconds: they import no torch (seconds of start-up) and catch no Slurm signal.
SUPERVISION_MODES = ('--hang-check', '--dump-stacks', '--node-verdict', '--restart-budget', '--stage-dataset')


def is_supervision(argv) -> bool:
    return any(argument.split('=', 1)[0] in SUPERVISION_MODES for argument in argv)


TRAINING = __name__ != '__main__' or not is_supervision(sys.argv[1:])

if __name__ == '__main__' and TRAINING:
    for _signum in STOP_SIGNALS:
        signal.signal(_signum, remember_stop)

torch = None
if TRAINING:
    try:
        import torch
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.api import CheckpointException
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    except ImportError:  # the launch and checkpoint-discovery helpers stay usable (and testable) without torch
        torch = None

REQUEUE_EXIT = 3
REFUSED_EXIT = 2
HUNG_EXIT = 10
LOST_EXIT = 11
NODES_BAD_EXIT = 12
NODES_UNKNOWN_EXIT = 13
RESTARTS_SPENT_EXIT = 14
STAGE_FAILED_EXIT = 15
MARKER = 'llmforge-complete.json'
CHECKPOINT_NAME = re.compile(r'step_(?P<step>[0-9]+)')
TMP_PREFIX = '.tmp-step_'
MARKOV_BRANCH_WEIGHTS = (0.6, 0.25, 0.1, 0.05)  # each token has 4 possible successors: ~1 nat of entropy


def log(message: str) -> None:
    # One write per line: the checkpoint copier's thread logs too, and print() writes the newline separately.
    sys.stdout.write(f'{message}\n')
    sys.stdout.flush()


# Launch ------------------------------------------------------------------------------------------

def expand_nodelist(nodelist: str) -> list[str]:
    """Expand a Slurm hostlist such as ``gpu[01-03,7],login1`` or ``r[1-2]-n[1-2]``, in written order."""
    hosts = []
    for item in re.findall(r'(?:[^,\[]|\[[^\]]*\])+', nodelist):
        choices = []
        for position, piece in enumerate(re.split(r'\[([^\]]*)\]', item)):
            choices.append([piece] if position % 2 == 0 else _expand_ranges(piece))
        hosts.extend(''.join(parts) for parts in itertools.product(*choices))
    return hosts


def _expand_ranges(spec: str) -> list[str]:
    numbers = []
    for part in spec.split(','):
        low, _dash, high = part.partition('-')
        # Slurm keeps the zero padding of the lower bound: n[08-10] is n08 n09 n10.
        numbers.extend([low] if not high else [f'{n:0{len(low)}d}' for n in range(int(low), int(high) + 1)])
    return numbers


def hostnames(nodelist: str) -> list[str]:
    """Every host of a Slurm nodelist: scontrol's own expansion when it is installed, else ours."""
    if shutil.which('scontrol'):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            result = subprocess.run(['scontrol', 'show', 'hostnames', nodelist], capture_output=True, text=True,
                                    timeout=SLURM_TIMEOUT, check=True)
            if result.stdout.split():
                return result.stdout.split()
    return expand_nodelist(nodelist)


def first_host(nodelist: str) -> str:
    """The first host of a nodelist."""
    return hostnames(nodelist)[0]


def rendezvous(environ, host_of=first_host) -> dict:
    """rank, world_size, local_rank, master_addr, master_port, job_id, restart_count from the environment."""
    def pick(*names, default):
        return next((environ[name] for name in names if environ.get(name, '') != ''), default)

    job_id = pick('SLURM_JOB_ID', default='')
    if environ.get('MASTER_ADDR'):
        master_addr = environ['MASTER_ADDR']
    elif environ.get('SLURM_JOB_NODELIST'):
        master_addr = host_of(environ['SLURM_JOB_NODELIST'])
    else:
        master_addr = '127.0.0.1'
    default_port = 20000 + int(job_id) % 20000 if job_id.isdigit() else 29500
    return {'rank': int(pick('RANK', 'SLURM_PROCID', default=0)),
            'world_size': int(pick('WORLD_SIZE', 'SLURM_NTASKS', default=1)),
            'local_rank': int(pick('LOCAL_RANK', 'SLURM_LOCALID', default=0)),
            'master_addr': master_addr, 'master_port': int(pick('MASTER_PORT', default=default_port)),
            'job_id': job_id or None, 'restart_count': int(pick('SLURM_RESTART_COUNT', default=0))}


# Trust: what another user could have written is never resumed from ----------------------------------

class RefusedRunDir(Exception):
    """The run directory cannot be trusted (or made); the message says why."""


def entry_problem(path: str, info: os.stat_result, uid: int) -> str | None:
    """Why a file or directory (its lstat) inside a run is not trusted, or None."""
    if stat.S_ISLNK(info.st_mode):
        return f'{path} is a symbolic link'
    if not (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
        return f'{path} is neither a directory nor a regular file'
    if info.st_uid != uid:
        return f'{path} is owned by uid {info.st_uid}, not by this job\'s uid {uid}'
    if info.st_mode & 0o022:
        return f'{path} is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})'
    return None


def ancestor_problem(directory: str, uid: int, what: str = 'the run directory') -> str | None:
    """Why the directories above a run could let another user swap it, or None (like OpenSSH's StrictModes)."""
    path = os.path.realpath(directory)
    while True:
        info = os.stat(path)
        if info.st_uid not in (0, uid):
            return f'{path} (above {what}) is owned by uid {info.st_uid}, neither root nor {uid}'
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return (f'{path} (above {what}) is writable by group or others without the sticky bit '
                    f'(mode {stat.S_IMODE(info.st_mode):04o}): another user could replace {what}')
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def prepare_run_dir(run_dir: str, uid: int, new: bool = False) -> str:
    """Make the run directory (0700) or check the existing one; its absolute path, or RefusedRunDir saying why.

    With `new` it must not exist yet: an exclusive mkdir, so a directory someone else made first is never used.
    """
    run_dir = os.path.abspath(run_dir)
    try:
        os.mkdir(run_dir, 0o700)
    except FileExistsError:
        if new:
            raise RefusedRunDir(f'{run_dir} exists already: a new run needs a directory it makes itself '
                                '(another user may have made it)') from None
    except OSError as error:
        raise RefusedRunDir(f'cannot make {run_dir}: {error.strerror or error}') from None
    problem = entry_problem(run_dir, os.lstat(run_dir), uid)
    if problem is None and not stat.S_ISDIR(os.lstat(run_dir).st_mode):
        problem = f'{run_dir} is not a directory'
    problem = problem or ancestor_problem(os.path.dirname(run_dir), uid)
    if problem:
        raise RefusedRunDir(problem)
    return run_dir


def checkpoint_problem(path: str, uid: int) -> str | None:
    """Why a step_* directory or anything in it is not trusted, or None; links are reported, never followed."""
    problem = entry_problem(path, os.lstat(path), uid)
    if problem or not stat.S_ISDIR(os.lstat(path).st_mode):
        return problem or f'{path} is not a directory'
    for folder, directories, files in os.walk(path):
        for name in directories + files:
            problem = entry_problem(os.path.join(folder, name), os.lstat(os.path.join(folder, name)), uid)
            if problem:
                return problem
    return None


# Checkpoint discovery ----------------------------------------------------------------------------

def discover_checkpoints(run_dir: str, uid: int | None = None) -> tuple[list[tuple[int, str]], list[tuple[str, str]]]:
    """Complete checkpoints as (step, path), newest first, and the (name, reason) of those passed over.

    A step_* entry that is a link, or that (or anything in it) is another user's or group/world-writable, is passed
    over with the reason (uid: the job's user, this process's by default).
    """
    uid = os.geteuid() if uid is None else uid
    found, skipped = [], []
    with os.scandir(run_dir) as entries:
        for entry in entries:
            match = CHECKPOINT_NAME.fullmatch(entry.name)
            if not match or not (entry.is_dir() or entry.is_symlink()):
                continue
            step, reason = int(match['step']), checkpoint_problem(entry.path, uid)
            if reason:
                skipped.append((entry.name, f'not trusted: {reason}'))
                continue
            try:
                with open(os.path.join(entry.path, MARKER), encoding='utf-8') as handle:
                    marker = json.load(handle)
                if not isinstance(marker, dict) or marker.get('step') != step:
                    reason = f'{MARKER} does not name step {step}'
            except FileNotFoundError:
                reason = f'no {MARKER}: incomplete'
            except (OSError, ValueError) as error:
                reason = f'unreadable {MARKER}: {error}'
            if reason:
                skipped.append((entry.name, reason))
            else:
                found.append((step, entry.path))
    return sorted(found, reverse=True), sorted(skipped)


def remove_leftovers(run_dir: str) -> list[str]:
    """Delete interrupted checkpoint writes (.tmp-step_* directories right under run_dir, never through links)."""
    removed = []
    with os.scandir(run_dir) as entries:
        for entry in entries:
            if entry.name.startswith(TMP_PREFIX) and entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
                removed.append(entry.name)
    return sorted(removed)


def first_loadable(candidates, load, say=log) -> tuple[int, str, float] | None:
    """(step, path, seconds) of the newest candidate that `load` accepts; failures are reported and passed over."""
    for step, path in candidates:
        started = time.perf_counter()
        try:
            load(path)
        except Exception as error:  # noqa: BLE001 - any failure to load means: try the next older one
            say(f'checkpoint skipped path={path} reason=load failed: {type(error).__name__}: {error}'[:1000])
            continue
        return step, path, time.perf_counter() - started
    return None


def tree_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(folder, name)) for folder, _dirs, names in os.walk(path) for name in names)


def fsync_path(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_json_atomically(path: str, document: dict) -> None:
    temporary = f'{path}.tmp-{os.getpid()}'
    with open(temporary, 'w', encoding='utf-8') as handle:
        handle.write(json.dumps(document) + '\n')
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def commit_checkpoint(tmp_path: str, final_path: str) -> None:
    """Rename a finished checkpoint into place; an existing one of the same step is replaced, not merged."""
    parent = os.path.dirname(final_path)
    try:
        os.rename(tmp_path, final_path)
    except OSError:
        if not os.path.isdir(final_path):
            raise
        # Reached again after a resume from an older checkpoint: the existing one may be why we fell back.
        retired = f'{tmp_path}-replaced'
        os.rename(final_path, retired)
        os.rename(tmp_path, final_path)
        shutil.rmtree(retired)
    fsync_path(parent)


# The node-local tier: checkpoints written to the node's scratch, copied to the run directory in the background -----

LOCAL_TIER, DIRECT_TIER = 'local-then-copy', 'direct'
LOCAL_JOB_PREFIX = 'llmforge-train-'
COPIED_PREFIX = '.copied-rank-'
COPY_CHUNK = 64 << 20
GB = 10 ** 9
# How often a rank waiting for a copy looks at it: a heartbeat each time the copy moved on, so a slow copy is never
# taken for a hang, and a stuck one is.
COPY_WAIT_SECONDS = 1.0
# How long a cancelled copy may take to notice (it looks between chunks), before its files are removed under it.
COPY_CANCEL_SECONDS = 10.0


class RefusedLocalDir(RefusedRunDir):
    """The node-local checkpoint directory cannot be trusted, made or used; the message says why."""


class CopyCancelled(Exception):
    """The trainer stopped waiting for a copy and is leaving."""


def prepare_local_dir(root: str, name: str, uid: int) -> str:
    """Make the job's directory ROOT/NAME (0700) on node-local scratch, or check the one there; its absolute path.

    ROOT is made 0700 when missing and must be this user's or root's, writable by others only with the sticky bit
    (like /scratch, mode 1777), as must every directory above it; ROOT/NAME must be this user's directory, no link,
    writable by no one else: the run directory's rules (RefusedLocalDir says what is wrong, naming the path).
    """
    root = os.path.abspath(root)
    try:
        os.mkdir(root, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise RefusedLocalDir(f'cannot make {root}: {error.strerror or error}') from None
    problem = ancestor_problem(root, uid, what='the local checkpoint directory')
    if problem:
        raise RefusedLocalDir(problem)
    return private_dir(os.path.join(root, name), uid, RefusedLocalDir)


def free_space_problem(path: str, min_bytes: int, why: str, statvfs=os.statvfs) -> str | None:
    """Why the file system of `path` has too little free space for local checkpoints, or None."""
    info = statvfs(path)
    free = info.f_bavail * info.f_frsize
    if free >= min_bytes:
        return None
    return (f'{path} has {free / GB:.2f} GB free on its file system, less than --local-min-free-gb '
            f'{min_bytes / GB:.2f} ({why}): free some space, point --local-dir elsewhere or lower the bound')


def empty_dir(path: str) -> list[str]:
    """Delete everything in a directory (never through a link: a link is removed, not followed); the names."""
    removed = []
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed.append(entry.name)
    return sorted(removed)


def _send(target: int, source: int, offset: int, count: int) -> int:
    try:
        return os.sendfile(target, source, offset, count)  # in the kernel, without the GIL
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
    return os.write(target, os.pread(source, count, offset))


def copy_file(source: str, target: str, throttle_bps: float = 0, cancelled: threading.Event | None = None,
              moved=lambda count: None) -> int:
    """Copy one file into a new file (never through a link, never over one there), fsync it; the bytes copied.

    throttle_bps > 0 keeps it at most that fast (a drill); `cancelled` is looked at between chunks; `moved` is told
    each chunk's bytes.
    """
    source_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(source_fd)
        target_fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                            stat.S_IMODE(info.st_mode) & 0o755)
        try:
            chunk = max(4096, int(throttle_bps / 10)) if throttle_bps > 0 else COPY_CHUNK
            offset, began = 0, time.monotonic()
            while offset < info.st_size:
                if cancelled is not None and cancelled.is_set():
                    raise CopyCancelled(f'{target}: cancelled after {offset} of {info.st_size} bytes')
                sent = _send(target_fd, source_fd, offset, min(chunk, info.st_size - offset))
                if sent <= 0:
                    raise OSError(f'{source} ended at {offset} of {info.st_size} bytes')
                offset += sent
                moved(sent)
                ahead = offset / throttle_bps - (time.monotonic() - began) if throttle_bps > 0 else 0
                if ahead > 0:
                    (cancelled or threading.Event()).wait(ahead)
            os.fsync(target_fd)
        finally:
            os.close(target_fd)
    finally:
        os.close(source_fd)
    return offset


class CheckpointCopy:
    """One rank's part of a checkpoint on its way from node-local scratch into the run directory, in a thread.

    Every rank copies its own files (dcp names the shards by rank; rank 0 also has .metadata) into the step's hidden
    temporary directory in the run directory, fsyncs them and the directory, then leaves .copied-rank-<r>.json there.
    Rank 0 waits for every rank's (its error, if a rank's copy failed), takes them away, writes the complete-marker
    last and renames the directory into step_%08d: the commit of a direct save. Ranks meet through these files only:
    the process group is the training loop's, and a collective from another thread would interleave with its own.

    outcome: None while running, then 'committed' (rank 0), 'copied' (the other ranks) or what went wrong.
    The local copy is removed when the thread ends, whatever the outcome: resume never reads it.
    """

    def __init__(self, step: int, source: str, tmp: str, final: str, rank: int, world: int, *, marker: dict,
                 save_started: float, record: dict | None = None, throttle_bps: float = 0, say=log):
        self.step, self.source, self.tmp, self.final = step, source, tmp, final
        self.rank, self.world, self.marker, self.record = rank, world, marker, record
        self.save_started, self.throttle_bps, self.say = save_started, throttle_bps, say
        self.done, self.cancelled = threading.Event(), threading.Event()
        self.outcome: str | None = None
        self.copied_bytes, self.ranks_copied = 0, 0
        self.thread = threading.Thread(target=self.run, name=f'llmforge-copy-step{step}', daemon=True)

    def start(self) -> CheckpointCopy:
        self.thread.start()
        return self

    def progress(self) -> tuple[int, int]:
        return self.copied_bytes, self.ranks_copied

    def cancel(self) -> None:
        self.cancelled.set()

    def copied_path(self, rank: int) -> str:
        return os.path.join(self.tmp, f'{COPIED_PREFIX}{rank}.json')

    def run(self) -> None:
        started = time.perf_counter()
        error = None
        try:
            files, size = self.copy_mine()
            report = {'rank': self.rank, 'files': files, 'bytes': size,
                      'seconds': round(time.perf_counter() - started, 4)}
        except BaseException as failure:  # noqa: BLE001 - reported to rank 0, which then commits nothing
            error = f'rank {self.rank}: {type(failure).__name__}: {failure}'[:1000]
            report = {'rank': self.rank, 'error': error}
        try:
            with contextlib.suppress(OSError):  # rank 0 waits for this file: tell it even about a failure
                with contextlib.suppress(FileExistsError):
                    os.mkdir(self.tmp, 0o700)
                write_json_atomically(self.copied_path(self.rank), report)
            if self.rank == 0:
                error = self.commit(started, error)
            self.outcome = error or ('committed' if self.rank == 0 else 'copied')
        except BaseException as failure:  # noqa: BLE001 - the thread's outcome is what the trainer reads
            self.outcome = f'rank {self.rank}: {type(failure).__name__}: {failure}'[:1000]
        finally:
            shutil.rmtree(self.source, ignore_errors=True)
            self.done.set()
        if self.outcome not in ('committed', 'copied') and not self.cancelled.is_set():  # else the trainer says it
            log(f'checkpoint step={self.step} not committed: {self.outcome}')

    def copy_mine(self) -> tuple[list[str], int]:
        with contextlib.suppress(FileExistsError):  # whichever rank comes first makes it
            os.mkdir(self.tmp, 0o700)
        names, size = [], 0
        with os.scandir(self.source) as entries:
            for entry in sorted(entries, key=lambda entry: entry.name):
                if not entry.is_file(follow_symlinks=False):
                    raise OSError(f'{entry.path} is not a regular file: dcp writes none such')
                size += copy_file(entry.path, os.path.join(self.tmp, entry.name), self.throttle_bps, self.cancelled,
                                  self.moved)
                names.append(entry.name)
        fsync_path(self.tmp)
        return names, size

    def moved(self, count: int) -> None:
        self.copied_bytes += count

    def commit(self, started: float, error: str | None) -> str | None:
        """Rank 0: wait for every rank's files, then the marker and the rename; None, or why nothing was committed."""
        reports = self.wait_for_ranks()
        errors = [error] if error else []
        errors += [report['error'] for report in reports if report.get('error') and report['rank'] != 0]
        if errors:
            shutil.rmtree(self.tmp, ignore_errors=True)
            return '; '.join(errors)
        for rank in range(self.world):
            os.unlink(self.copied_path(rank))
        copy_seconds = time.perf_counter() - started
        marker = {**self.marker, 'time': time.time(), 'copy_seconds': round(copy_seconds, 4)}
        write_json_atomically(os.path.join(self.tmp, MARKER), marker)
        fsync_path(self.tmp)
        commit_checkpoint(self.tmp, self.final)
        commit_s = time.perf_counter() - self.save_started
        size = tree_bytes(self.final)
        if self.record is not None:
            self.record.update(seconds=round(commit_s, 4), bytes=size, commit_s=round(commit_s, 4),
                               copy_s=round(copy_seconds, 4), committed=True)
        stall = f" stall_s={self.record['stall_s']:.3f}" if self.record is not None else ''
        self.say(f'checkpoint step={self.step} seconds={commit_s:.3f} bytes={size} path={self.final} '
                 f'tier={LOCAL_TIER}{stall}')
        return None

    def wait_for_ranks(self) -> list[dict]:
        """Every rank's .copied-rank-<r>.json, polled (shared file systems have no notification that works)."""
        reports, delay = {}, 0.01
        while True:
            for record in read_json_records(os.path.join(self.tmp, f'{COPIED_PREFIX}*.json')):
                if record.get('rank') in range(self.world):
                    reports[record['rank']] = record
            self.ranks_copied = len(reports)
            if len(reports) == self.world:
                return [reports[rank] for rank in range(self.world)]
            if self.cancelled.wait(delay):
                raise CopyCancelled(f'ranks {sorted(set(range(self.world)) - set(reports))} had not copied their files')
            delay = min(delay * 2, 0.5)


# Supervision: what the ranks and the job shell leave for each other in the run directory ----------------

STEPS_DIR, HEARTBEAT_DIR, FAILED_DIR, STACKS_DIR = 'steps', 'heartbeat', 'failed', 'stacks'
# Each rank's process also says it is alive, from a thread of its own, whatever its training does: a rank waiting in a
# collective stays alive, one that is stopped (SIGSTOP, a hard fault) does not.
ALIVE_DIR = 'alive'
SUPERVISION_DIRS = (STEPS_DIR, HEARTBEAT_DIR, FAILED_DIR, STACKS_DIR, ALIVE_DIR)
ALIVE_SECONDS = 5.0
# A rank is unresponsive when its last sign of life is this many intervals old.
ALIVE_MISSED = 3
# The heartbeat's phases within a step, in order: a rank in an earlier phase of the same step is behind.
# 'allreduce': the rank's gradients are computed and it has entered DDP's gradient all-reduce (waiting there for a
# rank still computing, which is the one behind).
PHASES = {'forward': 0, 'backward': 1, 'allreduce': 2, 'sync': 3, 'checkpoint': 4}
SIGHTINGS = 'sightings.jsonl'
RESTARTS = 'restarts.jsonl'
STEP_LOG_BYTES = 4 << 20
# SIGUSR1 is Slurm's (checkpoint and stop) and SIGTERM its stop; SIGQUIT would dump core where nothing catches it.
STACK_SIGNAL = signal.SIGUSR2
SUSPECT = 'llmforge-suspect'
COMMENT_KINDS = ('straggler', 'hang')
COMMENT_CAP = 250
SLURM_TIMEOUT = 30
PY_SPY_TIMEOUT = 30
PR_SET_PTRACER, PR_SET_PTRACER_ANY = 0x59616D61, ctypes.c_ulong(-1).value


def node_name(environ=None) -> str:
    """This node as Slurm names it (what a drain or a job comment must name), else its hostname."""
    environ = os.environ if environ is None else environ
    return environ.get('SLURMD_NODENAME') or socket.gethostname()


def job_run(environ=None) -> tuple[str | None, int]:
    """(job id, restart count) of the job run this process belongs to."""
    environ = os.environ if environ is None else environ
    restart = environ.get('SLURM_RESTART_COUNT', '')
    return environ.get('SLURM_JOB_ID') or None, int(restart) if restart.isdigit() else 0


def private_dir(path: str, uid: int, refused: type[RefusedRunDir] = RefusedRunDir) -> str:
    """Make a 0700 directory inside the run directory, or check the one there; RefusedRunDir says why not."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as error:
        raise refused(f'cannot make {path}: {error.strerror or error}') from None
    info = os.lstat(path)
    problem = entry_problem(path, info, uid)
    if problem is None and not stat.S_ISDIR(info.st_mode):
        problem = f'{path} is not a directory'
    if problem:
        raise refused(problem)
    return path


def trusted_dir_problem(path: str, uid: int) -> str | None:
    """Why an existing run directory (or a directory in it) is no place to write to, or None."""
    try:
        info = os.lstat(path)
    except OSError as error:
        return f'{path}: {error.strerror or error}'
    problem = entry_problem(path, info, uid)
    if problem is None and not stat.S_ISDIR(info.st_mode):
        problem = f'{path} is not a directory'
    return problem or ancestor_problem(os.path.dirname(os.path.abspath(path)), uid)


def open_private(path: str, append: bool = True):
    """A text file of this user's, opened for writing without following a link (made 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    descriptor = os.open(path, flags | (os.O_APPEND if append else os.O_TRUNC), 0o600)
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        os.close(descriptor)
        raise OSError(f'{path} is not a regular file of uid {os.geteuid()}')
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, 'a' if append else 'w', encoding='utf-8')


def append_json_line(path: str, document: dict) -> None:
    with open_private(path) as handle:
        handle.write(json.dumps(document) + '\n')


def replace_json(path: str, document: dict) -> None:
    """Write a small JSON file whole: readers see the old or the new one (no fsync: it is rewritten every step)."""
    temporary = os.path.join(os.path.dirname(path), f'.{os.path.basename(path)}.tmp-{os.getpid()}')
    with open_private(temporary, append=False) as handle:
        handle.write(json.dumps(document) + '\n')
    os.replace(temporary, path)


def read_json_records(pattern: str) -> list[dict]:
    """The JSON objects of the files matching a glob, read without following links; unreadable ones are left out."""
    records = []
    for path in sorted(glob.glob(pattern)):
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            with os.fdopen(descriptor, encoding='utf-8') as handle:
                record = json.loads(handle.read(1 << 20))
        except (OSError, ValueError):
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def of_this_run(records, job_id: str | None, restart: int) -> list[dict]:
    """The records a rank of this job run wrote (all of them outside Slurm)."""
    if job_id is None:
        return list(records)
    return [record for record in records if record.get('job_id') == job_id and record.get('restart') == restart]


class StepLog:
    """One JSON line per step in a file of the rank's own; past max_bytes the file becomes <file>.1 (0: never)."""

    def __init__(self, path: str, max_bytes: int = STEP_LOG_BYTES):
        self.path, self.max_bytes = path, max_bytes
        self.handle = open_private(path)

    def write(self, record: dict) -> None:
        self.handle.write(json.dumps(record) + '\n')
        self.handle.flush()
        if self.max_bytes and os.fstat(self.handle.fileno()).st_size >= self.max_bytes:
            self.handle.close()
            os.replace(self.path, f'{self.path}.1')
            self.handle = open_private(self.path)

    def close(self) -> None:
        self.handle.close()


class RankRecords:
    """What one rank leaves in the run directory: step times, its heartbeat, its stacks on demand, its failure.

    Telemetry never stops training: a write that fails is reported once (on the rank's stderr) and training goes on.
    """

    def __init__(self, run_dir: str, rank: int, environ=None, step_log_bytes: int = STEP_LOG_BYTES):
        job_id, restart = job_run(environ)
        self.identity = {'rank': rank, 'node': node_name(environ), 'pid': os.getpid(), 'job_id': job_id,
                         'restart': restart}
        self.heartbeat_path = os.path.join(run_dir, HEARTBEAT_DIR, f'rank-{rank}.json')
        self.alive_path = os.path.join(run_dir, ALIVE_DIR, f'rank-{rank}.json')
        self.failed_path = os.path.join(run_dir, FAILED_DIR, f'rank-{rank}.json')
        self.complained = set()
        self.steps = self.attempt('step log', StepLog, os.path.join(run_dir, STEPS_DIR, f'rank-{rank}.jsonl'),
                                  step_log_bytes)
        self.stacks = self.attempt('stack file', self.register_stacks,
                                   os.path.join(run_dir, STACKS_DIR, f'rank-{rank}.txt'))

    def attempt(self, what: str, action, *args):
        try:
            return action(*args)
        except OSError as error:
            if what not in self.complained:
                self.complained.add(what)
                print(f"llmforge-train: rank {self.identity['rank']}: cannot write its {what}: {error}",
                      file=sys.stderr, flush=True)
            return None

    def register_stacks(self, path: str):
        """Dump every thread's stack into `path` on STACK_SIGNAL: works while the rank is stuck in C code, no ptrace."""
        handle = open_private(path)
        handle.write(f"--- job {self.identity['job_id']} restart {self.identity['restart']} pid {os.getpid()} node "
                     f"{self.identity['node']} started {time.strftime('%Y-%m-%dT%H:%M:%S%z')}: stacks on "
                     f'{STACK_SIGNAL.name} follow\n')
        handle.flush()
        faulthandler.register(STACK_SIGNAL, file=handle, all_threads=True)
        return handle

    def keep_alive(self, interval: float = ALIVE_SECONDS, stop: threading.Event | None = None) -> threading.Thread:
        """Say every `interval` seconds, from a daemon thread, that this process runs (not whether it progresses),
        until `stop` is set (the process's end when none is given)."""
        stop = stop or threading.Event()

        def say_alive():
            while True:
                self.attempt('liveness', replace_json, self.alive_path, {'time': time.time(), **self.identity})
                if stop.wait(interval):
                    return
        thread = threading.Thread(target=say_alive, name='llmforge-alive', daemon=True)
        thread.start()
        return thread

    def beat(self, step: int, phase: str) -> None:
        self.attempt('heartbeat', replace_json, self.heartbeat_path,
                     {'step': step, 'phase': phase, 'time': time.time(), **self.identity})

    def step_done(self, step: int, seconds: float, compute_seconds: float) -> None:
        if self.steps:
            self.attempt('step log', self.steps.write, {'step': step, 'rank': self.identity['rank'],
                                                        'node': self.identity['node'], 'seconds': round(seconds, 6),
                                                        'compute_seconds': round(compute_seconds, 6),
                                                        'time': time.time(), 'job_id': self.identity['job_id'],
                                                        'restart': self.identity['restart']})

    def failed(self, error: str) -> None:
        lines = error.strip().splitlines()
        self.attempt('failure record', replace_json, self.failed_path,
                     {**self.identity, 'time': time.time(), 'error': lines[-1][:500] if lines else '',
                      'traceback': '\n'.join(lines[-40:])[-8000:]})


def allow_stack_readers() -> bool:
    """Let other processes of this user (py-spy in the job's next step) read this one's memory under Yama's scope 1.

    Ptrace's own rule (same uid, or CAP_SYS_PTRACE) still applies; where Yama is absent the call fails and nothing is
    needed.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PTRACER, ctypes.c_ulong(PR_SET_PTRACER_ANY), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


# Stragglers: a rank slower than the others, step after step ------------------------------------------

def others_median(values: list[float]) -> list[float]:
    """For each value, the median of all the other values (a rank is never compared with itself: two ranks work)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranked = [values[index] for index in order]
    count = len(values) - 1
    medians = [0.0] * len(values)
    for position, index in enumerate(order):
        def other(k):
            return ranked[k] if k < position else ranked[k + 1]
        medians[index] = other(count // 2) if count % 2 else (other(count // 2 - 1) + other(count // 2)) / 2
    return medians


class StragglerDetector:
    """Ranks slower than `factor` x the other ranks' median for `steps` steps in a row; one sighting per node."""

    def __init__(self, factor: float = 1.5, steps: int = 20):
        self.factor, self.steps = factor, steps
        self.runs: dict[int, list[float]] = {}
        self.reported: set[str] = set()

    def observe(self, seconds: list[float], nodes: list[str]) -> list[dict]:
        """Feed one step's per-rank seconds (rank order) and the ranks' nodes; the new sightings."""
        if self.steps < 1 or len(seconds) < 2:
            return []
        sightings = []
        for rank, (mine, median) in enumerate(zip(seconds, others_median(seconds))):
            run = self.runs.setdefault(rank, [])
            if median > 0 and mine > median * self.factor:
                run.append(mine / median)
            else:
                run.clear()
            if len(run) >= self.steps and nodes[rank] not in self.reported:
                self.reported.add(nodes[rank])
                sightings.append({'kind': 'straggler', 'node': nodes[rank], 'rank': rank,
                                  'factor': round(statistics.fmean(run[-self.steps:]), 2), 'steps': len(run)})
        return sightings


# Hangs and failed ranks, as the job shell sees them ----------------------------------------------------

def progress_state(heartbeats: list[dict], failures: list[dict], now: float, hang_seconds: float,
                   lost_grace: float | None = None, alive: list[dict] | None = None,
                   alive_seconds: float = ALIVE_SECONDS) -> dict:
    """What this run's heartbeats and failure records say: state waiting, running, hung or lost.

    hung: no rank's heartbeat advanced for hang_seconds (0: never); the suspect is the rank that stopped first. A
    rank whose process stopped saying it is alive (`alive`, ALIVE_MISSED intervals) while others still do is that
    rank: the others are waiting for it (a rank stopped just after starting its gradient all-reduce may have beaten
    a later phase than the ranks blocked in it). Otherwise, every process running, it is the one furthest behind
    (lowest step, then earliest phase: the others wait for it in their next collective), then the oldest heartbeat.
    lost: a rank failed lost_grace seconds ago or more and the step still runs (the caller asks only
    while it does): what is left of the step waits for a node that will not answer.
    """
    if failures and lost_grace is not None:
        first = min(failures, key=lambda record: (record.get('time') or now, record.get('rank', 0)))
        age = now - (first.get('time') or now)
        if age >= lost_grace:
            return {'state': 'lost', 'rank': first.get('rank'), 'node': first.get('node'), 'error': first.get('error'),
                    'failed_seconds': round(age, 1), 'failed_ranks': sorted(record.get('rank') for record in failures)}
    if not heartbeats:
        return {'state': 'waiting', 'ranks': 0}
    newest = max(record['time'] for record in heartbeats)
    state = {'state': 'running', 'ranks': len(heartbeats), 'step': max(record.get('step', 0) for record in heartbeats),
             'stale_seconds': round(now - newest, 1)}
    if hang_seconds <= 0 or now - newest < hang_seconds:
        return state
    last_alive = {record.get('rank'): record['time'] for record in alive or ()
                  if isinstance(record.get('time'), (int, float))}
    silent = [record for record in heartbeats
              if now - last_alive.get(record.get('rank'), now) >= ALIVE_MISSED * alive_seconds]
    candidates = silent if silent and len(silent) < len(heartbeats) else heartbeats
    suspect = min(candidates, key=lambda record: (record.get('step', 0), PHASES.get(record.get('phase'), len(PHASES)),
                                                  record['time'], record.get('rank', 0)))
    hung = {**state, 'state': 'hung', 'rank': suspect.get('rank'), 'node': suspect.get('node'),
            'step': suspect.get('step'), 'phase': suspect.get('phase'),
            'stopped_seconds': round(now - suspect['time'], 1)}
    if candidates is silent:
        hung['unresponsive_ranks'] = sorted(record.get('rank') for record in silent)
    return hung


def heartbeats_of(run_dir: str, job_id: str | None, restart: int, kind: str = HEARTBEAT_DIR) -> list[dict]:
    """The ranks' heartbeats (progress) of this run, or with kind ALIVE_DIR their signs of life."""
    records = read_json_records(os.path.join(run_dir, kind, 'rank-*.json'))
    return [record for record in of_this_run(records, job_id, restart) if isinstance(record.get('time'), (int, float))]


def failures_of(run_dir: str, job_id: str | None, restart: int) -> list[dict]:
    return of_this_run(read_json_records(os.path.join(run_dir, FAILED_DIR, 'rank-*.json')), job_id, restart)


# Reports: sightings.jsonl and the Slurm job's comment ------------------------------------------------

def suspect_entry(sighting: dict) -> str:
    """The job comment's words for a straggler or hang: llmforge-suspect <node> <kind> <detail>."""
    node = re.sub(r'[^A-Za-z0-9._-]+', '_', str(sighting.get('node') or 'unknown'))
    if sighting['kind'] == 'straggler':
        return f"{SUSPECT} {node} straggler x{sighting['factor']} rank{sighting['rank']}"
    return f"{SUSPECT} {node} hang rank{sighting['rank']} step{sighting['step']}"


def merge_comment(existing: str, entries: list[str], cap: int = COMMENT_CAP) -> str:
    """The job comment with `entries` added (';'-separated, none twice), at most `cap` characters.

    What does not fit goes, oldest first: earlier llmforge-suspect entries, then the rest of the comment as it was,
    then the oldest of the new entries.
    """
    parts = [part.strip() for part in existing.split(';') if part.strip()]
    new = [entry for entry in dict.fromkeys(entries) if entry not in parts]
    if not new:
        return existing
    old_suspects = [part for part in parts if part.startswith(SUSPECT)]
    others = [part for part in parts if not part.startswith(SUSPECT)]
    while len(';'.join(others + old_suspects + new)) > cap and (old_suspects or others or len(new) > 1):
        (old_suspects or others or new).pop(0)
    merged = ';'.join(others + old_suspects + new)
    return merged[:cap]


def comment_of(show_job: str) -> str:
    """The Comment= value of `scontrol show job` (one field a line there), '' when it has none."""
    match = re.search(r'^\s*Comment=(.*?)\s*$', show_job, re.M)
    if not match:
        return ''
    return '' if match[1] == '(null)' else match[1]


def report_to_slurm(entries: list[str], environ=None, run=subprocess.run) -> str | None:
    """Add entries to the Slurm job's comment (scontrol, with a timeout); the new comment, or None when not done.

    Skipped outside Slurm; never raises: a comment is worth less than the job.
    """
    environ = os.environ if environ is None else environ
    job_id = environ.get('SLURM_JOB_ID')
    if not entries or not job_id or not shutil.which('scontrol'):
        return None
    try:
        shown = run(['scontrol', 'show', 'job', job_id], capture_output=True, text=True, timeout=SLURM_TIMEOUT,
                    check=False)
        if shown.returncode != 0:  # an update now could wipe what the comment holds
            return None
        existing = comment_of(shown.stdout)
        merged = merge_comment(existing, entries)
        if merged == existing:
            return merged
        done = run(['scontrol', 'update', f'jobid={job_id}', f'comment={merged}'], capture_output=True, text=True,
                   timeout=SLURM_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return merged if done.returncode == 0 else None


def record_sightings(run_dir: str, sightings: list[dict], environ=None, say=log) -> None:
    """Append sightings to RUN_DIR/sightings.jsonl (when the run directory is trusted); stragglers and hangs also to
    the job's comment, where the cluster's remediation counts them (a bad node is its health check's to drain)."""
    job_id, restart = job_run(environ)
    stamped = [{**sighting, 'time': sighting.get('time', time.time()), 'job_id': job_id, 'restart': restart}
               for sighting in sightings]
    problem = trusted_dir_problem(run_dir, os.geteuid())
    for sighting in stamped:
        if problem is None:
            try:
                append_json_line(os.path.join(run_dir, SIGHTINGS), sighting)
            except OSError as error:
                problem = str(error)
    if problem:
        say(f'sightings not written to {run_dir}: {problem}')
    entries = [suspect_entry(sighting) for sighting in stamped if sighting['kind'] in COMMENT_KINDS]
    if entries and report_to_slurm(entries, environ) is None and job_id:
        say('the job comment was not updated (scontrol failed or is missing)')


# Stacks of a hung job: py-spy from the next step, else the rank's own faulthandler ---------------------

def run_dir_of(argv: list[str]) -> str | None:
    """The --run-dir a trainer's command line names."""
    for position, argument in enumerate(argv):
        if argument == '--run-dir' and position + 1 < len(argv):
            return argv[position + 1]
        if argument.startswith('--run-dir='):
            return argument.split('=', 1)[1]
    return None


def trainer_processes(job_id: str, run_dir: str, uid: int, proc_root: str = '/proc', exclude=(),
                      program: str = os.path.basename(__file__)) -> list[dict]:
    """This job's trainer processes on this node: {pid, rank}, by rank.

    One is a process of `uid` whose environment names the job (SLURM_JOB_ID) and whose command line runs this
    program (`program`, its file name) on `run_dir` in training mode; `exclude`: pids passed over (our own).
    """
    found = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        base = os.path.join(proc_root, entry)
        try:
            if os.stat(base).st_uid != uid:
                continue
            with open(os.path.join(base, 'cmdline'), 'rb') as handle:
                argv = [part.decode(errors='replace') for part in handle.read().split(b'\0')[:-1]]
            with open(os.path.join(base, 'environ'), 'rb') as handle:
                environ = dict(item.decode(errors='replace').split('=', 1)
                               for item in handle.read().split(b'\0') if b'=' in item)
            given = run_dir_of(argv)
            if given is not None and not os.path.isabs(given):
                given = os.path.join(os.readlink(os.path.join(base, 'cwd')), given)
        except OSError:  # gone meanwhile, or not ours to read
            continue
        runs_program = program in {os.path.basename(argument) for argument in argv[:4]}  # python [-u ...] FILE
        if (environ.get('SLURM_JOB_ID') != job_id or not runs_program or is_supervision(argv) or given is None
                or os.path.normpath(given) != os.path.normpath(run_dir)):
            continue
        rank = environ.get('SLURM_PROCID') or environ.get('RANK') or ''
        found.append({'pid': int(entry), 'rank': int(rank) if rank.isdigit() else None})
    return sorted(found, key=lambda process: (process['rank'] is None, process['rank'] or 0, process['pid']))


def catches(pid: int, signum: int, proc_root: str = '/proc') -> bool:
    """Whether the process has a handler for the signal (its default action would end it)."""
    try:
        with open(os.path.join(proc_root, str(pid), 'status'), encoding='ascii') as status:
            caught = next(int(line.split()[1], 16) for line in status if line.startswith('SigCgt:'))
    except (OSError, StopIteration, ValueError):
        return False
    return bool(caught & 1 << (signum - 1))


def find_py_spy() -> str | None:
    """py-spy of this environment (beside its python), else one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), 'py-spy')
    return beside if os.access(beside, os.X_OK) else shutil.which('py-spy')


def dump_one(process: dict, path: str, py_spy: str | None, proc_root='/proc', run=subprocess.run,
             send=os.kill) -> str:
    """One rank's stacks into `path`; how they were taken."""
    header = f"--- pid {process['pid']} rank {process['rank']} taken {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\n"
    failure = 'py-spy is not installed'
    if py_spy:
        try:
            done = run([py_spy, 'dump', '--pid', str(process['pid'])], capture_output=True, text=True,
                       timeout=PY_SPY_TIMEOUT, check=False)
            if done.returncode == 0:
                with open_private(path, append=False) as handle:
                    handle.write(header + done.stdout)
                return 'py-spy'
            failure = f'py-spy failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-300:]}'
        except subprocess.TimeoutExpired:
            failure = f'py-spy took more than {PY_SPY_TIMEOUT}s'
        except OSError as error:
            failure = f'py-spy could not run: {error}'
    rank_file = f"{STACKS_DIR}/rank-{process['rank']}.txt"
    if catches(process['pid'], STACK_SIGNAL, proc_root):
        send(process['pid'], STACK_SIGNAL)
        how = f'{failure}; {STACK_SIGNAL.name} sent: the rank appends its own stacks to {rank_file}'
    else:
        how = f'{failure}; no stack handler in the process yet, nothing sent'
    with open_private(path, append=False) as handle:
        handle.write(header + how + '\n')
    return how


def dump_stacks(run_dir: str, environ=None, proc_root: str = '/proc', py_spy: str | None = None,
                run=subprocess.run, send=os.kill, say=log) -> int:
    """The stacks of this job's ranks on this node into RUN_DIR/stacks/<node>-rank<r>-restart<k>.txt; how many."""
    job_id, restart = job_run(environ)
    node = node_name(environ)
    stacks = os.path.join(run_dir, STACKS_DIR)
    problem = trusted_dir_problem(run_dir, os.geteuid()) or trusted_dir_problem(stacks, os.geteuid())
    if problem:
        say(f'stacks on {node}: not written: {problem}')
        return 0
    processes = trainer_processes(job_id or '', run_dir, os.geteuid(), proc_root, exclude={os.getpid(), os.getppid()})
    if not processes:
        say(f'stacks on {node}: no trainer process of job {job_id} here')
        return 0
    safe_node = re.sub(r'[^A-Za-z0-9._-]', '_', node)

    def one(process):
        path = os.path.join(stacks, f"{safe_node}-rank{process['rank']}-restart{restart}.txt")
        try:
            return path, dump_one(process, path, py_spy, proc_root, run, send)
        except OSError as error:
            return path, f'not written: {error}'

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        for process, (path, how) in zip(processes, pool.map(one, processes)):
            say(f"stacks on {node}: rank {process['rank']} pid {process['pid']} -> {path} ({how})")
    return len(processes)


# Node checks and the restart budget, for the job shell -------------------------------------------------

def node_verdict(lines, expected: list[str]) -> dict:
    """The nodes' answers (one JSON line each: {"node", "healthy", "reason"}) against the nodes of the job.

    verdict: healthy (every node said so), bad (a node said it is not, or did not answer: lost or unreachable) or
    unknown (no node answered: the check itself is missing or failed, so it proves nothing).
    """
    answers = {}
    for line in lines:
        start = line.find('{')
        if start < 0:
            continue
        with contextlib.suppress(ValueError):
            answer = json.loads(line[start:])
            if isinstance(answer, dict) and answer.get('node'):
                answers[str(answer['node'])] = answer
    short = {name.split('.')[0]: name for name in answers}
    unhealthy = [{'node': name, 'reason': str(answer.get('reason') or 'no reason given')}
                 for name, answer in answers.items() if answer.get('healthy') is not True]
    silent = [name for name in expected if name not in answers and name.split('.')[0] not in short]
    verdict = 'unknown' if not answers else ('bad' if unhealthy or silent else 'healthy')
    return {'verdict': verdict, 'healthy': sorted(name for name, answer in answers.items()
                                                  if answer.get('healthy') is True),
            'unhealthy': unhealthy, 'silent': silent}


def newest_checkpoint(run_dir: str) -> int | None:
    with contextlib.suppress(OSError):
        found, _skipped = discover_checkpoints(run_dir)
        return found[0][0] if found else None
    return None


def restart_budget(records: list[dict], job_id: str | None, checkpoint: int | None, max_restarts: int) -> dict:
    """Whether a failed run may be requeued: fewer than max_restarts earlier failures of this job at this checkpoint.

    A failure counts until the run commits a newer checkpoint: a job that keeps making progress is never given up,
    one that fails again and again from the same checkpoint is, after max_restarts restarts.
    """
    earlier = sum(1 for record in records if record.get('job_id') == job_id and record.get('checkpoint') == checkpoint)
    return {'failures': earlier, 'max_restarts': max_restarts, 'checkpoint': checkpoint,
            'requeue': earlier < max_restarts}


def read_json_lines(path: str) -> list[dict]:
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    records = []
    with os.fdopen(descriptor, encoding='utf-8') as handle:
        for line in handle:
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    records.append(record)
    return records


# The job shell's helpers ---------------------------------------------------------------------------------

# Dataset staging: a dataset on shared storage copied once per node to node-local scratch ---------------------

DATASETS_DIR = 'datasets'
STAGED_MARKER = '.llmforge-staged.json'
STAGE_CHUNK = 8 << 20
# Room left free on the scratch beyond the dataset itself.
STAGE_MARGIN = 256 << 20


class StageError(Exception):
    """A dataset that cannot be staged; the message names the path or option."""


def dataset_files(source: str) -> list[tuple[str, os.stat_result]]:
    """The regular files under `source` (a file or a directory), sorted by relative path; links are not followed."""
    info = os.stat(source)
    if stat.S_ISREG(info.st_mode):
        return [(os.path.basename(source), info)]
    if not stat.S_ISDIR(info.st_mode):
        raise StageError(f'{source} is neither a file nor a directory')
    found = []
    for folder, dirs, names in os.walk(source):
        dirs.sort()
        for name in names:
            path = os.path.join(folder, name)
            entry = os.lstat(path)
            if stat.S_ISREG(entry.st_mode):
                found.append((os.path.relpath(path, source), entry))
    if not found:
        raise StageError(f'{source} holds no regular files')
    return sorted(found)


def listing_key(source: str, files) -> str:
    """What the source looks like without reading it (paths, sizes, modification times): the cache's index key."""
    text = '\n'.join(f'{name}\0{info.st_size}\0{info.st_mtime_ns}' for name, info in files)
    return hashlib.sha256(f'{os.path.abspath(source)}\n{text}'.encode()).hexdigest()


def copy_hashed(source: str, target: str) -> str:
    """Copy one file, its sha256 taken from the bytes read; the target is fsynced."""
    digest = hashlib.sha256()
    with open(source, 'rb') as reader, open(target, 'wb') as writer:
        while chunk := reader.read(STAGE_CHUNK):
            digest.update(chunk)
            writer.write(chunk)
        writer.flush()
        os.fsync(writer.fileno())
    return digest.hexdigest()


def stage_dataset(source: str, local_root: str, uid: int, expected: str | None = None, statvfs=os.statvfs) -> dict:
    """Stage `source` under LOCAL_ROOT/datasets/<content digest> once per node; a later job finds it there.

    The content digest is the sha256 of the dataset's manifest (one line per file: its sha256, size and relative
    path, sorted). A copy is complete when its marker is there (written last, after the rename). Without `expected`
    (sha256:<hex>), an index by the source's path, sizes and modification times finds an earlier copy without
    reading the source again; with it, a copy of that digest is taken as it is, and a source that does not hash to
    it is refused. Concurrent jobs on one node take turns (a lock per cache).
    """
    cache = prepare_local_dir(local_root, DATASETS_DIR, uid)
    if expected is not None and not re.fullmatch(r'sha256:[0-9a-f]{64}', expected):
        raise StageError(f'--digest {expected!r} is not sha256:<64 hex digits>')
    started = time.monotonic()
    with open(os.path.join(cache, '.lock'), 'a+') as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            files = dataset_files(source)
        except OSError as error:
            raise StageError(f'cannot read the dataset {source}: {error.strerror or error}') from None
        index = os.path.join(cache, f'.index-{listing_key(source, files)}')
        if expected:
            known = expected.split(':', 1)[1]
        elif os.path.isfile(index):
            with open(index, encoding='utf-8') as handle:
                known = handle.read().strip()
        else:
            known = None
        if known and os.path.isfile(os.path.join(cache, known, STAGED_MARKER)):
            path = os.path.join(cache, known)
            size = sum(info.st_size for _name, info in files)
            return {'path': path, 'digest': f'sha256:{known}', 'bytes': size, 'cached': True,
                    'seconds': round(time.monotonic() - started, 3)}
        size = sum(info.st_size for _name, info in files)
        fs = statvfs(cache)
        free = fs.f_bavail * fs.f_frsize
        if free < size + STAGE_MARGIN:
            raise StageError(f'{cache} has {free / GB:.2f} GB free, the dataset {source} needs {size / GB:.2f} GB '
                             f'(and {STAGE_MARGIN >> 20} MiB to spare): free scratch space (earlier datasets are in '
                             f'{cache}) or point --local-dir elsewhere; nothing was copied')
        base = source if os.path.isdir(source) else os.path.dirname(source)
        temporary = os.path.join(cache, f'.tmp-stage-{os.getpid()}')
        shutil.rmtree(temporary, ignore_errors=True)
        try:
            lines = []
            for name, info in files:
                target = os.path.join(temporary, name)
                os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
                lines.append(f'{copy_hashed(os.path.join(base, name), target)}  {info.st_size}  {name}\n')
            manifest = ''.join(lines)
            digest = hashlib.sha256(manifest.encode()).hexdigest()
            if expected and digest != expected.split(':', 1)[1]:
                raise StageError(f'the dataset {source} is sha256:{digest}, not {expected} (--digest): '
                                 'nothing was staged')
            with open(os.path.join(temporary, '.llmforge-manifest'), 'w', encoding='utf-8') as handle:
                handle.write(manifest)
            final = os.path.join(cache, digest)
            if os.path.isdir(final):  # an unmarked leftover of a copy that died before its marker
                shutil.rmtree(final)
            os.rename(temporary, final)
            seconds = time.monotonic() - started
            write_json_atomically(os.path.join(final, STAGED_MARKER),
                                  {'source': os.path.abspath(source), 'bytes': size, 'time': time.time()})
            with open(f'{index}.tmp', 'w', encoding='utf-8') as handle:
                handle.write(digest + '\n')
            os.replace(f'{index}.tmp', index)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
    return {'path': final, 'digest': f'sha256:{digest}', 'bytes': size, 'cached': False,
            'seconds': round(seconds, 3), 'mib_per_s': round(size / (1 << 20) / max(seconds, 1e-6), 1)}


def parse_supervision_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='llmforge-train', description='What the reference job\'s sbatch script asks while the trainer runs and '
        'after it ended (no torch is imported). Exit codes are listed per mode.')
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument('--hang-check', metavar='RUN_DIR',
                      help=f'one JSON line on this job run\'s progress; exit {HUNG_EXIT} hung, {LOST_EXIT} a rank '
                      'failed --lost-grace seconds ago, 0 otherwise')
    mode.add_argument('--stage-dataset', metavar='SOURCE',
                      help=f'copy SOURCE (a file or directory on shared storage) to --local-dir/datasets/<digest> '
                      f'once per node and print one JSON line (path, digest, cached); exit {STAGE_FAILED_EXIT} when '
                      'it cannot (the message says why)')
    mode.add_argument('--dump-stacks', action='store_true',
                      help='the stacks of this job\'s trainer processes on this node into RUN_DIR/stacks '
                      '(py-spy, else SIGUSR2 to the rank)')
    mode.add_argument('--node-verdict', metavar='RUN_DIR',
                      help=f'judge the nodes\' check answers read on stdin; exit 0 all healthy, {NODES_BAD_EXIT} a '
                      f'node unhealthy or silent, {NODES_UNKNOWN_EXIT} no answer at all')
    mode.add_argument('--restart-budget', metavar='RUN_DIR',
                      help=f'record a failed run; exit 0 when it may be requeued, {RESTARTS_SPENT_EXIT} when not')
    parser.add_argument('--run-dir', help='the run directory (--dump-stacks)')
    parser.add_argument('--seconds', type=float, default=300.0, help='hang after this long without progress (0: never)')
    parser.add_argument('--lost-grace', type=float, default=None,
                        help='lost when a rank failed this long ago and the step still runs (default: not checked)')
    parser.add_argument('--report', action='store_true',
                        help='write sightings.jsonl (a hang also goes to the Slurm job comment)')
    parser.add_argument('--nodes', default='', help='the job\'s nodelist (--node-verdict)')
    parser.add_argument('--max-restarts', type=int, default=3, help='failed runs requeued from one checkpoint')
    parser.add_argument('--reason', default='', help='why the run failed (--restart-budget)')
    parser.add_argument('--local-dir', help='the user\'s node-local directory (--stage-dataset)')
    parser.add_argument('--digest', help='the dataset\'s expected content digest, sha256:<hex> (--stage-dataset)')
    args = parser.parse_args(argv)
    if args.dump_stacks and not args.run_dir:
        parser.error('--dump-stacks needs --run-dir')
    if args.stage_dataset and not args.local_dir:
        parser.error('--stage-dataset needs --local-dir')
    return args


def supervise(argv, environ=None) -> int:
    args = parse_supervision_args(argv)
    job_id, restart = job_run(environ)
    if args.dump_stacks:
        dump_stacks(os.path.abspath(args.run_dir), environ, py_spy=find_py_spy())
        return 0
    if args.stage_dataset:
        try:
            staged = stage_dataset(args.stage_dataset, args.local_dir, os.geteuid(), args.digest)
        except (StageError, RefusedRunDir) as error:
            print(f'llmforge-train: {node_name(environ)}: cannot stage the dataset: {error}', file=sys.stderr)
            return STAGE_FAILED_EXIT
        print(json.dumps({'node': node_name(environ), **staged}), flush=True)
        return 0
    if args.hang_check:
        run_dir = args.hang_check
        state = progress_state(heartbeats_of(run_dir, job_id, restart), failures_of(run_dir, job_id, restart),
                               time.time(), args.seconds, args.lost_grace,
                               alive=heartbeats_of(run_dir, job_id, restart, ALIVE_DIR))
        log(json.dumps(state))
        if state['state'] == 'hung':
            if args.report:
                record_sightings(run_dir, [{'kind': 'hang', 'node': state['node'], 'rank': state['rank'],
                                            'step': state['step'], 'phase': state['phase'],
                                            'stopped_seconds': state['stopped_seconds']}], environ)
            return HUNG_EXIT
        return LOST_EXIT if state['state'] == 'lost' else 0
    if args.node_verdict:
        verdict = node_verdict(sys.stdin, hostnames(args.nodes) if args.nodes else [])
        log(json.dumps(verdict))
        if args.report and verdict['verdict'] == 'bad':
            record_sightings(args.node_verdict, [{'kind': 'unhealthy', **entry} for entry in verdict['unhealthy']]
                             + [{'kind': 'lost', 'node': node} for node in verdict['silent']], environ)
        return {'healthy': 0, 'bad': NODES_BAD_EXIT}.get(verdict['verdict'], NODES_UNKNOWN_EXIT)
    return restart_decision(args.restart_budget, args.max_restarts, args.reason, environ)


def restart_decision(run_dir: str, max_restarts: int, reason: str, environ=None) -> int:
    """Print the failed ranks' errors and the budget; record this failure; 0 (requeue) or RESTARTS_SPENT_EXIT."""
    job_id, restart = job_run(environ)
    for failure in sorted(failures_of(run_dir, job_id, restart), key=lambda record: record.get('rank', 0)):
        log(f"rank {failure.get('rank')} on {failure.get('node')} failed: {failure.get('error')}")
    if trusted_dir_problem(run_dir, os.geteuid()):  # the trainer never got as far as its run directory
        decision = {'failures': restart, 'max_restarts': max_restarts, 'checkpoint': None,
                    'requeue': restart < max_restarts, 'counted_by': 'SLURM_RESTART_COUNT'}
    else:
        path = os.path.join(run_dir, RESTARTS)
        decision = restart_budget(read_json_lines(path), job_id, newest_checkpoint(run_dir), max_restarts)
        with contextlib.suppress(OSError):
            append_json_line(path, {'time': time.time(), 'job_id': job_id, 'restart': restart, 'reason': reason,
                                    'checkpoint': decision['checkpoint'], 'requeued': decision['requeue']})
    log(json.dumps(decision))
    return 0 if decision['requeue'] else RESTARTS_SPENT_EXIT


# Model and data ----------------------------------------------------------------------------------

class TinyGPT(torch.nn.Module if torch else object):
    """Token + position embeddings, pre-norm causal transformer blocks, a linear head."""

    def __init__(self, vocab_size: int, d_model: int, heads: int, layers: int, seq_len: int):
        super().__init__()
        self.tokens = torch.nn.Embedding(vocab_size, d_model)
        self.positions = torch.nn.Embedding(seq_len, d_model)
        block = torch.nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, activation='gelu',
                                                 batch_first=True, norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = torch.nn.LayerNorm(d_model)
        self.head = torch.nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        length = tokens.shape[1]
        hidden = self.tokens(tokens) + self.positions(torch.arange(length, device=tokens.device))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(length, device=tokens.device)
        return self.head(self.norm(self.blocks(hidden, mask=mask, is_causal=True)))


def markov_successors(vocab_size: int, seed: int):
    """The fixed sparse Markov chain the data comes from: row t lists the possible successors of token t."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab_size, (vocab_size, len(MARKOV_BRANCH_WEIGHTS)), generator=generator)


def synthetic_batch(successors, seed: int, step: int, rank: int, batch_size: int, seq_len: int):
    """Inputs and targets; a function of (seed, step, rank) only, so a resumed run sees the same data."""
    digest = hashlib.sha256(f'{seed}:{step}:{rank}'.encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], 'little') >> 1)
    branches = torch.multinomial(torch.tensor(MARKOV_BRANCH_WEIGHTS), batch_size * seq_len, replacement=True,
                                 generator=generator).view(batch_size, seq_len)
    tokens = torch.empty(batch_size, seq_len + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, successors.shape[0], (batch_size,), generator=generator)
    for position in range(seq_len):
        tokens[:, position + 1] = successors[tokens[:, position], branches[:, position]]
    return tokens[:, :-1], tokens[:, 1:]


def token_data(directory: str, vocab_size: int):
    """A staged dataset's tokens: every *.bin file under DIRECTORY (uint16, little-endian), in path order, as one tensor."""
    import numpy  # present wherever torch.distributed.checkpoint works (main() checks)
    paths = sorted(path for path in glob.glob(os.path.join(directory, '**', '*.bin'), recursive=True)
                   if stat.S_ISREG(os.lstat(path).st_mode))
    if not paths:
        raise SystemExit(f'--data {directory}: no *.bin token files (uint16, little-endian) under it')
    tokens = torch.from_numpy(numpy.concatenate([numpy.fromfile(path, dtype='<u2') for path in paths]).astype('int64'))
    if tokens.numel() < 2 or int(tokens.max()) >= vocab_size:
        raise SystemExit(f'--data {directory}: {tokens.numel()} tokens, the largest {int(tokens.max()) if tokens.numel() else 0}; '
                         f'a dataset needs at least 2 tokens, each below --vocab-size {vocab_size}')
    return tokens


def data_batch(tokens, seed: int, step: int, rank: int, batch_size: int, seq_len: int):
    """Inputs and targets: windows of the dataset at places that are a function of (seed, step, rank) only."""
    digest = hashlib.sha256(f'{seed}:{step}:{rank}'.encode()).digest()
    generator = torch.Generator().manual_seed(int.from_bytes(digest[:8], 'little') >> 1)
    span = min(seq_len, tokens.numel() - 1)
    starts = torch.randint(0, tokens.numel() - span, (batch_size,), generator=generator)
    windows = torch.stack([tokens[start:start + span + 1] for start in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


# Training ----------------------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog='llmforge-train', description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--run-dir', required=True, help='checkpoints go to RUN_DIR/step_%%08d')
    parser.add_argument('--new-run-dir', action='store_true',
                        help='RUN_DIR must not exist yet: it is made exclusively (never resume from what was there)')
    parser.add_argument('--steps', type=int, default=200, help='target step (steps are numbered 1..N)')
    parser.add_argument('--ckpt-every-steps', type=int, default=50, help='0 turns step-based checkpoints off')
    parser.add_argument('--ckpt-every-minutes', type=float, default=0.0, help='0 turns time-based checkpoints off')
    for option, default in (('--layers', 2), ('--d-model', 128), ('--heads', 4), ('--seq-len', 64), ('--vocab-size', 256)):
        parser.add_argument(option, type=int, default=default)
    parser.add_argument('--batch-size', type=int, default=8, help='sequences per rank and step')
    parser.add_argument('--lr', type=float, default=3e-3)
    parser.add_argument('--seed', type=int, default=1234)
    parser.add_argument('--data', metavar='DIR',
                        help='train on the token files (*.bin, uint16) under DIR, e.g. a dataset the job staged on '
                        'the node (LLMFORGE_DATASET); default: synthetic tokens')
    for option, choices in (('--strategy', ('ddp', 'fsdp')), ('--device', ('auto', 'cpu', 'cuda')),
                            ('--backend', ('auto', 'nccl', 'gloo')), ('--precision', ('auto', 'bf16', 'fp32'))):
        parser.add_argument(option, choices=choices, default=choices[0])
    parser.add_argument('--log-every', type=int, default=10)
    parser.add_argument('--summary', help='write a JSON summary of this run here (rank 0)')
    parser.add_argument('--straggler-factor', type=float, default=1.5,
                        help="a rank whose step compute time exceeds this times the other ranks' median is slow")
    parser.add_argument('--straggler-steps', type=int, default=20,
                        help='slow this many steps in a row: reported as a straggler (0 turns the check off)')
    parser.add_argument('--step-log-bytes', type=int, default=STEP_LOG_BYTES,
                        help='RUN_DIR/steps/rank-<r>.jsonl is rotated to .1 at this size (0: never)')
    tier = parser.add_argument_group('node-local checkpoint tier', 'checkpoints written to the node first, the '
                                     'training loop going on while they are copied to RUN_DIR')
    tier.add_argument('--local-dir', metavar='DIR',
                      help='write each checkpoint to DIR/llmforge-train-<job>/ on this node (node-local scratch), then '
                      'copy it to RUN_DIR in the background (default: straight to RUN_DIR)')
    tier.add_argument('--local-min-free-gb', type=float, default=None, metavar='GB',
                      help="refuse to start when DIR's file system has less free space (GB, 10^9 bytes; default twice "
                      "the checkpoint's size: the model's parameters and AdamW's two moments; 0: no check)")
    tier.add_argument('--local-drain-seconds', type=float, default=300.0, metavar='SECONDS',
                      help='before leaving, wait at most this long for the copy in flight to be committed (default '
                      '300; keep it within the time sbatch --signal leaves before the time limit)')
    drills = parser.add_argument_group('drills', 'faults on purpose, to see the job heal itself')
    drills.add_argument('--drill-slow-rank', type=int, default=-1, help='this rank sleeps in every step...')
    drills.add_argument('--drill-slow-seconds', type=float, default=0.0, help='...this long: a straggler')
    drills.add_argument('--drill-hang-rank', type=int, default=-1, help='this rank stops for good...')
    drills.add_argument('--drill-hang-step', type=int, default=0, help='...at the start of this step: a hang')
    drills.add_argument('--drill-copy-mbps', type=float, default=0.0, metavar='MBPS',
                        help='copy checkpoints from --local-dir to RUN_DIR at most this fast (MB/s): a slow shared '
                        'file system')
    parser.epilog = ('The job shell\'s helpers (--hang-check, --dump-stacks, --node-verdict, --restart-budget): '
                     'llmforge-train --hang-check . --help.')
    args = parser.parse_args(argv)
    if args.straggler_factor <= 1 or args.straggler_steps < 0 or args.step_log_bytes < 0:
        parser.error('--straggler-factor must be above 1, --straggler-steps and --step-log-bytes 0 or more')
    if min(args.local_min_free_gb or 0, args.local_drain_seconds, args.drill_copy_mbps) < 0:
        parser.error('--local-min-free-gb, --local-drain-seconds and --drill-copy-mbps must be 0 or more')
    if not args.local_dir and (args.local_min_free_gb is not None or args.drill_copy_mbps):
        parser.error('--local-min-free-gb and --drill-copy-mbps need --local-dir')
    return args


def drill(args, rank: int, step: int) -> None:
    """The faults --drill-* ask for, where a real one would strike: in the rank's own work before its forward pass."""
    if rank == args.drill_slow_rank and args.drill_slow_seconds > 0:
        time.sleep(args.drill_slow_seconds)
    if rank == args.drill_hang_rank and step == args.drill_hang_step:
        log(f'drill: rank {rank} hangs at step {step}')
        while True:
            time.sleep(3600)


class ForwardTimer:
    """Seconds of a forward pass on this rank's device (CUDA events: read them after the step's sync, no extra wait)."""

    def __init__(self, device):
        self.cuda = device.type == 'cuda'

    def __enter__(self):
        if self.cuda:
            self.begin, self.end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self.begin.record()
        else:
            self.begin = time.perf_counter()
        return self

    def __exit__(self, *_exc):
        if self.cuda:
            self.end.record()
        else:
            self.end = time.perf_counter()

    def seconds(self) -> float:
        return self.begin.elapsed_time(self.end) / 1000 if self.cuda else self.end - self.begin


def init_distributed(env: dict, backend: str, device) -> None:
    if env['world_size'] == 1:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, device_id=device)
        return
    os.environ.update(RANK=str(env['rank']), WORLD_SIZE=str(env['world_size']),
                      MASTER_ADDR=env['master_addr'], MASTER_PORT=str(env['master_port']))
    if 'USE_LIBUV' not in os.environ:
        try:  # some distribution builds (Debian's torch 2.6) lack libuv, the default store backend
            dist.TCPStore('127.0.0.1', 0, 1, True, use_libuv=True, wait_for_workers=False)
        except Exception:  # noqa: BLE001 - whatever the probe's failure, the older store backend works
            os.environ['USE_LIBUV'] = '0'
    dist.init_process_group(backend, init_method='env://', device_id=device)


def wrap_model(model, strategy: str, device):
    if strategy == 'fsdp':
        from torch.distributed.fsdp import FullyShardedDataParallel
        # FSDP's state-dict code warns about its own internals at every checkpoint; users cannot act on it.
        warnings.filterwarnings('ignore', message='.*(ShardedTensor|_get_pg_default_device|Multiple backends)')
        return FullyShardedDataParallel(model, device_id=device, use_orig_params=True)
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == 'cuda' else None)


class Trainer:
    """One rank of the run: setup, resume, the step loop with its checkpoints, the summary."""

    def __init__(self, args, env: dict):
        self.args, self.env = args, env
        self.rank, self.world = env['rank'], env['world_size']
        self.say = log if self.rank == 0 else (lambda message: None)
        use_cuda = args.device == 'cuda' or (args.device == 'auto' and torch.cuda.is_available())
        if use_cuda:
            torch.cuda.set_device(env['local_rank'] % torch.cuda.device_count())
            self.device = torch.device('cuda', torch.cuda.current_device())
        else:
            self.device = torch.device('cpu')
        self.backend = args.backend if args.backend != 'auto' else ('nccl' if use_cuda else 'gloo')
        self.precision = args.precision if args.precision != 'auto' else ('bf16' if use_cuda else 'fp32')
        self.checkpoints = []
        self.tier = LOCAL_TIER if args.local_dir else DIRECT_TIER
        self.local = self.local_rank_dir = None  # this job's directory on the node, and this rank's in it
        self.copy = None  # the CheckpointCopy of the last local checkpoint
        self.records = None  # RankRecords, once the run directory is ready
        self.stragglers = StragglerDetector(args.straggler_factor, args.straggler_steps)
        self.sightings = []

    @property
    def stop_requested(self) -> bool:
        return bool(STOPS_RECEIVED)

    def setup(self) -> None:
        for signum in STOP_SIGNALS:  # already in place when run as a program; needed when imported
            signal.signal(signum, remember_stop)
        init_distributed(self.env, self.backend, self.device if self.device.type == 'cuda' else None)
        shared = [f"{self.env['job_id'] or 'local'}-{secrets.token_hex(3)}"]
        dist.broadcast_object_list(shared, src=0)  # every rank must write into the same temporary directory
        self.token = shared[0]
        names = [None] * self.world
        dist.all_gather_object(names, (socket.gethostname(), node_name()))
        self.hosts, self.nodes = [host for host, _node in names], [node for _host, node in names]
        os.umask(os.umask(0o022) | 0o022)  # checkpoints group- or world-writable would be refused on resume
        refused = [None]
        if self.rank == 0:
            try:
                run_dir = prepare_run_dir(self.args.run_dir, os.geteuid(), new=self.args.new_run_dir)
                for name in SUPERVISION_DIRS:
                    private_dir(os.path.join(run_dir, name), os.geteuid())
            except RefusedRunDir as error:
                refused[0] = str(error)
        dist.broadcast_object_list(refused, src=0)  # every rank stops, none waits in a collective for rank 0
        if refused[0]:  # every rank leaves at once (os._exit): tearing gloo down here can block on a peer
            raise RefusedRunDir(refused[0])
        self.records = RankRecords(self.args.run_dir, self.rank, step_log_bytes=self.args.step_log_bytes)
        self.records.keep_alive()
        self.build()
        if self.args.local_dir:
            self.prepare_local()

    def prepare_local(self) -> None:
        """The job's directory on each node: trusted, emptied of an earlier run's files, with room for a checkpoint.

        Every rank checks its node before any training; a problem on one node stops every rank with its message.
        """
        problem = None
        try:
            self.local = prepare_local_dir(self.args.local_dir, LOCAL_JOB_PREFIX + (self.env['job_id'] or self.token),
                                           os.geteuid())
        except RefusedRunDir as error:
            problem = str(error)
        self.agree_on(problem)
        if self.hosts.index(self.hosts[self.rank]) == self.rank:  # the node's first rank: an earlier run's leftovers
            for name in empty_dir(self.local):
                log(f'removed the local leftover {os.path.join(self.local, name)}')
        dist.barrier()
        if self.args.local_min_free_gb is None:
            bound, why = 2 * self.checkpoint_bytes, "the default, twice this run's checkpoint"
        else:
            bound, why = int(self.args.local_min_free_gb * GB), 'as given'
        problem = free_space_problem(self.local, bound, why)
        if problem:
            with contextlib.suppress(OSError):  # the empty directory this run made; another rank may do it first
                os.rmdir(self.local)
        self.agree_on(problem)
        self.local_rank_dir = private_dir(os.path.join(self.local, f'rank-{self.rank}'), os.geteuid(), RefusedLocalDir)

    def agree_on(self, problem: str | None) -> None:
        """Every rank raises RefusedLocalDir with the first rank's problem, or none does."""
        problems = [None] * self.world
        dist.all_gather_object(problems, problem)
        failed = [(rank, found) for rank, found in enumerate(problems) if found]
        if failed:
            rank, found = failed[0]
            raise RefusedLocalDir(found if self.world == 1 else f'rank {rank} on {self.nodes[rank]}: {found}')

    def build(self) -> None:
        a = self.args
        torch.manual_seed(a.seed)
        model = TinyGPT(a.vocab_size, a.d_model, a.heads, a.layers, a.seq_len).to(self.device)
        # What a checkpoint holds, for the local tier's free-space check: the parameters and AdamW's two moments.
        self.checkpoint_bytes = 3 * sum(parameter.numel() * parameter.element_size()
                                        for parameter in model.parameters())
        self.model = wrap_model(model, a.strategy, self.device)
        self.step_now, self.reduced_at = 0, -1
        if a.strategy == 'ddp':
            self.model.register_comm_hook(None, self.gradient_allreduce)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=a.lr)

    def gradient_allreduce(self, state, bucket):
        """DDP's own all-reduce of a gradient bucket, with a heartbeat as the rank reaches the step's first one: of
        ranks stuck in the same step's backward, the one that never got here is the one that stopped."""
        if self.reduced_at != self.step_now:
            self.reduced_at = self.step_now
            self.records.beat(self.step_now, 'allreduce')
        return allreduce_hook(state, bucket)

    def state(self) -> dict:
        model_state, optimizer_state = get_state_dict(self.model, self.optimizer)
        return {'model': model_state, 'optimizer': optimizer_state}

    def load(self, path: str) -> None:
        state = self.state()
        try:
            dcp.load(state, storage_reader=dcp.FileSystemReader(path))
        except CheckpointException as error:  # a BaseException carrying every failed rank's traceback: shorten
            rank, (failure, _traceback) = min(error.failures.items())
            raise RuntimeError(f'rank {rank}: {type(failure).__name__}: {failure}') from None
        set_state_dict(self.model, self.optimizer, model_state_dict=state['model'], optim_state_dict=state['optimizer'])

    def save(self, step: int) -> None:
        started = time.perf_counter()
        self.records.beat(step, 'checkpoint')
        final = os.path.join(self.args.run_dir, f'step_{step:08d}')
        tmp = os.path.join(self.args.run_dir, f'{TMP_PREFIX}{step:08d}-{self.token}')
        if self.local:
            self.save_local(step, started, tmp, final)
            return
        dcp.save(self.state(), storage_writer=dcp.FileSystemWriter(tmp))
        dist.barrier()  # every rank's shard files are written and synced
        record = None
        if self.rank == 0:
            write_json_atomically(os.path.join(tmp, MARKER), {'step': step, 'world_size': self.world,
                                                              'time': time.time(), 'job_id': self.env['job_id']})
            fsync_path(tmp)
            commit_checkpoint(tmp, final)
            seconds = round(time.perf_counter() - started, 4)
            record = {'step': step, 'seconds': seconds, 'bytes': tree_bytes(final), 'path': final, 'tier': DIRECT_TIER,
                      'stall_s': seconds, 'commit_s': seconds}
            self.checkpoints.append(record)
            log(f"checkpoint step={step} seconds={record['seconds']:.3f} bytes={record['bytes']} path={final}")
        dist.barrier()
        if record:
            record['stall_s'] = round(time.perf_counter() - started, 4)
        self.last_checkpoint_time = time.monotonic()

    def save_local(self, step: int, started: float, tmp: str, final: str) -> None:
        """Write the checkpoint to the node, start its copy to the run directory and go back to training.

        The last copy must be over first: one copy at a time, commits in step order. The local files are not fsynced:
        they are worth nothing after a crash of the node (resume reads the run directory only); the copy fsyncs.
        """
        waited = 0.0
        if self.copy is not None and not self.copy.done.is_set():
            self.say(f'checkpoint step={step}: waiting for the copy of step {self.copy.step} to the run directory')
            waited = self.wait_for_copy()[1]
            self.say(f'checkpoint step={step}: waited {waited:.3f}s for the copy of step {self.copy.step}')
        local = os.path.join(self.local_rank_dir, f'step_{step:08d}')
        dcp.save(self.state(), storage_writer=dcp.FileSystemWriter(local, sync_files=False))
        # dcp.save returns once every rank's files and rank 0's .metadata are written: this rank's part is whole.
        stall = time.perf_counter() - started
        record = None
        if self.rank == 0:
            record = {'step': step, 'seconds': None, 'bytes': None, 'path': final, 'tier': LOCAL_TIER,
                      'stall_s': round(stall, 4), 'wait_s': round(waited, 4), 'commit_s': None, 'copy_s': None,
                      'committed': False}
            self.checkpoints.append(record)
            log(f'local checkpoint step={step} stall_s={stall:.3f} wait_s={waited:.3f} path={local}')
        self.copy = CheckpointCopy(
            step, local, tmp, final, self.rank, self.world, save_started=started, record=record,
            marker={'step': step, 'world_size': self.world, 'job_id': self.env['job_id'], 'tier': LOCAL_TIER},
            throttle_bps=self.args.drill_copy_mbps * 1e6, say=self.say).start()
        self.last_checkpoint_time = time.monotonic()

    def wait_for_copy(self, limit: float | None = None) -> tuple[bool, float]:
        """Wait for the copy in flight, at most `limit` seconds; (whether it is over, seconds waited).

        A heartbeat whenever the copy moved on: the job shell must not take a long copy for a hang, but may a stuck one.
        """
        copy, started = self.copy, time.monotonic()
        seen = copy.progress()
        while True:
            left = None if limit is None else limit - (time.monotonic() - started)
            if copy.done.wait(COPY_WAIT_SECONDS if left is None else max(0.0, min(left, COPY_WAIT_SECONDS))):
                return True, time.monotonic() - started
            if left is not None and left <= COPY_WAIT_SECONDS:
                return copy.done.is_set(), time.monotonic() - started
            if copy.progress() != seen:
                seen = copy.progress()
                self.records.beat(self.step_now, 'checkpoint')

    def finish_copies(self) -> bool:
        """Before leaving: wait (at most --local-drain-seconds) for the copy in flight, then remove the local
        directories; whether this rank's part of every checkpoint made it (rank 0: was committed)."""
        copy = self.copy
        if copy is not None and not copy.done.is_set():
            limit = self.args.local_drain_seconds
            self.say(f'waiting up to {limit:g}s for the copy of step {copy.step} to be committed')
            if not self.wait_for_copy(limit)[0]:
                copy.cancel()
                copy.done.wait(COPY_CANCEL_SECONDS)
                log(f'{"" if self.rank == 0 else f"rank {self.rank}: "}checkpoint step={copy.step} not committed: '
                    f'the copy to the run directory took more than --local-drain-seconds {limit:g}; the next run '
                    'resumes from the newest committed checkpoint')
        if self.local_rank_dir:
            shutil.rmtree(self.local_rank_dir, ignore_errors=True)
            with contextlib.suppress(OSError):  # the node's last rank to leave removes it
                os.rmdir(self.local)
        return copy is None or copy.outcome in ('committed', 'copied')

    def resume(self) -> tuple[int, str | None, float | None]:
        """(step, path, load seconds) of the checkpoint resumed from, or (0, None, None)."""
        shared = [[]]
        if self.rank == 0:
            for name in remove_leftovers(self.args.run_dir):
                log(f'removed interrupted checkpoint write {name}')
            shared[0], skipped = discover_checkpoints(self.args.run_dir)
            for name, reason in skipped:
                log(f'checkpoint skipped path={os.path.join(self.args.run_dir, name)} reason={reason}')
        dist.broadcast_object_list(shared, src=0)  # one listing for all ranks, whatever their filesystem cache
        # DCP raises on every rank when any rank fails, so all ranks walk the list in step.
        chosen = first_loadable(shared[0], self.load, self.say)
        if chosen is None:
            if shared[0]:
                self.build()  # a failed load may have overwritten part of the state
            self.say('starting fresh')
            return 0, None, None
        self.say(f'resumed step={chosen[0]} from={chosen[1]} seconds={chosen[2]:.3f}')
        return chosen

    def train(self, first_step: int) -> tuple[int, str, list[float], list[float]]:
        """Steps first_step..target; (last step, exit reason, losses, step times)."""
        a = self.args
        successors = markov_successors(a.vocab_size, a.seed)
        dataset = token_data(a.data, a.vocab_size) if a.data else None
        if dataset is not None and self.rank == 0:
            log(f'data {a.data}: {dataset.numel()} tokens')
        autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if self.precision == 'bf16'
                    else contextlib.nullcontext())
        tokens_per_step = a.batch_size * a.seq_len * self.world
        losses, step_times, step = [], [], first_step - 1
        self.last_checkpoint_time = time.monotonic()
        for step in range(first_step, a.steps + 1):
            started = time.perf_counter()
            # A heartbeat at each phase: a rank stuck before the others' next collective is the one behind.
            self.step_now = step
            self.records.beat(step, 'forward')
            drill(a, self.rank, step)
            if dataset is None:
                inputs, targets = synthetic_batch(successors, a.seed, step, self.rank, a.batch_size, a.seq_len)
            else:
                inputs, targets = data_batch(dataset, a.seed, step, self.rank, a.batch_size, a.seq_len)
            prepared = time.perf_counter() - started
            with ForwardTimer(self.device) as forward:
                with autocast:
                    logits = self.model(inputs.to(self.device))
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.to(self.device).flatten())
            self.records.beat(step, 'backward')
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            self.records.beat(step, 'sync')
            minutes = (time.monotonic() - self.last_checkpoint_time) / 60
            time_due = 0 < a.ckpt_every_minutes <= minutes
            loss_value = loss.item()  # waits for this rank's device, so the forward timer can be read
            compute = prepared + forward.seconds()  # the rank's own work, no collective in it: where slowness shows
            # One small all-gather per step: every rank's loss, whether it was signalled or is due to save, its compute.
            mine = torch.tensor([loss_value, self.stop_requested, time_due, compute], dtype=torch.float64,
                                device=self.device)
            gathered = [torch.empty_like(mine) for _rank in range(self.world)]
            dist.all_gather(gathered, mine)
            table = torch.stack(gathered).cpu()
            loss_sum, signalled, due = table[:, :3].sum(dim=0).tolist()
            step_times.append(time.perf_counter() - started)
            losses.append(loss_sum / self.world)
            self.records.step_done(step, step_times[-1], compute)
            if self.rank == 0:
                self.watch_stragglers(table[:, 3].tolist())
            if step in (first_step, a.steps) or step % max(a.log_every, 1) == 0:
                self.say(f'step={step} loss={losses[-1]:.4f} tokens_per_s={tokens_per_step / step_times[-1]:.1f} '
                         f'step_time_s={step_times[-1]:.4f}')
            stopping = signalled > 0 and step < a.steps
            if step == a.steps or (a.ckpt_every_steps > 0 and step % a.ckpt_every_steps == 0) or due > 0 or stopping:
                self.save(step)
            if stopping:
                self.say(f'signal: checkpointed at step {step}, exiting for requeue')
                return step, 'signal', losses, step_times
        return step, 'target', losses, step_times

    def watch_stragglers(self, computes: list[float]) -> None:
        """Rank 0: note and report the ranks that have been slow for --straggler-steps steps (once a node)."""
        found = [{**sighting, 'time': time.time()} for sighting in self.stragglers.observe(computes, self.nodes)]
        for sighting in found:
            log(f"straggler: rank {sighting['rank']} on {sighting['node']} took x{sighting['factor']} the other ranks' "
                f"median compute time for {sighting['steps']} steps")
        if found:
            self.sightings.extend(found)
            # scontrol may take seconds at scale: the step loop does not wait for it.
            threading.Thread(target=record_sightings, args=(self.args.run_dir, found), daemon=True).start()

    def record_failure(self, error: str) -> None:
        if self.records:
            self.records.failed(error)

    def summary(self, resumed, last_step, exit_reason, losses, step_times) -> dict:
        a = self.args
        timed = step_times[2:] if len(step_times) > 4 else step_times
        step_time = statistics.median(timed) if timed else None
        return {
            'job_id': self.env['job_id'], 'restart_count': self.env['restart_count'], 'world_size': self.world,
            'nodes': sorted(set(self.hosts)), 'device': str(self.device), 'precision': self.precision,
            'strategy': a.strategy, 'torch_version': torch.__version__, 'python_version': sys.version.split()[0],
            'first_step': resumed[0] + 1 if losses else None, 'last_step': last_step, 'target_steps': a.steps,
            'resumed_step': resumed[0], 'resumed_from': resumed[1], 'checkpoint_load_seconds': resumed[2],
            'loss_first': losses[0] if losses else None, 'loss_last': losses[-1] if losses else None,
            'tokens_per_s': a.batch_size * a.seq_len * self.world / step_time if step_time else None,
            'step_time_s': step_time, 'checkpoints': [dict(record) for record in self.checkpoints],
            'exit_reason': exit_reason, 'stragglers': self.sightings, 'checkpoint_tier': self.tier,
            'local_dir': self.local,
        }

    def run(self) -> int:
        self.setup()
        resumed = self.resume()
        last_step, exit_reason, losses, step_times = self.train(resumed[0] + 1)
        committed = self.finish_copies()
        if self.local:
            verdict = [committed]
            dist.broadcast_object_list(verdict, src=0)  # rank 0 alone knows whether the commit was done
            committed = verdict[0]
        if not committed and exit_reason == 'target':
            self.say(f'target step {last_step} reached, its checkpoint not committed: exiting for requeue')
        if self.rank == 0:
            summary = self.summary(resumed, last_step, exit_reason, losses, step_times)
            if self.args.summary:
                write_json_atomically(self.args.summary, summary)
            log('summary ' + json.dumps(summary))
        dist.barrier()  # ranks leave together, leaving srun --kill-on-bad-exit as little as possible to kill
        dist.destroy_process_group()
        return REQUEUE_EXIT if exit_reason == 'signal' or not committed else 0


def main(argv=None, leave_at_once=False) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if is_supervision(argv):
        return supervise(argv)
    args = parse_args(argv)
    if torch is None:
        raise SystemExit('llmforge-train needs torch, which this Python cannot import')
    if importlib.util.find_spec('numpy') is None:  # torch.distributed's object collectives (DCP uses them) need it
        raise SystemExit('llmforge-train needs numpy next to torch: torch.distributed.checkpoint cannot work without it')
    # Debian's torch 2.6 checkpoint writer calls a deprecated storage API at every save; nothing a user can act on.
    warnings.filterwarnings('ignore', message='TypedStorage is deprecated')
    if args.steps < 1:
        raise SystemExit('--steps must be at least 1')
    faulthandler.enable(all_threads=True)  # a rank killed by SIGSEGV or SIGABRT (a CUDA fault) shows where it was
    allow_stack_readers()
    trainer = Trainer(args, rendezvous(os.environ))
    if leave_at_once:
        try:
            code = trainer.run()
        except RefusedRunDir as error:
            print(f'llmforge-train: refusing {refused_what(error)}: {error}', file=sys.stderr)
            code = REFUSED_EXIT
        except BaseException:  # noqa: BLE001 - reported as Python would, then the same exit without destructors
            error = traceback.format_exc()
            print(error, file=sys.stderr, end='')
            trainer.record_failure(error)  # the job shell reads it: a step that does not end now waits for a lost node
            with contextlib.suppress(Exception):
                trainer.finish_copies()  # what was saved before the error still reaches the run directory
            code = 1
        leave(code)
    try:
        return trainer.run()
    except RefusedRunDir as error:
        raise SystemExit(f'llmforge-train: refusing {refused_what(error)}: {error}') from None
    except BaseException:
        trainer.finish_copies()
        raise


def refused_what(error: RefusedRunDir) -> str:
    return 'the local checkpoint directory' if isinstance(error, RefusedLocalDir) else 'the run directory'


def leave(code: int) -> NoReturn:
    """End the process now: flush the output, skip the destructors of torch's objects.

    Everything is saved and the process group destroyed by now (or the run failed). What is left is freeing the
    model, whose DistributedDataParallel reducer holds the last reference to the gloo process group. Its C++
    destructor joins gloo's worker threads while the main thread holds the GIL, and a worker still dropping the
    last finished barrier's tensors needs the GIL to do so: both wait for ever, a race a busy node loses (torch
    2.13 on Debian 12: the job stayed RUNNING after its summary, one rank blocked in ProcessGroupGloo's destructor).
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


if __name__ == '__main__':
    sys.exit(main(leave_at_once=True))
