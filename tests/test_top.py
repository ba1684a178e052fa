"""`pgtail top`, `slot info/list` and the doctor naming why a slot holds WAL, against real
servers: each cause reproduced cheaply (a slot without consumer while a writer runs, a
consumer that reads but never confirms, a long-open transaction under a confirming
consumer, an idle database beside a busy one), and the JSON document on 12, 15 and 18."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest

from pgtail.doctor import slot_causes
from pgtail.lsn import parse_lsn
from tests.helpers import Database, create_database, drop_database, run_cli, wait_for, write

MB = 1024 * 1024

# a consumer on the replication protocol: reads every message; with "confirm" it confirms
# each one (flush feedback), without it it never does
CONSUMER = """
import sys, psycopg2, psycopg2.extras
dsn, slot, publication, confirm = sys.argv[1:5]
conn = psycopg2.connect(dsn, application_name="test_consumer",
                        connection_factory=psycopg2.extras.LogicalReplicationConnection)
cur = conn.cursor()
cur.start_replication(slot_name=slot, decode=False,
                      options={"proto_version": "1", "publication_names": publication})
def consume(msg):
    if confirm == "yes":
        msg.cursor.send_feedback(flush_lsn=msg.data_start, reply=True)
cur.consume_stream(consume)
"""


@contextmanager
def consumer(db: Database, slot: str, publication: str, confirm: bool) -> Iterator[None]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CONSUMER, db.dsn, slot, publication, "yes" if confirm else "no"]
    )
    try:
        wait_for(db, "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        yield
    finally:
        proc.kill()
        proc.wait()


def current_lsn(db: Database) -> int:
    return parse_lsn(str(db.execute("SELECT pg_current_wal_lsn()::text")[0][0]))


@pytest.fixture
def short_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The verdicts decided by time over shorter windows than pgtail's (20 s unconfirmed,
    a 15 s old transaction): the same rules, each test waits 10 s less. Only for tests
    whose consumer never confirms or whose pin is held open: a consumer that confirms
    replies every 10 s (psycopg2's status interval), which a 10 s window could miss.
    `top`, `doctor` and `slot info` run in this process (run_cli), so they see them."""
    monkeypatch.setattr(slot_causes, "CONFIRM_WINDOW", 10.0)
    monkeypatch.setattr(slot_causes, "PIN_SECONDS", 5.0)


@pytest.fixture
def never_confirmed_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 5 s window for tests whose consumer never confirms (its flush position stays
    unset however often psycopg2 replies), so no reply can fall inside the window: each
    test waits 15 s less than with pgtail's 20 s."""
    monkeypatch.setattr(slot_causes, "CONFIRM_WINDOW", 5.0)


def wait_unconfirmed_window(db: Database) -> None:
    """Until the test consumer has been connected past the window after which what it was
    sent and has not confirmed makes it "not confirming" (decided by time, not bytes)."""
    wait_for(
        db,
        "SELECT clock_timestamp() - backend_start > %s * interval '1 s'"
        " FROM pg_stat_replication WHERE application_name = 'test_consumer'",
        (slot_causes.CONFIRM_WINDOW + 1,),
    )


def wait_changes_counted(db: Database, quiet: float = 1.5) -> None:
    """Until ``db``'s row-change counters (pg_stat_database) have stayed put for ``quiet``
    seconds. A change counted late would fall between the two looks of `top` and make an
    idle database look busy: a session sends its counters at most every 500 ms, at the
    end of a transaction (a kept session that idles sends them with its next statement),
    and before PostgreSQL 15 a reader may take the collector's file 500 ms old."""
    query = (
        "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database"
        " WHERE datname = current_database()"
    )
    last, since = db.execute(query)[0][0], time.monotonic()
    deadline = since + 60
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = db.execute(query)[0][0]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise AssertionError(f"the change counters of {db.name} never settled")


def wait_sent(db: Database, slot: str, lsn: int) -> None:
    wait_for(
        db,
        "SELECT r.sent_lsn >= %s::pg_lsn FROM pg_stat_replication r"
        " JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.slot_name = %s",
        (f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}", slot),
    )


def setup(db: Database, slot: str = "s") -> None:
    db.execute("CREATE TABLE t (id serial PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION p FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def write_mb(db: Database, megabytes: int = 2) -> None:
    """About ``megabytes`` of WAL in committed rows of t."""
    write(
        db, f"INSERT INTO t (v) SELECT repeat('x', 100) FROM generate_series(1, {7000 * megabytes})"
    )


def top_json(db: Database, *extra: str, interval: str = "0.5") -> dict[str, Any]:
    code, out, err = run_cli(["top", "--once", "--json", "--interval", interval, *extra, db.dsn])
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1  # one document
    return dict(orjson.loads(lines[0]))


def slot_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in doc["slots"] if s["slot_name"] == name)


