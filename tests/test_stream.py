"""`pgtail.stream.run` end to end on real servers: every protocol version, text and binary,
with and without streaming; commit order, exactly once, rollbacks absent; errors."""

from __future__ import annotations

import io
import subprocess
import threading
from typing import Any

import orjson
import psycopg2
import pytest

from pgtail.errors import (
    ConfigurationError,
    ConnectionFailed,
    PgtailError,
    PublicationError,
    ServerCapabilityError,
    SlotError,
)
from pgtail.filters import EventFilter
from pgtail.lsn import parse_lsn
from pgtail.render import RenderOptions
from pgtail.stream import ReconnectPolicy, StreamConfig, StreamResult, max_proto_version, run
from tests.helpers import (
    confirmed,
    create_database,
    drop_database,
    insert_lsn,
    kill_if_running,
    pgtail_stream,
    wait_for,
    wait_inactive,
)
from tests.helpers import streaming as hold_slot  # "streaming" names a loop variable here

SCHEMA = """
CREATE TABLE items (
    id int PRIMARY KEY, name text, qty int, price numeric(10,2), tags text[], meta jsonb,
    at timestamptz, data bytea, f float8, flag bool
);
CREATE TABLE full_t (id int, v text);
ALTER TABLE full_t REPLICA IDENTITY FULL;
CREATE TABLE outside (x int);
CREATE PUBLICATION pub FOR TABLE items, full_t;
"""

ROW = (
    "(%s, 'name ' || %s, %s, 12.5, ARRAY['a','b c'], '{\"k\": [1, 2]}',"
    " '2024-01-02 03:04:05.123456+00', '\\xdeadbeef', 1.25, true)"
)


def setup_schema(db: Any) -> None:
    db.execute(SCHEMA)


def create_slot(db: Any, name: str, two_phase: bool = False) -> None:
    if two_phase:
        db.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, true)", (name,)
        )
    else:
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def workload(db: Any) -> list[tuple[str, str, Any]]:
    """Committed changes in commit order: (op, table, id) ('message', prefix, content)."""
    expected: list[tuple[str, str, Any]] = []
    a = db.connect()
    b = db.connect()
    ca, cb = a.cursor(), b.cursor()
    # tx1: three inserts
    ca.execute("BEGIN")
    for i in (1, 2, 3):
        ca.execute("INSERT INTO items VALUES " + ROW, (i, str(i), i))
        expected.append(("insert", "items", i))
    ca.execute("COMMIT")
    # tx2: update a value, update the key
    ca.execute("BEGIN")
    ca.execute("UPDATE items SET name = 'renamed' WHERE id = 1")
    ca.execute("UPDATE items SET id = 20 WHERE id = 2")
    ca.execute("COMMIT")
    expected += [("update", "items", 1), ("update", "items", 20)]
    # tx3: delete
    ca.execute("DELETE FROM items WHERE id = 3")
    expected.append(("delete", "items", 3))
    # rolled back: never streamed
    ca.execute("BEGIN")
    ca.execute("INSERT INTO items VALUES " + ROW, (99999, "x", 0))
    ca.execute("ROLLBACK")
    # subtransaction rollback
    ca.execute("BEGIN")
    ca.execute("INSERT INTO items VALUES " + ROW, (50, "x", 0))
    ca.execute("SAVEPOINT s")
    ca.execute("INSERT INTO items VALUES " + ROW, (51, "x", 0))
    ca.execute("ROLLBACK TO SAVEPOINT s")
    ca.execute("INSERT INTO items VALUES " + ROW, (52, "x", 0))
    ca.execute("COMMIT")
    expected += [("insert", "items", 50), ("insert", "items", 52)]
    # a large transaction (streamed with logical_decoding_work_mem = 64kB) that commits
    # after a small one that started later
    ca.execute("BEGIN")
    ca.execute(
        "INSERT INTO items SELECT g, 'bulk ' || g, g, g / 4.0, ARRAY['x'], '{}', now(),"
        " '\\x00', g / 2.0, g % 2 = 0 FROM generate_series(1000, 2199) g"
    )
    cb.execute("INSERT INTO items VALUES " + ROW, (600, "small", 6))
    expected.append(("insert", "items", 600))
    ca.execute("INSERT INTO outside VALUES (1)")
    ca.execute("COMMIT")
    expected += [("insert", "items", g) for g in range(1000, 2200)]
    # large transactions that are streamed and then aborted, wholly or in part
    ca.execute("BEGIN")
    ca.execute("INSERT INTO items SELECT g, 'aborted' FROM generate_series(100000, 101499) g")
    ca.execute("ROLLBACK")
    ca.execute("BEGIN")
    ca.execute("INSERT INTO items VALUES " + ROW, (800, "kept", 8))
    ca.execute("SAVEPOINT big")
    ca.execute("INSERT INTO items SELECT g, 'sub aborted' FROM generate_series(200000, 201499) g")
    ca.execute("ROLLBACK TO SAVEPOINT big")
    ca.execute("INSERT INTO items VALUES " + ROW, (801, "kept", 8))
    ca.execute("COMMIT")
    expected += [("insert", "items", 800), ("insert", "items", 801)]
    # REPLICA IDENTITY FULL table, then truncate
    ca.execute("INSERT INTO full_t VALUES (1, 'one')")
    ca.execute("UPDATE full_t SET v = 'uno' WHERE id = 1")
    ca.execute("DELETE FROM full_t WHERE id = 1")
    expected += [("insert", "full_t", 1), ("update", "full_t", 1), ("delete", "full_t", 1)]
    ca.execute("TRUNCATE full_t")
    expected.append(("truncate", "full_t", None))
    # messages: transactional (with a change) and not
    ca.execute("BEGIN")
    ca.execute("INSERT INTO items VALUES " + ROW, (700, "m", 7))
    ca.execute("SELECT pg_logical_emit_message(true, 'app', 'hello')")
    ca.execute("COMMIT")
    expected += [("insert", "items", 700), ("message", "app", "hello")]
    ca.execute("SELECT pg_logical_emit_message(false, 'raw', '\\xff00'::bytea)")
    expected.append(("message", "raw", "/wA="))
    a.close()
    b.close()
    return expected


