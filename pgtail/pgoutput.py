"""Sans-IO decoder of PostgreSQL's pgoutput logical replication protocol (versions 1-4).

Bytes in, one frozen message object out: no sockets, no psycopg2, no clock.
Field comments quote the protocol documentation ("Logical Replication Message Formats").

The message classes are a contract other layers build on. Below them: one parse
function per message type, a dispatch table keyed by the type byte (`PARSERS`), the
pure `parse()`, the stateful `Decoder`, `decode_tuple()` and `pg_timestamp()`.

Decisions the wire format leaves to the reader:
- Inside a streamed transaction (between Stream Start and Stream Stop) Relation, Type,
  Insert, Update, Delete, Truncate and Message start with an Int32 xid; the bytes do not
  say so, the caller does (``in_stream``, tracked by `Decoder`).
- Stream Abort has abort_lsn and abort_time only in protocol 4 with streaming =
  parallel, which the message does not announce: 8 bytes after the type byte mean
  without them, 24 with them. `Decoder` below version 4 accepts only the short form.
- `parse()` accepts every message of every version; `Decoder(protocol_version)` refuses
  messages its version cannot carry (stream messages in 1, two-phase messages in 1-2).
- Every read is bounds-checked: truncated input, unknown bytes, invalid UTF-8 and
  trailing bytes after a complete message all raise DecodeError naming message and
  field, never IndexError / struct.error / KeyError / UnicodeDecodeError.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import CodeType, FunctionType
from typing import Any, TypeVar

from pgtail import _codegen
from pgtail.errors import ConfigurationError, DecodeError

# --- TupleData --------------------------------------------------------------

KIND_NULL = ord("n")  # "Identifies the data as NULL value."
KIND_UNCHANGED_TOAST = ord("u")  # "unchanged TOASTed value (the actual value is not sent)"
KIND_TEXT = ord("t")  # "Identifies the data as text formatted value."
KIND_BINARY = ord("b")  # "Identifies the data as binary formatted value."


@dataclass(frozen=True, slots=True)
class TupleData:
    """One row as sent on the wire: a kind byte and raw value per column.

    ``kinds[i]`` is one of KIND_NULL / KIND_UNCHANGED_TOAST / KIND_TEXT / KIND_BINARY;
    ``values[i]`` is the raw bytes for text/binary columns and None otherwise.
    """

    kinds: bytes
    values: tuple[bytes | None, ...]


# --- Messages ---------------------------------------------------------------
# ``xid`` fields marked "stream" are only present inside a streamed transaction
# (between Stream Start and Stream Stop, protocol >= 2); they are None elsewhere.


@dataclass(frozen=True, slots=True)
class Begin:
    final_lsn: int  # "The final LSN of the transaction."
    commit_time: datetime  # "Commit timestamp of the transaction."
    xid: int  # "Xid of the transaction."


@dataclass(frozen=True, slots=True)
class Commit:
    flags: int  # "Flags; currently unused."
    commit_lsn: int  # "The LSN of the commit."
    end_lsn: int  # "The end LSN of the transaction."
    commit_time: datetime  # "Commit timestamp of the transaction."


@dataclass(frozen=True, slots=True)
class Origin:
    commit_lsn: int  # "The LSN of the commit on the origin server."
    name: str  # "Name of the origin."


@dataclass(frozen=True, slots=True)
class RelationColumn:
    flags: int  # "0 or 1: marks the column as part of the key."
    name: str
    type_oid: int  # "OID of the column's data type."
    type_modifier: int  # "Type modifier of the column (atttypmod)."

    @property
    def is_key(self) -> bool:
        return bool(self.flags & 1)


@dataclass(frozen=True, slots=True)
class Relation:
    xid: int | None  # stream
    relation_id: int  # "OID of the relation."
    namespace: str  # "Namespace (empty string for pg_catalog)."
    name: str  # "Relation name."
    replica_identity: str  # one of "d" default, "n" nothing, "f" full, "i" index
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True, slots=True)
class Type:
    xid: int | None  # stream
    type_oid: int  # "OID of the data type."
    namespace: str  # "Namespace (empty string for pg_catalog)."
    name: str  # "Name of the data type."


@dataclass(frozen=True, slots=True)
class Insert:
    xid: int | None  # stream
    relation_id: int
    new: TupleData


@dataclass(frozen=True, slots=True)
class Update:
    xid: int | None  # stream
    relation_id: int
    # "K": the old tuple holds the replica identity key only;
    # "O": the old tuple is the full old row (REPLICA IDENTITY FULL); None: no old tuple sent.
    old_kind: str | None
    old: TupleData | None
    new: TupleData


@dataclass(frozen=True, slots=True)
class Delete:
    xid: int | None  # stream
    relation_id: int
    old_kind: str  # "K" or "O" as for Update
    old: TupleData


TRUNCATE_CASCADE = 1
TRUNCATE_RESTART_IDENTITY = 2


@dataclass(frozen=True, slots=True)
class Truncate:
    xid: int | None  # stream
    options: int  # "1 for CASCADE, 2 for RESTART IDENTITY"
    relation_ids: tuple[int, ...]

    @property
    def cascade(self) -> bool:
        return bool(self.options & TRUNCATE_CASCADE)

    @property
    def restart_identity(self) -> bool:
        return bool(self.options & TRUNCATE_RESTART_IDENTITY)


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    xid: int | None  # stream
    transactional: bool  # "Flags; 1 if the logical decoding message is transactional"
    lsn: int  # "The LSN of the logical decoding message."
    prefix: str
    content: bytes


@dataclass(frozen=True, slots=True)
class StreamStart:
    xid: int
    first_segment: bool  # "1 if the first stream segment for this XID"


@dataclass(frozen=True, slots=True)
class StreamStop:
    pass


@dataclass(frozen=True, slots=True)
class StreamCommit:
    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: datetime


@dataclass(frozen=True, slots=True)
class StreamAbort:
    xid: int  # "Xid of the transaction."
    # "Xid of the subtransaction (will be same as xid of the transaction for top-level)."
    subxid: int
    abort_lsn: int | None  # protocol 4 with parallel streaming only
    abort_time: datetime | None  # protocol 4 with parallel streaming only


@dataclass(frozen=True, slots=True)
class BeginPrepare:
    prepare_lsn: int
    end_lsn: int
    prepare_time: datetime
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class Prepare:
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_time: datetime
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class CommitPrepared:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: datetime
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class RollbackPrepared:
    flags: int
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_time: datetime
    rollback_time: datetime
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class StreamPrepare:
    flags: int
    prepare_lsn: int
    end_lsn: int
    prepare_time: datetime
    xid: int
    gid: str


Message = (
    Begin
    | Commit
    | Origin
    | Relation
    | Type
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
    | BeginPrepare
    | Prepare
    | CommitPrepared
    | RollbackPrepared
    | StreamPrepare
)


# =============================================================================
# Parsing
# =============================================================================
#
# Every parse function takes the whole payload (``bytes``; the first byte is the
# message type) and the in-stream flag, and returns one message object. Reads go
# through module-level precompiled structs; a short read, an unexpected byte or
# bytes left over after the last field raise DecodeError naming message and field.

# Message type bytes ("Byte1('B') Identifies the message as a begin message.", ...).
MSG_BEGIN = ord("B")
MSG_COMMIT = ord("C")
MSG_ORIGIN = ord("O")
MSG_RELATION = ord("R")
MSG_TYPE = ord("Y")
MSG_INSERT = ord("I")
MSG_UPDATE = ord("U")
MSG_DELETE = ord("D")
MSG_TRUNCATE = ord("T")
MSG_MESSAGE = ord("M")
MSG_STREAM_START = ord("S")
MSG_STREAM_STOP = ord("E")
MSG_STREAM_COMMIT = ord("c")
MSG_STREAM_ABORT = ord("A")
MSG_BEGIN_PREPARE = ord("b")
MSG_PREPARE = ord("P")
MSG_COMMIT_PREPARED = ord("K")
MSG_ROLLBACK_PREPARED = ord("r")
MSG_STREAM_PREPARE = ord("p")

# Tuple markers inside Insert / Update / Delete.
TUPLE_NEW = ord("N")  # "Identifies the following TupleData message as a new tuple."
TUPLE_KEY = ord("K")  # "... as a key." (replica identity DEFAULT / USING INDEX)
TUPLE_OLD = ord("O")  # "... as an old tuple." (replica identity FULL)

REPLICA_IDENTITIES = frozenset("dnfi")  # relreplident: default, nothing, full, index

# The lowest protocol version that can carry each message type.
MIN_PROTOCOL_VERSION = {
    MSG_BEGIN: 1,
    MSG_COMMIT: 1,
    MSG_ORIGIN: 1,
    MSG_RELATION: 1,
    MSG_TYPE: 1,
    MSG_INSERT: 1,
    MSG_UPDATE: 1,
    MSG_DELETE: 1,
    MSG_TRUNCATE: 1,
    MSG_MESSAGE: 1,
    MSG_STREAM_START: 2,
    MSG_STREAM_STOP: 2,
    MSG_STREAM_COMMIT: 2,
    MSG_STREAM_ABORT: 2,
    MSG_BEGIN_PREPARE: 3,
    MSG_PREPARE: 3,
    MSG_COMMIT_PREPARED: 3,
    MSG_ROLLBACK_PREPARED: 3,
    MSG_STREAM_PREPARE: 3,
}
MAX_PROTOCOL_VERSION = 4

_MESSAGE_NAMES = {
    MSG_BEGIN: "Begin",
    MSG_COMMIT: "Commit",
    MSG_ORIGIN: "Origin",
    MSG_RELATION: "Relation",
    MSG_TYPE: "Type",
    MSG_INSERT: "Insert",
    MSG_UPDATE: "Update",
    MSG_DELETE: "Delete",
    MSG_TRUNCATE: "Truncate",
    MSG_MESSAGE: "Message",
    MSG_STREAM_START: "StreamStart",
    MSG_STREAM_STOP: "StreamStop",
    MSG_STREAM_COMMIT: "StreamCommit",
    MSG_STREAM_ABORT: "StreamAbort",
    MSG_BEGIN_PREPARE: "BeginPrepare",
    MSG_PREPARE: "Prepare",
    MSG_COMMIT_PREPARED: "CommitPrepared",
    MSG_ROLLBACK_PREPARED: "RollbackPrepared",
    MSG_STREAM_PREPARE: "StreamPrepare",
}

# --- Timestamps ---------------------------------------------------------------

PG_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_INFINITY = (1 << 63) - 1  # DT_NOEND: 'infinity'
_MINUS_INFINITY = -(1 << 63)  # DT_NOBEGIN: '-infinity'
_DATETIME_MAX = datetime.max.replace(tzinfo=UTC)
_DATETIME_MIN = datetime.min.replace(tzinfo=UTC)


def pg_timestamp(micros: int) -> datetime:
    """PostgreSQL TimestampTz (int64 microseconds since 2000-01-01 UTC) -> aware datetime.

    Exact to the microsecond. 'infinity' / '-infinity' become ``datetime.max`` /
    ``datetime.min`` (UTC). A finite value outside Python's years 1-9999 raises
    DecodeError (PostgreSQL allows up to year 294276; no commit time is there).
    """
    if micros == _INFINITY:
        return _DATETIME_MAX
    if micros == _MINUS_INFINITY:
        return _DATETIME_MIN
    try:
        return PG_EPOCH + timedelta(0, 0, micros)  # positional: faster than microseconds=
    except OverflowError:
        raise DecodeError(
            f"timestamp {micros} microseconds after 2000-01-01 is outside the range "
            "of Python's datetime (years 1-9999)"
        ) from None


def _timestamp(micros: int, where: str) -> datetime:
    try:
        return pg_timestamp(micros)
    except DecodeError as exc:
        raise DecodeError(f"{where}: {exc.message}") from None


# --- Fixed-size field groups --------------------------------------------------


class _Layout:
    """A run of fixed-size fields read with one precompiled struct.

    A short read is turned into a DecodeError naming the first field that does not fit.
    """

    __slots__ = ("message", "fields", "size", "unpack_from")

    def __init__(self, message: str, *fields: tuple[str, str]) -> None:
        compiled = struct.Struct("!" + "".join(code for _, code in fields))
        self.message = message
        self.size = compiled.size
        self.unpack_from = compiled.unpack_from
        offset = 0
        placed: list[tuple[str, int, int]] = []
        for name, code in fields:
            size = struct.calcsize("!" + code)
            placed.append((name, offset, size))
            offset += size
        self.fields = tuple(placed)

    def read(self, buf: bytes, pos: int, prefix: str | None = None) -> tuple[Any, ...]:
        try:
            return self.unpack_from(buf, pos)
        except struct.error:
            raise self.truncated(buf, pos, prefix) from None

    def truncated(self, buf: bytes, pos: int, prefix: str | None = None) -> DecodeError:
        where = prefix or self.message
        for name, offset, size in self.fields:
            start = pos + offset
            if start + size > len(buf):
                left = max(0, len(buf) - start)
                return DecodeError(
                    f"{where}.{name}: truncated (needs {size} bytes at offset {start}, {left} left)"
                )
        return DecodeError(f"{where}: truncated")  # not reached: unpack_from failed


def _xid_layout(message: str, *fields: tuple[str, str]) -> tuple[_Layout, _Layout]:
    """The layout outside a stream, and inside one (an Int32 xid first)."""
    return _Layout(message, *fields), _Layout(message, ("xid", "I"), *fields)


# Begin: Int64 final LSN; Int64 commit timestamp; Int32 xid.
_BEGIN = _Layout("Begin", ("final_lsn", "Q"), ("commit_time", "q"), ("xid", "I"))
# Commit: Int8 flags (unused); Int64 commit LSN; Int64 end LSN; Int64 commit timestamp.
_COMMIT = _Layout(
    "Commit", ("flags", "B"), ("commit_lsn", "Q"), ("end_lsn", "Q"), ("commit_time", "q")
)
# Origin: Int64 "LSN of the commit on the origin server"; String name.
_ORIGIN = _Layout("Origin", ("commit_lsn", "Q"))
# Relation: [Int32 xid]; Int32 relation OID; then strings, replica identity, columns.
_RELATION = _xid_layout("Relation", ("relation_id", "I"))
_RELATION_TAIL = _Layout("Relation", ("replica_identity", "B"), ("column_count", "H"))
# Per column: Int8 flags (1 = part of the key); String name; Int32 type OID; Int32 typmod.
_COLUMN_FLAGS = _Layout("Relation.column", ("flags", "B"))
_COLUMN_TYPE = _Layout("Relation.column", ("type_oid", "I"), ("type_modifier", "i"))
# Type: [Int32 xid]; Int32 type OID; String namespace; String name.
_TYPE = _xid_layout("Type", ("type_oid", "I"))
# Insert: [Int32 xid]; Int32 relation OID; Byte1('N'); TupleData.
_INSERT = _xid_layout("Insert", ("relation_id", "I"), ("tuple_marker", "B"))
# Update: [Int32 xid]; Int32 relation OID; [Byte1('K'|'O') TupleData]; Byte1('N') TupleData.
_UPDATE = _xid_layout("Update", ("relation_id", "I"), ("tuple_marker", "B"))
# Delete: [Int32 xid]; Int32 relation OID; Byte1('K'|'O'); TupleData.
_DELETE = _xid_layout("Delete", ("relation_id", "I"), ("tuple_marker", "B"))
# Truncate: [Int32 xid]; Int32 number of relations; Int8 options; Int32 OID per relation.
_TRUNCATE = _xid_layout("Truncate", ("relation_count", "I"), ("options", "B"))
# Message: [Int32 xid]; Int8 flags (1 = transactional); Int64 LSN; String prefix;
# Int32 content length; content.
_MESSAGE = _xid_layout("Message", ("flags", "B"), ("lsn", "Q"))
_MESSAGE_LENGTH = _Layout("Message", ("content_length", "I"))
# Stream Start: Int32 xid; Int8 "1 if the first stream segment for this XID, 0 otherwise".
_STREAM_START = _Layout("StreamStart", ("xid", "I"), ("first_segment", "B"))
# Stream Commit: Int32 xid; Int8 flags (unused); Int64 commit LSN; Int64 end LSN;
# Int64 commit timestamp.
_STREAM_COMMIT = _Layout(
    "StreamCommit",
    ("xid", "I"),
    ("flags", "B"),
    ("commit_lsn", "Q"),
    ("end_lsn", "Q"),
    ("commit_time", "q"),
)
# Stream Abort: Int32 xid; Int32 subtransaction xid; since protocol 4, when streaming =
# parallel: Int64 abort LSN; Int64 abort timestamp.
_STREAM_ABORT = _Layout("StreamAbort", ("xid", "I"), ("subxid", "I"))
_STREAM_ABORT_V4 = _Layout(
    "StreamAbort", ("xid", "I"), ("subxid", "I"), ("abort_lsn", "Q"), ("abort_time", "q")
)
# Begin Prepare: Int64 "LSN of the prepare"; Int64 "end LSN of the prepared transaction";
# Int64 prepare timestamp; Int32 xid; String GID.
_BEGIN_PREPARE = _Layout(
    "BeginPrepare", ("prepare_lsn", "Q"), ("end_lsn", "Q"), ("prepare_time", "q"), ("xid", "I")
)
# Prepare / Stream Prepare: Int8 flags (unused); Int64 prepare LSN; Int64 end LSN;
# Int64 prepare timestamp; Int32 xid; String GID.
_PREPARE = _Layout(
    "Prepare",
    ("flags", "B"),
    ("prepare_lsn", "Q"),
    ("end_lsn", "Q"),
    ("prepare_time", "q"),
    ("xid", "I"),
)
_STREAM_PREPARE = _Layout(
    "StreamPrepare",
    ("flags", "B"),
    ("prepare_lsn", "Q"),
    ("end_lsn", "Q"),
    ("prepare_time", "q"),
    ("xid", "I"),
)
# Commit Prepared: Int8 flags (unused); Int64 "LSN of the commit of the prepared
# transaction"; Int64 end LSN; Int64 commit timestamp; Int32 xid; String GID.
_COMMIT_PREPARED = _Layout(
    "CommitPrepared",
    ("flags", "B"),
    ("commit_lsn", "Q"),
    ("end_lsn", "Q"),
    ("commit_time", "q"),
    ("xid", "I"),
)
# Rollback Prepared: Int8 flags (unused); Int64 "end LSN of the prepared transaction";
# Int64 "end LSN of the rollback prepared transaction"; Int64 prepare timestamp;
# Int64 rollback timestamp; Int32 xid; String GID.
_ROLLBACK_PREPARED = _Layout(
    "RollbackPrepared",
    ("flags", "B"),
    ("prepare_end_lsn", "Q"),
    ("rollback_end_lsn", "Q"),
    ("prepare_time", "q"),
    ("rollback_time", "q"),
    ("xid", "I"),
)
_UINT32 = struct.Struct("!I").unpack_from


def _string(buf: bytes, pos: int, where: str) -> tuple[str, int]:
    """A NUL-terminated UTF-8 String; returns it and the offset after the NUL."""
    end = buf.find(b"\0", pos)
    if end < 0:
        raise DecodeError(f"{where}: truncated (no NUL-terminated string at offset {pos})")
    try:
        return buf[pos:end].decode("utf-8"), end + 1
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: invalid UTF-8 at offset {pos + exc.start}") from None


def _end(buf: bytes, pos: int, message: str) -> None:
    if pos != len(buf):
        raise DecodeError(
            f"{message}: {len(buf) - pos} bytes of trailing data after the message (offset {pos})"
        )


def _byte(buf: bytes, pos: int, where: str) -> int:
    if pos >= len(buf):
        raise DecodeError(f"{where}: truncated (needs 1 byte at offset {pos}, 0 left)")
    return buf[pos]


# --- TupleData ------------------------------------------------------------------
#
# The hot path. TupleData is "Int16 number of columns; per column Byte1 kind ('n' null,
# 'u' unchanged TOAST, 't' text, 'b' binary); for 't' and 'b': Int32 length and the
# value bytes". Readers unrolled for a fixed column count (generated once per count)
# run about a third faster than a loop, and most tables are narrow; wider tuples use
# the loop. Fast paths only catch failures; _tuple_error re-walks the bytes slowly to
# say exactly what is wrong.

_T = TypeVar("_T")
_UNROLL_MAX = 64
_MAX_COLUMNS = 1664  # MaxTupleAttributeNumber
_TupleReader = Callable[[bytes, int], tuple[TupleData, int]]
_tuple_readers: dict[int, _TupleReader] = {}


def _fast_constructor(cls: type[_T]) -> Callable[..., _T]:
    """A positional constructor for a frozen slots dataclass that skips ``__init__``.

    A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``;
    setting the slots directly is a third faster, which counts on the row hot path
    (TupleData, Insert, Update, Delete). Same object, same fields, same order. Without
    generated code, the class itself.
    """
    if not _codegen.enabled():
        return cls
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    args = ", ".join(names)
    body = "".join(f"    _set_{name}(obj, {name})\n" for name in names)
    source = f"def make({args}):\n    obj = _new(cls)\n{body}    return obj\n"
    namespace: dict[str, Any] = {"_new": object.__new__, "cls": cls}
    for name in names:
        namespace[f"_set_{name}"] = getattr(cls, name).__set__
    return _codegen.define(source, "make", f"pgoutput {cls.__name__} constructor", namespace)


_make_tuple: Callable[..., TupleData]
_make_insert: Callable[..., Insert]
_make_update: Callable[..., Update]
_make_delete: Callable[..., Delete]
_make_begin: Callable[..., Begin]
_make_commit: Callable[..., Commit]


@_codegen.on_reset
def _build_constructors() -> None:
    """Bind the constructors the parsers call (and forget the tuple readers and text
    tuple code built with the old ones): at import, and on `_codegen.reset`."""
    global _make_tuple, _make_insert, _make_update, _make_delete, _make_begin, _make_commit
    _make_tuple = _fast_constructor(TupleData)
    _make_insert = _fast_constructor(Insert)
    _make_update = _fast_constructor(Update)
    _make_delete = _fast_constructor(Delete)
    _make_begin = _fast_constructor(Begin)
    _make_commit = _fast_constructor(Commit)
    _tuple_readers.clear()
    _text_tuple_code.clear()


class _BadKind(Exception):
    """Internal: an unknown column kind in a fast path (turned into DecodeError)."""


def _loop_reader(natts: int) -> _TupleReader:
    """The reader of wide tuples, and of every tuple without generated code."""

    def read(buf: bytes, pos: int) -> tuple[TupleData, int]:
        kinds = bytearray()
        values: list[bytes | None] = []
        for _ in range(natts):
            kind = buf[pos]
            kinds.append(kind)
            if kind == 116 or kind == 98:  # t, b
                start = pos + 5
                pos = start + _UINT32(buf, pos + 1)[0]
                values.append(buf[start:pos])
            elif kind == 110 or kind == 117:  # n, u
                pos += 1
                values.append(None)
            else:
                raise _BadKind
        return _make_tuple(bytes(kinds), tuple(values)), pos

    return read


def _unrolled_reader(natts: int) -> _TupleReader:
    if natts == 0:
        empty = TupleData(b"", ())
        return lambda buf, pos: (empty, pos)
    lines = ["def read(buf, p):"]
    for i in range(natts):
        lines += [
            f"    k{i} = buf[p]",
            f"    if k{i} == 116 or k{i} == 98:",
            "        s = p + 5",
            "        p = s + _UINT32(buf, p + 1)[0]",
            f"        v{i} = buf[s:p]",
            f"    elif k{i} == 110 or k{i} == 117:",
            "        p += 1",
            f"        v{i} = None",
            "    else:",
            "        raise _BadKind",
        ]
    kinds = ", ".join(f"k{i}" for i in range(natts))
    values = ", ".join(f"v{i}" for i in range(natts))
    lines.append(f"    return _make_tuple(bytes(({kinds},)), ({values},)), p")
    namespace: dict[str, Any] = {
        "_UINT32": _UINT32,
        "_BadKind": _BadKind,
        "_make_tuple": _make_tuple,
    }
    reader: _TupleReader = _codegen.define(
        "\n".join(lines), "read", f"pgoutput tuple reader {natts}", namespace
    )
    return reader


def _tuple_reader(natts: int) -> _TupleReader:
    reader = _tuple_readers.get(natts)
    if reader is None:
        if natts <= _UNROLL_MAX and _codegen.enabled():
            reader = _unrolled_reader(natts)
        else:
            reader = _loop_reader(natts)
        if natts <= _MAX_COLUMNS:  # garbage counts above it are not worth remembering
            _tuple_readers[natts] = reader
    return reader


# encode(seq, v0, ..., vN) -> bytes: a renderer's encoder of one text-mode row
ValuesEncoder = Callable[..., bytes]
# encode(payload, offset, seq) -> the encoded row, or None (see text_tuple_encoder)
TupleEncoder = Callable[[bytes, int, int], "bytes | None"]
_text_tuple_code: dict[int, CodeType] = {}


def text_tuple_encoder(natts: int, plain: ValuesEncoder, with_nulls: ValuesEncoder) -> TupleEncoder:
    """A fast path for a text-mode TupleData (an Insert's or Update's new row, a Delete's
    old row or key): ``encode(buf, offset, seq)``.

    ``offset`` is where the TupleData starts (its column count). When the tuple has
    ``natts`` columns, all text or NULL, and ends where ``buf`` does, returns
    ``plain(seq, v0, ..., vN)`` with each value's bytes, or ``with_nulls(seq, ...)`` with
    None for the NULLs when there are any. Returns None for anything else: another count
    or kind (binary, unchanged TOAST), a truncated or overlong tuple, or an encoder that
    raises; the caller then takes the general path (`decode_tuple`), whose errors are
    precise. Reads and encodes in one generated function: no TupleData, no tuple of
    values, no call in between (without generated code, `_loop_text_tuple_encoder`).
    """
    if not _codegen.enabled():
        return _loop_text_tuple_encoder(natts, plain, with_nulls)
    code = _text_tuple_code.get(natts)
    if code is None:
        values = "".join(f", v{i}" for i in range(natts))
        lines = [
            "def encode(buf, p, seq):",
            "    try:",
            f"        if (buf[p] << 8 | buf[p + 1]) != {natts}:",
            "            return None",
            "        p += 2",
            "        nulls = False",
        ]
        for i in range(natts):
            lines += [
                "        k = buf[p]",
                "        if k == 116:",  # 't'
                "            s = p + 5",
                "            p = s + _UINT32(buf, p + 1)[0]",
                f"            v{i} = buf[s:p]",
                "        elif k == 110:",  # 'n'
                "            p += 1",
                f"            v{i} = None",
                "            nulls = True",
                "        else:",
                "            return None",
            ]
        lines += [
            "        if p != len(buf):",
            "            return None",
            "        if nulls:",
            f"            return with_nulls(seq{values})",
            f"        return plain(seq{values})",
            "    except Exception:",  # the general path decides, and raises precisely
            "        return None",
        ]
        code = _codegen.code_of("\n".join(lines), "encode", f"pgoutput text tuple {natts}")
        if natts <= _MAX_COLUMNS:
            _text_tuple_code[natts] = code
    namespace = {"_UINT32": _UINT32, "plain": plain, "with_nulls": with_nulls}
    encode: TupleEncoder = FunctionType(code, namespace, "encode")
    return encode


def _loop_text_tuple_encoder(
    natts: int, plain: ValuesEncoder, with_nulls: ValuesEncoder
) -> TupleEncoder:
    """`text_tuple_encoder` written as a loop: the same results, without generated code."""

    def encode(buf: bytes, p: int, seq: int) -> bytes | None:
        try:
            if (buf[p] << 8 | buf[p + 1]) != natts:
                return None
            p += 2
            nulls = False
            values: list[bytes | None] = []
            for _ in range(natts):
                kind = buf[p]
                if kind == 116:  # t
                    start = p + 5
                    p = start + _UINT32(buf, p + 1)[0]
                    values.append(buf[start:p])
                elif kind == 110:  # n
                    p += 1
                    values.append(None)
                    nulls = True
                else:
                    return None
            if p != len(buf):
                return None
            if nulls:
                return with_nulls(seq, *values)
            return plain(seq, *values)
        except Exception:  # the general path decides, and raises precisely
            return None

    return encode


_build_constructors()


def decode_tuple(buf: bytes, offset: int, where: str) -> tuple[TupleData, int]:
    """Decode the TupleData at ``offset``; return it and the offset just after it.

    ``where`` names the field for errors, e.g. ``"Update.old_tuple"``.
    """
    try:
        natts = (buf[offset] << 8) | buf[offset + 1]
        tup, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, offset + 2)
    except (IndexError, struct.error, _BadKind):
        raise _tuple_error(buf, offset, where) from None
    if pos > len(buf):
        raise _tuple_error(buf, offset, where)
    return tup, pos


def _tuple_error(buf: bytes, offset: int, where: str) -> DecodeError:
    """Walk a TupleData that failed the fast path and describe the first problem."""
    size = len(buf)
    if offset + 2 > size:
        return DecodeError(
            f"{where}: truncated (needs 2 bytes for the column count at offset {offset}, "
            f"{max(0, size - offset)} left)"
        )
    natts = (buf[offset] << 8) | buf[offset + 1]
    pos = offset + 2
    for column in range(natts):
        if pos >= size:
            return DecodeError(
                f"{where}: truncated at column {column} of {natts} (no kind byte at offset {pos})"
            )
        kind = buf[pos]
        if kind in (KIND_NULL, KIND_UNCHANGED_TOAST):
            pos += 1
        elif kind in (KIND_TEXT, KIND_BINARY):
            if pos + 5 > size:
                return DecodeError(
                    f"{where}: truncated at column {column} of {natts} (needs 4 bytes for "
                    f"the value length at offset {pos + 1}, {size - pos - 1} left)"
                )
            length = _UINT32(buf, pos + 1)[0]
            pos += 5
            if pos + length > size:
                return DecodeError(
                    f"{where}: truncated at column {column} of {natts} (value of {length} "
                    f"bytes at offset {pos}, {size - pos} left)"
                )
            pos += length
        else:
            return DecodeError(
                f"{where}: column {column} has unknown kind byte 0x{kind:02x} at offset {pos} "
                "(expected n, u, t or b)"
            )
    return DecodeError(f"{where}: malformed TupleData at offset {offset}")


# --- Messages -------------------------------------------------------------------


# Begin and Commit come with every transaction (one each per row in autocommit
# workloads), so they skip the generic helpers when the length is right.

_BEGIN_LENGTH = 1 + _BEGIN.size
_BEGIN_UNPACK = _BEGIN.unpack_from
_COMMIT_LENGTH = 1 + _COMMIT.size
_COMMIT_UNPACK = _COMMIT.unpack_from


def _begin(buf: bytes, in_stream: bool) -> Begin:
    if len(buf) != _BEGIN_LENGTH:
        _BEGIN.read(buf, 1)
        _end(buf, _BEGIN_LENGTH, "Begin")
    final_lsn, micros, xid = _BEGIN_UNPACK(buf, 1)
    try:
        commit_time = PG_EPOCH + timedelta(0, 0, micros)
    except OverflowError:  # infinity, or out of range
        commit_time = _timestamp(micros, "Begin.commit_time")
    return _make_begin(final_lsn, commit_time, xid)


def _commit(buf: bytes, in_stream: bool) -> Commit:
    if len(buf) != _COMMIT_LENGTH:
        _COMMIT.read(buf, 1)
        _end(buf, _COMMIT_LENGTH, "Commit")
    flags, commit_lsn, end_lsn, micros = _COMMIT_UNPACK(buf, 1)
    try:
        commit_time = PG_EPOCH + timedelta(0, 0, micros)
    except OverflowError:  # infinity, or out of range
        commit_time = _timestamp(micros, "Commit.commit_time")
    return _make_commit(flags, commit_lsn, end_lsn, commit_time)


def _origin(buf: bytes, in_stream: bool) -> Origin:
    (commit_lsn,) = _ORIGIN.read(buf, 1)
    name, pos = _string(buf, 1 + _ORIGIN.size, "Origin.name")
    _end(buf, pos, "Origin")
    return Origin(commit_lsn, name)


def _relation(buf: bytes, in_stream: bool) -> Relation:
    layout = _RELATION[in_stream]
    if in_stream:
        xid, relation_id = layout.read(buf, 1)
    else:
        xid = None
        (relation_id,) = layout.read(buf, 1)
    namespace, pos = _string(buf, 1 + layout.size, "Relation.namespace")
    name, pos = _string(buf, pos, "Relation.name")
    identity, column_count = _RELATION_TAIL.read(buf, pos)
    replica_identity = chr(identity)
    if replica_identity not in REPLICA_IDENTITIES:
        raise DecodeError(
            f"Relation.replica_identity: unknown value 0x{identity:02x} at offset {pos} "
            "(expected d, n, f or i)"
        )
    pos += _RELATION_TAIL.size
    columns = []
    for index in range(column_count):
        where = f"Relation.columns[{index}]"
        (flags,) = _COLUMN_FLAGS.read(buf, pos, where)
        column_name, pos = _string(buf, pos + 1, f"{where}.name")
        type_oid, type_modifier = _COLUMN_TYPE.read(buf, pos, where)
        pos += _COLUMN_TYPE.size
        columns.append(RelationColumn(flags, column_name, type_oid, type_modifier))
    _end(buf, pos, "Relation")
    return Relation(xid, relation_id, namespace, name, replica_identity, tuple(columns))


def _type(buf: bytes, in_stream: bool) -> Type:
    layout = _TYPE[in_stream]
    if in_stream:
        xid, type_oid = layout.read(buf, 1)
    else:
        xid = None
        (type_oid,) = layout.read(buf, 1)
    namespace, pos = _string(buf, 1 + layout.size, "Type.namespace")
    name, pos = _string(buf, pos, "Type.name")
    _end(buf, pos, "Type")
    return Type(xid, type_oid, namespace, name)


def _row_head(
    buf: bytes, in_stream: bool, layouts: tuple[_Layout, _Layout]
) -> tuple[int | None, int, int, int]:
    """Insert/Update/Delete head: xid (in a stream only), relation OID, tuple marker,
    and the offset after them; ``layouts`` is the message's (plain, in-stream) pair."""
    layout = layouts[1] if in_stream else layouts[0]
    try:
        fields = layout.unpack_from(buf, 1)
    except struct.error:
        raise layout.truncated(buf, 1) from None
    if in_stream:
        xid, relation_id, marker = fields
        return xid, relation_id, marker, 10
    relation_id, marker = fields
    return None, relation_id, marker, 6


