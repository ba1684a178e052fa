"""The JSON (and SQL) fast path's contract, in one place: how a row change that arrives
as text skips the events and becomes the renderer's own bytes.

- A renderer offers encoders per table (`EncoderFactory`: a table and its text
  converters in, `InsertEncoders` or None out; ``pgtail.render.row_encoder`` picks the
  format's). `install_encoders` wires them into the relation cache's `TableInfo`, by
  (message byte, tuple flag).
- The wire offsets of an Insert / Update / Delete: the relation id at ``header``
  (`HEADER`, or `STREAM_HEADER` inside a streamed block, where the xid comes first),
  the tuple flag (``N``, ``O``, ``K``) at ``header + FLAG``, the tuple at
  ``header + TUPLE``.
- `row_event` turns one such payload into the renderer's line (bytes) or its event, in
  every lane: on arrival, at the commit, and in the `QuickLane` (a small transaction held
  as its payloads; `quick_events` makes its events at once). Consecutive lines of one
  table and op travel as `pgtail.changes.EncodedRows` (gathered by ``held.RowRun``),
  which only the renderer that supplied the encoders can render.

The assembler calls these; nothing here does I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from pgtail import pgoutput as po
from pgtail.changes.events import (
    LARGE_VALUE,
    Change,
    EncodedRows,
    Event,
    InsertEncoders,
    Message,
    Op,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.changes.held import RECORD_OVERHEAD
from pgtail.changes.tables import (
    VALUE_ERRORS,
    Converter,
    LineEncoder,
    TableInfo,
    convert_payload,
    new_change,
)
from pgtail.errors import DecodeError
from pgtail.values import decodes_text

# What a renderer gives the assembler: a table's encoders for changes whose values
# arrived as text, or None (no fast path for that table)
EncoderFactory = Callable[[Table, Sequence[Converter]], InsertEncoders | None]

# Where things are in an Insert / Update / Delete payload
HEADER = 1  # the relation id: after the message byte
STREAM_HEADER = 5  # ... and, inside a streamed block, after the xid
FLAG = 4  # the tuple's flag (N, O, K), after the relation id
TUPLE = 5  # the tuple itself
unpack_relation_id = struct.Struct("!I").unpack_from

# The quick lane (`quick_commit`) takes a Begin of pgoutput's usual length
BEGIN_LENGTH = po.BEGIN_LENGTH
# A transaction is held in the quick lane up to this many bytes of payloads (and
# QUICK_ROWS row changes); past either it is fed the general way.
QUICK_BYTES = 1 << 20

# A raw transaction of at most this many row changes is made into events at its commit
# at once, in a list (see quick_events): below held's run length, one run per table.
QUICK_ROWS = 64

_INSERT = po.MSG_INSERT
_UPDATE = po.MSG_UPDATE
_DELETE = po.MSG_DELETE
ROW_CHANGES = frozenset((_INSERT, _UPDATE, _DELETE))
OP_OF_BYTE: dict[int, Op] = {_INSERT: "insert", _UPDATE: "update", _DELETE: "delete"}
_NEW_TUPLE = ord("N")
_OLD_TUPLE = ord("O")  # a Delete's / Update's whole old row (replica identity full)
_KEY_TUPLE = ord("K")  # its old key, the other columns sent as NULL
_decode_tuple = po.decode_tuple


_COMMIT = po.MSG_COMMIT
# exhausted for good: safe to hand out again and again; `Assembler.feed` returns this very
# object when the payload completes nothing (most do), so a caller may test for it with ``is``
NO_EVENTS: Iterator[Any] = iter(())


class QuickLane:
    """The assembler's small-transaction lane: a transaction that so far came as a Begin
    (of `BEGIN_LENGTH`) and row changes only, held as its payloads, made into events at
    its Commit by `quick_commit`. Anything else in it (a Relation, an Origin, too many or
    too large changes, a Commit it declines) ends it: `leave` hands back what it holds,
    for the assembler to feed the general way as if the lane had never held it.

    ``records`` is None while no transaction is in the lane (the assembler tests it).
    """

    __slots__ = ("begin", "max_bytes", "max_rows", "records", "size")

    def __init__(self, max_rows: int, max_bytes: int) -> None:
        self.records: list[bytes] | None = None
        self.begin = b""
        self.size = 0  # bytes held (payloads and their per-record overhead)
        # Bounds under which the general way, fed what the lane holds, would only hold
        # it (no conversion on arrival, no spill): leaving the lane then does just that.
        self.max_rows = max_rows
        self.max_bytes = max_bytes

    def enter(self, begin: bytes) -> bool:
        """Take a Begin (of a plain transaction, none open): True if the lane holds it."""
        if len(begin) != BEGIN_LENGTH:
            return False
        self.begin = begin
        self.records = []
        self.size = 0
        return True

    def offer(
        self, first: int, payload: bytes, tables: dict[int, TableInfo]
    ) -> Iterator[Event] | None:
        """The next payload of the transaction in the lane: NO_EVENTS for a row change it
        holds, the transaction's events for its Commit, None when the lane must be left
        (see `leave`)."""
        records = self.records
        assert records is not None
        if first in ROW_CHANGES:
            if len(records) < self.max_rows:
                size = self.size + len(payload) + RECORD_OVERHEAD
                if size <= self.max_bytes:
                    records.append(payload)
                    self.size = size
                    return NO_EVENTS
        elif first == _COMMIT:
            events = quick_commit(self.begin, records, payload, tables)
            if events is not None:
                self.records = None
                return iter(events)
        return None

    def leave(self) -> tuple[bytes, list[bytes]]:
        """End the lane's transaction: its Begin and the row changes held so far."""
        records, self.records = self.records, None
        assert records is not None
        return self.begin, records

    def clear(self) -> None:
        """Forget the transaction in the lane (after a reconnect)."""
        self.records = None


