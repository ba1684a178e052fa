"""Ordinary-connection SQL: replication slots, publications, replica identity and the
facts `pgtail doctor` judges.

Every statement pgtail runs outside the replication protocol lives here. Names are
always passed through ``psycopg2.sql.Identifier`` / ``Literal`` (or as parameters);
psycopg2 errors become pgtail errors here, once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg2
import psycopg2.errors
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.connection import decoding_set_statement, resolve_dsn, translate_connect_error
from pgtail.errors import (
    ConfigurationError,
    PgtailError,
    PublicationError,
    ServerCapabilityError,
    SlotError,
)
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.values import UserType

PLUGIN = "pgoutput"
OPERATIONS = ("insert", "update", "delete", "truncate")

# Roles that grant replication on managed services (AWS RDS/Aurora, Azure, Cloud SQL, AlloyDB).
MANAGED_REPLICATION_ROLES = (
    "rds_replication",
    "rds_superuser",
    "azure_pg_admin",
    "cloudsqlsuperuser",
    "alloydbsuperuser",
)


# --------------------------------------------------------------------------- connections


@contextmanager
def connect(dsn: str | None) -> Iterator[PgConnection]:
    """An autocommit connection; psycopg2 errors inside the block become pgtail errors."""
    resolved = resolve_dsn(dsn)
    try:
        conn = psycopg2.connect(resolved)
    except psycopg2.Error as exc:
        raise translate_connect_error(exc, resolved) from None
    try:
        conn.autocommit = True
        yield conn
    except psycopg2.Error as exc:
        raise translate_error(exc) from None
    finally:
        conn.close()


def translate_error(exc: psycopg2.Error) -> PgtailError:
    """A server error from a catalog statement -> the pgtail error a user can act on."""
    diag = getattr(exc, "diag", None)
    primary = (
        getattr(diag, "message_primary", None) or str(exc).strip().splitlines()[0]
        if str(exc).strip()
        else type(exc).__name__
    )
    server_hint = getattr(diag, "message_hint", None)
    detail = getattr(diag, "message_detail", None)
    message = primary if not detail else f"{primary}: {detail}"
    code = getattr(exc, "pgcode", None) or ""
    lower = primary.lower()
    if code == "42501":  # insufficient_privilege
        return ServerCapabilityError(message, hint=server_hint or _privilege_hint(lower))
    if code == "55000" and "wal_level" in lower:
        return ServerCapabilityError(
            message, hint="ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL"
        )
    if code == "53400":  # configuration_limit_exceeded
        return ServerCapabilityError(
            message,
            hint=server_hint
            or "free a slot (pgtail slot drop NAME) or raise max_replication_slots and restart",
        )
    if "replication slot" in lower:
        if "was not created in this database" in lower:
            return SlotError(message, hint="connect to the database the slot was created in")
        return SlotError(message, hint=server_hint)
    if "publication" in lower and code in ("42704", "42710", "55000", "42P17"):
        return PublicationError(message, hint=server_hint)
    if code[:2] in ("42", "22", "0A"):  # syntax, data, feature not supported: our input
        return ConfigurationError(message, hint=server_hint)
    return PgtailError(message, hint=server_hint)


def _privilege_hint(lower: str) -> str:
    if "replication" in lower:
        return "ALTER ROLE <role> REPLICATION (or grant rds_replication on RDS)"
    if "superuser" in lower:
        return "connect as a superuser for FOR ALL TABLES / FOR TABLES IN SCHEMA"
    if "owner" in lower:
        return "connect as the table owner"
    return "connect as a role with the needed privilege"


def _fetchall(conn: PgConnection, query: sql.Composable | str, params: Any = None) -> list[Any]:
    with conn.cursor() as cur:
        cur.execute(query, params)
        return list(cur.fetchall()) if cur.description else []


def _fetchone(conn: PgConnection, query: sql.Composable | str, params: Any = None) -> Any:
    rows = _fetchall(conn, query, params)
    return rows[0] if rows else None


def server_version_num(conn: PgConnection) -> int:
    return int(conn.server_version)


def _lsn(text: str | None) -> int | None:
    return parse_lsn(text) if text else None


_CURRENT_LSN = (
    "CASE WHEN pg_is_in_recovery() THEN pg_last_wal_receive_lsn() ELSE pg_current_wal_lsn() END"
)


# --------------------------------------------------------------------------- names

_UNQUOTED_STOP = set(' \t\n."(),')


@dataclass(frozen=True, slots=True)
class TableSpec:
    """``schema.table (col, ...)`` as the user wrote it, after SQL identifier rules."""

    schema: str | None
    name: str
    columns: tuple[str, ...] | None = None

    def display(self) -> str:
        base = quote_ident(self.name)
        if self.schema is not None:
            base = f"{quote_ident(self.schema)}.{base}"
        if self.columns is not None:
            base += " (" + ", ".join(quote_ident(c) for c in self.columns) + ")"
        return base


def quote_ident(name: str) -> str:
    """Quote a name like PostgreSQL's quote_ident: only when needed (for messages/fixes)."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name) and name not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


# reserved key words: a name equal to one must be quoted
_RESERVED = frozenset(
    """
    all analyse analyze and any array as asc asymmetric both case cast check collate column
    constraint create current_catalog current_date current_role current_time current_timestamp
    current_user default deferrable desc distinct do else end except false fetch for foreign
    from grant group having in initially intersect into lateral leading limit localtime
    localtimestamp not null offset on only or order placing primary references returning select
    session_user some symmetric system_user table then to trailing true union unique user using
    variadic when where window with
    """.split()  # noqa: SIM905
)


