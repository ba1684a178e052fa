"""The replication loop: stream a slot with pgoutput, render every change, confirm progress.

The only module that talks the replication protocol (psycopg2's
``LogicalReplicationConnection``). Library entry point: ``run(StreamConfig(...), out)
-> StreamResult`` (the CLI and the demo both call it).

Threads: the main thread reads, assembles, filters and renders into memory; a writer
thread only writes those bytes to the output (and fsyncs with ``--output``) through a
bounded queue. When the consumer stalls, the queue fills, the reader stops reading
(back-pressure on the server) but keeps sending status updates, so the walsender's
``wal_sender_timeout`` never fires.

Feedback (`pgtail.feedback.Feedback` decides, this loop only reports facts to it):
- the flush LSN sent is the end LSN of the last transaction whose output is written and
  flushed -- never one that was only read;
- when nothing read is unwritten and no transaction is open, it follows the server's WAL
  end (``cursor.wal_end``, from keepalives), so an idle pgtail never holds WAL;
- psycopg2 answers reply-requested keepalives itself, inside ``read_message``, with the
  last flush LSN we gave it, and moves that LSN to a keepalive's WAL end only when
  everything it handed us was confirmed -- both consistent with the rules above;
- status updates also go out every ``status_interval`` (and every 0.5 s at most while
  output is blocked or a large transaction is being rendered).

Reconnects resume from the slot's confirmed position; transactions already handed to
the writer are skipped when the server sends them again, so one run writes each
transaction once. ``--output`` keeps ``FILE.pgtail-state`` (see `OutputState`) so a
restart after kill -9 writes none twice either. A TEMPORARY slot (no ``--slot``) dies
with its connection: a lost connection is then an error, not a reconnect.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import io
import json
import os
import queue
import select
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import psycopg2
import psycopg2.errors
import psycopg2.extras
from psycopg2 import sql
from psycopg2.extensions import connection as PgConnection

from pgtail import catalog
from pgtail import changes as ch
from pgtail import pgoutput as po
from pgtail.catalog import decoding_options, primary_message, resolve_dsn, translate_connect_error
from pgtail.errors import (
    ConfigurationError,
    ConnectionFailed,
    PgtailError,
    PublicationError,
    ReplicationError,
    ServerCapabilityError,
    SlotError,
    redact,
)
from pgtail.feedback import Feedback
from pgtail.filters import EventFilter
from pgtail.lsn import format_lsn
from pgtail.render import RenderOptions, insert_encoder, make_renderer
from pgtail.values import UserType

PLUGIN = "pgoutput"
Streaming = Literal["off", "on", "parallel"]
StopReason = Literal["end", "max_changes", "idle", "signal", "closed", "error"]

# Highest pgoutput protocol version per server major (PG10-13: 1, 14: 2, 15: 3, 16+: 4).
_MAX_PROTO = {14: 2, 15: 3}
# Oldest server major for each protocol version.
_PROTO_MIN_MAJOR = {1: 10, 2: 14, 3: 15, 4: 16}

_BATCH = 512  # events per queue item
_QUEUE_ITEMS = 64  # bounded: output can lag the reader by at most this many batches


def max_proto_version(major: int) -> int:
    if major >= 16:
        return 4
    return _MAX_PROTO.get(major, 1)


@dataclass(frozen=True)
class ReconnectPolicy:
    attempts: int = 10  # consecutive failed attempts before giving up (0: never reconnect)
    initial_delay: float = 0.5
    max_delay: float = 30.0

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
    render_options: RenderOptions = field(default_factory=RenderOptions)
    output: str | None = None  # append to this file (fsync'd before confirming)
    status_interval: float = 10.0
    filter: EventFilter = field(default_factory=EventFilter)
    reconnect: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    application_name: str = "pgtail"


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


Logger = Callable[[str], None]


def _no_log(message: str) -> None:
    pass


# --------------------------------------------------------------------------- preflight


def _choose_publications(
    conn: PgConnection, config: StreamConfig, server: catalog.ServerInfo, log: Logger
) -> tuple[str, ...]:
    existing = catalog.publication_names(conn)
    if config.publications:
        missing = [p for p in config.publications if p not in existing]
        if missing:
            raise PublicationError(
                f"publication {missing[0]!r} does not exist in database {server.database!r}",
                hint=f'CREATE PUBLICATION "{missing[0]}" FOR TABLE ...;'
                " or pgtail stream --create-publication --table ...",
            )
        return config.publications
    if len(existing) == 1:
        log(f"pgtail: using publication {existing[0]!r}, the only one in {server.database!r}")
        return (existing[0],)
    if not existing:
        raise PublicationError(
            f"database {server.database!r} has no publication",
            hint="CREATE PUBLICATION pgtail FOR ALL TABLES; or pass --create-publication"
            " (with --table/--schema) to create one for this run",
        )
    raise PublicationError(
        f"database {server.database!r} has {len(existing)} publications"
        f" ({', '.join(existing)}); choose with --publication",
        hint="--publication NAME, repeatable, or PGTAIL_PUBLICATION",
    )


def _drop_publication(dsn: str, name: str, log: Logger) -> None:
    try:
        catalog.drop_publication(dsn, name, if_exists=True)
    except Exception as exc:  # best effort on the way out
        log(f"pgtail: warning: could not drop publication {name!r}: {redact(str(exc))}")


# --------------------------------------------------------------------------- options


def _replication_options(
    config: StreamConfig, server: catalog.ServerInfo, publications: tuple[str, ...]
) -> tuple[int, dict[str, str]]:
    major = server.major
    top = max_proto_version(major)
    version = config.proto_version if config.proto_version is not None else top
    if version < 1 or version > 4:
        raise ConfigurationError(f"--proto-version must be 1 to 4, not {version}")
    if version > top:
        raise ServerCapabilityError(
            f"pgoutput protocol version {version} needs PostgreSQL"
            f" {_PROTO_MIN_MAJOR[version]} or later (server is {major})"
        )

    def need(what: str, minimum: int) -> None:
        if major < minimum:
            raise ServerCapabilityError(
                f"{what} needs PostgreSQL {minimum} or later (server is {major})"
            )

    options = {"proto_version": str(version), "publication_names": _publication_names(publications)}
    if config.binary:
        need("--binary", 14)
        options["binary"] = "true"
    if config.messages:
        need("--messages", 14)
        options["messages"] = "true"
    if config.streaming != "off":
        need("--streaming", 14)
        if version < 2:
            raise ServerCapabilityError("--streaming needs --proto-version 2 or later")
        if config.streaming == "parallel":
            need("--streaming parallel", 16)
            if version < 4:
                raise ServerCapabilityError("--streaming parallel needs --proto-version 4")
            options["streaming"] = "parallel"
        else:
            options["streaming"] = "on"
    if config.two_phase:
        need("--two-phase", 15)
        if version < 3:
            raise ServerCapabilityError("--two-phase needs --proto-version 3 or later")
        options["two_phase"] = "true"
    if config.origin is not None:
        need("--origin", 16)
        options["origin"] = config.origin
    return version, options


def _publication_names(names: tuple[str, ...]) -> str:
    # pgoutput splits this with SplitIdentifierString: quote each name as an identifier.
    return ",".join('"' + n.replace('"', '""') + '"' for n in names)


# --------------------------------------------------------------------------- output state


class OutputState:
    """``--output FILE`` bookkeeping so a restart never writes a transaction twice.

    After each fsync of the output, ``FILE.pgtail-state`` records the stream position
    written (the end LSN of the last transaction) and the file's size, atomically. On
    start, a tail written after the last record (killed before it was recorded, hence
    never confirmed, so the server sends it again) is cut off, and transactions at or
    before the recorded position are skipped.
    """

    def __init__(self, path: str, slot: str) -> None:
        self.path = Path(path)
        self.state_path = Path(path + ".pgtail-state")
        self.slot = slot
        self.position = 0
        self.size = 0

    def load(self, log: Logger) -> None:
        try:
            actual = self.path.stat().st_size
        except FileNotFoundError:
            actual = 0
        try:
            data = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            data = None
        except (OSError, ValueError):
            log(f"pgtail: warning: ignoring unreadable {self.state_path}")
            data = None
        if data is None or data.get("slot") != self.slot:
            # a fresh start for this slot: whatever is in the file now is not ours to cut
            self.save(0, actual)
            return
        self.position = int(data.get("position", 0))
        recorded = int(data.get("size", 0))
        if actual > recorded:
            # written but never recorded (hence never confirmed): the server sends it again
            with open(self.path, "r+b") as fh:
                fh.truncate(recorded)
                os.fsync(fh.fileno())
            log(
                f"pgtail: removed {actual - recorded} bytes of unconfirmed output from"
                f" {self.path} (they will be streamed again)"
            )
        self.size = min(actual, recorded)

    def save(self, position: int, size: int) -> None:
        """Record that the file ends, at ``size`` bytes, with everything up to ``position``."""
        self.position = max(self.position, position)
        self.size = size
        tmp = self.state_path.with_name(self.state_path.name + ".tmp")
        payload = json.dumps({"slot": self.slot, "position": self.position, "size": size})
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, payload.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.state_path)


# --------------------------------------------------------------------------- writer


@dataclass(slots=True)
class _Batch:
    items: list[Any]  # events (or raw messages) to render; rendered by the reader
    confirm_lsn: int  # end LSN of the last transaction completed in this batch (0: none)
    # stream position after this batch; nonzero only when the batch ends exactly at the end
    # of a transaction or a non-transactional message (the --output file is cut there)
    position: int
    transactions: int
    changes: int
    data: bytes = b""  # the rendered output of ``items``


_STOP = object()


class _Writer(threading.Thread):
    """Writes rendered batches to the output; reports what is flushed to the feedback object.

    It does no rendering (the reader does, into memory), so it holds the GIL only
    briefly and mostly sits in write(2): the reader keeps its CPU.
    """

    def __init__(
        self,
        out: BinaryIO,
        feedback: Feedback,
        lock: threading.Lock,
        wake: Callable[[], None],
        fsync: bool,
        state: OutputState | None,
    ) -> None:
        super().__init__(name="pgtail-writer", daemon=True)
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=_QUEUE_ITEMS)
        self._out = out
        self._feedback = feedback
        self._lock = lock
        self._wake = wake
        self._fsync = fsync
        self._state = state
        self._flush_interval = 0.05 if fsync else 0.0
        self.enqueued = 0  # batches handed over (reader side)
        self.done = 0  # batches written and flushed
        self.changes = 0
        self.transactions = 0
        self.closed = False  # the reader of our output went away (EPIPE)
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._boundary: tuple[int, int] | None = None  # (position, file offset) at its end

    @property
    def failed(self) -> bool:
        return self.closed or self.error is not None

    def idle(self) -> bool:
        return self.done == self.enqueued

    def run(self) -> None:
        pending: list[_Batch] = []
        last_flush = 0.0
        try:
            while True:
                timeout = None
                if pending:
                    timeout = max(0.0, last_flush + self._flush_interval - time.monotonic())
                try:
                    item = (
                        self.queue.get(timeout=timeout)
                        if timeout != 0.0
                        else (self.queue.get_nowait())
                    )
                except queue.Empty:
                    self._flush(pending)
                    pending = []
                    last_flush = time.monotonic()
                    continue
                if item is _STOP:
                    self._flush(pending)
                    self._out.flush()
                    return
                batch: _Batch = item
                if batch.data:
                    self._out.write(batch.data)
                    # pending keeps the batch until the flush (up to 0.5s): not its output
                    batch.data = b""
                if batch.position and self._state is not None:
                    self._boundary = (batch.position, self._out.tell())
                pending.append(batch)
                if time.monotonic() - last_flush >= 0.5:
                    self._flush(pending)
                    pending = []
                    last_flush = time.monotonic()
        except BrokenPipeError:
            self.closed = True
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF):
                self.closed = True
            else:
                self.error = exc
        except BaseException as exc:  # reported by the reader
            self.error = exc
        finally:
            self.finished.set()
            self._wake()

    def _flush(self, pending: list[_Batch]) -> None:
        if not pending:
            return
        self._out.flush()
        if self._fsync:
            os.fsync(self._out.fileno())
        confirm = max(b.confirm_lsn for b in pending)
        if self._state is not None and self._boundary is not None:
            self._state.save(*self._boundary)
            self._boundary = None
        with self._lock:
            if confirm:
                self._feedback.written(confirm)
            self.changes += sum(b.changes for b in pending)
            self.transactions += sum(b.transactions for b in pending)
            self.done += len(pending)
        self._wake()


# --------------------------------------------------------------------------- the stream


class _Stop(Exception):
    def __init__(self, reason: StopReason) -> None:
        super().__init__(reason)
        self.reason = reason


class _ConnectionLost(Exception):
    pass


# SQLSTATE classes/codes that mean "the connection or server went away": reconnect.
# Anything else the server reports (a missing publication while decoding, ...) would
# only happen again after a reconnect, so it is an error for the user.
_TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "57P05", "53", "58")


def _lost(exc: BaseException) -> Exception:
    """The exception to raise for a psycopg2 error during streaming."""
    code = getattr(exc, "pgcode", None)
    if code and not code.startswith(_TRANSIENT_SQLSTATES):
        return _ServerError(exc)
    return _ConnectionLost(primary_message(exc))


class _ServerError(Exception):
    """The server reported an error on the replication connection (not a lost one)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(primary_message(exc))
        self.original = exc


