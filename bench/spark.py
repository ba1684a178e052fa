"""Spark pipeline throughput: changes per second from a slot into the Parquet change log,
next to pgtail's own JSON drain of the same changes, and what a batch costs the server.

On a throwaway server: four pgoutput slots are created at the same position, then N
changes (inserts of a mixed-type table in transactions of ``--tx-rows``) are committed.

- ``source alone``: the ``pgoutput`` source's rows (``available-now``) into a Parquet
  file sink partitioned by table, on a ``--master`` (default ``local[2]``) session.
- ``pgtail spark run``: `pgtail.spark.pipeline.run` with ``available-now`` (the typed
  per-table change logs), once with each ``--writers`` (pyarrow: the executors write;
  spark: Spark's Parquet writer), each on its own slot; timed from the start of the query
  to its end (session start-up and a first small query with each writer, which loads
  the JVM's classes and starts the Python workers, reported apart), and its batches
  alone (Spark's ``triggerExecution``: without starting and stopping the query).
- ``spark, two slots``: ``pgtail spark run`` reading two slots (one partition each) at
  once (the default writer).
- ``json``: ``pgtail stream --slot <slot> --end <lsn> --format json > /dev/null``.
- CPU per change: of ``pgtail stream`` (the process), and during each ``pgtail spark
  run`` of Spark's JVM and of its Python workers (every process this one started,
  from ``/proc/<pid>/stat``; the workers outlive a query, so the difference is theirs).
- the server during each Spark run: temporary files written (``pg_stat_database``
  temp_files / temp_bytes, before and after) and the peak resident memory of the backends
  the Spark source used (``application_name`` pgtail-spark; ``/proc/<pid>/status``, the
  server runs on this machine).

Usage: python bench/spark.py [--changes 1000000] [--tx-rows 10000]
(the ``pgtail`` imported is the one on ``sys.path``: to compare two trees in one sitting,
run it from each tree's directory with ``PYTHONPATH=<tree>`` -- Spark's Python workers
put their working directory first on their path, so with ``PYTHONPATH`` alone they would
run the pgtail of the directory the bench was started from)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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
CREATE TABLE warm (id int PRIMARY KEY);
CREATE PUBLICATION warm_pub FOR TABLE warm;
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
SLOTS = (
    "spark_slot", "spark_slot_spark", "source_slot", "spark_a", "spark_b", "json_slot",
    "warm_slot", "warm_slot_pyarrow",
)  # fmt: skip
SERVER_SETTINGS = {"logical_decoding_work_mem": "256MB", "max_wal_size": "4GB"}


def prepare(cur: Any, slots: tuple[str, ...]) -> None:
    """The bench's tables and publications, then a pgoutput slot of each name."""
    cur.execute(SCHEMA)
    for slot in slots:
        cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def insert(cur: Any, changes: int, tx_rows: int) -> None:
    """``changes`` inserts into ``mixed``, committed ``tx_rows`` to a transaction."""
    for first in range(0, changes, tx_rows):
        cur.execute(INSERT, (first, min(first + tx_rows, changes) - 1))


