"""Hand-built pgoutput messages for unit tests ("Logical Replication Message Formats").

Each builder returns the payload bytes of one message exactly as the server sends it.
``xid`` arguments add the transaction id that messages carry inside a streamed
transaction block; leave them None outside a stream. Row builders take the column
values (see :func:`tuple_data`) or TupleData bytes built already (or broken on purpose).
The integer packers below serve tests that build a malformed message by hand.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, datetime

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)

Value = bytes | None | str  # bytes: text ('t') value; None: NULL; "u": unchanged TOAST
Row = Sequence[Value | tuple[str, bytes]] | bytes  # values, or TupleData bytes as they are


def u8(value: int) -> bytes:
    return struct.pack("!B", value)


def u16(value: int) -> bytes:
    return struct.pack("!H", value)


def u32(value: int) -> bytes:
    return struct.pack("!I", value)


def i32(value: int) -> bytes:
    return struct.pack("!i", value)


def u64(value: int) -> bytes:
    return struct.pack("!Q", value)


def pg_time(when: datetime | int) -> int:
    """A datetime as PostgreSQL's microseconds since 2000-01-01 UTC; an int is taken as
    such already (for the times a datetime cannot hold, like infinity)."""
    if isinstance(when, int):
        return when
    delta = when - PG_EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def xid_prefix(xid: int | None) -> bytes:
    return b"" if xid is None else struct.pack("!I", xid)


def tuple_data(values: Row) -> bytes:
    """TupleData: bytes -> 't' value, None -> 'n', "u" -> 'u', ("b", raw) -> binary value;
    ``values`` given as bytes are TupleData already and come back unchanged."""
    if isinstance(values, bytes):
        return values
    out = [struct.pack("!h", len(values))]
    for value in values:
        if value is None:
            out.append(b"n")
        elif value == "u":
            out.append(b"u")
        elif isinstance(value, tuple):
            kind, raw = value
            out.append(kind.encode() + struct.pack("!i", len(raw)) + raw)
        elif isinstance(value, bytes):
            out.append(b"t" + struct.pack("!i", len(value)) + value)
        else:
            raise TypeError(f"bad tuple value {value!r}")
    return b"".join(out)


def begin(final_lsn: int, commit_time: datetime | int, xid: int) -> bytes:
    return b"B" + struct.pack("!QqI", final_lsn, pg_time(commit_time), xid)


def commit(commit_lsn: int, end_lsn: int, commit_time: datetime | int, flags: int = 0) -> bytes:
    return b"C" + struct.pack("!BQQq", flags, commit_lsn, end_lsn, pg_time(commit_time))


def origin(commit_lsn: int, name: str) -> bytes:
    return b"O" + struct.pack("!Q", commit_lsn) + cstring(name)


def relation(
    relation_id: int,
    namespace: str,
    name: str,
    columns: Sequence[tuple[str, int, bool] | tuple[str, int, bool, int]],
    replica_identity: str = "d",
    xid: int | None = None,
) -> bytes:
    """columns: (name, type oid, is_key[, typmod]); typmod -1 when left out.
    replica_identity: the byte as sent ('d', 'n', 'f', 'i', or any other to test refusal)."""
    out = [b"R", xid_prefix(xid), struct.pack("!I", relation_id), cstring(namespace), cstring(name)]
    out.append(replica_identity.encode() + struct.pack("!h", len(columns)))
    for col in columns:
        col_name, type_oid, is_key = col[0], col[1], col[2]
        typmod = col[3] if len(col) > 3 else -1
        out.append(struct.pack("!B", 1 if is_key else 0) + cstring(col_name))
        out.append(struct.pack("!Ii", type_oid, typmod))
    return b"".join(out)


def type_(type_oid: int, namespace: str, name: str, xid: int | None = None) -> bytes:
    return b"Y" + xid_prefix(xid) + struct.pack("!I", type_oid) + cstring(namespace) + cstring(name)


def insert(relation_id: int, values: Row, xid: int | None = None) -> bytes:
    return b"I" + xid_prefix(xid) + struct.pack("!I", relation_id) + b"N" + tuple_data(values)


def update(
    relation_id: int,
    new: Row,
    old: Row | None = None,
    old_kind: str = "K",
    xid: int | None = None,
) -> bytes:
    out = b"U" + xid_prefix(xid) + struct.pack("!I", relation_id)
    if old is not None:
        out += old_kind.encode() + tuple_data(old)
    return out + b"N" + tuple_data(new)


def delete(
    relation_id: int,
    old: Row,
    old_kind: str = "K",
    xid: int | None = None,
) -> bytes:
    return (
        b"D"
        + xid_prefix(xid)
        + struct.pack("!I", relation_id)
        + old_kind.encode()
        + tuple_data(old)
    )


def truncate(
    relation_ids: Sequence[int],
    cascade: bool = False,
    restart_identity: bool = False,
    xid: int | None = None,
) -> bytes:
    options = (1 if cascade else 0) | (2 if restart_identity else 0)
    ids = b"".join(struct.pack("!I", r) for r in relation_ids)
    return b"T" + xid_prefix(xid) + struct.pack("!IB", len(relation_ids), options) + ids


def message(
    prefix: str, content: bytes, lsn: int, transactional: bool = True, xid: int | None = None
) -> bytes:
    return (
        b"M"
        + xid_prefix(xid)
        + struct.pack("!BQ", 1 if transactional else 0, lsn)
        + cstring(prefix)
        + struct.pack("!I", len(content))
        + content
    )


def stream_start(xid: int, first_segment: bool | int) -> bytes:
    """first_segment: a bool, or any byte (a test of values the server never sends)."""
    return b"S" + struct.pack("!IB", xid, int(first_segment))


def stream_stop() -> bytes:
    return b"E"


def stream_commit(
    xid: int, commit_lsn: int, end_lsn: int, commit_time: datetime | int, flags: int = 0
) -> bytes:
    return b"c" + struct.pack("!IBQQq", xid, flags, commit_lsn, end_lsn, pg_time(commit_time))


def stream_abort(
    xid: int, subxid: int, abort_lsn: int | None = None, abort_time: datetime | int | None = None
) -> bytes:
    out = b"A" + struct.pack("!II", xid, subxid)
    if abort_lsn is not None and abort_time is not None:
        out += struct.pack("!Qq", abort_lsn, pg_time(abort_time))
    return out


def begin_prepare(
    prepare_lsn: int, end_lsn: int, prepare_time: datetime | int, xid: int, gid: str
) -> bytes:
    return (
        b"b" + struct.pack("!QQqI", prepare_lsn, end_lsn, pg_time(prepare_time), xid) + cstring(gid)
    )


def _prepare_like(
    byte: bytes,
    prepare_lsn: int,
    end_lsn: int,
    when: datetime | int,
    xid: int,
    gid: str,
    flags: int,
) -> bytes:
    return (
        byte + struct.pack("!BQQqI", flags, prepare_lsn, end_lsn, pg_time(when), xid) + cstring(gid)
    )


def prepare(
    prepare_lsn: int, end_lsn: int, prepare_time: datetime | int, xid: int, gid: str, flags: int = 0
) -> bytes:
    return _prepare_like(b"P", prepare_lsn, end_lsn, prepare_time, xid, gid, flags)


def stream_prepare(
    prepare_lsn: int, end_lsn: int, prepare_time: datetime | int, xid: int, gid: str, flags: int = 0
) -> bytes:
    return _prepare_like(b"p", prepare_lsn, end_lsn, prepare_time, xid, gid, flags)


def commit_prepared(
    commit_lsn: int, end_lsn: int, commit_time: datetime | int, xid: int, gid: str, flags: int = 0
) -> bytes:
    return _prepare_like(b"K", commit_lsn, end_lsn, commit_time, xid, gid, flags)


def rollback_prepared(
    prepare_end_lsn: int,
    rollback_end_lsn: int,
    prepare_time: datetime | int,
    rollback_time: datetime | int,
    xid: int,
    gid: str,
    flags: int = 0,
) -> bytes:
    return (
        b"r"
        + struct.pack(
            "!BQQqqI",
            flags,
            prepare_end_lsn,
            rollback_end_lsn,
            pg_time(prepare_time),
            pg_time(rollback_time),
            xid,
        )
        + cstring(gid)
    )
