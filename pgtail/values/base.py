"""What every converter module shares: the converter types, the fallbacks, the type entry.

A converter turns one column value of one wire format into its JSON-ready Python value
(see `pgtail.values`). A value that does not parse falls back to its text str (text
format) or to "\\x<hex>" of its bytes (binary format) instead of raising: `safe_text`,
`safe_str` and `safe_binary` wrap a converter so. `TypeEntry` is one built-in type's entry
in the registry; each type family module ends in a table of them.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple, cast

Converter = Callable[[bytes], Any]
StrConverter = Callable[[str], Any]

# Each module binds the struct.Struct objects its converters call (`_I32.unpack(...)`) itself:
# a method call on a name bound by an import compiles to an attribute load and a call, which
# makes a bound method per value; on a module's own global it is a plain method call.


def hex_text(value: bytes) -> str:
    return "\\x" + value.hex()


def decode_utf8(value: bytes) -> str:
    # "replace" so that a non-UTF-8 database cannot stop a stream; valid UTF-8 costs the same.
    return value.decode("utf-8", "replace")


def identity_str(value: str) -> str:
    return value


# what a converter raises on bytes it cannot parse (never on what a server sends)
_UNPARSABLE = (ValueError, IndexError, KeyError, OverflowError, struct.error)


def _with_fallback(convert: Callable[[Any], Any], fallback: Callable[[Any], Any]) -> Any:
    def safe(value: Any) -> Any:
        try:
            return convert(value)
        except _UNPARSABLE:
            return fallback(value)

    return safe


def safe_text(convert: Converter) -> Converter:
    """A text converter that falls back to the text str instead of raising."""
    return cast(Converter, _with_fallback(convert, decode_utf8))


def safe_str(convert: StrConverter) -> StrConverter:
    """A str converter that falls back to the str itself instead of raising."""
    return cast(StrConverter, _with_fallback(convert, identity_str))


def safe_binary(convert: Converter) -> Converter:
    """A binary converter that falls back to the hex string instead of raising."""
    return cast(Converter, _with_fallback(convert, hex_text))


# --- the type entry ----------------------------------------------------------------------


class TypeEntry(NamedTuple):
    """A built-in type's SQL name (for a cast), array type OID and converters."""

    name: str
    array_oid: int
    text: Converter  # text-format bytes -> value
    text_str: StrConverter  # text already decoded (array elements) -> value
    binary: Converter  # send-function bytes -> value


def _from_str(convert: StrConverter) -> Converter:
    def text(value: bytes) -> Any:
        return convert(value.decode("utf-8", "replace"))

    return text


def type_entry(
    name: str,
    array_oid: int,
    text_str: StrConverter,
    binary: Converter,
    text: Converter | None = None,
    *,
    safe: bool = True,
) -> TypeEntry:
    if safe:
        text_str = safe_str(text_str)
        binary = safe_binary(binary)
    if text is None:
        text = _from_str(text_str)
    elif safe and text is not decode_utf8:  # decode_utf8 cannot raise
        text = safe_text(text)
    return TypeEntry(name, array_oid, text, text_str, binary)


def text_type_entry(name: str, array_oid: int) -> TypeEntry:
    return TypeEntry(name, array_oid, decode_utf8, identity_str, decode_utf8)
