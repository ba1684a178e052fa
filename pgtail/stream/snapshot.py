"""``pgtail stream --snapshot``: every existing row of the published tables, then every
change, with no gap and no duplicate.

A slot this run creates exports a snapshot (``CREATE_REPLICATION_SLOT ... (SNAPSHOT
'export')``, ``EXPORT_SNAPSHOT`` before PostgreSQL 15) consistent with the point its
changes start at. For a slot that exists, a temporary slot on a second replication
connection exports one at its own consistent point X, and the stream then drops the
slot's changes to the copied tables that committed before X (`SkipCopied`): they are in
the copy; later ones are not. Either way `SnapshotCopy` imports the snapshot on an
ordinary connection (`pgtail.catalog.SnapshotReader`) before START_REPLICATION -- the
export lives only until its replication connection's next command, the imported
snapshot as long as the reading transaction -- and `SnapshotCopy.run`, once streaming
has started and before the first message is read, copies each table through the
converters and renderer streamed rows take, in bounded batches (output blocked: the
copy waits, and the walsender is kept alive). The slot is confirmed past nothing before
every table is written: the snapshot's batches confirm nothing, and no change is read
before the copy ends. A run stopped during the copy (Ctrl-C, an error) drops a slot it
created; after a kill -9 the slot stays, and the next ``--snapshot`` run copies again
as for a slot that exists.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import os
import re
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import psycopg2
import psycopg2.extras
from psycopg2 import sql

from pgtail import catalog
from pgtail.changes import (
    Change,
    EncodedRows,
    Event,
    SnapshotBegin,
    SnapshotEnd,
    Table,
    Truncate,
    unknown_type_oids,
)
from pgtail.changes.copy_rows import TableRows
from pgtail.errors import ConfigurationError, ServerCapabilityError, ServerUnavailable
from pgtail.filters import REDACTED, EventFilter
from pgtail.lsn import parse_lsn
from pgtail.render import row_encoder
from pgtail.stream.connection import open_replication
from pgtail.stream.waiting import Waiting
from pgtail.stream.writer import Batch
from pgtail.values import UserType

if TYPE_CHECKING:
    from psycopg2.extensions import connection as PgConnection

    from pgtail.stream.config import StreamConfig


class Planned(Protocol):
    """What the snapshot's preflight needs of the run (`pgtail.stream.setup.Start`)."""

    config: StreamConfig
    publications: tuple[str, ...]

    def log(self, message: str) -> None: ...


class SnapshotContext(Planned, Protocol):
    """What the snapshot needs of the stream's session (`pgtail.stream.session`)."""

    dsn: str

    @property
    def server(self) -> catalog.ServerInfo | None: ...

    def lookup_types(self, type_oids: Sequence[int]) -> dict[int, UserType]: ...


def check_config(config: StreamConfig) -> None:
    """The options --snapshot cannot go with: one clear line each."""
    if not config.snapshot:
        return
    if config.start_lsn is not None:
        raise ConfigurationError(
            "--snapshot cannot start at --start: the rows are consistent with the point the"
            " slot's changes start at, not with another one",
            hint="drop --start (the stream then starts where the snapshot is consistent)",
        )
    if config.format == "raw":
        raise ConfigurationError(
            "--snapshot has no --format raw (a trace of replication messages; the rows are"
            " not replication messages)",
            hint="use --format json, sql or table",
        )


def selector(config: StreamConfig) -> Callable[[str, str], bool]:
    """(schema, table) -> whether this run copies it: ``--snapshot-table`` globs (none:
    every table) among the tables ``--table``/``--exclude`` keep."""
    patterns = [p if "." in p else "*." + p for p in config.snapshot_tables if p.strip()]
    regex = (
        re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)) if patterns else None
    )
    flt = config.filter

    def selected(schema: str, name: str) -> bool:
        if not flt.table_selected(Table(0, schema, name, "default", ())):
            return False
        return regex is None or regex.fullmatch(f"{schema}.{name}") is not None

    return selected


