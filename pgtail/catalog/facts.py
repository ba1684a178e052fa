"""The facts pgtail reads from the catalog, as frozen data: slots, publications,
tables and their replica identity, the server and the role.

`pgtail.doctor` judges these and imports nothing else of the catalog. A column a
server version does not have comes back as None (decided in `pgtail.catalog.slots`
and `pgtail.catalog.publications`).
Pure: no psycopg2, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pgtail.catalog.names import OPERATIONS
from pgtail.lsn import format_lsn
from pgtail.sqlnames import quote_ident

PLUGIN = "pgoutput"

# Roles that grant replication on managed services (AWS RDS/Aurora, Azure, Cloud SQL, AlloyDB).
MANAGED_REPLICATION_ROLES = (
    "rds_replication",
    "rds_superuser",
    "azure_pg_admin",
    "cloudsqlsuperuser",
    "alloydbsuperuser",
)


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """Who and where a session is, and whether it may stream (the stream's preflight)."""

    version_num: int  # server_version_num, e.g. 150004
    database: str
    user: str
    wal_level: str
    can_replicate: bool  # superuser or REPLICATION

    @property
    def major(self) -> int:
        return self.version_num // 10000


@dataclass(frozen=True, slots=True)
class SlotInfo:
    name: str
    plugin: str | None
    slot_type: str
    database: str | None
    temporary: bool
    active: bool
    active_pid: int | None
    two_phase: bool | None  # None: the server has no such column (before 14)
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    current_lsn: int
    wal_status: str | None  # None before PostgreSQL 13
    safe_wal_size: int | None  # None before PostgreSQL 13
    conflicting: bool | None = None
    inactive_since: datetime | None = None
    invalidation_reason: str | None = None
    failover: bool | None = None
    synced: bool | None = None
    # the oldest transaction whose rows (xmin: physical slots with hot_standby_feedback)
    # or catalog rows (catalog_xmin: logical slots) vacuum must keep, and their age in
    # transactions
    xmin: int | None = None
    catalog_xmin: int | None = None
    xmin_age: int | None = None
    catalog_xmin_age: int | None = None

    @property
    def lag_bytes(self) -> int | None:
        """How far the consumer's confirmed position is behind the current WAL."""
        if self.confirmed_flush_lsn is None:
            return None
        return max(0, self.current_lsn - self.confirmed_flush_lsn)

    @property
    def retained_bytes(self) -> int | None:
        """WAL the server keeps for this slot (from restart_lsn to the current WAL)."""
        if self.restart_lsn is None:
            return None
        return max(0, self.current_lsn - self.restart_lsn)

    @property
    def invalidated(self) -> bool:
        return self.wal_status == "lost" or bool(self.invalidation_reason) or bool(self.conflicting)

    def to_dict(self, optional_columns: Sequence[str]) -> dict[str, Any]:
        def lsn(value: int | None) -> str | None:
            return format_lsn(value) if value is not None else None

        out: dict[str, Any] = {
            "slot_name": self.name,
            "plugin": self.plugin,
            "slot_type": self.slot_type,
            "database": self.database,
            "active": self.active,
            "active_pid": self.active_pid,
            "temporary": self.temporary,
            "two_phase": self.two_phase,
            "restart_lsn": lsn(self.restart_lsn),
            "confirmed_flush_lsn": lsn(self.confirmed_flush_lsn),
            "current_lsn": lsn(self.current_lsn),
            "lag_bytes": self.lag_bytes,
            "retained_bytes": self.retained_bytes,
            "wal_status": self.wal_status,
            "safe_wal_size": self.safe_wal_size,
            "xmin": self.xmin,
            "xmin_age": self.xmin_age,
            "catalog_xmin": self.catalog_xmin,
            "catalog_xmin_age": self.catalog_xmin_age,
        }
        for column in optional_columns:
            value = getattr(self, column)
            out[column] = value.isoformat() if isinstance(value, datetime) else value
        return out


@dataclass(frozen=True, slots=True)
class SlotListing:
    server_version: int
    optional_columns: tuple[str, ...]  # the optional columns this server has
    slots: tuple[SlotInfo, ...]

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict(self.optional_columns) for s in self.slots]


