# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether SSSD on this host reaches its directory, read on the node (standard library only, no Ansible import).

SSSD reports a domain online until a lookup fails, and answers from its cache after that, so its state means
something only after a lookup: ``check`` first looks a group up (``getent group``; the admin group, or a name
nobody needs to have), then reads ``sssctl domain-status --online <domain>``. A freshly restarted SSSD may need a
few seconds: the lookup is tried up to ``group_tries`` times and the state up to ``status_tries`` times until it
says online, ``delay`` seconds apart. The sssd_status module calls ``check``; the commands and the pause are
arguments so that tests can stand in for them.
"""

from __future__ import annotations

import time
import typing as t

from ansible_collections.llmforge.cluster.plugins.module_utils import _proc

ONLINE = 'Online status: Online'


class Status(t.NamedTuple):
    online: bool
    domain_status: str
    group_resolved: bool
    group_entry: str
    messages: list[str]


Runner = t.Callable[[t.Sequence[str], float], _proc.Completed]


def is_online(domain_status: str) -> bool:
    """sssctl's answer says the domain is online."""
    return any(line.strip() == ONLINE for line in domain_status.splitlines())


def _call(run: Runner, argv: list[str], timeout: float) -> tuple[int, str]:
    """(exit status, output) of one command; a command that is missing or hangs counts as a failed try."""
    try:
        done = run(argv, timeout)
    except _proc.CommandError as err:
        return 127, str(err)
    return done.rc, (done.stdout.strip() or done.stderr.strip())


def check(domain: str, group: str, group_tries: int = 1, status_tries: int = 6, delay: float = 3.0,
          timeout: float = 10.0, run: Runner = _proc.run, sleep: t.Callable[[float], None] = time.sleep) -> Status:
    """Look `group` up, then read whether `domain` is online; what was found, with one message per finding."""
    if group_tries < 1 or status_tries < 1:
        raise ValueError(f'group_tries and status_tries must be at least 1, got {group_tries} and {status_tries}')
    entry = ''
    for attempt in range(1, group_tries + 1):
        rc, output = _call(run, ['getent', 'group', group], timeout)
        if rc == 0 and output:
            entry = output.splitlines()[0]
            break
        if attempt < group_tries:
            sleep(delay)
    state = ''
    for attempt in range(1, status_tries + 1):
        _rc, state = _call(run, ['sssctl', 'domain-status', '--online', domain], timeout)
        if is_online(state):
            break
        if attempt < status_tries:
            sleep(delay)
    online = is_online(state)
    messages = [f'sssctl domain-status --online {domain}: {" ".join(state.split()) or "no output"}',
                f'getent group {group}: ' + (entry or f'nothing after {group_tries} '
                                             f'{"try" if group_tries == 1 else "tries"}')]
    return Status(online=online, domain_status=state, group_resolved=bool(entry), group_entry=entry,
                  messages=messages)