def preflight(conn: PgConnection, session: Planned) -> None:
    """Before any slot is made: what would be copied, and may it be read?"""
    config = session.config
    tables = catalog.snapshot_tables(conn, session.publications, selector(config))
    if not tables and config.snapshot_tables:
        session.log(
            "pgtail: warning: --snapshot-table "
            + ", ".join(config.snapshot_tables)
            + " matches no published table: nothing to copy"
        )


def export_from_temporary_slot(session: SnapshotContext) -> tuple[Any, str, int]:
    """For a slot that exists: a temporary slot on a second replication connection,
    created only for its exported snapshot. Returns (that connection, snapshot name,
    consistent point); closing the connection drops the slot, once the snapshot is
    imported."""
    assert session.server is not None
    name = f"pgtail_snapshot_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        conn = open_replication(session.dsn, f"{session.config.application_name} snapshot")
    except ServerUnavailable as exc:
        if "max_wal_senders" not in exc.message:
            raise
        # the stream's own connection holds one: waiting for another would not end
        raise ServerCapabilityError(
            "--snapshot of a slot that exists needs a second replication connection for a"
            " moment (a temporary slot exports the snapshot): all max_wal_senders are in use",
            hint="raise max_wal_senders (a server restart) or stop another replication client,"
            " or snapshot into a new slot (--slot NEW --create-slot)",
        ) from None
    export = "(SNAPSHOT 'export')" if session.server.major >= 15 else "EXPORT_SNAPSHOT"
    query = sql.SQL("CREATE_REPLICATION_SLOT {} TEMPORARY LOGICAL pgoutput {}").format(
        sql.Identifier(name), sql.SQL(export)
    )
    # a stream's signals stop it (Stop); elsewhere (spark run) SIGINT/SIGTERM cancel the
    # wait and raise Interrupted
    wait = Waiting(session.dsn, session.log, getattr(session, "signals", None))
    try:
        cur = conn.cursor()
        wait.run(lambda: cur.execute(query), conn, "create the snapshot's temporary slot")
        row = cur.fetchone()
    except psycopg2.Error as exc:
        conn.close()
        raise catalog.translate_create_slot_error(exc, name) from None
    except BaseException:
        conn.close()  # a temporary slot goes with its connection
        raise
    return conn, str(row[2]), parse_lsn(str(row[1]))


class _Stopped(Exception):
    """A stop asked for during a table's copy."""


class SkipCopied:
    """The event filter of a stream whose slot existed before its snapshot: changes to
    a copied table that committed before the snapshot's consistent point are in the
    copy, so they are dropped (still confirmed, as filtered changes are); the rest goes
    through the user's filter."""

    def __init__(self, tables: set[tuple[str, str]], lsn: int, inner: EventFilter | None):
        self.tables = tables
        self.lsn = lsn
        self.inner = inner

    def apply(self, event: Event) -> Event | None:
        if isinstance(event, Change | EncodedRows):
            table = event.table
            if event.tx.commit_lsn < self.lsn and (table.schema, table.name) in self.tables:
                return None
        elif isinstance(event, Truncate) and event.tx.commit_lsn < self.lsn:
            kept = tuple(t for t in event.tables if (t.schema, t.name) not in self.tables)
            if not kept:
                return None
            if len(kept) != len(event.tables):
                event = dataclasses.replace(event, tables=kept)
        return self.inner.apply(event) if self.inner is not None else event