def _insert_careful(buf: bytes, in_stream: bool) -> Insert:
    xid, relation_id, marker, pos = _row_head(buf, in_stream, _INSERT)
    if marker != TUPLE_NEW:
        raise _marker_error("Insert", marker, pos - 1, "N")
    new, pos = decode_tuple(buf, pos, "Insert.new_tuple")
    if pos != len(buf):
        _end(buf, pos, "Insert")
    return Insert(xid, relation_id, new)


def _update_careful(buf: bytes, in_stream: bool) -> Update:
    xid, relation_id, marker, pos = _row_head(buf, in_stream, _UPDATE)
    old: TupleData | None
    if marker == TUPLE_NEW:
        old_kind = None
        old = None
    elif marker in (TUPLE_KEY, TUPLE_OLD):
        old_kind = "K" if marker == TUPLE_KEY else "O"
        old, pos = decode_tuple(buf, pos, "Update.old_tuple")
        marker = _byte(buf, pos, "Update.new_tuple_marker")
        pos += 1
        if marker != TUPLE_NEW:
            raise _marker_error("Update.new_tuple", marker, pos - 1, "N")
    else:
        raise _marker_error("Update", marker, pos - 1, "K, O or N")
    new, pos = decode_tuple(buf, pos, "Update.new_tuple")
    if pos != len(buf):
        _end(buf, pos, "Update")
    return Update(xid, relation_id, old_kind, old, new)


