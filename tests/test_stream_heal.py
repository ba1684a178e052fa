"""What heals and what does not: the stream retries a server or connection that is away
for now (a restart, a crash, a server not started yet) and ends the run at once, with
one line, on a condition that will not heal (a dropped slot or publication, a revoked
REPLICATION attribute, a wrong password, a missing database). After a crash-restart the
slot's position on disk is older than what was confirmed: one run still writes each
transaction once. Lost connections are told in PostgreSQL's terms.

Every stream runs through the CLI (``python -m pgtail``) against real servers.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import orjson
import psycopg2
import pytest

from pgtail.catalog import describe_disconnect, is_transient, translate_connect_error
from pgtail.errors import ConnectionFailed, ServerUnavailable
from pgtail.server import LocalServer, start_server
from tests.helpers import (
    Database,
    JsonLines,
    RawLines,
    Stderr,
    allow_password_role,
    confirmed,
    create_database,
    insert_lsn,
    kill_if_running,
    pgtail_stream,
    run_stream,
    wait_active,
    wait_inactive,
)

PY = sys.executable
# psycopg2's and libpq's own words for a lost connection, never shown to users
INTERNAL_WORDING = (b"PGRES_", b"no COPY in progress", b"libpq")


def setup(db: Database) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")


def stream(dsn: str, *extra: str) -> subprocess.Popen[bytes]:
    return pgtail_stream(
        dsn, "--slot", "s", "--publication", "pub", "--format", "json",
        "--status-interval", "1", "--reconnect-max-delay", "1", *extra,
    )  # fmt: skip


def ended(proc: subprocess.Popen[bytes], within: float) -> tuple[int, list[str]]:
    """Wait at most ``within`` seconds for pgtail to exit; its code and stderr lines."""
    try:
        _, err = proc.communicate(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"pgtail still ran after {within}s: {err.decode()}") from None
    return proc.returncode, err.decode().strip().splitlines()


def failed_with_one_line(proc: subprocess.Popen[bytes]) -> list[str]:
    """pgtail's stderr lines, once it has exited (within 30 s) with code 1 and one line."""
    code, lines = ended(proc, within=30)
    assert code == 1
    assert len(lines) == 1, lines
    return lines


def stream_row_1(db: Database) -> tuple[subprocess.Popen[bytes], JsonLines]:
    """Table t, publication pub and slot s (:func:`setup`), and a stream of them that has
    written row 1 (killed if it does not)."""
    setup(db)
    proc = stream(db.dsn)
    try:
        lines = JsonLines(proc)
        wait_active(db)
        db.execute("INSERT INTO t VALUES (1, 'a')")
        lines.wait_for(1)
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    return proc, lines


@pytest.fixture
def streaming_db(db: Database) -> Iterator[tuple[Database, subprocess.Popen[bytes], JsonLines]]:
    """A stream of slot ``s`` / publication ``pub`` that has written row 1."""
    proc, lines = stream_row_1(db)
    try:
        yield db, proc, lines
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


# --------------------------------------------------------------- what will not heal


def test_slot_dropped_while_streaming_ends_the_run_at_once(
    streaming_db: tuple[Database, subprocess.Popen[bytes], JsonLines],
) -> None:
    db, proc, _ = streaming_db
    dropped = subprocess.run(
        [PY, "-m", "pgtail", "slot", "drop", "s", "--dsn", db.dsn, "--force"],
        capture_output=True,
        check=False,
    )
    assert dropped.returncode == 0, dropped.stderr
    lines = failed_with_one_line(proc)
    assert lines[0].startswith("pgtail: error: replication slot 's' was dropped"), lines


def test_publication_dropped_while_streaming_ends_the_run(
    streaming_db: tuple[Database, subprocess.Popen[bytes], JsonLines],
) -> None:
    db, proc, _ = streaming_db
    db.execute("DROP PUBLICATION pub")
    # the walsender is ended (as a restart would): the facts checked before reconnecting
    # find the publication gone
    db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots")
    lines = failed_with_one_line(proc)
    assert "publication 'pub' was dropped" in lines[0], lines


def test_publication_dropped_while_decoding_ends_the_run(
    streaming_db: tuple[Database, subprocess.Popen[bytes], JsonLines],
) -> None:
    db, proc, _ = streaming_db
    if db.major >= 18:
        pytest.skip("18's pgoutput skips a missing publication with a warning")
    db.execute("DROP PUBLICATION pub")
    db.execute("INSERT INTO t VALUES (2, 'b')")
    lines = failed_with_one_line(proc)
    assert 'publication "pub" does not exist (dropped while' in lines[0], lines
    assert "pgtail slot advance s LSN" in lines[0], lines  # not "create it again and rerun"


