"""Schema changes as events: one ``"op": "schema"`` line (a comment in SQL, a note in the
table view) before the first change that uses a table's new definition."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import orjson

from pgtail.changes import Change, Column, SchemaChange, Table, Transaction
from pgtail.changes.schema_events import SchemaTracker, describe
from pgtail.render import make_renderer
from tests.helpers import Database, run_cli, write

TX = Transaction(7, 100, 120, datetime(2026, 1, 1, tzinfo=UTC))


def table(*columns: tuple[str, int, bool], identity: str = "default") -> Table:
    cols = tuple(
        Column(n, oid, -1, key, {23: "integer", 25: "text", 20: "bigint"}[oid])
        for n, oid, key in columns
    )
    return Table(42, "public", "t", identity, cols)  # type: ignore[arg-type]


def change(t: Table) -> Change:
    return Change("insert", t, TX, 0, {c.name: 1 for c in t.columns}, None, None, ())


def test_describe_names_each_change() -> None:
    before = table(("id", 23, True), ("a", 25, False), ("b", 23, False))
    assert describe(before, table(("id", 23, True), ("a", 25, False), ("c", 23, False))) == [
        "column b renamed to c"
    ]
    assert describe(before, table(("id", 23, True), ("b", 20, False))) == [
        "column a dropped",
        "column b retyped from integer to bigint",
    ]
    after = table(("id", 23, True), ("a", 25, True), ("b", 23, True), identity="full")
    assert describe(before, after) == ["replica identity default -> full", "key (id) -> (id, a, b)"]


def test_tracker_reports_once_before_the_first_change_that_uses_it() -> None:
    tracker = SchemaTracker()
    first = table(("id", 23, True))
    assert tracker.check(change(first)) is None  # first sight: recorded only
    assert tracker.check(change(table(("id", 23, True)))) is None  # the same, again
    second = table(("id", 23, True), ("x", 25, False))
    found = tracker.check(change(second))
    assert found == SchemaChange(second, first, TX)
    assert tracker.check(change(second)) is None


def test_renderers_show_it() -> None:
    event = SchemaChange(table(("id", 23, True), ("x", 25, False)), table(("id", 23, True)), TX)
    out = io.BytesIO()
    make_renderer("json", out).render(event)
    line = orjson.loads(out.getvalue())
    assert (
        line["op"] == "schema" and line["xid"] == 7 and line["changes"] == ["column x text added"]
    )
    assert [c["name"] for c in line["columns"]] == ["id", "x"]
    assert [c["name"] for c in line["old"]["columns"]] == ["id"]
    out = io.BytesIO()
    make_renderer("sql", out).render(event)
    assert out.getvalue() == b"-- schema of public.t changed: column x text added\n"
    out = io.BytesIO()
    make_renderer("table", out).render(event)
    assert "schema of public.t changed: column x text added" in out.getvalue().decode()


def test_stream_emits_schema_lines(db: Database) -> None:
    db.execute("CREATE TABLE u (id int PRIMARY KEY, a text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE u")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    write(db, "INSERT INTO u VALUES (1, 'x')")
    write(db, "ALTER TABLE u ADD COLUMN b int")
    write(db, "INSERT INTO u VALUES (2, 'y', 3)")
    write(db, "INSERT INTO u VALUES (3, 'z', 4)")
    write(db, "ALTER TABLE u ALTER COLUMN b TYPE bigint, REPLICA IDENTITY FULL")
    write(db, "UPDATE u SET b = 5 WHERE id = 3")
    code, out, err = run_cli(
        ["stream", "--dsn", db.dsn, "--slot", "s", "--publication", "pub", "--idle-exit", "1"]
    )
    assert code == 0, err
    lines = [orjson.loads(x) for x in out.splitlines()]
    assert [x["op"] for x in lines] == ["insert", "schema", "insert", "insert", "schema", "update"]
    assert lines[1]["changes"] == ["column b integer added"]
    assert lines[1]["xid"] == lines[2]["xid"]
    assert lines[4]["changes"] == [
        "column b retyped from integer to bigint",
        "replica identity default -> full",
        "key (id) -> (id, a, b)",
    ]
