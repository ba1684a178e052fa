"""The change events pgtail's renderers, filters and Spark source consume.

One frozen slots dataclass per kind of event (`TxBegin`, `Change`, `EncodedRows`, ...),
the `Table` and `Column` they refer to, and `InsertEncoders`, the interface through which
a renderer hands the assembler its fast per-table encoders. No protocol knowledge here:
`pgtail.changes.assembler` makes these from pgoutput messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NamedTuple

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


# Not frozen, by design (the one event part that is not): a large or streamed
# transaction's changes are converted while the server is still sending it, before its
# Commit says its LSNs and time, and they all share one Transaction, which the assembler
# completes when the Commit arrives, before any of those events is handed out. Building
# every held event again at the commit would cost a constructor per row. Read-only for
# everyone else; hashed by value, as a frozen one would be.
@dataclass(slots=True, unsafe_hash=True)
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
class EncodedRows:
    """Consecutive changes of one kind to one table, written by a renderer's encoder on
    arrival: inserts, and, when the encoder has lines for them, updates that carry no old
    row and deletes.

    Only an `Assembler` given an ``encoder`` makes these, and only the renderer that
    supplied the encoder can render them: ``lines`` holds ``count`` lines, one per change,
    each ending in a newline, with ``seq`` from ``first_seq`` on; what else a line needs
    (for JSON lines: the fields before ``seq``, ``op`` among them) the renderer adds.
    """

    table: Table
    tx: Transaction
    first_seq: int
    count: int
    lines: bytes
    op: Op = "insert"
    # one line too large to join (a value past `LARGE_VALUE`): its pieces, in order,
    # made as they are taken (once), and ``lines`` empty; the renderer writes them one
    # after another (``count`` is 1)
    pieces: Iterable[bytes] = ()

    def head(self, count: int) -> EncodedRows:
        """The first ``count`` of these changes (of lines that hold no other newline, as
        JSON and SQL lines: a Spark range read's lines, which may, are never cut)."""
        if count >= self.count:
            return self
        end = -1
        for _ in range(count):
            end = self.lines.index(b"\n", end + 1)
        return EncodedRows(
            self.table, self.tx, self.first_seq, count, self.lines[: end + 1], self.op
        )


@dataclass(frozen=True, slots=True)
class TableCopy:
    """One table's rows in a snapshot (``pgtail stream --snapshot``): the rows as they
    were at ``lsn``, the snapshot's consistent point (every change streamed after them
    committed after it)."""

    table: Table
    lsn: int
    rows_estimate: int  # the planner's estimate (pg_class.reltuples), 0 when unknown
    number: int  # this table's place among the snapshot's tables, from 1
    tables: int  # how many tables the snapshot copies


@dataclass(frozen=True, slots=True)
class SnapshotBegin:
    """A table's copy starts (SQL: a transaction that first empties the target table)."""

    copy: TableCopy


@dataclass(frozen=True, slots=True)
class SnapshotRows:
    """Consecutive rows of one table's copy, numbered from ``first_seq`` (from 0 in each
    table): either ``lines`` a renderer's encoder wrote (see `EncodedRows`; one line per
    row, from ``"seq"`` on) or ``rows`` converted as a streamed insert's new row."""

    copy: TableCopy
    first_seq: int
    count: int
    lines: bytes = b""
    rows: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class SnapshotEnd:
    """A table's copy is complete: ``rows`` rows were read."""

    copy: TableCopy
    rows: int


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """A table's definition changed (columns added, dropped, renamed, retyped; replica
    identity): ``previous`` is how it was, ``table`` how the next event's rows are. Made
    by `pgtail.changes.schema_events.SchemaTracker`, before the first event that uses it."""

    table: Table
    previous: Table
    tx: Transaction | None


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
    TxBegin
    | TxCommit
    | Change
    | EncodedRows
    | Truncate
    | Message
    | CommitPrepared
    | RollbackPrepared
    | SnapshotBegin
    | SnapshotRows
    | SnapshotEnd
    | SchemaChange
)
# encode(seq, v0, ..., vN) -> one line of an EncodedRows (see Assembler): the row's
# values are the text of each column, None for NULL
InsertEncoder = Callable[..., bytes]
# encode(seq, old_values, new_values, new_kinds) -> the line of an Update that carries
# its old row or old key and its new row: each row's values are the text of each column,
# None for NULL (and, in the new row, for an unchanged TOAST value: ``new_kinds`` holds
# each column's TupleData kind, ``t``, ``n`` or ``u``); the old row holds no other kind
OldNewEncoder = Callable[[int, tuple[bytes | None, ...], tuple[bytes | None, ...], bytes], bytes]
# encode(first_seq, columns) -> the lines of many inserts at once (a snapshot's rows),
# byte for byte what `InsertEncoders.plain`/`with_nulls` give row by row; ``columns``
# holds each column's values (text, None for NULL), all of the same length
RowsEncoder = Callable[[int, Sequence[list[bytes | None]]], bytes]
# encode(seq, values) -> the line `InsertEncoders.with_nulls` gives, in pieces made as
# they are taken, or None
LargeEncoder = Callable[[int, Sequence[memoryview | None]], Iterator[bytes] | None]
# a value past this many bytes goes the `InsertEncoders.large` way, when there is one
LARGE_VALUE = 1 << 20


class InsertEncoders(NamedTuple):
    """A renderer's encoders for one table's changes whose tuple arrived all text (or
    NULL): inserts, and what else it has lines for."""

    plain: InsertEncoder  # no NULLs
    with_nulls: InsertEncoder  # some values None (NULL)
    # The same line serves an Update that carries no old row (JSON lines: only the op,
    # which the renderer puts in front, differs); not so for SQL's INSERT statements.
    updates: bool = False
    # Or an Update's own line when it carries no old row (SQL: an UPDATE statement), plain
    # and with NULLs, if the renderer has one.
    update: tuple[InsertEncoder, InsertEncoder] | None = None
    # A Delete's line from its old row ("O": plain, with NULLs) or old key ("K", whose
    # other columns arrive as NULL), if the renderer has them.
    full_delete: tuple[InsertEncoder, InsertEncoder] | None = None
    key_delete: InsertEncoder | None = None
    # An Update's line from its old key ("K": a key change) or whole old row ("O":
    # REPLICA IDENTITY FULL) and its new row, if the renderer has them.
    key_update: OldNewEncoder | None = None
    full_update: OldNewEncoder | None = None
    # Many inserts at once from their values column by column, if the renderer has it
    rows: RowsEncoder | None = None
    # A snapshot's rows from COPY's text output as it is (whole rows, each ending in a
    # newline), if the renderer writes them so (SQL: a ``COPY … FROM STDIN`` block)
    copy_text: Callable[[bytes], bytes] | None = None
    # An insert holding a value larger than `LARGE_VALUE`, its line in pieces (written
    # one after another, the large value never joined into one bytes): from the values
    # (text as memoryviews of the payload, None for NULL); None when it cannot
    large: LargeEncoder | None = None
