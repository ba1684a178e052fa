"""The doctor's publications room: the publications asked for and the tables they
publish (each judged by the tables room), publications a `pgtail stream
--create-publication` run left behind, and the guard the catalog's publication DDL runs
before it commits."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pgtail.doctor.findings import Check, ident
from pgtail.doctor.tables import (
    identity_fix,
    identity_of,
    table_checks,
    table_publication_checks,
)

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        DoctorFacts,
        PublicationInfo,
        PublicationTableRow,
        TableFacts,
    )


def publication_problems(
    pub: PublicationInfo, tables: Sequence[tuple[TableFacts, PublicationTableRow | None]]
) -> list[str]:
    """The failing checks of tables a publication change newly publishes, one line each
    with its fix: the guard `pgtail.catalog.create_publication` / `alter_publication`
    run before they commit."""
    return [
        f"{check.summary}; fix: {check.fix}"
        for table, row in tables
        for check in table_publication_checks(table, pub, row)
        if check.status == "fail"
    ]


def _create_publication_fix(facts: DoctorFacts, name: str) -> str:
    # Which tables to publish is the user's choice; a superuser may publish them all.
    # Not CREATE PUBLICATION ... FOR ALL TABLES: a table without a replica identity
    # would fail its next UPDATE/DELETE. `publication create` refuses exactly that and
    # names each such table's fix.
    if facts.role.superuser:
        create = f"pgtail publication create {shlex.quote(name)} --all-tables"
        keyless = [t for t in facts.keyless_tables if identity_of(t).mode == "nothing"]
        if not keyless:
            return create + "  # refuses while a table has no replica identity, naming its fix"
        first = " ".join(identity_fix(t) for t in keyless[:3])
        more = f" (and {len(keyless) - 3} more tables like them)" if len(keyless) > 3 else ""
        return f"first give each table a replica identity: {first}{more}; then: {create}"
    return (
        f"pgtail publication create {shlex.quote(name)} --table SCHEMA.TABLE"
        "  # the tables to stream"
    )


def publication_checks(facts: DoctorFacts) -> list[Check]:
    checks: list[Check] = []
    found = {p.name for p in facts.publications}
    for name in facts.requested_publications:
        if name not in found:
            checks.append(
                Check(
                    "publication.exists",
                    "publication",
                    name,
                    "fail",
                    f"publication {name!r} does not exist in database {facts.role.database}",
                    _create_publication_fix(facts, name),
                )
            )
    if not facts.requested_publications and not facts.publications:
        checks.append(
            Check(
                "publication.exists",
                "publication",
                facts.role.database,
                "warn",
                f"database {facts.role.database} has no publication: there is nothing to stream",
                _create_publication_fix(facts, "pgtail"),
            )
        )
    tables_by_oid = {t.oid: t for t in facts.tables}
    tables_by_name = {t.qualified: t for t in facts.tables}
    # each table once, with every publication that publishes it (a leaf partition with
    # its root's row)
    published: dict[int, list[tuple[PublicationInfo, PublicationTableRow | None]]] = {}
    for pub in facts.publications:
        what = "all tables" if pub.all_tables else f"{len(pub.published_tables)} table(s)"
        if pub.schemas:
            what += f" (schemas {', '.join(pub.schemas)})"
        if not pub.published_tables:
            checks.append(
                Check(
                    "publication.tables",
                    "publication",
                    pub.name,
                    "warn",
                    f"publication {pub.name!r} publishes no table yet",
                    f"ALTER PUBLICATION {ident(pub.name)} ADD TABLE <schema.table>;",
                )
            )
        else:
            checks.append(
                Check(
                    "publication.tables",
                    "publication",
                    pub.name,
                    "ok",
                    f"publishes {', '.join(pub.operations) or 'nothing'} on {what}"
                    + (", via partition root" if pub.via_partition_root else ""),
                )
            )
        for row in facts.publication_rows:
            if row.publication != pub.name:
                continue
            table = tables_by_oid.get(row.table_oid)
            if table is None:
                continue
            published.setdefault(table.oid, []).append((pub, row))
            for leaf_name in table.partitions if table.relkind == "p" else ():
                leaf = tables_by_name.get(leaf_name)
                if leaf is not None and leaf.oid != table.oid:
                    published.setdefault(leaf.oid, []).append((pub, row))  # root filter applies
    for oid, pairs in published.items():
        checks.extend(table_checks(tables_by_oid[oid], pairs))
    return checks


def run_publication_checks(facts: DoctorFacts) -> list[Check]:
    """Publications `pgtail stream --create-publication` made for a run that is gone
    (killed before it could drop them): warn, with the statement that drops them. One
    whose run still lives is fine. A plain `pgtail stream` ignores both when it picks
    the database's only publication, and drops the leftovers it may drop."""
    checks: list[Check] = []
    for pub in facts.run_publications:
        if pub.run_alive:
            checks.append(
                Check(
                    "publication.run",
                    "publication",
                    pub.name,
                    "ok",
                    f"made for a running pgtail stream ({pub.made_by}); dropped when it ends",
                )
            )
        else:
            checks.append(
                Check(
                    "publication.run",
                    "publication",
                    pub.name,
                    "warn",
                    f"left behind by a pgtail stream --create-publication run that is gone "
                    f"({pub.made_by}); the next pgtail stream drops it, or drop it now",
                    pub.drop_statement,
                )
            )
    return checks
