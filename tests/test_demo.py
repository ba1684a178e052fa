"""``pgtail demo`` end to end, in a subprocess: it starts its own server, streams every kind
of change with the normal stream machinery, and leaves no process or directory behind —
after --duration, on SIGINT, and on SIGTERM. --keep leaves a usable server and says how to
remove it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import psycopg2
import pytest

from pgtail.demo import MESSAGE_PREFIX, ROLLBACK_MARKER
from pgtail.server import find_bindir

STARTED = re.compile(r"in (/\S+) on 127\.0\.0\.1:(\d+)")
ALL_OPS = {"insert", "update", "delete", "truncate", "message"}

# every test here starts a PostgreSQL server through `pgtail demo` (no fixture says so)
pytestmark = pytest.mark.server


@pytest.fixture(autouse=True)
def _needs_server_binaries() -> None:
    try:
        find_bindir()
    except Exception as exc:  # the demo itself reports this as a clear error
        if os.environ.get("CI"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def _pgtail(*args: str) -> list[str]:
    return [sys.executable, "-m", "pgtail", *args]


def _server_dir(stderr: str) -> Path:
    match = STARTED.search(stderr)
    assert match, f"the demo did not say where its server lives:\n{stderr}"
    return Path(match.group(1))


def _processes_using(path: Path) -> list[str]:
    """Command lines of running processes that mention ``path`` (the postmaster does)."""
    found = []
    needle = str(path).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline:
            found.append(cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


def _assert_cleaned_up(directory: Path) -> None:
    for _ in range(50):  # the postmaster's children exit right after it
        if not _processes_using(directory):
            break
        time.sleep(0.1)
    assert _processes_using(directory) == []
    assert not directory.exists()


def _json_lines(stdout: bytes) -> list[dict[str, Any]]:
    lines = [orjson.loads(line) for line in stdout.splitlines() if line.strip()]
    assert lines, "the demo printed no changes"
    return lines


def _check_changes(records: list[dict[str, Any]], stdout: bytes) -> None:
    ops = {r["op"] for r in records}
    assert ops >= ALL_OPS, f"missing ops: {ALL_OPS - ops}"
    tables = {r["table"] for r in records if r["op"] in ("insert", "update", "delete")}
    assert {"customers", "orders", "documents", "inventory", "sessions", "page_views"} <= tables
    # the rolled-back transaction never appears
    assert ROLLBACK_MARKER.encode() not in stdout
    # an update that left the TOASTed body alone says so; one that changed it carries it
    documents = [r for r in records if r["op"] == "update" and r["table"] == "documents"]
    assert any(r["unchanged_toast"] == ["body"] and "body" not in r["new"] for r in documents)
    assert any(r["unchanged_toast"] == [] and len(r["new"]["body"]) >= 2000 for r in documents)
    # replica identity kinds as the stream reports them
    identity = {r["table"]: r["replica_identity"] for r in records if "replica_identity" in r}
    assert identity["inventory"] == "full"
    assert identity["sessions"] == "index"
    assert identity["page_views"] == "nothing"
    assert identity["orders"] == "default"
    full = [r for r in records if r["op"] == "update" and r["table"] == "inventory"]
    assert full and all(r["old_kind"] == "full" and "quantity" in r["old"] for r in full)
    orders = [r for r in records if r["op"] == "insert" and r["table"] == "orders"]
    assert isinstance(orders[0]["new"]["items"], list) and isinstance(
        orders[0]["new"]["tags"], list
    )
    messages = [r for r in records if r["op"] == "message"]
    assert {m["prefix"] for m in messages} == {MESSAGE_PREFIX}
    assert {m["transactional"] for m in messages} == {True, False}
    truncates = [r for r in records if r["op"] == "truncate"]
    assert truncates[0]["tables"] == [{"schema": "public", "table": "page_views"}]


def test_demo_duration_json() -> None:
    proc = subprocess.run(
        _pgtail("demo", "--duration", "6", "--format", "json", "--interval", "0.1"),
        capture_output=True,
        timeout=180,
    )
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr
    directory = _server_dir(stderr)
    _check_changes(_json_lines(proc.stdout), proc.stdout)
    _assert_cleaned_up(directory)
    assert f"removed {directory}" in stderr


class _Running:
    """A demo subprocess whose stderr is collected by a thread while it runs."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            _pgtail("demo", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.stderr: list[str] = []
        self.stdout = b""
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._out = threading.Thread(target=self._read_out, daemon=True)
        self._err.start()
        self._out.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.decode(errors="replace"))

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while chunk := os.read(fd, 65536):
            self.stdout += chunk

    def wait_for_changes(self, timeout: float = 120) -> None:
        """Until the complete lines printed so far pass `_check_changes` (a full round
        of the workload streamed), however slow the machine."""
        deadline = time.monotonic() + timeout
        while True:
            complete = self.stdout[: self.stdout.rfind(b"\n") + 1]
            try:
                _check_changes(_json_lines(complete), complete)
                return
            except AssertionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
            time.sleep(0.2)

    def wait_for_stderr(self, pattern: str, timeout: float = 120) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, "".join(self.stderr))
            if match:
                return match
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {pattern!r} on stderr:\n{''.join(self.stderr)}")

    def finish(self, timeout: float = 120) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # what it said (an "Exception ignored" names where a signal was lost)
            self.proc.kill()
            self._err.join(10)
            raise AssertionError(
                f"pgtail demo did not exit within {timeout} s; its stderr:\n{''.join(self.stderr)}"
            ) from None
        self._err.join(10)
        self._out.join(10)
        return code


