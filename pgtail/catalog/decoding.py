"""Reading a slot through the SQL interface of logical decoding, without a replication
connection: peeking pending pgoutput messages (``pgtail slot peek``), finding where a
batch ends, and advancing a slot (the Spark driver); and the one statement the Spark
executors run on their replication connection, copying the slot to stream the copy.

``pg_logical_slot_peek_binary_changes`` never moves the slot, so a batch can be read
again as often as needed; the slot moves only through `advance_to`. A slot busy with
another reader is retried for ``busy_timeout`` seconds (a crashed reader's backend may
still hold it briefly), then reported as a `SlotError`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg2
import psycopg2.extensions
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import (
    connect,
    decoding_set_statement,
    fetchall,
)
from pgtail.catalog.errors import slot_busy, translate_slot_error
from pgtail.catalog.publications import publication_names, require_publications
from pgtail.catalog.server import server_version_num
from pgtail.catalog.slots import require_slot
from pgtail.errors import PublicationError, ServerCapabilityError, SlotError
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.sqlnames import publication_names_option

DEFAULT_BUSY_TIMEOUT = 10.0
BUSY_RETRY_SECONDS = 0.2
FETCH_ROWS = 5000


@dataclass(frozen=True, slots=True)
class PeekedChange:
    lsn: int
    xid: int
    data: bytes


MESSAGES_VERSION = 140000  # pgoutput's messages and binary options


def peek_options(
    version: int, publications: Sequence[str], *, protocol_version: int = 1, binary: bool = False
) -> list[str]:
    """pgoutput's options for a peek on this server version: logical decoding messages
    where pgoutput can send them (14+); binary transfer only there."""
    options = [
        "proto_version",
        str(protocol_version),
        "publication_names",
        publication_names_option(publications),
    ]
    if version >= MESSAGES_VERSION:
        options += ["messages", "true"]
    if binary:
        if version < MESSAGES_VERSION:
            raise ServerCapabilityError(
                f"binary transfer needs PostgreSQL 14 or later (server is {version // 10000})"
            )
        options += ["binary", "true"]
    return options


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
        require_slot(conn, slot)
        names = tuple(publications)
        if not names:
            names = tuple(publication_names(conn))
            if not names:
                raise PublicationError(
                    "there is no publication in this database to peek through",
                    hint="create one: pgtail publication create NAME --table T",
                )
        else:
            require_publications(conn, names)
        options = peek_options(
            server_version_num(conn), names, protocol_version=protocol_version, binary=binary
        )
        with conn.cursor() as cur:
            cur.execute(decoding_set_statement())  # the text forms pgtail parses
        rows = fetchall(
            conn,
            "SELECT lsn::text, xid::text::bigint, data FROM "
            "pg_logical_slot_peek_binary_changes(%s, NULL, %s, VARIADIC %s)",
            (slot, limit, options),
        )
    return names, [PeekedChange(parse_lsn(r[0]), int(r[1]), bytes(r[2])) for r in rows]


_PEEK = sql.SQL(
    "SELECT {what} FROM pg_logical_slot_peek_binary_changes("
    "%s, %s::pg_lsn, NULL, VARIADIC %s::text[])"
)

# the highest row LSN; pg_lsn has max() only from PostgreSQL 13, its distance from 0/0
# (numeric) has it everywhere
_LAST_LSN = sql.SQL("max(lsn - '0/0')")


def last_emitted_lsn(
    conn: PgConnection,
    slot: str,
    upto: int,
    options: list[str],
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
) -> int | None:
    """Decode the slot up to ``upto`` on the server and return only the highest row LSN:
    the end of the last transaction (or non-transactional message) it would deliver."""
    query = _PEEK.format(what=_LAST_LSN)
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            with conn.cursor() as cur:
                cur.execute(query, (slot, format_lsn(upto), options))
                row = cur.fetchone()
            break
        except psycopg2.Error as exc:
            if slot_busy(exc) and time.monotonic() < deadline:
                time.sleep(BUSY_RETRY_SECONDS)
                continue
            raise translate_slot_error(exc, slot) from None
    if row is None or row[0] is None:
        return None
    return int(row[0])


def advance_to(
    conn: PgConnection,
    slot: str,
    lsn: int,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    *,
    missing_hint: str | None = None,
) -> int:
    """Move the slot's confirmed position forward to ``lsn`` (never backwards; a no-op when
    it is already there or past). Returns the confirmed position afterwards."""
    state = require_slot(conn, slot, missing_hint=missing_hint)
    assert state.confirmed_flush_lsn is not None
    if lsn <= state.confirmed_flush_lsn:
        return state.confirmed_flush_lsn
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
                after = require_slot(conn, slot, missing_hint=missing_hint).confirmed_flush_lsn
                assert after is not None
                return after
            if slot_busy(exc) and time.monotonic() < deadline:
                time.sleep(BUSY_RETRY_SECONDS)
                continue
            raise translate_slot_error(exc, slot) from None
    return parse_lsn(row[0]) if row and row[0] else lsn


def copy_slot_for_reading(
    cur: psycopg2.extensions.cursor,
    slot: str,
    copy: str,
    busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    *,
    missing_hint: str | None = None,
) -> int:
    """On a replication connection (``replication=database`` runs SQL too): copy ``slot``
    as the TEMPORARY slot ``copy`` (PostgreSQL 12+), which the connection may then stream
    and confirm without moving ``slot``; return the copy's confirmed position.

    A slot another process is reading is waited for up to ``busy_timeout`` seconds, then
    reported: two readers of one slot mean a misconfigured job (Spark speculation).
    """
    deadline = time.monotonic() + busy_timeout
    try:
        while True:
            cur.execute(
                "SELECT active_pid, slot_type, plugin FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (slot,),
            )
            row = cur.fetchone()
            if row is None:
                raise SlotError(
                    f"replication slot {slot!r} does not exist",
                    hint=missing_hint or f"create it: pgtail slot create {slot}",
                )
            if row[0] is None:
                break
            if time.monotonic() >= deadline:
                raise SlotError(
                    f"replication slot {slot!r} is in use by another process (PID {row[0]})",
                    hint=(
                        "only one reader per slot: stop the other pgtail/Spark reader; in "
                        "Spark set spark.speculation=false so no two tasks read one slot "
                        "at once"
                    ),
                )
            time.sleep(BUSY_RETRY_SECONDS)
        cur.execute(
            "SELECT slot_name FROM pg_copy_logical_replication_slot(%s, %s, true)",
            (slot, copy),
        )
        cur.fetchall()
        cur.execute(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
            (copy,),
        )
        found = cur.fetchone()
    except psycopg2.Error as exc:
        raise translate_slot_error(exc, slot) from None
    if found is None or found[0] is None:
        raise SlotError(f"replication slot {slot!r} has no confirmed position to read from")
    return parse_lsn(found[0])
