"""`pgtail doctor` checks: facts read by `pgtail.catalog` in, check results out.

Pure: no connection, no clock; of the catalog it knows only the fact types
(`pgtail.catalog.facts`). The catalog's guarded DDL calls back into
`publication_problems` and `identity_breaks`, handed to it by the command.

Each check has a status (ok / warn / fail), one line of explanation and, when
something should change, the exact fix (SQL to run). Also answers "what will the
stream carry for this table" for `pgtail identity`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from pgtail.errors import ConfigurationError
from pgtail.sqlnames import quote_ident

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        DoctorFacts,
        IdentityReport,
        IndexFacts,
        PublicationInfo,
        PublicationTableRow,
        SlotInfo,
        TableFacts,
    )

Status = Literal["ok", "warn", "fail"]
STATUS_ORDER: dict[str, int] = {"ok": 0, "warn": 1, "fail": 2}

DEFAULT_WAL_WARN_BYTES = 1024**3  # an inactive slot holding more than this is worth a warning


@dataclass(frozen=True, slots=True)
class Check:
    id: str  # stable identifier: "wal_level", "table.replica_identity", ...
    section: str  # server, role, publication, table, slot
    subject: str  # what it is about: a setting, a role, a table, a slot
    status: Status
    summary: str  # one line of explanation
    fix: str | None = None  # the exact fix (SQL to run), when there is one

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "section": self.section,
            "subject": self.subject,
            "status": self.status,
            "summary": self.summary,
            "fix": self.fix,
        }


def overall(checks: Iterable[Check]) -> Status:
    worst: Status = "ok"
    for check in checks:
        if STATUS_ORDER[check.status] > STATUS_ORDER[worst]:
            worst = check.status
    return worst


def report_dict(checks: Sequence[Check]) -> dict[str, Any]:
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail")}
    return {
        "status": overall(checks),
        "counts": counts,
        "checks": [c.to_dict() for c in checks],
    }


# --------------------------------------------------------------------------- sizes


def human_bytes(value: int | None) -> str:
    """1536 -> '1.5 kB' (binary multiples, as PostgreSQL's pg_size_pretty)."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            if unit == "bytes":
                return f"{int(size)} bytes"
            return f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|bytes?|kb|mb|gb|tb)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'512MB', '1GB', '4096' -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise ConfigurationError(f"invalid size {text!r}", hint="write e.g. 512MB, 1GB or 4096")
    number = float(match.group(1))
    unit = (match.group(2) or "b").lower()
    factor = {"b": 1, "byte": 1, "bytes": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}.get(
        unit, 1024**4
    )
    return int(number * factor)


# --------------------------------------------------------------------------- identity


def _ident(name: str) -> str:
    return quote_ident(name)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class Identity:
    """What a table's replica identity amounts to in the stream."""

    mode: Literal["key", "full", "nothing"]
    key_columns: tuple[str, ...]
    setting: str  # DEFAULT, FULL, NOTHING, USING INDEX name
    reason: str  # one line: where the key comes from, or why there is none


def usable_index(index: IndexFacts, table: TableFacts) -> bool:
    """Can this index serve as REPLICA IDENTITY USING INDEX?"""
    if not (index.unique and index.valid and index.immediate and index.ready):
        return False
    if index.partial or index.has_expressions:
        return False
    for name in index.columns:
        column = table.column(name) if name is not None else None
        if column is None or not column.not_null:
            return False
    return True


def identity_of(table: TableFacts) -> Identity:
    kind = table.replica_identity
    if kind == "f":
        return Identity(
            "full",
            tuple(c.name for c in table.columns),
            "FULL",
            "REPLICA IDENTITY FULL: the whole old row",
        )
    if kind == "n":
        return Identity("nothing", (), "NOTHING", "REPLICA IDENTITY NOTHING")
    if kind == "i":
        index = table.identity_index
        if index is None:
            return Identity(
                "nothing",
                (),
                "USING INDEX (dropped)",
                "REPLICA IDENTITY USING INDEX, but that index no longer exists",
            )
        problems = _index_problems(index, table)
        if problems:
            return Identity(
                "nothing",
                (),
                f"USING INDEX {index.name}",
                f"REPLICA IDENTITY USING INDEX {index.name}, but the index is {problems}",
            )
        cols = tuple(c for c in index.columns if c is not None)
        return Identity(
            "key",
            cols,
            f"USING INDEX {index.name}",
            f"unique index {_ident(index.name)} ({', '.join(cols)})",
        )
    # DEFAULT: the primary key, if any
    pk = table.primary_key
    if pk is None:
        return Identity("nothing", (), "DEFAULT", "REPLICA IDENTITY DEFAULT without a primary key")
    if not pk.valid and table.relkind != "p":
        return Identity(
            "nothing",
            (),
            "DEFAULT",
            f"REPLICA IDENTITY DEFAULT, but primary key {pk.name} is not valid",
        )
    cols = tuple(c for c in pk.columns if c is not None)
    return Identity("key", cols, "DEFAULT", f"primary key {_ident(pk.name)} ({', '.join(cols)})")


