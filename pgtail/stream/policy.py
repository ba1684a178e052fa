"""When a stream stops, what it skips, and how it batches: the rules, in one place.

A small pure object (no I/O, no clock, no psycopg2), like `pgtail.feedback.Feedback`:
the read loops (`--format raw` and the rest) tell it facts -- a transaction's LSNs, the
server's WAL end, how many changes they handed to the writer -- and ask it what to do:

- ``--end LSN``: a transaction that commits after LSN, or a message after it, is not
  taken; while idle, the stream is done once the server's WAL end reaches LSN and no
  transaction is open (one still open may commit at or before LSN).
- skipping what was already written: after a reconnect, and after a restart with
  ``--output`` (its state file), the server sends again what was written but not yet
  confirmed; a transaction ending at or before ``skip_upto`` is dropped.
- ``--max-changes N``: at most N changes (rows, truncates, messages) over the whole run,
  across reconnects.
- batching: a batch handed to the writer holds at most ``batch_size`` items.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

BATCH_SIZE = 512  # events per batch handed to the writer
UNLIMITED = sys.maxsize  # `StreamPolicy.room` without --max-changes


@dataclass(slots=True)
class StreamPolicy:
    """End position, skip-already-written, max-changes and batch size for one run.

    Invariants:
    - ``skip_upto`` never moves backwards: what was written stays written.
    - ``changes`` counts every change taken in this run, over every connection; once it
      reaches ``max_changes`` the run stops (`limit_reached`), and `room` never lets a
      loop take more than ``max_changes`` in all.
    """

    end_lsn: int | None = None  # --end
    max_changes: int | None = None  # --max-changes
    batch_size: int = BATCH_SIZE
    skip_upto: int = 0  # stream position up to which everything was written already
    changes: int = 0  # changes taken so far in this run

    def past_end(self, lsn: int) -> bool:
        """Whether a transaction committing at ``lsn`` (or a message at it) lies past ``--end``.

        The stream stops before it: nothing of it is taken.
        """
        end = self.end_lsn
        return end is not None and lsn > end

    def done_at(self, wal_end: int, open_transaction: bool) -> bool:
        """Nothing to read and the server is at ``wal_end``: whether ``--end`` is reached.

        Never while a transaction is open: it may still commit at or before the end.
        """
        end = self.end_lsn
        return end is not None and not open_transaction and wal_end >= end

    def written(self, position: int) -> bool:
        """Whether what ends at stream position ``position`` was written already."""
        return position <= self.skip_upto

    def resume_after(self, position: int) -> None:
        """Everything up to ``position`` is written: skip it when it is sent again."""
        if position > self.skip_upto:
            self.skip_upto = position

    def room(self) -> int:
        """How many more changes may be taken (`UNLIMITED` without ``--max-changes``)."""
        if self.max_changes is None:
            return UNLIMITED
        return self.max_changes - self.changes

    def took(self, count: int) -> None:
        """``count`` more changes were taken."""
        self.changes += count

    @property
    def limit_reached(self) -> bool:
        """Whether ``--max-changes`` changes were taken: the run stops."""
        return self.max_changes is not None and self.changes >= self.max_changes
