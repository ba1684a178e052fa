"""Reading a snapshot's rows on an ordinary connection (``pgtail stream --snapshot``).

`snapshot_tables` says which tables the publications send and how pgoutput describes
each (its Relation message, rebuilt from the catalogs: the published columns, their
types and the replica identity key flags), with each table's row filter. `SnapshotReader`
imports a snapshot a replication slot exported (``SET TRANSACTION SNAPSHOT`` in a
REPEATABLE READ transaction, which keeps the snapshot valid whatever the replication
connection does next) and copies each table with ``COPY ... TO STDOUT`` in text format,
under the decoding session settings, so values arrive in the form pgoutput sends them.
Rows are handed on in chunks as they arrive: memory stays bounded on a table of any size.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail import pgoutput as po
from pgtail.catalog.connection import decoding_set_statement, fetchall, open_connection
from pgtail.catalog.errors import primary_message, translate_error
from pgtail.catalog.publications import (
    FILTERS_VERSION,
    publication_table_rows,
    published_columns,
)
from pgtail.catalog.server import server_version_num
from pgtail.errors import PgtailError, ReplicationError, ServerCapabilityError

# bytes of rows handed on per chunk: large enough that per-chunk work vanishes, small
# enough to bound memory (a few chunks are in flight between the copy and the output)
CHUNK_BYTES = 512 << 10

_SERIALIZATION_FAILURE = "40001"  # a standby cancelled the query: snapshot too old
_INVALID_PARAMETER = "22023"  # SET TRANSACTION SNAPSHOT: no such snapshot (any more)
_SNAPSHOT_TOO_OLD = "72000"  # old_snapshot_threshold (PostgreSQL 12-16) pruned rows it needs


@dataclass(frozen=True, slots=True)
class SnapshotTable:
    """One published table to copy: its Relation as pgoutput sends it, and which rows."""

    relation: po.Relation
    partitioned: bool  # a partitioned root (publish_via_partition_root): all its partitions
    row_filter: str | None  # the publications' row filter (SQL expression), None: every row
    rows_estimate: int

    @property
    def qualified_name(self) -> str:
        return f"{self.relation.namespace}.{self.relation.name}"


# The catalog facts of every published table are read in three set-based queries (index
# lookups by OID), not a few queries per table: a snapshot of 2,000 tables of a database
# of 4,000 costs the same per table as one of ten.

# The key flag as pgoutput sets it (logicalrep_write_attrs): every column for REPLICA
# IDENTITY FULL, the primary key's for DEFAULT, the chosen index's for USING INDEX.
_COLUMNS_SQL = """
SELECT c.oid::int, a.attname::text, a.atttypid::int, a.atttypmod,
  CASE c.relreplident
    WHEN 'f' THEN true
    WHEN 'd' THEN EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid
                          AND i.indisprimary AND a.attnum = ANY (i.indkey::int2[]))
    WHEN 'i' THEN EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid
                          AND i.indisreplident AND a.attnum = ANY (i.indkey::int2[]))
    ELSE false END,
  has_column_privilege(c.oid, a.attnum, 'SELECT'),
  a.attgenerated <> ''
FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
WHERE c.oid = ANY (%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.oid, a.attnum
"""

_TABLES_SQL = """
SELECT c.oid::int, n.nspname::text, c.relname::text, c.relreplident::text, c.relkind::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ANY (%s::oid[])
"""

# What the planner sizes a table by (estimate_rel_size), for the table or each partition
# of a partitioned one: the last VACUUM/ANALYZE's pages and rows, the file's size now, and
# a row's width from its column types (before ANALYZE there are no statistics to use; 32
# is get_typavgwidth's guess for a variable-length type). The table itself or its leaf
# partitions (pg_partition_tree: the table alone when it is not partitioned, nothing for
# a relation that cannot be), each by an index lookup.
_SIZES_SQL = """
SELECT t.oid::int, c.relpages::bigint, c.reltuples::float8, pg_relation_size(c.oid),
  (SELECT coalesce(sum(CASE WHEN ty.typlen > 0 THEN ty.typlen ELSE 32 END), 0)::int
   FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid
   WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped),
  current_setting('block_size')::int
FROM unnest(%s::oid[]) t(oid)
CROSS JOIN LATERAL (SELECT t.oid AS relid
                    UNION SELECT p.relid FROM pg_partition_tree(t.oid) p WHERE p.isleaf) part
JOIN pg_class c ON c.oid = part.relid
WHERE c.relkind IN ('r', 'm')
"""

_PAGE_HEADER = 24  # SizeOfPageHeaderData
_TUPLE_HEADER = 24  # MAXALIGN(SizeofHeapTupleHeader)
_ITEM_ID = 4  # sizeof(ItemIdData)


def estimate_rows(relpages: int, reltuples: float, size: int, width: int, block_size: int) -> int:
    """A table's row count as the planner estimates it (estimate_rel_size): the rows per
    page of the last VACUUM/ANALYZE times the pages the table has now; before either
    (reltuples -1, or 0 on 0 pages before PostgreSQL 14), the rows that fit a page at the
    width of the column types times the pages. (Unlike the planner, an empty file is 0
    rows, not ten pages' worth.)"""
    pages = size // block_size
    if pages <= 0:
        return 0
    if reltuples >= 0 and relpages > 0:
        return round(reltuples / relpages * pages)
    density = (block_size - _PAGE_HEADER) // (width + _TUPLE_HEADER + _ITEM_ID)
    return density * pages


def snapshot_tables(
    conn: PgConnection,
    publications: Sequence[str],
    selected: Callable[[str, str], bool],
) -> list[SnapshotTable]:
    """The tables ``publications`` send that ``selected(schema, table)`` keeps, in name
    order, each as pgoutput describes it. A table whose published columns the role may
    not read raises the error that names it."""
    if not publications:
        return []
    version = server_version_num(conn)
    columns_of = published_columns(conn, publications)
    filters: dict[int, list[str | None]] = {}
    if version >= FILTERS_VERSION:
        for row in publication_table_rows(conn, publications):
            filters.setdefault(row.table_oid, []).append(row.row_filter)
    rows = fetchall(
        conn,
        "SELECT DISTINCT format('%%I.%%I', schemaname, tablename)::regclass::oid::int, "
        "schemaname::text, tablename::text FROM pg_publication_tables "
        "WHERE pubname = ANY(%s) ORDER BY 2, 3",
        (list(publications),),
    )
    wanted = [(oid, schema, name) for oid, schema, name in rows if selected(schema, name)]
    described = _relations(conn, [oid for oid, _, _ in wanted], columns_of, version)
    out = []
    for oid, _schema, _name in wanted:
        relation, partitioned, estimate = described[oid]
        row_filters = filters.get(oid, [None])
        row_filter = None
        if all(f is not None for f in row_filters):
            # a row any of the publications sends is sent
            row_filter = " OR ".join(f"({f})" for f in sorted({str(f) for f in row_filters}))
        out.append(SnapshotTable(relation, partitioned, row_filter, estimate))
    return out


def _relations(
    conn: PgConnection,
    oids: list[int],
    columns_of: dict[tuple[str, str], tuple[str, ...]],
    version: int,
) -> dict[int, tuple[po.Relation, bool, int]]:
    """OID -> (its Relation as pgoutput sends it, partitioned root?, rows estimate), for
    every table of ``oids``, in three queries whatever their number."""
    heads = {row[0]: row[1:] for row in fetchall(conn, _TABLES_SQL, (oids,))}
    estimates: dict[int, int] = dict.fromkeys(oids, 0)
    for oid, *size in fetchall(conn, _SIZES_SQL, (oids,)):
        estimates[oid] += estimate_rows(*size)
    columns: dict[int, list[po.RelationColumn]] = {oid: [] for oid in oids}
    unreadable: dict[int, str] = {}  # the first column the role may not read, by table
    for oid, attname, type_oid, typmod, is_key, readable, generated in fetchall(
        conn, _COLUMNS_SQL, (oids,)
    ):
        head = heads.get(oid)
        if head is None:
            continue
        schema, name = head[0], head[1]
        published = columns_of.get((schema, name))
        if published is not None and version >= FILTERS_VERSION:
            if attname not in published:
                continue
        elif generated:  # before the column lists: pgoutput never sends generated columns
            continue
        if not readable:
            unreadable.setdefault(oid, attname)
        columns[oid].append(po.RelationColumn(1 if is_key else 0, attname, type_oid, typmod))
    out = {}
    for oid in oids:  # in name order: the first table's error is the one raised
        head = heads.get(oid)
        if head is None:
            raise ReplicationError(f"published table {oid} was dropped while pgtail read it")
        schema, name, identity, relkind = head
        if oid in unreadable:
            raise ServerCapabilityError(
                f"no SELECT privilege on column {unreadable[oid]!r} of {schema}.{name}: "
                "--snapshot reads every published row",
                hint=f"GRANT SELECT ON {schema}.{name} TO the role pgtail connects as",
            )
        relation = po.Relation(None, oid, schema, name, identity, tuple(columns[oid]))
        out[oid] = (relation, relkind == "p", estimates[oid])
    return out


class _Chunks(io.RawIOBase):
    """Where COPY's rows go: psycopg2 calls ``write`` once per row, on the
    `io.BufferedWriter` in front of this (in C); this gets its buffer, about CHUNK_BYTES
    at a time, and hands the whole rows in it to ``handle`` (COPY's text format escapes
    line breaks in values: a newline only ends a row)."""

    def __init__(self, handle: Callable[[bytes], None]) -> None:
        self.handle = handle
        self.rest = b""  # a row cut at the end of the last buffer
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        size = len(data)
        chunk = self.rest + bytes(data)
        end = chunk.rfind(b"\n") + 1
        self.rest = chunk[end:]
        if end:
            self.count += chunk.count(b"\n", 0, end)
            self.handle(chunk[:end])
        return size


def _discard(data: bytes) -> None:
    pass


class SnapshotReader:
    """An ordinary connection inside an exported snapshot; `copy` reads one table."""

    def __init__(self, dsn: str | None, snapshot_name: str, application_name: str) -> None:
        self.conn = open_connection(dsn, application_name=application_name)
        try:
            with self.conn.cursor() as cur:
                cur.execute(decoding_set_statement())
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute("SET TRANSACTION SNAPSHOT %s", (snapshot_name,))
        except psycopg2.Error as exc:
            self.close()
            raise snapshot_error(exc, "importing the slot's snapshot") from None

    def tables(
        self, publications: Sequence[str], selected: Callable[[str, str], bool]
    ) -> list[SnapshotTable]:
        """`snapshot_tables`, as the catalogs were at the snapshot."""
        try:
            return snapshot_tables(self.conn, publications, selected)
        except psycopg2.Error as exc:
            raise snapshot_error(exc, "reading the published tables") from None

    def hold(self, tables: Sequence[SnapshotTable]) -> None:
        """Lock ``tables`` (ACCESS SHARE, as pg_dump does) to the end of the snapshot's
        transaction: an ALTER TABLE or TRUNCATE elsewhere waits for the copy instead of
        changing a table not copied yet, and no COPY waits for a lock (the wait is here,
        one statement, before any row: where `catalog.wait_for_server` can say it).
        Only the tables the role may lock (SELECT on the table, not on some columns); a
        partitioned root without its partitions (their privileges are not needed to read
        them through the root)."""
        if not tables:
            return
        try:
            rows = fetchall(
                self.conn,
                "SELECT t.oid::int FROM unnest(%s::oid[]) t(oid)"
                " WHERE has_table_privilege(t.oid, 'SELECT')",
                ([t.relation.relation_id for t in tables],),
            )
            lockable = {row[0] for row in rows}
            names = [
                sql.SQL("ONLY {}" if t.partitioned else "{}").format(
                    sql.Identifier(t.relation.namespace, t.relation.name)
                )
                for t in tables
                if t.relation.relation_id in lockable
            ]
            if names:
                query = sql.SQL("LOCK TABLE {} IN ACCESS SHARE MODE").format(
                    sql.SQL(", ").join(names)
                )
                with self.conn.cursor() as cur:
                    cur.execute(query)
        except psycopg2.Error as exc:
            raise snapshot_error(exc, "locking the tables to copy") from None

    def copy(self, table: SnapshotTable, handle: Callable[[bytes], None]) -> int:
        """Every row of ``table`` in the snapshot, to ``handle`` in chunks of whole COPY
        text rows; returns how many rows."""
        relation = table.relation
        ident = sql.Identifier(relation.namespace, relation.name)
        names = sql.SQL(", ").join(sql.Identifier(c.name) for c in relation.columns)
        if table.row_filter is None and not table.partitioned and relation.columns:
            query = sql.SQL("COPY {} ({}) TO STDOUT").format(ident, names)
        else:
            query = sql.SQL("SELECT {} FROM {}{}").format(
                names, sql.SQL("" if table.partitioned else "ONLY "), ident
            )
            if table.row_filter is not None:
                # the server's own text of the publication's filter (pg_get_expr), not input
                query += sql.SQL(" WHERE ") + sql.SQL(table.row_filter)  # noqa: S608
            query = sql.SQL("COPY ({}) TO STDOUT").format(query)
        return self.copy_query(query, handle, table.qualified_name)

    def copy_query(self, query: sql.Composable, handle: Callable[[bytes], None], what: str) -> int:
        """Run ``query`` (a ``COPY ... TO STDOUT``) and hand its rows to ``handle`` in
        chunks of whole COPY text rows; returns how many rows. ``what`` names the table
        in an error."""
        chunks = _Chunks(handle)
        buffered = io.BufferedWriter(chunks, buffer_size=CHUNK_BYTES)
        try:
            with self.conn.cursor() as cur:
                cur.copy_expert(query, buffered)
            buffered.flush()
        except psycopg2.Error as exc:
            raise snapshot_error(exc, f"copying {what}") from None
        finally:
            # a copy stopped midway: what is still buffered goes nowhere when the
            # BufferedWriter is collected
            chunks.handle = _discard
        return chunks.count

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


def snapshot_error(exc: BaseException, during: str) -> PgtailError:
    """A server error while importing or reading a snapshot -> one line with a fix."""
    code: Any = getattr(exc, "pgcode", None)
    text = primary_message(exc)
    if code == _SERIALIZATION_FAILURE:
        return ReplicationError(
            f"the snapshot became too old while {during}: {text}",
            hint="on a standby, turn hot_standby_feedback on (or raise "
            "max_standby_streaming_delay), or take the snapshot on the primary; then rerun:"
            " nothing was confirmed",
        )
    if code == _SNAPSHOT_TOO_OLD:
        return ReplicationError(
            f"the snapshot became too old while {during}: old_snapshot_threshold let VACUUM"
            " remove rows the copy still needed",
            hint="raise old_snapshot_threshold (-1 turns it off; a server restart) or copy"
            " fewer tables per run (--snapshot-table); then rerun: nothing was confirmed",
        )
    if code == _INVALID_PARAMETER and "snapshot" in text.lower():
        return ReplicationError(
            f"the slot's exported snapshot is gone ({text})",
            hint="rerun pgtail stream --snapshot",
        )
    error = translate_error(exc)
    return type(error)(f"{during}: {error.message}", hint=error.hint)
