"""The initial load of ``pgtail spark run --snapshot``: the planner (pure), and end to
end on real servers: ``run --snapshot`` then ``materialize`` equals ``SELECT *``."""

from __future__ import annotations

import os
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import pytest  # noqa: E402

from pgtail.errors import ConfigurationError  # noqa: E402
from pgtail.spark.load_plan import (  # noqa: E402
    BlockRange,
    TableSize,
    admit,
    plan_ranges,
)
from tests.helpers import confirmed  # noqa: E402

GB = 1 << 30


# --- the planner (no Spark, no server) -----------------------------------------------


def test_a_small_table_is_one_range_and_an_old_server_never_splits() -> None:
    assert plan_ranges([TableSize(0, 100)], tasks=8) == [BlockRange(0, None, None, 0, 1, 819200)]
    big = TableSize(0, 1_000_000, splittable=False)
    assert [(r.first, r.stop) for r in plan_ranges([big], tasks=8)] == [(None, None)]


def test_ranges_cover_every_block_once_open_at_both_ends() -> None:
    ranges = plan_ranges([TableSize(0, 10_001), TableSize(1, 3)], range_bytes=8192 * 1000)
    first_table = [r for r in ranges if r.table == 0]
    assert len(first_table) == 11 and first_table[0].first is None
    assert first_table[-1].stop is None  # rows in blocks added since the plan: read too
    for before, after in zip(first_table, first_table[1:], strict=False):
        assert before.stop == after.first
    assert sum(r.bytes for r in first_table) == 10_001 * 8192
    assert [r.number for r in first_table] == list(range(11))
    assert {r.ranges for r in first_table} == {11}
    assert [(r.first, r.stop) for r in ranges if r.table == 1] == [(None, None)]


def test_a_table_worth_splitting_gets_a_range_per_task_at_least() -> None:
    ranges = plan_ranges([TableSize(0, 2_000)], tasks=4)  # 16 MB < one RANGE_BYTES
    assert len(ranges) == 4