class _Signals:
    """SIGINT/SIGTERM set a flag (first) or force an exit (second); the select loop wakes."""

    def __init__(self, install: bool) -> None:
        self.received: int | None = None
        self.forced = False
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)
        os.set_blocking(self._write_fd, False)
        self._previous: dict[int, Any] = {}
        self._old_wakeup: int | None = None
        self._installed = install and threading.current_thread() is threading.main_thread()
        if self._installed:
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)

    @property
    def fd(self) -> int:
        return self._read_fd

    def _handle(self, signum: int, frame: Any) -> None:
        if self.received is not None:
            self.forced = True
        else:
            self.received = signum
        self.wake()

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._write_fd, b"\0")

    def drain(self) -> None:
        with contextlib.suppress(OSError):
            while os.read(self._read_fd, 4096):
                pass

    def close(self) -> None:
        if self._installed:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)
        os.close(self._read_fd)
        os.close(self._write_fd)


def _is_pipe(out: BinaryIO) -> int | None:
    try:
        fd = out.fileno()
        import stat

        if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
            return fd
    except (OSError, ValueError, AttributeError):
        return None
    return None


def _reader_gone(fd: int) -> bool:
    """True when the read end of our output pipe was closed (| head exited)."""
    poller = select.poll()
    poller.register(fd, 0)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


