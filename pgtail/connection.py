"""Connection settings shared by `stream` and `catalog`: DSN resolution, password
redaction, and the one place where psycopg2 connection errors become pgtail errors.

It opens no connection itself; `stream.py` and `catalog.py` do.
"""

from __future__ import annotations

import os
import re

from pgtail.errors import ConnectionFailed, PgtailError, ServerCapabilityError

_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_PASSWORD_URI = re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)", re.IGNORECASE)


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


def redact(text: str) -> str:
    """Hide passwords in a DSN, URI or error message."""
    text = _PASSWORD_KV.sub(r"\1********", text)
    return _PASSWORD_URI.sub(r"\1********\3", text)


def describe_target(dsn: str) -> str:
    """A short, password-free description of where we connect, for messages."""
    try:
        from psycopg2.extensions import parse_dsn

        params = parse_dsn(dsn) if dsn else {}
    except Exception:
        return redact(dsn) or "(libpq defaults)"
    host = params.get("host") or os.environ.get("PGHOST") or "local socket"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or "(default database)"
    return f"{host}:{port}/{dbname}"


def translate_connect_error(exc: Exception, dsn: str) -> PgtailError:
    """Map a psycopg2 error raised while connecting to a pgtail error with a fix."""
    raw = redact(str(exc).strip())
    first = raw.splitlines()[0] if raw else type(exc).__name__
    target = describe_target(dsn)
    lower = raw.lower()
    if "password authentication failed" in lower or "no password supplied" in lower:
        return ConnectionFailed(
            f"authentication failed for {target}: {first}",
            hint="check the user and password (PGPASSWORD, ~/.pgpass or the DSN)",
        )
    if "does not exist" in lower and "database" in lower:
        return ConnectionFailed(
            f"{first} on {target}", hint="check dbname in the DSN or PGDATABASE"
        )
    refused_replication = "no pg_hba.conf entry for replication connection" in lower
    if (
        "must be superuser or replication role" in lower
        or "permission denied to start wal sender" in lower
        or refused_replication
    ):
        return ServerCapabilityError(
            f"the role may not open a replication connection: {first}",
            hint="ALTER ROLE <role> REPLICATION, and allow 'replication' in pg_hba.conf",
        )
    if "no pg_hba.conf entry" in lower:
        return ConnectionFailed(
            f"the server refused the connection: {first}",
            hint="add a pg_hba.conf entry for this host/user/database",
        )
    if (
        "could not connect" in lower
        or "connection refused" in lower
        or "timeout" in lower
        or ("could not translate host name" in lower)
    ):
        return ConnectionFailed(
            f"cannot reach PostgreSQL at {target}: {first}",
            hint="is the server running and accepting TCP connections on that host and port?",
        )
    if "invalid dsn" in lower or 'missing "="' in lower or "invalid connection option" in lower:
        return ConnectionFailed(
            f"invalid connection string: {first}", hint="use key=value pairs or a postgresql:// URI"
        )
    return ConnectionFailed(f"cannot connect to {target}: {first}")
