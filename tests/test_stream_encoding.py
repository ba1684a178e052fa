"""A database whose encoding is not UTF-8: names and values arrive as UTF-8 everywhere.

The server converts pgoutput's names and text values into the client's encoding, and
libpq's default client_encoding is the database's; pgtail asks for UTF-8 on every
connection (replication and ordinary), whatever the user's PGCLIENTENCODING says."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import orjson
import psycopg2
import pytest

from pgtail.lsn import parse_lsn
from pgtail.server import LocalServer
from tests.helpers import Database, confirmed, drop_database, run_cli, settle, wait_inactive

VALUE = "crème brûlée"


@pytest.fixture
def latin1(pg: LocalServer) -> Iterator[Database]:
    name = "t_latin1_" + uuid.uuid4().hex[:12]
    admin = psycopg2.connect(pg.dsn("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(
            f"CREATE DATABASE \"{name}\" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C'"
            " TEMPLATE template0"
        )
    admin.close()
    database = Database(pg, name)
    try:
        yield database
    finally:
        drop_database(pg, name)


def _setup(db: Database) -> int:
    """The table ``café`` in publication ``pub``, slots ``s``, ``b``, ``q``, one row; the
    end position."""
    conn = db.connect(client_encoding="UTF8")
    with conn.cursor() as cur:
        cur.execute("SHOW server_encoding")
        assert cur.fetchone() == ("LATIN1",)
        cur.execute('CREATE TABLE "café" (id int PRIMARY KEY, "crème" text)')
        cur.execute('CREATE PUBLICATION pub FOR TABLE "café"')
        for slot in ("s", "b", "q"):
            cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        cur.execute("SET synchronous_commit = on")
        cur.execute('INSERT INTO "café" VALUES (1, %s)', (VALUE,))
    conn.close()
    settle(db)
    return parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))


# the user's own client encoding must not change what pgtail reads either
LATIN1_CLIENT = {"PGCLIENTENCODING": "LATIN1"}


def test_stream_json_and_sql_of_a_latin1_table(latin1: Database) -> None:
    end = _setup(latin1)
    base = ["stream", "--dsn", latin1.dsn, "--publication", "pub"]
    base += ["--end", f"{end >> 32:X}/{end & 0xFFFFFFFF:X}"]
    runs = [("s", [])] + ([("b", ["--binary"])] if latin1.major >= 14 else [])
    for slot, extra in runs:
        code, out, err = run_cli([*base, "--slot", slot, "--format", "json", *extra], LATIN1_CLIENT)
        assert code == 0, err
        record = orjson.loads(out)
        assert record["table"] == "café"
        assert record["new"] == {"id": 1, "crème": VALUE}
        # the slot moves on (once its walsender, gone when it exits, read the last reply)
        wait_inactive(latin1, slot)
        assert confirmed(latin1, slot) >= end
    code, out, err = run_cli([*base, "--slot", "q", "--format", "sql"], LATIN1_CLIENT)
    assert code == 0, err
    assert """INSERT INTO public."café" (id, "crème") VALUES (1, 'crème brûlée');""" in out


def test_slot_peek_and_a_range_read_of_a_latin1_table(latin1: Database) -> None:
    from pgtail.spark.slot_options import replication_options
    from pgtail.stream.bounded import RangeRead, read_range

    end = _setup(latin1)
    start = confirmed(latin1)
    args = ["slot", "peek", "s", "--publication", "pub", "--dsn", latin1.dsn]
    code, out, err = run_cli([*args, "--format", "json"], LATIN1_CLIENT)
    assert code == 0, err
    record = orjson.loads(out)
    assert (record["table"], record["new"]) == ("café", {"id": 1, "crème": VALUE})
    code, out, err = run_cli([*args, "--format", "sql"], LATIN1_CLIENT)
    assert code == 0, err
    assert "'crème brûlée'" in out and 'public."café"' in out

    from pgtail import catalog

    with catalog.connect(latin1.dsn) as conn:
        server = catalog.server_info(conn)
    version, opts = replication_options(
        server, ("pub",), binary=False, messages=False, streaming=False
    )
    read = RangeRead(proto_version=version, options=opts)
    events = list(read_range(latin1.dsn + " client_encoding=LATIN1", "s", start, end, read))
    assert [(e.table.name, e.new) for e in events] == [("café", {"id": 1, "crème": VALUE})]
