"""The checks and statements a stream runs on an ordinary connection before it starts.

The server's version and whether it can replicate at all, the slot's row, choosing or
creating a publication (and dropping one created for the run). Kept apart from the
replication session so it can be replaced by the shared catalog in one place.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.connection import redact, translate_connect_error
from pgtail.errors import (
    ConfigurationError,
    DataLossError,
    PublicationError,
    ServerCapabilityError,
    SlotError,
)
from pgtail.stream.config import Logger, StreamConfig

PLUGIN = "pgoutput"


@dataclass(frozen=True)
class _Server:
    major: int
    database: str
    user: str


@dataclass(frozen=True)
class _SlotRow:
    name: str
    plugin: str | None
    slot_type: str
    database: str | None
    temporary: bool
    active_pid: int | None
    confirmed_flush: int | None
    wal_status: str | None


def _lsn_or_none(text: str | None) -> int | None:
    if text is None:
        return None
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def _plain_connect(dsn: str) -> PgConnection:
    try:
        conn = psycopg2.connect(dsn, application_name="pgtail")
    except psycopg2.Error as exc:
        raise translate_connect_error(exc, dsn) from None
    conn.autocommit = True
    return conn


def _query(conn: PgConnection, query: Any, params: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def _server(conn: PgConnection) -> _Server:
    rows = _query(
        conn,
        "SELECT current_setting('server_version_num')::int, current_database(), current_user,"
        " current_setting('wal_level'),"
        " (SELECT rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user)",
    )
    version_num, database, user, wal_level, can_replicate = rows[0]
    if wal_level != "logical":
        raise ServerCapabilityError(
            f"wal_level is {wal_level!r} on {database!r}; logical replication needs 'logical'",
            hint="ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL",
        )
    if not can_replicate:
        raise ServerCapabilityError(
            f"role {user!r} lacks the REPLICATION attribute",
            hint=f'ALTER ROLE "{user}" REPLICATION (as a superuser)',
        )
    return _Server(major=int(version_num) // 10000, database=database, user=user)


def _slot_row(conn: PgConnection, name: str) -> _SlotRow | None:
    rows = _query(
        conn,
        "SELECT slot_name, plugin, slot_type, database, temporary, active_pid,"
        " confirmed_flush_lsn::text, wal_status FROM pg_replication_slots WHERE slot_name = %s",
        (name,),
    )
    if not rows:
        return None
    r = rows[0]
    return _SlotRow(r[0], r[1], r[2], r[3], bool(r[4]), r[5], _lsn_or_none(r[6]), r[7])


def _check_slot(slot: _SlotRow, server: _Server) -> None:
    if slot.slot_type != "logical":
        raise SlotError(
            f"replication slot {slot.name!r} is a physical slot",
            hint="stream a logical slot created with the pgoutput plugin",
        )
    if slot.plugin != PLUGIN:
        raise SlotError(
            f"replication slot {slot.name!r} uses plugin {slot.plugin!r}, not pgoutput",
            hint="create a pgoutput slot: pgtail stream --slot NEW_NAME --create-slot",
        )
    if slot.database != server.database:
        raise SlotError(
            f"replication slot {slot.name!r} belongs to database {slot.database!r},"
            f" not {server.database!r}",
            hint=f"connect to database {slot.database!r}",
        )
    if slot.active_pid is not None:
        raise SlotError(
            f"replication slot {slot.name!r} is active for PID {slot.active_pid}",
            hint=f"stop the other consumer, or SELECT pg_terminate_backend({slot.active_pid})",
        )
    if slot.wal_status == "lost":
        raise DataLossError(
            f"replication slot {slot.name!r} has lost WAL it needs (wal_status = lost)",
            hint="drop and re-create the slot; changes since its position are gone",
        )


def _publications(conn: PgConnection) -> list[str]:
    return [r[0] for r in _query(conn, "SELECT pubname FROM pg_publication ORDER BY pubname")]


def _choose_publications(
    conn: PgConnection, config: StreamConfig, server: _Server, log: Logger
) -> tuple[str, ...]:
    existing = _publications(conn)
    if config.publications:
        missing = [p for p in config.publications if p not in existing]
        if missing:
            raise PublicationError(
                f"publication {missing[0]!r} does not exist in database {server.database!r}",
                hint=f'CREATE PUBLICATION "{missing[0]}" FOR TABLE ...;'
                " or pgtail stream --create-publication --table ...",
            )
        return config.publications
    if len(existing) == 1:
        log(f"pgtail: using publication {existing[0]!r}, the only one in {server.database!r}")
        return (existing[0],)
    if not existing:
        raise PublicationError(
            f"database {server.database!r} has no publication",
            hint="CREATE PUBLICATION pgtail FOR ALL TABLES; or pass --create-publication"
            " (with --table/--schema) to create one for this run",
        )
    raise PublicationError(
        f"database {server.database!r} has {len(existing)} publications"
        f" ({', '.join(existing)}); choose with --publication",
        hint="--publication NAME, repeatable, or PGTAIL_PUBLICATION",
    )


def _create_publication(conn: PgConnection, config: StreamConfig, server: _Server) -> str:
    name = config.publications[0] if config.publications else f"pgtail_{uuid.uuid4().hex[:10]}"
    if config.publication_tables or config.publication_schemas:
        parts: list[sql.Composable] = []
        if config.publication_tables:
            idents = []
            for t in config.publication_tables:
                if any(c in t for c in "*?["):
                    raise ConfigurationError(
                        f"--create-publication needs table names, not patterns: {t!r}"
                    )
                schema, dot, table = t.rpartition(".")
                idents.append(sql.Identifier(schema, table) if dot else sql.Identifier(table))
            parts.append(sql.SQL("TABLE ") + sql.SQL(", ").join(idents))
        if config.publication_schemas:
            if server.major < 15:
                raise ServerCapabilityError(
                    f"publishing a schema needs PostgreSQL 15 or later (server is {server.major})"
                )
            parts.append(
                sql.SQL("TABLES IN SCHEMA ")
                + sql.SQL(", ").join(sql.Identifier(s) for s in config.publication_schemas)
            )
        target = sql.SQL(", ").join(parts)
    else:
        target = sql.SQL("ALL TABLES")
    statement = sql.SQL("CREATE PUBLICATION {} FOR ").format(sql.Identifier(name)) + target
    try:
        _query(conn, statement)
    except psycopg2.Error as exc:
        raise PublicationError(
            f"cannot create publication {name!r}: {_primary(exc)}",
            hint="FOR ALL TABLES needs a superuser; name tables with --table, or schemas with"
            " --schema",
        ) from None
    return name


def _drop_publication(dsn: str, name: str, log: Logger) -> None:
    try:
        conn = _plain_connect(dsn)
        try:
            _query(conn, sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(name)))
        finally:
            conn.close()
    except Exception as exc:  # best effort on the way out
        log(f"pgtail: warning: could not drop publication {name!r}: {redact(str(exc))}")


def _primary(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    if primary:
        return str(primary)
    text = redact(str(exc).strip())
    return text.splitlines()[0] if text else type(exc).__name__
