"""Creating a slot behind an open transaction: pgtail says what it waits for (the
blocking PID and the fix) and a signal cancels the wait, leaving no slot behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.helpers import Database, Stderr, kill_if_running, stream_command


@contextmanager
def open_transaction(db: Database) -> Iterator[int]:
    """Another session with ``BEGIN; INSERT ...`` left open; yields its PID."""
    db.execute("CREATE TABLE IF NOT EXISTS held (a int)")
    conn = db.connect(application_name="held_tx")
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO held VALUES (1)")  # psycopg2 opened a transaction
            cur.execute("SELECT pg_backend_pid()")
            row = cur.fetchone()
            assert row is not None
        yield int(row[0])
    finally:
        conn.close()


def slot_names(db: Database) -> list[str]:
    return [str(r[0]) for r in db.execute("SELECT slot_name FROM pg_replication_slots")]


def wait_gone(db: Database, timeout: float = 30) -> list[str]:
    """The slots left once the walsenders of ended runs have exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        names = slot_names(db)
        if not names:
            return names
        time.sleep(0.1)
    return slot_names(db)


def cancelled_wait(db: Database, command: list[str], signum: int) -> tuple[int, str, str]:
    """Run ``command`` behind an open transaction; once it names the blocker, send
    ``signum``. Returns (exit code, the waiting line, all of stderr); asserts the
    line names the blocking PID and the fix."""
    with open_transaction(db) as blocker:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            err = Stderr(proc)
            line = err.wait_for("waiting")
            assert f"PID {blocker}" in line, line
            assert f"pg_terminate_backend({blocker})" in line, line
            assert "'held_tx'" in line and "idle in transaction" in line, line
            assert "xid " in line and "xid none" not in line, line
            proc.send_signal(signum)
            code = proc.wait(timeout=30)
            err.thread.join(10)
            return code, line, "".join(err.lines)
        finally:
            kill_if_running(proc)


def slot_command(db: Database, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgtail", "slot", "create", *args, "--dsn", db.dsn]


def publication(db: Database) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("INSERT INTO t VALUES (1, 'a')")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")


def test_slot_create_names_the_blocking_transaction_and_sigint_cancels(db: Database) -> None:
    code, _, err = cancelled_wait(db, slot_command(db, "s"), signal.SIGINT)
    assert code == 130, err
    assert "cancelled the wait to create replication slot 's'" in err
    assert wait_gone(db) == []


def test_slot_create_sigterm_cancels_the_wait(db15: Database) -> None:
    code, _, err = cancelled_wait(db15, slot_command(db15, "s"), signal.SIGTERM)
    assert code == 143, err
    assert wait_gone(db15) == []


def test_stream_create_slot_says_what_it_waits_for(db: Database) -> None:
    publication(db)
    command = stream_command(db.dsn, "--slot", "s", "--create-slot", "--publication", "pub")
    code, line, err = cancelled_wait(db, command, signal.SIGINT)
    assert "create replication slot 's'" in line
    assert code == 130, err
    assert "nothing was confirmed" in err
    assert wait_gone(db) == []


def test_snapshot_temporary_slot_wait_is_said_and_sigterm_cancels(db: Database) -> None:
    publication(db)
    command = stream_command(db.dsn, "--publication", "pub", "--snapshot")
    code, _, err = cancelled_wait(db, command, signal.SIGTERM)
    assert code == 143, err
    assert wait_gone(db) == []


def test_snapshot_of_an_existing_slot_waits_aloud(db15: Database) -> None:
    """The temporary slot that exports a snapshot for a slot that exists."""
    db = db15
    publication(db)
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    command = stream_command(db.dsn, "--slot", "s", "--publication", "pub", "--snapshot")
    code, line, err = cancelled_wait(db, command, signal.SIGINT)
    assert "temporary slot" in line
    assert code == 130, err
    assert slot_names(db) == ["s"] or wait_gone_but(db, "s")


def wait_gone_but(db: Database, keep: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if slot_names(db) == [keep]:
            return True
        time.sleep(0.1)
    return False


def test_the_wait_ends_when_the_transaction_does(db15: Database) -> None:
    """The wait is only said: once the transaction commits, the slot is created."""
    db = db15
    db.execute("CREATE TABLE held (a int)")
    conn: Any = db.connect(application_name="held_tx")
    conn.autocommit = False
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO held VALUES (1)")
        proc = subprocess.Popen(
            slot_command(db, "s"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        try:
            err = Stderr(proc)
            err.wait_for("waiting")
            conn.commit()
            assert proc.wait(timeout=30) == 0
            assert proc.stdout is not None
            assert "created replication slot s" in proc.stdout.read().decode()
        finally:
            kill_if_running(proc)
    finally:
        conn.close()
    assert slot_names(db) == ["s"]


def test_top_sampler_note_names_the_oldest_transaction(db15: Database) -> None:
    """`top --publication`'s temporary slot gives up after a few seconds; its note says
    which transaction it waited for."""
    from pgtail import catalog

    publication(db15)
    with open_transaction(db15) as blocker:
        sampler = catalog.ChangeSampler(db15.dsn, "pub")
        try:
            note = sampler.start()
        finally:
            sampler.close()
    assert note is not None and sampler.retriable
    assert f"PID {blocker}" in note and f"pg_terminate_backend({blocker})" in note, note
