"""The change stream: replication payloads in, batches of events out -- sans-IO.

One object that every event-producing read loop drives: it decodes and assembles the
payloads it is fed (`pgtail.changes.Assembler`), filters the events, applies the stream
policy (`StreamPolicy`: ``--end``, skipping what was written already, ``--max-changes``)
once, and cuts the events into batches for the writer. It opens no connection and reads
no socket: the caller reads a payload and feeds it, and the object tells the caller what
it needs from outside, the way h11 answers ``NEED_DATA``:

- `ChangeStream.feed` returns the OIDs of the user types a Relation uses (looked up on
  no connection yet) instead of taking the payload; the caller looks them up and hands
  them down with `ChangeStream.add_user_types`, which then takes the held payload;
- when the socket has nothing more for now the caller says so (`drained`): the batch
  being filled is handed over, so a batch holds what one read burst delivered;
- when the run must stop (``--end`` or ``--max-changes`` reached), `feed` hands over
  what is taken and raises `Stop` naming the reason.

Batches go to ``hand_off`` as soon as they are closed (a large transaction is never held
whole in memory). A batch ends at a transaction boundary where it can: when one is cut
inside a transaction, the whole transactions go first, as one batch ending at their end
(what ``--output``'s state file and a reconnect resume from), the started one after it,
confirming nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NoReturn

from pgtail import changes as ch
from pgtail import pgoutput as po
from pgtail.stream.config import StopReason
from pgtail.stream.policy import StreamPolicy
from pgtail.stream.writer import Batch
from pgtail.values import UserTypes

_Change, _Truncate, _Message = ch.Change, ch.Truncate, ch.Message
_EncodedRows = ch.EncodedRows
_TxBegin, _TxCommit = ch.TxBegin, ch.TxCommit
_RELATION = po.MSG_RELATION


class Stop(Exception):
    """The run stops (``reason``); everything taken was handed over first."""

    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason = reason


class ChangeStream:
    """Payloads in, filtered batches of events out, under one `StreamPolicy`.

    Invariants:
    - a batch with a nonzero ``position`` ends exactly at the end of a transaction (or of
      a non-transactional message); ``confirm_lsn`` is the end of the last whole
      transaction in it;
    - a transaction ending at or before the policy's ``skip_upto`` yields nothing;
    - no more than the policy's ``max_changes`` changes are handed over in the run; a
      transaction cut by it is not confirmed (the next run writes it again, whole).
    """

    __slots__ = (
        "assembler",
        "assembler_feed",
        "filter",
        "policy",
        "hand_off",
        "batch_size",
        "room",
        "items",
        "confirm",
        "position",
        "txs",
        "nchanges",
        "whole",
        "whole_changes",
        "skipping",
        "held",
    )

    def __init__(
        self,
        assembler: ch.Assembler,
        policy: StreamPolicy,
        hand_off: Callable[[Batch], None],
        event_filter: Any = None,
    ) -> None:
        self.assembler = assembler
        self.assembler_feed = assembler.feed  # bound once: called for every payload
        self.filter = event_filter  # None: every event is kept
        self.policy = policy
        self.hand_off = hand_off
        self.batch_size = policy.batch_size
        # changes that may still be taken: the batch's count is checked against it, and
        # the policy hears of the batch's changes when the batch is handed over
        self.room = policy.room()
        # the batch being filled; ``whole``/``whole_changes``: items and changes up to the
        # end of the last transaction completed in it, which ``confirm``/``position`` name
        self.items: list[Any] = []
        self.confirm = 0
        self.position = 0
        self.txs = 0
        self.nchanges = 0
        self.whole = 0
        self.whole_changes = 0
        self.skipping = False  # inside a transaction that was written already
        self.held: bytes | None = None  # a Relation waiting for its user types

    # ------------------------------------------------------------- the caller's side

    def add_user_types(self, found: UserTypes, asked: list[int]) -> None:
        """What the caller found of the types `feed` asked for; takes the held payload."""
        self.assembler.add_user_types(found, asked)
        payload, self.held = self.held, None
        if payload is not None:
            self.feed(payload)  # (its types are asked for now: taken)

    def drained(self) -> None:
        """Nothing more to read for now: hand over the batch being filled."""
        self._flush()

    def stop(self, reason: StopReason) -> NoReturn:
        """The caller stops the run (a signal): hand over what is taken, raise `Stop`."""
        self._flush()
        raise Stop(reason)

    def open_transactions(self) -> bool:
        """Whether a transaction (or a streamed one) is open: it may still commit."""
        return self.assembler.open_transactions()

    def close(self) -> None:
        """The connection is done: changes taken but never handed over still count."""
        self.policy.took(self.nchanges)
        self.nchanges = 0

    # ------------------------------------------------------------- inside

    def _flush(self) -> None:
        items = self.items
        confirm, position = self.confirm, self.position
        if not (items or confirm or position):
            return
        whole, nchanges = self.whole, self.nchanges
        batches: tuple[Batch, ...]
        if position and whole < len(items):
            batches = (
                Batch(items[:whole], confirm, position, self.txs, self.whole_changes),
                Batch(items[whole:], 0, 0, 0, nchanges - self.whole_changes),
            )
        else:
            batches = (Batch(items, confirm, position, self.txs, nchanges),)
        self.items = []
        self.confirm = self.position = self.txs = self.nchanges = 0
        self.whole = self.whole_changes = 0
        policy = self.policy
        for batch in batches:
            policy.took(batch.changes)
        self.room = policy.room()
        hand_off = self.hand_off
        for batch in batches:
            hand_off(batch)

    def _end(self, reason: StopReason) -> NoReturn:
        self._flush()
        raise Stop(reason)

    def _stop_at_limit(self, events: Iterator[Any], complete: bool) -> NoReturn:
        """``--max-changes`` reached on a change of a transaction: stop.

        When no more of the transaction's changes would be written (``complete``: the last
        change was not cut, and only its commit, or changes the filter drops, follow), the
        transaction is complete: its commit is taken, so it is confirmed and the next run
        starts after it. Otherwise it was only partly written: confirming it would lose its
        other changes, so it is not confirmed and the next run writes it again, whole.
        """
        flt = self.filter
        if complete:
            for event in events:
                if isinstance(event, _TxCommit):
                    self.confirm = self.position = event.tx.end_lsn
                    self.txs += 1
                    self.items.append(event)
                    self.whole, self.whole_changes = len(self.items), self.nchanges
                    break
                if not isinstance(event, _Change | _Truncate | _Message | _EncodedRows):
                    break
                if flt is None or flt.apply(event) is not None:
                    break  # more of it would be written: partly written
        self._end("max_changes")

    def feed(self, payload: bytes) -> list[int] | None:
        """Take one pgoutput payload: skip, stop, filter and batch the events it completes.

        Returns None, or -- for a Relation using types not looked up yet -- their OIDs:
        the payload is held until `add_user_types` (one loop, inline: it runs for every
        payload)."""
        if payload and payload[0] == _RELATION:
            wanted = self.assembler.user_types_wanted(payload)
            if wanted:
                self.held = payload
                return wanted
        events: Iterator[Any] = self.assembler_feed(payload)
        items = self.items
        flt = self.filter
        policy = self.policy
        batch_size = self.batch_size
        skipping = self.skipping  # (kept in a local: read for every event)
        for event in events:
            cls = type(event)
            if skipping:
                if cls is _TxCommit:
                    skipping = False
                continue
            if cls is not _Change and cls is not _EncodedRows:
                if cls is _TxBegin:
                    tx = event.tx
                    if policy.past_end(tx.commit_lsn):
                        self._end("end")
                    if policy.written(tx.end_lsn):
                        skipping = True
                        continue
                elif cls is _TxCommit:  # (inline: once per transaction)
                    self.confirm = self.position = event.tx.end_lsn
                    self.txs += 1
                    last = items[-1] if items else None
                    if (
                        type(last) is _TxBegin
                        and last.tx.xid == event.tx.xid
                        and not event.tx.prepared
                    ):
                        # nothing of it to show (all filtered out, or, before PostgreSQL
                        # 15, a transaction that changed no published table): no empty
                        # begin/commit; its position still counts
                        items.pop()
                    else:
                        items.append(event)
                    self.whole, self.whole_changes = len(items), self.nchanges
                    if self.txs >= batch_size:  # empty ones add no items: bound them too
                        self._flush()
                        items = self.items
                    continue
                elif cls is ch.CommitPrepared or cls is ch.RollbackPrepared:
                    self._prepared_outcome(event)
                    continue
                elif cls is _Message and event.tx is None:
                    self._lone_message(event)
                    items = self.items
                    continue
            if flt is not None:
                kept = flt.apply(event)
                if kept is None:
                    continue
                event = kept
            if cls is _EncodedRows:
                inserts: ch.EncodedRows = event
                count = inserts.count
                cut = False
                room = self.room
                nchanges = self.nchanges
                if nchanges + count >= room:
                    inserts = inserts.head(room - nchanges)
                    cut = inserts.count < count
                    count = inserts.count
                items.append(inserts)
                nchanges += count
                self.nchanges = nchanges
                if nchanges >= room:
                    self._stop_at_limit(events, not cut)
                if nchanges >= batch_size:
                    self._flush()
                    items = self.items
                continue
            items.append(event)
            if cls is _Change or cls is _Truncate or cls is _Message:
                self.nchanges += 1
                if self.nchanges >= self.room:
                    self._stop_at_limit(events, True)
            if len(items) >= batch_size:
                self._flush()
                items = self.items
        self.skipping = skipping
        if len(items) >= batch_size:
            self._flush()
        return None

    def _prepared_outcome(self, event: ch.CommitPrepared | ch.RollbackPrepared) -> None:
        """COMMIT PREPARED / ROLLBACK PREPARED: a transaction of its own."""
        pos = event.end_lsn if isinstance(event, ch.CommitPrepared) else event.rollback_end_lsn
        policy = self.policy
        if policy.past_end(pos):
            self._end("end")
        if policy.written(pos):
            return
        self.confirm = self.position = pos
        self.txs += 1
        self.items.append(event)
        self.whole, self.whole_changes = len(self.items), self.nchanges

    def _lone_message(self, event: ch.Message) -> None:
        """A non-transactional logical message: a batch of its own."""
        lsn = event.lsn
        policy = self.policy
        if policy.past_end(lsn):
            self._end("end")
        if policy.written(lsn + 1):
            return
        self.position = lsn + 1
        flt = self.filter
        kept = flt.apply(event) if flt is not None else event
        if kept is not None:
            self.items.append(kept)
            self.nchanges += 1
        self.whole, self.whole_changes = len(self.items), self.nchanges
        self._flush()
        if policy.limit_reached:
            raise Stop("max_changes")
