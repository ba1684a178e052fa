"""pgoutput messages -> change events a renderer can use without knowing the protocol.

Keeps the relation cache (column names, key columns, converters), turns TupleData
into JSON-ready dicts, separates key / old / new / unchanged TOAST, and assembles
streamed and prepared transactions.

CONTRACT (written first so renderers, the stream loop and Spark can be built
against it): the event classes below are fixed; `Assembler` is filled in by the
change-events work.

Delivery model: the assembler holds each transaction until its Commit / Stream
Commit / Prepare arrives, then yields ``TxBegin, <changes...>, TxCommit`` in one go.
So every change already knows its transaction's commit LSN, end LSN and commit time,
streamed transactions need no second mechanism, and aborted (sub)transactions are
dropped before anything is rendered. Changes are decoded and converted as they
arrive (while the server is still sending the rest of the transaction) up to a
memory bound; past it the rest of the transaction is held as raw payloads, spilled
to a temporary file, and decoded at the commit. Given a renderer's ``encoder``, inserts
whose values all arrived as text (or NULL), and the updates and deletes it has lines for,
skip the events altogether: the renderer's own bytes for them arrive as `EncodedRows`.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any, Literal, NamedTuple

from pgtail import pgoutput as po
from pgtail import values
from pgtail.errors import DecodeError, SpillError

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

    def head(self, count: int) -> EncodedRows:
        """The first ``count`` of these changes."""
        if count >= self.count:
            return self
        end = -1
        for _ in range(count):
            end = self.lines.index(b"\n", end + 1)
        return EncodedRows(
            self.table, self.tx, self.first_seq, count, self.lines[: end + 1], self.op
        )


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
)
# encode(seq, v0, ..., vN) -> one line of an EncodedRows (see Assembler): the row's
# values are the text of each column, None for NULL
InsertEncoder = po.ValuesEncoder


class InsertEncoders(NamedTuple):
    """A renderer's encoders for one table's changes whose tuple arrived all text (or
    NULL): inserts, and what else it has lines for."""

    plain: InsertEncoder  # no NULLs
    with_nulls: InsertEncoder  # some values None (NULL)
    # The same line serves an Update that carries no old row (JSON lines: only the op,
    # which the renderer puts in front, differs); not so for SQL's INSERT statements.
    updates: bool = False
    # A Delete's line from its old row ("O": plain, with NULLs) or old key ("K", whose
    # other columns arrive as NULL), if the renderer has them.
    full_delete: tuple[InsertEncoder, InsertEncoder] | None = None
    key_delete: InsertEncoder | None = None


# --- Assembler ----------------------------------------------------------------

DEFAULT_SPILL_BYTES = 64 * 1024 * 1024

# First bytes of the messages the assembler handles itself on the hot path.
_INSERT = ord("I")
_UPDATE = ord("U")
_DELETE = ord("D")
_TRUNCATE = ord("T")
_MESSAGE = ord("M")
_RELATION = ord("R")
_TYPE = ord("Y")
_HELD_AT_ONCE = frozenset((_INSERT, _UPDATE, _DELETE, _TRUNCATE))  # held without decoding
_SCHEMA = frozenset((_RELATION, _TYPE))  # survive a subtransaction abort (see _Held.truncate)

_NAME_OF_BYTE = {_INSERT: "Insert", _UPDATE: "Update", _DELETE: "Delete", _TRUNCATE: "Truncate"}

_REPLICA_IDENTITY: dict[str, ReplicaIdentity] = {
    "d": "default",
    "n": "nothing",
    "f": "full",
    "i": "index",
}

_KIND_NULL = po.KIND_NULL
_KIND_TOAST = po.KIND_UNCHANGED_TOAST
_KIND_TEXT = po.KIND_TEXT
_KIND_BINARY = po.KIND_BINARY

_XID = struct.Struct("!I")
_NEW_TUPLE = ord("N")
_OLD_TUPLE = ord("O")  # a Delete's / Update's whole old row (replica identity full)
_KEY_TUPLE = ord("K")  # its old key, the other columns sent as NULL
_OP_OF_BYTE: dict[int, Op] = {_INSERT: "insert", _UPDATE: "update", _DELETE: "delete"}
_RECORD_LEN = struct.Struct("!I")
_RECORD_OVERHEAD = 48  # rough per-payload cost of a held bytes object and its list slot
# A converted row costs its payload's bytes plus, per column, a dict slot and a Python
# object's header, plus its Change: measured (tracemalloc) 1,000 bytes for a 170-byte
# insert of eight mixed-type columns, 990 for a 190-byte insert of ten.
_COLUMN_COST = 72
_ROW_OVERHEAD = 256
_LINE_OVERHEAD = 8  # an encoded insert's line: its bytes, joined, plus a list slot until then
_RUN_LINES = 256  # encoded lines per EncodedRows: joined on arrival, a chunk at a time
_RAW_SHARE = 8  # a raw part's in-memory buffer: this fraction of the bound
_SPILLED_COST = 100  # what a _SpilledRun left in rows costs
# A plain transaction is converted on arrival only once it has this many changes. A
# smaller one takes the server a few milliseconds to send, so converting early gains
# nothing, while its converted rows, held until the commit, would cost the cyclic
# garbage collector work (they are container objects) that raw payloads do not.
_DEFERRED_ROWS = 4096
_INFO_CACHE_SIZE = 4096  # distinct relation schemas kept for reuse
_EMPTY: Iterator[Any] = iter(())  # exhausted for good: safe to hand out again and again

Converter = Callable[[bytes], Any]
_call: Any = operator.call  # call(f, x) == f(x): lets map() apply a converter list in C


_CHANGE_FIELDS = ("op", "table", "tx", "seq", "new", "old", "old_kind", "unchanged_toast")
assert tuple(f.name for f in dataclasses.fields(Change)) == _CHANGE_FIELDS, (
    "keep the fast Change constructors in step with Change"
)
# Slot descriptors' setters: a frozen dataclass's __init__ sets each field through
# object.__setattr__; setting the slots directly is about twice as fast, and the hot
# loop builds one Change per row. The result is an ordinary, equal, frozen Change.
_CHANGE_SETTERS: dict[str, Any] = {
    f"set_{name}": getattr(Change, name).__set__ for name in _CHANGE_FIELDS
}


def _make_change_factory() -> Callable[..., Change]:
    """A positional constructor for `Change` that skips the frozen dataclass ``__init__``."""
    new = object.__new__
    set_op = _CHANGE_SETTERS["set_op"]
    set_table = _CHANGE_SETTERS["set_table"]
    set_tx = _CHANGE_SETTERS["set_tx"]
    set_seq = _CHANGE_SETTERS["set_seq"]
    set_new = _CHANGE_SETTERS["set_new"]
    set_old = _CHANGE_SETTERS["set_old"]
    set_old_kind = _CHANGE_SETTERS["set_old_kind"]
    set_toast = _CHANGE_SETTERS["set_unchanged_toast"]

    def make(
        op: Op,
        table: Table,
        tx: Transaction,
        seq: int,
        new_row: dict[str, Any] | None,
        old_row: dict[str, Any] | None,
        old_kind: OldKind | None,
        unchanged_toast: tuple[str, ...],
    ) -> Change:
        change: Change = new(Change)
        set_op(change, op)
        set_table(change, table)
        set_tx(change, tx)
        set_seq(change, seq)
        set_new(change, new_row)
        set_old(change, old_row)
        set_old_kind(change, old_kind)
        set_toast(change, unchanged_toast)
        return change

    return make


_new_change = _make_change_factory()
_decode_tuple = po.decode_tuple
_TX_FIELDS = tuple(f.name for f in dataclasses.fields(Transaction))


class _TableInfo:
    """Everything the hot loop needs for one Relation, built once per Relation message."""

    __slots__ = (
        "relation",
        "table",
        "names",
        "text_converters",
        "binary_converters",
        "all_text",
        "all_binary",
        "key_positions",
        "row_cost",
        "text_row",
        "binary_row",
        "text_insert",
        "binary_insert",
        "text_encoder",
        "change_encoders",
    )

    def __init__(
        self,
        relation: po.Relation,
        type_names: dict[int, str],
        user_types: values.UserTypes | None = None,
    ) -> None:
        identity = _REPLICA_IDENTITY.get(relation.replica_identity)
        if identity is None:
            raise DecodeError(
                f"Relation {relation.relation_id}: unknown replica identity "
                f"{relation.replica_identity!r}"
            )
        columns = []
        text_converters: list[Converter] = []
        binary_converters: list[Converter] = []
        for col in relation.columns:
            type_name = values.type_name(col.type_oid) or type_names.get(col.type_oid)
            columns.append(Column(col.name, col.type_oid, col.type_modifier, col.is_key, type_name))
            text_conv, binary_conv = values.converters(col.type_oid, col.type_modifier, user_types)
            text_converters.append(text_conv)
            binary_converters.append(binary_conv)
        self.relation = relation
        self.table = Table(
            relation.relation_id, relation.namespace, relation.name, identity, tuple(columns)
        )
        self.names = tuple(c.name for c in columns)
        self.text_converters = text_converters
        self.binary_converters = binary_converters
        self.all_text = bytes([_KIND_TEXT]) * len(columns)
        self.all_binary = bytes([_KIND_BINARY]) * len(columns)
        self.text_row, self.text_insert = _row_builders(self.table, self.names, text_converters)
        self.binary_row, self.binary_insert = _row_builders(
            self.table, self.names, binary_converters
        )
        self.key_positions = tuple(i for i, c in enumerate(columns) if c.is_key)
        # set by an Assembler with an encoder: encode(payload, offset, seq) gives the line
        # of an Insert whose values are all text or NULL, or None for the general path
        self.text_encoder: po.TupleEncoder | None = None
        # (message byte, tuple flag) -> encode(payload, offset, seq) of that tuple's
        # line, for the updates and deletes the renderer encodes too
        self.change_encoders: dict[tuple[int, int], po.TupleEncoder] = {}
        self.row_cost = _ROW_OVERHEAD + _COLUMN_COST * len(columns)  # plus the payload

    def row(self, tup: po.TupleData, where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
        """TupleData -> (column name -> value, names of unchanged-TOAST columns)."""
        kinds = tup.kinds
        if kinds == self.all_text:
            return self.text_row(tup.values), ()
        if kinds == self.all_binary:
            return self.binary_row(tup.values), ()
        if len(kinds) != len(self.names):
            raise DecodeError(
                f"{where}: {len(kinds)} columns for {self.table.qualified_name}, "
                f"whose Relation message has {len(self.names)}"
            )
        return self._mixed(range(len(kinds)), tup, where)

    def key_row(self, tup: po.TupleData, where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
        """The replica identity columns of a "K" old tuple (the others are sent as NULL)."""
        if len(tup.kinds) != len(self.names):
            raise DecodeError(
                f"{where}: {len(tup.kinds)} columns for {self.table.qualified_name}, "
                f"whose Relation message has {len(self.names)}"
            )
        return self._mixed(self.key_positions, tup, where)

    def _mixed(
        self, positions: Iterable[int], tup: po.TupleData, where: str
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        kinds = tup.kinds
        raw = tup.values
        names = self.names
        row: dict[str, Any] = {}
        toast: list[str] = []
        for i in positions:
            kind = kinds[i]
            if kind == _KIND_TEXT:
                row[names[i]] = self.text_converters[i](raw[i])  # type: ignore[arg-type]
            elif kind == _KIND_NULL:
                row[names[i]] = None
            elif kind == _KIND_BINARY:
                row[names[i]] = self.binary_converters[i](raw[i])  # type: ignore[arg-type]
            elif kind == _KIND_TOAST:
                toast.append(names[i])
            else:
                raise DecodeError(f"{where}: unknown TupleData kind {bytes([kind])!r}")
        return row, tuple(toast)


class _NotFast(Exception):
    """Internal: leave the Insert fast path for the full parser (and its precise error)."""


_UNROLL_MAX = 200  # columns; wider tables use the generic builder


RowBuilder = Callable[[tuple[bytes | None, ...]], dict[str, Any]]
InsertBuilder = Callable[[tuple[bytes | None, ...], Transaction, int], Change]


def _row_builders(
    table: Table, names: tuple[str, ...], converters: list[Converter]
) -> tuple[RowBuilder, InsertBuilder]:
    """Functions for a row with no NULL / unchanged TOAST, built once per Relation.

    ``row(values) -> {name: value}`` and ``insert(values, tx, seq) -> Change``, generated
    as one dict display with a direct call per column (``{'id': c0(v[0]), ...}``) and,
    for the insert, the Change built in the same frame: about twice as fast as
    ``dict(zip(names, map(...)))`` plus a separate constructor, and this runs once per
    row. Column names enter the source only through ``repr``.
    """
    if len(names) > _UNROLL_MAX:
        call = _call
        make = _new_change

        def generic_row(raw: tuple[bytes | None, ...]) -> dict[str, Any]:
            return dict(zip(names, map(call, converters, raw), strict=False))

        def generic_insert(raw: tuple[bytes | None, ...], tx: Transaction, seq: int) -> Change:
            row = dict(zip(names, map(call, converters, raw), strict=False))
            return make("insert", table, tx, seq, row, None, None, ())

        return generic_row, generic_insert
    namespace: dict[str, Any] = {f"c{i}": conv for i, conv in enumerate(converters)}
    namespace.update(_CHANGE_SETTERS)
    namespace.update(new=object.__new__, Change=Change, table=table)
    items = ", ".join(f"{name!r}: c{i}(v[{i}])" for i, name in enumerate(names))
    source = (
        f"def row(v):\n    return {{{items}}}\n"
        "def insert(v, tx, seq):\n"
        "    change = new(Change)\n"
        "    set_op(change, 'insert')\n"
        "    set_table(change, table)\n"
        "    set_tx(change, tx)\n"
        "    set_seq(change, seq)\n"
        f"    set_new(change, {{{items}}})\n"
        "    set_old(change, None)\n"
        "    set_old_kind(change, None)\n"
        "    set_unchanged_toast(change, ())\n"
        "    return change\n"
    )
    exec(compile(source, f"<pgtail rows of {table.qualified_name}>", "exec"), namespace)
    return namespace["row"], namespace["insert"]


class _Held:
    """The raw payloads of one transaction: in memory up to a bound, then in a temp file.

    Records keep their order. Once the in-memory part passes ``limit`` bytes it is
    appended to an anonymous temporary file as length-prefixed records, so a huge
    (streamed) transaction costs disk, not memory. ``truncate`` drops everything from
    a record index on (a rolled-back subtransaction), keeping schema messages.
    """

    __slots__ = ("records", "mem_bytes", "limit", "file", "file_count", "marks", "spills")

    def __init__(self, limit: int) -> None:
        self.records: list[bytes] = []
        self.mem_bytes = 0
        self.limit = limit
        self.file: IO[bytes] | None = None
        self.file_count = 0  # records in the file (they come before `records`)
        self.marks: dict[int, int] = {}  # record index -> file offset (-1 while in memory)
        self.spills = 0  # how many times the memory part went to the file

    def __len__(self) -> int:
        return self.file_count + len(self.records)

    def append(self, payload: bytes) -> None:
        self.records.append(payload)
        self.mem_bytes += len(payload) + _RECORD_OVERHEAD
        if self.mem_bytes > self.limit:
            self.spill()

    def mark(self) -> int:
        """Remember the position of the next record (to truncate there later)."""
        index = len(self)
        self.marks[index] = -1
        return index

    def spill(self) -> None:
        try:
            self._spill()
        except OSError as exc:
            raise _spill_error(exc) from exc

    def _spill(self) -> None:
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="pgtail-tx-")  # noqa: SIM115 - closed by close()
        out = self.file
        out.seek(0, 2)
        offset = out.tell()
        base = self.file_count
        pending = sorted(i for i, off in self.marks.items() if off < 0 and i >= base)
        pack = _RECORD_LEN.pack
        batch: list[bytes] = []
        for i, payload in enumerate(self.records):
            if pending and pending[0] == base + i:
                self.marks[pending.pop(0)] = offset
            batch.append(pack(len(payload)))
            batch.append(payload)
            offset += 4 + len(payload)
            if len(batch) >= 8192:
                out.write(b"".join(batch))
                batch.clear()
        if batch:
            out.write(b"".join(batch))
        self.file_count += len(self.records)
        self.records = []
        self.mem_bytes = 0
        self.spills += 1

    def truncate(self, index: int) -> None:
        """Drop the records from ``index`` on, except Relation and Type messages."""
        kept: list[bytes] = []
        if index < self.file_count:
            assert self.file is not None
            offset = self.marks[index] if index else 0
            self.file.seek(offset)
            kept.extend(
                p for p in _read_records(self.file, self.file_count - index) if p[0] in _SCHEMA
            )
            self.file.seek(offset)
            self.file.truncate()
            self.file_count = index
            kept.extend(p for p in self.records if p[0] in _SCHEMA)
        else:
            start = index - self.file_count
            kept.extend(self.records[:start])
            kept.extend(p for p in self.records[start:] if p[0] in _SCHEMA)
        self.records = kept
        self.mem_bytes = sum(len(p) + _RECORD_OVERHEAD for p in kept)
        self.marks = {i: off for i, off in self.marks.items() if i < index}

    def __iter__(self) -> Iterator[bytes]:
        # a plain list iterator when nothing spilled: no generator frame per record
        if self.file is None or not self.file_count:
            return iter(self.records)
        return itertools.chain(self._from_file(), self.records)

    def _from_file(self) -> Iterator[bytes]:
        assert self.file is not None
        self.file.flush()
        self.file.seek(0)
        yield from _read_records(self.file, self.file_count)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        self.records = []


def _spill_error(exc: OSError) -> SpillError:
    where = tempfile.gettempdir()
    return SpillError(
        f"cannot hold a large transaction until its commit in {where}: {exc.strerror or exc}",
        hint="past 64 MiB a transaction waits in a temporary file there; free space, or "
        "set TMPDIR to a larger disk, and run pgtail again: nothing unwritten was confirmed",
    )


def _read_records(source: IO[bytes], count: int) -> Iterator[bytes]:
    read = source.read
    unpack = _RECORD_LEN.unpack
    for _ in range(count):
        header = read(4)
        (length,) = unpack(header)
        payload = read(length)
        if len(payload) != length:
            raise DecodeError("held transaction file is truncated")
        yield payload


class _Run:
    """Encoded lines of one table and op, becoming an EncodedRows _RUN_LINES at a time."""

    __slots__ = ("lines", "table", "op", "first_seq")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.table: Table | None = None
        self.op: Op = "insert"
        self.first_seq = 0

    def add(
        self, table: Table, tx: Transaction, seq: int, line: bytes, op: Op = "insert"
    ) -> EncodedRows | None:
        """Add the line of change ``seq``; return the changes it completes, if any (the
        previous table's or op's, or a full run)."""
        done = None
        if table is not self.table or op is not self.op or len(self.lines) >= _RUN_LINES:
            done = self.take(tx)
            self.table = table
            self.op = op
            self.first_seq = seq
        self.lines.append(line)
        return done

    def take(self, tx: Transaction) -> EncodedRows | None:
        """The changes collected so far (None if none); the run starts again empty."""
        lines = self.lines
        table = self.table
        self.table = None
        if not lines or table is None:
            return None
        self.lines = []
        return EncodedRows(table, tx, self.first_seq, len(lines), b"".join(lines), self.op)


class _SpilledRun:
    """An EncodedRows whose lines wait in its transaction's lines file (see make_room)."""

    __slots__ = ("table", "tx", "first_seq", "count", "op", "offset", "length")

    def __init__(self, rows: EncodedRows, offset: int) -> None:
        self.table = rows.table
        self.tx = rows.tx
        self.first_seq = rows.first_seq
        self.count = rows.count
        self.op = rows.op
        self.offset = offset  # where its lines start in the lines file
        self.length = len(rows.lines)


