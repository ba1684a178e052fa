"""How fast does ``pgtail stream`` drain one large transaction, next to a bare consumer?

On a throwaway server: commit N inserts of a mixed-type table in one transaction while
a consumer streams the slot, and time from the commit until the consumer is done:

- ``pgtail``: ``pgtail stream --format FMT --max-changes N`` into a pipe this script
  drains; done when it exits after writing the N-th change.
- ``bare``: a psycopg2 ``LogicalReplicationConnection`` consumer that reads every
  message and decodes nothing; done at the transaction's Commit message.

Prints both times, rows per second, and the ratio. With ``--rss-rows M`` (default
1,000,000) it also streams an M-row transaction through pgtail and prints its peak RSS.

    /work/venv/bin/python bench/drain.py [--rows 200000] [--format json|sql|table]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

import psycopg2
import psycopg2.extras
from common import INSERT, TABLE, create_database, pairwise_ratios, start_bench_server

from pgtail.server import LocalServer

BARE = r"""
import select, sys, psycopg2, psycopg2.extras
factory = psycopg2.extras.LogicalReplicationConnection
conn = psycopg2.connect(sys.argv[1], connection_factory=factory)
cur = conn.cursor()
cur.start_replication(slot_name=sys.argv[2], decode=False,
                      options={"proto_version": sys.argv[3], "publication_names": "bench_pub"})
rows = 0
while True:
    msg = cur.read_message()
    if msg is None:
        select.select([cur], [], [], 1.0)
        continue
    kind = msg.payload[0]
    if kind == 73:  # 'I'
        rows += 1
    elif kind == 67 and rows:  # 'C' after the inserts
        cur.send_feedback(flush_lsn=msg.data_start, force=True)
        break
print(rows)
"""


def wait_active(conn: psycopg2.extensions.connection, slot: str) -> None:
    with conn.cursor() as cur:
        for _ in range(600):
            cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
            row = cur.fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    raise RuntimeError(f"slot {slot} never became active")


def fresh_slot(conn: psycopg2.extensions.connection, slot: str) -> None:
    with conn.cursor() as cur:
        cur.execute("TRUNCATE bench")
        cur.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
            " WHERE slot_name = %s",
            (slot,),
        )
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def commit_rows(server: LocalServer, rows: int) -> float:
    conn = psycopg2.connect(server.dsn("bench"))
    with conn.cursor() as cur:
        cur.execute(INSERT, (rows,))
    conn.commit()
    committed = time.perf_counter()
    conn.close()
    return committed


def drain(proc: subprocess.Popen[bytes], counter: list[float], lines: int) -> None:
    """Read pgtail's output; note when the ``lines``-th line arrived."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return
        counter[0] += chunk.count(b"\n")
        if counter[0] >= lines and not counter[1]:
            counter[1] = time.perf_counter()


def wait_child(proc: subprocess.Popen[bytes]) -> tuple[int, int, float]:
    """(exit status, peak RSS in KiB, CPU seconds) of this one child."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, int(usage.ru_maxrss), usage.ru_utime + usage.ru_stime


def run_bare(server: LocalServer, rows: int, proto: int) -> float:
    admin = psycopg2.connect(server.dsn("bench"))
    admin.autocommit = True
    fresh_slot(admin, "bare")
    proc = subprocess.Popen(
        [sys.executable, "-c", BARE, server.dsn("bench"), "bare", str(proto)],
        stdout=subprocess.PIPE,
    )
    wait_active(admin, "bare")
    committed = commit_rows(server, rows)
    out, _ = proc.communicate()
    done = time.perf_counter()
    assert int(out) == rows, out
    admin.close()
    return done - committed


def run_pgtail(
    server: LocalServer, rows: int, fmt: str, extra: list[str]
) -> tuple[float, int, float]:
    admin = psycopg2.connect(server.dsn("bench"))
    admin.autocommit = True
    fresh_slot(admin, "pgtail")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgtail",
            "stream",
            "--dsn",
            server.dsn("bench"),
            "--slot",
            "pgtail",
            "--publication",
            "bench_pub",
            "--format",
            fmt,
            "--max-changes",
            str(rows),
            *extra,
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "COLUMNS": "160"},
    )
    counter = [0.0, 0.0]  # lines read, time the last expected JSON line arrived
    reader = threading.Thread(target=drain, args=(proc, counter, rows))
    reader.start()
    wait_active(admin, "pgtail")
    committed = commit_rows(server, rows)
    code, rss, cpu = wait_child(proc)
    done = time.perf_counter()
    reader.join()
    if code != 0:
        raise RuntimeError(f"pgtail exited with {code}")
    admin.close()
    if fmt == "json":
        if counter[0] != rows:
            raise RuntimeError(f"pgtail wrote {counter[0]:.0f} lines, expected {rows}")
        done = counter[1]  # the last JSON line, not the process exit
    return done - committed, rss, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rss-rows", type=int, default=1_000_000, help="0: skip the RSS run")
    parser.add_argument("--format", default="json", choices=["json", "sql", "table"])
    parser.add_argument("--binary", action="store_true", help="pgtail --binary")
    parser.add_argument(
        "--repeat", type=int, default=1, help="N runs of each, alternating; the best is taken"
    )
    args = parser.parse_args()

    server = start_bench_server()
    try:
        conn = create_database(server)
        with conn.cursor() as cur:
            cur.execute(TABLE)
            cur.execute("CREATE PUBLICATION bench_pub FOR TABLE bench")
        proto = min(4, server.major - 12) if server.major >= 14 else 1
        extra = ["--binary"] if args.binary else []
        print(
            f"PostgreSQL {server.major}, {args.rows:,} rows in one transaction,"
            f" pgtail --format {args.format}{' --binary' if args.binary else ''}"
        )
        # Alternate the two so that both see the same machine: on a shared machine the
        # bare consumer alone varies by a third from one minute to the next.
        bares: list[float] = []
        results: list[tuple[float, int, float]] = []
        for _ in range(args.repeat):
            bares.append(run_bare(server, args.rows, proto))
            results.append(run_pgtail(server, args.rows, args.format, extra))
        bare = min(bares)
        print(f"bare psycopg2 consumer: {bare:6.2f} s  ({args.rows / bare:10,.0f} rows/s)")
        ours = min(r[0] for r in results)
        cpu = min(r[2] for r in results)
        print(
            f"pgtail stream:          {ours:6.2f} s  ({args.rows / ours:10,.0f} rows/s;"
            f" process CPU {cpu:.2f} s, startup included)"
        )
        pairs = pairwise_ratios((r[0] for r in results), bares)
        middle = statistics.median(r[0] for r in results) / statistics.median(bares)
        print(
            f"ratio pgtail / bare:    {ours / bare:6.2f}x  best against best (goal: <= 1.25x);"
            f" median against median {middle:.2f}x;"
            f" run by run {', '.join(f'{p:.2f}x' for p in pairs)}"
        )
        if args.rss_rows:
            elapsed, rss, _ = run_pgtail(server, args.rss_rows, args.format, extra)
            print(
                f"peak RSS streaming {args.rss_rows:,} rows: {rss / 1024:6.1f} MB"
                f"  ({elapsed:.1f} s; goal: < 150 MB)"
            )
        conn.close()
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
