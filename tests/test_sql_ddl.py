"""SQL replay through a table's life: ``pgtail stream --format sql | psql -v
ON_ERROR_STOP=1`` keeps a replica equal to the source through ADD COLUMN (plain, with a
constant default over existing rows, NOT NULL DEFAULT), RENAME, ALTER TYPE, DROP COLUMN
and a table created and published mid-stream; a snapshot (COPY blocks) replayed into an
empty database equals the source; ``--no-ddl`` writes the schema changes as comments only;
a reader that fails is reported with what was confirmed."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from pgtail import catalog
from pgtail.changes import Column, Table, Transaction
from pgtail.changes.ddl import DdlTracker, ShapeColumn, TableDdl, TableShape
from pgtail.changes.events import Change
from pgtail.lsn import format_lsn
from pgtail.render import make_renderer
from pgtail.render.sql_ddl import alter_table_sql, create_table_sql
from tests.helpers import (
    Database,
    confirmed,
    create_database,
    drop_database,
    insert_lsn,
    pgtail_stream,
    run_stream,
    write,
)

TX = Transaction(7, 100, 120, datetime(2026, 1, 1, tzinfo=UTC))


def _table(*columns: tuple[str, int], key: str = "id", identity: str = "default") -> Table:
    cols = tuple(
        Column(n, oid, -1, n == key, {23: "integer", 25: "text", 20: "bigint"}[oid])
        for n, oid in columns
    )
    return Table(42, "public", "t", identity, cols)  # type: ignore[arg-type]


def _shape(*columns: tuple[str, int, int, str | None, bool]) -> TableShape:
    names = {23: "integer", 25: "text", 20: "bigint"}
    return TableShape(
        42,
        "public",
        "t",
        tuple(ShapeColumn(n, num, oid, -1, names[oid], nn, d) for n, num, oid, d, nn in columns),
        ("id",),
        None,
    )


def test_create_and_alter_statements() -> None:
    before = _table(("id", 23), ("a", 25), ("n", 23))
    shape = _shape(("id", 1, 23, None, True), ("a", 2, 25, "'x'::text", True))
    assert create_table_sql(_table(("id", 23), ("a", 25)), shape) == (
        "CREATE TABLE IF NOT EXISTS public.t (id integer NOT NULL, a text DEFAULT 'x'::text"
        " NOT NULL, PRIMARY KEY (id));\n"
        "ALTER TABLE public.t ADD COLUMN IF NOT EXISTS a text DEFAULT 'x'::text NOT NULL;\n"
    )
    # renamed a -> b (same number), retyped n, added d with a constant default
    after = _table(("id", 23), ("b", 25), ("n", 20), ("d", 23))
    now = _shape(
        ("id", 1, 23, None, True),
        ("b", 2, 25, None, False),
        ("n", 3, 20, None, False),
        ("d", 4, 23, "7", True),
    )
    was = _shape(("id", 1, 23, None, True), ("a", 2, 25, None, False), ("n", 3, 23, None, False))
    sql = alter_table_sql(before, after, now, was)
    assert sql.splitlines()[1:] == [
        "ALTER TABLE public.t RENAME COLUMN a TO b;",
        "ALTER TABLE public.t ALTER COLUMN n TYPE bigint USING n::bigint;",
        "ALTER TABLE public.t ADD COLUMN d integer DEFAULT 7 NOT NULL;",
    ]
    # the same names, but b is a new column (another number): dropped and added
    now_new = _shape(
        ("id", 1, 23, None, True), ("b", 5, 25, None, False), ("n", 3, 20, None, False)
    )
    sql = alter_table_sql(before, _table(("id", 23), ("n", 20), ("b", 25)), now_new, was)
    assert "ALTER TABLE public.t DROP COLUMN a;" in sql.splitlines()
    assert "ALTER TABLE public.t ADD COLUMN b text;" in sql.splitlines()
    # the table is gone from the catalog: what the stream says, and a comment
    sql = create_table_sql(before, None)
    assert sql.startswith("-- public.t is no longer in the catalog")
    assert "CREATE TABLE IF NOT EXISTS public.t (id integer, a text, n integer, PRIMARY KEY" in sql


def test_tracker_asks_for_new_and_changed_tables_only() -> None:
    tracker = DdlTracker()
    first = _table(("id", 23))

    def change(t: Table) -> Change:
        return Change("insert", t, TX, 0, {c.name: 1 for c in t.columns}, None, None, ())

    events = [change(first), change(first)]
    assert tracker.wanted(events) == [42]
    out: list[Any] = []
    tracker.render_all(events, {42: None}, out.append)
    assert [type(e) for e in out] == [TableDdl, Change, Change]
    assert tracker.wanted([change(_table(("id", 23)))]) == []  # equal: nothing to write
    second = _table(("id", 23), ("x", 25))
    assert tracker.wanted([change(second)]) == [42]
    out.clear()
    tracker.render_all([change(second)], {}, out.append)
    assert isinstance(out[0], TableDdl) and out[0].previous == first
    buf = io.BytesIO()
    make_renderer("sql", buf).render(out[0])
    assert b"ALTER TABLE public.t ADD COLUMN x text;" in buf.getvalue()


# --- against a server ----------------------------------------------------------------


def _psql(db: Database) -> str:
    """The server's psql, else the one on PATH (any psql talks to every major)."""
    own = db.server.bindir / "psql"
    found = str(own) if own.exists() else shutil.which("psql")
    if found is None:
        pytest.skip("no psql to replay with")
    return found


