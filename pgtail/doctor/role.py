"""The doctor's role room: what the connecting role may do, judged by what it is about
to do: stream (REPLICATION), create a publication (CREATE on the database, ownership of
the tables), copy the published tables' current rows (SELECT)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail.doctor.findings import Check, Status, ident

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        DoctorFacts,
    )


def role_checks(facts: DoctorFacts) -> list[Check]:
    """What the role may do, judged by what it is about to do: streaming needs REPLICATION;
    creating a publication (one asked for that does not exist yet) needs CREATE on the
    database and ownership of the tables; reading the published tables (SELECT) is needed
    only to copy their current rows."""
    role = facts.role
    name = ident(role.name)
    checks: list[Check] = []
    if role.superuser:
        checks.append(
            Check(
                "replication_privilege", "role", role.name, "ok", f"role {role.name} is a superuser"
            )
        )
    elif role.replication:
        checks.append(
            Check(
                "replication_privilege",
                "role",
                role.name,
                "ok",
                f"role {role.name} has REPLICATION",
            )
        )
    elif role.managed_roles:
        checks.append(
            Check(
                "replication_privilege",
                "role",
                role.name,
                "ok",
                f"role {role.name} is a member of {', '.join(role.managed_roles)}",
            )
        )
    else:
        checks.append(
            Check(
                "replication_privilege",
                "role",
                role.name,
                "fail",
                f"role {role.name} has no REPLICATION privilege: it cannot create slots or stream",
                f"ALTER ROLE {name} REPLICATION; -- as a superuser "
                f"(on RDS/Aurora: GRANT rds_replication TO {name};)",
            )
        )
    checks.append(_create_publication_check(facts))
    if not role.superuser:
        checks.extend(_select_checks(facts))
    return checks


def _create_publication_check(facts: DoctorFacts) -> Check:
    role = facts.role
    name = ident(role.name)
    if role.superuser:
        return Check("create_publication", "role", role.name, "ok", "may create any publication")
    found = {p.name for p in facts.publications}
    missing = [p for p in facts.requested_publications if p not in found]
    owns_nothing = role.tables_owned == 0 and role.tables_not_owned > 0
    lacking: list[str] = []
    fix: list[str] = []
    if not role.can_create_in_database:
        lacking.append(f"CREATE on database {role.database}")
        fix.append(f"GRANT CREATE ON DATABASE {ident(role.database)} TO {name};")
    if role.tables_not_owned:
        others = ", ".join(role.owners_not_held)
        lacking.append(f"ownership of {role.tables_not_owned} table(s) (owned by {others})")
        for owner in role.owners_not_held:
            if owner not in role.superuser_owners:
                fix.append(f"GRANT {ident(owner)} TO {name};")
        shown = 0
        for table, owner in role.examples_not_owned:
            if owner in role.superuser_owners:
                # membership in a superuser role is no fix: hand these tables over instead
                fix.append(f"ALTER TABLE {table} OWNER TO {name};")
                shown += 1
        if role.superuser_owned > shown:
            fix.append(
                f"-- and {role.superuser_owned - shown} more table(s) owned by "
                f"{', '.join(role.superuser_owners)}"
            )
    if not lacking:
        return Check(
            "create_publication",
            "role",
            role.name,
            "ok",
            f"may CREATE PUBLICATION in {role.database} for the tables it owns "
            "(FOR ALL TABLES / TABLES IN SCHEMA need a superuser)",
        )
    blocked = not role.can_create_in_database or owns_nothing
    needs = " and ".join(lacking)
    if missing and blocked:
        status: Status = "fail"
        summary = (
            f"role {role.name} cannot create publication {', '.join(map(repr, missing))}: "
            f"it lacks {needs}"
        )
    elif not facts.requested_publications and not facts.publications and blocked:
        status = "warn"
        summary = (
            f"role {role.name} cannot create the publication this database lacks: it lacks {needs}"
        )
    else:
        status = "info"
        task = (
            "streams existing publications"
            if not missing
            else "may publish only the tables it owns"
        )
        summary = f"role {role.name} {task}; creating a publication would need {needs}"
    if status == "info":
        fix = []  # the task needs none of it: handing tables over is no fix then
    return Check("create_publication", "role", role.name, status, summary, " ".join(fix) or None)


def _select_checks(facts: DoctorFacts) -> list[Check]:
    published = {r.table_oid for r in facts.publication_rows}
    unreadable = [t.qualified for t in facts.tables if t.oid in published and not t.selectable]
    if not published:
        return []
    role = facts.role
    if not unreadable:
        return [
            Check(
                "select_privilege",
                "role",
                role.name,
                "ok",
                f"role {role.name} may read the published tables (to copy their current rows)",
            )
        ]
    return [
        Check(
            "select_privilege",
            "role",
            role.name,
            "info",
            f"role {role.name} may not SELECT {', '.join(unreadable)}: streaming their changes "
            "works, copying their current rows (an initial copy) does not",
            f"GRANT SELECT ON {', '.join(unreadable)} TO {ident(role.name)};",
        )
    ]
