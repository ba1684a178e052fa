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
_NO_EVENTS = ch.NO_EVENTS


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
        "stop_before_more",
        "keep_empty",
    )

    def __init__(
        self,
        assembler: ch.Assembler,
        policy: StreamPolicy,
        hand_off: Callable[[Batch], None],
        event_filter: Any = None,
        *,
        stop_before_more: bool = False,
        keep_empty: bool = False,
    ) -> None:
        self.assembler = assembler
        self.assembler_feed = assembler.feed  # bound once: called for every payload
        self.filter = event_filter  # None: every event is kept
        self.policy = policy
        self.hand_off = hand_off
        self.batch_size = policy.batch_size
        # ``slot peek``: stop at the first change past --max-changes (not at the last one
        # it allows), so what follows the last one is shown and `Stop` says more came
        self.stop_before_more = stop_before_more and policy.max_changes is not None
        self.keep_empty = keep_empty  # ``slot peek``: show transactions with nothing shown
        # changes that may still be taken: the batch's count is checked against it, and
        # the policy hears of the batch's changes when the batch is handed over
        self.room = self._room()
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
        self.room = self._room()
        hand_off = self.hand_off
        for batch in batches:
            hand_off(batch)

    def _room(self) -> int:
        # (stopping before more: one change past the limit is seen, then taken back)
        return self.policy.room() + 1 if self.stop_before_more else self.policy.room()

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
        if self.stop_before_more:  # take the change past the limit back, and its Begin
            items = self.items
            items.pop()
            self.nchanges -= 1
            if items and type(items[-1]) is _TxBegin:
                items.pop()
            self.whole = min(self.whole, len(items))
            self.whole_changes = min(self.whole_changes, self.nchanges)
            self._end("max_changes")
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

    def feed(self, payload: bytes, lsn: int = 0) -> list[int] | None:
        """Take one pgoutput payload: skip, stop, filter and batch the events it completes
        (``lsn``, where its message starts, is for the raw mode's trace).

        Returns None, or -- for a Relation using types not looked up yet -- their OIDs:
        the payload is held until `add_user_types` (one loop, inline: it runs for every
        payload)."""
        if payload and payload[0] == _RELATION:
            wanted = self.assembler.user_types_wanted(payload)
            if wanted:
                self.held = payload
                return wanted
        events: Iterator[Any] = self.assembler_feed(payload)
        if events is _NO_EVENTS:  # most payloads (a Begin, a change held till its Commit)
            return None
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
                        and not self.keep_empty
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
        if self.nchanges >= self.room:
            self._stop_at_limit(iter(()), True)
        self._flush()


class RawChangeStream:
    """``--format raw``: the change stream's raw mode -- payloads in, batches of
    ``(message, lsn)`` items out, every message decoded field by field (no assembler, no
    filter), under the same `StreamPolicy` and with the same caller's side as
    `ChangeStream` (`feed`, `drained`, `stop`, `open_transactions`, `close`).

    What was written is skipped when the server sends it again after a reconnect (a
    crash rewinds the slot): transactions by their commit, prepared ones by their
    PREPARE, non-transactional messages by their LSN. The chunks of a streamed
    (in-progress) transaction come before its commit says where it ends: those are
    shown again.

    ``stop_before_more`` (``slot peek``): with ``--max-changes``, the stream stops at the
    first change or Begin once the limit is taken -- what follows the last change (the
    rest of its transaction) is still shown -- and `Stop` then says more were there.
    """

    __slots__ = (
        "decode",
        "policy",
        "hand_off",
        "stop_before_more",
        "items",
        "confirm",
        "position",
        "txs",
        "in_tx",
        "skipping",
        "streamed",
    )

    def __init__(
        self,
        proto_version: int,
        policy: StreamPolicy,
        hand_off: Callable[[Batch], None],
        *,
        stop_before_more: bool = False,
    ) -> None:
        self.decode = po.Decoder(proto_version).decode
        self.policy = policy
        self.hand_off = hand_off
        self.stop_before_more = stop_before_more and policy.max_changes is not None
        self.items: list[Any] = []
        self.confirm = 0
        self.position = 0
        self.txs = 0
        self.in_tx = False
        self.skipping = False  # inside a transaction this run wrote already
        self.streamed: set[int] = set()

    def add_user_types(self, found: UserTypes, asked: list[int]) -> None:
        """Never asked for: the raw trace shows type OIDs as they are."""

    def drained(self) -> None:
        """Nothing more to read for now: hand over the batch being filled."""
        self._flush()

    def stop(self, reason: StopReason) -> NoReturn:
        self._end(reason)

    def open_transactions(self) -> bool:
        return self.in_tx or bool(self.streamed)

    def close(self) -> None:
        """(Every change is counted as it is taken.)"""

    def _flush(self) -> None:
        items = self.items
        if items:
            confirm = self.confirm
            self.hand_off(Batch(items, confirm, max(confirm, self.position), self.txs, len(items)))
            self.items, self.confirm, self.position, self.txs = [], 0, 0, 0

    def _end(self, reason: StopReason) -> NoReturn:
        self._flush()
        raise Stop(reason)

    def feed(self, payload: bytes, lsn: int = 0) -> None:
        """Take one payload (its message starts at ``lsn``): skip, stop or batch it."""
        message = self.decode(payload)
        if self.skipping:
            if isinstance(message, po.Commit | po.Prepare):
                self.skipping = False
            return
        policy = self.policy
        written = policy.written
        if isinstance(message, po.Begin | po.BeginPrepare):
            if policy.past_end(getattr(message, "final_lsn", 0)):
                self._end("end")
            # a commit record before a written position ends before it too
            if written(message.final_lsn + 1 if isinstance(message, po.Begin) else message.end_lsn):
                self.skipping = True
                return
            if self.stop_before_more and policy.limit_reached:
                self._end("max_changes")
            self.in_tx = True
        elif isinstance(message, po.CommitPreparedMessage | po.RollbackPreparedMessage):
            if written(
                message.end_lsn
                if isinstance(message, po.CommitPreparedMessage)
                else message.rollback_end_lsn
            ):
                return
        elif isinstance(message, po.LogicalMessage) and not message.transactional:
            if written(message.lsn + 1):
                return
            self.position = max(self.position, message.lsn + 1)
        elif isinstance(message, po.StreamStart):
            self.streamed.add(message.xid)
        elif isinstance(message, po.StreamAbort) and message.xid == message.subxid:
            self.streamed.discard(message.xid)
        is_change = policy.max_changes is not None and isinstance(
            message, po.Insert | po.Update | po.Delete | po.TruncateMessage | po.LogicalMessage
        )
        if is_change and self.stop_before_more and policy.limit_reached:
            self._end("max_changes")
        items = self.items
        items.append((message, lsn))
        done: int | None = None
        if isinstance(message, po.Commit | po.Prepare | po.CommitPreparedMessage):
            done = message.end_lsn
            self.in_tx = False
        elif isinstance(message, po.StreamCommit | po.StreamPrepare):
            done = message.end_lsn
            self.streamed.discard(message.xid)
        elif isinstance(message, po.RollbackPreparedMessage):
            done = message.rollback_end_lsn
        if done is not None:
            self.confirm = max(self.confirm, done)
            self.txs += 1
        if len(items) >= policy.batch_size:
            self._flush()
        if is_change:
            policy.took(1)
            if policy.limit_reached and not self.stop_before_more:
                self._end("max_changes")