def test_publication_dropped_and_made_again_what_the_error_advises_works(db: Database) -> None:
    """Before 18, creating the publication again is not enough (the slot decodes with
    the catalog as it was); what the error advises instead does work."""
    if db.major >= 18:
        pytest.skip("18's pgoutput skips a missing publication with a warning")
    from tests.helpers import run_cli, write

    setup(db)
    db.execute("CREATE PUBLICATION other FOR TABLE t")
    write(db, "INSERT INTO t VALUES (1, 'a')")
    db.execute("DROP PUBLICATION pub")
    write(db, "INSERT INTO t VALUES (2, 'b')")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    write(db, "INSERT INTO t VALUES (3, 'c')")
    args = ["stream", "--slot", "s", "--idle-exit", "1", "--format", "json", "--dsn", db.dsn]
    code, _, err = run_cli([*args, "--publication", "pub"])
    assert code == 1 and "dropped while pgtail was streaming it" in err, err
    code, _, again = run_cli([*args, "--publication", "pub"])  # made again: the same error
    assert code == 1 and "dropped while pgtail was streaming it" in again, again
    assert "--publication naming one that existed before the drop" in err
    # the advice: one that existed before the drop reads on
    code, out, err = run_cli([*args, "--publication", "other"])
    assert code == 0, err
    assert [orjson.loads(x)["new"]["id"] for x in out.splitlines()] == [1, 2, 3]
    # or: the slot moved past the re-creation, then pub is read again
    db.execute("DROP PUBLICATION other")
    write(db, "INSERT INTO t VALUES (4, 'd')")
    wait_inactive(db)  # the last run's walsender may not have let go of it yet
    db.execute("SELECT pg_drop_replication_slot('s')")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute("DROP PUBLICATION pub")
    write(db, "INSERT INTO t VALUES (5, 'e')")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    now = str(db.execute("SELECT pg_current_wal_lsn()::text")[0][0])
    code, _, err = run_cli(["slot", "advance", "s", now, "--dsn", db.dsn])
    assert code == 0, err
    write(db, "INSERT INTO t VALUES (6, 'f')")
    code, out, err = run_cli([*args, "--publication", "pub"])
    assert code == 0, err
    assert [orjson.loads(x)["new"]["id"] for x in out.splitlines()] == [6]


def test_replication_revoked_ends_the_run(db: Database) -> None:
    setup(db)
    role = f"r_{db.name}"
    db.execute(f'CREATE ROLE "{role}" LOGIN REPLICATION')
    try:
        proc = stream(db.server.dsn(db.name, user=role))
        try:
            lines = JsonLines(proc)
            wait_active(db)
            db.execute("INSERT INTO t VALUES (1, 'a')")
            lines.wait_for(1)
            db.execute(f'ALTER ROLE "{role}" NOREPLICATION')
            db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots")
            code, err = ended(proc, within=30)
        finally:
            kill_if_running(proc)
        assert code == 1
        assert len(err) == 1, err
        assert "lacks the REPLICATION attribute" in err[0], err
    finally:
        db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,)
        )
        time.sleep(0.2)
        db.execute(f'DROP ROLE "{role}"')


# --------------------------------------------------------------- a server of its own


@pytest.fixture
def own_server(pg: LocalServer) -> Iterator[LocalServer]:
    """A server of this test's own (stopping and crashing it disturbs no other test),
    with database ``heal`` and a password-protected role ``pw``."""
    server = start_server(pg.bindir, settings=dict(pg.settings))
    try:
        create_database(server, name="heal")
        allow_password_role(server, "SUPERUSER")
        yield server
    finally:
        server.destroy()


def test_started_before_the_server_retries_then_streams(own_server: LocalServer) -> None:
    db = Database(own_server, "heal")
    setup(db)
    own_server.stop()
    # asked to wait for a server that was never reached (else: a few seconds only)
    proc = stream(db.dsn, "--idle-exit", "20", "--reconnect-attempts", "30")
    try:
        lines, stderr = JsonLines(proc), Stderr(proc)
        stderr.wait_for("retrying in")  # an attempt against a server that is not there
        time.sleep(1)  # and another
        assert proc.poll() is None, "pgtail gave up on a server that is starting"
        own_server.start()
        db.execute("INSERT INTO t VALUES (1, 'a')")
        lines.wait_for(1)
        proc.send_signal(2)
        code = proc.wait(timeout=30)
        err = stderr.text().strip().splitlines()
    finally:
        kill_if_running(proc)
    assert code == 130, err
    assert lines.ids() == [1]
    retries = [line for line in err if "retrying in" in line]
    assert retries and all("(attempt " in line for line in retries), err
    assert retries[0].startswith("pgtail: cannot reach PostgreSQL at"), err