def quick_commit(
    begin: bytes, records: list[bytes], commit: bytes, tables: dict[int, TableInfo]
) -> list[Event] | None:
    """The events of a transaction that came as a Begin (``begin``, of `BEGIN_LENGTH`),
    row changes only (``records``) and a Commit (``commit``), taken straight from the
    payloads: `quick_events` under the commit's `Transaction`. None when anything is
    unusual (a Commit of another length, a time out of range, what `quick_events`
    declines): the assembler then feeds the payloads the general way, which gives the
    same events or raises the precise error."""
    if len(commit) != po.COMMIT_LENGTH:
        return None
    _flags, commit_lsn, end_lsn, micros = po.unpack_commit(commit, 1)
    try:
        commit_time = po.pg_timestamp(micros)
    except DecodeError:  # out of range: the general way raises it
        return None
    tx = Transaction(po.unpack_begin(begin, 1)[2], commit_lsn, end_lsn, commit_time)
    return quick_events(records, tables, tx)


def install_encoders(info: TableInfo, encoders: InsertEncoders) -> None:
    """Wire a renderer's encoders for ``info``'s table into it, by (message, flag)."""
    read = po.text_tuple_reader(len(info.names))
    info.insert_line = insert_line = (read, encoders.plain, encoders.with_nulls)
    info.large_encoder = encoders.large
    by_change = info.change_lines
    if encoders.updates:  # an Update without an old row: an insert's line
        by_change[_UPDATE, _NEW_TUPLE] = insert_line
    elif encoders.update is not None:  # ... or a line of its own
        by_change[_UPDATE, _NEW_TUPLE] = (read, *encoders.update)
    if encoders.full_delete is not None:
        by_change[_DELETE, _OLD_TUPLE] = (read, *encoders.full_delete)
    if encoders.key_delete is not None:
        old_key = encoders.key_delete
        by_change[_DELETE, _KEY_TUPLE] = (read, old_key, old_key)
    if encoders.key_update is not None or encoders.full_update is not None:
        read_both = _old_and_new_reader(len(info.names))
        if encoders.key_update is not None:  # an Update with its old key (a key change)
            by_change[_UPDATE, _KEY_TUPLE] = (read_both, encoders.key_update, encoders.key_update)
        if encoders.full_update is not None:  # ... or its whole old row (FULL)
            full = encoders.full_update
            by_change[_UPDATE, _OLD_TUPLE] = (read_both, full, full)


