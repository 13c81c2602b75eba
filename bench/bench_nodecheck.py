# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wall time of one llmforge-nodecheck run on a simulated 8-GPU HGX H200 node with 8 NDR ports.

The installed program (roles/slurm_node/files/llmforge-nodecheck) in a fresh Python process, as slurmd starts it:
interpreter start, imports, both nvidia-smi calls (the fixture-replaying stand-in, in parallel), the sysfs read of
8 HCAs and the judging; Slurm left out (--no-slurm). Target: well under Slurm's 60 s, < 5 s on an 8-GPU node.
A real nvidia-smi -q -x takes about 0.5-2 s on 8 GPUs (it queries every GPU); the stand-in costs ~5 ms, so the
figure is the program's own overhead. Run from the repository root:
.venv/bin/python bench/bench_nodecheck.py
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile

from benchlib import median_seconds

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests' / 'fixtures' / 'rdma'))
import make_sysfs_trees  # noqa: E402  pylint: disable=wrong-import-position


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        make_sysfs_trees.build('ndr8_healthy', root / 'sys')
        config = {
            'node_name': 'gpu1', 'timeout': 10, 'drain': False, 'textfile_dir': str(root), 'state_file': str(root / 'state.json'),
            'validators': {
                'gpu_topology': {'profile': 'h200-sxm-8', 'nvidia_smi': str(REPO / 'tests' / 'fixtures' / 'gpu' / 'nvidia-smi-shim')},
                'rdma_links': {'sysfs_root': str(root / 'sys'), 'expected': {'devices': '^mlx5_[0-7]$', 'hca_count': 8, 'rate_gbps': 400}},
            },
        }
        (root / 'nodecheck.json').write_text(json.dumps(config))
        env = dict(os.environ, LLMFORGE_PYTHON_DIR=str(REPO / 'collections'),
                   NVIDIA_SMI_SHIM_DIR=str(REPO / 'tests' / 'fixtures' / 'gpu' / 'hgx-h200-8'))
        argv = [sys.executable, str(REPO / 'roles' / 'slurm_node' / 'files' / 'llmforge-nodecheck'),
                '--config', str(root / 'nodecheck.json'), '--no-slurm', '--strict']

        def once() -> None:
            subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)

        once()
        seconds = median_seconds(once, repeats=9)
        print(f'llmforge-nodecheck, 8-GPU HGX H200 + 8 NDR ports, whole process: median {seconds * 1000:.0f} ms of 9 runs')


if __name__ == '__main__':
    main()