def _parse_ident(text: str, pos: int) -> tuple[str, int]:
    """One SQL identifier at ``pos`` (quoted with "" escapes, or unquoted and folded)."""
    n = len(text)
    while pos < n and text[pos].isspace():
        pos += 1
    if pos >= n:
        raise ConfigurationError(f"missing name in {text!r}")
    if text[pos] == '"':
        out: list[str] = []
        pos += 1
        while True:
            end = text.find('"', pos)
            if end < 0:
                raise ConfigurationError(f"unterminated quoted name in {text!r}")
            out.append(text[pos:end])
            if end + 1 < n and text[end + 1] == '"':
                out.append('"')
                pos = end + 2
                continue
            pos = end + 1
            break
        name = "".join(out)
        if not name:
            raise ConfigurationError(f'empty quoted name "" in {text!r}')
        return name, pos
    start = pos
    while pos < n and text[pos] not in _UNQUOTED_STOP:
        pos += 1
    if pos == start:
        raise ConfigurationError(f"expected a name at position {start + 1} of {text!r}")
    word = text[start:pos]
    # PostgreSQL folds unquoted identifiers to lower case (ASCII only)
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in word), pos


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def parse_table_spec(text: str, *, allow_columns: bool = True) -> TableSpec:
    """Parse ``[schema.]table [(col, ...)]`` with PostgreSQL identifier rules.

    ``'"My Schema"."Tab.le" (id, "Total")'`` -> schema ``My Schema``, table ``Tab.le``,
    columns ``id``, ``Total``. Unquoted names fold to lower case, as in SQL.
    """
    first, pos = _parse_ident(text, 0)
    pos = _skip_space(text, pos)
    schema: str | None = None
    name = first
    if pos < len(text) and text[pos] == ".":
        schema = first
        name, pos = _parse_ident(text, pos + 1)
        pos = _skip_space(text, pos)
    columns: tuple[str, ...] | None = None
    if pos < len(text) and text[pos] == "(":
        if not allow_columns:
            raise ConfigurationError(f"a column list is not allowed here: {text!r}")
        cols: list[str] = []
        pos += 1
        while True:
            col, pos = _parse_ident(text, pos)
            cols.append(col)
            pos = _skip_space(text, pos)
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == ")":
                pos = _skip_space(text, pos + 1)
                break
            raise ConfigurationError(
                f"expected ',' or ')' in the column list of {text!r}",
                hint='write it as schema.table(col1, col2); quote odd names: "My Col"',
            )
        columns = tuple(cols)
    if pos != len(text):
        raise ConfigurationError(
            f"unexpected {text[pos:]!r} in table name {text!r}",
            hint='write schema.table or schema.table(col1, col2); quote odd names: "My Table"',
        )
    return TableSpec(schema, name, columns)


def parse_name(text: str) -> str:
    """One SQL identifier (e.g. a schema or index name), quoted or unquoted."""
    name, pos = _parse_ident(text, 0)
    if _skip_space(text, pos) != len(text):
        raise ConfigurationError(f"unexpected {text[pos:]!r} in name {text!r}")
    return name


def check_row_filter(expr: str) -> str:
    """Make sure a ``--where`` expression cannot leave the ``WHERE (...)`` it is put in.

    The expression is SQL by nature and goes into the statement as-is, so it is scanned
    with PostgreSQL's lexical rules: string literals ('', E'', $tag$), quoted names and
    parentheses are tracked; a semicolon, a comment or a parenthesis that closes more
    than it opened is refused. What remains is one expression, which the server parses.
    """
    text = expr.strip()
    if not text:
        raise ConfigurationError("empty --where row filter")
    depth = 0
    pos = 0
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch == "'":
            escapes = (
                pos > 0
                and text[pos - 1] in "eE"
                and (pos == 1 or not (text[pos - 2].isalnum() or text[pos - 2] == "_"))
            )
            pos = _skip_quoted(text, pos, "'", backslash=escapes)
            continue
        if ch == '"':
            pos = _skip_quoted(text, pos, '"', backslash=False)
            continue
        if ch == "$":
            match = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", text[pos:])
            if match and not (pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_")):
                tag = match.group(0)
                end = text.find(tag, pos + len(tag))
                if end < 0:
                    raise ConfigurationError(f"unterminated {tag} string in --where {expr!r}")
                pos = end + len(tag)
                continue
        if ch == ";":
            raise ConfigurationError(
                f"--where must be one expression; ';' is not allowed: {expr!r}"
            )
        if text.startswith("--", pos) or text.startswith("/*", pos):
            raise ConfigurationError(f"comments are not allowed in --where: {expr!r}")
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ConfigurationError(
                    f"unbalanced ')' in --where {expr!r}",
                    hint="the row filter must be a single boolean expression",
                )
        pos += 1
    if depth != 0:
        raise ConfigurationError(f"unbalanced '(' in --where {expr!r}")
    return text


def _skip_quoted(text: str, pos: int, quote: str, *, backslash: bool) -> int:
    pos += 1
    while pos < len(text):
        ch = text[pos]
        if backslash and ch == "\\":
            pos += 2
            continue
        if ch == quote:
            if pos + 1 < len(text) and text[pos + 1] == quote:
                pos += 2
                continue
            return pos + 1
        pos += 1
    raise ConfigurationError(f"unterminated {quote} quote in --where {text!r}")


def publication_names_option(names: Sequence[str]) -> str:
    """The ``publication_names`` value pgoutput expects: quoted, comma-separated."""
    return ",".join('"' + n.replace('"', '""') + '"' for n in names)


@dataclass(frozen=True, slots=True)
class TableRef:
    oid: int
    schema: str
    name: str

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    @property
    def identifier(self) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(self.name))


