"""`pgtail top`, `slot info`, `slot list` and the doctor in a slot's passing states,
against real servers: a slot blocked in its creation by an open transaction, a consumer
that receives and never confirms at a low write rate, a role without pg_monitor, a slot
without consumer on 13 and 17+; and the layout at 80 and 120 columns through a pty."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import psycopg2
import psycopg2.extras
import pytest

from pgtail.doctor import slot_causes
from tests.helpers import Database, run_cli, wait_for, write

MB = 1024 * 1024

# a consumer on the replication protocol that receives every message and never confirms
# one (psycopg2 still sends its status replies, with no flush position)
CONSUMER = """
import sys, psycopg2, psycopg2.extras
dsn, slot, publication = sys.argv[1:4]
conn = psycopg2.connect(dsn, application_name="lazy_consumer",
                        connection_factory=psycopg2.extras.LogicalReplicationConnection)
cur = conn.cursor()
cur.start_replication(slot_name=slot, decode=False,
                      options={"proto_version": "1", "publication_names": publication})
cur.consume_stream(lambda msg: None)
"""


def setup(db: Database, slot: str = "s") -> None:
    db.execute("CREATE TABLE t (id serial PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION p FOR TABLE t")
    if slot:
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def cli_json(*args: str) -> Any:
    code, out, err = run_cli(list(args))
    assert code == 0, err
    return orjson.loads(out)


def top_json(dsn: str) -> dict[str, Any]:
    code, out, err = run_cli(["top", "--once", "--json", "--interval", "0.3", dsn])
    assert code == 0, err
    return dict(orjson.loads(out))


def slot_of(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(s for s in doc["slots"] if s["slot_name"] == name)


def activity(db: Database, slot: str, dsn: str | None = None) -> dict[str, Any]:
    report = cli_json("doctor", "--json", dsn or db.dsn)
    return next(c for c in report["checks"] if c["id"] == "slot.activity" and c["subject"] == slot)


class Transaction:
    """A transaction that has written (an xid), open until `end` or the block's end."""

    def __init__(self, db: Database) -> None:
        self.conn = psycopg2.connect(db.dsn, application_name="forgotten")
        with self.conn.cursor() as cur:
            cur.execute("INSERT INTO t (v) VALUES ('held') RETURNING txid_current()")
            row = cur.fetchone()
        assert row is not None
        self.pid = self.conn.get_backend_pid()
        self.xid = int(row[0])

    def end(self) -> None:
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()


@contextmanager
def open_transaction(db: Database) -> Iterator[Transaction]:
    tx = Transaction(db)
    try:
        yield tx
    finally:
        tx.end()


