"""`pgtail doctor` checks: facts read by `pgtail.catalog` in, check results out.

Pure: no connection, no clock; of the catalog it knows only the fact types
(`pgtail.catalog.facts`). The catalog's guarded DDL calls back into
`publication_problems` and `identity_breaks`, handed to it by the command.

Each check has a status by its consequence, one line of explanation and, when
something should change, the one fix for it (SQL that can be run as given):
  fail  a change will be rejected at the source or lost, or pgtail cannot stream
  warn  it works, but a user will be surprised (WAL piling up, unchanged TOAST)
  info  merely worth knowing (what FULL costs, privileges the task does not need)
  ok    checked and fine
A healthy setup has neither fail nor warn. Also answers "what will the stream carry
for this table" for `pgtail identity`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from pgtail.errors import ConfigurationError
from pgtail.sqlnames import quote_ident

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        ColumnFacts,
        DoctorFacts,
        IdentityReport,
        IndexFacts,
        PublicationInfo,
        PublicationTableRow,
        SlotInfo,
        TableFacts,
    )

Status = Literal["ok", "info", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("ok", "info", "warn", "fail")
STATUS_ORDER: dict[str, int] = {status: rank for rank, status in enumerate(STATUSES)}

# the toaster moves values out of line once a row passes about 2 kB (8 kB pages), and
# never one too small to gain from its TOAST pointer (as `pgtail.catalog.tables`)
TOAST_THRESHOLD_TEXT = "about 2 kB"
TOAST_POINTER_BYTES = 24
OPERATION_ORDER = {op: rank for rank, op in enumerate(("insert", "update", "delete", "truncate"))}


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


def counts(checks: Iterable[Check]) -> dict[str, int]:
    """How many checks of each status (every status present, in order)."""
    found: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for check in checks:
        found[check.status] += 1
    return found


def failed(checks: Iterable[Check], *, strict: bool = False) -> bool:
    """Does the report fail: a fail, or with ``strict`` (for CI) also a warn?"""
    worst = STATUS_ORDER[overall(checks)]
    return worst >= STATUS_ORDER["warn" if strict else "fail"]


def report_dict(checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "status": overall(checks),
        "counts": counts(checks),
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


def identity_remedy(table: TableFacts, *, prefer_full: bool = False) -> tuple[str, str]:
    """The one fix that gives this table a working replica identity, and why that one.

    A key the table already has comes first (its primary key, a usable unique index, an
    identity index to rebuild, a unique index whose columns only lack NOT NULL); FULL
    when nothing can be named, or with ``prefer_full`` (its TOASTed columns then arrive
    in the old row too)."""
    name = table.qualified
    full = f"ALTER TABLE {name} REPLICA IDENTITY FULL;"
    if prefer_full:
        return full, "FULL also carries the columns stored out of line in the old row"
    pk = table.primary_key
    if pk is not None and (pk.valid or table.relkind == "p"):
        return f"ALTER TABLE {name} REPLICA IDENTITY DEFAULT;", f"use primary key {pk.name}"
    for index in table.unique_indexes:
        if usable_index(index, table):
            return (
                f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {_ident(index.name)};",
                f"use unique index {index.name}",
            )
    current = table.identity_index
    if (
        table.replica_identity == "i"
        and current is not None
        and not (current.valid and current.ready)
    ):
        rebuilt = replace(current, valid=True, ready=True)
        if usable_index(rebuilt, table):
            return (
                f"REINDEX INDEX CONCURRENTLY {_ident(table.schema)}.{_ident(current.name)};",
                f"rebuild identity index {current.name}",
            )
    for index in table.unique_indexes:
        nullable = [
            c
            for c in index.columns
            if c is not None and (col := table.column(c)) is not None and not col.not_null
        ]
        if nullable and usable_index(index, _with_not_null(table, nullable)):
            set_not_null = ", ".join(f"ALTER COLUMN {_ident(c)} SET NOT NULL" for c in nullable)
            return (
                f"ALTER TABLE {name} {set_not_null}; "
                f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {_ident(index.name)};",
                f"unique index {index.name} becomes usable once {', '.join(nullable)} "
                "cannot be null",
            )
    return (
        full,
        "no primary key or unique index can be named, so FULL (the whole old row) is the "
        "fix; or add a primary key",
    )


def _with_not_null(table: TableFacts, names: Sequence[str]) -> TableFacts:
    columns = tuple(replace(c, not_null=True) if c.name in names else c for c in table.columns)
    return replace(table, columns=columns)


def identity_fix(table: TableFacts, *, prefer_full: bool = False) -> str:
    """The SQL that gives this table a working replica identity (`identity_remedy`)."""
    return identity_remedy(table, prefer_full=prefer_full)[0]


def _ops_text(pubs: Iterable[PublicationInfo]) -> str:
    """'update, delete': what of UPDATE and DELETE these publications publish."""
    pubs = list(pubs)
    return ", ".join(op for op in ("update", "delete") if any(getattr(p, op) for p in pubs))


def _in_publications(pubs: Sequence[PublicationInfo]) -> str:
    names = ", ".join(_ident(p.name) for p in pubs)
    return f"in publication{'s' if len(pubs) > 1 else ''} {names}"


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


@dataclass(frozen=True, slots=True)
class UnchangedToast:
    """Columns whose values UPDATEs can leave out as unchanged TOAST."""

    columns: tuple[str, ...]
    evidence: str | None  # what shows values really are out of line; None: nothing is yet


def _can_go_out_of_line(column: ColumnFacts) -> bool:
    # 'x' and 'e' go out of line once a row passes the TOAST threshold; 'm' (main) only
    # when the row would not fit in a page even compressed, so it counts only when seen
    # out of line; 'p' (plain) never. A declared width too small to gain from a TOAST
    # pointer never moves.
    if column.max_bytes is not None and column.max_bytes <= TOAST_POINTER_BYTES:
        return False
    return column.toastable or (column.storage == "m" and bool(column.out_of_line))


def unchanged_toast(
    table: TableFacts, key: Iterable[str], column_lists: Sequence[tuple[str, ...] | None]
) -> UnchangedToast | None:
    """The published columns outside the replica identity that can arrive as unchanged
    TOAST, and the evidence from the table that they do (None: no such column).

    Evidence is the table's TOAST relation holding data; the columns named are those
    the catalog saw out of line in a sample of rows, or, when it could not tell, every
    column that can go out of line."""
    keys = set(key)
    published: set[str] | None = None
    if column_lists and all(cl is not None for cl in column_lists):
        published = {c for cl in column_lists if cl is not None for c in cl}
    candidates = [
        c
        for c in table.columns
        if c.name not in keys
        and (published is None or c.name in published)
        and _can_go_out_of_line(c)
    ]
    possible = tuple(c.name for c in candidates if c.toastable)
    if not table.toast_bytes:
        return UnchangedToast(possible, None) if possible else None
    size = human_bytes(table.toast_bytes)
    seen = tuple(c.name for c in candidates if c.out_of_line)
    if seen:
        return UnchangedToast(seen, f"values stored out of line ({size} in its TOAST table)")
    if not possible:
        return None
    sampled = any(c.sampled_bytes is not None for c in candidates)
    which = (
        "the rows sampled did not show" if sampled else "the role may not read the table to tell"
    )
    return UnchangedToast(possible, f"its TOAST table holds {size} (whose, {which})")


def table_publication_checks(
    table: TableFacts, pub: PublicationInfo, row: PublicationTableRow | None
) -> list[Check]:
    """The checks of one table as one publication publishes it (`table_checks`)."""
    return table_checks(table, ((pub, row),))


def table_checks(
    table: TableFacts, published: Sequence[tuple[PublicationInfo, PublicationTableRow | None]]
) -> list[Check]:
    """Replica identity, unchanged TOAST, row filter, column list and partitioning checks
    of one table, as the given publications publish it: one replica identity finding and
    one TOAST finding per table, whatever number of publications carry it, with one fix
    between them."""
    subject = table.qualified
    checks: list[Check] = []
    identity = identity_of(table)

    if table.relkind == "p":
        leaves = ", ".join(table.partitions) or "none yet"
        for pub, _ in published:
            where = f"in publication {_ident(pub.name)}"
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
                        f"partitioned; changes arrive under each partition's own name "
                        f"({leaves}) {where}, not as {subject}",
                        f"ALTER PUBLICATION {_ident(pub.name)} "
                        "SET (publish_via_partition_root = true);",
                    )
                )
        return checks  # UPDATE/DELETE are checked on the leaf partitions

    if table.is_partition and table.partition_root is not None:
        root = table.partition_root
        root_schema = root.rsplit(".", 1)[0]
        for pub, _ in published:
            if pub.via_partition_root:
                continue
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
                        f"(in publication {_ident(pub.name)}, publish_via_partition_root = "
                        "false)",
                        f"ALTER PUBLICATION {_ident(pub.name)} "
                        "SET (publish_via_partition_root = true);",
                    )
                )

    needing = [(p, r) for p, r in published if p.publishes_changes_needing_identity]
    if not needing:
        pubs = [p for p, _ in published]
        operations = sorted(
            {op for p in pubs for op in p.operations}, key=OPERATION_ORDER.__getitem__
        )
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "ok",
                f"{_in_publications(pubs)} only {', '.join(operations) or 'nothing'} is "
                "published; no replica identity needed",
            )
        )
        return checks

    pubs = [p for p, _ in needing]
    where = _in_publications(pubs)
    ops = _ops_text(pubs)
    updating = [r.columns if r is not None else None for p, r in needing if p.update]
    toast = (
        unchanged_toast(table, identity.key_columns, updating)
        if updating and identity.mode != "full"
        else None
    )
    if identity.mode == "nothing":
        toasted = toast is not None and toast.evidence is not None
        fix, why = identity_remedy(table, prefer_full=toasted)
        if toasted and toast is not None:
            why += f" ({', '.join(toast.columns)})"
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "fail",
                f"{ops.upper().replace(', ', ' and ')} on {subject} fail: {identity.reason} "
                f"({where}, which publishes {ops}); {why}",
                fix,
            )
        )
    elif identity.mode == "full":
        checks.append(
            Check(
                "table.replica_identity",
                "table",
                subject,
                "info",
                "REPLICA IDENTITY FULL: UPDATE/DELETE carry the whole old row, and each logs "
                "it whole (more WAL than a key; subscribers apply them slower)",
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

    if identity.mode == "key" and toast is not None:
        names = ", ".join(toast.columns)
        them = "them" if len(toast.columns) > 1 else "it"
        if toast.evidence is not None:
            checks.append(
                Check(
                    "table.unchanged_toast",
                    "table",
                    subject,
                    "warn",
                    f"UPDATEs that leave {names} unchanged send no value for {them} "
                    f"(unchanged TOAST): {toast.evidence}",
                    f"ALTER TABLE {subject} REPLICA IDENTITY FULL; "
                    f"-- the old row then carries {them}",
                )
            )
        else:
            checks.append(
                Check(
                    "table.unchanged_toast",
                    "table",
                    subject,
                    "ok",
                    f"no value stored out of line (TOAST) yet; {names} would arrive as "
                    f"unchanged TOAST only once a row passes {TOAST_THRESHOLD_TEXT}",
                )
            )

    if identity.mode == "nothing":
        return checks
    covered = set(identity.key_columns)
    for pub, row in needing:
        if row is None:
            continue
        in_pub = f"in publication {_ident(pub.name)}"
        pub_ops = _ops_text([pub])
        if row.row_filter_columns:
            outside = [c for c in row.row_filter_columns if c not in covered]
            if outside:
                checks.append(
                    Check(
                        "table.row_filter",
                        "table",
                        subject,
                        "fail",
                        f"row filter {in_pub} uses {', '.join(outside)}, not part of the replica "
                        f"identity: {pub_ops.upper().replace(', ', ' and ')} on {subject} fail",
                        f"ALTER TABLE {subject} REPLICA IDENTITY FULL;",
                    )
                )
            else:
                checks.append(
                    Check(
                        "table.row_filter",
                        "table",
                        subject,
                        "ok",
                        f"row filter {in_pub} uses only replica identity columns",
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
                        f"column list {in_pub} leaves out replica identity column(s) "
                        f"{', '.join(missing)}: {pub_ops.upper().replace(', ', ' and ')} on "
                        f"{subject} "
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
    """What the role may do, judged by what it is about to do: streaming needs REPLICATION;
    creating a publication (one asked for that does not exist yet) needs CREATE on the
    database and ownership of the tables; reading the published tables (SELECT) is needed
    only to copy their current rows."""
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
    checks.append(_create_publication_check(facts))
    if not role.superuser:
        checks.extend(_select_checks(facts))
    return checks


def _create_publication_check(facts: DoctorFacts) -> Check:
    role = facts.role
    name = _ident(role.name)
    if role.superuser:
        return Check("create_publication", "role", role.name, "ok", "may create any publication")
    found = {p.name for p in facts.publications}
    missing = [p for p in facts.requested_publications if p not in found]
    owns_nothing = role.tables_owned == 0 and role.tables_not_owned > 0
    lacking: list[str] = []
    fix: list[str] = []
    if not role.can_create_in_database:
        lacking.append(f"CREATE on database {role.database}")
        fix.append(f"GRANT CREATE ON DATABASE {_ident(role.database)} TO {name};")
    if role.tables_not_owned:
        others = ", ".join(role.owners_not_held)
        lacking.append(f"ownership of {role.tables_not_owned} table(s) (owned by {others})")
        for owner in role.owners_not_held:
            if owner not in role.superuser_owners:
                fix.append(f"GRANT {_ident(owner)} TO {name};")
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
            f"GRANT SELECT ON {', '.join(unreadable)} TO {_ident(role.name)};",
        )
    ]


def _create_publication_fix(facts: DoctorFacts, name: str) -> str:
    # which tables to publish is the user's choice; a superuser may publish them all
    if facts.role.superuser:
        return f"CREATE PUBLICATION {_ident(name)} FOR ALL TABLES;"
    return f"pgtail publication create {name} --table SCHEMA.TABLE  # the tables to stream"


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
            published.setdefault(table.oid, []).append((pub, row))
            for leaf_name in table.partitions if table.relkind == "p" else ():
                leaf = tables_by_name.get(leaf_name)
                if leaf is not None and leaf.oid != table.oid:
                    published.setdefault(leaf.oid, []).append((pub, row))  # root filter applies
    for oid, pairs in published.items():
        checks.extend(table_checks(tables_by_oid[oid], pairs))
    return checks


def slot_checks(facts: DoctorFacts, wal_warn_bytes: int | None = None) -> list[Check]:
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
                        "restart the consumer with a publication that exists "
                        "(pgtail publication list)",
                    )
                )
    return checks


def _slot_checks(
    slot: SlotInfo, facts: DoctorFacts, keep: int | None, wal_warn_bytes: int | None
) -> list[Check]:
    checks: list[Check] = []
    subject = slot.name
    drop = f"SELECT pg_drop_replication_slot({_literal(slot.name)});"
    retained = slot.retained_bytes
    requested = slot.name in facts.requested_slots
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
    # a slot asked for is one pgtail is about to stream: what the stream would refuse fails
    if requested and slot.slot_type != "logical":
        checks.append(
            Check(
                "slot.plugin",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} is a physical slot; pgtail streams logical pgoutput slots",
                f"SELECT pg_create_logical_replication_slot({_literal(slot.name + '_pgoutput')}, "
                "'pgoutput');",
            )
        )
    elif requested and slot.plugin != "pgoutput":
        checks.append(
            Check(
                "slot.plugin",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} uses plugin {slot.plugin!r}; pgtail streams pgoutput slots "
                "(a new slot starts from now: changes before it are not in it)",
                f"SELECT pg_create_logical_replication_slot({_literal(slot.name + '_pgoutput')}, "
                "'pgoutput');",
            )
        )
    if requested and slot.slot_type == "logical" and slot.database != facts.role.database:
        checks.append(
            Check(
                "slot.database",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} belongs to database {slot.database!r}, not "
                f"{facts.role.database!r}: it can be streamed only while connected to "
                f"{slot.database!r}",
                f"connect with dbname={slot.database} (pgtail ... -d {slot.database})",
            )
        )
    max_wal = _int(facts.server.settings, "max_wal_size")
    if slot.wal_status is not None:
        extended = slot.wal_status == "extended"
    else:  # before PostgreSQL 13: compare with max_wal_size ourselves
        extended = retained is not None and max_wal is not None and retained > max_wal
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
    elif extended and retained is not None:
        checks.append(
            Check(
                "slot.activity",
                "slot",
                subject,
                "warn",
                f"inactive slot {slot.name!r} holds {human_bytes(retained)} of WAL "
                f"({retained} bytes), past max_wal_size ({human_bytes(max_wal)}): WAL the "
                "server would otherwise have recycled piles up until it is read",
                f"start its consumer (pgtail stream --slot {slot.name}), or {drop}",
            )
        )
    elif retained is not None and wal_warn_bytes is not None and retained >= wal_warn_bytes:
        checks.append(
            Check(
                "slot.activity",
                "slot",
                subject,
                "warn",
                f"inactive slot {slot.name!r} holds {human_bytes(retained)} of WAL "
                f"({retained} bytes), past --wal-warn {human_bytes(wal_warn_bytes)}",
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


def evaluate(facts: DoctorFacts, *, wal_warn_bytes: int | None = None) -> list[Check]:
    """Every check, in report order: server, role, publications and tables, slots.

    An inactive slot warns once it holds WAL past max_wal_size (the server would
    otherwise have recycled it), or past ``wal_warn_bytes`` when given."""
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