def resolve_table(conn: PgConnection, spec: TableSpec) -> TableRef:
    """The table a spec names (search_path applies when no schema is given)."""
    qualified = TableSpec(spec.schema, spec.name).display()
    row = _fetchone(
        conn,
        "SELECT c.oid, n.nspname, c.relname, c.relkind FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(%s)",
        (qualified,),
    )
    if row is None:
        raise ConfigurationError(
            f"table {qualified} does not exist",
            hint="check the name and schema; quote mixed-case names: '\"MyTable\"'",
        )
    if row[3] not in ("r", "p"):
        raise ConfigurationError(f"{qualified} is not a table (relkind {row[3]!r})")
    return TableRef(int(row[0]), str(row[1]), str(row[2]))


# --------------------------------------------------------------------------- slots

# optional pg_replication_slots columns -> first server version that has them
SLOT_OPTIONAL_COLUMNS: dict[str, int] = {
    "conflicting": 160000,
    "inactive_since": 170000,
    "invalidation_reason": 170000,
    "failover": 170000,
    "synced": 170000,
}


@dataclass(frozen=True, slots=True)
class SlotInfo:
    name: str
    plugin: str | None
    slot_type: str
    database: str | None
    temporary: bool
    active: bool
    active_pid: int | None
    two_phase: bool
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    current_lsn: int
    wal_status: str | None
    safe_wal_size: int | None
    conflicting: bool | None = None
    inactive_since: datetime | None = None
    invalidation_reason: str | None = None
    failover: bool | None = None
    synced: bool | None = None

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


def _slot_listing(conn: PgConnection, name: str | None = None) -> SlotListing:
    version = server_version_num(conn)
    optional = tuple(c for c, v in SLOT_OPTIONAL_COLUMNS.items() if version >= v)
    columns = [
        "slot_name",
        "plugin",
        "slot_type",
        "database",
        "temporary",
        "active",
        "active_pid",
        "two_phase",
        "restart_lsn::text",
        "confirmed_flush_lsn::text",
        f"({_CURRENT_LSN})::text",
        "wal_status",
        "safe_wal_size",
        *optional,
    ]
    query = "SELECT " + ", ".join(columns) + " FROM pg_replication_slots"
    params: tuple[Any, ...] = ()
    if name is not None:
        query += " WHERE slot_name = %s"
        params = (name,)
    query += " ORDER BY slot_name"
    slots = []
    for row in _fetchall(conn, query, params):
        extra = dict(zip(optional, row[13:], strict=True))
        slots.append(
            SlotInfo(
                name=row[0],
                plugin=row[1],
                slot_type=row[2],
                database=row[3],
                temporary=bool(row[4]),
                active=bool(row[5]),
                active_pid=row[6],
                two_phase=bool(row[7]),
                restart_lsn=_lsn(row[8]),
                confirmed_flush_lsn=_lsn(row[9]),
                current_lsn=_lsn(row[10]) or 0,
                wal_status=row[11],
                safe_wal_size=row[12],
                **extra,
            )
        )
    return SlotListing(version, optional, tuple(slots))


def list_slots(dsn: str | None) -> SlotListing:
    """Every replication slot on the server, with lag and retained WAL."""
    with connect(dsn) as conn:
        return _slot_listing(conn)


def get_slot(dsn: str | None, name: str) -> SlotListing:
    """One slot (as a listing of one, so the caller knows the server's columns)."""
    with connect(dsn) as conn:
        listing = _slot_listing(conn, name)
    if not listing.slots:
        raise SlotError(
            f"replication slot {name!r} does not exist",
            hint="pgtail slot list shows the slots on this server",
        )
    return listing


@dataclass(frozen=True, slots=True)
class SlotCreated:
    name: str
    created: bool  # False: it already existed (--if-not-exists)
    lsn: int | None  # consistent point of a new slot
    temporary: bool


def create_slot(
    dsn: str | None,
    name: str,
    *,
    temporary: bool = False,
    two_phase: bool = False,
    if_not_exists: bool = False,
) -> SlotCreated:
    """Create a pgoutput logical slot in the connected database."""
    with connect(dsn) as conn:
        existing = _slot_listing(conn, name).slots
        if existing:
            slot = existing[0]
            if not if_not_exists:
                raise SlotError(
                    f"replication slot {name!r} already exists",
                    hint="use --if-not-exists, or pick another name",
                )
            _check_usable(conn, slot)
            return SlotCreated(name, False, slot.confirmed_flush_lsn, slot.temporary)
        try:
            row = _fetchone(
                conn,
                "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s, %s, %s)",
                (name, PLUGIN, temporary, two_phase),
            )
        except psycopg2.errors.DuplicateObject:
            if not if_not_exists:
                raise
            return SlotCreated(name, False, None, temporary)
        except psycopg2.Error as exc:
            if "invalid character" in str(exc) or "contains invalid" in str(exc):
                raise SlotError(
                    f"invalid replication slot name {name!r}",
                    hint="slot names may contain only lower case letters, digits and _",
                ) from None
            raise
        return SlotCreated(name, True, _lsn(row[0]), temporary)


def _check_usable(conn: PgConnection, slot: SlotInfo) -> None:
    if slot.slot_type != "logical" or slot.plugin != PLUGIN:
        raise SlotError(
            f"replication slot {slot.name!r} exists but uses "
            f"{slot.plugin or slot.slot_type!r}, not {PLUGIN}",
            hint="drop it (pgtail slot drop NAME) or pick another name",
        )
    dbname = _fetchone(conn, "SELECT current_database()")[0]
    if slot.database != dbname:
        raise SlotError(
            f"replication slot {slot.name!r} belongs to database {slot.database!r}",
            hint="connect to that database",
        )


