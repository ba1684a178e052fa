"""Terminal tables: one block per transaction, one table per relation, one row per change.

A block starts with a rule naming the transaction (xid, commit LSN, commit time, and
origin, GID, "streamed" when present). Changes are grouped per relation within the
transaction and printed as psql-style tables, in chunks of at most `CHUNK_ROWS` rows, so
a huge transaction never sits in memory; after ``options.collapse`` rows of one relation
(0: never) further rows are only counted and a summary line per relation closes the
block. A truncate or a logical decoding message prints everything buffered first, so
the block keeps the order that matters.

Cells: inserts show the new row, deletes the old row (blank cells: values the server did
not send), updates ``old → new`` for changed columns when the old value is known,
unchanged columns dimmed (hidden with ``changed_only``). Markers, readable without
colour too:

* ``NULL``               SQL NULL (dim)
* ``⋯ unchanged toast``  a TOASTed value the server did not send because it did not change

A string is shown JSON-quoted (``"NULL"``, ``""``, ``"a\\nb"``) when it is empty, equals
``NULL``, starts with a double quote or ``⋯``, has leading or trailing white space, or holds
control characters (escaped, so a value can never move the cursor or inject terminal
codes). Every other string is shown as is; so a bare ``NULL`` is always SQL NULL.

Key columns (the replica identity) are listed in the table's title and styled in the
header. Tables that do not fit ``options.width`` (80 by default) with at least
`MIN_COLUMN_WIDTH` cells per column are folded vertically, one ``column │ value``
line per column, like psql's expanded mode. Values are cut at ``options.max_width``
cells with ``…``.

Rich supplies the cell widths, box characters and the ANSI styles; the layout is done
here because rich's Table renders about 3,000 rows/s on this machine, far below the
20,000 rows/s this renderer must sustain.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from rich.cells import cell_len

from pgtail.changes import (
    Change,
    CommitPrepared,
    Event,
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
from pgtail.changes.schema_events import describe
from pgtail.lsn import format_lsn
from pgtail.render.cells import (
    ARROW,
    BLANK,
    CROSS,
    FIRST_USER_OID,
    MIN_WIDTH_OF_TYPE,
    NO_LIMIT,
    NUMBER_TYPES,
    NUMERIC_OIDS,
    RULE,
    SEP,
    TIME_OIDS,
    TOAST_CELL,
    Cell,
    Painter,
    displayed,
    fit_cell,
    fit_widths,
    pad,
    psql_times,
    same_value,
    truncate,
    value_cell,
)
from pgtail.render.escape import escape_text
from pgtail.render.options import RenderOptions
from pgtail.render.psql_values import (
    DISPLAY_OF_TYPE,
    pg_time,
)
from pgtail.render.sql import quote_ident, quote_qualified

CHUNK_ROWS = 500  # rows of one relation buffered before they are printed
BUFFERED_ROWS = 5000  # rows buffered over all relations before everything is printed
MIN_COLUMN_WIDTH = 8  # narrower than this for some column: fold the table vertically
MIN_PAIR_WIDTH = 17  # the same for a column with an ``old → new`` cell


@dataclass
class _Group:
    """The rows of one relation in the current transaction."""

    table: Table
    title: str
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    shown: int = 0  # rows printed or buffered in this transaction
    hidden: dict[str, int] = field(default_factory=dict)  # op -> rows only counted
    note: str | None = None  # replica identity note (see TableRenderer._note)
    notes: list[str] = field(default_factory=list)  # notes to print after the next rows
    compared: bool = False  # the --changed-only note was considered
    timestamps: tuple[int, ...] = ()  # positions of columns shown the psql way (pg_time)
    # columns whose values are shown the psql way before they are cut (see DISPLAY_OF_TYPE)
    displays: tuple[tuple[str, Callable[[Any], str]], ...] = ()
    keep: frozenset[str] = frozenset()  # columns --changed-only always shows
    # positions of numeric columns: right-aligned, never cut (by type, or for a user type
    # such as a domain over int by its first value); each column's max width
    numeric: set[int] = field(default_factory=set)
    limits: tuple[int, ...] = ()
    undecided: dict[str, int] = field(default_factory=dict)  # user-typed, no value seen yet


def _decide_numeric(group: _Group, change: Change) -> None:
    """Tell the group's user-typed columns numeric or not by their first value."""
    row = change.new or change.old or {}
    for name, position in list(group.undecided.items()):
        value = row.get(name)
        if value is None:
            continue
        del group.undecided[name]
        if type(value) in NUMBER_TYPES:
            group.numeric.add(position)


