"""Tables: resolving a name the user gave, and the facts of tables in a few queries
(columns, indexes, replica identity, partitions, TOAST) for the doctor and the
publication guard.

Which column values are stored out of line is read from a bounded sample of rows,
only for tables whose TOAST relation holds data (nothing is out of line otherwise):
exactly with ``pg_column_toast_chunk_id`` from PostgreSQL 17, before that by stored
size (a value wider than the TOAST threshold cannot have stayed in line).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import fetchall, fetchone
from pgtail.catalog.facts import ColumnFacts, IndexFacts, TableFacts
from pgtail.catalog.names import TableSpec
from pgtail.errors import ConfigurationError
from pgtail.sqlnames import quote_ident


@dataclass(frozen=True, slots=True)
class TableRef:
    oid: int
    schema: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    @property
    def identifier(self) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(self.name))


def resolve_table(conn: PgConnection, spec: TableSpec) -> TableRef:
    """The table a spec names (search_path applies when no schema is given)."""
    qualified = TableSpec(spec.schema, spec.name).display()
    row = fetchone(
        conn,
        "SELECT c.oid, n.nspname, c.relname, c.relkind FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
        (qualified,),
    )
    if row is None:
        raise ConfigurationError(
            f"table {qualified} does not exist",
            hint="check the name and schema; quote mixed-case names: '\"MyTable\"'",
        )
    if row[3] not in ("r", "p"):
        raise ConfigurationError(f"{qualified} is not a table (relkind {row[3]!r})")
    return TableRef(int(row[0]), str(row[1]), str(row[2]))


_CLASS_SQL = """
SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident, c.relispartition,
       root.nspname, root.relname,
       CASE WHEN c.reltoastrelid <> 0 THEN pg_relation_size(c.reltoastrelid) END,
       has_table_privilege(c.oid, 'SELECT')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN LATERAL (
    SELECT rn.nspname, rc.relname FROM pg_class rc JOIN pg_namespace rn ON rn.oid = rc.relnamespace
    WHERE rc.oid = pg_partition_root(c.oid)
) root ON c.relispartition
WHERE c.oid = ANY(%s::oid[])
"""

_COLUMN_SQL = """
SELECT a.attrelid, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       (a.attlen = -1 AND a.attstorage IN ('x', 'e')), a.attstorage::text,
       CASE
           WHEN a.attlen > 0 THEN a.attlen
           -- char(n), varchar(n): n characters of at most the encoding's width, and a header
           WHEN a.atttypid IN ('bpchar'::regtype, 'varchar'::regtype) AND a.atttypmod >= 4
               THEN (a.atttypmod - 4) * pg_encoding_max_length(
                   (SELECT encoding FROM pg_database WHERE datname = current_database())) + 4
           WHEN a.atttypid IN ('bit'::regtype, 'varbit'::regtype) AND a.atttypmod > 0
               THEN (a.atttypmod + 7) / 8 + 8
       END
FROM pg_attribute a
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""

_INDEX_SQL = """
SELECT i.indrelid, ic.relname, i.indisvalid, i.indisunique, i.indimmediate,
       i.indpred IS NOT NULL, i.indisready, i.indisprimary, i.indisreplident,
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = ANY(%s::oid[]) ORDER BY i.indrelid, ic.relname
"""


# rows read to find which columns hold values stored out of line
TOAST_SAMPLE_ROWS = 1000
# a value stored wider than this cannot have stayed in line: the toaster moves values out
# until the row fits in TOAST_TUPLE_THRESHOLD (about 2 kB with 8 kB pages); storage MAIN
# values only once the row does not fit in a page
_OUT_OF_LINE_BYTES = {"x": 2032, "e": 2032, "m": 8160}
# the toaster never moves a value this small out of line (it would not get smaller)
TOAST_POINTER_BYTES = 24


# in `_toast_sample`'s answer: every row was read (not a column name: "" is none)
_EVERY_ROW = ""


