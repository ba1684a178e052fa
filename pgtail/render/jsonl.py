"""JSON lines: one JSON object per change, one line each, written with orjson.

Schema (every line is one object; ``op`` says which shape it has). LSNs are strings
in PostgreSQL's ``X/Y`` form; times are ISO 8601 in UTC with microseconds
(``2026-11-21T23:55:34.123456+00:00``). Column values use pgtail's JSON-ready
conversion: integers and floats as numbers, ``numeric`` as an exact string, NaN and
infinities as strings, ``json``/``jsonb`` as JSON, arrays as arrays, ``bytea`` as a
``"\\x..."`` string, timestamps as ISO 8601 strings, other types as PostgreSQL's text.

Transaction fields, on every line that belongs to a transaction:
  ``xid``          transaction id (int)
  ``commit_lsn``   LSN of the commit record (of the PREPARE record for a prepared tx)
  ``end_lsn``      end of that record: the position pgtail confirms once written
  ``commit_time``  commit (or prepare) time
  ``origin``       replication origin name; present only when the tx came from one
  ``gid``          two-phase GID; present only for a prepared transaction's lines
  ``prepared``     ``true``; present only for a prepared transaction's lines

``"op": "insert" | "update" | "delete"`` (one row):
  ``schema``, ``table``, transaction fields,
  ``seq``              position of the event within its transaction, from 0
  ``replica_identity`` ``"default" | "index" | "full" | "nothing"``
  ``key``              replica identity columns -> values, or null when unknown
  ``old``              old row (columns -> values) or null when the server sent none
  ``old_kind``         ``"key"`` (old holds only the key columns), ``"full"`` (the whole
                       old row: REPLICA IDENTITY FULL), or null (no old row)
  ``new``              new row (null for delete); unchanged TOAST columns are absent
  ``unchanged_toast``  names of columns whose value was not sent (unchanged TOAST)

``"op": "truncate"``: transaction fields, ``seq``, ``tables`` (list of
  ``{"schema", "table"}``), ``cascade``, ``restart_identity`` (booleans).

``"op": "message"`` (``pg_logical_emit_message``): ``prefix``, ``content``,
  ``content_encoding`` (``"utf-8"``: content is the text; ``"base64"``: content was not
  valid UTF-8 and is base64 of the bytes), ``transactional``, ``lsn``, ``seq``; plus the
  transaction fields for a transactional message, or ``xid: null`` and no other
  transaction fields for a non-transactional one.

``"op": "snapshot"`` (``--snapshot``: a row that existed when the stream started):
  ``schema``, ``table``, ``lsn`` (the snapshot's consistent point: the row is the table
  at that LSN; every change streamed after it committed later), ``rows_estimate`` (the
  planner's row count of the table, 0 when unknown), ``seq`` (the row's number in its
  table's copy, from 0), then ``replica_identity``, ``key``, ``old`` (null),
  ``old_kind`` (null), ``new`` and ``unchanged_toast`` (``[]``) as for an insert.

``"op": "schema"``: a table's definition changed (a column added, dropped, renamed or
  retyped, the replica identity or key changed), written before the first change that
  uses the new one: ``schema``, ``table``, the transaction fields of that change,
  ``replica_identity``, ``columns`` (list of ``{"name", "type", "type_oid", "key"}``),
  ``old`` (``schema``, ``table``, ``replica_identity`` and ``columns`` before) and
  ``changes`` (what changed, in words). A table's first change in a run has none.

``"op": "begin"`` / ``"op": "commit"`` (only with ``--tx``): transaction fields.
``"op": "prepare"``: a prepared transaction's changes were all written (always
  emitted; transaction fields with ``gid`` and ``prepared``).
``"op": "commit_prepared"``: ``xid``, ``gid``, ``commit_lsn``, ``end_lsn``,
  ``commit_time``.
``"op": "rollback_prepared"``: ``xid``, ``gid``, ``prepare_end_lsn``,
  ``rollback_end_lsn``, ``prepare_time``, ``rollback_time``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, BinaryIO

import orjson

from pgtail import _codegen
from pgtail.changes import (
    Change,
    CommitPrepared,
    EncodedRows,
    Event,
    InsertEncoder,
    InsertEncoders,
    Message,
    OldNewEncoder,
    RollbackPrepared,
    SchemaChange,
    SnapshotBegin,
    SnapshotEnd,
    SnapshotRows,
    Table,
    TableCopy,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.changes.schema_events import describe
from pgtail.lsn import format_lsn
from pgtail.render.escape import c1_escaped
from pgtail.render.jsonl_code import checked_values
from pgtail.render.jsonl_code import column_code as _column_code
from pgtail.render.jsonl_code import string_checks as _string_checks
from pgtail.render.jsonl_rows import int64, one_json_each, rows_encoder
from pgtail.render.jsonl_tail import TAIL_SEPARATOR, LoopTail, tailed_source, with_tail
from pgtail.render.large import json_string_pieces, large_encoder
from pgtail.render.options import UNWRITABLE, RenderOptions, unwritable_value
from pgtail.render.tx_text import usual_tx
from pgtail.values import JSON_ESCAPES as _JSON_ESCAPES
from pgtail.values import Converter, JsonKind, dumps, json_default, text_json
from pgtail.values.jsontypes import JSON_SHAPE, json_shapes, learn_json_shape


def _dump_value(_name: str, value: Any) -> bytes:
    return dumps(value)


def iso_time(value: datetime) -> str:
    """ISO 8601 with microseconds (infinity-clamped datetimes included)."""
    return value.isoformat(timespec="microseconds")


def tx_fields(tx: Transaction) -> dict[str, Any]:
    """The transaction fields every line of ``tx`` carries."""
    fields: dict[str, Any] = {
        "xid": tx.xid,
        "commit_lsn": format_lsn(tx.commit_lsn),
        "end_lsn": format_lsn(tx.end_lsn),
        "commit_time": iso_time(tx.commit_time),
    }
    if tx.origin is not None:
        fields["origin"] = tx.origin
    if tx.prepared:
        fields["prepared"] = True
    if tx.gid is not None:
        fields["gid"] = tx.gid
    return fields


def tx_part(tx: Transaction) -> bytes:
    """`tx_fields` serialized as JSON members (no braces), a comma after them: the same
    bytes as ``dumps(tx_fields(tx))[1:-1] + b","``, made in one format for the usual
    transaction (once per transaction: it counts when transactions are small)."""
    usual = usual_tx(tx)
    if usual is None:  # (format_lsn raises for an LSN out of range)
        return dumps(tx_fields(tx))[1:-1] + b","
    # LSNs (hex) and ISO times hold nothing JSON escapes
    return _TX_PART % usual


_TX_PART = b'"xid":%d,"commit_lsn":"%X/%X","end_lsn":"%X/%X","commit_time":"%s.%06d+00:00",'


def message_content(content: bytes) -> tuple[str, str]:
    """(content, encoding) for a logical decoding message's bytes."""
    try:
        return content.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(content).decode("ascii"), "base64"