class _Stream:
    def __init__(self, config: StreamConfig, out: BinaryIO, log: Logger, signals: _Signals):
        self.config = config
        self.out = out
        self.log = log
        self.signals = signals
        self.dsn = resolve_dsn(config.dsn)
        self.lock = threading.Lock()
        self.feedback = Feedback(status_interval=config.status_interval)
        self.slot = config.slot or f"pgtail_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self.temporary = config.slot is None
        self.publications: tuple[str, ...] = ()
        self.created_publication: str | None = None
        self.server: catalog.ServerInfo | None = None
        self.proto_version = 1
        self.options: dict[str, str] = {}
        self.conn: Any = None
        self.cursor: Any = None
        self.position = 0  # stream position of the last batch handed to the writer
        self.skip_upto = 0  # transactions at or before this position were already written
        self.changes_seen = 0
        self.reconnects = 0
        self.last_data = time.monotonic()
        self.writer: _Writer | None = None
        self.state: OutputState | None = None
        self.pipe_fd = _is_pipe(out) if config.output is None else None
        self.stop_reason: StopReason | None = None
        self.received_since_connect = False
        # the renderer writes into this buffer (in the reader thread); each batch's bytes
        # go to the writer thread
        self.buffer = io.BytesIO()
        self.render: Callable[[Any], None] = _no_log
        self.close_renderer: Callable[[], None] = lambda: None
        self.renderer_closed = False
        self.types_conn: PgConnection | None = None  # see lookup_types

    # ----------------------------------------------------------------- setup

    def preflight(self) -> None:
        conn = catalog.open_connection(self.dsn)
        try:
            server = catalog.server_info(conn)
            catalog.require_streaming(server)
            self.server = server
            if self.config.create_publication:
                if not self.config.publications or all(
                    p not in catalog.publication_names(conn) for p in self.config.publications[:1]
                ):
                    name = (
                        self.config.publications[0]
                        if self.config.publications
                        else f"pgtail_{uuid.uuid4().hex[:10]}"
                    )
                    catalog.create_run_publication(
                        conn,
                        name,
                        tables=self.config.publication_tables,
                        schemas=self.config.publication_schemas,
                    )
                    self.created_publication = name
                    self.publications = (self.created_publication,)
                    self.log(
                        f"pgtail: created publication {self.created_publication!r} for this run"
                    )
                else:
                    self.publications = _choose_publications(conn, self.config, server, self.log)
            else:
                self.publications = _choose_publications(conn, self.config, server, self.log)
            self.proto_version, self.options = _replication_options(
                self.config, server, self.publications
            )
            if not self.temporary:
                slot = catalog.slot_info(conn, self.slot)
                # a consumer that just disconnected (a restart of pgtail itself) leaves its
                # walsender exiting for a moment: give it a second before calling it busy
                deadline = time.monotonic() + 1.0
                while slot is not None and slot.active_pid is not None:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(0.05)
                    slot = catalog.slot_info(conn, self.slot)
                if slot is None and not self.config.create_slot:
                    raise SlotError(
                        f"replication slot {self.slot!r} does not exist",
                        hint="add --create-slot, or: pgtail slot create " + self.slot,
                    )
                if slot is not None:
                    catalog.check_slot_usable(slot, server.database, idle=True)
                    if slot.confirmed_flush_lsn:
                        self.feedback.start_lsn = slot.confirmed_flush_lsn
        finally:
            conn.close()

    def connect(self, first: bool) -> None:
        try:
            conn = psycopg2.connect(
                self.dsn,
                connection_factory=psycopg2.extras.LogicalReplicationConnection,
                application_name=self.config.application_name,
                options=decoding_options(self.dsn),
            )
        except psycopg2.Error as exc:
            raise translate_connect_error(exc, self.dsn) from None
        self.conn = conn
        cur = conn.cursor()
        self.cursor = cur
        assert self.server is not None
        if self.temporary:
            self._create_slot(cur, temporary=True)
            if first:
                self.log(
                    f"pgtail: no --slot: streaming temporary slot {self.slot!r}; it goes away"
                    " with the connection and cannot be resumed (use --slot NAME --create-slot)"
                )
        elif first and self.config.create_slot:
            created = self._create_slot(cur, temporary=False, if_missing=True)
            if created:
                self.log(f"pgtail: created replication slot {self.slot!r}")
        start = self.config.start_lsn if (first and self.config.start_lsn) else 0
        try:
            cur.start_replication(
                slot_name=self.slot,
                slot_type=psycopg2.extras.REPLICATION_LOGICAL,
                start_lsn=start,
                options=self.options,
                decode=False,
                status_interval=max(1, int(self.config.status_interval)),
            )
        except psycopg2.Error as exc:
            raise self._start_error(exc) from None
        self.feedback.reset_connection()
        self.last_data = time.monotonic()
        self.received_since_connect = False

    def _create_slot(self, cur: Any, *, temporary: bool, if_missing: bool = False) -> bool:
        assert self.server is not None
        major = self.server.major
        parts = [sql.SQL("CREATE_REPLICATION_SLOT {}").format(sql.Identifier(self.slot))]
        if temporary:
            parts.append(sql.SQL("TEMPORARY"))
        parts.append(sql.SQL("LOGICAL pgoutput"))
        if major >= 15:
            opts = [sql.SQL("SNAPSHOT 'nothing'")]
            if self.config.two_phase:
                opts.append(sql.SQL("TWO_PHASE true"))
            parts.append(sql.SQL("(") + sql.SQL(", ").join(opts) + sql.SQL(")"))
        else:
            if self.config.two_phase:
                raise ServerCapabilityError(
                    f"--two-phase needs PostgreSQL 15 or later (server is {major})"
                )
            parts.append(sql.SQL("NOEXPORT_SNAPSHOT"))
        try:
            cur.execute(sql.SQL(" ").join(parts))
        except psycopg2.errors.DuplicateObject:
            if if_missing:
                return False
            raise SlotError(f"replication slot {self.slot!r} already exists") from None
        except psycopg2.Error as exc:
            raise catalog.translate_create_slot_error(exc, self.slot) from None
        return True

    def _start_error(self, exc: BaseException, during: str = "START_REPLICATION") -> PgtailError:
        return catalog.translate_replication_error(exc, self.slot, during=during)

    # ----------------------------------------------------------------- feedback

    def send_feedback(self, *, force: bool = False) -> None:
        cur = self.cursor
        if cur is None:
            return
        now = time.monotonic()
        with self.lock:
            if not (force or self.feedback.due(now)):
                return
            lsn = self.feedback.flush_lsn
        if lsn:
            cur.send_feedback(write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, force=True)
        else:
            cur.send_feedback(force=True)
        with self.lock:
            self.feedback.sent(lsn, now)

    def note_idle(self, assembler_open: bool) -> None:
        """Everything read is written and no transaction is open: follow the server's WAL end."""
        writer = self.writer
        assert writer is not None
        if assembler_open or not writer.idle():
            return
        wal_end = int(self.cursor.wal_end or 0)
        with self.lock:
            if writer.idle():
                self.feedback.idle(wal_end)

    # ----------------------------------------------------------------- loop

    def check_signals(self) -> None:
        if self.signals.forced:
            raise _Stop("signal")

    def enqueue(self, batch: _Batch) -> None:
        writer = self.writer
        assert writer is not None
        if batch.items:
            render = self.render
            for item in batch.items:
                render(item)
            batch.items = []
        buffer = self.buffer
        if buffer.tell():
            batch.data = buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
        # rendering a large transaction takes a while: keep the walsender alive meanwhile
        self._keepalive()
        while True:
            if writer.failed:
                raise _Stop("closed" if writer.closed else "error")
            if self.signals.forced:
                raise _Stop("signal")
            try:
                writer.queue.put(batch, timeout=0.2)
                writer.enqueued += 1
                if batch.position > self.position:
                    self.position = batch.position
                return
            except queue.Full:
                # output is blocked: keep the walsender alive without reading more
                self._keepalive()

    def _keepalive(self) -> None:
        """Send a status update when the last one is a while ago (busy or blocked)."""
        if self.cursor is None:
            return
        now = time.monotonic()
        with self.lock:
            last = self.feedback.last_sent
        if last is None or now - last >= min(self.config.status_interval, 0.5):
            try:
                self.send_feedback(force=True)
            except psycopg2.Error as exc:
                raise _lost(exc) from None

    def stream_events(self) -> None:
        """Read, assemble, filter and hand events to the writer until told to stop."""
        from pgtail.changes import Assembler

        cfg = self.config
        # the renderer's fast path for text rows (not with --redact: it needs values)
        encoder = None if cfg.filter.redact else insert_encoder(cfg.format)
        assembler = Assembler(self.proto_version, binary=cfg.binary, encoder=encoder)
        flt = None if cfg.filter.is_noop else cfg.filter
        end_lsn = cfg.end_lsn
        max_changes = cfg.max_changes
        skip_upto = self.skip_upto
        items: list[Any] = []
        confirm = 0
        position = 0
        txs = 0
        nchanges = 0
        skipping = False
        Change, Truncate, Message = ch.Change, ch.Truncate, ch.Message
        EncodedRows = ch.EncodedRows
        TxBegin, TxCommit = ch.TxBegin, ch.TxCommit

        def flush_items() -> None:
            nonlocal items, confirm, position, txs, nchanges
            if items or confirm or position:
                self.enqueue(_Batch(items, confirm, position, txs, nchanges))
                items, confirm, position, txs, nchanges = [], 0, 0, 0, 0

        # bound once: this loop runs once per message (a connection lost ends it)
        signals = self.signals
        read_message = self.cursor.read_message
        feed = assembler.feed
        relation_byte = po.MSG_RELATION
        monotonic = time.monotonic
        in_burst = False  # messages came since the last empty read
        while True:
            if signals.received is not None:
                flush_items()
                raise _Stop("signal")
            try:
                msg = read_message()
            except psycopg2.Error as exc:
                raise _lost(exc) from None
            if msg is None:
                if in_burst:  # data until just now: the idle time starts here
                    self.last_data = monotonic()
                    in_burst = False
                flush_items()
                self._idle_tick(assembler.open_transactions(), end_lsn)
                continue
            if not in_burst:
                in_burst = True
                self.received_since_connect = True
            payload = msg.payload
            if payload and payload[0] == relation_byte:  # look up the types it uses first
                wanted = assembler.user_types_wanted(payload)
                if wanted:
                    assembler.add_user_types(self.lookup_types(wanted), wanted)
            for event in feed(payload):
                cls = type(event)
                if skipping:
                    if isinstance(event, TxCommit):
                        skipping = False
                    continue
                if cls is not Change:
                    if isinstance(event, TxBegin):
                        tx = event.tx
                        if end_lsn is not None and tx.commit_lsn > end_lsn:
                            flush_items()
                            raise _Stop("end")
                        if tx.end_lsn <= skip_upto:
                            skipping = True
                            continue
                    elif isinstance(event, TxCommit):
                        confirm = position = event.tx.end_lsn
                        txs += 1
                        items.append(event)
                        flush_items()  # batches end at transaction boundaries
                        continue
                    elif isinstance(event, ch.CommitPrepared | ch.RollbackPrepared):
                        pos = (
                            event.end_lsn
                            if isinstance(event, ch.CommitPrepared)
                            else event.rollback_end_lsn
                        )
                        if end_lsn is not None and pos > end_lsn:
                            flush_items()
                            raise _Stop("end")
                        if pos <= skip_upto:
                            continue
                        confirm = position = pos
                        txs += 1
                        items.append(event)
                        flush_items()
                        continue
                    elif isinstance(event, Message) and event.tx is None:
                        lsn = event.lsn
                        if end_lsn is not None and lsn > end_lsn:
                            flush_items()
                            raise _Stop("end")
                        if lsn + 1 <= skip_upto:
                            continue
                        position = lsn + 1
                        kept_message = flt.apply(event) if flt is not None else event
                        if kept_message is not None:
                            items.append(kept_message)
                            nchanges += 1
                            self.changes_seen += 1
                        flush_items()
                        if max_changes is not None and self.changes_seen >= max_changes:
                            raise _Stop("max_changes")
                        continue
                if flt is not None:
                    kept = flt.apply(event)
                    if kept is None:
                        continue
                    event = kept
                if cls is EncodedRows:
                    inserts: ch.EncodedRows = event  # type: ignore[assignment]
                    count = inserts.count
                    if max_changes is not None and self.changes_seen + count >= max_changes:
                        inserts = inserts.head(max_changes - self.changes_seen)
                        count = inserts.count
                    items.append(inserts)
                    nchanges += count
                    self.changes_seen += count
                    if max_changes is not None and self.changes_seen >= max_changes:
                        flush_items()
                        raise _Stop("max_changes")
                    if nchanges >= _BATCH:
                        flush_items()
                    continue
                items.append(event)
                if cls is Change or cls is Truncate or cls is Message:
                    nchanges += 1
                    self.changes_seen += 1
                    if max_changes is not None and self.changes_seen >= max_changes:
                        flush_items()
                        raise _Stop("max_changes")
                if len(items) >= _BATCH:
                    flush_items()
            if len(items) >= _BATCH:
                flush_items()

    def stream_raw(self) -> None:
        """``--format raw``: every message, decoded field by field, as a trace."""
        cfg = self.config
        decoder = po.Decoder(self.proto_version)
        items: list[Any] = []
        confirm = 0
        txs = 0
        in_tx = False
        streamed: set[int] = set()
        end_lsn = cfg.end_lsn

        def flush_items() -> None:
            nonlocal items, confirm, txs
            if items:
                self.enqueue(_Batch(items, confirm, confirm, txs, len(items)))
                items, confirm, txs = [], 0, 0

        while True:
            if self.signals.received is not None:
                flush_items()
                raise _Stop("signal")
            try:
                msg = self.cursor.read_message()
            except psycopg2.Error as exc:
                raise _lost(exc) from None
            if msg is None:
                flush_items()
                self._idle_tick(in_tx or bool(streamed), end_lsn)
                continue
            self.last_data = time.monotonic()
            self.received_since_connect = True
            message = decoder.decode(msg.payload)
            if isinstance(message, po.Begin | po.BeginPrepare):
                if end_lsn is not None and getattr(message, "final_lsn", 0) > end_lsn:
                    flush_items()
                    raise _Stop("end")
                in_tx = True
            elif isinstance(message, po.StreamStart):
                streamed.add(message.xid)
            elif isinstance(message, po.StreamAbort) and message.xid == message.subxid:
                streamed.discard(message.xid)
            items.append((message, msg.data_start))
            done: int | None = None
            if isinstance(message, po.Commit | po.Prepare | po.CommitPrepared):
                done = message.end_lsn
                in_tx = False
            elif isinstance(message, po.StreamCommit | po.StreamPrepare):
                done = message.end_lsn
                streamed.discard(message.xid)
            elif isinstance(message, po.RollbackPrepared):
                done = message.rollback_end_lsn
            if done is not None:
                confirm = max(confirm, done)
                txs += 1
            if len(items) >= _BATCH:
                flush_items()
            if cfg.max_changes is not None and isinstance(
                message, po.Insert | po.Update | po.Delete | po.Truncate | po.LogicalMessage
            ):
                self.changes_seen += 1
                if self.changes_seen >= cfg.max_changes:
                    flush_items()
                    raise _Stop("max_changes")

    def _idle_tick(self, open_tx: bool, end_lsn: int | None) -> None:
        """Nothing to read right now: confirm progress, check exit conditions, then wait."""
        self.note_idle(open_tx)
        try:
            self.send_feedback()
        except psycopg2.Error as exc:
            raise _lost(exc) from None
        writer = self.writer
        assert writer is not None
        if writer.failed:
            raise _Stop("closed" if writer.closed else "error")
        if self.pipe_fd is not None and _reader_gone(self.pipe_fd):
            raise _Stop("closed")
        now = time.monotonic()
        if end_lsn is not None and not open_tx and int(self.cursor.wal_end or 0) >= end_lsn:
            raise _Stop("end")
        idle_exit = self.config.idle_exit
        if idle_exit is not None and now - self.last_data >= idle_exit and writer.idle():
            raise _Stop("idle")
        with self.lock:
            timeout = self.feedback.next_due_in(now)
        if timeout == 0.0:
            timeout = self.config.status_interval
        timeout = min(timeout, 1.0)
        if self.config.idle_exit is not None:
            timeout = min(timeout, max(0.01, self.last_data + self.config.idle_exit - now))
        try:
            ready, _, _ = select.select([self.cursor, self.signals.fd], [], [], timeout)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            return
        except (OSError, ValueError, psycopg2.Error) as exc:
            raise _ConnectionLost(str(exc)) from None
        if self.signals.fd in ready:
            self.signals.drain()
        if self.conn is not None and self.conn.closed:
            raise _ConnectionLost("connection closed")

    # ----------------------------------------------------------------- lifecycle

    def close_connection(self) -> None:
        with contextlib.suppress(Exception):
            if self.conn is not None:
                self.conn.close()
        self.conn = None
        self.cursor = None
        with contextlib.suppress(Exception):
            if self.types_conn is not None:
                self.types_conn.close()
        self.types_conn = None

    def lookup_types(self, type_oids: Sequence[int]) -> dict[int, UserType]:
        """pg_type rows for the types pgoutput names by OID (enums, domains, arrays of
        them), on a plain connection opened for it. A failure is a warning: the columns
        of those types then come as their text (hex in binary mode)."""
        try:
            if self.types_conn is None or self.types_conn.closed:
                self.types_conn = catalog.open_connection(self.dsn)
            return catalog.user_types(self.types_conn, type_oids)
        except (psycopg2.Error, PgtailError) as exc:
            with contextlib.suppress(Exception):
                if self.types_conn is not None:
                    self.types_conn.close()
            self.types_conn = None
            self.log(
                f"pgtail: warning: could not look up column types {list(type_oids)}"
                f" ({primary_message(exc)}); their values stay text (hex with --binary)"
            )
            return {}

    def final_feedback(self) -> None:
        if self.cursor is None:
            return
        with contextlib.suppress(psycopg2.Error, OSError):
            self.send_feedback(force=True)

    def wait_for_writer(self) -> None:
        """Let the writer finish what was read, keeping the connection alive meanwhile."""
        writer = self.writer
        assert writer is not None
        if not writer.failed and not self.renderer_closed:
            self.renderer_closed = True
            try:
                self.close_renderer()
                if self.buffer.tell():
                    self.enqueue(_Batch([], 0, 0, 0, 0))
            except (_Stop, _ConnectionLost):
                pass
        if not writer.failed:
            while True:
                try:
                    writer.queue.put(_STOP, timeout=0.2)
                    break
                except queue.Full:
                    if writer.failed or self.signals.forced:
                        return
                    with contextlib.suppress(_ConnectionLost, psycopg2.Error):
                        self._keepalive()
        while not writer.finished.wait(0.2):
            if self.signals.forced:
                return
            with contextlib.suppress(_ConnectionLost, psycopg2.Error):
                self._keepalive()


