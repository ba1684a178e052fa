"""A --snapshot stopped before its copy reached the reader (SIGINT, SIGTERM, a closed
pipe) has one outcome on every major: the slot the run created is dropped, one line on
stderr says so, and the exit status is the README's."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.helpers import Database, kill_if_running, pgtail_stream


def make_table(db: Database, rows: int) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute(f"INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1, {rows}) g")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")


def slot_exists(db: Database, name: str = "s") -> bool:
    return bool(db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (name,)))


ARGS = ("--slot", "s", "--create-slot", "--publication", "pub", "--snapshot")


def stopped_through_a_pipe(db: Database, signum: int) -> tuple[int, str]:
    """Read one line of the copy, leave the rest unread, send ``signum``."""
    proc = pgtail_stream(db.dsn, *ARGS)
    try:
        assert proc.stdout is not None
        assert orjson.loads(proc.stdout.readline())["op"] == "snapshot"
        time.sleep(0.5)  # the copy reads on as far as the output takes it
        proc.send_signal(signum)
        code = proc.wait(timeout=60)  # stdout is not read on: the rest stays unread
        assert proc.stderr is not None
        return code, proc.stderr.read().decode()
    finally:
        kill_if_running(proc)


def test_sigint_during_a_large_copy_into_a_pipe(db: Database) -> None:
    make_table(db, 100_000)  # ~15 MB of JSON: more than the output may hold back
    code, err = stopped_through_a_pipe(db, signal.SIGINT)
    assert code == 130, err
    lines = err.splitlines()
    assert lines[-1].startswith("pgtail: stopped; nothing was confirmed; the snapshot did not")
    assert "dropped replication slot 's'" in lines[-1]
    assert sum("dropped replication slot" in line for line in lines) == 1, err
    assert not slot_exists(db)


def test_sigterm_after_the_copy_was_read_but_not_by_the_pipe_reader(db: Database) -> None:
    """A small table: the whole copy is read from the server and written into the pipe
    (more than it holds), but its reader took one line: the copy did not reach it."""
    make_table(db, 2_000)  # ~300 kB of JSON: more than a pipe buffer
    code, err = stopped_through_a_pipe(db, signal.SIGTERM)
    assert code == 143, err
    assert "dropped replication slot 's'" in err
    assert not slot_exists(db)


def test_a_closed_pipe_during_the_copy(db: Database) -> None:
    make_table(db, 100_000)
    proc = pgtail_stream(db.dsn, *ARGS)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=60)
    finally:
        kill_if_running(proc)
    text = err.decode()
    assert proc.returncode == 0, text
    assert text.count("dropped replication slot 's'") == 1, text
    assert not slot_exists(db)


def test_sigint_during_the_copy_into_a_file(db: Database, tmp_path: Path) -> None:
    make_table(db, 100_000)
    out = tmp_path / "out.jsonl"
    with open(out, "wb") as fh:
        proc = pgtail_stream(db.dsn, *ARGS, stdout=fh)
        try:
            deadline = time.monotonic() + 60
            while out.stat().st_size == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            kill_if_running(proc)
    text = err.decode()
    assert proc.returncode == 130, text
    rows = sum(1 for line in out.read_bytes().splitlines() if b'"op":"snapshot"' in line)
    if slot_exists(db):  # the signal came after the whole copy was written
        assert rows == 100_000, text
        assert "dropped" not in text
    else:
        assert rows < 100_000
        assert text.count("dropped replication slot 's'") == 1, text
    assert out.read_bytes().endswith(b"\n")  # whole lines


@pytest.mark.majors(15)  # the terminal's side: pgtail's alone
def test_sigint_during_the_copy_on_a_terminal_ends_the_progress_bar_first(db: Database) -> None:
    """On a terminal the copy shows a progress bar redrawn in place; the stop line that a
    SIGINT brings starts on a line of its own, not at the end of the bar."""
    make_table(db, 300_000)
    pid, fd = pty.fork()
    if pid == 0:  # the child: its terminal (stdout and stderr) is the pty
        os.execv(sys.executable, [sys.executable, "-m", "pgtail", "stream", db.dsn, *ARGS])
    raw, signalled = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # the child closed the terminal
                    break
                if not chunk:
                    break
                raw += chunk
            if not signalled and re.search(rb"\d%", raw):  # the bar is drawn, not done
                os.kill(pid, signal.SIGINT)
                signalled = True
    finally:
        if not signalled or time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    text = raw.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, text
    assert "100%" not in text, "the copy ended before the signal: a larger table is needed"
    stop = text.index("pgtail: stopped; nothing was confirmed")
    assert text[:stop].endswith("\n"), repr(text[stop - 80 : stop + 40])
    assert not slot_exists(db)
