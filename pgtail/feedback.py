"""Which LSN is safe to confirm to the server, and when to say so.

A small pure object (no I/O, no clock of its own): the stream loop tells it what was
written and flushed, what the server's WAL end is while nothing is in flight, and asks
it what to send as the standby status update and whether one is due.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class Feedback:
    """Standby-feedback bookkeeping for one slot.

    Invariants:
    - ``flush_lsn`` never moves backwards and never passes what was written: it is the
      highest end LSN of a transaction whose output is written and flushed, or the
      server's WAL end observed while *everything* received had been written and no
      transaction was open (so every transaction committed before it is on disk).
    - It never goes below ``start_lsn`` (the slot's confirmed position when we started),
      so an early status update cannot move a slot's confirmed_flush_lsn backwards.
    """

    status_interval: float = 10.0
    # progress is reported at once, but not more often than this (a burst of small
    # transactions should not cost one network message each)
    min_interval: float = 0.05
    start_lsn: int = 0
    written_lsn: int = 0  # end LSN of the last transaction written and flushed
    idle_lsn: int = 0  # server WAL end seen while nothing was in flight
    sent_lsn: int = 0  # flush LSN in the last status update sent
    last_sent: float | None = None  # monotonic time of the last status update

    def written(self, end_lsn: int) -> None:
        """Output up to (and including) the transaction ending at ``end_lsn`` is flushed."""
        if end_lsn > self.written_lsn:
            self.written_lsn = end_lsn

    def idle(self, wal_end: int) -> None:
        """Nothing received is unwritten and no transaction is open; the server is at ``wal_end``.

        Only call this when both are true at the moment ``wal_end`` was read: every
        transaction that committed before ``wal_end`` has then been received and written.
        """
        if wal_end > self.idle_lsn:
            self.idle_lsn = wal_end

    @property
    def flush_lsn(self) -> int:
        """The LSN to report as flushed (and written and applied)."""
        return max(self.start_lsn, self.written_lsn, self.idle_lsn)

    def due(self, now: float) -> bool:
        """Whether a status update should be sent now.

        Due when there is progress the server has not heard of, or when
        ``status_interval`` has passed since the last update (a heartbeat).
        """
        if self.last_sent is None:
            return True
        elapsed = now - self.last_sent
        if self.flush_lsn > self.sent_lsn:
            return elapsed >= self.min_interval
        return elapsed >= self.status_interval

    def progress_pending(self) -> bool:
        """True when the server has not yet been told the current ``flush_lsn``."""
        return self.flush_lsn > self.sent_lsn

    def next_due_in(self, now: float) -> float:
        """Seconds until a heartbeat is due (0 when one is due already)."""
        if self.last_sent is None:
            return 0.0
        wait = self.min_interval if self.progress_pending() else self.status_interval
        return max(0.0, self.last_sent + wait - now)

    def sent(self, lsn: int, now: float) -> None:
        """A status update reporting ``lsn`` was sent at ``now``."""
        if lsn > self.sent_lsn:
            self.sent_lsn = lsn
        self.last_sent = now

    def reset_connection(self) -> None:
        """A new connection: the next status update is due at once.

        ``idle_lsn`` stays: it was safe when observed and a new connection cannot make
        it less so.
        """
        self.last_sent = None
