"""Opening ordinary (non-replication) connections: which DSN, which session settings.

The DSN is the one given, else ``DATABASE_URL``, else libpq's ``PG*`` environment.
Every connection is autocommit and names itself (``application_name``); a failure to
connect becomes a pgtail error here (`pgtail.catalog.errors`). The replication
connection is opened by `pgtail.stream`, with `decoding_options` from here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.errors import translate_connect_error, translate_error

APPLICATION_NAME = "pgtail"


def resolve_dsn(dsn: str | None) -> str:
    """The DSN to use: the given one, else ``DATABASE_URL``, else '' (libpq's PG* env)."""
    if dsn:
        return dsn
    return os.environ.get("DATABASE_URL", "")


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


def open_connection(
    dsn: str | None, *, application_name: str | None = APPLICATION_NAME, autocommit: bool = True
) -> PgConnection:
    """A new ordinary connection (the caller closes it); failing to connect raises the
    pgtail error that says why. ``application_name`` None leaves libpq's choice."""
    resolved = resolve_dsn(dsn)
    extra: dict[str, Any] = {}
    if application_name is not None:
        extra["application_name"] = application_name
    try:
        conn = psycopg2.connect(resolved, **extra)
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