def changed_only_note(table: Table) -> str | None:
    """Why ``--changed-only`` shows every column of an update: no old row to compare."""
    identity = table.replica_identity
    if identity == "full":
        return None
    if identity == "nothing":
        why = "REPLICA IDENTITY NOTHING sends none"
    elif identity == "index":
        why = "REPLICA IDENTITY USING INDEX sends only the index columns, when they change"
    elif table.key_columns:
        why = "REPLICA IDENTITY DEFAULT sends only the key, when it changes"
    else:
        why = "without a primary key REPLICA IDENTITY DEFAULT sends none"
    return f"--changed-only: no old row to compare ({why}); all columns shown"


def changed_only_keep(table: Table) -> frozenset[str]:
    """The columns ``--changed-only`` shows even when unchanged, so a row can be told
    apart: the replica identity key; under REPLICA IDENTITY FULL (every column is part of
    it, the protocol names no primary key) the first column."""
    if table.replica_identity == "full":
        return frozenset(c.name for c in table.columns[:1])
    return frozenset(table.key_columns)


def identity_note(table: Table, change: Change) -> str | None:
    """One line explaining why an UPDATE/DELETE carries no (full) old row, with the fix."""
    if change.op == "insert" or change.old_kind == "full":
        return None
    name = quote_qualified(table.schema, table.name)
    fix = f"ALTER TABLE {name} REPLICA IDENTITY FULL"
    identity = table.replica_identity
    if identity == "nothing":
        return f"no old rows: REPLICA IDENTITY NOTHING; fix: {fix}"
    if identity == "default" and not table.key_columns:
        return f"no old rows: no primary key (REPLICA IDENTITY DEFAULT); fix: add one, or {fix}"
    if identity == "default":
        what = "key only" + (", if it changed" if change.op == "update" else "")
        return f"old rows: {what} (REPLICA IDENTITY DEFAULT); whole rows: {fix}"
    if identity == "index":
        what = "index columns only" + (", if they changed" if change.op == "update" else "")
        return f"old rows: {what} (REPLICA IDENTITY USING INDEX); whole rows: {fix}"
    return None


