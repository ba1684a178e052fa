"""`pgtail spark run` on a batch that touches many tables: the typed change log writes one
directory per table. With ``--writer spark`` each is a Spark job, several at once; with
``--writer pyarrow`` the task that reads the batch writes them all.

On a throwaway server, ``--tables`` tables (int key, text, timestamptz, numeric(10,2))
each get ``--rows`` inserts; one ``available-now`` run writes them all (one micro-batch).
The runs alternate between Spark's writer one table at a time, Spark's writer with the
default (`pgtail.spark.changelog.CONCURRENT_WRITES`) and the pyarrow writer, each time on
a fresh slot, after a first small query that starts the JVM's classes and the Python
workers. Prints each run and the median speed-up of the last two against the first.

Usage: python bench/spark_tables.py [--tables 40] [--rows 1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import psycopg2  # noqa: E402

from pgtail.server import start_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=40)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    from pgtail.spark.changelog import CONCURRENT_WRITES as default
    from pgtail.spark.pipeline import run, session

    configs = [("spark", 1), ("spark", default), ("pyarrow", default)]
    runs = configs * args.repeat
    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="pgtail-bench-tables-"))
    try:
        dsn = server.dsn()
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            for i in range(args.tables):
                cur.execute(
                    f"CREATE TABLE t{i} (id int PRIMARY KEY, v text, at timestamptz,"
                    " n numeric(10, 2))"
                )
            cur.execute("CREATE PUBLICATION p FOR ALL TABLES")
            cur.execute("SELECT pg_create_logical_replication_slot('warm', 'pgoutput')")
            for k in range(len(runs)):
                cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"s{k}",))
            cur.execute("CREATE TABLE warm (id int PRIMARY KEY)")
            cur.execute("INSERT INTO warm VALUES (1)")
            for i in range(args.tables):
                cur.execute(
                    f"INSERT INTO t{i} SELECT g, 'row ' || g, now(), g / 3.0"
                    " FROM generate_series(1, %s) g",
                    (args.rows,),
                )
        conn.close()
        spark = session("local[2]", "pgtail-bench-tables", {"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        options = {"dsn": dsn, "publication": "p"}
        # warms both writers' code: Spark's Parquet writer and the Python workers
        run(
            spark,
            options={**options, "slot": "warm"},
            output=work / "w",
            checkpoint=work / "wc",
            writer="spark",
        )
        seconds: dict[tuple[str, int], list[float]] = {config: [] for config in configs}
        try:
            for k, (writer, concurrent) in enumerate(runs):
                t0 = time.perf_counter()
                result = run(
                    spark,
                    options={**options, "slot": f"s{k}"},
                    output=work / f"o{k}",
                    checkpoint=work / f"c{k}",
                    concurrent_writes=concurrent,
                    writer=writer,
                )
                took = time.perf_counter() - t0
                assert result.rows == args.tables * args.rows + 1, result.rows
                seconds[writer, concurrent].append(took)
                print(
                    f"--writer {writer}"
                    + (f", {concurrent} at once" if writer == "spark" else "")
                    + f": {result.rows:,} changes in {took:.1f}s"
                )
        finally:
            spark.stop()
        base = seconds[configs[0]]
        for name, config in (
            (f"spark writer, {default} at once", configs[1]),
            ("pyarrow writer", configs[2]),
        ):
            ratios = [a / b for a, b in zip(base, seconds[config], strict=True)]
            print(
                f"{args.tables} tables x {args.rows} rows, one batch: {name} against Spark's "
                f"writer one at a time, median speed-up {statistics.median(ratios):.2f}x"
            )
    finally:
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
