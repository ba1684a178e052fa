"""Before the stream starts: preflight (server, publications, slot, options) on a plain
connection, the facts checked before each reconnect, and CREATE_REPLICATION_SLOT.

Functions of the running `Session` (``session.py``), which calls them.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql

from pgtail import catalog
from pgtail.errors import (
    PublicationError,
    ServerCapabilityError,
    ServerUnavailable,
    SlotError,
)
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.stream.options import replication_options
from pgtail.stream.publications import stream_publications, warn_unmatched_filters
from pgtail.stream.snapshot import preflight as snapshot_preflight

if TYPE_CHECKING:
    from pgtail.stream.host import SetupHost


def preflight(session: SetupHost) -> None:
    conn = catalog.open_connection(session.dsn)
    try:
        server = catalog.server_info(conn)
        catalog.require_streaming(server)
        session.server = server
        session.publications, session.held_publication = stream_publications(
            conn, session.dsn, session.config, server, session.log
        )
        warn_unmatched_filters(conn, session.config, session.publications, session.log)
        if session.config.snapshot:
            snapshot_preflight(conn, session)
        session.proto_version, session.options = replication_options(
            session.config, server, session.publications
        )
        if not session.temporary:
            slot = catalog.slot_info(conn, session.slot)
            # a consumer that just disconnected (a restart of pgtail itself) leaves its
            # walsender exiting for a moment: give it a second before calling it busy
            deadline = time.monotonic() + 1.0
            while slot is not None and slot.active_pid is not None:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
                slot = catalog.slot_info(conn, session.slot)
            if slot is None and not session.config.create_slot:
                raise SlotError(
                    f"replication slot {session.slot!r} does not exist",
                    hint="add --create-slot, or: pgtail slot create " + session.slot,
                )
            if slot is not None:
                catalog.check_slot_usable(slot, server.database, idle=True)
                confirmed = slot.confirmed_flush_lsn
                if confirmed:
                    session.feedback.start_lsn = confirmed
                start = session.config.start_lsn
                if start and confirmed and start < confirmed:
                    # the server silently starts at the slot's position instead
                    session.log(
                        f"pgtail: --start {format_lsn(start)} is before slot"
                        f" {session.slot!r}'s confirmed position {format_lsn(confirmed)}:"
                        " streaming from there (a slot cannot go back)"
                    )
    finally:
        conn.close()


def check_facts(session: SetupHost) -> None:
    """Before reconnecting: raise the error of a condition that will not heal -- the
    slot dropped or invalidated, a publication dropped, the role's REPLICATION
    attribute revoked, the database or role gone, the password changed -- on a plain
    connection. `ServerUnavailable` when the server cannot be asked right now."""
    conn = catalog.open_connection(session.dsn)
    try:
        server = catalog.server_info(conn)
        catalog.require_streaming(server)
        slot = catalog.slot_info(conn, session.slot)
        if slot is None:
            raise catalog.slot_dropped(session.slot)
        catalog.check_slot_usable(slot, server.database)
        names = catalog.publication_names(conn)
        for name in session.publications:
            if name not in names:
                raise PublicationError(
                    f"publication {name!r} was dropped while pgtail was streaming it",
                    hint=publication_dropped_hint(server.major, session.slot),
                )
    except psycopg2.Error as exc:
        if catalog.is_transient(exc):
            raise ServerUnavailable(catalog.describe_disconnect(exc)) from None
        raise catalog.translate_error(exc) from None
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def create_slot(
    session: SetupHost, cur: Any, *, temporary: bool, if_missing: bool = False, export: bool = False
) -> bool:
    """CREATE_REPLICATION_SLOT; with ``export``, keeps the exported snapshot's name
    and consistent point in ``session.exported`` (valid until the next command)."""
    assert session.server is not None
    major = session.server.major
    parts = [sql.SQL("CREATE_REPLICATION_SLOT {}").format(sql.Identifier(session.slot))]
    if temporary:
        parts.append(sql.SQL("TEMPORARY"))
    parts.append(sql.SQL("LOGICAL pgoutput"))
    if major >= 15:
        opts = [sql.SQL("SNAPSHOT 'export'" if export else "SNAPSHOT 'nothing'")]
        if session.config.two_phase:
            opts.append(sql.SQL("TWO_PHASE true"))
        parts.append(sql.SQL("(") + sql.SQL(", ").join(opts) + sql.SQL(")"))
    else:
        if session.config.two_phase:
            raise ServerCapabilityError(
                f"--two-phase needs PostgreSQL 15 or later (server is {major})"
            )
        parts.append(sql.SQL("EXPORT_SNAPSHOT" if export else "NOEXPORT_SNAPSHOT"))
    try:
        cur.execute(sql.SQL(" ").join(parts))
    except psycopg2.errors.DuplicateObject:
        if if_missing:
            return False
        raise SlotError(f"replication slot {session.slot!r} already exists") from None
    except psycopg2.Error as exc:
        raise catalog.translate_create_slot_error(exc, session.slot) from None
    if export:
        # slot_name, consistent_point, snapshot_name, output_plugin
        row = cur.fetchone()
        session.exported = (str(row[2]), parse_lsn(str(row[1])))
    return True


def publication_dropped_hint(major: int, slot: str) -> str:
    if major >= 18:  # pgoutput skips a missing publication: made again, it is used again
        return "create it again and rerun, or stream another one (--publication)"
    # before 18 the slot decodes each change with the catalog as it was then, where a
    # publication made again does not exist yet: it cannot get past the drop
    return (
        "stream one that existed before the drop (--publication); creating it again is"
        " not enough on PostgreSQL 17 and older: then also move the slot past the"
        f" re-creation (pgtail slot advance {slot} LSN, e.g. pg_current_wal_lsn();"
        " the changes in between are lost)"
    )
