"""SQL statements that replay the change stream on another database.

Mapping (one statement per line; the output is UTF-8):

* A transaction: ``-- xid=… commit_lsn=… end_lsn=… commit_time=…`` then ``BEGIN;``,
  its statements, ``COMMIT;``.
* INSERT: ``INSERT INTO s.t (cols) VALUES (…);`` with every column the server sent.
* UPDATE: ``UPDATE s.t SET … WHERE <identity>;``. SET holds only columns that have a
  value (unchanged-TOAST columns are left out, their stored value stays) and, when the
  old value is known, only columns whose literal differs from the old one's; key
  columns known to be unchanged are not SET.
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
* A table's first change in a run (``CREATE TABLE IF NOT EXISTS``) and a change of its
  shape (``ALTER TABLE``) are written before the first row that needs them, in its
  transaction, from a `TableDdl` (`pgtail.render.sql_ddl`); without those events (the
  CLI's ``--no-ddl``) a change of shape is a comment.
* A snapshot: per table ``BEGIN; TRUNCATE s.t; COPY s.t (cols) FROM STDIN;``, the rows
  in COPY's text format, ``\\.`` and ``COMMIT;`` (a run stopped inside a table's copy
  ends the block with ``ROLLBACK;``).
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

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, BinaryIO

from pgtail.changes import (
    LARGE_VALUE,
    Change,
    CommitPrepared,
    EncodedRows,
    Event,
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
from pgtail.changes.ddl import TableDdl
from pgtail.changes.schema_events import describe
from pgtail.lsn import format_lsn
from pgtail.render.options import UNWRITABLE, RenderOptions, unwritable_value
from pgtail.render.sql_ddl import ddl_sql
from pgtail.render.sql_literals import (
    COMPARE_AS,
    column_literal,
    comment_string,
    insert_builder,
    large_literals_encoder,
    quote_literal,
    text_literal,
)
from pgtail.render.sql_literals import literal as literal
from pgtail.render.sql_rows import text_row_encoders
from pgtail.render.tx_text import usual_tx
from pgtail.sqlnames import RESERVED_KEYWORDS as RESERVED_KEYWORDS  # the one quoting helper
from pgtail.sqlnames import quote_ident as quote_ident
from pgtail.sqlnames import quote_qualified as quote_qualified
from pgtail.values import Converter, to_text

_call: Any = operator.call  # call(f, x) == f(x): map() applies a list of functions in C


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
            c.name: COMPARE_AS[c.type_oid] for c in table.columns if c.type_oid in COMPARE_AS
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
        fns = [self.literals.get(n, text_literal) for n in names]
        if len(self.insert_heads) < 64:
            build = self.insert_heads[names] = insert_builder(head, fns)
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


def sql_statement_encoder(
    table: Table, text_converters: Sequence[Converter]
) -> InsertEncoders | None:
    """The SQL fast path for changes whose values all arrived as text (or NULL).

    ``encode(seq, *values)`` gives the INSERT statement `SqlRenderer` writes for the row,
    byte for byte (the same literals as the per-table builder, each value converted
    inline, without a row dict or a Change), and `SqlRenderer` writes `EncodedRows` as
    they are; likewise the UPDATE of an Update without an old row (when the table has a
    key), the UPDATE of one with its old key or row, and the DELETE of a Delete
    (`pgtail.render.sql_rows`). None for a name with a line break: an encoded statement
    must be one line.
    """
    columns = table.columns
    if not columns or len(text_converters) != len(columns):
        return None
    names = (table.schema, table.name, *(c.name for c in columns))
    if any("\n" in name or "\r" in name for name in names):
        return None
    plan = _Plan(table)
    # inserts, updates without an old row and deletes: the statements `change_sql` writes
    column_names = [c.name for c in columns]
    keys = [column_names.index(k) for k in table.key_columns if k in column_names]
    encoders = text_row_encoders(
        plan.name,
        [plan.ident(n) for n in column_names],
        [plan.literals[n] for n in column_names],
        text_converters,
        keys if keys and len(keys) == len(table.key_columns) else None,
        [plan.compare_as.get(n) for n in column_names],
    )
    fns = [plan.literals[n] for n in column_names]
    large = large_literals_encoder(encoders.insert[1], fns, text_converters)
    return InsertEncoders(
        *encoders.insert,
        large=large,
        update=encoders.update,
        full_delete=encoders.full_delete,
        key_delete=encoders.key_delete,
        key_update=encoders.key_update,
        full_update=encoders.full_update,
        copy_text=_copy_as_is,
    )


def _copy_as_is(data: bytes) -> bytes:
    """A snapshot's rows of COPY text output, for its ``COPY … FROM STDIN`` block: the
    column list is the one COPY read, each value the type's output, which its input
    reads back."""
    return data


def copy_text_row(names: Sequence[str], row: Mapping[str, Any]) -> str:
    """A converted row as one line of COPY's text format (``\\N`` for NULL)."""
    fields = []
    for name in names:
        value = row.get(name)
        if value is None:
            fields.append("\\N")
        else:
            text = to_text(value)
            if "\\" in text or "\n" in text or "\r" in text or "\t" in text:
                text = text.translate(_COPY_ESCAPES)
            fields.append(text)
    return "\t".join(fields) + "\n"


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"})


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


