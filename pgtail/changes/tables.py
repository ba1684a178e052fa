"""The relation cache's entries: what the assembler knows of one table.

A Relation message becomes a `TableInfo`: the public `Table`, one text and one binary
converter per column (`pgtail.values`), and the functions that turn a row's values into a
dict and an Insert's into a `Change` in one step, generated per table through
`pgtail._codegen` (plain ones when generation is off). Also `unknown_type_oids`: which
of a Relation's types the caller must look up before the assembler sees it.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Collection, Iterable
from typing import Any

from pgtail import _codegen, values
from pgtail import pgoutput as po
from pgtail.changes.events import (
    Change,
    Column,
    LargeEncoder,
    Message,
    OldKind,
    ReplicaIdentity,
    Table,
    Transaction,
    Truncate,
)
from pgtail.errors import DecodeError

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

# A converted row costs its payload's bytes plus, per column, a dict slot and a Python
# object's header, plus its Change: measured (tracemalloc) 1,000 bytes for a 170-byte
# insert of eight mixed-type columns, 990 for a 190-byte insert of ten.
COLUMN_COST = 72
ROW_OVERHEAD = 256

Converter = Callable[[bytes], Any]
# (read, plain, with_nulls): pgoutput's reader of a text tuple's values and the
# renderer's encoders of them, without and with NULLs (see `fastpath.encode_line`)
LineEncoder = tuple[po.TextTupleReader, Callable[..., bytes], Callable[..., bytes]]
_call: Any = operator.call  # call(f, x) == f(x): lets map() apply a converter list in C

# A positional Change constructor that skips the frozen dataclass __init__ (which sets
# each field through object.__setattr__): the hot loop builds one Change per row.
new_change: Callable[..., Change] = _codegen.fast_constructor(Change)


def unknown_type_oids(relation: po.Relation, known: Collection[int]) -> list[int]:
    """The OIDs of ``relation``'s column types that are neither built in nor in ``known``,
    sorted: what to look up (`pgtail.catalog.type_lookup`) before the Relation is fed."""
    return sorted(
        {c.type_oid for c in relation.columns if not values.is_built_in(c.type_oid)} - set(known)
    )


class TableInfo:
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
        "insert_line",
        "large_encoder",
        "change_lines",
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
        self.text_row, self.text_insert = row_builders(self.table, self.names, text_converters)
        self.binary_row, self.binary_insert = row_builders(
            self.table, self.names, binary_converters
        )
        self.key_positions = tuple(i for i, c in enumerate(columns) if c.is_key)
        # set by an Assembler with an encoder: how to make the line of an Insert whose
        # values are all text or NULL (see `pgtail.changes.fastpath.encode_line`)
        self.insert_line: LineEncoder | None = None
        # ... and the line in pieces of an Insert holding a very large value (see
        # `InsertEncoders.large`), when the renderer has one
        self.large_encoder: LargeEncoder | None = None
        # (message byte, tuple flag) -> how to make that tuple's line, for the updates
        # and deletes the renderer encodes too
        self.change_lines: dict[tuple[int, int], LineEncoder] = {}
        self.row_cost = ROW_OVERHEAD + COLUMN_COST * len(columns)  # plus the payload

    def row(self, tup: po.TupleData, where: str) -> tuple[dict[str, Any], tuple[str, ...]]:
        """TupleData -> (column name -> value, names of unchanged-TOAST columns)."""
        kinds = tup.kinds
        try:
            if kinds == self.all_text:
                return self.text_row(tup.values), ()
            if kinds == self.all_binary:
                return self.binary_row(tup.values), ()
        except VALUE_ERRORS as exc:
            raise self.value_error(tup, where, exc) from None
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

    def value_error(self, tup: po.TupleData, where: str, exc: BaseException) -> DecodeError:
        """The `DecodeError` for a row whose conversion raised ``exc``: the first value
        that does not convert, by its table, column and type (what a server never sends;
        a proxy, a bug or a future server might)."""
        for i, (kind, raw) in enumerate(zip(tup.kinds, tup.values, strict=False)):
            converters = self.text_converters if kind == _KIND_TEXT else self.binary_converters
            if raw is None or kind not in (_KIND_TEXT, _KIND_BINARY) or i >= len(converters):
                continue
            try:
                converters[i](raw)
            except VALUE_ERRORS as value_exc:
                return column_error(self.table, i, where, raw, kind == _KIND_BINARY, value_exc)
        return DecodeError(f"{where}: a value of {self.table.qualified_name}: {exc}")

    def _mixed(
        self, positions: Iterable[int], tup: po.TupleData, where: str
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        kinds = tup.kinds
        raw = tup.values
        names = self.names
        row: dict[str, Any] = {}
        toast: list[str] = []
        try:
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
        except VALUE_ERRORS as exc:
            raise self.value_error(tup, where, exc) from None
        return row, tuple(toast)


# What a converter raises on a value no server sends (a text int "x", a binary int of
# another width, an array of another element type): made a DecodeError naming the column
VALUE_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    struct.error,
)


def column_error(
    table: Table, index: int, where: str, raw: bytes, binary: bool, exc: BaseException
) -> DecodeError:
    """A malformed value of ``table``'s column ``index``, as a `DecodeError`."""
    column = table.columns[index]
    shown = repr(raw[:40]) + ("..." if len(raw) > 40 else "")
    return DecodeError(
        f"{where}: malformed {'binary' if binary else 'text'} value for column"
        f" {column.name!r} ({column.type_name or column.type_oid}) of"
        f" {table.qualified_name}: {shown} ({exc})",
        hint="the server (or something between it and pgtail) sent a value its type does"
        " not read; rerun with --debug and report it",
    )


