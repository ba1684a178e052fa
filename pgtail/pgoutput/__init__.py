"""Sans-IO decoder of PostgreSQL's pgoutput logical replication protocol (versions 1-4).

Bytes in, one frozen message object out: no sockets, no psycopg2, no clock.
Field comments quote the protocol documentation ("Logical Replication Message Formats").

The message classes (`messages`) are a contract other layers build on. Here: the
message type bytes, `SPECS` (one entry per message type: byte, name, the lowest
protocol version that carries it, its parse function; the name table, the version
table and the dispatch table `PARSERS` all follow from it), the parsers of the rarer
messages, the pure `parse()` and the stateful `Decoder`. The row messages (Insert,
Update, Delete) and Begin/Commit are read by the private fast path `_fastrows`;
every read is bounds-checked (`_reads`).

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

import struct
from collections.abc import Callable
from dataclasses import dataclass

from pgtail.errors import ConfigurationError, DecodeError
from pgtail.pgoutput._fastrows import (
    BEGIN_LENGTH,
    COMMIT_LENGTH,
    TextTupleReader,
    decode_tuple,
    parse_begin,
    parse_commit,
    parse_delete,
    parse_insert,
    parse_update,
    text_tuple_reader,
    unpack_begin,
    unpack_commit,
)
from pgtail.pgoutput._reads import Layout, expect_end, read_string, read_timestamp, xid_layout
from pgtail.pgoutput.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    PG_EPOCH,
    REPLICA_IDENTITIES,
    TRUNCATE_CASCADE,
    TRUNCATE_RESTART_IDENTITY,
    TUPLE_KEY,
    TUPLE_NEW,
    TUPLE_OLD,
    Begin,
    BeginPrepare,
    Commit,
    CommitPreparedMessage,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgoutputMessage,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPreparedMessage,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    TruncateMessage,
    TupleData,
    Type,
    Update,
    pg_timestamp,
)

__all__ = [
    "KIND_BINARY",
    "KIND_NULL",
    "KIND_TEXT",
    "KIND_UNCHANGED_TOAST",
    "MAX_PROTOCOL_VERSION",
    "MIN_PROTOCOL_VERSION",
    "MSG_BEGIN",
    "MSG_BEGIN_PREPARE",
    "MSG_COMMIT",
    "MSG_COMMIT_PREPARED",
    "MSG_DELETE",
    "MSG_INSERT",
    "MSG_MESSAGE",
    "MSG_ORIGIN",
    "MSG_PREPARE",
    "MSG_RELATION",
    "MSG_ROLLBACK_PREPARED",
    "MSG_STREAM_ABORT",
    "MSG_STREAM_COMMIT",
    "MSG_STREAM_PREPARE",
    "MSG_STREAM_START",
    "MSG_STREAM_STOP",
    "MSG_TRUNCATE",
    "MSG_TYPE",
    "MSG_UPDATE",
    "MESSAGE_NAMES",
    "PARSERS",
    "PG_EPOCH",
    "REPLICA_IDENTITIES",
    "SPECS",
    "TRUNCATE_CASCADE",
    "TRUNCATE_RESTART_IDENTITY",
    "TUPLE_KEY",
    "TUPLE_NEW",
    "TUPLE_OLD",
    "Begin",
    "BeginPrepare",
    "Commit",
    "CommitPreparedMessage",
    "Decoder",
    "Delete",
    "Insert",
    "LogicalMessage",
    "PgoutputMessage",
    "MessageSpec",
    "Origin",
    "Prepare",
    "Relation",
    "RelationColumn",
    "RollbackPreparedMessage",
    "StreamAbort",
    "StreamCommit",
    "StreamPrepare",
    "StreamStart",
    "StreamStop",
    "TruncateMessage",
    "TextTupleReader",
    "TupleData",
    "Type",
    "Update",
    "decode_tuple",
    "parse",
    "pg_timestamp",
    "unpack_begin",
    "unpack_commit",
    "BEGIN_LENGTH",
    "COMMIT_LENGTH",
    "text_tuple_reader",
]

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

MAX_PROTOCOL_VERSION = 4

# Origin: Int64 "LSN of the commit on the origin server"; String name.
_ORIGIN = Layout("Origin", ("commit_lsn", "Q"))
# Relation: [Int32 xid]; Int32 relation OID; then strings, replica identity, columns.
_RELATION = xid_layout("Relation", ("relation_id", "I"))
_RELATION_TAIL = Layout("Relation", ("replica_identity", "B"), ("column_count", "H"))
# Per column: Int8 flags (1 = part of the key); String name; Int32 type OID; Int32 typmod.
_COLUMN_FLAGS = Layout("Relation.column", ("flags", "B"))
_COLUMN_TYPE = Layout("Relation.column", ("type_oid", "I"), ("type_modifier", "i"))
# Type: [Int32 xid]; Int32 type OID; String namespace; String name.
_TYPE = xid_layout("Type", ("type_oid", "I"))
# Truncate: [Int32 xid]; Int32 number of relations; Int8 options; Int32 OID per relation.
_TRUNCATE = xid_layout("Truncate", ("relation_count", "I"), ("options", "B"))
# Message: [Int32 xid]; Int8 flags (1 = transactional); Int64 LSN; String prefix;
# Int32 content length; content.
_MESSAGE = xid_layout("Message", ("flags", "B"), ("lsn", "Q"))
_MESSAGE_LENGTH = Layout("Message", ("content_length", "I"))
# Stream Start: Int32 xid; Int8 "1 if the first stream segment for this XID, 0 otherwise".
_STREAM_START = Layout("StreamStart", ("xid", "I"), ("first_segment", "B"))
# Stream Commit: Int32 xid; Int8 flags (unused); Int64 commit LSN; Int64 end LSN;
# Int64 commit timestamp.
_STREAM_COMMIT = Layout(
    "StreamCommit",
    ("xid", "I"),
    ("flags", "B"),
    ("commit_lsn", "Q"),
    ("end_lsn", "Q"),
    ("commit_time", "q"),
)
# Stream Abort: Int32 xid; Int32 subtransaction xid; since protocol 4, when streaming =
# parallel: Int64 abort LSN; Int64 abort timestamp.
_STREAM_ABORT = Layout("StreamAbort", ("xid", "I"), ("subxid", "I"))
_STREAM_ABORT_V4 = Layout(
    "StreamAbort", ("xid", "I"), ("subxid", "I"), ("abort_lsn", "Q"), ("abort_time", "q")
)
# Begin Prepare: Int64 "LSN of the prepare"; Int64 "end LSN of the prepared transaction";
# Int64 prepare timestamp; Int32 xid; String GID.
_BEGIN_PREPARE = Layout(
    "BeginPrepare", ("prepare_lsn", "Q"), ("end_lsn", "Q"), ("prepare_time", "q"), ("xid", "I")
)
# Prepare / Stream Prepare: Int8 flags (unused); Int64 prepare LSN; Int64 end LSN;
# Int64 prepare timestamp; Int32 xid; String GID.
_PREPARE = Layout(
    "Prepare",
    ("flags", "B"),
    ("prepare_lsn", "Q"),
    ("end_lsn", "Q"),
    ("prepare_time", "q"),
    ("xid", "I"),
)
_STREAM_PREPARE = Layout(
    "StreamPrepare",
    ("flags", "B"),
    ("prepare_lsn", "Q"),
    ("end_lsn", "Q"),
    ("prepare_time", "q"),
    ("xid", "I"),
)
# Commit Prepared: Int8 flags (unused); Int64 "LSN of the commit of the prepared
# transaction"; Int64 end LSN; Int64 commit timestamp; Int32 xid; String GID.
_COMMIT_PREPARED = Layout(
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
_ROLLBACK_PREPARED = Layout(
    "RollbackPrepared",
    ("flags", "B"),
    ("prepare_end_lsn", "Q"),
    ("rollback_end_lsn", "Q"),
    ("prepare_time", "q"),
    ("rollback_time", "q"),
    ("xid", "I"),
)


def _origin(buf: bytes, in_stream: bool) -> Origin:
    (commit_lsn,) = _ORIGIN.read(buf, 1)
    name, pos = read_string(buf, 1 + _ORIGIN.size, "Origin.name")
    expect_end(buf, pos, "Origin")
    return Origin(commit_lsn, name)


def _relation(buf: bytes, in_stream: bool) -> Relation:
    layout = _RELATION[in_stream]
    if in_stream:
        xid, relation_id = layout.read(buf, 1)
    else:
        xid = None
        (relation_id,) = layout.read(buf, 1)
    namespace, pos = read_string(buf, 1 + layout.size, "Relation.namespace")
    name, pos = read_string(buf, pos, "Relation.name")
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
        column_name, pos = read_string(buf, pos + 1, f"{where}.name")
        type_oid, type_modifier = _COLUMN_TYPE.read(buf, pos, where)
        pos += _COLUMN_TYPE.size
        columns.append(RelationColumn(flags, column_name, type_oid, type_modifier))
    expect_end(buf, pos, "Relation")
    return Relation(xid, relation_id, namespace, name, replica_identity, tuple(columns))


def _type(buf: bytes, in_stream: bool) -> Type:
    layout = _TYPE[in_stream]
    if in_stream:
        xid, type_oid = layout.read(buf, 1)
    else:
        xid = None
        (type_oid,) = layout.read(buf, 1)
    namespace, pos = read_string(buf, 1 + layout.size, "Type.namespace")
    name, pos = read_string(buf, pos, "Type.name")
    expect_end(buf, pos, "Type")
    return Type(xid, type_oid, namespace, name)


def _truncate(buf: bytes, in_stream: bool) -> TruncateMessage:
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
        expect_end(buf, pos + 4 * count, "Truncate")
    relation_ids = struct.unpack_from(f"!{count}I", buf, pos)
    return TruncateMessage(xid, options, relation_ids)


def _message(buf: bytes, in_stream: bool) -> LogicalMessage:
    layout = _MESSAGE[in_stream]
    if in_stream:
        xid, flags, lsn = layout.read(buf, 1)
    else:
        xid = None
        flags, lsn = layout.read(buf, 1)
    prefix, pos = read_string(buf, 1 + layout.size, "Message.prefix")
    (length,) = _MESSAGE_LENGTH.read(buf, pos)
    pos += 4
    if pos + length > len(buf):
        raise DecodeError(
            f"Message.content: truncated (needs {length} bytes at offset {pos}, "
            f"{len(buf) - pos} left)"
        )
    content = buf[pos : pos + length]
    expect_end(buf, pos + length, "Message")
    return LogicalMessage(xid, bool(flags & 1), lsn, prefix, content)


def _stream_start(buf: bytes, in_stream: bool) -> StreamStart:
    xid, first_segment = _STREAM_START.read(buf, 1)
    if first_segment > 1:
        raise DecodeError(
            f"StreamStart.first_segment: unexpected value {first_segment} at offset 5 "
            "(expected 0 or 1)"
        )
    expect_end(buf, 1 + _STREAM_START.size, "StreamStart")
    return StreamStart(xid, first_segment == 1)


def _stream_stop(buf: bytes, in_stream: bool) -> StreamStop:
    expect_end(buf, 1, "StreamStop")
    return StreamStop()


def _stream_commit(buf: bytes, in_stream: bool) -> StreamCommit:
    xid, flags, commit_lsn, end_lsn, commit_time = _STREAM_COMMIT.read(buf, 1)
    expect_end(buf, 1 + _STREAM_COMMIT.size, "StreamCommit")
    return StreamCommit(
        xid, flags, commit_lsn, end_lsn, read_timestamp(commit_time, "StreamCommit.commit_time")
    )


def _stream_abort(buf: bytes, in_stream: bool) -> StreamAbort:
    # Protocol 4 appends abort_lsn and abort_time only when the subscriber asked for
    # streaming = parallel; nothing in the message says which, so the length decides:
    # 8 bytes after the type byte -> without them, 24 -> with them.
    if len(buf) <= 1 + _STREAM_ABORT.size:
        xid, subxid = _STREAM_ABORT.read(buf, 1)
        return StreamAbort(xid, subxid, None, None)
    xid, subxid, abort_lsn, abort_time = _STREAM_ABORT_V4.read(buf, 1)
    expect_end(buf, 1 + _STREAM_ABORT_V4.size, "StreamAbort")
    return StreamAbort(xid, subxid, abort_lsn, read_timestamp(abort_time, "StreamAbort.abort_time"))


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
    gid, pos = read_string(buf, 1 + _BEGIN_PREPARE.size, "BeginPrepare.gid")
    expect_end(buf, pos, "BeginPrepare")
    return BeginPrepare(
        prepare_lsn, end_lsn, read_timestamp(prepare_time, "BeginPrepare.prepare_time"), xid, gid
    )


def _prepare(buf: bytes, in_stream: bool) -> Prepare:
    flags, prepare_lsn, end_lsn, prepare_time, xid = _PREPARE.read(buf, 1)
    gid, pos = read_string(buf, 1 + _PREPARE.size, "Prepare.gid")
    expect_end(buf, pos, "Prepare")
    return Prepare(
        flags, prepare_lsn, end_lsn, read_timestamp(prepare_time, "Prepare.prepare_time"), xid, gid
    )


def _commit_prepared(buf: bytes, in_stream: bool) -> CommitPreparedMessage:
    flags, commit_lsn, end_lsn, commit_time, xid = _COMMIT_PREPARED.read(buf, 1)
    gid, pos = read_string(buf, 1 + _COMMIT_PREPARED.size, "CommitPrepared.gid")
    expect_end(buf, pos, "CommitPrepared")
    return CommitPreparedMessage(
        flags,
        commit_lsn,
        end_lsn,
        read_timestamp(commit_time, "CommitPrepared.commit_time"),
        xid,
        gid,
    )


def _rollback_prepared(buf: bytes, in_stream: bool) -> RollbackPreparedMessage:
    flags, prepare_end_lsn, rollback_end_lsn, prepare_time, rollback_time, xid = (
        _ROLLBACK_PREPARED.read(buf, 1)
    )
    gid, pos = read_string(buf, 1 + _ROLLBACK_PREPARED.size, "RollbackPrepared.gid")
    expect_end(buf, pos, "RollbackPrepared")
    return RollbackPreparedMessage(
        flags,
        prepare_end_lsn,
        rollback_end_lsn,
        read_timestamp(prepare_time, "RollbackPrepared.prepare_time"),
        read_timestamp(rollback_time, "RollbackPrepared.rollback_time"),
        xid,
        gid,
    )


def _stream_prepare(buf: bytes, in_stream: bool) -> StreamPrepare:
    flags, prepare_lsn, end_lsn, prepare_time, xid = _STREAM_PREPARE.read(buf, 1)
    gid, pos = read_string(buf, 1 + _STREAM_PREPARE.size, "StreamPrepare.gid")
    expect_end(buf, pos, "StreamPrepare")
    return StreamPrepare(
        flags,
        prepare_lsn,
        end_lsn,
        read_timestamp(prepare_time, "StreamPrepare.prepare_time"),
        xid,
        gid,
    )


Parser = Callable[[bytes, bool], PgoutputMessage]
"""``parse(payload, in_stream) -> message``: the whole payload, type byte first."""


@dataclass(frozen=True, slots=True)
class MessageSpec:
    """One pgoutput message type: everything the decoder's tables are built from."""

    type_byte: int  # Byte1 identifying the message
    name: str  # as errors name it
    since_version: int  # the lowest protocol version that carries it
    parse: Parser