def summarize(records: list[dict[str, Any]]) -> list[tuple[str, str, Any]]:
    found: list[tuple[str, str, Any]] = []
    for r in records:
        op = r["op"]
        if op in ("insert", "update", "delete"):
            row = r["new"] if r["new"] is not None else r["old"]
            found.append((op, r["table"], row["id"]))
        elif op == "truncate":
            found.append((op, r["tables"][0]["table"], None))
        elif op == "message":
            found.append((op, r["prefix"], r["content"]))
    return found


def stream_json(
    db: Any, slot: str | None = "s", **options: Any
) -> tuple[list[dict[str, Any]], StreamResult]:
    out = io.BytesIO()
    options.setdefault("publications", ("pub",))
    options.setdefault("status_interval", 1.0)
    config = StreamConfig(dsn=db.dsn, slot=slot, **options)
    result = run(config, out, install_signal_handlers=False)
    if slot is not None:
        wait_inactive(db, slot)
    lines = out.getvalue().splitlines()
    return [orjson.loads(line) for line in lines], result


@pytest.mark.parametrize("proto", [1, 2, 3, 4])
def test_end_to_end_every_protocol_text_and_binary(db: Any, proto: int) -> None:
    if proto > max_proto_version(db.major):
        # the server is too old for this version: that must be a clear error instead
        setup_schema(db)
        create_slot(db, "s")
        with pytest.raises(ServerCapabilityError, match=f"version {proto} needs PostgreSQL"):
            stream_json(db, proto_version=proto, end_lsn=insert_lsn(db))
        return
    setup_schema(db)
    with_14 = db.major >= 14  # binary tuple data and logical messages
    variants = [
        (binary, streaming)
        for binary in ((False, True) if with_14 else (False,))
        for streaming in (
            ["off"] + (["on"] if proto >= 2 else []) + (["parallel"] if proto >= 4 else [])
        )
    ]
    for i, _ in enumerate(variants):
        create_slot(db, f"s{i}")
    expected = workload(db)
    if not with_14:
        expected = [e for e in expected if e[0] != "message"]
    end = insert_lsn(db)
    outputs: dict[tuple[bool, str], list[dict[str, Any]]] = {}
    for i, (binary, streaming) in enumerate(variants):
        records, result = stream_json(
            db,
            f"s{i}",
            proto_version=proto,
            binary=binary,
            streaming=streaming,
            messages=with_14,
            end_lsn=end,
        )
        assert result.reason == "end"
        assert summarize(records) == expected, (binary, streaming)
        commit_lsns = [parse_lsn(r["commit_lsn"]) for r in records if "commit_lsn" in r]
        assert commit_lsns == sorted(commit_lsns)
        # everything written is confirmed, nothing beyond the end is
        last_end = max(parse_lsn(r["end_lsn"]) for r in records if "end_lsn" in r)
        assert confirmed(db, f"s{i}") >= last_end
        outputs[(binary, streaming)] = records
    # text and binary tuple data render the same JSON
    for streaming in {s for b, s in variants if b}:
        text = [
            {k: v for k, v in r.items() if k not in ("xid",)} for r in outputs[(False, streaming)]
        ]
        binary_rows = [
            {k: v for k, v in r.items() if k not in ("xid",)} for r in outputs[(True, streaming)]
        ]
        assert text == binary_rows