def run(
    config: StreamConfig,
    out: BinaryIO,
    *,
    log: Logger | None = None,
    install_signal_handlers: bool = True,
) -> StreamResult:
    """Stream ``config.slot`` into ``out`` (or ``config.output``) until a stop condition.

    Returns how the stream ended; raises a `PgtailError` for anything a user must fix.
    SIGINT/SIGTERM (when called from the main thread) stop it cleanly: reading stops,
    what was read is written, the final position is confirmed, and the result names
    the signal. A second signal abandons unwritten output at once.
    """
    logger = log or _no_log
    if config.max_changes is not None and config.max_changes <= 0:
        raise ConfigurationError("--max-changes must be positive")
    if config.status_interval <= 0:
        raise ConfigurationError("--status-interval must be positive")
    if config.end_lsn is not None and config.start_lsn is not None:  # noqa: SIM102
        if config.end_lsn < config.start_lsn:
            raise ConfigurationError("--end is before --start")
    signals = _Signals(install_signal_handlers)
    stream = _Stream(config, out, logger, signals)
    output_file: BinaryIO | None = None
    try:
        stream.preflight()
        target = out
        if config.output is not None:
            state = (
                OutputState(config.output, stream.slot)
                if not stream.temporary and config.format != "raw"
                else None
            )
            try:
                open(config.output, "ab").close()  # noqa: SIM115 - can we write there at all?
                if state is not None:
                    state.load(logger)
                # opened after load(): a cut tail must not leave the offset past the end
                output_file = open(config.output, "ab", buffering=1 << 20)  # noqa: SIM115
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot write --output {config.output}: {exc.strerror or exc}"
                ) from None
            if state is not None:
                stream.skip_upto = state.position
                # the file holds (fsync'd) everything up to there: safe to confirm
                stream.feedback.written(state.position)
            stream.state = state
            target = output_file
        with _fewer_collections():
            return _run(stream, target, output_file is not None)
    finally:
        if output_file is not None:
            with contextlib.suppress(OSError):
                output_file.close()
        if stream.created_publication is not None:
            _drop_publication(stream.dsn, stream.created_publication, logger)
        signals.close()