def _index_problems(index: IndexFacts, table: TableFacts) -> str:
    problems = []
    if not index.valid or not index.ready:
        problems.append("not valid")
    if not index.unique:
        problems.append("not unique")
    if not index.immediate:
        problems.append("deferrable")
    if index.partial:
        problems.append("partial")
    if index.has_expressions:
        problems.append("on an expression")
    nullable = [
        n
        for n in index.columns
        if n is not None and not ((col := table.column(n)) is not None and col.not_null)
    ]
    if nullable:
        problems.append(f"on nullable column(s) {', '.join(nullable)}")
    return ", ".join(problems)


def stream_carries(table: TableFacts) -> dict[str, str]:
    """What INSERT, UPDATE and DELETE events of this table carry in the stream."""
    identity = identity_of(table)
    if identity.mode == "key":
        keys = ", ".join(identity.key_columns)
        update = f"new row; old key ({keys}) only when the key changes"
        delete = f"old key only ({keys})"
    elif identity.mode == "full":
        update = "new row and the full old row"
        delete = "the full old row"
    else:
        update = "fails on the source when updates are published (no replica identity)"
        delete = "fails on the source when deletes are published (no replica identity)"
    return {"insert": "new row", "update": update, "delete": delete}


def identity_fix(table: TableFacts) -> str:
    """The SQL that gives this table a working replica identity."""
    name = table.qualified
    if table.primary_key is not None and table.primary_key.valid:
        return f"ALTER TABLE {name} REPLICA IDENTITY DEFAULT;"
    for index in table.unique_indexes:
        if usable_index(index, table):
            return f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {_ident(index.name)};"
    if table.replica_identity == "i" and table.identity_index is not None:
        ix = _ident(table.identity_index.name)
        if not table.identity_index.valid:
            return (
                f"REINDEX INDEX CONCURRENTLY {_ident(table.schema)}.{ix}; -- or: "
                f"ALTER TABLE {name} ADD PRIMARY KEY (...); or REPLICA IDENTITY FULL"
            )
    return (
        f"ALTER TABLE {name} ADD PRIMARY KEY (<columns>); -- or: "
        f"ALTER TABLE {name} REPLICA IDENTITY FULL;"
    )


def _published_ops(pub: PublicationInfo) -> str:
    return ", ".join(op for op in ("update", "delete") if getattr(pub, op))


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


def identity_breaks(report: IdentityReport) -> list[str]:
    """The publications whose UPDATE/DELETE on the table fail with its replica identity
    (the guard of `pgtail.catalog.set_replica_identity`)."""
    if identity_of(report.table).mode != "nothing":
        return []
    return [p.name for p in report.publications if p.publishes_changes_needing_identity]


