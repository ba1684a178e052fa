"""The replication session: connect, START_REPLICATION, what its read loop confirms and
when it stops, reconnects, signals.

The socket is read by `Reader` (``reader.py``, the read loop the Spark range read pulls
too); the session drives it with its own policy. Library entry point:
``run(StreamConfig(...), out) -> StreamResult`` (the CLI and the demo both call it).
What to stop at, skip and batch is decided by `StreamPolicy` (``policy.py``), what to
confirm by `Feedback`; the writer thread is in ``writer.py``.

Threads: the main thread reads, assembles, filters and renders into memory; a writer
thread only writes those bytes to the output (and fsyncs with ``--output``) through a
bounded queue. When the consumer stalls, the queue fills, the reader stops reading
(back-pressure on the server) but keeps sending status updates, so the walsender's
``wal_sender_timeout`` never fires.

Feedback (`pgtail.feedback.Feedback` decides, this loop only reports facts to it):
- the flush LSN sent is the end LSN of the last transaction whose output is written and
  flushed -- never one that was only read; into a pipe or socket, only once its reader
  took it out and stayed (the writer's `PipeProgress`);
- when nothing read is unwritten and no transaction is open, it follows the server's WAL
  end (``cursor.wal_end``, from keepalives), so an idle pgtail never holds WAL;
- psycopg2 answers reply-requested keepalives itself, inside ``read_message``, with the
  last flush LSN we gave it, and moves that LSN to a keepalive's WAL end only when
  everything it handed us was confirmed -- both consistent with the rules above;
- status updates also go out every ``status_interval`` (and every 0.5 s at most while
  output is blocked or a large transaction is being rendered).

Reconnects resume from the slot's confirmed position; transactions already handed to
the writer are skipped when the server sends them again (after a crash the slot's
position on disk may be older than the last one confirmed), so one run writes each
transaction once. Only a server or connection that is away for now is retried
(`catalog.is_transient`, `ServerUnavailable`) -- at start-up as after a lost
connection, with the same bounded backoff; before each reconnect a plain connection
checks the facts (the slot, the publications, the role's REPLICATION attribute), so a
condition that will not heal ends the run at once. ``--output`` keeps
``FILE.pgtail-state`` (see `OutputState`) so a restart after kill -9 writes none twice
either. A TEMPORARY slot (no ``--slot``) dies with its connection: a lost connection
is then an error, not a reconnect.
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import psycopg2
import psycopg2.errors
import psycopg2.extras

from pgtail import catalog
from pgtail import changes as ch
from pgtail.catalog import (
    primary_message,
)
from pgtail.changes.schema_events import each, with_schema_events
from pgtail.errors import (
    ConfigurationError,
    PgtailError,
    ReplicationError,
    ServerUnavailable,
)
from pgtail.feedback import Feedback
from pgtail.render import make_renderer, row_encoder
from pgtail.stream import retry, setup
from pgtail.stream.change_stream import ChangeStream, RawChangeStream
from pgtail.stream.change_stream import Stop as _Stop
from pgtail.stream.config import Logger, StopReason, StreamConfig, StreamResult, no_log
from pgtail.stream.connection import ConnectionLost, ServerError, open_replication
from pgtail.stream.ddl import ShapeLookup, with_ddl
from pgtail.stream.gc_tuning import fewer_collections
from pgtail.stream.publication_choice import (
    drop_run_publication,
)
from pgtail.stream.reader import Reader, TypeLookup
from pgtail.stream.setup import Start
from pgtail.stream.signals import Signals
from pgtail.stream.snapshot import SnapshotCopy, check_config
from pgtail.stream.waiting import Waiting
from pgtail.stream.writer import (
    LINE_STARTS,
    PIPE_GRACE,
    STOP,
    Batch,
    Data,
    OutputBuffer,
    OutputState,
    Writer,
    data_size,
    mend_torn_tail,
    pipe_kind,
    reader_gone,
)

# after a signal, how long the writer may go on writing what was read before the rest is
# dropped (not confirmed): a slow reader does not hold a stop up
STOP_GRACE = 0.4


class Confirmed:
    """The session's `Confirm` policy: `Feedback` (shared with the writer, under its
    lock) decides what to confirm and when."""

    reply = False

    def __init__(self, feedback: Feedback, lock: Any) -> None:
        self.feedback = feedback
        self.lock = lock

    def due(self, now: float, force: bool) -> int | None:
        with self.lock:
            return self.feedback.flush_lsn if force or self.feedback.due(now) else None

    def sent(self, lsn: int, now: float) -> None:
        with self.lock:
            self.feedback.sent(lsn, now)

    def next_due_in(self, now: float) -> float:
        with self.lock:
            return self.feedback.next_due_in(now)


class Session:
    """One run of the stream once preflight is done and the output is open: the
    replication connection (and the reconnects), the feedback and policy objects the
    loop consults, and the hand-off of rendered batches to the writer thread."""

    def __init__(
        self,
        start: Start,
        writer: Writer,
        buffer: OutputBuffer,
        render_all: Callable[[list[Any]], None],
        close_renderer: Callable[[], None],
        pipe_fd: int | None,
    ) -> None:
        if start.server is None:
            raise ValueError("a Session starts after preflight")
        # ---- what was asked, and what preflight found out
        self.config = start.config
        self.log = start.log
        self.signals = start.signals
        self.dsn = start.dsn
        self.wait = Waiting(start.dsn, start.log, start.signals)
        self.slot = start.slot
        self.temporary = start.temporary
        self.server: catalog.ServerInfo = start.server
        self.publications = start.publications
        self.proto_version = start.proto_version
        self.options = start.options  # START_REPLICATION options
        # ---- the rules: what is safe to confirm (shared with the writer, under lock),
        # and where to stop, what to skip, how to batch (the reader's alone)
        self.lock = start.lock
        self.feedback = start.feedback
        self.policy = start.policy
        # ---- the replication connection
        self.conn: Any = None
        self.cursor: Any = None
        self.reader: Reader | None = None  # the read loop of the connection
        self.lookup_types = TypeLookup(self.dsn, self.log)
        self.reconnects = 0
        self.received_since_connect = False
        self.last_data = time.monotonic()  # when data last came (for --idle-exit)
        # --end reached while idle: the server's WAL end then (see `follow_end`)
        self.ended_at: int | None = None
        self.exported: tuple[str, int] | None = None  # (snapshot name, consistent point)
        # --snapshot: the copy imported at connect, run before the first message is read
        self.snapshot: SnapshotCopy | None = None
        self.created_slot = False  # this run created the (non-temporary) slot
        # ---- the hand-off to the writer: the renderer writes into ``buffer`` (in the
        # reader thread); each batch's bytes go to the writer thread
        self.writer = writer
        # stdout into a pipe or socket: confirmed only once its reader used it
        self.pipe_fd = pipe_fd
        self.buffer = buffer
        self.render_all = render_all  # a batch's items
        self.close_renderer = close_renderer
        self.renderer_closed = False
        self.position = 0  # stream position of the last batch handed to the writer
        # a part of a batch's output ending within a line was handed over (see
        # `hand_over_part`): the rest of the line must follow
        self.in_line = False
        buffer.hand_over = self.hand_over_part

    # ----------------------------------------------------------------- connect

    def check_facts(self) -> None:
        setup.check_facts(self.dsn, self.slot, self.publications)

    def connect(self, first: bool) -> None:
        conn = open_replication(self.dsn, self.config.application_name)
        self.conn = conn
        cur = conn.cursor()
        self.cursor = cur
        export = first and self.config.snapshot
        major, two_phase = self.server.major, self.config.two_phase
        self.exported = None  # (a retried start-up must not take an earlier attempt's)
        if self.temporary:
            _, self.exported = setup.create_slot(
                cur, self.slot, major, two_phase, temporary=True, export=export, wait=self.wait
            )
            if first:
                self.log(
                    f"pgtail: no --slot: streaming temporary slot {self.slot!r}; it goes away"
                    " with the connection and cannot be resumed (use --slot NAME --create-slot)"
                )
        elif first and self.config.create_slot:
            created, self.exported = setup.create_slot(
                cur,
                self.slot,
                major,
                two_phase,
                temporary=False,
                if_missing=True,
                export=export,
                wait=self.wait,
            )
            if created:
                self.created_slot = True
                self.log(f"pgtail: created replication slot {self.slot!r}")
        if export:
            self.snapshot = (
                SnapshotCopy(self, *self.exported)
                if self.exported is not None
                else SnapshotCopy.of_existing_slot(self)
            )
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
            if not first and catalog.slot_busy(exc):
                # the walsender of the lost connection may not have noticed it yet
                raise ServerUnavailable(primary_message(exc)) from None
            during = "START_REPLICATION" if first else "reconnect"
            raise self._start_error(exc, during=during) from None
        self.feedback.reset_connection()
        self.reader = Reader(
            conn,
            cur,
            Confirmed(self.feedback, self.lock),
            status_interval=self.config.status_interval,
            wake=(self.signals.fd,),
            on_wake=self._woken,
        )
        self.last_data = time.monotonic()
        self.received_since_connect = False

    def _start_error(self, exc: BaseException, during: str = "START_REPLICATION") -> PgtailError:
        return catalog.translate_replication_error(exc, self.slot, during=during)

    # ----------------------------------------------------------------- feedback

    def note_idle(self, assembler_open: bool) -> None:
        """Everything read is written (into a pipe: consumed and confirmable) and no
        transaction is open: follow the server's WAL end."""
        writer = self.writer
        if assembler_open or not writer.idle():
            return
        self._follow(int(self.cursor.wal_end or 0))

    def _follow(self, wal_end: int) -> None:
        """Confirm ``wal_end`` once everything is written (into a pipe, read)."""
        with self.lock:
            if self.writer.settled():
                self.feedback.idle(wal_end)

    # ----------------------------------------------------------------- loop

    def enqueue(self, batch: Batch) -> None:
        writer = self.writer
        if self.signals.received is not None and not writer.idle():
            # stopping, and the output has not taken what it has (a slow reader, one
            # large transaction handing over batch after batch): hand over no more
            raise _Stop("signal")
        if batch.items:
            self.render_all(batch.items)
            batch.items = []
        buffer = self.buffer
        if buffer.tell():
            batch.data = buffer.take()
        # rendering a large transaction takes a while: keep the walsender alive meanwhile
        self._keepalive()
        if self.signals.reopen_pending:
            self.reopen_output()
        self._put(batch)
        self.in_line = False

    def hand_over_part(self, data: Data) -> None:
        """The output of a batch so far, before the rest is rendered (`OutputBuffer`: a
        large value's line, in pieces): to the writer now, so that the line is never
        held whole. It may end within the line: until the batch's last part is handed
        over, a stop waits for the line to be written whole (a second signal excepted)."""
        self.in_line = True
        self._put(Batch([], 0, 0, 0, 0, data=data, part=True))

    def _put(self, batch: Batch) -> None:
        writer = self.writer
        size = data_size(batch.data)
        # output is blocked (QUEUE_BYTES or QUEUE_ITEMS are waiting): read nothing more
        # (a slow reader slows the server), keep the walsender alive, and act on a stop
        while not writer.wait_for_room(size, 0.2):
            self._blocked()
        while True:
            try:
                writer.queue.put(batch, timeout=0.2)
                writer.enqueued += 1
                if batch.position > self.position:
                    self.position = batch.position
                return
            except queue.Full:
                try:
                    self._blocked()
                except BaseException:
                    writer.release(size)
                    raise

    def _blocked(self) -> None:
        """The output takes nothing right now: stop when told to, else keep the
        walsender alive."""
        writer = self.writer
        if writer.failed:
            raise _Stop("closed" if writer.closed else "error")
        signals = self.signals
        # within a second, not after the queue; within a line, once it is written whole
        if signals.received is not None and (not self.in_line or signals.forced):
            raise _Stop("signal")
        self._keepalive()

    def reopen_output(self) -> None:
        """SIGHUP with ``--output``: have the writer reopen the file (it was rotated)."""
        self.signals.reopen_pending = False
        self.writer.request_reopen()
        self.log(f"pgtail: SIGHUP: reopening {self.config.output}")

    def _keepalive(self) -> None:
        """Send a status update when the last one is a while ago (busy or blocked)."""
        now = time.monotonic()
        with self.lock:
            last = self.feedback.last_sent
        if self.reader is not None and (
            last is None or now - last >= min(self.config.status_interval, 0.5)
        ):
            self.reader.send_status(force=True)

    def change_stream(self) -> ChangeStream | RawChangeStream:
        """A change stream for one connection, handing its batches to the writer."""
        cfg = self.config
        if cfg.format == "raw":
            return RawChangeStream(self.proto_version, self.policy, self.enqueue)
        # the renderer's fast path for text rows (it has none with --redact)
        encoder = row_encoder(cfg.format, redact=bool(cfg.filter.redact))
        assembler = ch.Assembler(self.proto_version, binary=cfg.binary, encoder=encoder)
        return ChangeStream(assembler, self.policy, self.enqueue, self.event_filter())

    def stream_events(self) -> None:
        """Pull payloads from the connection's `Reader` and feed them to the change
        stream until told to stop; it hands its batches to the writer (`enqueue`)."""
        reader = self.reader
        if reader is None:
            raise ConnectionLost("not connected")
        changes = self.change_stream()
        # bound once: this loop runs once per message (a connection lost ends it)
        signals = self.signals
        feed = changes.feed
        in_burst = False  # messages came since the last empty read
        try:
            for msg in reader.messages():
                if signals.received is not None:
                    changes.stop("signal")
                if msg is None:
                    if in_burst:  # data until just now: the idle time starts here
                        self.last_data = time.monotonic()
                        in_burst = False
                    changes.drained()
                    self._idle(reader, changes.open_transactions())
                    continue
                if not in_burst:
                    in_burst = True
                    self.received_since_connect = True
                wanted = feed(msg.payload, msg.data_start)
                if wanted:  # a Relation: look up the user types it uses first
                    changes.add_user_types(self.lookup_types(wanted), wanted)
        finally:
            changes.close()

    def _idle(self, reader: Reader, open_tx: bool) -> None:
        """Nothing to read right now: note what is safe to confirm, check the exit
        conditions, and tell the reader how long it may wait (it sends the status
        update and waits on the next pull)."""
        self.note_idle(open_tx)
        writer = self.writer
        if writer.failed:
            raise _Stop("closed" if writer.closed else "error")
        if self.pipe_fd is not None and reader_gone(self.pipe_fd):
            raise _Stop("closed")
        if self.policy.done_at(reader.wal_end, open_tx):
            self.ended_at = reader.wal_end
            raise _Stop("end")
        idle_exit = self.config.idle_exit
        limit = 1.0
        if idle_exit is not None:
            now = time.monotonic()
            if now - self.last_data >= idle_exit and writer.idle():
                raise _Stop("idle")
            limit = min(limit, max(0.01, self.last_data + idle_exit - now))
        reader.wait_limit = limit

    def _woken(self) -> None:
        """A signal came while the reader waited."""
        self.signals.drain()
        if self.signals.reopen_pending:
            self.reopen_output()

    # ----------------------------------------------------------------- lifecycle

    def close_connection(self) -> None:
        with contextlib.suppress(Exception):
            if self.conn is not None:
                self.conn.close()
        self.conn = None
        self.cursor = None
        self.reader = None
        self.lookup_types.close()

    def event_filter(self) -> Any:
        """The filter events go through (None: none): the user's, and after the snapshot
        of a slot that existed, the one that drops the changes the copy holds."""
        flt = None if self.config.filter.is_noop else self.config.filter
        return flt if self.snapshot is None else self.snapshot.event_filter(flt)

    def copy_snapshot(self, snapshot: SnapshotCopy) -> None:
        """--snapshot: every table's rows, before the first change is read."""
        try:
            if not snapshot.run(self.enqueue, lambda: self.signals.received is not None):
                raise _Stop("signal")
        finally:
            snapshot.close()
        # the copy counts as done once this is written (into a pipe: read)
        self.enqueue(Batch([], 0, 0, 0, 0, ends_snapshot=True))

    def drop_unfinished_snapshot_slot(self) -> str | None:
        """A copy that did not finish (not all written, or into a pipe not all read)
        leaves no slot this run created: the next run starts afresh (a temporary slot
        went with its connection). Returns what to say of a dropped slot."""
        snapshot = self.snapshot
        if not (self.config.snapshot and self.created_slot):
            return None
        if snapshot is not None and snapshot.done and self.writer.snapshot_delivered():
            return None
        try:
            catalog.drop_slot(self.dsn, self.slot, if_exists=True, force=True)
            return (
                f"the snapshot did not finish: dropped replication slot {self.slot!r}"
                " this run created (rerun to start afresh)"
            )
        except (PgtailError, psycopg2.Error) as exc:
            self.log(
                f"pgtail: warning: the snapshot did not finish and replication slot"
                f" {self.slot!r} could not be dropped ({primary_message(exc)}); drop it"
                f" (pgtail slot drop {self.slot}) before rerunning --snapshot"
            )
            return None

    def follow_end(self) -> None:
        """``--end`` was reached with nothing to read and no transaction open, so every
        transaction that committed before the WAL end seen then was received and, as
        none lay past ``--end``, taken. Once all of it is written (into a pipe, read),
        confirm that WAL end, as an idle stream would have if its output had kept up."""
        if self.ended_at is not None:
            self._follow(self.ended_at)

    def final_feedback(self) -> None:
        if self.reader is None:
            return
        with contextlib.suppress(ConnectionLost, ServerError, OSError):
            self.reader.send_status(force=True)

    def wait_for_writer(self) -> None:
        """Let the writer finish what was read, keeping the connection alive meanwhile;
        after a signal, for `STOP_GRACE` seconds at most (the rest is not written)."""
        writer = self.writer
        grace_ends: float | None = None
        if self.signals.received is not None:
            # an unfinished copy is dropped with its slot (or copied again): no grace
            copying = self.snapshot is not None and not self.snapshot.done
            grace_ends = time.monotonic() + (0.0 if copying else STOP_GRACE)

        def late() -> bool:
            if grace_ends is not None and time.monotonic() >= grace_ends:
                writer.abandon()
                return True
            return False

        late()

        if not writer.failed and not self.renderer_closed:
            self.renderer_closed = True
            try:
                self.close_renderer()
                if self.buffer.tell():
                    self.enqueue(Batch([], 0, 0, 0, 0))
            except (_Stop, ConnectionLost):
                pass
        if not writer.failed:
            while True:
                try:
                    writer.queue.put(STOP, timeout=0.2)
                    break
                except queue.Full:
                    if writer.failed or self.signals.forced or late():
                        break
                    with contextlib.suppress(ConnectionLost, psycopg2.Error):
                        self._keepalive()
        while not writer.finished.wait(0.1):
            if self.signals.forced:
                return
            if late():
                waited = time.monotonic() - (grace_ends or 0)
                # stuck in a write(2) to a reader that takes nothing, or a reader that
                # consumes too slowly to be waited for: abandoned
                if (writer.in_write and waited >= 0.3) or waited >= 2 * PIPE_GRACE:
                    return
            with contextlib.suppress(ConnectionLost, psycopg2.Error):
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
    SIGINT/SIGTERM/SIGHUP (when called from the main thread) stop it cleanly (SIGHUP
    with ``config.output`` reopens the file instead): reading stops,
    what was read is written, the final position is confirmed, and the result names
    the signal. A second signal abandons unwritten output at once.
    """
    logger = log or no_log
    if config.max_changes is not None and config.max_changes <= 0:
        raise ConfigurationError("--max-changes must be positive")
    if config.status_interval <= 0:
        raise ConfigurationError("--status-interval must be positive")
    if config.end_lsn is not None and config.start_lsn is not None:  # noqa: SIM102
        if config.end_lsn < config.start_lsn:
            raise ConfigurationError("--end is before --start")
    check_config(config)
    signals = Signals(install_signal_handlers, reopen_on_hup=config.output is not None)
    start = Start(config, logger, signals)
    output_file: BinaryIO | None = None
    try:
        try:
            retry.retry_start(
                start.preflight,
                config.reconnect,
                logger,
                signals,
                start.close_connection,
                first_contact=True,
            )
        except _Stop:
            return StreamResult(
                reason="signal",
                signal=signals.received,
                changes=0,
                transactions=0,
                confirmed_lsn=0,
                slot=start.slot,
                publications=start.publications,
                reconnects=0,
            )
        target = out
        state: OutputState | None = None
        # stdout into a pipe or socket: confirmed only once its reader used it
        pipe = pipe_kind(out) if config.output is None else None
        if config.output is not None:
            state = (
                OutputState(config.output, start.slot)
                if not start.temporary and config.format != "raw"
                else None
            )
            try:
                open(config.output, "ab").close()  # noqa: SIM115 - can we write there at all?
                if state is not None:
                    state.load(logger)
                # opened after load(): a cut tail must not leave the offset past the end
                # unbuffered: the writer writes whole lines with os.write on its descriptor
                output_file = open(config.output, "ab", buffering=0)  # noqa: SIM115
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot write --output {config.output}: {exc.strerror or exc}"
                ) from None
            if state is not None:
                start.policy.resume_after(state.position)
                # the file holds (fsync'd) everything up to there: safe to confirm
                start.feedback.written(state.position)
            target = output_file
        if state is None and pipe is None:
            # no state file to cut an unconfirmed tail by (``>> FILE``, or --output with a
            # temporary slot): a torn last line is cut or ended before we append
            mend_torn_tail(target, LINE_STARTS.get(config.format, ()), logger)
        with fewer_collections():
            pipe_fd = out.fileno() if pipe is not None else None
            return _run(start, _Output(target, output_file is not None, state, pipe, pipe_fd))
    finally:
        if output_file is not None:
            with contextlib.suppress(OSError):
                output_file.close()
        if start.held_publication is not None:
            drop_run_publication(start.held_publication, logger)
        signals.close()


def _make_render(config: StreamConfig, out: BinaryIO) -> tuple[Callable[[Any], None], Any]:
    if config.format == "raw":
        from pgtail.render.raw import RawRenderer

        raw = RawRenderer(out)

        def render_raw(item: Any) -> None:
            raw.render_message(item[0], item[1])

        return render_raw, raw.close
    renderer = make_renderer(config.format, out, config.render_options)
    return renderer.render, renderer.close


def _also(first: Callable[[], None], then: Callable[[], None]) -> Callable[[], None]:
    def both() -> None:
        try:
            first()
        finally:
            then()

    return both


@dataclass(frozen=True, slots=True)
class _Output:
    """Where the run writes: the target, whether it is ``--output`` (fsync'd), its state
    file, and for stdout into a pipe or socket, its kind and descriptor."""

    target: BinaryIO
    fsync: bool
    state: OutputState | None
    pipe: Any
    pipe_fd: int | None


def _run(start: Start, output: _Output) -> StreamResult:
    config = start.config
    buffer = OutputBuffer()
    render, close_renderer = _make_render(config, buffer)
    render_all = with_schema_events(render) if config.format != "raw" else each(render)
    if config.format == "sql" and config.ddl:
        shapes = ShapeLookup(start.dsn, start.log, start.signals)
        render_all = with_ddl(render, shapes)
        close_renderer = _also(close_renderer, shapes.close)
    writer = Writer(
        output.target,
        start.feedback,
        start.lock,
        start.signals.wake,
        output.fsync,
        output.state,
        pipe=output.pipe,
        reopen_path=config.output,
    )
    stream = Session(start, writer, buffer, render_all, close_renderer, output.pipe_fd)
    reason: StopReason = "error"
    error: BaseException | None = None
    attempt = 0
    try:
        retry.retry_start(
            lambda: stream.connect(first=True),
            config.reconnect,
            stream.log,
            stream.signals,
            stream.close_connection,
        )
        writer.start()
        if stream.snapshot is not None:
            stream.copy_snapshot(stream.snapshot)
        while True:
            try:
                stream.stream_events()
            except ConnectionLost as loss:
                attempt = retry.reconnect(stream, loss, attempt)
    except _Stop as stop:
        reason = stop.reason
    except ServerError as exc:
        error = stream._start_error(exc.original, during="streaming")
    except BaseException as exc:
        error = exc
    finally:
        # whatever happened, what was read is written and what was written is confirmed
        if writer.is_alive():
            stream.wait_for_writer()
        stream.follow_end()
        stream.final_feedback()
        stream.close_connection()
        dropped = stream.drop_unfinished_snapshot_slot()
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
    # a signal that came with a closed output (Ctrl-C reaches `| jq` too; a closed
    # terminal fails writes to it) is what happened
    if stream.signals.received is not None:
        reason = "signal"
    if dropped is not None and reason != "signal":
        stream.log(f"pgtail: {dropped}")
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
        batches=writer.enqueued,
        dropped_slot=dropped if reason == "signal" else None,
    )
