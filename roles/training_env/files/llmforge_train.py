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

A checkpoint's metadata is a pickle: loading it runs whatever code it names. So the run directory is a trust
boundary. It is made 0700 when it does not exist (with --new-run-dir it must not exist: made exclusively); a run
directory that is a symbolic link, is not owned by this process's user or is writable by group or others is
refused (exit 2), and so is one below a directory that another user could rename it in (not owned by root or this
user, or writable by others without the sticky bit). A step_* entry that is a link, belongs to another user or is
group- or world-writable, or holds such a file, is passed over with the reason.

Exit codes: 0 target step reached; 3 (REQUEUE_EXIT) stopped by SIGUSR1/SIGTERM after a checkpoint, requeue
the job to continue; 2 (REFUSED_EXIT) the run directory was refused (the message says why); anything else is an
error.
"""

from __future__ import annotations

import argparse
import contextlib
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


if __name__ == '__main__':
    for _signum in STOP_SIGNALS:
        signal.signal(_signum, remember_stop)

try:
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
except ImportError:  # the launch and checkpoint-discovery helpers stay usable (and testable) without torch
    torch = None

REQUEUE_EXIT = 3
REFUSED_EXIT = 2
MARKER = 'llmforge-complete.json'
CHECKPOINT_NAME = re.compile(r'step_(?P<step>[0-9]+)')
TMP_PREFIX = '.tmp-step_'
MARKOV_BRANCH_WEIGHTS = (0.6, 0.25, 0.1, 0.05)  # each token has 4 possible successors: ~1 nat of entropy


def log(message: str) -> None:
    print(message, flush=True)


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


def first_host(nodelist: str) -> str:
    """The first host of a nodelist: scontrol's own expansion when it is installed, else ours."""
    if shutil.which('scontrol'):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            result = subprocess.run(['scontrol', 'show', 'hostnames', nodelist], capture_output=True,
                                    text=True, timeout=30, check=True)
            if result.stdout.split():
                return result.stdout.split()[0]
    return expand_nodelist(nodelist)[0]


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


