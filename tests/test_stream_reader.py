"""The one read loop of a replication connection (`pgtail.stream.reader.Reader`) on a real
server, cut through the suite's TCP proxy: what it yields, what it confirms while idle,
and what a cut connection becomes -- for ``pgtail stream`` (reconnect) and for the Spark
range read (an error that says the server is away)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg2.extras
import pytest

from pgtail import pgoutput as po
from pgtail.errors import ServerUnavailable
from pgtail.stream.connection import ConnectionLost, open_replication
from pgtail.stream.reader import Reader, stream_error
from tests.helpers import confirmed, insert_lsn, write
from tests.proxy import Proxy


def setup(db: Any) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")


def started(dsn: str) -> tuple[Any, Any]:
    conn = open_replication(dsn, "pgtail-test")
    cursor = conn.cursor()
    cursor.start_replication(
        slot_name="s",
        slot_type=psycopg2.extras.REPLICATION_LOGICAL,
        decode=False,
        options={"proto_version": "1", "publication_names": "pub"},
        status_interval=10,
    )
    return conn, cursor


class Confirming:
    """A driver's policy: confirm ``lsn`` once it is set (a status update as soon as it
    grows, none otherwise)."""

    reply = False

    def __init__(self) -> None:
        self.lsn = 0
        self.sent_lsns: list[int] = []

    def due(self, now: float, force: bool) -> int | None:
        sent = self.sent_lsns[-1] if self.sent_lsns else -1
        return self.lsn if force or self.lsn > sent else None

    def sent(self, lsn: int, now: float) -> None:
        self.sent_lsns.append(lsn)

    def next_due_in(self, now: float) -> float:
        return 0.2


def test_the_reader_yields_each_message_then_confirms_what_its_driver_says(db: Any) -> None:
    setup(db)
    start = confirmed(db)
    write(db, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    conn, cursor = started(db.dsn)
    policy = Confirming()
    reader = Reader(conn, cursor, policy, wait_limit=0.2)
    kinds: list[str] = []
    commit_end = 0
    idle_pulls = 0
    deadline = time.monotonic() + 30
    try:
        for msg in reader.messages():
            assert time.monotonic() < deadline, (kinds, policy.sent_lsns)
            if msg is None:
                if commit_end:
                    idle_pulls += 1
                    # the pull after an idle one waits, and sends the update due
                    if idle_pulls > 1 and confirmed(db) == commit_end:
                        break
                continue
            kinds.append(chr(msg.payload[0]))
            if kinds[-1] == "C":
                commit = po.parse(msg.payload)
                assert isinstance(commit, po.Commit)
                commit_end = policy.lsn = commit.end_lsn
    finally:
        conn.close()
    assert kinds == ["B", "R", "I", "I", "I", "C"]
    assert commit_end > start
    assert commit_end in policy.sent_lsns
    assert confirmed(db) == commit_end


def test_a_cut_connection_is_lost_for_the_session_and_unavailable_for_a_range(db: Any) -> None:
    setup(db)
    with Proxy(db.server.port) as proxy:
        dsn = f"host=127.0.0.1 port={proxy.port} dbname={db.name} user={db.server.user}"
        conn, cursor = started(dsn)
        reader = Reader(conn, cursor, Confirming(), wait_limit=0.2)
        pulls = 0
        try:
            with pytest.raises(ConnectionLost) as lost:
                for msg in reader.messages():
                    pulls += 1
                    if msg is None and pulls == 1:
                        assert proxy.cut() == 1
                    assert pulls < 200, "still reading a cut connection"
        finally:
            conn.close()
        assert lost.value.original is not None  # what the connection said, kept
        error = stream_error(lost.value, "s")
        assert isinstance(error, ServerUnavailable)

        # the Spark range read: no reconnect, the user's error
        from pgtail.stream.bounded import RangeRead, read_range

        start = confirmed(db)
        write(db, "INSERT INTO t VALUES (1, 'a')")
        # a range that ends past the WAL there is: the read waits for it until the cut
        end = insert_lsn(db) + (1 << 30)
        options = {"proto_version": "1", "publication_names": "pub"}
        read = RangeRead(proto_version=1, options=options)
        cut = threading.Timer(2.0, proxy.cut)
        cut.start()
        try:
            with pytest.raises(ServerUnavailable):
                list(read_range(dsn, "s", start, end, read))
        finally:
            cut.cancel()
    assert confirmed(db) == start  # the range read never moves the slot