_LARGE_LINE = 1 << 20  # a line this long is not copied once more (see render)

_ENCODE_MAX_COLUMNS = 200  # wider tables take the general path (no unrolled source)


# Lays out one change's line from the pieces `row_encoders` templates: the replica
# identity key, the old row, the old row's kind and the new row, each a JSON text with
# bytes-format placeholders (or ``null``). The line starts with ``%d`` (the seq).
LineLayout = Callable[[bytes, bytes, bytes, bytes], bytes]


# The pieces of a change's line after its key (`json_line_encoder`'s ``line``), and from
# them an insert's line around its new row and a delete's after its old row or key
_OLD, _OLD_KIND, _NEW = b',"old":', b',"old_kind":', b',"new":'
_TAIL = b',"unchanged_toast":[]}\n'
_NEW_AFTER = _OLD + b"null" + _OLD_KIND + b"null" + _NEW
_NO_NEW = _NEW + b"null" + _TAIL


def json_line_encoder(table: Table, text_converters: Sequence[Converter]) -> InsertEncoders | None:
    """The JSON lines fast path for changes whose tuple arrived all text (or NULL):
    inserts, updates that carry no old row (the same line after the head), and deletes.

    Returns functions ``encode(seq, *values)``, one for rows without NULLs and one for
    rows with them (None for NULL), for the new row of an insert and for the old row of a
    replica identity full delete, and one for the old key of a delete: the change line
    from ``"seq"`` on, without its leading ``{`` and with its newline, byte for byte what
    `change_line` writes after the head; `JsonLinesRenderer` adds the head when it renders
    the `EncodedRows` the assembler collects them in. Generated once per table as bytes
    formats with the values written straight from their text (`pgtail.values.text_json`),
    so no row dict, Change or Python value is built. They raise on anything unusual, and
    the assembler then takes the general path for that row.
    """
    head = b'"seq":%d,"replica_identity":' + _percent(dumps(table.replica_identity))

    def line(key: bytes, old: bytes, old_kind: bytes, new: bytes) -> bytes:
        return head + b',"key":' + key + _OLD + old + _OLD_KIND + old_kind + _NEW + new + _TAIL

    encoders = row_encoders(table, text_converters, line, "JSON lines")
    if encoders is None:
        return None
    if encoders.key_delete is not None and encoders.full_delete is not None:
        encoders = encoders._replace(
            key_update=old_new_update(encoders.key_delete, encoders),
            full_update=old_new_update(encoders.full_delete[1], encoders),
        )
    # a large string is written in pieces (`pgtail.render.large`)
    strings = [i for i, convert in enumerate(text_converters) if text_json(convert)[0] == "string"]
    if not strings:
        return encoders
    writers = dict.fromkeys(strings, json_string_pieces)
    return encoders._replace(large=large_encoder(encoders.with_nulls, _json_string, writers))


