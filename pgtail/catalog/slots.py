"""Replication slots on an ordinary connection: list, create, drop, advance, and the
one rule that says whether a slot can be streamed (`check_slot_usable`).

Which pg_replication_slots columns a server has is decided once, by version, in
`slot_columns`; a column the server lacks comes back as None.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import connect, fetchall, fetchone
from pgtail.catalog.errors import check_slot_name, slot_busy_error, slot_missing_error
from pgtail.catalog.facts import PLUGIN, SlotInfo, SlotListing
from pgtail.catalog.server import (
    CURRENT_LSN,
    current_database,
    lsn_or_none,
    server_version_num,
)
from pgtail.catalog.waiting import wait_for_server
from pgtail.errors import DataLossError, ServerCapabilityError, SlotError
from pgtail.lsn import format_lsn, parse_lsn

# optional pg_replication_slots columns -> first server version that has them; SlotInfo
# reports these only where the server has them (`SlotListing.optional_columns`)
SLOT_OPTIONAL_COLUMNS: dict[str, int] = {
    "conflicting": 160000,
    "inactive_since": 170000,
    "invalidation_reason": 170000,
    "failover": 170000,
    "synced": 170000,
}

# columns every SlotInfo has, as None before the version that added them
_SLOT_VERSIONED: dict[str, int] = {
    "two_phase": 140000,
    "wal_status": 130000,
    "safe_wal_size": 130000,
}

# every supported server has these (read after the versioned ones)
_XMIN_COLUMNS = ("xmin::text", "catalog_xmin::text", "age(xmin)", "age(catalog_xmin)")


def slot_columns(version: int) -> tuple[list[str], tuple[str, ...]]:
    """The select list for pg_replication_slots on this server version, and the optional
    columns it includes. A column the server lacks is selected as NULL."""

    def have(column: str) -> str:
        return column if version >= _SLOT_VERSIONED[column] else f"NULL AS {column}"

    optional = tuple(c for c, v in SLOT_OPTIONAL_COLUMNS.items() if version >= v)
    columns = [
        "slot_name",
        "plugin",
        "slot_type",
        "database",
        "temporary",
        "active",
        "active_pid",
        have("two_phase"),
        "restart_lsn::text",
        "confirmed_flush_lsn::text",
        f"({CURRENT_LSN})::text",
        have("wal_status"),
        have("safe_wal_size"),
        *optional,
    ]
    return columns, optional


def slot_listing(conn: PgConnection, name: str | None = None) -> SlotListing:
    """Every slot (or the one named), with the columns this server has."""
    version = server_version_num(conn)
    columns, optional = slot_columns(version)
    query = "SELECT " + ", ".join([*columns, *_XMIN_COLUMNS]) + " FROM pg_replication_slots"
    params: tuple[Any, ...] = ()
    if name is not None:
        query += " WHERE slot_name = %s"
        params = (name,)
    query += " ORDER BY slot_name"
    slots = []
    for row in fetchall(conn, query, params):
        extra = dict(zip(optional, row[13:-4], strict=True))
        xmin, catalog_xmin, xmin_age, catalog_xmin_age = row[-4:]
        slots.append(
            SlotInfo(
                name=row[0],
                plugin=row[1],
                slot_type=row[2],
                database=row[3],
                temporary=bool(row[4]),
                active=bool(row[5]),
                active_pid=row[6],
                two_phase=bool(row[7]) if row[7] is not None else None,
                restart_lsn=lsn_or_none(row[8]),
                confirmed_flush_lsn=lsn_or_none(row[9]),
                current_lsn=lsn_or_none(row[10]) or 0,
                wal_status=row[11],
                safe_wal_size=row[12],
                xmin=int(xmin) if xmin is not None else None,
                catalog_xmin=int(catalog_xmin) if catalog_xmin is not None else None,
                xmin_age=xmin_age,
                catalog_xmin_age=catalog_xmin_age,
                **extra,
            )
        )
    return SlotListing(version, optional, tuple(slots))


def slot_info(conn: PgConnection, name: str) -> SlotInfo | None:
    """One slot, or None when there is none of that name."""
    found = slot_listing(conn, name).slots
    return found[0] if found else None


def check_slot_usable(slot: SlotInfo, database: str, *, idle: bool = False) -> None:
    """Raise unless ``slot`` can be decoded with pgoutput from ``database``.

    The one rule for every reader (the stream, peek, the Spark source, create
    --if-not-exists): a logical slot, of the pgoutput plugin, of this database, whose
    WAL is not lost and that has a confirmed position; with ``idle``, also not in use
    by another process (the stream takes the slot for itself; SQL readers wait).
    """
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
    if slot.database != database:
        raise SlotError(
            f"replication slot {slot.name!r} belongs to database {slot.database!r},"
            f" not {database!r}",
            hint=f"connect to database {slot.database!r}",
        )
    if idle and slot.active_pid is not None:
        raise slot_busy_error(slot.name, slot.active_pid)
    if slot.wal_status == "lost":
        raise DataLossError(
            f"replication slot {slot.name!r} has lost WAL it needs (wal_status = lost)",
            hint="drop and re-create the slot; changes since its position are gone",
        )
    if slot.confirmed_flush_lsn is None:
        raise SlotError(
            f"replication slot {slot.name!r} has no confirmed position (invalidated?)",
            hint="drop and re-create the slot",
        )


def require_slot(
    conn: PgConnection, name: str, *, idle: bool = False, missing_hint: str | None = None
) -> SlotInfo:
    """The slot, checked by `check_slot_usable`; `SlotError` when it does not exist."""
    slot = slot_info(conn, name)
    if slot is None:
        raise slot_missing_error(name, missing_hint)
    check_slot_usable(slot, current_database(conn), idle=idle)
    return slot


def _create_slot_call(
    version: int, name: str, temporary: bool, two_phase: bool
) -> tuple[str, tuple[Any, ...]]:
    """pg_create_logical_replication_slot with the arguments this server takes
    (``twophase`` from PostgreSQL 14)."""
    if version >= 140000:
        return (
            "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s, %s, %s)",
            (name, PLUGIN, temporary, two_phase),
        )
    if two_phase:
        raise ServerCapabilityError(
            f"two-phase slots need PostgreSQL 14 or later (server is {version // 10000})"
        )
    return (
        "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s, %s)",
        (name, PLUGIN, temporary),
    )


def list_slots(dsn: str | None) -> SlotListing:
    """Every replication slot on the server, with lag and retained WAL."""
    with connect(dsn) as conn:
        return slot_listing(conn)


def get_slot(dsn: str | None, name: str) -> SlotListing:
    """One slot (as a listing of one, so the caller knows the server's columns)."""
    with connect(dsn) as conn:
        listing = slot_listing(conn, name)
    if not listing.slots:
        raise slot_missing_error(name)
    return listing


@dataclass(frozen=True, slots=True)
class SlotCreated:
    name: str
    created: bool  # False: it already existed (--if-not-exists)
    lsn: int | None  # consistent point of a new slot
    temporary: bool


def create_slot(
    dsn: str | None,
    name: str,
    *,
    temporary: bool = False,
    two_phase: bool = False,
    if_not_exists: bool = False,
    log: Callable[[str], None] | None = None,
) -> SlotCreated:
    """Create a pgoutput logical slot in the connected database. While the creation
    waits for running transactions to end, ``log`` gets a line every few seconds naming
    them; SIGINT or SIGTERM cancels it (`pgtail.errors.Interrupted`, no slot made)."""
    check_slot_name(name)
    with connect(dsn) as conn:
        existing = slot_listing(conn, name).slots
        if existing:
            slot = existing[0]
            if not if_not_exists:
                raise SlotError(
                    f"replication slot {name!r} already exists",
                    hint="use --if-not-exists, or pick another name",
                )
            check_slot_usable(slot, current_database(conn))
            return SlotCreated(name, False, slot.confirmed_flush_lsn, slot.temporary)
        try:
            query, params = _create_slot_call(server_version_num(conn), name, temporary, two_phase)
            row = wait_for_server(
                lambda: fetchone(conn, query, params),
                conn=conn,
                dsn=dsn,
                what=f"create replication slot {name!r}",
                log=log or (lambda line: None),
            )
        except psycopg2.errors.DuplicateObject:
            if not if_not_exists:
                raise
            return SlotCreated(name, False, None, temporary)
        return SlotCreated(name, True, lsn_or_none(row[0]), temporary)


@dataclass(frozen=True, slots=True)
class SlotDropped:
    name: str
    dropped: bool  # False: it did not exist (--if-exists)
    terminated_pid: int | None = None  # --force: the walsender that was terminated


def drop_slot(
    dsn: str | None,
    name: str,
    *,
    if_exists: bool = False,
    force: bool = False,
    wait_seconds: float = 10.0,
) -> SlotDropped:
    """Drop a slot; an active one only with ``force`` (terminates its walsender first)."""
    with connect(dsn) as conn:
        found = slot_listing(conn, name).slots
        if not found:
            if if_exists:
                return SlotDropped(name, False)
            raise slot_missing_error(name, "use --if-exists to ignore a missing slot")
        slot = found[0]
        terminated: int | None = None
        if slot.active:
            if not force:
                raise SlotError(
                    f"replication slot {name!r} is active (walsender PID {slot.active_pid})",
                    hint="stop its consumer first, or use --force to terminate the walsender",
                )
            terminated = slot.active_pid
            fetchall(conn, "SELECT pg_terminate_backend(%s)", (terminated,))
            deadline = time.monotonic() + wait_seconds
            while True:
                now = slot_listing(conn, name).slots
                if not now:  # a temporary slot goes away with its session
                    return SlotDropped(name, True, terminated)
                if not now[0].active:
                    break
                if time.monotonic() > deadline:
                    raise SlotError(
                        f"replication slot {name!r} is still active after terminating "
                        f"PID {terminated} (PID now {now[0].active_pid})",
                        hint="its consumer reconnects; stop it, then drop the slot",
                    )
                time.sleep(0.1)
        try:
            fetchall(conn, "SELECT pg_drop_replication_slot(%s)", (name,))
        except psycopg2.errors.UndefinedObject:
            if not if_exists and terminated is None:
                raise
        return SlotDropped(name, True, terminated)


@dataclass(frozen=True, slots=True)
class SlotAdvanced:
    name: str
    previous_lsn: int | None
    lsn: int  # where the slot is now
    requested_lsn: int


def advance_slot(dsn: str | None, name: str, target: str | int) -> SlotAdvanced:
    """Move a slot's confirmed position forward (never backwards)."""
    target_lsn = parse_lsn(target) if isinstance(target, str) else target
    with connect(dsn) as conn:
        found = slot_listing(conn, name).slots
        if not found:
            raise slot_missing_error(name)
        slot = found[0]
        current = slot.confirmed_flush_lsn if slot.slot_type == "logical" else slot.restart_lsn
        if current is not None and target_lsn < current:
            raise SlotError(
                f"cannot move replication slot {name!r} backwards: it is at "
                f"{format_lsn(current)}, {format_lsn(target_lsn)} is behind it",
                hint="a slot only moves forward; to re-read older changes create a new slot "
                "from a backup",
            )
        if slot.active:
            raise SlotError(
                f"replication slot {name!r} is active (walsender PID {slot.active_pid})",
                hint="stop its consumer before advancing it",
            )
        row = fetchone(
            conn,
            "SELECT end_lsn::text FROM pg_replication_slot_advance(%s, %s::pg_lsn)",
            (name, format_lsn(target_lsn)),
        )
        return SlotAdvanced(name, current, lsn_or_none(row[0]) or 0, target_lsn)
