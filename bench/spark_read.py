"""The Spark source's executor work without Spark: `pgtail.spark.source.read_partition`
of N inserts (the Arrow batches an executor hands Spark) next to ``pgtail stream --format
json > /dev/null`` of the same changes, alternating, on a throwaway server.

Prints each pair (with the CPU per change of this process and of ``pgtail stream``) and
the median of the ratios (CLI time / read time: 1.0 means the
executor decodes as fast as the CLI). ``--typed``: the typed per-table read
(``option("table", "public.mixed")``: the table's columns with Spark types) instead of
the JSON rows. ``--stage``: what a task of ``pgtail spark run --writer pyarrow`` does
(`pgtail.spark.direct.stage_partition`: read, convert to typed columns, write Parquet),
without Spark. Usage: python bench/spark_read.py [--changes N] [--tx-rows N] [--repeat K] [--typed |
--stage] (the ``pgtail`` imported is the one on ``sys.path``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # for bench.spark; PYTHONPATH first

from bench.spark import SERVER_SETTINGS, workload  # noqa: E402
from pgtail.lsn import format_lsn  # noqa: E402
from pgtail.server import start_server  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--tx-rows", type=int, default=10_000, help="inserts per transaction")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--typed", action="store_true")
    kind.add_argument("--stage", action="store_true")
    args = parser.parse_args()

    from pgtail.spark.direct import stage_partition
    from pgtail.spark.source import SourceDriver, parse_options, read_partition

    server = start_server(settings=SERVER_SETTINGS)
    try:
        dsn = server.dsn()
        workload(
            dsn, ("read", *(f"cli{i}" for i in range(args.repeat))), args.changes, args.tx_rows
        )
        options = {"dsn": dsn, "slot": "read", "publication": "bench_pub"}
        if args.typed:
            options["table"] = "public.mixed"
        driver = SourceDriver(parse_options(options))
        start = driver.initial()
        end = driver.latest(start, None, None, wait=True)
        [partition] = driver.partitions(start, end)
        driver.close()
        ratios = []
        for i in range(args.repeat):
            t0, cpu0 = time.perf_counter(), time.process_time()
            if args.stage:
                with tempfile.TemporaryDirectory(prefix="pgtail-bench-stage-") as output:
                    [manifest] = stage_partition(partition, output)
                    rows = sum(manifest.column("rows").to_pylist())
            else:
                rows = sum(batch.num_rows for batch in read_partition(partition))
            read, read_cpu = time.perf_counter() - t0, time.process_time() - cpu0
            assert rows == args.changes, rows
            t0, cpu0 = time.perf_counter(), _children_cpu()
            subprocess.run(
                [sys.executable, "-m", "pgtail", "stream", "--dsn", dsn, "--slot", f"cli{i}",
                 "--publication", "bench_pub", "--end", format_lsn(end["read"]),
                 "--format", "json"],
                stdout=subprocess.DEVNULL, check=True,
            )  # fmt: skip
            cli, cli_cpu = time.perf_counter() - t0, _children_cpu() - cpu0
            ratios.append(cli / read)
            name = "stage_partition" if args.stage else "read_partition"
            per = 1e6 / args.changes  # seconds -> µs per change
            print(
                f"{name} {read:.2f}s (CPU {read_cpu * per:.1f} µs/change)  pgtail stream "
                f"{cli:.2f}s (CPU {cli_cpu * per:.1f} µs/change, start-up included)  "
                f"ratio {cli / read:.2f}"
            )
        print(
            f"{args.changes:,} changes: executor "
            + ("read (typed)" if args.typed else "stage" if args.stage else "read")
            + " vs "
            "pgtail stream, median ratio "
            f"{statistics.median(ratios):.2f} (PostgreSQL {server.major})"
        )
    finally:
        server.destroy()


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