def old_new_update(delete: InsertEncoder, encoders: InsertEncoders) -> OldNewEncoder:
    """An Update's line from its old key (``delete``: the key delete's encoder) or whole
    old row (the full delete's) and its new row: the delete's line for the old one, up to
    its ``"new":null``, then the new row's object as the insert's line writes it. Both
    lines come from the table's encoders, so the bytes are theirs: ``"key"`` and
    ``"old"`` from the old values, as `JsonLinesRenderer.change_line` takes them. A new
    row holding unchanged TOAST (which the line leaves out of ``"new"`` and names in
    ``"unchanged_toast"``) raises: the general path writes it."""
    plain, with_nulls = encoders.plain, encoders.with_nulls
    mark, cut = len(_NEW_AFTER), -len(_TAIL)

    def update(
        seq: int, old: tuple[bytes | None, ...], new: tuple[bytes | None, ...], kinds: bytes
    ) -> bytes:
        if b"u" in kinds:
            raise ValueError("unchanged TOAST: the general path")
        head = delete(seq, *old)
        if not head.endswith(_NO_NEW):
            raise ValueError("not a delete's line")
        row = (with_nulls if b"n" in kinds else plain)(seq, *new)
        start = row.index(_NEW_AFTER) + mark
        return head[: -len(_NO_NEW)] + _NEW + row[start:cut] + _TAIL

    return update


def _json_string(token: bytes) -> bytes:
    return b'"' + token + b'"'


def json_columns_encoder(
    table: Table, text_converters: Sequence[Converter]
) -> InsertEncoders | None:
    """`json_line_encoder` for the Spark source's rows: per change one line
    ``seq<TAB>key<TAB>old<TAB>new<LF>``, each of the three the JSON `change_line` writes
    for it (``null`` when absent), for the same changes. JSON text never holds a raw tab
    or newline, so the lines split back into columns without parsing any JSON.
    """

    def line(key: bytes, old: bytes, old_kind: bytes, new: bytes) -> bytes:
        return b"%d\t" + key + b"\t" + old + b"\t" + new + b"\n"

    return row_encoders(table, text_converters, line, "JSON columns")


