"""`pgtail spark run`'s typed per-table change logs and `materialize`'s typed snapshots:
real PostgreSQL, real local Spark.

The oracles: the typed per-table read of the source (``option("table", ...)``) for the
change log, and ``SELECT`` of each table converted by the same rule
(`pgtail.values` text converters, then `pgtail.spark.types.spark_field`) for snapshots.
"""

from __future__ import annotations

import math
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import orjson  # noqa: E402
import pytest  # noqa: E402

from pgtail.errors import ConfigurationError  # noqa: E402
from pgtail.sqlnames import quote_ident  # noqa: E402
from tests.helpers import confirmed, settle  # noqa: E402

pytestmark = pytest.mark.spark

pyspark = pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


TYPED_TABLE = """
CREATE TABLE typed (
    id bigint PRIMARY KEY, small smallint, n int, price numeric(12, 2), huge numeric,
    ratio real, score double precision, ok boolean, name varchar(20), at timestamptz,
    local timestamp, day date, raw bytea, doc jsonb, uid uuid, tags text[], nums int[],
    span interval, note text, docs json[]
)
"""

ROWS = """
INSERT INTO typed VALUES
 (1, 2, 3, 1234567890.12, 123456789012345678901234567890123456789.5, 1.5, 2.25, true,
  'café', '2024-05-06 07:08:09.123456+02', '2024-05-06 07:08:09', '2024-05-06', '\\x00ff',
  '{"a": [1.50, 2], "b": "x"}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  ARRAY['x', NULL, 'y'], ARRAY[1, 2], '1 day 2 hours', 'short',
  ARRAY['{"k": 1}', '"s"']::json[]),
 (2, NULL, NULL, 'NaN', 'NaN', 'NaN', '-Infinity', NULL, NULL, 'infinity', '-infinity',
  'infinity', NULL, '"just a string"', NULL, '{}', NULL, NULL, NULL, NULL),
 (3, -32768, 2147483647, -0.01, '-1e-30', '-Infinity', 'NaN', false, '', '1999-12-31 23:59:59+00',
  NULL, '0044-03-15 BC', '\\x', '[]', NULL, ARRAY[NULL]::text[], '{}', '-3 mons', NULL, '{}')
"""

BIG = "".join(f"{i:08x}" for i in range(2000))  # 16 kB: TOASTed out of line


def setup(db: Any) -> None:
    db.execute(TYPED_TABLE)
    db.execute("CREATE TABLE pairs (a int, b text, PRIMARY KEY (a, b))")
    db.execute("CREATE PUBLICATION p FOR TABLE typed, pairs")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")


def first_changes(db: Any) -> None:
    db.execute(ROWS)
    db.execute("UPDATE typed SET n = 4, note = %s WHERE id = 1", (BIG,))
    db.execute("INSERT INTO pairs VALUES (1, 'x'), (2, 'y')")
    db.execute("SELECT pg_logical_emit_message(true, 'pfx', 'hello')")


def second_changes(db: Any) -> None:
    db.execute("UPDATE typed SET score = 9.5 WHERE id = 1")  # note: unchanged TOAST
    db.execute("UPDATE typed SET id = 10 WHERE id = 1")  # key change, note unchanged
    db.execute("DELETE FROM typed WHERE id = 2")
    db.execute("TRUNCATE pairs")
    db.execute("INSERT INTO pairs VALUES (3, 'z')")
    db.execute("INSERT INTO typed (id, name) VALUES (4, 'new')")


def options(db: Any, **extra: str) -> dict[str, str]:
    return {"dsn": db.dsn, "slot": "s", "publication": "p", **extra}


def same(value: Any) -> Any:
    """A value comparable with ==: NaN equals NaN, lists compare element-wise."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, list):
        return [same(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def as_dicts(rows: list[Any]) -> list[dict[str, Any]]:
    return [{k: same(v) for k, v in r.asDict().items()} for r in rows]


def typed_read(spark: Any, db: Any, table: str) -> list[dict[str, Any]]:
    """The typed per-table read of what is pending on the slot (peeks: the slot stays)."""
    df = spark.read.format("pgoutput").options(**options(db, table=table)).load()
    return as_dicts(df.orderBy("commit_lsn", "seq").collect())


def typed_log(spark: Any, out: Path, table: str) -> Any:
    return spark.read.option("mergeSchema", "true").parquet(str(out / table))


READ_METADATA = {
    "op": "_pg_op",
    "commit_lsn": "_pg_commit_lsn",
    "commit_time": "_pg_commit_time",
    "xid": "_pg_xid",
    "seq": "_pg_seq",
    "unchanged_toast": "_pg_unchanged_toast",
}


def as_read(rows: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """Change log rows with the typed read's columns (its metadata names)."""
    back = {log: read for read, log in READ_METADATA.items()}
    return [{back.get(k, k): v for k, v in r.items() if k in names or k in back} for r in rows]


def select_typed(spark: Any, db: Any, table: str, schema: Any) -> list[dict[str, Any]]:
    """SELECT * of a table as the typed rule makes it: each value's text through pgtail's
    text converter (as decoding gives it), then the Spark converter; collected by Spark."""
    import psycopg2.extensions

    from pgtail import catalog
    from pgtail.catalog.connection import decoding_set_statement
    from pgtail.spark.types import spark_field
    from pgtail.values import converters

    with catalog.connect(db.dsn) as conn:
        columns = catalog.table_columns(conn, "public", table)
        # every value as the text the server sends (its output function's), unparsed
        raw = psycopg2.extensions.new_type(
            tuple({c.type_oid for c in columns}), "RAW", lambda value, cur: value
        )
        psycopg2.extensions.register_type(raw, conn)
        with conn.cursor() as cur:
            cur.execute(decoding_set_statement())
            cur.execute(f"SELECT * FROM {table}")
            texts = cur.fetchall()
    convert = [
        (converters(c.type_oid, c.typmod)[0], spark_field(c)[1]) for c in columns
    ]  # fmt: skip
    rows = [
        tuple(
            None if text is None else to_spark(to_json(text.encode()))
            for text, (to_json, to_spark) in zip(row, convert, strict=True)
        )
        for row in texts
    ]
    return as_dicts(spark.createDataFrame(rows, schema).collect())


def by(rows: list[dict[str, Any]], *keys: str) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


WRITERS = ["pyarrow", "spark"]  # pgtail spark run --writer: the same logs either way


def read_elsewhere(log: Path, seqs: list[int]) -> None:
    """Every change of a table's log, read as it is (no option) by pandas, pyarrow
    (read_table and dataset) and, when installed, DuckDB and Polars: the batch id a
    column (0 and 1), Spark's _SUCCESS marker files skipped."""
    import pandas
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    tables = {
        "read_table": pq.read_table(str(log)).to_pandas(),
        "dataset": ds.dataset(str(log), partitioning="hive").to_table().to_pandas(),
        "pandas": pandas.read_parquet(str(log)),
    }
    try:
        import duckdb

        query = f"SELECT * FROM read_parquet('{log}/*/*.parquet', hive_partitioning = true)"
        tables["duckdb"] = duckdb.sql(query).df()
    except ImportError:
        pass
    try:
        import polars

        tables["polars"] = polars.read_parquet(str(log)).to_pandas()
    except ImportError:
        pass
    for reader, frame in tables.items():
        assert sorted(frame["_pg_seq"]) == sorted(seqs), reader
        assert sorted({int(b) for b in frame["pgtail_batch"]}) == [0, 1], reader


