"""`pgtail stream` as a process: signals, closed pipes, kill -9 and restart, slow consumers.

Each test runs the real CLI (``python -m pgtail stream``) against a real server and
checks the exit code and the slot's confirmed_flush_lsn.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from pgtail.lsn import format_lsn, parse_lsn
from tests.helpers import (
    confirmed,
    insert_lsn,
    kill_if_running,
    pgtail_stream,
    read_json_lines,
    run_stream,
    wait_active,
    wait_for,
    wait_inactive,
)

PY = sys.executable


def pgtail(dsn: str, *args: str, **popen: Any) -> subprocess.Popen[bytes]:
    return pgtail_stream(dsn, "--status-interval", "1", *args, **popen)


def setup(db: Any, slot: str | None = "s") -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    db.execute("CREATE TABLE outside (x int)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    if slot:
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))


def parse_file(path: Path) -> list[dict[str, Any]]:
    records = []
    for line in path.read_bytes().splitlines():
        with contextlib.suppress(orjson.JSONDecodeError):  # a line cut by kill -9
            records.append(orjson.loads(line))
    return records


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_cleanly_and_confirms(db: Any, signum: int, code: int) -> None:
    setup(db)
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--format", "json")
    try:
        wait_active(db)
        for i in range(5):
            db.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
        lines = read_json_lines(proc.stdout, 5)
        assert [r["new"]["id"] for r in lines] == [0, 1, 2, 3, 4]
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert proc.returncode == code, err
    assert b"Traceback" not in err
    wait_inactive(db)
    assert confirmed(db) >= parse_lsn(lines[-1]["end_lsn"])


def test_head_closes_pipe_exit_zero_quietly(db: Any) -> None:
    setup(db)
    for i in range(3):
        db.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
    last_end = insert_lsn(db)
    cmd = (
        f"{PY} -m pgtail stream --dsn '{db.dsn}' --slot s --publication pub --format json"
        ' --status-interval 1 | head -1; echo "status=${PIPESTATUS[0]}" >&2'
    )
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, timeout=60, check=False)
    assert proc.stdout.count(b"\n") == 1
    assert orjson.loads(proc.stdout)["new"]["id"] == 0
    assert proc.stderr.decode().strip().splitlines()[-1] == "status=0", proc.stderr
    assert b"Traceback" not in proc.stderr and b"Broken pipe" not in proc.stderr
    wait_inactive(db)
    # only what was written can have been confirmed
    assert confirmed(db) <= last_end


def test_closed_pipe_before_anything_written_confirms_nothing(db: Any) -> None:
    setup(db)
    before = insert_lsn(db)
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--format", "json")
    wait_active(db)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader goes away
    db.execute("INSERT INTO t VALUES (1, 'x')")
    tx_end = insert_lsn(db)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err
    wait_inactive(db)
    assert before <= tx_end
    # the insert was never written anywhere: it must not be confirmed
    assert confirmed(db) < tx_end


def test_closed_stdout_is_a_clear_error(db: Any) -> None:
    setup(db)
    proc = subprocess.run(
        ["bash", "-c", f"{PY} -m pgtail stream --dsn '{db.dsn}' --slot s >&-"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert b"standard output is closed" in proc.stderr


def _workload(db: Any, count: int, stop: threading.Event) -> None:
    conn = db.connect()
    cur = conn.cursor()
    for i in range(count):
        cur.execute("INSERT INTO t VALUES (%s, repeat('v', 200))", (i,))
        if stop.is_set():
            break
    conn.close()


def test_kill_9_and_restart_is_at_least_once(db: Any, tmp_path: Path) -> None:
    setup(db)
    total = 3000
    first_out = tmp_path / "first.jsonl"
    stop = threading.Event()
    with open(first_out, "wb") as fh:
        proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--format", "json", stdout=fh)
        wait_active(db)
        worker = threading.Thread(target=_workload, args=(db, total, stop))
        worker.start()
        deadline = time.time() + 60
        while first_out.stat().st_size < 200_000 and time.time() < deadline:
            time.sleep(0.02)
        proc.kill()  # SIGKILL mid-workload
        proc.wait()
    worker.join()
    wait_inactive(db)
    confirmed_at_kill = confirmed(db)
    end = insert_lsn(db)
    second = run_stream(
        db.dsn, "--slot", "s", "--publication", "pub", "--format", "json", "--end", format_lsn(end)
    )
    assert second.returncode == 0, second.stderr
    first = parse_file(first_out)
    again = [orjson.loads(x) for x in second.stdout.splitlines()]
    assert first, "the first run wrote nothing before it was killed"
    ids_first = [r["new"]["id"] for r in first]
    ids_again = [r["new"]["id"] for r in again]
    assert sorted(set(ids_first) | set(ids_again)) == list(range(total))  # nothing missing
    assert len(ids_again) == len(set(ids_again))
    repeated = set(ids_first) & set(ids_again)
    for r in again:
        if r["new"]["id"] in repeated:
            # a repeat is only ever a transaction after the last confirmation
            assert parse_lsn(r["end_lsn"]) > confirmed_at_kill
    # and nothing that was confirmed comes again
    assert all(parse_lsn(r["end_lsn"]) > confirmed_at_kill for r in again)


def test_kill_9_with_output_file_has_no_duplicates(db: Any, tmp_path: Path) -> None:
    setup(db)
    total = 3000
    out = tmp_path / "changes.jsonl"
    stop = threading.Event()
    worker = threading.Thread(target=_workload, args=(db, total, stop))
    kills = 0
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--output", str(out))
    wait_active(db)
    worker.start()
    try:
        while kills < 3:
            deadline = time.time() + 30
            start_size = out.stat().st_size if out.exists() else 0
            while time.time() < deadline:
                size = out.stat().st_size if out.exists() else 0
                if size > start_size + 60_000 or not worker.is_alive():
                    break
                time.sleep(0.01)
            proc.kill()
            proc.wait()
            kills += 1
            wait_inactive(db)
            proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--output", str(out))
            wait_active(db)
        worker.join()
        end = insert_lsn(db)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        final = run_stream(
            db.dsn, "--slot", "s", "--publication", "pub", "--output", str(out),
            "--end", format_lsn(end),
        )  # fmt: skip
        assert final.returncode == 0, final.stderr
    finally:
        kill_if_running(proc)
    lines = out.read_bytes().splitlines()
    ids = [orjson.loads(x)["new"]["id"] for x in lines]  # every line is whole
    assert sorted(ids) == list(range(total))  # each exactly once
    assert len(ids) == len(set(ids))


def test_slow_consumer_survives_wal_sender_timeout(db: Any) -> None:
    setup(db)
    # 2 s, not less: a machine loaded past its cores can leave pgtail without a CPU for
    # over a second (a 3-worker run with other work beside it timed out at 1 s)
    dsn = db.dsn + " options='-c wal_sender_timeout=2000'"
    proc = pgtail(
        dsn, "--slot", "s", "--publication", "pub", "--format", "json", "--idle-exit", "4"
    )
    try:
        wait_active(db)
        total = 20_000
        db.execute(
            "INSERT INTO t SELECT g, repeat('y', 100) FROM generate_series(0, %s) g", (total - 1,)
        )
        for i in range(total, total + 50):
            db.execute("INSERT INTO t VALUES (%s, 'z')", (i,))
        time.sleep(6)  # the consumer stalls for three wal_sender_timeouts
        out, err = proc.communicate(timeout=120)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 0, err
    ids = [orjson.loads(x)["new"]["id"] for x in out.splitlines()]
    assert ids == list(range(total + 50))
    assert b"reconnect" not in err, err  # feedback kept flowing: no timeout, no reconnect


def wait_made(db: Any, slot: str | None = None) -> None:
    """Until pgtail has made ``slot`` (--create-slot; None: the temporary slot it makes
    without --slot). A slot is active while being made, but holds only what commits after
    its consistent point, which sets its confirmed_flush_lsn (a row written before that is
    not in the slot: a CI run met that race)."""
    wait_for(
        db,
        "SELECT bool_or(active AND confirmed_flush_lsn IS NOT NULL) FROM pg_replication_slots"
        " WHERE slot_name = coalesce(%s, slot_name)",
        (slot,),
        timeout=30,
    )


def test_temporary_slot_by_default_and_gone_after_exit(db: Any) -> None:
    setup(db, slot=None)
    proc = pgtail(db.dsn, "--publication", "pub", "--format", "json", "--max-changes", "2")
    wait_made(db)
    db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert [orjson.loads(x)["new"]["id"] for x in out.splitlines()] == [1, 2]
    assert b"temporary slot" in err
    # the server drops a temporary slot as its walsender exits, just after pgtail's close
    wait_for(db, "SELECT count(*) = 0 FROM pg_replication_slots", timeout=30)


def test_cli_error_is_one_line(db: Any) -> None:
    setup(db)
    proc = run_stream(db.dsn, "--slot", "missing", "--publication", "pub", timeout=60)
    assert proc.returncode == 1
    lines = proc.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0] and "--create-slot" in lines[0]


def test_cli_bad_lsn_is_usage_error(db: Any) -> None:
    proc = run_stream(db.dsn, "--end", "nonsense", timeout=60)
    assert proc.returncode == 2
    assert b"invalid LSN 'nonsense'" in proc.stderr


def test_create_slot_flag(db: Any) -> None:
    setup(db, slot=None)
    db.execute("INSERT INTO t VALUES (1, 'before the slot')")
    proc = pgtail(
        db.dsn, "--slot", "made", "--create-slot", "--publication", "pub", "--idle-exit", "2"
    )
    wait_made(db, "made")
    db.execute("INSERT INTO t VALUES (2, 'after')")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [orjson.loads(x)["new"]["id"] for x in out.splitlines()] == [2]
    assert b"created replication slot 'made'" in err
    assert db.execute("SELECT temporary FROM pg_replication_slots WHERE slot_name='made'") == [
        (False,)
    ]


def wait_pipe_full(proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until ``proc``'s stdout pipe holds all it can: the writer is blocked (not a guess
    at how long reading the transaction takes on a loaded machine)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    capacity = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pending = struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if pending >= capacity - 4096:
            time.sleep(0.2)  # blocked in write(): the signal finds it there
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("pgtail never filled its stdout pipe")


def test_signal_while_output_blocked_stops_within_a_second(db: Any) -> None:
    """A reader that takes nothing does not hold a stop up: pgtail exits with the
    signal's status about a second after it, and what it did not write is not
    confirmed (the next run sends it again)."""
    setup(db)
    before = confirmed(db)
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--format", "json")
    try:
        wait_active(db)
        total = 5000
        db.execute(
            "INSERT INTO t SELECT g, repeat('w', 200) FROM generate_series(0, %s) g", (total - 1,)
        )
        end = insert_lsn(db)
        wait_pipe_full(proc)  # pgtail is writing the transaction; its stdout pipe is full
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)  # the consumer reads nothing meanwhile
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()
    finally:
        kill_if_running(proc)
    assert code == 143, err
    assert b"pgtail: stopped; " in err
    whole = out[: out.rfind(b"\n") + 1]
    ids = [orjson.loads(x)["new"]["id"] for x in whole.splitlines()]
    assert ids == list(range(len(ids))) and len(ids) < total  # in order, not all written
    wait_inactive(db)
    assert before <= confirmed(db) < end  # the transaction is not confirmed


def test_second_signal_abandons_blocked_output(db: Any) -> None:
    setup(db)
    before = confirmed(db)
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--format", "json")
    try:
        wait_active(db)
        db.execute("INSERT INTO t SELECT g, repeat('w', 200) FROM generate_series(0, 4999) g")
        tx_end = insert_lsn(db)
        wait_pipe_full(proc)
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=30)  # exits without waiting for the consumer
    finally:
        kill_if_running(proc)
    assert code == 143
    wait_inactive(db)
    # the transaction was never completely written: not confirmed
    assert before <= confirmed(db) < tx_end


def test_cli_options_env_publication_ops_table_redact(db: Any) -> None:
    setup(db, slot=None)
    db.execute("CREATE TABLE other (id int PRIMARY KEY, secret text)")
    db.execute("CREATE PUBLICATION pub2 FOR TABLE t, other")
    env = {**os.environ, "PGTAIL_PUBLICATION": "pub2"}
    two_phase = ["--two-phase"] if db.major >= 15 else []
    proc = pgtail(
        db.dsn,
        "--slot",
        "made",
        "--create-slot",
        *two_phase,
        "--ops",
        "insert,update",
        "--table",
        "public.oth*",
        "--redact",
        "secret",
        "--idle-exit",
        "2",
        "--tx",
        env=env,
    )
    wait_made(db, "made")
    db.execute("INSERT INTO t VALUES (1, 'not selected')")
    db.execute("INSERT INTO other VALUES (1, 'hidden')")
    db.execute("UPDATE other SET secret = 'still hidden'")
    db.execute("DELETE FROM other")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    records = [orjson.loads(x) for x in out.splitlines()]
    changes = [r for r in records if r["op"] not in ("begin", "commit")]
    assert [(r["op"], r["table"]) for r in changes] == [("insert", "other"), ("update", "other")]
    assert all(r["new"]["secret"] == "***" for r in changes)
    assert b"hidden" not in out
    assert {r["op"] for r in records} >= {"begin", "commit"}
    if db.major >= 15:
        assert db.execute("SELECT two_phase FROM pg_replication_slots WHERE slot_name='made'") == [
            (True,)
        ]


def test_server_error_mid_stream_is_reported_not_retried(db15: Any) -> None:
    db = db15
    setup(db)
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--format", "json")
    try:
        wait_active(db)
        db.execute("INSERT INTO t VALUES (1, 'a')")
        first = read_json_lines(proc.stdout, 1)
        db.execute("DROP PUBLICATION pub")
        db.execute("INSERT INTO t VALUES (2, 'b')")  # decoding it needs the publication
        _, err = proc.communicate(timeout=30)
    finally:
        kill_if_running(proc)
    assert [r["new"]["id"] for r in first] == [1]
    assert proc.returncode == 1, err
    text = err.decode()
    assert "publication" in text and "does not exist" in text
    assert "reconnect" not in text
    assert len(text.strip().splitlines()) == 1


def test_kill_9_inside_a_large_transaction_with_output_file(db: Any, tmp_path: Path) -> None:
    """Killed while a multi-batch transaction is half written: the restart cuts the partial
    transaction off the file and writes it whole, once."""
    setup(db)
    out = tmp_path / "big.jsonl"
    proc = pgtail(db.dsn, "--slot", "s", "--publication", "pub", "--output", str(out))
    try:
        wait_active(db)
        total = 30_000
        db.execute(
            "INSERT INTO t SELECT g, repeat('b', 300) FROM generate_series(0, %s) g",
            (total - 1,),
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            if out.exists() and out.stat().st_size > 1_500_000:
                break
            time.sleep(0.005)
        proc.kill()
        proc.wait()
        partial = out.stat().st_size
    finally:
        kill_if_running(proc)
    wait_inactive(db)
    db.execute("INSERT INTO t VALUES (%s, 'after')", (total,))
    end = insert_lsn(db)
    again = run_stream(
        db.dsn, "--slot", "s", "--publication", "pub", "--output", str(out),
        "--end", format_lsn(end),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    ids = [orjson.loads(x)["new"]["id"] for x in out.read_bytes().splitlines()]
    assert ids == list(range(total + 1))
    assert partial < out.stat().st_size
    assert b"bytes of unconfirmed output" in again.stderr  # the partial tx was cut off


def test_appending_stdout_after_a_torn_line_cuts_it(db: Any, tmp_path: Path) -> None:
    """``pgtail stream >> FILE`` after a run killed mid-write: the torn last line (never
    confirmed) is cut, not glued to the next run's first line."""
    setup(db)
    db.execute("INSERT INTO t VALUES (1, 'one')")
    end = insert_lsn(db)
    out = tmp_path / "changes.jsonl"
    out.write_bytes(b'{"op":"insert","n":0}\n{"op":"insert","schema":"public","ta')
    with open(out, "ab") as fh:
        again = run_stream(
            db.dsn, "--slot", "s", "--publication", "pub", "--format", "json",
            "--end", format_lsn(end), stdout=fh,
        )  # fmt: skip
    assert again.returncode == 0, again.stderr
    lines = [orjson.loads(x) for x in out.read_bytes().splitlines()]  # every line is whole
    assert [r.get("new") for r in lines] == [None, {"id": 1, "v": "one"}]
    assert b"removed a torn last line" in again.stderr
