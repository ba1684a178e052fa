"""A bounded read of a slot through the replication protocol: the changes of the
transactions that commit in ``[start, end)``, then stop. The Spark executors read a
micro-batch with it; it never moves the slot.

``read_range(dsn, slot, start, end, RangeRead(...))`` yields the assembler's `Change`,
`Truncate` and `Message` events in commit order. On its replication connection it
first copies the slot as a TEMPORARY slot (``pg_copy_logical_replication_slot``, which
runs as SQL on a ``replication=database`` connection) and streams the copy through the
read loop of ``pgtail stream`` (`pgtail.stream.reader.Reader`): psycopg2 answers
keepalives itself and, before the first data message, moves its flush position
to the keepalive's WAL end, so streaming the slot itself could confirm past ``start``
(the slot must move only when Spark has committed the batch). The copy takes that
feedback instead and goes away with the connection; the slot keeps its position.

Where a range ends: a transaction belongs to it when its commit record starts in
``[start, end)``; a non-transactional message when its record ends in ``(start, end]``,
or when its record starts before ``end`` and ends after it (`_starts_before`: the next
range's server would skip it). The read stops at the first Begin at or past ``end``, or
once the server reports WAL at or past ``end`` with no transaction open -- it never
waits for WAL that is not there: while nothing comes, it asks the server where it is (a
keepalive) every half second, confirming nothing.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg2
import psycopg2.extras

from pgtail import catalog
from pgtail import changes as ch
from pgtail import pgoutput as po
from pgtail.stream.change_stream import ChangeStream
from pgtail.stream.connection import ConnectionLost, ServerError, open_replication
from pgtail.stream.policy import StreamPolicy
from pgtail.stream.reader import AskPosition, Reader, TypeLookup, stream_error
from pgtail.stream.writer import Batch
from pgtail.values import Converter

# Begin: byte 'B', then (final LSN, commit time, xid); the final LSN is the commit record's
_UNPACK_BEGIN = po.unpack_begin
# how often to ask the server for a keepalive while nothing comes (it tells where it is)
_ASK_EVERY = 0.5


@dataclass(frozen=True)
class RangeRead:
    """How to read a range: the START_REPLICATION options (`pgtail.stream.protocol_options`
    chooses them as for ``pgtail stream``) and the connection's manners."""

    proto_version: int
    options: Mapping[str, str] = field(default_factory=dict)
    binary: bool = False
    application_name: str = "pgtail"
    busy_timeout: float = 10.0
    status_interval: float = 10.0
    missing_hint: str | None = None
    # the assembler's fast path (`pgtail.changes.Assembler`'s ``encoder``): rows whose
    # values all arrived as text come as `EncodedRows` of the encoder's lines
    encoder: Callable[[ch.Table, Sequence[Converter]], ch.InsertEncoders | None] | None = None


def read_range(
    dsn: str,
    slot: str,
    start: int,
    end: int,
    read: RangeRead,
    *,
    on_position: Callable[[int], None] | None = None,
) -> Iterator[ch.Change | ch.EncodedRows | ch.Truncate | ch.Message]:
    """The changes of ``slot`` whose transactions commit in ``[start, end)`` (and the
    non-transactional messages of that stretch of WAL), without moving the slot.

    ``on_position`` is called with the slot's confirmed position before anything is
    read (the Spark source raises its data-loss error there). An empty range opens no
    connection.
    """
    if end <= start:
        return
    with _Reader(dsn, slot, read) as reader:
        confirmed = reader.open(start)
        if on_position is not None:
            on_position(confirmed)
        yield from reader.events(start, end)


