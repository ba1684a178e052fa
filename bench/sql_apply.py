"""How fast does psql apply ``pgtail stream --snapshot --format sql``, next to pg_dump's?

On a throwaway server: a table of N rows of bench/drain.py's mixed-type shape, written
once each way to a file, then applied in turn (alternating, one sitting) into an empty
copy of the table in a second database, with ``psql -X -q -v ON_ERROR_STOP=1 -f FILE``:

- ``pgtail``: ``pgtail stream --snapshot --format sql --idle-exit 0.1`` (a temporary
  slot): per table BEGIN, TRUNCATE, a COPY … FROM STDIN block, COMMIT;
- ``pg_dump``: ``pg_dump --data-only -t bench`` (a COPY block).

Goal: pgtail's script applies within 2x of pg_dump's (time ratio <= 2), as the median of
each round's ratio. ``--baseline DIR`` adds ``pgtail-base``: the script another checkout
writes (e.g. ``git archive <commit> | tar -x -C DIR``), applied once (an INSERT per row
before COPY blocks: slow).

    .venv/bin/python bench/sql_apply.py [--rows 300000] [--repeat 5] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    TABLE,
    connect,
    create_database,
    load_bench_table,
    median_ratio,
    psql_path,
    start_bench_server,
)

from pgtail.server import find_bindir


def write_script(args: list[str], path: Path, cwd: str | None = None) -> None:
    """Run a command with its stdout into ``path`` (from another checkout: ``cwd``)."""
    env = {**os.environ, "PYTHONPATH": cwd} if cwd is not None else None
    with path.open("wb") as out:
        subprocess.run(args, stdout=out, check=True, cwd=cwd, env=env)


def apply_time(psql: str, dsn: str, script: Path) -> float:
    """Seconds psql takes to apply ``script`` into an emptied ``bench`` table."""
    conn = connect(dsn)
    conn.cursor().execute("TRUNCATE bench")
    conn.close()
    start = time.perf_counter()
    subprocess.run(
        [psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", str(script)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--repeat", type=int, default=5, help="rounds of alternating runs")
    parser.add_argument("--baseline", help="a checkout whose script is applied once too")
    args = parser.parse_args()

    bindir = find_bindir()
    server = start_bench_server(bindir)
    workdir = Path(tempfile.mkdtemp(prefix="pgtail-sql-apply-"))
    try:
        conn = create_database(server)
        load_bench_table(conn, args.rows)
        conn.close()
        target = create_database(server, "target")
        target.cursor().execute(TABLE)
        target.close()
        dsn, target_dsn = server.dsn("bench"), server.dsn("target")
        psql = psql_path(bindir)
        pgtail = [
            *(sys.executable, "-m", "pgtail", "stream", "--dsn", dsn),
            *("--publication", "bench_pub", "--snapshot", "--format", "sql"),
            *("--idle-exit", "0.1"),
        ]
        scripts = {"pgtail": workdir / "pgtail.sql", "pg_dump": workdir / "pg_dump.sql"}
        write_script(pgtail, scripts["pgtail"])
        write_script(
            [str(bindir / "pg_dump"), "--data-only", "-t", "bench", "-d", dsn], scripts["pg_dump"]
        )
        print(f"PostgreSQL {server.major}, a table of {args.rows:,} rows, {args.repeat} rounds")
        for name, path in scripts.items():
            print(f"{name:12s} script {path.stat().st_size / 1e6:7.1f} MB")
        times: dict[str, list[float]] = {name: [] for name in scripts}
        for _ in range(args.repeat):  # alternating, so each sees the same machine
            for name, path in scripts.items():
                times[name].append(apply_time(psql, target_dsn, path))
        for name, runs in times.items():
            median = sorted(runs)[len(runs) // 2]
            print(f"{name:12s} apply {min(runs):6.2f} s best, {median:6.2f} s median")
        ratio = median_ratio(times["pgtail"], times["pg_dump"])
        print(
            f"pgtail / pg_dump apply time, median of each round's ratio: {ratio:.2f}x (goal: <= 2x)"
        )
        if args.baseline:
            base = workdir / "base.sql"
            write_script(pgtail, base, cwd=args.baseline)
            elapsed = apply_time(psql, target_dsn, base)
            print(
                f"pgtail-base  apply {elapsed:6.2f} s once"
                f" ({elapsed / min(times['pg_dump']):.1f}x pg_dump's best)"
            )
    finally:
        server.destroy()
        for path in workdir.iterdir():
            path.unlink()
        workdir.rmdir()


if __name__ == "__main__":
    main()
