# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The reference trainer's checkpoints written straight to shared storage, and through node-local scratch (--local-dir).

The same run for both tiers, the trainer program in one CPU process: --checkpoints checkpoints, one every --every
steps, each step taking --step-seconds (the trainer's slow-rank drill stands in for compute, so a copy has that long to
run before the next checkpoint), repeated --runs times. Per checkpoint, from the trainer's summary: stall, how long the
training loop stood still for it (local tier: the local write, plus any wait for the previous copy); commit, how long
until it was committed in the run directory. The figures are medians over every checkpoint of every run.

The run directory is under --shared, the local tier's directory under --local (defaults: two temporary directories,
on one machine usually the same disk, where the local tier saves the fsyncs on the training loop's time). Point
--shared at the cluster's shared file system and --local at a node's NVMe scratch for the figures that matter;
--copy-mbps holds the local tier's copies back, to see a slow shared file system lengthen the commit, not the stall,
until checkpoints come faster than copies.
Run from the repository root: .venv/bin/python bench/bench_checkpoint_tiers.py [--d-model 1024 --layers 2 ...]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

TRAINER = pathlib.Path(__file__).resolve().parents[1] / 'roles' / 'training_env' / 'files' / 'llmforge_train.py'
TIERS = ('direct', 'local-then-copy')


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--d-model', type=int, default=1024, help='model width (default 1024: ~300 MB checkpoints)')
    parser.add_argument('--layers', type=int, default=2)
    parser.add_argument('--heads', type=int, default=8)
    parser.add_argument('--checkpoints', type=int, default=5, help='checkpoints per run')
    parser.add_argument('--every', type=int, default=2, help='steps between checkpoints')
    parser.add_argument('--step-seconds', type=float, default=1.0, help='each step lasts at least this long')
    parser.add_argument('--runs', type=int, default=3, help='runs per tier')
    parser.add_argument('--shared', help='the run directories go here (default: a temporary directory)')
    parser.add_argument('--local', help="the local tier's --local-dir (default: another temporary directory)")
    parser.add_argument('--copy-mbps', type=float, default=0.0,
                        help="the local tier's copies at most this fast (the trainer's --drill-copy-mbps; the direct "
                        'tier has no such brake): what a slower shared file system does to stall and commit')
    return parser.parse_args()


def file_system(path: str) -> str:
    """'<type> on <device>' of the mount holding path."""
    real, best = os.path.realpath(path), ('', '?', '?')
    with open('/proc/self/mounts', encoding='utf-8') as mounts:
        for line in mounts:
            device, mount_point, kind = line.split()[:3]
            inside = real == mount_point or real.startswith(mount_point.rstrip('/') + '/')
            if inside and len(mount_point) > len(best[0]):
                best = (mount_point, kind, device)
    return f'{best[1]} on {best[2]}'


def run_once(args, tier: str, shared: str, local: str, index: int) -> tuple[dict, float]:
    """One trainer run of the tier; its summary and wall seconds."""
    run_dir = os.path.join(shared, f'{tier}-{index}')
    summary_path = os.path.join(shared, f'summary-{tier}-{index}.json')
    argv = [sys.executable, str(TRAINER), '--run-dir', run_dir, '--new-run-dir', '--summary', summary_path,
            '--device', 'cpu', '--d-model', str(args.d_model), '--layers', str(args.layers), '--heads', str(args.heads),
            '--batch-size', '1', '--seq-len', '16', '--log-every', '1000',
            '--steps', str(args.checkpoints * args.every), '--ckpt-every-steps', str(args.every),
            '--straggler-steps', '0', '--drill-slow-rank', '0', '--drill-slow-seconds', str(args.step_seconds)]
    if tier == 'local-then-copy':
        argv += ['--local-dir', local] + (['--drill-copy-mbps', str(args.copy_mbps)] if args.copy_mbps else [])
    env = {key: value for key, value in os.environ.items()
           if key not in ('RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'MASTER_ADDR', 'MASTER_PORT')
           and not key.startswith('SLURM_')}
    started = time.monotonic()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        sys.exit(f'{tier} run failed (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}')
    with open(summary_path, encoding='utf-8') as handle:
        summary = json.load(handle)
    shutil.rmtree(run_dir)  # the next run starts on an empty disk, without this one's checkpoints
    return summary, seconds


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix='llmforge-bench-shared-', dir=args.shared) as shared, \
            tempfile.TemporaryDirectory(prefix='llmforge-bench-local-', dir=args.local) as local:
        results = {tier: [] for tier in TIERS}
        for index in range(args.runs):
            for tier in TIERS:  # interleaved, so a slow spell of the machine hits both tiers
                results[tier].append(run_once(args, tier, shared, local, index))
        first = results['direct'][0][0]['checkpoints'][0]
        print(f"torch {results['direct'][0][0]['torch_version']}, one process on CPU; checkpoint {first['bytes']:,} "
              f"bytes (--d-model {args.d_model} --layers {args.layers})")
        print(f'{args.checkpoints} checkpoints a run, one every {args.every} steps of {args.step_seconds:g} s; '
              f'{args.runs} runs per tier; medians of {args.checkpoints * args.runs} checkpoints')
        print(f'shared {shared} ({file_system(shared)}), local {local} ({file_system(local)})'
              + (f'; local copies held to {args.copy_mbps:g} MB/s' if args.copy_mbps else ''))
        for tier in TIERS:
            checkpoints = [checkpoint for summary, _seconds in results[tier] for checkpoint in summary['checkpoints']]
            if not all(checkpoint['commit_s'] is not None for checkpoint in checkpoints):
                sys.exit(f'{tier}: a checkpoint was not committed')
            stall = statistics.median(checkpoint['stall_s'] for checkpoint in checkpoints)
            commit = statistics.median(checkpoint['commit_s'] for checkpoint in checkpoints)
            wall = statistics.median(seconds for _summary, seconds in results[tier])
            most = max(checkpoint['stall_s'] for checkpoint in checkpoints)
            line = f'{tier:16} stall {stall:6.3f} s (max {most:6.3f})   commit {commit:6.3f} s   run {wall:5.1f} s'
            if tier == 'local-then-copy':
                wait = statistics.median(checkpoint['wait_s'] for checkpoint in checkpoints)
                copy = statistics.median(checkpoint['copy_s'] for checkpoint in checkpoints)
                line += f'   (stall spent waiting for the previous copy {wait:.3f} s; copy {copy:.3f} s)'
            print(line)


if __name__ == '__main__':
    main()
