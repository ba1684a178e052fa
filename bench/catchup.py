"""How fast do consumers catch up on a backlog of many small transactions?

The shape of a busy OLTP server (``bench/drain.py`` measures the other one: one large
transaction). On a throwaway server (PostgreSQL 15 by default): for each round, one
slot per consumer is created, then ``--transactions`` transactions of ``--rows`` inserts
each (8 columns: bigserial, text, int, numeric, timestamptz, text[], jsonb, bool) are
committed while no consumer runs; then each consumer, one after the other (the order
rotates from round to round), drains its own slot until it has output every change:

- ``bare``: a psycopg2 ``LogicalReplicationConnection`` loop that decodes nothing;
- ``json``, ``sql``: ``pgtail stream --format json|sql`` into a pipe this script reads;
- ``wal2json`` (format 2) and ``test_decoding``: ``pg_recvlogical -f -``, when the
  server has the plugin (wal2json is skipped with a note when it is not installed).

Time runs from a consumer's first output to the output of its last change (start-up is
not counted). CPU is read from ``/proc``: the consumer's over the same window, its
walsender's over its whole life (it starts with the connection). Prints per consumer:
changes/s (median), the median of the pairwise time ratios to the bare loop of the same
round, and CPU µs per change of the consumer and of its walsender (medians).

    .venv/bin/python bench/catchup.py [--transactions 60000] [--rows 3] [--rounds 3]
                                      [--consumers bare,json,sql,wal2json,test_decoding]
                                      [--mix]

A quick run: ``--transactions 10000 --rounds 2``.

``--mix``: production's mix instead (issue 38): a table of other types (uuid key,
varchar, int4, float8, date, bytea, boolean, numeric) and, transaction by transaction in
turn, an insert of 1-3 rows, another, an update of 2 rows, a delete of 1 row (1.75
changes a transaction). The rows updated come from rows loaded before the slots exist;
each delete removes a row an earlier transaction of the backlog inserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg2
from common import cpu_seconds, create_database, median_ratio, start_bench_server

from pgtail.server import LocalServer, bindir_for_major, find_bindir

TABLE = """
CREATE TABLE catchup (
    id bigserial PRIMARY KEY, name text, qty int, price numeric(12,2), created timestamptz,
    tags text[], meta jsonb, flag bool
)
"""
# one transaction per loop turn (a DO block may COMMIT when not in a transaction block)
WORKLOAD = """
DO $$
BEGIN
  FOR t IN 1..{transactions} LOOP
    INSERT INTO catchup (name, qty, price, created, tags, meta, flag)
    SELECT 'name ' || t, t % 1000, (t % 100000) / 100.0, now(), ARRAY['a', 'b'],
           jsonb_build_object('k', t, 'tag', 'x'), g % 2 = 0
    FROM generate_series(1, {rows}) g;
    COMMIT;
  END LOOP;
END
$$
"""

MIX_TABLE = """
CREATE TABLE catchup_mix (
    id uuid PRIMARY KEY, name varchar(40), qty int4, score float8, day date, blob bytea,
    flag boolean, amount numeric(12,2)
)
"""
MIX_PRELOAD = 1000  # rows loaded before the slots exist, the updates' targets (even)
_MIX_ROW = """md5(({n})::text)::uuid, 'name ' || ({n}), ({n}) % 1000, ({n}) / 7.0,
           date '2024-01-01' + ({n}) % 365, decode(md5(({n})::text), 'hex'),
           ({n}) % 2 = 0, (({n}) % 100000) / 100.0"""
MIX_LOAD = (
    f"INSERT INTO catchup_mix SELECT {_MIX_ROW.format(n='g')} FROM generate_series(1, {{rows}}) g"
)
# transaction t: t % 4 == 0 or 1 inserts t % 3 + 1 rows (numbered PRELOAD + 3t + g);
# 2 updates two preloaded rows; 3 deletes the first row transaction t - 3 inserted
MIX_WORKLOAD = f"""
DO $$
BEGIN
  FOR t IN 1..{{transactions}} LOOP
    IF t % 4 IN (0, 1) THEN
      INSERT INTO catchup_mix
      SELECT {_MIX_ROW.format(n=f"{MIX_PRELOAD} + 3 * t + g")}
      FROM generate_series(1, t % 3 + 1) g;
    ELSIF t % 4 = 2 THEN
      UPDATE catchup_mix SET qty = qty + 1, score = score * 1.5, name = 'updated ' || t,
                             flag = NOT flag
      WHERE id IN (md5((2 * t % {MIX_PRELOAD} + 1)::text)::uuid,
                   md5((2 * t % {MIX_PRELOAD} + 2)::text)::uuid);
    ELSE
      DELETE FROM catchup_mix WHERE id = md5(({MIX_PRELOAD} + 3 * (t - 3) + 1)::text)::uuid;
    END IF;
    COMMIT;
  END LOOP;