def _delete_careful(buf: bytes, in_stream: bool) -> Delete:
    xid, relation_id, marker, pos = _row_head(buf, in_stream, _DELETE)
    if marker == TUPLE_KEY:
        old_kind = "K"
    elif marker == TUPLE_OLD:
        old_kind = "O"
    else:
        raise _marker_error("Delete", marker, pos - 1, "K or O")
    old, pos = decode_tuple(buf, pos, "Delete.old_tuple")
    if pos != len(buf):
        _end(buf, pos, "Delete")
    return Delete(xid, relation_id, old_kind, old)


# Insert / Update / Delete are the hot path: one struct read for the fixed head
# (relation OID, tuple marker, column count), then the tuple reader directly. Any
# failure falls back to the careful parser above, which raises the precise error (a
# property test checks both agree on every input); so the fast path only has to be
# right about what it accepts.

_HEAD = struct.Struct("!IBH").unpack_from  # relation OID, tuple marker, column count
_STREAM_HEAD = struct.Struct("!IIBH").unpack_from  # xid first, inside a stream
_MARKER_HEAD = struct.Struct("!BH").unpack_from  # Update's 'N' marker after the old tuple


class _Malformed(Exception):
    """Internal: the fast path saw something the careful parser must explain."""


def _insert(buf: bytes, in_stream: bool) -> Insert:
    try:
        if in_stream:
            xid, relation_id, marker, natts = _STREAM_HEAD(buf, 1)
            pos = 12
        else:
            xid = None
            relation_id, marker, natts = _HEAD(buf, 1)
            pos = 8
        if marker != TUPLE_NEW:
            raise _Malformed
        new, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
        if pos != len(buf):
            raise _Malformed
    except (IndexError, struct.error, _BadKind, _Malformed):
        return _insert_careful(buf, in_stream)  # raises the precise DecodeError
    return _make_insert(xid, relation_id, new)


