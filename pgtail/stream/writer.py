"""The writer thread and the ``--output`` state file.

The reader renders each batch into memory; `Writer` only writes those bytes to the
output (and fsyncs them with ``--output``), through a bounded queue, and tells the
`Feedback` object what is flushed -- so nothing is confirmed before it is on its way to
the consumer (or on disk). `OutputState` records, beside ``--output FILE``, how far the
file is written, so a restart writes no transaction twice.
"""

from __future__ import annotations

import errno
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pgtail.feedback import Feedback
from pgtail.stream.config import Logger

QUEUE_ITEMS = 64  # bounded: output can lag the reader by at most this many batches


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


@dataclass(slots=True)
class Batch:
    items: list[Any]  # events (or raw messages) to render; rendered by the reader
    confirm_lsn: int  # end LSN of the last transaction completed in this batch (0: none)
    # stream position after this batch; nonzero only when the batch ends exactly at the end
    # of a transaction or a non-transactional message (the --output file is cut there)
    position: int
    transactions: int
    changes: int
    data: bytes = b""  # the rendered output of ``items``


STOP = object()  # tells the writer to flush and end


class Writer(threading.Thread):
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
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=QUEUE_ITEMS)
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
        pending: list[Batch] = []
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
                if item is STOP:
                    self._flush(pending)
                    self._out.flush()
                    return
                batch: Batch = item
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

    def _flush(self, pending: list[Batch]) -> None:
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
