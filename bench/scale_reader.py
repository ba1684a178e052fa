"""Into a slow reader: does pgtail's memory stay bounded, and how soon does it stop?

On a throwaway server, a table of N rows of bench/drain.py's mixed-type shape, and
``pgtail stream --snapshot --format json`` writing into a pipe whose reader takes
``--speed`` MB/s (a consumer slower than the server's COPY). Prints:

- ``peak RSS``: pgtail's peak resident memory over the whole copy into that reader
  (goal: <= 100 MB for any table and any reader speed), with the copy's time;
- ``SIGINT during the copy``: seconds from SIGINT, sent ``--after`` seconds after the
  copy's first output, to pgtail's exit (goal: <= 1 s), its exit status and whether the slot it
  created is gone;
- ``SIGINT during the stream``: the same while it streams a large transaction (N
  changes) into that reader.

    .venv/bin/python bench/scale_reader.py [--rows 300000] [--speed 4] [--after 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

from common import connect, create_database, load_bench_table, start_bench_server

from pgtail.server import find_bindir

READ = 64 << 10  # the reader's read size


class SlowReader(threading.Thread):
    """Reads a pipe at ``speed`` bytes a second until it closes."""

    def __init__(self, pipe: Any, speed: float) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.speed = speed
        self.bytes = 0

    def run(self) -> None:
        began = time.monotonic()
        fd = self.pipe.fileno()
        while True:
            try:
                data = os.read(fd, READ)
            except OSError:
                return
            if not data:
                return
            self.bytes += len(data)
            ahead = began + self.bytes / self.speed - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def pgtail(dsn: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgtail", "stream", "--dsn", dsn, *args]


def waited(proc: subprocess.Popen[bytes]) -> tuple[int, int]:
    """(exit status, peak RSS in KiB) of ``proc``, once it exits."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_maxrss


def slot_exists(dsn: str, name: str) -> bool:
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (name,))
            return cur.fetchone() is not None
    finally:
        conn.close()


def peak_rss(dsn: str, speed: float) -> None:
    command = pgtail(dsn, "--publication", "bench_pub", "--snapshot", "--format", "json")
    began = time.monotonic()
    proc = subprocess.Popen([*command, "--idle-exit", "1"], stdout=subprocess.PIPE)
    reader = SlowReader(proc.stdout, speed)
    reader.start()
    code, rss = waited(proc)
    reader.join()
    took = time.monotonic() - began
    print(
        f"peak RSS into a {speed / 1e6:g} MB/s reader: {rss / 1024:.0f} MB"
        f" ({reader.bytes / 1e6:.0f} MB of JSON in {took:.1f} s, exit {code})"
    )


def stop_time(dsn: str, speed: float, after: float, phase: str, slot: str) -> None:
    """SIGINT ``after`` seconds into a run, then the seconds to its exit."""
    args = ["--slot", slot, "--publication", "bench_pub", "--format", "json"]
    if phase == "copy":
        args += ["--create-slot", "--snapshot"]
    proc = subprocess.Popen(pgtail(dsn, *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader = SlowReader(proc.stdout, speed)
    reader.start()
    while not reader.bytes and proc.poll() is None:  # counted from the first output
        time.sleep(0.01)
    time.sleep(after)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code, _ = waited(proc)
    took = time.monotonic() - sent
    assert proc.stderr is not None
    said = proc.stderr.read().decode().strip().splitlines()
    left = "kept" if slot_exists(dsn, slot) else "dropped"
    print(
        f"SIGINT during the {phase}: exit after {took:.2f} s (status {code}, slot {left});"
        f" stderr: {said[-1] if said else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=300_000)
    parser.add_argument("--speed", type=float, default=4.0, help="the reader's MB/s")
    parser.add_argument("--after", type=float, default=3.0, help="seconds before SIGINT")
    args = parser.parse_args()
    speed = args.speed * 1e6

    server = start_bench_server(find_bindir())
    try:
        conn = create_database(server)
        load_bench_table(conn, args.rows)
        dsn = server.dsn("bench")
        print(f"{args.rows} rows, reader {args.speed:g} MB/s, PostgreSQL {server.major}")
        peak_rss(dsn, speed)
        stop_time(dsn, speed, args.after, "copy", "scale_copy")
        # a slot with a backlog of one large transaction to stream
        with conn.cursor() as cur:
            cur.execute("SELECT pg_create_logical_replication_slot('scale_stream', 'pgoutput')")
            cur.execute("UPDATE bench SET qty = qty + 1")
        stop_time(dsn, speed, args.after, "stream", "scale_stream")
        conn.close()
    finally:
        server.destroy()


if __name__ == "__main__":
    main()
