# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time the reference trainer's checkpoint write (sharded save, fsync, marker, rename) and load, one CPU process.

Run from the repository root: .venv/bin/python bench/bench_checkpoint.py
Loads read files the write just left in the page cache: they show the deserialisation cost, not the disk's.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import pathlib
import tempfile

from benchlib import median_seconds

REPEATS = 5
TRAINER = pathlib.Path(__file__).resolve().parents[1] / 'roles' / 'training_env' / 'files' / 'llmforge_train.py'
SIZES = {
    'default': [],
    'larger': ['--layers', '6', '--d-model', '512', '--heads', '8'],
}


def load_trainer():
    spec = importlib.util.spec_from_file_location('llmforge_train', TRAINER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(train, run_dir: str, size_args: list[str]) -> dict:
    args = train.parse_args(['--run-dir', run_dir, '--device', 'cpu', *size_args])
    trainer = train.Trainer(args, train.rendezvous({}))
    quiet = contextlib.redirect_stdout(io.StringIO())
    with quiet:
        trainer.setup()
        # One step, so the optimizer holds its moments as in any checkpoint taken during training.
        inputs, _targets = train.synthetic_batch(train.markov_successors(args.vocab_size, args.seed), args.seed, 1, 0,
                                                 args.batch_size, args.seq_len)
        trainer.model(inputs).float().mean().backward()
        trainer.optimizer.step()
        steps = itertools.count(1)
        write = median_seconds(lambda: trainer.save(next(steps)), REPEATS)
        path = trainer.checkpoints[-1]['path']
        load = median_seconds(lambda: trainer.load(path), REPEATS)
    train.dist.destroy_process_group()
    return {'parameters': sum(parameter.numel() for parameter in trainer.model.parameters()),
            'bytes': trainer.checkpoints[-1]['bytes'], 'write': write, 'load': load}


def main() -> None:
    train = load_trainer()
    print(f'torch {train.torch.__version__}, one process on CPU, medians of {REPEATS}')
    for name, size_args in SIZES.items():
        with tempfile.TemporaryDirectory(prefix='llmforge-bench-checkpoint-') as run_dir:
            figures = measure(train, run_dir, size_args)
        print(f"{name:8} {' '.join(size_args) or '(trainer defaults)'}")
        print(f"  parameters {figures['parameters']:,}, checkpoint {figures['bytes']:,} bytes "
              f"({figures['bytes'] / figures['parameters']:.1f} bytes per parameter)")
        print(f"  write {figures['write']:.3f} s ({figures['bytes'] / figures['write'] / 1e6:.0f} MB/s), "
              f"load {figures['load']:.3f} s")


if __name__ == '__main__':
    main()
