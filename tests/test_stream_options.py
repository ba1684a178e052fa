"""`pgtail stream` options that must mean what a user takes them to mean: ``--ops
message`` shows the messages, a float option refuses NaN and infinities, ``--debug``
after the subcommand, a refused first connection."""

from __future__ import annotations

import signal
import subprocess
import sys
from typing import Any

import orjson
import psycopg2
import pytest

from pgtail.lsn import format_lsn
from pgtail.stream import FIRST_CONTACT_WAIT
from tests.helpers import insert_lsn, run_cli, settle


def slot_with_row_1(db: Any) -> None:
    """Table t in publication pub, slot s, and row 1 written after the slot."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute("INSERT INTO t VALUES (1)")


def up_to_now(db: Any) -> list[str]:
    """``stream`` arguments that read slot s / publication pub up to what is written now."""
    settle(db)
    end = format_lsn(insert_lsn(db))
    return ["stream", "--dsn", db.dsn, "--slot", "s", "--publication", "pub", "--end", end]


@pytest.mark.min_major(14)
def test_ops_message_implies_messages(db: Any) -> None:
    """Without --messages the messages were not decoded: nothing shown, exit 0, and the
    slot confirmed past them."""
    slot_with_row_1(db)
    db.execute("SELECT pg_logical_emit_message(true, 'app', 'hello')")
    args = up_to_now(db)
    code, out, err = run_cli([*args, "--ops", "message", "--format", "json"])
    assert code == 0, err
    records = [orjson.loads(line) for line in out.splitlines()]
    assert [(r["op"], r["prefix"], r["content"]) for r in records] == [("message", "app", "hello")]


# --- a first connection that finds no server ---------------------------------------------


def _nowhere() -> str:
    from pgtail.server import free_port

    return f"host=127.0.0.1 port={free_port()} dbname=x user=postgres"


def _stream(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "pgtail", "stream", "--slot", "s", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_refused_first_connection_is_one_short_wait_then_one_error() -> None:
    """A typo'd port retried for about 2.5 minutes, one line per attempt."""
    proc = _stream("--dsn", _nowhere())
    _, err = proc.communicate(timeout=60)
    lines = err.decode().splitlines()
    assert proc.returncode == 1, lines
    assert len(lines) == 2, lines
    assert lines[0].startswith("pgtail: cannot reach PostgreSQL at")
    assert lines[0].endswith(f"trying again for {FIRST_CONTACT_WAIT:g}s")
    assert lines[1].startswith("pgtail: error: cannot reach PostgreSQL at")
    assert "(tried for" in lines[1] and "--reconnect-attempts" in lines[1]


def test_reconnect_attempts_asks_to_wait_for_a_server_not_there_yet() -> None:
    proc = _stream("--dsn", _nowhere(), "--reconnect-attempts", "2", "--reconnect-max-delay", "0.1")
    _, err = proc.communicate(timeout=60)
    lines = err.decode().splitlines()
    assert proc.returncode == 1, lines
    assert [line.split("(attempt ")[-1] for line in lines[:2]] == ["1)", "2)"], lines
    assert "gave up after 2 attempts" in lines[2], lines


def test_ctrl_c_before_anything_was_confirmed_says_so() -> None:
    proc = _stream("--dsn", _nowhere(), "--reconnect-attempts", "50")
    assert proc.stderr is not None
    first = proc.stderr.readline().decode()
    assert "retrying in" in first, first  # waiting for the server now
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130
    said = rest.decode()
    assert "pgtail: stopped; nothing was confirmed" in said, said
    assert "0/0" not in said


def test_a_server_that_answers_is_not_unreachable() -> None:
    """Starting up or shutting down is worth the whole backoff; nothing listening is
    `ServerUnreachable` (a short wait at first contact)."""
    from pgtail.catalog import translate_connect_error
    from pgtail.errors import ServerUnavailable, ServerUnreachable

    dsn = "host=127.0.0.1 port=5 dbname=x"
    starting = translate_connect_error(
        psycopg2.OperationalError(
            'connection to server at "127.0.0.1", port 5 failed: FATAL:  the database system'
            " is starting up"
        ),
        dsn,
    )
    assert isinstance(starting, ServerUnavailable) and not isinstance(starting, ServerUnreachable)
    refused = translate_connect_error(
        psycopg2.OperationalError(
            'connection to server at "127.0.0.1", port 5 failed: Connection refused'
        ),
        dsn,
    )
    assert isinstance(refused, ServerUnreachable)


def test_start_before_the_slots_position_is_said(db: Any) -> None:
    """The server starts at the slot's confirmed position: --start before it was
    silently ignored."""
    slot_with_row_1(db)
    args = up_to_now(db)
    code, out, err = run_cli([*args, "--format", "json"])
    assert code == 0 and len(out.splitlines()) == 1, err
    assert "--start" not in err
    db.execute("INSERT INTO t VALUES (2)")
    args = up_to_now(db)
    code, out, err = run_cli([*args, "--format", "json", "--start", "0/1"])
    assert code == 0, err
    assert [orjson.loads(line)["new"]["id"] for line in out.splitlines()] == [2]
    assert "pgtail: --start 0/1 is before slot 's'" in err, err
    assert "streaming from there" in err
