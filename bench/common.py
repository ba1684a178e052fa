"""What several bench scripts share: the mixed-type ``bench`` table, a throwaway server
with a database of its own, CPU seconds read from ``/proc``, and the median of pairwise
ratios (how two consumers compare on a shared, noisy machine).

The scripts are run as files (``.venv/bin/python bench/x.py``), which puts this folder
first on ``sys.path``: they import it as ``common``.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable, Iterator
from pathlib import Path

import psycopg2
import psycopg2.extensions
from psycopg2 import sql

from pgtail.server import LocalServer, find_bindir, start_server

# one table of mixed types (bench/drain.py, feed.py, snapshot.py, spark_load.py) and N rows
TABLE = """
CREATE TABLE bench (
    id bigint PRIMARY KEY, name text, qty int, price numeric(12,2), created timestamptz,
    flag bool, meta jsonb, tags text[], ratio float8, ref uuid
)
"""
INSERT = """
INSERT INTO bench
SELECT g, 'name ' || g, g %% 1000, (g %% 100000) / 100.0, now(), g %% 2 = 0,
       jsonb_build_object('k', g, 'tag', 'x'), ARRAY['a', 'b'], g * 1.5, gen_random_uuid()
FROM generate_series(1, %s) g
"""
CLK_TCK = os.sysconf("SC_CLK_TCK")


def start_bench_server(bindir: Path | None = None) -> LocalServer:
    """A throwaway server with room for a large table (shared_buffers 256MB)."""
    return start_server(bindir or find_bindir(), settings={"shared_buffers": "256MB"})


def connect(dsn: str) -> psycopg2.extensions.connection:
    """An autocommit connection."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    return conn


def create_database(server: LocalServer, name: str = "bench") -> psycopg2.extensions.connection:
    """Create database ``name`` on ``server``; an autocommit connection to it."""
    admin = connect(server.dsn())
    admin.cursor().execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    admin.close()
    return connect(server.dsn(name))


def load_bench_table(conn: psycopg2.extensions.connection, rows: int) -> None:
    """The ``bench`` table with ``rows`` rows, vacuumed, in publication ``bench_pub``."""
    with conn.cursor() as cur:
        cur.execute(TABLE)
        cur.execute(INSERT, (rows,))
        cur.execute("VACUUM ANALYZE bench")
        cur.execute("CREATE PUBLICATION bench_pub FOR TABLE bench")


def psql_path(bindir: Path) -> str:
    """The server's own psql, else the one on PATH."""
    psql = str(bindir / "psql")
    return psql if os.path.exists(psql) else "psql"


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name ([1] the parent's pid,
    [11:15] utime stime cutime cstime in clock ticks); None once the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc (0.0 once it is gone)."""
    fields = stat_fields(pid)
    if fields is None:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def processes() -> Iterator[tuple[int, list[str]]]:
    """(pid, stat fields) of every process still there."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = stat_fields(entry.name)
            if fields is not None:
                yield int(entry.name), fields


def pairwise_ratios(ours: Iterable[float], theirs: Iterable[float]) -> list[float]:
    """Each round's ratio ours / theirs (the runs of a round are neighbours in time), sorted."""
    return sorted(a / b for a, b in zip(ours, theirs, strict=True))


def median_ratio(ours: Iterable[float], theirs: Iterable[float]) -> float:
    """The median of each round's ratio ours / theirs: the figure to trust on a noisy machine."""
    return statistics.median(pairwise_ratios(ours, theirs))
