"""The writer thread and the ``--output`` state file.

The reader renders each batch into memory; `Writer` only writes those bytes to the
output (and fsyncs them with ``--output``), through a bounded queue, and tells the
`Feedback` object what is flushed -- so nothing is confirmed before it is on its way to
the consumer (or on disk). Into a pipe, "on its way" is not enough: a transaction is
confirmed only once the pipe's reader consumed it and stayed (`PipeProgress`). Each
write(2) ends at a line end, so a kill leaves whole lines. `OutputState` records, beside
``--output FILE``, how far the file is written, so a restart writes no transaction twice;
without it (``>> FILE``), `mend_torn_tail` cuts or ends a torn last line before appending.
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import io
import json
import os
import queue
import select
import stat
import termios
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pgtail.feedback import Feedback, PipeProgress
from pgtail.stream.config import Logger

QUEUE_ITEMS = 64  # bounded: output can lag the reader by at most this many batches
# ... and by at most about this many bytes of rendered output (one batch larger than
# this goes alone): what a slow reader makes pgtail hold is bounded, not the table
QUEUE_BYTES = 8 << 20
# at most this many bytes per write(2), cut after a newline: a kill between writes leaves
# whole lines (one longer line is written whole, however long)
WRITE_CHUNK = 1 << 20
PIPE_GRACE = 1.0  # seconds a pipe's reader must stay after consuming, before we confirm
# at the end of a run, how long to wait for a pipe's reader that consumes nothing more
PIPE_STALL = 5.0


def pipe_kind(out: BinaryIO) -> str | None:
    """``"fifo"`` or ``"socket"`` when ``out`` is a pipe or a socket, else None."""
    try:
        mode = os.fstat(out.fileno()).st_mode
    except (OSError, ValueError, AttributeError):
        return None
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return None


def reader_gone(fd: int) -> bool:
    """True when the reading end of our output pipe (or socket) was closed."""
    poller = select.poll()
    poller.register(fd, 0)
    return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))


def unread_bytes(fd: int, kind: str) -> int:
    """Bytes written to a pipe (or socket) that its reader has not taken out yet.

    A pipe: FIONREAD on the write end counts them. A socket: TIOCOUTQ (SIOCOUTQ) counts
    what the kernel has not handed on; for a Unix socket that includes bookkeeping
    overhead, which only makes us confirm later.
    """
    request = termios.FIONREAD if kind == "fifo" else termios.TIOCOUTQ
    buf = array.array("i", [0])
    fcntl.ioctl(fd, request, buf, True)
    return buf[0]


# How a line of each format starts: a torn last line that starts so (or is a prefix of
# it) was left by a pgtail run killed mid-write, and is cut; any other is only ended.
LINE_STARTS: dict[str, tuple[bytes, ...]] = {
    "json": (b'{"op":"',),
    "sql": (
        b"-- ",
        b"BEGIN;",
        b"COMMIT",
        b"INSERT INTO ",
        b"UPDATE ",
        b"DELETE FROM ",
        b"TRUNCATE ",
        b"PREPARE TRANSACTION ",
        b"ROLLBACK PREPARED ",
    ),
}
TORN_TAIL_LIMIT = 64 << 20  # a longer unterminated tail is only ended, not cut


def mend_torn_tail(out: BinaryIO, line_starts: tuple[bytes, ...], log: Logger) -> None:
    """Before appending to a regular file that does not end with a line end (``>> FILE``
    after a run was killed mid-write: a write(2) to a file can be cut by a fatal signal),
    cut the torn last line when it starts as a line of ours (``line_starts``) -- it was
    never confirmed, so the server sends it again -- else end it with a line end, so our
    first line is not glued to it. Either way, say so on stderr."""
    try:
        fd = out.fileno()
        info = os.fstat(fd)
        append = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND)
        offset = os.lseek(fd, 0, os.SEEK_CUR)
    except (AttributeError, OSError, ValueError):
        return  # not a file descriptor (io.BytesIO), or not seekable
    size = info.st_size
    if not stat.S_ISREG(info.st_mode) or size == 0 or (not append and offset != size):
        return
    tail = _unterminated_tail(fd, size)
    if tail == b"":
        return  # ends with a line end
    ours = tail is not None and any(
        tail[: len(start)] == start[: len(tail)] for start in line_starts
    )
    if ours and tail is not None:
        cut = size - len(tail)
        os.ftruncate(fd, cut)
        if not append:
            os.lseek(fd, cut, os.SEEK_SET)
        log(
            f"pgtail: removed a torn last line ({len(tail)} bytes) from the output file:"
            " a run was killed while writing it; its changes were not confirmed and are"
            " streamed again"
        )
        return
    os.write(fd, b"\n")
    log(
        "pgtail: warning: the output file did not end with a line end (a run killed while"
        " writing?): ended its last line before appending"
    )


def _unterminated_tail(fd: int, size: int) -> bytes | None:
    """The bytes after the file's last line end (b"" when it ends with one); None when
    they cannot be read (a write-only descriptor without /proc) or are too long."""
    try:
        reader = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY)  # stdout is often write-only
    except OSError:
        reader = os.dup(fd)  # readable only if it was opened so
    try:
        chunks: list[bytes] = []
        end = size
        while end > 0 and size - end < TORN_TAIL_LIMIT:
            start = max(0, end - 65536)
            chunk = os.pread(reader, end - start, start)
            if len(chunk) != end - start:
                return None  # the file changed under us: leave it
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                chunks.append(chunk[newline + 1 :])
                return b"".join(reversed(chunks))
            chunks.append(chunk)
            end = start
        return b"".join(reversed(chunks)) if end == 0 else None
    except OSError:
        return None
    finally:
        os.close(reader)


REOPEN = object()  # tells the writer to reopen --output (SIGHUP: the file was rotated)


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


# a batch's output: its bytes, or in pieces when it holds a large one (`OutputBuffer`)
Data = bytes | list[bytes]


def data_size(data: Data) -> int:
    if isinstance(data, bytes):
        return len(data)
    return sum(len(piece) for piece in data)


# a batch's output in the buffer past this many bytes, once a large write came, goes
# to the writer before the batch is rendered to its end (`OutputBuffer.hand_over`)
HAND_OVER_BYTES = 4 << 20


class OutputBuffer(io.BytesIO):
    """Where the reader renders a batch: a BytesIO, and `write_large`, which keeps a
    write of `WRITE_CHUNK` or more as it is, not copied in, and once such a write came (a
    large value's line, written in pieces) hands the output so far to ``hand_over``
    whenever it passes `HAND_OVER_BYTES`: a line of hundreds of MB is never held whole.
    `take` gives the rest of the batch's output (in pieces after such writes)."""

    def __init__(self) -> None:
        super().__init__()
        self.pieces: list[bytes] = []
        self.pieces_size = 0
        self.hand_over: Callable[[Data], None] | None = None

    def write_large(self, data: bytes) -> None:
        """`write` of what may be large (the plain `write` stays BytesIO's own, fast)."""
        size = len(data)
        if size < WRITE_CHUNK or type(data) is not bytes:
            super().write(data)
            if not self.pieces:
                return
        else:
            if super().tell():
                self.pieces.append(super().getvalue())
                self.seek(0)
                self.truncate()
            self.pieces.append(data)
            self.pieces_size += size
        if self.hand_over is not None and self.tell() >= HAND_OVER_BYTES:
            self.hand_over(self.take())

    def tell(self) -> int:
        """Bytes written since the last `take`."""
        return self.pieces_size + super().tell()

    def take(self) -> Data:
        """What was written since the last `take`; the buffer is then empty."""
        data: Data = super().getvalue()
        self.seek(0)
        self.truncate()
        if self.pieces:
            if data:
                self.pieces.append(data)  # type: ignore[arg-type]
            data = self.pieces
            self.pieces = []
            self.pieces_size = 0
        return data


@dataclass(slots=True)
class Batch:
    items: list[Any]  # events (or raw messages) to render; rendered by the reader
    confirm_lsn: int  # end LSN of the last transaction completed in this batch (0: none)
    # stream position after this batch; nonzero only when the batch ends exactly at the end
    # of a transaction or a non-transactional message (the --output file is cut there)
    position: int
    transactions: int
    changes: int
    data: Data = b""  # the rendered output of ``items``
    ends_snapshot: bool = False  # the last batch of a --snapshot's copy
    # output only, handed over before the rest of its batch was rendered: it may end
    # within a line, which the next batch ends (it confirms nothing)
    part: bool = False


STOP = object()  # tells the writer to flush and end


class Writer(threading.Thread):
    """Writes rendered batches to the output; reports what is flushed to the feedback object.

    It does no rendering (the reader does, into memory), so it holds the GIL only
    briefly and mostly sits in write(2): the reader keeps its CPU. It writes with
    os.write on the file descriptor (no buffer in between that would cut lines), in
    pieces that end at a line end.

    Into a pipe or socket (``pipe`` given), a transaction is confirmed only once the
    reader consumed it and was still there `PIPE_GRACE` later (`PipeProgress`); at the
    end of the run the writer waits for that, as long as the reader keeps consuming.
    """

    def __init__(
        self,
        out: BinaryIO,
        feedback: Feedback,
        lock: threading.Lock,
        wake: Callable[[], None],
        fsync: bool,
        state: OutputState | None,
        *,
        pipe: str | None = None,
        reopen_path: str | None = None,
    ) -> None:
        super().__init__(name="pgtail-writer", daemon=True)
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_ITEMS)
        self._out = out
        self._fd: int | None = None
        try:
            out.flush()  # anything written through the file object goes first
            self._fd = out.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None  # not a file (io.BytesIO): write through the object
        self._tty = self._fd is not None and os.isatty(self._fd)
        self._feedback = feedback
        self._lock = lock
        self._wake = wake
        self._fsync = fsync
        self._state = state
        self._flush_interval = 0.05 if fsync else 0.0
        self._pipe_kind = pipe if self._fd is not None else None
        self.pipe: PipeProgress | None = (
            PipeProgress(grace=PIPE_GRACE) if self._pipe_kind is not None else None
        )
        self._reopen_path = reopen_path
        self._reopen = False
        self._reopened: BinaryIO | None = None  # a file this thread opened (and closes)
        self.enqueued = 0  # batches handed over (reader side)
        self.done = 0  # batches written and flushed
        self.changes = 0
        self.transactions = 0
        self.closed = False  # the reader of our output went away (EPIPE)
        self.error: BaseException | None = None
        self.finished = threading.Event()
        self._boundary: tuple[int, int] | None = None  # (position, file offset) at its end
        # bytes of rendered output handed over and not yet written (QUEUE_BYTES bounds it)
        self.queued_bytes = 0
        self.room = threading.Condition()
        self.abandoned = False  # stop now: what is not written yet is not written
        self.in_write = False  # in os.write: blocked while a pipe's reader takes nothing
        # where the --snapshot copy ended: None before its last batch was written; then
        # the output offset after it (into a pipe) and whether it was flushed
        self._snapshot_end: int | None = None
        self._snapshot_flushed = False
        self._in_line = False  # the last batch written was a part: its line goes on

    @property
    def failed(self) -> bool:
        return self.closed or self.error is not None

    def idle(self) -> bool:
        """Every batch handed over is written (and flushed)."""
        return self.done == self.enqueued

    def settled(self) -> bool:
        """Every batch is written and, into a pipe, consumed and confirmable.

        Call with the feedback lock held.
        """
        pipe = self.pipe
        return self.done == self.enqueued and (pipe is None or pipe.settled)

    def wait_for_room(self, size: int, timeout: float) -> bool:
        """Reader side: whether ``size`` more bytes fit under QUEUE_BYTES now (or after
        ``timeout``); one batch larger than the bound goes when the queue is empty."""
        with self.room:
            if self.queued_bytes and self.queued_bytes + size > QUEUE_BYTES:
                self.room.wait(timeout)
            if self.queued_bytes and self.queued_bytes + size > QUEUE_BYTES:
                return False
            self.queued_bytes += size
            return True

    def release(self, size: int) -> None:
        """A batch `wait_for_room` made room for was not handed over after all."""
        self._written(size)

    def _written(self, size: int) -> None:
        with self.room:
            self.queued_bytes -= size
            self.room.notify_all()

    def abandon(self) -> None:
        """Stop writing at the next line end between writes; the batches not written
        yet are dropped (not confirmed: the next run gets them again)."""
        self.abandoned = True
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(STOP)

    def snapshot_delivered(self) -> bool:
        """The --snapshot copy's last batch was written and flushed and, into a pipe,
        its reader took it out."""
        with self._lock:
            end = self._snapshot_end
            if end is None or not self._snapshot_flushed:
                return False
            return self.pipe is None or self.pipe.consumed_to >= end

    def request_reopen(self) -> None:
        """Reopen ``--output`` before the next write (called by the reader, not a handler)."""
        if self._reopen_path is None:
            return
        self._reopen = True
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(REOPEN)  # a full queue: the writer is busy and sees it

    def run(self) -> None:
        pending: list[Batch] = []
        last_flush = 0.0
        pipe = self.pipe
        try:
            while True:
                timeout = None
                if pending:
                    timeout = max(0.0, last_flush + self._flush_interval - time.monotonic())
                if pipe is not None:
                    with self._lock:
                        check = pipe.next_check_in(time.monotonic())
                    if check is not None and (timeout is None or check < timeout):
                        timeout = check
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
                if item is STOP:
                    self._flush(pending)
                    if self._fd is None:
                        self._out.flush()
                    if pipe is not None:
                        self._wait_consumed(pipe)
                    return
                if item is REOPEN:
                    if self._reopen:
                        self._flush(pending)
                        pending = []
                        last_flush = time.monotonic()
                        self._do_reopen()
                    continue
                batch: Batch = item
                data = batch.data
                # pending keeps the batch until the flush (up to 0.5s): not its output
                batch.data = b""
                size = data_size(data)
                if self.abandoned and not self._in_line:
                    self._written(size)
                    continue
                if data:
                    whole = (
                        self._write(data) if isinstance(data, bytes) else self._write_pieces(data)
                    )
                    self._written(size)
                    self._in_line = batch.part and whole
                    if not whole:  # abandoned midway: a part of it, ending at a line end
                        continue
                if pipe is not None:
                    with self._lock:
                        pipe.wrote(size, batch.confirm_lsn)
                if batch.ends_snapshot:
                    with self._lock:
                        self._snapshot_end = pipe.offset if pipe is not None else 0
                if batch.position and self._state is not None:
                    self._boundary = (batch.position, self._tell())
                pending.append(batch)
                if time.monotonic() - last_flush >= 0.5:
                    self._flush(pending)
                    pending = []
                    last_flush = time.monotonic()
                if self._reopen:
                    self._flush(pending)
                    pending = []
                    last_flush = time.monotonic()
                    self._do_reopen()
        except BrokenPipeError:
            self.closed = True
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.EBADF) or (exc.errno == errno.EIO and self._tty):
                self.closed = True  # EIO on a terminal: it was closed (hung up)
            else:
                self.error = exc
        except BaseException as exc:  # reported by the reader
            self.error = exc
        finally:
            if self._reopened is not None:
                with contextlib.suppress(OSError):
                    self._reopened.close()
            self.finished.set()
            self._wake()

    def _write(self, data: bytes) -> bool:
        """Write ``data`` whole, each write(2) ending at a line end where it can; False
        when `abandon` stopped it after a part."""
        fd = self._fd
        if fd is None:
            self._out.write(data)
            return True
        total = len(data)
        view = memoryview(data)
        start = 0
        while start < total:
            end = total
            if total - start > WRITE_CHUNK:
                cut = data.rfind(b"\n", start, start + WRITE_CHUNK)
                if cut < 0:  # one line longer than a chunk: up to its end
                    cut = data.find(b"\n", start + WRITE_CHUNK)
                if cut >= 0:
                    end = cut + 1
            if start and self.abandoned:
                return False
            self.in_write = True  # (a reader that takes nothing keeps it here)
            while start < end:
                start += os.write(fd, view[start:end])
            self.in_write = False
        return True

    def _write_pieces(self, pieces: list[bytes]) -> bool:
        """`_write` of a batch in pieces: each piece dropped once written (a large
        value's line is not held longer than it takes); stopped by `abandon` only
        where a piece ends a line."""
        pieces_ended_line = True
        for i in range(len(pieces)):
            piece = pieces[i]
            pieces[i] = b""
            if i and self.abandoned and pieces_ended_line:  # (not within a line)
                return False
            if not self._write(piece):
                return False
            pieces_ended_line = piece.endswith(b"\n")
        return True

    def _tell(self) -> int:
        if self._fd is None:
            return self._out.tell()
        return os.lseek(self._fd, 0, os.SEEK_CUR)

    def _flush(self, pending: list[Batch]) -> None:
        if not pending:
            if self.pipe is not None:
                self._observe()
            return
        if self._fd is None:
            self._out.flush()
        if self._fsync:
            os.fsync(self._out.fileno())
        confirm = max(b.confirm_lsn for b in pending)
        if self._state is not None and self._boundary is not None:
            self._state.save(*self._boundary)
            self._boundary = None
        with self._lock:
            if self._snapshot_end is not None:
                self._snapshot_flushed = True
            if confirm and self.pipe is None:
                self._feedback.written(confirm)
            self.changes += sum(b.changes for b in pending)
            self.transactions += sum(b.transactions for b in pending)
            self.done += len(pending)
        if self.pipe is not None:
            self._observe()
        self._wake()

    def _observe(self) -> None:
        """Into a pipe: confirm what its reader consumed and stayed for; notice it left."""
        pipe = self.pipe
        fd = self._fd
        assert pipe is not None and fd is not None and self._pipe_kind is not None
        try:
            unread = unread_bytes(fd, self._pipe_kind)
        except OSError:
            unread = pipe.offset  # cannot tell: count nothing as consumed
        # after the count: present now means present when those bytes were gone
        if reader_gone(fd):
            raise BrokenPipeError(errno.EPIPE, "the reader of the output went away")
        now = time.monotonic()
        with self._lock:
            lsn = pipe.observe(unread, now)
            if lsn:
                self._feedback.written(lsn)
        if lsn:
            self._wake()

    def _wait_consumed(self, pipe: PipeProgress) -> None:
        """The run ends: confirm what the reader consumes, as long as it keeps consuming."""
        consumed = -1
        stalled_since = time.monotonic()
        while True:
            self._observe()
            now = time.monotonic()
            with self._lock:
                if pipe.settled:
                    return
                wait = pipe.next_check_in(now)
                done = pipe.consumed_to
                drained = pipe.drained
            if done > consumed:
                consumed = done
                stalled_since = now
            elif drained:
                # every byte taken: what is left is the reader's grace, PIPE_GRACE at
                # most (a stall limit of the same length could end the wait a moment
                # before the grace confirmed the last transaction)
                pass
            elif now - stalled_since >= (PIPE_GRACE if self.abandoned else PIPE_STALL):
                return  # a reader that stopped reading: what it left is not confirmed
            time.sleep(min(wait if wait is not None else 0.05, 0.1))

    def _do_reopen(self) -> None:
        """Close ``--output`` and open it again by name (after log rotation moved it)."""
        self._reopen = False
        path = self._reopen_path
        assert path is not None
        new = open(path, "ab", buffering=0)  # noqa: SIM115 - closed by this thread
        old = self._out
        self._out = new
        self._fd = new.fileno()
        self._reopened = new
        old.close()
        if self._state is not None:
            # the state file now describes the new file: its size, and the position so far
            self._state.save(self._state.position, self._tell())