def _update(buf: bytes, in_stream: bool) -> Update:
    try:
        if in_stream:
            xid, relation_id, marker, natts = _STREAM_HEAD(buf, 1)
            pos = 12
        else:
            xid = None
            relation_id, marker, natts = _HEAD(buf, 1)
            pos = 8
        old: TupleData | None
        if marker == TUPLE_NEW:  # no old tuple
            old_kind = None
            old = None
        elif marker in (TUPLE_KEY, TUPLE_OLD):
            old_kind = "K" if marker == TUPLE_KEY else "O"
            old, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
            marker, natts = _MARKER_HEAD(buf, pos)
            if marker != TUPLE_NEW:
                raise _Malformed
            pos += 3
        else:
            raise _Malformed
        new, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
        if pos != len(buf):
            raise _Malformed
    except (IndexError, struct.error, _BadKind, _Malformed):
        return _update_careful(buf, in_stream)  # raises the precise DecodeError
    return _make_update(xid, relation_id, old_kind, old, new)


def _delete(buf: bytes, in_stream: bool) -> Delete:
    try:
        if in_stream:
            xid, relation_id, marker, natts = _STREAM_HEAD(buf, 1)
            pos = 12
        else:
            xid = None
            relation_id, marker, natts = _HEAD(buf, 1)
            pos = 8
        if marker == TUPLE_KEY:
            old_kind = "K"
        elif marker == TUPLE_OLD:
            old_kind = "O"
        else:
            raise _Malformed
        old, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
        if pos != len(buf):
            raise _Malformed
    except (IndexError, struct.error, _BadKind, _Malformed):
        return _delete_careful(buf, in_stream)  # raises the precise DecodeError
    return _make_delete(xid, relation_id, old_kind, old)


