"""Renderer throughput: synthetic change events -> json / sql / table output in a file.

    python bench/render.py [--rows 1000000] [--tx-rows 100] [--out /tmp/pgtail-render.out]

Events are inserts into a mixed table (bigint, text, int, numeric, timestamptz, text[],
jsonb, bool), cycled from a pool of 1,000 prebuilt rows so building them costs nothing
measurable. Each case runs in its own process so its peak RSS (getrusage) is its own:

* json, sql, table: ``--rows`` inserts in transactions of ``--tx-rows`` rows, table
  with collapse off (every row printed).
* table-collapse: ONE transaction of ``--rows`` inserts with the default ``--collapse``
  (200): the constant-memory case; also run at a tenth of the rows to show the peak RSS
  does not grow with the transaction.

* capture-json, capture-sql, capture-table: when a capture of real pgoutput payloads
  exists (``bench/decode.py`` writes ``/tmp/pgtail-bench-text.bin``; ``--capture PATH``),
  the whole pipeline after the socket: ``Assembler.feed`` (decode, values, events) plus
  the renderer, streamed from the file. This is the drain-time comparison.

Times are CPU seconds of the case's process (time.process_time), so other load on a
shared machine disturbs them less than wall-clock time would.

Goals (issue 4): table >= 20,000 rows/s, constant memory with collapse on, SQL within
1.5x of the JSON time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import BinaryIO

import orjson

from pgtail.changes import (
    Assembler,
    Change,
    Column,
    Event,
    Table,
    Transaction,
    TxBegin,
    TxCommit,
)
from pgtail.render import Renderer, RenderOptions
from pgtail.render.jsonl import JsonLinesRenderer
from pgtail.render.sql import SqlRenderer
from pgtail.render.table import TableRenderer

TABLE = Table(
    16385,
    "public",
    "bench_mixed",
    "default",
    (
        Column("id", 20, -1, True, "bigint"),
        Column("name", 25, -1, False, "text"),
        Column("qty", 23, -1, False, "integer"),
        Column("price", 1700, -1, False, "numeric"),
        Column("created_at", 1184, -1, False, "timestamp with time zone"),
        Column("tags", 1009, -1, False, "text[]"),
        Column("doc", 3802, -1, False, "jsonb"),
        Column("active", 16, -1, False, "boolean"),
    ),
)
POOL = 1000
BASE_TIME = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _rows() -> list[dict[str, object]]:
    rows = []
    for i in range(POOL):
        created = BASE_TIME + timedelta(seconds=i, microseconds=i * 7)
        rows.append(
            {
                "id": 1_000_000 + i,
                "name": f"customer {i} O'Brien" if i % 10 == 0 else f"customer {i}",
                "qty": i % 97,
                "price": f"{i * 13 % 10000}.{i % 100:02d}",
                "created_at": created.isoformat(),
                "tags": ["red", f"t{i % 7}", "two words"] if i % 3 else None,
                "doc": orjson.Fragment(f'{{"n": {i}, "ok": true, "s": "v{i}"}}'.encode()),
                "active": i % 2 == 0,
            }
        )
    return rows


def events(total: int, tx_rows: int) -> Iterator[Event]:
    """``total`` inserts in transactions of ``tx_rows`` (0: one transaction)."""
    rows = _rows()
    per_tx = tx_rows if tx_rows > 0 else total
    xid = 1000
    lsn = 0x1000000
    emitted = 0
    while emitted < total:
        n = min(per_tx, total - emitted)
        tx = Transaction(xid, lsn, lsn + 48, BASE_TIME)
        yield TxBegin(tx)
        for seq in range(n):
            yield Change("insert", TABLE, tx, seq, rows[(emitted + seq) % POOL], None, None, ())
        yield TxCommit(tx)
        emitted += n
        xid += 1
        lsn += 4096


RECORD = struct.Struct("!QI")  # bench/decode.py's capture format: lsn, payload length


def capture_events(path: str, limit: int) -> Iterator[Event]:
    """Events from a capture file, read lazily, up to ``limit`` changes."""
    assembler = Assembler(1, binary="binary" in os.path.basename(path))
    changes = 0
    with open(path, "rb") as capture:
        while changes < limit:
            head = capture.read(RECORD.size)
            if len(head) < RECORD.size:
                return
            _lsn, length = RECORD.unpack(head)
            for event in assembler.feed(capture.read(length)):
                if type(event) is Change:
                    changes += 1
                    if changes > limit:
                        return
                yield event


def make(case: str, out: BinaryIO) -> Renderer:
    case = case.removeprefix("capture-")
    if case == "json":
        return JsonLinesRenderer(out, RenderOptions())
    if case == "sql":
        return SqlRenderer(out, RenderOptions())
    if case == "table":
        return TableRenderer(out, RenderOptions(width=160, collapse=0))
    if case == "table-collapse":
        return TableRenderer(out, RenderOptions(width=160))
    raise SystemExit(f"unknown case {case}")


def run_one(
    case: str, rows: int, tx_rows: int, path: str, capture: str | None
) -> dict[str, object]:
    if case.startswith("capture-"):
        assert capture is not None
        stream = capture_events(capture, rows)
    else:
        stream = events(rows, 0 if case == "table-collapse" else tx_rows)
    first = next(stream)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(path, "wb") as out:
        renderer = make(case, out)
        start = time.perf_counter()
        cpu_start = time.process_time()
        renderer.render(first)
        for event in stream:
            renderer.render(event)
        renderer.close()
        cpu = time.process_time() - cpu_start
        elapsed = time.perf_counter() - start
    size = os.path.getsize(path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "case": case,
        "rows": rows,
        "seconds": round(cpu, 3),
        "wall_seconds": round(elapsed, 3),
        "rows_per_s": round(rows / cpu),
        "output_mb": round(size / 1e6, 1),
        "rss_start_mb": round(rss_before / 1024, 1),
        "peak_rss_mb": round(peak / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--tx-rows", type=int, default=100)
    parser.add_argument("--out", default="/tmp/pgtail-render.out")
    parser.add_argument("--capture", default="/tmp/pgtail-bench-text.bin")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case
    args = parser.parse_args()
    if args.case:
        result = run_one(args.case, args.rows, args.tx_rows, args.out, args.capture)
        print(json.dumps(result))
        return
    cases = [
        ("json", args.rows),
        ("sql", args.rows),
        ("table", args.rows),
        ("table-collapse", args.rows // 10),
        ("table-collapse", args.rows),
    ]
    if os.path.exists(args.capture):
        cases += [(f"capture-{f}", args.rows) for f in ("json", "sql", "table")]
    else:
        print(f"(no capture at {args.capture}: run bench/decode.py for the pipeline cases)")
    results = []
    for case, rows in cases:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--case",
                case,
                "--rows",
                str(rows),
                "--tx-rows",
                str(args.tx_rows),
                "--out",
                args.out,
                "--capture",
                args.capture,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(proc.stdout)
        results.append(result)
        print(
            f"{case:15} {rows:>9,} rows  {result['seconds']:>7.2f} s CPU  "
            f"{result['rows_per_s']:>9,} rows/s  {result['output_mb']:>7} MB out  "
            f"peak RSS {result['peak_rss_mb']} MB (at start {result['rss_start_mb']} MB)",
            flush=True,
        )
    os.unlink(args.out)
    json_s = next(float(str(r["seconds"])) for r in results if r["case"] == "json")
    sql_s = next(float(str(r["seconds"])) for r in results if r["case"] == "sql")
    table_rate = next(int(str(r["rows_per_s"])) for r in results if r["case"] == "table")
    small, big = (r for r in results if r["case"] == "table-collapse")
    print(f"sql / json time, renderers alone: {sql_s / json_s:.2f}x")
    captured = {r["case"]: float(str(r["seconds"])) for r in results if "capture" in str(r["case"])}
    if captured:
        print(
            "sql / json time, decode + render of the capture: "
            f"{captured['capture-sql'] / captured['capture-json']:.2f}x (goal <= 1.5x); "
            f"table / json: {captured['capture-table'] / captured['capture-json']:.2f}x"
        )
    print(f"table: {table_rate:,} rows/s (goal >= 20,000)")
    print(
        f"table with collapse: peak RSS {small['peak_rss_mb']} MB at {small['rows']:,} rows, "
        f"{big['peak_rss_mb']} MB at {big['rows']:,} rows (goal: constant)"
    )


if __name__ == "__main__":
    main()
