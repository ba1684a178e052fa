"""Bounds-checked reads of pgoutput fields: each failure is a DecodeError naming the field.

Shared by the decoder (`pgtail.pgoutput`) and its fast row readers (`_fastrows`).
"""

from __future__ import annotations

import struct
from datetime import datetime
from typing import Any

from pgtail.errors import DecodeError
from pgtail.pgoutput.messages import pg_timestamp

UINT32 = struct.Struct("!I").unpack_from


def read_timestamp(micros: int, where: str) -> datetime:
    try:
        return pg_timestamp(micros)
    except DecodeError as exc:
        raise DecodeError(f"{where}: {exc.message}") from None


class Layout:
    """A run of fixed-size fields read with one precompiled struct.

    A short read is turned into a DecodeError naming the first field that does not fit.
    """

    __slots__ = ("message", "fields", "size", "unpack_from")

    def __init__(self, message: str, *fields: tuple[str, str]) -> None:
        compiled = struct.Struct("!" + "".join(code for _, code in fields))
        self.message = message
        self.size = compiled.size
        self.unpack_from = compiled.unpack_from
        offset = 0
        placed: list[tuple[str, int, int]] = []
        for name, code in fields:
            size = struct.calcsize("!" + code)
            placed.append((name, offset, size))
            offset += size
        self.fields = tuple(placed)

    def read(self, buf: bytes, pos: int, prefix: str | None = None) -> tuple[Any, ...]:
        try:
            return self.unpack_from(buf, pos)
        except struct.error:
            raise self.truncated(buf, pos, prefix) from None

    def truncated(self, buf: bytes, pos: int, prefix: str | None = None) -> DecodeError:
        where = prefix or self.message
        for name, offset, size in self.fields:
            start = pos + offset
            if start + size > len(buf):
                left = max(0, len(buf) - start)
                return DecodeError(
                    f"{where}.{name}: truncated (needs {size} bytes at offset {start}, {left} left)"
                )
        return DecodeError(f"{where}: truncated")  # not reached: unpack_from failed


def xid_layout(message: str, *fields: tuple[str, str]) -> tuple[Layout, Layout]:
    """The layout outside a stream, and inside one (an Int32 xid first)."""
    return Layout(message, *fields), Layout(message, ("xid", "I"), *fields)


def read_string(buf: bytes, pos: int, where: str) -> tuple[str, int]:
    """A NUL-terminated UTF-8 String; returns it and the offset after the NUL."""
    end = buf.find(b"\0", pos)
    if end < 0:
        raise DecodeError(f"{where}: truncated (no NUL-terminated string at offset {pos})")
    try:
        return buf[pos:end].decode("utf-8"), end + 1
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where}: invalid UTF-8 at offset {pos + exc.start}") from None


def expect_end(buf: bytes, pos: int, message: str) -> None:
    if pos != len(buf):
        raise DecodeError(
            f"{message}: {len(buf) - pos} bytes of trailing data after the message (offset {pos})"
        )


def read_byte(buf: bytes, pos: int, where: str) -> int:
    if pos >= len(buf):
        raise DecodeError(f"{where}: truncated (needs 1 byte at offset {pos}, 0 left)")
    return buf[pos]
