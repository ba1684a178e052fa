"""In-process cost per row of the assembler and renderer on one large captured transaction.

Captures, on a throwaway server, the pgoutput messages of one 200,000-row transaction on
the drain table of ``bench/drain.py`` (``--case insert``: the INSERT; ``update``: an
UPDATE of every row, key unchanged; ``update-full``: the same under REPLICA IDENTITY FULL,
so each carries its old row; ``update-key``: an UPDATE of every row's key, so each carries
its old key; ``delete``: a DELETE of every row; ``streamed``: the
INSERT sent by the server as a streamed transaction, protocol 2 with ``streaming on``;
``small``: the same rows as transactions of 3 inserts each, the other shape, where the
per-transaction work counts), then times in this process, on
one core, ``Assembler.feed`` with the renderer's encoder and the renderer itself, as
``pgtail stream --format FMT`` runs them. No network, no output pipe: what is left is
pgtail's own work per row. CPU seconds (time.process_time), best of ``--repeat``.

    /work/venv/bin/python bench/feed.py [--case CASE] (insert, update, update-full,
                                        update-key, delete, streamed, small)
                                        [--format json|sql]
"""

from __future__ import annotations

import argparse
import select
import sys
import time
from pathlib import Path

import psycopg2
import psycopg2.extras

from pgtail import render
from pgtail.changes import Assembler, EncodedRows, Event, TxBegin, TxCommit
from pgtail.server import start_server

sys.path.insert(0, str(Path(__file__).parent))
from common import INSERT, TABLE  # noqa: E402 - the shared bench table and rows

SMALL = """
DO $$
BEGIN
  FOR t IN 0..%s LOOP
    INSERT INTO bench
    SELECT g, 'name ' || g, g %% 1000, (g %% 100000) / 100.0, now(), g %% 2 = 0,
           jsonb_build_object('k', g, 'tag', 'x'), ARRAY['a', 'b'], g * 1.5, gen_random_uuid()
    FROM generate_series(t * 3 + 1, t * 3 + 3) g;
    COMMIT;
  END LOOP;
END
$$
"""


def capture(case: str, rows: int) -> tuple[int, list[bytes]]:
    """(protocol version, payloads) of the case's transaction, Begin to Commit."""
    settings = {"logical_decoding_work_mem": "64kB"} if case == "streamed" else {}
    server = start_server(settings=settings)
    try:
        dsn = server.dsn()
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
        cur = conn.cursor()
        cur.execute(TABLE)
        cur.execute("CREATE PUBLICATION bench_pub FOR TABLE bench")
        if case in ("update", "update-full", "update-key", "delete"):
            cur.execute(INSERT, (rows,))
        if case == "update-full":
            cur.execute("ALTER TABLE bench REPLICA IDENTITY FULL")
        cur.execute("SELECT pg_create_logical_replication_slot('feed', 'pgoutput')")
        if case in ("update", "update-full"):
            cur.execute("UPDATE bench SET qty = qty + 1")
        elif case == "update-key":
            cur.execute("UPDATE bench SET id = -id")
        elif case == "delete":
            cur.execute("DELETE FROM bench")
        elif case == "small":
            cur.execute(SMALL, (rows // 3 - 1,))
        else:
            cur.execute(INSERT, (rows,))
        proto = 2 if case == "streamed" else 1
        options = {"proto_version": str(proto), "publication_names": "bench_pub"}
        if case == "streamed":
            options["streaming"] = "on"
        factory = psycopg2.extras.LogicalReplicationConnection
        replication = psycopg2.connect(dsn, connection_factory=factory)
        rcur = replication.cursor()
        rcur.start_replication(slot_name="feed", decode=False, options=options)
        last = b"c" if case == "streamed" else b"C"
        payloads: list[bytes] = []
        commits = rows // 3 if case == "small" else 1
        while True:
            message = rcur.read_message()
            if message is None:
                select.select([rcur], [], [], 1.0)
                continue
            payloads.append(bytes(message.payload))
            if payloads[-1][:1] == last:
                commits -= 1
                if not commits:
                    break
        replication.close()
        conn.close()
        return proto, payloads
    finally:
        server.destroy()


class _Sink:
    def write(self, data: bytes) -> int:
        return len(data)

    def flush(self) -> None:
        pass


def timed(proto: int, payloads: list[bytes], fmt: str) -> tuple[float, float, int]:
    """(feed seconds, render seconds, changes) of one pass."""
    assembler = Assembler(proto, encoder=render.row_encoder(fmt))
    renderer = render.make_renderer(fmt, _Sink())  # type: ignore[arg-type]
    feed = assembler.feed
    events: list[Event] = []
    start = time.process_time()
    for payload in payloads:
        events.extend(feed(payload))
    fed = time.process_time()
    for event in events:
        renderer.render(event)
    done = time.process_time()
    changes = sum(
        e.count if isinstance(e, EncodedRows) else not isinstance(e, TxBegin | TxCommit)
        for e in events
    )
    return fed - start, done - fed, changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--case",
        default="insert",
        choices=["insert", "update", "update-full", "update-key", "delete", "streamed", "small"],
    )
    parser.add_argument("--format", default="json", choices=["json", "sql"])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    proto, payloads = capture(args.case, args.rows)
    results = [timed(proto, payloads, args.format) for _ in range(args.repeat)]
    feed_s = min(r[0] for r in results)
    render_s = min(r[1] for r in results)
    changes = results[0][2]
    per_row = 1e6 / changes
    print(
        f"{args.case}, {changes:,} rows, --format {args.format}: feed {feed_s * per_row:.2f} µs"
        f" + render {render_s * per_row:.2f} µs = {(feed_s + render_s) * per_row:.2f} µs per row"
    )


if __name__ == "__main__":
    main()
