# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Time to build the training environment from a wheelhouse, as the training_env role does it.

The role's two commands on the Debian 12 cluster scenario's lock (PyTorch 2.13.0's CPU build and its nine
dependencies, molecule/resources/files/training-cp311.lock): `python3 -m venv <dir>`, then
`<dir>/bin/python -m pip install --require-hashes --no-input --no-cache-dir --only-binary=:all: --no-index
--find-links <wheelhouse> --requirement <lock>`. On shared storage this runs once for the whole cluster, whatever the
number of nodes; per node (training_env_shared: false) every node runs it in parallel. Needs `make wheelhouse` first.
Run from the repository root: .venv/bin/python bench/bench_training_env.py [repeats]
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
import tempfile

from benchlib import median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
LOCK = REPO / 'molecule' / 'resources' / 'files' / 'training-cp311.lock'
WHEELHOUSE = REPO / 'build' / 'wheelhouse'


def build(target: pathlib.Path) -> None:
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(['/usr/bin/python3', '-m', 'venv', str(target)], check=True)
    subprocess.run([str(target / 'bin' / 'python'), '-m', 'pip', 'install', '--quiet', '--require-hashes', '--no-input',
                    '--disable-pip-version-check', '--no-cache-dir', '--only-binary=:all:', '--no-index',
                    '--find-links', str(WHEELHOUSE), '--requirement', str(LOCK)], check=True)


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if not (WHEELHOUSE / '.complete').exists():
        sys.exit('build/wheelhouse is missing: run `make wheelhouse` first')
    wheels = sum(path.stat().st_size for path in WHEELHOUSE.glob('*.whl'))
    with tempfile.TemporaryDirectory() as tmp:
        target = pathlib.Path(tmp) / 'env'
        seconds = median_seconds(lambda: build(target), repeats=repeats)
        installed = sum(path.stat().st_size for path in target.rglob('*') if path.is_file())
    print(f'training environment from the wheelhouse: {len(list(WHEELHOUSE.glob("*.whl")))} wheels, '
          f'{wheels / 1e6:.0f} MB -> {installed / 1e6:.0f} MB installed')
    print(f'build (venv + pip install --require-hashes --no-index), median of {repeats}: {seconds:.1f} s')


if __name__ == '__main__':
    main()