@contextmanager
def writer(db: Database) -> Iterator[None]:
    """Rows written in ``db`` until the block ends."""
    stop = threading.Event()

    def run() -> None:
        conn = db.connect()
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute(
                    "INSERT INTO w (v) SELECT repeat('y', 100) FROM generate_series(1, 200)"
                )
                time.sleep(0.05)
        conn.close()

    db.execute("CREATE TABLE IF NOT EXISTS w (v text)")
    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --------------------------------------------------------------------------- causes


def test_no_consumer_while_a_writer_runs(db: Database) -> None:
    setup(db)
    write_mb(db)
    with writer(db):
        doc = top_json(db)
    s = slot_of(doc, "s")
    assert s["active"] is False and s["consumer"] is None
    # a few MB without consumer informs; it warns from NO_CONSUMER_WARN_BYTES (64 MB)
    assert s["cause"]["code"] == "no_consumer" and s["cause"]["status"] == "info"
    assert "pg_drop_replication_slot('s')" in s["cause"]["fix"]
    assert s["retained_bytes"] >= 2 * MB
    assert doc["wal_rate_bytes_per_second"] > 0
    assert s["trend"]["retained_rate"] > 0  # it grows while nobody reads
    code, out, _ = run_cli(["slot", "info", "s", db.dsn])
    assert code == 0 and re.search(r"\n  cause +no consumer", out) and "catalog_xmin" in out


@pytest.mark.usefixtures("never_confirmed_window")
def test_consumer_that_reads_but_never_confirms(db: Database) -> None:
    setup(db)
    with consumer(db, "s", "p", confirm=False):
        write_mb(db)
        wait_sent(db, "s", current_lsn(db))
        wait_unconfirmed_window(db)
        doc = top_json(db)
        s = slot_of(doc, "s")
        # with nothing written between top's two looks, a consumer that does not confirm and
        # an idle database look alike (both name the consumer); the one-look commands below
        # say "not confirming"
        assert s["cause"]["code"] in ("not_confirming", "idle_database"), s["cause"]
        assert s["consumer"]["application_name"] == "test_consumer"
        assert "test_consumer" in s["cause"]["summary"]
        assert s["lag_bytes"] > 0  # not confirming is decided by time, not by bytes
        code, out, _ = run_cli(["doctor", "--json", db.dsn])
        checks = orjson.loads(out)["checks"]
        cause = [c for c in checks if c["id"] == "slot.activity" and c["subject"] == "s"]
        assert cause and cause[0]["status"] == "warn" and "not confirming" in cause[0]["summary"]
        code, out, _ = run_cli(["slot", "info", "s", "--json", db.dsn])
        info = orjson.loads(out)
        assert info["cause"]["code"] == "not_confirming"
        assert info["consumer"]["sent_lsn"] is not None


@pytest.mark.usefixtures("short_windows")
def test_long_open_transaction_pins_the_restart_position(db: Database) -> None:
    setup(db)
    with consumer(db, "s", "p", confirm=True):
        long_tx = db.connect()
        long_tx.autocommit = False
        with long_tx.cursor() as cur:
            cur.execute("INSERT INTO t (v) VALUES ('held open')")  # it has an xid now
            pid = long_tx.get_backend_pid()
            try:
                write_mb(db, 3)
                wait_for(  # younger transactions are not named as pins (PIN_SECONDS)
                    db,
                    "SELECT clock_timestamp() - xact_start > %s * interval '1 s'"
                    " FROM pg_stat_activity WHERE pid = %s",
                    (slot_causes.PIN_SECONDS + 1, pid),
                )
                write_mb(db, 1)
                end = current_lsn(db)
                wait_for(
                    db,
                    "SELECT confirmed_flush_lsn >= %s::pg_lsn FROM pg_replication_slots"
                    " WHERE slot_name = 's'",
                    (f"{end >> 32:X}/{end & 0xFFFFFFFF:X}",),
                )
                doc = top_json(db)
            finally:
                long_tx.rollback()
                long_tx.close()
    s = slot_of(doc, "s")
    assert s["cause"]["code"] == "pinned", s["cause"]
    assert f"PID {pid}" in s["cause"]["summary"]
    assert f"pg_terminate_backend({pid})" in s["cause"]["fix"]
    assert any(p["kind"] == "transaction" and p["subject"] == f"PID {pid}" for p in doc["pins"])


@pytest.mark.usefixtures("never_confirmed_window")
def test_idle_database_beside_a_busy_one(db: Database) -> None:
    setup(db)
    busy = create_database(db.server, "busy_")
    try:
        with consumer(db, "s", "p", confirm=False):
            # one change it receives and never confirms (with none at all, psycopg2
            # confirms the keepalive positions by itself), then nothing in its database
            write(db, "INSERT INTO t (v) VALUES ('one')")
            wait_sent(db, "s", current_lsn(db))
            with writer(busy):
                wait_for(busy, "SELECT count(*) > 2000 FROM w")
                write(busy, "INSERT INTO w SELECT repeat('z', 100) FROM generate_series(1, 15000)")
                wait_sent(db, "s", current_lsn(db))
                wait_unconfirmed_window(db)
                wait_changes_counted(db)
                doc = top_json(db, interval="2")
    finally:
        drop_database(db.server, busy.name)
    s = slot_of(doc, "s")
    assert s["cause"]["code"] == "idle_database", (s["cause"], s["trend"])
    assert "pg_logical_emit_message" in s["cause"]["fix"]
    assert s["trend"]["database_change_rate"] == 0