SPECS: tuple[MessageSpec, ...] = (
    MessageSpec(MSG_BEGIN, "Begin", 1, parse_begin),
    MessageSpec(MSG_COMMIT, "Commit", 1, parse_commit),
    MessageSpec(MSG_ORIGIN, "Origin", 1, _origin),
    MessageSpec(MSG_RELATION, "Relation", 1, _relation),
    MessageSpec(MSG_TYPE, "Type", 1, _type),
    MessageSpec(MSG_INSERT, "Insert", 1, parse_insert),
    MessageSpec(MSG_UPDATE, "Update", 1, parse_update),
    MessageSpec(MSG_DELETE, "Delete", 1, parse_delete),
    MessageSpec(MSG_TRUNCATE, "Truncate", 1, _truncate),
    MessageSpec(MSG_MESSAGE, "Message", 1, _message),
    MessageSpec(MSG_STREAM_START, "StreamStart", 2, _stream_start),
    MessageSpec(MSG_STREAM_STOP, "StreamStop", 2, _stream_stop),
    MessageSpec(MSG_STREAM_COMMIT, "StreamCommit", 2, _stream_commit),
    MessageSpec(MSG_STREAM_ABORT, "StreamAbort", 2, _stream_abort),
    MessageSpec(MSG_BEGIN_PREPARE, "BeginPrepare", 3, _begin_prepare),
    MessageSpec(MSG_PREPARE, "Prepare", 3, _prepare),
    MessageSpec(MSG_COMMIT_PREPARED, "CommitPrepared", 3, _commit_prepared),
    MessageSpec(MSG_ROLLBACK_PREPARED, "RollbackPrepared", 3, _rollback_prepared),
    MessageSpec(MSG_STREAM_PREPARE, "StreamPrepare", 3, _stream_prepare),
)

