"""The pgoutput message contract: one frozen, slotted dataclass per message type.

Field comments quote the protocol documentation ("Logical Replication Message Formats").
Other layers build on these classes; `pgtail.pgoutput` decodes bytes into them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pgtail.errors import DecodeError

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
class TruncateMessage:
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
class CommitPreparedMessage:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time: datetime
    xid: int
    gid: str


@dataclass(frozen=True, slots=True)
class RollbackPreparedMessage:
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


PgoutputMessage = (
    Begin
    | Commit
    | Origin
    | Relation
    | Type
    | Insert
    | Update
    | Delete
    | TruncateMessage
    | LogicalMessage
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
    | BeginPrepare
    | Prepare
    | CommitPreparedMessage
    | RollbackPreparedMessage
    | StreamPrepare
)


# Tuple markers inside Insert / Update / Delete.
TUPLE_NEW = ord("N")  # "Identifies the following TupleData message as a new tuple."
TUPLE_KEY = ord("K")  # "... as a key." (replica identity DEFAULT / USING INDEX)
TUPLE_OLD = ord("O")  # "... as an old tuple." (replica identity FULL)

REPLICA_IDENTITIES = frozenset("dnfi")  # relreplident: default, nothing, full, index

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