@dataclass(frozen=True, slots=True)
class SlotDropped:
    name: str
    dropped: bool  # False: it did not exist (--if-exists)
    terminated_pid: int | None = None  # --force: the walsender that was terminated


def drop_slot(
    dsn: str | None,
    name: str,
    *,
    if_exists: bool = False,
    force: bool = False,
    wait_seconds: float = 10.0,
) -> SlotDropped:
    """Drop a slot; an active one only with ``force`` (terminates its walsender first)."""
    with connect(dsn) as conn:
        found = _slot_listing(conn, name).slots
        if not found:
            if if_exists:
                return SlotDropped(name, False)
            raise SlotError(
                f"replication slot {name!r} does not exist",
                hint="use --if-exists to ignore a missing slot",
            )
        slot = found[0]
        terminated: int | None = None
        if slot.active:
            if not force:
                raise SlotError(
                    f"replication slot {name!r} is active (walsender PID {slot.active_pid})",
                    hint="stop its consumer first, or use --force to terminate the walsender",
                )
            terminated = slot.active_pid
            _fetchall(conn, "SELECT pg_terminate_backend(%s)", (terminated,))
            deadline = time.monotonic() + wait_seconds
            while True:
                now = _slot_listing(conn, name).slots
                if not now:  # a temporary slot goes away with its session
                    return SlotDropped(name, True, terminated)
                if not now[0].active:
                    break
                if time.monotonic() > deadline:
                    raise SlotError(
                        f"replication slot {name!r} is still active after terminating "
                        f"PID {terminated} (PID now {now[0].active_pid})",
                        hint="its consumer reconnects; stop it, then drop the slot",
                    )
                time.sleep(0.1)
        try:
            _fetchall(conn, "SELECT pg_drop_replication_slot(%s)", (name,))
        except psycopg2.errors.UndefinedObject:
            if not if_exists and terminated is None:
                raise
        return SlotDropped(name, True, terminated)


@dataclass(frozen=True, slots=True)
class SlotAdvanced:
    name: str
    previous_lsn: int | None
    lsn: int  # where the slot is now
    requested_lsn: int


def advance_slot(dsn: str | None, name: str, target: str | int) -> SlotAdvanced:
    """Move a slot's confirmed position forward (never backwards)."""
    target_lsn = parse_lsn(target) if isinstance(target, str) else target
    with connect(dsn) as conn:
        found = _slot_listing(conn, name).slots
        if not found:
            raise SlotError(f"replication slot {name!r} does not exist")
        slot = found[0]
        current = slot.confirmed_flush_lsn if slot.slot_type == "logical" else slot.restart_lsn
        if current is not None and target_lsn < current:
            raise SlotError(
                f"cannot move replication slot {name!r} backwards: it is at "
                f"{format_lsn(current)}, {format_lsn(target_lsn)} is behind it",
                hint="a slot only moves forward; to re-read older changes create a new slot "
                "from a backup",
            )
        if slot.active:
            raise SlotError(
                f"replication slot {name!r} is active (walsender PID {slot.active_pid})",
                hint="stop its consumer before advancing it",
            )
        row = _fetchone(
            conn,
            "SELECT end_lsn::text FROM pg_replication_slot_advance(%s, %s::pg_lsn)",
            (name, format_lsn(target_lsn)),
        )
        return SlotAdvanced(name, current, _lsn(row[0]) or 0, target_lsn)


@dataclass(frozen=True, slots=True)
class PeekedChange:
    lsn: int
    xid: int
    data: bytes


def peek_changes(
    dsn: str | None,
    slot: str,
    publications: Sequence[str] = (),
    *,
    limit: int | None = None,
    protocol_version: int = 1,
    binary: bool = False,
) -> tuple[tuple[str, ...], list[PeekedChange]]:
    """Pending pgoutput messages of a slot, without consuming them.

    Without ``publications`` every publication of the database is used. ``limit``
    counts messages; the server finishes the transaction it is in. Returns the
    publications used and the messages.
    """
    with connect(dsn) as conn:
        found = _slot_listing(conn, slot).slots
        if not found:
            raise SlotError(f"replication slot {slot!r} does not exist")
        _check_usable(conn, found[0])
        names = tuple(publications)
        if not names:
            names = tuple(
                r[0] for r in _fetchall(conn, "SELECT pubname FROM pg_publication ORDER BY pubname")
            )
            if not names:
                raise PublicationError(
                    "there is no publication in this database to peek through",
                    hint="create one: pgtail publication create NAME --table T",
                )
        else:
            existing = {
                r[0]
                for r in _fetchall(
                    conn,
                    "SELECT pubname FROM pg_publication WHERE pubname = ANY(%s)",
                    (list(names),),
                )
            }
            missing = [n for n in names if n not in existing]
            if missing:
                raise PublicationError(f"publication {missing[0]!r} does not exist")
        options = [
            "proto_version",
            str(protocol_version),
            "publication_names",
            publication_names_option(names),
            "messages",
            "true",
        ]
        if binary:
            options += ["binary", "true"]
        with conn.cursor() as cur:
            cur.execute(decoding_set_statement())  # the text forms pgtail parses
        rows = _fetchall(
            conn,
            "SELECT lsn::text, xid::text::bigint, data FROM "
            "pg_logical_slot_peek_binary_changes(%s, NULL, %s, VARIADIC %s)",
            (slot, limit, options),
        )
    return names, [PeekedChange(parse_lsn(r[0]), int(r[1]), bytes(r[2])) for r in rows]


# --------------------------------------------------------------------------- types

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
    """`user_types` on a connection of its own (an Assembler's ``type_lookup``)."""
    with connect(dsn) as conn:
        return user_types(conn, type_oids)