def _marker_error(where: str, marker: int, pos: int, expected: str) -> DecodeError:
    return DecodeError(
        f"{where}.tuple_marker: unexpected byte 0x{marker:02x} at offset {pos} "
        f"(expected {expected})"
    )


def _truncate(buf: bytes, in_stream: bool) -> Truncate:
    layout = _TRUNCATE[in_stream]
    if in_stream:
        xid, count, options = layout.read(buf, 1)
    else:
        xid = None
        count, options = layout.read(buf, 1)
    pos = 1 + layout.size
    if len(buf) - pos != 4 * count:
        if len(buf) - pos < 4 * count:
            raise DecodeError(
                f"Truncate.relation_ids: truncated ({count} relation OIDs need {4 * count} "
                f"bytes at offset {pos}, {len(buf) - pos} left)"
            )
        _end(buf, pos + 4 * count, "Truncate")
    relation_ids = struct.unpack_from(f"!{count}I", buf, pos)
    return Truncate(xid, options, relation_ids)


def _message(buf: bytes, in_stream: bool) -> LogicalMessage:
    layout = _MESSAGE[in_stream]
    if in_stream:
        xid, flags, lsn = layout.read(buf, 1)
    else:
        xid = None
        flags, lsn = layout.read(buf, 1)
    prefix, pos = _string(buf, 1 + layout.size, "Message.prefix")
    (length,) = _MESSAGE_LENGTH.read(buf, pos)
    pos += 4
    if pos + length > len(buf):
        raise DecodeError(
            f"Message.content: truncated (needs {length} bytes at offset {pos}, "
            f"{len(buf) - pos} left)"
        )
    content = buf[pos : pos + length]
    _end(buf, pos + length, "Message")
    return LogicalMessage(xid, bool(flags & 1), lsn, prefix, content)