_UNROLL_MAX = 200  # columns; wider tables use the plain builders


RowBuilder = Callable[[tuple[bytes | None, ...]], dict[str, Any]]
InsertBuilder = Callable[[tuple[bytes | None, ...], Transaction, int], Change]


def row_builders(
    table: Table, names: tuple[str, ...], converters: list[Converter]
) -> tuple[RowBuilder, InsertBuilder]:
    """Functions for a row with no NULL / unchanged TOAST, built once per Relation.

    ``row(values) -> {name: value}`` and ``insert(values, tx, seq) -> Change``, generated
    as one dict display with a direct call per column (``{'id': c0(v[0]), ...}``): about
    twice as fast as ``dict(zip(names, map(...)))``, and this runs once per row. The
    source holds only indexes: names and converters are the namespace's ``n<i>`` and
    ``c<i>``, so every table of as many columns shares one compiled body. The plain
    builders serve wide tables and ``PGTAIL_NO_CODEGEN=1``, with the same results.
    """
    if len(names) > _UNROLL_MAX or not _codegen.enabled():
        return _plain_row_builders(table, names, converters)
    namespace: dict[str, Any] = {f"c{i}": conv for i, conv in enumerate(converters)}
    namespace.update({f"n{i}": name for i, name in enumerate(names)})
    namespace.update(make=new_change, table=table)
    items = ", ".join(f"n{i}: c{i}(v[{i}])" for i in range(len(names)))
    source = (
        f"def row(v):\n    return {{{items}}}\n"
        "def insert(v, tx, seq):\n"
        f"    return make('insert', table, tx, seq, {{{items}}}, None, None, ())\n"
    )
    row, insert = _codegen.define_shared(
        source, ("row", "insert"), f"rows of {len(names)} columns", namespace
    )
    return row, insert


def _plain_row_builders(
    table: Table, names: tuple[str, ...], converters: list[Converter]
) -> tuple[RowBuilder, InsertBuilder]:
    """`row_builders`' functions written by hand: a loop in C over the columns."""
    call = _call
    make = new_change

    def row(raw: tuple[bytes | None, ...]) -> dict[str, Any]:
        return dict(zip(names, map(call, converters, raw), strict=False))

    def insert(raw: tuple[bytes | None, ...], tx: Transaction, seq: int) -> Change:
        new_row = dict(zip(names, map(call, converters, raw), strict=False))
        return make("insert", table, tx, seq, new_row, None, None, ())

    return row, insert


