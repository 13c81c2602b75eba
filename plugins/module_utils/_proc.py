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


def run(argv: t.Sequence[str], timeout: float, own_session: bool = False) -> Completed:
    """Run argv without a shell and return (exit status, stdout, stderr), decoded as UTF-8 (bad bytes replaced).

    On timeout the command is killed and CommandError(reason='timeout') raised. With `own_session` the command
    runs in its own process group and the whole group is killed, so what it started (srun, MPI ranks) ends too.
    """
    try:
        with subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding='utf-8',
                              errors='replace', start_new_session=own_session) as child:
            try:
                stdout, stderr = child.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                _kill(child, own_session)
                child.communicate()
                raise CommandError(argv, TIMEOUT, timeout) from None
    except FileNotFoundError:
        raise CommandError(argv, MISSING, timeout) from None
    except PermissionError:
        raise CommandError(argv, DENIED, timeout) from None
    except OSError as err:
        raise CommandError(argv, FAILED, timeout, err.strerror or str(err)) from None
    return Completed(child.returncode, stdout, stderr)


def _kill(proc: subprocess.Popen, group: bool) -> None:
    try:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except ProcessLookupError:
        pass