# Every change allocates a few container objects (its Change, row dicts, arrays) and the
# assembler holds up to its memory bound of them until the commit. With the default
# first-generation threshold (700) the cyclic collector rescans them again and again:
# about a tenth of the CPU of draining a large transaction (bench/drain.py). They form
# no cycles, so while streaming the collector runs less often.
_GC_FIRST_GENERATION = 50_000
_gc_lock = threading.Lock()
_gc_streams = 0  # streams running in this process (threads may run several)
_gc_before: tuple[int, ...] = ()


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    global _gc_streams, _gc_before
    with _gc_lock:
        if not _gc_streams:
            _gc_before = gc.get_threshold()
            if 0 < _gc_before[0] < _GC_FIRST_GENERATION:
                gc.set_threshold(_GC_FIRST_GENERATION, *_gc_before[1:])
        _gc_streams += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_streams -= 1
            if not _gc_streams:
                gc.set_threshold(*_gc_before)


def _make_render(config: StreamConfig, out: BinaryIO) -> tuple[Callable[[Any], None], Any]:
    if config.format == "raw":
        from pgtail.render.raw import RawRenderer

        raw = RawRenderer(out)

        def render_raw(item: Any) -> None:
            raw.render_message(item[0], item[1])

        return render_raw, raw.close
    renderer = make_renderer(config.format, out, config.render_options)
    return renderer.render, renderer.close


