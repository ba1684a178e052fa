"""`pgtail stream --snapshot`: the rows before the slot, then the changes, no gap, no
duplicate -- checked as a user would: the JSON lines applied in order, and the SQL
replayed into a second database, each equal the table at the end, while a writer changes
the table throughout the copy. Plus the bad inputs, each one clear line.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from pgtail import pgoutput as po
from pgtail.changes import SnapshotBegin, SnapshotEnd
from pgtail.changes.copy_rows import TableRows, copy_fields
from pgtail.lsn import parse_lsn
from pgtail.render import RenderOptions, make_renderer, row_encoder
from pgtail.server import LocalServer, start_server
from tests.helpers import (
    Database,
    create_database,
    drop_database,
    pgtail_stream,
    run_cli,
    run_sql_script,
    run_stream,
    settle,
    start_standby,
)

ROWS = 20_000

TABLE_DDL = (
    "CREATE TABLE t (id int PRIMARY KEY, name text, amount numeric, at timestamptz,"
    " doc jsonb, flag boolean)"
)
# values with what COPY's text format escapes (tab, newline, backslash) and NULLs
FILL = (
    "INSERT INTO t SELECT g, CASE WHEN g %% 7 = 0 THEN NULL ELSE 'n' || g || E'\\t\\\\x\\n' END,"
    " g / 3.0, '2026-01-01 00:00:00+00'::timestamptz + g * interval '1 minute',"
    " jsonb_build_object('g', g), g %% 2 = 0 FROM generate_series(%s, %s) g"
)


def pgtail(dsn: str, *args: str, **popen: Any) -> subprocess.Popen[bytes]:
    return pgtail_stream(dsn, "--status-interval", "1", *args, **popen)


def setup(db: Database) -> None:
    db.execute(TABLE_DDL)
    db.execute(FILL, (1, ROWS))
    db.execute("CREATE PUBLICATION pub FOR TABLE t")


def wide_table(db: Database) -> None:
    """Table t of 200,000 rows of 200 bytes, vacuumed, in publication pub: a copy of it
    that is not read waits near the table's start."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    db.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 200000) g")
    db.execute("VACUUM t")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")


@contextmanager
def writer(db: Database) -> Iterator[threading.Event]:
    """Changes t in small transactions (inserts, updates of the key and of values,
    deletes) until the block ends; the event is set once it has committed some."""
    stop = threading.Event()
    started = threading.Event()

    def run() -> None:
        conn = db.connect()
        cur = conn.cursor()
        step = 0
        while True:
            last = stop.is_set()  # one whole step after the stop: after the copy began
            step += 1
            new = ROWS + step
            cur.execute(FILL, (new, new))
            cur.execute("UPDATE t SET name = 'u' || id, amount = amount + 1 WHERE id = %s", (step,))
            cur.execute("DELETE FROM t WHERE id = %s", (step * 3 + 1,))
            cur.execute("UPDATE t SET id = -id WHERE id = %s", (step * 5 + 2,))
            if step >= 20:
                started.set()
            if last:
                break
        conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        started.wait(30)
        yield stop
    finally:
        stop.set()
        thread.join(30)


def failed(proc: subprocess.Popen[bytes]) -> tuple[bytes, list[str]]:
    """pgtail's stdout and its stderr lines that say "error", once it has exited (within
    120 s) with code 1."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    return out, [line for line in err.decode().splitlines() if "error" in line]


def replay(target: Database, script: str) -> None:
    """What ``psql -f`` does with the script (psql is not installed for every major)."""
    conn = target.connect()
    try:
        run_sql_script(conn, script)
    finally:
        conn.close()


def state(db: Database) -> list[tuple[Any, ...]]:
    return db.execute("SELECT * FROM t ORDER BY id")


def apply_json(lines: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The JSON lines applied in order: the rows by id."""
    rows: dict[int, dict[str, Any]] = {}
    for line in lines:
        op = line["op"]
        if op in ("snapshot", "insert"):
            assert line["new"]["id"] not in rows, line  # no duplicate
            rows[line["new"]["id"]] = line["new"]
        elif op == "update":
            del rows[line["key"]["id"]]
            rows[line["new"]["id"]] = line["new"]
        elif op == "delete":
            del rows[line["key"]["id"]]
    return rows


