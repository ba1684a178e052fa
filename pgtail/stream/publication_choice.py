"""Which publications a stream reads: the ones named, or the only one there is.

Stream policy over catalog facts (the catalog runs every statement): a publication
made for this run (``--create-publication``) and held by it while it lives, its drop at
the end, and the clean-up of those a killed run left behind (see the run publications
in `pgtail.catalog.publications`). Also the start-up warning for ``--table``,
``--exclude`` and ``--redact`` patterns that match nothing the publications send.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import socket
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime

import psycopg2
from psycopg2.extensions import connection as PgConnection

from pgtail import catalog
from pgtail.errors import PublicationError, redact
from pgtail.stream.config import Logger, StreamConfig


@dataclass
class HeldPublication:
    """The publication this run created, and the ordinary connection whose session holds
    its advisory lock: the sign, for other runs and the doctor, that this run lives."""

    name: str
    dsn: str
    conn: PgConnection


def stream_publications(
    conn: PgConnection,
    dsn: str,
    config: StreamConfig,
    server: catalog.ServerInfo,
    log: Logger,
) -> tuple[tuple[str, ...], HeldPublication | None]:
    """The publications to stream, and the one created for this run (None when it
    created none). Drops run publications whose run is gone first."""
    others = drop_leftovers(conn, config, log)
    if config.create_publication and (
        not config.publications or config.publications[0] not in catalog.publication_names(conn)
    ):
        held = create_for_run(dsn, config, log)
        return (held.name,), held
    return choose_publications(conn, config, server, log, ignore=others), None


def choose_publications(
    conn: PgConnection,
    config: StreamConfig,
    server: catalog.ServerInfo,
    log: Logger,
    *,
    ignore: Collection[str] = (),
) -> tuple[str, ...]:
    """The publications named, else the only one of the database, not counting those
    in ``ignore`` (other runs' publications)."""
    existing = catalog.publication_names(conn)
    if config.publications:
        missing = [p for p in config.publications if p not in existing]
        if missing:
            raise catalog.publication_missing_error(
                missing[0],
                server.database,
                hint=f"create it: pgtail publication create {shlex.quote(missing[0])} --table ...;"
                " or pgtail stream --create-publication --table ...",
            )
        return config.publications
    runs = [p for p in existing if p in ignore]
    existing = [p for p in existing if p not in ignore]
    besides = (
        f" (not counting {', '.join(runs)}, made for other pgtail stream runs)" if runs else ""
    )
    if len(existing) == 1:
        log(
            f"pgtail: using publication {existing[0]!r}, the only one in {server.database!r}"
            + besides
        )
        return (existing[0],)
    if not existing:
        raise PublicationError(
            f"database {server.database!r} has no publication{besides}",
            # not CREATE PUBLICATION ... FOR ALL TABLES: a table without a replica
            # identity would then fail its next UPDATE; publication create checks that
            hint="pgtail publication create pgtail --table T (or --all-tables), which"
            " refuses a table whose UPDATE/DELETE would then fail; or pass"
            " --create-publication (with --table/--schema) to create one for this run",
        )
    raise PublicationError(
        f"database {server.database!r} has {len(existing)} publications"
        f" ({', '.join(existing)}){besides}; choose with --publication",
        hint="--publication NAME, repeatable, or PGTAIL_PUBLICATION",
    )


def drop_leftovers(conn: PgConnection, config: StreamConfig, log: Logger) -> list[str]:
    """Drop the run publications whose run is gone (one stderr line each); returns the
    run publications that remain (other runs', and those this role may not drop).
    A leftover named with --publication is kept (it is what was asked for), unless
    this run is to create it afresh."""
    keep = set() if config.create_publication else set(config.publications)
    remaining = []
    for pub in catalog.run_publications(conn):
        if pub.run_alive or pub.name in keep:
            remaining.append(pub.name)
            continue
        try:
            dropped = catalog.drop_abandoned_run_publication(conn, pub.name)
        except psycopg2.Error as exc:
            remaining.append(pub.name)
            log(
                f"pgtail: warning: publication {pub.name!r} was left behind by a pgtail stream"
                f" run that is gone, and cannot be dropped ({catalog.primary_message(exc)});"
                f" its owner {pub.owner!r} can: {pub.drop_statement}"
            )
            continue
        if dropped:
            log(
                f"pgtail: dropped publication {pub.name!r}, left behind by a pgtail stream run"
                f" that is gone ({pub.made_by})"
            )
        else:
            remaining.append(pub.name)
    return remaining


def create_for_run(dsn: str, config: StreamConfig, log: Logger) -> HeldPublication:
    """Create the run's publication (``--publication NAME``, else ``pgtail_run_<pid>_<hex>``)
    on a connection of its own that keeps its advisory lock until `drop_run_publication`.
    The lock is taken first: a run publication is never without its lock."""
    pid = os.getpid()
    name = (
        config.publications[0]
        if config.publications
        else f"{catalog.RUN_PUBLICATION_PREFIX}{pid}_{uuid.uuid4().hex[:8]}"
    )
    conn = catalog.open_connection(dsn)
    try:
        if not catalog.lock_run_publication(conn, name):
            raise PublicationError(
                f"publication {name!r} is being created by another pgtail stream run",
                hint="stream it with --publication once it exists, or choose another name",
            )
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        catalog.create_run_publication(
            conn,
            name,
            tables=config.publication_tables,
            schemas=config.publication_schemas,
            comment=catalog.run_publication_comment(pid, socket.gethostname(), started),
        )
    except BaseException:
        conn.close()
        raise
    log(f"pgtail: created publication {name!r} for this run")
    return HeldPublication(name, dsn, conn)


def drop_run_publication(held: HeldPublication, log: Logger) -> None:
    """Drop the publication this run created, then let go of its lock; a failure is a
    warning (we are exiting), and the next run or the doctor finds the leftover."""
    try:
        catalog.drop_publication(held.dsn, held.name, if_exists=True)
    except Exception as exc:  # best effort on the way out
        log(f"pgtail: warning: could not drop publication {held.name!r}: {redact(str(exc))}")
    finally:
        with contextlib.suppress(Exception):
            held.conn.close()


_UNMATCHED = {
    "--table": "matches no table that {pubs}: nothing of it will be shown",
    "--exclude": "matches no table that {pubs}: it excludes nothing",
    "--redact": "matches no column that {pubs}: it masks nothing",
}


def warn_unmatched_filters(
    conn: PgConnection, config: StreamConfig, publications: tuple[str, ...], log: Logger
) -> None:
    """One warning per ``--table``, ``--exclude`` or ``--redact`` pattern that matches
    nothing the publications send now: a typo there would otherwise show nothing, or
    mask nothing, without a word."""
    flt = config.filter
    if not (flt.tables or flt.exclude or flt.redact):
        return
    unmatched = flt.unmatched(catalog.published_columns(conn, publications))
    pubs = (
        f"publication {publications[0]!r} publishes"
        if len(publications) == 1
        else f"publications {', '.join(publications)} publish"
    )
    for option, pattern in unmatched:
        log(f"pgtail: warning: {option} {pattern!r} " + _UNMATCHED[option].format(pubs=pubs))
