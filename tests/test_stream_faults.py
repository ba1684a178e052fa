"""Faults a real network and server produce: a connection cut mid-stream (through a TCP
proxy) and a server restart. pgtail reconnects, resumes, and loses nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pgtail.lsn import format_lsn
from pgtail.server import LocalServer, start_server
from tests.helpers import (
    Database,
    JsonLines,
    allow_password_role,
    confirmed,
    create_database,
    insert_lsn,
    kill_if_running,
    pgtail_stream,
    run_stream,
    wait_active,
    wait_any_active,
)
from tests.proxy import Proxy


def setup(db: Any) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")


def test_connection_cut_mid_stream_reconnects_without_loss(db: Any) -> None:
    setup(db)
    with Proxy(db.server.port) as proxy:
        dsn = f"host=127.0.0.1 port={proxy.port} dbname={db.name} user={db.server.user}"
        proc = pgtail_stream(
            dsn, "--slot", "s", "--publication", "pub", "--format", "json",
            "--status-interval", "1", "--idle-exit", "30",
        )  # fmt: skip
        try:
            collector = JsonLines(proc)
            wait_active(db, timeout=60)
            total = 0
            conn = db.connect()
            cur = conn.cursor()
            for round_ in range(3):
                for _ in range(300):
                    cur.execute("INSERT INTO t VALUES (%s, repeat('p', 300))", (total,))
                    total += 1
                collector.wait_for(total - 250)  # mid-stream: some lines still to come
                assert proxy.cut() >= 1, round_
            for _ in range(100):
                cur.execute("INSERT INTO t VALUES (%s, 'tail')", (total,))
                total += 1
            conn.close()
            collector.wait_for(total, timeout=90)
            end = insert_lsn(db)
            deadline = time.time() + 30
            while confirmed(db) < end - 8192 and time.time() < deadline:
                time.sleep(0.1)
            proc.terminate()
            _, err = proc.communicate(timeout=30)
            collector.join()
        finally:
            kill_if_running(proc)
        assert proxy.connections >= 4  # the first connection and one after each cut
    assert proc.returncode == 143, err
    assert b"reconnect" in err
    ids = [r["new"]["id"] for r in collector.lines]
    assert ids == list(range(total)), "every change exactly once, in commit order"


@pytest.fixture
def own_db(pg: LocalServer) -> Iterator[Database]:
    """A database on a server of this test's own, like the suite's server of each major:
    restarting it disturbs no other test."""
    server = start_server(pg.bindir, settings=dict(pg.settings))
    try:
        yield create_database(server, name="restart_test")
    finally:
        server.destroy()


def test_server_restart_mid_stream(own_db: Database) -> None:
    db = own_db
    setup(db)
    proc = pgtail_stream(
        db.dsn, "--slot", "s", "--publication", "pub", "--format", "json",
        "--status-interval", "1", "--reconnect-max-delay", "2",
    )  # fmt: skip
    try:
        collector = JsonLines(proc)
        wait_active(db, timeout=60)
        db.execute("INSERT INTO t SELECT g, 'before' FROM generate_series(0, 199) g")
        for i in range(200, 400):
            db.execute("INSERT INTO t VALUES (%s, 'before')", (i,))
        collector.wait_for(250)
        db.server.restart()
        for i in range(400, 600):
            db.execute("INSERT INTO t VALUES (%s, 'after')", (i,))
        end = insert_lsn(db)
        collector.wait_for(600, timeout=120)
        deadline = time.time() + 30
        while confirmed(db) < end and time.time() < deadline:
            time.sleep(0.1)
        assert confirmed(db) >= end, (format_lsn(confirmed(db)), format_lsn(end))
        proc.send_signal(2)
        _, err = proc.communicate(timeout=30)
        collector.join()
    finally:
        kill_if_running(proc)
    assert proc.returncode == 130, err
    assert b"reconnected" in err, err
    ids = [r["new"]["id"] for r in collector.lines]
    assert ids == list(range(600))


def test_temporary_slot_cannot_resume_after_a_cut(db: Any) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    with Proxy(db.server.port) as proxy:
        dsn = f"host=127.0.0.1 port={proxy.port} dbname={db.name} user={db.server.user}"
        proc = pgtail_stream(dsn, "--publication", "pub", "--format", "json")
        try:
            collector = JsonLines(proc)
            wait_any_active(db)
            db.execute("INSERT INTO t VALUES (1, 'a')")
            collector.wait_for(1)
            proxy.cut()
            _, err = proc.communicate(timeout=30)
        finally:
            kill_if_running(proc)
    assert proc.returncode == 1
    lines = err.decode().strip().splitlines()
    assert "temporary slot" in lines[-1] and "--slot" in lines[-1]


@pytest.fixture(scope="module")
def replica_server(pg18: LocalServer) -> Iterator[Any]:
    """A server with wal_level = replica and a password-protected role.

    One major only: these tests check how pgtail words a refused connection (its own
    wal_level check, the server's authentication failure), which does not depend on the
    major; the reconnect and restart tests above run on every major."""
    server = start_server(pg18.bindir, settings={"wal_level": "replica"})
    try:
        allow_password_role(server, "REPLICATION")
        yield server
    finally:
        server.destroy()


def test_error_wal_level_not_logical(replica_server: Any) -> None:
    proc = run_stream(replica_server.dsn("postgres"), timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert "wal_level is 'replica'" in lines[0] and "wal_level = logical" in lines[0]


def test_error_authentication_failure_hides_password(replica_server: Any) -> None:
    dsn = replica_server.dsn("postgres", user="pw", password="wrong-secret")
    proc = run_stream(dsn, timeout=60)
    assert proc.returncode == 1
    err = proc.stderr.decode()
    assert "authentication failed" in err
    assert "wrong-secret" not in err and "right-secret" not in err
    assert len(err.strip().splitlines()) == 1