def _stream_start(buf: bytes, in_stream: bool) -> StreamStart:
    xid, first_segment = _STREAM_START.read(buf, 1)
    if first_segment > 1:
        raise DecodeError(
            f"StreamStart.first_segment: unexpected value {first_segment} at offset 5 "
            "(expected 0 or 1)"
        )
    _end(buf, 1 + _STREAM_START.size, "StreamStart")
    return StreamStart(xid, first_segment == 1)


def _stream_stop(buf: bytes, in_stream: bool) -> StreamStop:
    _end(buf, 1, "StreamStop")
    return StreamStop()


def _stream_commit(buf: bytes, in_stream: bool) -> StreamCommit:
    xid, flags, commit_lsn, end_lsn, commit_time = _STREAM_COMMIT.read(buf, 1)
    _end(buf, 1 + _STREAM_COMMIT.size, "StreamCommit")
    return StreamCommit(
        xid, flags, commit_lsn, end_lsn, _timestamp(commit_time, "StreamCommit.commit_time")
    )


def _stream_abort(buf: bytes, in_stream: bool) -> StreamAbort:
    # Protocol 4 appends abort_lsn and abort_time only when the subscriber asked for
    # streaming = parallel; nothing in the message says which, so the length decides:
    # 8 bytes after the type byte -> without them, 24 -> with them.
    if len(buf) <= 1 + _STREAM_ABORT.size:
        xid, subxid = _STREAM_ABORT.read(buf, 1)
        return StreamAbort(xid, subxid, None, None)
    xid, subxid, abort_lsn, abort_time = _STREAM_ABORT_V4.read(buf, 1)
    _end(buf, 1 + _STREAM_ABORT_V4.size, "StreamAbort")
    return StreamAbort(xid, subxid, abort_lsn, _timestamp(abort_time, "StreamAbort.abort_time"))


