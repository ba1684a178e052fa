"""Schema changes for SQL replay: what a table's DDL needs, and when to write it.

`DdlTracker` watches the tables the events refer to (as `SchemaTracker` does) and puts a
`TableDdl` before the first event of a table it has not seen in this run (for
``CREATE TABLE IF NOT EXISTS``) and before the first event that uses a changed
definition (for ``ALTER TABLE``). The catalog facts those statements need and a
Relation message does not carry (defaults, NOT NULL, the primary key, column numbers)
come as `TableShape` data: the tracker says which tables it needs them for
(`DdlTracker.wanted`), the stream looks them up (`pgtail.catalog.shapes`) and
hands them back with the events (`DdlTracker.render_all`). Pure: no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pgtail.changes.events import (
    Change,
    EncodedRows,
    SnapshotBegin,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)


@dataclass(frozen=True, slots=True)
class ShapeColumn:
    """One column as the catalog says it is when it was looked up."""

    name: str
    attnum: int  # kept by a rename, new for a column dropped and added again
    type_oid: int
    type_modifier: int
    type_sql: str  # format_type(): the type as DDL writes it
    not_null: bool
    default: str | None  # the default's expression when it is a constant, else None


@dataclass(frozen=True, slots=True)
class TableShape:
    """A table's catalog facts for DDL (`pgtail.catalog.shapes`)."""

    relation_id: int
    schema: str
    name: str
    columns: tuple[ShapeColumn, ...]
    primary_key: tuple[str, ...]
    identity_index: str | None  # REPLICA IDENTITY USING INDEX: the index's name

    def column(self, name: str) -> ShapeColumn | None:
        for column in self.columns:
            if column.name == name:
                return column
        return None


@dataclass(frozen=True, slots=True)
class TableDdl:
    """A table to create (``previous`` None: its first sight in this run) or alter
    (``previous`` is how it was) before the next event. ``shape`` is what the catalog
    said when the event was made (None: the table was no longer there), and
    ``previous_shape`` what it said at the previous definition, if anything."""

    table: Table
    previous: Table | None
    shape: TableShape | None
    previous_shape: TableShape | None
    tx: Transaction | None


def _tables(event: Any) -> tuple[Table, ...]:
    cls = type(event)
    if cls is Change or cls is EncodedRows:
        return (event.table,)
    if cls is SnapshotBegin:
        return (event.copy.table,)
    if cls is Truncate:
        return tuple(event.tables)
    return ()


class DdlTracker:
    """The last definition of each table seen in this run, and its catalog facts."""

    def __init__(self) -> None:
        self._known: dict[int, Table] = {}
        self._shapes: dict[int, TableShape | None] = {}

    def wanted(self, events: list[Any]) -> list[int]:
        """The relation OIDs whose facts `events` needs: tables seen for the first time
        or with a changed definition (the caller looks them up before `events`)."""
        known = self._known
        wanted: list[int] = []
        seen: dict[int, Table] = {}
        for event in events:
            cls = type(event)
            if cls is Change or cls is EncodedRows:  # (inline: once per event)
                if known.get(event.table.relation_id) is event.table:
                    continue
                tables: tuple[Table, ...] = (event.table,)
            elif cls is TxBegin or cls is TxCommit:
                continue
            else:
                tables = _tables(event)
            for table in tables:
                rid = table.relation_id
                last = seen.get(rid, known.get(rid))
                if last is table:
                    continue
                seen[rid] = table
                if (last is None or last != table) and rid not in wanted:
                    wanted.append(rid)
        return wanted

    def render_all(
        self,
        events: list[Any],
        shapes: Mapping[int, TableShape | None],
        render: Callable[[Any], None],
    ) -> None:
        """Render ``events``, each after the `TableDdl` its table calls for (``shapes``:
        what the catalog said of each table `wanted` named, None for one it could not
        say). One call per batch, the check inline: it runs for every rendered event."""
        known = self._known
        for event in events:
            cls = type(event)
            if cls is Change or cls is EncodedRows:
                table = event.table
                if known.get(table.relation_id) is not table:
                    ddl = self._saw(table, event.tx, shapes)
                    if ddl is not None:
                        render(ddl)
            elif cls is not TxBegin and cls is not TxCommit:
                for table in _tables(event):
                    ddl = self._saw(table, getattr(event, "tx", None), shapes)
                    if ddl is not None:
                        render(ddl)
            render(event)

    def _saw(
        self, table: Table, tx: Transaction | None, shapes: Mapping[int, TableShape | None]
    ) -> TableDdl | None:
        rid = table.relation_id
        previous = self._known.get(rid)
        self._known[rid] = table
        if previous is table or (previous is not None and previous == table):
            return None
        previous_shape = self._shapes.get(rid)
        shape = shapes.get(rid, previous_shape)  # (None: asked, and the catalog had none)
        self._shapes[rid] = shape
        return TableDdl(table, previous, shape, previous_shape, tx)
