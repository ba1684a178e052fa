"""pgoutput payloads -> transactions of change events: the `Assembler`.

Delivery model: the assembler holds each transaction until its Commit / Stream
Commit / Prepare arrives, then yields ``TxBegin, <changes...>, TxCommit`` in one go.
So every change already knows its transaction's commit LSN, end LSN and commit time,
streamed transactions need no second mechanism, and aborted (sub)transactions are
dropped before anything is rendered. Changes are decoded and converted as they
arrive (while the server is still sending the rest of the transaction) up to a
memory bound; past it the rest of the transaction is held as raw payloads, spilled
to a temporary file, and decoded at the commit (see `pgtail.changes.held`). Given a
renderer's ``encoder``, inserts whose values all arrived as text (or NULL), and the
updates and deletes it has lines for, skip the events altogether: the renderer's own
bytes for them arrive as `EncodedRows` (the fast path's contract, wire offsets
included, is `pgtail.changes.fastpath`).

No I/O: types that are not built in are looked up by the caller before the Relation
that uses them is fed (`Assembler.user_types_wanted`, `Assembler.add_user_types`).
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pgtail import pgoutput as po
from pgtail import values
from pgtail.changes.events import (
    Change,
    CommitPrepared,
    EncodedRows,
    Event,
    Message,
    RollbackPrepared,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.changes.fastpath import (
    HEADER,
    NO_EVENTS,
    OP_OF_BYTE,
    QUICK_BYTES,
    QUICK_ROWS,
    ROW_CHANGES,
    STREAM_HEADER,
    EncoderFactory,
    QuickLane,
    install_encoders,
    quick_events,
    row_event,
    unpack_relation_id,
)
from pgtail.changes.held import (
    LINE_OVERHEAD,
    RECORD_OVERHEAD,
    Held,
    OpenTx,
    RowRun,
    changes_in,
    raw_limit,
)
from pgtail.changes.tables import (
    COLUMN_COST,
    ROW_OVERHEAD,
    TableInfo,
    unknown_type_oids,
)
from pgtail.errors import DecodeError

DEFAULT_SPILL_BYTES = 64 * 1024 * 1024

# First bytes of the messages the assembler handles itself on the hot path.
_INSERT = po.MSG_INSERT
_UPDATE = po.MSG_UPDATE
_DELETE = po.MSG_DELETE
_TRUNCATE = po.MSG_TRUNCATE
_MESSAGE = po.MSG_MESSAGE
_RELATION = po.MSG_RELATION
_TYPE = po.MSG_TYPE
_BEGIN = po.MSG_BEGIN
_ROW_CHANGES = ROW_CHANGES
_HELD_AT_ONCE = _ROW_CHANGES | {_TRUNCATE}  # held without decoding

_NAME_OF_BYTE = {_INSERT: "Insert", _UPDATE: "Update", _DELETE: "Delete", _TRUNCATE: "Truncate"}

_XID = struct.Struct("!I")
_OP_OF_BYTE = OP_OF_BYTE
# A plain transaction is converted on arrival only once it has this many changes. A
# smaller one takes the server a few milliseconds to send, so converting early gains
# nothing, while its converted rows, held until the commit, would cost the cyclic
# garbage collector work (they are container objects) that raw payloads do not.
_DEFERRED_ROWS = 4096
_INFO_CACHE_SIZE = 4096  # distinct relation schemas kept for reuse
_TX_FIELDS = tuple(f.name for f in dataclasses.fields(Transaction))


class Assembler:
    """pgoutput payloads in, change events out, one whole transaction at a time.

    ``feed(payload)`` returns an iterator of the events the payload completes: nothing
    for a change inside a transaction (it is converted and held),
    ``TxBegin, changes..., TxCommit`` for a Commit / Prepare / Stream Commit / Stream
    Prepare (the part past the memory bound decoded lazily from held payloads, so a
    huge transaction is never all in memory as events), one event
    for a non-transactional Message, Commit Prepared or Rollback Prepared. Each
    returned iterator may be consumed later; it does not depend on later feeds.
    """

    def __init__(
        self,
        protocol_version: int,
        *,
        binary: bool = False,
        spill_bytes: int = DEFAULT_SPILL_BYTES,
        encoder: EncoderFactory | None = None,
        user_types: values.UserTypes | None = None,
    ) -> None:
        self.protocol_version = protocol_version
        self.binary = binary
        self.spill_bytes = spill_bytes
        # A renderer's fast path: inserts whose columns all arrived as text become lines
        # of EncodedRows instead of Changes (in streamed transactions too: a mark for
        # a subtransaction closes the run, so an abort cuts between rows).
        self.encoder = encoder
        # What the server says of types that are not built in (enums, domains, arrays of
        # them), see values.converters: handed down by the caller, which looks each type
        # up once, before the first Relation that uses it (see user_types_wanted).
        self._user_types: dict[int, values.UserType] = dict(user_types or {})
        self._asked: set[int] = set(self._user_types)
        self.decoder = po.Decoder(protocol_version)
        # relation id -> info; replaced, never mutated, so a pending replay keeps its view
        self._tables: dict[int, TableInfo] = {}
        self._type_names: dict[int, str] = {}
        self._infos: dict[tuple[Any, ...], TableInfo] = {}  # see _info_for
        self._current: OpenTx | None = None  # Begin .. Commit (or Begin Prepare .. Prepare)
        self._streams: dict[int, OpenTx] = {}  # streamed transactions by top-level xid
        self._target: OpenTx | None = None  # where held payloads go now
        self._in_stream = False
        # a small transaction, held as its payloads until its Commit (see QuickLane)
        self._quick = QuickLane(
            min(QUICK_ROWS, _DEFERRED_ROWS - 1), min(QUICK_BYTES, raw_limit(spill_bytes))
        )

    # -- public ---------------------------------------------------------------

    def open_transactions(self) -> bool:
        """True while a transaction or a streamed xid is held (not yet committed/aborted)."""
        return self._current is not None or self._quick.records is not None or bool(self._streams)

    def tables(self) -> dict[int, Table]:
        """The Table of every relation seen so far, by relation id."""
        return {rel_id: info.table for rel_id, info in self._tables.items()}

    def reset(self) -> None:
        """Forget held transactions (after a reconnect the server sends them again)."""
        for state in self._all_open():
            state.close()
        self._current = None
        self._quick.clear()
        self._streams.clear()
        self._target = None
        self._in_stream = False
        self.decoder = po.Decoder(self.protocol_version)

    def user_types_wanted(self, payload: bytes) -> list[int]:
        """The types to look up before feeding ``payload``: for a Relation message, the
        OIDs of its column types that are not built in and were not handed down (or asked
        for) before; for any other message, none. Pure: the caller does the lookup."""
        if payload[:1] != b"R":
            return []
        try:
            relation: po.Relation = po.PARSERS[_RELATION](payload, self.decoder.in_stream)  # type: ignore[assignment]
        except DecodeError:  # feed raises it, in its place
            return []
        return unknown_type_oids(relation, self._asked)

    def add_user_types(self, found: values.UserTypes, asked: Iterable[int] = ()) -> None:
        """Hand down what the server says of types that are not built in (by OID), for
        the Relations fed from now on. ``asked``: the OIDs that were looked up, found or
        not, so that a failed lookup is not asked again (those columns keep the forms
        of an unknown type: text, hex in binary mode)."""
        self._asked.update(asked)
        self._asked.update(found)
        self._user_types.update(found)

    def feed(self, payload: bytes) -> Iterator[Event]:
        """Take one pgoutput message; return the events it completes (see the class doc).

        Types a Relation uses that are not built in must be handed down first (see
        `user_types_wanted`); without them, those columns come as an unknown type's.
        """
        if not payload:
            raise DecodeError("empty pgoutput message")
        first = payload[0]
        quick = self._quick
        if quick.records is not None:  # the quick lane: Begin, row changes, Commit
            events = quick.offer(first, payload, self._tables)
            if events is not None:
                return events
            self._leave_quick()
        elif (
            first == _BEGIN
            and self._current is None
            and not self._in_stream
            and quick.enter(payload)
        ):
            return NO_EVENTS
        if first in _HELD_AT_ONCE:
            target = self._target
            if target is None:
                raise DecodeError(
                    f"{_NAME_OF_BYTE[first]} outside a transaction (no Begin or Stream Start "
                    "before it)"
                )
            in_stream = self._in_stream
            if in_stream:
                self._note_subxact(target, payload)
            if not target.raw:
                # Decode and convert now, while the server is still sending the rest of
                # the transaction; only the transaction's fields are left for the commit.
                tables = self._tables
                if target.own:
                    tables = target.view if target.view_base is tables else self._view(target)
                seq = target.count
                header = STREAM_HEADER if in_stream else HEADER
                try:
                    info = None
                    if first != _TRUNCATE:  # an Insert, Update or Delete: the hot path
                        info = tables.get(unpack_relation_id(payload, header)[0])
                    event = row_event(info, tables, first, payload, header, target.tx, seq)
                except Exception:  # noqa: BLE001 - the commit-time decode raises it, if at all
                    # decided at the commit, as before: the change may yet be dropped with
                    # a rolled-back subtransaction, and the error is the same there
                    target.go_raw(tables, self._type_names)
                else:
                    # outside the try: a failure to hold it (a full disk) is not a decode
                    # error, and the change must not be held twice
                    if type(event) is bytes:
                        target.add_line(info.table, event, _OP_OF_BYTE[first])  # type: ignore[union-attr]
                    else:
                        target.add(event, len(payload) + _event_cost(event))  # type: ignore[arg-type]
                    if target.rows_bytes > target.rows_limit and not target.make_room():
                        target.go_raw(tables, self._type_names)
                    return NO_EVENTS
            held = target.held
            held.records.append(payload)
            held.mem_bytes += len(payload) + RECORD_OVERHEAD
            if held.mem_bytes > held.limit:
                held.spill()
            if target.deferred and len(held) >= _DEFERRED_ROWS:
                self._catch_up(target)
            return NO_EVENTS
        message = self.decoder.decode(payload)
        handler = self._handlers.get(type(message))
        if handler is None:  # pragma: no cover - the decoder returns only known types
            raise DecodeError(f"unexpected message {type(message).__name__}")
        return handler(self, message, payload)

    def _leave_quick(self) -> None:
        """The transaction in the quick lane holds something else: feed what it holds
        the general way (as a Begin and changes of a deferred transaction, that only
        holds them), as if it had never been in the lane."""
        begin, quick = self._quick.leave()
        self._on_begin(self.decoder.decode(begin), begin)  # type: ignore[arg-type]
        for payload in quick:
            for _ in self.feed(payload):  # pragma: no cover - held: they complete nothing
                raise AssertionError("a held change completed events")

    # -- message handlers (arrival) ---------------------------------------------

    def _all_open(self) -> list[OpenTx]:
        found = list(self._streams.values())
        if self._current is not None:
            found.append(self._current)
        return found

    def _catch_up(self, target: OpenTx) -> None:
        """A deferred transaction grew large: convert what it holds, then the rest on arrival."""
        target.deferred = False
        try:
            rows = list(self._raw_events(target, target.tx, False, 0))
        except Exception:  # noqa: BLE001 - it stays raw; the commit raises the same error
            return
        held = target.held
        target.rows = rows
        target.count = changes_in(rows)
        target.rows_bytes = held.mem_bytes + sum(map(_event_cost, rows))
        target.held = Held(held.limit)
        held.close()
        target.raw = False
        if target.rows_bytes > target.rows_limit and not target.make_room():
            target.go_raw(self._view(target), self._type_names)

    def _view(self, target: OpenTx) -> dict[int, TableInfo]:
        """The relation cache as ``target`` sees it: the shared one under its own Relations."""
        tables = self._tables
        if target.view_base is not tables:
            target.view = {**tables, **target.own}
            target.view_base = tables
        return target.view

    def _note_subxact(self, target: OpenTx, payload: bytes) -> None:
        if len(payload) < 5:
            raise DecodeError(f"{_NAME_OF_BYTE.get(payload[0], 'message')}.xid: truncated")
        (xid,) = _XID.unpack_from(payload, 1)
        if xid != target.xid and xid not in target.subxacts:
            target.subxacts[xid] = target.mark()

    def _on_begin(self, message: po.Begin | po.BeginPrepare, payload: bytes) -> Iterator[Event]:
        if self._current is not None:
            raise DecodeError(
                f"{type(message).__name__} for xid {message.xid} while xid "
                f"{self._current.xid} has no Commit yet"
            )
        if self._in_stream:
            raise DecodeError(f"{type(message).__name__} inside a streamed transaction block")
        state = self._current = self._target = OpenTx(message.xid, self.spill_bytes, message)
        # A small transaction is sent at once, so converting it early would gain nothing;
        # it stays raw, as it costs the least held that way (see _DEFERRED_ROWS).
        state.go_raw(self._tables, self._type_names)
        state.deferred = True
        return NO_EVENTS

    def _on_commit(self, message: po.Commit, payload: bytes) -> Iterator[Event]:
        current = self._current
        if current is None or not isinstance(current.begin, po.Begin):
            raise DecodeError("Commit without a Begin before it")
        self._current = self._target = None
        tx = Transaction(
            xid=current.xid,
            commit_lsn=message.commit_lsn,
            end_lsn=message.end_lsn,
            commit_time=message.commit_time,
            origin=current.origin,
            origin_lsn=current.origin_lsn,
        )
        return self._replay(current, tx, in_stream=False)

    def _on_prepare(self, message: po.Prepare, payload: bytes) -> Iterator[Event]:
        current = self._current
        if current is None or not isinstance(current.begin, po.BeginPrepare):
            raise DecodeError("Prepare without a Begin Prepare before it")
        self._current = self._target = None
        tx = Transaction(
            xid=message.xid,
            commit_lsn=message.prepare_lsn,
            end_lsn=message.end_lsn,
            commit_time=message.prepare_time,
            origin=current.origin,
            origin_lsn=current.origin_lsn,
            gid=message.gid,
            prepared=True,
        )
        return self._replay(current, tx, in_stream=False)

    def _on_origin(self, message: po.Origin, payload: bytes) -> Iterator[Event]:
        target = self._target
        if target is not None:
            target.origin = message.name
            target.origin_lsn = message.commit_lsn or None
        return NO_EVENTS

    def _on_relation(self, message: po.Relation, payload: bytes) -> Iterator[Event]:
        info = self._info_for(message, self._type_names)
        rel_id = message.relation_id
        target = self._target
        if target is not None:
            target.own[rel_id] = info
            target.view_base = None
            if target.raw:
                target.held.append(payload)
        tables = dict(self._tables)
        tables[rel_id] = info
        self._tables = tables
        return NO_EVENTS

    def _on_type(self, message: po.Type, payload: bytes) -> Iterator[Event]:
        name = f"{message.namespace}.{message.name}" if message.namespace else message.name
        target = self._target
        if target is not None and target.raw:
            target.held.append(payload)
        type_names = dict(self._type_names)
        type_names[message.type_oid] = name
        self._type_names = type_names
        return NO_EVENTS

    def _on_message(self, message: po.LogicalMessage, payload: bytes) -> Iterator[Event]:
        target = self._target
        if message.transactional and target is not None:
            if self._in_stream:
                self._note_subxact(target, payload)
            if target.raw:
                target.held.append(payload)
            else:
                event = Message(
                    prefix=message.prefix,
                    content=message.content,
                    transactional=True,
                    lsn=message.lsn,
                    tx=target.tx,
                    seq=target.count,
                )
                target.add(event, len(payload) + ROW_OVERHEAD)
            return NO_EVENTS
        event = Message(
            prefix=message.prefix,
            content=message.content,
            transactional=message.transactional,
            lsn=message.lsn,
            tx=None,
            seq=0,
        )
        return iter((event,))

    def _on_stream_start(self, message: po.StreamStart, payload: bytes) -> Iterator[Event]:
        if self._current is not None:
            raise DecodeError(
                f"Stream Start for xid {message.xid} inside transaction {self._current.xid}"
            )
        if self._in_stream:
            raise DecodeError(f"Stream Start for xid {message.xid} before Stream Stop")
        state = self._streams.get(message.xid)
        if state is None:
            state = self._streams[message.xid] = OpenTx(message.xid, self.spill_bytes, None)
        self._target = state
        self._in_stream = True
        return NO_EVENTS

    def _on_stream_stop(self, message: po.StreamStop, payload: bytes) -> Iterator[Event]:
        if not self._in_stream:
            raise DecodeError("Stream Stop without a Stream Start before it")
        self._target = None
        self._in_stream = False
        return NO_EVENTS

    def _end_stream(self, xid: int, what: str) -> OpenTx:
        if self._in_stream:
            raise DecodeError(f"{what} for xid {xid} inside a stream block (before Stream Stop)")
        state = self._streams.pop(xid, None)
        if state is None:  # every change of it was in rolled-back subtransactions
            state = OpenTx(xid, self.spill_bytes, None)
        return state

    def _on_stream_commit(self, message: po.StreamCommit, payload: bytes) -> Iterator[Event]:
        state = self._end_stream(message.xid, "Stream Commit")
        tx = Transaction(
            xid=message.xid,
            commit_lsn=message.commit_lsn,
            end_lsn=message.end_lsn,
            commit_time=message.commit_time,
            origin=state.origin,
            origin_lsn=state.origin_lsn,
            streamed=True,
        )
        return self._replay(state, tx, in_stream=True)

    def _on_stream_prepare(self, message: po.StreamPrepare, payload: bytes) -> Iterator[Event]:
        state = self._end_stream(message.xid, "Stream Prepare")
        tx = Transaction(
            xid=message.xid,
            commit_lsn=message.prepare_lsn,
            end_lsn=message.end_lsn,
            commit_time=message.prepare_time,
            origin=state.origin,
            origin_lsn=state.origin_lsn,
            gid=message.gid,
            prepared=True,
            streamed=True,
        )
        return self._replay(state, tx, in_stream=True)

    def _on_stream_abort(self, message: po.StreamAbort, payload: bytes) -> Iterator[Event]:
        if self._in_stream:
            raise DecodeError(
                f"Stream Abort for xid {message.xid} inside a stream block (before Stream Stop)"
            )
        state = self._streams.get(message.xid)
        if state is None:
            return NO_EVENTS
        if message.subxid == message.xid:
            del self._streams[message.xid]
            state.close()
            return NO_EVENTS
        # A rolled-back subtransaction. In a stream each change carries the xid of the
        # (sub)transaction that made it (pgoutput.c: "xid = change->txn->xid"), and the
        # stream is in WAL order, so everything from the subtransaction's first record
        # up to its abort belongs to it or to its own subtransactions. Drop all of that,
        # as PostgreSQL's own apply worker does, keeping only schema messages: the
        # server will not send a Relation again in this transaction.
        start = state.subxacts.get(message.subxid)
        if start is not None:
            state.truncate(start)
            state.subxacts = {x: i for x, i in state.subxacts.items() if i < start}
        return NO_EVENTS

    def _on_commit_prepared(
        self, message: po.CommitPreparedMessage, payload: bytes
    ) -> Iterator[Event]:
        event = CommitPrepared(
            xid=message.xid,
            gid=message.gid,
            commit_lsn=message.commit_lsn,
            end_lsn=message.end_lsn,
            commit_time=message.commit_time,
        )
        return iter((event,))

    def _on_rollback_prepared(
        self, message: po.RollbackPreparedMessage, payload: bytes
    ) -> Iterator[Event]:
        event = RollbackPrepared(
            xid=message.xid,
            gid=message.gid,
            prepare_end_lsn=message.prepare_end_lsn,
            rollback_end_lsn=message.rollback_end_lsn,
            prepare_time=message.prepare_time,
            rollback_time=message.rollback_time,
        )
        return iter((event,))

    _handlers: dict[type, Callable[[Assembler, Any, bytes], Iterator[Event]]] = {
        po.Begin: _on_begin,
        po.BeginPrepare: _on_begin,
        po.Commit: _on_commit,
        po.Prepare: _on_prepare,
        po.Origin: _on_origin,
        po.Relation: _on_relation,
        po.Type: _on_type,
        po.LogicalMessage: _on_message,
        po.StreamStart: _on_stream_start,
        po.StreamStop: _on_stream_stop,
        po.StreamCommit: _on_stream_commit,
        po.StreamPrepare: _on_stream_prepare,
        po.StreamAbort: _on_stream_abort,
        po.CommitPreparedMessage: _on_commit_prepared,
        po.RollbackPreparedMessage: _on_rollback_prepared,
    }  # (row changes and Truncates never reach the decoder: feed holds them at once)

    # -- replay -------------------------------------------------------------------

    def _info_for(self, relation: po.Relation, type_names: dict[int, str]) -> TableInfo:
        """The info for a Relation message, reused while the schema is the same.

        The server sends a Relation again for every streamed transaction and after any
        invalidation of the table (ANALYZE, VACUUM, ...); building converters and row
        functions each time would cost more than the rows of a small transaction.
        """
        key = (
            relation.relation_id,
            relation.namespace,
            relation.name,
            relation.replica_identity,
            relation.columns,
            tuple(type_names.get(c.type_oid) for c in relation.columns),
        )
        info = self._infos.get(key)
        if info is None:
            info = TableInfo(relation, type_names, self._user_types)
            # (a binary stream sends no text values: nothing to encode)
            encoders = (
                self.encoder(info.table, info.text_converters)
                if self.encoder and not self.binary
                else None
            )
            if encoders is not None:
                install_encoders(info, encoders)
            if len(self._infos) >= _INFO_CACHE_SIZE:
                self._infos.clear()
            self._infos[key] = info
        return info

    def _replay(self, state: OpenTx, tx: Transaction, *, in_stream: bool) -> Iterator[Event]:
        if state.raw and not state.count:
            # nothing converted on arrival (a small transaction, held raw): no event
            # shares state.tx yet, so the commit's own Transaction serves as it is
            state.tx = tx
            if not in_stream and state.held.file is None:
                quick = quick_events(state.held.records, state.raw_tables, tx)
                if quick is not None:
                    state.held.records = []  # in memory only (no file to close): let go
                    return iter(quick)
            return self._events(state, tx, in_stream)
        # The events converted on arrival share state.tx: complete it with the fields
        # only the commit knows, before any of them is handed out (Transaction is not
        # frozen for this; see its definition). It costs nothing per row.
        settled = state.tx
        for name in _TX_FIELDS:
            setattr(settled, name, getattr(tx, name))
        state.close_run()
        if not state.raw and state.lines_file is None:
            rows = state.rows
            state.close()
            return itertools.chain((TxBegin(settled),), rows, (TxCommit(settled),))
        return self._events(state, settled, in_stream)

    def _events(self, state: OpenTx, tx: Transaction, in_stream: bool) -> Iterator[Event]:
        """The rows converted on arrival (spilled lines read back), then the raw part
        decoded now."""
        try:
            yield TxBegin(tx)
            seq = state.count
            yield from state.take_rows()
            if state.raw:
                yield from self._raw_events(state, tx, in_stream, seq)
            yield TxCommit(tx)
        finally:
            state.close()

    def _raw_events(
        self, state: OpenTx, tx: Transaction, in_stream: bool, seq: int
    ) -> Iterator[Change | EncodedRows | Truncate | Message]:
        """The payloads held after the transaction went raw, decoded in order."""
        tables = state.raw_tables
        type_names = state.raw_type_names
        tables_copied = types_copied = False
        parsers = po.PARSERS
        unpack_uint32 = unpack_relation_id
        header = STREAM_HEADER if in_stream else HEADER  # (see fastpath)
        run = RowRun()  # encoded lines not yet yielded
        for payload in state.held:
            first = payload[0]
            event: bytes | Change | EncodedRows | Truncate | Message
            if first in _ROW_CHANGES:  # the hot path
                try:
                    info = tables.get(unpack_uint32(payload, header)[0])
                except struct.error:
                    info = None
                event = row_event(info, tables, first, payload, header, tx, seq)
                if type(event) is bytes:
                    done = run.add(info.table, tx, seq, event, _OP_OF_BYTE[first])  # type: ignore[union-attr]
                    if done is not None:
                        yield done
                    seq += 1
                    continue
            elif first == _RELATION:
                rel: po.Relation = parsers[first](payload, in_stream)  # type: ignore[assignment]
                if not tables_copied:
                    tables = dict(tables)
                    tables_copied = True
                tables[rel.relation_id] = self._info_for(rel, type_names)
                continue
            elif first == _TYPE:
                typ: po.Type = parsers[first](payload, in_stream)  # type: ignore[assignment]
                if not types_copied:
                    type_names = dict(type_names)
                    types_copied = True
                type_names[typ.type_oid] = (
                    f"{typ.namespace}.{typ.name}" if typ.namespace else typ.name
                )
                continue
            else:
                event = row_event(None, tables, first, payload, header, tx, seq)
            done = run.take(tx)
            if done is not None:
                yield done
            yield event  # type: ignore[misc]
            seq += 1
        done = run.take(tx)
        if done is not None:
            yield done


def _event_cost(event: Change | EncodedRows | Truncate | Message) -> int:
    """Estimated bytes of an event converted on arrival, besides its payload's."""
    if type(event) is EncodedRows:
        return len(event.lines) + LINE_OVERHEAD * event.count
    if type(event) is not Change:
        return ROW_OVERHEAD
    rows = (event.new is not None) + (event.old is not None)
    return ROW_OVERHEAD + COLUMN_COST * len(event.table.columns) * rows
