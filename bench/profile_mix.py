"""Where a change's CPU goes: a profile of ``pgtail stream`` over the mix, in buckets.

On a throwaway server (PostgreSQL 15 by default), ``catchup.py --mix``'s backlog (inserts
of 1-3 rows, updates of 2, deletes of 1, on the table of uuid, varchar, int4, float8,
date, bytea, boolean, numeric) is written once, with a slot per run; then, for each
format and tree (this one, and ``--base DIR`` if given), ``pgtail stream --format FMT
--end LSN > /dev/null`` runs once as it is (its CPU, start-up included, is the figure)
and once under cProfile. Each function's own time goes to one bucket:

- decode: pgoutput, the assembler and its quick lane (`pgtail.changes`), struct reads;
- encode: the renderers' generated row code, literals and values' converters;
- per transaction: the change stream's batching, the renderers' dispatch and
  transaction lines, DDL and schema tracking, the session's loop;
- read: the replication socket, status updates; write: the writer thread, the output
  buffer, the queue; start-up: imports, compiling, connecting.

The buckets are printed as shares of the profile and as µs per change scaled to the
unprofiled run's CPU (cProfile's overhead weighs on small functions, so the split is
approximate; the total is measured).

    .venv/bin/python bench/profile_mix.py [--formats json,sql] [--transactions 20000]
                                          [--base DIR] [--top 6]
"""

from __future__ import annotations

import argparse
import collections
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile

from catchup import MIX_LOAD, MIX_PRELOAD, MIX_TABLE, MIX_WORKLOAD, mix_changes
from common import create_database, start_bench_server

from pgtail.server import bindir_for_major

BUCKETS = ("decode", "encode", "per transaction", "read", "write", "start-up", "other")
# C functions (cProfile's file "~") by name
_C_FUNCTIONS = {
    "start-up": {"compile", "exec", "loads", "__build_class__", "create_dynamic", "exec_dynamic"}
    | {"stat", "open_code", "listdir", "getcwd", "realpath", "read", "fstat", "connect"},
    "read": {"read_message", "select", "send_feedback", "execute", "start_replication"},
    "decode": {"unpack_from"},
    "write": {"write", "getvalue", "truncate", "seek", "tell", "acquire", "release", "ioctl"}
    | {"poll", "register", "lseek", "fsync", "release_lock", "allocate_lock", "__exit__"},
    "encode": {"decode", "repr", "isprintable", "replace", "isalnum", "search", "match"}
    | {"dumps", "join", "encode", "sub", "isascii", "format", "str"},
}
# Python functions by where they are (the first match wins)
_PLACES = [
    ("start-up", ("<frozen", "importlib", "site-packages/click", "/catalog/", "/cli/")),
    ("start-up", ("stream/setup.py", "stream/connection.py", "_codegen.py")),
    ("decode", ("pgoutput", "changes/assembler.py", "changes/fastpath.py", "changes/held.py")),
    ("decode", ("changes/tables.py", "changes/events.py")),
    ("encode", ("SQL text rows", "JSON lines", "sql_literals", "/values/", "sql_rows")),
    ("encode", ("jsonl_rows", "jsonl_code")),
    ("write", ("stream/writer.py", "feedback.py", "threading.py", "queue.py")),
    ("read", ("stream/reader.py",)),
    ("per transaction", ("change_stream.py", "render/sql.py", "render/jsonl.py", "tx_text")),
    ("per transaction", ("changes/schema_events.py", "changes/ddl.py", "stream/session.py")),
    ("per transaction", ("stream/policy.py", "stream/ddl.py", "stream/signals.py")),
]


def _c_name(name: str) -> str:
    found = re.search(r"method '?([\w.]+)'? of|built-in method ([\w.]+)", name)
    if found is None:
        return name
    return (found.group(1) or found.group(2)).rsplit(".", 1)[-1]


def bucket(filename: str, name: str) -> str:
    """The bucket of one profiled function."""
    if filename == "~":
        called = _c_name(name)
        for kind, names in _C_FUNCTIONS.items():
            if called in names:
                return kind
        return "other"
    if name == "<module>":
        return "start-up"
    for kind, places in _PLACES:
        if any(place in filename for place in places):
            return kind
    return "other"


def split(profile: str, top: int) -> tuple[dict[str, float], dict[str, list[str]]]:
    """Each bucket's share of the profile's time, and its largest functions."""
    times: collections.Counter[str] = collections.Counter()
    largest: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (filename, line, name), (_cc, _nc, own, _cum, _callers) in stats.items():
        kind = bucket(filename, name)
        times[kind] += own
        where = name if filename == "~" else f"{os.path.basename(filename)}:{line}({name})"
        largest[kind].append((own, where))
    total = sum(times.values()) or 1.0
    shares = {kind: times[kind] / total for kind in BUCKETS}
    names = {
        kind: [f"{where} {100 * own / total:.1f}%" for own, where in sorted(found)[::-1][:top]]
        for kind, found in largest.items()
    }
    return shares, names


def run(tree: str | None, dsn: str, slot: str, fmt: str, end: str, profile: str | None) -> float:
    """CPU seconds of one ``pgtail stream`` (under cProfile when ``profile`` names a file)."""
    env = os.environ.copy()
    if tree:
        env["PYTHONPATH"] = tree
    args = [sys.executable, *(["-m", "cProfile", "-o", profile] if profile else [])]
    args += ["-m", "pgtail", "stream", "--dsn", dsn, "--slot", slot]
    args += ["--publication", "catchup_pub", "--format", fmt, "--end", end]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, stdout=subprocess.DEVNULL, env=env, cwd=tree, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--formats", default="json,sql")
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--base", help="another source tree, profiled the same way")
    parser.add_argument("--major", type=int, default=15)
    parser.add_argument("--top", type=int, default=6, help="functions named per bucket")
    args = parser.parse_args()
    formats = args.formats.split(",")
    trees: dict[str, str | None] = {"this tree": None}
    if args.base:
        trees["base"] = os.path.abspath(args.base)
    server = start_bench_server(bindir_for_major(args.major))
    try:
        conn = create_database(server)
        cur = conn.cursor()
        cur.execute(MIX_TABLE)
        cur.execute(MIX_LOAD.format(rows=MIX_PRELOAD))
        cur.execute("CREATE PUBLICATION catchup_pub FOR TABLE catchup_mix")
        slots = [f"s{i}" for i in range(2 * len(formats) * len(trees))]
        for slot in slots:
            cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        cur.execute(MIX_WORKLOAD.format(transactions=args.transactions))
        cur.execute("SELECT pg_current_wal_lsn()::text")
        end = cur.fetchone()[0]
        changes = mix_changes(args.transactions)
        print(f"{changes} changes in {args.transactions} transactions; µs per change")
        dsn = server.dsn("bench")
        with tempfile.TemporaryDirectory() as scratch:
            for fmt in formats:
                for label, tree in trees.items():
                    cpu = run(tree, dsn, slots.pop(), fmt, end, None)
                    profile = os.path.join(scratch, "run.prof")
                    run(tree, dsn, slots.pop(), fmt, end, profile)
                    shares, names = split(profile, args.top)
                    per_change = cpu / changes * 1e6
                    print(f"\n{fmt}, {label}: CPU {cpu:.2f} s, {per_change:.2f} µs/change")
                    for kind in BUCKETS:
                        print(
                            f"  {kind:16} {shares[kind] * per_change:6.2f}"
                            f"  {100 * shares[kind]:5.1f}%  " + ", ".join(names.get(kind, []))
                        )
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
