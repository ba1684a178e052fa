"""The SQL the Spark source runs: slot position, WAL position, peeking a slot up to an
LSN, and advancing a slot. The only place in `pgtail.spark` that touches psycopg2.

Everything goes through the SQL interface of logical decoding
(``pg_logical_slot_peek_binary_changes`` / ``pg_replication_slot_advance``), so a
batch can be replayed as often as Spark needs and the slot moves only on commit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import psycopg2
import psycopg2.extensions
from psycopg2 import sql

from pgtail.connection import decoding_set_statement, redact, translate_connect_error
from pgtail.errors import (
    PgtailError,
    PublicationError,
    ReplicationError,
    ServerCapabilityError,
    SlotError,
)
from pgtail.lsn import format_lsn, parse_lsn

APPLICATION_NAME = "pgtail-spark"
DEFAULT_BUSY_TIMEOUT = 10.0
BUSY_RETRY_SECONDS = 0.2
FETCH_ROWS = 5000


@dataclass(frozen=True, slots=True)
class SlotState:
    name: str
    plugin: str | None
    slot_type: str
    database: str | None
    confirmed_flush: int | None
    active_pid: int | None


def connect(dsn: str) -> psycopg2.extensions.connection:
    """An ordinary (non-replication) autocommit connection."""
    try:
        conn = psycopg2.connect(dsn, application_name=APPLICATION_NAME)
    except psycopg2.Error as exc:
        raise translate_connect_error(exc, dsn) from None
    conn.autocommit = True
    return conn


def quote_publication_names(names: Sequence[str]) -> str:
    """``publication_names`` as pgoutput parses it (SplitIdentifierString): always quoted,
    so names keep their case and may hold commas."""
    return ",".join('"' + name.replace('"', '""') + '"' for name in names)


def plugin_options(
    publications: Sequence[str], *, binary: bool, messages: bool, server_version: int
) -> list[str]:
    options = ["proto_version", "1", "publication_names", quote_publication_names(publications)]
    if server_version >= 140000:
        options += ["messages", "true" if messages else "false"]
        if binary:
            options += ["binary", "true"]
    elif binary:
        raise ServerCapabilityError(
            "binary transfer needs PostgreSQL 14 or later", hint="set binary=false"
        )
    return options


def translate_error(exc: psycopg2.Error, slot: str) -> PgtailError:
    """A psycopg2 error raised by a slot function, as a pgtail error with a fix."""
    text = redact(str(exc).strip()).splitlines()[0] if str(exc).strip() else type(exc).__name__
    lower = text.lower()
    if "is active for pid" in lower:
        return SlotError(
            f"replication slot {slot!r} is in use by another process ({text})",
            hint=(
                "only one reader per slot: stop the other pgtail/Spark reader; in Spark "
                "set spark.speculation=false so no two tasks read one slot at once"
            ),
        )
    if "does not exist" in lower and "replication slot" in lower:
        return SlotError(
            f"replication slot {slot!r} does not exist",
            hint=f"create it: pgtail slot create {slot} (or SELECT pg_create_logical_"
            f"replication_slot('{slot}', 'pgoutput'))",
        )
    if "publication" in lower and "does not exist" in lower:
        return PublicationError(text, hint="create the publication or fix the publication option")
    if "permission denied" in lower or "must be superuser or replication role" in lower:
        return ServerCapabilityError(
            f"not allowed to use replication slot {slot!r}: {text}",
            hint="the role needs the REPLICATION attribute",
        )
    if "logical decoding requires" in lower or "wal_level" in lower:
        return ServerCapabilityError(text, hint="set wal_level = logical and restart")
    return ReplicationError(f"reading replication slot {slot!r} failed: {text}")


def server_version(conn: psycopg2.extensions.connection) -> int:
    return int(conn.server_version)


def slot_state(conn: psycopg2.extensions.connection, slot: str) -> SlotState | None:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT slot_name, plugin, slot_type, database, confirmed_flush_lsn::text,"
            " active_pid FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )
        row = cur.fetchone()
    if row is None:
        return None
    return SlotState(
        name=row[0],
        plugin=row[1],
        slot_type=row[2],
        database=row[3],
        confirmed_flush=parse_lsn(row[4]) if row[4] else None,
        active_pid=row[5],
    )


def require_slot(conn: psycopg2.extensions.connection, slot: str) -> SlotState:
    """The slot's state; `SlotError` if it is missing or not a pgoutput slot of this database."""
    state = slot_state(conn, slot)
    if state is None:
        raise SlotError(
            f"replication slot {slot!r} does not exist",
            hint=f"create it with: pgtail slot create {slot} --publication <pub> "
            f"(or SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput'))",
        )
    if state.slot_type != "logical":
        raise SlotError(
            f"replication slot {slot!r} is a physical slot",
            hint="use a logical slot created with the pgoutput plugin",
        )
    if state.plugin != "pgoutput":
        raise SlotError(
            f"replication slot {slot!r} uses the plugin {state.plugin!r}, not pgoutput",
            hint="create a slot with the pgoutput plugin",
        )
    with conn.cursor() as cur:
        cur.execute("SELECT current_database()")
        row = cur.fetchone()
    current = row[0] if row else None
    if state.database != current:
        raise SlotError(
            f"replication slot {slot!r} belongs to database {state.database!r}, not {current!r}",
            hint="connect to the slot's database (dbname in the DSN)",
        )
    if state.confirmed_flush is None:
        raise SlotError(
            f"replication slot {slot!r} has no confirmed position (invalidated?)",
            hint="drop and re-create the slot",
        )
    return state


