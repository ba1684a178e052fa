"""Statements the Spark source's driver runs beyond slots: the columns of a table it
reads typed (``option("table", "schema.table")``), with their types as pg_type and
pg_attribute say."""

from __future__ import annotations

from dataclasses import dataclass, replace

from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import fetchall
from pgtail.errors import ConfigurationError


@dataclass(frozen=True, slots=True)
class ColumnType:
    name: str
    type_oid: int
    type_name: str  # format_type(), e.g. numeric(12,2), text[]
    typmod: int  # -1 when none
    element_oid: int  # the element type of an array, 0 otherwise
    dimensions: int  # attndims (0 when not declared)
    # for a domain: the type it is a domain over (through domains over domains), its
    # typmod and element type; 0 otherwise
    base_oid: int = 0
    base_typmod: int = -1
    base_element_oid: int = 0


def table_columns(conn: PgConnection, schema: str, table: str) -> list[ColumnType]:
    """The table's columns in order (dropped ones left out); `ConfigurationError` when
    there is no such table."""
    rows = fetchall(
        conn,
        "SELECT a.attname, a.atttypid::int, format_type(a.atttypid, a.atttypmod),"
        " a.atttypmod, t.typelem::int, a.attndims, t.typtype::text"
        " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " JOIN pg_type t ON t.oid = a.atttypid"
        " WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped"
        " AND c.relkind IN ('r', 'p') ORDER BY a.attnum",
        (schema, table),
    )
    if not rows:
        raise ConfigurationError(
            f"table {schema}.{table} does not exist (or has no columns)",
            hint='option("table", "schema.table") names a published table',
        )
    columns = [
        ColumnType(
            name=str(r[0]),
            type_oid=int(r[1]),
            type_name=str(r[2]),
            typmod=int(r[3]),
            element_oid=int(r[4]) if str(r[2]).endswith("]") else 0,
            dimensions=int(r[5]),
        )
        for r in rows
    ]
    domains = {int(r[1]) for r in rows if r[6] == "d"}
    if not domains:
        return columns
    bases = {oid: _domain_base(conn, oid) for oid in domains}
    return [
        replace(c, base_oid=bases[c.type_oid][0], base_typmod=bases[c.type_oid][1],
                base_element_oid=bases[c.type_oid][2])
        if c.type_oid in bases
        else c
        for c in columns
    ]  # fmt: skip


_MAX_DOMAIN_DEPTH = 16


def _domain_base(conn: PgConnection, oid: int) -> tuple[int, int, int]:
    """(base type, typmod, element type of the base if an array) of a domain, through
    domains over domains; the typmod is the nearest one a domain declares."""
    typmod = -1
    for _ in range(_MAX_DOMAIN_DEPTH):
        row = fetchall(
            conn,
            "SELECT t.typtype::text, t.typbasetype::int, t.typtypmod, b.typelem::int,"
            " b.typtype::text, b.typcategory::text"
            " FROM pg_type t JOIN pg_type b ON b.oid = t.typbasetype WHERE t.oid = %s",
            (oid,),
        )
        if not row:
            break
        _, base, declared, element, base_kind, category = row[0]
        if typmod == -1:
            typmod = int(declared)
        if base_kind != "d":
            return int(base), typmod, int(element) if category == "A" else 0
        oid = int(base)
    return 0, -1, 0  # not resolved: the column's own type decides (text)
