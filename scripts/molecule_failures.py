# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What failed in a molecule log, in a few lines: the failed action, the failed tests, the failed tasks.

scripts/molecule-all.sh prints it for each failed scenario after the table of results, so that the end of the
output (all a CI summary may keep) names the failures. molecule boxes and wraps each play's and the verifier's
output (`  │ ` prefixes, continuation lines indented, colours): this undoes that before reading.
"""

from __future__ import annotations

import re
import sys

ANSI = re.compile(r'\x1b\[[0-9;]*m')
BOX = re.compile(r'^\s*[│└┌├─]+\s?')
MAX_ITEMS = 12


def unwrap(lines: list[str]) -> list[str]:
    """molecule's wrapped lines joined again: a continuation line is indented by two spaces more."""
    joined: list[str] = []
    for line in lines:
        if line.startswith('  ') and joined and line.strip():
            # Wrapped mid-word, except after a lone FAILED or ERROR.
            glue = ' ' if joined[-1] in ('FAILED', 'ERROR') else ''
            joined[-1] = joined[-1] + glue + line.strip()
        else:
            joined.append(line.rstrip())
    return joined


def summary(text: str) -> list[str]:
    lines = [BOX.sub('', ANSI.sub('', line)) for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        match = re.search(r'➜ (\w+): Executed: Failed(.*)', line)
        if match and f'failed action: {match.group(1)}{match.group(2)}' not in out:
            out.append(f'failed action: {match.group(1)}{match.group(2)}')
    body = unwrap(lines)
    # The first line of each assertion pytest explains (E   AssertionError: ...), cut short.
    errors = [line.strip()[:200] for line in body if re.match(r'^E\s+\w*(Error|Exception)\b', line)]
    tests = [line for line in body if re.match(r'^(FAILED|ERROR) \S+::', line)]
    if not tests:
        # A verify stopped before its summary (make test's deadline): the failures its progress lines reported.
        tests = [f'{match.group(2)} {match.group(1)}' for line in body
                 for match in [re.match(r'^(\S+\.py::\S+) (FAILED|ERROR)\b', line)] if match]
    stopped = [line.strip('= ') for line in lines if "stopped at make test's deadline" in line]
    totals = [line.strip('= ') for line in body if re.match(r'^=+ .*\b(failed|error|errors)\b.* in [\d.]+s', line)]
    tasks = sorted({match.group(1) for line in body for match in [re.match(r'^fatal: \[([^\]]+)\]', line)] if match})
    out += tests[:MAX_ITEMS] + ([f'... and {len(tests) - MAX_ITEMS} more'] if len(tests) > MAX_ITEMS else [])
    out += [f'  {line}' for line in errors[:3]]
    out += totals[-1:]
    out += stopped[-1:]
    if tasks and not tests:
        out.append(f"fatal on: {', '.join(tasks)}")
    return out


def main(argv: list[str]) -> int:
    for path in argv:
        try:
            with open(path, encoding='utf-8', errors='replace') as handle:
                found = summary(handle.read())
        except OSError as err:
            print(f'   {path}: {err}')
            continue
        for line in found or ['(no failed action, test or task found in the log)']:
            print(f'   {line}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