END
$$
"""


def mix_changes(transactions: int) -> int:
    """The row changes of `MIX_WORKLOAD`'s ``transactions`` transactions."""
    total = 0
    for t in range(1, transactions + 1):
        if t % 4 in (0, 1):
            total += t % 3 + 1
        elif t % 4 == 2:
            total += 2
        elif t > 3:  # transaction 3's delete finds no row (there is no transaction 0)
            total += 1
    return total


BARE = r"""
import select, sys, time, psycopg2, psycopg2.extras
factory = psycopg2.extras.LogicalReplicationConnection
conn = psycopg2.connect(sys.argv[1], connection_factory=factory)
cur = conn.cursor()
cur.start_replication(slot_name=sys.argv[2], decode=False,
                      options={"proto_version": "1", "publication_names": "catchup_pub"})
wanted = int(sys.argv[3])
rows = 0
started = False
out = sys.stdout.buffer
while True:
    msg = cur.read_message()
    if msg is None:
        select.select([cur], [], [], 1.0)
        continue
    if not started:
        started = True
        out.write(b"start\n")
        out.flush()
    if msg.payload[0] in (73, 85, 68):  # 'I', 'U', 'D'
        rows += 1
    elif msg.payload[0] == 67:  # 'C'
        cur.send_feedback(flush_lsn=msg.data_start, reply=False)
        if rows >= wanted:
            break
out.write(b"done\n")
out.flush()
time.sleep(1)  # stay (and keep the walsender) until the bench has read their CPU
"""

# the bytes that occur once per change in each consumer's output (any of them)
MARKERS: dict[str, tuple[bytes, ...]] = {
    "bare": (b"done\n",),
    "json": (b"\n",),
    "sql": (b"INSERT INTO", b"UPDATE ", b"DELETE FROM"),
    "wal2json": (b'"action":"I"', b'"action":"U"', b'"action":"D"'),
    "test_decoding": (b": INSERT:", b": UPDATE:", b": DELETE:"),
    "json-base": (b"\n",),
    "sql-base": (b"INSERT INTO", b"UPDATE ", b"DELETE FROM"),
}
PLUGINS = {
    "bare": "pgoutput",
    "json": "pgoutput",
    "sql": "pgoutput",
    "wal2json": "wal2json",
    "test_decoding": "test_decoding",
    "json-base": "pgoutput",
    "sql-base": "pgoutput",
}


@dataclass
class Run:
    seconds: float
    client_cpu: float
    walsender_cpu: float