def _changes_in(rows: Iterable[Any]) -> int:
    """How many changes held rows stand for (encoded rows count each of theirs)."""
    return sum(e.count if type(e) is EncodedRows or type(e) is _SpilledRun else 1 for e in rows)


class _Open:
    """A transaction being held: Begin / Begin Prepare .. Commit / Prepare, or a streamed xid.

    Its changes are decoded and converted as they arrive, into ``rows`` (events of
    ``tx``, whose fields the commit fills in; ``seq`` is the row's index, which stays
    right because a rolled-back subtransaction only ever drops the tail), while their
    estimated size stays under the bound. Past it, encoded rows (the oldest first) move
    to a temporary file until half the bound is free (`make_room`), so a large transaction
    of plain inserts keeps being encoded on arrival, while the server is still sending it.
    When that frees too little the transaction goes ``raw``: the rest
    of it is held as payloads in ``held`` (spilled to a file past a smaller bound) and
    decoded at the commit with the relation cache as it was when it went raw
    (``raw_tables``), plus the Relation / Type messages held in order with the payloads.
    """

    __slots__ = (
        "xid",
        "held",
        "rows",
        "rows_bytes",
        "rows_limit",
        "raw",
        "raw_tables",
        "raw_type_names",
        "own",
        "view",
        "view_base",
        "origin",
        "origin_lsn",
        "subxacts",
        "begin",
        "tx",
        "deferred",
        "count",
        "run",
        "lines_file",
        "spilled_upto",
    )

    def __init__(self, xid: int, limit: int, begin: po.Begin | po.BeginPrepare | None) -> None:
        self.xid = xid
        # converted rows and raw payloads share the bound: once rows fill it, the raw
        # part only buffers its file writes
        self.held = _Held(max(1, limit // _RAW_SHARE))
        self.rows: list[Any] = []
        self.rows_bytes = 0
        self.rows_limit = limit
        self.raw = False
        self.raw_tables: dict[int, _TableInfo] = {}
        self.raw_type_names: dict[int, str] = {}
        # Relations this transaction received: they win over the shared cache, which
        # another (streamed) transaction may have changed since (see `Assembler._view`)
        self.own: dict[int, _TableInfo] = {}
        self.view: dict[int, _TableInfo] = {}
        self.view_base: dict[int, _TableInfo] | None = None
        self.origin: str | None = None
        self.origin_lsn: int | None = None
        self.subxacts: dict[int, int] = {}  # streamed: subxid -> position of its first record
        self.begin = begin
        # The Transaction of every event converted on arrival; its fields are only known
        # at the commit, which fills them in (see `Assembler._replay`).
        self.tx = Transaction(xid=xid, commit_lsn=0, end_lsn=0, commit_time=datetime.min)
        self.deferred = False  # raw only until it is large enough (see _DEFERRED_ROWS)
        self.count = 0  # events in rows (an EncodedRows counts its inserts): the next seq
        self.run = _Run()  # encoded lines not yet in rows
        self.lines_file: IO[bytes] | None = None  # the lines of the _SpilledRuns in rows
        self.spilled_upto = 0  # rows before this index hold no EncodedRows

    def close_run(self) -> None:
        """Put the encoded lines collected so far into rows, as one EncodedRows."""
        done = self.run.take(self.tx)
        if done is not None:
            self.rows.append(done)

    def add(self, event: Any, cost: int) -> None:
        """Hold a converted event (seq ``self.count``) of ``cost`` estimated bytes."""
        self.close_run()
        self.rows.append(event)
        self.count += 1
        self.rows_bytes += cost

    def add_line(self, table: Table, line: bytes, op: Op = "insert") -> None:
        """Hold the encoded line of change ``self.count``."""
        done = self.run.add(table, self.tx, self.count, line, op)
        if done is not None:
            self.rows.append(done)
        self.count += 1
        self.rows_bytes += len(line) + _LINE_OVERHEAD

    def make_room(self) -> bool:
        """Past the bound: move encoded rows, the oldest first, to the lines file until
        half the bound is free. False when too few of the rows are encoded: the
        caller then makes the transaction raw."""
        try:
            return self._make_room()
        except OSError as exc:
            raise _spill_error(exc) from exc

    def _make_room(self) -> bool:
        self.close_run()
        rows = self.rows
        goal = self.rows_limit // 2
        lines_file = self.lines_file
        index = self.spilled_upto
        while index < len(rows) and self.rows_bytes > goal:
            row = rows[index]
            if type(row) is EncodedRows:
                if lines_file is None:
                    lines_file = self.lines_file = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
                        prefix="pgtail-lines-"
                    )
                lines_file.seek(0, 2)  # after the last spilled run (see truncate)
                rows[index] = _SpilledRun(row, lines_file.tell())
                lines_file.write(row.lines)
                self.rows_bytes -= len(row.lines) + row.count * _LINE_OVERHEAD - _SPILLED_COST
            index += 1
        self.spilled_upto = index
        return self.rows_bytes <= self.rows_limit

    def take_rows(self) -> Iterable[Any]:
        """The rows, for the commit, with the spilled inserts read back in order; the
        transaction holds none of them afterwards."""
        rows = self.rows
        self.rows = []
        if self.lines_file is None:
            return rows
        return self._read_back(rows, self.lines_file)

    @staticmethod
    def _read_back(rows: list[Any], lines_file: IO[bytes]) -> Iterator[Any]:
        lines_file.flush()
        seek = lines_file.seek
        read = lines_file.read
        for row in rows:
            if type(row) is _SpilledRun:
                seek(row.offset)
                lines = read(row.length)
                if len(lines) != row.length:
                    raise DecodeError("held transaction file is truncated")
                yield EncodedRows(row.table, row.tx, row.first_seq, row.count, lines, row.op)
            else:
                yield row

    def go_raw(self, tables: dict[int, _TableInfo], type_names: dict[int, str]) -> None:
        self.close_run()  # what was encoded so far stays before what is held raw
        self.deferred = False
        self.raw = True
        self.raw_tables = tables
        self.raw_type_names = type_names

    def mark(self) -> int:
        """The position of the next record: rows first, then the raw payloads. Encoded
        lines before it are closed into rows, so that it falls between two rows."""
        if not self.raw:
            self.close_run()
            return len(self.rows)
        return len(self.rows) + self.held.mark()

    def truncate(self, position: int) -> None:
        """Drop every record from ``position`` on (schema messages stay, see _Held).

        The open run of encoded lines goes too: it began after the last mark."""
        self.run = _Run()
        if position < len(self.rows):
            spilled = [r for r in self.rows[position:] if type(r) is _SpilledRun]
            if spilled:  # their lines are the file's tail: cut it there
                assert self.lines_file is not None
                self.lines_file.truncate(spilled[0].offset)
            del self.rows[position:]
            self.spilled_upto = min(self.spilled_upto, position)
            if self.raw:
                self.held.truncate(0)
        elif self.raw:
            self.held.truncate(position - len(self.rows))
            return
        before = self.count
        self.count = _changes_in(self.rows)
        if before:
            self.rows_bytes = self.rows_bytes * self.count // before

    def close(self) -> None:
        self.held.close()
        self.rows = []
        self.run = _Run()
        if self.lines_file is not None:
            self.lines_file.close()
            self.lines_file = None


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
        encoder: Callable[[Table, Sequence[values.Converter]], InsertEncoders | None] | None = None,
        type_lookup: Callable[[Sequence[int]], values.UserTypes] | None = None,
    ) -> None:
        self.protocol_version = protocol_version
        self.binary = binary
        self.spill_bytes = spill_bytes
        # A renderer's fast path: inserts whose columns all arrived as text become lines
        # of EncodedRows instead of Changes (in streamed transactions too: a mark for
        # a subtransaction closes the run, so an abort cuts between rows).
        self.encoder = encoder
        # What the server says of types that are not built in (enums, domains, arrays of
        # them), asked once per type when a Relation first uses it; see values.converters.
        self.type_lookup = type_lookup
        self._user_types: dict[int, values.UserType] = {}
        self._asked: set[int] = set()
        self.decoder = po.Decoder(protocol_version)
        # relation id -> info; replaced, never mutated, so a pending replay keeps its view
        self._tables: dict[int, _TableInfo] = {}
        self._type_names: dict[int, str] = {}
        self._infos: dict[tuple[Any, ...], _TableInfo] = {}  # see _info_for
        self._current: _Open | None = None  # Begin .. Commit (or Begin Prepare .. Prepare)
        self._streams: dict[int, _Open] = {}  # streamed transactions by top-level xid
        self._target: _Open | None = None  # where held payloads go now
        self._in_stream = False

    # -- public ---------------------------------------------------------------

    def open_transactions(self) -> bool:
        """True while a transaction or a streamed xid is held (not yet committed/aborted)."""
        return self._current is not None or bool(self._streams)

    def tables(self) -> dict[int, Table]:
        """The Table of every relation seen so far, by relation id."""
        return {rel_id: info.table for rel_id, info in self._tables.items()}

    def reset(self) -> None:
        """Forget held transactions (after a reconnect the server sends them again)."""
        for state in self._all_open():
            state.close()
        self._current = None
        self._streams.clear()
        self._target = None
        self._in_stream = False
        self.decoder = po.Decoder(self.protocol_version)

    def feed(self, payload: bytes, wal_start: int = 0) -> Iterator[Event]:
        """Take one pgoutput message; return the events it completes (see the class doc).

        ``wal_start`` (the message's WAL position) is accepted so the stream loop can pass
        what it has; events carry the LSNs the messages themselves hold.
        """
        if not payload:
            raise DecodeError("empty pgoutput message")
        first = payload[0]
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
                line = None
                try:
                    event: Any = None
                    if first == _INSERT:  # the hot path, inlined; _convert does the rest
                        header = 5 if in_stream else 1
                        info = tables.get(_XID.unpack_from(payload, header)[0])
                        if info is not None and payload[header + 4] == _NEW_TUPLE:
                            encode = info.text_encoder
                            if encode is not None:
                                line = encode(payload, header + 5, seq)
                                table = info.table
                            if line is None:
                                tup, end = _decode_tuple(payload, header + 5, "Insert.new_tuple")
                                if end == len(payload):
                                    kinds = tup.kinds
                                    if kinds == info.all_text:
                                        event = info.text_insert(tup.values, target.tx, seq)
                                        cost = info.row_cost
                                    elif kinds == info.all_binary:
                                        event = info.binary_insert(tup.values, target.tx, seq)
                                        cost = info.row_cost
                    elif first in (_UPDATE, _DELETE):  # the renderer's encoder, if any
                        header = 5 if in_stream else 1
                        info = tables.get(_XID.unpack_from(payload, header)[0])
                        if info is not None and info.change_encoders:
                            encode = info.change_encoders.get((first, payload[header + 4]))
                            if encode is not None:
                                line = encode(payload, header + 5, seq)
                                table = info.table
                    if event is None and line is None:
                        event = self._convert(payload, first, in_stream, tables, target.tx, seq)
                        cost = _event_cost(event)
                except Exception:  # noqa: BLE001 - the commit-time decode raises it, if at all
                    # decided at the commit, as before: the change may yet be dropped with
                    # a rolled-back subtransaction, and the error is the same there
                    target.go_raw(tables, self._type_names)
                else:
                    # outside the try: a failure to hold it (a full disk) is not a decode
                    # error, and the change must not be held twice
                    if line is not None:
                        target.add_line(table, line, _OP_OF_BYTE[first])
                    else:
                        target.add(event, len(payload) + cost)
                    if target.rows_bytes > target.rows_limit and not target.make_room():
                        target.go_raw(tables, self._type_names)
                    return _EMPTY
            held = target.held
            held.records.append(payload)
            held.mem_bytes += len(payload) + _RECORD_OVERHEAD
            if held.mem_bytes > held.limit:
                held.spill()
            if target.deferred and len(held) >= _DEFERRED_ROWS:
                self._catch_up(target)
            return _EMPTY
        message = self.decoder.decode(payload)
        handler = self._handlers.get(type(message))
        if handler is None:  # pragma: no cover - the decoder returns only known types
            raise DecodeError(f"unexpected message {type(message).__name__}")
        return handler(self, message, payload)

    # -- message handlers (arrival) ---------------------------------------------

    def _all_open(self) -> list[_Open]:
        found = list(self._streams.values())
        if self._current is not None:
            found.append(self._current)
        return found

    def _catch_up(self, target: _Open) -> None:
        """A deferred transaction grew large: convert what it holds, then the rest on arrival."""
        target.deferred = False
        try:
            rows = list(self._raw_events(target, target.tx, False, 0))
        except Exception:  # noqa: BLE001 - it stays raw; the commit raises the same error
            return
        held = target.held
        target.rows = rows
        target.count = _changes_in(rows)
        target.rows_bytes = held.mem_bytes + sum(map(_event_cost, rows))
        target.held = _Held(held.limit)
        held.close()
        target.raw = False
        if target.rows_bytes > target.rows_limit and not target.make_room():
            target.go_raw(self._view(target), self._type_names)

    def _view(self, target: _Open) -> dict[int, _TableInfo]:
        """The relation cache as ``target`` sees it: the shared one under its own Relations."""
        tables = self._tables
        if target.view_base is not tables:
            target.view = {**tables, **target.own}
            target.view_base = tables
        return target.view

    def _note_subxact(self, target: _Open, payload: bytes) -> None:
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
        state = self._current = self._target = _Open(message.xid, self.spill_bytes, message)
        # A small transaction is sent at once, so converting it early would gain nothing;
        # it stays raw, as it costs the least held that way (see _DEFERRED_ROWS).
        state.go_raw(self._tables, self._type_names)
        state.deferred = True
        return _EMPTY

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
        return _EMPTY

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
        return _EMPTY

    def _on_type(self, message: po.Type, payload: bytes) -> Iterator[Event]:
        name = f"{message.namespace}.{message.name}" if message.namespace else message.name
        target = self._target
        if target is not None and target.raw:
            target.held.append(payload)
        type_names = dict(self._type_names)
        type_names[message.type_oid] = name
        self._type_names = type_names
        return _EMPTY

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
                target.add(event, len(payload) + _ROW_OVERHEAD)
            return _EMPTY
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
            state = self._streams[message.xid] = _Open(message.xid, self.spill_bytes, None)
        self._target = state
        self._in_stream = True
        return _EMPTY

    def _on_stream_stop(self, message: po.StreamStop, payload: bytes) -> Iterator[Event]:
        if not self._in_stream:
            raise DecodeError("Stream Stop without a Stream Start before it")
        self._target = None
        self._in_stream = False
        return _EMPTY

    def _end_stream(self, xid: int, what: str) -> _Open:
        if self._in_stream:
            raise DecodeError(f"{what} for xid {xid} inside a stream block (before Stream Stop)")
        state = self._streams.pop(xid, None)
        if state is None:  # every change of it was in rolled-back subtransactions
            state = _Open(xid, self.spill_bytes, None)
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
            return _EMPTY
        if message.subxid == message.xid:
            del self._streams[message.xid]
            state.close()
            return _EMPTY
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
        return _EMPTY

    def _on_commit_prepared(self, message: po.CommitPrepared, payload: bytes) -> Iterator[Event]:
        event = CommitPrepared(
            xid=message.xid,
            gid=message.gid,
            commit_lsn=message.commit_lsn,
            end_lsn=message.end_lsn,
            commit_time=message.commit_time,
        )
        return iter((event,))

    def _on_rollback_prepared(
        self, message: po.RollbackPrepared, payload: bytes
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

    def _on_row_message(self, message: object, payload: bytes) -> Iterator[Event]:
        # Only reached if the decoder is asked for a row message directly (never by feed).
        raise DecodeError(f"{type(message).__name__} outside a transaction")

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
        po.CommitPrepared: _on_commit_prepared,
        po.RollbackPrepared: _on_rollback_prepared,
        po.Insert: _on_row_message,
        po.Update: _on_row_message,
        po.Delete: _on_row_message,
        po.Truncate: _on_row_message,
    }

    # -- replay -------------------------------------------------------------------

    def _info_for(self, relation: po.Relation, type_names: dict[int, str]) -> _TableInfo:
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
            if self.type_lookup is not None:
                unknown = {
                    c.type_oid for c in relation.columns if not values.is_built_in(c.type_oid)
                }
                missing = sorted(unknown - self._asked)
                if missing:
                    self._asked.update(missing)
                    found = self.type_lookup(missing)
                    self._user_types.update(found)
                    self._asked.update(found)
            info = _TableInfo(relation, type_names, self._user_types)
            # (a binary stream sends no text values: nothing to encode)
            encoders = (
                self.encoder(info.table, info.text_converters)
                if self.encoder and not self.binary
                else None
            )
            if encoders is not None:
                info.text_encoder = po.text_tuple_encoder(
                    len(info.names), encoders.plain, encoders.with_nulls
                )
                natts = len(info.names)
                by_change = info.change_encoders
                if encoders.updates:  # an Update without an old row: an insert's line
                    by_change[_UPDATE, _NEW_TUPLE] = info.text_encoder
                if encoders.full_delete is not None:
                    full = encoders.full_delete
                    by_change[_DELETE, _OLD_TUPLE] = po.text_tuple_encoder(natts, *full)
                if encoders.key_delete is not None:
                    old_key = encoders.key_delete
                    by_change[_DELETE, _KEY_TUPLE] = po.text_tuple_encoder(natts, old_key, old_key)
            if len(self._infos) >= _INFO_CACHE_SIZE:
                self._infos.clear()
            self._infos[key] = info
        return info

    def _replay(self, state: _Open, tx: Transaction, *, in_stream: bool) -> Iterator[Event]:
        # The events converted on arrival hold state.tx: give it the fields only the
        # commit knows. Nothing outside has seen it yet, so doing this to a frozen
        # object is safe, and it costs nothing per row.
        settled = state.tx
        set_field = object.__setattr__
        for name in _TX_FIELDS:
            set_field(settled, name, getattr(tx, name))
        state.close_run()
        if not state.raw and state.lines_file is None:
            rows = state.rows
            state.close()
            return itertools.chain((TxBegin(settled),), rows, (TxCommit(settled),))
        return self._events(state, settled, in_stream)

    def _convert(
        self,
        payload: bytes,
        first: int,
        in_stream: bool,
        tables: dict[int, _TableInfo],
        tx: Transaction,
        seq: int,
    ) -> Change | Truncate | Message:
        """One Insert / Update / Delete / Truncate / Message payload -> its event."""
        header = 5 if in_stream else 1  # offset of the relation id (after the xid in a stream)
        if first == _INSERT:
            # The hot path: read the header here and let the decoder's decode_tuple do
            # the row; anything unusual goes through the full parser, which raises the
            # precise DecodeError.
            try:
                relation_id = _XID.unpack_from(payload, header)[0]
                if payload[header + 4] != _NEW_TUPLE:
                    raise _NotFast
                tup, end = po.decode_tuple(payload, header + 5, "Insert.new_tuple")
                if end != len(payload):
                    raise _NotFast
            except (struct.error, IndexError, DecodeError, _NotFast):
                ins: po.Insert = po.PARSERS[_INSERT](payload, in_stream)  # type: ignore[assignment]
                relation_id, tup = ins.relation_id, ins.new
            info = tables.get(relation_id)
            if info is None:
                raise _unknown_relation("Insert", relation_id)
            kinds = tup.kinds
            if kinds == info.all_text:
                return info.text_insert(tup.values, tx, seq)
            if kinds == info.all_binary:
                return info.binary_insert(tup.values, tx, seq)
            new_row, toast = info.row(tup, "Insert.new")
            return _new_change("insert", info.table, tx, seq, new_row, None, None, toast)
        if first == _UPDATE:
            upd: po.Update = po.PARSERS[_UPDATE](payload, in_stream)  # type: ignore[assignment]
            info = tables.get(upd.relation_id)
            if info is None:
                raise _unknown_relation("Update", upd.relation_id)
            new_row, toast = info.row(upd.new, "Update.new")
            old_row: dict[str, Any] | None = None
            old_kind: OldKind | None = None
            if upd.old is not None:
                if upd.old_kind == "K":
                    old_row, _ = info.key_row(upd.old, "Update.old")
                    old_kind = "key"
                else:
                    old_row, _ = info.row(upd.old, "Update.old")
                    old_kind = "full"
            return _new_change("update", info.table, tx, seq, new_row, old_row, old_kind, toast)
        if first == _DELETE:
            dele: po.Delete = po.PARSERS[_DELETE](payload, in_stream)  # type: ignore[assignment]
            info = tables.get(dele.relation_id)
            if info is None:
                raise _unknown_relation("Delete", dele.relation_id)
            if dele.old_kind == "K":
                old_row, toast = info.key_row(dele.old, "Delete.old")
                old_kind = "key"
            else:
                old_row, toast = info.row(dele.old, "Delete.old")
                old_kind = "full"
            return _new_change("delete", info.table, tx, seq, None, old_row, old_kind, toast)
        if first == _TRUNCATE:
            trunc: po.Truncate = po.PARSERS[_TRUNCATE](payload, in_stream)  # type: ignore[assignment]
            truncated = []
            for rel_id in trunc.relation_ids:
                info = tables.get(rel_id)
                if info is None:
                    raise _unknown_relation("Truncate", rel_id)
                truncated.append(info.table)
            return Truncate(
                tables=tuple(truncated),
                cascade=trunc.cascade,
                restart_identity=trunc.restart_identity,
                tx=tx,
                seq=seq,
            )
        if first == _MESSAGE:
            msg: po.LogicalMessage = po.PARSERS[_MESSAGE](payload, in_stream)  # type: ignore[assignment]
            return Message(
                prefix=msg.prefix,
                content=msg.content,
                transactional=msg.transactional,
                lsn=msg.lsn,
                tx=tx,
                seq=seq,
            )
        raise DecodeError(f"unexpected held message {bytes([first])!r}")  # pragma: no cover

    def _events(self, state: _Open, tx: Transaction, in_stream: bool) -> Iterator[Event]:
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
        self, state: _Open, tx: Transaction, in_stream: bool, seq: int
    ) -> Iterator[Change | EncodedRows | Truncate | Message]:
        """The payloads held after the transaction went raw, decoded in order."""
        tables = state.raw_tables
        type_names = state.raw_type_names
        tables_copied = types_copied = False
        parsers = po.PARSERS
        convert = self._convert
        decode_tuple = _decode_tuple
        unpack_uint32 = _XID.unpack_from
        header = 5 if in_stream else 1  # offset of the relation id (after the xid in a stream)
        encoding = self.encoder is not None  # (a stream's aborts are all behind it here)
        run = _Run()  # encoded lines not yet yielded
        for payload in state.held:
            first = payload[0]
            event: Change | Truncate | Message
            if first == _INSERT:
                # the hot path, inlined (as in feed); _convert does the rest
                line = None
                end = -1
                try:
                    info = tables.get(unpack_uint32(payload, header)[0])
                    if info is not None and payload[header + 4] == _NEW_TUPLE:
                        if encoding and info.text_encoder is not None:
                            line = info.text_encoder(payload, header + 5, seq)
                        if line is None:
                            tup, end = decode_tuple(payload, header + 5, "Insert.new_tuple")
                except (struct.error, IndexError, DecodeError):
                    info = None
                if line is not None:
                    done = run.add(info.table, tx, seq, line)  # type: ignore[union-attr]
                    if done is not None:
                        yield done
                    seq += 1
                    continue
                if info is not None and end == len(payload):
                    kinds = tup.kinds
                    if kinds == info.all_text:
                        event = info.text_insert(tup.values, tx, seq)
                    elif kinds == info.all_binary:
                        event = info.binary_insert(tup.values, tx, seq)
                    else:
                        event = convert(payload, first, in_stream, tables, tx, seq)
                else:
                    event = convert(payload, first, in_stream, tables, tx, seq)
            elif first in (_UPDATE, _DELETE) and encoding:
                line = None
                try:
                    info = tables.get(unpack_uint32(payload, header)[0])
                    if info is not None and info.change_encoders:
                        encode = info.change_encoders.get((first, payload[header + 4]))
                        if encode is not None:
                            line = encode(payload, header + 5, seq)
                except (struct.error, IndexError):
                    line = None
                if line is not None:
                    done = run.add(info.table, tx, seq, line, _OP_OF_BYTE[first])  # type: ignore[union-attr]
                    if done is not None:
                        yield done
                    seq += 1
                    continue
                event = convert(payload, first, in_stream, tables, tx, seq)
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
                event = convert(payload, first, in_stream, tables, tx, seq)
            done = run.take(tx)
            if done is not None:
                yield done
            yield event
            seq += 1
        done = run.take(tx)
        if done is not None:
            yield done


def _event_cost(event: Change | EncodedRows | Truncate | Message) -> int:
    """Estimated bytes of an event converted on arrival, besides its payload's."""
    if type(event) is EncodedRows:
        return len(event.lines) + _LINE_OVERHEAD * event.count
    if type(event) is not Change:
        return _ROW_OVERHEAD
    rows = (event.new is not None) + (event.old is not None)
    return _ROW_OVERHEAD + _COLUMN_COST * len(event.table.columns) * rows


def _unknown_relation(what: str, relation_id: int) -> DecodeError:
    return DecodeError(
        f"{what} for relation {relation_id} before its Relation message",
        hint="the stream must be read from the start of a transaction; "
        "the server sends each relation's schema before its first change",
    )
