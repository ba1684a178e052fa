"""Which LSN is safe to confirm to the server, and when to say so.

A small pure object (no I/O, no clock of its own): the stream loop tells it what was
written and flushed, what the server's WAL end is while nothing is in flight, and asks
it what to send as the standby status update and whether one is due. `PipeProgress`
decides, for output into a pipe, which written transactions its reader has used.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


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


@dataclass(slots=True)
class PipeProgress:
    """When output written to a pipe may be confirmed: only once its reader used it.

    Bytes written into a pipe are not yet read, and bytes read are not yet used: ``head``
    reads a whole block, prints one line and exits. So a transaction whose output ends
    at byte ``offset`` of the stream becomes confirmable only when (a) the reader has
    consumed past ``offset`` (bytes written minus bytes still unread in the pipe) and
    (b) the reader was still there ``grace`` seconds after that was first seen. A reader
    that read a block and went away never has that block confirmed.

    Pure, like `Feedback`: the writer does the I/O (``ioctl(FIONREAD)``, ``poll``) and
    reports what it saw; `observe` must only be called while the reader is known to be
    there (the poll after the byte count showed no error).

    Invariants: ``offset`` only grows; the LSNs returned by `observe` only grow, and an
    LSN is returned only once its bytes were consumed ``grace`` seconds before a moment
    at which the reader was present.
    """

    grace: float = 1.0
    offset: int = 0  # bytes written to the pipe so far
    # transaction ends not yet consumed: (end offset, LSN), in offset order
    unread: deque[tuple[int, int]] = field(default_factory=deque)
    # transaction ends consumed, waiting for the grace period: (seen at, LSN)
    consumed: deque[tuple[float, int]] = field(default_factory=deque)
    consumed_to: int = 0  # bytes the reader had taken out at the last observation
    drained: bool = True  # the last observation found every byte written consumed

    def wrote(self, nbytes: int, confirm_lsn: int) -> None:
        """``nbytes`` more were written; they end a transaction at ``confirm_lsn`` (0: none)."""
        if nbytes:
            self.offset += nbytes
            self.drained = False
        if confirm_lsn:
            self.unread.append((self.offset, confirm_lsn))

    def observe(self, unread_bytes: int, now: float) -> int:
        """The pipe holds ``unread_bytes`` unread and the reader is there at ``now``.

        Returns the highest LSN that became confirmable (0 when none did).
        """
        consumed_to = self.offset - unread_bytes
        if consumed_to > self.consumed_to:
            self.consumed_to = consumed_to
        unread, consumed = self.unread, self.consumed
        while unread and unread[0][0] <= consumed_to:
            consumed.append((now, unread.popleft()[1]))
        self.drained = consumed_to >= self.offset
        lsn = 0
        while consumed and consumed[0][0] + self.grace <= now:
            lsn = consumed.popleft()[1]
        return lsn

    @property
    def settled(self) -> bool:
        """Everything written was consumed and every transaction in it is confirmable."""
        return self.drained and not self.unread and not self.consumed

    def next_check_in(self, now: float) -> float | None:
        """Seconds until an observation may confirm more (None: nothing is waiting)."""
        if self.consumed:
            return max(0.0, self.consumed[0][0] + self.grace - now)
        if self.unread or not self.drained:
            return self.grace / 4  # waiting for the reader: look again soon
        return None
