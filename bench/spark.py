"""Spark pipeline throughput: changes per second from a slot into the Parquet change log,
next to pgtail's own JSON drain of the same changes.

On a throwaway server: two pgoutput slots are created at the same position, then N
changes (inserts of a mixed-type table in transactions of ``--tx-rows``) are committed.

- ``spark``: `pgtail.spark.pipeline.run` with ``available-now`` on a ``--master``
  (default ``local[2]``) session into a Parquet change log partitioned by table; timed
  from the start of the query to the end (session start-up reported apart).
- ``json``: ``pgtail stream --slot <second slot> --end <lsn> --format json > /dev/null``.

Usage: /work/venv/bin/python bench/spark.py [--changes 1000000] [--tx-rows 10000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import psycopg2  # noqa: E402

from pgtail.server import start_server  # noqa: E402

SCHEMA = """
CREATE TABLE mixed (
    id bigint PRIMARY KEY, name text, qty int, price numeric(12,2), at timestamptz,
    tags text[], doc jsonb, flag bool
);
CREATE PUBLICATION bench_pub FOR TABLE mixed;
"""
INSERT = """
INSERT INTO mixed
SELECT g, 'customer ' || g, (g %% 1000)::int, (g %% 100000) / 100.0,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second 1 millisecond',
       ARRAY['tag' || (g %% 7), 'other tag', 'x' || (g %% 13)],
       jsonb_build_object('id', g, 'kind', 'order', 'items', jsonb_build_array(g %% 5, g %% 3)),
       g %% 2 = 0
FROM generate_series(%s, %s) g
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--tx-rows", type=int, default=10_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-json", action="store_true")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="pgtail-bench-spark-"))
    server = start_server(settings={"logical_decoding_work_mem": "256MB", "max_wal_size": "4GB"})
    try:
        dsn = server.dsn()
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            cur.execute("SELECT pg_create_logical_replication_slot('spark_slot', 'pgoutput')")
            cur.execute("SELECT pg_create_logical_replication_slot('json_slot', 'pgoutput')")
            t0 = time.perf_counter()
            for first in range(0, args.changes, args.tx_rows):
                last = min(first + args.tx_rows, args.changes) - 1
                cur.execute(INSERT, (first, last))
            cur.execute("SELECT pg_current_wal_insert_lsn()::text")
            row = cur.fetchone()
            assert row is not None
            end_lsn = str(row[0])
            cur.execute(
                "SELECT pg_wal_lsn_diff(%s::pg_lsn, confirmed_flush_lsn)::bigint"
                " FROM pg_replication_slots WHERE slot_name = 'spark_slot'",
                (end_lsn,),
            )
            wal_row = cur.fetchone()
            wal_bytes = int(wal_row[0]) if wal_row else 0
        conn.close()
        print(
            f"workload: {args.changes:,} inserts committed in {time.perf_counter() - t0:.1f}s, "
            f"{wal_bytes / 1e6:.0f} MB of WAL pending in each slot (PostgreSQL {server.major})"
        )

        from pgtail.spark.pipeline import read_changes, run, session

        t0 = time.perf_counter()
        spark = session(
            args.master,
            "pgtail-bench",
            {
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.driver.memory": "2g",
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        startup = time.perf_counter() - t0
        options = {"dsn": dsn, "slot": "spark_slot", "publication": "bench_pub"}
        t0 = time.perf_counter()
        result = run(spark, options=options, output=work / "changes", checkpoint=work / "chk")
        spark_seconds = time.perf_counter() - t0
        written = read_changes(spark, work / "changes").count()
        spark.stop()
        assert written == args.changes, (written, args.changes)
        print(
            f"spark ({args.master}): {result.rows:,} changes in {result.batches} batch(es), "
            f"{spark_seconds:.1f}s -> {result.rows / spark_seconds:,.0f} changes/s "
            f"(+ {startup:.1f}s session start-up)"
        )

        if not args.skip_json:
            command = [sys.executable, "-m", "pgtail", "stream", "--dsn", dsn,
                       "--slot", "json_slot", "--publication", "bench_pub",
                       "--end", end_lsn, "--format", "json"]  # fmt: skip
            t0 = time.perf_counter()
            with open(os.devnull, "wb") as devnull:
                subprocess.run(command, stdout=devnull, check=True)
            json_seconds = time.perf_counter() - t0
            print(
                f"pgtail stream --format json > /dev/null: {args.changes:,} changes in "
                f"{json_seconds:.1f}s -> {args.changes / json_seconds:,.0f} changes/s"
            )
    finally:
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
