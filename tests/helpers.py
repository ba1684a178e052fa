"""What the test modules share: a database on a test server and what they ask of it.

Test modules import helpers from here (and bytes from ``pgbytes``, message cases from
``pgoutput_corpus``, decoded events from ``events``, a workload from ``workload``, a TCP
proxy from ``proxy``), never from one another nor from conftest: a test module must stay
readable and runnable on its own. ``conftest`` builds its ``db`` fixtures from
:func:`fresh_database`.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg2
import psycopg2.extras
from click.testing import CliRunner

from pgtail.cli import main
from pgtail.lsn import parse_lsn
from pgtail.server import LocalServer

# --- a database on a test server --------------------------------------------------------


@dataclass
class Database:
    server: LocalServer
    name: str

    @property
    def dsn(self) -> str:
        return self.server.dsn(self.name)

    @property
    def major(self) -> int:
        return self.server.major

    def connect(self, **kwargs: object) -> psycopg2.extensions.connection:
        conn = psycopg2.connect(self.dsn, **kwargs)
        conn.autocommit = True
        return conn

    def execute(self, sql: str, params: object = None) -> list[tuple[object, ...]]:
        """Run ``sql`` in a session of its own, as if on a new connection (see `_session`)."""
        conn = _session(self.dsn)
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                rows = cur.fetchall() if cur.description else []
        except BaseException:
            _forget(self.dsn, conn)
            raise
        if conn.info.transaction_status != psycopg2.extensions.TRANSACTION_STATUS_IDLE:
            _forget(self.dsn, conn)  # it left a transaction open: ended, as by a close
        return rows


# One kept session per database and thread for `Database.execute`. A new connection costs
# the server a process and its caches, ~15 ms of CPU, against 0.1 ms for a statement on
# a kept one; the tests' polling loops run thousands. Each use starts with DISCARD ALL (the
# session is as new: settings, temporary tables, locks, prepared statements), which also
# finds a session the server ended (a restart, pg_terminate_backend): a new one replaces
# it. A statement that fails, or leaves a transaction open, closes its session, as before.
_SESSIONS: dict[tuple[str, int], psycopg2.extensions.connection] = {}


def _session(dsn: str) -> psycopg2.extensions.connection:
    key = (dsn, threading.get_ident())
    conn = _SESSIONS.pop(key, None)
    if conn is not None:
        try:
            with conn.cursor() as cur:
                cur.execute("DISCARD ALL")
        except psycopg2.Error:
            conn.close()
            conn = None
    if conn is None:
        conn = psycopg2.connect(dsn)
        conn.autocommit = True
    _SESSIONS[key] = conn
    return conn


def _forget(dsn: str, conn: psycopg2.extensions.connection) -> None:
    _SESSIONS.pop((dsn, threading.get_ident()), None)
    conn.close()


def close_sessions(dsn: str) -> None:
    """Close `Database.execute`'s kept sessions of ``dsn`` (every thread's)."""
    for key in [key for key in _SESSIONS if key[0] == dsn]:
        conn = _SESSIONS.pop(key, None)
        if conn is not None:
            conn.close()


# The JVMs the Spark tests start (the session's, and those of the `pgtail spark` processes,
# which spark-submit starts with SPARK_SUBMIT_OPTS) compile with C1 only and collect with
# one thread. Each test runs many small Spark jobs: C2's compiler threads and the parallel
# collector's cost more CPU than they save there. Spark's behaviour is the same; on 2 cores
# two of test_spark's tests took 117 s of CPU without them and 74 s with (61 s wall, not 73).
SPARK_TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def create_database(server: LocalServer, prefix: str = "t_", name: str | None = None) -> Database:
    """A new, empty database on ``server``, named ``name`` or ``prefix`` and a random
    tail (drop it with :func:`drop_database`)."""
    name = name or prefix + uuid.uuid4().hex[:12]
    # 15+ copy the template through the WAL by default; copying its files, as 12 to 14 do,
    # costs half the CPU (template1 is 7.5 MB; fsync is off on the test servers)
    strategy = " STRATEGY = FILE_COPY" if server.major >= 15 else ""
    admin = psycopg2.connect(server.dsn("postgres"))
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"{strategy}')
    finally:
        admin.close()
    return Database(server, name)


def allow_password_role(server: LocalServer, attributes: str) -> None:
    """Role ``pw`` (LOGIN ``attributes``, password ``right-secret``), which must give its
    password over TCP; every other role is trusted, over the socket and TCP."""
    admin = psycopg2.connect(server.dsn("postgres"))
    admin.autocommit = True
    admin.cursor().execute(f"CREATE ROLE pw LOGIN {attributes} PASSWORD 'right-secret'")
    admin.close()
    server.set_hba(
        "local all all trust\n"
        "host all pw 127.0.0.1/32 scram-sha-256\n"
        "host replication pw 127.0.0.1/32 scram-sha-256\n"
        "host all all 127.0.0.1/32 trust\nhost replication all 127.0.0.1/32 trust\n"
    )


def fresh_database(server: LocalServer) -> Iterator[Database]:
    """A new database on ``server``; dropped afterwards with its slots and prepared
    transactions (a generator: ``yield from`` it in a fixture)."""
    database = create_database(server)
    try:
        yield database
    finally:
        drop_database(server, database.name)


def drop_database(server: LocalServer, name: str) -> None:
    """Drop database ``name`` if it exists, with its slots and prepared transactions,
    ending every session in it first (on every major: ``WITH (FORCE)`` is new in 13)."""
    close_sessions(server.dsn(name))
    admin = psycopg2.connect(server.dsn("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE database = %s AND active_pid IS NOT NULL",
            (name,),
        )
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        for _ in range(50):
            cur.execute(
                "SELECT count(*) FROM pg_replication_slots WHERE database = %s AND active",
                (name,),
            )
            row = cur.fetchone()
            if row is None or row[0] == 0:
                break
            time.sleep(0.1)
        cur.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE database = %s",
            (name,),
        )
        cur.execute("SELECT gid FROM pg_prepared_xacts WHERE database = %s", (name,))
        prepared = [r[0] for r in cur.fetchall()]
    if prepared:
        conn = psycopg2.connect(server.dsn(name))
        conn.autocommit = True
        with conn.cursor() as cur:
            for gid in prepared:
                cur.execute("ROLLBACK PREPARED %s", (gid,))
        conn.close()
    with admin.cursor() as cur:
        # before 13, DROP DATABASE waits (up to 5 s) for the sessions ended above to exit
        force = " WITH (FORCE)" if server.major >= 13 else ""
        cur.execute(f'DROP DATABASE IF EXISTS "{name}"{force}')
    admin.close()


# --- the CLI in-process ---------------------------------------------------------------


def run_cli(args: list[str], env: dict[str, str | None] | None = None) -> tuple[int, str, str]:
    """Run ``pgtail ARGS`` in-process through main(); returns (exit code, stdout, stderr)."""
    runner = CliRunner()
    with runner.isolation(env=env) as (out, err, _):
        try:
            main(args)
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        return code, out.getvalue().decode(), err.getvalue().decode()


# --- the CLI as a process ---------------------------------------------------------------


def stream_command(dsn: str, *args: str) -> list[str]:
    """``pgtail stream --dsn DSN ARGS`` as ``python -m pgtail`` (PYTHONPATH picks the code
    under test)."""
    return [sys.executable, "-m", "pgtail", "stream", "--dsn", dsn, *args]


def pgtail_stream(dsn: str, *args: str, **popen: Any) -> subprocess.Popen[bytes]:
    """``pgtail stream --dsn DSN ARGS`` as a process; stdout and stderr are pipes unless
    ``popen`` says else."""
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(stream_command(dsn, *args), **popen)


def run_stream(
    dsn: str, *args: str, timeout: float | None = 120, **run: Any
) -> subprocess.CompletedProcess[Any]:
    """``pgtail stream --dsn DSN ARGS`` run to its end (a nonzero exit is the caller's to
    assert unless ``check=True``); stdout and stderr captured unless ``run`` says else."""
    run.setdefault("stdout", subprocess.PIPE)
    run.setdefault("stderr", subprocess.PIPE)
    run.setdefault("check", False)
    return subprocess.run(stream_command(dsn, *args), timeout=timeout, **run)


def kill_if_running(proc: subprocess.Popen[bytes]) -> None:
    """Kill ``proc`` unless it has exited (a test's ``finally``: no process outlives it)."""
    if proc.poll() is None:
        proc.kill()


def read_json_lines(stream: Any, count: int, timeout: float = 30) -> list[dict[str, Any]]:
    """Read ``count`` JSON lines from a pipe (with a deadline; fewer if it closes)."""
    found: list[dict[str, Any]] = []
    box: dict[str, Any] = {}

    def reader() -> None:
        try:
            while len(found) < count:
                line = stream.readline()
                if not line:
                    return
                found.append(orjson.loads(line))
        except Exception as exc:  # pragma: no cover - reported below
            box["error"] = exc

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    thread.join(timeout)
    assert "error" not in box, box
    return found


# --- WAL and slots ----------------------------------------------------------------------


def write(db: Database, statement: str) -> None:
    """Run a change and wait for its WAL to be flushed: the servers run with
    synchronous_commit = off, and logical decoding reads only flushed WAL."""
    db.execute("SET synchronous_commit = on; " + statement)


def insert_lsn(db: Database) -> int:
    """The server's current WAL insert position."""
    return parse_lsn(str(db.execute("SELECT pg_current_wal_insert_lsn()::text")[0][0]))


def confirmed(db: Database, slot: str = "s") -> int:
    """The slot's confirmed_flush_lsn."""
    rows = db.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    )
    return parse_lsn(str(rows[0][0]))