@dataclass(frozen=True, slots=True)
class PublishedTable:
    schema: str
    name: str
    columns: tuple[str, ...] | None = None  # explicit column list (PG15+)
    row_filter: str | None = None  # WHERE expression (PG15+)

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "table": self.name,
            "columns": list(self.columns) if self.columns is not None else None,
            "row_filter": self.row_filter,
        }


@dataclass(frozen=True, slots=True)
class PublicationInfo:
    name: str
    owner: str
    all_tables: bool
    insert: bool
    update: bool
    delete: bool
    truncate: bool
    via_partition_root: bool
    tables: tuple[PublishedTable, ...]  # tables added explicitly (FOR TABLE)
    schemas: tuple[str, ...]  # FOR TABLES IN SCHEMA (PG15+)
    published_tables: tuple[str, ...]  # every table it publishes now (pg_publication_tables)

    @property
    def operations(self) -> tuple[str, ...]:
        return tuple(op for op in OPERATIONS if getattr(self, op))

    @property
    def publishes_changes_needing_identity(self) -> bool:
        return self.update or self.delete

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "owner": self.owner,
            "all_tables": self.all_tables,
            "operations": list(self.operations),
            "publish_via_partition_root": self.via_partition_root,
            "tables": [t.to_dict() for t in self.tables],
            "schemas": list(self.schemas),
            "published_tables": list(self.published_tables),
        }


@dataclass(frozen=True, slots=True)
class ColumnFacts:
    name: str
    attnum: int
    type_name: str
    not_null: bool
    toastable: bool  # variable-length with storage 'x' or 'e' (may go out of line, TOAST)
    storage: str = "p"  # pg_attribute.attstorage: p plain, e external, m main, x extended
    max_bytes: int | None = None  # largest value its declared type allows; None: unbounded
    # seen stored out of line in a sample of the table's rows; None: not looked at (the
    # table's TOAST relation is empty, or the role may not read the table)
    out_of_line: bool | None = None
    sampled_bytes: int | None = None  # its widest stored value in that sample


@dataclass(frozen=True, slots=True)
class IndexFacts:
    name: str
    columns: tuple[str | None, ...]  # None for an expression column
    valid: bool
    unique: bool
    immediate: bool
    partial: bool
    ready: bool = True

    @property
    def has_expressions(self) -> bool:
        return any(c is None for c in self.columns)


@dataclass(frozen=True, slots=True)
class TableFacts:
    oid: int
    schema: str
    name: str
    relkind: str  # r table, p partitioned table
    replica_identity: str  # d default, n nothing, f full, i index (pg_class.relreplident)
    is_partition: bool
    columns: tuple[ColumnFacts, ...]
    primary_key: IndexFacts | None
    identity_index: IndexFacts | None  # the index marked indisreplident, if it still exists
    unique_indexes: tuple[IndexFacts, ...] = ()
    partitions: tuple[str, ...] = ()  # leaf partitions (qualified) of a partitioned table
    partition_root: str | None = None  # the top partitioned table (qualified), for a partition
    # bytes in its TOAST relation (None: the table has none): > 0 means values are stored
    # out of line, so UPDATEs can leave some as unchanged TOAST
    toast_bytes: int | None = None
    selectable: bool = True  # the current role may SELECT it
    # the doctor's TOAST sample read every row: what the TOAST relation holds beyond the
    # values it saw out of line is dead (deleted or updated rows not vacuumed yet)
    toast_sampled_every_row: bool = False

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def column(self, name: str) -> ColumnFacts | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True, slots=True)
class PublicationTableRow:
    """One table as one publication publishes it (pg_publication_tables + pg_publication_rel)."""

    publication: str
    table_oid: int
    columns: tuple[str, ...] | None  # explicit column list, None = all columns
    row_filter: str | None
    row_filter_columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IdentityReport:
    """A table's replica identity and the publications that carry it."""

    table: TableFacts
    publications: tuple[PublicationInfo, ...]