@contextmanager
def creating(db: Database, name: str, protocol: bool, blocker: Transaction) -> Iterator[None]:
    """A slot being created in a thread (pg_create_logical_replication_slot, or
    CREATE_REPLICATION_SLOT on a replication connection) while ``blocker`` is open; at the
    block's end the blocker ends and the creation finishes."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            if protocol:
                conn = psycopg2.connect(
                    db.dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection
                )
                conn.cursor().create_replication_slot(name, output_plugin="pgoutput")
            else:
                conn = db.connect()
                conn.cursor().execute(
                    "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,)
                )
            conn.close()
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        wait_for(
            db,
            "SELECT count(*) > 0 FROM pg_locks l JOIN pg_replication_slots s"
            " ON s.active_pid = l.pid WHERE s.slot_name = %s AND NOT l.granted",
            (name,),
        )
        yield
    finally:
        blocker.end()
        thread.join(timeout=120)
        assert not failures, failures


@contextmanager
def lazy_consumer(db: Database, slot: str = "s") -> Iterator[None]:
    proc = subprocess.Popen([sys.executable, "-c", CONSUMER, db.dsn, slot, "p"])
    try:
        wait_for(db, "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        yield
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def slow_writer(db: Database) -> Iterator[None]:
    """A few kB of rows a second into t until the block ends."""
    stop = threading.Event()

    def run() -> None:
        conn = db.connect()
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute("INSERT INTO t (v) SELECT repeat('w', 200) FROM generate_series(1, 5)")
                stop.wait(0.5)
        conn.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# --------------------------------------------------------------------------- states


@pytest.mark.parametrize("protocol", [False, True], ids=["sql", "protocol"])
def test_slot_blocked_in_creation_names_what_it_waits_for(db: Database, protocol: bool) -> None:
    setup(db)
    with open_transaction(db) as tx, creating(db, "c", protocol, tx):
        pid, xid = tx.pid, tx.xid
        doc = top_json(db.dsn)
        info = cli_json("slot", "info", "c", "--json", db.dsn)
        listed = next(
            s for s in cli_json("slot", "list", "--json", db.dsn) if s["slot_name"] == "c"
        )
        check = activity(db, "c")
        code, text, _ = run_cli(["slot", "info", "c", db.dsn])
    c = slot_of(doc, "c")
    assert c["confirmed_flush_lsn"] is None and c["lag_bytes"] is None
    assert c["lag_seconds"] is None  # a null position is never a number
    for cause in (c["cause"], info["cause"], listed["cause"]):
        assert cause["code"] == "creating" and cause["status"] == "warn", cause
        assert f"PID {pid} (forgotten)" in cause["summary"] and f"xid {xid}" in cause["summary"]
        assert "behind" not in cause["summary"] and "not confirming" not in cause["summary"]
        assert f"pg_terminate_backend({pid})" in cause["fix"]

    def aged(text: str) -> str:
        return re.sub(r"open \d+ s", "open N s", text)

    assert check["status"] == "warn" and aged(check["summary"]) == aged(c["cause"]["summary"])
    # the slot beside it is told apart: no consumer, never "behind what was sent"
    assert slot_of(doc, "s")["cause"]["code"] == "no_consumer"
    assert code == 0 and f"PID {pid}" in text
    assert db.execute(
        "SELECT confirmed_flush_lsn IS NOT NULL FROM pg_replication_slots WHERE slot_name = 'c'"
    ) == [(True,)]  # created once the blocker ended


def test_consumer_that_never_confirms_at_a_low_write_rate(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    # decided over a 5 s window, not pgtail's 20 s (the same rule; the test waits less; the
    # consumer never confirms, so no reply of psycopg2's can fall inside the window):
    # `top`, `slot info` and the doctor run in this process, and see it
    monkeypatch.setattr(slot_causes, "CONFIRM_WINDOW", 5.0)
    setup(db)
    with lazy_consumer(db), slow_writer(db):
        info = cli_json("slot", "info", "s", "--json", db.dsn)
        # just connected: one look cannot call it stuck yet
        assert info["cause"]["code"] == "ok", info["cause"]
        wait_for(
            db,
            "SELECT clock_timestamp() - backend_start > %s * interval '1 s'"
            " FROM pg_stat_replication WHERE application_name = 'lazy_consumer'",
            (slot_causes.CONFIRM_WINDOW + 1,),
        )
        doc = top_json(db.dsn)
        info = cli_json("slot", "info", "s", "--json", db.dsn)
        check = activity(db, "s")
    s = slot_of(doc, "s")
    for cause in (s["cause"], info["cause"]):
        assert cause["code"] == "not_confirming" and cause["status"] == "warn", cause
        assert "lazy_consumer" in cause["summary"]
    assert s["lag_bytes"] < MB  # decided by time, not by bytes
    assert check["status"] == "warn" and "not confirming" in check["summary"]
    assert "keeping up" not in check["summary"]


def test_role_without_pg_monitor_is_told_what_is_hidden(db: Database) -> None:
    setup(db)
    role = "top_nomon_" + db.name[-8:]
    db.execute(f"CREATE ROLE {role} LOGIN")
    dsn = db.server.dsn(db.name, user=role)
    try:
        with lazy_consumer(db), open_transaction(db):
            write(db, "INSERT INTO t (v) SELECT repeat('x', 100) FROM generate_series(1, 20000)")
            doc = top_json(dsn)
            code, out, err = run_cli(["slot", "info", "s", dsn])
            db.execute(f"GRANT pg_monitor TO {role}")
            seen = top_json(dsn)
    finally:
        db.execute(f"DROP ROLE {role}")
    s = slot_of(doc, "s")
    assert s["cause"]["code"] == "hidden" and s["cause"]["status"] == "info"
    assert "not confirming" not in s["cause"]["summary"] and "behind" not in s["cause"]["summary"]
    assert s["cause"]["fix"] == f"GRANT pg_monitor TO {role};"
    assert s["consumer"]["hidden"] is True and s["lag_seconds"] is None
    notes = [n for n in doc["notes"] if "pg_monitor" in n]
    assert len(notes) == 1 and f"GRANT pg_monitor TO {role};" in notes[0]
    assert doc["transactions"] == []  # hidden, and said so
    assert code == 0 and "pg_monitor" in err and "hidden" in out
    s = slot_of(seen, "s")
    assert s["cause"]["code"] != "hidden" and s["consumer"]["hidden"] is False
    assert not [n for n in seen["notes"] if "pg_monitor" in n] and seen["transactions"]


@pytest.mark.majors(13, 17, 18)
def test_slot_without_consumer_lag_time_only_from_facts(db: Database) -> None:
    setup(db)
    write(db, "INSERT INTO t (v) SELECT repeat('x', 100) FROM generate_series(1, 3000)")
    doc = top_json(db.dsn)
    s = slot_of(doc, "s")
    assert s["cause"]["code"] == "no_consumer" and s["lag_bytes"] > 0
    listed = cli_json("slot", "list", "--json", db.dsn)[0]
    code, text, err = run_cli(["slot", "list", db.dsn])
    assert code == 0
    if db.major >= 17:  # inactive_since: a lower bound, marked as such
        assert s["inactive_since"] is not None and s["lag_seconds_at_least"] is True
        assert s["lag_seconds"] >= 0 and listed["lag_seconds"] is not None
        assert "> " in text
        assert "since " in s["cause"]["summary"]
    else:  # nothing observed tells how long: no number
        assert s["lag_seconds"] is None and listed["lag_seconds"] is None
        assert "PostgreSQL 17+" in s["cause"]["summary"]
    assert "~" not in text
    code, out, err = run_cli(["slot", "info", "s", db.dsn])
    two_phase = re.search(r"\n  two_phase +(\S+)", out)
    assert two_phase is not None
    if db.major < 14:
        assert two_phase.group(1) == "-" and "two_phase" in err and "14+" in err
    else:
        assert two_phase.group(1) == "no" and "two_phase" not in err


# --------------------------------------------------------------------------- layout (pty)

ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")


def run_pty(
    args: list[str], columns: int, lines: int, until: str | None = None, timeout: float = 60
) -> str:
    """``pgtail ARGS`` on a terminal of that size; with ``until``, q is pressed once that
    text shows. The output, escapes stripped; for a full-screen view, the last screen."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its terminal is the pty
        fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        os.execve(sys.executable, [sys.executable, "-m", "pgtail", *args], env)
    raw = b""
    deadline = time.monotonic() + timeout
    pressed = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                raw += chunk
            if (
                until is not None
                and not pressed
                and until in ANSI.sub("", raw.decode(errors="replace"))
            ):
                os.write(fd, b"q")
                pressed = True
        else:
            os.kill(pid, signal.SIGKILL)
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    text = raw.decode(errors="replace")
    if until is not None:  # the last full screen drawn
        text = text.rsplit("\x1b[H", 1)[-1]
    return ANSI.sub("", text).replace("\r", "")