def workload(dsn: str, slots: tuple[str, ...], changes: int, tx_rows: int) -> None:
    """`prepare` then `insert`: the slots' backlog of the bench's inserts."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            prepare(cur, slots)
            insert(cur, changes, tx_rows)
    finally:
        conn.close()


class ServerUse:
    """Temporary files and the peak memory of the Spark source's backends during a run."""

    def __init__(self, dsn: str) -> None:
        self.conn = psycopg2.connect(dsn)
        self.conn.autocommit = True
        self.peak_kb = 0
        self.batches = 0.0  # seconds of the query's batches (spark_run)
        self.cpu: dict[str, float] = {}  # seconds of CPU by kind of process (spark_run)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._before = self._temp()

    def _temp(self) -> tuple[int, int]:
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_stat_clear_snapshot()")
            cur.execute(
                "SELECT temp_files, temp_bytes FROM pg_stat_database"
                " WHERE datname = current_database()"
            )
            row = cur.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])

    def _sample(self) -> None:
        watch = psycopg2.connect(self.conn.dsn)
        watch.autocommit = True
        try:
            while not self._stop.is_set():
                with watch.cursor() as cur:
                    cur.execute(
                        "SELECT pid FROM pg_stat_activity WHERE application_name = 'pgtail-spark'"
                    )
                    pids = [r[0] for r in cur.fetchall()]
                for pid in pids:
                    self.peak_kb = max(self.peak_kb, _rss_kb(pid))
                time.sleep(0.05)
        finally:
            watch.close()

    def __enter__(self) -> ServerUse:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        time.sleep(0.6)  # statistics reach pg_stat_database within 500 ms
        files, size = self._temp()
        self.temp_files = files - self._before[0]
        self.temp_bytes = size - self._before[1]
        self.conn.close()

    def report(self) -> str:
        return (
            f"server: {self.temp_files} temp files, {self.temp_bytes / 1e6:.1f} MB temp bytes; "
            f"peak backend memory (RSS) {self.peak_kb / 1024:.0f} MB"
        )


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):  # the peak resident set of the process
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def spark_run(
    spark: Any, dsn: str, options: dict[str, str], work: Path, name: str, writer: str = "auto"
) -> Any:
    from pgtail.spark.pipeline import read_changes, run

    triggers: list[float] = []

    def progress(progress: dict[str, Any]) -> None:
        triggers.append(progress["durationMs"]["triggerExecution"] / 1000)
        if os.environ.get("BENCH_DURATIONS"):
            _print_durations(progress)

    before = descendants_cpu()
    with ServerUse(dsn) as use:
        t0 = time.perf_counter()
        result = run(
            spark,
            options={"dsn": dsn, "publication": "bench_pub", **options},
            output=work / name,
            checkpoint=work / f"{name}-chk",
            on_progress=progress,
            writer=writer,
        )
        seconds = time.perf_counter() - t0
    after = descendants_cpu()
    use.cpu = {kind: after.get(kind, 0.0) - before.get(kind, 0.0) for kind in after}
    written = read_changes(spark, work / name).count()
    use.batches = sum(triggers)  # the query's batches, without its start and stop
    return result, seconds, written, use


