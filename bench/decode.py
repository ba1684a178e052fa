"""Decode speed: rows per second of pgoutput decode-only and decode-plus-values.

Builds a large capture once (a throwaway PostgreSQL server, a table of mixed types:
bigint, text, int, numeric, timestamptz, text[], jsonb, bool; one slot per wire format;
pg_logical_slot_get_binary_changes streamed through a server-side cursor into
/tmp/pgtail-bench-<format>.bin), then times on one core:

- decode-only: ``Decoder.decode`` on every payload;
- decode+values: ``Assembler.feed`` (decode, converters, row dicts, Change events);
- decode+values+json: the same plus ``values.dumps(change.new)`` per row.

Times are CPU seconds of this process (time.process_time), best of ``--repeat``, so
other load on a shared machine disturbs them less than wall-clock time would.

Usage: python bench/decode.py [--rows 1000000] [--repeat 3] [--reuse] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psycopg2

from pgtail.changes import Assembler, Change
from pgtail.lsn import parse_lsn
from pgtail.pgoutput import Decoder
from pgtail.server import start_server
from pgtail.values import dumps

PROTO = 1
CAPTURE_DIR = Path("/tmp")
RECORD = struct.Struct("!QI")  # lsn, payload length

SCHEMA = """
CREATE TABLE mixed (
    id bigint PRIMARY KEY,
    name text,
    qty int,
    price numeric(12,2),
    at timestamptz,
    tags text[],
    doc jsonb,
    flag bool
);
CREATE PUBLICATION bench_pub FOR TABLE mixed;
"""

INSERT = """
INSERT INTO mixed
SELECT g,
       'customer ' || g,
       (g %% 1000)::int,
       (g %% 100000) / 100.0,
       timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second 1 millisecond',
       ARRAY['tag' || (g %% 7), 'other tag', 'x' || (g %% 13)],
       jsonb_build_object('id', g, 'kind', 'order', 'items', jsonb_build_array(g %% 5, g %% 3)),
       g %% 2 = 0
FROM generate_series(%s, %s) g
"""


def capture_path(fmt: str) -> Path:
    return CAPTURE_DIR / f"pgtail-bench-{fmt}.bin"


def build_capture(rows: int, batch: int) -> None:
    """Run the workload on a throwaway server and save both formats' payloads."""
    server = start_server(settings={"logical_decoding_work_mem": "256MB"})
    try:
        conn = psycopg2.connect(server.dsn())
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(SCHEMA)
            for fmt in ("text", "binary"):
                cur.execute(
                    "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"bench_{fmt}",)
                )
            cur.execute("SET synchronous_commit = on")
            started = time.perf_counter()
            for start in range(1, rows + 1, batch):
                cur.execute(INSERT, (start, min(rows, start + batch - 1)))
            print(f"workload: {rows:,} inserts in {time.perf_counter() - started:.1f}s", flush=True)
        for fmt in ("text", "binary"):
            opts = ["proto_version", str(PROTO), "publication_names", "bench_pub"]
            if fmt == "binary":
                opts += ["binary", "true"]
            started = time.perf_counter()
            count = 0
            conn.autocommit = False
            with conn.cursor(name=f"read_{fmt}") as cur, open(capture_path(fmt), "wb") as out:
                cur.itersize = 20000
                cur.execute(
                    "SELECT lsn::text, data FROM pg_logical_slot_get_binary_changes("
                    "%s, NULL, NULL, VARIADIC %s::text[])",
                    (f"bench_{fmt}", opts),
                )
                for lsn, data in cur:
                    payload = bytes(data)
                    out.write(RECORD.pack(parse_lsn(lsn), len(payload)))
                    out.write(payload)
                    count += 1
            conn.commit()
            conn.autocommit = True
            print(
                f"captured {fmt}: {count:,} messages in {time.perf_counter() - started:.1f}s "
                f"-> {capture_path(fmt)} ({capture_path(fmt).stat().st_size / 1e6:.0f} MB)",
                flush=True,
            )
        conn.close()
    finally:
        server.destroy()


def load(fmt: str) -> tuple[list[bytes], list[int]]:
    payloads: list[bytes] = []
    lsns: list[int] = []
    data = capture_path(fmt).read_bytes()
    pos = 0
    unpack = RECORD.unpack_from
    while pos < len(data):
        lsn, length = unpack(data, pos)
        pos += RECORD.size
        payloads.append(data[pos : pos + length])
        lsns.append(lsn)
        pos += length
    return payloads, lsns


def decode_only(payloads: list[bytes], binary: bool) -> int:
    decode = Decoder(PROTO).decode
    for payload in payloads:
        decode(payload)
    return sum(1 for p in payloads if p[0] in b"IUD")


def decode_values(payloads: list[bytes], binary: bool) -> int:
    feed = Assembler(PROTO, binary=binary).feed
    rows = 0
    for payload in payloads:
        for event in feed(payload):
            if type(event) is Change:
                rows += 1
    return rows


def decode_values_json(payloads: list[bytes], binary: bool) -> int:
    feed = Assembler(PROTO, binary=binary).feed
    rows = 0
    for payload in payloads:
        for event in feed(payload):
            if type(event) is Change:
                dumps(event.new)
                rows += 1
    return rows


def timed(
    fn: Callable[[list[bytes], bool], int],
    payloads: list[bytes],
    binary: bool,
    repeat: int,
    collect: bool,
) -> tuple[int, float]:
    best = float("inf")
    rows = 0
    for _ in range(repeat):
        gc.collect()
        if not collect:
            gc.disable()
        try:
            started = time.process_time()
            rows = fn(payloads, binary)
            best = min(best, time.process_time() - started)
        finally:
            gc.enable()
    return rows, best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000, help="rows per transaction")
    parser.add_argument("--repeat", type=int, default=3, help="best of N timings")
    parser.add_argument("--reuse", action="store_true", help="reuse an existing capture")
    parser.add_argument("--profile", action="store_true", help="cProfile decode+values")
    parser.add_argument("--no-gc", action="store_true", help="garbage collector off while timing")
    args = parser.parse_args()

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})  # one core
    if not (args.reuse and all(capture_path(f).exists() for f in ("text", "binary"))):
        build_capture(args.rows, args.batch)

    print(
        f"python {sys.version.split()[0]}, protocol {PROTO}, best of {args.repeat}, "
        f"gc {'off' if args.no_gc else 'on'}, one core"
    )
    for fmt in ("text", "binary"):
        payloads, _ = load(fmt)
        # The capture list (a million bytes objects) is the benchmark's, not the stream's:
        # keep it out of the collector's way, as a streaming process never holds one.
        gc.collect()
        gc.freeze()
        binary = fmt == "binary"
        print(f"{fmt}: {len(payloads):,} messages, {sum(map(len, payloads)) / 1e6:.0f} MB")
        for label, fn in (
            ("decode-only", decode_only),
            ("decode+values", decode_values),
            ("decode+values+json", decode_values_json),
        ):
            rows, seconds = timed(fn, payloads, binary, args.repeat, not args.no_gc)
            print(
                f"  {label:<20} {rows:>10,} rows in {seconds:6.2f}s "
                f"= {rows / seconds:>9,.0f} rows/s"
            )
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            decode_values(payloads, binary)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        del payloads
        gc.unfreeze()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