MIN_PROTOCOL_VERSION = {spec.type_byte: spec.since_version for spec in SPECS}
"""Message type byte -> the lowest protocol version that can carry it."""
MESSAGE_NAMES = {spec.type_byte: spec.name for spec in SPECS}
PARSERS: dict[int, Parser] = {spec.type_byte: spec.parse for spec in SPECS}
"""Message type byte -> parse function ``(payload, in_stream) -> message``."""


def _as_bytes(payload: bytes | bytearray | memoryview) -> bytes:
    return payload if type(payload) is bytes else bytes(payload)


def _unknown(kind: int) -> DecodeError:
    shown = repr(chr(kind)) if 0x20 < kind < 0x7F else f"0x{kind:02x}"
    return DecodeError(f"unknown pgoutput message type {shown}")


def parse(payload: bytes | bytearray | memoryview, *, in_stream: bool = False) -> PgoutputMessage:
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
            spec.type_byte: spec.parse for spec in SPECS if spec.since_version <= protocol_version
        }
        if protocol_version < 4 and MSG_STREAM_ABORT in parsers:
            parsers[MSG_STREAM_ABORT] = _stream_abort_v2
        self._parsers = parsers

    def decode(self, payload: bytes | bytearray | memoryview) -> PgoutputMessage:
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
                f"{MESSAGE_NAMES[kind]} message is not part of pgoutput protocol version "
                f"{self.protocol_version} (needs version {needed} or later)",
                hint="decode with the protocol version the stream was started with",
            )
        return _unknown(kind)