def test_wrong_password_and_missing_database_fail_at_once(own_server: LocalServer) -> None:
    for dsn, expected in (
        (own_server.dsn("heal", user="pw", password="wrong-secret"), "authentication failed"),
        (own_server.dsn("no_such_db"), 'database "no_such_db" does not exist'),
        (own_server.dsn("heal", user="no_such_role"), 'role "no_such_role" does not exist'),
    ):
        started = time.monotonic()
        proc = run_stream(dsn, "--slot", "s", "--publication", "pub", timeout=60)
        assert proc.returncode == 1
        lines = proc.stderr.decode().strip().splitlines()
        assert len(lines) == 1, lines
        assert expected in lines[0]
        assert "wrong-secret" not in lines[0]
        assert time.monotonic() - started < 10


def crash_once(
    db: Database, server: LocalServer, fmt: str, m: int
) -> tuple[int, list[str], list[bytes]] | None:
    """One crash while pgtail streams (see below): its exit code, stderr and output lines,
    or None when the crash did not rewind the slot, so that nothing would be tested."""
    proc = stream(db.dsn, *(["--messages"] * m), "--format", fmt)
    try:
        out = RawLines(proc)
        wait_active(db)
        db.execute("CHECKPOINT")  # the slot's position on disk: before every row below
        for i in range(200):
            db.execute("INSERT INTO t VALUES (%s, 'before')", (i,))
        if m:  # a non-transactional message among them: it too is written once
            db.execute("SELECT pg_logical_emit_message(false, 'p', 'x')")
        end = insert_lsn(db)
        out.wait_for(200 + m if fmt == "json" else 601 + m)  # raw: Begin, Insert, Commit each
        deadline = time.time() + 30
        while confirmed(db) < end and time.time() < deadline:
            time.sleep(0.05)
        assert confirmed(db) >= end  # confirmed in memory; on disk, the checkpoint's
        server.restart("immediate")
        if confirmed(db) >= end:
            # the slot reached disk after all: the walsender saves it when a running-xacts
            # record (every 15 s while WAL is written) moves its restart position
            return None
        for i in range(200, 300):
            db.execute("INSERT INTO t VALUES (%s, 'after')", (i,))
        out.wait_for(300 + m if fmt == "json" else 901 + m, timeout=90)
        time.sleep(1.5)  # anything sent twice would arrive by now
        proc.send_signal(2)
        code, err = ended(proc, within=30)
    finally:
        kill_if_running(proc)
    return code, err, out.lines()


@pytest.mark.parametrize("fmt", ["json", "raw"])
def test_crash_restart_writes_each_transaction_once(own_server: LocalServer, fmt: str) -> None:
    """kill -9 of the server (``pg_ctl stop -m immediate``) rewinds the slot to the
    position of the last checkpoint: the server sends again what this run wrote."""
    db = Database(own_server, "heal")
    m = 1 if own_server.major >= 14 else 0  # logical decoding messages: pgoutput 14+
    for _ in range(3):  # a loaded machine can save the slot before the crash: again
        setup(db)
        crashed = crash_once(db, own_server, fmt, m)
        if crashed is not None:
            break
        wait_inactive(db)
        db.execute("SELECT pg_drop_replication_slot('s')")
        db.execute("DROP PUBLICATION pub; DROP TABLE t")
    assert crashed is not None, "the crash never rewound the slot: nothing is tested"
    code, err, lines = crashed
    assert code == 130, err
    if fmt == "json":
        rows = [orjson.loads(line) for line in lines]
        assert [r["new"]["id"] for r in rows if "new" in r] == list(range(300)), "once each"
        assert sum(1 for r in rows if "new" not in r) == m, "the message once"
    else:
        assert sum(1 for line in lines if b" Insert " in line) == 300, "every row once"
        assert sum(1 for line in lines if b" Commit " in line) == 300
        assert sum(1 for line in lines if b"transactional=false" in line) == m
    assert "reconnected" in "\n".join(err)
    assert not any(word.decode() in line for line in err for word in INTERNAL_WORDING), err
    assert any("the server closed the replication connection" in line for line in err), err


