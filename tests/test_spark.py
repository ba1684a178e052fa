"""The pgoutput PySpark data source and `pgtail spark`: real PostgreSQL, real local Spark.

One session-scoped ``local[2]`` SparkSession serves every test (Spark starts slowly).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

from datetime import UTC

import orjson  # noqa: E402
import pytest  # noqa: E402

from pgtail.errors import (  # noqa: E402
    ConfigurationError,
    DataLossError,
    PublicationError,
    SlotError,
)
from pgtail.lsn import format_lsn, parse_lsn  # noqa: E402
from tests.helpers import confirmed, settle  # noqa: E402

pytestmark = pytest.mark.spark

# Spark is heavy: the tests over ``pg`` run on 15, 18 and one older major, 13 (pgoutput
# protocol 1 without logical messages or binary transfer); the others on 15 alone.
SPARK_MAJORS = pytest.mark.majors(13, 15, 18)

# before any import of pgtail.spark's modules (they import pyspark): without the spark
# extra this module is skipped, not an error at collection
pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from pgtail.spark.source import parse_options  # noqa: E402


def setup_source(db: Any, slot: str = "s", publication: str = "p") -> None:
    db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric, ok boolean, doc text)"
    )
    db.execute("CREATE TABLE notes (a int, b text, PRIMARY KEY (a, b))")
    db.execute(f"CREATE PUBLICATION {publication} FOR TABLE items, notes")
    db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def first_workload(db: Any) -> None:
    db.execute(
        "INSERT INTO items SELECT g, 'item ' || g, g * 1.5, g % 2 = 0, NULL "
        "FROM generate_series(1, 20) g"
    )
    db.execute("UPDATE items SET name = 'renamed' WHERE id <= 5")
    db.execute("DELETE FROM items WHERE id > 17")
    db.execute("INSERT INTO notes VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    db.execute("SELECT pg_logical_emit_message(true, 'pfx', 'hello')")
    db.execute("SELECT pg_logical_emit_message(false, 'nontx', 'world')")


def second_workload(db: Any) -> None:
    big = "".join(f"{i:08x}" for i in range(2000))  # 16 kB, TOASTed out of line
    db.execute("UPDATE items SET doc = %s WHERE id = 6", (big,))
    db.execute("UPDATE items SET price = 99.99 WHERE id = 6")  # doc: unchanged TOAST
    db.execute("UPDATE items SET id = 100 WHERE id = 7")  # key change
    # key changes leaving doc unchanged: its value is only in the old key's row, two back
    db.execute("UPDATE items SET id = 106 WHERE id = 6")
    db.execute("UPDATE items SET id = 206, name = 'moved' WHERE id = 106")
    db.execute("TRUNCATE notes")
    db.execute("INSERT INTO notes VALUES (4, 'w')")
    db.execute("DELETE FROM items WHERE id = 1")
    db.execute("INSERT INTO items VALUES (1, 'back', 1, true, NULL)")


def options(db: Any, **extra: str) -> dict[str, str]:
    return {"dsn": db.dsn, "slot": "s", "publication": "p", **extra}


def read_log(spark: Any, path: Path) -> list[Any]:
    from pgtail.spark.pipeline import read_changes

    return read_changes(spark, path).orderBy("commit_lsn", "seq", "table").collect()


def change_ids(rows: list[Any]) -> list[tuple[Any, ...]]:
    return [(r["commit_lsn"], r["seq"], r["table"], r["op"]) for r in rows]


# --- options (no server) ------------------------------------------------------


def test_bad_options_are_clear() -> None:
    with pytest.raises(ConfigurationError, match="option slot is required"):
        parse_options({"publication": "p"})
    with pytest.raises(ConfigurationError, match="unknown option 'slto'"):
        parse_options({"slot": "s", "publication": "p", "slto": "x"})
    with pytest.raises(ConfigurationError, match="failOnDataLoss"):
        parse_options({"slot": "s", "publication": "p", "failOnDataLoss": "maybe"})
    with pytest.raises(ConfigurationError, match="maxBytesPerTrigger"):
        parse_options({"slot": "s", "publication": "p", "maxBytesPerTrigger": "-3"})
    with pytest.raises(ConfigurationError, match="invalid LSN"):
        parse_options({"slot": "s", "publication": "p", "startingLsn": "zz"})
    with pytest.raises(ConfigurationError, match="no publication for slot 's'"):
        parse_options({"slot": "s"})
    settings = parse_options({"slots": "a:p1+p2, b", "publication": "q", "dsn": "dbname=x"})
    assert [(s.name, s.publications) for s in settings.slots] == [
        ("a", ("p1", "p2")),
        ("b", ("q",)),
    ]


def test_errors_survive_pickling() -> None:
    import pickle

    err = DataLossError("lost", hint="fix")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is DataLossError and str(back) == "lost (fix)"


# --- batch reads --------------------------------------------------------------


@SPARK_MAJORS
def test_batch_read_peeks_pending_changes_without_moving_the_slot(spark: Any, db: Any) -> None:
    db15 = db  # every major of SPARK_MAJORS
    setup_source(db15)
    before = confirmed(db15)
    first_workload(db15)
    df = spark.read.format("pgoutput").options(**options(db15)).load()
    rows = df.orderBy("end_lsn", "seq", "table").collect()
    ops = [(r["op"], r["table"]) for r in rows]
    assert ops.count(("insert", "items")) == 20
    assert ops.count(("update", "items")) == 5
    assert ops.count(("delete", "items")) == 3
    assert ops.count(("insert", "notes")) == 3
    messages = [r["message"] for r in rows if r["op"] == "message"]
    # pgoutput sends logical decoding messages from PostgreSQL 14
    assert [(m["prefix"], bytes(m["content"]), m["transactional"]) for m in messages] == (
        [("pfx", b"hello", True), ("nontx", b"world", False)] if db.major >= 14 else []
    )
    first = next(r for r in rows if r["op"] == "insert" and r["table"] == "items")
    assert orjson.loads(first["after"]) == {
        "id": 1,
        "name": "item 1",
        "price": "1.5",
        "ok": False,
        "doc": None,
    }
    assert orjson.loads(first["key"]) == {"id": 1}
    assert first["schema"] == "public" and first["commit_ts"] is not None
    assert first["unchanged_toast"] == []
    delete = next(r for r in rows if r["op"] == "delete")
    assert orjson.loads(delete["key"]) == {"id": 18} and delete["after"] is None
    # A batch read only peeks.
    assert confirmed(db15) == before
    assert df.count() == len(rows)
    if db.major < 14:
        from pgtail.spark.pipeline import translate_spark_error

        with pytest.raises(Exception) as info:
            spark.read.format("pgoutput").options(**options(db15, binary="true")).load().count()
        err = translate_spark_error(info.value)
        assert "binary transfer needs PostgreSQL 14 or later" in str(err), err
        return
    # Binary transfer gives the same typed JSON.
    binary = (
        spark.read.format("pgoutput").options(**options(db15, binary="true")).load()
        .orderBy("end_lsn", "seq", "table").collect()
    )  # fmt: skip
    assert [(r["key"], r["before"], r["after"]) for r in binary] == [
        (r["key"], r["before"], r["after"]) for r in rows
    ]


def test_json_with_raw_tabs_and_line_breaks_reads_with_spaces(spark: Any, db15: Any) -> None:
    """json keeps its input text, raw tabs and line breaks included (insignificant
    whitespace): they become spaces, as in pgtail stream's JSON lines, instead of
    breaking the source's tab-separated lines (a whole batch failed before)."""
    db15.execute("CREATE TABLE j (id int PRIMARY KEY, doc json, b jsonb)")
    db15.execute("CREATE PUBLICATION p FOR TABLE j")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute(
        'INSERT INTO j SELECT g, E\'{"a":\\t1,\\r\\n\\t"t": "x\\\\ty"}\', \'{"c": 1}\' '
        "FROM generate_series(1, 3) g"
    )
    rows = spark.read.format("pgoutput").options(**options(db15)).load().orderBy("seq").collect()
    assert [r["after"] for r in rows] == [
        f'{{"id":{i},"doc":{{"a": 1,   "t": "x\\ty"}},"b":{{"c": 1}}}}' for i in (1, 2, 3)
    ]
    assert orjson.loads(rows[0]["after"])["doc"] == {"a": 1, "t": "x\ty"}