def require_publications(conn: psycopg2.extensions.connection, names: Sequence[str]) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT pubname FROM pg_publication WHERE pubname = ANY(%s)", (list(names),))
        found = {r[0] for r in cur.fetchall()}
    missing = [n for n in names if n not in found]
    if missing:
        raise PublicationError(
            f"publication {missing[0]!r} does not exist",
            hint=f"create it: CREATE PUBLICATION {missing[0]} FOR TABLE ... "
            "(or fix the publication option)",
        )


def wal_position(conn: psycopg2.extensions.connection) -> int:
    """WAL written and flushed (replayed, on a standby): logical decoding reads up to here."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
            " ELSE pg_current_wal_flush_lsn() END)::text"
        )
        row = cur.fetchone()
    assert row is not None
    return parse_lsn(row[0])


def wait_flushed(conn: psycopg2.extensions.connection, timeout: float = 1.0) -> int:
    """The flushed WAL position once it has reached what was written when called (so
    asynchronously committed transactions count as available), or after ``timeout``."""

    with conn.cursor() as cur:
        cur.execute(
            "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
            " ELSE pg_current_wal_insert_lsn() END)::text"
        )
        row = cur.fetchone()
    assert row is not None
    written = parse_lsn(row[0])
    deadline = time.monotonic() + timeout
    while True:
        flushed = wal_position(conn)
        if flushed >= written or time.monotonic() > deadline:
            return flushed
        time.sleep(0.02)


_PEEK = sql.SQL(
    "SELECT {what} FROM pg_logical_slot_peek_binary_changes("
    "%s, %s::pg_lsn, NULL, VARIADIC %s::text[])"
)


def _slot_busy(exc: psycopg2.Error) -> bool:
    return "is active for pid" in str(exc).lower()


def last_emitted_lsn(
    conn: psycopg2.extensions.connection,
    slot: str,
    upto: int,
    options: list[str],
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
) -> int | None:
    """Decode the slot up to ``upto`` on the server and return only the highest row LSN:
    the end of the last transaction (or non-transactional message) it would deliver."""
    query = _PEEK.format(what=sql.SQL("max(lsn)::text"))
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            with conn.cursor() as cur:
                cur.execute(query, (slot, format_lsn(upto), options))
                row = cur.fetchone()
            break
        except psycopg2.Error as exc:
            if _slot_busy(exc) and time.monotonic() < deadline:
                time.sleep(BUSY_RETRY_SECONDS)
                continue
            raise translate_error(exc, slot) from None
    if row is None or row[0] is None:
        return None
    return parse_lsn(row[0])


def peek(
    dsn: str,
    slot: str,
    upto: int,
    options: list[str],
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
) -> Iterator[tuple[int, bytes]]:
    """Every (lsn, payload) the slot would deliver up to ``upto``, streamed through a
    server-side cursor, without moving the slot.

    A slot busy with another reader is retried for ``busy_timeout`` seconds (a crashed
    reader's backend may still hold it briefly), then reported as a `SlotError`.
    """
    conn = connect(dsn)
    deadline = time.monotonic() + busy_timeout
    try:
        with conn.cursor() as cur:  # before the transaction: a rollback would undo it
            cur.execute(decoding_set_statement())  # the text forms pgtail parses
        conn.autocommit = False
        while True:
            yielded = False
            try:
                with conn.cursor(name="pgtail_peek") as cur:
                    cur.itersize = FETCH_ROWS
                    cur.execute(
                        _PEEK.format(what=sql.SQL("(lsn - '0/0')::bigint, data")),
                        (slot, format_lsn(upto), options),
                    )
                    for lsn, data in cur:
                        yielded = True
                        yield lsn, bytes(data)
                break
            except psycopg2.Error as exc:
                conn.rollback()
                if _slot_busy(exc) and not yielded and time.monotonic() < deadline:
                    time.sleep(BUSY_RETRY_SECONDS)
                    continue
                raise translate_error(exc, slot) from None
        conn.rollback()
    finally:
        conn.close()


def advance(
    conn: psycopg2.extensions.connection,
    slot: str,
    lsn: int,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
) -> int:
    """Move the slot's confirmed position forward to ``lsn`` (never backwards; a no-op when
    it is already there or past). Returns the confirmed position afterwards."""
    state = require_slot(conn, slot)
    assert state.confirmed_flush is not None
    if lsn <= state.confirmed_flush:
        return state.confirmed_flush
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT end_lsn::text FROM pg_replication_slot_advance(%s, %s::pg_lsn)",
                    (slot, format_lsn(lsn)),
                )
                row = cur.fetchone()
            break
        except psycopg2.Error as exc:
            if "cannot advance replication slot" in str(exc) and "minimum is" in str(exc):
                after = require_slot(conn, slot).confirmed_flush
                assert after is not None
                return after
            if _slot_busy(exc) and time.monotonic() < deadline:
                time.sleep(BUSY_RETRY_SECONDS)
                continue
            raise translate_error(exc, slot) from None
    return parse_lsn(row[0]) if row and row[0] else lsn
