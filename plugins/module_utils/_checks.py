# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The check record every validator returns, and the verdict drawn from a list of them.

Pure Python, no Ansible import: shared by gpu_topology, rdma_links and the node health check.
"""

from __future__ import annotations

import typing as t

PASS, FAIL, WARN, SKIP = 'pass', 'fail', 'warn', 'skip'

# A judge looks at one subject and says (status, actual value, message).
Judge = t.Callable[[t.Any], t.Tuple[str, t.Any, str]]


def check(name: str, status: str, subject: str, expected: t.Any, actual: t.Any, message: str) -> dict[str, t.Any]:
    return {'name': name, 'status': status, 'subject': subject, 'expected': expected, 'actual': actual,
            'message': message}


def skip(name: str, why: str = 'no expectation set') -> dict[str, t.Any]:
    return check(name, SKIP, 'node', None, None, why)


def per_subject(name: str, items: t.Iterable[t.Any], expected: t.Any, subject: t.Callable[[t.Any], str],
                judge: Judge) -> list[dict[str, t.Any]]:
    """One check per item; a single `skip` when there is no expectation."""
    if expected is None:
        return [skip(name)]
    checks = []
    for item in items:
        status, actual, message = judge(item)
        checks.append(check(name, status, subject(item), expected, actual, message))
    return checks


def healthy(checks: t.Iterable[t.Mapping[str, t.Any]]) -> bool:
    return not any(c['status'] == FAIL for c in checks)


def failure_summary(checks: t.Iterable[t.Mapping[str, t.Any]], what: str) -> str:
    """`2 GPU check(s) failed: name (subject): message; ...`, or '' when nothing failed."""
    failing = [f"{c['name']} ({c['subject']}): {c['message']}" for c in checks if c['status'] == FAIL]
    return f'{len(failing)} {what} check(s) failed: ' + '; '.join(failing) if failing else ''