def table_publication_checks(
    table: TableFacts, pub: PublicationInfo, row: PublicationTableRow | None
) -> list[Check]:
    """Replica identity, TOAST, row filter, column list and partitioning checks of one
    table as one publication publishes it."""
    subject = table.qualified
    checks: list[Check] = []
    identity = identity_of(table)
    needs_identity = pub.update or pub.delete
    partitioned = table.relkind == "p"
    where = f"in publication {_ident(pub.name)}"

    if partitioned:
        leaves = ", ".join(table.partitions) or "none yet"
        if pub.via_partition_root:
            checks.append(
                Check(
                    "table.partitioning",
                    "table",
                    subject,
                    "ok",
                    f"partitioned; changes of its partitions are published as {subject} "
                    f"(publish_via_partition_root = true) {where}",
                )
            )
        else:
            checks.append(
                Check(
                    "table.partitioning",
                    "table",
                    subject,
                    "warn",
                    f"partitioned; changes arrive under each partition's own name ({leaves}) "
                    f"{where}, not as {subject}",
                    f"ALTER PUBLICATION {_ident(pub.name)} "
                    "SET (publish_via_partition_root = true);",
                )
            )
        return checks  # UPDATE/DELETE are checked on the leaf partitions

    if table.is_partition and not pub.via_partition_root and table.partition_root is not None:
        root = table.partition_root
        root_schema = root.rsplit(".", 1)[0]
        if (
            pub.all_tables
            or any(t.qualified == root for t in pub.tables)
            or any(_ident(s) == root_schema for s in pub.schemas)
        ):
            checks.append(
                Check(
                    "table.partitioning",
                    "table",
                    subject,
                    "warn",
                    f"partition of {root}: its changes arrive as {subject}, not as {root} "
                    f"({where}, publish_via_partition_root = false)",
                    f"ALTER PUBLICATION {_ident(pub.name)} "
                    "SET (publish_via_partition_root = true);",
                )
            )

    if not needs_identity:
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "ok",
                f"{where} only {', '.join(pub.operations) or 'nothing'} is published; "
                "no replica identity needed",
            )
        )
        return checks

    ops = _published_ops(pub)
    if identity.mode == "nothing":
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "fail",
                f"{ops.upper().replace(', ', ' and ')} on {subject} fail: {identity.reason} "
                f"({where}, which publishes {ops})",
                identity_fix(table),
            )
        )
    elif identity.mode == "full":
        better = (
            f"ALTER TABLE {subject} REPLICA IDENTITY DEFAULT;"
            if table.primary_key is not None
            else None
        )
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "warn",
                "REPLICA IDENTITY FULL: every UPDATE/DELETE logs the whole old row "
                "(more WAL, slower apply on subscribers)",
                better,
            )
        )
    else:
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "ok",
                f"UPDATE/DELETE carry the old key from {identity.reason}",
            )
        )

    if pub.update and identity.mode != "full":
        key = set(identity.key_columns)
        toast = [c.name for c in table.columns if c.toastable and c.name not in key]
        if row is not None and row.columns is not None:
            toast = [c for c in toast if c in row.columns]
        if toast:
            checks.append(
                Check(
                    "table.unchanged_toast",
                    "table",
                    subject,
                    "warn",
                    f"column(s) {', '.join(toast)} can arrive as unchanged TOAST in UPDATEs "
                    "(large values not sent when the UPDATE did not change them)",
                    f"ALTER TABLE {subject} REPLICA IDENTITY FULL; "
                    "-- the old row then carries them",
                )
            )

    if row is not None and identity.mode != "nothing":
        covered = set(identity.key_columns)
        if row.row_filter_columns:
            outside = [c for c in row.row_filter_columns if c not in covered]
            if outside:
                checks.append(
                    Check(
                        "table.row_filter",
                        "table",
                        subject,
                        "fail",
                        f"row filter {where} uses {', '.join(outside)}, not part of the replica "
                        f"identity: {ops.upper().replace(', ', ' and ')} on {subject} fail",
                        f"ALTER TABLE {subject} REPLICA IDENTITY FULL; -- or filter on key "
                        "columns only",
                    )
                )
            else:
                checks.append(
                    Check(
                        "table.row_filter",
                        "table",
                        subject,
                        "ok",
                        f"row filter {where} uses only replica identity columns",
                    )
                )
        if row.columns is not None:
            missing = [c for c in identity.key_columns if c not in row.columns]
            if missing:
                columns = ", ".join(_ident(c) for c in (*row.columns, *missing))
                checks.append(
                    Check(
                        "table.column_list",
                        "table",
                        subject,
                        "fail",
                        f"column list {where} leaves out replica identity column(s) "
                        f"{', '.join(missing)}: {ops.upper().replace(', ', ' and ')} on {subject} "
                        "fail",
                        f"ALTER PUBLICATION {_ident(pub.name)} DROP TABLE {subject}; "
                        f"ALTER PUBLICATION {_ident(pub.name)} ADD TABLE {subject} ({columns});",
                    )
                )
    return checks


# --------------------------------------------------------------------------- the whole report


