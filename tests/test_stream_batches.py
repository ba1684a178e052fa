"""Many small transactions that arrive together go to the writer as one batch; a lone
transaction is still written at once; what is confirmed stays exact."""

from __future__ import annotations

import io
import os
import threading
import time
from typing import Any

import orjson
import pytest

from pgtail.lsn import parse_lsn
from pgtail.stream import StreamConfig, StreamResult, run
from tests.helpers import confirmed, wait_active, wait_inactive, write

SCHEMA = """
CREATE TABLE small (id bigserial PRIMARY KEY, name text, qty int, flag bool);
CREATE PUBLICATION pub FOR TABLE small;
"""
TRANSACTIONS = 600
ROWS = 3  # inserts per transaction
# one transaction per turn of the loop (a DO block may COMMIT outside a transaction block)
BACKLOG = f"""
DO $$
BEGIN
  FOR t IN 1..{TRANSACTIONS} LOOP
    INSERT INTO small (name, qty, flag)
    SELECT 'tx ' || t, g, g % 2 = 0 FROM generate_series(1, {ROWS}) g;
    COMMIT;
  END LOOP;
END
$$
"""


class _SlowOutput(io.BytesIO):
    """An output that takes a millisecond a write, as a pipe to a busy reader does: the
    server stays ahead of pgtail even when a loaded machine slows its walsender (with
    each transaction decoded only as pgtail asks, every batch would hold one)."""

    def write(self, data: Any) -> int:
        time.sleep(0.001)
        return super().write(data)


@pytest.mark.parametrize("fmt", ["json", "sql", "raw"])
def test_a_backlog_of_small_transactions_goes_in_fewer_batches(db: Any, fmt: str) -> None:
    """A backlog written while no consumer ran arrives back to back: the transactions
    the socket has delivered go to the writer together, not one hand-off each -- and
    every row is written once, in order, the last transaction confirmed."""
    db.execute(SCHEMA)
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db.execute(BACKLOG)
    write(db, "SELECT 1")  # flush the WAL: the server decodes only flushed WAL
    out = _SlowOutput()
    config = StreamConfig(
        dsn=db.dsn,
        slot="s",
        publications=("pub",),
        format=fmt,
        max_changes=TRANSACTIONS * ROWS,
        status_interval=1.0,
    )
    result: StreamResult = run(config, out, install_signal_handlers=False)
    wait_inactive(db, "s")
    assert result.reason == "max_changes"
    if fmt == "raw":  # it counts every message, and stops before the last Commit
        assert result.transactions == TRANSACTIONS - 1
    else:
        assert result.changes == TRANSACTIONS * ROWS
        assert result.transactions == TRANSACTIONS
    # one batch per transaction before; a batch of several transactions now
    assert 0 < result.batches < TRANSACTIONS, result.batches
    text = out.getvalue()
    if fmt == "json":
        records = [orjson.loads(line) for line in text.splitlines()]
        assert [r["new"]["id"] for r in records] == list(range(1, TRANSACTIONS * ROWS + 1))
        assert records[-1]["new"]["name"] == f"tx {TRANSACTIONS}"
        last_end = parse_lsn(records[-1]["end_lsn"])
        assert confirmed(db, "s") == last_end  # the last one written, and no further
    elif fmt == "sql":
        assert text.count(b"INSERT INTO") == TRANSACTIONS * ROWS
        assert text.count(b"COMMIT;") == TRANSACTIONS
        assert text.rstrip().endswith(b"COMMIT;")
        assert f"'tx {TRANSACTIONS}'".encode() in text.rsplit(b"BEGIN;", 1)[1]
    else:
        assert text.count(b"Commit") == TRANSACTIONS - 1, text[-2000:]


def test_a_lone_transaction_is_written_without_waiting_for_more(db: Any) -> None:
    """Batching waits for nothing: a transaction alone on the wire is written while the
    stream goes on (here: before the second one, which ends the run, is even made)."""
    db.execute(SCHEMA)
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    read_fd, write_fd = os.pipe()
    out = os.fdopen(write_fd, "wb", buffering=0)
    box: dict[str, Any] = {}

    def stream() -> None:
        config = StreamConfig(
            dsn=db.dsn, slot="s", publications=("pub",), max_changes=2, status_interval=1.0
        )
        try:
            box["result"] = run(config, out, install_signal_handlers=False)
        finally:
            out.close()

    thread = threading.Thread(target=stream, daemon=True)
    thread.start()
    lines: list[dict[str, Any]] = []
    reader_done = threading.Event()

    def read() -> None:
        with os.fdopen(read_fd, "rb") as pipe:
            for line in pipe:
                lines.append(orjson.loads(line))
        reader_done.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        wait_active(db, "s")
        write(db, "INSERT INTO small (name, qty, flag) VALUES ('alone', 1, true)")
        deadline = time.monotonic() + 30  # a bound, not a speed: it comes at once
        while not lines and time.monotonic() < deadline:
            time.sleep(0.02)
        assert [r["new"]["name"] for r in lines] == ["alone"]
        assert thread.is_alive()  # written while the stream still runs, not at its end
        write(db, "INSERT INTO small (name, qty, flag) VALUES ('second', 2, false)")
    finally:
        thread.join(60)
    assert reader_done.wait(30)
    assert box["result"].reason == "max_changes"
    assert [r["new"]["name"] for r in lines] == ["alone", "second"]
