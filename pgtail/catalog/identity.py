"""A table's replica identity: what it is, which publications carry the table, and
changing it (``ALTER TABLE ... REPLICA IDENTITY``) behind a caller-supplied guard
(`pgtail.doctor.identity_breaks`) that refuses a change UPDATE/DELETE would fail on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import connect, fetchall
from pgtail.catalog.facts import IdentityReport
from pgtail.catalog.names import parse_name, parse_table_spec
from pgtail.catalog.publications import read_publications
from pgtail.catalog.tables import TableRef, resolve_table, table_facts
from pgtail.errors import ConfigurationError

# the publications whose UPDATE/DELETE the table's new identity would break
IdentityGuard = Callable[[IdentityReport], Sequence[str]]


def identity_report(conn: PgConnection, ref: TableRef) -> IdentityReport:
    """A table's facts and the publications that publish it."""
    facts = table_facts(conn, [ref.oid])[0]
    pubnames = [
        r[0]
        for r in fetchall(
            conn,
            "SELECT DISTINCT pubname FROM pg_publication_tables "
            "WHERE format('%%I.%%I', schemaname, tablename)::regclass = %s::oid ORDER BY 1",
            (ref.oid,),
        )
    ]
    pubs = tuple(p for name in pubnames for p in read_publications(conn, name))
    return IdentityReport(facts, pubs)


def table_identity(dsn: str | None, table: str) -> IdentityReport:
    """Replica identity facts of ``table`` (``schema.table``)."""
    spec = parse_table_spec(table, allow_columns=False)
    with connect(dsn) as conn:
        return identity_report(conn, resolve_table(conn, spec))


IDENTITY_MODES = ("default", "full", "nothing", "index")


def set_replica_identity(
    dsn: str | None,
    table: str,
    mode: str,
    index: str | None = None,
    *,
    force: bool = False,
    guard: IdentityGuard | None = None,
) -> tuple[IdentityReport, IdentityReport]:
    """ALTER TABLE ... REPLICA IDENTITY; returns (before, after).

    Refuses (unless ``force``) a change that ``guard`` says would make UPDATE or DELETE
    fail on the table because a publication publishes them.
    """
    mode = mode.lower()
    if mode not in IDENTITY_MODES:
        raise ConfigurationError(
            f"unknown replica identity {mode!r}", hint="choose default, full, nothing or index NAME"
        )
    if (mode == "index") != (index is not None):
        raise ConfigurationError(
            "--set index needs an index name (--set index NAME)"
            if mode == "index"
            else "an index name goes with --set index"
        )
    spec = parse_table_spec(table, allow_columns=False)
    with connect(dsn) as conn:
        ref = resolve_table(conn, spec)
        before = identity_report(conn, ref)
        clause: sql.Composable
        if mode == "index":
            assert index is not None
            clause = sql.SQL("USING INDEX {}").format(sql.Identifier(parse_name(index)))
        else:
            clause = sql.SQL(mode.upper())
        conn.autocommit = False
        try:
            with conn.cursor() as cur:
                cur.execute(
                    sql.SQL("ALTER TABLE {} REPLICA IDENTITY ").format(ref.identifier) + clause
                )
            after = identity_report(conn, ref)
            breaks = list(guard(after)) if guard is not None else []
            if breaks and not force:
                conn.rollback()
                raise ConfigurationError(
                    f"not changed: with REPLICA IDENTITY {mode.upper()} every UPDATE/DELETE on "
                    f"{ref.qualified} would fail, because publication {breaks[0]!r} publishes "
                    "them",
                    hint="use --force to change it anyway",
                )
            conn.commit()
        except BaseException:
            if not conn.closed:
                conn.rollback()
            raise
        finally:
            if not conn.closed:
                conn.autocommit = True
        return before, after