def row_encoders(
    table: Table,
    text_converters: Sequence[Converter],
    layout: LineLayout,
    title: str,
    text_tail: Sequence[bool] | None = None,
) -> InsertEncoders | None:
    """The encoders of `json_line_encoder`, with lines laid out by ``layout``: the one
    generator of the JSON of a row straight from the server's text. The source holds
    the shape only (each column's kind, the key's positions); names live in the line
    templates in the namespace, so tables of one shape share the compiled code.

    ``text_tail`` (a flag per column: its text, else its JSON): the row's values after
    ``layout``'s line, whose fields `TAIL_SEPARATOR` separates (`pgtail.render.jsonl_tail`)."""
    columns = table.columns
    if not columns or len(columns) > _ENCODE_MAX_COLUMNS or len(text_converters) != len(columns):
        return None
    namespace: dict[str, Any] = {
        "escapes": _JSON_ESCAPES.search,
        "_dumps": orjson.dumps,
        "_shape": JSON_SHAPE,
        "_shapes": json_shapes,
        "_learn": learn_json_shape,
        "_default": json_default,
        "_int64": int64,
    }
    plain: list[str] = []  # no NULLs: ints and strings formatted by the template
    nullable: list[str] = []  # every value a JSON text of its own
    plain_pieces: dict[str, bytes] = {}  # column name -> its "name":<format> piece
    strings: list[int] = []  # the columns of kind "string", checked together in plain
    checked: list[int] = []  # timestamps written from their bytes, checked with them
    kinds = [text_json(convert) for convert in text_converters]
    for i, column in enumerate(columns):
        kind, writer = kinds[i]
        namespace[f"w{i}"] = writer
        if kind in ("convert", "utc_timestamp"):
            namespace[f"c{i}"] = writer
        if kind == "string":
            strings.append(i)
        elif kind == "utc_timestamp":
            checked.append(i)
        lines, nullable_lines, template = _column_code(i, kind)
        plain += lines
        nullable += [f"    j{i} = v{i}", f"    if j{i} is None:", f"        j{i} = b'null'"]
        nullable += nullable_lines
        plain_pieces[column.name] = _percent(dumps(column.name)) + template
    plain += _string_checks(strings, checked, "u" if text_tail is not None else None)
    keys = table.key_columns
    position = {c.name: i for i, c in enumerate(columns)}
    key_values = [f"j{position[k]}" for k in keys]
    all_values = [f"j{i}" for i in range(len(columns))]
    nullable_pieces = {c.name: _percent(dumps(c.name)) + b":%b" for c in columns}
    names = [c.name for c in columns]

    def obj(pieces: dict[str, bytes], names: Sequence[str]) -> bytes:
        return b"{" + b",".join(pieces[n] for n in names) + b"}"

    def line(pieces: dict[str, bytes], old: bytes, old_kind: bytes, new: bytes) -> bytes:
        return layout(obj(pieces, keys) if keys else b"null", old, old_kind, new)

    functions = []  # (name, body, template, the values after seq and the key)
    for variant, body, pieces in (
        ("plain", plain, plain_pieces),
        ("with_nulls", nullable, nullable_pieces),
    ):
        # an insert, and an update without an old row: the new row
        new_row = line(pieces, b"null", b"null", obj(pieces, names))
        functions.append((variant, body, new_row, all_values))
        # a delete with the whole old row (replica identity full)
        old_row = line(pieces, obj(pieces, names), b'"full"', b"null")
        functions.append((f"full_delete_{variant}", body, old_row, all_values))
    # a delete with the old key (the other columns sent as NULL)
    old_key = line(nullable_pieces, obj(nullable_pieces, keys), b'"key"', b"null")
    functions.append(("key_delete", nullable, old_key, key_values))
    if text_tail is not None:
        functions = with_tail(
            functions, kinds, text_tail, checked_values(strings, checked), namespace
        )
    # a snapshot's rows, column by column: plain code, the same with or without codegen
    many = None
    if text_tail is None:  # (a snapshot's rows have no tail: one by one)
        lay = lambda pieces: line(pieces, b"null", b"null", obj(pieces, names))  # noqa: E731
        many = rows_encoder(kinds, names, [position[k] for k in keys], lay)
    if not _codegen.enabled():
        templates = {fname: template for fname, _, template, _ in functions}
        loop = _loop_encoders(kinds, templates, [position[k] for k in keys], text_tail)
        return loop._replace(rows=many)
    plain_encode, with_nulls, full_plain, full_with_nulls, key_delete = _define(
        functions, key_values, len(columns), title, namespace
    )
    return InsertEncoders(
        plain_encode,
        with_nulls,
        updates=True,  # the same line after the head, whose op differs
        full_delete=(full_plain, full_with_nulls),
        key_delete=key_delete,
        rows=many,
    )