@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_demo_interrupted(signum: int, expected: int) -> None:
    run = _Running("--format", "json", "--interval", "0.1")
    try:
        match = run.wait_for_stderr(STARTED.pattern)
        directory = Path(match.group(1))
        run.wait_for_stderr("streaming")
        assert _processes_using(directory), "the demo server is not running"
        run.wait_for_changes()  # a full round of the workload streamed
        run.proc.send_signal(signum)
        code = run.finish()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    stderr = "".join(run.stderr)
    assert code == expected, stderr
    assert "Traceback" not in stderr
    _check_changes(_json_lines(run.stdout), run.stdout)
    _assert_cleaned_up(directory)


def test_demo_keep_leaves_a_usable_server() -> None:
    proc = subprocess.run(
        _pgtail("demo", "--duration", "3", "--format", "json", "--keep"),
        capture_output=True,
        timeout=180,
    )
    stderr = proc.stderr.decode()
    directory = _server_dir(stderr)
    try:
        assert proc.returncode == 0, stderr
        dsn_match = re.search(r"^(host=127\.0\.0\.1 port=\d+ dbname=shop user=\S+)$", stderr, re.M)
        assert dsn_match, stderr
        assert _processes_using(directory)
        conn = psycopg2.connect(dsn_match.group(1))
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT slot_name, plugin FROM pg_replication_slots")
                assert cur.fetchall() == [("pgtail_demo", "pgoutput")]
                cur.execute("SELECT pubname FROM pg_publication")
                assert cur.fetchall() == [("pgtail_demo",)]
                cur.execute("SELECT count(*) FROM customers")
                row = cur.fetchone()
                assert row is not None and row[0] > 0
        finally:
            conn.close()
        # the printed instructions stop the server and remove its directory
        stop = re.search(r"^\s+(.* stop && rm -rf .*)$", stderr, re.M)
        assert stop, stderr
        subprocess.run(["sh", "-c", stop.group(1)], check=True, capture_output=True, timeout=120)
        _assert_cleaned_up(directory)
    finally:
        if directory.exists():
            from pgtail.server import LocalServer

            LocalServer(bindir=find_bindir(), basedir=directory, port=0, _running=True).destroy()


def test_demo_interrupted_during_setup() -> None:
    run = _Running("--format", "json")
    try:
        match = run.wait_for_stderr(STARTED.pattern)
        directory = Path(match.group(1))
        run.proc.send_signal(signal.SIGINT)  # while the schema is being created
        code = run.finish()
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    stderr = "".join(run.stderr)
    assert code == 130, stderr
    assert "Traceback" not in stderr
    _assert_cleaned_up(directory)


def test_demo_stdout_closed_early() -> None:
    """`pgtail demo | head -2`: exits 0 quietly and still removes its server."""
    proc = subprocess.Popen(
        _pgtail("demo", "--format", "json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        first = [proc.stdout.readline() for _ in range(2)]
        proc.stdout.close()
        code = proc.wait(120)
        stderr = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert all(orjson.loads(line)["op"] == "insert" for line in first)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    _assert_cleaned_up(_server_dir(stderr))


def test_demo_interrupted_after_its_reader_went() -> None:
    """`pgtail demo 2>&1 | tee log` and Ctrl-C, which ends tee too: the progress lines to
    the closed pipe are lost, the demo removes its server and exits 130 (it exited 1)."""
    proc = subprocess.Popen(
        _pgtail("demo", "--format", "json", "--interval", "0.1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert proc.stdout is not None
        seen = b""
        while seen.count(b'{"op":') < 3:
            line = proc.stdout.readline()
            assert line, f"the demo ended early:\n{seen.decode()}"
            seen += line
        proc.stdout.close()  # tee is gone
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130
    _assert_cleaned_up(_server_dir(seen.decode()))
