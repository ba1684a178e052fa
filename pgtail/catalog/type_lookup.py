"""User types (enums, domains, arrays of them) as `pgtail.values` needs them: what
pg_type says of the type OIDs pgoutput names, and of the element and base types they
lead to. Looked up here, on an ordinary connection, and handed to the pure layers.
"""

from __future__ import annotations

from collections.abc import Sequence

from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import connect, fetchall
from pgtail.values import UserType

# The types pgoutput names by OID, with the element and base types they lead to.
_USER_TYPES_SQL = """
WITH RECURSIVE wanted(oid) AS (
    SELECT unnest(%s::oid[])
    UNION
    SELECT next.oid
    FROM wanted
    JOIN pg_type t ON t.oid = wanted.oid
    CROSS JOIN LATERAL (VALUES (t.typelem), (t.typbasetype)) AS next(oid)
    WHERE next.oid <> 0
)
SELECT t.oid::bigint, t.typtype::text,
       CASE WHEN t.typcategory = 'A' THEN t.typelem ELSE 0 END::bigint,
       t.typbasetype::bigint
FROM pg_type t JOIN wanted USING (oid)
"""


def lookup_user_types(dsn: str | None, type_oids: Sequence[int]) -> dict[int, UserType]:
    """`user_types` on a connection of its own, for a caller about to feed an Assembler a
    Relation message whose types are not built in (see `Assembler.user_types_wanted`)."""
    with connect(dsn) as conn:
        return user_types(conn, type_oids)


def user_types(conn: PgConnection, type_oids: Sequence[int]) -> dict[int, UserType]:
    """What pg_type says of these types and the element / base types they lead to, for
    `pgtail.values.converters` (types that are not built in: enums, domains, arrays)."""
    if not type_oids:
        return {}
    rows = fetchall(conn, _USER_TYPES_SQL, (list(type_oids),))
    return {int(oid): UserType(kind, int(element), int(base)) for oid, kind, element, base in rows}
