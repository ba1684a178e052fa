"""pgtail at production's extremes (issue 34): thousands of tables, one very large value.

On a throwaway server (bench/common.py), each figure printed as it is measured:

- ``snapshot``: a database of 4,000 tables ``(id int PRIMARY KEY, v text)`` of one row
  each; ``pgtail stream --snapshot --format json`` of a publication of the first 1 and of
  N tables (200, 2,000, 4,000), wall clock into /dev/null; the cost a table more than
  the first: ``(T(N) - T(1)) / (N - 1)``. Goal: <= 3 ms a table at 2,000.
- ``first-change``: one transaction inserting one row into each of N tables, streamed from
  a slot with ``--max-changes N``, against N rows into one table (the same number of
  changes); the cost of a table's first change: ``(T(N tables) - T(1 table)) / N``.
  Goal: <= 1 ms.
- ``value``: one row holding one value of V MB (text with quotes, backslashes and line
  breaks; bytea, V MB of hex text on the wire), streamed with ``--max-changes 1`` in
  each format: peak RSS of the pgtail process and wall time. Goals: peak <= 3V + 80 MB;
  sql no slower than 2x json.

``--baseline DIR`` runs the same commands from another checkout too (e.g. ``git archive
main | tar -x -C DIR``), in turn with this one, so before and after come from one sitting.
Without ``--only``, bench/scale_reader.py's figures (a slow reader, SIGINT) follow, when
that module is there.

    .venv/bin/python bench/scale.py [--only snapshot|first-change|value|reader]
        [--tables 200,2000,4000] [--sizes 100,200] [--formats json,sql,table]
        [--repeat 1] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from common import connect, create_database, start_bench_server

from pgtail.server import LocalServer

DATABASE_TABLES = 4000


def run(args: list[str], cwd: str | None) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system: what the load of a
    shared machine changes least) of ``python -m pgtail ARGS`` into /dev/null, run from
    checkout ``cwd`` (first on PYTHONPATH) when given."""
    env = os.environ.copy()
    if cwd is not None:
        env["PYTHONPATH"] = cwd
    command = [sys.executable, "-m", "pgtail", *args]
    with open(os.devnull, "wb") as null:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=null, stderr=subprocess.PIPE, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise RuntimeError(f"pgtail {' '.join(args[:2])} exited {code}: {err.strip()}")
    return elapsed, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def checkouts(baseline: str | None) -> dict[str, str | None]:
    return {"pgtail": None, **({"baseline": baseline} if baseline else {})}


def make_tables(server: LocalServer) -> str:
    """The 4,000-table database; its DSN."""
    conn = create_database(server, "scale")
    with conn.cursor() as cur:
        for first in range(0, DATABASE_TABLES, 500):  # (a transaction's locks are bounded)
            cur.execute(
                "DO $$ BEGIN FOR i IN %s..%s LOOP EXECUTE format("
                "'CREATE TABLE t%%s (id int PRIMARY KEY, v text);"
                " INSERT INTO t%%s VALUES (1, ''one'')', lpad(i::text, 4, '0'),"
                " lpad(i::text, 4, '0')); END LOOP; END $$",
                (first, min(first + 500, DATABASE_TABLES) - 1),
            )
        cur.execute("VACUUM ANALYZE")
    conn.close()
    return server.dsn("scale")


def publish(dsn: str, count: int) -> str:
    """A publication of the first ``count`` tables; its name."""
    name = f"first_{count}"
    conn = connect(dsn)
    with conn.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        if cur.fetchone() is None:
            tables = ", ".join(f"t{i:04}" for i in range(count))
            cur.execute(f"CREATE PUBLICATION {name} FOR TABLE {tables}")
    conn.close()
    return name