@pytest.mark.majors(15, 18)
@pytest.mark.parametrize("writer", WRITERS)
def test_run_writes_typed_logs_and_materialize_equals_select(
    spark: Any, db: Any, tmp_path: Path, writer: str
) -> None:
    from pyspark.sql import types as T

    from pgtail.spark.pipeline import materialize, read_changes, run

    setup(db)
    out, chk, current = tmp_path / "changes", tmp_path / "chk", tmp_path / "current"
    first_changes(db)
    settle(db)
    expected_first = typed_read(spark, db, "public.typed")
    result = run(spark, options=options(db), output=out, checkpoint=chk, writer=writer)
    assert result.rows == len(expected_first) + 2 + (1 if db.major >= 14 else 0)
    second_changes(db)
    settle(db)
    expected_second = typed_read(spark, db, "public.typed")
    run(spark, options=options(db), output=out, checkpoint=chk, writer=writer)
    # nothing new: nothing added
    run(spark, options=options(db), output=out, checkpoint=chk, writer=writer)

    log = typed_log(spark, out, "public.typed")
    read_schema = (
        spark.read.format("pgoutput").options(**options(db, table="public.typed")).load().schema
    )
    columns = [f.name for f in read_schema.fields][:-6]
    # the table's columns with the typed read's types, in order, then the metadata
    assert [(f.name, f.dataType) for f in log.schema.fields][: len(columns)] == [
        (f.name, f.dataType) for f in read_schema.fields[: len(columns)]
    ]
    assert [f.name for f in log.schema.fields][len(columns) :] == [
        "_pg_op", "_pg_commit_lsn", "_pg_end_lsn", "_pg_commit_time", "_pg_xid", "_pg_seq",
        "_pg_unchanged_toast", "_pg_origin", "_pg_schema", "_pg_table", "_pg_key",
        "_pg_before", "_pg_after", "pgtail_batch",
    ]  # fmt: skip
    assert log.schema["pgtail_batch"].dataType == T.IntegerType()
    assert log.schema["price"].dataType == T.DecimalType(12, 2)
    rows = as_dicts(log.orderBy("_pg_commit_lsn", "_pg_seq").collect())
    # the same values as the typed read of the same changes, every type
    assert as_read(rows, columns) == expected_first + expected_second
    ops = [(r["_pg_op"], r["id"]) for r in rows]
    assert ops == [
        ("insert", 1), ("insert", 2), ("insert", 3), ("update", 1),
        ("update", 1), ("update", 10), ("delete", 2), ("insert", 4),
    ]  # fmt: skip
    assert rows[4]["_pg_unchanged_toast"] == ["note"] and rows[4]["note"] is None
    assert orjson.loads(rows[5]["_pg_key"]) == {"id": 1}  # the old key of a key change
    assert rows[1]["doc"] == '"just a string"'  # json text, not the string inside
    assert rows[0]["doc"] == '{"a": [1.50, 2], "b": "x"}'  # the server's text
    assert rows[0]["docs"] == ['{"k": 1}', '"s"']
    assert orjson.loads(rows[0]["_pg_after"])["id"] == 1  # the JSON row is kept
    # Parquet's own timestamp types, readable outside Spark
    import pyarrow as pa
    import pyarrow.parquet as pq

    arrow = pq.read_schema(next((out / "public.typed").glob("pgtail_batch=0/*.parquet")))
    assert arrow.field("at").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("local").type == pa.timestamp("us")
    assert arrow.field("_pg_commit_time").type == pa.timestamp("us", tz="UTC")
    read_elsewhere(out / "public.typed", [r["_pg_seq"] for r in rows])
    pairs = as_dicts(typed_log(spark, out, "public.pairs").orderBy("_pg_commit_lsn").collect())
    assert [(r["_pg_op"], r["a"], r["b"]) for r in pairs] == [
        ("insert", 1, "x"), ("insert", 2, "y"), ("truncate", None, None), ("insert", 3, "z")
    ]  # fmt: skip
    # read_changes: every table and the messages, untyped, as the source gives them
    untyped = read_changes(spark, out).collect()
    assert len(untyped) == len(rows) + len(pairs) + (1 if db.major >= 14 else 0)
    if db.major >= 14:
        (message,) = [r for r in untyped if r["op"] == "message"]
        assert bytes(message["message"]["content"]) == b"hello"

    counts = materialize(spark, out, current)
    assert counts == {"public.typed": 3, "public.pairs": 1}
    snapshot = spark.read.parquet(str(current / "public.typed"))
    # SELECT *: the same columns in the same order with the typed read's types
    assert [(f.name, f.dataType) for f in snapshot.schema.fields] == [
        (f.name, f.dataType) for f in read_schema.fields[: len(columns)]
    ]
    assert by(as_dicts(snapshot.collect()), "id") == by(
        select_typed(spark, db, "typed", snapshot.schema), "id"
    )
    moved = next(r for r in as_dicts(snapshot.collect()) if r["id"] == 10)
    assert moved["note"] == BIG  # unchanged TOAST across the key change, from the old key
    pairs_now = spark.read.parquet(str(current / "public.pairs"))
    assert as_dicts(pairs_now.collect()) == select_typed(spark, db, "pairs", pairs_now.schema)


def test_a_replayed_batch_rewrites_its_directories(spark: Any, db15: Any, tmp_path: Path) -> None:
    from pgtail.spark.changelog import ChangeLogWriter, read_changes

    setup(db15)
    first_changes(db15)
    settle(db15)
    out = tmp_path / "changes"
    batch = spark.read.format("pgoutput").options(**options(db15)).load()
    expected = batch.count()
    writer = ChangeLogWriter(out, db15.dsn)
    try:
        writer(batch, 7)
        once = sorted(map(tuple, read_changes(spark, out).collect()))
        writer(batch, 7)  # Spark replays a batch it did not commit with the same id
        assert sorted(map(tuple, read_changes(spark, out).collect())) == once
        assert len(once) == expected
        assert sorted(p.name for p in (out / "public.typed").iterdir()) == ["pgtail_batch=7"]
        writer(batch.where("op = 'insert'"), 8)  # another batch adds
        assert read_changes(spark, out).count() == expected + 5
    finally:
        writer.close()


def test_the_pyarrow_writer_stages_in_the_task_and_moves_the_files_on_commit(
    spark: Any, db15: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pgtail.spark import direct, source
    from pgtail.spark.changelog import read_changes
    from pgtail.spark.source import SourceDriver, parse_options

    setup(db15)
    first_changes(db15)
    settle(db15)
    out = tmp_path / "changes"
    expected = sorted(
        map(tuple, spark.read.format("pgoutput").options(**options(db15)).load().collect())
    )
    driver = SourceDriver(parse_options(options(db15)))
    try:
        start = driver.initial()
        [partition] = driver.partitions(start, driver.latest(start, None, None, wait=True))
    finally:
        driver.close()

    def stage() -> Any:  # one task: the manifest DataFrame foreachBatch would get
        [manifest] = direct.stage_partition(partition, str(out))
        return spark.createDataFrame(manifest.to_pylist(), direct.MANIFEST)

    # a task attempt that fails half way takes its staged files with it
    real = source.untyped_batches

    def failing(events: Any, batch_rows: int, *, later: bool = False) -> Any:
        for batch in real(events, 1, later=later):
            yield batch
            # the background thread has begun staging what was read
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                (out / "_pg_staging").is_dir() and any((out / "_pg_staging").iterdir())
            ):
                time.sleep(0.01)
            raise OSError("connection lost")

    monkeypatch.setattr(source, "untyped_batches", failing)
    with pytest.raises(OSError, match="connection lost"):
        list(direct.stage_partition(partition, str(out)))
    assert list((out / "_pg_staging").iterdir()) == []
    monkeypatch.undo()
    # so does one whose conversion fails (in the task's background thread), from the
    # values' text (stage lines) or from the rows' JSON

    def broken(self: Any, rows: Any) -> Any:
        raise ValueError("cannot convert")

    for route in ("add_lines", "arrays"):
        monkeypatch.setattr(direct._TableFile, route, broken)
        if route == "arrays":  # every row from its JSON
            monkeypatch.setattr(direct._TableFile, "takes_lines", lambda self, table: False)
        with pytest.raises(ValueError, match="cannot convert"):
            list(direct.stage_partition(partition, str(out)))
        assert list((out / "_pg_staging").iterdir()) == []
        monkeypatch.undo()

    stale = stage()  # an attempt whose batch is never committed
    assert {r["kind"] for r in stale.collect()} == {"table", "messages"}
    committer = direct.ChangeLogCommitter(out)
    committer(stage(), 7)
    assert sorted(map(tuple, read_changes(spark, out).collect())) == expected
    assert committer.changes[7] == len(expected)
    assert not (out / "_pg_staging").exists()  # the stale attempt's files too
    committer(stage(), 7)  # Spark replays a batch it did not commit with the same id
    assert sorted(map(tuple, read_changes(spark, out).collect())) == expected
    assert sorted(p.name for p in (out / "public.typed").iterdir()) == ["pgtail_batch=7"]
    assert len(list((out / "public.typed" / "pgtail_batch=7").iterdir())) == 1
    committer(stage(), 8)  # another batch adds
    assert read_changes(spark, out).count() == 2 * len(expected)


