"""Never waiting on the server in silence: creating a slot behind open transactions, and
reading tables another session holds an ACCESS EXCLUSIVE lock on.

A logical slot is consistent only once every transaction running when it starts has
ended, so ``CREATE_REPLICATION_SLOT`` (and ``pg_create_logical_replication_slot``) waits
for them, as long as they stay open. `wait_for_server` runs such a command on a worker
thread while the calling thread watches: after `FIRST_REPORT` seconds, and every
`REPORT_EVERY` seconds while the wait lasts, one line names what the server waits for
(`blockers`: the blocking session's PID, xid, age, application_name and state, from
``pg_stat_activity`` on an ordinary connection) and how to end it. A stop (Ctrl-C,
SIGTERM, or the caller's ``stopped()``) cancels the command on the server
(``PQcancel``), which ends the creation with an error: the slot, not yet persistent,
is dropped by the server; `pgtail.errors.Interrupted` says so to the caller. A query
that may wait on a table's lock (``blocked_only``) is said only while a session blocks it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pgtail.catalog.connection import fetchall, open_connection
from pgtail.errors import Interrupted

T = TypeVar("T")

FIRST_REPORT = 1.5  # seconds of waiting before the first line
REPORT_EVERY = 10.0  # and again this often while the wait lasts
RECHECK = 0.5  # blocked_only: how soon a command found working, not blocked, is looked at again
_POLL = 0.05  # how often the watching thread looks at the worker and the stop flag

# The sessions the waiting backend waits for (pg_blocking_pids: heavyweight locks, which
# is how a slot's creation waits for a running transaction: on its transactionid lock),
# with what pg_stat_activity says of each; PID 0 is a prepared transaction.
_BLOCKERS_SQL = """
SELECT b.pid, a.backend_xid::text,
  extract(epoch FROM clock_timestamp() - a.xact_start)::float8,
  a.application_name::text, a.state::text, w.wait_event_type::text, w.wait_event::text
FROM pg_stat_activity w
LEFT JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid) ON true
LEFT JOIN pg_stat_activity a ON a.pid = b.pid
WHERE w.pid = %s
ORDER BY a.xact_start NULLS LAST, b.pid
"""


@dataclass(frozen=True, slots=True)
class Blocker:
    """A session the waiting command waits for (PID 0: a prepared transaction)."""

    pid: int
    xid: str | None
    age_seconds: float | None
    application_name: str | None
    state: str | None


@dataclass(frozen=True, slots=True)
class WaitFacts:
    """What the waiting backend waits on, and for whom."""

    wait_event_type: str | None
    wait_event: str | None
    blockers: tuple[Blocker, ...]


def blockers(conn: Any, waiting_pid: int) -> WaitFacts | None:
    """What backend ``waiting_pid`` waits for (None: it is not there any more)."""
    rows = fetchall(conn, _BLOCKERS_SQL, (waiting_pid,))
    if not rows:
        return None
    found = tuple(
        Blocker(int(pid), xid, age, app, state)
        for pid, xid, age, app, state, _, _ in rows
        if pid is not None
    )
    return WaitFacts(rows[0][5], rows[0][6], found)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "age unknown"
    whole = int(seconds)
    return f"open {whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def describe_wait(what: str, facts: WaitFacts | None, waited: float) -> str:
    """The one line for a wait of ``waited`` seconds so far."""
    head = f"pgtail: waiting {waited:.0f}s to {what}"
    if facts is None or not facts.blockers:
        event = ""
        if facts is not None and facts.wait_event:
            event = f" (the server waits on {facts.wait_event_type}: {facts.wait_event})"
        return (
            f"{head}{event}: it waits for the transactions running when it began to end;"
            " see pg_stat_activity (state 'idle in transaction', oldest xact_start) and"
            " pg_prepared_xacts; Ctrl-C cancels"
        )
    first = facts.blockers[0]
    more = len(facts.blockers) - 1
    others = f" (and {more} more)" if more > 0 else ""
    if first.pid == 0:
        return (
            f"{head}: it waits for a prepared transaction{others} to end: COMMIT PREPARED or"
            " ROLLBACK PREPARED it (see pg_prepared_xacts); Ctrl-C cancels"
        )
    lock = ""
    if facts.wait_event_type == "Lock" and facts.wait_event not in (None, "transactionid"):
        lock = f" (a lock on a {facts.wait_event})"
    return f"{head}{lock}: it waits for {describe_blocker(first, others)}; Ctrl-C cancels"


def describe_blocker(blocker: Blocker, others: str = "") -> str:
    """A blocking session, and how to end its transaction."""
    app = repr(blocker.application_name or "")
    return (
        f"the transaction of PID {blocker.pid}{others} (xid {blocker.xid or 'none'},"
        f" {_age(blocker.age_seconds)}, application_name {app}, state"
        f" {blocker.state or 'unknown'}) to end: COMMIT or ROLLBACK it there, or end it"
        f" with SELECT pg_terminate_backend({blocker.pid})"
    )


class _Reporter:
    """The watcher's own ordinary connection, opened at the first report."""

    def __init__(
        self,
        dsn: str | None,
        waiting_pid: int,
        what: str,
        log: Callable[[str], None],
        blocked_only: bool,
    ):
        self.dsn = dsn
        self.waiting_pid = waiting_pid
        self.what = what
        self.log = log
        self.blocked_only = blocked_only
        self.conn: Any = None

    def report(self, waited: float) -> bool:
        """Says the line; False when ``blocked_only`` and no session blocks the command
        (it is only working: nothing said, looked at again in `RECHECK` seconds)."""
        facts: WaitFacts | None = None
        try:
            if self.conn is None:
                self.conn = open_connection(self.dsn)
            facts = blockers(self.conn, self.waiting_pid)
        except Exception:  # the line is said anyway, without the names
            self.close()
            if self.blocked_only:
                return False
        if self.blocked_only and (facts is None or not facts.blockers):
            return False
        self.log(describe_wait(self.what, facts, waited))
        return True

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