def _old_and_new_reader(natts: int) -> Callable[[bytes, int, int], tuple[Any, ...] | None]:
    """The reader of an Update's line (see `LineEncoder`) when it holds an old tuple at
    the offset and a new one after it: ``(seq, old_values, new_values, new_kinds)`` for
    the renderer's `OldNewEncoder` when both have ``natts`` columns, the old one text or
    NULL, the new one text, NULL or unchanged TOAST; else None (the general path)."""

    def read(buf: bytes, p: int, seq: int) -> tuple[Any, ...] | None:
        try:
            old, p = _decode_tuple(buf, p, "Update.old_tuple")
            if buf[p] != _NEW_TUPLE:
                return None
            new, end = _decode_tuple(buf, p + 1, "Update.new_tuple")
            kinds = new.kinds
            if (
                end != len(buf)
                or len(kinds) != natts
                or len(old.kinds) != natts
                or old.kinds.strip(b"tn")
                or kinds.strip(b"tnu")
            ):
                return None
            return (seq, old.values, new.values, kinds)
        except Exception:  # noqa: BLE001 - the general path raises it, in its place
            return None

    return read


def encode_line(line: LineEncoder, payload: bytes, offset: int, seq: int) -> bytes | None:
    """The renderer's line for the text tuple at ``offset``: pgoutput's reader gives its
    values, the renderer's encoder (``with_nulls`` when some are NULL) the line. None when
    the reader declines the tuple (binary, unchanged TOAST, malformed) or the encoder
    raises: the general path then decides, and raises the precise error."""
    read, plain, with_nulls = line
    args = read(payload, offset, seq)
    if args is None:
        return None
    try:
        return plain(*args) if type(args) is tuple else with_nulls(*args)
    except Exception:  # noqa: BLE001 - the general path raises it, precisely
        return None


def row_event(
    info: TableInfo | None,
    tables: dict[int, TableInfo],
    first: int,
    payload: bytes,
    header: int,
    tx: Transaction,
    seq: int,
) -> bytes | Change | EncodedRows | Truncate | Message:
    """One change payload of a transaction -> the renderer's line for it (bytes), or its
    event: the one function every lane (on arrival, the quick lane, at the commit) turns
    a row payload with. ``info`` is the payload's table as ``tables`` has it (None when
    unknown, or not an Insert / Update / Delete); ``header`` the offset of the relation id
    (`HEADER`, or `STREAM_HEADER` inside a streamed block).

    The fast way first: the renderer's line when it has one (`encode_line`; an
    `EncodedRows` of the line in pieces for an Insert of a value past `LARGE_VALUE`, see
    `_large_insert`), else for an Insert of text or binary values its `Change` straight
    from the payload; anything else (NULLs or TOAST in an old row, a Truncate, a Message,
    a malformed payload, which raises its precise error there) the general way,
    `tables.convert_payload`.
    """
    if info is not None:
        try:
            flag = payload[header + FLAG]
        except IndexError:
            flag = -1
        if first == _INSERT:
            line = info.insert_line if flag == _NEW_TUPLE and len(payload) <= LARGE_VALUE else None
        else:
            line = info.change_lines.get((first, flag))
        if line is not None:  # encode_line, inline: the hot path
            read, plain, with_nulls = line
            args = read(payload, header + TUPLE, seq)
            if args is not None:
                try:
                    return plain(*args) if type(args) is tuple else with_nulls(*args)
                except Exception:  # noqa: BLE001 - the general path raises it, precisely
                    pass
        if first == _INSERT and flag == _NEW_TUPLE:
            insert = _insert(info, payload, header, tx, seq)
            if insert is not None:
                return insert
    return convert_payload(payload, first, header == STREAM_HEADER, tables, tx, seq)


def _insert(
    info: TableInfo, payload: bytes, header: int, tx: Transaction, seq: int
) -> Change | EncodedRows | bytes | None:
    """An Insert `row_event` has no line for yet: a value past `LARGE_VALUE` (in pieces,
    its line, or a `Change` of views), else its `Change` from the text or binary values;
    None leaves it to the general way."""
    try:
        if len(payload) > LARGE_VALUE:
            if info.large_encoder is not None:
                large = _large_insert(info, payload, header, tx, seq)
                if large is not None:
                    return large
            if info.insert_line is not None:
                line = encode_line(info.insert_line, payload, header + TUPLE, seq)
                if line is not None:
                    return line
            change = _large_change(info, payload, header, tx, seq)
            if change is not None:
                return change
        tup, end = _decode_tuple(payload, header + TUPLE, "Insert.new_tuple")
        if end != len(payload):
            return None
    except (struct.error, IndexError, DecodeError):
        return None
    kinds = tup.kinds
    try:
        if kinds == info.all_text:
            return info.text_insert(tup.values, tx, seq)
        if kinds == info.all_binary:
            return info.binary_insert(tup.values, tx, seq)
    except VALUE_ERRORS as exc:
        raise info.value_error(tup, "Insert.new", exc) from None
    new_row, toast = info.row(tup, "Insert.new")  # NULLs, unchanged TOAST
    return new_change("insert", info.table, tx, seq, new_row, None, None, toast)