def user_types(conn: PgConnection, type_oids: Sequence[int]) -> dict[int, UserType]:
    """What pg_type says of these types and the element / base types they lead to, for
    `pgtail.values.converters` (types that are not built in: enums, domains, arrays)."""
    if not type_oids:
        return {}
    rows = _fetchall(conn, _USER_TYPES_SQL, (list(type_oids),))
    return {int(oid): UserType(kind, int(element), int(base)) for oid, kind, element, base in rows}


# --------------------------------------------------------------------------- publications


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


def _publications(conn: PgConnection, name: str | None = None) -> list[PublicationInfo]:
    version = server_version_num(conn)
    where = " WHERE p.pubname = %s" if name is not None else ""
    pubs = _fetchall(
        conn,
        "SELECT p.oid, p.pubname, pg_get_userbyid(p.pubowner), p.puballtables, p.pubinsert, "
        "p.pubupdate, p.pubdelete, p.pubtruncate, p.pubviaroot FROM pg_publication p"
        + where
        + " ORDER BY p.pubname",
        (name,) if name is not None else None,
    )
    out = []
    for oid, pubname, owner, alltables, ins, upd, dele, trunc, viaroot in pubs:
        if version >= 150000:
            rel_rows = _fetchall(
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
                for r in _fetchall(
                    conn,
                    "SELECT n.nspname FROM pg_publication_namespace pn JOIN pg_namespace n "
                    "ON n.oid = pn.pnnspid WHERE pn.pnpubid = %s ORDER BY 1",
                    (oid,),
                )
            )
        else:
            rel_rows = [
                (*r, None, None)
                for r in _fetchall(
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
            for s, t in _fetchall(
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
                viaroot,
                tables,
                schemas,
                published,
            )
        )
    return out


def list_publications(dsn: str | None) -> list[PublicationInfo]:
    """Every publication of the connected database."""
    with connect(dsn) as conn:
        return _publications(conn)


def get_publication(dsn: str | None, name: str) -> PublicationInfo:
    with connect(dsn) as conn:
        return _get_publication(conn, name)


def _get_publication(conn: PgConnection, name: str) -> PublicationInfo:
    found = _publications(conn, name)
    if not found:
        raise PublicationError(
            f"publication {name!r} does not exist",
            hint="pgtail publication list shows the publications",
        )
    return found[0]


@dataclass(frozen=True, slots=True)
class TableTarget:
    """A ``--table`` with its optional row filter, as given to create/add."""

    spec: TableSpec
    row_filter: str | None = None


def _table_clause(conn: PgConnection, target: TableTarget, version: int) -> sql.Composable:
    ref = resolve_table(conn, target.spec)
    parts: list[sql.Composable] = [sql.SQL("TABLE "), ref.identifier]
    if target.spec.columns is not None:
        if version < 150000:
            raise ServerCapabilityError("column lists need PostgreSQL 15 or later")
        parts.append(
            sql.SQL(" ({})").format(
                sql.SQL(", ").join(sql.Identifier(c) for c in target.spec.columns)
            )
        )
    if target.row_filter is not None:
        if version < 150000:
            raise ServerCapabilityError("row filters (--where) need PostgreSQL 15 or later")
        # checked by check_row_filter: one expression that cannot close the parenthesis
        parts.append(sql.SQL(" WHERE ({})").format(sql.SQL(check_row_filter(target.row_filter))))
    return sql.Composed(parts)


def _object_clauses(
    conn: PgConnection, tables: Sequence[TableTarget], schemas: Sequence[str]
) -> sql.Composable:
    version = server_version_num(conn)
    clauses = [_table_clause(conn, t, version) for t in tables]
    if schemas:
        if version < 150000:
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
) -> PublicationChange:
    """CREATE PUBLICATION, refusing (or warning, with ``force``) when a table it adds
    would make UPDATE or DELETE fail for want of a replica identity."""
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
            target = sql.SQL(" FOR {}").format(_object_clauses(conn, tables, schemas))
        else:
            target = sql.SQL("")
        options = sql.SQL(" WITH (publish = {}, publish_via_partition_root = {})").format(
            sql.Literal(", ".join(operations)), sql.Literal(via_partition_root)
        )
        statement = sql.SQL("CREATE PUBLICATION {}").format(sql.Identifier(name)) + target + options
        return _guarded_ddl(conn, name, statement, force=force)


def alter_publication(
    dsn: str | None,
    name: str,
    action: str,
    *,
    tables: Sequence[TableTarget] = (),
    schemas: Sequence[str] = (),
    force: bool = False,
) -> PublicationChange:
    """ALTER PUBLICATION ... ADD or DROP tables / schemas (``action`` "add" or "remove")."""
    if not tables and not schemas:
        raise ConfigurationError("nothing to change", hint="give --table and/or --schema")
    if action not in ("add", "remove"):
        raise ValueError(action)
    with connect(dsn) as conn:
        _get_publication(conn, name)
        if action == "remove" and any(t.row_filter for t in tables):
            raise ConfigurationError("--where makes no sense with remove")
        if action == "remove":
            tables = [TableTarget(TableSpec(t.spec.schema, t.spec.name)) for t in tables]
        verb = sql.SQL(" ADD ") if action == "add" else sql.SQL(" DROP ")
        statement = (
            sql.SQL("ALTER PUBLICATION {}").format(sql.Identifier(name))
            + verb
            + _object_clauses(conn, tables, schemas)
        )
        return _guarded_ddl(conn, name, statement, force=force)