def wait_for(db: Database, query: str, params: Any = None, timeout: float = 90) -> None:
    """Until ``query`` returns a true first value (polled every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = db.execute(query, params)
        if rows and rows[0][0]:
            return
        time.sleep(0.1)
    raise AssertionError(f"never true: {query}")


def wait_active(db: Database, slot: str = "s", timeout: float = 30) -> None:
    """Wait until a walsender holds ``slot``; errors while the server restarts are retried."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            rows = db.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            )
            if rows and rows[0][0]:
                return
        except psycopg2.Error:
            pass  # the server may be restarting
        time.sleep(0.05)
    raise AssertionError(f"slot {slot} never became active")


def wait_any_active(db: Database, timeout: float = 30) -> None:
    """Wait (at most ``timeout`` seconds, then go on) until some walsender holds a slot:
    a temporary slot's name is not known beforehand."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if db.execute("SELECT count(*) FROM pg_replication_slots WHERE active")[0][0]:
            break
        time.sleep(0.05)


def wait_inactive(db: Database, slot: str = "s", timeout: float = 30) -> None:
    """Wait until no walsender holds ``slot`` (or it is gone): the consumer has let go,
    after the walsender processed its last feedback."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = db.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        if not rows or not rows[0][0]:
            return
        time.sleep(0.02)
    raise AssertionError(f"slot {slot} stayed active")