def _stream_abort_v2(buf: bytes, in_stream: bool) -> StreamAbort:
    """Protocol versions 2 and 3: never the parallel-apply fields."""
    xid, subxid = _STREAM_ABORT.read(buf, 1)
    if len(buf) != 1 + _STREAM_ABORT.size:
        raise DecodeError(
            f"StreamAbort: {len(buf) - 9} bytes of trailing data after the message (offset 9; "
            "abort_lsn and abort_time exist only in protocol version 4)"
        )
    return StreamAbort(xid, subxid, None, None)


def _begin_prepare(buf: bytes, in_stream: bool) -> BeginPrepare:
    prepare_lsn, end_lsn, prepare_time, xid = _BEGIN_PREPARE.read(buf, 1)
    gid, pos = _string(buf, 1 + _BEGIN_PREPARE.size, "BeginPrepare.gid")
    _end(buf, pos, "BeginPrepare")
    return BeginPrepare(
        prepare_lsn, end_lsn, _timestamp(prepare_time, "BeginPrepare.prepare_time"), xid, gid
    )


def _prepare(buf: bytes, in_stream: bool) -> Prepare:
    flags, prepare_lsn, end_lsn, prepare_time, xid = _PREPARE.read(buf, 1)
    gid, pos = _string(buf, 1 + _PREPARE.size, "Prepare.gid")
    _end(buf, pos, "Prepare")
    return Prepare(
        flags, prepare_lsn, end_lsn, _timestamp(prepare_time, "Prepare.prepare_time"), xid, gid
    )


