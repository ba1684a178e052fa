"""One look at the server's logical replication for `pgtail top`, `slot info` and the
doctor's root causes (`replication_facts`): slots with their xmin horizons, their
statistics (pg_stat_replication_slots, 14+), the walsenders (pg_stat_replication), the
oldest open and prepared transactions, per-database change counters and the WAL settings
that bound a slot. A handful of queries per look; what a server version lacks is None
(or, for the statistics, an empty mapping), decided here.
"""

from __future__ import annotations

import os
import secrets

import psycopg2
from psycopg2.extensions import connection as PgConnection

from pgtail.catalog.connection import connect, fetchall, fetchone, open_connection
from pgtail.catalog.errors import translate_error
from pgtail.catalog.facts import (
    OpenTransaction,
    ReplicationFacts,
    SenderFacts,
    SlotStats,
    TransactionWait,
)
from pgtail.catalog.server import CURRENT_LSN, lsn_or_none, server_version_num, settings
from pgtail.catalog.slots import slot_listing
from pgtail.catalog.waiting import Blocker, WaitFacts, describe_blocker, wait_for_server
from pgtail.sqlnames import publication_names_option

WAL_SETTINGS = ("max_slot_wal_keep_size", "max_wal_size", "wal_keep_size", "wal_keep_segments")

# how many of the oldest open transactions a look keeps
OLDEST_TRANSACTIONS = 5

_SENDERS = """
SELECT r.pid, s.slot_name, r.application_name, r.client_addr::text, r.state,
       extract(epoch FROM clock_timestamp() - r.backend_start)::float8,
       r.sent_lsn::text, r.write_lsn::text, r.flush_lsn::text, r.replay_lsn::text,
       extract(epoch FROM r.write_lag)::float8, extract(epoch FROM r.flush_lag)::float8,
       extract(epoch FROM r.replay_lag)::float8,
       extract(epoch FROM clock_timestamp() - r.reply_time)::float8
FROM pg_stat_replication r LEFT JOIN pg_replication_slots s ON s.active_pid = r.pid
ORDER BY r.pid
"""

# client backends in a transaction, oldest first (not this session, not walsenders)
_TRANSACTIONS = """
SELECT pid, datname, usename, application_name, state,
       extract(epoch FROM clock_timestamp() - xact_start)::float8,
       backend_xid::text, age(backend_xmin)
FROM pg_stat_activity
WHERE xact_start IS NOT NULL AND pid <> pg_backend_pid()
  AND coalesce(backend_type, 'client backend') = 'client backend'
ORDER BY xact_start LIMIT %s
"""

_PREPARED = """
SELECT gid, database, owner, extract(epoch FROM clock_timestamp() - prepared)::float8,
       transaction::text, age(transaction)
FROM pg_prepared_xacts ORDER BY prepared
"""


# backends waiting for a transaction to end (a slot being created waits so for every
# transaction running when it started), the transaction's xid and, where this role may see
# it, its session; pg_locks shows every role's locks, pg_stat_activity hides other roles'
# xact_start without pg_read_all_stats
_WAITS = """
SELECT l.pid, l.transactionid::text, b.pid,
       extract(epoch FROM clock_timestamp() - b.xact_start)::float8,
       b.datname, b.application_name, b.state
FROM pg_locks l
LEFT JOIN LATERAL (
    SELECT h.pid FROM pg_locks h
    WHERE h.locktype = 'transactionid' AND h.transactionid = l.transactionid AND h.granted
      AND h.pid IS NOT NULL
    LIMIT 1
) holder ON true
LEFT JOIN pg_stat_activity b ON b.pid = holder.pid
WHERE l.locktype = 'transactionid' AND NOT l.granted AND l.pid IS NOT NULL
  AND (%(pid)s::int IS NULL OR l.pid = %(pid)s::int)
ORDER BY l.pid
"""


def transaction_waits(conn: PgConnection, pid: int | None = None) -> tuple[TransactionWait, ...]:
    """The backends (or only ``pid``) waiting for a transaction to end, with the session
    that holds it: what a slot being created waits for."""
    return tuple(
        TransactionWait(
            pid=int(r[0]),
            xid=int(r[1]),
            blocker_pid=r[2],
            blocker_age_seconds=r[3],
            blocker_database=r[4],
            blocker_application_name=r[5],
            blocker_state=r[6],
        )
        for r in fetchall(conn, _WAITS, {"pid": pid})
    )