class _OwnSignals:
    """Without a caller's ``stopped()``, in the main thread: SIGINT and SIGTERM set a
    flag for the length of the wait (the blocked command would not let a Python
    handler run)."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.received = signum

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)


def wait_for_server(
    call: Callable[[], T],
    *,
    conn: Any,
    dsn: str | None,
    what: str,
    log: Callable[[str], None],
    stopped: Callable[[], int | None] | None = None,
    blocked_only: bool = False,
) -> T:
    """``call()`` (a command on ``conn`` that may wait on the server), said aloud while
    it waits, cancelled by a stop. ``what``: what it does, for the line ("create
    replication slot 'app'"). ``stopped``: the signal that asks the run to stop, or
    None; without it, SIGINT and SIGTERM are caught here for the wait's length.
    ``blocked_only``: a line only while another session blocks the command (a lock
    wait: pg_blocking_pids names it), none for a command that is merely slow.
    Raises `pgtail.errors.Interrupted` when a stop cancelled the command (a command
    that completed anyway returns its result: the caller then sees its stop flag)."""
    own = _OwnSignals() if stopped is None else None
    stop = stopped if stopped is not None else (lambda: own.received if own else None)
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["result"] = call()
        except BaseException as exc:  # handed to the watching thread
            outcome["error"] = exc
        finally:
            done.set()

    waiting_pid = conn.get_backend_pid()
    reporter = _Reporter(dsn, waiting_pid, what, log, blocked_only)
    began = time.monotonic()
    next_report = began + FIRST_REPORT
    worker = threading.Thread(target=work, name="pgtail-wait", daemon=True)
    signum: int | None = None
    cancelled = False
    try:
        worker.start()
        while not done.wait(_POLL):
            signum = stop()
            if signum is not None:
                with contextlib.suppress(Exception):
                    conn.cancel()
                cancelled = True
                break
            now = time.monotonic()
            if now >= next_report:
                said = reporter.report(now - began)
                next_report = time.monotonic() + (REPORT_EVERY if said else RECHECK)
    except BaseException:
        with contextlib.suppress(Exception):
            conn.cancel()
        done.wait(5.0)
        raise
    finally:
        reporter.close()
        if own is not None:
            own.restore()
    if cancelled:
        done.wait(10.0)
        if "error" in outcome or not done.is_set():
            raise Interrupted(signum, what)
        # completed before the cancel arrived: done, and the caller sees its stop flag
    error = outcome.get("error")
    if error is not None:
        raise error
    return outcome["result"]  # type: ignore[no-any-return]
