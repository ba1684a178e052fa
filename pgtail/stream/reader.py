"""The read loop of a replication connection: the one place that reads its socket.

`Reader.messages()` is a pull-based generator over psycopg2's ``read_message``: it yields
each replication message (``.payload``, ``.data_start``) and, when nothing is there to
read, ``None`` once; the next pull waits for the socket. The reader owns what every
reader of the protocol must do the same way:

- keepalives: psycopg2 answers a keepalive that asks for a reply itself, inside
  ``read_message``, with the last flush position it was given;
- status updates: sent while waiting, when the `Confirm` policy says one is due, with
  the position it names (``force``: at once, e.g. while busy rendering or blocked);
- the wait: ``select`` on the socket (and the driver's wake-up descriptors) for at most
  ``wait_limit`` seconds or until the next status update is due;
- errors: a psycopg2 error while reading becomes `ConnectionLost` (the connection or
  the server is away: reconnect) or `ServerError` (an error the server reported);
  `stream_error` turns either into the user's error for a reader that does not
  reconnect.

What a driver decides on ``None`` (confirm the server's WAL end, stop at ``--end`` or at
the end of a range, exit when idle, act on a signal) is its own policy: the `Session`
of ``pgtail stream`` (``session.py``) and the Spark range read (``bounded.py``) drive it.
`TypeLookup` answers the type lookups a Relation asks for, on a plain connection.
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import psycopg2
from psycopg2.extensions import connection as PgConnection

from pgtail import catalog
from pgtail.catalog import primary_message
from pgtail.errors import PgtailError, ServerUnavailable
from pgtail.stream.config import Logger
from pgtail.stream.connection import ConnectionLost, ServerError, lost
from pgtail.values import UserType


class Confirm(Protocol):
    """A driver's feedback policy: what a status update reports, and when one is due."""

    # ask the server to answer each status update with a keepalive (its WAL end)
    reply: bool

    def due(self, now: float, force: bool) -> int | None:
        """The flush position to report now (0: none), or None when no update is due."""
        ...

    def sent(self, lsn: int, now: float) -> None:
        """A status update reporting ``lsn`` went out at ``now``."""
        ...

    def next_due_in(self, now: float) -> float:
        """Seconds until the next status update is due (0: due now, or none planned)."""
        ...


class AskPosition:
    """Confirm nothing; ask the server where it is every ``every`` seconds while idle
    (its keepalive's WAL end tells a range read when the range is complete)."""

    reply = True

    def __init__(self, every: float) -> None:
        self.every = every
        self.asked = 0.0

    def due(self, now: float, force: bool) -> int | None:
        return 0 if force or now - self.asked >= self.every else None

    def sent(self, lsn: int, now: float) -> None:
        self.asked = now

    def next_due_in(self, now: float) -> float:
        return max(0.0, self.asked + self.every - now)


class Reader:
    """Reads one replication connection (``conn``, its replication ``cursor``, after
    START_REPLICATION). ``wake``: descriptors that end a wait (``on_wake`` is called when
    one is ready); ``wait_limit``: the longest single wait (a driver may lower it)."""

    def __init__(
        self,
        conn: Any,
        cursor: Any,
        confirm: Confirm,
        *,
        status_interval: float = 10.0,
        wait_limit: float = 1.0,
        wake: Sequence[int] = (),
        on_wake: Callable[[], None] | None = None,
    ) -> None:
        self.conn = conn
        self.cursor = cursor
        self.confirm = confirm
        self.status_interval = status_interval
        self.wait_limit = wait_limit
        self.wake = tuple(wake)
        self.on_wake = on_wake

    @property
    def wal_end(self) -> int:
        """The server's WAL end as of the last message or keepalive."""
        return int(self.cursor.wal_end or 0)

    def messages(self) -> Iterator[Any]:
        """Each replication message as it comes; ``None`` when there is nothing to read
        (the next pull waits, see `wait`). Runs until the driver stops pulling or the
        connection fails (`ConnectionLost`, `ServerError`)."""
        read_message = self.cursor.read_message
        wait = self.wait
        while True:
            try:
                msg = read_message()
            except psycopg2.Error as exc:
                raise lost(exc) from None
            if msg is not None:
                yield msg
            else:
                yield None
                wait()

    def send_status(self, *, force: bool = False) -> None:
        """A standby status update, when the policy says one is due (``force``: now)."""
        cursor = self.cursor
        if cursor is None:
            return
        now = time.monotonic()
        confirm = self.confirm
        lsn = confirm.due(now, force)
        if lsn is None:
            return
        try:
            if lsn:
                cursor.send_feedback(
                    write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, force=True, reply=confirm.reply
                )
            else:
                cursor.send_feedback(force=True, reply=confirm.reply)
        except psycopg2.Error as exc:
            raise lost(exc) from None
        confirm.sent(lsn, now)

    def wait(self) -> None:
        """Nothing to read: send a status update if one is due, then wait until the
        socket (or a wake-up descriptor) is readable, the next update is due, or
        ``wait_limit`` has passed."""
        self.send_status()
        timeout = self.confirm.next_due_in(time.monotonic()) or self.status_interval
        timeout = min(timeout, self.wait_limit)
        wake = self.wake
        try:
            ready, _, _ = select.select([self.cursor, *wake], [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            return
        except (OSError, ValueError, psycopg2.Error) as exc:
            raise ConnectionLost(catalog.describe_disconnect(exc), exc) from None
        if wake and self.on_wake is not None and any(fd in ready for fd in wake):
            self.on_wake()
        if self.conn is not None and self.conn.closed:
            raise ConnectionLost("the replication connection was closed")


def stream_error(exc: ConnectionLost | ServerError, slot: str) -> PgtailError:
    """The user's error for a failure of a read that does not reconnect."""
    if exc.original is None:
        return ServerUnavailable(str(exc))
    return catalog.translate_replication_error(exc.original, slot, during="streaming")


class TypeLookup:
    """pg_type rows for the types pgoutput names by OID (enums, domains, arrays of them),
    on a plain connection opened for it and kept for the next ones.

    With a ``log``, a failure is a warning (the columns of those types then come as
    their text, hex in binary mode); without one, it is raised.
    """

    def __init__(
        self, dsn: str, log: Logger | None, application_name: str = catalog.APPLICATION_NAME
    ) -> None:
        self.dsn = dsn
        self.log = log
        self.application_name = application_name
        self.conn: PgConnection | None = None

    def __call__(self, type_oids: Sequence[int]) -> dict[int, UserType]:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = catalog.open_connection(
                    self.dsn, application_name=self.application_name
                )
            return catalog.user_types(self.conn, type_oids)
        except (psycopg2.Error, PgtailError) as exc:
            self.close()
            if self.log is None:
                raise
            self.log(
                f"pgtail: warning: could not look up column types {list(type_oids)}"
                f" ({primary_message(exc)}); their values stay text (hex with --binary)"
            )
            return {}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.conn is not None:
                self.conn.close()
        self.conn = None
