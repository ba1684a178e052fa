"""The doctor's tables room: what a table's replica identity amounts to in the stream,
the one fix that gives it a working one, which columns UPDATEs can leave out as unchanged
TOAST, and the checks of one table as publications publish it (row filter, column list,
partitioning). Also the guard of `pgtail.catalog.set_replica_identity` and what
`pgtail identity` shows a table's events carry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from pgtail.doctor.findings import Check, human_bytes, ident

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        ColumnFacts,
        IdentityReport,
        IndexFacts,
        PublicationInfo,
        PublicationTableRow,
        TableFacts,
    )

# the toaster moves values out of line once a row passes about 2 kB (8 kB pages), and
# never one too small to gain from its TOAST pointer (as `pgtail.catalog.tables`)
TOAST_THRESHOLD_TEXT = "about 2 kB"
TOAST_POINTER_BYTES = 24
OPERATION_ORDER = {op: rank for rank, op in enumerate(("insert", "update", "delete", "truncate"))}


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
            f"unique index {ident(index.name)} ({', '.join(cols)})",
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
    return Identity("key", cols, "DEFAULT", f"primary key {ident(pk.name)} ({', '.join(cols)})")


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
                f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {ident(index.name)};",
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
                f"REINDEX INDEX CONCURRENTLY {ident(table.schema)}.{ident(current.name)};",
                f"rebuild identity index {current.name}",
            )
    for index in table.unique_indexes:
        nullable = [
            c
            for c in index.columns
            if c is not None and (col := table.column(c)) is not None and not col.not_null
        ]
        if nullable and usable_index(index, _with_not_null(table, nullable)):
            set_not_null = ", ".join(f"ALTER COLUMN {ident(c)} SET NOT NULL" for c in nullable)
            return (
                f"ALTER TABLE {name} {set_not_null}; "
                f"ALTER TABLE {name} REPLICA IDENTITY USING INDEX {ident(index.name)};",
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
    names = ", ".join(ident(p.name) for p in pubs)
    return f"in publication{'s' if len(pubs) > 1 else ''} {names}"


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
    if table.toast_sampled_every_row:
        # no live row holds a value out of line: the TOAST data is dead rows' (not
        # vacuumed yet), which no UPDATE can leave unchanged
        return UnchangedToast(possible, None)
    sampled = any(c.sampled_bytes is not None for c in candidates)
    which = (
        "the rows sampled held none of these values out of line, but the rows not sampled may"
        if sampled
        else "the role may not read the table to tell which columns' values it holds"
    )
    return UnchangedToast(possible, f"its TOAST table holds {size}; {which}")


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
    if table.relkind == "p":
        return _partitioned_checks(table, published)  # UPDATE/DELETE are checked on the leaves
    checks = _partition_checks(table, published)
    needing = [(p, r) for p, r in published if p.publishes_changes_needing_identity]
    if not needing:
        checks.append(_no_identity_needed(table, [p for p, _ in published]))
        return checks
    identity = identity_of(table)
    checks.extend(_identity_checks(table, identity, needing))
    if identity.mode != "nothing":
        checks.extend(_row_filter_and_column_checks(table, identity, needing))
    return checks


def _partitioned_checks(
    table: TableFacts, published: Sequence[tuple[PublicationInfo, PublicationTableRow | None]]
) -> list[Check]:
    """A partitioned table: under which name its partitions' changes arrive, per publication."""
    subject = table.qualified
    checks: list[Check] = []
    leaves = ", ".join(table.partitions) or "none yet"
    for pub, _ in published:
        where = f"in publication {ident(pub.name)}"
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
                    f"ALTER PUBLICATION {ident(pub.name)} SET (publish_via_partition_root = true);",
                )
            )
    return checks


def _partition_checks(
    table: TableFacts, published: Sequence[tuple[PublicationInfo, PublicationTableRow | None]]
) -> list[Check]:
    """A partition published through its root without publish_via_partition_root: its
    changes arrive under its own name, not the root's."""
    checks: list[Check] = []
    if not (table.is_partition and table.partition_root is not None):
        return checks
    subject = table.qualified
    root = table.partition_root
    root_schema = root.rsplit(".", 1)[0]
    for pub, _ in published:
        if pub.via_partition_root:
            continue
        if (
            pub.all_tables
            or any(t.qualified == root for t in pub.tables)
            or any(ident(s) == root_schema for s in pub.schemas)
        ):
            checks.append(
                Check(
                    "table.partitioning",
                    "table",
                    subject,
                    "warn",
                    f"partition of {root}: its changes arrive as {subject}, not as {root} "
                    f"(in publication {ident(pub.name)}, publish_via_partition_root = "
                    "false)",
                    f"ALTER PUBLICATION {ident(pub.name)} SET (publish_via_partition_root = true);",
                )
            )
    return checks


def _no_identity_needed(table: TableFacts, pubs: list[PublicationInfo]) -> Check:
    """No publication carrying the table publishes UPDATE or DELETE."""
    operations = sorted({op for p in pubs for op in p.operations}, key=OPERATION_ORDER.__getitem__)
    return Check(
        "table.replica_identity",
        "table",
        table.qualified,
        "ok",
        f"{_in_publications(pubs)} only {', '.join(operations) or 'nothing'} is "
        "published; no replica identity needed",
    )


def _identity_checks(
    table: TableFacts,
    identity: Identity,
    needing: list[tuple[PublicationInfo, PublicationTableRow | None]],
) -> list[Check]:
    """The replica identity finding and, for a key identity, the unchanged TOAST one."""
    subject = table.qualified
    checks: list[Check] = []
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

    return checks


def _row_filter_and_column_checks(
    table: TableFacts,
    identity: Identity,
    needing: list[tuple[PublicationInfo, PublicationTableRow | None]],
) -> list[Check]:
    """Per publication: a row filter or a column list that leaves the replica identity."""
    subject = table.qualified
    checks: list[Check] = []
    covered = set(identity.key_columns)
    for pub, row in needing:
        if row is None:
            continue
        in_pub = f"in publication {ident(pub.name)}"
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
                columns = ", ".join(ident(c) for c in (*row.columns, *missing))
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
                        f"ALTER PUBLICATION {ident(pub.name)} DROP TABLE {subject}; "
                        f"ALTER PUBLICATION {ident(pub.name)} ADD TABLE {subject} ({columns});",
                    )
                )
    return checks


# --------------------------------------------------------------------------- the whole report
