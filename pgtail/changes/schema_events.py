"""Schema changes as events: a table's columns or replica identity changed mid-stream.

pgoutput sends a Relation message before a table's first change after its definition
changed (a column added, dropped, renamed or retyped, the replica identity changed).
`SchemaTracker` watches the tables the events refer to and, before the first event
that uses a changed definition, gives a `SchemaChange` with the old and the new one.
The first sight of a table (or its snapshot copy) only records it. Pure: the stream
puts it between the assembler's events and the renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pgtail.changes.events import (
    Change,
    Column,
    EncodedRows,
    SchemaChange,
    SnapshotBegin,
    SnapshotRows,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)


def column_type(column: Column) -> str:
    return column.type_name or f"type {column.type_oid}"


def renamed_in_place(
    previous: Table, table: Table, dropped: list[Column], added: list[Column]
) -> list[tuple[Column, Column]]:
    """Columns taken as renamed when the catalog does not say: one dropped and one added
    in the same place (the column count unchanged), of the same type."""
    if len(previous.columns) != len(table.columns):
        return []
    return [
        (was, now)
        for was, now in zip(previous.columns, table.columns, strict=True)
        if was in dropped
        and now in added
        and (was.type_oid, was.type_modifier) == (now.type_oid, now.type_modifier)
    ]


def describe(previous: Table, table: Table) -> list[str]:
    """The differences between two definitions of one table, in words."""
    notes = []
    if (previous.schema, previous.name) != (table.schema, table.name):
        notes.append(f"renamed from {previous.qualified_name}")
    before = {c.name: c for c in previous.columns}
    after = {c.name: c for c in table.columns}
    added = [c for c in table.columns if c.name not in before]
    dropped = [c for c in previous.columns if c.name not in after]
    renamed = renamed_in_place(previous, table, dropped, added)
    for was, now in renamed:
        added.remove(now)
        dropped.remove(was)
        notes.append(f"column {was.name} renamed to {now.name}")
    notes += [f"column {c.name} {column_type(c)} added" for c in added]
    notes += [f"column {c.name} dropped" for c in dropped]
    for name, now in after.items():
        old = before.get(name)
        if old is not None and (old.type_oid, old.type_modifier) != (
            now.type_oid,
            now.type_modifier,
        ):
            notes.append(f"column {name} retyped from {column_type(old)} to {column_type(now)}")
    if previous.replica_identity != table.replica_identity:
        notes.append(f"replica identity {previous.replica_identity} -> {table.replica_identity}")
    if previous.key_columns != table.key_columns:
        old_key = ", ".join(previous.key_columns) or "none"
        new_key = ", ".join(table.key_columns) or "none"
        notes.append(f"key ({old_key}) -> ({new_key})")
    return notes or ["definition changed"]


class SchemaTracker:
    """The last definition seen of each table; `check` says when an event's differs."""

    def __init__(self) -> None:
        self._known: dict[int, Table] = {}

    def check(self, event: Any) -> SchemaChange | None:
        """The `SchemaChange` to render before ``event``, or None."""
        cls = type(event)
        if cls is Change or cls is EncodedRows:
            return self._saw(event.table, event.tx)
        if cls is SnapshotRows or cls is SnapshotBegin:
            self._known[event.copy.table.relation_id] = event.copy.table
            return None
        if cls is Truncate:
            for table in event.tables:
                found = self._saw(table, event.tx)
                if found is not None:
                    return found  # (one truncate of two redefined tables: the first)
        return None

    def _saw(self, table: Table, tx: Transaction) -> SchemaChange | None:
        known = self._known.get(table.relation_id)
        if known is table:
            return None
        self._known[table.relation_id] = table
        if known is None or known == table:
            return None
        return SchemaChange(table, known, tx)


def with_schema_events(render: Callable[[Any], None]) -> Callable[[list[Any]], None]:
    """A function that renders a list of events with ``render``, each after the
    `SchemaChange` its table's changed definition calls for, if any. One call per batch,
    the check inline: a per-event wrapper cost a call for every event rendered."""
    tracker = SchemaTracker()
    check = tracker.check
    known = tracker._known  # the per-row case inlined: this runs once per rendered event

    def render_all(events: list[Any]) -> None:
        for event in events:
            cls = type(event)
            if cls is Change or cls is EncodedRows:
                table = event.table
                if known.get(table.relation_id) is not table:
                    change = check(event)
                    if change is not None:
                        render(change)
            elif cls is not TxBegin and cls is not TxCommit:
                change = check(event)
                if change is not None:
                    render(change)
            render(event)

    return render_all


def each(render: Callable[[Any], None]) -> Callable[[list[Any]], None]:
    """A function that renders a list of events with ``render`` (no schema events)."""

    def render_all(events: list[Any]) -> None:
        for event in events:
            render(event)

    return render_all