def _toast_sample(
    conn: PgConnection, schema: str, name: str, columns: list[ColumnFacts]
) -> dict[str, tuple[bool, int]]:
    """For each variable-length column that can go out of line: whether the sampled rows
    hold one of its values out of line, and its widest stored value in the sample; and
    under `_EVERY_ROW`, whether the sample read the whole table."""
    candidates = [
        c
        for c in columns
        if c.storage in _OUT_OF_LINE_BYTES
        and (c.max_bytes is None or c.max_bytes > TOAST_POINTER_BYTES)
    ]
    if not candidates:
        return {}
    exact = int(conn.server_version) >= 170000
    select: list[sql.Composable] = [sql.SQL("count(*)")]
    for column in candidates:
        ident = sql.Identifier(column.name)
        if exact:
            select.append(sql.SQL("count(pg_column_toast_chunk_id({}))").format(ident))
        select.append(sql.SQL("coalesce(max(pg_column_size({})), 0)").format(ident))
    row = fetchone(
        conn,
        sql.SQL("SELECT {} FROM (SELECT {} FROM {} LIMIT %s) sample").format(
            sql.SQL(", ").join(select),
            sql.SQL(", ").join(sql.Identifier(c.name) for c in candidates),
            sql.Identifier(schema, name),
        ),
        (TOAST_SAMPLE_ROWS,),
    )
    found: dict[str, tuple[bool, int]] = {}
    values = list(row)
    if int(values.pop(0)) < TOAST_SAMPLE_ROWS:
        found[_EVERY_ROW] = (True, 0)  # the sample is the whole table
    for column in candidates:
        if exact:
            chunks, widest = int(values.pop(0)), int(values.pop(0))
            found[column.name] = (chunks > 0, widest)
        else:
            widest = int(values.pop(0))
            found[column.name] = (widest > _OUT_OF_LINE_BYTES[column.storage], widest)
    return found


def table_facts(
    conn: PgConnection, oids: Sequence[int], *, sample_toast: bool = False
) -> list[TableFacts]:
    """Facts of many tables in a few queries (a publication can hold thousands). With
    ``sample_toast``, which columns hold values out of line (`_toast_sample`) for tables
    whose TOAST relation holds data and that the role may read."""
    if not oids:
        return []
    wanted = [int(o) for o in oids]
    classes = {int(r[0]): r for r in fetchall(conn, _CLASS_SQL, (wanted,))}
    columns: dict[int, list[ColumnFacts]] = {}
    for r in fetchall(conn, _COLUMN_SQL, (wanted,)):
        columns.setdefault(int(r[0]), []).append(
            ColumnFacts(
                r[1],
                int(r[2]),
                r[3],
                bool(r[4]),
                bool(r[5]),
                storage=r[6],
                max_bytes=int(r[7]) if r[7] is not None else None,
            )
        )
    whole: set[int] = set()  # tables whose sample read every row
    if sample_toast:
        for oid, cols in columns.items():
            row = classes.get(oid)
            if row is None or not row[8] or not row[9]:
                continue
            seen = _toast_sample(conn, row[1], row[2], cols)
            if seen.pop(_EVERY_ROW, None):
                whole.add(oid)
            columns[oid] = [
                replace(c, out_of_line=seen[c.name][0], sampled_bytes=seen[c.name][1])
                if c.name in seen
                else c
                for c in cols
            ]
    indexes: dict[int, list[tuple[IndexFacts, bool, bool]]] = {}
    for ix in fetchall(conn, _INDEX_SQL, (wanted,)):
        facts = IndexFacts(
            name=ix[1],
            columns=tuple(ix[9]),
            valid=bool(ix[2]),
            unique=bool(ix[3]),
            immediate=bool(ix[4]),
            partial=bool(ix[5]),
            ready=bool(ix[6]),
        )
        indexes.setdefault(int(ix[0]), []).append((facts, bool(ix[7]), bool(ix[8])))
    out = []
    for oid in wanted:
        row = classes.get(oid)
        if row is None:
            continue
        primary = next((f for f, is_pk, _ in indexes.get(oid, ()) if is_pk), None)
        identity = next((f for f, _, is_ri in indexes.get(oid, ()) if is_ri), None)
        uniques = tuple(f for f, _, _ in indexes.get(oid, ()) if f.unique)
        root = f"{quote_ident(row[6])}.{quote_ident(row[7])}" if row[6] is not None else None
        partitions: tuple[str, ...] = ()
        if row[3] == "p":
            partitions = tuple(
                f"{quote_ident(r[0])}.{quote_ident(r[1])}"
                for r in fetchall(
                    conn,
                    "SELECT n.nspname, c.relname FROM pg_partition_tree(%s::oid::regclass) t "
                    "JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE t.isleaf ORDER BY 1, 2",
                    (oid,),
                )
            )
        out.append(
            TableFacts(
                oid=oid,
                schema=row[1],
                name=row[2],
                relkind=row[3],
                replica_identity=row[4],
                is_partition=bool(row[5]),
                columns=tuple(columns.get(oid, ())),
                primary_key=primary,
                identity_index=identity,
                unique_indexes=uniques,
                partitions=partitions,
                partition_root=root,
                toast_bytes=int(row[8]) if row[8] is not None else None,
                selectable=bool(row[9]),
                toast_sampled_every_row=oid in whole,
            )
        )
    return out


def leaf_oids(conn: PgConnection, oid: int) -> list[int]:
    """The leaf partitions of a partitioned table."""
    return [
        int(r[0])
        for r in fetchall(
            conn,
            "SELECT relid::oid FROM pg_partition_tree(%s::oid::regclass) WHERE isleaf",
            (oid,),
        )
    ]