@dataclass(frozen=True, slots=True)
class RoleFacts:
    name: str
    superuser: bool
    replication: bool
    managed_roles: tuple[str, ...]  # MANAGED_REPLICATION_ROLES the role is a member of
    can_create_in_database: bool
    database: str
    # user tables the role owns (or has its owner's privileges on), which it may publish;
    # those it does not, which it may not: their number, their owners, and up to ten of
    # them (qualified) with their owner
    tables_owned: int = 0
    tables_not_owned: int = 0
    owners_not_held: tuple[str, ...] = ()
    examples_not_owned: tuple[tuple[str, str], ...] = ()
    superuser_owners: tuple[str, ...] = ()  # those of owners_not_held that are superusers
    superuser_owned: int = 0  # of tables_not_owned, those owned by superusers


@dataclass(frozen=True, slots=True)
class ServerFacts:
    version_num: int
    settings: dict[str, str]  # wal_level, max_replication_slots, max_wal_senders, ...
    slots_in_use: int
    senders_in_use: int
    in_recovery: bool
    # where wal_level comes from (pg_settings.source): 'command line' overrides ALTER SYSTEM
    wal_level_source: str | None = None


@dataclass(frozen=True, slots=True)
class WalsenderFacts:
    pid: int
    database: str | None
    slot: str | None
    publications: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DoctorFacts:
    server: ServerFacts
    role: RoleFacts
    requested_publications: tuple[str, ...]  # --publication; empty = all of the database
    publications: tuple[PublicationInfo, ...]  # those found
    tables: tuple[TableFacts, ...]
    publication_rows: tuple[PublicationTableRow, ...]
    requested_slots: tuple[str, ...]
    slots: SlotListing
    walsenders: tuple[WalsenderFacts, ...]
    all_publications: tuple[str, ...] = field(default_factory=tuple)
    run_publications: tuple[RunPublication, ...] = ()
    # walsenders, slot statistics, open transactions: for the slots' root causes
    replication: ReplicationFacts | None = None
    # with no publication in the database: its tables without a replica identity (a few),
    # whose fix comes before `publication create --all-tables`
    keyless_tables: tuple[TableFacts, ...] = ()


@dataclass(frozen=True, slots=True)
class RunPublication:
    """A publication ``pgtail stream --create-publication`` made for one run: named
    ``pgtail_run_<pid>_<hex>`` and marked by its comment (`pgtail.catalog.publications`).
    The run holds an advisory lock on it for as long as it lives, so a kill -9 shows: the
    lock is gone and the publication stays behind."""

    name: str
    owner: str
    comment: str  # "pgtail run publication: pid 1234 on host h, started ..."
    run_alive: bool  # the run that made it still holds its lock

    @property
    def made_by(self) -> str:
        """Whose it is, from the comment: "pid 1234 on host h, started ..."."""
        return self.comment.partition(":")[2].partition(";")[0].strip()

    @property
    def drop_statement(self) -> str:
        return f"DROP PUBLICATION {quote_ident(self.name)};"


# --------------------------------------------------------------------------- live replication
# What `pgtail top`, `slot info` and the doctor's root causes read in one interval
# (`pgtail.catalog.activity`). Times are seconds; None where the server has no such column.


