"""pgoutput messages -> change events a renderer can use without knowing the protocol.

Keeps the relation cache (column names, key columns, converters), turns TupleData
into JSON-ready dicts, separates key / old / new / unchanged TOAST, and assembles
streamed and prepared transactions.

CONTRACT (written first so renderers, the stream loop and Spark can be built
against it): the event classes below are fixed; `Assembler` is filled in by the
change-events work.

Delivery model: the assembler holds the raw payloads of a transaction until its
Commit / Stream Commit / Prepare arrives (in memory up to a bound, then in a
temporary file), then decodes and yields ``TxBegin, <changes...>, TxCommit`` in one
go. So every change already knows its transaction's commit LSN, end LSN and commit
time, streamed transactions need no second mechanism, and aborted (sub)transactions
are dropped before anything is rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

Op = Literal["insert", "update", "delete"]
OldKind = Literal["key", "full"]
ReplicaIdentity = Literal["default", "nothing", "full", "index"]


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type_oid: int
    type_modifier: int
    is_key: bool  # part of the replica identity key, as flagged in the Relation message
    type_name: str | None  # SQL type name when known (built-ins, or from a Type message)


@dataclass(frozen=True, slots=True)
class Table:
    relation_id: int
    schema: str
    name: str
    replica_identity: ReplicaIdentity
    columns: tuple[Column, ...]

    @property
    def key_columns(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.is_key)

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass(frozen=True, slots=True)
class Transaction:
    """What every event of one transaction shares."""

    xid: int
    commit_lsn: int  # LSN of the commit record (of the PREPARE record for a prepared tx)
    end_lsn: int  # end of the commit record: what is confirmed once the tx is written
    commit_time: datetime
    origin: str | None = None  # replication origin name, when the tx came from one
    origin_lsn: int | None = None
    gid: str | None = None  # two-phase: the prepared transaction's GID
    prepared: bool = False  # True: this is PREPARE TRANSACTION; the outcome comes later
    streamed: bool = False  # True: arrived as a streamed (in-progress) transaction


@dataclass(frozen=True, slots=True)
class TxBegin:
    tx: Transaction


@dataclass(frozen=True, slots=True)
class TxCommit:
    tx: Transaction


@dataclass(frozen=True, slots=True)
class Change:
    """An INSERT, UPDATE or DELETE of one row.

    ``new`` and ``old`` map column name -> JSON-ready value (see `pgtail.values`).
    Unchanged-TOAST columns are absent from them and listed in ``unchanged_toast``.
    ``old`` is None when the server sent no old row; ``old_kind`` says whether it
    holds only the replica identity key ("key") or the full old row ("full").
    """

    op: Op
    table: Table
    tx: Transaction
    seq: int  # position of the event within its transaction, from 0
    new: dict[str, Any] | None
    old: dict[str, Any] | None
    old_kind: OldKind | None
    unchanged_toast: tuple[str, ...]

    @property
    def key(self) -> dict[str, Any] | None:
        """Replica identity columns and values, when known (None if the table has no key)."""
        names = self.table.key_columns
        if not names:
            return None
        if self.old_kind == "key" and self.old is not None:
            return self.old
        row = self.old if self.old is not None else self.new
        if row is None:
            return None
        return {n: row[n] for n in names if n in row}


@dataclass(frozen=True, slots=True)
class Truncate:
    tables: tuple[Table, ...]
    cascade: bool
    restart_identity: bool
    tx: Transaction
    seq: int


@dataclass(frozen=True, slots=True)
class Message:
    """A logical decoding message (``pg_logical_emit_message``)."""

    prefix: str
    content: bytes
    transactional: bool
    lsn: int
    tx: Transaction | None  # None for a non-transactional message
    seq: int


@dataclass(frozen=True, slots=True)
class CommitPrepared:
    xid: int
    gid: str
    commit_lsn: int
    end_lsn: int
    commit_time: datetime


@dataclass(frozen=True, slots=True)
class RollbackPrepared:
    xid: int
    gid: str
    prepare_end_lsn: int
    rollback_end_lsn: int
    prepare_time: datetime
    rollback_time: datetime


Event = (
    TxBegin | TxCommit | Change | Truncate | Message | CommitPrepared | RollbackPrepared
)
