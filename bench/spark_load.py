"""How fast does ``pgtail spark run --snapshot`` load a table, with one task and two?

On a throwaway server: a table of N rows of bench/drain.py's mixed-type shape, loaded
into change logs by the initial load of ``pgtail spark run --snapshot``
(`pgtail.spark.load.initial_load`, pyarrow writer) on ``local[1]`` and on ``local[2]``,
each in its own process (the load alone is timed, from the temporary slot's snapshot to
the committed logs; Spark's start-up is not), next to the same rows as JSON to
/dev/null by ``pgtail stream --snapshot --format json`` and by the server alone,
``COPY (SELECT row_to_json(t) FROM bench t) TO STDOUT``.

CPU: the client's (for a load: the driver, Spark's JVM and Python workers during the load
alone, from /proc; else the process's own) and the server's (the postmaster and every backend it
reaped, from /proc), for each run. The machine has 2 cores, which the server shares
with Spark (and, on a shared machine, with whatever else runs): two tasks at most
double what one does only while the server's share leaves them the cores.

    .venv/bin/python bench/spark_load.py [--rows 2000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg2
from common import (
    CLK_TCK,
    create_database,
    load_bench_table,
    processes,
    psql_path,
    start_bench_server,
)

from pgtail.server import find_bindir


def server_cpu(datadir: Path) -> float:
    """CPU seconds of the postmaster, its live backends and those it reaped."""
    postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for pid, fields in processes():
        if pid == postmaster:
            total += sum(int(f) for f in fields[11:15]) / CLK_TCK  # utime stime cutime cstime
        elif int(fields[1]) == postmaster:
            total += sum(int(f) for f in fields[11:13]) / CLK_TCK
    return total


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root``'s descendants (not itself), with the children each
    reaped: Spark's JVM, its Python daemon and workers."""
    children: dict[int, list[int]] = {}
    times: dict[int, float] = {}
    for pid, fields in processes():
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(f) for f in fields[11:15]) / CLK_TCK
    total, todo = 0.0, list(children.get(root, []))
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(children.get(pid, []))
    return total


def timed(args: list[str], datadir: Path) -> tuple[float, float, float, str]:
    """Wall time, client CPU, server CPU and stdout of a command (a spark load's; the
    others' stdout goes to /dev/null)."""
    before = server_cpu(datadir)
    start = time.perf_counter()
    capture = "--child" in args
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(
            args, stdout=subprocess.PIPE if capture else null, stderr=subprocess.PIPE
        )
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise RuntimeError(f"{args[:4]} failed: {err[-2000:]}")
    time.sleep(0.2)  # the backends exit and are reaped
    return elapsed, usage.ru_utime + usage.ru_stime, server_cpu(datadir) - before, out.decode()


def child(master: str, dsn: str, slot: str) -> None:
    """One load on ``master``; prints its seconds and ranges as JSON."""
    from pgtail.spark.load import initial_load
    from pgtail.spark.pipeline import session

    spark = session(master, "pgtail-bench", {"spark.ui.enabled": "false"})
    spark.sparkContext.setLogLevel("ERROR")
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    conn.cursor().execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
    try:
        with tempfile.TemporaryDirectory() as out:
            options = {"dsn": dsn, "slot": slot, "publication": "bench_pub"}
            own = time.process_time()
            spark_cpu = tree_cpu(os.getpid())
            start = time.perf_counter()
            result = initial_load(spark, options=options, output=out, writer="pyarrow")
            elapsed = time.perf_counter() - start
            cpu = time.process_time() - own + tree_cpu(os.getpid()) - spark_cpu
    finally:
        conn.cursor().execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.close()
        spark.stop()
    print(json.dumps({"seconds": elapsed, "ranges": result.ranges, "cpu": cpu}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=2, help="best of N runs of each")
    parser.add_argument(
        "--child", nargs=3, metavar=("MASTER", "DSN", "SLOT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return

    bindir = find_bindir()
    server = start_bench_server(bindir)
    try:
        conn = create_database(server)
        load_bench_table(conn, args.rows)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_size_pretty(pg_relation_size('bench'))")
            size = cur.fetchone()[0]
        conn.close()
        dsn = server.dsn("bench")
        psql = psql_path(bindir)
        load = [sys.executable, __file__, "--child"]
        commands = {
            "spark local[1]": [*load, "local[1]", dsn, "bench_load_1"],
            "spark local[2]": [*load, "local[2]", dsn, "bench_load_2"],
            "pgtail stream": [
                *(sys.executable, "-m", "pgtail", "stream", "--dsn", dsn),
                *("--publication", "bench_pub", "--snapshot", "--format", "json"),
                *("--idle-exit", "0.1"),
            ],
            "row_to_json": [
                *(psql, "-X", "-q", "-d", dsn, "-c"),
                "COPY (SELECT row_to_json(t) FROM bench t) TO STDOUT",
            ],
        }
        print(
            f"PostgreSQL {server.major}, a table of {args.rows:,} rows ({size}), "
            f"best of {args.repeat}; {os.cpu_count()} cores, shared"
        )
        best: dict[str, tuple[float, float, float, float, int]] = {}
        for _ in range(args.repeat):  # alternating, so each sees the same machine
            for name, command in commands.items():
                wall, client, srv, out = timed(command, server.datadir)
                seconds, ranges = wall, 0
                if name.startswith("spark"):
                    report = json.loads(out.strip().splitlines()[-1])
                    seconds, ranges = report["seconds"], report["ranges"]
                    client = report["cpu"]  # the load's alone (Spark's JVM and workers)
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, wall, client, srv, ranges)
        for name, (seconds, wall, client, srv, ranges) in best.items():
            what = f"load {seconds:6.2f} s of {wall:6.2f} s" if ranges else f"{seconds:6.2f} s"
            print(
                f"{name:15s} {what:26s} {args.rows / seconds:10,.0f} rows/s; CPU client"
                f" {client:6.1f} s, server {srv:5.1f} s" + (f"; {ranges} ranges" if ranges else "")
            )
        speedup = best["spark local[1]"][0] / best["spark local[2]"][0]
        print(f"two tasks / one task: {speedup:.2f}x (goal: >= 1.6x)")
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