def test_a_100_gb_table_is_split_by_size_and_admitted_in_batches() -> None:
    table = TableSize(0, 100 * GB // 8192)
    ranges = plan_ranges([table], tasks=2)
    assert len(ranges) == 800  # 128 MiB each: the number grows with the table, not the cores
    batches = admit(ranges)  # 8 GiB of table at most per batch: 64 ranges
    assert [len(b) for b in batches] == [64] * 12 + [32]
    # per task: with 2 cores, 32 ranges of a batch each; with 64 executor cores, one
    for cores in (2, 64):
        assert -(-len(batches[0]) // cores) == 64 // cores
    assert sum(len(b) for b in batches) == 800


def test_admission_never_leaves_a_range_out_even_when_larger_than_a_batch() -> None:
    ranges = [BlockRange(0, None, None, 0, 1, 10 * GB), BlockRange(1, None, None, 0, 1, 1)]
    assert admit(ranges, GB) == [[ranges[0]], [ranges[1]]]
    assert admit([], GB) == []


def test_snapshot_rows_are_inserts_of_their_key_and_keyless_copies_count() -> None:
    pytest.importorskip("pyspark")
    from pgtail.spark.fold import targets

    assert targets("snapshot", '{"id":1}', '{"id":1,"v":2}', 16, 0) == [
        ('{"id":1}', "insert", 0, None)
    ]
    assert targets("snapshot", None, None, 16, -1) == []  # a table's marker
    one = targets("snapshot", None, '{"v":1}', 16, 3)
    # equal rows at the same place of two ranges are one key: two copies of it
    assert one == targets("snapshot", None, '{"v":1}', 16, 3)
    assert one != targets("snapshot", None, '{"v":2}', 16, 3)


# --- end to end -----------------------------------------------------------------------


def _setup(db: Any) -> None:
    db.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text, price numeric, ok boolean,"
        " big bigint, f float8, d date, tags int[])"
    )
    db.execute(
        "INSERT INTO items SELECT g, 'item ' || g || repeat('x', 200), g * 1.5, g % 2 = 0,"
        " g * 10000000000, g / 3.0, date '2024-01-01' + g % 300, ARRAY[g, g + 1]"
        " FROM generate_series(1, 3000) g"
    )
    db.execute("CREATE TABLE bag (a int, b text)")  # no key: a multiset
    db.execute("ALTER TABLE bag REPLICA IDENTITY FULL")
    db.execute("INSERT INTO bag SELECT g % 7, repeat('b', 100) FROM generate_series(1, 2000) g")
    db.execute("CREATE TABLE empty (id int PRIMARY KEY)")
    db.execute("CREATE PUBLICATION p FOR TABLE items, bag, empty")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    # after the slot, before the load: in the slot and in the load, written once
    db.execute("UPDATE items SET name = 'before load' WHERE id <= 100")
    db.execute("DELETE FROM bag WHERE ctid IN (SELECT ctid FROM bag WHERE a = 3 LIMIT 10)")


class _Writer:
    """Changes the tables while a load runs (the result is right however they overlap)."""

    def __init__(self, db: Any, base: int = 100_000) -> None:
        self.db = db
        self.base = base
        self.stop = threading.Event()
        self.rounds = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = self.db.connect()
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set() or self.rounds < 3:
                    n = self.rounds
                    cur.execute("UPDATE items SET price = price + 1 WHERE id %% 50 = %s", (n,))
                    cur.execute(
                        "INSERT INTO items VALUES (%s, 'new', 1, true, 1, 0.5, '2020-01-01', '{}')",
                        (self.base + n,),
                    )
                    cur.execute("DELETE FROM items WHERE id = %s", (3000 - n,))
                    cur.execute("INSERT INTO bag VALUES (1, %s), (1, %s)", ("dup", "dup"))
                    cur.execute(
                        "DELETE FROM bag WHERE ctid = (SELECT ctid FROM bag WHERE a = 2 LIMIT 1)"
                    )
                    self.rounds += 1
                    # paced: a few hundred rounds overlap a load as well as thousands, and
                    # each round is changes the next runs stream and materialize
                    time.sleep(0.02)
        finally:
            conn.close()

    def __enter__(self) -> _Writer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()


def _table_rows(db: Any, table: str) -> list[tuple[Any, ...]]:
    rows = []
    for row in db.execute(f"SELECT * FROM {table}"):  # noqa: S608
        rows.append(tuple(str(v) if isinstance(v, Decimal) else v for v in row))
    return sorted(rows, key=repr)


def _state_rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    if not path.exists():
        return []
    rows = [tuple(r) for r in spark.read.parquet(str(path)).collect()]
    return sorted(rows, key=repr)


def _assert_equal(spark: Any, db: Any, current: Path, counts: dict[str, int]) -> None:
    for table in ("items", "bag", "empty"):
        expected = _table_rows(db, table)
        assert counts.get(f"public.{table}", 0) == len(expected), table
        assert _state_rows(spark, current / f"public.{table}") == expected, table


@pytest.fixture
def small_ranges(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ranges of 64 KiB, batches of 512 KiB: these small tables load in many ranges and
    several batches, as a large one would."""
    from pgtail.spark import load_plan

    monkeypatch.setattr(load_plan, "RANGE_BYTES", 64 << 10)
    monkeypatch.setattr(load_plan, "MIN_SPLIT_BYTES", 64 << 10)
    monkeypatch.setattr(load_plan, "BATCH_BYTES", 512 << 10)


@pytest.mark.spark
@pytest.mark.majors(13, 15, 18)
@pytest.mark.parametrize("writer", ["pyarrow", "spark"])
def test_run_snapshot_then_materialize_equals_the_tables(
    spark: Any, db: Any, tmp_path: Path, small_ranges: None, writer: str
) -> None:
    from pgtail.spark.load import LOAD_FILE, read_record
    from pgtail.spark.pipeline import materialize, read_changes, run

    if writer == "spark" and db.major != 15:
        pytest.skip("the Spark writer on one major (CI time)")
    _setup(db)
    options = {"dsn": db.dsn, "slot": "s", "publication": "p"}
    out, chk = tmp_path / "changes", tmp_path / "chk"
    before = confirmed(db)
    lines: list[str] = []
    with _Writer(db):
        run(spark, options=options, output=out, checkpoint=chk, writer=writer,
            snapshot=True, on_load=lines.append)  # fmt: skip
    record = read_record(spark, str(out))
    assert record is not None and record["state"] == "done"
    lsn = int(record["lsn"])
    assert confirmed(db) >= before
    assert any("ranges in" in line for line in lines)
    # the load in several batches, of several ranges each (before 14: a task per table)
    batches = list((out / "public.items").glob("pgtail_batch=snapshot-*"))
    assert len(batches) >= (2 if db.major >= 14 else 1)
    log = read_changes(spark, out)
    snap = log.where("op = 'snapshot'").collect()
    assert {r["commit_lsn"] for r in snap} == {lsn}
    assert {r["table"] for r in snap} == {"items", "bag", "empty"}  # empty: its marker
    run(spark, options=options, output=out, checkpoint=chk, writer=writer)  # the rest
    current = tmp_path / "current"
    _assert_equal(spark, db, current, materialize(spark, out, current))

    # An existing pipeline loads one table again (a crash left that load unfinished:
    # the next run deletes what it wrote and loads it again from a new snapshot).
    db.execute("UPDATE bag SET b = 'changed' WHERE a = 5")
    stale = out / "public.bag" / f"pgtail_batch=snapshot-{1:016X}-0"
    stale.mkdir()
    first = next((out / "public.bag").glob("pgtail_batch=snapshot-*/*.parquet"))
    (stale / first.name).write_bytes(first.read_bytes())  # rows that would count twice
    (out / LOAD_FILE).write_text('{"state": "loading", "lsn": 1, "patterns": ["bag"]}')
    with pytest.raises(ConfigurationError, match="did not finish"):
        materialize(spark, out, tmp_path / "refused")
    with _Writer(db, 200_000):
        run(spark, options=options, output=out, checkpoint=chk, writer=writer)
    assert not stale.exists()
    record = read_record(spark, str(out))
    assert record is not None and record["state"] == "done" and record["tables"] == ["public.bag"]
    assert int(record["lsn"]) > lsn
    run(spark, options=options, output=out, checkpoint=chk, writer=writer)
    current = tmp_path / "current2"
    _assert_equal(spark, db, current, materialize(spark, out, current))


@pytest.mark.spark
def test_a_snapshot_table_matching_nothing_is_refused(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    from pgtail.spark.pipeline import run

    _setup(db15)
    options = {"dsn": db15.dsn, "slot": "s", "publication": "p"}
    with pytest.raises(ConfigurationError, match="matches no published table"):
        run(spark, options=options, output=tmp_path / "o", checkpoint=tmp_path / "c",
            snapshot_tables=["nosuch*"])  # fmt: skip
    # nothing was claimed or recorded as loading
    assert not (tmp_path / "o" / "_pgtail_load.json").exists()


# --- no password in what Spark keeps and shows -----------------------------------------

SECRET = "Zq9-not-in-any-plan"


def test_a_dsn_travels_without_its_secrets_and_gets_them_back() -> None:
    pytest.importorskip("psycopg2")
    from psycopg2.extensions import parse_dsn

    from pgtail.spark.secrets import hide_secrets, join_dsn, split_dsn

    public, secrets = split_dsn("postgresql://u:p%40w@h:5433/db?sslpassword=k&sslmode=require")
    assert secrets == {"password": "p@w", "sslpassword": "k"}
    assert "p@w" not in public and parse_dsn(public)["sslmode"] == "require"
    assert parse_dsn(join_dsn(public, secrets)) == parse_dsn("host=h port=5433 dbname=db "
        "user=u password=p@w sslpassword=k sslmode=require")  # fmt: skip
    assert split_dsn("host=h dbname=d") == ("host=h dbname=d", {})
    assert split_dsn("") == ("", {})
    assert join_dsn("", {"password": "x"}) == "password=x"
    hidden = hide_secrets({"DSN": "host=h password=x", "slot": "s"})
    assert hidden == {"DSN": "host=h", "password": "x", "slot": "s"}
    # a password option given wins over the DSN's
    assert hide_secrets({"dsn": "password=x", "password": "y"}) == {"dsn": "", "password": "y"}


@pytest.fixture
def password_role(db15: Any) -> Any:
    """A role that must give its password (scram) on loopback; every other role is
    trusted as before."""
    server = db15.server
    hba = (server.datadir / "pg_hba.conf").read_text()
    db15.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'spark_pw') THEN"
        f" CREATE ROLE spark_pw LOGIN REPLICATION PASSWORD '{SECRET}'; END IF; END $$"
    )
    server.set_hba(
        "host all spark_pw 127.0.0.1/32 scram-sha-256\n"
        "host replication spark_pw 127.0.0.1/32 scram-sha-256\n" + hba
    )
    try:
        yield f"postgresql://spark_pw@127.0.0.1:{server.port}/{db15.name}"
    finally:
        server.set_hba(hba)


def _shown(spark: Any, frame: Any) -> list[str]:
    """What Spark shows of a frame: its plans in every explain mode, the analyzed plan
    as JSON, and its sources' options as Spark's redaction leaves them."""
    import base64
    import contextlib

    jvm = spark.sparkContext._jvm
    execution = frame._jdf.queryExecution()
    texts = [
        jvm.PythonSQLUtils.explainString(execution, mode)
        for mode in ("extended", "formatted", "cost")
    ]
    texts.append(execution.analyzed().toJSON())
    leaves = execution.analyzed().collectLeaves()
    conf = spark._jsparkSession.sessionState().conf()
    options: dict[str, str] = {}
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        for getter in ("options", "extraOptions"):
            if getter in dir(leaf):
                given = getattr(leaf, getter)().asCaseSensitiveMap()
                redacted = conf.redactOptions(jvm.PythonUtils.toScalaMap(given))
                options.update(dict(jvm.scala.jdk.javaapi.CollectionConverters.asJava(redacted)))
    assert options, "no options found in the plan"
    for value in options.values():
        texts.append(value)
        with contextlib.suppress(ValueError):
            texts.append(base64.b64decode(value, validate=True).decode("latin-1"))
    return texts


@pytest.mark.spark
def test_no_password_in_what_spark_shows_and_the_reads_still_work(
    spark: Any, db15: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, password_role: str
) -> None:
    import psycopg2
    from pyspark.sql.readwriter import DataFrameReader
    from pyspark.sql.streaming.readwriter import DataStreamReader

    from pgtail.spark.pipeline import read_changes, run

    _setup(db15)
    db15.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO spark_pw")
    with pytest.raises(psycopg2.OperationalError):  # the password is needed
        psycopg2.connect(password_role).close()
    dsn = password_role.replace("spark_pw@", f"spark_pw:{SECRET}@")
    frames: list[Any] = []
    for cls in (DataFrameReader, DataStreamReader):

        def spy(self: Any, *args: Any, _load: Any = cls.load, **kwargs: Any) -> Any:
            frame = _load(self, *args, **kwargs)
            frames.append(frame)
            return frame

        monkeypatch.setattr(cls, "load", spy)
    options = {"dsn": dsn, "slot": "s", "publication": "p"}
    out = tmp_path / "changes"
    run(spark, options=options, output=out, checkpoint=tmp_path / "chk", snapshot=True)
    log = read_changes(spark, out)
    # loaded, with the password: 3000 items, 1990 bag, three markers
    assert log.where("op = 'snapshot'").count() == 4993
    assert log.where("op = 'update'").count() == 100  # and streamed
    formats = {f._jdf.queryExecution().analyzed().simpleString(100) for f in frames}
    assert any("pgtail_load" in f for f in formats), formats
    assert any("pgtail_changelog" in f for f in formats), formats
    for frame in frames:
        for text in _shown(spark, frame):
            assert SECRET not in text
    # a user's own job: the password as option password, the DSN without it
    db15.execute("UPDATE items SET name = 'after' WHERE id = 1")
    own = spark.read.format("pgoutput").options(dsn=password_role, password=SECRET)
    pending = own.option("slot", "s").option("publication", "p").load()
    assert [r["op"] for r in pending.collect()] == ["update"]
    stream = (
        spark.readStream.format("pgoutput")
        .options(dsn=password_role, password=SECRET, slot="s", publication="p")
        .load()
    )
    for frame in (pending, stream):
        for text in _shown(spark, frame):
            assert SECRET not in text
    # Spark prints a streaming source's options in its plans: redacted by key
    plan = stream._sc._jvm.PythonSQLUtils.explainString(stream._jdf.queryExecution(), "extended")
    assert "password=*********(redacted)" in plan
