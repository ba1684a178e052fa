"""Facts about the server and the session: version, database, role, settings, and the
current WAL position.

`server_info` + `require_streaming` are the stream's preflight: wal_level and the
REPLICATION attribute, with the fix when either is missing.
"""

from __future__ import annotations

import time

from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import fetchall, fetchone
from pgtail.catalog.facts import ServerInfo
from pgtail.errors import ServerCapabilityError
from pgtail.lsn import parse_lsn

# where WAL ends now (on a standby: what it has received)
CURRENT_LSN = (
    "CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END"
)


def server_version_num(conn: PgConnection) -> int:
    """``server_version_num`` of the connected server, e.g. 150004."""
    return int(conn.server_version)


def lsn_or_none(text: str | None) -> int | None:
    """A ``pg_lsn`` as text (or NULL) -> int."""
    return parse_lsn(text) if text else None


def current_database(conn: PgConnection) -> str:
    return str(fetchone(conn, "SELECT current_database()")[0])


def server_info(conn: PgConnection) -> ServerInfo:
    """Version, database, role, wal_level and whether the role may replicate."""
    row = fetchone(
        conn,
        "SELECT current_setting('server_version_num')::int, current_database(), current_user,"
        " current_setting('wal_level'),"
        " (SELECT rolsuper OR rolreplication FROM pg_roles WHERE rolname = current_user)",
    )
    version_num, database, user, wal_level, can_replicate = row
    return ServerInfo(int(version_num), database, user, wal_level, bool(can_replicate))


def require_streaming(info: ServerInfo) -> None:
    """Raise unless this server and role can stream logical replication."""
    if info.wal_level != "logical":
        raise ServerCapabilityError(
            f"wal_level is {info.wal_level!r} on {info.database!r};"
            " logical replication needs 'logical'",
            hint="ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL",
        )
    if not info.can_replicate:
        raise ServerCapabilityError(
            f"role {info.user!r} lacks the REPLICATION attribute",
            hint=f'ALTER ROLE "{info.user}" REPLICATION (as a superuser)',
        )


def wal_position(conn: PgConnection) -> int:
    """WAL written and flushed (replayed, on a standby): logical decoding reads up to here."""
    row = fetchone(
        conn,
        "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
        " ELSE pg_current_wal_flush_lsn() END)::text",
    )
    assert row is not None
    return parse_lsn(row[0])


def wait_flushed(conn: PgConnection, timeout: float = 1.0) -> int:
    """The flushed WAL position once it has reached what was written when called (so
    asynchronously committed transactions count as available), or after ``timeout``.

    At a page boundary the insert position counts the next page's header (24 bytes, 40
    at a segment start), written only with the next record: the flush stops before it.
    """
    row = fetchone(
        conn,
        "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
        " ELSE pg_current_wal_insert_lsn() END)::text, current_setting('wal_block_size')::int",
    )
    assert row is not None
    written = parse_lsn(row[0])
    if written % int(row[1]) in (24, 40):
        written -= written % int(row[1])
    deadline = time.monotonic() + timeout
    while True:
        flushed = wal_position(conn)
        if flushed >= written or time.monotonic() > deadline:
            return flushed
        time.sleep(0.02)


# pg_settings doctor reads (a setting the server does not have is simply absent)
SETTINGS = (
    "wal_level",
    "max_replication_slots",
    "max_wal_senders",
    "max_slot_wal_keep_size",
    "wal_keep_size",
    "max_wal_size",
    "wal_segment_size",
)

_UNIT_BYTES = {
    "B": 1,
    "kB": 1024,
    "8kB": 8192,
    "MB": 1024**2,
    "16MB": 16 * 1024**2,
    "GB": 1024**3,
    "TB": 1024**4,
}


def setting_value(setting: str, unit: str | None) -> str:
    """A pg_settings value in bytes when it is a size (``-1`` stays ``-1``)."""
    if unit and unit in _UNIT_BYTES and setting.lstrip("-").isdigit() and int(setting) >= 0:
        return str(int(setting) * _UNIT_BYTES[unit])
    return setting


def settings(conn: PgConnection, names: tuple[str, ...] = SETTINGS) -> dict[str, str]:
    """The named settings this server has, sizes in bytes."""
    return {
        name: setting_value(setting, unit)
        for name, setting, unit in fetchall(
            conn,
            "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)",
            (list(names),),
        )
    }