def drop_publication(dsn: str | None, name: str, *, if_exists: bool = False) -> bool:
    """DROP PUBLICATION; returns False when it did not exist (with ``if_exists``)."""
    with connect(dsn) as conn:
        exists = _fetchone(conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (name,))
        if exists is None:
            if if_exists:
                return False
            raise PublicationError(
                f"publication {name!r} does not exist",
                hint="use --if-exists to ignore a missing publication",
            )
        _fetchall(conn, sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(name)))
        return True


def _published_oids(conn: PgConnection, name: str) -> set[int]:
    return {
        int(r[0])
        for r in _fetchall(
            conn,
            "SELECT format('%%I.%%I', schemaname, tablename)::regclass::oid "
            "FROM pg_publication_tables WHERE pubname = %s",
            (name,),
        )
    }


def _guarded_ddl(
    conn: PgConnection, name: str, statement: sql.Composable, *, force: bool
) -> PublicationChange:
    """Run publication DDL in a transaction, look at what it newly publishes, and commit
    only if UPDATE/DELETE on those tables keep working (or ``force``)."""
    from pgtail import doctor

    conn.autocommit = False
    try:
        # check_row_filter scans string literals the standard way; make the server agree
        # (with standard_conforming_strings = off, '\'' would end somewhere else)
        _fetchall(conn, "SET LOCAL standard_conforming_strings = on")
        before = _published_oids(conn, name)
        with conn.cursor() as cur:
            cur.execute(statement)
        pub = _get_publication(conn, name)
        added = sorted(_published_oids(conn, name) - before)
        problems: list[str] = []
        if added and pub.publishes_changes_needing_identity:
            facts = _table_facts(conn, added)
            # published as their root, partitions still run the UPDATE/DELETE checks
            root_of = {
                leaf: f.oid
                for f in facts
                if f.relkind == "p"
                for leaf in _leaf_oids(conn, f.oid)
                if leaf not in added
            }
            leaves = sorted(root_of)
            facts += _table_facts(conn, leaves)
            rel_facts = {f.oid: f for f in facts}
            pub_rows = {r.table_oid: r for r in _publication_table_rows(conn, [name])}
            for oid in [*added, *leaves]:
                tf = rel_facts.get(oid)
                if tf is None:
                    continue
                # the root's row filter and column list apply to its partitions
                row = pub_rows.get(oid) or pub_rows.get(root_of.get(oid, -1))
                for check in doctor.table_publication_checks(tf, pub, row):
                    if check.status == "fail":
                        problems.append(f"{check.summary}; fix: {check.fix}")
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


# --------------------------------------------------------------------------- tables / identity


@dataclass(frozen=True, slots=True)
class ColumnFacts:
    name: str
    attnum: int
    type_name: str
    not_null: bool
    toastable: bool  # variable-length with a storage that allows out-of-line TOAST


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

    @property
    def qualified(self) -> str:
        return f"{quote_ident(self.schema)}.{quote_ident(self.name)}"

    def column(self, name: str) -> ColumnFacts | None:
        return next((c for c in self.columns if c.name == name), None)


_CLASS_SQL = """
SELECT c.oid, n.nspname, c.relname, c.relkind, c.relreplident, c.relispartition,
       root.nspname, root.relname
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN LATERAL (
    SELECT rn.nspname, rc.relname FROM pg_class rc JOIN pg_namespace rn ON rn.oid = rc.relnamespace
    WHERE rc.oid = pg_partition_root(c.oid)
) root ON c.relispartition
WHERE c.oid = ANY(%s::oid[])
"""

_COLUMN_SQL = """
SELECT a.attrelid, a.attname, a.attnum, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       (a.attlen = -1 AND a.attstorage IN ('x', 'e'))
FROM pg_attribute a
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""

_INDEX_SQL = """
SELECT i.indrelid, ic.relname, i.indisvalid, i.indisunique, i.indimmediate,
       i.indpred IS NOT NULL, i.indisready, i.indisprimary, i.indisreplident,
       ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
             LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE k.ord <= i.indnkeyatts ORDER BY k.ord)
FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
WHERE i.indrelid = ANY(%s::oid[]) ORDER BY i.indrelid, ic.relname
"""


def _table_facts(conn: PgConnection, oids: Sequence[int]) -> list[TableFacts]:
    """Facts of many tables in a few queries (a publication can hold thousands)."""
    if not oids:
        return []
    wanted = [int(o) for o in oids]
    classes = {int(r[0]): r for r in _fetchall(conn, _CLASS_SQL, (wanted,))}
    columns: dict[int, list[ColumnFacts]] = {}
    for r in _fetchall(conn, _COLUMN_SQL, (wanted,)):
        columns.setdefault(int(r[0]), []).append(
            ColumnFacts(r[1], int(r[2]), r[3], bool(r[4]), bool(r[5]))
        )
    indexes: dict[int, list[tuple[IndexFacts, bool, bool]]] = {}
    for ix in _fetchall(conn, _INDEX_SQL, (wanted,)):
        facts = IndexFacts(
            name=ix[1],
            columns=tuple(ix[9]),
            valid=bool(ix[2]),
            unique=bool(ix[3]),
            immediate=bool(ix[4]),
            partial=bool(ix[5]),
            ready=bool(ix[6]),
        )
        indexes.setdefault(int(ix[0]), []).append((facts, bool(ix[7]), bool(ix[8])))
    out = []
    for oid in wanted:
        row = classes.get(oid)
        if row is None:
            continue
        primary = next((f for f, is_pk, _ in indexes.get(oid, ()) if is_pk), None)
        identity = next((f for f, _, is_ri in indexes.get(oid, ()) if is_ri), None)
        uniques = tuple(f for f, _, _ in indexes.get(oid, ()) if f.unique)
        root = f"{quote_ident(row[6])}.{quote_ident(row[7])}" if row[6] is not None else None
        partitions: tuple[str, ...] = ()
        if row[3] == "p":
            partitions = tuple(
                f"{quote_ident(r[0])}.{quote_ident(r[1])}"
                for r in _fetchall(
                    conn,
                    "SELECT n.nspname, c.relname FROM pg_partition_tree(%s::oid::regclass) t "
                    "JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n "
                    "ON n.oid = c.relnamespace WHERE t.isleaf ORDER BY 1, 2",
                    (oid,),
                )
            )
        out.append(
            TableFacts(
                oid=oid,
                schema=row[1],
                name=row[2],
                relkind=row[3],
                replica_identity=row[4],
                is_partition=bool(row[5]),
                columns=tuple(columns.get(oid, ())),
                primary_key=primary,
                identity_index=identity,
                unique_indexes=uniques,
                partitions=partitions,
                partition_root=root,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class PublicationTableRow:
    """One table as one publication publishes it (pg_publication_tables + pg_publication_rel)."""

    publication: str
    table_oid: int
    columns: tuple[str, ...] | None  # explicit column list, None = all columns
    row_filter: str | None
    row_filter_columns: tuple[str, ...]


_VARATTNO = re.compile(r":varattno (\d+)")


def _leaf_oids(conn: PgConnection, oid: int) -> list[int]:
    return [
        int(r[0])
        for r in _fetchall(
            conn,
            "SELECT relid::oid FROM pg_partition_tree(%s::oid::regclass) WHERE isleaf",
            (oid,),
        )
    ]


def _publication_table_rows(
    conn: PgConnection, publications: Sequence[str]
) -> list[PublicationTableRow]:
    if not publications:
        return []
    if server_version_num(conn) < 150000:
        return [
            PublicationTableRow(r[0], int(r[1]), None, None, ())
            for r in _fetchall(
                conn,
                "SELECT pubname, format('%%I.%%I', schemaname, tablename)::regclass::oid "
                "FROM pg_publication_tables WHERE pubname = ANY(%s) ORDER BY 1, 2",
                (list(publications),),
            )
        ]
    rows = _fetchall(
        conn,
        "SELECT pt.pubname, pt.relid, "
        "  CASE WHEN r.prattrs IS NULL THEN NULL ELSE ARRAY(SELECT a.attname::text "
        "    FROM unnest(r.prattrs::int2[]) k(attnum) JOIN pg_attribute a "
        "    ON a.attrelid = r.prrelid AND a.attnum = k.attnum ORDER BY k.attnum) END, "
        "  pg_get_expr(r.prqual, r.prrelid), r.prqual::text, r.prrelid "
        "FROM (SELECT pubname, format('%%I.%%I', schemaname, tablename)::regclass::oid AS relid "
        "      FROM pg_publication_tables WHERE pubname = ANY(%s)) pt "
        "JOIN pg_publication p ON p.pubname = pt.pubname "
        # a partition published through its root gets the root's filter and column list
        "LEFT JOIN LATERAL (SELECT pr.* FROM (SELECT pt.relid, 0::bigint UNION ALL "
        "  SELECT * FROM pg_partition_ancestors(pt.relid) WITH ORDINALITY) anc(relid, depth) "
        "  JOIN pg_publication_rel pr "
        "  ON pr.prrelid = anc.relid AND pr.prpubid = p.oid ORDER BY anc.depth LIMIT 1) r "
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
                    for r in _fetchall(
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


@dataclass(frozen=True, slots=True)
class IdentityReport:
    """A table's replica identity and the publications that carry it."""

    table: TableFacts
    publications: tuple[PublicationInfo, ...]


def _identity_report(conn: PgConnection, ref: TableRef) -> IdentityReport:
    facts = _table_facts(conn, [ref.oid])[0]
    pubnames = [
        r[0]
        for r in _fetchall(
            conn,
            "SELECT DISTINCT pubname FROM pg_publication_tables "
            "WHERE format('%%I.%%I', schemaname, tablename)::regclass = %s::oid ORDER BY 1",
            (ref.oid,),
        )
    ]
    pubs = tuple(p for name in pubnames for p in _publications(conn, name))
    return IdentityReport(facts, pubs)


def table_identity(dsn: str | None, table: str) -> IdentityReport:
    """Replica identity facts of ``table`` (``schema.table``)."""
    spec = parse_table_spec(table, allow_columns=False)
    with connect(dsn) as conn:
        return _identity_report(conn, resolve_table(conn, spec))


IDENTITY_MODES = ("default", "full", "nothing", "index")


def set_replica_identity(
    dsn: str | None, table: str, mode: str, index: str | None = None, *, force: bool = False
) -> tuple[IdentityReport, IdentityReport]:
    """ALTER TABLE ... REPLICA IDENTITY; returns (before, after).

    Refuses (unless ``force``) a change that would make UPDATE or DELETE fail on the
    table because a publication publishes them.
    """
    from pgtail import doctor

    mode = mode.lower()
    if mode not in IDENTITY_MODES:
        raise ConfigurationError(
            f"unknown replica identity {mode!r}", hint="choose default, full, nothing or index NAME"
        )
    if (mode == "index") != (index is not None):
        raise ConfigurationError(
            "--set index needs an index name (--set index NAME)"
            if mode == "index"
            else "an index name goes with --set index"
        )
    spec = parse_table_spec(table, allow_columns=False)
    with connect(dsn) as conn:
        ref = resolve_table(conn, spec)
        before = _identity_report(conn, ref)
        clause: sql.Composable
        if mode == "index":
            assert index is not None
            clause = sql.SQL("USING INDEX {}").format(sql.Identifier(parse_name(index)))
        else:
            clause = sql.SQL(mode.upper())
        conn.autocommit = False
        try:
            with conn.cursor() as cur:
                cur.execute(
                    sql.SQL("ALTER TABLE {} REPLICA IDENTITY ").format(ref.identifier) + clause
                )
            after = _identity_report(conn, ref)
            breaks = [
                p.name
                for p in after.publications
                if p.publishes_changes_needing_identity
                and doctor.identity_of(after.table).mode == "nothing"
            ]
            if breaks and not force:
                conn.rollback()
                raise ConfigurationError(
                    f"not changed: with REPLICA IDENTITY {mode.upper()} every UPDATE/DELETE on "
                    f"{ref.qualified} would fail, because publication {breaks[0]!r} publishes "
                    "them",
                    hint="use --force to change it anyway",
                )
            conn.commit()
        except BaseException:
            if not conn.closed:
                conn.rollback()
            raise
        finally:
            if not conn.closed:
                conn.autocommit = True
        return before, after