@dataclass(frozen=True, slots=True)
class SlotStats:
    """pg_stat_replication_slots (PostgreSQL 14+; total_* 15+): cumulative counters."""

    spill_txns: int
    spill_count: int
    spill_bytes: int
    stream_txns: int
    stream_count: int
    stream_bytes: int
    total_txns: int | None
    total_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class SenderFacts:
    """One pg_stat_replication row: a walsender and what its consumer reported."""

    pid: int
    slot: str | None
    application_name: str
    client_addr: str | None
    state: str | None
    started_ago: float | None  # seconds since backend_start
    sent_lsn: int | None
    write_lsn: int | None
    flush_lsn: int | None
    replay_lsn: int | None
    write_lag: float | None
    flush_lag: float | None
    replay_lag: float | None
    reply_ago: float | None  # seconds since the consumer's last reply (reply_time, 12+)

    @property
    def hidden(self) -> bool:
        """The walsender belongs to another role and this one lacks pg_read_all_stats
        (pg_monitor): the server shows its PID and nothing else."""
        return self.state is None

    def to_dict(self) -> dict[str, Any]:
        def lsn(value: int | None) -> str | None:
            return format_lsn(value) if value is not None else None

        out: dict[str, Any] = {name: getattr(self, name) for name in self.__slots__}
        out["hidden"] = self.hidden
        for name in ("sent_lsn", "write_lsn", "flush_lsn", "replay_lsn"):
            out[name] = lsn(out[name])
        return out


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A transaction that may hold back WAL or vacuum: an open one (pg_stat_activity) or a
    prepared one (pg_prepared_xacts, ``prepared_gid`` set)."""

    pid: int | None  # None for a prepared transaction
    database: str | None
    user: str | None
    application_name: str | None
    state: str | None
    age_seconds: float | None  # since xact_start / prepared
    xid: int | None  # an assigned xid: it has written, and pins logical slots' restart_lsn
    xmin_age: int | None  # age(backend_xmin) / age(transaction), in transactions
    prepared_gid: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class TransactionWait:
    """A backend waiting for a transaction to end (a transactionid lock): a slot being
    created waits so for every transaction running when it started. ``blocker_*`` is the
    session of that transaction (None when it is a prepared one, or hidden from a role
    without pg_monitor)."""

    pid: int  # the waiting backend (a slot's active_pid while it is being created)
    xid: int  # the transaction it waits for
    blocker_pid: int | None
    blocker_age_seconds: float | None  # since the blocker's xact_start
    blocker_database: str | None
    blocker_application_name: str | None
    blocker_state: str | None

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class ReplicationFacts:
    """One look at the server's logical replication, taken at ``taken_at`` (server clock,
    seconds since the epoch): slots, their statistics and walsenders, the oldest
    transactions, per-database change counters and the WAL settings that bound slots."""

    version_num: int
    taken_at: float
    current_lsn: int
    database: str  # the connected one
    settings: dict[str, str]  # max_slot_wal_keep_size, max_wal_size, wal_keep_size (bytes)
    slots: SlotListing
    stats: dict[str, SlotStats]  # by slot name; empty before PostgreSQL 14
    senders: tuple[SenderFacts, ...]
    transactions: tuple[OpenTransaction, ...]  # oldest first, a few
    prepared: tuple[OpenTransaction, ...]
    # per database: rows inserted, updated and deleted so far (pg_stat_database)
    database_changes: dict[str, int]
    waits: tuple[TransactionWait, ...] = ()  # backends waiting for a transaction to end
    role: str = ""  # the connected role
    # the role may see every session's activity (pg_read_all_stats: pg_monitor or superuser)
    sees_all: bool = True

    def wait_of(self, pid: int | None) -> TransactionWait | None:
        return next((w for w in self.waits if pid is not None and w.pid == pid), None)

    @property
    def has_slot_stats(self) -> bool:
        return self.version_num >= 140000

    def sender_of(self, slot: SlotInfo) -> SenderFacts | None:
        return next(
            (
                s
                for s in self.senders
                if s.slot == slot.name or (slot.active_pid is not None and s.pid == slot.active_pid)
            ),
            None,
        )
