"""``pgtail stream --snapshot``: every existing row of the published tables, then every
change, with no gap and no duplicate.

The slot this run creates exports a snapshot (``CREATE_REPLICATION_SLOT ... (SNAPSHOT
'export')``, ``EXPORT_SNAPSHOT`` before PostgreSQL 15) consistent with the point its
changes start at. `SnapshotCopy.begin` imports it on an ordinary connection
(`pgtail.catalog.SnapshotReader`) before START_REPLICATION -- the export lives only
until the replication connection's next command, the imported snapshot as long as that
transaction -- and `SnapshotCopy.run`, once streaming has started and before the first
message is read, copies each table through the same converters and renderer the streamed
rows take, handing the rows to the writer in bounded batches (output blocked: the reader
waits, and keeps the walsender alive). Nothing of the slot is confirmed before every
table is written: the snapshot's batches confirm nothing, and no change is read before
the copy ends. A run stopped during the copy (Ctrl-C, an error) drops the slot it
created; after kill -9 the slot stays and the next ``--snapshot`` run refuses it (drop
it and rerun).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from pgtail import catalog
from pgtail.catalog.snapshot import SnapshotReader, SnapshotTable, snapshot_tables
from pgtail.changes import SnapshotBegin, SnapshotEnd, Table, unknown_type_oids
from pgtail.changes.snapshot import TableRows
from pgtail.errors import ConfigurationError, SlotError
from pgtail.filters import REDACTED
from pgtail.render import insert_encoder
from pgtail.stream.writer import Batch

if TYPE_CHECKING:
    from psycopg2.extensions import connection as PgConnection

    from pgtail.stream.config import StreamConfig
    from pgtail.stream.session import Session


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


def preflight(conn: PgConnection, session: Session) -> None:
    """Before the slot is made: what would be copied, and may it be read? Refuses a slot
    that exists (its changes began before any snapshot this run can take)."""
    config = session.config
    if not session.temporary and catalog.slot_info(conn, session.slot) is not None:
        raise SlotError(
            f"replication slot {session.slot!r} exists: --snapshot needs a slot this run"
            " creates, whose changes start where its snapshot is consistent",
            hint=f"pgtail slot drop {session.slot}, then rerun with --create-slot"
            " (or use a temporary slot: no --slot)",
        )
    if not session.temporary and not config.create_slot:
        raise SlotError(
            f"replication slot {session.slot!r} does not exist",
            hint="add --create-slot: --snapshot starts a new slot",
        )
    tables = snapshot_tables(conn, session.publications, selector(config))
    if not tables and config.snapshot_tables:
        session.log(
            "pgtail: warning: --snapshot-table "
            + ", ".join(config.snapshot_tables)
            + " matches no published table: nothing to copy"
        )


class SnapshotCopy:
    """The snapshot of one run: imported at `begin`, copied by `run`."""

    def __init__(self, session: Session, snapshot_name: str, lsn: int) -> None:
        self.session = session
        self.lsn = lsn
        self.done = False
        config = session.config
        self.reader = SnapshotReader(
            session.dsn, snapshot_name, f"{config.application_name} snapshot"
        )
        try:
            self.tables = self.reader.tables(session.publications, selector(config))
        except BaseException:
            self.reader.close()
            raise

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
        table: SnapshotTable,
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
            encoder=None if flt.redact else insert_encoder(config.format),
        )
        if flt.redact:
            masked = flt.masked_columns(rows.table)
            if masked:
                rows = TableRows(
                    relation, rows.copy, user_types=user_types, masked=masked, masked_value=REDACTED
                )
        copy = rows.copy
        enqueue(Batch([SnapshotBegin(copy)], 0, 0, 0, 0))
        stopped = False

        class _Stopped(Exception):
            pass

        def handle(data: bytes) -> None:
            nonlocal stopped
            event = rows.rows(data)
            enqueue(Batch([event], 0, 0, 0, event.count))
            if stop():
                stopped = True
                raise _Stopped

        try:
            count = self.reader.copy(table, handle)
        except _Stopped:
            return False
        if stopped:
            return False
        enqueue(Batch([SnapshotEnd(copy, count)], 0, 0, 0, 0))
        return True

    def close(self) -> None:
        self.reader.close()
