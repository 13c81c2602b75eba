# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""llmforge-validate-node: validate.yml's hardware stage on this node, for the stage's Slurm path.

On a running cluster validate.yml starts the hardware stage as one `srun` step across the idle GPU nodes (one task
per node) instead of three Ansible tasks per node: each node runs this program, which runs the same validators
with the same code as the gpu_topology, rdma_links and kernel_faults modules (and, with validate_dcgm, the fast tier
of the dcgm_diag module: module_utils/_hardware_stage.py) and
prints ``{"node": ..., "results": {validator: result}}`` as JSON in short numbered lines
(``llmforge-validate-node <node> 1/12 <piece>``) that the control host reads back from srun's output
(`parse_output`). The results are what the modules would have returned, so the report is the same.

    llmforge-validate-node --params '{"gpu_topology": {"profile": "h100-sxm"}, ...}'

With ``--metrics DIR`` it writes the node's validation metrics instead, at the end of the run: the control host
sends every node's textfile through srun's standard input (``{"texts": [text, ...], "nodes": {node: index}}``:
nodes with the same text share it) and each node writes its own to ``DIR/llmforge_validate.prom`` (temporary file
and rename, mode 0644; DIR made 0755 if missing), as the Ansible path's copy task does, and says ``wrote`` or
``unchanged``.

Run by root from the first controller's srun; it reads only its arguments, its standard input and the hardware.
Exit status: 0 when the lines were printed or the metrics file handled (a failing node is a result, not an error),
2 unusable arguments or input, 3 the metrics file could not be written.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _files as files
from ansible_collections.llmforge.cluster.plugins.module_utils import _hardware_stage as stage
from ansible_collections.llmforge.cluster.plugins.module_utils import _node_lines as node_lines

PROGRAM = 'llmforge-validate-node'
# What starts each result line in srun's output (which may hold other lines: Slurm's own messages).
MARKER = PROGRAM
METRICS_FILE = 'llmforge_validate.prom'
# Characters of standard input read for --metrics at most (4,096 nodes' distinct texts fit many times over).
MAX_INPUT = 64 * 1024 * 1024


class InputError(ValueError):
    """The arguments or standard input are unusable; the message says which field."""


def node_name(given: t.Optional[str] = None) -> str:
    """The node's Slurm name: as given, else $SLURMD_NODENAME (set in every Slurm task), else the short host name."""
    return given or os.environ.get('SLURMD_NODENAME') or os.uname().nodename.split('.')[0]


def result_lines(node: str, params: t.Any) -> list[str]:
    """The lines this node prints: {node, results} in numbered pieces (module_utils/_node_lines.py)."""
    try:
        results = stage.node_results(params)
    except stage.StageError as err:
        raise InputError(f'--params: {err}') from None
    return node_lines.lines(MARKER, node, 'results', results)


def parse_output(text: str) -> dict[str, dict[str, t.Any]]:
    """{node: results} of every node whose pieces are all in `text` (srun's output: other lines are ignored, and a
    node with a piece missing or unreadable gives nothing)."""
    return node_lines.read(MARKER, 'results', text)


def metrics_text(payload: t.Any, node: str) -> str:
    """This node's textfile from the control host's {texts, nodes}; InputError when the node is not in it."""
    if not isinstance(payload, dict) or not isinstance(payload.get('texts'), list) or not isinstance(payload.get('nodes'), dict):
        raise InputError('standard input must be {"texts": [text, ...], "nodes": {node: index}}')
    index = payload['nodes'].get(node)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(payload['texts']):
        raise InputError(f'standard input has no metrics for node {node!r}')
    text = payload['texts'][index]
    if not isinstance(text, str):
        raise InputError(f'texts[{index}] must be a string, got {type(text).__name__}')
    return text


def write_metrics(directory: str, text: str) -> bool:
    """Write `text` to DIRECTORY/llmforge_validate.prom atomically, making the directory (0755) when missing; False
    when the file is a regular file of mode 0644 that holds `text` already (nothing written)."""
    if not os.path.isabs(directory):
        raise InputError(f'--metrics must be an absolute directory, got {directory!r}')
    os.makedirs(directory, mode=0o755, exist_ok=True)
    path = os.path.join(directory, METRICS_FILE)
    try:
        with open(path, 'rb', opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)) as handle:
            same = stat.S_IMODE(os.fstat(handle.fileno()).st_mode) == 0o644 and handle.read() == text.encode('utf-8')
    except OSError:
        same = False
    if not same:
        files.write_atomic(path, text, mode=0o644)
    return not same


def main(argv: t.Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=PROGRAM, description=__doc__.split('\n\n', maxsplit=1)[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument('--params', help="the stage's options by validator, as JSON (see module_utils/_hardware_stage.py)")
    what.add_argument('--metrics', metavar='DIR', help='write this node\'s textfile, read from standard input, into DIR')
    parser.add_argument('--node', help='the Slurm node name (default: $SLURMD_NODENAME, else the host name)')
    args = parser.parse_args(argv)
    node = node_name(args.node)
    try:
        if args.params is not None:
            try:
                params = json.loads(args.params)
            except ValueError as err:
                raise InputError(f'--params is not JSON: {err}') from None
            sys.stdout.write(''.join(line + '\n' for line in result_lines(node, params)))
            sys.stdout.flush()
            return 0
        try:
            payload = json.loads(sys.stdin.read(MAX_INPUT))
        except ValueError as err:
            raise InputError(f'standard input is not JSON: {err}') from None
        written = write_metrics(args.metrics, metrics_text(payload, node))
    except InputError as err:
        sys.stderr.write(f'{PROGRAM} on {node}: {err}\n')
        return 2
    except OSError as err:
        sys.stderr.write(f'{PROGRAM} on {node}: cannot write {os.path.join(args.metrics, METRICS_FILE)}: {err}\n')
        return 3
    path = os.path.join(args.metrics, METRICS_FILE)
    sys.stdout.write(f"{PROGRAM} on {node}: {'wrote' if written else 'unchanged'} {path}\n")
    return 0