def _large_insert(
    info: TableInfo, payload: bytes, header: int, tx: Transaction, seq: int
) -> EncodedRows | None:
    """An Insert holding a value past `LARGE_VALUE`: its line in pieces, made from its
    values as views of the payload when the renderer writes them (no value is copied
    whole, and what is written is not held: a value of V bytes costs about its payload);
    None for the usual way."""
    large = info.large_encoder
    assert large is not None
    try:
        tup, end = _decode_tuple(memoryview(payload), header + TUPLE, "Insert.new_tuple")  # type: ignore[arg-type]
        if end != len(payload) or tup.kinds.strip(b"tn"):
            return None  # binary values or unchanged TOAST: the usual way
        pieces = large(seq, tup.values)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - the usual way raises it, in its place
        return None
    if pieces is None:
        return None
    return EncodedRows(info.table, tx, seq, 1, b"", "insert", pieces)


def _large_change(
    info: TableInfo, payload: bytes, header: int, tx: Transaction, seq: int
) -> Change | None:
    """An Insert holding a value past `LARGE_VALUE`, as a `Change` (no encoder for it):
    a text value decoded straight from the payload, not copied out of it first (the
    table format shows only its head); None for the usual way."""
    try:
        tup, end = _decode_tuple(memoryview(payload), header + TUPLE, "Insert.new_tuple")  # type: ignore[arg-type]
        if end != len(payload) or tup.kinds.strip(b"tn"):
            return None
        row: dict[str, object] = {}
        for name, convert, value in zip(info.names, info.text_converters, tup.values, strict=True):
            if value is None:
                row[name] = None
            elif len(value) > LARGE_VALUE and decodes_text(convert):
                row[name] = str(value, "utf-8", "replace")  # (what the converter does)
            else:
                row[name] = convert(value.tobytes())  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - the usual way raises it, in its place
        return None
    return new_change("insert", info.table, tx, seq, row, None, None, ())


def quick_events(
    records: list[bytes], tables: dict[int, TableInfo], tx: Transaction
) -> list[Event] | None:
    """A small transaction's row-change payloads, held raw in memory: its events, made
    now, in a list -- what `Assembler._events` yields, without its per-transaction
    generators (each change by `row_event`, as in every lane). None when it holds anything
    else (a Relation, a Truncate, ...) or anything fails: `Assembler._events` then
    does it all (and raises there, when the events are taken, as for any transaction)."""
    if len(records) > QUICK_ROWS:
        return None
    unpack_uint32 = unpack_relation_id
    events: list[Event] = [TxBegin(tx)]
    lines: list[bytes] = []  # a run of encoded lines of one table and op (see RowRun)
    table: Table | None = None
    op: Op = "insert"
    first_seq = 0
    try:
        for seq, payload in enumerate(records):
            first = payload[0]
            if first not in ROW_CHANGES:
                return None
            info = tables.get(unpack_uint32(payload, HEADER)[0])
            if info is None:
                return None
            fast = row_event(info, tables, first, payload, HEADER, tx, seq)
            if type(fast) is bytes:
                line_op = OP_OF_BYTE[first]
                if info.table is not table or line_op is not op:
                    if lines:
                        events.append(
                            EncodedRows(table, tx, first_seq, len(lines), b"".join(lines), op)  # type: ignore[arg-type]
                        )
                        lines = []
                    table, op, first_seq = info.table, line_op, seq
                lines.append(fast)
            else:
                if lines:
                    events.append(
                        EncodedRows(table, tx, first_seq, len(lines), b"".join(lines), op)  # type: ignore[arg-type]
                    )
                    lines = []
                table = None
                events.append(fast)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - _events raises it, in its place
        return None
    if lines:
        events.append(EncodedRows(table, tx, first_seq, len(lines), b"".join(lines), op))  # type: ignore[arg-type]
    events.append(TxCommit(tx))
    return events