class _Reader:
    """One replication connection streaming a temporary copy of a slot."""

    def __init__(self, dsn: str, slot: str, read: RangeRead) -> None:
        self.dsn = dsn
        self.slot = slot
        self.read = read
        self.conn: Any = None
        self.cursor: Any = None
        # a failed lookup fails the read (the task is retried), not a column's type
        self.lookup_types = TypeLookup(dsn, None, read.application_name)

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.conn is not None:
                self.conn.close()  # the temporary copy goes with it
        self.conn = self.cursor = None
        self.lookup_types.close()

    def open(self, start: int) -> int:
        """Connect, copy the slot, START_REPLICATION of the copy at ``start``; return the
        slot's confirmed position (the copy's)."""
        self.conn = open_replication(self.dsn, self.read.application_name)
        self.cursor = self.conn.cursor()
        copy = f"pgtail_read_{os.getpid()}_{uuid.uuid4().hex[:12]}"
        confirmed = catalog.copy_slot_for_reading(
            self.cursor,
            self.slot,
            copy,
            self.read.busy_timeout,
            missing_hint=self.read.missing_hint,
        )
        try:
            self.cursor.start_replication(
                slot_name=copy,
                slot_type=psycopg2.extras.REPLICATION_LOGICAL,
                start_lsn=start,
                options=dict(self.read.options),
                decode=False,
                status_interval=max(1, int(self.read.status_interval)),
            )
        except psycopg2.Error as exc:
            raise catalog.translate_replication_error(exc, self.slot) from None
        return confirmed

    def messages(self, end: int) -> Iterator[bytes]:
        """Every payload until the server is at ``end`` with no transaction open (the
        caller stops earlier at a Begin past the end)."""
        reader = Reader(self.conn, self.cursor, AskPosition(_ASK_EVERY), wait_limit=_ASK_EVERY)
        begin, commit = po.MSG_BEGIN, po.MSG_COMMIT
        in_tx = False
        try:
            for msg in reader.messages():
                if msg is None:
                    if not in_tx and reader.wal_end >= end:
                        return
                    continue
                payload = msg.payload
                kind = payload[0]
                if kind == begin:
                    in_tx = True
                elif kind == commit:
                    in_tx = False
                yield payload
        except (ConnectionLost, ServerError) as exc:
            raise stream_error(exc, self.slot) from None

    def events(
        self, start: int, end: int
    ) -> Iterator[ch.Change | ch.EncodedRows | ch.Truncate | ch.Message]:
        """Drive a change stream (`ChangeStream`, which asks for the user types a Relation
        uses) over the payloads, keeping what belongs to ``[start, end)``."""
        assembler = ch.Assembler(
            self.read.proto_version, binary=self.read.binary, encoder=self.read.encoder
        )
        batches: list[Batch] = []
        stream = ChangeStream(assembler, StreamPolicy(), batches.append, keep_empty=True)
        begin = po.MSG_BEGIN
        feed = stream.feed
        for payload in self.messages(end):
            if payload[0] == begin and _UNPACK_BEGIN(payload, 1)[0] >= end:
                break  # commits from here on belong to later ranges
            wanted = feed(payload)
            if wanted:  # a Relation: look up the types it uses first
                stream.add_user_types(self.lookup_types(wanted), wanted)
            # The stream hands over a batch once it holds `BATCH_SIZE` items (or
            # transactions), not after each payload: no batch per small transaction.
            # What follows an event that ends the range is never yielded.
            if batches and (yield from self._in_range(batches, start, end)):
                return
        stream.drained()
        yield from self._in_range(batches, start, end)

    def _in_range(
        self, batches: list[Batch], start: int, end: int
    ) -> Generator[ch.Change | ch.EncodedRows | ch.Truncate | ch.Message, None, bool]:
        """The changes of ``batches`` (emptied) that belong to the range; True once the
        range is over."""
        Change, Encoded, Truncate, Message = ch.Change, ch.EncodedRows, ch.Truncate, ch.Message
        items = [item for batch in batches for item in batch.items]
        batches.clear()
        for event in items:
            cls = type(event)
            if cls is Change or cls is Encoded or cls is Truncate:
                yield event
            elif cls is Message:
                message: ch.Message = event
                if message.tx is not None:
                    yield message
                elif message.lsn <= end:
                    if message.lsn > start:
                        yield message
                else:
                    if _starts_before(self.dsn, self.slot, self.read, end, message.lsn):
                        yield message
                    return True
            elif cls is ch.TxBegin and event.tx.commit_lsn >= end:
                return True  # a streamed transaction committing past the end
        return False


def _starts_before(dsn: str, slot: str, read: RangeRead, end: int, message_end: int) -> bool:
    """Whether the non-transactional message whose record ends at ``message_end`` (past
    ``end``) starts before ``end``: a stream started at ``end`` does not send it then.

    Its first event tells: this message (it starts at or past ``end``), or anything else
    (it straddles ``end``, so it is this range's). Rare: only when ``end`` falls inside
    or just before such a message.
    """
    with _Reader(dsn, slot, read) as probe:
        probe.open(end)
        assembler = ch.Assembler(read.proto_version, binary=read.binary)
        for payload in probe.messages(message_end):
            if payload[0] in (po.MSG_BEGIN, po.MSG_STREAM_COMMIT):
                return True
            for event in assembler.feed(payload):
                if isinstance(event, ch.Message) and event.tx is None:
                    return event.lsn != message_end
        return True