def _run(stream: _Stream, out: BinaryIO, fsync: bool) -> StreamResult:
    config = stream.config
    stream.render, stream.close_renderer = _make_render(config, stream.buffer)
    writer = _Writer(out, stream.feedback, stream.lock, stream.signals.wake, fsync, stream.state)
    stream.writer = writer
    reason: StopReason = "error"
    error: BaseException | None = None
    attempt = 0
    try:
        stream.connect(first=True)
        writer.start()
        while True:
            try:
                if config.format == "raw":
                    stream.stream_raw()
                else:
                    stream.stream_events()
            except _ConnectionLost as lost:
                stream.close_connection()
                detail = str(lost) or "connection lost"
                if stream.temporary:
                    raise ReplicationError(
                        f"lost the replication connection ({detail}); the temporary slot went"
                        f" with it, so pgtail cannot resume (last confirmed"
                        f" {format_lsn(stream.feedback.sent_lsn)})",
                        hint="use --slot NAME --create-slot for a slot that survives reconnects",
                    ) from None
                stream.skip_upto = max(stream.skip_upto, stream.position)
                if stream.received_since_connect:
                    attempt = 0  # it worked for a while: a fresh series of attempts
                while True:
                    attempt += 1
                    if attempt > config.reconnect.attempts:
                        raise ReplicationError(
                            f"lost the replication connection ({detail}) and could not"
                            f" reconnect after {config.reconnect.attempts} attempts",
                            hint="rerun pgtail: it resumes from the slot's confirmed position",
                        ) from None
                    delay = config.reconnect.delay(attempt)
                    stream.log(
                        f"pgtail: replication connection lost ({detail});"
                        f" reconnecting in {delay:.1f}s (attempt {attempt})"
                    )
                    if _sleep_unless_signalled(stream, delay):
                        raise _Stop("signal") from None
                    try:
                        stream.connect(first=False)
                        stream.reconnects += 1
                        stream.log("pgtail: reconnected; resuming from the slot's position")
                        break
                    except (ConnectionFailed, SlotError, ReplicationError) as exc:
                        detail = str(exc)
                        stream.close_connection()
                        continue
    except _Stop as stop:
        reason = stop.reason
    except _ServerError as exc:
        error = stream._start_error(exc.original, during="streaming")
    except BaseException as exc:
        error = exc
    finally:
        # whatever happened, what was read is written and what was written is confirmed
        if writer.is_alive():
            stream.wait_for_writer()
        stream.final_feedback()
        stream.close_connection()
    if writer.error is not None and error is None:
        err = writer.error
        if isinstance(err, PgtailError):
            raise err
        if isinstance(err, OSError):
            raise ReplicationError(f"cannot write output: {err.strerror or err}") from None
        raise err
    if error is not None:
        raise error
    if reason == "error" and writer.closed:
        reason = "closed"
    if stream.signals.received is not None and reason != "closed":
        reason = "signal"
    return StreamResult(
        reason=reason,
        signal=stream.signals.received if reason == "signal" else None,
        changes=writer.changes,
        transactions=writer.transactions,
        confirmed_lsn=stream.feedback.sent_lsn,
        slot=stream.slot,
        publications=stream.publications,
        reconnects=stream.reconnects,
        abandoned=writer.is_alive(),
    )


def _sleep_unless_signalled(stream: _Stream, delay: float) -> bool:
    deadline = time.monotonic() + delay
    while True:
        if stream.signals.received is not None:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        with contextlib.suppress(InterruptedError):
            select.select([stream.signals.fd], [], [], remaining)
        stream.signals.drain()
