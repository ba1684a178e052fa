"""What a stream is asked to do and how it ended: `StreamConfig`, `ReconnectPolicy`,
`StreamResult` (plain frozen values the CLI, the demo and the tests build and read)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pgtail.filters import EventFilter
from pgtail.render import RenderOptions

Streaming = Literal["off", "on", "parallel"]
StopReason = Literal["end", "max_changes", "idle", "signal", "closed", "error"]


FIRST_CONTACT_WAIT = 6.0  # seconds: a restart's gap between shutting down and starting up


@dataclass(frozen=True)
class ReconnectPolicy:
    attempts: int = 10  # consecutive failed attempts before giving up (0: never reconnect)
    initial_delay: float = 0.5
    max_delay: float = 30.0
    # how long a run keeps trying a server that does not answer (`ServerUnreachable`)
    # before it first reached it: long enough for a restart, short for a wrong port.
    # None: as long as ``attempts`` allow (asked for with --reconnect-attempts)
    first_contact_wait: float | None = FIRST_CONTACT_WAIT

    def delay(self, attempt: int) -> float:
        return float(min(self.max_delay, self.initial_delay * (2 ** max(0, attempt - 1))))


@dataclass(frozen=True)
class StreamConfig:
    dsn: str | None = None
    slot: str | None = None  # None: a TEMPORARY slot on the replication connection
    create_slot: bool = False
    publications: tuple[str, ...] = ()
    create_publication: bool = False
    publication_tables: tuple[str, ...] = ()  # with create_publication; empty: all tables
    publication_schemas: tuple[str, ...] = ()
    proto_version: int | None = None  # None: the highest the server supports
    binary: bool = False
    messages: bool = False
    streaming: Streaming = "off"
    two_phase: bool = False
    origin: Literal["any", "none"] | None = None
    start_lsn: int | None = None
    end_lsn: int | None = None
    max_changes: int | None = None
    idle_exit: float | None = None
    format: str = "json"  # json | table | sql | raw
    ddl: bool = True  # sql: schema changes and new tables as DDL (False: as comments)
    render_options: RenderOptions = field(default_factory=RenderOptions)
    output: str | None = None  # append to this file (fsync'd before confirming)
    status_interval: float = 10.0
    filter: EventFilter = field(default_factory=EventFilter)
    reconnect: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    application_name: str = "pgtail"
    snapshot: bool = False  # copy the published tables' rows first (a slot this run creates)
    snapshot_tables: tuple[str, ...] = ()  # with snapshot: these globs only (empty: all)


@dataclass(frozen=True)
class StreamResult:
    reason: StopReason
    signal: int | None  # the signal that stopped the stream (SIGINT / SIGTERM), if any
    changes: int  # changes, truncates and messages written
    transactions: int  # transactions confirmed as written
    confirmed_lsn: int  # the last flush LSN sent to the server
    slot: str
    publications: tuple[str, ...]
    reconnects: int
    # a second signal abandoned output still waiting for a blocked consumer; the writer
    # thread may still be stuck in write(2), so the caller should exit at once (os._exit)
    abandoned: bool = False
    # batches of output handed to the writer thread: many small transactions that arrive
    # together go as one batch (a count to observe batching by, not a delivery fact)
    batches: int = 0
    # a signal stopped an unfinished --snapshot: what was said of the slot it dropped
    dropped_slot: str | None = None


Logger = Callable[[str], None]


def no_log(message: str) -> None:
    pass