def bench_snapshot(dsn: str, counts: list[int], repeat: int, baseline: str | None) -> None:
    print(f"snapshot: --snapshot --format json of N of {DATABASE_TABLES:,} tables")
    for count in counts:
        times: dict[str, list[tuple[float, float, float]]] = {n: [] for n in checkouts(baseline)}
        firsts: dict[str, list[tuple[float, float, float]]] = {n: [] for n in checkouts(baseline)}
        for _ in range(repeat):
            for name, cwd in checkouts(baseline).items():
                for size, out in ((1, firsts), (count, times)):
                    args = ["stream", "--dsn", dsn, "--publication", publish(dsn, size)]
                    args += ["--snapshot", "--format", "json", "--idle-exit", "0.1"]
                    out[name].append(run(args, cwd))
        for name in times:
            _report(name, count, times[name], firsts[name], count - 1, "more than the first", 3)


def _report(
    name: str,
    count: int,
    runs: list[tuple[float, float, float]],
    bases: list[tuple[float, float, float]],
    per: int,
    what: str,
    goal: float,
) -> None:
    """One line: the runs' wall time, and the cost a table (wall, and pgtail's CPU) over
    the base runs'."""
    wall = statistics.median(r[0] for r in runs)
    cpu = statistics.median(r[2] for r in runs)
    wall_each = (wall - statistics.median(r[0] for r in bases)) / per
    cpu_each = (cpu - statistics.median(r[2] for r in bases)) / per
    print(
        f"  {name:8s} {count:5,} tables: {wall:6.2f} s; a table {what}:"
        f" {wall_each * 1000:5.2f} ms wall, {cpu_each * 1000:5.2f} ms pgtail CPU (goal <= {goal})"
    )


def _first_changes(dsn: str, count: int, spread: bool) -> str:
    """A slot holding one transaction of ``count`` inserts, into ``count`` tables
    (``spread``) or all into the first; its name."""
    conn = connect(dsn)
    slot = f"fc_{count}_{int(spread)}_{os.getpid()}"
    with conn.cursor() as cur:
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        cur.execute("CREATE SEQUENCE IF NOT EXISTS ids START 10")
        cur.execute(
            "DO $$ BEGIN FOR i IN 0..%s LOOP EXECUTE format("
            "'INSERT INTO t%%s VALUES (nextval(''ids''), ''x'')',"
            " CASE WHEN %s THEN lpad(i::text, 4, '0') ELSE '0000' END); END LOOP; END $$",
            (count - 1, spread),
        )
    conn.close()
    return slot


def _drop_slot(dsn: str, slot: str) -> None:
    conn = connect(dsn)
    conn.cursor().execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    conn.close()


def bench_first_change(dsn: str, counts: list[int], repeat: int, baseline: str | None) -> None:
    print("first-change: N inserts, one into each of N tables, against N into one table")
    for count in counts:
        publication = publish(dsn, count)
        spread: dict[str, list[tuple[float, float, float]]] = {n: [] for n in checkouts(baseline)}
        single: dict[str, list[tuple[float, float, float]]] = {n: [] for n in checkouts(baseline)}
        for _ in range(repeat):
            for name, cwd in checkouts(baseline).items():
                for flag, out in ((False, single), (True, spread)):
                    slot = _first_changes(dsn, count, flag)
                    args = ["stream", "--dsn", dsn, "--slot", slot, "--publication", publication]
                    args += ["--format", "json", "--max-changes", str(count)]
                    try:
                        out[name].append(run(args, cwd))
                    finally:
                        _drop_slot(dsn, slot)
        for name in spread:
            _report(name, count, spread[name], single[name], count, "for its first change", 1)


VALUES: dict[str, Callable[[int], str]] = {
    # quotes, backslashes and line breaks: SQL's escape string, JSON's escapes
    "text": lambda size: f"SELECT left(repeat(E'ab''c\\\\d\\n', {size} / 7 + 1), {size})",
    # bytea: its hex text on the wire is ``size`` bytes
    "bytea": lambda size: f"SELECT decode(repeat('ab', {size} / 4), 'hex')",
}


