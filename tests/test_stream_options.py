"""`pgtail stream` options that must mean what a user takes them to mean: ``--ops
message`` shows the messages, a float option refuses NaN and infinities, ``--debug``
after the subcommand, a refused first connection."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from pgtail.lsn import format_lsn
from tests.helpers import insert_lsn, run_cli, settle


@pytest.mark.min_major(14)
def test_ops_message_implies_messages(db: Any) -> None:
    """Without --messages the messages were not decoded: nothing shown, exit 0, and the
    slot confirmed past them."""
    db.execute("CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute("INSERT INTO t VALUES (1)")
    db.execute("SELECT pg_logical_emit_message(true, 'app', 'hello')")
    settle(db)
    end = format_lsn(insert_lsn(db))
    args = ["stream", "--dsn", db.dsn, "--slot", "s", "--publication", "pub", "--end", end]
    code, out, err = run_cli([*args, "--ops", "message", "--format", "json"])
    assert code == 0, err
    records = [orjson.loads(line) for line in out.splitlines()]
    assert [(r["op"], r["prefix"], r["content"]) for r in records] == [
        ("message", "app", "hello")
    ]