def test_the_writer_follows_the_output_unless_chosen() -> None:
    from pgtail.spark.writers import chosen_writer

    assert chosen_writer("auto", "/data/changes") == "pyarrow"
    assert chosen_writer("auto", "file:///data/changes") == "pyarrow"
    assert chosen_writer("auto", "s3a://lake/changes") == "spark"
    assert chosen_writer("spark", "/data/changes") == "spark"
    with pytest.raises(ConfigurationError, match="local outputs only"):
        chosen_writer("pyarrow", "s3a://lake/changes")
    with pytest.raises(ConfigurationError, match="unknown writer 'arrow'"):
        chosen_writer("arrow", "/data")


class _Reads:
    """A stand-in for Spark's readers: what a writer asked of them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def format(self, name: str) -> _Reads:
        self.calls.append(("format", name))
        return self

    def option(self, key: str, value: str) -> _Reads:
        self.calls.append(("option", key, value))
        return self


def test_one_writer_interface_for_the_query_and_the_load(tmp_path: Path) -> None:
    """`pipeline.run` and the load ask a `LogWriter` for their reads and sinks, and
    never which writer it is."""
    from types import SimpleNamespace

    from pgtail.spark import direct
    from pgtail.spark.changelog import ChangeLogWriter
    from pgtail.spark.writers import PyarrowWriter, SparkWriter, log_writer

    local = log_writer("auto", f"{tmp_path}/out/", "dbname=app")
    assert isinstance(local, PyarrowWriter) and local.root == str(tmp_path / "out")
    reads = _Reads()
    local.stream_reader(SimpleNamespace(readStream=reads))
    local.load_reader(reads)
    assert reads.calls == [
        ("format", "pgtail_changelog"),
        ("option", "path", str(tmp_path / "out")),
        ("option", "output", str(tmp_path / "out")),
    ]
    assert isinstance(local.sink(), direct.ChangeLogCommitter)

    remote = log_writer("auto", "s3a://lake/changes/", "dbname=app", concurrent_writes=2)
    assert isinstance(remote, SparkWriter) and remote.output == "s3a://lake/changes"
    reads = _Reads()
    remote.stream_reader(SimpleNamespace(readStream=reads))
    assert remote.load_reader(reads) is reads
    assert reads.calls == [("format", "pgoutput")]
    sink = remote.sink()
    assert isinstance(sink, ChangeLogWriter)
    assert (sink.output, sink.dsn) == ("s3a://lake/changes", "dbname=app")
    assert sink.concurrent_writes == 2
    assert log_writer("spark", tmp_path, "dbname=app").name == "spark"


def test_a_column_added_mid_stream_appears_from_then_on(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    from pgtail.spark.pipeline import materialize, run

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, a text)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    out, chk, current = tmp_path / "changes", tmp_path / "chk", tmp_path / "current"
    db15.execute("INSERT INTO t VALUES (1, 'x'), (2, 'y')")
    settle(db15)
    # one log written by both writers: the files of each read back together
    run(spark, options=options(db15), output=out, checkpoint=chk, writer="spark")
    db15.execute("ALTER TABLE t ADD COLUMN b numeric(5, 1)")
    db15.execute("INSERT INTO t VALUES (3, 'z', 1.5)")
    db15.execute("UPDATE t SET b = 2 WHERE id = 1")
    settle(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk, writer="pyarrow")
    batches = sorted(p.name for p in (out / "public.t").iterdir() if p.name.startswith("pgtail"))
    first = spark.read.parquet(str(out / "public.t" / batches[0]))
    assert [f.name for f in first.schema.fields][:2] == ["id", "a"]
    assert "b" not in first.columns
    log = typed_log(spark, out, "public.t")  # mergeSchema: earlier rows are null in b
    from pyspark.sql import types as T

    assert log.schema["b"].dataType == T.DecimalType(5, 1)
    rows = [(r["id"], r["b"]) for r in log.orderBy("_pg_commit_lsn", "_pg_seq").collect()]
    from decimal import Decimal

    assert rows == [(1, None), (2, None), (3, Decimal("1.5")), (1, Decimal("2.0"))]
    materialize(spark, out, current)
    snapshot = spark.read.parquet(str(current / "public.t"))
    assert snapshot.columns == ["id", "a", "b"]
    assert by(as_dicts(snapshot.collect()), "id") == by(
        select_typed(spark, db15, "t", snapshot.schema), "id"
    )


@pytest.mark.parametrize("writer", WRITERS)
def test_a_jsonb_column_keeps_its_text_when_the_column_after_it_was_dropped(
    spark: Any, db15: Any, tmp_path: Path, writer: str
) -> None:
    """Rows written before ``DROP COLUMN x`` carry x between the jsonb column and the next
    one: the jsonb value ends before x's member, not at the next column's key (it took
    ``,"x":…`` in before). Values with a string ending in a comma read the same."""
    from pgtail.spark.pipeline import materialize, run

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, doc jsonb, x int, f text)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute(
        "INSERT INTO t SELECT g, jsonb_build_object('n', g, 's', 'a comma,'), g, 'f' || g "
        "FROM generate_series(1, 50) g"
    )
    db15.execute("ALTER TABLE t DROP COLUMN x")
    db15.execute("INSERT INTO t VALUES (51, '[1, 2]', 'f51')")
    settle(db15)
    out = tmp_path / "changes"
    run(spark, options=options(db15), output=out, checkpoint=tmp_path / "chk", writer=writer)
    expected = db15.execute("SELECT id, doc::text, f FROM t ORDER BY id")
    logged = typed_log(spark, out, "public.t").orderBy("id").collect()
    assert [(r["id"], r["doc"], r["f"]) for r in logged] == [tuple(e) for e in expected]
    assert orjson.loads(logged[0]["_pg_after"])["x"] == 1  # the JSON keeps the dropped one
    materialize(spark, out, tmp_path / "current")
    current = spark.read.parquet(str(tmp_path / "current" / "public.t")).orderBy("id")
    assert [tuple(r) for r in current.collect()] == [tuple(e) for e in expected]


@pytest.mark.parametrize("writer", WRITERS)
def test_a_dropped_table_keeps_its_json_and_a_retyped_column_stops_the_run(
    spark: Any, db15: Any, tmp_path: Path, writer: str
) -> None:
    from pgtail.spark.pipeline import materialize, run

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, a int)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    out, chk = tmp_path / "changes", tmp_path / "chk"
    db15.execute("INSERT INTO t VALUES (1, 2)")
    settle(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk, writer=writer)
    # a table dropped before its changes are written: the JSON keeps them
    db15.execute("CREATE TABLE gone (id int PRIMARY KEY, v text)")
    db15.execute("ALTER PUBLICATION p ADD TABLE gone")
    db15.execute("INSERT INTO gone VALUES (1, 'v')")
    db15.execute("DROP TABLE gone")
    settle(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk, writer=writer)
    (gone,) = typed_log(spark, out, "public.gone").collect()
    assert gone["_pg_op"] == "insert" and orjson.loads(gone["_pg_after"]) == {"id": 1, "v": "v"}
    assert not [c for c in gone.asDict() if not c.startswith("_pg_") and c != "pgtail_batch"]
    assert materialize(spark, out, tmp_path / "current") == {"public.t": 1}
    db15.execute("ALTER TABLE t ALTER COLUMN a TYPE text")
    db15.execute("INSERT INTO t VALUES (2, 'two')")
    settle(db15)
    kept = confirmed(db15)
    with pytest.raises(ConfigurationError) as info:
        run(spark, options=options(db15), output=out, checkpoint=chk, writer=writer)
    message = str(info.value)
    assert "\n" not in message
    assert "column 'a' of public.t changed type from integer to text" in message
    assert "new --output" in message
    assert confirmed(db15) == kept  # the batch was not committed: the slot kept it
    # nothing of the failed batch reached the logs, nothing staged is left behind
    assert sorted(p.name for p in (out / "public.t").iterdir()) == ["pgtail_batch=0"]
    assert not (out / "_pg_staging").exists()
    # the way out the message gives: a new log from the slot's position has the change
    run(
        spark,
        options=options(db15),
        output=tmp_path / "new",
        checkpoint=tmp_path / "chk2",
        writer=writer,
    )
    rows = typed_log(spark, tmp_path / "new", "public.t").collect()
    assert [(r["id"], r["a"]) for r in rows] == [(2, "two")]


def test_materialize_keeps_equal_rows_of_a_keyless_full_table(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    """REPLICA IDENTITY FULL without a primary key: equal rows are as many in the snapshot
    as in the table, deleting or updating one copy leaves the others (a multiset)."""
    from pgtail.spark.pipeline import materialize, run

    db15.execute("CREATE TABLE bag (n int, s text)")
    db15.execute("ALTER TABLE bag REPLICA IDENTITY FULL")
    db15.execute("CREATE PUBLICATION p FOR TABLE bag")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    one_copy = "ctid = (SELECT ctid FROM bag WHERE n = 5 AND s = 'dup' LIMIT 1)"
    db15.execute("INSERT INTO bag VALUES (5, 'dup'), (5, 'dup'), (5, 'dup'), (1, 'a'), (2, 'b')")
    db15.execute(f"DELETE FROM bag WHERE {one_copy}")  # two copies left
    db15.execute("UPDATE bag SET n = 5, s = 'dup' WHERE n = 1")  # a third again
    db15.execute(f"UPDATE bag SET s = 'moved' WHERE {one_copy}")  # one copy changes
    settle(db15)
    out, chk, current = tmp_path / "changes", tmp_path / "chk", tmp_path / "current"
    run(spark, options=options(db15), output=out, checkpoint=chk)
    db15.execute("INSERT INTO bag VALUES (2, 'b'), (2, 'b')")
    db15.execute(f"DELETE FROM bag WHERE {one_copy.replace('dup', 'moved')}")
    settle(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk)
    expected = sorted(tuple(r) for r in db15.execute("SELECT n, s FROM bag"))
    assert expected == [(2, "b"), (2, "b"), (2, "b"), (5, "dup"), (5, "dup")]
    assert materialize(spark, out, current) == {"public.bag": len(expected)}
    snapshot = spark.read.parquet(str(current / "public.bag"))
    assert sorted(tuple(r) for r in snapshot.collect()) == expected


def test_an_output_refuses_a_checkpoint_that_did_not_write_it(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    """A new (or lost and re-created) --checkpoint numbers its batches from 0 again: on an
    output written under another checkpoint it would replace that log's pgtail_batch=0, 1,
    ... files. The run refuses, names the checkpoint that wrote the log, and changes
    nothing; the checkpoint that wrote it goes on."""
    import shutil

    import pyarrow.parquet as pq

    from pgtail.spark.pipeline import materialize, run

    db15.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    out, chk = tmp_path / "changes", tmp_path / "chk"
    db15.execute("INSERT INTO t VALUES (1)")
    settle(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk)
    db15.execute("INSERT INTO t VALUES (2)")
    settle(db15)

    def files() -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    before, kept = files(), confirmed(db15)
    with pytest.raises(ConfigurationError) as info:
        run(spark, options=options(db15), output=out, checkpoint=tmp_path / "new")
    assert f"{out} already holds change logs written by the query of checkpoint {chk}" in str(
        info.value
    )
    assert "pgtail_batch" in str(info.value) and "\n" not in str(info.value)
    assert f"go on with --checkpoint {chk}" in info.value.hint
    assert files() == before and confirmed(db15) == kept
    assert not (tmp_path / "new").exists()  # refused before Spark started a query
    # a checkpoint lost and made again at the same place is a new one too
    saved = tmp_path / "saved"
    shutil.copytree(chk, saved)
    shutil.rmtree(chk)
    with pytest.raises(ConfigurationError, match="deleted or replaced"):
        run(spark, options=options(db15), output=out, checkpoint=chk)
    assert files() == before
    shutil.rmtree(chk, ignore_errors=True)
    shutil.copytree(saved, chk)
    # a log of an earlier pgtail (nothing recorded, its batch directories _pg_batch=<id>,
    # hidden from pandas and pyarrow): only its own checkpoint goes on; materialize reads
    # it as it is, and the next run renames the directories
    (out / "_pgtail_run.json").unlink()
    (out / "public.t" / "pgtail_batch=0").rename(out / "public.t" / "_pg_batch=0")
    with pytest.raises(ConfigurationError, match="another checkpoint"):
        run(spark, options=options(db15), output=out, checkpoint=tmp_path / "other")
    assert materialize(spark, out, tmp_path / "current") == {"public.t": 1}
    run(spark, options=options(db15), output=out, checkpoint=chk)
    ids = sorted(r["id"] for r in typed_log(spark, out, "public.t").collect())
    assert ids == [1, 2]
    assert sorted(p.name for p in (out / "public.t").iterdir()) == [
        "pgtail_batch=0", "pgtail_batch=1"
    ]  # fmt: skip
    assert sorted(pq.read_table(str(out / "public.t")).column("id").to_pylist()) == [1, 2]


def test_column_names_of_the_metadata_kind(spark: Any, db15: Any, tmp_path: Path) -> None:
    from pgtail.spark.pipeline import materialize, run

    # users' own key/op/seq columns sit beside the _pg_ metadata columns
    db15.execute("CREATE TABLE t (key text PRIMARY KEY, op int, seq bigint, after text)")
    db15.execute("CREATE TABLE bad (id int PRIMARY KEY, _pg_op text)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("CREATE PUBLICATION pb FOR TABLE bad")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute("SELECT pg_create_logical_replication_slot('sb', 'pgoutput')")
    db15.execute("INSERT INTO t VALUES ('k1', 1, 2, 'a'), ('k2', 3, 4, NULL)")
    db15.execute("UPDATE t SET op = 5 WHERE key = 'k1'")
    db15.execute("INSERT INTO bad VALUES (1, 'x')")
    settle(db15)
    out = tmp_path / "changes"
    run(spark, options=options(db15), output=out, checkpoint=tmp_path / "chk")
    log = typed_log(spark, out, "public.t")
    assert log.columns[:5] == ["key", "op", "seq", "after", "_pg_op"]
    assert [(r["key"], r["op"], r["_pg_op"]) for r in log.orderBy("_pg_commit_lsn").collect()] == [
        ("k1", 1, "insert"), ("k2", 3, "insert"), ("k1", 5, "update")
    ]  # fmt: skip
    materialize(spark, out, tmp_path / "current")
    snapshot = spark.read.parquet(str(tmp_path / "current" / "public.t"))
    assert by(as_dicts(snapshot.collect()), "key") == by(
        select_typed(spark, db15, "t", snapshot.schema), "key"
    )
    with pytest.raises(ConfigurationError, match=r"column '_pg_op' of public\.bad starts with"):
        run(
            spark,
            options={"dsn": db15.dsn, "slot": "sb", "publication": "pb"},
            output=tmp_path / "bad",
            checkpoint=tmp_path / "chkb",
        )


def test_schema_and_table_names_of_any_kind_get_a_directory_each(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    """Names with dots, slashes, colons, globs, spaces or a leading underscore: each table
    its own directory (a.b + c and a + b.c do not meet), read back whole, materialized."""
    from pgtail.spark.changelog import path_name, table_dir
    from pgtail.spark.pipeline import materialize, read_changes, run

    tables = [("a.b", "c"), ("a", "b.c"), ("_Sales EU", "x/y:z*{1}"), ("public", "_audit")]
    for schema_name, table_name in tables:
        db15.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema_name)}")
        db15.execute(
            f"CREATE TABLE {quote_ident(schema_name)}.{quote_ident(table_name)}"
            " (id int PRIMARY KEY, v text)"
        )
    db15.execute("CREATE PUBLICATION p FOR ALL TABLES")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    for n, (schema_name, table_name) in enumerate(tables, 1):
        db15.execute(
            f"INSERT INTO {quote_ident(schema_name)}.{quote_ident(table_name)}"
            f" SELECT g, '{table_name}' FROM generate_series(1, {n}) g"
        )
    settle(db15)
    out = tmp_path / "changes"
    run(spark, options=options(db15), output=out, checkpoint=tmp_path / "chk")
    dirs = sorted(p.name for p in out.iterdir() if p.is_dir())  # and the _pgtail_run.json file
    assert dirs == sorted(f"{path_name(s)}.{path_name(t)}" for s, t in tables)
    assert not [d for d in dirs if d.startswith(("_", "."))]  # none hidden from Spark
    counts = {
        (r["schema"], r["table"]): r["count"]
        for r in read_changes(spark, out).groupBy("schema", "table").count().collect()
    }
    assert counts == {t: n for n, t in enumerate(tables, 1)}
    current = tmp_path / "current"
    assert materialize(spark, out, current) == {
        f"{quote_ident(s)}.{quote_ident(t)}": n for n, (s, t) in enumerate(tables, 1)
    }
    for n, (schema_name, table_name) in enumerate(tables, 1):
        rows = spark.read.parquet(table_dir(current, schema_name, table_name)).collect()
        assert sorted((r["id"], r["v"]) for r in rows) == [(i, table_name) for i in range(1, n + 1)]


def test_a_domain_column_has_its_base_types_rule(spark: Any, db15: Any, tmp_path: Path) -> None:
    """Domains (over a domain, over an array too) take their base type's Spark type, in
    the typed read, the change logs and the snapshots; a domain over jsonb keeps the
    server's text, as jsonb does."""
    from datetime import datetime
    from decimal import Decimal

    from pyspark.sql import types as T

    from pgtail.spark.pipeline import materialize, run

    db15.execute(
        "CREATE DOMAIN posint AS int CHECK (VALUE > 0);"
        " CREATE DOMAIN price AS numeric(10, 2);"
        " CREATE DOMAIN small_price AS price CHECK (VALUE < 1000);"
        " CREATE DOMAIN labels AS text[];"
        " CREATE DOMAIN stamp AS timestamptz;"
        " CREATE DOMAIN document AS jsonb;"
        " CREATE TABLE d (id posint PRIMARY KEY, p price, sp small_price, l labels, at stamp,"
        " doc document)"
    )
    db15.execute("CREATE PUBLICATION p FOR TABLE d")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute(
        "INSERT INTO d VALUES (1, 12.5, 999.99, ARRAY['a', 'b'], '2024-01-02 03:04:05+00',"
        ' \'{"a": 1.50, "b": [1, 2]}\'), (2, NULL, NULL, NULL, NULL, NULL)'
    )
    settle(db15)
    expected_types = {
        "id": T.IntegerType(), "p": T.DecimalType(10, 2), "sp": T.DecimalType(10, 2),
        "l": T.ArrayType(T.StringType(), True), "at": T.TimestampType(), "doc": T.StringType(),
    }  # fmt: skip
    first = {
        "id": 1, "p": Decimal("12.50"), "sp": Decimal("999.99"), "l": ["a", "b"],
        "at": datetime(2024, 1, 2, 3, 4, 5), "doc": '{"a": 1.50, "b": [1, 2]}',
    }  # fmt: skip

    def check(frame: Any) -> None:
        assert {f.name: f.dataType for f in frame.schema.fields if f.name in first} == (
            expected_types
        )
        rows = sorted((r.asDict() for r in frame.collect()), key=lambda r: r["id"])
        got = {k: rows[0][k] for k in first}
        got["at"] = got["at"].replace(tzinfo=None)  # the session's zone is UTC
        assert got == first
        assert [rows[1][k] for k in first] == [2, None, None, None, None, None]

    read = spark.read.format("pgoutput").options(**options(db15, table="public.d")).load()
    check(read)
    out = tmp_path / "changes"
    run(spark, options=options(db15), output=out, checkpoint=tmp_path / "chk")
    check(typed_log(spark, out, "public.d"))
    materialize(spark, out, tmp_path / "current")
    check(spark.read.parquet(str(tmp_path / "current" / "public.d")))


