"""Everything `pgtail doctor` judges, read in one connection (`doctor_facts`).

Facts only: the judging is `pgtail.doctor`'s, called by the command with what this
returns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import psycopg2
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.activity import replication_facts
from pgtail.catalog.connection import connect, fetchall, fetchone
from pgtail.catalog.facts import (
    MANAGED_REPLICATION_ROLES,
    DoctorFacts,
    RoleFacts,
    ServerFacts,
    WalsenderFacts,
)
from pgtail.catalog.names import parse_ident, split_names
from pgtail.catalog.publications import (
    publication_table_rows,
    read_publications,
    run_publications,
)
from pgtail.catalog.server import server_version_num, settings
from pgtail.catalog.slots import slot_listing
from pgtail.catalog.tables import leaf_oids, table_facts
from pgtail.sqlnames import quote_ident

# user tables (not partitions: their root is what gets published); the current role may
# publish those it owns or whose owner's privileges it has (pg_has_role ... 'USAGE')
_USER_TABLES = """
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_roles o ON o.oid = c.relowner
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'
"""
_OWNED = _USER_TABLES + "AND pg_has_role(c.relowner, 'USAGE') "
_NOT_OWNED = _USER_TABLES + "AND NOT pg_has_role(c.relowner, 'USAGE') "

_PUBNAMES = re.compile(r"\"?publication_names\"?\s+'((?:[^']|'')*)'", re.IGNORECASE)
_SLOTNAME = re.compile(r'START_REPLICATION\s+SLOT\s+("(?:[^"]|"")*"|\S+)', re.IGNORECASE)


# a catalog object dropped between two statements (or inside a view's function, as
# pg_publication_tables' pg_get_publication_tables): undefined object / table; or
# dropped between the statement's snapshot and the server's catalog cache lookup, which
# PostgreSQL reports as an internal error (XX000) "cache lookup failed for publication N"
_CATALOG_CHANGED = ("42704", "42P01")
_READS = 5


def _catalog_changed(exc: psycopg2.Error) -> bool:
    if exc.pgcode in _CATALOG_CHANGED:
        return True
    return exc.pgcode == "XX000" and "cache lookup failed" in str(exc.pgerror or "")


# user tables that may lack a replica identity (no primary key under DEFAULT, NOTHING, or
# an index to look at): `pgtail.doctor` decides with `identity_of`
_KEYLESS = """
SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
  AND (c.relreplident IN ('n', 'i') OR (c.relreplident = 'd' AND NOT EXISTS (
       SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)))