def _define(
    functions: list[tuple[str, list[str], bytes, list[str]]],
    key_values: list[str],
    width: int,
    title: str,
    namespace: dict[str, Any],
) -> list[Callable[..., bytes]]:
    """`row_encoders`' five functions, from (name, body, template, values) each: compiled
    once per shape (`_codegen.define_shared`), bound to this table's ``namespace``."""
    args = "".join(f", v{i}" for i in range(width))
    source = []
    for fname, body, template, values in functions:
        namespace[f"{fname}_line"] = template
        arguments = ", ".join(["seq", *key_values, *values])
        # a large string to escape: the nullable variant writes it with its quotes, not copied
        fallback = f"return {fname.replace('plain', 'with_nulls')}(seq{args})"
        code = [text.replace("return LARGE", fallback) for text in body]
        if TAIL_SEPARATOR in template:  # a line with a tail (`row_encoders`' text_tail)
            source += [f"def {fname}(seq{args}):"]
            source += tailed_source(fname, code, template, arguments, namespace)
            continue
        source += [f"def {fname}(seq{args}):", *code, f"    return {fname}_line % ({arguments})"]
    defined = _codegen.define_shared(
        "\n".join(source),
        ["plain", "with_nulls", "full_delete_plain", "full_delete_with_nulls", "key_delete"],
        f"{title}, {width} columns",
        namespace,
    )
    namespace.update(with_nulls=defined[1], full_delete_with_nulls=defined[3])
    return defined


def _loop_encoders(
    kinds: list[tuple[JsonKind, Callable[[bytes], Any]]],
    templates: dict[str, bytes],
    key_positions: list[int],
    text_tail: Sequence[bool] | None = None,
) -> InsertEncoders:
    """`json_line_encoder`'s functions without generated code: the same templates, each value
    made by a loop that does what the generated source does for its column, in the same
    order, so the bytes (and what raises) are the same.
    """
    escapes = _JSON_ESCAPES.search
    strings = [i for i, (kind, _) in enumerate(kinds) if kind == "string"]
    checked = [i for i, (kind, _) in enumerate(kinds) if kind == "utc_timestamp"]
    both = [*strings, *checked]

    def plain_values(values: tuple[bytes, ...]) -> list[Any]:
        out: list[Any] = []
        for (kind, write), value in zip(kinds, values, strict=True):
            if kind == "int":
                out.append(int(value) if len(value) <= 19 else int64(int(value)))
            elif kind == "string":
                out.append(value)
            elif kind == "raw":
                one_json_each((value,))
                out.append(value)
            elif kind == "convert":
                out.append(orjson.dumps(write(value), default=json_default))
            elif kind == "utc_timestamp":
                if value[-3:] == b"+00":
                    out.append(b'"' + value[:-3].replace(b" ", b"T", 1) + b'+00:00"')
                else:
                    out.append(orjson.dumps(write(value), default=json_default))
            else:
                out.append(write(value))
        if any(not values[i].isascii() or escapes(values[i]) is not None for i in both):
            for i in strings:
                if not values[i].isascii() or escapes(values[i]) is not None:
                    out[i] = kinds[i][1](values[i])[1:-1]
            for i in checked:  # the converter decides
                out[i] = orjson.dumps(kinds[i][1](values[i]), default=json_default)
        return out

    def nullable_values(values: tuple[bytes | None, ...]) -> list[bytes]:
        out: list[bytes] = []
        for (kind, write), value in zip(kinds, values, strict=True):
            if value is None:
                out.append(b"null")
            elif kind == "int":
                if len(value) > 19:
                    out.append(b"%d" % int64(int(value)))
                elif not value.isdigit() or (value[0] == 48 and len(value) > 1):
                    out.append(b"%d" % int(value))
                else:  # the server's text of an integer is its JSON
                    out.append(value)
            elif kind == "string":
                if value.isascii() and escapes(value) is None:
                    out.append(b'"' + value + b'"')
                else:
                    out.append(write(value))
            elif kind == "raw":
                one_json_each((value,))
                out.append(value)
            elif kind == "convert":
                out.append(orjson.dumps(write(value), default=json_default))
            elif kind == "utc_timestamp":
                if value[-3:] == b"+00" and value.isascii() and escapes(value) is None:
                    out.append(b'"' + value[:-3].replace(b" ", b"T", 1) + b'+00:00"')
                else:
                    out.append(orjson.dumps(write(value), default=json_default))
            else:
                out.append(write(value))
        return out

    def encoder(name: str, nullable: bool, key_only: bool = False) -> InsertEncoder:
        template = templates[name]
        make = nullable_values if nullable else plain_values
        tail = None if text_tail is None else LoopTail(template, text_tail, nullable)

        def encode(seq: int, *values: Any) -> bytes:
            row = make(values)
            key = [row[i] for i in key_positions]
            arguments = (seq, *key, *(key if key_only else row))
            return template % arguments if tail is None else tail.line(arguments, values, row)

        return encode

    return InsertEncoders(
        encoder("plain", False),
        encoder("with_nulls", True),
        updates=True,
        full_delete=(encoder("full_delete_plain", False), encoder("full_delete_with_nulls", True)),
        key_delete=encoder("key_delete", True, key_only=True),
    )