def test_the_writes_of_a_batch_run_side_by_side_and_the_first_failure_is_raised(
    spark: Any,
) -> None:
    """`run_all` runs every task, several at once (each in a thread of its own that
    keeps the caller's Spark job group), and raises a task's failure in the caller."""
    import threading
    import time

    from pgtail.spark.changelog import run_all

    spark.sparkContext.setJobGroup("pgtail-test-group", "a batch")
    seen: list[tuple[str, str | None]] = []
    running = {"now": 0, "most": 0}
    lock = threading.Lock()

    def task(name: str) -> Any:
        def work() -> None:
            with lock:
                running["now"] += 1
                running["most"] = max(running["most"], running["now"])
            # until three ran at once (the first call), not a guess at thread start-up
            deadline = time.monotonic() + 30
            while running["most"] < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.05)
            group = spark.sparkContext.getLocalProperty("spark.jobGroup.id")
            with lock:
                running["now"] -= 1
                seen.append((name, group))

        return work

    def fails() -> None:
        raise ConfigurationError("column 'a' of public.t changed type")

    try:
        run_all([task(f"t{i}") for i in range(6)], 3)
        assert sorted(seen) == [(f"t{i}", "pgtail-test-group") for i in range(6)]
        assert running["most"] == 3
        with pytest.raises(ConfigurationError, match="changed type"):
            run_all([task("x"), fails, task("y")], 2)
        seen.clear()
        run_all([task("alone")], 4)  # one task: in the caller's thread
        assert seen == [("alone", "pgtail-test-group")]
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)


