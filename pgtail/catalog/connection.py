"""Opening ordinary (non-replication) connections: which DSN, which session settings.

The DSN is the one given, else ``DATABASE_URL``, else libpq's ``PG*`` environment.
`connection_string` merges the command line's ways of saying where to connect (a
connection string, psql's host/port/user/dbname) into that one DSN, refusing conflicts.
Every connection is autocommit and names itself (``application_name``); a failure to
connect becomes a pgtail error here (`pgtail.catalog.errors`). The replication
connection is opened by `pgtail.stream`, with `decoding_options` from here.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.errors import translate_connect_error, translate_error
from pgtail.errors import ConfigurationError, Interrupted, redact

APPLICATION_NAME = "pgtail"

# Every connection, ordinary or replication, asks for UTF-8: the server (the walsender
# too, and pgoutput through pq_sendstring / pq_sendcountedtext) converts names and text
# values from the database's encoding into the client's, and pgtail decodes UTF-8 only.
# Without it, a LATIN1 database sends LATIN1 bytes (libpq's default client_encoding is
# the database's), and a user's PGCLIENTENCODING or client_encoding= would do the same.
CLIENT_ENCODING = "UTF8"


def resolve_dsn(dsn: str | None) -> str:
    """The DSN to use: the given one, else ``DATABASE_URL``, else '' (libpq's PG* env)."""
    if dsn:
        return dsn
    return os.environ.get("DATABASE_URL", "")


_URI_PREFIXES = ("postgresql://", "postgres://")


def is_connection_string(text: str) -> bool:
    """libpq's rule for a dbname that is really a connection string (psql -d, psql's
    positional DBNAME): a URI, or key=value pairs."""
    return "=" in text or text.startswith(_URI_PREFIXES)


def connection_string(
    *,
    argument: str | None = None,
    dsn: str | None = None,
    host: str | None = None,
    port: str | None = None,
    user: str | None = None,
    dbname: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """The one DSN for what the command line says, or None when it says nothing (then
    `resolve_dsn`'s defaults apply: ``DATABASE_URL``, else libpq's ``PG*`` environment).

    ``argument`` (the positional DSN) and ``dbname`` (-d) are, like psql's, a database
    name or a whole connection string; ``dsn`` (--dsn) is a connection string. At most
    one connection string may be given, and host/port/user/dbname may add to it but not
    contradict it: a conflict raises `ConfigurationError` naming both sources. Without a
    connection string, they apply on top of ``DATABASE_URL`` (an environment default,
    which they override like -h overrides PGHOST).
    """
    strings: list[tuple[str, str]] = []  # (where from, connection string)
    names: list[tuple[str, str]] = []  # (where from, database name)
    for source, value in (("the DSN argument", argument), ("--dsn", dsn), ("--dbname", dbname)):
        if not value:
            continue
        if source == "--dsn" or is_connection_string(value):
            strings.append((source, value))
        else:
            names.append((source, value))
    if len({value for _, value in strings}) > 1:
        raise ConfigurationError(
            f"two connection strings given: {strings[0][0]} and {strings[1][0]}",
            hint="give the connection string once; -h/-p/-U/-d may add to it",
        )
    if len({value for _, value in names}) > 1:
        raise ConfigurationError(
            f"two database names given: {names[0][1]!r} in {names[0][0]}, "
            f"{names[1][1]!r} in {names[1][0]}",
            hint="give the database name once",
        )
    overrides: list[tuple[str, str, str]] = [  # (libpq keyword, where from, value)
        (keyword, source, value)
        for keyword, source, value in (
            ("host", "--host", host),
            ("port", "--port", port),
            ("user", "--username", user),
            ("dbname", names[0][0] if names else "--dbname", names[0][1] if names else None),
        )
        if value
    ]
    if not overrides:
        return strings[0][1] if strings else None
    if strings:
        source, base = strings[0]
        given = _parse(base, source)
        for keyword, option, value in overrides:
            if given.get(keyword) not in (None, "", value):
                raise ConfigurationError(
                    f"{option} {value!r} conflicts with {keyword}={given[keyword]!r} in {source}",
                    hint="say it once: in the connection string or as an option",
                )
    else:
        env = os.environ if environ is None else environ
        base = env.get("DATABASE_URL", "")
        if base:
            _parse(base, "DATABASE_URL")
    from psycopg2.extensions import make_dsn

    return str(make_dsn(base, **{keyword: value for keyword, _, value in overrides}))


def _parse(text: str, source: str) -> dict[str, str]:
    from psycopg2.extensions import parse_dsn

    try:
        return dict(parse_dsn(text))
    except psycopg2.Error as exc:
        first = redact(str(exc).strip(), text).splitlines()[0]
        raise ConfigurationError(
            f"invalid connection string in {source}: {first}",
            hint="use key=value pairs or a postgresql:// URI",
        ) from None


# pgoutput's text values come from the type output functions of the session that decodes
# (the walsender, or the session calling pg_logical_slot_*_changes), so that session's
# settings decide their form. pgtail.values parses these forms; a role's or database's
# default (ALTER ROLE ... SET DateStyle = 'SQL, DMY') must not change what arrives.
DECODING_SETTINGS: tuple[tuple[str, str], ...] = (
    ("DateStyle", "ISO"),
    ("IntervalStyle", "postgres"),
    ("TimeZone", "UTC"),
    ("extra_float_digits", "1"),
    ("bytea_output", "hex"),
)


def decoding_options(dsn: str) -> str:
    """libpq ``options`` for a decoding session: the user's own (from the DSN, else
    ``PGOPTIONS``, which an explicit ``options`` would replace), then DECODING_SETTINGS."""
    given: str | None = None
    if dsn:
        try:
            from psycopg2.extensions import parse_dsn

            given = parse_dsn(dsn).get("options")
        except Exception:  # noqa: BLE001 - a bad DSN fails at connect, with its own error
            given = None
    if given is None:
        given = os.environ.get("PGOPTIONS", "")
    ours = " ".join(f"-c {name}={value}" for name, value in DECODING_SETTINGS)
    return f"{given} {ours}".strip()


def decoding_set_statement() -> str:
    """The same settings for an open session (SET lasts until it closes)."""
    return "; ".join(f"SET {name} = '{value}'" for name, value in DECODING_SETTINGS)


# The signal a stop is pending for, or None: set by whoever handles SIGINT and SIGTERM
# with a flag rather than KeyboardInterrupt (`pgtail.stream.signals.Signals`), so that a
# connect in progress gives up on it (process-wide, as signal handlers are)
stop_requested: Callable[[], int | None] | None = None


def set_stop_check(check: Callable[[], int | None] | None) -> Callable[[], int | None] | None:
    """Set `stop_requested`; returns the one it replaces (to restore)."""
    global stop_requested  # noqa: PLW0603 - process-wide, as the signal handlers are
    previous, stop_requested = stop_requested, check
    return previous


def connect_interruptibly(connect: Callable[[], Any], what: str = "connect") -> Any:
    """``connect()``, which blocks in libpq where no signal handler runs (a host that
    drops packets holds it for minutes), run in a thread while this one waits where a
    signal reaches it: KeyboardInterrupt, or `stop_requested` raising
    `pgtail.errors.Interrupted` within 0.1 s. A connection made after that is closed."""
    outcome: list[tuple[bool, Any]] = []
    lock = threading.Lock()
    done = threading.Event()
    abandoned = False

    def run() -> None:
        try:
            result: tuple[bool, Any] = (True, connect())
        except BaseException as exc:  # handed to the waiting thread
            result = (False, exc)
        with lock:
            if abandoned:
                if result[0]:
                    result[1].close()
                return
            outcome.append(result)
            done.set()

    threading.Thread(target=run, name="pgtail-connect", daemon=True).start()
    try:
        while not done.wait(0.1):
            check = stop_requested
            signum = check() if check is not None else None
            if signum is not None:
                raise Interrupted(signum, what)
    except BaseException:
        with lock:
            abandoned = True
            if outcome and outcome[0][0]:
                outcome[0][1].close()
        raise
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def open_connection(
    dsn: str | None, *, application_name: str | None = APPLICATION_NAME, autocommit: bool = True
) -> PgConnection:
    """A new ordinary connection (the caller closes it); failing to connect raises the
    pgtail error that says why. ``application_name`` None leaves libpq's choice."""
    resolved = resolve_dsn(dsn)
    extra: dict[str, Any] = {"client_encoding": CLIENT_ENCODING}
    if application_name is not None:
        extra["application_name"] = application_name
    try:
        conn = connect_interruptibly(
            lambda: psycopg2.connect(resolved, **extra), "connect to the server"
        )
    except psycopg2.Error as exc:
        raise translate_connect_error(exc, resolved) from None
    conn.autocommit = autocommit
    return conn


@contextmanager
def connect(
    dsn: str | None, *, application_name: str | None = APPLICATION_NAME
) -> Iterator[PgConnection]:
    """An autocommit connection; psycopg2 errors inside the block become pgtail errors."""
    conn = open_connection(dsn, application_name=application_name)
    try:
        yield conn
    except psycopg2.Error as exc:
        raise translate_error(exc) from None
    finally:
        conn.close()


def fetchall(conn: PgConnection, query: sql.Composable | str, params: Any = None) -> list[Any]:
    """Every row of ``query`` ([] for a statement that returns none)."""
    with conn.cursor() as cur:
        cur.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def fetchone(conn: PgConnection, query: sql.Composable | str, params: Any = None) -> Any:
    """The first row of ``query``, or None."""
    rows = fetchall(conn, query, params)
    return rows[0] if rows else None
