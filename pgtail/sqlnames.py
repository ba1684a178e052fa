"""SQL names as PostgreSQL writes them: `quote_ident` and the key words it must quote.

Pure (no psycopg2, no I/O) so that every layer can use it: the catalog for messages and
suggested fixes, the SQL renderer for the statements it writes. Statements pgtail runs
itself pass names through ``psycopg2.sql.Identifier`` instead; this is for text a person
reads or replays. A test compares `quote_ident` with the server's own ``quote_ident()``
for every word of ``pg_get_keywords()``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Every key word that is not "unreserved" (reserved, column-name and type/function-name
# key words) as of PostgreSQL 18: an identifier spelled like one must be quoted, as the
# server's quote_ident() does. Quoting a word an older server does not reserve is
# harmless (the quoted name is the same name); tests check the list on each server.
RESERVED_KEYWORDS = frozenset(
    """
    all analyse analyze and any array as asc asymmetric authorization between bigint binary bit
    boolean both case cast char character check coalesce collate collation column concurrently
    constraint create cross current_catalog current_date current_role current_schema
    current_time current_timestamp current_user dec decimal default deferrable desc distinct do
    else end except exists extract false fetch float for foreign freeze from full grant
    greatest group grouping having ilike in initially inner inout int integer intersect
    interval into is isnull join json json_array json_arrayagg json_exists json_object
    json_objectagg json_query json_scalar json_serialize json_table json_value lateral leading
    least left like limit localtime localtimestamp merge_action national natural nchar none
    normalize not notnull null nullif numeric offset on only or order out outer overlaps
    overlay placing position precision primary real references returning right row select
    session_user setof similar smallint some substring symmetric system_user table tablesample
    then time timestamp to trailing treat trim true union unique user using values varchar
    variadic verbose when where window with xmlattributes xmlconcat xmlelement xmlexists
    xmlforest xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable
    """.split()  # noqa: SIM905
)

_BARE_IDENT = re.compile(r"[a-z_][a-z0-9_$]*\Z")


def quote_ident(name: str) -> str:
    """``name`` as an SQL identifier, quoted only when PostgreSQL needs it.

    Bare when it is all lower-case ASCII letters, digits, ``_`` and ``$`` (not
    starting with a digit or ``$``) and not a non-unreserved key word; otherwise in
    double quotes with embedded double quotes doubled. (The server's quote_ident()
    also quotes a ``$`` after the first character; bare, it reads the same name.)
    """
    if _BARE_IDENT.match(name) and name not in RESERVED_KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_qualified(schema: str, name: str) -> str:
    """``schema.name`` with each part quoted as needed."""
    return quote_ident(schema) + "." + quote_ident(name)


def publication_names_option(names: Sequence[str]) -> str:
    """The ``publication_names`` value pgoutput expects: each name always quoted (the
    server splits it with SplitIdentifierString), comma-separated."""
    return ",".join('"' + n.replace('"', '""') + '"' for n in names)
