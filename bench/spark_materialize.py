"""`pgtail spark materialize` over a growing history: a full rebuild against an
incremental run onto its own output, for one small table at two history lengths.

On a throwaway server a table of ``--rows`` rows (int key, int, text, timestamptz) gets
updates (every row in turn) until its change log holds ``--histories`` changes (e.g.
100,000 then 600,000); ``pgtail spark run`` (``available-now``, the pyarrow writer)
writes them, and a first materialize catches up. Then, ``--repeat`` times: ``--new``
more updates, a run, and the two materializes of the same log in alternating order --
incremental (onto the output it wrote the last time) and ``full=True`` (a rebuild into
an output of its own). Each is timed (wall clock) and checked against ``SELECT *`` (the
key and the int column). Prints each time and, per history length, the median of the
pairwise ratios incremental / full (the goal: at most 0.5 at 600,000).

Usage: python bench/spark_materialize.py [--rows 5000] [--histories 100000,600000]
[--new 100] [--repeat 3] [--master local[2]]
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
from typing import Any

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

import psycopg2  # noqa: E402

from pgtail.server import start_server  # noqa: E402

UPDATE_ROUND = "UPDATE t SET n = n + 1, at = now() WHERE id <= %s"


def update(cur: Any, changes: int, rows: int) -> None:
    """``changes`` single-row updates' worth, as whole-table rounds of ``rows`` (the last
    one partial)."""
    while changes > 0:
        cur.execute(UPDATE_ROUND, (min(changes, rows),))
        changes -= rows


def check(spark: Any, output: Path, cur: Any) -> None:
    cur.execute("SELECT id, n FROM t")
    expected = sorted(cur.fetchall())
    got = sorted((r["id"], r["n"]) for r in spark.read.parquet(str(output / "public.t")).collect())
    if got != expected:
        raise SystemExit(f"{output}: not equal to SELECT * ({len(got)} rows, {len(expected)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--histories", default="100000,600000")
    parser.add_argument("--new", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    histories = [int(h) for h in args.histories.split(",")]

    from pgtail.spark.pipeline import materialize, run, session

    server = start_server()
    work = Path(tempfile.mkdtemp(prefix="pgtail-bench-materialize-"))
    try:
        conn = psycopg2.connect(server.dsn())
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute("CREATE TABLE t (id int PRIMARY KEY, n int, v text, at timestamptz)")
        cur.execute("CREATE PUBLICATION p FOR TABLE t")
        cur.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
        cur.execute(
            "INSERT INTO t SELECT g, 0, 'row ' || g, now() FROM generate_series(1, %s) g",
            (args.rows,),
        )
        spark = session(args.master, "pgtail-bench-materialize", {"spark.ui.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        options = {"dsn": server.dsn(), "slot": "s", "publication": "p"}
        log, chk = work / "changes", work / "chk"
        incremental, full = work / "current", work / "full"
        history = args.rows
        print(f"table of {args.rows} rows; {args.new} new changes before each timed pair")
        for target in histories:
            update(cur, target - history, args.rows)
            history = target
            t0 = time.perf_counter()
            run(spark, options=options, output=log, checkpoint=chk)
            t1 = time.perf_counter()
            materialize(spark, log, incremental)  # catches up (not timed)
            print(f"history {history}: spark run {t1 - t0:.1f} s, catch-up "
                  f"{time.perf_counter() - t1:.1f} s")  # fmt: skip
            ratios = []
            for k in range(args.repeat):
                update(cur, args.new, args.rows)
                history += args.new
                run(spark, options=options, output=log, checkpoint=chk)
                took: dict[str, float] = {}
                order = ["incremental", "full"] if k % 2 == 0 else ["full", "incremental"]
                for kind in order:
                    t0 = time.perf_counter()
                    if kind == "full":
                        shutil.rmtree(full, ignore_errors=True)
                        t0 = time.perf_counter()
                        materialize(spark, log, full, full=True)
                    else:
                        materialize(spark, log, incremental)
                    took[kind] = time.perf_counter() - t0
                check(spark, incremental, cur)
                check(spark, full, cur)
                ratios.append(took["incremental"] / took["full"])
                print(f"  history {history}: full {took['full']:.1f} s, incremental "
                      f"{took['incremental']:.1f} s ({ratios[-1]:.2f}x)")  # fmt: skip
            print(f"history ~{target}: incremental / full, median of pairs "
                  f"{statistics.median(ratios):.2f}x")  # fmt: skip
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
        server.stop()


if __name__ == "__main__":
    main()
