"""Commit times as text, the part every transaction's lines repeat made once a second."""

from __future__ import annotations

from datetime import datetime

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