ORDER BY n.nspname, c.relname LIMIT 20
"""


def doctor_facts(
    dsn: str | None, publications: Sequence[str] = (), slots: Sequence[str] = ()
) -> DoctorFacts:
    """Everything `pgtail doctor` judges, read in one connection.

    A publication or table dropped while doctor reads (a run replacing its publication,
    a migration) makes it read everything again, up to five times, instead of failing.
    """
    with connect(dsn) as conn:
        for attempt in range(_READS):
            try:
                return _read_facts(conn, publications, slots)
            except psycopg2.Error as exc:
                if attempt == _READS - 1 or not _catalog_changed(exc):
                    raise
    raise AssertionError("unreachable")


def _read_facts(
    conn: PgConnection, publications: Sequence[str], slots: Sequence[str]
) -> DoctorFacts:
    server, walsenders = _server_facts(conn)
    role = _role_facts(conn)
    all_pubs = tuple(r[0] for r in fetchall(conn, "SELECT pubname FROM pg_publication ORDER BY 1"))
    wanted = list(publications) if publications else list(all_pubs)
    found_pubs = tuple(p for name in wanted for p in read_publications(conn, name))
    pub_rows = tuple(publication_table_rows(conn, [p.name for p in found_pubs]))
    oids = sorted({r.table_oid for r in pub_rows})
    tables = table_facts(conn, oids, sample_toast=True)
    # leaf partitions of published partitioned tables: UPDATE/DELETE checks happen there
    leaves = sorted(
        {leaf for t in tables if t.relkind == "p" for leaf in leaf_oids(conn, t.oid)} - set(oids)
    )
    tables += table_facts(conn, leaves, sample_toast=True)
    listing = slot_listing(conn)
    run_pubs = tuple(run_publications(conn))
    keyless = () if all_pubs else tuple(table_facts(conn, [r[0] for r in fetchall(conn, _KEYLESS)]))
    return DoctorFacts(
        server=server,
        role=role,
        requested_publications=tuple(publications),
        publications=found_pubs,
        tables=tuple(tables),
        publication_rows=pub_rows,
        requested_slots=tuple(slots),
        slots=listing,
        walsenders=tuple(walsenders),
        all_publications=all_pubs,
        run_publications=run_pubs,
        replication=replication_facts(conn),
        keyless_tables=keyless,
    )


def _server_facts(conn: PgConnection) -> tuple[ServerFacts, list[WalsenderFacts]]:
    """The server's version, settings, recovery state and WAL senders (and what they read)."""
    version = server_version_num(conn)
    server_settings = settings(conn)
    in_recovery = bool(fetchone(conn, "SELECT pg_is_in_recovery()")[0])
    slots_in_use = int(fetchone(conn, "SELECT count(*) FROM pg_replication_slots")[0])
    senders_rows = fetchall(
        conn,
        "SELECT pid, datname, coalesce(query, '') FROM pg_stat_activity "
        "WHERE backend_type = 'walsender'",
    )
    walsenders = []
    for pid, datname, query in senders_rows:
        slot_match = _SLOTNAME.search(query)
        pub_match = _PUBNAMES.search(query)
        slot_name = None
        if slot_match:
            raw = slot_match.group(1)
            slot_name = parse_ident(raw, 0)[0] if raw.startswith('"') else raw
        pubs = split_names(pub_match.group(1).replace("''", "'")) if pub_match else ()
        walsenders.append(WalsenderFacts(int(pid), datname, slot_name, pubs))
    source = fetchone(conn, "SELECT source FROM pg_settings WHERE name = 'wal_level'")
    server = ServerFacts(
        version,
        server_settings,
        slots_in_use,
        len(senders_rows),
        in_recovery,
        wal_level_source=str(source[0]) if source else None,
    )
    return server, walsenders


def _role_facts(conn: PgConnection) -> RoleFacts:
    """The connected role: its attributes, replication roles held, and table ownership."""
    role_row = fetchone(
        conn,
        "SELECT r.rolname, r.rolsuper, r.rolreplication, "
        "has_database_privilege(current_database(), 'CREATE'), current_database() "
        "FROM pg_roles r WHERE r.rolname = current_user",
    )
    managed = tuple(
        r[0]
        for r in fetchall(
            conn,
            "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) "
            "AND pg_has_role(current_user, oid, 'MEMBER') ORDER BY 1",
            (list(MANAGED_REPLICATION_ROLES),),
        )
    )
    owned = int(fetchone(conn, "SELECT count(*) " + _OWNED)[0])
    owners = fetchall(
        conn,
        "SELECT o.rolname, o.rolsuper, count(*) " + _NOT_OWNED + "GROUP BY 1, 2 ORDER BY 1",
    )
    examples = fetchall(
        conn,
        "SELECT n.nspname, c.relname, o.rolname " + _NOT_OWNED + "ORDER BY 1, 2 LIMIT 10",
    )
    return RoleFacts(
        role_row[0],
        bool(role_row[1]),
        bool(role_row[2]),
        managed,
        bool(role_row[3]),
        role_row[4],
        tables_owned=owned,
        tables_not_owned=sum(int(r[2]) for r in owners),
        owners_not_held=tuple(r[0] for r in owners),
        examples_not_owned=tuple(
            (f"{quote_ident(r[0])}.{quote_ident(r[1])}", r[2]) for r in examples
        ),
        superuser_owners=tuple(r[0] for r in owners if r[1]),
        superuser_owned=sum(int(r[2]) for r in owners if r[1]),
    )
