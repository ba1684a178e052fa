"""DDL for SQL replay: a table's first sight and its changes of shape as statements.

`ddl_sql` turns a `pgtail.changes.ddl.TableDdl` into SQL, written before the first row
that needs it (in that row's transaction):

* first sight: ``CREATE TABLE IF NOT EXISTS s.t (c type [NOT NULL] [DEFAULT …], …,
  PRIMARY KEY (…));`` with the columns the stream sends, in its order, then ``ALTER
  TABLE s.t ADD COLUMN IF NOT EXISTS …`` for each column outside the key (a target from
  an earlier run lacks the columns added while pgtail was not running), with
  ``client_min_messages`` raised for them (no NOTICE for what the target has; a
  snapshot's, which comes before the table's transaction, in a transaction of its own);
* a changed table: ``ALTER TABLE … SET SCHEMA``/``RENAME TO``, then ``RENAME COLUMN``,
  ``DROP COLUMN``, ``ALTER COLUMN c TYPE t USING c::t``, ``ADD COLUMN c t [DEFAULT …]
  [NOT NULL]`` and ``REPLICA IDENTITY …``, in that order (each later one names columns
  as the earlier ones left them; added columns go last, where the source put them).

Types, NOT NULL, constant defaults, the primary key and column numbers come from the
catalog (`TableShape`, looked up when the change was read). A column renamed is told
from one dropped and another added by its number when the catalog says both; otherwise
by place and type. Where the catalog no longer has the table (dropped since), the
statements say what the stream says (names and built-in types) and a comment says what
could not be written. Pure: no I/O.
"""

from __future__ import annotations

from pgtail.changes.ddl import TableDdl, TableShape
from pgtail.changes.events import Column, Table
from pgtail.changes.schema_events import describe, renamed_in_place
from pgtail.sqlnames import quote_ident, quote_qualified
from pgtail.values import type_name

_QUIET = "SET LOCAL client_min_messages = warning;\n"
_LOUD = "SET LOCAL client_min_messages TO DEFAULT;\n"
_IDENTITY = {"default": "DEFAULT", "full": "FULL", "nothing": "NOTHING"}
_TIME_TYPES = {1083, 1114, 1184, 1266, 1186}  # time, timestamp(tz), timetz, interval


def ddl_sql(event: TableDdl) -> str:
    """The statements (and comments) for ``event``, each line ending in a newline."""
    if event.previous is None:
        statements = create_table_sql(event.table, event.shape)
        if "\nCREATE TABLE" not in "\n" + statements:
            return statements  # (a comment only)
        # IF NOT EXISTS says NOTICE for each table and column the target has: not a word
        quiet = f"{_QUIET}{statements}{_LOUD}"
        return quiet if event.tx is not None else f"BEGIN;\n{quiet}COMMIT;\n"
    return alter_table_sql(event.previous, event.table, event.shape, event.previous_shape)


def _comment(text: str) -> str:
    return "-- " + text.replace("\n", "\\n").replace("\r", "\\r") + "\n"


def _builtin_type(column: Column) -> str | None:
    """A built-in type's name with its modifier (varchar(10), numeric(12,2), …)."""
    name = type_name(column.type_oid)
    typmod = column.type_modifier
    if name is None or typmod < 0:
        return name
    if column.type_oid in (1042, 1043) and typmod >= 4:  # bpchar, varchar
        return f"{name}({typmod - 4})"
    if column.type_oid == 1700 and typmod >= 4:  # numeric
        precision, scale = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
        return f"{name}({precision},{scale})"
    if column.type_oid in (1560, 1562):  # bit, varbit
        return f"{name}({typmod})"
    if column.type_oid in _TIME_TYPES and column.type_oid != 1186:
        head, _, tail = name.partition(" ")
        return f"{head}({typmod}) {tail}".rstrip()
    return None  # (interval fields, …): only the catalog says


def _column_type(column: Column, shape: TableShape | None) -> str | None:
    found = shape.column(column.name) if shape is not None else None
    if found is not None and (found.type_oid, found.type_modifier) == (
        column.type_oid,
        column.type_modifier,
    ):
        return found.type_sql
    return _builtin_type(column)


def _column_clauses(column: Column, shape: TableShape | None) -> str:
    found = shape.column(column.name) if shape is not None else None
    clauses = ""
    if found is not None and found.type_oid == column.type_oid:
        if found.default is not None:
            clauses += f" DEFAULT {found.default}"
        if found.not_null:
            clauses += " NOT NULL"
    return clauses