# --- streaming ----------------------------------------------------------------


def rows_of_table(db: Any, table: str) -> list[dict[str, Any]]:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table}")
            names = [d[0] for d in cur.description]
            result = []
            for row in cur.fetchall():
                values = {}
                for name, value in zip(names, row, strict=True):
                    values[name] = str(value) if isinstance(value, Decimal) else value
                result.append(values)
            return result
    finally:
        conn.close()


def parquet_rows(spark: Any, path: Path) -> list[dict[str, Any]]:
    return [r.asDict() for r in spark.read.parquet(str(path)).collect()]


def key_sorted(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


@SPARK_MAJORS
def test_available_now_runs_deliver_each_change_once_and_materialize(
    spark: Any, db: Any, tmp_path: Path
) -> None:
    from pgtail.spark.pipeline import materialize, run

    db15 = db  # every major of SPARK_MAJORS
    setup_source(db15)
    out, chk = tmp_path / "changes", tmp_path / "chk"
    start = confirmed(db15)
    first_workload(db15)
    pending = spark.read.format("pgoutput").options(**options(db15)).load().count()

    result = run(spark, options=options(db15), output=out, checkpoint=chk)
    assert result.rows == pending
    log1 = read_log(spark, out)
    assert len(log1) == pending
    after_first = confirmed(db15)
    assert after_first > start
    assert after_first >= max(r["end_lsn"] for r in log1)

    # Nothing new: a second run adds nothing and leaves the slot.
    run(spark, options=options(db15), output=out, checkpoint=chk)
    assert len(read_log(spark, out)) == pending

    second_workload(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk)
    log2 = read_log(spark, out)
    ids = change_ids(log2)
    assert len(ids) == len(set(ids))
    assert ids[: len(log1)] == change_ids(log1)
    new = log2[len(log1) :]
    assert [r["op"] for r in new if r["table"] == "notes"] == ["truncate", "insert"]
    toast = [r for r in new if r["unchanged_toast"]]
    assert toast and toast[0]["unchanged_toast"] == ["doc"]
    assert confirmed(db15) > after_first

    current = tmp_path / "current"
    counts = materialize(spark, out, current)
    items = rows_of_table(db15, "items")
    notes = rows_of_table(db15, "notes")
    assert counts == {"public.items": len(items), "public.notes": len(notes)}
    assert key_sorted(parquet_rows(spark, current / "public.items"), ("id",)) == key_sorted(
        items, ("id",)
    )
    assert key_sorted(parquet_rows(spark, current / "public.notes"), ("a", "b")) == key_sorted(
        notes, ("a", "b")
    )


def test_slot_moves_only_after_spark_commits(spark: Any, db15: Any, tmp_path: Path) -> None:
    from pgtail.spark.source import PgoutputStreamReader

    setup_source(db15)
    first_workload(db15)
    settle(db15)
    start = confirmed(db15)
    reader = PgoutputStreamReader(parse_options(options(db15)))
    try:
        begin = reader.initialOffset()
        assert begin == {"slots": {"s": start}}
        end = reader.latestOffset(begin, reader.getDefaultReadLimit())
        assert end["slots"]["s"] > start
        parts = reader.partitions(begin, end)
        batches = [b for p in parts for b in reader.read(p)]
        assert sum(b.num_rows for b in batches) == 20 + 5 + 3 + 3 + 2
        assert confirmed(db15) == start  # read only peeks
        reader.commit(end)
        assert confirmed(db15) == end["slots"]["s"]
        reader.commit(end)  # idempotent
        reader.commit(begin)  # never backwards
        assert confirmed(db15) == end["slots"]["s"]
        # A replay of the committed batch now means data loss.
        with pytest.raises(DataLossError, match="replication slot 's' is already at"):
            list(reader.read(parts[0]))
        assert reader.latestOffset(end, reader.getDefaultReadLimit()) == end
    finally:
        reader.stop()


def test_max_bytes_per_trigger_splits_into_batches(spark: Any, db15: Any, tmp_path: Path) -> None:
    from pgtail.spark.pipeline import run

    setup_source(db15)
    for i in range(30):
        db15.execute(
            "INSERT INTO items SELECT g, repeat('x', 200), g, true, NULL "
            "FROM generate_series(%s, %s) g",
            (i * 10, i * 10 + 9),
        )
    settle(db15)  # the run reads only flushed WAL; a loaded machine may not have flushed it
    out, chk = tmp_path / "changes", tmp_path / "chk"
    result = run(
        spark,
        options=options(db15, maxBytesPerTrigger="8192"),
        output=out,
        checkpoint=chk,
    )
    assert result.batches > 3
    log = read_log(spark, out)
    assert sorted(orjson.loads(r["key"])["id"] for r in log) == list(range(300))


def test_data_loss_is_detected(spark: Any, db15: Any, tmp_path: Path) -> None:
    from pgtail.spark.pipeline import run

    setup_source(db15)
    out, chk = tmp_path / "changes", tmp_path / "chk"
    first_workload(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk)
    db15.execute("INSERT INTO items VALUES (1000, 'lost', 1, true, NULL)")
    settle(db15)
    # Someone else consumes the slot.
    db15.execute(
        "SELECT count(*) FROM pg_logical_slot_get_binary_changes('s', NULL, NULL,"
        " 'proto_version', '1', 'publication_names', 'p')"
    )
    db15.execute("INSERT INTO items VALUES (1001, 'after', 1, true, NULL)")
    with pytest.raises(DataLossError, match=r"'s' is already at .* past the batch start"):
        run(spark, options=options(db15), output=out, checkpoint=chk)
    run(spark, options=options(db15, failOnDataLoss="false"), output=out, checkpoint=chk)
    keys = [orjson.loads(r["key"])["id"] for r in read_log(spark, out) if r["table"] == "items"]
    assert 1001 in keys and 1000 not in keys


def test_missing_slot_and_publication(spark: Any, db15: Any, tmp_path: Path) -> None:
    from pgtail.spark.pipeline import run

    setup_source(db15)
    with pytest.raises(SlotError, match="replication slot 'nope' does not exist"):
        run(
            spark,
            options={**options(db15), "slot": "nope"},
            output=tmp_path / "o",
            checkpoint=tmp_path / "c",
        )
    with pytest.raises(PublicationError, match="publication 'nopub' does not exist"):
        run(
            spark,
            options={**options(db15), "publication": "nopub"},
            output=tmp_path / "o",
            checkpoint=tmp_path / "c",
        )
    with pytest.raises(ConfigurationError, match="unknown option"):
        run(
            spark,
            options={**options(db15), "bogus": "1"},
            output=tmp_path / "o",
            checkpoint=tmp_path / "c",
        )
    # Inside Spark (batch read): the error comes back as itself.
    from pgtail.spark.pipeline import translate_spark_error

    with pytest.raises(Exception) as info:
        spark.read.format("pgoutput").options(**{**options(db15), "slot": "nope"}).load().count()
    err = translate_spark_error(info.value)
    assert isinstance(err, SlotError) and "does not exist" in str(err)


def test_run_killed_mid_batch_restarts_from_checkpoint_exactly_once(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    from pgtail.spark.pipeline import run

    setup_source(db15)
    for i in range(24):
        db15.execute(
            "INSERT INTO items SELECT g, md5(g::text), g, g %% 3 = 0, NULL "
            "FROM generate_series(%s, %s) g",
            (i * 1000, i * 1000 + 999),
        )
    settle(db15)
    expected = 24 * 1000
    out, chk = tmp_path / "changes", tmp_path / "chk"
    env = {
        **os.environ,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    command = [
        sys.executable, "-m", "pgtail", "spark", "run", "--dsn", db15.dsn, "--slot", "s",
        "--publication", "p", "--output", str(out), "--checkpoint", str(chk),
        "--master", "local[1]", "--trigger", "available-now",
        "--max-bytes-per-trigger", "200000", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=1",
    ]  # fmt: skip
    proc = subprocess.Popen(
        command, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    killed_in_batch = None
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            # Kill while batch 2 is planned (offset logged) but not committed.
            if (chk / "offsets" / "2").exists() and not (chk / "commits" / "2").exists():
                killed_in_batch = 2
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None and killed_in_batch is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert killed_in_batch == 2, "the run ended before it could be killed mid-batch"
    assert not (chk / "commits" / "2").exists()
    # The slot is no further than the last committed batch.
    committed_end = None
    from pgtail.spark.pipeline import committed_offset

    committed_end = committed_offset(chk)
    assert committed_end is not None and confirmed(db15) <= committed_end["s"]
    before_restart = len(read_log(spark, out))
    assert before_restart < expected

    run(spark, options=options(db15), output=out, checkpoint=chk)
    log = read_log(spark, out)
    ids = [orjson.loads(r["key"])["id"] for r in log]
    assert len(ids) == expected
    assert sorted(ids) == list(range(expected))


def test_busy_slot_is_reported_clearly(spark: Any, db15: Any) -> None:
    import psycopg2
    import psycopg2.extras

    from pgtail.spark.pipeline import translate_spark_error

    setup_source(db15)
    first_workload(db15)
    settle(db15)
    holder = psycopg2.connect(
        db15.dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection
    )
    try:
        cur = holder.cursor()
        cur.start_replication(
            slot_name="s", decode=False,
            options={"proto_version": "1", "publication_names": "p"},
        )  # fmt: skip
        with pytest.raises(Exception) as info:
            spark.read.format("pgoutput").options(
                **options(db15, slotBusyTimeout="1")
            ).load().count()
        err = translate_spark_error(info.value)
        assert isinstance(err, SlotError)
        assert "in use by another process" in str(err) and "spark.speculation" in str(err)
    finally:
        holder.close()


def test_several_slots_read_in_parallel(spark: Any, db15: Any) -> None:
    setup_source(db15)
    db15.execute("CREATE TABLE other (id int PRIMARY KEY)")
    db15.execute("CREATE PUBLICATION p2 FOR TABLE other")
    db15.execute("SELECT pg_create_logical_replication_slot('s2', 'pgoutput')")
    first_workload(db15)
    db15.execute("INSERT INTO other SELECT generate_series(1, 7)")
    settle(db15)
    df = (
        spark.read.format("pgoutput")
        .option("dsn", db15.dsn)
        .option("slots", "s:p,s2:p2")
        .option("messages", "false")
        .load()
    )
    assert df.rdd.getNumPartitions() == 2
    counts = {r["table"]: r["count"] for r in df.groupBy("table").count().collect()}
    assert counts == {"items": 28, "notes": 3, "other": 7}


def test_missing_pyspark_message(monkeypatch: pytest.MonkeyPatch) -> None:
    from pgtail.spark import require_pyspark

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(ConfigurationError, match=r"pip install 'pgtail\[spark\]'"):
        require_pyspark()


def test_cli_errors_are_one_clear_line(db15: Any, tmp_path: Path) -> None:
    setup_source(db15)

    def pgtail(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pgtail", *args],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    base = ["spark", "run", "--dsn", db15.dsn, "--output", str(tmp_path / "o"),
            "--checkpoint", str(tmp_path / "c")]  # fmt: skip
    missing_slot = pgtail(*base, "--slot", "nope", "--publication", "p")
    assert missing_slot.returncode == 1
    assert missing_slot.stderr.startswith("pgtail: error: replication slot 'nope' does not exist")
    assert "Traceback" not in missing_slot.stderr
    # the command the hint suggests is one slot create accepts
    suggested = missing_slot.stderr.split("create it with: ", 1)[1].split(" (or ", 1)[0]
    made = pgtail(*shlex.split(suggested)[1:], "--dsn", db15.dsn)
    assert made.returncode == 0, made.stderr
    db15.execute("SELECT pg_drop_replication_slot('nope')")
    missing_pub = pgtail(*base, "--slot", "s", "--publication", "nopub")
    assert missing_pub.returncode == 1
    assert "publication 'nopub' does not exist" in missing_pub.stderr
    bad_trigger = pgtail(*base, "--slot", "s", "--publication", "p", "--trigger", "soon")
    assert bad_trigger.returncode == 2  # a usage error, like every value pgtail refuses
    assert "invalid trigger 'soon'" in bad_trigger.stderr
    no_log = pgtail("spark", "materialize", "--changes", str(tmp_path / "nothing"),
                    "--output", str(tmp_path / "out"))  # fmt: skip
    assert no_log.returncode == 1 and "does not exist" in no_log.stderr
    assert not (tmp_path / "c").exists()


def test_offsets_follow_the_flushed_wal_without_decoding(db: Any) -> None:
    """The source's offsets and reads (no Spark session: cheap, so on every major)."""
    from pgtail.spark.source import PgoutputStreamReader

    db15 = db
    setup_source(db15)
    db15.execute("CREATE TABLE unpublished (id int, pad text)")
    reader = PgoutputStreamReader(parse_options(options(db15)))
    try:
        begin = reader.initialOffset()
        start = begin["slots"]["s"]
        # Unpublished WAL: the offset moves on (so the slot can release it); the batch
        # reads it on the server and finds nothing.
        db15.execute("INSERT INTO unpublished SELECT g, 'x' FROM generate_series(1, 100) g")
        settle(db15)
        end = reader.latestOffset(begin, reader.getDefaultReadLimit())
        assert (
            end["slots"]["s"]
            >= parse_lsn(str(db15.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
            > start
        )
        rows = [b for p in reader.partitions(begin, end) for b in reader.read(p)]
        assert sum(b.num_rows for b in rows) == 0
        assert confirmed(db15) == start  # an executor never moves the slot
        reader.commit(end)
        assert confirmed(db15) == end["slots"]["s"]
        # A published transaction after it: the next batch has it, and only it.
        db15.execute("INSERT INTO items VALUES (1, 'a', 1, true, NULL)")
        settle(db15)
        later = reader.latestOffset(end, reader.getDefaultReadLimit())
        assert later["slots"]["s"] > end["slots"]["s"]
        rows = [b for p in reader.partitions(end, later) for b in reader.read(p)]
        assert [r["op"] for b in rows for r in b.to_pylist()] == ["insert"]
        # An empty range plans no partition (no connection).
        assert reader.partitions(later, later) == []
    finally:
        reader.stop()


def test_a_range_read_stops_at_its_end_and_never_moves_the_slot(db: Any) -> None:
    from pgtail.spark.slot_options import replication_options
    from pgtail.stream import max_proto_version
    from pgtail.stream.bounded import RangeRead, read_range

    setup_source(db)
    start = confirmed(db)
    db.execute("INSERT INTO items VALUES (1, 'a', 1, true, NULL)")
    settle(db)
    middle = parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
    db.execute("INSERT INTO items VALUES (2, 'b', 1, true, NULL)")
    settle(db)
    end = parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
    from pgtail import catalog

    with catalog.connect(db.dsn) as conn:
        server = catalog.server_info(conn)
    version, opts = replication_options(server, ("p",), binary=False, messages=True, streaming=True)
    assert version == max_proto_version(server.major)  # as pgtail stream chooses
    assert (opts.get("streaming") == "on") == (server.major >= 14)
    read = RangeRead(proto_version=version, options=opts)
    seen: list[int] = []

    def ids(a: int, b: int) -> list[int]:
        return [e.new["id"] for e in read_range(db.dsn, "s", a, b, read, on_position=seen.append)]

    began = time.monotonic()
    assert ids(start, middle) == [1]
    assert ids(middle, end) == [2]
    assert ids(start, end) == [1, 2]
    assert ids(end, end) == []  # no connection, no position
    # the WAL ends at `end`: the read stops there instead of waiting for more
    assert time.monotonic() - began < 20
    assert seen == [start, start, start]
    assert confirmed(db) == start
    # keepalives while the server waits for WAL do not move it either
    db.execute("CREATE TABLE other (id int)")
    db.execute("INSERT INTO other VALUES (1)")
    settle(db)
    after = parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
    assert ids(end, after) == []
    assert confirmed(db) == start


def test_a_range_of_many_small_transactions_reads_each_once_in_commit_order(db15: Any) -> None:
    """The range read hands its changes over in batches of many transactions (not one
    batch per transaction): cut anywhere, each change still lands in exactly one range,
    in commit order, and a lone message at the cut in the range it belongs to."""
    from pgtail.changes import Change, Message
    from pgtail.render.jsonl import json_columns_encoder
    from pgtail.spark.slot_options import replication_options
    from pgtail.stream.bounded import RangeRead, read_range
    from pgtail.stream.policy import BATCH_SIZE

    setup_source(db15)
    start = confirmed(db15)
    count = 2 * BATCH_SIZE + 77  # past a batch's transactions, and its items, twice over
    for i in range(1, count + 1):
        db15.execute("INSERT INTO items VALUES (%s, 'x', 1, true, NULL)", (i,))
    middle = parse_lsn(str(db15.execute("SELECT pg_current_wal_insert_lsn()::text")[0][0]))
    db15.execute("SELECT pg_logical_emit_message(false, 'cut', 'here')")
    for i in range(count + 1, 2 * count + 1):
        db15.execute("INSERT INTO items VALUES (%s, 'y', 2, false, NULL)", (i,))
    settle(db15)
    end = parse_lsn(str(db15.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
    from pgtail import catalog

    with catalog.connect(db15.dsn) as conn:
        server = catalog.server_info(conn)
    version, opts = replication_options(server, ("p",), binary=False, messages=True, streaming=True)
    read = RangeRead(proto_version=version, options=opts, encoder=json_columns_encoder)

    def seen(a: int, b: int) -> list[Any]:
        found: list[Any] = []
        for event in read_range(db15.dsn, "s", a, b, read):
            if isinstance(event, Message):
                found.append(event.prefix)
            elif isinstance(event, Change):
                found.append(event.new["id"])
            else:  # the fast path's runs: one per transaction here
                found += [orjson.loads(line.split(b"\t")[3])["id"] for line in
                          event.lines.splitlines()]  # fmt: skip
        return found

    first, second = seen(start, middle), seen(middle, end)
    assert first == list(range(1, count + 1))
    assert second == ["cut", *range(count + 1, 2 * count + 1)]
    assert seen(start, end) == first + second
    assert confirmed(db15) == start


@pytest.mark.min_major(14)
def test_large_transactions_arrive_streamed_and_count_by_their_commit(db: Any) -> None:
    from pgtail.spark.source import PgoutputBatchReader

    setup_source(db)
    db.execute("ALTER SYSTEM SET logical_decoding_work_mem = '64kB'")
    db.execute("SELECT pg_reload_conf()")
    try:
        # a transaction far past 64 kB, its commit after a small one that began later
        conn = db.connect()
        conn.autocommit = False
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO items SELECT g, repeat('x', 100), g, true, NULL"
                " FROM generate_series(1, 3000) g"
            )
            db.execute("INSERT INTO notes VALUES (1, 'first')")
            settle(db)
            middle = parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
        conn.commit()
        conn.close()
        settle(db)
        reader = PgoutputBatchReader(parse_options(options(db, endingLsn=format_lsn(middle))))
        first = [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]
        assert [(r["table"], r["op"]) for r in first] == [("notes", "insert")]
        reader = PgoutputBatchReader(parse_options(options(db)))
        parts = reader.partitions()
        rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
        items = [orjson.loads(r["key"])["id"] for r in rows if r["table"] == "items"]
        assert items == list(range(1, 3001))
        # it came while in progress (streaming), not held back by the server until it ended
        from pgtail import catalog
        from pgtail.spark.slot_options import replication_options
        from pgtail.stream.bounded import RangeRead, read_range

        with catalog.connect(db.dsn) as plain:
            server = catalog.server_info(plain)
        version, opts = replication_options(
            server, ("p",), binary=False, messages=True, streaming=True
        )
        start, end = parts[0].start, parts[0].end
        events = list(read_range(db.dsn, "s", start, end, RangeRead(version, opts)))
        assert {e.tx.streamed for e in events if e.table.name == "items"} == {True}
    finally:
        db.execute("ALTER SYSTEM RESET logical_decoding_work_mem")
        db.execute("SELECT pg_reload_conf()")


def test_a_batch_read_never_waits_for_wal_past_what_is_flushed(db15: Any) -> None:
    from pgtail.spark.source import PgoutputBatchReader

    setup_source(db15)
    first_workload(db15)
    settle(db15)
    reader = PgoutputBatchReader(parse_options(options(db15, endingLsn="FF/0")))
    began = time.monotonic()
    parts = reader.partitions()
    assert parts and parts[0].end < parse_lsn("FF/0")
    rows = sum(b.num_rows for p in parts for b in reader.read(p))
    assert rows == 20 + 5 + 3 + 3 + 2
    assert time.monotonic() - began < 30


def test_tiny_byte_limits_cut_wal_anywhere_yet_deliver_everything_once(db: Any) -> None:
    """No Spark session: on every major (logical messages only from 14)."""
    from pyspark.sql.streaming.datasource import ReadMaxBytes

    from pgtail.spark.source import PgoutputStreamReader

    db15 = db
    setup_source(db15)
    for i in range(30):
        db15.execute("SELECT pg_logical_emit_message(false, 'n', %s)", (f"{i}:" + "m" * (i * 97),))
        db15.execute("INSERT INTO items VALUES (%s, 'x', 1, true, NULL)", (i,))
        db15.execute(
            "BEGIN; INSERT INTO notes VALUES (%s, 'y');"
            " SELECT pg_logical_emit_message(true, 't', %s); COMMIT",
            (i, str(i)),
        )
    settle(db15)
    reader = PgoutputStreamReader(parse_options(options(db15)))
    seen: list[tuple[str, str]] = []
    batches = 0
    try:
        offset = reader.initialOffset()
        for _ in range(2000):
            end = reader.latestOffset(offset, ReadMaxBytes(331))
            if end == offset:
                break
            batches += 1
            for part in reader.partitions(offset, end):
                for batch in reader.read(part):
                    for row in batch.to_pylist():
                        if row["op"] == "message":
                            content = bytes(row["message"]["content"]).decode()
                            seen.append((row["message"]["prefix"], content.split(":")[0]))
                        else:
                            seen.append(
                                (
                                    row["table"],
                                    str(
                                        orjson.loads(row["key"])[
                                            "id" if row["table"] == "items" else "a"
                                        ]
                                    ),
                                )
                            )
            reader.commit(end)
            offset = end
    finally:
        reader.stop()
    kinds = ("n", "items", "notes", "t") if db.major >= 14 else ("items", "notes")
    expected = sorted([(kind, str(i)) for i in range(30) for kind in kinds])
    assert batches > 30
    assert sorted(seen) == expected


# --- materialize's fold: unchanged TOAST across a key change (pure functions) -------------


def _history(
    *changes: tuple[int, int, str, str, dict[str, Any] | None, list[str], str | None],
) -> Any:
    return [
        {
            "commit_lsn": lsn,
            "seq": seq,
            "sub": 0,
            "kind": kind,
            "after": None if after is None else orjson.dumps(after).decode(),
            "unchanged_toast": toast,
            "origin": origin,
        }
        for lsn, seq, kind, _k, after, toast, origin in changes
    ]


def test_a_key_change_leaves_a_hole_that_the_old_key_fills() -> None:
    from pgtail.spark.fold import fill, fold, targets

    old_key, new_key = '{"id":6}', '{"id":106}'
    # the update moving id 6 to 106 with doc unchanged: a delete of 6, an upsert of 106
    assert targets("update", old_key, '{"id":106,"p":2}', 30, 0) == [
        (old_key, "delete", 0, None),
        (new_key, "insert", 1, old_key),
    ]
    assert targets("update", old_key, '{"id":6,"p":2}', 30, 0) == [(old_key, "upsert", 0, None)]
    old = _history(
        (10, 0, "upsert", old_key, {"id": 6, "p": 1, "doc": "big"}, [], None),
        (20, 0, "upsert", old_key, {"id": 6, "p": 2}, ["doc"], None),
        (30, 0, "delete", old_key, None, [], None),
    )
    assert fold(old) == (None, None)
    new = _history(
        (30, 0, "upsert", new_key, {"id": 106, "p": 2}, ["doc"], old_key),
        (40, 0, "upsert", new_key, {"id": 106, "p": 3}, ["doc"], None),
    )
    row, hole = fold(new)
    assert orjson.loads(row) == {"id": 106, "p": 3}
    assert orjson.loads(hole) == {"from": old_key, "lsn": 30, "seq": 0, "columns": ["doc"]}
    # the old key's state just before the key change has the value
    assert fill(row, hole, old) == ('{"id":106,"p":3,"doc":"big"}', None)
    # a later update that sets the column leaves no hole
    fixed = new + _history((50, 0, "upsert", new_key, {"id": 106, "p": 3, "doc": "new"}, [], None))
    assert fold(fixed) == ('{"id":106,"p":3,"doc":"new"}', None)
    # no history of the old key (before the log began): the column stays out, no hole
    assert fill(row, hole, None) == (row, None)
    assert fill(row, hole, []) == (row, None)


def test_a_chain_of_key_changes_passes_the_hole_back() -> None:
    from pgtail.spark.fold import fill, fold

    a, b, c = '{"id":1}', '{"id":2}', '{"id":3}'
    history_a = _history(
        (10, 0, "upsert", a, {"id": 1, "doc": "big"}, [], None),
        (20, 0, "delete", a, None, [], None),
    )
    history_b = _history(
        (20, 0, "upsert", b, {"id": 2}, ["doc"], a),
        (30, 0, "delete", b, None, [], None),
    )
    history_c = _history((30, 0, "upsert", c, {"id": 3}, ["doc"], b))
    row, hole = fold(history_c)
    row, hole = fill(row, hole, history_b)  # b had no doc either: the hole moves to a
    assert orjson.loads(hole) == {"from": a, "lsn": 20, "seq": 0, "columns": ["doc"]}
    assert fill(row, hole, history_a) == ('{"id":3,"doc":"big"}', None)


def test_equal_rows_of_a_whole_row_key_are_counted() -> None:
    """REPLICA IDENTITY FULL without a primary key: the key is the whole row, and the
    table may hold it more than once; an insert adds a copy, a delete takes one away."""
    from pgtail.spark.fold import fold, fold_copies, targets

    dup = '{"n":5,"s":"dup"}'
    assert targets("insert", dup, dup, 10, 0) == [(dup, "insert", 0, None)]
    inserts = [(10, i, "insert", dup, {"n": 5, "s": "dup"}, [], None) for i in range(3)]
    assert fold_copies(_history(*inserts)) == (dup, None, 3)
    deletes = [(20 + i, 0, "delete", dup, None, [], None) for i in range(3)]
    assert fold_copies(_history(*inserts, *deletes[:1])) == (dup, None, 2)
    assert fold_copies(_history(*inserts, *deletes)) == (None, None, 0)
    # a delete of a row written before the log began takes nothing away from later ones
    later = (40, 0, "insert", dup, {"n": 5, "s": "dup"}, [], None)
    assert fold_copies(_history(*deletes[:1], later)) == (dup, None, 1)
    # an update moving another row onto this one adds a copy
    moved = targets("update", '{"n":1,"s":"a"}', dup, 50, 0)
    assert moved == [('{"n":1,"s":"a"}', "delete", 0, None), (dup, "insert", 1, '{"n":1,"s":"a"}')]
    assert fold_copies(_history(*inserts[:1], (50, 0, "insert", dup, {"n": 5, "s": "dup"}, [],
                                               '{"n":1,"s":"a"}'))) == (dup, None, 2)  # fmt: skip
    assert fold(_history(*inserts)) == (dup, None)


def test_an_output_belongs_to_the_checkpoint_recorded_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Local paths need no Spark: the query id in the checkpoint's metadata against the
    one the output recorded; the checkpoint recorded absolute, however it was named."""
    from pgtail.spark.changelog import RUN_FILE, record_run, refuse_other_checkpoint

    out, chk = tmp_path / "out", tmp_path / "chk"
    (out / "public.t" / "pgtail_batch=0").mkdir(parents=True)
    chk.mkdir()
    (chk / "metadata").write_text('{"id":"q1"}\n')
    names = ["public.t"]
    # an older pgtail's log (nothing recorded) goes on with a checkpoint that has a query
    assert refuse_other_checkpoint(None, str(out), names, chk) is None
    monkeypatch.chdir(tmp_path)
    record_run(None, str(out), "chk", "q1")
    assert orjson.loads((out / RUN_FILE).read_bytes()) == {
        "query": "q1", "checkpoint": str(chk.resolve())
    }  # fmt: skip
    assert refuse_other_checkpoint(None, str(out), names, "chk") == "q1"
    with pytest.raises(ConfigurationError, match="is a new one") as info:
        refuse_other_checkpoint(None, str(out), names, tmp_path / "new")
    assert info.value.hint is not None
    assert info.value.hint.startswith(f"go on with --checkpoint {chk.resolve()}, or write")
    (chk / "metadata").write_text('{"id":"q2"}\n')  # made again at the same place
    with pytest.raises(ConfigurationError, match=r"another query's \(id q2\)") as info:
        refuse_other_checkpoint(None, str(out), names, "chk")
    assert info.value.hint is not None and "deleted or replaced" in info.value.hint
    # no change log there yet (nothing, or only the pyarrow writer's staging): any checkpoint
    assert refuse_other_checkpoint(None, str(out), [], tmp_path / "new") is None
    assert refuse_other_checkpoint(None, str(out), ["_pg_staging"], tmp_path / "new") is None
    assert refuse_other_checkpoint(None, str(tmp_path / "nothing"), [], tmp_path / "new") is None


# --- the CLI's Spark environment and errors -------------------------------------------


def test_a_local_master_gets_as_many_shuffle_partitions_as_cores() -> None:
    """Spark's 200 shuffle partitions make materialize's shuffles 200 Python tasks each
    on a local master; unless --conf sets them, a local session gets one per core."""
    from pgtail.spark.pipeline import local_cores, session_defaults

    assert local_cores("local") == 1
    assert local_cores("local[2]") == 2
    assert local_cores("local[3, 2]") == 3
    assert local_cores("local[*]") == (os.cpu_count() or 1)
    assert local_cores("spark://host:7077") is None and local_cores("yarn") is None
    assert local_cores("local-cluster[2,1,1024]") is None
    assert session_defaults("local[2]", {}) == {"spark.sql.shuffle.partitions": "2"}
    assert session_defaults("local[2]", {"spark.sql.shuffle.partitions": "8"}) == {}
    assert session_defaults("spark://host:7077", {}) == {}


def test_workers_run_pgtails_own_python_unless_chosen() -> None:
    from pgtail.spark.pipeline import use_own_python

    env: dict[str, str] = {}
    assert use_own_python(env, "/venv/bin/python") == {
        "PYSPARK_PYTHON": "/venv/bin/python",
        "PYSPARK_DRIVER_PYTHON": "/venv/bin/python",
    }
    assert env["PYSPARK_PYTHON"] == "/venv/bin/python"
    chosen = {"PYSPARK_PYTHON": "/opt/python3"}
    assert use_own_python(chosen, "/venv/bin/python") == {
        "PYSPARK_DRIVER_PYTHON": "/venv/bin/python"
    }
    assert chosen["PYSPARK_PYTHON"] == "/opt/python3"


def test_any_spark_failure_is_one_line() -> None:
    from pgtail.errors import PgtailError
    from pgtail.spark.pipeline import spark_failure

    worker = Exception(
        "An exception was thrown from the Python worker. Please see the stack trace below.\n"
        "Traceback (most recent call last):\n"
        '  File "worker.py", line 1, in main\n'
        "    raise ImportError('x')\n"
        "ImportError: cannot import name 'Fragment' from 'orjson'\n"
    )
    err = spark_failure(worker)
    assert isinstance(err, PgtailError) and "\n" not in str(err)
    assert str(err).startswith("Spark failed: ImportError: cannot import name 'Fragment'")
    assert "--debug" in str(err)
    java = Exception(
        "An error occurred while calling o42.start.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: boom\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(x.scala:1)\n"
    )
    assert str(spark_failure(java)).startswith(
        "Spark failed: SparkException: Job aborted due to stage failure: boom"
    )
    carried = Exception("pgtail.errors.SlotError: replication slot 's' does not exist")
    assert type(spark_failure(carried)).__name__ == "SlotError"


def test_cli_runs_without_pyspark_python_set(db15: Any, tmp_path: Path) -> None:
    setup_source(db15)
    first_workload(db15)
    settle(db15)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    out = tmp_path / "changes"
    done = subprocess.run(
        [sys.executable, "-m", "pgtail", "spark", "run", "--dsn", db15.dsn, "--slot", "s",
         "--publication", "p", "--output", str(out), "--checkpoint", str(tmp_path / "chk"),
         "--master", "local[1]", "--trigger", "available-now",
         "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=1"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "33 changes in" in done.stderr
    assert "Traceback" not in done.stderr


# --- the typed per-table read -----------------------------------------------------------

TYPED_TABLE = """
CREATE TABLE typed (
    id bigint PRIMARY KEY, small smallint, n int, price numeric(12, 2), huge numeric,
    ratio real, score double precision, ok boolean, name varchar(20), at timestamptz,
    local timestamp, day date, raw bytea, doc jsonb, uid uuid, tags text[], nums int[],
    span interval
)
"""


def test_a_typed_read_has_the_tables_columns_with_spark_types(spark: Any, db15: Any) -> None:
    from pyspark.sql import types as T

    db15.execute(TYPED_TABLE)
    db15.execute("CREATE PUBLICATION tp FOR TABLE typed")
    db15.execute("SELECT pg_create_logical_replication_slot('ts', 'pgoutput')")
    db15.execute(
        "INSERT INTO typed VALUES (1, 2, 3, 1234567890.12,"
        " 123456789012345678901234567890123456789.5, 1.5, 2.25, true, 'café',"
        " '2024-05-06 07:08:09.123456+02', '2024-05-06 07:08:09',"
        " '2024-05-06', '\\x00ff', '{\"a\": [1, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
        " ARRAY['x', NULL, 'y'], ARRAY[1, 2], '1 day 2 hours'),"
        " (2, NULL, NULL, NULL, 'NaN', NULL, NULL, NULL, NULL, 'infinity', NULL, NULL, NULL,"
        " NULL, NULL, NULL, NULL, NULL)"
    )
    db15.execute("UPDATE typed SET n = 4 WHERE id = 1")
    db15.execute("DELETE FROM typed WHERE id = 2")
    settle(db15)
    df = (
        spark.read.format("pgoutput")
        .options(dsn=db15.dsn, slot="ts", publication="tp", table="public.typed")
        .load()
    )
    types = {f.name: f.dataType for f in df.schema.fields}
    assert types["id"] == T.LongType() and types["small"] == T.ShortType()
    assert types["n"] == T.IntegerType() and types["price"] == T.DecimalType(12, 2)
    assert types["huge"] == T.StringType() and types["ratio"] == T.FloatType()
    assert types["score"] == T.DoubleType() and types["ok"] == T.BooleanType()
    assert types["at"] == T.TimestampType() and types["local"] == T.TimestampNTZType()
    assert types["day"] == T.DateType() and types["raw"] == T.BinaryType()
    assert types["doc"] == T.StringType() and types["uid"] == T.StringType()
    assert types["tags"] == T.ArrayType(T.StringType(), True)
    assert types["nums"] == T.ArrayType(T.IntegerType(), True)
    assert types["span"] == T.StringType()
    assert [f.name for f in df.schema.fields][-6:] == [
        "op", "commit_lsn", "commit_time", "xid", "seq", "unchanged_toast"
    ]  # fmt: skip
    rows = df.orderBy("commit_lsn", "seq").collect()
    assert [(r["op"], r["id"]) for r in rows] == [
        ("insert", 1), ("insert", 2), ("update", 1), ("delete", 2)
    ]  # fmt: skip
    first = rows[0]
    from datetime import date, datetime

    assert first["price"] == Decimal("1234567890.12")
    assert first["huge"] == "123456789012345678901234567890123456789.5"
    assert first["name"] == "café" and first["raw"] == bytearray(b"\x00\xff")
    assert first["at"].astimezone(UTC) == datetime(2024, 5, 6, 5, 8, 9, 123456, tzinfo=UTC)
    assert first["local"] == datetime(2024, 5, 6, 7, 8, 9) and first["day"] == date(2024, 5, 6)
    assert orjson.loads(first["doc"]) == {"a": [1, 2]}
    assert first["tags"] == ["x", None, "y"] and first["nums"] == [1, 2]
    assert rows[1]["huge"] == "NaN" and rows[1]["at"] is None  # no Spark value: null
    assert rows[2]["n"] == 4
    assert rows[3]["id"] == 2 and rows[3]["n"] is None  # a delete: the key only


def test_a_typed_read_takes_encoded_runs_and_single_changes_alike(
    db15: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In process: the typed read converts the runs of inserts the assembler encodes
    (`TypedRowBuffer.add_encoded`, Arrow's CSV reader) and the changes it does not (an
    update with its old row, a delete) to the same values, in the stream's order."""
    from pgtail.spark import schema
    from pgtail.spark.source import PgoutputBatchReader

    db15.execute(TYPED_TABLE)
    db15.execute("ALTER TABLE typed REPLICA IDENTITY FULL")
    db15.execute("CREATE TABLE other (id int PRIMARY KEY)")
    db15.execute("CREATE PUBLICATION tp FOR TABLE typed, other")
    db15.execute("SELECT pg_create_logical_replication_slot('ts', 'pgoutput')")
    values = (
        "(%s, 2, 3, 1234567890.12, 'NaN', 1.5, 'Infinity', true, 'café',"
        " '2024-05-06 07:08:09.5+02', '2024-05-06 07:08:09', '2024-05-06', '\\x00ff',"
        " '{\"a\": [1.50, 2]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', ARRAY['x', NULL],"
        " ARRAY[1, 2], '1 day')"
    )
    db15.execute("BEGIN; INSERT INTO typed VALUES " + ", ".join(values % i for i in (1, 2, 3))
                 + "; INSERT INTO other VALUES (1); INSERT INTO typed VALUES " + values % 4
                 + "; UPDATE typed SET n = 5 WHERE id = 2; DELETE FROM typed WHERE id = 3;"
                 " INSERT INTO typed VALUES " + values % 5 + "; COMMIT")  # fmt: skip
    settle(db15)
    calls = {"add_encoded": 0, "add_change": 0}
    for name in calls:
        method = getattr(schema.TypedRowBuffer, name)

        def counted(self: Any, event: Any, _method: Any = method, _name: str = name) -> None:
            calls[_name] += 1
            _method(self, event)

        monkeypatch.setattr(schema.TypedRowBuffer, name, counted)
    reader = PgoutputBatchReader(
        parse_options({"dsn": db15.dsn, "slot": "ts", "publication": "tp", "table": "typed"})
    )
    rows = [r for p in reader.partitions() for b in reader.read(p) for r in b.to_pylist()]
    assert calls["add_encoded"] >= 3 and calls["add_change"] >= 1, calls
    assert [(r["op"], r["id"], r["n"], r["seq"]) for r in rows] == [
        ("insert", 1, 3, 0), ("insert", 2, 3, 1), ("insert", 3, 3, 2), ("insert", 4, 3, 4),
        ("update", 2, 5, 5), ("delete", 3, 3, 6), ("insert", 5, 3, 7),
    ]  # fmt: skip
    first = {k: v for k, v in rows[0].items() if k not in ("op", "id", "seq", "n")}
    for row in rows[1:]:
        assert {k: v for k, v in row.items() if k not in ("op", "id", "seq", "n")} == first
    assert first["doc"] == '{"a": [1.50, 2]}' and first["huge"] == "NaN"
    assert first["score"] == float("inf") and first["raw"] == b"\x00\xff"
    assert first["tags"] == ["x", None] and first["unchanged_toast"] == []


def test_a_typed_read_stops_when_the_table_changes(db15: Any) -> None:
    from pgtail.spark.source import PgoutputBatchReader

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, a text)")
    db15.execute("CREATE PUBLICATION tp FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('ts', 'pgoutput')")
    db15.execute("INSERT INTO t VALUES (1, 'x')")
    reader = PgoutputBatchReader(
        parse_options({"dsn": db15.dsn, "slot": "ts", "publication": "tp", "table": "t"})
    )
    parts = reader.partitions()  # the schema: (id, a)
    db15.execute("ALTER TABLE t ADD COLUMN b int")
    db15.execute("INSERT INTO t VALUES (2, 'y', 3)")
    settle(db15)
    rows = [r for p in parts for b in reader.read(p) for r in b.to_pylist()]
    assert [(r["id"], r["a"]) for r in rows] == [(1, "x")]
    later = PgoutputBatchReader(
        parse_options({"dsn": db15.dsn, "slot": "ts", "publication": "tp", "table": "t"})
    )
    with pytest.raises(ConfigurationError, match=r"table public\.t changed while it was read"):
        for p in later.partitions():
            list(later.read(p))


def test_run_values_give_each_change_its_runs_attributes() -> None:
    """`run_values` reads a run's (dotted) attributes once per run and repeats them for
    each of its changes: runs of several transactions and tables, and of one."""
    from datetime import datetime

    import pyarrow as pa

    from pgtail.changes import EncodedRows, Table, Transaction
    from pgtail.spark.schema import run_values

    at = datetime(2024, 1, 1, tzinfo=UTC)
    first, second = Transaction(7, 100, 110, at), Transaction(8, 200, 210, at, origin="o")
    items, notes = Table(1, "public", "items", "d", ()), Table(2, "s", "notes", "d", ())
    runs = [
        EncodedRows(items, first, 1, 2, b"1\n2\n"),
        EncodedRows(notes, first, 3, 1, b"3\n", "delete"),
        EncodedRows(items, second, 1, 3, b"1\n2\n3\n"),
    ]
    paths = ("op", "table.schema", "table.name", "tx.xid", "tx.end_lsn", "tx.origin")
    columns = [(p, pa.int64() if p in ("tx.xid", "tx.end_lsn") else pa.string()) for p in paths]
    assert [a.to_pylist() for a in run_values(runs, columns)] == [
        ["insert", "insert", "delete", "insert", "insert", "insert"],
        ["public", "public", "s", "public", "public", "public"],
        ["items", "items", "notes", "items", "items", "items"],
        [7, 7, 7, 8, 8, 8],
        [110, 110, 110, 210, 210, 210],
        [None, None, None, "o", "o", "o"],
    ]
    assert [a.to_pylist() for a in run_values(runs[2:], columns)] == [
        ["insert"] * 3,
        ["public"] * 3,
        ["items"] * 3,
        [8] * 3,
        [210] * 3,
        ["o"] * 3,
    ]


def test_quiet_py4j_interrupts_drops_only_py4j_root_records(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Ctrl-C inside a py4j call (Spark's start-up) made py4j log tracebacks through
    the root logger; `spark run` says "stopped" in one line instead. Root records from
    elsewhere and named loggers' records (pgtail's warnings) still reach stderr."""
    import logging

    import py4j.java_gateway

    from pgtail.spark.pipeline import quiet_py4j_interrupts

    root = logging.getLogger()
    before = list(root.filters)
    try:
        quiet_py4j_interrupts()
        quiet_py4j_interrupts()  # once is enough
        assert len(root.filters) == len(before) + 1

        def record(name: str, path: str, text: str) -> logging.LogRecord:
            return logging.LogRecord(name, logging.ERROR, path, 1, text, None, None)

        gateway = py4j.java_gateway.__file__
        assert not root.filter(record("root", gateway, "KeyboardInterrupt while sending command."))
        assert root.filter(record("root", __file__, "someone else's root record"))
        logging.getLogger("pgtail.spark.source").warning("failOnDataLoss=false: going on")
        logging.error("a root record of this test")
        assert [r.getMessage() for r in caplog.records] == [
            "failOnDataLoss=false: going on",
            "a root record of this test",
        ]
    finally:
        root.filters[:] = before
