"""SIGINT, SIGTERM and SIGHUP while a stream runs: the first stops it cleanly, a second
forces it. With ``--output``, SIGHUP instead asks for the file to be reopened (log
rotation, as pg_recvlogical does), and the stream goes on.

The handlers only set a flag and write a byte to a pipe, which the read loop's
``select`` watches, so a signal wakes a stream waiting for data at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from pgtail.catalog import set_stop_check


class Signals:
    """SIGINT/SIGTERM/SIGHUP set a flag (first) or force an exit (second); the select loop
    wakes. With ``reopen_on_hup``, SIGHUP only sets ``reopen_pending``."""

    def __init__(self, install: bool, *, reopen_on_hup: bool = False) -> None:
        self.received: int | None = None
        self.forced = False
        self.reopen_pending = False  # SIGHUP with --output: reopen the file
        self._reopen_on_hup = reopen_on_hup
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._previous: dict[int, Any] = {}
        self._installed = install and threading.current_thread() is threading.main_thread()
        if self._installed:
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self._previous[signum] = signal.signal(signum, self._handle)
            # a connect in progress (blocked in libpq) gives up on a stop, too
            self._previous_check = set_stop_check(lambda: self.received)
            # a stop already pending (a caller that handled the signals with a flag
            # until now: `pgtail demo`) is this run's first signal
            pending = self._previous_check() if self._previous_check is not None else None
            if pending is not None:
                self.received = pending
                self.wake()

    @property
    def fd(self) -> int:
        return self._read_fd

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGHUP and self._reopen_on_hup:
            self.reopen_pending = True
            self.wake()
            return
        if self.received is not None:
            self.forced = True
        else:
            self.received = signum
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"\0")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._read_fd, 4096):
                pass

    def close(self) -> None:
        if self._installed:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
            set_stop_check(self._previous_check)
        os.close(self._read_fd)
        os.close(self._write_fd)