@pytest.fixture
def target(db: Database) -> Iterator[Database]:
    made = create_database(db.server, "tgt_")
    yield made
    drop_database(db.server, made.name)


def _columns(db: Database, table: str) -> list[tuple[object, ...]]:
    return db.execute(
        "SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
        (table,),
    )


def _rows(db: Database, table: str) -> list[str]:
    return sorted(str(r[0]) for r in db.execute(f"SELECT x::text FROM {table} x"))


def _equal(source: Database, replica: Database, tables: list[str]) -> None:
    for table in tables:
        assert _columns(replica, table) == _columns(source, table), table
        assert _rows(replica, table) == _rows(source, table), table


def _psql_run(db: Database, target: Database, script: bytes) -> None:
    env = {**os.environ, "PGCLIENTENCODING": "UTF8"}
    result = subprocess.run(
        [_psql(db), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target.dsn],
        input=script,
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr.decode()


def _replay(db: Database, target: Database, *args: str) -> subprocess.CompletedProcess[bytes]:
    """``pgtail stream ARGS | psql -v ON_ERROR_STOP=1 -d target``; pgtail's outcome."""
    env = {**os.environ, "PGCLIENTENCODING": "UTF8"}
    psql = subprocess.Popen(
        [_psql(db), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target.dsn],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        proc = run_stream(db.dsn, *args, stdout=psql.stdin)
    finally:
        assert psql.stdin is not None
        psql.stdin.close()
        psql.wait(timeout=60)
    assert psql.returncode == 0, (psql.stderr.read() if psql.stderr else b"").decode()
    return proc


def test_replica_kept_through_schema_changes(db: Database, target: Database) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, a text, n int)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute("SELECT pg_create_logical_replication_slot('s2', 'pgoutput')")
    write(db, "INSERT INTO t VALUES (1, 'one', 1), (2, 'two', 2), (3, 'three', 3)")
    write(db, "ALTER TABLE t ADD COLUMN plain text")
    write(db, "INSERT INTO t VALUES (4, 'four', 4, 'p'); UPDATE t SET plain = 'q' WHERE id = 1")
    write(db, "ALTER TABLE t ADD COLUMN d int DEFAULT 7")  # existing rows get 7
    write(db, "INSERT INTO t (id, a, n) VALUES (5, 'five', 5)")
    write(db, "ALTER TABLE t ADD COLUMN nn text NOT NULL DEFAULT 'x y'")
    write(db, "INSERT INTO t (id, a, n, nn) VALUES (6, 'six', 6, 'z')")
    write(db, "ALTER TABLE t RENAME COLUMN a TO b")
    write(db, "INSERT INTO t (id, b, n) VALUES (7, 'seven', 7)")
    write(db, "UPDATE t SET b = 'TWO' WHERE id = 2")
    write(db, "ALTER TABLE t ALTER COLUMN n TYPE bigint")
    write(db, "INSERT INTO t (id, b, n) VALUES (8, 'eight', 5000000000)")
    write(db, "UPDATE t SET n = 6000000000 WHERE id = 3")
    write(db, "ALTER TABLE t DROP COLUMN plain")
    write(db, "INSERT INTO t (id, b, n) VALUES (9, 'nine', 9); DELETE FROM t WHERE id = 4")
    # a table created and published mid-stream
    write(db, "CREATE TABLE v (k bigint PRIMARY KEY, s varchar(12) NOT NULL, m numeric(8,2))")
    write(db, "ALTER PUBLICATION pub ADD TABLE v")
    write(db, "INSERT INTO v VALUES (1, 'v1', 1.5), (2, 'v2', NULL); UPDATE t SET d = 8")
    end = format_lsn(insert_lsn(db))
    args = ("--publication", "pub", "--format", "sql", "--end", end)
    proc = run_stream(db.dsn, "--slot", "s", *args)
    assert proc.returncode == 0, proc.stderr.decode()
    _psql_run(db, target, proc.stdout)
    _equal(db, target, ["t", "v"])

    # --no-ddl: the same output without the DDL, the schema changes as comments
    without = run_stream(db.dsn, "--slot", "s2", *args, "--no-ddl")
    assert without.returncode == 0, without.stderr.decode()
    ddl = ("CREATE TABLE IF NOT EXISTS ", "ALTER TABLE ", "-- not written for ", "SET LOCAL ")
    lines = [line for line in proc.stdout.decode().splitlines() if not line.startswith(ddl)]
    assert without.stdout.decode().splitlines() == lines
    assert sum(line.startswith("-- schema of public.t changed") for line in lines) == 6


def test_snapshot_replays_into_an_empty_database(db: Database, target: Database) -> None:
    db.execute(
        "CREATE TABLE a (id int PRIMARY KEY, t text, b bytea, j jsonb, ts timestamptz,"
        " arr text[], n numeric(10,3))"
    )
    db.execute(
        "INSERT INTO a SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE"
        " E'tab\\there\\nline \\\\ back ' || g END, decode(md5(g::text), 'hex'),"
        " jsonb_build_object('k', g, 's', E'q\"\\n'),"
        " '2026-01-01'::timestamptz + g * interval '1 s',"
        " ARRAY['x', NULL, E'y\\tz'], g / 7.0 FROM generate_series(1, 3000) g"
    )
    db.execute('CREATE TABLE "Odd Name" ("Key" text PRIMARY KEY, v int NOT NULL DEFAULT 3)')
    db.execute("INSERT INTO \"Odd Name\" VALUES ('k1', 1), (E'k\\\\2', 2)")
    db.execute("CREATE PUBLICATION pub FOR ALL TABLES")
    args = ("--publication", "pub", "--format", "sql")
    proc = _replay(
        db, target, "--slot", "s", "--create-slot", "--snapshot", *args, "--idle-exit", "1"
    )
    assert proc.returncode == 0, proc.stderr.decode()
    _equal(db, target, ["a", '"Odd Name"'])
    # then, in the next run: a column added while pgtail was not running (the run's first
    # sight of the table), changes, and a table created mid-stream (FOR ALL TABLES)
    write(db, "ALTER TABLE a ADD COLUMN extra int DEFAULT 5")
    write(db, "UPDATE a SET extra = 6 WHERE id = 1")
    write(db, "CREATE TABLE w (id int PRIMARY KEY, x text)")
    write(db, "INSERT INTO w VALUES (1, 'w'); UPDATE a SET t = 'changed' WHERE id = 2")
    end = format_lsn(insert_lsn(db))
    proc = _replay(db, target, "--slot", "s", *args, "--end", end)
    assert proc.returncode == 0, proc.stderr.decode()
    _equal(db, target, ["a", '"Odd Name"', "w"])


def test_a_failed_reader_is_reported(db: Database, target: Database) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    before = confirmed(db)
    write(db, "INSERT INTO t VALUES (1)")
    psql = subprocess.Popen(
        [_psql(db), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target.dsn],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stream = pgtail_stream(
        db.dsn,
        "--slot",
        "s",
        "--publication",
        "pub",
        "--format",
        "sql",
        "--no-ddl",
        stdout=psql.stdin,
    )
    assert psql.stdin is not None
    psql.stdin.close()
    try:
        assert psql.wait(timeout=60) == 3  # relation "t" does not exist: stopped
        write(db, "INSERT INTO t VALUES (2)")  # (more output: the write fails)
        _, err = stream.communicate(timeout=60)
    finally:
        if stream.poll() is None:
            stream.kill()
    message = err.decode()
    assert "the reader of the output went away" in message, message
    assert "still in slot s" in message, message
    assert confirmed(db) == before


def test_only_constant_defaults_are_written(db: Database) -> None:
    db.execute(
        "CREATE TABLE z (id serial PRIMARY KEY, a int DEFAULT 7, b text DEFAULT 'x',"
        " c timestamptz DEFAULT now(), d timestamptz DEFAULT CURRENT_TIMESTAMP,"
        " e date DEFAULT '2020-01-01', f int DEFAULT 1 + 1, g varchar(5) DEFAULT 'ab',"
        " h numeric(6,2) DEFAULT 1.5, i int[] DEFAULT '{1,2}', j float8 DEFAULT random(),"
        " k int NOT NULL DEFAULT -3)"
    )
    db.execute("ALTER TABLE z ALTER a TYPE bigint")  # (its default, cast: still a constant)
    oid = int(db.execute("SELECT 'z'::regclass::oid")[0][0])  # type: ignore[call-overload]
    conn = db.connect()
    try:
        shape = catalog.table_shapes(conn, [oid, 1])
    finally:
        conn.close()
    assert shape[1] is None  # no such table
    found = shape[oid]
    assert found is not None and found.primary_key == ("id",)
    defaults = {c.name: c.default for c in found.columns if c.default is not None}
    assert set(defaults) == {"a", "b", "e", "g", "h", "i", "k"}, defaults
    assert [c.name for c in found.columns if c.not_null] == ["id", "k"]
    assert found.column("a") is not None and found.column("a").type_sql == "bigint"  # type: ignore[union-attr]