def create_table_sql(table: Table, shape: TableShape | None) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for a table's first sight in the run."""
    name = quote_qualified(table.schema, table.name)
    missing = [c.name for c in table.columns if _column_type(c, shape) is None]
    if missing or not table.columns:
        why = (
            "the catalog no longer has the table"
            if shape is None
            else "it has no columns the stream sends"
            if not table.columns
            else "the catalog does not say the type of column(s) " + ", ".join(missing)
        )
        return _comment(f"CREATE TABLE IF NOT EXISTS {name} not written: {why}")
    parts = [
        f"{quote_ident(c.name)} {_column_type(c, shape)}{_column_clauses(c, shape)}"
        for c in table.columns
    ]
    names = {c.name for c in table.columns}
    key: tuple[str, ...] = ()
    if shape is not None and shape.primary_key and set(shape.primary_key) <= names:
        key = shape.primary_key
    elif shape is None and table.replica_identity == "default":
        key = table.key_columns  # (with DEFAULT identity, the key is the primary key)
    if key:
        parts.append("PRIMARY KEY (" + ", ".join(quote_ident(k) for k in key) + ")")
    out = ""
    if shape is None:
        out += _comment(
            f"{name} is no longer in the catalog (dropped since?): its NOT NULL and"
            " DEFAULT clauses are not written"
        )
    out += f"CREATE TABLE IF NOT EXISTS {name} ({', '.join(parts)});\n"
    # a target that has the table from an earlier run may lack columns added since
    adds = [
        f"ADD COLUMN IF NOT EXISTS {part}"
        for column, part in zip(table.columns, parts, strict=False)
        if column.name not in key
    ]
    if adds:
        out += f"ALTER TABLE {name} {', '.join(adds)};\n"
    if table.replica_identity in ("full", "nothing"):
        out += f"ALTER TABLE {name} REPLICA IDENTITY {_IDENTITY[table.replica_identity]};\n"
    return out


def column_moves(
    previous: Table, table: Table, shape: TableShape | None, previous_shape: TableShape | None
) -> tuple[list[tuple[Column, Column]], list[Column], list[Column]]:
    """(renamed (was, now), dropped, added) columns between two definitions."""
    before = {c.name for c in previous.columns}
    after = {c.name for c in table.columns}
    dropped = [c for c in previous.columns if c.name not in after]
    added = [c for c in table.columns if c.name not in before]
    renamed: list[tuple[Column, Column]] = []
    numbers_known = (
        shape is not None
        and previous_shape is not None
        and all(previous_shape.column(c.name) is not None for c in dropped)
        and all(shape.column(c.name) is not None for c in added)
    )
    if numbers_known and shape is not None and previous_shape is not None:
        was_at = {previous_shape.column(c.name).attnum: c for c in dropped}  # type: ignore[union-attr]
        for now in list(added):
            was = was_at.get(shape.column(now.name).attnum)  # type: ignore[union-attr]
            if was is not None and was in dropped:
                renamed.append((was, now))
    else:
        renamed = renamed_in_place(previous, table, dropped, added)
    for was, now in renamed:
        dropped.remove(was)
        added.remove(now)
    return renamed, dropped, added


def alter_table_sql(
    previous: Table, table: Table, shape: TableShape | None, previous_shape: TableShape | None
) -> str:
    """The ``ALTER TABLE`` statements that take ``previous`` to ``table``."""
    name = quote_qualified(table.schema, table.name)
    out = [_comment(f"schema of {name} changed: " + "; ".join(describe(previous, table)))]
    at = quote_qualified(previous.schema, previous.name)
    if previous.schema != table.schema:
        out.append(f"ALTER TABLE {at} SET SCHEMA {quote_ident(table.schema)};\n")
        at = quote_qualified(table.schema, previous.name)
    if previous.name != table.name:
        out.append(f"ALTER TABLE {at} RENAME TO {quote_ident(table.name)};\n")
    renamed, dropped, added = column_moves(previous, table, shape, previous_shape)
    for was, now in renamed:
        old_ident, new_ident = quote_ident(was.name), quote_ident(now.name)
        out.append(f"ALTER TABLE {name} RENAME COLUMN {old_ident} TO {new_ident};\n")
    for column in dropped:
        out.append(f"ALTER TABLE {name} DROP COLUMN {quote_ident(column.name)};\n")
    old = {c.name: c for c in previous.columns}
    old.update({now.name: was for was, now in renamed})
    unwritten = []
    for column in table.columns:
        old_column = old.get(column.name)
        if old_column is None or (old_column.type_oid, old_column.type_modifier) == (
            column.type_oid,
            column.type_modifier,
        ):
            continue
        ident = quote_ident(column.name)
        new_type = _column_type(column, shape)
        if new_type is None:
            unwritten.append(f"the new type of column {column.name}")
            continue
        out.append(
            f"ALTER TABLE {name} ALTER COLUMN {ident} TYPE {new_type} USING {ident}::{new_type};\n"
        )
    for column in added:
        new_type = _column_type(column, shape)
        if new_type is None:
            unwritten.append(f"ADD COLUMN {column.name} (its type)")
            continue
        out.append(
            f"ALTER TABLE {name} ADD COLUMN {quote_ident(column.name)} {new_type}"
            f"{_column_clauses(column, shape)};\n"
        )
    if previous.replica_identity != table.replica_identity:
        identity = _IDENTITY.get(table.replica_identity)
        if identity is not None:
            out.append(f"ALTER TABLE {name} REPLICA IDENTITY {identity};\n")
        else:
            index = shape.identity_index if shape is not None else None
            unwritten.append(f"REPLICA IDENTITY USING INDEX {index or '?'} (the source's index)")
    if shape is None and added:
        unwritten.append("DEFAULT and NOT NULL of added columns (the catalog no longer has it)")
    if unwritten:
        out.append(_comment(f"not written for {name}: " + "; ".join(unwritten)))
    if len(out) == 1 and describe(previous, table) == ["definition changed"]:
        return ""  # nothing DDL says changed (a type's name only)
    return "".join(out)