@contextmanager
def streaming(db: Database, slot: str, publication: str) -> Iterator[int]:
    """Hold ``slot`` active with a real walsender; yields the walsender's PID."""
    conn = psycopg2.connect(db.dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    try:
        cur = conn.cursor()
        cur.start_replication(
            slot_name=slot,
            decode=False,
            options={"proto_version": "1", "publication_names": publication},
        )
        pid = None
        for _ in range(100):
            rows = db.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s AND active",
                (slot,),
            )
            if rows:
                pid = int(rows[0][0])  # type: ignore[call-overload]
                break
            time.sleep(0.05)
        assert pid is not None, "the slot never became active"
        yield pid
    finally:
        with suppress(Exception):
            conn.close()


class _Lines:
    """A pgtail process's stdout, line by line as ``parse`` makes them, read in the
    background."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._items: list[Any] = []
        self._proc = proc
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @staticmethod
    def parse(line: bytes) -> Any:
        return line

    def _run(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._items.append(self.parse(line))

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        while len(self._items) < count and time.time() < deadline:
            time.sleep(0.02)
        assert len(self._items) >= count, (len(self._items), count)


class RawLines(_Lines):
    """pgtail's stdout as lines of bytes, read in the background."""

    def lines(self) -> list[bytes]:
        """Every line, once the process's stdout has closed."""
        self._thread.join(30)
        return list(self._items)


