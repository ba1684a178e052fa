"""Statements the Spark source's driver runs beyond slots: the columns of a table it
reads typed (``option("table", "schema.table")``), with their types as pg_type and
pg_attribute say."""

from __future__ import annotations

from dataclasses import dataclass

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


def table_columns(conn: PgConnection, schema: str, table: str) -> list[ColumnType]:
    """The table's columns in order (dropped ones left out); `ConfigurationError` when
    there is no such table."""
    rows = fetchall(
        conn,
        "SELECT a.attname, a.atttypid::int, format_type(a.atttypid, a.atttypmod),"
        " a.atttypmod, t.typelem::int, a.attndims"
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
    return [
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
