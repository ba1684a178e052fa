"""`pgtail.spark.direct.stage_partition` (what a task of ``pgtail spark run --writer
pyarrow`` does, without Spark) of two source trees, alternating, on one throwaway server.

Each run is a fresh process importing pgtail from its tree; it stages the same slot range
twice and reports the second (warm) run. Prints every run (wall time, CPU per change) and
the median of the pairwise ratios, A over B. Usage: python bench/stage_ab.py A B
[--changes N] [--tx-rows N] [--rounds K].
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent))  # for bench.spark

from bench.spark import SERVER_SETTINGS, workload  # noqa: E402
from pgtail.server import start_server  # noqa: E402

CHILD = r"""
import json, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from pgtail.spark.direct import stage_partition
from pgtail.spark.source import SourceDriver, parse_options
options = {"dsn": sys.argv[2], "slot": "read", "publication": "bench_pub"}
driver = SourceDriver(parse_options(options))
start = driver.initial()
[partition] = driver.partitions(start, driver.latest(start, None, None, wait=True))
driver.close()
runs = []
for _ in range(2):
    with tempfile.TemporaryDirectory() as output:
        t0, cpu0 = time.perf_counter(), time.process_time()
        [manifest] = stage_partition(partition, output)
        rows = sum(manifest.column("rows").to_pylist())
        runs.append((time.perf_counter() - t0, time.process_time() - cpu0, rows))
print(json.dumps(runs[-1]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--tx-rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    trees = [str(Path(args.a).resolve()), str(Path(args.b).resolve())]
    server = start_server(settings=SERVER_SETTINGS)
    try:
        dsn = server.dsn()
        workload(dsn, ("read",), args.changes, args.tx_rows)
        runs: dict[str, list[tuple[float, float]]] = {tree: [] for tree in trees}
        for i in range(args.rounds):
            for tree in trees if i % 2 == 0 else trees[::-1]:
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, tree, dsn],
                    capture_output=True, text=True,
                    env={**os.environ, "PYTHONPATH": tree},
                )  # fmt: skip
                if done.returncode:
                    sys.exit(f"{tree}: the staging run failed:\n{done.stderr}")
                wall, cpu, rows = json.loads(done.stdout.strip().splitlines()[-1])
                assert rows == args.changes, rows
                runs[tree].append((wall, cpu))
                print(f"{tree}: {wall:.2f}s, CPU {cpu / args.changes * 1e6:.1f} µs/change")
        a, b = runs[trees[0]], runs[trees[1]]
        wall = statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))
        cpu = statistics.median(x[1] / y[1] for x, y in zip(a, b, strict=True))
        print(
            f"{args.changes:,} changes, {args.tx_rows:,} a transaction, PostgreSQL "
            f"{server.major}: A over B, median of pairwise ratios: wall {wall:.3f}, CPU {cpu:.3f}"
        )
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