def bench_value(
    server: LocalServer, sizes: list[int], formats: list[str], repeat: int, baseline: str | None
) -> None:
    print("value: one row of one value of V MB, --max-changes 1 (peak RSS, wall time)")
    conn = create_database(server, "value")
    dsn = server.dsn("value")
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE big (id int PRIMARY KEY, t text, b bytea)")
        cur.execute("ALTER TABLE big ALTER t SET STORAGE EXTERNAL, ALTER b SET STORAGE EXTERNAL")
        cur.execute("CREATE PUBLICATION big_pub FOR TABLE big")
    for size_mb in sizes:
        size = size_mb << 20
        for kind, make in VALUES.items():
            results: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for _ in range(repeat):
                for fmt in formats:
                    for name, cwd in checkouts(baseline).items():
                        slot = f"value_{os.getpid()}"
                        with conn.cursor() as cur:
                            cur.execute(
                                "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,)
                            )
                            column = "t" if kind == "text" else "b"
                            value = make(size)
                            cur.execute(f"INSERT INTO big (id, {column}) VALUES (1, ({value}))")
                            cur.execute("DELETE FROM big")
                        args = ["stream", "--dsn", dsn, "--slot", slot, "--publication", "big_pub"]
                        args += ["--format", fmt, "--max-changes", "1"]
                        try:
                            results.setdefault((fmt, name), []).append(run(args, cwd))
                        finally:
                            _drop_slot(dsn, slot)
            for (fmt, name), runs in results.items():
                elapsed = statistics.median(r[0] for r in runs)
                peak = max(r[1] for r in runs)
                print(
                    f"  {name:8s} {kind:5s} {size_mb:4d} MB {fmt:5s}: peak {peak:6.0f} MB"
                    f" ({peak / size_mb:4.1f}x V; goal <= {3 * size_mb + 80} MB),"
                    f" {elapsed:6.2f} s"
                )
            for name in checkouts(baseline):
                if ("sql", name) in results and ("json", name) in results:
                    ratios = [
                        s[0] / j[0]
                        for s, j in zip(results["sql", name], results["json", name], strict=True)
                    ]
                    print(
                        f"  {name:8s} {kind:5s} {size_mb:4d} MB sql/json time:"
                        f" {statistics.median(ratios):4.2f}x (goal <= 2)"
                    )
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["snapshot", "first-change", "value", "reader"])
    parser.add_argument("--tables", default="200,2000,4000")
    parser.add_argument("--sizes", default="100,200", help="MB, comma-separated")
    parser.add_argument("--formats", default="json,sql,table")
    parser.add_argument("--repeat", type=int, default=1, help="median of N runs of each")
    parser.add_argument("--baseline", help="a checkout to run in turn with this one")
    args = parser.parse_args()
    counts = [int(n) for n in args.tables.split(",")]
    sections = [args.only] if args.only else ["snapshot", "first-change", "value", "reader"]
    if any(s != "reader" for s in sections):
        server = start_bench_server()
        print(f"PostgreSQL {server.major}")
        try:
            if "snapshot" in sections or "first-change" in sections:
                dsn = make_tables(server)
                if "snapshot" in sections:
                    bench_snapshot(dsn, counts, args.repeat, args.baseline)
                if "first-change" in sections:
                    bench_first_change(dsn, counts, args.repeat, args.baseline)
            if "value" in sections:
                sizes = [int(n) for n in args.sizes.split(",")]
                formats = args.formats.split(",")
                bench_value(server, sizes, formats, args.repeat, args.baseline)
        finally:
            server.destroy()
    if "reader" in sections:
        try:
            import scale_reader  # type: ignore[import-not-found]  # bench/scale_reader.py
        except ImportError:
            if args.only == "reader":
                print("reader: bench/scale_reader.py is not here")
        else:
            scale_reader.main()


if __name__ == "__main__":
    main()