# --------------------------------------------------------------------------- versions


@pytest.mark.majors(12, 13, 15, 18)
def test_once_json_structure_per_major(db: Database) -> None:
    setup(db)
    doc = top_json(db)
    assert doc["server_version"] // 10000 == db.major
    assert set(doc) >= {
        "taken_at",
        "current_lsn",
        "wal_rate_bytes_per_second",
        "slots",
        "pins",
        "transactions",
        "prepared",
        "notes",
        "publication",
    }
    s = slot_of(doc, "s")
    for key in (
        "catalog_xmin",
        "catalog_xmin_age",
        "xmin",
        "lag_seconds",
        "cause",
        "trend",
        "consumer",
        "stats",
        "wal_status",
        "safe_wal_size",
    ):
        assert key in s
    assert isinstance(s["catalog_xmin_age"], int)
    notes = " ".join(doc["notes"])
    assert (s["stats"] is None) == (db.major < 14)
    assert ("pg_stat_replication_slots" in notes) == (db.major < 14)
    assert (s["wal_status"] is None) == (db.major < 13)
    assert ("13+" in notes) == (db.major < 13)
    assert ("inactive_since" in s) == (db.major >= 17)
    if db.major >= 15:
        assert isinstance(s["stats"]["total_txns"], int)
    code, out, _ = run_cli(["slot", "list", "--json", db.dsn])
    listed = orjson.loads(out)[0]
    assert listed["catalog_xmin_age"] is not None and "lag_seconds" in listed


# --------------------------------------------------------------------------- --publication


def test_publication_rates_from_a_temporary_slot_of_its_own(db: Database) -> None:
    setup(db)
    # rows written while the view runs show as rates; the users' slot is left alone
    users_slot = "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 's'"
    before = db.execute(users_slot)

    done = threading.Event()
    result: dict[str, Any] = {}

    def run() -> None:
        result["out"] = run_cli(
            ["top", "--json", "--interval", "3", "--publication", "p", "--once", db.dsn]
        )
        done.set()

    thread = threading.Thread(target=run)
    thread.start()
    # after its first read (the first look of --once), before its second
    wait_for(
        db,
        "SELECT count(*) = 1 FROM pg_stat_activity WHERE state = 'idle'"
        " AND query LIKE '%%pg_logical_slot_get_binary_changes%%'",
    )
    write(db, "INSERT INTO t (v) SELECT 'r' FROM generate_series(1, 300)")
    write(db, "DELETE FROM t WHERE id <= 10")
    thread.join()
    code, out, err = result["out"]
    assert code == 0, err
    doc = orjson.loads(out)
    pub = doc["publication"]
    assert pub["available"] is True
    counts = {(r["table"], r["op"]): r["count"] for r in pub["rates"]}
    assert counts == {("public.t", "insert"): 300, ("public.t", "delete"): 10}
    assert pub["largest_transactions"][0]["changes"] == 300
    assert [s["slot_name"] for s in doc["slots"]] == ["s"]  # its own slot is not shown
    # top's temporary slot goes when its backend has exited, which may be a moment after
    # top itself: only the users' slot is compared
    assert db.execute(users_slot) == before


def test_publication_that_cannot_be_read_says_why_in_one_line(db: Database) -> None:
    setup(db)
    code, out, err = run_cli(
        ["top", "--once", "--json", "--interval", "0.3", "--publication", "nosuch", db.dsn]
    )
    assert code == 0
    assert (
        err
        == f"pgtail: note: no publication 'nosuch' in database '{db.name}': no per-table rates\n"
    )
    doc = orjson.loads(out)
    assert doc["publication"]["available"] is False and doc["slots"]
    db.execute("CREATE ROLE top_plain LOGIN")
    try:
        dsn = db.server.dsn(db.name, user="top_plain")
        code, out, err = run_cli(
            ["top", "--once", "--json", "--interval", "0.3", "--publication", "p", dsn]
        )
        assert code == 0
        assert err.count("\n") == 1 and "no REPLICATION privilege" in err
        assert "REPLICATION" in orjson.loads(out)["publication"]["reason"]
    finally:
        db.execute("DROP ROLE top_plain")


def test_no_free_slot_entry_says_so_and_the_view_runs(db: Database) -> None:
    setup(db)
    limit = int(str(db.execute("SHOW max_replication_slots")[0][0]))
    used = int(str(db.execute("SELECT count(*) FROM pg_replication_slots")[0][0]))
    for i in range(limit - used):
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"fill_{i}",))
    code, out, err = run_cli(
        ["top", "--once", "--json", "--interval", "0.3", "--publication", "p", db.dsn]
    )
    assert code == 0, err
    assert err.count("\n") == 1 and "no free replication slot entry" in err
    doc = orjson.loads(out)
    assert doc["publication"]["available"] is False
    assert len(doc["slots"]) >= limit - used + 1