def test_an_untyped_log_of_an_earlier_version_is_refused(spark: Any, tmp_path: Path) -> None:
    from pgtail.spark.pipeline import read_changes

    old = tmp_path / "changes"
    (old / "_spark_metadata").mkdir(parents=True)
    (old / "schema=public" / "table=items").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="holds an untyped change log"):
        read_changes(spark, old)
    with pytest.raises(ConfigurationError, match="does not exist"):
        read_changes(spark, tmp_path / "nothing")
    (tmp_path / "empty").mkdir()
    assert read_changes(spark, tmp_path / "empty").count() == 0


def type_column(name: str, oid: int, typmod: int = -1, element: int = 0, base: int = 0) -> Any:
    from pgtail.catalog.spark import ColumnType

    return ColumnType(name, oid, name, typmod, element, 1 if element else 0, base_oid=base)


def every_type() -> tuple[list[Any], dict[str, Any]]:
    """A column of every type of the rule, and a row of JSON-ready values for them (as
    pgtail's converters give them)."""
    from pgtail.catalog.spark import ColumnType

    column = type_column
    columns = [
        column("i2", 21), column("i4", 23), column("i8", 20), column("f4", 700),
        column("f8", 701), column("dec", 1700, (12 << 16 | 2) + 4), column("num", 1700),
        column("b", 16), column("t", 25), column("vc", 1043), column("tz", 1184),
        column("ts", 1114), column("d", 1082), column("by", 17), column("j", 114),
        column("jb", 3802), column("u", 2950), column("iv", 1186),
        column("ta", 1009, element=25), column("ia", 1007, element=23),
        column("jba", 3807, element=3802), ColumnType("multi", 1007, "int[]", -1, 23, 2),
    ]  # fmt: skip
    row = {
        "i2": -32768, "i4": 2147483647, "i8": -(2**63), "f4": 0.1, "f8": 0.1 + 0.2,
        "dec": "1234567890.12", "num": "123456789012345678901234567890123456789.5",
        "b": True, "t": 'é"\\\n\u2028', "vc": "", "tz": "2024-05-06T05:08:09.123456+00:00",
        "ts": "2024-05-06T07:08:09", "d": "2024-05-06", "by": "\\x00ff",
        "j": orjson.Fragment(b'{"a":  [1.50, 2], "a": "dup"}'),
        "jb": orjson.Fragment(b'"just a string"'), "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "iv": "P1DT2H", "ta": ["x", None, "y"], "ia": [1, None],
        "jba": [orjson.Fragment(b'{"k": 1}'), None], "multi": [[1, 2], [3, 4]],
    }  # fmt: skip
    return columns, row


def test_rows_stored_as_json_convert_as_the_typed_read_converts_their_values() -> None:
    """No server: the JSON-ready values pgtail's converters give, written as a row by
    `pgtail.values.dumps`, read back by `row_reader`/`columns_reader`, equal the typed
    read's converters applied to the values themselves, for every type of the rule."""
    from pgtail.spark.json_rows import columns_reader, raw_items, row_reader
    from pgtail.spark.types import spark_field
    from pgtail.values import dumps

    columns, row = every_type()
    values: list[dict[str, Any]] = [
        row,
        {
            "i2": None, "f4": "NaN", "f8": "-Infinity", "dec": "NaN", "num": "Infinity",
            "tz": "infinity", "ts": "-infinity", "d": "0044-03-15 BC", "by": "\\x",
            "jb": orjson.Fragment(b"[]"), "ta": [], "ia": [], "jba": [],
        },
        {},
    ]  # fmt: skip
    expected = [[spark_field(c)[1](row.get(c.name)) for c in columns] for row in values]
    texts = [dumps(row).decode() for row in values]
    assert [same(row_reader(columns)(text)) for text in texts] == [same(e) for e in expected]
    by_column = columns_reader(columns)([*texts, None])
    assert [same(list(row)) for row in zip(*by_column, strict=True)] == [
        same(e) for e in [*expected, [None] * len(columns)]
    ]
    # the general scanner (rows not written by orjson) gives the same
    spaced = [" " + text for text in texts]
    assert [same(row_reader(columns)(text)) for text in spaced] == [same(e) for e in expected]
    # json keeps its text, even a duplicate key
    assert row_reader(columns)(texts[0])[14] == '{"a":  [1.50, 2], "a": "dup"}'
    assert raw_items('[1, {"a": [2]} ,"x"]') == [(None, "1"), (None, '{"a": [2]}'), (None, '"x"')]
    with pytest.raises(ValueError):
        raw_items('{"a" 1}')
    # what fold merges: each member's text as written, compact or not, past orjson or not
    from pgtail.spark.json_rows import raw_members, raw_object

    for text in [
        '{"a":1,"b":{"x": 1.50},"c":"é","d":[1, 2],"e":null}', ' {"a" : 1.50 }',
        '{"a":1.50,"b":2}', '{"a":{"b": 123456789012345678901234567890}}', "{}",
        '{"a":"x","b":1e2}', *texts,
    ]:  # fmt: skip
        assert raw_members(text) == {str(k): v for k, v in raw_items(text)}
        assert raw_object(raw_members(text)) == raw_object(list(raw_members(text).items()))
    assert raw_object(raw_members(texts[0])) == texts[0]


