"""Limits of the pgoutput protocol that pgtail cannot see past, pinned so that a change
(in PostgreSQL or in pgtail) is noticed; the README's "Limits of the protocol" describes
them. Through the real CLI."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.helpers import run_stream, write


def stream(dsn: str, *args: str) -> list[dict[str, Any]]:
    run = run_stream(dsn, "--idle-exit", "1", *args, timeout=60)
    assert run.returncode == 0, run.stderr
    return [orjson.loads(line) for line in run.stdout.splitlines()]


@pytest.mark.min_major(14)
def test_message_in_a_rolled_back_savepoint_is_shown_when_streaming(db: Any) -> None:
    """pgoutput tags a streamed transactional message with the top-level xid, not its
    subtransaction's, so the subtransaction's abort cannot take it back; without
    streaming the server drops it with the subtransaction."""
    db.execute("CREATE TABLE big (id int, pad text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE big")
    for slot in ("on", "parallel", "off"):
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    # past logical_decoding_work_mem (64kB on the test servers) inside the savepoint, so
    # the transaction is streamed before the savepoint is rolled back
    write(
        db,
        "BEGIN; SAVEPOINT s; SELECT pg_logical_emit_message(true, 'p', 'rolled back');"
        " INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g;"
        " ROLLBACK TO SAVEPOINT s; INSERT INTO big VALUES (-1, 'kept'); COMMIT",
    )
    common = ("--publication", "pub", "--messages")
    for mode in ("on", "parallel") if db.major >= 16 else ("on",):
        streamed = stream(db.dsn, "--slot", mode, "--streaming", mode, *common)
        assert [(r["op"], r.get("content"), (r.get("new") or {}).get("id")) for r in streamed] == [
            ("message", "rolled back", None),
            ("insert", None, -1),
        ], mode
        assert streamed[0]["xid"] == streamed[1]["xid"]  # the top-level transaction's
    plain = stream(db.dsn, "--slot", "off", *common)
    assert [(r["op"], r["new"]["id"]) for r in plain] == [("insert", -1)]


def dropped_types(db: Any) -> None:
    """A domain and an enum (and an array of it) whose values are in the slot's WAL, but
    which are dropped before pgtail decodes them; and the same values while they exist."""
    db.execute("CREATE DOMAIN posint AS int CHECK (VALUE > 0)")
    db.execute("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    db.execute("CREATE TABLE typed (id int PRIMARY KEY, d posint, m mood, ms mood[])")
    db.execute("CREATE PUBLICATION pub FOR TABLE typed")
    for slot in ("s", "before"):
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    write(db, "INSERT INTO typed VALUES (1, 42, 'happy', '{sad,happy}')")


def test_types_dropped_before_decoding_arrive_as_text(db: Any) -> None:
    dropped_types(db)
    # while the types exist: a domain is its base type's value, an enum array an array
    (before,) = stream(db.dsn, "--slot", "before", "--publication", "pub")
    assert before["new"] == {"id": 1, "d": 42, "m": "happy", "ms": ["sad", "happy"]}
    db.execute("ALTER TABLE typed DROP COLUMN d, DROP COLUMN m, DROP COLUMN ms")
    db.execute("DROP DOMAIN posint")
    db.execute("DROP TYPE mood")
    (after,) = stream(db.dsn, "--slot", "s", "--publication", "pub")
    assert after["new"] == {"id": 1, "d": "42", "m": "happy", "ms": "{sad,happy}"}


@pytest.mark.min_major(14)
def test_types_dropped_before_decoding_arrive_as_hex_with_binary(db: Any) -> None:
    dropped_types(db)
    db.execute("ALTER TABLE typed DROP COLUMN d, DROP COLUMN m, DROP COLUMN ms")
    db.execute("DROP DOMAIN posint")
    db.execute("DROP TYPE mood")
    (after,) = stream(db.dsn, "--slot", "s", "--publication", "pub", "--binary")
    new = after["new"]
    assert new["id"] == 1
    assert new["d"] == "\\x0000002a"  # int4 42, big-endian
    assert new["m"] == "\\x" + b"happy".hex()
    assert new["ms"].startswith("\\x00000001")  # an array header: one dimension
