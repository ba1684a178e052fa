"""What a pgtail command costs before it does its job: the CPU (user + system) and wall
time of short commands, each run as a new process, alternating with another tree's
pgtail (``--base DIR``) when given.

The commands: ``pgtail --help``; a shell completion of a slot name (what every TAB
runs); ``pgtail slot list``; ``pgtail stream --end`` with nothing to stream; ``pgtail
doctor``. Each of the last four connects to a throwaway server.

Usage: python bench/startup.py [--base DIR] [--rounds N]. Prints, per command, the
median CPU and wall time of each tree, and the median of the pairwise CPU ratios
(this tree / base: below 1 is faster).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.common import connect, median_ratio, start_bench_server  # noqa: E402


def commands(dsn: str, end: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    complete = {
        "DATABASE_URL": dsn,
        "_PGTAIL_COMPLETE": "bash_complete",
        "COMP_WORDS": "pgtail slot info ",
        "COMP_CWORD": "3",
        "COMP_LINE": "pgtail slot info ",
        "COMP_POINT": "17",
    }
    return {
        "--help": (["--help"], {}),
        "TAB (slot name)": ([], complete),
        "slot list": (["slot", "list", dsn], {}),
        "stream --end": (["stream", "--slot", "s", "--publication", "p", "--end", end, dsn], {}),
        "doctor": (["doctor", "--publication", "p", dsn], {}),
    }


def run_once(tree: Path, args: list[str], extra: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``python -m pgtail ARGS`` from ``tree``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "_PGTAIL"))}
    env.update(extra, PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pgtail", *args], env=env, cwd=tree, capture_output=True
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):  # doctor exits 1 on a finding
        raise SystemExit(f"{args}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another tree's root, run in turn")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    trees = {"this": HERE.parent}
    if args.base is not None:
        trees["base"] = args.base.resolve()
    server = start_bench_server()
    try:
        dsn = server.dsn()
        conn = connect(dsn)
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
            cur.execute("CREATE PUBLICATION p FOR TABLE t")
            cur.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
            cur.execute("SELECT pg_current_wal_lsn()::text")
            row = cur.fetchone()
            assert row is not None
            end = str(row[0])
        conn.close()
        print(f"{'command':<16} {'tree':<5} {'CPU ms':>7} {'wall ms':>8}")
        for name, (argv, extra) in commands(dsn, end).items():
            cpu: dict[str, list[float]] = {t: [] for t in trees}
            wall: dict[str, list[float]] = {t: [] for t in trees}
            for i in range(args.rounds):
                order = list(trees) if i % 2 == 0 else list(reversed(trees))
                for tree in order:
                    c, w = run_once(trees[tree], argv, extra)
                    cpu[tree].append(c)
                    wall[tree].append(w)
            for tree in trees:
                print(
                    f"{name:<16} {tree:<5} {1000 * statistics.median(cpu[tree]):7.0f}"
                    f" {1000 * statistics.median(wall[tree]):8.0f}"
                )
            if "base" in trees:
                ratio = median_ratio(cpu["this"], cpu["base"])
                print(f"{'':<16} CPU this/base (median of pairwise ratios): {ratio:.2f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