def _stats_query(version: int) -> str:
    totals = "total_txns, total_bytes" if version >= 150000 else "NULL, NULL"
    return (
        "SELECT slot_name, spill_txns, spill_count, spill_bytes, stream_txns, stream_count,"
        f" stream_bytes, {totals} FROM pg_stat_replication_slots"
    )


def _int(text: str | None) -> int | None:
    return int(text) if text is not None else None


def replication_facts(conn: PgConnection) -> ReplicationFacts:
    """Everything one interval of `pgtail top` shows, read now."""
    version = server_version_num(conn)
    taken_at, database, current, role, sees_all = fetchone(
        conn,
        "SELECT extract(epoch FROM clock_timestamp())::float8, current_database(),"
        f" ({CURRENT_LSN})::text, current_user::text,"
        " pg_has_role('pg_read_all_stats', 'USAGE')",
    )
    listing = slot_listing(conn)
    stats: dict[str, SlotStats] = {}
    if version >= 140000:
        for row in fetchall(conn, _stats_query(version)):
            spill_txns, spill_count, spill_bytes, stream_txns, stream_count, stream_bytes = (
                int(v or 0) for v in row[1:7]
            )
            stats[row[0]] = SlotStats(
                spill_txns,
                spill_count,
                spill_bytes,
                stream_txns,
                stream_count,
                stream_bytes,
                total_txns=_int(row[7]),
                total_bytes=_int(row[8]),
            )
    senders = tuple(
        SenderFacts(
            pid=int(r[0]),
            slot=r[1],
            application_name=r[2] or "",
            client_addr=r[3],
            state=r[4],
            started_ago=r[5],
            sent_lsn=lsn_or_none(r[6]),
            write_lsn=lsn_or_none(r[7]),
            flush_lsn=lsn_or_none(r[8]),
            replay_lsn=lsn_or_none(r[9]),
            write_lag=r[10],
            flush_lag=r[11],
            replay_lag=r[12],
            reply_ago=r[13],
        )
        for r in fetchall(conn, _SENDERS)
    )
    transactions = tuple(
        OpenTransaction(
            pid=int(r[0]),
            database=r[1],
            user=r[2],
            application_name=r[3],
            state=r[4],
            age_seconds=r[5],
            xid=_int(r[6]),
            xmin_age=r[7],
        )
        for r in fetchall(conn, _TRANSACTIONS, (OLDEST_TRANSACTIONS,))
    )
    prepared = tuple(
        OpenTransaction(
            pid=None,
            database=r[1],
            user=r[2],
            application_name=None,
            state="prepared",
            age_seconds=r[3],
            xid=_int(r[4]),
            xmin_age=r[5],
            prepared_gid=r[0],
        )
        for r in fetchall(conn, _PREPARED)
    )
    changes = {
        str(r[0]): int(r[1])
        for r in fetchall(
            conn,
            "SELECT datname, coalesce(tup_inserted + tup_updated + tup_deleted, 0)"
            " FROM pg_stat_database WHERE datname IS NOT NULL",
        )
    }
    return ReplicationFacts(
        version_num=version,
        taken_at=float(taken_at),
        current_lsn=lsn_or_none(current) or 0,
        database=str(database),
        settings=settings(conn, WAL_SETTINGS),
        slots=listing,
        stats=stats,
        senders=senders,
        transactions=transactions,
        prepared=prepared,
        database_changes=changes,
        waits=transaction_waits(conn),
        role=str(role),
        sees_all=bool(sees_all),
    )


def read_replication(dsn: str | None) -> ReplicationFacts:
    """`replication_facts` on a connection of its own."""
    with connect(dsn) as conn:
        return replication_facts(conn)


class Watcher:
    """One connection kept open for a live view: `look` reads `replication_facts`."""

    def __init__(self, dsn: str | None) -> None:
        self._conn = open_connection(dsn)

    def look(self) -> ReplicationFacts:
        try:
            return replication_facts(self._conn)
        except psycopg2.Error as exc:
            raise translate_error(exc) from None

    def close(self) -> None:
        self._conn.close()