def test_rows_stored_as_json_convert_to_arrow_vectorised_as_the_converters_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No server: `arrow_columns_reader` (Arrow's JSON reader, the change log's and the
    snapshot's conversion) gives the Arrow arrays of `columns_reader`'s values, for every
    type of the rule; a column Arrow's reader refuses (NaN, infinity, BC, a nested array)
    falls back to the converters, and only that column does."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    from pgtail.spark import arrow_rows, json_rows, types
    from pgtail.values import dumps

    columns, row = every_type()
    columns += [
        type_column("da", 1182, element=1082), type_column("dom", 99999, base=1184),
        type_column("a/b é", 23),
    ]  # fmt: skip
    clean: list[dict[str, Any]] = [
        {**row, "da": ["0001-01-01", None], "dom": "1999-12-31T23:59:59+00:00", "a/b é": 5},
        {"i2": None, "f4": 1e30, "dec": "-0.50", "ta": [], "ia": [], "da": [], "jba": []},
        {},
    ]  # fmt: skip
    odd: dict[str, Any] = {
        "f4": "NaN", "f8": "-Infinity", "dec": "NaN", "num": "Infinity", "tz": "infinity",
        "ts": "2024-05-06T07:08:09 BC", "d": "0044-03-15 BC", "by": "\\x",
        "jb": orjson.Fragment(b"[]"), "da": ["12345-01-01"], "dom": "-infinity",
    }  # fmt: skip
    targets = [to_arrow_type(types.spark_field(c)[0].dataType, timezone="UTC") for c in columns]
    asked: list[tuple[str, ...]] = []
    columns_reader = json_rows.columns_reader

    def spy(wanted: Any) -> Any:
        asked.append(tuple(c.name for c in wanted))
        return columns_reader(wanted)

    monkeypatch.setattr(arrow_rows, "columns_reader", spy)
    read = arrow_rows.arrow_columns_reader(columns, targets)
    for rows, slow in [
        (clean, {"by", "j", "jb", "jba", "multi"}),
        # (an unconstrained numeric is a string column: "Infinity" is read as it is)
        ([*clean, odd], {"by", "j", "jb", "jba", "multi", *odd} - {"num"}),
    ]:
        texts = [*[dumps(row).decode() for row in rows], None]
        expected = [
            pa.array(values, type=target)
            for values, target in zip(columns_reader(columns)(texts), targets, strict=True)
        ]
        asked.clear()
        got = read(pa.array(texts, pa.string()))
        assert [a.type for a in got] == targets
        assert [same(a.to_pylist()) for a in got] == [same(e.to_pylist()) for e in expected]
        assert {name for names in asked for name in names} == slow
    assert got[columns.index(columns[14])].to_pylist()[0] == '{"a":  [1.50, 2], "a": "dup"}'
    assert read(pa.array([], pa.string())) == [pa.array([], type=t) for t in targets]
    # one json column (the usual table): its member's text is found, not parsed
    alone = [c for c in columns if c.name not in ("j", "jba")]
    texts = [*[dumps({c.name: r[c.name] for c in alone if c.name in r}).decode()
               for r in [*clean, odd]], None]  # fmt: skip
    asked.clear()
    alone_targets = [targets[columns.index(c)] for c in alone]
    got = arrow_rows.arrow_columns_reader(alone, alone_targets)(pa.array(texts, pa.string()))
    assert [same(a.to_pylist()) for a in got] == [
        same(pa.array(v, type=t).to_pylist())
        for v, t in zip(columns_reader(alone)(texts), alone_targets, strict=True)
    ]
    assert {name for names in asked for name in names} == {"by", "multi", *odd} - {"num", "jb"}


@pytest.mark.parametrize("at", ["first", "middle", "last", "only"])
def test_a_row_with_one_json_column_finds_its_text_without_the_scanner(
    at: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One json column (the usual table): its text lies between what orjson wrote of the
    other members, found without walking the row; rows orjson did not write fall back."""
    from pgtail.catalog.spark import ColumnType
    from pgtail.spark import arrow_rows, json_rows, types
    from pgtail.values import dumps

    others = [ColumnType("id", 20, "bigint", -1, 0, 0), ColumnType("t", 25, "text", -1, 0, 0)]
    doc = ColumnType("doc", 3802, "jsonb", -1, 0, 0)
    columns = {
        "first": [doc, *others], "middle": [others[0], doc, others[1]],
        "last": [*others, doc], "only": [doc],
    }[at]  # fmt: skip
    rows: list[dict[str, Any]] = [
        {"id": 7, "t": 'a"},"doc":{', "doc": orjson.Fragment(b'{"b": [1.50, "}"], "c": null}')},
        {"id": -1, "t": "é\u2028", "doc": orjson.Fragment(b'"just a string"')},
        {"id": 1, "t": "x", "doc": orjson.Fragment(b"null")},
        {"id": 2, "t": "y"},  # unchanged TOAST: the json column absent
    ]
    names = [c.name for c in columns]
    texts = [dumps({n: row[n] for n in names if n in row}).decode() for row in rows]
    # the JSON document null reads as SQL NULL (the row JSON cannot tell them apart)
    plain = [{k: None if k == "doc" and orjson.dumps(v) == b"null" else v for k, v in row.items()}
             for row in rows]  # fmt: skip
    expected = [[types.spark_field(c)[1](row.get(c.name)) for c in columns] for row in plain]
    read = json_rows.row_reader(columns)
    scanned = [read(" " + text) for text in texts]  # not compact: the general scanner
    monkeypatch.setattr(json_rows, "_walk", None)  # the scanner is not called below
    got = [json_rows.row_reader(columns)(text) for text in texts]
    assert got == expected == scanned
    assert got[0][names.index("doc")] == '{"b": [1.50, "}"], "c": null}'
    # the vectorised read finds the member's text without parsing the row; a column
    # named so that its key holds '"doc":' comes first, and is not taken for it
    tricky = ColumnType('x"doc', 25, "text", -1, 0, 0)
    member = arrow_rows.json_member_reader(doc)
    rows_as_json = [
        *texts, " " + texts[0], None,
        dumps({'x"doc': '","doc":1', **{n: rows[0][n] for n in names}}).decode(),
    ]  # fmt: skip
    assert member(rows_as_json) == [
        *[e[names.index("doc")] for e in expected], expected[0][names.index("doc")], None,
        expected[0][names.index("doc")],
    ]  # fmt: skip
    assert json_rows.columns_reader([tricky, doc])(rows_as_json[-1:]) == [['","doc":1'], [
        expected[0][names.index("doc")]
    ]]  # fmt: skip
    # jsonb's text (PostgreSQL's) never holds ',"t":', so a value followed by column t
    # ends at the first one (',"' alone would not do); json keeps the client's text,
    # which may hold it: it is parsed to its end, as is a value without t after it
    jsonb_text = b'{"a": "x,\\"y", "b": [1, "2,\\""], "c": {"d": ","}, "t": 1}'
    as_json = ColumnType("doc", 114, "json", -1, 0, 0)
    client_text = b'{"a":1,"b":[2,"3"],"c":{"d":","},"t":1}'
    for column, text in ((doc, jsonb_text), (as_json, client_text)):
        orjson.loads(text)  # valid JSON, as the server sends it
        for row in ({"id": 1, "doc": orjson.Fragment(text), "t": "z"},
                    {"id": 1, "doc": orjson.Fragment(text)}):  # fmt: skip
            for following in ("t", None):
                found = arrow_rows.json_member_reader(column, following)([dumps(row).decode()])
                assert found == [text.decode()]


def test_the_vectorised_jsonb_member_reads_what_the_row_reader_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`json_member_arrow` finds a jsonb column's text with Arrow's kernels and gives
    what `json_member_reader` and `row_reader` give, for every row: the column first,
    in the middle or last; absent; JSON null; a row not written compactly; a column
    dropped since the row was written, right after the jsonb column or at the end
    (other members then follow its value); text with ',"' and '"doc":' inside strings;
    a sliced array. Only the rows the kernels cannot read take the Python path."""
    import random

    import pyarrow as pa

    from pgtail.catalog.spark import ColumnType
    from pgtail.spark import arrow_rows, json_rows
    from pgtail.values import dumps

    doc = ColumnType("dóc", 3802, "jsonb", -1, 0, 0)
    values = [b'{"a": 1}', b'"x,\\"y"', b'{"b": [1.50, "}"], "c": {"d": ","}}', b"null",
              b"[]", b'{"f,\\"l\\":": 2}', b'"\xc3\xa9"', b"12", b'{"t": ",\\"t\\":"}']  # fmt: skip
    order = ["id", "t", "dóc", "x", "f"]  # every column a row may have, in order
    chance = random.Random(17)

    def row(columns: list[str], dropped: bool) -> str | None:
        if chance.random() < 0.05:
            return None
        members: dict[str, Any] = {}
        for name in order:
            if name not in columns and not (dropped and chance.random() < 0.5):
                continue
            if chance.random() < 0.1:
                continue  # absent (unchanged TOAST, an old row of the key only)
            if name == "dóc":
                members[name] = orjson.Fragment(chance.choice(values))
            elif name == "t":
                members[name] = chance.choice(['a"},"dóc":{', 'é,"f":', "plain", ',"'])
            else:
                members[name] = chance.randint(-5, 5)
        return dumps(members).decode()

    def fast(text: str, following: str | None) -> bool:
        names = list(orjson.loads(text))
        if not (text.startswith('{"dóc":') or ',"dóc":' in text):
            return False  # the column absent, or not where a compact row has it
        after = names[names.index("dóc") + 1 :]
        value = json_rows.row_reader([doc])(text)[0]
        return after[:1] in ([following], []) and ',"' not in (value or "")

    python_rows: list[str] = []
    real = arrow_rows.json_member_reader

    def counted(column: Any, following: Any = None) -> Any:
        read = real(column, following)

        def reading(texts: Any) -> Any:
            python_rows.extend(texts)
            return read(texts)

        return reading

    monkeypatch.setattr(arrow_rows, "json_member_reader", counted)
    for columns in (["id", "t", "dóc", "f"], ["dóc", "f"], ["id", "dóc"], order):
        after = columns.index("dóc") + 1
        following = columns[after] if after < len(columns) else None
        for dropped in (False, True):
            rows = [row(columns, dropped) for _ in range(300)]
            rows.append(" " + (rows[0] or "{}"))  # not compact
            python_rows.clear()
            got = arrow_rows.json_member_arrow(doc, following)(
                pa.array(["pad", *rows], pa.string()).slice(1)
            )
            expected = [None if r is None else json_rows.row_reader([doc])(r)[0] for r in rows]
            assert got.to_pylist() == expected, (columns, dropped)
            assert real(doc, following)(rows) == expected, (columns, dropped)
            # Python reads exactly the rows the kernels cannot: not compact, without the
            # column, followed by another member than the next column, or a value with
            # ',"' (a string ending in a comma)
            assert python_rows == [r for r in rows if r is not None and not fast(r, following)]
            assert dropped or len(python_rows) < len(rows) / 4  # most rows: the kernels
    member_arrow = arrow_rows.json_member_arrow
    assert member_arrow(doc, "f")(pa.array([None, None], pa.string())).null_count == 2
    assert len(member_arrow(doc)(pa.array([], pa.string()))) == 0


def test_cli_run_error_is_one_line_and_materialize_prints_counts(
    spark: Any, db15: Any, tmp_path: Path
) -> None:
    import subprocess

    from pgtail.spark.pipeline import run

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, a int)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute("INSERT INTO t VALUES (1, 2), (3, 4)")
    settle(db15)
    out, chk = tmp_path / "changes", tmp_path / "chk"
    run(spark, options=options(db15), output=out, checkpoint=chk)
    db15.execute("ALTER TABLE t ALTER COLUMN a TYPE bigint")
    db15.execute("INSERT INTO t VALUES (5, 6)")
    settle(db15)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    spark_args = ["--conf", "spark.ui.enabled=false"]

    def pgtail(*args: str, master: str = "local[1]") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pgtail", "spark", *args, *spark_args, "--master", master],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    failed = pgtail(
        "run", "--dsn", db15.dsn, "--slot", "s", "--publication", "p", "--output", str(out),
        "--checkpoint", str(chk), "--trigger", "available-now",
    )  # fmt: skip
    assert failed.returncode == 1
    errors = [line for line in failed.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        "pgtail: error: column 'a' of public.t changed type from integer to bigint: a typed "
        "change log keeps one type per column (materialize the change log as it is, then go "
        "on with a new --output and a new --checkpoint: the slot still holds every change of "
        "this batch)"
    ], failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    # a task that fails (its staging directory cannot be made) is one line too
    (tmp_path / "a-file").write_text("")
    failed = pgtail(
        "run", "--dsn", db15.dsn, "--slot", "s", "--publication", "p",
        "--output", str(tmp_path / "a-file" / "changes"), "--checkpoint", str(tmp_path / "c2"),
        "--trigger", "available-now",
    )  # fmt: skip
    assert failed.returncode == 1
    errors = [line for line in failed.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(
        "pgtail: error: Spark failed: NotADirectoryError: [Errno 20] Not a directory: "
    ), failed.stderr[-3000:]
    assert "Traceback" not in failed.stderr
    # a new checkpoint on this output would replace its batches: refused in one line,
    # before Spark starts (a Spark started first would refuse this --master instead)
    refused = pgtail(
        "run", "--dsn", db15.dsn, "--slot", "s", "--publication", "p", "--output", str(out),
        "--checkpoint", str(tmp_path / "c3"), "--trigger", "available-now",
        master="local[no-such-cores]",
    )  # fmt: skip
    assert refused.returncode == 1
    errors = [line for line in refused.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and errors[0].startswith(
        f"pgtail: error: {out} already holds change logs written by the query of checkpoint {chk}"
    ), refused.stderr[-3000:]
    assert f"(go on with --checkpoint {chk}, or write to a new --output" in errors[0]
    done = pgtail("materialize", "--changes", str(out), "--output", str(tmp_path / "current"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "public.t: 2 rows\n"
    # progress on stderr: the long step, then each table
    assert "reading the change logs of 1 tables" in done.stderr
    assert "current state: 2 rows" in done.stderr
    assert f"[1/1] public.t: 2 rows written to {tmp_path / 'current' / 'public.t'}" in done.stderr


def test_ctrl_c_stops_a_running_cli_query_cleanly_in_one_line(db15: Any, tmp_path: Path) -> None:
    import signal
    import subprocess
    import threading
    import time

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, a int)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute("INSERT INTO t SELECT g, g FROM generate_series(1, 100) g")
    settle(db15)
    before = confirmed(db15)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    out = tmp_path / "changes"
    run = subprocess.Popen(
        [sys.executable, "-m", "pgtail", "spark", "run", "--dsn", db15.dsn, "--slot", "s",
         "--publication", "p", "--output", str(out), "--checkpoint", str(tmp_path / "chk"),
         "--trigger", "1s", "--master", "local[1]", "--conf", "spark.ui.enabled=false"],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert run.stderr is not None
    lines: list[str] = []
    first_batch = threading.Event()

    def read() -> None:
        assert run.stderr is not None
        for line in run.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith("batch 0: 100 changes"):
                first_batch.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert first_batch.wait(240), "\n".join(lines[-30:])
        time.sleep(1)  # the query runs on, waiting for the next trigger
        run.send_signal(signal.SIGINT)
        assert run.wait(60) == 130
    finally:
        if run.poll() is None:
            run.kill()
    reader.join(10)
    text = "\n".join(lines)
    assert "Traceback" not in text and "ERROR" not in text, text[-3000:]
    [stopped] = [line for line in lines if line.startswith("stopped:")]
    assert stopped.startswith("stopped: 100 changes in "), text[-3000:]
    assert stopped.endswith(f"written to {out}; the slot is confirmed up to the last of them")
    assert [line for line in lines if line.strip()][-1] == stopped
    assert confirmed(db15) > before  # the committed batch is confirmed on the slot
    assert sorted(p.name for p in (out / "public.t").iterdir()) == ["pgtail_batch=0"]


def _processes_with(text: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _child_with(pid: int, text: bytes) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                if parent == pid and text in (entry / "cmdline").read_bytes():
                    return True
            except (OSError, ValueError, IndexError):
                continue
    return False


def test_ctrl_c_while_spark_starts_leaves_no_jvm_behind(db15: Any, tmp_path: Path) -> None:
    """Ctrl-C while PySpark waits for its JVM: PySpark forgot the JVM (which ignores
    SIGINT) and it ran on for good, holding the command's stdout; now it is stopped."""
    import signal
    import subprocess
    import time
    import uuid

    db15.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    tag = f"spark.pgtail.test={uuid.uuid4().hex}"
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(tmp_path / "out.txt", "wb") as out:
        run = subprocess.Popen(
            [sys.executable, "-m", "pgtail", "spark", "run", "--dsn", db15.dsn, "--slot", "s",
             "--publication", "p", "--output", str(tmp_path / "o"), "--checkpoint",
             str(tmp_path / "c"), "--master", "local[1]", "--conf", tag],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not _child_with(run.pid, b"org.apache.spark.deploy.SparkSubmit"):
            assert run.poll() is None, (tmp_path / "out.txt").read_text()
            assert time.monotonic() < deadline, "no JVM started"
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)  # PySpark waits for the JVM's port
        assert run.wait(60) == 130, (tmp_path / "out.txt").read_text()
        for _ in range(100):
            if not _processes_with(tag.encode()):
                break
            time.sleep(0.1)
        assert _processes_with(tag.encode()) == []
        assert (tmp_path / "out.txt").read_text().rstrip().endswith("pgtail: stopped (interrupted)")
    finally:
        if run.poll() is None:
            run.kill()
        for pid in _processes_with(tag.encode()):
            os.kill(pid, signal.SIGKILL)


def test_batch_directories_of_both_names_and_the_names_the_log_keeps() -> None:
    """A log's batches in order whether named pgtail_batch=<id> or, by earlier versions,
    _pg_batch=<id>; a table column may not take the batch directories' name."""
    from pgtail.catalog.spark import ColumnType
    from pgtail.spark.changelog import batch_dirs, batch_ids, log_schema, table_dir, table_of_dir

    names = ["pgtail_batch=10", "_pg_batch=2", "_SUCCESS", "pgtail_batch=snapshot-00A-1",
             "_pg_batch=snapshot-001-0", "pgtail_batch=3", "other=1"]  # fmt: skip
    assert batch_ids(names) == [2, 3, 10]
    assert batch_dirs(names) == [
        "_pg_batch=snapshot-001-0", "pgtail_batch=snapshot-00A-1",
        "_pg_batch=2", "pgtail_batch=3", "pgtail_batch=10",
    ]  # fmt: skip
    for schema_name, table_name in [("a.b", "c"), ("public", "_audit"), ("s", "tä/b:*")]:
        name = table_dir("", schema_name, table_name)[1:]
        assert table_of_dir(name) == (schema_name, table_name)
    assert table_of_dir("_messages") is None and table_of_dir("x") is None
    plain = ColumnType("pg_batch", 20, "bigint", -1, 0, 0)
    assert log_schema("public.t", [plain]).fieldNames()[0] == "pg_batch"
    for name in ("pgtail_batch", "_pg_x"):
        with pytest.raises(ConfigurationError, match=f"column '{name}' of public.t"):
            log_schema("public.t", [ColumnType(name, 20, "bigint", -1, 0, 0)])


def test_materialize_onto_its_own_output_applies_only_the_new_batches(
    spark: Any, db15: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second materialize reads only the batches written since the first (its state
    kept as JSON rows): unchanged TOAST and key changes fill from rows of the first run,
    a truncate resets, a keyless FULL table stays a multiset, an untouched table is not
    rewritten; an interrupted run leaves the last state readable; --full agrees."""
    from pgtail.spark import materialize as module
    from pgtail.spark.pipeline import materialize, run

    db15.execute("CREATE TABLE t (id int PRIMARY KEY, n int, note text)")
    db15.execute("CREATE TABLE bag (n int, s text)")
    db15.execute("ALTER TABLE bag REPLICA IDENTITY FULL")
    db15.execute("CREATE TABLE u (id int PRIMARY KEY)")
    db15.execute("CREATE TABLE w (id int PRIMARY KEY)")
    db15.execute("CREATE PUBLICATION p FOR TABLE t, bag, u, w")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    db15.execute("INSERT INTO t SELECT i, i, %s FROM generate_series(1, 5) i", (BIG,))
    db15.execute("INSERT INTO bag VALUES (1, 'dup'), (1, 'dup'), (2, 'b')")
    db15.execute("INSERT INTO u VALUES (1), (2)")
    db15.execute("INSERT INTO w VALUES (1)")
    settle(db15)
    out, chk, current = tmp_path / "changes", tmp_path / "chk", tmp_path / "current"
    run(spark, options=options(db15), output=out, checkpoint=chk)
    assert materialize(spark, out, current) == {
        "public.t": 5, "public.bag": 3, "public.u": 2, "public.w": 1
    }  # fmt: skip
    untouched = {p.name: p.stat().st_mtime_ns for p in (current / "public.w").iterdir()}

    def changes() -> None:
        db15.execute("UPDATE t SET n = n + 10 WHERE id <= 2")  # note: unchanged TOAST
        db15.execute("UPDATE t SET id = 30 WHERE id = 3")  # a key change, note unchanged
        db15.execute("DELETE FROM t WHERE id = 4")
        one = "ctid = (SELECT ctid FROM bag WHERE s = 'dup' LIMIT 1)"
        db15.execute(f"DELETE FROM bag WHERE {one}")
        db15.execute("INSERT INTO bag VALUES (2, 'b')")
        db15.execute("TRUNCATE u")
        db15.execute("INSERT INTO u VALUES (3)")

    def assert_equal(where: Path, tables: tuple[str, ...] = ("t", "bag", "u", "w")) -> None:
        for table in tables:
            got = spark.read.parquet(str(where / f"public.{table}"))
            assert sorted(map(str, as_dicts(got.collect()))) == sorted(
                map(str, select_typed(spark, db15, table, got.schema))
            ), table

    changes()
    settle(db15)
    run(spark, options=options(db15), output=out, checkpoint=chk)
    before = {t: spark.read.parquet(str(current / t)).collect() for t in ("public.t", "public.u")}
    # interrupted after the first table was swapped in: each table still reads whole
    calls = []
    real = module._write_table

    def crash(*args: Any) -> Any:
        if calls:
            raise KeyboardInterrupt
        calls.append(real(*args))
        return calls[-1]

    monkeypatch.setattr(module, "_write_table", crash)
    with pytest.raises(KeyboardInterrupt):
        materialize(spark, out, current)
    monkeypatch.undo()
    assert sorted(map(str, spark.read.parquet(str(current / "public.u")).collect())) == sorted(
        map(str, before["public.u"])
    )
    assert_equal(current, ("bag",))  # the first in order, swapped in before the crash
    lines: list[str] = []
    counts = materialize(spark, out, current, on_progress=lines.append)
    assert counts == {"public.t": 4, "public.bag": 3, "public.u": 1, "public.w": 1}
    assert any("applying 3 new batch directories" in line for line in lines), lines
    assert_equal(current)
    assert {p.name: p.stat().st_mtime_ns for p in (current / "public.w").iterdir()} == untouched
    moved = spark.read.parquet(str(current / "public.t")).where("id = 30").collect()
    assert moved[0]["note"] == BIG  # from the row the first run kept
    # nothing new: nothing read, nothing written
    assert materialize(spark, out, current, on_progress=lines.append) == counts
    assert lines[-1] == "nothing new since the last run"
    # a full rebuild of the same log gives the same tables
    assert materialize(spark, out, tmp_path / "full", full=True) == counts
    assert_equal(tmp_path / "full")
