"""A transaction's own text, made once per transaction: its positions and its commit time,
the part up to the second made once a second."""

from __future__ import annotations

from datetime import UTC, datetime

from pgtail.changes import Transaction
from pgtail.lsn import MAX_LSN

# What a usual transaction's text is made of (see `usual_tx`)
UsualTx = tuple[int, int, int, int, int, bytes, int]

# A time's ISO text up to the second, by (year, ..., second): transactions come many to a
# second, so the text is made once for all of them
_SECOND_TEXTS: dict[tuple[int, ...], bytes] = {}
_MAX_SECONDS = 4096  # seconds kept: stay bounded over a long run


def second_text(when: datetime) -> bytes:
    """``when``'s ISO 8601 text up to its seconds, without offset
    (``2026-11-26T23:11:51``), the same as ``isoformat``'s; cached."""
    key = (when.year, when.month, when.day, when.hour, when.minute, when.second)
    text = _SECOND_TEXTS.get(key)
    if text is None:
        if len(_SECOND_TEXTS) >= _MAX_SECONDS:
            _SECOND_TEXTS.clear()
        text = _SECOND_TEXTS[key] = when.replace(microsecond=0, tzinfo=None).isoformat().encode()
    return text


def usual_tx(tx: Transaction) -> UsualTx | None:
    """For the usual transaction (no origin, no GID, not prepared, a UTC commit time, LSNs
    in range): the values its text is formatted from, in this order -- xid, commit LSN
    (high, low), end LSN (high, low), commit time up to the second (`second_text`) and its
    microseconds. None for any other: the renderer then takes its general way."""
    commit_time = tx.commit_time
    commit_lsn = tx.commit_lsn
    end_lsn = tx.end_lsn
    if (
        tx.origin is not None
        or tx.prepared
        or tx.gid is not None
        or commit_time.tzinfo is not UTC
        or not (0 <= commit_lsn <= MAX_LSN and 0 <= end_lsn <= MAX_LSN)
    ):
        return None
    return (
        tx.xid,
        commit_lsn >> 32,
        commit_lsn & 0xFFFFFFFF,
        end_lsn >> 32,
        end_lsn & 0xFFFFFFFF,
        second_text(commit_time),
        commit_time.microsecond,
    )
