"""A table another session holds an ACCESS EXCLUSIVE lock on (``BEGIN; LOCK TABLE t;``, an
``ALTER TABLE`` left open): pgtail's reads of it wait for the lock, and say so -- the
blocking PID and the fix -- while a signal cancels the wait, leaving no slot behind."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2
import psycopg2.errors

from tests.helpers import Database, Stderr, kill_if_running, stream_command


@contextmanager
def session(db: Database, application_name: str, statement: str) -> Iterator[tuple[Any, int]]:
    """Another session that ran ``statement`` in a transaction left open; yields (its
    connection, its PID)."""
    conn = db.connect(application_name=application_name)
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            cur.execute("SELECT pg_backend_pid()")
            row = cur.fetchone()
            assert row is not None
        yield conn, int(row[0])
    finally:
        conn.close()


def slots_left(db: Database, kept: tuple[str, ...] = (), timeout: float = 30) -> list[str]:
    """The slots left once the walsenders of ended runs have exited: waits until only
    ``kept`` (slots made before the run) are there, or ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        names = [
            str(r[0])
            for r in db.execute("SELECT slot_name FROM pg_replication_slots WHERE NOT active")
        ]
        active = db.execute("SELECT count(*) FROM pg_replication_slots WHERE active")[0][0]
        if (not active and sorted(names) == sorted(kept)) or time.monotonic() >= deadline:
            return sorted(names + ["(active)"] * int(active))
        time.sleep(0.1)


def publication(db: Database) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text DEFAULT 'x')")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    db.execute("CREATE TABLE held (a int)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")


def assert_names(
    line: str, pid: int, application_name: str, state: str = "idle in transaction"
) -> None:
    assert f"PID {pid}" in line, line
    assert f"pg_terminate_backend({pid})" in line, line
    assert f"'{application_name}'" in line and f"state {state}" in line, line
    assert "a lock on a relation" in line, line


def test_snapshot_names_an_alter_table_left_open_and_sigint_cancels(db: Database) -> None:
    """The published tables are read (their sizes lock them) before any slot is made."""
    publication(db)
    with session(db, "held_alter", "ALTER TABLE t ADD COLUMN w int") as (_, pid):
        proc = subprocess.Popen(
            stream_command(db.dsn, "--publication", "pub", "--snapshot"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            err = Stderr(proc)
            line = err.wait_for("pgtail: waiting")
            assert "read the published tables" in line, line
            assert_names(line, pid, "held_alter")
            assert "xid none" not in line, line
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=30)
        finally:
            kill_if_running(proc)
    assert code == 130, err.text()
    assert slots_left(db) == []


def test_the_copy_waits_aloud_for_a_lock_taken_once_the_slot_is_consistent(
    db: Database,
) -> None:
    """An ``ALTER TABLE`` begun after the point the slot's creation waits from (it waits
    for the transactions running then: ``second``) is not waited for by the creation:
    the snapshot's own reading of the tables waits for it, and says so; SIGTERM drops
    the slot the run created."""
    publication(db)
    with session(db, "held_tx", "INSERT INTO held VALUES (1)") as (first, _):
        proc = subprocess.Popen(
            stream_command(
                db.dsn, "--slot", "s", "--create-slot", "--publication", "pub", "--snapshot"
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            err = Stderr(proc)
            err.wait_for("to create replication slot 's'")
            with session(db, "second", "INSERT INTO held VALUES (2)") as (second, _):
                first.commit()
                wait_for_waiter(db, second)
                with session(db, "held_alter", "ALTER TABLE t ADD COLUMN w int") as (_, pid):
                    second.commit()
                    line = err.wait_for("to read the tables to copy")
                    assert_names(line, pid, "held_alter")
                    proc.send_signal(signal.SIGTERM)
                    code = proc.wait(timeout=30)
        finally:
            kill_if_running(proc)
    assert code == 143, err.text()
    assert "dropped replication slot 's'" in err.text()
    assert slots_left(db) == []


def wait_for_waiter(db: Database, conn: Any) -> None:
    """Until a backend waits for the transaction of ``conn``."""
    with conn.cursor() as cur:
        cur.execute("SELECT txid_current()::text")
        row = cur.fetchone()
    assert row is not None
    xid = str(int(row[0]) & 0xFFFFFFFF)
    deadline = time.monotonic() + 30
    while not db.execute(
        "SELECT 1 FROM pg_locks WHERE locktype = 'transactionid'"
        " AND transactionid::text = %s AND NOT granted",
        (xid,),
    ):
        assert time.monotonic() < deadline, "the slot's creation never waited for it"
        time.sleep(0.05)


def test_sql_ddl_lookup_names_the_lock_holder(db: Database) -> None:
    """SQL replay looks up a table's definition (its defaults lock it) at its first
    change."""
    publication(db)
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute("INSERT INTO t VALUES (2, 'b')")
    with session(db, "held_lock", "LOCK TABLE t") as (_, pid):
        proc = subprocess.Popen(
            stream_command(db.dsn, "--slot", "s", "--publication", "pub", "--format", "sql"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            err = Stderr(proc)
            line = err.wait_for("pgtail: waiting")
            assert "look up the definition" in line, line
            assert_names(line, pid, "held_lock")
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=30)
        finally:
            kill_if_running(proc)
    assert code == 130, err.text()
    assert slots_left(db, kept=("s",)) == ["s"]
    # the change whose DDL was being looked up is not confirmed: the next run has it
    assert db.execute(
        "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('s', NULL, NULL,"
        " 'proto_version', '1', 'publication_names', 'pub') WHERE substr(data, 1, 1) = 'I'"
    ) == [(1,)]


def test_the_snapshot_holds_its_tables_until_the_copy_ends(db: Database) -> None:
    """Every table to copy is locked before the first row (as pg_dump does): while the
    copy of the first table waits for a reader, an ALTER TABLE of the last waits for
    pgtail, instead of leaving a COPY to wait for it later without a word."""
    db.execute("CREATE TABLE a_big (id int PRIMARY KEY, v text)")
    db.execute("INSERT INTO a_big SELECT g, repeat('x', 200) FROM generate_series(1, 100000) g")
    db.execute("CREATE TABLE z_last (id int PRIMARY KEY)")
    db.execute("CREATE PUBLICATION pub FOR TABLE a_big, z_last")
    proc = subprocess.Popen(
        stream_command(db.dsn, "--publication", "pub", "--snapshot"),
        stdout=subprocess.PIPE,  # never read: the copy of a_big stops for it
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not db.execute(
            "SELECT 1 FROM pg_stat_activity"
            " WHERE query LIKE 'COPY%%a_big%%' AND pid <> pg_backend_pid()"
        ):
            assert proc.poll() is None and time.monotonic() < deadline, "no copy of a_big"
            time.sleep(0.05)
        conn = db.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SET lock_timeout = '1s'")
                try:
                    cur.execute("ALTER TABLE z_last ADD COLUMN w int")
                    altered = True
                except psycopg2.errors.LockNotAvailable:
                    altered = False
        finally:
            conn.close()
        assert not altered, "z_last was not locked by the snapshot"
    finally:
        kill_if_running(proc)
        proc.wait(30)