def convert_payload(
    payload: bytes,
    first: int,
    in_stream: bool,
    tables: dict[int, TableInfo],
    tx: Transaction,
    seq: int,
) -> Change | Truncate | Message:
    """One Insert / Update / Delete / Truncate / Message payload of a transaction -> its
    event, the general way (the full parser, which raises the precise error of a malformed
    one); ``tables`` is the relation cache as the transaction sees it."""
    if first == po.MSG_INSERT:  # what row_event leaves: NULLs and TOAST come by it too
        ins: po.Insert = po.PARSERS[po.MSG_INSERT](payload, in_stream)  # type: ignore[assignment]
        info = tables.get(ins.relation_id)
        if info is None:
            raise unknown_relation("Insert", ins.relation_id)
        new_row, toast = info.row(ins.new, "Insert.new")
        return new_change("insert", info.table, tx, seq, new_row, None, None, toast)
    if first == po.MSG_UPDATE:
        upd: po.Update = po.PARSERS[po.MSG_UPDATE](payload, in_stream)  # type: ignore[assignment]
        info = tables.get(upd.relation_id)
        if info is None:
            raise unknown_relation("Update", upd.relation_id)
        new_row, toast = info.row(upd.new, "Update.new")
        if upd.old is None:
            return new_change("update", info.table, tx, seq, new_row, None, None, toast)
        old_row, _, old_kind = _old_row(info, upd.old_kind, upd.old, "Update.old")
        return new_change("update", info.table, tx, seq, new_row, old_row, old_kind, toast)
    if first == po.MSG_DELETE:
        dele: po.Delete = po.PARSERS[po.MSG_DELETE](payload, in_stream)  # type: ignore[assignment]
        info = tables.get(dele.relation_id)
        if info is None:
            raise unknown_relation("Delete", dele.relation_id)
        old_row, toast, old_kind = _old_row(info, dele.old_kind, dele.old, "Delete.old")
        return new_change("delete", info.table, tx, seq, None, old_row, old_kind, toast)
    if first == po.MSG_TRUNCATE:
        trunc: po.TruncateMessage = po.PARSERS[po.MSG_TRUNCATE](payload, in_stream)  # type: ignore[assignment]
        truncated = []
        for rel_id in trunc.relation_ids:
            info = tables.get(rel_id)
            if info is None:
                raise unknown_relation("Truncate", rel_id)
            truncated.append(info.table)
        return Truncate(
            tables=tuple(truncated),
            cascade=trunc.cascade,
            restart_identity=trunc.restart_identity,
            tx=tx,
            seq=seq,
        )
    if first == po.MSG_MESSAGE:
        msg: po.LogicalMessage = po.PARSERS[po.MSG_MESSAGE](payload, in_stream)  # type: ignore[assignment]
        return Message(
            prefix=msg.prefix,
            content=msg.content,
            transactional=msg.transactional,
            lsn=msg.lsn,
            tx=tx,
            seq=seq,
        )
    raise DecodeError(f"unexpected held message {bytes([first])!r}")  # pragma: no cover


def _old_row(
    info: TableInfo, marker: str | None, old: po.TupleData, where: str
) -> tuple[dict[str, Any], tuple[str, ...], OldKind]:
    """An Update's or Delete's old row: (row, its unchanged-TOAST columns, its kind), the
    key columns only for a ``K`` tuple, the whole row for an ``O`` one."""
    if marker == "K":
        row, toast = info.key_row(old, where)
        return row, toast, "key"
    row, toast = info.row(old, where)
    return row, toast, "full"


def unknown_relation(what: str, relation_id: int) -> DecodeError:
    """A change of a relation the stream has not described (no Relation message)."""
    return DecodeError(
        f"{what} for relation {relation_id} before its Relation message",
        hint="the stream must be read from the start of a transaction; "
        "the server sends each relation's schema before its first change",
    )
