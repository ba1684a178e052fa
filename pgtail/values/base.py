"""What every converter module shares: the converter types, the fallbacks, the type entry.

A converter turns one column value of one wire format into its JSON-ready Python value
(see `pgtail.values`). A value that does not parse falls back to its text str (text
format) or to "\\x<hex>" of its bytes (binary format) instead of raising: `_safe_text`,
`_safe_str` and `_safe_binary` wrap a converter so. `_Type` is one built-in type's entry
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


def _hex(value: bytes) -> str:
    return "\\x" + value.hex()


def _decode(value: bytes) -> str:
    # "replace" so that a non-UTF-8 database cannot stop a stream; valid UTF-8 costs the same.
    return value.decode("utf-8", "replace")


def _identity(value: str) -> str:
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


def _safe_text(convert: Converter) -> Converter:
    """A text converter that falls back to the text str instead of raising."""
    return cast(Converter, _with_fallback(convert, _decode))


def _safe_str(convert: StrConverter) -> StrConverter:
    """A str converter that falls back to the str itself instead of raising."""
    return cast(StrConverter, _with_fallback(convert, _identity))


def _safe_binary(convert: Converter) -> Converter:
    """A binary converter that falls back to the hex string instead of raising."""
    return cast(Converter, _with_fallback(convert, _hex))


# --- the type entry ----------------------------------------------------------------------


class _Type(NamedTuple):
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


def _type(
    name: str,
    array_oid: int,
    text_str: StrConverter,
    binary: Converter,
    text: Converter | None = None,
    *,
    safe: bool = True,
) -> _Type:
    if safe:
        text_str = _safe_str(text_str)
        binary = _safe_binary(binary)
    if text is None:
        text = _from_str(text_str)
    elif safe and text is not _decode:  # _decode cannot raise
        text = _safe_text(text)
    return _Type(name, array_oid, text, text_str, binary)


def _text_type(name: str, array_oid: int) -> _Type:
    return _Type(name, array_oid, _decode, _identity, _decode)
