"""How fast does ``pgtail stream --snapshot`` copy a table, next to the server alone?

On a throwaway server: a table of N rows of bench/drain.py's mixed-type shape, copied
three ways, each into /dev/null, wall clock from start to exit (process start-up
included):

- ``pgtail``: ``pgtail stream --snapshot --format json --idle-exit 0.1`` (a temporary
  slot; it exits once the copy is written and nothing else comes);
- ``row_to_json``: ``psql -c "COPY (SELECT row_to_json(t) FROM bench t) TO STDOUT"``,
  the server writing JSON in C;
- ``\\copy``: ``psql -c "\\copy bench to /dev/null"``, the text rows alone.

Goal: pgtail at least 0.8x the speed of the row_to_json COPY (time ratio <= 1.25).
Peak RSS and the client's CPU seconds (least changed by a loaded machine) are printed too.
``--baseline DIR`` adds ``pgtail-base``: the same command run from another checkout
(e.g. ``git archive <commit> | tar -x -C DIR``), in turn with the others, so before and
after come from one sitting.

    .venv/bin/python bench/snapshot.py [--rows 1000000] [--repeat 3] [--format json|sql]
                                       [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from common import create_database, load_bench_table, psql_path, start_bench_server

from pgtail.server import find_bindir


def timed(args: list[str], cwd: str | None = None) -> tuple[float, int, float]:
    """Wall time, peak RSS (KiB) and CPU seconds (user + system: what a shared machine's
    load changes least) of a command whose stdout goes to /dev/null; run in
    ``cwd`` with it first on PYTHONPATH if given (a baseline checkout)."""
    env = None
    if cwd is not None:
        env = {**os.environ, "PYTHONPATH": cwd}
    with open(os.devnull, "wb") as null:
        start = time.perf_counter()
        proc = subprocess.Popen(args, stdout=null, stderr=subprocess.PIPE, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise RuntimeError(f"{args[:3]} failed: {err}")
    return elapsed, usage.ru_maxrss, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each")
    parser.add_argument("--format", default="json", choices=["json", "sql"])
    parser.add_argument("--baseline", help="a checkout to run as pgtail-base too")
    args = parser.parse_args()

    bindir = find_bindir()
    server = start_bench_server(bindir)
    try:
        conn = create_database(server)
        load_bench_table(conn, args.rows)
        conn.close()
        dsn = server.dsn("bench")
        psql = psql_path(bindir)
        commands = {
            "pgtail": [
                *(sys.executable, "-m", "pgtail", "stream", "--dsn", dsn),
                *("--publication", "bench_pub", "--snapshot", "--format", args.format),
                *("--idle-exit", "0.1"),
            ],
            "row_to_json": [
                *(psql, "-X", "-q", "-d", dsn, "-c"),
                "COPY (SELECT row_to_json(t) FROM bench t) TO STDOUT",
            ],
            "copy": [psql, "-X", "-q", "-d", dsn, "-c", "\\copy bench to /dev/null"],
        }
        if args.baseline:
            commands["pgtail-base"] = commands["pgtail"]
        print(f"PostgreSQL {server.major}, a table of {args.rows:,} rows, best of {args.repeat}")
        best: dict[str, tuple[float, int]] = {}
        cpu: dict[str, float] = {}
        rounds: list[dict[str, float]] = []
        for _ in range(args.repeat):  # alternating, so each sees the same machine
            rounds.append({})
            for name, command in commands.items():
                elapsed, rss, seconds = timed(
                    command, args.baseline if name == "pgtail-base" else None
                )
                rounds[-1][name] = elapsed
                cpu[name] = min(cpu.get(name, seconds), seconds)
                if name not in best or elapsed < best[name][0]:
                    best[name] = (elapsed, rss)
        for name, (elapsed, rss) in best.items():
            print(
                f"{name:12s} {elapsed:6.2f} s  ({args.rows / elapsed:10,.0f} rows/s;"
                f" peak RSS {rss / 1024:6.1f} MB; client CPU {cpu[name]:5.2f} s)"
            )
        ratio = best["row_to_json"][0] / best["pgtail"][0]
        plain = best["copy"][0] / best["pgtail"][0]
        print(
            f"pgtail speed / row_to_json COPY: {ratio:.2f}x (goal: >= 0.8x); / \\copy: {plain:.2f}x"
        )
        if "pgtail-base" in best:
            base = best["pgtail-base"][0]
            print(
                f"pgtail-base speed / row_to_json COPY: {best['row_to_json'][0] / base:.2f}x;"
                f" pgtail / pgtail-base: {base / best['pgtail'][0]:.2f}x"
            )
        # a noisy machine: each round's ratio (the runs of a round are neighbours in time)
        for name in [n for n in ("pgtail", "pgtail-base") if n in best]:
            print(
                f"{name} / row_to_json COPY, median of each round's ratio:"
                f" {statistics.median(r['row_to_json'] / r[name] for r in rounds):.2f}x"
            )
        if "pgtail-base" in best:
            print(
                "pgtail / pgtail-base, median of each round's ratio:"
                f" {statistics.median(r['pgtail-base'] / r['pgtail'] for r in rounds):.2f}x"
            )
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
