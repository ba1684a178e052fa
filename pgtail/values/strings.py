"""Converters of the character types (text, varchar, bpchar, name, xml, refcursor, unknown),
"char", bytea and uuid, from both wire formats; ends in this family's registration table.

Text-like types need no conversion: both formats are the text itself (`_decode`). bytea
becomes "\\x<hex>" whichever bytea_output the text form was printed with.
"""

from __future__ import annotations

import re

from pgtail.values.base import _decode, _hex, _identity, _text_type, _Type, _type
from pgtail.values.oids import (
    BPCHAR,
    BPCHAR_ARRAY,
    BYTEA,
    BYTEA_ARRAY,
    CHAR,
    CHAR_ARRAY,
    NAME,
    NAME_ARRAY,
    REFCURSOR,
    REFCURSOR_ARRAY,
    TEXT,
    TEXT_ARRAY,
    UNKNOWN,
    UUID,
    UUID_ARRAY,
    VARCHAR,
    VARCHAR_ARRAY,
    XML,
    XML_ARRAY,
)

# --- strings and byte strings ------------------------------------------------------------


def _char_binary(value: bytes) -> str:
    if not value or value[0] == 0:
        return ""
    byte = value[0]
    return f"\\{byte:03o}" if byte >= 0x80 else chr(byte)


_BYTEA_ESCAPE = re.compile(rb"\\(\\|[0-7]{3})")


def _bytea_str(text: str) -> str:
    if text.startswith("\\x"):
        return text
    # bytea_output = escape: printable ASCII as is, "\\\\" and "\\ooo" escapes.
    raw = text.encode("latin-1")
    unescaped = _BYTEA_ESCAPE.sub(
        lambda m: b"\\" if m.group(1) == b"\\" else bytes([int(m.group(1), 8)]), raw
    )
    return _hex(unescaped)


def _bytea_text(value: bytes) -> str:
    if value[:2] == b"\\x":
        return value.decode("ascii")
    return _bytea_str(value.decode("latin-1"))


def _uuid_binary(value: bytes) -> str:
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, _Type] = {
    TEXT: _text_type("text", TEXT_ARRAY),
    VARCHAR: _text_type("character varying", VARCHAR_ARRAY),
    # "character" alone means character(1) in a cast; bpchar keeps any length.
    BPCHAR: _text_type("bpchar", BPCHAR_ARRAY),
    NAME: _text_type("name", NAME_ARRAY),
    XML: _text_type("xml", XML_ARRAY),
    REFCURSOR: _text_type("refcursor", REFCURSOR_ARRAY),
    UNKNOWN: _text_type("unknown", 0),
    CHAR: _type('"char"', CHAR_ARRAY, _identity, _char_binary, _decode),
    BYTEA: _type("bytea", BYTEA_ARRAY, _bytea_str, _hex, _bytea_text),
    UUID: _type("uuid", UUID_ARRAY, _identity, _uuid_binary, _decode),
}