# --------------------------------------------------------------------------- doctor facts


@dataclass(frozen=True, slots=True)
class RoleFacts:
    name: str
    superuser: bool
    replication: bool
    managed_roles: tuple[str, ...]  # MANAGED_REPLICATION_ROLES the role is a member of
    can_create_in_database: bool
    database: str


@dataclass(frozen=True, slots=True)
class ServerFacts:
    version_num: int
    settings: dict[str, str]  # wal_level, max_replication_slots, max_wal_senders, ...
    slots_in_use: int
    senders_in_use: int
    in_recovery: bool


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


_SETTINGS = (
    "wal_level",
    "max_replication_slots",
    "max_wal_senders",
    "max_slot_wal_keep_size",
    "wal_keep_size",
    "max_wal_size",
    "wal_segment_size",
)

_PUBNAMES = re.compile(r"\"?publication_names\"?\s+'((?:[^']|'')*)'", re.IGNORECASE)
_SLOTNAME = re.compile(r'START_REPLICATION\s+SLOT\s+("(?:[^"]|"")*"|\S+)', re.IGNORECASE)


def _split_names(value: str) -> tuple[str, ...]:
    names: list[str] = []
    pos = 0
    while pos < len(value):
        try:
            name, pos = _parse_ident(value, pos)
        except ConfigurationError:
            break
        names.append(name)
        pos = _skip_space(value, pos)
        if pos < len(value) and value[pos] == ",":
            pos += 1
    return tuple(names)


def doctor_facts(
    dsn: str | None, publications: Sequence[str] = (), slots: Sequence[str] = ()
) -> DoctorFacts:
    """Everything `pgtail doctor` judges, read in one connection."""
    with connect(dsn) as conn:
        version = server_version_num(conn)
        settings = {
            name: _setting_value(setting, unit)
            for name, setting, unit in _fetchall(
                conn,
                "SELECT name, setting, unit FROM pg_settings WHERE name = ANY(%s)",
                (list(_SETTINGS),),
            )
        }
        in_recovery = bool(_fetchone(conn, "SELECT pg_is_in_recovery()")[0])
        slots_in_use = int(_fetchone(conn, "SELECT count(*) FROM pg_replication_slots")[0])
        senders_rows = _fetchall(
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
                slot_name = _parse_ident(raw, 0)[0] if raw.startswith('"') else raw
            pubs = _split_names(pub_match.group(1).replace("''", "'")) if pub_match else ()
            walsenders.append(WalsenderFacts(int(pid), datname, slot_name, pubs))
        server = ServerFacts(version, settings, slots_in_use, len(senders_rows), in_recovery)

        role_row = _fetchone(
            conn,
            "SELECT r.rolname, r.rolsuper, r.rolreplication, "
            "has_database_privilege(current_database(), 'CREATE'), current_database() "
            "FROM pg_roles r WHERE r.rolname = current_user",
        )
        managed = tuple(
            r[0]
            for r in _fetchall(
                conn,
                "SELECT rolname FROM pg_roles WHERE rolname = ANY(%s) "
                "AND pg_has_role(current_user, oid, 'MEMBER') ORDER BY 1",
                (list(MANAGED_REPLICATION_ROLES),),
            )
        )
        role = RoleFacts(
            role_row[0],
            bool(role_row[1]),
            bool(role_row[2]),
            managed,
            bool(role_row[3]),
            role_row[4],
        )

        all_pubs = tuple(
            r[0] for r in _fetchall(conn, "SELECT pubname FROM pg_publication ORDER BY 1")
        )
        wanted = list(publications) if publications else list(all_pubs)
        found_pubs = tuple(p for name in wanted for p in _publications(conn, name))
        pub_rows = tuple(_publication_table_rows(conn, [p.name for p in found_pubs]))
        oids = sorted({r.table_oid for r in pub_rows})
        tables = _table_facts(conn, oids)
        # leaf partitions of published partitioned tables: UPDATE/DELETE checks happen there
        leaf_oids = sorted(
            {leaf for t in tables if t.relkind == "p" for leaf in _leaf_oids(conn, t.oid)}
            - set(oids)
        )
        tables += _table_facts(conn, leaf_oids)
        listing = _slot_listing(conn)
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
    )


_UNIT_BYTES = {
    "B": 1,
    "kB": 1024,
    "8kB": 8192,
    "MB": 1024**2,
    "16MB": 16 * 1024**2,
    "GB": 1024**3,
    "TB": 1024**4,
}


def _setting_value(setting: str, unit: str | None) -> str:
    """A pg_settings value in bytes when it is a size (``-1`` stays ``-1``)."""
    if unit and unit in _UNIT_BYTES and setting.lstrip("-").isdigit() and int(setting) >= 0:
        return str(int(setting) * _UNIT_BYTES[unit])
    return setting
