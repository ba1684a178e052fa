"""Waiting on the server inside a run: `catalog.wait_for_server` with the run's log and
signals (a signal cancels the wait and stops the run: `Stop`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pgtail import catalog
from pgtail.errors import Interrupted
from pgtail.stream.change_stream import Stop
from pgtail.stream.config import Logger
from pgtail.stream.signals import Signals

T = TypeVar("T")


class Waiting:
    """How a run waits on the server (`catalog.wait_for_server`): its lines go to
    ``log``, and its signals cancel the wait (then `Stop`)."""

    def __init__(self, dsn: str | None, log: Logger, signals: Signals | None) -> None:
        self.dsn = dsn
        self.log = log
        self.signals = signals

    def run(self, call: Callable[[], T], conn: Any, what: str, *, blocked_only: bool = False) -> T:
        """``call()``, a command on ``conn``; ``blocked_only``: said only while another
        session blocks it (a lock), not while it merely works."""
        signals = self.signals
        stopped = (lambda: signals.received) if signals is not None else None
        try:
            return catalog.wait_for_server(
                call,
                conn=conn,
                dsn=self.dsn,
                what=what,
                log=self.log,
                stopped=stopped,
                blocked_only=blocked_only,
            )
        except Interrupted:
            if signals is None:
                raise
            raise Stop("signal") from None
