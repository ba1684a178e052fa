"""Which publications a stream reads: the ones named, or the only one there is.

Stream policy over catalog facts (the catalog runs every statement); also the
best-effort drop of a publication created for one run.
"""

from __future__ import annotations

from psycopg2.extensions import connection as PgConnection

from pgtail import catalog
from pgtail.errors import PublicationError, redact
from pgtail.stream.config import Logger, StreamConfig


def choose_publications(
    conn: PgConnection, config: StreamConfig, server: catalog.ServerInfo, log: Logger
) -> tuple[str, ...]:
    existing = catalog.publication_names(conn)
    if config.publications:
        missing = [p for p in config.publications if p not in existing]
        if missing:
            raise catalog.publication_missing_error(
                missing[0],
                server.database,
                hint=f"create it: pgtail publication create {missing[0]} --table ...;"
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


def drop_run_publication(dsn: str, name: str, log: Logger) -> None:
    """Drop the publication this run created; a failure is a warning (we are exiting)."""
    try:
        catalog.drop_publication(dsn, name, if_exists=True)
    except Exception as exc:  # best effort on the way out
        log(f"pgtail: warning: could not drop publication {name!r}: {redact(str(exc))}")
