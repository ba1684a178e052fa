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
- `fast_row` turns one such payload into the renderer's line (bytes), or an Insert's
  `Change`, or None (the general path then decodes it); `quick_events` does a small
  transaction's row changes at once. Consecutive lines of one table and op travel as
  `pgtail.changes.EncodedRows` (gathered by ``held.RowRun``), which only the renderer
  that supplied the encoders can render.

The assembler calls these; nothing here does I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from pgtail import pgoutput as po
from pgtail.changes.events import (
    LARGE_VALUE,
    Change,
    EncodedRows,
    Event,
    InsertEncoders,
    OldNewEncoder,
    Op,
    Table,
    Transaction,
    TxBegin,
    TxCommit,
)
from pgtail.changes.tables import VALUE_ERRORS, Converter, TableInfo, new_change
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
_NEW_FLAG = HEADER + FLAG  # outside a streamed block
_NEW_TUPLE_AT = HEADER + TUPLE


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
    natts = len(info.names)
    info.text_encoder = po.text_tuple_encoder(natts, encoders.plain, encoders.with_nulls)
    info.large_encoder = encoders.large
    by_change = info.change_encoders
    if encoders.updates:  # an Update without an old row: an insert's line
        by_change[_UPDATE, _NEW_TUPLE] = info.text_encoder
    elif encoders.update is not None:  # ... or a line of its own
        by_change[_UPDATE, _NEW_TUPLE] = po.text_tuple_encoder(natts, *encoders.update)
    if encoders.full_delete is not None:
        full = encoders.full_delete
        by_change[_DELETE, _OLD_TUPLE] = po.text_tuple_encoder(natts, *full)
    if encoders.key_delete is not None:
        old_key = encoders.key_delete
        by_change[_DELETE, _KEY_TUPLE] = po.text_tuple_encoder(natts, old_key, old_key)
    if encoders.key_update is not None:  # an Update with its old key (a key change)
        by_change[_UPDATE, _KEY_TUPLE] = _old_and_new(natts, encoders.key_update)
    if encoders.full_update is not None:  # ... or its whole old row (FULL)
        by_change[_UPDATE, _OLD_TUPLE] = _old_and_new(natts, encoders.full_update)


def _old_and_new(natts: int, encode: OldNewEncoder) -> po.TupleEncoder:
    """``encode(payload, offset, seq)`` of an Update with an old tuple at ``offset`` and a
    new one: ``encode``'s line when both have ``natts`` columns, the old one text or NULL,
    the new one text, NULL or unchanged TOAST; else None (the general path)."""

    def update(buf: bytes, p: int, seq: int) -> bytes | None:
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
            return encode(seq, old.values, new.values, kinds)
        except Exception:  # noqa: BLE001 - the general path raises it, in its place
            return None

    return update


def fast_row(
    info: TableInfo, first: int, payload: bytes, header: int, tx: Transaction, seq: int
) -> bytes | Change | EncodedRows | None:
    """An Insert, Update or Delete of a known table, the fast way: the renderer's line for
    it (bytes) when it has one (an `EncodedRows` of the line in pieces for an Insert of a
    value past `LARGE_VALUE`, see `_large_insert`), else for an Insert its `Change`; None
    leaves the message to `Assembler._convert` (which raises the precise error of a malformed one).

    The one copy of the hot path, for a change converted on arrival (`Assembler.feed`) and
    at the commit (`Assembler._raw_events`); ``header`` is the offset of the relation id.
    """
    try:
        flag = payload[header + FLAG]
        if first != _INSERT:
            encoders = info.change_encoders
            if not encoders:
                return None
            encode = encoders.get((first, flag))
            return None if encode is None else encode(payload, header + TUPLE, seq)
        if flag != _NEW_TUPLE:
            return None
        if len(payload) > LARGE_VALUE and info.large_encoder is not None:
            large = _large_insert(info, payload, header, tx, seq)
            if large is not None:
                return large
        encode = info.text_encoder
        if encode is not None:
            line = encode(payload, header + TUPLE, seq)
            if line is not None:
                return line
        if len(payload) > LARGE_VALUE:
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
    generators. None when it holds anything else (a Relation, a Truncate, ...), a change
    `fast_row` leaves to `Assembler._convert`, or anything fails: `Assembler._events` then
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
            info = tables.get(unpack_uint32(payload, 1)[0])
            if info is None:
                return None
            encode = info.text_encoder  # an insert's line: fast_row's first case, inline
            fast: bytes | Change | EncodedRows | None = None
            if (
                encode is not None
                and first == _INSERT
                and payload[_NEW_FLAG] == _NEW_TUPLE
                and len(payload) <= LARGE_VALUE  # (else fast_row's large-value way)
            ):
                fast = encode(payload, _NEW_TUPLE_AT, seq)
            if fast is None:
                fast = fast_row(info, first, payload, HEADER, tx, seq)
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
            elif fast is None:
                return None
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
