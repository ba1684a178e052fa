"""What `pgtail stream` confirms at the edges: a pipe whose reader goes away, the last
transaction of ``--max-changes`` and ``--end``, whole lines per write, and SIGHUP.

Each test runs the real CLI (``python -m pgtail stream``) against a real server and
checks what the next run starts at (the slot's confirmed_flush_lsn).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from pgtail.feedback import Feedback
from pgtail.lsn import parse_lsn
from pgtail.stream import writer as writer_module
from pgtail.stream.writer import Batch, Writer
from tests.helpers import (
    RawLines,
    confirmed,
    insert_lsn,
    kill_if_running,
    stream_command,
    wait_active,
    wait_inactive,
    write,
)


def command(dsn: str, *args: str) -> list[str]:
    return stream_command(
        dsn, "--slot", "s", "--publication", "pub", "--format", "json", "--status-interval", "1",
        *args,
    )  # fmt: skip


def shell(dsn: str, *args: str, pipe: str = "") -> str:
    return " ".join(f"'{a}'" for a in command(dsn, *args)) + pipe


def setup(db: Any, rows: int = 0) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE TABLE outside (x int)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    for i in range(1, rows + 1):
        write(db, f"INSERT INTO t VALUES ({i}, 'x')")


def next_ids(db: Any, *args: str) -> list[int]:
    """The rows the next run writes (until idle for a second)."""
    proc = subprocess.run(
        command(db.dsn, "--idle-exit", "1", *args), capture_output=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return [orjson.loads(line)["new"]["id"] for line in proc.stdout.splitlines()]


# --- a pipe: confirmed only once its reader used it ------------------------------------


def test_head_does_not_confirm_what_it_never_printed(db: Any) -> None:
    setup(db, rows=5)
    proc = subprocess.run(
        ["bash", "-c", shell(db.dsn, pipe=" | head -1")], capture_output=True, timeout=60
    )
    assert [orjson.loads(line)["new"]["id"] for line in proc.stdout.splitlines()] == [1]
    assert b"Traceback" not in proc.stderr
    wait_inactive(db)
    assert next_ids(db)[0] in (1, 2)


def test_reader_that_never_reads_gets_nothing_confirmed(db: Any) -> None:
    setup(db)
    proc = subprocess.Popen(command(db.dsn), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_active(db)
        # an idle stream may follow the server's WAL end (other databases write WAL too):
        # what must not be confirmed is the rows, which start here
        first = insert_lsn(db)
        for i in range(1, 4):
            write(db, f"INSERT INTO t VALUES ({i}, 'x')")
        time.sleep(3)  # written into the pipe, long enough for any status update
        before = confirmed(db)
        assert before <= first
        assert proc.stdout is not None
        proc.stdout.close()  # the reader goes away without reading
        _, err = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 0, err
    wait_inactive(db)
    assert confirmed(db) == before
    assert next_ids(db) == [1, 2, 3]


def test_reader_that_reads_and_stays_gets_it_confirmed_while_streaming(db: Any) -> None:
    setup(db)
    proc = subprocess.Popen(command(db.dsn), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = RawLines(proc)
    try:
        wait_active(db)
        for i in range(1, 4):
            write(db, f"INSERT INTO t VALUES ({i}, 'x')")
        end = insert_lsn(db)
        deadline = time.monotonic() + 60
        while confirmed(db) < end and time.monotonic() < deadline:
            time.sleep(0.1)
        assert confirmed(db) >= end  # consumed and the reader stayed: confirmed
        # idle, everything consumed: the slot follows the server (WAL it does not publish)
        write(db, "INSERT INTO outside VALUES (1)")
        later = insert_lsn(db)
        deadline = time.monotonic() + 60
        while confirmed(db) < later and time.monotonic() < deadline:
            time.sleep(0.1)
        assert confirmed(db) >= later
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert len(out.lines()) == 3


def test_idle_exit_into_a_pipe_confirms_what_the_reader_took(db: Any) -> None:
    setup(db, rows=3)
    assert next_ids(db) == [1, 2, 3]  # subprocess.run reads everything and stays
    wait_inactive(db)
    assert next_ids(db) == []


# --- --max-changes and --end: the next run starts right after the last one written -----


def test_max_changes_confirms_the_last_transaction_written(db: Any) -> None:
    setup(db, rows=5)
    assert next_ids(db, "--max-changes", "2") == [1, 2]
    wait_inactive(db)
    assert next_ids(db, "--max-changes", "2") == [3, 4]
    wait_inactive(db)
    assert next_ids(db) == [5]


def test_max_changes_with_output_confirms_the_last_transaction(db: Any, tmp_path: Path) -> None:
    setup(db, rows=5)
    out = tmp_path / "out.jsonl"
    for _ in range(2):
        proc = subprocess.run(
            command(db.dsn, "--max-changes", "2", "-o", str(out)), capture_output=True, timeout=60
        )
        assert proc.returncode == 0, proc.stderr
        wait_inactive(db)
    assert [orjson.loads(line)["new"]["id"] for line in out.read_bytes().splitlines()] == [
        1, 2, 3, 4
    ]  # fmt: skip
    assert next_ids(db) == [5]


def test_max_changes_inside_a_transaction_does_not_confirm_it(db: Any) -> None:
    setup(db)
    write(db, "INSERT INTO t VALUES (1, 'x'), (2, 'x'), (3, 'x')")
    write(db, "INSERT INTO t VALUES (4, 'x')")
    # one row of a three-row transaction: confirming it would lose the other two
    assert next_ids(db, "--max-changes", "1") == [1]
    wait_inactive(db)
    assert next_ids(db, "--max-changes", "3") == [1, 2, 3]  # the whole one, confirmed
    wait_inactive(db)
    assert next_ids(db) == [4]


def test_end_confirms_the_last_transaction_written(db: Any) -> None:
    setup(db, rows=2)
    end = insert_lsn(db)
    write(db, "INSERT INTO t VALUES (3, 'x')")
    assert next_ids(db, "--end", f"{end >> 32:X}/{end & 0xFFFFFFFF:X}") == [1, 2]
    wait_inactive(db)
    assert next_ids(db) == [3]


# --- whole lines per write(2) -----------------------------------------------------------


def test_each_write_ends_at_a_line_end(tmp_path: Path, monkeypatch: Any) -> None:
    sizes: list[bytes] = []
    real_write = os.write

    def recording_write(fd: int, data: Any) -> int:
        sizes.append(bytes(data[-1:]))
        return real_write(fd, data)

    monkeypatch.setattr(writer_module.os, "write", recording_write)
    line = b'{"row": "' + b"x" * 1000 + b'"}\n'
    data = line * 3000  # about 3 MiB in one batch
    with open(tmp_path / "out", "wb") as out:
        writer = Writer(out, Feedback(), threading.Lock(), lambda: None, False, None)
        writer.start()
        writer.queue.put(Batch([], 1, 1, 1, 3000, data))
        writer.queue.put(writer_module.STOP)
        writer.join(30)
    assert writer.error is None
    assert (tmp_path / "out").read_bytes() == data
    assert len(sizes) >= 3  # cut into pieces no larger than the chunk
    assert all(last == b"\n" for last in sizes)


def test_big_transaction_to_stdout_is_whole_lines(db: Any, tmp_path: Path) -> None:
    setup(db)
    write(db, "INSERT INTO t SELECT g, repeat('y', 500) FROM generate_series(1, 5000) g")
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as fh:
        proc = subprocess.run(
            command(db.dsn, "--idle-exit", "1"), stdout=fh, stderr=subprocess.PIPE, timeout=120
        )
    assert proc.returncode == 0, proc.stderr
    lines = out.read_bytes().splitlines()
    assert [orjson.loads(line)["new"]["id"] for line in lines] == list(range(1, 5001))


# --- SIGHUP -------------------------------------------------------------------------------


def test_sighup_stops_cleanly_with_129(db: Any) -> None:
    setup(db, rows=3)
    proc = subprocess.Popen(command(db.dsn), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = RawLines(proc)
    try:
        wait_active(db)
        out.wait_for(3)
        proc.send_signal(signal.SIGHUP)
        proc.wait(timeout=30)
    finally:
        kill_if_running(proc)
    lines = out.lines()
    assert proc.stderr is not None
    err = proc.stderr.read()
    assert proc.returncode == 129, err
    assert b"pgtail: stopped; confirmed up to" in err
    wait_inactive(db)
    assert confirmed(db) >= parse_lsn(orjson.loads(lines[-1])["end_lsn"])
    assert next_ids(db) == []


def test_sighup_with_output_reopens_the_file(db: Any, tmp_path: Path) -> None:
    setup(db, rows=2)
    out = tmp_path / "out.jsonl"
    proc = subprocess.Popen(
        command(db.dsn, "-o", str(out)), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )

    def ids(path: Path) -> list[int]:
        if not path.exists():
            return []
        return [orjson.loads(line)["new"]["id"] for line in path.read_bytes().splitlines()]

    def wait_for(path: Path, expected: list[int]) -> None:
        deadline = time.monotonic() + 60
        while ids(path) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ids(path) == expected

    try:
        wait_active(db)
        wait_for(out, [1, 2])
        rotated = tmp_path / "out.jsonl.1"
        out.rename(rotated)
        proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 60  # the reopen creates the new file; a loaded
        while not out.exists() and time.monotonic() < deadline:  # machine may take a while
            time.sleep(0.05)
        assert out.exists()
        write(db, "INSERT INTO t VALUES (3, 'x')")
        wait_for(out, [3])  # the new file, and the stream goes on
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 143, err
    assert ids(rotated) == [1, 2]
    assert b"reopening" in err
    wait_inactive(db)
    # a restart continues the new file (its state describes the new file): no repeats
    write(db, "INSERT INTO t VALUES (4, 'x')")
    proc2 = subprocess.run(
        command(db.dsn, "-o", str(out), "--idle-exit", "1"), capture_output=True, timeout=60
    )
    assert proc2.returncode == 0, proc2.stderr
    assert ids(out) == [3, 4]


def test_socket_reader_that_never_reads_gets_nothing_confirmed(db: Any) -> None:
    setup(db)
    ours, theirs = socket.socketpair()
    proc = subprocess.Popen(command(db.dsn), stdout=theirs, stderr=subprocess.PIPE)
    theirs.close()
    try:
        wait_active(db)
        first = insert_lsn(db)  # the rows start here (an idle stream may follow WAL before)
        for i in range(1, 4):
            write(db, f"INSERT INTO t VALUES ({i}, 'x')")
        time.sleep(3)
        assert confirmed(db) <= first  # in the socket, not taken out of it
        ours.close()
        _, err = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 0, err
    wait_inactive(db)
    assert next_ids(db) == [1, 2, 3]
