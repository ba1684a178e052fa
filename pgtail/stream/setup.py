"""Before the stream starts: preflight (server, publications, slot, options) on a plain
connection into a `Start`, the facts checked before each reconnect, and
CREATE_REPLICATION_SLOT.

``session.py`` builds its `Session` from a `Start` that preflight has filled in.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from typing import Any

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
from pgtail.feedback import Feedback
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.stream.config import Logger, StreamConfig
from pgtail.stream.policy import StreamPolicy
from pgtail.stream.protocol_options import replication_options
from pgtail.stream.publication_choice import (
    HeldPublication,
    stream_publications,
    warn_unmatched_filters,
)
from pgtail.stream.signals import Signals
from pgtail.stream.snapshot import preflight as snapshot_preflight
from pgtail.stream.waiting import Waiting


class Start:
    """One run before its replication connection: what was asked, the rules (what is
    safe to confirm, where to stop, what to skip), and what preflight finds out
    (``server`` and after it), filled in by `preflight` -- a retried preflight fills
    them in again."""

    def __init__(self, config: StreamConfig, log: Logger, signals: Signals) -> None:
        self.config = config
        self.log = log
        self.signals = signals
        self.dsn = catalog.resolve_dsn(config.dsn)
        self.slot = config.slot or f"pgtail_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.temporary = config.slot is None
        # what is safe to confirm (shared with the writer, under lock), and where to
        # stop, what to skip, how to batch (the reader's alone)
        self.lock = threading.Lock()
        self.feedback = Feedback(status_interval=config.status_interval)
        self.policy = StreamPolicy(end_lsn=config.end_lsn, max_changes=config.max_changes)
        # ---- found out by preflight
        self.server: catalog.ServerInfo | None = None
        self.publications: tuple[str, ...] = ()
        self.held_publication: HeldPublication | None = None  # dropped when the run ends
        self.proto_version = 1
        self.options: dict[str, str] = {}  # START_REPLICATION options

    def close_connection(self) -> None:
        """(No replication connection yet: for `retry.retry_start`.)"""

    def preflight(self) -> None:
        preflight(self)


def preflight(start: Start) -> None:
    conn = catalog.open_connection(start.dsn)
    try:
        server = catalog.server_info(conn)
        catalog.require_streaming(server)
        start.server = server
        start.publications, start.held_publication = stream_publications(
            conn, start.dsn, start.config, server, start.log
        )
        warn_unmatched_filters(conn, start.config, start.publications, start.log)
        if start.config.snapshot:
            # the tables' sizes lock them (ACCESS SHARE): an ALTER TABLE or LOCK TABLE
            # left open elsewhere is named while it blocks
            Waiting(start.dsn, start.log, start.signals).run(
                lambda: snapshot_preflight(conn, start),
                conn,
                "read the published tables",
                blocked_only=True,
            )
        start.proto_version, start.options = replication_options(
            start.config, server, start.publications
        )
        if not start.temporary:
            slot = catalog.slot_info(conn, start.slot)
            # a consumer that just disconnected (a restart of pgtail itself) leaves its
            # walsender exiting for a moment: give it a second before calling it busy
            deadline = time.monotonic() + 1.0
            while slot is not None and slot.active_pid is not None:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
                slot = catalog.slot_info(conn, start.slot)
            if slot is None and not start.config.create_slot:
                raise SlotError(
                    f"replication slot {start.slot!r} does not exist",
                    hint="add --create-slot, or: pgtail slot create " + start.slot,
                )
            if slot is not None:
                catalog.check_slot_usable(slot, server.database, idle=True)
                confirmed = slot.confirmed_flush_lsn
                if confirmed:
                    start.feedback.start_lsn = confirmed
                asked = start.config.start_lsn
                if asked and confirmed and asked < confirmed:
                    # the server silently starts at the slot's position instead
                    start.log(
                        f"pgtail: --start {format_lsn(asked)} is before slot"
                        f" {start.slot!r}'s confirmed position {format_lsn(confirmed)}:"
                        " streaming from there (a slot cannot go back)"
                    )
    finally:
        conn.close()


def check_facts(dsn: str, slot_name: str, publications: tuple[str, ...]) -> None:
    """Before reconnecting: raise the error of a condition that will not heal -- the
    slot dropped or invalidated, a publication dropped, the role's REPLICATION
    attribute revoked, the database or role gone, the password changed -- on a plain
    connection. `ServerUnavailable` when the server cannot be asked right now."""
    conn = catalog.open_connection(dsn)
    try:
        server = catalog.server_info(conn)
        catalog.require_streaming(server)
        slot = catalog.slot_info(conn, slot_name)
        if slot is None:
            raise catalog.slot_dropped(slot_name)
        catalog.check_slot_usable(slot, server.database)
        names = catalog.publication_names(conn)
        for name in publications:
            if name not in names:
                raise PublicationError(
                    f"publication {name!r} was dropped while pgtail was streaming it",
                    hint=publication_dropped_hint(server.major, slot_name),
                )
    except psycopg2.Error as exc:
        if catalog.is_transient(exc):
            raise ServerUnavailable(catalog.describe_disconnect(exc)) from None
        raise catalog.translate_error(exc) from None
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def create_slot(
    cur: Any,
    slot_name: str,
    major: int,
    two_phase: bool,
    *,
    temporary: bool,
    if_missing: bool = False,
    export: bool = False,
    wait: Waiting,
) -> tuple[bool, tuple[str, int] | None]:
    """CREATE_REPLICATION_SLOT; whether it was created, and with ``export`` the exported
    snapshot's name and consistent point (valid until the next command). While it waits
    for running transactions, ``wait`` says so and a signal cancels it (`Stop`)."""
    parts = [sql.SQL("CREATE_REPLICATION_SLOT {}").format(sql.Identifier(slot_name))]
    if temporary:
        parts.append(sql.SQL("TEMPORARY"))
    parts.append(sql.SQL("LOGICAL pgoutput"))
    if major >= 15:
        opts = [sql.SQL("SNAPSHOT 'export'" if export else "SNAPSHOT 'nothing'")]
        if two_phase:
            opts.append(sql.SQL("TWO_PHASE true"))
        parts.append(sql.SQL("(") + sql.SQL(", ").join(opts) + sql.SQL(")"))
    else:
        if two_phase:
            raise ServerCapabilityError(
                f"--two-phase needs PostgreSQL 15 or later (server is {major})"
            )
        parts.append(sql.SQL("EXPORT_SNAPSHOT" if export else "NOEXPORT_SNAPSHOT"))
    try:
        wait.run(
            lambda: cur.execute(sql.SQL(" ").join(parts)),
            cur.connection,
            f"create replication slot {slot_name!r}",
        )
    except psycopg2.errors.DuplicateObject:
        if if_missing:
            return False, None
        raise SlotError(f"replication slot {slot_name!r} already exists") from None
    except psycopg2.Error as exc:
        raise catalog.translate_create_slot_error(exc, slot_name) from None
    if export:
        # slot_name, consistent_point, snapshot_name, output_plugin
        row = cur.fetchone()
        return True, (str(row[2]), parse_lsn(str(row[1])))
    return True, None


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