def tx_begin(tx: Transaction) -> bytes:
    """A transaction's comment and ``BEGIN;``, made in one format for the usual one (once
    per transaction: it counts when transactions are small)."""
    usual = None if tx.streamed else usual_tx(tx)
    if usual is None:
        return (tx_comment(tx) + "\nBEGIN;\n").encode("utf-8")
    return _TX_BEGIN % usual


_TX_BEGIN = b"-- xid=%d commit_lsn=%X/%X end_lsn=%X/%X commit_time=%s.%06d+00:00\nBEGIN;\n"


def tx_comment(tx: Transaction) -> str:
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
        # a large write, kept whole by an output that can (see the stream's writer)
        self._write_large: Callable[[bytes], Any] = getattr(out, "write_large", out.write)
        opts = options or RenderOptions()
        warn = opts.extra.get("warn")
        self._warn: Callable[[str], None] | None = warn if callable(warn) else None
        self._plans: dict[int, _Plan] = {}
        self._skipped: dict[str, int] = {}
        self._copying: str | None = None  # the table whose COPY block is open

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
            lit = plan.lit(n, value)
            # unchanged: the literal the target got before (an equal json value is not
            # SET again; -0.0 after 0.0 is)
            if old is not None and n in old and plan.lit(n, old[n]) == lit:
                continue
            sets.append(f"{plan.ident(n)} = {lit}")
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
        ends equal to the source's at the snapshot; its rows are one ``COPY … FROM
        STDIN`` block, as pg_dump writes them (an INSERT per row applies many times
        slower)."""
        plan = self._plan(copy.table)
        name = plan.name
        columns = ", ".join(plan.ident(c.name) for c in copy.table.columns)
        return (
            f"-- snapshot of {name} at lsn={format_lsn(copy.lsn)} (table {copy.number} of"
            f" {copy.tables}, about {copy.rows_estimate} rows)\nBEGIN;\nTRUNCATE {name};\n"
            f"COPY {name} ({columns}) FROM STDIN;\n"
        )

    def _write_snapshot_rows(self, rows: SnapshotRows) -> None:
        if rows.lines:  # from sql_statement_encoder: COPY's text rows as they were read
            self._out.write(rows.lines)
            return
        names = [c.name for c in rows.copy.table.columns]
        self._write("".join(copy_text_row(names, row) for row in rows.rows))

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

    def render(self, event: Event | TableDdl) -> None:
        # (by how often each comes: a small transaction is a begin, a run of encoded
        # statements and a commit)
        cls = type(event)
        if cls is EncodedRows:  # from sql_statement_encoder: whole statements
            rows: EncodedRows = event  # type: ignore[assignment]
            lines = rows.lines
            if rows.pieces or len(lines) >= LARGE_VALUE:  # (pieces: a large value's)
                for piece in rows.pieces or (lines,):
                    self._write_large(piece)
            else:
                self._out.write(lines)
        elif cls is TxBegin:
            begin: TxBegin = event  # type: ignore[assignment]
            self._out.write(tx_begin(begin.tx))
        elif cls is TxCommit:
            commit: TxCommit = event  # type: ignore[assignment]
            tx = commit.tx
            if tx.prepared and tx.gid is not None:
                self._write(f"PREPARE TRANSACTION {quote_literal(tx.gid)};\n")
            else:
                self._out.write(b"COMMIT;\n")
        elif cls is Change:
            change: Change = event  # type: ignore[assignment]
            try:
                statement = self.change_sql(change)
            except UNWRITABLE as exc:
                plan = self._plan(change.table)
                raise unwritable_value(change, exc, plan.lit, "SQL") from None
            self._out.write(statement.encode("utf-8"))
        elif type(event) is SnapshotRows:
            self._write_snapshot_rows(event)
        elif isinstance(event, SnapshotBegin):
            self._write(self.snapshot_begin_sql(event.copy))
            self._copying = self._plan(event.copy.table).name
        elif isinstance(event, SnapshotEnd):
            name = self._plan(event.copy.table).name
            self._copying = None
            self._write(f"\\.\nCOMMIT;\n-- snapshot of {name}: {event.rows} rows\n")
        elif type(event) is TableDdl:
            self._write(ddl_sql(event))
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
        if self._copying is not None:  # the run stopped inside a table's copy
            name, self._copying = self._copying, None
            self._write(f"\\.\nROLLBACK;\n-- snapshot of {name} stopped before its end\n")
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