def many_slots(db: Database, count: int = 9) -> list[str]:
    names = [f"orders_to_warehouse_sync_{i:02d}_slot" for i in range(count)]  # 33 chars
    for name in names:
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))
    write(db, "INSERT INTO t (v) SELECT repeat('x', 100) FROM generate_series(1, 30000)")
    return names


@pytest.mark.parametrize("columns", [80, 120])
def test_layout_through_a_pty(db: Database, columns: int) -> None:
    setup(db, slot="")
    names = many_slots(db)
    # --once: everything, no key hint, wrapped lines keep their indent
    once = run_pty(["top", "--once", "--interval", "0.3", db.dsn], columns, 30)
    rows = once.splitlines()
    assert "q quits" not in once and "pgtail top" in once
    assert max(len(r) for r in rows) <= columns
    assert all(name in once for name in names)  # names whole while lesser columns give way
    assert any(r.startswith(names[0] + ": ") for r in rows)
    fixes = [i for i, r in enumerate(rows) if r.startswith("  fix: ")]
    assert len(fixes) == len(names)
    for i in fixes:  # a wrapped fix goes on under itself
        after = rows[i + 1] if i + 1 < len(rows) else ""
        assert not after.startswith(" ") or after.startswith(" " * 7), after
    assert any(rows[i + 1].startswith(" " * 7) for i in fixes if i + 1 < len(rows))
    # live at 30 lines: cut, and the last line says so
    live = run_pty(["top", "--interval", "0.5", db.dsn], columns, 30, until="below: resize")
    screen = [r for r in live.splitlines()]
    assert len([r for r in screen if r.strip()]) <= 30
    assert max(len(r) for r in screen) <= columns
    assert "q quits" in live
    marker = next(r for r in screen if "below: resize" in r)
    assert re.search(r"(\d+ more slots?|the causes? of \d+ (more )?slots?)", marker), marker
    # slot list: the 33-character names whole at 80 columns
    listing = run_pty(["slot", "list", db.dsn], columns, 30)
    assert all(name in listing for name in names), listing
    assert max(len(r) for r in listing.splitlines()) <= columns
    # slot info wraps its cause and fix under themselves, no escaped newline
    info = run_pty(["slot", "info", names[0], db.dsn], columns, 30)
    assert "\\u000a" not in info
    lines = [r for r in info.splitlines() if r.strip() and not r.startswith("note: ")]
    assert max(len(r) for r in lines) <= columns
    at = next(i for i, r in enumerate(lines) if r.startswith("  fix "))
    value = len(lines[at]) - len(lines[at][6:].lstrip())  # where the values start
    wrapped = lines[at + 1 :]  # the fix is the last field
    assert wrapped and all(r.startswith(" " * value) and r[value] != " " for r in wrapped)
    assert "pg_drop_replication_slot" in "".join(r.strip() for r in lines[at:])