def test_record_shapes(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute("INSERT INTO items VALUES " + ROW, (1, "1", 1))
    db.execute("UPDATE items SET qty = 5 WHERE id = 1")
    db.execute("INSERT INTO full_t VALUES (1, 'a')")
    db.execute("UPDATE full_t SET v = 'b'")
    db.execute("DELETE FROM full_t")
    records, _ = stream_json(
        db, end_lsn=insert_lsn(db), render_options=RenderOptions(tx_lines=True)
    )
    ops = [r["op"] for r in records]
    assert ops == ["begin", "insert", "commit", "begin", "update", "commit"] + [
        "begin",
        "insert",
        "commit",
        "begin",
        "update",
        "commit",
        "begin",
        "delete",
        "commit",
    ]
    ins = records[1]
    assert ins["schema"] == "public" and ins["table"] == "items"
    assert ins["key"] == {"id": 1}
    assert ins["old"] is None and ins["old_kind"] is None
    assert ins["new"]["price"] == "12.50"
    assert ins["new"]["tags"] == ["a", "b c"]
    assert ins["new"]["meta"] == {"k": [1, 2]}
    assert ins["new"]["flag"] is True
    assert ins["replica_identity"] == "default"
    assert ins["unchanged_toast"] == []
    assert ins["commit_time"].endswith("+00:00") and "." in ins["commit_time"]
    assert ins["seq"] == 0
    assert records[0]["xid"] == ins["xid"] and records[2]["end_lsn"] == ins["end_lsn"]
    full_update = records[10]
    assert full_update["old_kind"] == "full" and full_update["old"] == {"id": 1, "v": "a"}
    assert full_update["replica_identity"] == "full"
    full_delete = records[13]
    assert full_delete["op"] == "delete" and full_delete["new"] is None
    assert full_delete["old"] == {"id": 1, "v": "b"}


def test_unchanged_toast_columns_are_absent_from_new(db: Any) -> None:
    db.execute("CREATE TABLE big (id int PRIMARY KEY, body text, n int)")
    db.execute("ALTER TABLE big ALTER COLUMN body SET STORAGE EXTERNAL")
    db.execute("CREATE PUBLICATION pub FOR TABLE big")
    db.execute("INSERT INTO big VALUES (1, repeat('x', 10000), 1)")
    create_slot(db, "s")
    db.execute("UPDATE big SET n = 2")
    records, _ = stream_json(db, end_lsn=insert_lsn(db))
    assert len(records) == 1
    assert records[0]["unchanged_toast"] == ["body"]
    assert "body" not in records[0]["new"]
    assert records[0]["new"]["n"] == 2


def test_filters_ops_tables_redact(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute("INSERT INTO items VALUES " + ROW, (1, "1", 1))
    db.execute("INSERT INTO full_t VALUES (1, 'secret')")
    db.execute("UPDATE items SET qty = 2")
    db.execute("DELETE FROM items")
    end = insert_lsn(db)
    records, _ = stream_json(db, end_lsn=end, filter=EventFilter(tables=("public.item*",)))
    assert {r["table"] for r in records} == {"items"} and len(records) == 3
    create_slot(db, "s2")
    db.execute("INSERT INTO items VALUES " + ROW, (2, "2", 2))
    db.execute("UPDATE items SET name = 'n2'")
    db.execute("DELETE FROM items")
    records, _ = stream_json(
        db,
        "s2",
        end_lsn=insert_lsn(db),
        filter=EventFilter(
            exclude=("full_t",), ops=frozenset({"update", "delete"}), redact=("name", "id")
        ),
    )
    assert [r["op"] for r in records] == ["update", "delete"]
    assert records[0]["new"]["name"] == "***"
    assert records[0]["key"] == {"id": 2}  # keys stay visible
    assert records[0]["new"]["id"] == 2


def test_max_changes_confirms_only_whole_transactions(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute("INSERT INTO items VALUES " + ROW, (1, "1", 1))
    first_end = insert_lsn(db)
    db.execute(
        "INSERT INTO items SELECT g, 'x', g, 1, NULL, NULL, NULL, NULL, NULL, NULL"
        " FROM generate_series(10, 14) g"
    )
    records, result = stream_json(db, max_changes=3)
    assert result.reason == "max_changes"
    assert [r["new"]["id"] for r in records] == [1, 10, 11]
    # the second transaction was not finished: the slot must resend it
    flushed = confirmed(db, "s")
    assert flushed >= parse_lsn(records[0]["end_lsn"])
    assert flushed < parse_lsn(records[1]["end_lsn"])
    assert first_end <= parse_lsn(records[1]["commit_lsn"])
    again, _ = stream_json(db, end_lsn=insert_lsn(db))
    assert [r["new"]["id"] for r in again] == [10, 11, 12, 13, 14]


def test_updates_and_deletes_through_the_json_fast_path(db: Any) -> None:
    """An UPDATE of a large table (key unchanged, nothing TOASTed) and a DELETE take the
    encoded path as inserts do: whole lines with their op, cut by --max-changes, kept or
    dropped by --ops."""
    setup_schema(db)
    rows = 6000  # past the size at which a transaction is converted on arrival
    db.execute(
        "INSERT INTO items SELECT g, 'name ' || g, g, 12.5, NULL, NULL, NULL, NULL, NULL, NULL"
        f" FROM generate_series(1, {rows}) g"
    )
    create_slot(db, "s")
    create_slot(db, "t")
    db.execute("UPDATE items SET qty = qty + 1")
    db.execute("DELETE FROM items WHERE id <= 2")
    end = insert_lsn(db)
    records, _ = stream_json(db, end_lsn=end, filter=EventFilter(ops=frozenset({"update"})))
    assert len(records) == rows
    assert {r["op"] for r in records} == {"update"}
    assert [r["seq"] for r in records] == list(range(rows))
    assert [(r["key"], r["new"]["qty"]) for r in records[:2]] == [({"id": 1}, 2), ({"id": 2}, 3)]
    assert records[0]["old"] is None and records[0]["unchanged_toast"] == []
    deletes, _ = stream_json(
        db, slot="t", end_lsn=end, filter=EventFilter(ops=frozenset({"insert", "delete"}))
    )
    assert [(r["op"], r["key"]) for r in deletes] == [("delete", {"id": 1}), ("delete", {"id": 2})]
    create_slot(db, "u")
    db.execute("UPDATE items SET qty = 0")
    cut, result = stream_json(db, slot="u", max_changes=4321)
    assert result.reason == "max_changes"
    assert len(cut) == 4321 and {r["op"] for r in cut} == {"update"}
    create_slot(db, "v")
    db.execute("DELETE FROM items")
    gone, _ = stream_json(db, slot="v", end_lsn=insert_lsn(db))
    assert len(gone) == rows - 2 and {r["op"] for r in gone} == {"delete"}
    # in the order of the table's pages, which two updates (and a vacuum) have shuffled
    assert sorted(r["key"]["id"] for r in gone) == list(range(3, rows + 1))
    assert all(r["old"] == r["key"] and r["old_kind"] == "key" for r in gone)
    assert gone[0]["new"] is None and gone[-1]["seq"] == rows - 3


def test_large_insert_transactions_through_the_json_fast_path(db: Any) -> None:
    """Plain all-text inserts take the encoded path: cut exactly by --max-changes, filtered
    by --table / --ops, and --redact (which needs the values) still masks."""
    setup_schema(db)
    create_slot(db, "s")
    create_slot(db, "q")
    rows = 6000  # past the size at which a transaction is converted on arrival
    db.execute(
        "INSERT INTO items SELECT g, 'name ' || g, g, 12.5, ARRAY['a','b c'], '{\"k\": 1}',"
        " '2024-01-02 03:04:05+00', '\\xbeef', 1.25, g % 2 = 0"
        f" FROM generate_series(1, {rows}) g"
    )
    db.execute("INSERT INTO full_t SELECT g, 'v' FROM generate_series(1, 3) g")
    records, result = stream_json(db, max_changes=4500)
    assert result.reason == "max_changes"
    assert [r["seq"] for r in records] == list(range(4500))
    assert [r["new"]["id"] for r in records] == list(range(1, 4501))
    assert records[4499]["key"] == {"id": 4500}
    assert records[4499]["new"]["tags"] == ["a", "b c"]
    assert records[4499]["new"]["at"] == "2024-01-02T03:04:05+00:00"
    # nothing confirmed: the transaction was not finished, so all of it comes again
    end = insert_lsn(db)
    only_full, _ = stream_json(db, end_lsn=end, filter=EventFilter(tables=("full_t",)))
    assert [(r["table"], r["new"]["id"]) for r in only_full] == [("full_t", g) for g in (1, 2, 3)]
    create_slot(db, "t")
    no_inserts, _ = stream_json(
        db, slot="t", end_lsn=end, filter=EventFilter(ops=frozenset({"delete"}))
    )
    assert no_inserts == []
    # the same cut through the SQL renderer's fast path
    out = io.BytesIO()
    config = StreamConfig(
        dsn=db.dsn, slot="q", publications=("pub",), format="sql", max_changes=4500
    )
    assert run(config, out, install_signal_handlers=False).reason == "max_changes"
    wait_inactive(db, "q")
    inserts = [line for line in out.getvalue().splitlines() if line.startswith(b"INSERT")]
    assert len(inserts) == 4500
    assert inserts[-1].startswith(b"INSERT INTO public.items (id, name, qty, price, tags, meta,")
    assert b"VALUES (4500, 'name 4500', 4500, 12.50, " in inserts[-1]
    create_slot(db, "u")
    db.execute("INSERT INTO items VALUES " + ROW, (rows + 1, rows + 1, 1))
    masked, _ = stream_json(
        db, slot="u", end_lsn=insert_lsn(db), filter=EventFilter(redact=("name",))
    )
    assert [r["new"]["name"] for r in masked] == ["***"]


def test_end_is_transaction_aware(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute(
        "INSERT INTO items SELECT g, 'x', g, 1, NULL, NULL, NULL, NULL, NULL, NULL"
        " FROM generate_series(1, 3) g"
    )
    middle = insert_lsn(db)
    db.execute("INSERT INTO items VALUES " + ROW, (9, "9", 9))
    records, result = stream_json(db, end_lsn=middle)
    assert result.reason == "end"
    assert [r["new"]["id"] for r in records] == [1, 2, 3]  # the whole tx, nothing after


def test_idle_exit_and_two_phase(db: Any) -> None:
    if db.major < 15:
        pytest.skip("two-phase decoding needs PostgreSQL 15")
    setup_schema(db)
    create_slot(db, "s", two_phase=True)
    conn = db.connect()
    cur = conn.cursor()
    cur.execute("BEGIN")
    cur.execute("INSERT INTO items VALUES " + ROW, (1, "1", 1))
    cur.execute("PREPARE TRANSACTION 'g1'")
    cur.execute("COMMIT PREPARED 'g1'")
    cur.execute("BEGIN")
    cur.execute("INSERT INTO items VALUES " + ROW, (2, "2", 2))
    cur.execute("PREPARE TRANSACTION 'g2'")
    cur.execute("ROLLBACK PREPARED 'g2'")
    conn.close()
    records, result = stream_json(db, two_phase=True, idle_exit=2.0)
    assert result.reason == "idle"
    ops = [r["op"] for r in records]
    assert ops == ["insert", "prepare", "commit_prepared", "insert", "prepare", "rollback_prepared"]
    assert records[0]["gid"] == "g1" and records[0]["prepared"] is True
    assert records[2]["gid"] == "g1"
    assert records[5]["gid"] == "g2"


def test_temporary_slot_is_used_without_slot(db: Any) -> None:
    setup_schema(db)
    out = io.BytesIO()
    # the one insert ends the run (an idle exit would wait seconds past it)
    config = StreamConfig(
        dsn=db.dsn, publications=("pub",), max_changes=1, idle_exit=60.0, status_interval=1.0
    )
    seen: dict[str, Any] = {}

    def writer() -> None:
        import time

        deadline = time.time() + 20
        while time.time() < deadline:
            rows = db.execute("SELECT slot_name, temporary FROM pg_replication_slots")
            if rows:
                seen["slots"] = rows
                db.execute("INSERT INTO items VALUES " + ROW, (1, "1", 1))
                return
            time.sleep(0.05)

    thread = threading.Thread(target=writer)
    thread.start()
    result = run(config, out, install_signal_handlers=False)
    thread.join()
    assert seen["slots"][0][1] is True
    assert result.slot == seen["slots"][0][0]
    assert [orjson.loads(x)["op"] for x in out.getvalue().splitlines()] == ["insert"]
    # the server drops a temporary slot as its walsender exits, just after pgtail's close
    wait_for(db, "SELECT count(*) = 0 FROM pg_replication_slots", timeout=30)


def test_raw_format_traces_messages(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute("INSERT INTO items (id, name) VALUES (1, 'ab')")
    out = io.BytesIO()
    run(
        StreamConfig(
            dsn=db.dsn, slot="s", publications=("pub",), format="raw", end_lsn=insert_lsn(db)
        ),
        out,
        install_signal_handlers=False,
    )
    lines = out.getvalue().decode().splitlines()
    kinds = [line.split()[1] for line in lines]
    assert kinds == ["Begin", "Relation", "Insert", "Commit"]
    assert "t:'1'" in lines[2] and "t:'ab'" in lines[2]  # text values as text
    assert "final_lsn=" in lines[0] and "/" in lines[0].split("final_lsn=")[1]


def test_end_reached_while_the_output_is_busy_still_confirms_the_end(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--end met while the writer still had the last transaction: once it is written,
    the WAL end seen at the stop is confirmed (here past WAL of no published change),
    as an idle stream whose output kept up confirms it."""
    from pgtail.stream import writer as writer_module

    setup_schema(db)
    create_slot(db, "s")
    db.execute("INSERT INTO items (id) VALUES (1)")
    db.execute("INSERT INTO outside SELECT generate_series(1, 100)")  # no change sent
    end = insert_lsn(db)
    # the writer never looks idle at a pull: only the stop can follow the server's WAL end
    monkeypatch.setattr(writer_module.Writer, "idle", lambda self: False)
    rows, result = stream_json(db, end_lsn=end)
    assert result.reason == "end"
    assert [r["new"]["id"] for r in rows] == [1]
    assert confirmed(db, "s") >= end


def test_idle_stream_advances_confirmed_flush(db: Any) -> None:
    """Writes outside the publication move the slot while pgtail idles."""
    import signal
    import time

    setup_schema(db)
    create_slot(db, "s")
    before = confirmed(db, "s")
    proc = pgtail_stream(
        db.dsn, "--slot", "s", "--publication", "pub", "--status-interval", "1",
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        advanced = False
        deadline = time.monotonic() + 60  # however slow the machine
        while proc.poll() is None and time.monotonic() < deadline:
            db.execute("INSERT INTO outside SELECT generate_series(1, 100)")
            time.sleep(0.1)
            target = insert_lsn(db)
            if confirmed(db, "s") > before and confirmed(db, "s") >= target - 4096:
                advanced = True
                break
        after = confirmed(db, "s")
        proc.send_signal(signal.SIGINT)  # it idles on: stop it (no idle exit to wait out)
        _, err = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert advanced, (before, after, insert_lsn(db), err)
    assert proc.returncode == 130, err


# --------------------------------------------------------------------------- errors


def test_error_missing_slot(db: Any) -> None:
    setup_schema(db)
    with pytest.raises(SlotError, match="'nope' does not exist"):
        stream_json(db, "nope")


def test_error_slot_active_names_pid(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    with hold_slot(db, "s", "pub") as pid, pytest.raises(SlotError, match=f"active for PID {pid}"):
        stream_json(db, "s")


def test_error_wrong_plugin(db: Any) -> None:
    setup_schema(db)
    db.execute("SELECT pg_create_logical_replication_slot('td', 'test_decoding')")
    with pytest.raises(SlotError, match="test_decoding"):
        stream_json(db, "td")


def test_error_missing_publication_and_choice(db: Any) -> None:
    db.execute("CREATE TABLE t (id int primary key)")
    create_slot(db, "s")
    with pytest.raises(PublicationError, match="'nopub' does not exist"):
        stream_json(db, publications=("nopub",))
    with pytest.raises(PublicationError, match="has no publication"):
        stream_json(db, publications=())
    db.execute("CREATE PUBLICATION p1 FOR TABLE t")
    db.execute("CREATE PUBLICATION p2 FOR TABLE t")
    with pytest.raises(PublicationError, match="p1, p2"):
        stream_json(db, publications=())


def test_single_publication_is_chosen(db: Any) -> None:
    db.execute("CREATE TABLE t (id int primary key)")
    db.execute("CREATE PUBLICATION only_one FOR TABLE t")
    create_slot(db, "s")
    db.execute("INSERT INTO t VALUES (1)")
    messages: list[str] = []
    out = io.BytesIO()
    result = run(
        StreamConfig(dsn=db.dsn, slot="s", end_lsn=insert_lsn(db)),
        out,
        log=messages.append,
        install_signal_handlers=False,
    )
    assert result.publications == ("only_one",)
    assert any("only_one" in m for m in messages)
    assert len(out.getvalue().splitlines()) == 1


def test_create_publication_for_the_run(db: Any) -> None:
    db.execute("CREATE TABLE t (id int primary key)")
    db.execute("CREATE TABLE u (id int primary key)")
    create_slot(db, "s")
    out = io.BytesIO()
    done: dict[str, Any] = {}

    def writer() -> None:
        import time

        for _ in range(200):
            if db.execute("SELECT count(*) FROM pg_publication")[0][0]:
                # u first: had it entered the publication, it would be the first change
                db.execute("INSERT INTO u VALUES (1)")
                db.execute("INSERT INTO t VALUES (1)")
                done["ok"] = True
                return
            time.sleep(0.05)

    thread = threading.Thread(target=writer)
    thread.start()
    result = run(
        StreamConfig(
            dsn=db.dsn,
            slot="s",
            create_publication=True,
            publication_tables=("t",),
            max_changes=1,  # t's insert ends the run
            idle_exit=60.0,
            status_interval=1.0,
        ),
        out,
        install_signal_handlers=False,
    )
    thread.join()
    assert done.get("ok")
    assert [orjson.loads(x)["table"] for x in out.getvalue().splitlines()] == ["t"]
    assert db.execute("SELECT count(*) FROM pg_publication")[0][0] == 0  # dropped on exit
    assert result.publications[0].startswith("pgtail_")


def test_error_missing_replication_privilege(db: Any) -> None:
    setup_schema(db)
    db.execute("CREATE ROLE plain LOGIN")
    dsn = db.server.dsn(db.name, user="plain")
    with pytest.raises(ServerCapabilityError, match="lacks the REPLICATION attribute"):
        run(
            StreamConfig(dsn=dsn, publications=("pub",)),
            io.BytesIO(),
            install_signal_handlers=False,
        )
    db.execute("DROP ROLE plain")


def test_error_unreachable_and_missing_database(db: Any) -> None:
    from pgtail.server import free_port

    with pytest.raises(ConnectionFailed, match="cannot reach PostgreSQL"):
        run(
            StreamConfig(
                dsn=f"host=127.0.0.1 port={free_port()} dbname=x user=postgres "
                "password=hunter2 connect_timeout=2",
                # nothing listens there: retried once (a server may be restarting), then fails
                reconnect=ReconnectPolicy(attempts=1),
            ),
            io.BytesIO(),
            install_signal_handlers=False,
        )
    with pytest.raises(ConnectionFailed, match="does not exist") as info:
        run(
            StreamConfig(dsn=db.server.dsn("no_such_db", password="hunter2")),
            io.BytesIO(),
            install_signal_handlers=False,
        )
    assert "hunter2" not in str(info.value)


def test_error_max_replication_slots(db: Any) -> None:
    setup_schema(db)
    # fill the remaining slots of the server
    made = []
    try:
        while True:
            name = f"fill{len(made)}"
            try:
                create_slot(db, name)
            except psycopg2.Error:
                break
            made.append(name)
            assert len(made) < 100
        with pytest.raises(SlotError, match="max_replication_slots"):
            stream_json(db, None, idle_exit=1.0)
    finally:
        for name in made:
            db.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def test_error_bad_option_versions_and_lsn(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    # before 14 the server's version is the first reason streaming cannot work
    needs = "--proto-version 2" if db.major >= 14 else "PostgreSQL 14"
    with pytest.raises(ServerCapabilityError, match=f"--streaming needs {needs}"):
        stream_json(db, proto_version=1, streaming="on")
    if db.major < 16:
        with pytest.raises(ServerCapabilityError, match="PostgreSQL 16"):
            stream_json(db, origin="none")
    with pytest.raises(ConfigurationError, match="invalid LSN"):
        parse_lsn("zz/1")


def test_errors_are_pgtail_errors_without_passwords(db: Any) -> None:
    with pytest.raises(PgtailError) as info:
        run(
            StreamConfig(dsn=db.server.dsn(db.name, user="nobody_here", password="s3cret")),
            io.BytesIO(),
            install_signal_handlers=False,
        )
    assert "s3cret" not in str(info.value)


def test_sql_format_replays_into_a_copy(db: Any) -> None:
    """The SQL stream, replayed into a second database, reproduces the source table."""
    setup_schema(db)
    create_slot(db, "s")
    workload(db)
    end = insert_lsn(db)
    out = io.BytesIO()
    run(
        StreamConfig(dsn=db.dsn, slot="s", publications=("pub",), format="sql", end_lsn=end),
        out,
        install_signal_handlers=False,
    )
    script = out.getvalue().decode()
    assert "INSERT INTO" in script and "COMMIT;" in script
    copy = create_database(db.server).name
    try:
        target = psycopg2.connect(db.server.dsn(copy))
        target.autocommit = True
        with target.cursor() as cur:
            cur.execute(SCHEMA.replace("CREATE PUBLICATION pub FOR TABLE items, full_t;", ""))
            cur.execute(script)
            cur.execute("SELECT * FROM items ORDER BY id")
            replayed = cur.fetchall()
        target.close()
        assert replayed == db.execute("SELECT * FROM items ORDER BY id")
        assert len(replayed) > 1000
    finally:
        drop_database(db.server, copy)


def test_table_format_renders(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute("INSERT INTO items (id, name) VALUES (1, 'hello table')")
    out = io.BytesIO()
    run(
        StreamConfig(
            dsn=db.dsn,
            slot="s",
            publications=("pub",),
            format="table",
            render_options=RenderOptions(width=120),
            end_lsn=insert_lsn(db),
        ),
        out,
        install_signal_handlers=False,
    )
    text = out.getvalue().decode()
    assert "items" in text and "hello table" in text


@pytest.mark.min_major(14)  # streaming
def test_raw_format_with_streaming_large_transaction(db: Any) -> None:
    setup_schema(db)
    create_slot(db, "s")
    db.execute(
        "INSERT INTO items SELECT g, 'bulk ' || g FROM generate_series(1, 1500) g"
    )  # streamed in chunks with logical_decoding_work_mem = 64kB
    end = insert_lsn(db)
    out = io.BytesIO()
    result = run(
        StreamConfig(
            dsn=db.dsn,
            slot="s",
            publications=("pub",),
            format="raw",
            streaming="on",
            proto_version=2,
            end_lsn=end,
        ),
        out,
        install_signal_handlers=False,
    )
    assert result.reason == "end"
    wait_inactive(db, "s")
    kinds = [line.split()[1] for line in out.getvalue().decode().splitlines()]
    assert kinds.count("Insert") == 1500
    assert "StreamStart" in kinds and kinds[-1] == "StreamCommit"
    assert confirmed(db, "s") >= end - 4096


def test_database_settings_do_not_change_the_values(
    db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text values are printed by the decoding session: pgtail fixes its settings, so a
    database's own (other DateStyle, TimeZone, IntervalStyle, bytea and float output)
    changes nothing, in the stream and in `slot peek`."""
    from pgtail import catalog
    from pgtail.changes import Assembler, Change

    db.execute(
        f"ALTER DATABASE \"{db.name}\" SET DateStyle = 'SQL, DMY';"
        f" ALTER DATABASE \"{db.name}\" SET IntervalStyle = 'sql_standard';"
        f" ALTER DATABASE \"{db.name}\" SET TimeZone = 'Asia/Kolkata';"
        f" ALTER DATABASE \"{db.name}\" SET bytea_output = 'escape';"
        f' ALTER DATABASE "{db.name}" SET extra_float_digits = 0'
    )
    db.execute(
        "CREATE TABLE styled (id int PRIMARY KEY, at timestamptz, d date, span interval,"
        " data bytea, f float8); CREATE PUBLICATION pub FOR TABLE styled"
    )
    create_slot(db, "s")
    create_slot(db, "b")
    db.execute(
        "INSERT INTO styled VALUES (1, '2024-01-02 03:04:05.5+00', '2024-03-04',"
        " '1 day 02:03:04', '\\xdead', 0.1::float8 + 0.2::float8)"
    )
    expected = {
        "id": 1,
        "at": "2024-01-02T03:04:05.5+00:00",
        "d": "2024-03-04",
        "span": "P1DT2H3M4S",
        "data": "\\xdead",
        "f": 0.30000000000000004,
    }
    _, peeked = catalog.peek_changes(db.dsn, "s", ["pub"])
    asm = Assembler(1)
    rows = [e.new for p in peeked for e in asm.feed(p.data) if isinstance(e, Change)]
    assert rows == [expected]
    for slot, binary in (("s", False), ("b", True))[: 2 if db.major >= 14 else 1]:  # binary: 14
        records, _ = stream_json(db, slot=slot, binary=binary, end_lsn=insert_lsn(db))
        assert [r["new"] for r in records] == [expected], binary


def test_enums_domains_and_their_arrays_decode_by_their_kind(db: Any) -> None:
    """Types that are not built in: pgtail asks pg_type, so an enum is its label and a
    domain its base type's value, in text and binary mode alike (and in `slot peek`)."""
    from pgtail import catalog
    from pgtail.changes import Assembler, Change

    db.execute(
        "CREATE TYPE color AS ENUM ('red', 'green');"
        " CREATE DOMAIN posint AS int CHECK (VALUE > 0);"
        " CREATE DOMAIN small_posint AS posint CHECK (VALUE < 100);"
        " CREATE DOMAIN price AS numeric(10,2);"
        " CREATE TABLE typed (id int PRIMARY KEY, c color, cs color[], p posint,"
        " ps posint[], sp small_posint, pr price);"
        " CREATE PUBLICATION pub FOR TABLE typed"
    )
    create_slot(db, "s")
    create_slot(db, "b")
    db.execute("INSERT INTO typed VALUES (1, 'green', '{red,NULL,green}', 5, '{1,2}', 42, 12.5)")
    expected = {
        "id": 1,
        "c": "green",
        "cs": ["red", None, "green"],
        "p": 5,
        "ps": [1, 2],
        "sp": 42,
        "pr": "12.50",
    }
    for slot, binary in (("s", False), ("b", True))[: 2 if db.major >= 14 else 1]:  # binary: 14
        records, _ = stream_json(db, slot=slot, binary=binary, end_lsn=insert_lsn(db))
        assert [r["new"] for r in records] == [expected], binary
    create_slot(db, "p")
    db.execute("INSERT INTO typed VALUES (2, 'red', '{}', 1, NULL, 1, 0)")
    _, peeked = catalog.peek_changes(db.dsn, "p", ["pub"])
    asm = Assembler(1)
    rows = []
    for p in peeked:
        wanted = asm.user_types_wanted(p.data)
        if wanted:
            asm.add_user_types(catalog.lookup_user_types(db.dsn, wanted), wanted)
        rows.extend(e.new for e in asm.feed(p.data) if isinstance(e, Change))
    assert rows == [{"id": 2, "c": "red", "cs": [], "p": 1, "ps": None, "sp": 1, "pr": "0.00"}]


def test_a_failed_type_lookup_is_a_warning() -> None:
    """pg_type out of reach: the stream goes on with those columns as text, and says so."""
    import socket

    from pgtail.stream.session import TypeLookup

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        unused_tcp_port = probe.getsockname()[1]

    logged: list[str] = []
    dsn = f"host=127.0.0.1 port={unused_tcp_port} password=sekrit"
    lookup_types = TypeLookup(dsn, logged.append)
    try:
        assert lookup_types([16_384]) == {}
    finally:
        lookup_types.close()
    assert len(logged) == 1 and "could not look up column types [16384]" in logged[0]
    assert "sekrit" not in logged[0]
