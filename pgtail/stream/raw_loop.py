"""``--format raw``: the read loop that hands every message, decoded field by field, to
the writer as a trace (no assembler, no filter); the stream policy's end, skip and
max-changes rules as they apply to single messages.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psycopg2

from pgtail import pgoutput as po
from pgtail.stream.change_stream import Stop
from pgtail.stream.connection import lost
from pgtail.stream.writer import Batch

if TYPE_CHECKING:
    from pgtail.stream.host import RawHost


def stream_raw(session: RawHost) -> None:
    """``--format raw``: every message, decoded field by field, as a trace.

    What this run wrote is skipped when the server sends it again after a reconnect
    (a crash rewinds the slot): transactions by their commit, prepared ones by their
    PREPARE, non-transactional messages by their LSN. The chunks of a streamed
    (in-progress) transaction come before its commit says where it ends: those are
    shown again.
    """
    decoder = po.Decoder(session.proto_version)
    items: list[Any] = []
    confirm = 0
    position = 0
    txs = 0
    in_tx = False
    skipping = False  # inside a transaction this run wrote already
    streamed: set[int] = set()
    policy = session.policy
    written = policy.written
    batch_size = policy.batch_size
    limited = policy.max_changes is not None

    def flush_items() -> None:
        nonlocal items, confirm, position, txs
        if items:
            session.enqueue(Batch(items, confirm, max(confirm, position), txs, len(items)))
            items, confirm, position, txs = [], 0, 0, 0

    while True:
        if session.signals.received is not None:
            flush_items()
            raise Stop("signal")
        try:
            msg = session.cursor.read_message()
        except psycopg2.Error as exc:
            raise lost(exc) from None
        if msg is None:
            flush_items()
            session._idle_tick(in_tx or bool(streamed))
            continue
        session.last_data = time.monotonic()
        session.received_since_connect = True
        message = decoder.decode(msg.payload)
        if skipping:
            if isinstance(message, po.Commit | po.Prepare):
                skipping = False
            continue
        if isinstance(message, po.Begin | po.BeginPrepare):
            if policy.past_end(getattr(message, "final_lsn", 0)):
                flush_items()
                raise Stop("end")
            # a commit record before a written position ends before it too
            if written(message.final_lsn + 1 if isinstance(message, po.Begin) else message.end_lsn):
                skipping = True
                continue
            in_tx = True
        elif isinstance(message, po.CommitPrepared | po.RollbackPrepared):
            if written(
                message.end_lsn
                if isinstance(message, po.CommitPrepared)
                else message.rollback_end_lsn
            ):
                continue
        elif isinstance(message, po.LogicalMessage) and not message.transactional:
            if written(message.lsn + 1):
                continue
            position = max(position, message.lsn + 1)
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
        if len(items) >= batch_size:
            flush_items()
        if limited and isinstance(
            message, po.Insert | po.Update | po.Delete | po.Truncate | po.LogicalMessage
        ):
            policy.took(1)
            if policy.limit_reached:
                flush_items()
                raise Stop("max_changes")