class TableRenderer:
    """Writes events as blocks of terminal tables (see the module docstring)."""

    def __init__(self, out: BinaryIO, options: RenderOptions | None = None) -> None:
        self._out = out
        opts = options or RenderOptions()
        self._width = max(20, opts.width or 80)
        self._max_width = max(4, opts.max_width)
        self._changed_only = opts.changed_only
        self._collapse = opts.collapse if opts.collapse > 0 else None
        system = opts.extra.get("color_system", "standard")
        self._paint = Painter(opts.color, system if isinstance(system, str) else "standard")
        self._groups: dict[int, _Group] = {}
        self._buffered = 0
        # (table, note) pairs noted so far: each note once per table per run
        self._noted: set[tuple[str, str]] = set()
        self._tx: Transaction | None = None
        self._terminal = opts.width is not None  # progress bars redraw in place there
        self._copied = 0  # rows of the current snapshot table so far

    # -- output helpers

    def _write_lines(self, lines: list[str]) -> None:
        text = "\n".join(lines)
        if text or lines:
            self._out.write(text.encode("utf-8") + b"\n")

    def _header(self, parts: list[str]) -> list[str]:
        """A rule with as many of ``parts`` as fit; the rest on indented lines below."""
        room = self._width - 5  # "── " + text + " ─"
        lines: list[str] = []
        current = ""
        for part in parts:
            joined = f"{current} · {part}" if current else part
            if current and cell_len(joined) > room:
                lines.append(current)
                current = part
            else:
                current = joined
        lines.append(current)
        first = self._rule(lines[0])
        rest = (truncate(line, self._width - 3)[0] for line in lines[1:])
        return [first, *("   " + self._paint.paint(line, "rule") for line in rest)]

    def _rule(self, text: str) -> str:
        head = RULE * 2 + " " + text + " "
        head, width = truncate(head, self._width)
        return self._paint.paint(head + RULE * (self._width - width), "rule")

    # -- events

    def render(self, event: Event) -> None:
        if isinstance(event, Change):
            self._change(event)
        elif isinstance(event, TxBegin):
            self._begin(event.tx)
        elif isinstance(event, TxCommit):
            self._commit(event.tx)
        elif isinstance(event, Truncate):
            self._flush_all()
            names = ", ".join(escape_text(quote_qualified(t.schema, t.name)) for t in event.tables)
            options = ""
            if event.restart_identity:
                options += " RESTART IDENTITY"
            if event.cascade:
                options += " CASCADE"
            text = f"TRUNCATE {names}{options}"
            wrapped = textwrap.wrap(
                text, max(self._width - 3, 10), subsequent_indent="  ", break_on_hyphens=False
            )
            self._write_lines([" " + self._paint.paint(line, "truncate") for line in wrapped])
        elif isinstance(event, Message):
            self._message(event)
        elif isinstance(event, SchemaChange):
            self._flush_all()
            name = escape_text(quote_qualified(event.table.schema, event.table.name))
            notes = "; ".join(describe(event.previous, event.table))
            text = f"schema of {name} changed: " + escape_text(notes)
            wrapped = textwrap.wrap(text, max(self._width - 3, 10), subsequent_indent="  ")
            self._write_lines([" " + self._paint.paint(line, "summary") for line in wrapped])
        elif isinstance(event, SnapshotRows | SnapshotBegin | SnapshotEnd):
            self._snapshot(event)
        elif isinstance(event, CommitPrepared):
            self._flush_all()
            gid = escape_text(json.dumps(event.gid, ensure_ascii=False))
            parts = [f"COMMIT PREPARED {gid}", f"xid {event.xid}"]
            parts += [f"lsn {format_lsn(event.commit_lsn)}", _time(event.commit_time)]
            self._write_lines([*self._header(parts), ""])
        elif isinstance(event, RollbackPrepared):
            self._flush_all()
            gid = escape_text(json.dumps(event.gid, ensure_ascii=False))
            parts = [f"ROLLBACK PREPARED {gid}", f"xid {event.xid}"]
            parts += [f"lsn {format_lsn(event.rollback_end_lsn)}", _time(event.rollback_time)]
            self._write_lines([*self._header(parts), ""])
        else:
            raise TypeError(f"cannot render {type(event).__name__} as a table")

    def close(self) -> None:
        self._flush_all()

    def _snapshot(self, event: SnapshotBegin | SnapshotRows | SnapshotEnd) -> None:
        """A snapshot's table: a header, then one progress bar redrawn in place on a
        terminal (one line when it ends elsewhere) instead of every row."""
        copy = event.copy
        if isinstance(event, SnapshotBegin):
            self._flush_all()
            self._copied = 0
            name = escape_text(quote_qualified(copy.table.schema, copy.table.name))
            parts = [f"snapshot of {name}", f"lsn {format_lsn(copy.lsn)}"]
            parts.append(f"table {copy.number} of {copy.tables}")
            self._write_lines(self._header(parts))
            if self._terminal:
                self._redraw(self._progress(copy, 0, False))
            return
        if isinstance(event, SnapshotRows):
            self._copied = event.first_seq + event.count
            if self._terminal:
                self._redraw(self._progress(copy, self._copied, False))
            return
        self._copied = event.rows
        line = self._progress(copy, event.rows, True)
        if self._terminal:
            self._redraw(line)
            line = ""
        self._out.write((line + "\n\n").encode("utf-8"))

    def _redraw(self, line: str) -> None:
        """``line`` over the terminal's current line (carriage return, erase to its end)."""
        self._out.write(("\r" + line + "\x1b[K").encode("utf-8"))

    def _progress(self, copy: TableCopy, rows: int, done: bool) -> str:
        """A progress bar of ``rows`` against the table's estimate."""
        estimate = copy.rows_estimate
        noun = "row" if rows == 1 else "rows"
        width = max(10, min(40, self._width - 40))
        if done:
            text, filled, percent = f" {rows:,} {noun}", width, "100%"
        elif estimate > rows:
            text = f" {rows:,} of ~{estimate:,} rows"
            filled, percent = width * rows // estimate, f"{100 * rows // estimate:3d}%"
        else:  # no estimate (never analyzed), or past it
            text, filled, percent = f" {rows:,} {noun}", 0, " ..."
        bar = self._paint.paint("█" * filled, "summary") + "░" * (width - filled)
        return f" {bar} {percent}{text}"

    def _begin(self, tx: Transaction) -> None:
        self._flush_all()
        self._groups.clear()
        self._tx = tx
        parts = []
        if tx.prepared:
            gid = escape_text(json.dumps(tx.gid or "", ensure_ascii=False))
            parts.append(f"PREPARE TRANSACTION {gid}")
        parts.append(f"xid {tx.xid}")
        parts.append(f"lsn {format_lsn(tx.commit_lsn)}")
        parts.append(_time(tx.commit_time))
        if tx.origin is not None:
            origin = f"origin {escape_text(json.dumps(tx.origin, ensure_ascii=False))}"
            if tx.origin_lsn is not None:
                origin += f" @ {format_lsn(tx.origin_lsn)}"
            parts.append(origin)
        if tx.streamed:
            parts.append("streamed")
        self._write_lines(self._header(parts))

    def _commit(self, tx: Transaction) -> None:
        self._flush_all()
        lines = []
        for group in self._groups.values():
            if group.hidden:
                total = sum(group.hidden.values())
                ops = ", ".join(f"{n:,} {op}" for op, n in group.hidden.items())
                text = (
                    f"… {total:,} more rows of {group.title} not shown ({ops}; "
                    f"--collapse {self._collapse})"
                )
                for line in textwrap.wrap(text, max(self._width - 3, 10), subsequent_indent="  "):
                    lines.append(" " + self._paint.paint(line, "summary"))
        if tx.prepared:
            lines.append(
                " " + self._paint.paint("prepared; COMMIT or ROLLBACK PREPARED follows", "summary")
            )
        lines.append("")
        self._write_lines(lines)
        self._groups.clear()
        self._tx = None

    def _message(self, event: Message) -> None:
        self._flush_all()
        try:
            content = escape_text(json.dumps(event.content.decode("utf-8"), ensure_ascii=False))
        except UnicodeDecodeError:
            content = "0x" + event.content.hex()
        kind = "transactional" if event.transactional else "non-transactional"
        prefix = escape_text(json.dumps(event.prefix, ensure_ascii=False))
        head = (
            f"message {prefix} ({kind}, {len(event.content)} bytes, lsn {format_lsn(event.lsn)}): "
        )
        room = max(self._width - 1 - cell_len(head), 10)
        content, _ = truncate(content, room)
        line = " " + self._paint.paint(head, "message") + content
        if event.tx is None:
            self._write_lines([line, ""])
        else:
            self._write_lines([line])

    # -- changes

    def _group(self, table: Table) -> _Group:
        group = self._groups.get(table.relation_id)
        if group is None or group.table is not table:
            if group is not None:
                self._flush(group)
            title = escape_text(quote_qualified(table.schema, table.name))
            timestamps = tuple(i for i, c in enumerate(table.columns) if c.type_oid in TIME_OIDS)
            displays = tuple(
                (c.name, DISPLAY_OF_TYPE[c.type_oid])
                for c in table.columns
                if c.type_oid in DISPLAY_OF_TYPE
            )
            keep = changed_only_keep(table) if self._changed_only else frozenset()
            group = _Group(table, title, timestamps=timestamps, displays=displays, keep=keep)
            group.numeric = {i for i, c in enumerate(table.columns) if c.type_oid in NUMERIC_OIDS}
            group.limits = tuple(
                NO_LIMIT if i in group.numeric else self._max_width
                for i in range(len(table.columns))
            )
            group.undecided = {
                c.name: i for i, c in enumerate(table.columns) if c.type_oid >= FIRST_USER_OID
            }
            self._groups[table.relation_id] = group
        return group

    def _change(self, change: Change) -> None:
        group = self._group(change.table)
        if self._collapse is not None and group.shown >= self._collapse:
            group.hidden[change.op] = group.hidden.get(change.op, 0) + 1
            return
        if group.note is None:
            group.note = identity_note(change.table, change)
            if group.note is not None:
                self._note(group, group.note)
        if (
            self._changed_only
            and not group.compared
            and change.op == "update"
            and change.old_kind != "full"
        ):
            group.compared = True
            note = changed_only_note(change.table)
            if note is not None:
                self._note(group, note)
        group.shown += 1
        if group.displays:
            change = Change(
                change.op,
                change.table,
                change.tx,
                change.seq,
                displayed(change.new, group.displays),
                displayed(change.old, group.displays),
                change.old_kind,
                change.unchanged_toast,
            )
        if group.undecided:
            _decide_numeric(group, change)
        cells = self._cells(change, group.keep, group.limits)
        if group.timestamps:
            psql_times(cells, group.timestamps)
        group.rows.append((change.op, cells))
        self._buffered += 1
        if len(group.rows) >= CHUNK_ROWS:
            self._flush(group)
        elif self._buffered >= BUFFERED_ROWS:
            self._flush_all()

    def _note(self, group: _Group, note: str) -> None:
        """Print ``note`` after the group's next rows, unless this run printed it for
        this table already."""
        seen = (group.title, note)
        if seen not in self._noted:
            self._noted.add(seen)
            group.notes.append(note)

    def _cells(self, change: Change, keep: frozenset[str], limits: tuple[int, ...]) -> list[Cell]:
        """One cell per column; ``limits``: each column's max width (`NO_LIMIT` for a
        numeric one)."""
        columns = change.table.columns
        op = change.op
        if op == "insert":
            new = change.new or {}
            toast = change.unchanged_toast
            cells = []
            for col, limit in zip(columns, limits, strict=True):
                name = col.name
                if name in new:
                    cells.append(value_cell(new[name], limit))
                elif name in toast:
                    cells.append(TOAST_CELL)
                else:
                    cells.append(BLANK)
            return cells
        old = change.old
        if op == "delete":
            row = old or {}
            return [
                value_cell(row[c.name], limit) if c.name in row else BLANK
                for c, limit in zip(columns, limits, strict=True)
            ]
        new = change.new or {}
        toast = change.unchanged_toast
        changed_only = self._changed_only
        cells = []
        for col, limit in zip(columns, limits, strict=True):
            name = col.name
            if name in toast and name not in new:
                cells.append(BLANK if changed_only else TOAST_CELL)
                continue
            if name not in new:
                cells.append(BLANK)
                continue
            value = new[name]
            if old is not None and name in old:
                before = old[name]
                if same_value(before, value):
                    if changed_only and name not in keep:
                        cells.append(BLANK)
                    else:
                        cells.append(value_cell(value, limit, "unchanged"))
                    continue
                old_cell = value_cell(before, limit, "old")
                new_cell = value_cell(value, limit, "new")
                old_seg = old_cell[1][0]
                new_seg = new_cell[1][0]
                if old_seg[1] == "null":
                    old_seg = (old_seg[0], "null")
                cells.append(
                    (
                        old_cell[0] + len(ARROW) + new_cell[0],
                        (old_seg, (ARROW, "arrow"), new_seg),
                    )
                )
                continue
            cells.append(value_cell(value, limit))
        return cells

    def _flush_all(self) -> None:
        for group in self._groups.values():
            if group.rows:
                self._flush(group)
        self._buffered = 0

    def _flush(self, group: _Group) -> None:
        rows = group.rows
        if not rows:
            return
        group.rows = []
        self._buffered -= len(rows)
        lines = self._layout(group, rows)
        for note in group.notes:
            text = "note: " + escape_text(note)
            for line in textwrap.wrap(text, max(self._width - 3, 10), subsequent_indent="  "):
                lines.append(" " + self._paint.paint(line, "note"))
        group.notes.clear()
        self._write_lines(lines)

    # -- layout

    def _layout(self, group: _Group, rows: list[tuple[str, list[Cell]]]) -> list[str]:
        table = group.table
        paint = self._paint
        keys = table.key_columns
        # the title line too stays within the width (cut, the key list first)
        name, name_width = truncate(group.title, self._width - 1)
        title = " " + paint.paint(name, "title")
        summary = ""
        if keys and table.replica_identity != "full":
            summary = "key: " + ", ".join(escape_text(quote_ident(k)) for k in keys)
        elif table.replica_identity == "full":
            summary = "replica identity full"
        room = self._width - 1 - name_width - 2
        if summary and room >= 4:
            title += "  " + paint.paint(truncate(summary, room)[0], "summary")
        columns = table.columns
        indexes = list(range(len(columns)))
        if self._changed_only:
            indexes = [i for i in indexes if any(r[1][i][0] or r[1][i][1] for r in rows)]
        keyed = table.replica_identity != "full"
        headers: list[Cell] = []
        for i in indexes:
            col = columns[i]
            text, width = truncate(escape_text(col.name), self._max_width)
            headers.append((width, ((text, "key" if keyed and col.is_key else "header"),)))
        op_width = 6
        widths = [op_width] + [
            max(headers[j][0], max(r[1][i][0] for r in rows)) for j, i in enumerate(indexes)
        ]
        fitted = fit_widths(widths, self._width, lambda: self._minimums(group, rows, indexes))
        if fitted is None:
            return [title, *self._vertical(group, rows, indexes, headers)]
        right = [False] + [i in group.numeric for i in indexes]
        sep = paint.paint(SEP, "border")
        head_line = [pad(paint.paint("op", "header"), 2, fitted[0], False)]
        for j, header in enumerate(headers):
            cell = fit_cell(header, fitted[j + 1])
            last = j == len(headers) - 1
            head_line.append(pad(paint.cell(cell[1]), cell[0], fitted[j + 1], right[j + 1], last))
        # the trailing ─ (under the space after the last column) only where it fits: a
        # table cut to fit uses every cell, and one more would wrap into a lone ─ line
        rule = (RULE + CROSS.join(RULE * w for w in fitted) + RULE)[: self._width]
        lines = [title, (" " + sep.join(head_line)).rstrip(" "), paint.paint(rule, "border")]
        ncols = len(indexes)
        for op, cells in rows:
            parts = [paint.paint(op, op)]
            for j, i in enumerate(indexes):
                cell = cells[i]
                width = fitted[j + 1]
                if cell[0] > width:
                    cell = fit_cell(cell, width)
                parts.append(pad(paint.cell(cell[1]), cell[0], width, right[j + 1], j == ncols - 1))
            lines.append((" " + sep.join(parts)).rstrip(" "))
        return lines

    @staticmethod
    def _minimums(
        group: _Group, rows: list[tuple[str, list[Cell]]], indexes: list[int]
    ) -> list[int]:
        """The narrowest each column may get: more for timestamps and ``old → new`` cells;
        a numeric column its widest value (rather than cut a number, the table folds)."""
        table = group.table
        result = [MIN_COLUMN_WIDTH]
        for i in indexes:
            least = MIN_WIDTH_OF_TYPE.get(table.columns[i].type_oid, MIN_COLUMN_WIDTH)
            if any(len(r[1][i][1]) == 3 for r in rows):
                least = max(least, MIN_PAIR_WIDTH)
            if i in group.numeric:
                least = max(least, max(r[1][i][0] for r in rows))
            result.append(least)
        return result

    def _vertical(
        self,
        group: _Group,
        rows: list[tuple[str, list[Cell]]],
        indexes: list[int],
        headers: list[Cell],
    ) -> list[str]:
        paint = self._paint
        name_width = min(max(h[0] for h in headers), max(self._width // 3, 8))
        value_width = max(self._width - name_width - len(SEP) - 1, 4)
        sep = paint.paint(SEP, "border")
        lines = []
        number = group.shown - len(group.rows) - len(rows)
        for op, cells in rows:
            number += 1
            label = f"{op} {number}"
            fill = RULE * max(self._width - cell_len(label) - 5, 0)
            lines.append(
                paint.paint("─[ ", "border")
                + paint.paint(label, op)
                + paint.paint(" ]" + fill, "border")
            )
            for j, i in enumerate(indexes):
                cell = cells[i]
                if not cell[1]:  # not sent (or hidden by changed_only): no line
                    continue
                header = fit_cell(headers[j], name_width)
                name = pad(paint.cell(header[1]), header[0], name_width, False)
                if cell[0] > value_width and i not in group.numeric:  # a number: whole
                    cell = fit_cell(cell, value_width)
                lines.append((" " + name + sep + paint.cell(cell[1])).rstrip(" "))
        return lines


def _time(value: Any) -> str:
    return pg_time(str(value.isoformat(timespec="microseconds")))