class JsonLines(_Lines):
    """A pgtail process's JSON lines on stdout, read in the background."""

    parse = staticmethod(orjson.loads)

    @property
    def lines(self) -> list[dict[str, Any]]:
        """The lines read so far (the list grows while the process writes)."""
        return self._items

    def join(self) -> None:
        self._thread.join(30)

    def ids(self) -> list[int]:
        """The ``new.id`` of every line, once the process's stdout has closed."""
        self.join()
        return [r["new"]["id"] for r in self.lines]


class Stderr:
    """A process's stderr lines, read on a thread."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self.stream = proc.stderr
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for line in self.stream:
            self.lines.append(line.decode(errors="replace"))

    def wait_for(self, text: str, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if text in line:
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no line with {text!r} in: {self.lines}")

    def text(self) -> str:
        self.thread.join(10)
        return "".join(self.lines)


def settle(db: Any) -> None:
    """Wait until WAL written so far is flushed (the test servers commit asynchronously).

    At a page boundary pg_current_wal_insert_lsn() counts the next page's header (24
    bytes, 40 at a segment start), which is written only with the next record: the
    flush position stops at the boundary."""
    target = parse_lsn(str(db.execute("SELECT pg_current_wal_insert_lsn()::text")[0][0]))
    if target % 8192 in (24, 40):
        target -= target % 8192
    for _ in range(500):
        if parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0])) >= target:
            return
        time.sleep(0.02)
    raise AssertionError("WAL not flushed")


def start_standby(primary: LocalServer, settings: dict[str, str]) -> LocalServer:
    """A hot standby of ``primary`` (pg_basebackup -R from the primary's bin directory),
    started with ``settings``; the caller must `destroy()` it. Needs pg_basebackup beside
    the server binaries (the embedded 18 and Debian's 15 have it)."""
    import os
    import pwd
    import tempfile
    from pathlib import Path

    from pgtail.server import free_port, run_as_user

    basedir = Path(tempfile.mkdtemp(prefix="pgtail-standby-"))
    standby = LocalServer(bindir=primary.bindir, basedir=basedir, port=free_port(), settings={})
    standby.system_user = run_as_user()
    standby.major = primary.major
    standby.socket_dir.mkdir()
    if standby.system_user is not None:
        entry = pwd.getpwnam(standby.system_user)
        for path in (basedir, standby.socket_dir):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    try:
        standby._cmd(
            [
                str(primary.bindir / "pg_basebackup"),
                *("-D", str(standby.datadir), "-R", "-X", "stream"),
                *("-d", primary.dsn("postgres")),
            ]
        )
        conf = {
            "port": str(standby.port),
            "unix_socket_directories": f"'{standby.socket_dir}'",
            **settings,
        }
        with open(standby.datadir / "postgresql.auto.conf", "a") as fh:
            fh.writelines(f"{key} = {value}\n" for key, value in conf.items())
        standby.start()
    except BaseException:
        standby.destroy()
        raise
    return standby


# --- replaying SQL output ------------------------------------------------------------------

_COPY_HEAD = re.compile(r"^COPY .* FROM STDIN;\n", re.MULTILINE)


def run_sql_script(conn: psycopg2.extensions.connection, script: str) -> None:
    """What ``psql -f`` does with pgtail's SQL output, on one connection (psql is not
    installed for every major): its statements, and each ``COPY … FROM STDIN`` block's
    rows (a block the script ends inside ends there, as psql ends it at end of input)."""

    def execute(cur: Any, chunk: str) -> None:
        if any(line and not line.startswith("--") for line in chunk.splitlines()):
            cur.execute(chunk)

    with conn.cursor() as cur:
        rest = script
        while (head := _COPY_HEAD.search(rest)) is not None:
            execute(cur, rest[: head.start()])
            end = rest.find("\n\\.\n", head.end() - 1)
            data = rest[head.end() : end + 1] if end >= 0 else rest[head.end() :]
            cur.copy_expert(head.group(0).rstrip(";\n"), io.StringIO(data))
            rest = rest[end + 4 :] if end >= 0 else ""
        execute(cur, rest)
