"""Whole-process CPU of ``pgtail stream --end LSN`` over one backlog, two source trees.

On a throwaway server, one backlog of ``--transactions`` small transactions is made once
(``--shape small``: 3 inserts each on the drain-like table; ``mix``: an insert, an update
of 2 rows and a delete each), with one slot per run; then ``pgtail stream --format FMT
--end LSN > /dev/null`` runs from this tree and from ``--base`` in turn (which goes first
alternates), and the script prints each run's CPU (user + system of the process, start-up
included) and the median of the pairwise ratios new / base. No pipe reader and no timing
from a first line: the figure is pgtail's whole cost of the backlog.

    .venv/bin/python bench/ab_cpu.py --base /tmp/base [--format json|sql]
                                     [--shape small|mix] [--transactions 20000] [--pairs 6]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

from common import create_database, start_bench_server

TABLE = (
    "CREATE TABLE c (id bigserial PRIMARY KEY, name text, qty int, price numeric(12,2),"
    " created timestamptz, tags text[], meta jsonb, flag bool)"
)
SMALL = """CREATE PROCEDURE fill(n int) LANGUAGE plpgsql AS $$ BEGIN FOR i IN 1..n LOOP
  INSERT INTO c (name, qty, price, created, tags, meta, flag)
  SELECT 'name ' || g, g, g * 1.5, now(), ARRAY['a', 'b'], '{"k": 1}', true
  FROM generate_series(1, 3) g;
  COMMIT; END LOOP; END $$"""
MIX = """CREATE PROCEDURE fill(n int) LANGUAGE plpgsql AS $$ BEGIN FOR i IN 1..n LOOP
  INSERT INTO c (name, qty, price, created, tags, meta, flag)
  VALUES ('x', i, 1.5, now(), ARRAY['a'], '{"k": 1}', true);
  UPDATE c SET qty = qty + 1 WHERE id IN (2 * i - 1, 2 * i);
  DELETE FROM c WHERE id = 2 * i;
  COMMIT; END LOOP; END $$"""


def _run(python: str, tree: str | None, dsn: str, slot: str, fmt: str, end: str) -> float:
    env = os.environ.copy()
    if tree:
        env["PYTHONPATH"] = tree
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    args = ["stream", "--dsn", dsn, "--slot", slot, "--publication", "p", "--format", fmt]
    subprocess.run(
        [python, "-m", "pgtail", *args, "--end", end],
        stdout=subprocess.DEVNULL,
        env=env,
        cwd=tree,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the other source tree")
    parser.add_argument("--format", default="json", choices=["json", "sql"])
    parser.add_argument("--shape", default="small", choices=["small", "mix"])
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=6)
    args = parser.parse_args()
    server = start_bench_server()
    try:
        conn = create_database(server)
        cur = conn.cursor()
        cur.execute(TABLE)
        cur.execute("CREATE PUBLICATION p FOR TABLE c")
        for i in range(2 * args.pairs):
            cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"s{i}",))
        if args.shape == "mix":  # rows for the first updates and deletes
            cur.execute(
                "INSERT INTO c (name, qty) SELECT 'pre ' || g, g FROM generate_series(1, %s) g",
                (2 * args.transactions,),
            )
        cur.execute(MIX if args.shape == "mix" else SMALL)
        cur.execute("CALL fill(%s)", (args.transactions,))
        cur.execute("SELECT pg_current_wal_lsn()::text")
        end = cur.fetchone()[0]
        cpu: dict[str, list[float]] = {"new": [], "base": []}
        trees = {"new": None, "base": os.path.abspath(args.base)}
        slot = 0
        for pair in range(args.pairs):
            order = ("new", "base") if pair % 2 == 0 else ("base", "new")
            for which in order:
                began = time.monotonic()
                seconds = _run(
                    sys.executable, trees[which], server.dsn("bench"), f"s{slot}", args.format, end
                )
                slot += 1
                cpu[which].append(seconds)
                print(f"{which:4} cpu {seconds:.2f}s wall {time.monotonic() - began:.2f}s")
        ratios = [a / b for a, b in zip(cpu["new"], cpu["base"], strict=True)]
        print(
            f"{args.format} {args.shape}: median pairwise CPU ratio new/base"
            f" {statistics.median(ratios):.3f} {[round(r, 3) for r in ratios]}"
        )
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
