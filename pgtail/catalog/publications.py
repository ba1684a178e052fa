"""Publications: list, create, alter, drop, and what each publishes table by table.

Version differences are decided here, once: ``pubviaroot`` and the
``publish_via_partition_root`` option exist from PostgreSQL 13; row filters, column
lists and ``TABLES IN SCHEMA`` from 15.

DDL that adds tables runs in a transaction; a caller-supplied guard (the doctor's
replica identity rule, see `pgtail.doctor.publication_problems`) looks at the tables
it newly publishes before the commit, so a publication that would make UPDATE or
DELETE fail is refused, or kept with warnings under ``force``.

Also the publications `pgtail stream --create-publication` makes for one run: marked by
a comment, held by an advisory lock while the run lives, found and dropped once it is
gone (see "run publications" below); and the columns a stream's publications send.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg2
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import connect, fetchall, fetchone
from pgtail.catalog.errors import primary_message, publication_missing_error
from pgtail.catalog.facts import (
    PublicationInfo,
    PublicationTableRow,
    PublishedTable,
    RunPublication,
    TableFacts,
)
from pgtail.catalog.names import OPERATIONS, TableSpec, check_row_filter
from pgtail.catalog.server import current_database, server_version_num
from pgtail.catalog.tables import leaf_oids, resolve_table, table_facts
from pgtail.errors import ConfigurationError, PublicationError, ServerCapabilityError
from pgtail.sqlnames import quote_ident

# what a guard sees: the publication after the change, and each table it newly publishes
# (with partitions of a newly published partitioned table) with its row filter and
# column list; it returns one line per problem ("...; fix: ...")
PublicationGuard = Callable[
    [PublicationInfo, Sequence[tuple[TableFacts, PublicationTableRow | None]]], Sequence[str]
]

VIA_ROOT_VERSION = 130000  # pubviaroot, publish_via_partition_root
FILTERS_VERSION = 150000  # row filters, column lists, TABLES IN SCHEMA


def publication_columns(version: int) -> list[str]:
    """The pg_publication select list this server version has (pubviaroot from 13)."""
    return [
        "p.oid",
        "p.pubname",
        "pg_get_userbyid(p.pubowner)",
        "p.puballtables",
        "p.pubinsert",
        "p.pubupdate",
        "p.pubdelete",
        "p.pubtruncate",
        "p.pubviaroot" if version >= VIA_ROOT_VERSION else "false",
    ]


def _with_options(
    version: int, operations: Sequence[str], via_partition_root: bool
) -> sql.Composable:
    """CREATE PUBLICATION's WITH clause; publish_via_partition_root only where the server
    knows it (asked for on PostgreSQL 12, it is an error)."""
    publish = sql.Literal(", ".join(operations))
    if version >= VIA_ROOT_VERSION:
        return sql.SQL(" WITH (publish = {}, publish_via_partition_root = {})").format(
            publish, sql.Literal(via_partition_root)
        )
    if via_partition_root:
        raise ServerCapabilityError(
            "publish_via_partition_root needs PostgreSQL 13 or later"
            f" (server is {version // 10000})"
        )
    return sql.SQL(" WITH (publish = {})").format(publish)


def publication_names(conn: PgConnection) -> list[str]:
    """The names of every publication of the database, sorted."""
    return [r[0] for r in fetchall(conn, "SELECT pubname FROM pg_publication ORDER BY pubname")]


def require_publications(
    conn: PgConnection, names: Sequence[str], *, hint: str | None = None
) -> None:
    """`PublicationError` naming the first of ``names`` that does not exist."""
    existing = {
        r[0]
        for r in fetchall(
            conn, "SELECT pubname FROM pg_publication WHERE pubname = ANY(%s)", (list(names),)
        )
    }
    missing = [n for n in names if n not in existing]
    if missing:
        raise publication_missing_error(
            missing[0],
            current_database(conn),
            hint=hint.format(name=missing[0]) if hint else None,
        )


_VARATTNO = re.compile(r":varattno (\d+)")


def publication_table_rows(
    conn: PgConnection, publications: Sequence[str]
) -> list[PublicationTableRow]:
    if not publications:
        return []
    if server_version_num(conn) < FILTERS_VERSION:
        return [
            PublicationTableRow(r[0], int(r[1]), None, None, ())
            for r in fetchall(
                conn,
                "SELECT pubname, format('%%I.%%I', schemaname, tablename)::regclass::oid "
                "FROM pg_publication_tables WHERE pubname = ANY(%s) ORDER BY 1, 2",
                (list(publications),),
            )
        ]
    rows = fetchall(
        conn,
        "SELECT pt.pubname, pt.relid, "
        "  CASE WHEN r.prattrs IS NULL THEN NULL ELSE ARRAY(SELECT a.attname::text "
        "    FROM unnest(r.prattrs::int2[]) k(attnum) JOIN pg_attribute a "
        "    ON a.attrelid = r.prrelid AND a.attnum = k.attnum ORDER BY k.attnum) END, "
        "  pg_get_expr(r.prqual, r.prrelid), r.prqual::text, r.prrelid "
        "FROM (SELECT pubname, format('%%I.%%I', schemaname, tablename)::regclass::oid AS relid "
        "      FROM pg_publication_tables WHERE pubname = ANY(%s)) pt "
        "JOIN pg_publication p ON p.pubname = pt.pubname "
        # a partition published through its root gets the root's filter and column list;
        # each ancestor's row by the (prrelid, prpubid) index (OFFSET 0 keeps the lookup
        # a lookup: joined, the planner scanned the publication's every row per table)
        "LEFT JOIN LATERAL (SELECT pr.* FROM (SELECT pt.relid, 0::bigint UNION ALL "
        "  SELECT * FROM pg_partition_ancestors(pt.relid) WITH ORDINALITY) anc(relid, depth) "
        "  CROSS JOIN LATERAL (SELECT * FROM pg_publication_rel x "
        "    WHERE x.prrelid = anc.relid AND x.prpubid = p.oid OFFSET 0) pr "
        "  ORDER BY anc.depth LIMIT 1) r "
        "ON true "
        "ORDER BY 1, 2",
        (list(publications),),
    )
    out = []
    for pubname, oid, cols, row_filter, qual, rel_oid in rows:
        filter_columns: tuple[str, ...] = ()
        if qual:
            attnums = sorted({int(m) for m in _VARATTNO.findall(qual)})
            if attnums:
                filter_columns = tuple(
                    r[0]
                    for r in fetchall(
                        conn,
                        "SELECT attname::text FROM pg_attribute WHERE attrelid = %s "
                        "AND attnum = ANY(%s) ORDER BY attnum",
                        (rel_oid, attnums),
                    )
                )
        out.append(
            PublicationTableRow(
                pubname,
                int(oid),
                tuple(cols) if cols is not None else None,
                row_filter,
                filter_columns,
            )
        )
    return out


def read_publications(conn: PgConnection, name: str | None = None) -> list[PublicationInfo]:
    """Every publication of the database (or the one named), with its tables."""
    version = server_version_num(conn)
    where = " WHERE p.pubname = %s" if name is not None else ""
    pubs = fetchall(
        conn,
        "SELECT "
        + ", ".join(publication_columns(version))
        + " FROM pg_publication p"
        + where
        + " ORDER BY p.pubname",
        (name,) if name is not None else None,
    )
    out = []
    for oid, pubname, owner, alltables, ins, upd, dele, trunc, viaroot in pubs:
        if version >= FILTERS_VERSION:
            rel_rows = fetchall(
                conn,
                "SELECT n.nspname, c.relname, "
                "CASE WHEN r.prattrs IS NULL THEN NULL ELSE ARRAY(SELECT a.attname::text "
                "  FROM unnest(r.prattrs::int2[]) WITH ORDINALITY k(attnum, ord) "
                "  JOIN pg_attribute a ON a.attrelid = r.prrelid AND a.attnum = k.attnum "
                "  ORDER BY k.ord) END, "
                "pg_get_expr(r.prqual, r.prrelid) "
                "FROM pg_publication_rel r JOIN pg_class c ON c.oid = r.prrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE r.prpubid = %s "
                "ORDER BY 1, 2",
                (oid,),
            )
            schemas = tuple(
                r[0]
                for r in fetchall(
                    conn,
                    "SELECT n.nspname FROM pg_publication_namespace pn JOIN pg_namespace n "
                    "ON n.oid = pn.pnnspid WHERE pn.pnpubid = %s ORDER BY 1",
                    (oid,),
                )
            )
        else:
            rel_rows = [
                (*r, None, None)
                for r in fetchall(
                    conn,
                    "SELECT n.nspname, c.relname FROM pg_publication_rel r "
                    "JOIN pg_class c ON c.oid = r.prrelid JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE r.prpubid = %s ORDER BY 1, 2",
                    (oid,),
                )
            ]
            schemas = ()
        tables = tuple(
            PublishedTable(s, t, tuple(cols) if cols is not None else None, qual)
            for s, t, cols, qual in rel_rows
        )
        published = tuple(
            f"{quote_ident(s)}.{quote_ident(t)}"
            for s, t in fetchall(
                conn,
                "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s "
                "ORDER BY 1, 2",
                (pubname,),
            )
        )
        out.append(
            PublicationInfo(
                pubname,
                owner,
                alltables,
                ins,
                upd,
                dele,
                trunc,
                bool(viaroot),
                tables,
                schemas,
                published,
            )
        )
    return out


def list_publications(dsn: str | None) -> list[PublicationInfo]:
    """Every publication of the connected database."""
    with connect(dsn) as conn:
        return read_publications(conn)


def get_publication(dsn: str | None, name: str) -> PublicationInfo:
    with connect(dsn) as conn:
        return get_publication_on(conn, name)


def get_publication_on(conn: PgConnection, name: str) -> PublicationInfo:
    """The publication, or `PublicationError` when it does not exist."""
    found = read_publications(conn, name)
    if not found:
        raise publication_missing_error(name, current_database(conn))
    return found[0]


@dataclass(frozen=True, slots=True)
class TableTarget:
    """A ``--table`` with its optional row filter, as given to create/add."""

    spec: TableSpec
    row_filter: str | None = None


def table_clause(conn: PgConnection, target: TableTarget, version: int) -> sql.Composable:
    """``TABLE name [(columns)] [WHERE (filter)]`` for one ``--table``."""
    return sql.SQL("TABLE ") + table_reference(conn, target, version)


def table_reference(conn: PgConnection, target: TableTarget, version: int) -> sql.Composable:
    """One ``--table`` as a publication object without its keyword: the name, and the
    column list and row filter a server of ``version`` must have (15+)."""
    ref = resolve_table(conn, target.spec)
    parts: list[sql.Composable] = [ref.identifier]
    if target.spec.columns is not None:
        if version < FILTERS_VERSION:
            raise ServerCapabilityError("column lists need PostgreSQL 15 or later")
        parts.append(
            sql.SQL(" ({})").format(
                sql.SQL(", ").join(sql.Identifier(c) for c in target.spec.columns)
            )
        )
    if target.row_filter is not None:
        if version < FILTERS_VERSION:
            raise ServerCapabilityError("row filters (--where) need PostgreSQL 15 or later")
        # checked by check_row_filter: one expression that cannot close the parenthesis
        parts.append(sql.SQL(" WHERE ({})").format(sql.SQL(check_row_filter(target.row_filter))))
    return sql.Composed(parts)


def object_clauses(
    conn: PgConnection, tables: Sequence[TableTarget], schemas: Sequence[str]
) -> sql.Composable:
    """The objects of CREATE PUBLICATION ... FOR and ALTER PUBLICATION ... ADD/DROP."""
    version = server_version_num(conn)
    if version < FILTERS_VERSION:
        # before 15 the grammar has one TABLE keyword for the whole list: TABLE a, b
        references = [table_reference(conn, t, version) for t in tables]
        if schemas:
            raise ServerCapabilityError("FOR TABLES IN SCHEMA needs PostgreSQL 15 or later")
        return sql.SQL("TABLE ") + sql.SQL(", ").join(references)
    clauses = [table_clause(conn, t, version) for t in tables]
    if schemas:
        if version < FILTERS_VERSION:
            raise ServerCapabilityError("FOR TABLES IN SCHEMA needs PostgreSQL 15 or later")
        clauses.extend(sql.SQL("TABLES IN SCHEMA {}").format(sql.Identifier(s)) for s in schemas)
    return sql.SQL(", ").join(clauses)


@dataclass(frozen=True, slots=True)
class PublicationChange:
    """The outcome of create/add/remove: the publication now, and identity warnings."""

    publication: PublicationInfo
    warnings: tuple[str, ...] = ()


def create_publication(
    dsn: str | None,
    name: str,
    *,
    tables: Sequence[TableTarget] = (),
    schemas: Sequence[str] = (),
    all_tables: bool = False,
    operations: Sequence[str] = OPERATIONS,
    via_partition_root: bool = False,
    force: bool = False,
    guard: PublicationGuard | None = None,
) -> PublicationChange:
    """CREATE PUBLICATION, refusing (or warning, with ``force``) when ``guard`` finds that
    a table it adds would make UPDATE or DELETE fail for want of a replica identity."""
    bad_ops = [op for op in operations if op not in OPERATIONS]
    if bad_ops or not operations:
        raise ConfigurationError(
            f"unknown operation {bad_ops[0]!r}" if bad_ops else "no operation to publish",
            hint="--ops takes a comma-separated subset of insert,update,delete,truncate",
        )
    if all_tables and (tables or schemas):
        raise ConfigurationError("--all-tables cannot be combined with --table or --schema")
    with connect(dsn) as conn:
        target: sql.Composable
        if all_tables:
            target = sql.SQL(" FOR ALL TABLES")
        elif tables or schemas:
            target = sql.SQL(" FOR {}").format(object_clauses(conn, tables, schemas))
        else:
            target = sql.SQL("")
        options = _with_options(server_version_num(conn), operations, via_partition_root)
        statement = sql.SQL("CREATE PUBLICATION {}").format(sql.Identifier(name)) + target + options
        return guarded_ddl(conn, name, statement, force=force, guard=guard)


def alter_publication(
    dsn: str | None,
    name: str,
    action: str,
    *,
    tables: Sequence[TableTarget] = (),
    schemas: Sequence[str] = (),
    force: bool = False,
    guard: PublicationGuard | None = None,
) -> PublicationChange:
    """ALTER PUBLICATION ... ADD or DROP tables / schemas (``action`` "add" or "remove")."""
    if not tables and not schemas:
        raise ConfigurationError("nothing to change", hint="give --table and/or --schema")
    if action not in ("add", "remove"):
        raise ValueError(action)
    with connect(dsn) as conn:
        get_publication_on(conn, name)
        if action == "remove" and any(t.row_filter for t in tables):
            raise ConfigurationError("--where makes no sense with remove")
        if action == "remove":
            tables = [TableTarget(TableSpec(t.spec.schema, t.spec.name)) for t in tables]
        verb = sql.SQL(" ADD ") if action == "add" else sql.SQL(" DROP ")
        statement = (
            sql.SQL("ALTER PUBLICATION {}").format(sql.Identifier(name))
            + verb
            + object_clauses(conn, tables, schemas)
        )
        try:
            return guarded_ddl(conn, name, statement, force=force, guard=guard)
        except psycopg2.Error as exc:
            # 'relation "t" is not part of the publication' is an undefined object too:
            # not to be told as the publication missing
            message = primary_message(exc)
            if exc.pgcode == "42704" and "not part of the publication" in message:
                raise PublicationError(
                    f"{message.replace('the publication', f'publication {name!r}')}",
                    hint="pgtail publication show NAME lists what it publishes",
                ) from None
            raise


def drop_publication(dsn: str | None, name: str, *, if_exists: bool = False) -> bool:
    """DROP PUBLICATION; returns False when it did not exist (with ``if_exists``)."""
    with connect(dsn) as conn:
        exists = fetchone(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        if exists is None:
            if if_exists:
                return False
            raise publication_missing_error(
                name, current_database(conn), hint="use --if-exists to ignore a missing publication"
            )
        fetchall(conn, sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)))
        return True


def published_oids(conn: PgConnection, name: str) -> set[int]:
    return {
        int(r[0])
        for r in fetchall(
            conn,
            "SELECT format('%%I.%%I', schemaname, tablename)::regclass::oid "
            "FROM pg_publication_tables WHERE pubname = %s",
            (name,),
        )
    }


def guarded_ddl(
    conn: PgConnection,
    name: str,
    statement: sql.Composable,
    *,
    force: bool,
    guard: PublicationGuard | None,
) -> PublicationChange:
    """Run publication DDL in a transaction, look at what it newly publishes, and commit
    only if ``guard`` finds no problem with those tables (or ``force``)."""
    conn.autocommit = False
    try:
        # check_row_filter scans string literals the standard way; make the server agree
        # (with standard_conforming_strings = off, '\'' would end somewhere else)
        fetchall(conn, "SET LOCAL standard_conforming_strings = on")
        before = published_oids(conn, name)
        with conn.cursor() as cur:
            cur.execute(statement)
        pub = get_publication_on(conn, name)
        added = sorted(published_oids(conn, name) - before)
        problems: list[str] = []
        if guard is not None and added and pub.publishes_changes_needing_identity:
            facts = table_facts(conn, added)
            # published as their root, partitions still run the UPDATE/DELETE checks
            root_of = {
                leaf: f.oid
                for f in facts
                if f.relkind == "p"
                for leaf in leaf_oids(conn, f.oid)
                if leaf not in added
            }
            leaves = sorted(root_of)
            facts += table_facts(conn, leaves)
            rel_facts = {f.oid: f for f in facts}
            pub_rows = {r.table_oid: r for r in publication_table_rows(conn, [name])}
            published: list[tuple[TableFacts, PublicationTableRow | None]] = []
            for oid in [*added, *leaves]:
                tf = rel_facts.get(oid)
                if tf is None:
                    continue
                # the root's row filter and column list apply to its partitions
                published.append((tf, pub_rows.get(oid) or pub_rows.get(root_of.get(oid, -1))))
            problems = list(guard(pub, published))
        if problems and not force:
            conn.rollback()
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise PublicationError(
                f"publication {name!r} not changed: {problems[0]}{more}",
                hint="fix the replica identity first, or use --force to publish anyway",
            )
        conn.commit()
        return PublicationChange(pub, tuple(problems))
    except BaseException:
        if not conn.closed:
            conn.rollback()
        raise
    finally:
        if not conn.closed:
            conn.autocommit = True


def create_run_publication(
    conn: PgConnection,
    name: str,
    *,
    tables: Sequence[str] = (),
    schemas: Sequence[str] = (),
    comment: str | None = None,
) -> None:
    """CREATE PUBLICATION for one stream run: the given tables (``schema.table``, no
    patterns) and schemas, or FOR ALL TABLES when neither is given. With ``comment``
    (see `run_publication_comment`), COMMENT ON PUBLICATION in the same transaction, so
    no run publication is ever seen without its mark."""
    if tables or schemas:
        parts: list[sql.Composable] = []
        if tables:
            idents = []
            for t in tables:
                if any(c in t for c in "*?["):
                    raise ConfigurationError(
                        f"--create-publication needs table names, not patterns: {t!r}"
                    )
                schema, dot, table = t.rpartition(".")
                idents.append(sql.Identifier(schema, table) if dot else sql.Identifier(table))
            parts.append(sql.SQL("TABLE ") + sql.SQL(", ").join(idents))
        if schemas:
            version = server_version_num(conn)
            if version < FILTERS_VERSION:
                raise ServerCapabilityError(
                    "publishing a schema needs PostgreSQL 15 or later"
                    f" (server is {version // 10000})"
                )
            parts.append(
                sql.SQL("TABLES IN SCHEMA ")
                + sql.SQL(", ").join(sql.Identifier(s) for s in schemas)
            )
        target = sql.SQL(", ").join(parts)
    else:
        target = sql.SQL("ALL TABLES")
    statement = sql.SQL("CREATE PUBLICATION {} FOR ").format(sql.Identifier(name)) + target
    conn.autocommit = False
    try:
        fetchall(conn, statement)
        if comment is not None:
            fetchall(
                conn,
                sql.SQL("COMMENT ON PUBLICATION {} IS {}").format(
                    sql.Identifier(name), sql.Literal(comment)
                ),
            )
        conn.commit()
    except psycopg2.Error as exc:
        conn.rollback()
        raise PublicationError(
            f"cannot create publication {name!r}: {primary_message(exc)}",
            hint="FOR ALL TABLES needs a superuser; name tables with --table, or schemas with"
            " --schema",
        ) from None
    finally:
        conn.autocommit = True


# --------------------------------------------------------------------------- run publications
#
# A publication `pgtail stream --create-publication` makes lives as long as the run: the
# run drops it on the way out. A run killed with kill -9 cannot, so every run publication
# carries two marks. Its comment (RUN_PUBLICATION_MARK ...) says that pgtail made it, for
# whom and when; pgtail never takes a publication without that comment for one of its own.
# And for its whole life the run holds a session advisory lock keyed on the name, on an
# ordinary connection of its own: the server releases it the moment that session ends,
# however the process died. A run publication whose lock is free belongs to no run: the
# next stream drops it, and the doctor lists it.

RUN_PUBLICATION_PREFIX = "pgtail_run_"
RUN_PUBLICATION_MARK = "pgtail run publication:"
# the first key of the two-key advisory lock: "pgta" (pg_locks shows it as classid)
RUN_LOCK_CLASS = 0x70677461
_RUN_LOCK_KEY = "%s, hashtext(%s)"


def run_publication_comment(pid: int, host: str, started: str) -> str:
    """The comment that marks a run publication (and says whose it is)."""
    return (
        f"{RUN_PUBLICATION_MARK} pid {pid} on host {host}, started {started};"
        " dropped when that run ends"
    )


def lock_run_publication(conn: PgConnection, name: str) -> bool:
    """Take the run's advisory lock on ``name`` for the session of ``conn``; False when
    another session holds it."""
    row = fetchone(conn, f"SELECT pg_try_advisory_lock({_RUN_LOCK_KEY})", (RUN_LOCK_CLASS, name))
    return bool(row[0])


def run_publications(conn: PgConnection) -> list[RunPublication]:
    """The run publications of the database (marked by their comment), and whether the
    run that made each still holds its lock (pg_locks: reading it takes no lock)."""
    rows = fetchall(
        conn,
        "SELECT p.pubname, pg_get_userbyid(p.pubowner), d.description, EXISTS ("
        "  SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted"
        "  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        "  AND l.classid = %s::oid AND l.objid = hashtext(p.pubname)::oid AND l.objsubid = 2) "
        "FROM pg_publication p JOIN pg_description d ON d.objoid = p.oid "
        "  AND d.classoid = 'pg_publication'::regclass AND d.objsubid = 0 "
        "WHERE starts_with(d.description, %s) ORDER BY 1",
        (RUN_LOCK_CLASS, RUN_PUBLICATION_MARK),
    )
    return [
        RunPublication(name, owner, comment, bool(alive)) for name, owner, comment, alive in rows
    ]


def drop_abandoned_run_publication(conn: PgConnection, name: str) -> bool:
    """Drop the run publication ``name`` if no run holds its lock: True when dropped,
    False when its run holds it after all (or it is gone already). The lock is taken for
    the transaction, so two runs cleaning up at once cannot both drop it."""
    conn.autocommit = False
    try:
        locked = fetchone(
            conn, f"SELECT pg_try_advisory_xact_lock({_RUN_LOCK_KEY})", (RUN_LOCK_CLASS, name)
        )
        exists = fetchone(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        if not locked[0] or exists is None:
            conn.rollback()
            return False
        fetchall(conn, sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)))
        conn.commit()
        return True
    except BaseException:
        if not conn.closed:
            conn.rollback()
        raise
    finally:
        if not conn.closed:
            conn.autocommit = True


def published_columns(
    conn: PgConnection, publications: Sequence[str]
) -> dict[tuple[str, str], tuple[str, ...]]:
    """(schema, table) -> the columns the publications send of it, for every table they
    publish now (as the stream names it: the root with publish_via_partition_root). From
    PostgreSQL 15 a column list narrows the columns (pg_publication_tables.attnames)."""
    if not publications:
        return {}
    if server_version_num(conn) >= FILTERS_VERSION:
        query = (
            "SELECT schemaname::text, tablename::text, attnames::text[] "
            "FROM pg_publication_tables WHERE pubname = ANY(%s)"
        )
    else:
        query = (
            "SELECT pt.schemaname::text, pt.tablename::text, ARRAY(SELECT a.attname::text "
            "  FROM pg_attribute a WHERE a.attrelid = format('%%I.%%I', pt.schemaname,"
            "  pt.tablename)::regclass AND a.attnum > 0 AND NOT a.attisdropped "
            "  ORDER BY a.attnum) "
            "FROM pg_publication_tables pt WHERE pt.pubname = ANY(%s)"
        )
    out: dict[tuple[str, str], tuple[str, ...]] = {}
    for schema, table, columns in fetchall(conn, query, (list(publications),)):
        seen = out.get((schema, table), ())
        out[(schema, table)] = seen + tuple(c for c in columns or () if c not in seen)
    return out