def test_restart_and_terminate_are_told_in_postgresql_terms(own_server: LocalServer) -> None:
    db = Database(own_server, "heal")
    proc, lines = stream_row_1(db)
    try:
        db.execute("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots")
        wait_active(db)
        db.execute("INSERT INTO t VALUES (2, 'b')")
        lines.wait_for(2)
        own_server.restart("fast")
        wait_active(db)
        db.execute("INSERT INTO t VALUES (3, 'c')")
        lines.wait_for(3)
        proc.send_signal(15)
        code, err = ended(proc, within=30)
    finally:
        kill_if_running(proc)
    assert code == 143, err
    assert lines.ids() == [1, 2, 3]
    text = "\n".join(err)
    assert "replication connection lost (terminated by administrator command" in text, err
    assert text.count("reconnected") == 2, err
    assert not any(word.decode() in text for word in INTERNAL_WORDING), err


# --------------------------------------------------------------- the translation


class FakeError(psycopg2.OperationalError):
    """A psycopg2 error as libpq reports it (no SQLSTATE) or the server does."""

    def __init__(self, text: str, code: str | None = None) -> None:
        super().__init__(text)
        self._code = code

    @property
    def pgcode(self) -> str | None:  # type: ignore[override]
        return self._code


@pytest.mark.parametrize(
    ("text", "code", "transient"),
    [
        ("FATAL:  the database system is starting up", None, True),
        ("FATAL:  the database system is not yet accepting connections", None, True),
        ("FATAL:  the database system is shutting down", None, True),
        ("FATAL:  the database system is in recovery mode", None, True),
        ("FATAL:  sorry, too many clients already", None, True),
        ("terminating connection due to administrator command", "57P01", True),
        ("the database system is starting up", "57P03", True),
        ('replication slot "s" does not exist', "42704", False),
        ('publication "p" does not exist', "42704", False),
        ("permission denied to start WAL sender", "42501", False),
        ('password authentication failed for user "pw"', "28P01", False),
        ('database "x" does not exist', "3D000", False),
        ("requested WAL segment 000000010000000000000001 has already been removed", "58P01", False),
        ('can no longer get changes from replication slot "s"', "55000", False),
    ],
)
def test_transient_or_not(text: str, code: str | None, transient: bool) -> None:
    assert is_transient(FakeError(text, code)) is transient


@pytest.mark.parametrize(
    ("text", "code", "told"),
    [
        (
            "error with status PGRES_COPY_BOTH and no message from the libpq",
            None,
            "the server closed the replication connection",
        ),
        ("no COPY in progress", None, "the server ended the replication stream"),
        (
            "server closed the connection unexpectedly\n\tThis probably means ...",
            None,
            "the server closed the replication connection",
        ),
        ("terminating connection due to administrator command", "57P01", "administrator command"),
        (
            "terminating connection because of crash of another server process",
            "57P02",
            "the server is restarting after a crash",
        ),
    ],
)
def test_lost_connections_in_postgresql_terms(text: str, code: str | None, told: str) -> None:
    said = describe_disconnect(FakeError(text, code))
    assert told in said
    assert "PGRES" not in said and "COPY" not in said


def test_connect_errors_that_heal_are_server_unavailable() -> None:
    starting = translate_connect_error(
        FakeError(
            'connection to server at "127.0.0.1", port 5 failed: FATAL:  the database system'
            " is starting up"
        ),
        "host=127.0.0.1 port=5 dbname=x",
    )
    assert isinstance(starting, ServerUnavailable)
    assert "the database system is starting up" in starting.message
    refused = translate_connect_error(
        FakeError('connection to server at "127.0.0.1", port 5 failed: Connection refused'),
        "host=127.0.0.1 port=5 dbname=x",
    )
    assert isinstance(refused, ServerUnavailable)
    for final in (
        'connection to server at "127.0.0.1", port 5 failed: FATAL:  password authentication'
        ' failed for user "pw"',
        'connection to server at "127.0.0.1", port 5 failed: FATAL:  database "x" does not exist',
        'could not translate host name "nosuchhost" to address: Name or service not known',
    ):
        error = translate_connect_error(FakeError(final), "host=127.0.0.1 port=5 dbname=x")
        assert isinstance(error, ConnectionFailed) and not isinstance(error, ServerUnavailable)
