"""SQL replay's DDL, the stream's side: before a batch is rendered, the catalog facts
its `TableDdl` events need are looked up (`pgtail.catalog.shapes`, on a plain
connection kept for the next ones) and handed to the pure `DdlTracker` as data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import psycopg2
from psycopg2.extensions import connection as PgConnection

from pgtail import catalog
from pgtail.catalog import primary_message
from pgtail.changes.ddl import DdlTracker, TableShape
from pgtail.errors import PgtailError
from pgtail.stream.config import Logger
from pgtail.stream.signals import Signals
from pgtail.stream.waiting import Waiting


class ShapeLookup:
    """Tables' shapes for DDL, on a connection of its own; a failure is a warning (the
    DDL then says what the stream says, and a comment what it could not write)."""

    def __init__(self, dsn: str, log: Logger, signals: Signals | None = None) -> None:
        self.dsn = dsn
        self.log = log
        self.conn: PgConnection | None = None
        # a table's defaults lock it (pg_get_expr): a lock held elsewhere is said while it
        # blocks, and the run's signals cancel the wait (`Stop`)
        self.wait = Waiting(dsn, log, signals)

    def __call__(self, oids: Sequence[int]) -> dict[int, TableShape | None]:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = catalog.open_connection(self.dsn)
            conn = self.conn
            return self.wait.run(
                lambda: catalog.table_shapes(conn, oids),
                conn,
                "look up the definition of a table for its DDL",
                blocked_only=True,
            )
        except (psycopg2.Error, PgtailError) as exc:
            self.close()
            self.log(
                f"pgtail: warning: could not look up the definition of tables {list(oids)}"
                f" ({primary_message(exc)}); their DDL is written from the stream alone"
            )
            return dict.fromkeys(oids)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.conn is not None:
                self.conn.close()
        self.conn = None


def with_ddl(
    render: Callable[[Any], None], lookup: Callable[[Sequence[int]], dict[int, TableShape | None]]
) -> Callable[[list[Any]], None]:
    """A function that renders a batch of events with ``render``, each after the DDL its
    table's first sight or changed definition calls for."""
    tracker = DdlTracker()
    wanted_in, render_with = tracker.wanted, tracker.render_all
    no_shapes: dict[int, TableShape | None] = {}

    def render_all(events: list[Any]) -> None:
        wanted = wanted_in(events)
        render_with(events, lookup(wanted) if wanted else no_shapes, render)

    return render_all