class Watch:
    """Reads a consumer's output; notes its first output, then the output of the last
    change, and at both the CPU of the consumer and of its walsender."""

    def __init__(
        self, proc: subprocess.Popen[bytes], markers: tuple[bytes, ...], wanted: int
    ) -> None:
        self.proc = proc
        self.markers = markers
        self.wanted = wanted
        self.walsender: int | None = None
        self.start = self.done = 0.0
        self.cpu_start = self.cpu_done = self.walsender_done = 0.0
        self.count = 0
        self.thread = threading.Thread(target=self.read, daemon=True)
        self.finished = threading.Event()
        self.thread.start()

    def read(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        markers = self.markers
        keep = max(len(m) for m in markers) - 1
        carry = b""
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                self.finished.set()
                return
            if not self.start:
                self.start = time.perf_counter()
                self.cpu_start = cpu_seconds(self.proc.pid)
            if self.done:
                continue
            text = carry + chunk
            # a marker cut by the chunk's end is counted with the next chunk: the carry
            # (the last ``keep`` bytes) starts the next text, so what lies wholly in it
            # is counted there, not here
            carry = text[-keep:] if keep else b""
            self.count += sum(text.count(m) - carry.count(m) for m in markers)
            if self.count >= self.wanted:
                self.done = time.perf_counter()
                self.cpu_done = cpu_seconds(self.proc.pid)
                if self.walsender:
                    self.walsender_done = cpu_seconds(self.walsender)
                self.finished.set()


def walsender_of(
    admin: psycopg2.extensions.connection, slot: str, proc: subprocess.Popen[bytes]
) -> int:
    with admin.cursor() as cur:
        for _ in range(2000):
            cur.execute("SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,))
            row = cur.fetchone()
            if row and row[0]:
                return int(row[0])
            if proc.poll() is not None:
                raise RuntimeError(f"consumer of {slot} exited with {proc.returncode}")
            time.sleep(0.005)
    raise RuntimeError(f"slot {slot} never became active")


def command(server: LocalServer, consumer: str, slot: str, changes: int) -> list[str]:
    dsn = server.dsn("bench")
    if consumer == "bare":
        return [sys.executable, "-c", BARE, dsn, slot, str(changes)]
    if consumer in ("json", "sql", "json-base", "sql-base"):
        return [
            sys.executable, "-m", "pgtail", "stream", "--dsn", dsn, "--slot", slot,
            "--publication", "catchup_pub", "--format", consumer.split("-")[0],
            "--max-changes", str(changes),
        ]  # fmt: skip
    options = ["-o", "format-version=2"] if consumer == "wal2json" else []
    return [
        str(server.bindir / "pg_recvlogical"), "--dbname", dsn, "--slot", slot, "--start",
        "--no-loop", "-f", "-", *options,
    ]  # fmt: skip


def drain(
    server: LocalServer,
    admin: psycopg2.extensions.connection,
    consumer: str,
    changes: int,
    baseline: str | None,
) -> Run:
    slot = f"catchup_{consumer.replace('-', '_')}"
    env = os.environ.copy()
    cwd = None
    if consumer.endswith("-base") and baseline:
        # another checkout of pgtail: before and after (``-m`` puts the working directory
        # first on sys.path, so it runs there too)
        env["PYTHONPATH"] = cwd = baseline
    proc = subprocess.Popen(
        command(server, consumer, slot, changes), stdout=subprocess.PIPE, env=env, cwd=cwd
    )
    watch = Watch(proc, MARKERS[consumer], 1 if consumer == "bare" else changes)
    watch.walsender = walsender_of(admin, slot, proc)
    while not watch.finished.wait(0.5):
        if proc.poll() is not None and not watch.done:
            watch.finished.wait(1.0)
            break
    if not watch.done:
        proc.kill()
        raise RuntimeError(f"{consumer}: saw {watch.count} of {changes} changes")
    if consumer in ("wal2json", "test_decoding"):
        proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    watch.thread.join(timeout=10)
    return Run(watch.done - watch.start, watch.cpu_done - watch.cpu_start, watch.walsender_done)


def fresh_slots(admin: psycopg2.extensions.connection, consumers: list[str]) -> None:
    with admin.cursor() as cur:
        for consumer in consumers:
            slot = f"catchup_{consumer.replace('-', '_')}"
            cur.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (slot,),
            )
            cur.execute(
                "SELECT pg_create_logical_replication_slot(%s, %s)", (slot, PLUGINS[consumer])
            )


def available(server: LocalServer, plugin: str) -> bool:
    libdir = subprocess.run(
        [str(server.bindir / "pg_config"), "--pkglibdir"], capture_output=True, text=True
    ).stdout.strip()
    return bool(libdir) and Path(libdir, plugin + ".so").exists()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=60_000)
    parser.add_argument("--rows", type=int, default=3, help="inserts per transaction")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--major", type=int, default=15, help="server major (15: Debian's)")
    parser.add_argument("--consumers", default="bare,json,sql,wal2json,test_decoding")
    parser.add_argument(
        "--mix",
        action="store_true",
        help="production's mix: inserts of 1-3 rows, updates of 2, deletes of 1, on a table"
        " of other types (--rows is then not used)",
    )
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        help="another pgtail source tree (e.g. a `git archive` of the commit before a"
        " change): adds consumers json-base and sql-base that run it, in the same rounds",
    )
    args = parser.parse_args()
    consumers = [c.strip() for c in args.consumers.split(",") if c.strip()]
    if args.baseline:
        consumers += [c + "-base" for c in ("json", "sql") if c in consumers]
    unknown = set(consumers) - set(MARKERS)
    if unknown:
        parser.error(f"unknown consumers: {', '.join(sorted(unknown))}")
    if "bare" not in consumers:
        consumers.insert(0, "bare")

    bindir = bindir_for_major(args.major) or find_bindir()
    server = start_bench_server(bindir)
    try:
        for plugin in ("wal2json", "test_decoding"):
            if plugin in consumers and (
                not available(server, plugin)
                or not shutil.which(str(server.bindir / "pg_recvlogical"))
            ):
                print(f"note: {plugin} is not installed for this server: skipped")
                consumers.remove(plugin)
        admin = create_database(server)
        table = "catchup_mix" if args.mix else "catchup"
        with admin.cursor() as cur:
            cur.execute(MIX_TABLE if args.mix else TABLE)
            cur.execute(f"CREATE PUBLICATION catchup_pub FOR TABLE {table}")
        if args.mix:
            changes = mix_changes(args.transactions)
            shape = "the mix (inserts of 1-3 rows, updates of 2, deletes of 1)"
            workload = MIX_WORKLOAD.format(transactions=args.transactions)
        else:
            changes = args.transactions * args.rows
            shape = f"{args.rows} inserts"
            workload = WORKLOAD.format(transactions=args.transactions, rows=args.rows)
        print(
            f"PostgreSQL {server.major}: a backlog of {args.transactions:,} transactions of"
            f" {shape} ({changes:,} changes), {args.rounds} rounds alternating;"
            f" load before: {os.getloadavg()[0]:.2f}"
        )
        runs: dict[str, list[Run]] = {c: [] for c in consumers}
        for round_no in range(args.rounds):
            with admin.cursor() as cur:
                cur.execute(f"TRUNCATE {table}")  # before the slots: no change of theirs
                if args.mix:
                    cur.execute(MIX_LOAD.format(rows=MIX_PRELOAD))
            fresh_slots(admin, consumers)
            with admin.cursor() as cur:
                cur.execute("SET synchronous_commit = off")
                cur.execute(workload)
                cur.execute("RESET synchronous_commit")
            shift = round_no % len(consumers)
            for consumer in consumers[shift:] + consumers[:shift]:
                run = drain(server, admin, consumer, changes, args.baseline)
                runs[consumer].append(run)
                print(
                    f"  round {round_no + 1} {consumer:14} {run.seconds:7.3f} s"
                    f"  client {run.client_cpu:6.2f} s CPU, walsender {run.walsender_cpu:6.2f} s",
                    flush=True,
                )
        print(
            "\n| consumer | changes/s | time ratio to bare | client CPU µs/change"
            " | walsender CPU µs/change |\n|---|---|---|---|---|"
        )
        bare = runs["bare"]
        for consumer in consumers:
            own = runs[consumer]
            seconds = statistics.median(r.seconds for r in own)
            ratio = median_ratio((r.seconds for r in own), (b.seconds for b in bare))
            client = statistics.median(r.client_cpu for r in own) / changes * 1e6
            walsender = statistics.median(r.walsender_cpu for r in own) / changes * 1e6
            print(
                f"| {consumer} | {changes / seconds:,.0f} | {ratio:.2f} | {client:.2f}"
                f" | {walsender:.2f} |"
            )
        for fmt in ("json", "sql"):
            if fmt in runs and fmt + "-base" in runs:  # this tree against the baseline
                own, base = runs[fmt], runs[fmt + "-base"]
                time_ratio = median_ratio((r.seconds for r in own), (b.seconds for b in base))
                cpu_ratio = median_ratio((r.client_cpu for r in own), (b.client_cpu for b in base))
                print(
                    f"{fmt} against {fmt}-base, median of pairwise ratios:"
                    f" time {time_ratio:.3f}, client CPU {cpu_ratio:.3f}"
                )
        print(f"load after: {os.getloadavg()[0]:.2f} (a shared machine: other work competes)")
        admin.close()
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