def run_until_idle(
    proc: subprocess.Popen[bytes], stop: threading.Event, skip: int = 0
) -> tuple[bytes, bytes]:
    """Let the writer run until half the copy is read (pgtail cannot copy further than
    its output is read, so the writer changes the table during the copy), then stop it
    and collect everything pgtail writes until it goes idle."""
    assert proc.stdout is not None
    first = [proc.stdout.readline() for _ in range(skip + ROWS // 2)]
    assert first[-1], proc.stderr.read() if proc.stderr else b""
    stop.set()
    rest = proc.stdout.read()  # (communicate() would skip what the reader buffered)
    proc.wait(120)
    err = proc.stderr.read() if proc.stderr else b""
    return b"".join(first) + rest, err


# one end-to-end test per major for a new slot and one for an existing slot (the JSON of a
# new slot and the SQL of an existing one); the other two on a few majors, for CI's time
def test_json_applied_in_order_equals_the_table(db: Database) -> None:
    setup(db)
    with writer(db) as stop:
        proc = pgtail(db.dsn, "--publication", "pub", "--snapshot", "--idle-exit", "3")
        out, err = run_until_idle(proc, stop)
    assert proc.returncode == 0, err
    lines = [orjson.loads(line) for line in out.splitlines()]
    ops = [line["op"] for line in lines]
    first_change = next(i for i, op in enumerate(ops) if op != "snapshot")
    assert all(op == "snapshot" for op in ops[:first_change])
    assert "snapshot" not in ops[first_change:]
    assert "insert" in ops[first_change:]  # (the writer's last step follows the copy's start)
    snap = lines[0]
    assert snap["lsn"] == lines[first_change - 1]["lsn"]
    assert [line["seq"] for line in lines[:first_change]] == list(range(first_change))
    # every change streamed committed after the snapshot's consistent point
    consistent = parse_lsn(snap["lsn"])
    assert all(parse_lsn(line["commit_lsn"]) > consistent for line in lines[first_change:])
    rows = apply_json(lines)
    expected = {
        r[0]: r for r in db.execute("SELECT id, name, amount::text, at, doc::text, flag FROM t")
    }
    assert rows.keys() == expected.keys()
    for key, (_, name, amount, at, doc, flag) in expected.items():
        got = rows[key]
        assert (got["name"], got["amount"], got["flag"]) == (name, amount, flag)
        assert datetime.fromisoformat(got["at"]) == at
        assert got["doc"] == orjson.loads(doc)


@pytest.mark.majors(13, 15, 18)
def test_sql_replay_into_a_second_database_equals_the_table(db: Database, tmp_path: Path) -> None:
    setup(db)
    target = create_database(db.server, "target_")
    try:
        target.execute(TABLE_DDL)
        target.execute("INSERT INTO t (id) VALUES (-999999)")  # the replay empties it first
        out_file = tmp_path / "replay.sql"
        with writer(db) as stop, out_file.open("wb") as out:
            proc = pgtail(
                db.dsn,
                "--slot",
                "s",
                "--create-slot",
                "--publication",
                "pub",
                "--snapshot",
                "--format",
                "sql",
                "--idle-exit",
                "3",
                stdout=subprocess.PIPE,
            )
            data, err = run_until_idle(proc, stop)
            out.write(data)
        assert proc.returncode == 0, err
        text = data.decode()
        assert text.index("TRUNCATE public.t;") < text.index("COPY public.t (")
        replay(target, out_file.read_text())
        assert state(target) == state(db)
        # the slot carries on from there: nothing confirmed twice or skipped
        db.execute("INSERT INTO t (id, name) VALUES (-1, 'after')")
        more = run_stream(
            db.dsn, "--slot", "s", "--publication", "pub", "--format", "sql", "--idle-exit", "2",
            timeout=None, check=True,
        ).stdout.decode()  # fmt: skip
        assert "INSERT INTO public.t" in more and "'after'" in more
        assert "TRUNCATE" not in more
    finally:
        drop_database(db.server, target.name)


@pytest.mark.parametrize("fmt", [pytest.param("json", marks=pytest.mark.majors(13, 15, 18)), "sql"])
def test_existing_slot_with_a_backlog(db: Database, fmt: str) -> None:
    """A slot with changes waiting, some to the copied table (in the copy: skipped),
    some to another table (kept), then a copy of one table while a writer runs."""
    setup(db)
    db.execute("CREATE TABLE side (k int PRIMARY KEY)")
    db.execute("ALTER PUBLICATION pub ADD TABLE side")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute(FILL, (ROWS + 100_000, ROWS + 100_010))
    db.execute("UPDATE t SET name = 'backlog' WHERE id < 50")
    db.execute("DELETE FROM t WHERE id BETWEEN 50 AND 60")
    db.execute("INSERT INTO side VALUES (1), (2)")
    target = create_database(db.server, "target_")
    try:
        target.execute(TABLE_DDL)
        target.execute("CREATE TABLE side (k int PRIMARY KEY)")
        with writer(db) as stop:
            proc = pgtail(
                db.dsn,
                *("--slot", "s", "--publication", "pub", "--snapshot-table", "t"),
                *("--format", fmt, "--idle-exit", "3"),
            )
            out, err = run_until_idle(proc, stop, skip=0 if fmt == "json" else 3)
        assert proc.returncode == 0, err
        if fmt == "sql":
            replay(target, out.decode())
            assert state(target) == state(db)
            assert target.execute("SELECT k FROM side ORDER BY k") == [(1,), (2,)]
            return
        lines = [orjson.loads(line) for line in out.splitlines()]
        assert [x["new"] for x in lines if x["table"] == "side"] == [{"k": 1}, {"k": 2}]
        rows = apply_json([x for x in lines if x["table"] == "t"])
        assert sorted(rows) == [r[0] for r in db.execute("SELECT id FROM t ORDER BY id")]
        assert all(rows[r[0]]["name"] == r[1] for r in db.execute("SELECT id, name FROM t"))
    finally:
        drop_database(db.server, target.name)


def test_existing_slot_and_a_table_without_a_key(db15: Database) -> None:
    """The method needs no key: a table with none (REPLICA IDENTITY FULL, equal rows)
    snapshotted for a slot with a backlog, then streamed on, replays to the table."""
    db = db15
    db.execute("CREATE TABLE k (a int, b text)")
    db.execute("ALTER TABLE k REPLICA IDENTITY FULL")
    db.execute("INSERT INTO k SELECT g % 5, 'v' FROM generate_series(1, 50) g")
    db.execute("CREATE PUBLICATION pub FOR TABLE k")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute("UPDATE k SET b = 'w' WHERE ctid = (SELECT min(ctid) FROM k WHERE a = 1)")
    db.execute("DELETE FROM k WHERE ctid = (SELECT min(ctid) FROM k WHERE a = 2)")
    target = create_database(db.server, "target_")
    try:
        target.execute("CREATE TABLE k (a int, b text)")
        args = ["stream", "--dsn", db.dsn, "--slot", "s", "--publication", "pub"]
        args += ["--format", "sql", "--idle-exit", "1"]
        code, copied, err = run_cli([*args, "--snapshot"])
        assert code == 0, err
        assert "UPDATE" not in copied and "DELETE" not in copied  # the backlog: in the copy
        db.execute("UPDATE k SET b = 'x' WHERE ctid = (SELECT min(ctid) FROM k WHERE a = 3)")
        db.execute("DELETE FROM k WHERE ctid = (SELECT min(ctid) FROM k WHERE a = 4)")
        code, streamed, err = run_cli(args)
        assert code == 0, err
        assert "UPDATE" in streamed and "DELETE" in streamed
        replay(target, copied + streamed)
        rows = "SELECT a, b, count(*) FROM k GROUP BY a, b ORDER BY a, b"
        assert target.execute(rows) == db.execute(rows)
    finally:
        drop_database(db.server, target.name)


def test_interrupted_snapshot_drops_the_slot_it_created(db15: Database) -> None:
    db = db15
    setup(db)
    proc = pgtail(db.dsn, "--slot", "s", "--create-slot", "--publication", "pub", "--snapshot")
    assert proc.stdout is not None and proc.stderr is not None
    # the pipe is not read past the first line: the copy cannot finish before the signal
    assert orjson.loads(proc.stdout.readline())["op"] == "snapshot"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"dropped replication slot 's'" in err
    assert not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 's'")
    assert b'"op":"insert"' not in out  # no change before the copy's end
    # rerun: a clean start
    code, out2, err2 = run_cli(
        [
            "stream",
            "--dsn",
            db.dsn,
            "--slot",
            "s",
            "--create-slot",
            "--publication",
            "pub",
            "--snapshot",
            "--idle-exit",
            "1",
        ]
    )
    assert code == 0, err2
    assert out2.count('"op":"snapshot"') == ROWS


def test_kill_9_during_the_copy_then_rerun_replays_cleanly(db15: Database) -> None:
    """kill -9 in the middle of the copy leaves the slot this run created; the next run
    copies again as for a slot that exists, and both outputs replayed one after the
    other (the first ends inside a table's transaction) give the table."""
    db = db15
    setup(db)
    target = create_database(db.server, "target_")
    try:
        target.execute(TABLE_DDL)
        args = ("--slot", "s", "--create-slot", "--publication", "pub", "--snapshot")
        proc = pgtail(db.dsn, *args, "--format", "sql")
        assert proc.stdout is not None
        partial = b"".join(proc.stdout.readline() for _ in range(1000))
        proc.kill()
        proc.wait(30)
        assert db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 's'")
        db.execute("UPDATE t SET name = 'between' WHERE id < 100")
        code, out, err = run_cli(
            ["stream", "--dsn", db.dsn, *args, "--format", "sql", "--idle-exit", "1"]
        )
        assert code == 0, err
        replay(target, partial.decode())  # BEGIN without COMMIT: rolled back on close
        assert state(target) == []
        replay(target, out)
        assert state(target) == state(db)
    finally:
        drop_database(db.server, target.name)


def test_snapshot_table_glob_and_redact(db15: Database) -> None:
    db = db15
    setup(db)
    db.execute("CREATE TABLE other (k int PRIMARY KEY, secret text)")
    db.execute("INSERT INTO other VALUES (1, 'hush'), (2, NULL)")
    db.execute("ALTER PUBLICATION pub ADD TABLE other")
    code, out, err = run_cli(
        [
            "stream",
            "--dsn",
            db.dsn,
            "--publication",
            "pub",
            "--snapshot-table",
            "oth*",
            "--redact",
            "secret",
            "--idle-exit",
            "1",
        ]
    )
    assert code == 0, err
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert [(x["table"], x["new"]) for x in lines] == [
        ("other", {"k": 1, "secret": "***"}),
        ("other", {"k": 2, "secret": None}),
    ]


@pytest.mark.min_major(15)
def test_row_filter_and_column_list_as_the_stream_sends(db: Database) -> None:
    db.execute("CREATE TABLE f (id int PRIMARY KEY, keep text, hidden text)")
    db.execute("INSERT INTO f SELECT g, 'k' || g, 'h' FROM generate_series(1, 10) g")
    db.execute("CREATE PUBLICATION pub FOR TABLE f (id, keep) WHERE (id > 7)")
    code, out, err = run_cli(
        ["stream", "--dsn", db.dsn, "--publication", "pub", "--snapshot", "--idle-exit", "1"]
    )
    assert code == 0, err
    assert [orjson.loads(line)["new"] for line in out.splitlines()] == [
        {"id": 8, "keep": "k8"},
        {"id": 9, "keep": "k9"},
        {"id": 10, "keep": "k10"},
    ]


@pytest.mark.majors(12, 15, 18)
def test_rows_estimate_as_the_planner_estimates(db: Database) -> None:
    """rows_estimate before any VACUUM/ANALYZE (reltuples -1, or 0 before 14) comes from
    the table's size and column types, after one from its rows per page and its size
    now, of a partitioned table from its partitions: what EXPLAIN says, each time."""
    from pgtail.catalog import snapshot_tables

    off = "WITH (autovacuum_enabled = false)"
    db.execute(TABLE_DDL + " " + off)
    db.execute(FILL, (1, 5000))
    db.execute("CREATE TABLE e (id int) " + off)
    db.execute("CREATE TABLE p (id int, v text) PARTITION BY RANGE (id)")
    for n in (1, 2):
        db.execute(
            f"CREATE TABLE p{n} PARTITION OF p FOR VALUES FROM ({n}000000) TO ({n + 1}000000) {off}"
        )
        db.execute(f"INSERT INTO p SELECT {n}000000 + g, 'v' FROM generate_series(1, 3000) g")
    if db.server.major >= 13:
        db.execute("CREATE PUBLICATION pub FOR TABLE t, e, p WITH (publish_via_partition_root)")
    else:
        db.execute("CREATE PUBLICATION pub FOR TABLE t, e, p1, p2")

    def estimates() -> dict[str, int]:
        conn = db.connect()
        try:
            tables = snapshot_tables(conn, ["pub"], lambda schema, name: True)
        finally:
            conn.close()
        return {t.relation.name: t.rows_estimate for t in tables}

    def explained(table: str) -> int:
        plan: Any = db.execute(f"EXPLAIN (FORMAT JSON) SELECT * FROM {table}")[0][0]
        return int(plan[0]["Plan"]["Plan Rows"])

    before = estimates()
    assert before["t"] == explained("t") > 1000
    if "p" in before:  # the root (publish_via_partition_root): its partitions' rows
        assert before["p"] == explained("p") > 1000
    else:
        assert before["p1"] + before["p2"] == explained("p") > 1000
    assert before["e"] == 0  # an empty file (the planner would guess ten pages)
    db.execute("ANALYZE t")
    db.execute(FILL, (5001, 8000))  # grown since: rows per page times the pages now
    after = estimates()
    assert after["t"] == explained("t") != before["t"]
    assert 7000 < after["t"] < 9000


# --- bad input: one clear line --------------------------------------------------------


def test_snapshot_with_start_is_a_usage_error(db15: Database) -> None:
    code, _, err = run_cli(
        ["stream", "--dsn", db15.dsn, "--snapshot", "--start", "0/10", "--publication", "p"]
    )
    assert code == 2
    assert "--snapshot cannot be combined with --start" in err


def test_snapshot_without_select_privilege(db15: Database) -> None:
    setup(db15)
    role = "snap_" + os.urandom(4).hex()
    db15.execute(f"CREATE ROLE {role} LOGIN REPLICATION")
    try:
        dsn = db15.server.dsn(db15.name, user=role)
        code, _, err = run_cli(
            ["stream", "--dsn", dsn, "--publication", "pub", "--snapshot", "--idle-exit", "1"]
        )
        assert code == 1
        assert "no SELECT privilege on column 'id' of public.t" in err
        assert "GRANT SELECT ON public.t" in err
        assert not db15.execute("SELECT 1 FROM pg_replication_slots")  # none was made
    finally:
        db15.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")


def test_no_free_replication_slot_entry(db15: Database) -> None:
    """An existing slot's snapshot needs a temporary slot: none free is one line."""
    setup(db15)
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    free = int(db15.execute("SHOW max_replication_slots")[0][0]) - int(
        db15.execute("SELECT count(*) FROM pg_replication_slots")[0][0]
    )
    fillers = [f"filler_{os.getpid()}_{i}" for i in range(free)]
    for name in fillers:
        db15.execute("SELECT pg_create_physical_replication_slot(%s)", (name,))
    try:
        code, _, err = run_cli(
            ["stream", "--dsn", db15.dsn, "--slot", "s", "--publication", "pub", "--snapshot"]
        )
        assert code == 1
        assert "all replication slots are in use" in err
        assert "max_replication_slots" in err
        assert len(err.strip().splitlines()) == 1
    finally:
        for name in fillers:
            db15.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def test_snapshot_too_old(pg15: LocalServer) -> None:
    """old_snapshot_threshold (PostgreSQL 12-16; 0: a snapshot is "old" after about 5 s,
    the setting's test mode) lets VACUUM prune rows the copy still needs: the copy stops
    with one line and a hint, and the slot this run created is dropped (nothing
    confirmed). A server of its own: the setting needs a restart."""
    server = start_server(pg15.bindir, settings={"old_snapshot_threshold": "0"})
    try:
        db = Database(server, "postgres")
        wide_table(db)
        proc = pgtail(db.dsn, "--slot", "s", "--create-slot", "--publication", "pub", "--snapshot")
        assert proc.stdout is not None
        # the output is not read: the copy waits near the table's start
        assert orjson.loads(proc.stdout.readline())["op"] == "snapshot"
        time.sleep(6)  # the snapshot is now past the threshold
        db.execute("UPDATE t SET pad = 'y' WHERE id > 190000")  # pages the copy reads last
        db.execute("VACUUM t")
        out, errors = failed(proc)
        assert errors == [
            "pgtail: error: the snapshot became too old while copying public.t:"
            " old_snapshot_threshold let VACUUM remove rows the copy still needed (raise"
            " old_snapshot_threshold (-1 turns it off; a server restart) or copy fewer tables"
            " per run (--snapshot-table); then rerun: nothing was confirmed)"
        ]
        assert b'"op":"insert"' not in out
        assert not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 's'")
    finally:
        server.destroy()


def test_snapshot_too_old_on_a_standby(pg18: LocalServer) -> None:
    """On a standby with hot_standby_feedback off (and max_standby_streaming_delay 0),
    the primary's VACUUM removes rows the copy still needs and the standby cancels the
    copy ("canceling statement due to conflict with recovery", SQLSTATE 40001): one line
    with a hint, and the slot this run created on the standby is dropped."""
    if not (pg18.bindir / "pg_basebackup").exists():
        pytest.skip("pg_basebackup is not installed beside the PostgreSQL 18 server")
    primary = start_server(pg18.bindir)
    standby = None
    try:
        standby = start_standby(
            primary, {"hot_standby_feedback": "off", "max_standby_streaming_delay": "0"}
        )
        db = Database(primary, "postgres")
        wide_table(db)
        on_standby = Database(standby, "postgres")
        proc = pgtail(
            on_standby.dsn, "--slot", "s", "--create-slot", "--publication", "pub", "--snapshot"
        )
        assert proc.stdout is not None
        # a slot on a standby waits for the primary's next running-transactions record
        created = threading.Event()

        def nudge() -> None:
            while not created.wait(0.2):
                db.execute("SELECT pg_log_standby_snapshot()")

        thread = threading.Thread(target=nudge, daemon=True)
        thread.start()
        try:
            # the output is not read further: the copy waits near the table's start
            assert orjson.loads(proc.stdout.readline())["op"] == "snapshot"
        finally:
            created.set()
            thread.join(30)
        db.execute("UPDATE t SET pad = 'y' WHERE id > 190000")  # pages the copy reads last
        db.execute("VACUUM t")
        # the standby replays the VACUUM while the copy still waits on its output
        settle(db)
        flushed = db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]
        replayed = "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn"
        for _ in range(600):
            if on_standby.execute(replayed, (flushed,))[0][0]:
                break
            time.sleep(0.05)
        out, errors = failed(proc)
        assert errors == [
            "pgtail: error: the snapshot became too old while copying public.t: canceling"
            " statement due to conflict with recovery (on a standby, turn hot_standby_feedback"
            " on (or raise max_standby_streaming_delay), or take the snapshot on the primary;"
            " then rerun: nothing was confirmed)"
        ]
        assert b'"op":"insert"' not in out
        assert not on_standby.execute("SELECT 1 FROM pg_replication_slots")
    finally:
        if standby is not None:
            standby.destroy()
        primary.destroy()


def test_no_free_walsender_for_the_temporary_slot(pg15: LocalServer) -> None:
    """An existing slot's snapshot needs a second replication connection for a moment:
    none free (max_wal_senders = 1, the stream's own) is one line, not retries."""
    server = start_server(pg15.bindir, settings={"max_wal_senders": "1"})
    try:
        db = Database(server, "postgres")
        setup(db)
        db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        code, out, err = run_cli(
            ["stream", "--dsn", db.dsn, "--slot", "s", "--publication", "pub", "--snapshot"]
        )
        assert code == 1
        assert err.strip().splitlines() == [
            "pgtail: error: --snapshot of a slot that exists needs a second replication"
            " connection for a moment (a temporary slot exports the snapshot): all"
            " max_wal_senders are in use (raise max_wal_senders (a server restart) or stop"
            " another replication client, or snapshot into a new slot (--slot NEW"
            " --create-slot))"
        ]
        assert out == ""
    finally:
        server.destroy()


def test_existing_slot_with_two_phase_is_refused(db15: Database) -> None:
    setup(db15)
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput', false, true)")
    code, _, err = run_cli(
        [
            "stream",
            "--dsn",
            db15.dsn,
            "--slot",
            "s",
            "--publication",
            "pub",
            "--snapshot",
            "--two-phase",
        ]
    )
    assert code == 1
    assert "--snapshot of a slot that exists cannot go with --two-phase" in err
    assert len(err.strip().splitlines()) == 1


def test_a_table_without_columns(db15: Database) -> None:
    db15.execute("CREATE TABLE z ()")
    db15.execute("INSERT INTO z DEFAULT VALUES")
    db15.execute("INSERT INTO z DEFAULT VALUES")
    db15.execute("CREATE PUBLICATION pub FOR TABLE z")
    code, out, err = run_cli(
        ["stream", "--dsn", db15.dsn, "--publication", "pub", "--snapshot", "--idle-exit", "1"]
    )
    assert code == 0, err
    assert [orjson.loads(x)["new"] for x in out.splitlines()] == [{}, {}]


def test_snapshot_with_raw_format(db15: Database) -> None:
    code, _, err = run_cli(
        ["stream", "--dsn", db15.dsn, "--snapshot", "--format", "raw", "--publication", "p"]
    )
    assert code == 1
    assert "--snapshot has no --format raw" in err


# --- pure: COPY text rows through the stream's converters ----------------------------


def test_copy_fields_unescape() -> None:
    assert copy_fields(b"1\t\\N\ta\\tb\\\\c\\nd\t") == [b"1", None, b"a\tb\\c\nd", b""]


@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_snapshot_rows_match_the_streamed_insert(fmt: str, codegen: Any) -> None:
    """A row read by COPY renders as the insert of the same text renders (its head
    aside; in SQL, as the same COPY row), on the encoder path and the general path,
    generated code on and off."""
    relation = po.Relation(
        None,
        1,
        "public",
        "t",
        "d",
        (po.RelationColumn(1, "id", 23, -1), po.RelationColumn(0, "v", 25, -1)),
    )
    for enabled in (True, False):
        codegen(enabled)
        fast = TableRows(relation, encoder=row_encoder(fmt)).rows(b"1\ta\\tb\n2\t\\N\n")
        slow = TableRows(relation).rows(b"1\ta\\tb\n2\t\\N\n")
        assert fast.lines and slow.rows == ({"id": 1, "v": "a\tb"}, {"id": 2, "v": None})
        for event in (fast, slow):
            out = io.BytesIO()
            make_renderer(fmt, out).render(event)
            rendered = out.getvalue()
            if fmt == "json":
                lines = [orjson.loads(x) for x in rendered.splitlines()]
                assert [x["new"] for x in lines] == [{"id": 1, "v": "a\tb"}, {"id": 2, "v": None}]
                assert [x["seq"] for x in lines] == [0, 1]
                assert lines[0]["key"] == {"id": 1}
            else:  # the rows of a COPY ... FROM STDIN block, as COPY wrote them
                assert rendered == b"1\ta\\tb\n2\t\\N\n"


def test_table_view_shows_progress_not_rows() -> None:
    relation = po.Relation(None, 1, "public", "t", "d", (po.RelationColumn(1, "id", 23, -1),))
    rows = TableRows(relation, rows_estimate=4)
    events = [SnapshotBegin(rows.copy), rows.rows(b"1\n2\n"), rows.rows(b"3\n4\n5\n")]
    events.append(SnapshotEnd(rows.copy, 5))
    for width, expected in ((100, " 50% 2 of ~4 rows"), (None, "")):
        out = io.BytesIO()
        renderer = make_renderer("table", out, RenderOptions(width=width))
        for event in events:
            renderer.render(event)
        text = out.getvalue().decode()
        assert "snapshot of public.t" in text and "table 1 of 1" in text
        assert expected in text
        assert "100% 5 rows" in text
        assert ("\r" in text) == (width is not None)  # redrawn in place on a terminal only
        assert "│" not in text  # no rows shown
