"""Converters of the character types (text, varchar, bpchar, name, xml, refcursor, unknown),
"char", bytea and uuid, from both wire formats; ends in this family's registration table.

Text-like types need no conversion: both formats are the text itself (`decode_utf8`). bytea
becomes "\\x<hex>" whichever bytea_output the text form was printed with.
"""

from __future__ import annotations

import re

from pgtail.values.base import (
    TypeEntry,
    decode_utf8,
    hex_text,
    identity_str,
    text_type_entry,
    type_entry,
)
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
    return hex_text(unescaped)


def _bytea_text(value: bytes) -> str:
    if value[:2] == b"\\x":
        return value.decode("ascii")
    return _bytea_str(value.decode("latin-1"))


def _uuid_binary(value: bytes) -> str:
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    TEXT: text_type_entry("text", TEXT_ARRAY),
    VARCHAR: text_type_entry("character varying", VARCHAR_ARRAY),
    # "character" alone means character(1) in a cast; bpchar keeps any length.
    BPCHAR: text_type_entry("bpchar", BPCHAR_ARRAY),
    NAME: text_type_entry("name", NAME_ARRAY),
    XML: text_type_entry("xml", XML_ARRAY),
    REFCURSOR: text_type_entry("refcursor", REFCURSOR_ARRAY),
    UNKNOWN: text_type_entry("unknown", 0),
    CHAR: type_entry('"char"', CHAR_ARRAY, identity_str, _char_binary, decode_utf8),
    BYTEA: type_entry("bytea", BYTEA_ARRAY, _bytea_str, hex_text, _bytea_text),
    UUID: type_entry("uuid", UUID_ARRAY, identity_str, _uuid_binary, decode_utf8),
}