def _commit_prepared(buf: bytes, in_stream: bool) -> CommitPrepared:
    flags, commit_lsn, end_lsn, commit_time, xid = _COMMIT_PREPARED.read(buf, 1)
    gid, pos = _string(buf, 1 + _COMMIT_PREPARED.size, "CommitPrepared.gid")
    _end(buf, pos, "CommitPrepared")
    return CommitPrepared(
        flags, commit_lsn, end_lsn, _timestamp(commit_time, "CommitPrepared.commit_time"), xid, gid
    )


def _rollback_prepared(buf: bytes, in_stream: bool) -> RollbackPrepared:
    flags, prepare_end_lsn, rollback_end_lsn, prepare_time, rollback_time, xid = (
        _ROLLBACK_PREPARED.read(buf, 1)
    )
    gid, pos = _string(buf, 1 + _ROLLBACK_PREPARED.size, "RollbackPrepared.gid")
    _end(buf, pos, "RollbackPrepared")
    return RollbackPrepared(
        flags,
        prepare_end_lsn,
        rollback_end_lsn,
        _timestamp(prepare_time, "RollbackPrepared.prepare_time"),
        _timestamp(rollback_time, "RollbackPrepared.rollback_time"),
        xid,
        gid,
    )


def _stream_prepare(buf: bytes, in_stream: bool) -> StreamPrepare:
    flags, prepare_lsn, end_lsn, prepare_time, xid = _STREAM_PREPARE.read(buf, 1)
    gid, pos = _string(buf, 1 + _STREAM_PREPARE.size, "StreamPrepare.gid")
    _end(buf, pos, "StreamPrepare")
    return StreamPrepare(
        flags,
        prepare_lsn,
        end_lsn,
        _timestamp(prepare_time, "StreamPrepare.prepare_time"),
        xid,
        gid,
    )


_Parser = Callable[[bytes, bool], Message]

PARSERS: dict[int, _Parser] = {
    MSG_BEGIN: _begin,
    MSG_COMMIT: _commit,
    MSG_ORIGIN: _origin,
    MSG_RELATION: _relation,
    MSG_TYPE: _type,
    MSG_INSERT: _insert,
    MSG_UPDATE: _update,
    MSG_DELETE: _delete,
    MSG_TRUNCATE: _truncate,
    MSG_MESSAGE: _message,
    MSG_STREAM_START: _stream_start,
    MSG_STREAM_STOP: _stream_stop,
    MSG_STREAM_COMMIT: _stream_commit,
    MSG_STREAM_ABORT: _stream_abort,
    MSG_BEGIN_PREPARE: _begin_prepare,
    MSG_PREPARE: _prepare,
    MSG_COMMIT_PREPARED: _commit_prepared,
    MSG_ROLLBACK_PREPARED: _rollback_prepared,
    MSG_STREAM_PREPARE: _stream_prepare,
}
"""Message type byte -> parse function ``(payload, in_stream) -> message``."""


def _as_bytes(payload: bytes | bytearray | memoryview) -> bytes:
    return payload if type(payload) is bytes else bytes(payload)


def _unknown(kind: int) -> DecodeError:
    shown = repr(chr(kind)) if 0x20 < kind < 0x7F else f"0x{kind:02x}"
    return DecodeError(f"unknown pgoutput message type {shown}")


def parse(payload: bytes | bytearray | memoryview, *, in_stream: bool = False) -> Message:
    """Decode one pgoutput message; pure (no state, any protocol version 1-4).

    ``in_stream``: the message arrived between Stream Start and Stream Stop, so
    Relation, Type, Insert, Update, Delete, Truncate and Message carry an xid.
    """
    buf = _as_bytes(payload)
    if not buf:
        raise DecodeError("empty pgoutput message")
    parser = PARSERS.get(buf[0])
    if parser is None:
        raise _unknown(buf[0])
    return parser(buf, in_stream)


_STATEFUL = frozenset((MSG_RELATION, MSG_TYPE, MSG_STREAM_START, MSG_STREAM_STOP))


class Decoder:
    """Stateful decoder for one replication stream of a given protocol version.

    Caches Relation and Type messages by OID (``relations``, ``types``) and tracks
    whether it is inside a streamed-transaction block (``in_stream``: set by Stream
    Start, cleared by Stream Stop) so in-stream messages are read with their xid.
    A message type the protocol version cannot carry raises DecodeError. Stream
    boundaries are not policed (the assembler owns transaction semantics).
    """

    __slots__ = ("protocol_version", "relations", "types", "in_stream", "_parsers")

    def __init__(self, protocol_version: int = 1) -> None:
        if not 1 <= protocol_version <= MAX_PROTOCOL_VERSION:
            raise ConfigurationError(
                f"unsupported pgoutput protocol version {protocol_version!r}",
                hint=f"use a version from 1 to {MAX_PROTOCOL_VERSION}",
            )
        self.protocol_version = protocol_version
        self.relations: dict[int, Relation] = {}
        self.types: dict[int, Type] = {}
        self.in_stream = False
        parsers = {
            kind: parser
            for kind, parser in PARSERS.items()
            if MIN_PROTOCOL_VERSION[kind] <= protocol_version
        }
        if protocol_version < 4 and MSG_STREAM_ABORT in parsers:
            parsers[MSG_STREAM_ABORT] = _stream_abort_v2
        self._parsers = parsers

    def decode(self, payload: bytes | bytearray | memoryview) -> Message:
        """Decode one message and update the relation/type caches and stream state."""
        buf = payload if type(payload) is bytes else bytes(payload)
        if not buf:
            raise DecodeError("empty pgoutput message")
        kind = buf[0]
        parser = self._parsers.get(kind)
        if parser is None:
            raise self._not_accepted(kind)
        message = parser(buf, self.in_stream)
        if kind not in _STATEFUL:
            return message
        if kind == MSG_RELATION:
            assert isinstance(message, Relation)
            self.relations[message.relation_id] = message
        elif kind == MSG_TYPE:
            assert isinstance(message, Type)
            self.types[message.type_oid] = message
        elif kind == MSG_STREAM_START:
            self.in_stream = True
        elif kind == MSG_STREAM_STOP:
            self.in_stream = False
        return message

    def _not_accepted(self, kind: int) -> DecodeError:
        if kind in PARSERS:
            needed = MIN_PROTOCOL_VERSION[kind]
            return DecodeError(
                f"{_MESSAGE_NAMES[kind]} message is not part of pgoutput protocol version "
                f"{self.protocol_version} (needs version {needed} or later)",
                hint="decode with the protocol version the stream was started with",
            )
        return _unknown(kind)