# pg_create_logical_replication_slot waits for every open transaction to end (it needs a
# consistent start); a live view does not wait that long
CREATE_TIMEOUT_MS = 3000
TOP_SLOT_PREFIX = "pgtail_top_"


class ChangeSampler:
    """A temporary pgoutput slot of `pgtail top`'s own, read (and so consumed) through the
    SQL interface each interval. It never touches another slot; it is dropped when its
    session ends. `start` returns None, or the one line that says why there are no rates.
    """

    def __init__(self, dsn: str | None, publication: str, limit: int = 100_000) -> None:
        self.dsn = dsn
        self.publication = publication
        self.limit = limit
        self.slot = f"{TOP_SLOT_PREFIX}{os.getpid()}_{secrets.token_hex(3)}"
        self._conn: PgConnection | None = None
        self.retriable = False  # start failed only because transactions were open

    def start(self) -> str | None:
        conn = open_connection(self.dsn)
        try:
            found = fetchone(
                conn, "SELECT 1 FROM pg_publication WHERE pubname = %s", (self.publication,)
            )
            if found is None:
                return (
                    f"no publication {self.publication!r} in database "
                    f"{conn.info.dbname!r}: no per-table rates"
                )
            fetchall(conn, f"SET statement_timeout = {CREATE_TIMEOUT_MS}")
            # Ctrl-C / SIGTERM cancel the wait at once (the live view has not begun)
            wait_for_server(
                lambda: fetchall(
                    conn,
                    "SELECT pg_create_logical_replication_slot(%s, 'pgoutput', true)",
                    (self.slot,),
                ),
                conn=conn,
                dsn=self.dsn,
                what="create top's temporary slot",
                log=lambda line: None,  # the view's note says it instead
            )
            fetchall(conn, "SET statement_timeout = 0")
        except psycopg2.Error as exc:
            self.retriable = exc.pgcode == "57014"
            oldest = _oldest_writer(conn) if self.retriable else ""
            conn.close()
            return _sampler_failure(exc, oldest)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return None

    def read(self) -> tuple[list[bytes], bool]:
        """The messages committed since the last read, and whether more are pending."""
        assert self._conn is not None
        try:
            rows = fetchall(
                self._conn,
                "SELECT data FROM pg_logical_slot_get_binary_changes(%s, NULL, %s,"
                " 'proto_version', '1', 'publication_names', %s)",
                (self.slot, self.limit, publication_names_option([self.publication])),
            )
        except psycopg2.Error as exc:
            raise translate_error(exc) from None
        return [bytes(r[0]) for r in rows], len(rows) >= self.limit

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()  # the temporary slot goes with the session
            self._conn = None


def _oldest_writer(conn: PgConnection) -> str:
    """The oldest open transaction that has an xid (what a slot's creation waits for
    first), as a few words for the note; empty when none is seen."""
    try:
        rows = fetchall(
            conn,
            "SELECT pid, backend_xid::text,"
            " extract(epoch FROM clock_timestamp() - xact_start)::float8,"
            " application_name::text, state::text FROM pg_stat_activity"
            " WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()"
            " ORDER BY xact_start LIMIT 1",
        )
    except psycopg2.Error:
        return ""
    if not rows:
        return ""
    pid, xid, age, app, state = rows[0]
    facts = WaitFacts(None, None, (Blocker(int(pid), xid, age, app, state),))
    return describe_blocker(facts.blockers[0])


def _sampler_failure(exc: psycopg2.Error, oldest: str = "") -> str:
    code = exc.pgcode or ""
    if code == "42501":
        return "no REPLICATION privilege for a temporary slot: no per-table rates"
    if code == "53400":
        return "no free replication slot entry (max_replication_slots): no per-table rates"
    if code == "57014":
        said = f" (the oldest: {oldest})" if oldest else ""
        return (
            f"a temporary slot waits for open transactions to end before it can start{said}:"
            " no per-table rates until it can (retried)"
        )
    first = (exc.pgerror or str(exc)).strip().splitlines()[0].removeprefix("ERROR:").strip()
    return f"cannot create a temporary slot ({first}): no per-table rates"
