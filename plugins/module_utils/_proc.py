# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a command with a timeout: the one subprocess runner of the validators and the node programs.

Standard library only, no Ansible import. `run` returns the exit status and both outputs whatever the status;
a command that cannot be started or does not finish in time raises `CommandError`, whose `reason` says which
(``missing``, ``denied``, ``timeout``, ``failed``) so that each caller can word the message for its users.
"""

from __future__ import annotations

import os
import signal
import subprocess
import typing as t

MISSING, DENIED, TIMEOUT, FAILED = 'missing', 'denied', 'timeout', 'failed'
# Seconds to read what a killed command left in its pipes before giving up on them.
KILL_GRACE_S = 0.5


class Completed(t.NamedTuple):
    rc: int
    stdout: str
    stderr: str


class CommandError(Exception):
    """The command could not be started or did not finish within its timeout."""

    def __init__(self, argv: t.Sequence[str], reason: str, timeout: float, detail: str = '') -> None:
        self.argv = list(argv)
        self.command = ' '.join(self.argv)
        self.reason = reason
        self.timeout = timeout
        messages = {
            MISSING: f'{self.argv[0]} not found',
            DENIED: f'{self.argv[0]} is not executable',
            TIMEOUT: f"'{self.command}' did not finish within {timeout:g} s",
        }
        super().__init__(messages.get(reason) or f'{self.argv[0]} cannot be run: {detail}')


def run(argv: t.Sequence[str], timeout: float, own_session: bool = True,
        env: t.Optional[t.Mapping[str, str]] = None) -> Completed:
    """Run argv without a shell and return (exit status, stdout, stderr), decoded as UTF-8 (bad bytes replaced).

    The command always runs in its own session and process group. On timeout the whole group is killed (what it
    started too: srun, MPI ranks, the child of a wrapper script that does not exec) and CommandError(reason='timeout')
    raised within about `timeout` + KILL_GRACE_S seconds, even when a process that left the group still holds the
    output pipes. `own_session` is accepted for callers written before this was always so; it changes nothing.
    `env` replaces the command's environment (default: this process's).
    """
    try:
        child = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding='utf-8',
                                 errors='replace', start_new_session=True,
                                 env=dict(env) if env is not None else None)
    except FileNotFoundError:
        raise CommandError(argv, MISSING, timeout) from None
    except PermissionError:
        raise CommandError(argv, DENIED, timeout) from None
    except OSError as err:
        raise CommandError(argv, FAILED, timeout, err.strerror or str(err)) from None
    try:
        stdout, stderr = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(child)
        raise CommandError(argv, TIMEOUT, timeout) from None
    except BaseException:
        # Interrupted: a terminal's Ctrl-C no longer reaches a command in its own session, so it ends here.
        _stop(child)
        raise
    return Completed(child.returncode, stdout, stderr)


def _stop(child: subprocess.Popen) -> None:
    """SIGKILL the child's process group (its pid: it leads a session of its own), then read what is left for at
    most KILL_GRACE_S and close the pipes: a process that escaped the group (setsid) may hold them open for good,
    and a child stuck in the kernel may never be reaped."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        # The group is gone, or all of it became another user (setuid): the bounded read below still ends.
        pass
    try:
        child.communicate(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
        child.poll()
