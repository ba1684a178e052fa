"""SQL statements that replay the change stream on another database.

Mapping (one statement per line; the output is UTF-8):

* A transaction: ``-- xid=… commit_lsn=… end_lsn=… commit_time=…`` then ``BEGIN;``,
  its statements, ``COMMIT;``.
* INSERT: ``INSERT INTO s.t (cols) VALUES (…);`` with every column the server sent.
* UPDATE: ``UPDATE s.t SET … WHERE <identity>;``. SET holds only columns that have a
  value (unchanged-TOAST columns are left out, their stored value stays) and, when the
  old value is known, only columns whose value changed; key columns whose value is
  known to be unchanged are not SET.
* DELETE: ``DELETE FROM s.t WHERE <identity>;``.
* The identity: with a key (primary key, REPLICA IDENTITY USING INDEX) ``k = v AND …``
  from the old key the server sent, or from the new row's key columns when it sent none
  (the key did not change). With REPLICA IDENTITY FULL the whole old row, NULL-safe
  (``IS NOT DISTINCT FROM``), and exactly one matching row is changed, as PostgreSQL's
  own apply does for tables with duplicate rows:
  ``WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM s.t WHERE … LIMIT 1)``.
  Columns of types without an equality operator are compared through a cast (json as
  jsonb; xml and geometric types as text).
* No identity (REPLICA IDENTITY NOTHING, or DEFAULT without a primary key): the server
  sends no old row, so the row cannot be found. The statement is written as a comment
  with the reason and the fix (its WHERE clause reads ``<row unknown>``, so it cannot
  run by accident), and a warning is reported once per table (see below).
* TRUNCATE: ``TRUNCATE s.a, s.b [CASCADE] [RESTART IDENTITY];`` (without ``ONLY``: the
  server lists each truncated relation).
* Two-phase: a prepared transaction is written as ``BEGIN;`` … ``PREPARE TRANSACTION
  'gid';`` and its outcome as ``COMMIT PREPARED 'gid';`` / ``ROLLBACK PREPARED 'gid';``.
  That replays faithfully, but the target needs ``max_prepared_transactions > 0``
  (otherwise PREPARE TRANSACTION fails and the transaction is rolled back there).
* Logical decoding messages become comments (prefix, LSN, content as an escaped
  string when it is UTF-8 text, hex otherwise).

Identifiers are quoted exactly when PostgreSQL needs it (`quote_ident`); literals are
``'<text>'::<type>`` (`quote_literal`), except integers, booleans and finite numerics,
which are written plainly, and text types, which need no cast. Types without a
built-in name (enums, domains, extension types) and fixed-length types whose bare
name would mean length 1 (``character``, ``bit``) get an uncast literal, which
PostgreSQL resolves to the column's type.

Comments carry only LSNs, xids, times and strings escaped as JSON (gids, origins,
message prefixes and contents), so nothing in a value can end a comment (only ``--``
comments are written; no ``/* */``). Literals write control characters as escapes, so
a statement never spans lines unless an identifier itself holds a line break.

Limits of replay: a target column ``GENERATED ALWAYS AS IDENTITY`` refuses the INSERTs
(make it ``BY DEFAULT`` on the target); values of non-built-in types (enums, domains,
extension types) from a ``--binary`` stream arrive as the hex of their binary form and
do not replay; lower bounds of arrays (``[0:1]={…}``) are not kept (`pgtail.values`).

Warnings: the renderer never writes to stderr itself. When ``options.extra["warn"]``
is a callable taking one ``str``, it is called with a one-line warning the first time
a table's changes cannot be replayed, and again from `SqlRenderer.close` with the
count of such changes per table.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, BinaryIO

import orjson

from pgtail import _codegen
from pgtail.changes import (
    Change,
    Column,
    CommitPrepared,
    EncodedRows,
    Event,
    InsertEncoder,
    InsertEncoders,
    Message,
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
from pgtail.changes.schema import describe
from pgtail.lsn import MAX_LSN, format_lsn
from pgtail.render.options import UNWRITABLE, RenderOptions, unwritable_value
from pgtail.sqlnames import RESERVED_KEYWORDS as RESERVED_KEYWORDS  # the one quoting helper
from pgtail.sqlnames import quote_ident as quote_ident
from pgtail.sqlnames import quote_qualified as quote_qualified
from pgtail.values import Converter, decodes_text, to_text, type_name

# Characters that make a literal an escape string (E'...'): backslash, because a
# server with standard_conforming_strings = off would read it as an escape, and
# control characters, written as escapes so every statement stays on one line.
_NEEDS_ESCAPE = re.compile(r"[\\\x00-\x1f\x7f]")
_ESCAPES = {i: f"\\x{i:02X}" for i in range(0x20)}
_ESCAPES.update({ord("\\"): "\\\\", ord("'"): "''", 0x7F: "\\x7F"})
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})
_PLAIN_NUMERIC = re.compile(r"-?[0-9]+(?:\.[0-9]+)?\Z")


def quote_literal(text: str) -> str:
    """``text`` as an SQL string constant.

    ``'...'`` with quotes doubled; when the text holds a backslash or a control
    character, an escape string ``E'...'`` (backslashes doubled, controls as
    ``\\n``/``\\r``/``\\t``/``\\xHH``), which reads the same whatever
    ``standard_conforming_strings`` is and keeps the statement on one line.
    PostgreSQL text cannot hold NUL; a NUL raises ValueError.
    """
    if _NEEDS_ESCAPE.search(text) is None:
        return "'" + text.replace("'", "''") + "'"
    if "\x00" in text:
        raise ValueError("PostgreSQL text cannot contain NUL (0x00) characters")
    return "E'" + text.translate(_ESCAPES) + "'"


def comment_string(text: str) -> str:
    """A user-controlled string for a ``--`` comment: JSON-quoted, so newlines,
    carriage returns and other control characters are escapes."""
    return json.dumps(text, ensure_ascii=False)


# --- literals per column type -------------------------------------------------

_INT_OIDS = frozenset({20, 21, 23})  # int8, int2, int4
_BOOL_OID = 16
_NUMERIC_OID = 1700
# text, varchar, name, and (uncast, see module doc) bpchar: a quoted literal is enough
_TEXT_OIDS = frozenset({25, 1043, 19, 1042})
# types whose bare SQL name implies a length of 1, or that need quoting as a name:
# "char", bpchar, bit and their arrays; written as uncast literals
_UNCAST_OIDS = frozenset({18, 1002, 1042, 1014, 1560, 1561})
# types without an equality operator, compared through a cast in a FULL identity WHERE:
# json (and json[]) as jsonb, xml and the geometric types (and their arrays) as text
_COMPARE_AS = {114: "jsonb", 199: "jsonb[]", 142: "text", 143: "text[]"}
_COMPARE_AS.update(dict.fromkeys((600, 601, 602, 603, 604, 628, 718), "text"))
_COMPARE_AS.update(dict.fromkeys((1017, 1018, 1019, 1020, 1027, 629, 719), "text[]"))

Literal = Callable[[Any], str]
_Fragment = orjson.Fragment
_dumps = orjson.dumps  # of a Fragment: its JSON text, as values.to_text gives it
_call: Any = operator.call  # call(f, x) == f(x): map() applies a list of functions in C


def _int_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if type(value) is int:
        return str(value)
    return quote_literal(to_text(value))


def _bool_literal(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "NULL"
    return quote_literal(to_text(value)) + "::boolean"


def _text_literal(value: Any) -> str:
    if type(value) is str:
        if _NEEDS_ESCAPE.search(value) is None:
            return "'" + value.replace("'", "''") + "'"
        return quote_literal(value)
    if value is None:
        return "NULL"
    return quote_literal(to_text(value))


def _numeric_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if type(value) is str and _PLAIN_NUMERIC.match(value):
        return value
    if type(value) is int:
        return str(value)
    return quote_literal(to_text(value)) + "::numeric"


# one literal function per cast (a bounded set of built-in type names), so the INSERT
# builders below can recognise them and inline their common case
_CAST_LITERALS: dict[str, Literal] = {}
_CAST_SUFFIX: dict[Literal, str] = {}
_ARRAY_LITERALS: dict[str, Literal] = {}
_ARRAY_FNS: set[Literal] = set()


def _cast_literal(cast: str) -> Literal:
    found = _CAST_LITERALS.get(cast)
    if found is None:
        found = _CAST_LITERALS[cast] = _make_cast_literal(cast)
        _CAST_SUFFIX[found] = "::" + cast
    return found


def _make_cast_literal(cast: str) -> Literal:
    suffix = "::" + cast

    def literal(value: Any) -> str:
        kind = type(value)
        if kind is str:
            text: str = value
            if _NEEDS_ESCAPE.search(text) is None:
                return "'" + text.replace("'", "''") + "'" + suffix
            return quote_literal(text) + suffix
        if value is None:
            return "NULL"
        if kind is float:  # repr holds no quote or backslash; it reads back exactly
            return "'" + repr(value) + "'" + suffix
        if kind is _Fragment:
            return quote_literal(_dumps(value).decode("utf-8")) + suffix
        return quote_literal(to_text(value)) + suffix

    return literal


# array elements that need no quoting in an array literal (values.to_text quotes a
# subset of what this does not match; quoting more is still the same value)
_PLAIN_ELEMENT = re.compile(r'[^{}",\\\s]+\Z')


class _NotFlat(Exception):
    """An array element that is not a str, int or None (see `_array_text`)."""


def _array_element(element: Any) -> str:
    kind = type(element)
    if kind is str:
        text: str = element
        if _PLAIN_ELEMENT.match(text) is None or text.upper() == "NULL":
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return text
    if kind is int:
        return str(element)
    if element is None:
        return "NULL"
    raise _NotFlat


def _array_text(value: list[Any]) -> str:
    """``values.to_text`` of a list, with a fast path for flat lists of str / int."""
    try:
        # isalnum: non-empty and none of {}",\\ or white space, so _PLAIN_ELEMENT matches
        parts = [
            element
            if type(element) is str and element.isalnum() and element.upper() != "NULL"
            else _array_element(element)
            for element in value
        ]
    except _NotFlat:
        return to_text(value)
    return "{" + ",".join(parts) + "}"


def _array_literal(cast: str) -> Literal:
    found = _ARRAY_LITERALS.get(cast)
    if found is None:
        found = _ARRAY_LITERALS[cast] = _make_array_literal(cast)
        _CAST_SUFFIX[found] = "::" + cast
        _ARRAY_FNS.add(found)
    return found


def _make_array_literal(cast: str) -> Literal:
    suffix = "::" + cast

    def literal(value: Any) -> str:
        if type(value) is list:
            return quote_literal(_array_text(value)) + suffix
        if value is None:
            return "NULL"
        return quote_literal(to_text(value)) + suffix

    return literal


def column_literal(column: Column) -> Literal:
    """The function that writes a value of ``column`` as an SQL literal."""
    oid = column.type_oid
    if oid in _INT_OIDS:
        return _int_literal
    if oid == _BOOL_OID:
        return _bool_literal
    if oid == _NUMERIC_OID:
        return _numeric_literal
    if oid in _TEXT_OIDS or oid in _UNCAST_OIDS:
        return _text_literal
    cast = type_name(oid)
    if cast is None:
        return _text_literal
    if cast.endswith("[]"):
        return _array_literal(cast)
    return _cast_literal(cast)


def literal(value: Any, column: Column) -> str:
    """``value`` (JSON-ready, see `pgtail.values`) of ``column`` as an SQL literal."""
    return column_literal(column)(value)


# --- INSERT builders ------------------------------------------------------------

# Inline forms of the literal functions' common case, for the generated builders
# below; each falls back to the function itself (``L{i}``), so the text is the same.
# A str needs no escape string when it holds no backslash and isprintable() (which is
# False for every control character, _NEEDS_ESCAPE's other members).
_PLAIN_STR = "type({x}) is str and BS not in {x} and {x}.isprintable()"
_INLINE: dict[Literal, str] = {
    _int_literal: "str({x}) if type({x}) is int else L{i}({x})",
    _bool_literal: "T if {x} is True else F if {x} is False else L{i}({x})",
    _text_literal: f"Q + {{x}}.replace(Q, QQ) + Q if {_PLAIN_STR} else L{{i}}({{x}})",
    _numeric_literal: "{x} if type({x}) is str and NUM({x}) else L{i}({x})",
}
_INLINE_CAST = (
    f"Q + {{x}}.replace(Q, QQ) + Q + S{{i}} if {_PLAIN_STR} else "
    "Q + t{i}.replace(Q, QQ) + Q + S{i} if type({x}) is FRAG"
    " and BS not in (t{i} := DUMPS({x}).decode()) and t{i}.isprintable() else L{i}({x})"
)
# a float's repr holds no quote or backslash (the cast literal's own float branch)
_INLINE_FLOAT = "Q + repr({x}) + Q + S{i} if type({x}) is float else L{i}({x})"
_FLOAT_CASTS = frozenset({"double precision", "real"})
_INLINE_ARRAY = (
    "Q + t{i}.replace(Q, QQ) + Q + S{i} if type({x}) is list"
    " and BS not in (t{i} := ARRAY({x})) and t{i}.isprintable() else L{i}({x})"
)


def _literal_lines(fns: list[Literal], namespace: dict[str, Any]) -> list[str]:
    """``v<i> = <the literal of x<i>>`` for each column, inline for the common cases."""
    lines = []
    for i, fn in enumerate(fns):
        namespace[f"L{i}"] = fn
        template = _INLINE.get(fn)
        suffix = _CAST_SUFFIX.get(fn)
        if template is None and suffix is not None:
            namespace[f"S{i}"] = suffix
            if fn in _ARRAY_FNS:
                template = _INLINE_ARRAY
            elif suffix[2:] in _FLOAT_CASTS:
                template = _INLINE_FLOAT
            else:
                template = _INLINE_CAST
        if template is None:
            template = "L{i}({x})"
        lines.append(f"    v{i} = " + template.format(x=f"x{i}", i=i))
    return lines


def _builder_namespace(head: str) -> dict[str, Any]:
    return {
        "HEAD": head,
        "BS": "\\",
        "Q": "'",
        "QQ": "''",
        "T": "true",
        "F": "false",
        "NUM": _PLAIN_NUMERIC.match,
        "FRAG": _Fragment,
        "DUMPS": _dumps,
        "ARRAY": _array_text,
    }


def _insert_builder(head: str, fns: list[Literal]) -> Callable[[Any], str]:
    """A function of a row's ``values()`` giving the INSERT statement: ``head``, the
    literal of each value by ``fns``, ``);``. Generated so that the common cases take
    no call per value; its source holds only indexes and names bound below, never a
    column name or value. Without generated code, a loop that calls each function."""
    if not _codegen.enabled():

        def build_loop(values: Any) -> str:
            return head + ", ".join(map(_call, fns, values)) + ");\n"

        return build_loop
    namespace = _builder_namespace(head)
    lines = _literal_lines(fns, namespace)
    args = "".join(f"x{i}, " for i in range(len(fns)))
    values = ", ".join(f"{{v{i}}}" for i in range(len(fns)))
    source = (
        f"def build(values):\n    ({args}) = values\n"
        + "".join(line + "\n" for line in lines)
        + f"    return f'{{HEAD}}{values});\\n'\n"
    )
    build: Callable[[Any], str] = _codegen.define(source, "build", "SQL insert", namespace)
    return build


def _text_insert_builders(
    head: str, fns: list[Literal], converters: Sequence[Converter]
) -> tuple[InsertEncoder, InsertEncoder]:
    """`_insert_builder` for the text values of an Insert: ``encode(seq, v0, ..., vN)``
    converts each value (inline where the converter is a plain decode) and gives the
    statement's bytes; one function for rows without NULLs, one for rows with them.
    Without generated code, loops that call each converter and literal function."""
    if not _codegen.enabled():
        return _loop_text_insert_builders(head, fns, converters)
    namespace = _builder_namespace(head)
    lines = _literal_lines(fns, namespace)
    args = "".join(f", v{i}" for i in range(len(fns)))
    values = ", ".join(f"{{v{i}}}" for i in range(len(fns)))
    converted = []
    for i, convert in enumerate(converters):
        namespace[f"C{i}"] = convert
        converted.append(
            f'v{i}.decode("utf-8", "replace")' if decodes_text(convert) else f"C{i}(v{i})"
        )
    tail = [*lines, f"    return f'{{HEAD}}{values});\\n'.encode('utf-8')"]
    source = [
        f"def plain(seq{args}):",
        *(f"    x{i} = {expr}" for i, expr in enumerate(converted)),
        *tail,
        f"def with_nulls(seq{args}):",
        *(f"    x{i} = None if v{i} is None else {expr}" for i, expr in enumerate(converted)),
        *tail,
    ]
    plain, with_nulls = _codegen.define_all(
        "\n".join(source), ["plain", "with_nulls"], "SQL text insert", namespace
    )
    return plain, with_nulls


def _loop_text_insert_builders(
    head: str, fns: list[Literal], converters: Sequence[Converter]
) -> tuple[InsertEncoder, InsertEncoder]:
    """`_text_insert_builders` without generated code: the same statements, by loops."""

    def plain(seq: int, *values: bytes) -> bytes:
        literals = [
            fn(convert(value)) for fn, convert, value in zip(fns, converters, values, strict=True)
        ]
        return (head + ", ".join(literals) + ");\n").encode("utf-8")

    def with_nulls(seq: int, *values: bytes | None) -> bytes:
        literals = [
            fn(None if value is None else convert(value))
            for fn, convert, value in zip(fns, converters, values, strict=True)
        ]
        return (head + ", ".join(literals) + ");\n").encode("utf-8")

    return plain, with_nulls


# --- per-table plans ------------------------------------------------------------


class _Plan:
    """What the renderer needs about one relation, computed once per Relation."""

    __slots__ = ("table", "name", "idents", "literals", "compare_as", "insert_heads")

    def __init__(self, table: Table) -> None:
        self.table = table
        self.name = quote_qualified(table.schema, table.name)
        self.idents = {c.name: quote_ident(c.name) for c in table.columns}
        self.literals = {c.name: column_literal(c) for c in table.columns}
        self.compare_as = {
            c.name: _COMPARE_AS[c.type_oid] for c in table.columns if c.type_oid in _COMPARE_AS
        }
        self.insert_heads: dict[tuple[str, ...], Callable[[Any], str]] = {}

    def ident(self, name: str) -> str:
        found = self.idents.get(name)
        return found if found is not None else quote_ident(name)

    def lit(self, name: str, value: Any) -> str:
        fn = self.literals.get(name)
        if fn is None:
            return "NULL" if value is None else quote_literal(to_text(value))
        return fn(value)

    def insert_sql(self, new: Mapping[str, Any]) -> str:
        """``INSERT INTO t (names) VALUES (…);`` and a newline for the row ``new``."""
        names = tuple(new)
        build = self.insert_heads.get(names)
        if build is not None:
            return build(new.values())
        cols = ", ".join(self.ident(n) for n in names)
        head = f"INSERT INTO {self.name} ({cols}) VALUES ("
        fns = [self.literals.get(n, _text_literal) for n in names]
        if len(self.insert_heads) < 64:
            build = self.insert_heads[names] = _insert_builder(head, fns)
            return build(new.values())
        return head + ", ".join(map(_call, fns, new.values())) + ");\n"

    def key_condition(self, row: Mapping[str, Any], names: Iterable[str]) -> str:
        parts = []
        for n in names:
            lit = self.lit(n, row[n])
            op = " IS " if lit == "NULL" else " = "
            parts.append(self.ident(n) + op + lit)
        return " AND ".join(parts)

    def full_condition(self, row: Mapping[str, Any]) -> str:
        parts = []
        for n, value in row.items():
            compare_as = self.compare_as.get(n)
            if compare_as is not None and value is not None:
                cast = "::" + compare_as
                lit = quote_literal(to_text(value)) + cast
                parts.append(f"{self.ident(n)}{cast} IS NOT DISTINCT FROM {lit}")
            else:
                parts.append(f"{self.ident(n)} IS NOT DISTINCT FROM {self.lit(n, value)}")
        cond = " AND ".join(parts) if parts else "true"
        return f"(tableoid, ctid) = (SELECT tableoid, ctid FROM {self.name} WHERE {cond} LIMIT 1)"


def insert_encoder(table: Table, text_converters: Sequence[Converter]) -> InsertEncoders | None:
    """The SQL fast path for inserts whose values all arrived as text (or NULL).

    ``encode(seq, *values)`` gives the INSERT statement `SqlRenderer` writes for the row,
    byte for byte (the same literals as the per-table builder, each value converted
    inline, without a row dict or a Change), and `SqlRenderer` writes `EncodedRows` as
    they are. None for a name with a line break: an encoded statement must be one line.
    """
    columns = table.columns
    if not columns or len(text_converters) != len(columns):
        return None
    names = (table.schema, table.name, *(c.name for c in columns))
    if any("\n" in name or "\r" in name for name in names):
        return None
    plan = _Plan(table)
    idents = ", ".join(plan.ident(c.name) for c in columns)
    plain, with_nulls = _text_insert_builders(
        f"INSERT INTO {plan.name} ({idents}) VALUES (",
        [plan.literals[c.name] for c in columns],
        text_converters,
    )
    return InsertEncoders(plain, with_nulls)


def _no_identity_reason(table: Table, qualified: str) -> str:
    if table.replica_identity == "nothing":
        return (
            f"{qualified} has REPLICA IDENTITY NOTHING, so the server sent no old row to find "
            f"it by; fix: ALTER TABLE {qualified} REPLICA IDENTITY FULL (or add a primary key "
            "and use DEFAULT)"
        )
    if table.replica_identity == "default" and not table.key_columns:
        return (
            f"{qualified} has no primary key and REPLICA IDENTITY DEFAULT, so the server sent "
            f"no old row to find it by; fix: add a primary key or ALTER TABLE {qualified} "
            "REPLICA IDENTITY FULL"
        )
    return (
        f"the server sent no old row or key for this change of {qualified} "
        f"(REPLICA IDENTITY {table.replica_identity.upper()}); fix: ALTER TABLE {qualified} "
        "REPLICA IDENTITY FULL"
    )


def tx_comment(tx: Transaction) -> str:
    commit_lsn = tx.commit_lsn
    end_lsn = tx.end_lsn
    if (
        tx.origin is None
        and tx.gid is None
        and not tx.prepared
        and not tx.streamed
        and 0 <= commit_lsn <= MAX_LSN
        and 0 <= end_lsn <= MAX_LSN
    ):
        # the usual transaction, once per transaction: one format (the same text)
        return (
            f"-- xid={tx.xid} commit_lsn={commit_lsn >> 32:X}/{commit_lsn & 0xFFFFFFFF:X}"
            f" end_lsn={end_lsn >> 32:X}/{end_lsn & 0xFFFFFFFF:X}"
            f" commit_time={tx.commit_time.isoformat(timespec='microseconds')}"
        )
    parts = [
        f"xid={tx.xid}",
        f"commit_lsn={format_lsn(tx.commit_lsn)}",
        f"end_lsn={format_lsn(tx.end_lsn)}",
        f"commit_time={tx.commit_time.isoformat(timespec='microseconds')}",
    ]
    if tx.origin is not None:
        parts.append(f"origin={comment_string(tx.origin)}")
        if tx.origin_lsn is not None:
            parts.append(f"origin_lsn={format_lsn(tx.origin_lsn)}")
    if tx.gid is not None:
        parts.append(f"gid={comment_string(tx.gid)}")
    if tx.prepared:
        parts.append("prepared")
    if tx.streamed:
        parts.append("streamed")
    return "-- " + " ".join(parts)


class SqlRenderer:
    """Writes each event as SQL statements (see the module docstring for the mapping)."""

    def __init__(self, out: BinaryIO, options: RenderOptions | None = None) -> None:
        self._out = out
        opts = options or RenderOptions()
        warn = opts.extra.get("warn")
        self._warn: Callable[[str], None] | None = warn if callable(warn) else None
        self._plans: dict[int, _Plan] = {}
        self._skipped: dict[str, int] = {}

    # -- helpers

    def _plan(self, table: Table) -> _Plan:
        plan = self._plans.get(table.relation_id)
        if plan is None or plan.table is not table:
            if plan is not None and plan.table == table:
                plan.table = table
            else:
                plan = _Plan(table)
                self._plans[table.relation_id] = plan
        return plan

    def _write(self, text: str) -> None:
        self._out.write(text.encode("utf-8"))

    def _skip(self, plan: _Plan, reason: str, statement: str) -> str:
        count = self._skipped.get(plan.name, 0)
        self._skipped[plan.name] = count + 1
        if count == 0 and self._warn is not None:
            self._warn(
                f"cannot replay changes to {plan.name}: {reason}; they are written as comments"
            )
        # identifiers (in the reason and the statement) may hold line breaks
        return f"-- cannot replay: {_one_line(reason)}\n-- {_one_line(statement)}\n"

    # -- statements

    def change_sql(self, change: Change) -> str:
        """The statement(s) for one change, with a trailing newline."""
        plan = self._plans.get(change.table.relation_id)
        if plan is None or plan.table is not change.table:
            plan = self._plan(change.table)
        op = change.op
        if op == "insert":
            return plan.insert_sql(change.new or {})
        old = change.old
        table = change.table
        where: str | None = None
        reason = ""
        key_names = table.key_columns
        if old is not None and change.old_kind == "full":
            where = plan.full_condition(old)
        elif old is not None and key_names:
            missing = [n for n in key_names if n not in old]
            if missing:
                reason = f"key column(s) {', '.join(missing)} of {plan.name} were not sent"
            else:
                where = plan.key_condition(old, key_names)
        elif op == "update" and key_names and change.new is not None:
            new = change.new
            missing = [n for n in key_names if n not in new]
            if missing:
                reason = (
                    f"key column(s) {', '.join(missing)} of {plan.name} were not sent "
                    "(unchanged TOAST) and no old key came with the update"
                )
            else:
                where = plan.key_condition(new, key_names)
        else:
            reason = _no_identity_reason(table, plan.name)
        if op == "delete":
            if where is None:
                return self._skip(plan, reason, f"DELETE FROM {plan.name} WHERE <row unknown>;")
            return f"DELETE FROM {plan.name} WHERE {where};\n"
        new = change.new or {}
        sets = self._set_list(plan, change, new, old, where is not None and old is None)
        if where is None:
            return self._skip(plan, reason, f"UPDATE {plan.name} SET {sets} WHERE <row unknown>;")
        return f"UPDATE {plan.name} SET {sets} WHERE {where};\n"

    @staticmethod
    def _set_list(
        plan: _Plan,
        change: Change,
        new: Mapping[str, Any],
        old: Mapping[str, Any] | None,
        key_from_new: bool,
    ) -> str:
        skip: set[str] = set()
        if key_from_new:
            skip.update(change.table.key_columns)
        sets = []
        for n, value in new.items():
            if n in skip:
                continue
            if old is not None and n in old:
                prev = old[n]
                if type(prev) is type(value) and prev == value and _same(prev, value):
                    continue
            sets.append(f"{plan.ident(n)} = {plan.lit(n, value)}")
        if not sets:
            # nothing changed (UPDATE t SET x = x): keep the statement, set the
            # columns to what they are, so triggers and row versions match
            sets = [f"{plan.ident(n)} = {plan.lit(n, v)}" for n, v in new.items()]
        if not sets:
            first = change.table.columns[0].name if change.table.columns else None
            if first is not None:
                ident = plan.ident(first)
                sets = [f"{ident} = {ident}"]
        return ", ".join(sets)

    def truncate_sql(self, event: Truncate) -> str:
        names = ", ".join(self._plan(t).name for t in event.tables)
        options = ""
        if event.restart_identity:
            options += " RESTART IDENTITY"
        if event.cascade:
            options += " CASCADE"
        return f"TRUNCATE {names}{options};\n"

    def snapshot_begin_sql(self, copy: TableCopy) -> str:
        """A table's copy is one transaction that empties the target table first, so
        that replayed into any target (or again, after an interrupted run) the table
        ends equal to the source's at the snapshot."""
        name = self._plan(copy.table).name
        return (
            f"-- snapshot of {name} at lsn={format_lsn(copy.lsn)} (table {copy.number} of"
            f" {copy.tables}, about {copy.rows_estimate} rows)\nBEGIN;\nTRUNCATE {name};\n"
        )

    def _write_snapshot_rows(self, rows: SnapshotRows) -> None:
        if rows.lines:  # from insert_encoder: whole INSERT statements
            self._out.write(rows.lines)
            return
        plan = self._plan(rows.copy.table)
        self._write("".join(plan.insert_sql(row) for row in rows.rows))

    @staticmethod
    def message_sql(event: Message) -> str:
        try:
            content = "content=" + comment_string(event.content.decode("utf-8"))
        except UnicodeDecodeError:
            content = "content_hex=" + event.content.hex()
        kind = "transactional" if event.transactional else "non-transactional"
        return (
            f"-- message prefix={comment_string(event.prefix)} {kind} "
            f"lsn={format_lsn(event.lsn)} {content}\n"
        )

    def render(self, event: Event) -> None:
        if type(event) is Change:
            try:
                statement = self.change_sql(event)
            except UNWRITABLE as exc:
                plan = self._plan(event.table)
                raise unwritable_value(event, exc, plan.lit, "SQL") from None
            self._out.write(statement.encode("utf-8"))
        elif type(event) is EncodedRows:  # from insert_encoder: whole statements
            self._out.write(event.lines)
        elif isinstance(event, TxBegin):
            self._write(tx_comment(event.tx) + "\nBEGIN;\n")
        elif isinstance(event, TxCommit):
            tx = event.tx
            if tx.prepared and tx.gid is not None:
                self._write(f"PREPARE TRANSACTION {quote_literal(tx.gid)};\n")
            else:
                self._out.write(b"COMMIT;\n")
        elif type(event) is SnapshotRows:
            self._write_snapshot_rows(event)
        elif isinstance(event, SnapshotBegin):
            self._write(self.snapshot_begin_sql(event.copy))
        elif isinstance(event, SnapshotEnd):
            name = self._plan(event.copy.table).name
            self._write(f"COMMIT;\n-- snapshot of {name}: {event.rows} rows\n")
        elif isinstance(event, SchemaChange):
            name = self._plan(event.table).name
            notes = "; ".join(describe(event.previous, event.table))
            self._write(f"-- schema of {_one_line(name)} changed: {_one_line(notes)}\n")
        elif isinstance(event, Truncate):
            self._write(self.truncate_sql(event))
        elif isinstance(event, Message):
            self._write(self.message_sql(event))
        elif isinstance(event, CommitPrepared):
            self._write(
                f"-- xid={event.xid} commit_lsn={format_lsn(event.commit_lsn)} "
                f"end_lsn={format_lsn(event.end_lsn)} "
                f"commit_time={event.commit_time.isoformat(timespec='microseconds')}\n"
                f"COMMIT PREPARED {quote_literal(event.gid)};\n"
            )
        elif isinstance(event, RollbackPrepared):
            self._write(
                f"-- xid={event.xid} rollback_end_lsn={format_lsn(event.rollback_end_lsn)} "
                f"rollback_time={event.rollback_time.isoformat(timespec='microseconds')}\n"
                f"ROLLBACK PREPARED {quote_literal(event.gid)};\n"
            )
        else:
            raise TypeError(f"cannot render {type(event).__name__} as SQL")

    def close(self) -> None:
        if self._warn is not None:
            for name, count in self._skipped.items():
                self._warn(
                    f"{count} change(s) to {name} could not be replayed and were written "
                    "as comments"
                )
        self._skipped.clear()


def _one_line(text: str) -> str:
    """``text`` with its line breaks as ``\\n``/``\\r`` escapes (for ``--`` comments)."""
    if "\n" in text or "\r" in text:
        return text.replace("\n", "\\n").replace("\r", "\\r")
    return text


def _same(a: Any, b: Any) -> bool:
    """Equal for the purpose of leaving a column out of SET (floats: same bits)."""
    if type(a) is float:
        return repr(a) == repr(b)
    return True
