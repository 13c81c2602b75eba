# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a node program returns one JSON document through a Slurm step's output, and how the control host reads it.

Standard library only, no Ansible import. A node program run by ``srun`` (one task per node: llmforge-validate-node,
llmforge-pull-node) prints ``{"node": <node>, <key>: <value>}`` as compact ASCII JSON with sorted keys, cut into
pieces of at most CHUNK characters, each on a line of its own: ``<marker> <node> <index>/<count> <piece>``.

Short lines because slurmstepd forwards a task's output a whole line at a time only up to its message size (1 KiB):
a longer line reaches srun in parts, which the parts of another node's line can come between. ``read`` takes srun's
whole output (other lines, such as Slurm's own messages, are ignored) and returns the document of every node whose
pieces are all there and form one; a node with a piece missing or unreadable gives nothing, so the caller names it as
not answered.
"""

from __future__ import annotations

import json
import re
import typing as t

# Characters of the document per output line: with the marker, node name and counter, about half of slurmstepd's 1 KiB.
CHUNK = 480


def lines(marker: str, node: str, key: str, value: t.Any) -> list[str]:
    """The lines that carry {node, key: value}: `<marker> <node> <index>/<count> <piece>`."""
    text = json.dumps({'node': node, key: value}, sort_keys=True, separators=(',', ':'), ensure_ascii=True)
    pieces = [text[start:start + CHUNK] for start in range(0, len(text), CHUNK)] or ['']
    return [f'{marker} {node} {index}/{len(pieces)} {piece}' for index, piece in enumerate(pieces, 1)]


def _pattern(marker: str) -> t.Pattern[str]:
    return re.compile(rf'^{re.escape(marker)} (\S{{1,200}}) ([0-9]{{1,7}})/([0-9]{{1,7}}) (.*)$')


def read(marker: str, key: str, text: str) -> dict[str, t.Any]:
    """{node: value of `key`} for every node whose pieces are all in `text` and whose document is an object naming
    that node and holding `key` as an object."""
    pattern = _pattern(marker)
    pieces: dict[str, dict[int, str]] = {}
    counts: dict[str, int] = {}
    for line in text.splitlines():
        match = pattern.match(line)
        if not match:
            continue
        node, index, count = match.group(1), int(match.group(2)), int(match.group(3))
        if counts.setdefault(node, count) != count or not 1 <= index <= count:
            counts[node] = -1
            continue
        pieces.setdefault(node, {})[index] = match.group(4)
    found = {}
    for node, count in counts.items():
        if count < 1 or sorted(pieces.get(node, {})) != list(range(1, count + 1)):
            continue
        try:
            data = json.loads(''.join(pieces[node][index] for index in range(1, count + 1)))
        except ValueError:
            continue
        if isinstance(data, dict) and data.get('node') == node and isinstance(data.get(key), dict):
            found[node] = data[key]
    return found
