"""A line holding a very large value, in pieces (`pgtail.changes.InsertEncoders.large`).

A value of V bytes written the usual way is copied several times on its way out (sliced
from the payload, decoded to str, escaped, formatted into the line, joined with the
line's head): for a value of hundreds of MB, several times V of memory. Here the line
is made by the format's usual encoder with each large value replaced by a short token,
and the token's place is filled with the value written chunk by chunk (`VALUE_CHUNK` at
a time) straight from the payload, as the renderer takes the pieces: each goes on to the
writer (see ``pgtail.stream.writer.OutputBuffer``) before the next is made. The bytes
are the usual encoder's; a value whose chunked writing would differ (another type, a
NUL in SQL text) goes the usual way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence

import orjson

from pgtail.changes import LARGE_VALUE, InsertEncoder, LargeEncoder
from pgtail.values import JSON_ESCAPES

# a large value is written from chunks of about this many bytes (cut before a UTF-8
# lead byte, so no character is split)
VALUE_CHUNK = 1 << 20
# stands for a large value in the usual encoder's line: ASCII that no format escapes,
# unlikely anywhere else (and checked: found once, or the usual way)
_TOKEN = b"pgtailLargeValue" + os.urandom(8).hex().encode() + b"N%d"

# a large value's pieces (made as they are taken) from its bytes (a memoryview of the
# payload), or None when it is written the usual way
ValuePieces = Callable[[memoryview], Iterator[bytes] | None]


def utf8_chunks(value: memoryview, size: int = VALUE_CHUNK) -> Iterator[memoryview]:
    """``value`` in views of about ``size`` bytes, each cut before a byte that starts a
    character (never within one: decoding each gives the text of the whole)."""
    start = 0
    total = len(value)
    while start < total:
        end = min(start + size, total)
        cut = end
        # a character has at most 3 continuation bytes (0x80-0xBF) after its first
        while start < cut < total and cut > end - 3 and 0x80 <= value[cut] < 0xC0:
            cut -= 1
        if cut == start:  # a character longer than ``size``: the whole of it
            end = start + 1
            while end < total and end < start + 4 and 0x80 <= value[end] < 0xC0:
                end += 1
        elif not (cut < total and 0x80 <= value[cut] < 0xC0):
            end = cut  # (else a 4th in a row: a stray byte, a cut before it is as good)
        yield value[start:end]
        start = end


def json_string_pieces(value: memoryview) -> Iterator[bytes]:
    """``orjson.dumps(value.decode("utf-8", "replace"))`` in pieces: JSON escapes each
    character by itself, so the chunks' escapes joined are the whole's."""
    yield b'"'
    escapes = JSON_ESCAPES.search
    for chunk in utf8_chunks(value):
        text = chunk.tobytes()
        if text.isascii() and escapes(text) is None:
            yield text
        else:
            yield orjson.dumps(text.decode("utf-8", "replace"))[1:-1]
    yield b'"'


def large_encoder(
    with_nulls: InsertEncoder,
    quote: Callable[[bytes], bytes],
    writers: Mapping[int, ValuePieces],
) -> LargeEncoder:
    """`InsertEncoders.large` from the format's encoder of rows with NULLs: a value past
    `LARGE_VALUE` in a column of ``writers`` is given to it as a token (which the line
    holds as ``quote(token)``) and written by its writer in that place."""

    def encode(seq: int, values: Sequence[memoryview | None]) -> Iterator[bytes] | None:
        small: list[bytes | None] = []
        large: list[tuple[bytes, Iterator[bytes]]] = []
        for i, value in enumerate(values):
            if value is None:
                small.append(None)
            elif len(value) > LARGE_VALUE and i in writers:
                written = writers[i](value)
                if written is None:
                    return None
                token = _TOKEN % i
                small.append(token)
                large.append((quote(token), written))
            else:
                small.append(value.tobytes())
        if not large:
            return None
        line = with_nulls(seq, *small)
        parts: list[tuple[bytes, Iterator[bytes]]] = []  # (the line before it, a value)
        start = 0
        for quoted, written in large:
            at = line.find(quoted, start)
            if at < 0 or line.find(quoted, at + 1) >= 0:
                return None
            parts.append((line[start:at], written))
            start = at + len(quoted)
        return _pieces(parts, line[start:])

    return encode


def _pieces(parts: list[tuple[bytes, Iterator[bytes]]], tail: bytes) -> Iterator[bytes]:
    for before, written in parts:
        yield before
        yield from written
    yield tail
