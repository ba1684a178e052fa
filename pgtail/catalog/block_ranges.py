"""Reading part of a table under an exported snapshot (``pgtail spark run --snapshot``).

`table_blocks` gives each table's size in blocks (what the Spark driver splits a table
by); `copy_blocks` copies the rows of one block range of a table with ``COPY (SELECT ...
WHERE ctid >= '(a,0)' AND ctid < '(b,0)') TO STDOUT`` on a `SnapshotReader`'s connection
(a TID range scan on PostgreSQL 14+, which reads only those blocks), in the COPY text form
`pgtail.changes.copy_rows.TableRows` converts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import fetchall
from pgtail.catalog.snapshot_reader import (
    SnapshotReader,
    SnapshotTable,
)

TID_RANGE_VERSION = 140000  # TID range scans: a ctid range reads only its blocks


def table_blocks(conn: PgConnection, oids: Sequence[int]) -> dict[int, tuple[int, int]]:
    """oid -> (blocks, block size): the larger of ``pg_class.relpages`` (the last
    VACUUM/ANALYZE's count) and the file's size now (a table loaded since has
    relpages 0); a partitioned table, which has no blocks of its own, 0."""
    if not oids:
        return {}
    rows = fetchall(
        conn,
        "SELECT c.oid::int, CASE WHEN c.relkind IN ('r', 'm', 't') THEN greatest("
        "c.relpages::bigint, pg_relation_size(c.oid) / current_setting('block_size')::int)"
        " ELSE 0 END, current_setting('block_size')::int "
        "FROM pg_class c WHERE c.oid = ANY(%s)",
        (list(oids),),
    )
    return {int(oid): (int(blocks), int(size)) for oid, blocks, size in rows}


def range_query(table: SnapshotTable, first: int | None, stop: int | None) -> sql.Composed:
    """The COPY of ``table``'s rows in blocks [first, stop) (None: from the start / to
    the end, so rows in blocks added since the plan are read too)."""
    relation = table.relation
    ident = sql.Identifier(relation.namespace, relation.name)
    names = sql.SQL(", ").join(sql.Identifier(c.name) for c in relation.columns)
    query = sql.SQL("SELECT {} FROM {}{}").format(
        names, sql.SQL("" if table.partitioned else "ONLY "), ident
    )
    where: list[sql.Composable] = []
    if first:
        where.append(sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({first},0)")))
    if stop is not None:
        where.append(sql.SQL("ctid < {}::tid").format(sql.Literal(f"({stop},0)")))
    if table.row_filter is not None:
        # the server's own text of the publication's filter (pg_get_expr), not input
        where.append(sql.SQL("(") + sql.SQL(table.row_filter) + sql.SQL(")"))  # noqa: S608
    if where:
        query += sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where)
    return sql.SQL("COPY ({}) TO STDOUT").format(query)


def copy_blocks(
    reader: SnapshotReader,
    table: SnapshotTable,
    first: int | None,
    stop: int | None,
    handle: Callable[[bytes], None],
) -> None:
    """The rows of ``table`` in blocks [first, stop) as the reader's snapshot sees them,
    to ``handle`` in chunks of whole COPY text rows."""
    reader.copy_query(range_query(table, first, stop), handle, table.qualified_name)