class SnapshotCopy:
    """The snapshot of one run: imported at `begin`, copied by `run`."""

    def __init__(
        self, session: SnapshotContext, snapshot_name: str, lsn: int, *, existing: bool = False
    ) -> None:
        self.session = session
        self.lsn = lsn
        self.existing = existing  # the slot's changes began before the snapshot
        self.done = False
        config = session.config
        self.reader = catalog.SnapshotReader(
            session.dsn, snapshot_name, f"{config.application_name} snapshot"
        )
        # reading the tables' sizes and locking them (`SnapshotReader.hold`) wait for a
        # lock another session holds on one: here, aloud, and never in a COPY
        wait = Waiting(session.dsn, session.log, getattr(session, "signals", None))
        reader = self.reader

        def tables() -> list[catalog.SnapshotTable]:
            found = reader.tables(session.publications, selector(config))
            reader.hold(found)
            return found

        try:
            self.tables = wait.run(
                tables, reader.conn, "read the tables to copy", blocked_only=True
            )
        except BaseException:
            self.reader.close()
            raise

    @classmethod
    def of_existing_slot(cls, session: SnapshotContext) -> SnapshotCopy:
        """A snapshot for a slot that exists: a temporary slot's, imported before that
        slot goes away; the stream then drops the copied tables' changes that committed
        before it (`SkipCopied`)."""
        if session.config.two_phase:
            # a transaction prepared before the snapshot and committed after it is in
            # neither the copy nor (its PREPARE skipped) the stream
            raise ConfigurationError(
                "--snapshot of a slot that exists cannot go with --two-phase",
                hint="stream it without --two-phase, or snapshot into a new slot"
                " (--slot NEW --create-slot)",
            )
        conn, snapshot_name, lsn = export_from_temporary_slot(session)
        try:
            return cls(session, snapshot_name, lsn, existing=True)
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def event_filter(self, inner: EventFilter | None) -> SkipCopied | EventFilter | None:
        """The filter for the stream after the copy."""
        if not self.existing:
            return inner
        copied = {(t.relation.namespace, t.relation.name) for t in self.tables}
        return SkipCopied(copied, self.lsn, inner)

    def run(self, enqueue: Callable[[Batch], None], stop: Callable[[], bool]) -> bool:
        """Copy every table; False when ``stop()`` said to stop before the end."""
        try:
            for number, table in enumerate(self.tables, 1):
                if stop():
                    return False
                if not self._copy(table, number, enqueue, stop):
                    return False
            self.done = True
            return True
        finally:
            self.reader.close()

    def _copy(
        self,
        table: catalog.SnapshotTable,
        number: int,
        enqueue: Callable[[Batch], None],
        stop: Callable[[], bool],
    ) -> bool:
        session = self.session
        config = session.config
        relation = table.relation
        wanted = unknown_type_oids(relation, ())
        user_types = session.lookup_types(wanted) if wanted else None
        flt = config.filter
        rows = TableRows(
            relation,
            lsn=self.lsn,
            rows_estimate=table.rows_estimate,
            number=number,
            tables=len(self.tables),
            user_types=user_types,
            encoder=row_encoder(config.format, redact=bool(flt.redact)),
        )
        if flt.redact:
            masked = flt.masked_columns(rows.table)
            if masked:
                rows = TableRows(
                    relation, rows.copy, user_types=user_types, masked=masked, masked_value=REDACTED
                )
        copy = rows.copy
        # a chunk is handed over with the events before it once the next one (or the
        # end) arrives: a table of one chunk is one batch (SnapshotBegin, its rows,
        # SnapshotEnd), not three -- one hand-over to the output a table, not three
        held: list[Any] = [SnapshotBegin(copy)]
        held_rows = 0
        stopped = False

        def handle(data: bytes) -> None:
            nonlocal held, held_rows, stopped
            event = rows.rows(data)
            if held_rows:
                enqueue(Batch(held, 0, 0, 0, held_rows))
                held, held_rows = [], 0
            held.append(event)
            held_rows += event.count
            if stop():
                stopped = True
                raise _Stopped

        try:
            count = self.reader.copy(table, handle)
        except _Stopped:
            return False
        if stopped:
            return False
        held.append(SnapshotEnd(copy, count))
        enqueue(Batch(held, 0, 0, 0, held_rows))
        return True

    def close(self) -> None:
        self.reader.close()
