"""``--format raw``: a protocol trace, one line per pgoutput message, field by field.

Each line starts with the message's WAL position (the XLogData ``dataStart``) and the
message type, then ``field=value`` pairs in wire order: LSNs as ``X/Y``, times in ISO
8601, tuple data as ``[kind:value, ...]`` with ``n`` (NULL), ``u`` (unchanged TOAST),
``t:'text'`` (a text value, quoted and escaped as a Python string literal, so
non-printable characters show as escapes; hex if it is not UTF-8) and ``b:<hex>``
(binary) values, byte strings in hex.
It works on `pgtail.pgoutput` messages directly, not on change events.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, BinaryIO

from pgtail.lsn import format_lsn
from pgtail.pgoutput import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    CommitPreparedMessage,
    PgoutputMessage,
    RelationColumn,
    RollbackPreparedMessage,
    TruncateMessage,
    TupleData,
)

_KIND_NAMES = {KIND_NULL: "n", KIND_UNCHANGED_TOAST: "u", KIND_TEXT: "t", KIND_BINARY: "b"}
# the trace names a message by its class, but these by the protocol's name (their classes
# carry a suffix: `pgtail.changes` has events of the plain names)
_TRACE_NAMES: dict[type, str] = {
    TruncateMessage: "Truncate",
    CommitPreparedMessage: "CommitPrepared",
    RollbackPreparedMessage: "RollbackPrepared",
}


def _is_lsn_field(name: str) -> bool:
    return name == "lsn" or name.endswith("_lsn")


def format_text_value(value: bytes) -> str:
    """A text-format column value: quoted and escaped; hex if it is not UTF-8."""
    try:
        return repr(bytes(value).decode("utf-8"))
    except UnicodeDecodeError:
        return bytes(value).hex()


def format_tuple(data: TupleData) -> str:
    parts = []
    for kind, value in zip(data.kinds, data.values, strict=False):
        name = _KIND_NAMES.get(kind, chr(kind))
        if value is None:
            parts.append(name)
        elif kind == KIND_TEXT:
            parts.append(f"{name}:{format_text_value(value)}")
        else:
            parts.append(f"{name}:{bytes(value).hex()}")
    return "[" + ", ".join(parts) + "]"


def format_value(name: str, value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if _is_lsn_field(name):
            return format_lsn(value)
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat(timespec="microseconds")
    if isinstance(value, TupleData):
        return format_tuple(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, tuple):
        if value and isinstance(value[0], RelationColumn):
            cols = (
                f"{c.name}:{c.type_oid}/{c.type_modifier}{'*' if c.is_key else ''}" for c in value
            )
            return "[" + ", ".join(cols) + "]"
        return "[" + ", ".join(format_value(name, v) for v in value) + "]"
    return repr(value)


def format_message(message: PgoutputMessage, data_start: int) -> str:
    """One trace line (without the newline)."""
    fields = " ".join(
        f"{f.name}={format_value(f.name, getattr(message, f.name))}"
        for f in dataclasses.fields(message)
    )
    cls = type(message)
    head = f"{format_lsn(data_start)} {_TRACE_NAMES.get(cls) or cls.__name__}"
    return f"{head} {fields}" if fields else head


class RawRenderer:
    """Writes one trace line per decoded message."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out

    def render_message(self, message: PgoutputMessage, data_start: int) -> None:
        self._out.write(format_message(message, data_start).encode("utf-8", "replace") + b"\n")

    def close(self) -> None:
        pass