def _columns(table: Table) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "type": c.type_name, "type_oid": c.type_oid, "key": c.is_key}
        for c in table.columns
    ]


def _percent(text: bytes) -> bytes:
    """``text`` as a literal part of a bytes % format."""
    return text.replace(b"%", b"%%")


class JsonLinesRenderer:
    """Writes each event as one JSON object and a newline."""

    def __init__(self, out: BinaryIO, options: RenderOptions | None = None) -> None:
        self._out = out
        self._tx_lines = (options or RenderOptions()).tx_lines
        # fields shared by every line of the current transaction, computed once per tx
        self._tx: Transaction | None = None
        self._tx_fields: dict[str, Any] = {}
        self._part_tx: Transaction | None = None
        self._tx_part = b""  # its fields serialized (tx_part), between "table" and "seq"
        # id(table) -> (table, key column names): Change.key, without recomputing names
        self._key_names: dict[int, tuple[Table, tuple[str, ...]]] = {}
        # (op, id(table)) -> (table, its lines' start up to the tx fields, its key columns)
        self._table_heads: dict[tuple[str, int], tuple[Table, bytes, tuple[str, ...]]] = {}
        # the (tx, table, op) of the last change line and what it needs: a transaction's
        # changes mostly come in runs of one table and operation
        self._last: tuple[Transaction, Table, str, bytes, tuple[str, ...]] | None = None
        # id(copy) -> (copy, serialized head of its snapshot lines), for the current copy
        self._snapshot_heads: dict[int, tuple[TableCopy, bytes]] = {}

    def _fields(self, tx: Transaction) -> dict[str, Any]:
        if tx is not self._tx:
            self._tx = tx
            self._tx_fields = tx_fields(tx)
        return self._tx_fields

    def _line_parts(
        self, tx: Transaction, table: Table, op: str
    ) -> tuple[Transaction, Table, str, bytes, tuple[str, ...]]:
        """What the lines of ``op`` on ``table`` in ``tx`` share (the last ones', if the same)."""
        last = self._last
        if last is not None and last[0] is tx and last[1] is table and last[2] == op:
            return last
        if tx is not self._part_tx:
            self._part_tx = tx
            self._tx_part = tx_part(tx)
        # the table's part is serialized once, the transaction's once per transaction:
        # together the same bytes as the whole prefix serialized at once
        head_key = (op, id(table))
        start = self._table_heads.get(head_key)
        if start is None or start[0] is not table:
            prefix = {"op": op, "schema": table.schema, "table": table.name}
            start = (table, dumps(prefix)[:-1] + b",", self._key_names_of(table))
            if len(self._table_heads) >= 4096:  # tables come and go: stay bounded
                self._table_heads.clear()
            self._table_heads[head_key] = start
        last = (tx, table, op, start[1] + self._tx_part, start[2])
        self._last = last
        return last

    def change_line(self, change: Change) -> bytes:
        """The line for a change: the same object as `record`, serialized faster.

        Everything up to ``seq`` is the same for every change of one table and operation
        in one transaction, so it is serialized once per transaction; this runs once per
        row, so it also inlines `_key`.
        """
        tx = change.tx
        table = change.table
        op = change.op
        last = self._last  # _line_parts' own check, inlined: this runs once per row
        if last is None or last[0] is not tx or last[1] is not table or last[2] != op:
            last = self._line_parts(tx, table, op)
        names = last[4]
        old = change.old
        old_kind = change.old_kind
        new = change.new
        key: dict[str, Any] | None
        if not names:
            key = None
        elif old is not None and old_kind == "key":
            key = old
        else:
            row = old if old is not None else new
            if row is None:
                key = None
            elif len(names) == 1:
                name = names[0]
                key = {name: row[name]} if name in row else {}
            else:
                key = {n: row[n] for n in names if n in row}
        body = dumps(
            {
                "seq": change.seq,
                "replica_identity": table.replica_identity,
                "key": key,
                "old": old,
                "old_kind": old_kind,
                "new": new,
                "unchanged_toast": change.unchanged_toast,  # a tuple is a JSON array too
            }
        )
        return last[3] + body[1:] + b"\n"

    def encoded_lines(self, rows: EncodedRows) -> bytes:
        """The lines `json_line_encoder` wrote: each one's head put in front."""
        # up to the comma before "seq", where each encoded line starts
        head = self._line_parts(rows.tx, rows.table, rows.op)[3]
        lines = rows.lines
        return head + lines[:-1].replace(b"\n", b"\n" + head) + b"\n"

    def snapshot_lines(self, rows: SnapshotRows) -> bytes:
        """The ``"op": "snapshot"`` lines of a snapshot's rows."""
        copy = rows.copy
        head = self._snapshot_heads.get(id(copy))
        if head is None or head[0] is not copy:
            table = copy.table
            prefix = {
                "op": "snapshot",
                "schema": table.schema,
                "table": table.name,
                "lsn": format_lsn(copy.lsn),
                "rows_estimate": copy.rows_estimate,
            }
            head = (copy, dumps(prefix)[:-1] + b",")
            self._snapshot_heads = {id(copy): head}
        start = head[1]
        if rows.lines:
            lines = rows.lines
            return start + lines[:-1].replace(b"\n", b"\n" + start) + b"\n"
        table = copy.table
        names = self._key_names_of(table)
        out = []
        seq = rows.first_seq
        for row in rows.rows:
            body = dumps(
                {
                    "seq": seq,
                    "replica_identity": table.replica_identity,
                    "key": {n: row[n] for n in names} if names else None,
                    "old": None,
                    "old_kind": None,
                    "new": row,
                    "unchanged_toast": [],
                }
            )
            out.append(start + body[1:] + b"\n")
            seq += 1
        return b"".join(out)

    def _key_names_of(self, table: Table) -> tuple[str, ...]:
        entry = self._key_names.get(id(table))
        if entry is None or entry[0] is not table:
            entry = (table, table.key_columns)
            self._key_names[id(table)] = entry
        return entry[1]

    def _key(self, change: Change) -> dict[str, Any] | None:
        """Same as ``change.key``; the key column names are cached per table."""
        names = self._key_names_of(change.table)
        if not names:
            return None
        old = change.old
        if old is not None and change.old_kind == "key":
            return old
        row = old if old is not None else change.new
        if row is None:
            return None
        return {n: row[n] for n in names if n in row}

    def record(self, event: Event) -> dict[str, Any] | None:
        """The JSON object for ``event``, or None when it produces no line."""
        if isinstance(event, Change):
            table = event.table
            return {
                "op": event.op,
                "schema": table.schema,
                "table": table.name,
                **self._fields(event.tx),
                "seq": event.seq,
                "replica_identity": table.replica_identity,
                "key": self._key(event),
                "old": event.old,
                "old_kind": event.old_kind,
                "new": event.new,
                "unchanged_toast": list(event.unchanged_toast),
            }
        if isinstance(event, TxBegin):
            if not self._tx_lines:
                return None
            return {"op": "begin", **self._fields(event.tx)}
        if isinstance(event, TxCommit):
            if event.tx.prepared:
                return {"op": "prepare", **self._fields(event.tx)}
            if not self._tx_lines:
                return None
            return {"op": "commit", **self._fields(event.tx)}
        if isinstance(event, Truncate):
            return {
                "op": "truncate",
                **self._fields(event.tx),
                "seq": event.seq,
                "tables": [{"schema": t.schema, "table": t.name} for t in event.tables],
                "cascade": event.cascade,
                "restart_identity": event.restart_identity,
            }
        if isinstance(event, Message):
            content, encoding = message_content(event.content)
            record: dict[str, Any] = {
                "op": "message",
                "prefix": event.prefix,
                "content": content,
                "content_encoding": encoding,
                "transactional": event.transactional,
                "lsn": format_lsn(event.lsn),
            }
            if event.tx is not None:
                record.update(self._fields(event.tx))
            else:
                record["xid"] = None
            record["seq"] = event.seq
            return record
        if isinstance(event, SchemaChange):
            return self.schema_record(event)
        if isinstance(event, CommitPrepared):
            return {
                "op": "commit_prepared",
                "xid": event.xid,
                "gid": event.gid,
                "commit_lsn": format_lsn(event.commit_lsn),
                "end_lsn": format_lsn(event.end_lsn),
                "commit_time": iso_time(event.commit_time),
            }
        if isinstance(event, RollbackPrepared):
            return {
                "op": "rollback_prepared",
                "xid": event.xid,
                "gid": event.gid,
                "prepare_end_lsn": format_lsn(event.prepare_end_lsn),
                "rollback_end_lsn": format_lsn(event.rollback_end_lsn),
                "prepare_time": iso_time(event.prepare_time),
                "rollback_time": iso_time(event.rollback_time),
            }
        raise TypeError(f"cannot render {type(event).__name__} as JSON")

    def schema_record(self, event: SchemaChange) -> dict[str, Any]:
        """``"op": "schema"``: the table's definition now and before, and what changed."""
        table, previous = event.table, event.previous
        record: dict[str, Any] = {"op": "schema", "schema": table.schema, "table": table.name}
        if event.tx is not None:
            record.update(self._fields(event.tx))
        record["replica_identity"] = table.replica_identity
        record["columns"] = _columns(table)
        record["old"] = {
            "schema": previous.schema,
            "table": previous.name,
            "replica_identity": previous.replica_identity,
            "columns": _columns(previous),
        }
        record["changes"] = describe(previous, table)
        return record

    def render(self, event: Event) -> None:
        cls = type(event)
        # (by how often each comes: a small transaction is a begin, a run of encoded
        # lines and a commit)
        if (cls is TxBegin or cls is TxCommit) and not self._tx_lines:
            if cls is TxBegin or not event.tx.prepared:  # type: ignore[union-attr]
                return  # once per transaction: no line
        elif cls is Change:
            try:
                line = self.change_line(event)  # type: ignore[arg-type]
            except UNWRITABLE as exc:
                raise unwritable_value(event, exc, _dump_value, "JSON") from None  # type: ignore[arg-type]
            self._out.write(line if b"\xc2" not in line else c1_escaped(line))
            return
        if cls is EncodedRows:
            rows: EncodedRows = event  # type: ignore[assignment]
            if rows.pieces:  # one line in pieces (a large value): its head, then them
                write = getattr(self._out, "write_large", self._out.write)  # (see writer)
                head = self._line_parts(rows.tx, rows.table, rows.op)[3]
                write(head if b"\xc2" not in head else c1_escaped(head))
                for piece in rows.pieces:  # (each made as it is taken)
                    write(piece if b"\xc2" not in piece else c1_escaped(piece))
                return
            if len(rows.lines) > _LARGE_LINE and rows.count == 1:  # its head, itself: no copy
                head = self._line_parts(rows.tx, rows.table, rows.op)[3]
                line = rows.lines
                write = getattr(self._out, "write_large", self._out.write)
                write(head if b"\xc2" not in head else c1_escaped(head))
                write(line if b"\xc2" not in line else c1_escaped(line))
                return
            lines = self.encoded_lines(rows)
            self._out.write(lines if b"\xc2" not in lines else c1_escaped(lines))
            return
        if cls is SnapshotRows:
            lines = self.snapshot_lines(event)  # type: ignore[arg-type]
            self._out.write(lines if b"\xc2" not in lines else c1_escaped(lines))
            return
        if cls is SnapshotBegin or cls is SnapshotEnd:
            return  # a table's copy is its rows
        record = self.record(event)
        if record is not None:
            line = dumps(record) + b"\n"
            self._out.write(line if b"\xc2" not in line else c1_escaped(line))

    def close(self) -> None:
        pass