def _int(settings: dict[str, str], name: str) -> int | None:
    value = settings.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def server_checks(facts: DoctorFacts) -> list[Check]:
    settings = facts.server.settings
    checks: list[Check] = []
    wal_level = settings.get("wal_level", "?")
    if wal_level == "logical":
        checks.append(Check("wal_level", "server", "wal_level", "ok", "wal_level is logical"))
    else:
        checks.append(
            Check(
                "wal_level",
                "server",
                "wal_level",
                "fail",
                f"wal_level is {wal_level!r}: logical decoding needs 'logical'",
                "ALTER SYSTEM SET wal_level = logical; -- then restart PostgreSQL",
            )
        )
    for setting, used, what in (
        ("max_replication_slots", facts.server.slots_in_use, "slots"),
        ("max_wal_senders", facts.server.senders_in_use, "WAL senders"),
    ):
        limit = _int(settings, setting)
        if limit is None:
            continue
        fix = f"ALTER SYSTEM SET {setting} = {max(10, limit * 2)}; -- then restart PostgreSQL"
        if limit == 0:
            checks.append(
                Check(
                    setting,
                    "server",
                    setting,
                    "fail",
                    f"{setting} is 0: no replication is possible",
                    fix,
                )
            )
        elif used >= limit:
            checks.append(
                Check(
                    setting,
                    "server",
                    setting,
                    "fail",
                    f"all {limit} {what} are in use ({setting} = {limit})",
                    fix,
                )
            )
        elif used >= limit - 1:
            checks.append(
                Check(
                    setting,
                    "server",
                    setting,
                    "warn",
                    f"{used} of {limit} {what} in use; one left",
                    fix,
                )
            )
        else:
            checks.append(
                Check(setting, "server", setting, "ok", f"{used} of {limit} {what} in use")
            )
    if facts.server.in_recovery and facts.server.version_num < 160000:
        checks.append(
            Check(
                "standby",
                "server",
                "recovery",
                "fail",
                "this server is a standby; logical decoding on a standby needs PostgreSQL 16+",
                "connect to the primary",
            )
        )
    return checks


def role_checks(facts: DoctorFacts) -> list[Check]:
    role = facts.role
    name = _ident(role.name)
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
    if role.superuser:
        checks.append(
            Check("create_publication", "role", role.name, "ok", "may create any publication")
        )
    elif role.can_create_in_database:
        checks.append(
            Check(
                "create_publication",
                "role",
                role.name,
                "ok",
                f"may CREATE PUBLICATION in {role.database} for tables it owns "
                "(FOR ALL TABLES / TABLES IN SCHEMA need a superuser)",
            )
        )
    else:
        checks.append(
            Check(
                "create_publication",
                "role",
                role.name,
                "fail",
                f"role {role.name} may not create publications in database {role.database}",
                f"GRANT CREATE ON DATABASE {_ident(role.database)} TO {name};",
            )
        )
    return checks


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
                    f"CREATE PUBLICATION {_ident(name)} FOR TABLE <schema.table>;",
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
                "CREATE PUBLICATION <name> FOR TABLE <schema.table>;",
            )
        )
    tables_by_oid = {t.oid: t for t in facts.tables}
    tables_by_name = {t.qualified: t for t in facts.tables}
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
                    f"ALTER PUBLICATION {_ident(pub.name)} ADD TABLE <schema.table>;",
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
            checks.extend(table_publication_checks(table, pub, row))
            for leaf_name in table.partitions if table.relkind == "p" else ():
                leaf = tables_by_name.get(leaf_name)
                if leaf is not None and leaf.oid != table.oid:
                    checks.extend(table_publication_checks(leaf, pub, row))  # root filter applies
    return checks


def slot_checks(facts: DoctorFacts, wal_warn_bytes: int = DEFAULT_WAL_WARN_BYTES) -> list[Check]:
    checks: list[Check] = []
    slots = {s.name: s for s in facts.slots.slots}
    for name in facts.requested_slots:
        if name not in slots:
            checks.append(
                Check(
                    "slot.exists",
                    "slot",
                    name,
                    "fail",
                    f"replication slot {name!r} does not exist",
                    f"SELECT pg_create_logical_replication_slot({_literal(name)}, 'pgoutput');",
                )
            )
    wanted = [slots[n] for n in facts.requested_slots if n in slots] or (
        [] if facts.requested_slots else list(facts.slots.slots)
    )
    keep = _int(facts.server.settings, "max_slot_wal_keep_size")
    for slot in wanted:
        checks.extend(_slot_checks(slot, facts, keep, wal_warn_bytes))
    known_pubs = set(facts.all_publications)
    for sender in facts.walsenders:
        if sender.database != facts.role.database:
            continue
        for pub in sender.publications:
            if pub not in known_pubs:
                checks.append(
                    Check(
                        "slot.publication",
                        "slot",
                        sender.slot or f"walsender {sender.pid}",
                        "fail",
                        f"slot {sender.slot!r} (walsender PID {sender.pid}) streams publication "
                        f"{pub!r}, which does not exist",
                        f"CREATE PUBLICATION {_ident(pub)} FOR TABLE <schema.table>; -- or "
                        "restart the consumer with an existing publication",
                    )
                )
    return checks