def ancestor_problem(directory: str, uid: int) -> str | None:
    """Why the directories above a run could let another user swap it, or None (like OpenSSH's StrictModes)."""
    path = os.path.realpath(directory)
    while True:
        info = os.stat(path)
        if info.st_uid not in (0, uid):
            return f'{path} (above the run directory) is owned by uid {info.st_uid}, neither root nor {uid}'
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return (f'{path} (above the run directory) is writable by group or others without the sticky bit '
                    f'(mode {stat.S_IMODE(info.st_mode):04o}): another user could replace the run directory')
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
    for option, choices in (('--strategy', ('ddp', 'fsdp')), ('--device', ('auto', 'cpu', 'cuda')),
                            ('--backend', ('auto', 'nccl', 'gloo')), ('--precision', ('auto', 'bf16', 'fp32'))):
        parser.add_argument(option, choices=choices, default=choices[0])
    parser.add_argument('--log-every', type=int, default=10)
    parser.add_argument('--summary', help='write a JSON summary of this run here (rank 0)')
    return parser.parse_args(argv)


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
        self.hosts = [None] * self.world
        dist.all_gather_object(self.hosts, socket.gethostname())
        os.umask(os.umask(0o022) | 0o022)  # checkpoints group- or world-writable would be refused on resume
        refused = [None]
        if self.rank == 0:
            try:
                prepare_run_dir(self.args.run_dir, os.geteuid(), new=self.args.new_run_dir)
            except RefusedRunDir as error:
                refused[0] = str(error)
        dist.broadcast_object_list(refused, src=0)  # every rank stops, none waits in a collective for rank 0
        if refused[0]:  # every rank leaves at once (os._exit): tearing gloo down here can block on a peer
            raise RefusedRunDir(refused[0])
        self.build()

    def build(self) -> None:
        a = self.args
        torch.manual_seed(a.seed)
        model = TinyGPT(a.vocab_size, a.d_model, a.heads, a.layers, a.seq_len).to(self.device)
        self.model = wrap_model(model, a.strategy, self.device)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=a.lr)

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
        final = os.path.join(self.args.run_dir, f'step_{step:08d}')
        tmp = os.path.join(self.args.run_dir, f'{TMP_PREFIX}{step:08d}-{self.token}')
        dcp.save(self.state(), storage_writer=dcp.FileSystemWriter(tmp))
        dist.barrier()  # every rank's shard files are written and synced
        if self.rank == 0:
            write_json_atomically(os.path.join(tmp, MARKER), {'step': step, 'world_size': self.world,
                                                              'time': time.time(), 'job_id': self.env['job_id']})
            fsync_path(tmp)
            commit_checkpoint(tmp, final)
            record = {'step': step, 'seconds': round(time.perf_counter() - started, 4),
                      'bytes': tree_bytes(final), 'path': final}
            self.checkpoints.append(record)
            log(f"checkpoint step={step} seconds={record['seconds']:.3f} bytes={record['bytes']} path={final}")
        dist.barrier()
        self.last_checkpoint_time = time.monotonic()

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
        autocast = (torch.autocast(self.device.type, dtype=torch.bfloat16) if self.precision == 'bf16'
                    else contextlib.nullcontext())
        tokens_per_step = a.batch_size * a.seq_len * self.world
        losses, step_times, step = [], [], first_step - 1
        self.last_checkpoint_time = time.monotonic()
        for step in range(first_step, a.steps + 1):
            started = time.perf_counter()
            inputs, targets = synthetic_batch(successors, a.seed, step, self.rank, a.batch_size, a.seq_len)
            with autocast:
                logits = self.model(inputs.to(self.device))
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), targets.to(self.device).flatten())
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
            minutes = (time.monotonic() - self.last_checkpoint_time) / 60
            time_due = 0 < a.ckpt_every_minutes <= minutes
            # One small all-reduce per step: the mean loss, and whether any rank was signalled or is due to save.
            shared = torch.tensor([loss.item(), self.stop_requested, time_due], dtype=torch.float64, device=self.device)
            dist.all_reduce(shared)
            loss_sum, signalled, due = shared.tolist()
            step_times.append(time.perf_counter() - started)
            losses.append(loss_sum / self.world)
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
            'step_time_s': step_time, 'checkpoints': self.checkpoints, 'exit_reason': exit_reason,
        }

    def run(self) -> int:
        self.setup()
        resumed = self.resume()
        last_step, exit_reason, losses, step_times = self.train(resumed[0] + 1)
        if self.rank == 0:
            summary = self.summary(resumed, last_step, exit_reason, losses, step_times)
            if self.args.summary:
                write_json_atomically(self.args.summary, summary)
            log('summary ' + json.dumps(summary))
        dist.barrier()  # ranks leave together, leaving srun --kill-on-bad-exit as little as possible to kill
        dist.destroy_process_group()
        return REQUEUE_EXIT if exit_reason == 'signal' else 0


def main(argv=None, leave_at_once=False) -> int:
    args = parse_args(argv)
    if torch is None:
        raise SystemExit('llmforge-train needs torch, which this Python cannot import')
    if importlib.util.find_spec('numpy') is None:  # torch.distributed's object collectives (DCP uses them) need it
        raise SystemExit('llmforge-train needs numpy next to torch: torch.distributed.checkpoint cannot work without it')
    # Debian's torch 2.6 checkpoint writer calls a deprecated storage API at every save; nothing a user can act on.
    warnings.filterwarnings('ignore', message='TypedStorage is deprecated')
    if args.steps < 1:
        raise SystemExit('--steps must be at least 1')
    trainer = Trainer(args, rendezvous(os.environ))
    if leave_at_once:
        try:
            code = trainer.run()
        except RefusedRunDir as error:
            print(f'llmforge-train: refusing the run directory: {error}', file=sys.stderr)
            code = REFUSED_EXIT
        except BaseException:  # noqa: BLE001 - reported as Python would, then the same exit without destructors
            traceback.print_exc()
            code = 1
        leave(code)
    try:
        return trainer.run()
    except RefusedRunDir as error:
        raise SystemExit(f'llmforge-train: refusing the run directory: {error}') from None


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
