# Copyright: (c) 2026, llmforge.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A guard for tests that put a FIFO where a file is written: a regression that opens it fails instead of hanging."""

from __future__ import annotations

import contextlib
import os
import pathlib
import threading
import typing as t


@contextlib.contextmanager
def fifo_guard(fifo: pathlib.Path, seconds: float) -> t.Iterator[None]:
    """Releases, after `seconds` and again on leaving, any reader blocked opening `fifo` (a writer opens and
    closes it, which gives the reader an empty file): the test goes on and fails on its own time check."""
    def release() -> None:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass

    timer = threading.Timer(seconds, release)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        release()
