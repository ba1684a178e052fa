"""Tables' shapes for SQL replay's DDL: each column's type as DDL writes it, NOT NULL,
a constant default, its number; the primary key; the replica identity index. Looked
up here, on an ordinary connection, and handed to the pure layers
(`pgtail.changes.ddl`).
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import fetchall
from pgtail.changes.ddl import ShapeColumn, TableShape

# A default is written only when it is a constant: a literal, through type casts only
# (as ALTER COLUMN ... TYPE leaves one); one that calls a function (now(), nextval(),
# CURRENT_TIMESTAMP) or an operator gives the target other values. Read from the
# expression's node tree: no node but Const and casts, no function call but a cast's.
_COLUMNS_SQL = r"""
SELECT a.attrelid::int, a.attname::text, a.attnum::int, a.atttypid::int, a.atttypmod,
       format_type(a.atttypid, a.atttypmod), a.attnotnull,
       CASE WHEN d.adbin::text !~ '\{(?!CONST |FUNCEXPR |RELABELTYPE |COERCEVIAIO )'
                 AND d.adbin::text !~ ':funcformat [03]'
            THEN pg_get_expr(d.adbin, d.adrelid) END
FROM pg_attribute a
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
  AND a.attgenerated = ''
ORDER BY a.attrelid, a.attnum
"""

_TABLES_SQL = """
SELECT c.oid::int, n.nspname::text, c.relname::text,
       ARRAY(SELECT a.attname::text FROM pg_index i
             JOIN unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord) ON true
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE i.indrelid = c.oid AND i.indisprimary ORDER BY k.ord),
       (SELECT ic.relname::text FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
        WHERE i.indrelid = c.oid AND i.indisreplident)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = ANY(%s::oid[])
"""


def table_shapes(conn: PgConnection, oids: Sequence[int]) -> dict[int, TableShape | None]:
    """The shape of each of ``oids``; None for a table the catalog no longer has."""
    wanted = [int(o) for o in oids]
    columns: dict[int, list[ShapeColumn]] = {}
    for rid, name, attnum, type_oid, typmod, type_sql, not_null, default in fetchall(
        conn, _COLUMNS_SQL, (wanted,)
    ):
        columns.setdefault(rid, []).append(
            ShapeColumn(name, attnum, type_oid, typmod, type_sql, bool(not_null), default)
        )
    shapes: dict[int, TableShape | None] = dict.fromkeys(wanted)
    for rid, schema, name, primary_key, identity_index in fetchall(conn, _TABLES_SQL, (wanted,)):
        shapes[rid] = TableShape(
            rid, schema, name, tuple(columns.get(rid, ())), tuple(primary_key), identity_index
        )
    return shapes