def _slot_checks(
    slot: SlotInfo, facts: DoctorFacts, keep: int | None, wal_warn_bytes: int
) -> list[Check]:
    checks: list[Check] = []
    subject = slot.name
    drop = f"SELECT pg_drop_replication_slot({_literal(slot.name)});"
    retained = slot.retained_bytes
    if slot.invalidated:
        reason = slot.invalidation_reason or (
            "conflict with recovery" if slot.conflicting else "its WAL was removed"
        )
        checks.append(
            Check(
                "slot.invalidated",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} is invalidated ({reason}); it can no longer be streamed",
                drop + " -- then create it again and resynchronise the consumer",
            )
        )
        return checks
    if slot.wal_status == "unreserved":
        checks.append(
            Check(
                "slot.wal_keep",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} holds {human_bytes(retained)}, past max_slot_wal_keep_size: "
                "it will be invalidated at the next checkpoint",
                f"start its consumer now, or {drop}",
            )
        )
    elif (
        keep is not None
        and keep > 0
        and slot.safe_wal_size is not None
        and (slot.safe_wal_size < keep // 5)
    ):
        checks.append(
            Check(
                "slot.wal_keep",
                "slot",
                subject,
                "warn",
                f"slot {slot.name!r} is near max_slot_wal_keep_size: "
                f"{human_bytes(slot.safe_wal_size)} left before it is invalidated",
                f"start its consumer, or {drop}",
            )
        )
    if (
        slot.slot_type == "logical"
        and slot.plugin != "pgoutput"
        and (slot.name in facts.requested_slots)
    ):
        checks.append(
            Check(
                "slot.plugin",
                "slot",
                subject,
                "warn",
                f"slot {slot.name!r} uses plugin {slot.plugin!r}; pgtail streams pgoutput slots",
                "SELECT pg_create_logical_replication_slot('<new name>', 'pgoutput');",
            )
        )
    if (
        slot.name in facts.requested_slots
        and slot.slot_type == "logical"
        and slot.database != facts.role.database
    ):
        checks.append(
            Check(
                "slot.database",
                "slot",
                subject,
                "warn",
                f"slot {slot.name!r} belongs to database {slot.database!r}, not "
                f"{facts.role.database!r}: stream it while connected to {slot.database!r}",
                f"use dbname={slot.database} in the DSN",
            )
        )
    if slot.active:
        checks.append(
            Check(
                "slot.activity",
                "slot",
                subject,
                "ok",
                f"active (PID {slot.active_pid}), {human_bytes(slot.lag_bytes)} behind",
            )
        )
    elif retained is not None and retained >= wal_warn_bytes:
        checks.append(
            Check(
                "slot.activity",
                "slot",
                subject,
                "warn",
                f"inactive slot {slot.name!r} holds {human_bytes(retained)} of WAL "
                f"({retained} bytes)",
                f"start its consumer (pgtail stream --slot {slot.name}), or {drop}",
            )
        )
    else:
        checks.append(
            Check(
                "slot.activity",
                "slot",
                subject,
                "ok",
                f"inactive, holds {human_bytes(retained)} of WAL",
            )
        )
    return checks


def evaluate(facts: DoctorFacts, *, wal_warn_bytes: int = DEFAULT_WAL_WARN_BYTES) -> list[Check]:
    """Every check, in report order: server, role, publications and tables, slots."""
    return [
        *server_checks(facts),
        *role_checks(facts),
        *publication_checks(facts),
        *slot_checks(facts, wal_warn_bytes),
        *run_publication_checks(facts),
    ]


# --------------------------------------------------------------------------- run publications


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
