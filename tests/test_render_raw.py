"""`--format raw`: exact trace lines for tuple data (text values as text, binary as hex)."""

from __future__ import annotations

import io

import pytest

from pgtail.pgoutput import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    Insert,
    TupleData,
)
from pgtail.render.raw import RawRenderer, format_message, format_text_value, format_tuple


def tuple_of(*columns: tuple[int, bytes | None]) -> TupleData:
    return TupleData(bytes(kind for kind, _ in columns), tuple(value for _, value in columns))


def test_text_values_are_text_and_binary_values_hex() -> None:
    data = tuple_of(
        (KIND_TEXT, b"578"),
        (KIND_TEXT, b"h4"),
        (KIND_NULL, None),
        (KIND_UNCHANGED_TOAST, None),
        (KIND_BINARY, b"\x00\x00\x02\x42"),
    )
    assert format_tuple(data) == "[t:'578', t:'h4', n, u, b:00000242]"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        (b"", "''"),
        (b"it's", '"it\'s"'),
        (b"a\nb\x1b[31m", "'a\\nb\\x1b[31m'"),  # nothing can move the cursor
        ("é🎉".encode(), "'é🎉'"),
        (b"\xff\xfe", "fffe"),  # not UTF-8: hex, never quoted, so never mistaken for text
    ],
)
def test_text_values_are_escaped(raw: bytes, shown: str) -> None:
    assert format_text_value(raw) == shown


def test_a_trace_line() -> None:
    message = Insert(None, 16384, tuple_of((KIND_TEXT, b"1"), (KIND_TEXT, b"ab")))
    assert format_message(message, 0x1505F28) == (
        "0/1505F28 Insert xid=null relation_id=16384 new=[t:'1', t:'ab']"
    )
    out = io.BytesIO()
    RawRenderer(out).render_message(message, 0x1505F28)
    assert out.getvalue().endswith(b"new=[t:'1', t:'ab']\n")