def descendants_cpu() -> dict[str, float]:
    """Seconds of CPU (user + system) so far of the processes this one started, directly
    or not, by kind: ``java`` (Spark's JVM) and ``python`` (its workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    me = os.getpid()
    total: dict[str, float] = {}
    for pid, (name, cpu) in used.items():
        ancestor = parents.get(pid, 0)
        while ancestor > 1 and ancestor != me:
            ancestor = parents.get(ancestor, 0)
        if ancestor == me:
            kind = "java" if name == "java" else "python" if name.startswith("python") else name
            total[kind] = total.get(kind, 0.0) + cpu
    return total


def _print_durations(progress: dict[str, Any]) -> None:
    print("  durations (ms):", progress.get("durationMs"))


def source_run(spark: Any, dsn: str, options: dict[str, str], work: Path, name: str) -> Any:
    """The source alone: the slot's untyped rows into a Parquet file sink partitioned by
    table (available-now), as `pgtail.spark.pipeline.run` reads them."""
    from pgtail.spark.pipeline import commit_checkpoint

    source = {"dsn": dsn, "publication": "bench_pub", **options}
    with ServerUse(dsn) as use:
        t0 = time.perf_counter()
        reader = spark.readStream.format("pgoutput").options(**source).load()
        query = (
            reader.writeStream.format("parquet")
            .option("path", str(work / name))
            .option("checkpointLocation", str(work / f"{name}-chk"))
            .partitionBy("schema", "table")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        commit_checkpoint(source, work / f"{name}-chk")
        seconds = time.perf_counter() - t0
    rows = sum(int(p.get("numInputRows", 0)) for p in query.recentProgress)
    if os.environ.get("BENCH_DURATIONS"):
        for progress in query.recentProgress:
            _print_durations(progress)
    written = spark.read.parquet(str(work / name)).count()
    return rows, seconds, written, use


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--tx-rows", type=int, default=10_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--skip-json", action="store_true")
    parser.add_argument("--skip-two-slots", action="store_true")
    parser.add_argument(
        "--writers", default="pyarrow,spark", help="spark run's writers to time, comma-separated"
    )
    args = parser.parse_args()
    args.writers = args.writers.split(",")

    import pgtail

    work = Path(tempfile.mkdtemp(prefix="pgtail-bench-spark-"))
    server = start_server(settings=SERVER_SETTINGS)
    try:
        dsn = server.dsn()
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        with conn.cursor() as cur:
            prepare(cur, SLOTS)
            cur.execute("INSERT INTO warm SELECT generate_series(1, 1000)")
            t0 = time.perf_counter()
            insert(cur, args.changes, args.tx_rows)
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
        print(f"pgtail from {Path(pgtail.__file__).parent.parent}")
        print(
            f"workload: {args.changes:,} inserts committed in {time.perf_counter() - t0:.1f}s, "
            f"{wal_bytes / 1e6:.0f} MB of WAL pending in each slot (PostgreSQL {server.major})"
        )

        json_rate = None
        if not args.skip_json:
            command = [sys.executable, "-m", "pgtail", "stream", "--dsn", dsn,
                       "--slot", "json_slot", "--publication", "bench_pub",
                       "--end", end_lsn, "--format", "json"]  # fmt: skip
            t0 = time.perf_counter()
            cpu0 = _children_cpu()
            with open(os.devnull, "wb") as devnull:
                subprocess.run(command, stdout=devnull, check=True)
            json_seconds = time.perf_counter() - t0
            json_cpu = _children_cpu() - cpu0
            json_rate = args.changes / json_seconds
            print(
                f"pgtail stream --format json > /dev/null: {args.changes:,} changes in "
                f"{json_seconds:.1f}s -> {json_rate:,.0f} changes/s; "
                f"CPU {json_cpu / args.changes * 1e6:.1f} µs/change (start-up included)"
            )

        from pgtail.spark.pipeline import session

        t0 = time.perf_counter()
        spark = session(
            args.master,
            "pgtail-bench",
            {
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "2",
                "spark.driver.memory": "2g",
                # the source-alone sink is partitioned by table: a writer per table open at
                # once instead of sorting each batch by table first
                "spark.sql.maxConcurrentOutputFileWriters": "16",
            },
        )
        spark.sparkContext.setLogLevel("ERROR")
        # a first small query with each writer loads the JVM's classes (Spark's Parquet
        # writer's too) and starts the Python workers with what each writer imports
        for writer, slot in (("spark", "warm_slot"), ("pyarrow", "warm_slot_pyarrow")):
            spark_run(
                spark, dsn, {"slot": slot, "publication": "warm_pub"}, work, f"warm-{writer}",
                writer,
            )  # fmt: skip
        startup = time.perf_counter() - t0
        try:
            rows, seconds, written, use = source_run(
                spark, dsn, {"slot": "source_slot"}, work, "source"
            )
            assert written == rows == args.changes, (written, rows, args.changes)
            rate = rows / seconds
            versus = f" = {rate / json_rate:.2f}x pgtail stream" if json_rate else ""
            print(
                f"spark ({args.master}), the source alone into Parquet: {rows:,} changes in "
                f"{seconds:.1f}s -> {rate:,.0f} changes/s{versus}"
            )
            print(f"  {use.report()}")
            for writer, slot in (("pyarrow", "spark_slot"), ("spark", "spark_slot_spark")):
                if writer not in args.writers:
                    continue
                result, seconds, written, use = spark_run(
                    spark, dsn, {"slot": slot}, work, f"one-{writer}", writer
                )
                assert written == args.changes, (written, args.changes)
                rate = result.rows / seconds
                versus = f" = {rate / json_rate:.2f}x pgtail stream" if json_rate else ""
                batches = result.rows / use.batches
                print(
                    f"pgtail spark run ({args.master}, --writer {writer}), one slot: "
                    f"{result.rows:,} changes in {result.batches} batch(es), {seconds:.1f}s "
                    f"-> {rate:,.0f} changes/s{versus} "
                    f"(+ {startup:.1f}s session start-up and a first small query); the "
                    f"batches alone {use.batches:.1f}s -> {batches:,.0f} changes/s"
                    + (f" = {batches / json_rate:.2f}x" if json_rate else "")
                )
                cpu = ", ".join(
                    f"{kind} {seconds:.2f}s ({seconds / result.rows * 1e6:.1f} µs/change)"
                    for kind, seconds in sorted(use.cpu.items())
                    if kind in ("java", "python")
                )
                print(f"  CPU during the run (start and stop included): {cpu}")
                print(f"  {use.report()}")
            if not args.skip_two_slots:
                result, seconds, written, use = spark_run(
                    spark, dsn, {"slots": "spark_a,spark_b"}, work, "two"
                )
                assert written == 2 * args.changes, (written, args.changes)
                print(
                    f"spark ({args.master}), two slots in one query: {result.rows:,} changes "
                    f"in {seconds:.1f}s -> {result.rows / seconds:,.0f} changes/s"
                )
                print(f"  {use.report()}")
        finally:
            spark.stop()
    finally:
        server.destroy()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
