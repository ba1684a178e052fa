"""JSON-ready values to JSON: `dumps` as pgtail uses orjson, and `text_json`, the JSON lines
renderer's shortcut from a text-format value straight to JSON bytes.

The JSON lines renderer's fast path for plain inserts (see pgtail.render.jsonl) writes a
text-format value as JSON bytes without building the Python value first. Each writer
here returns exactly dumps(converter(value)), or raises, and the caller then takes the
general path; tests compare the two on arbitrary bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import repeat
from typing import Any, Literal

import orjson

from pgtail.values.arrays import STRING_ARRAYS
from pgtail.values.base import Converter, decode_utf8, hex_text
from pgtail.values.datetimes import timestamptz_text
from pgtail.values.jsontypes import (
    json_checked,
    json_text,
    json_text_spaced,
    jsonb_text,
)
from pgtail.values.numbers import BOOL_TEXT, FLOAT_SPECIAL, float_text, numeric_text

JsonWriter = Callable[[bytes], bytes]
JsonKind = Literal["int", "string", "raw", "call", "convert", "utc_timestamp"]

# what JSON escapes in a string (orjson leaves DEL and non-ASCII as they are)
JSON_ESCAPES = re.compile(rb'[\x00-\x1f"\\]')
_BOOL_JSON: dict[bytes, bytes] = {b"t": b"true", b"f": b"false"}


# text converters whose JSON has a shortcut, by the converter (so a domain, which shares
# its base type's converter, takes it too)
_JSON_WRITERS: dict[Any, tuple[JsonKind, JsonWriter]] = {
    BOOL_TEXT.__getitem__: ("call", _BOOL_JSON.__getitem__),
    jsonb_text: ("raw", json_checked),  # jsonb prints no line breaks: embedded as it is
    json_text: ("call", json_text_spaced),  # what json_text's Fragment embeds
}


def text_json(convert: Converter) -> tuple[JsonKind, Callable[[bytes], Any]]:
    """How a text-format value goes straight to JSON bytes, given its text converter.

    The result is always ``dumps(convert(value))``:
    - ``("int", w)``: ``b"%d" % int(value)``;
    - ``("string", w)``: the text as a JSON string (``b'"' + value + b'"'``) when the value
      is ASCII with nothing JSON escapes, otherwise ``w(value)``;
    - ``("raw", w)``: the value's bytes as they are, once ``orjson.loads`` takes them as
      one JSON value (``w`` checks the same, with the fallback of `one_json_value`);
    - ``("call", w)``: ``w(value)``;
    - ``("convert", convert)``: no shortcut, ``dumps(convert(value))`` itself (the caller
      inlines it);
    - ``("utc_timestamp", convert)``: a timestamptz, whose text ``D T+00`` (the decoding
      session's TimeZone is UTC) is ``"DTT+00:00"`` with its first space made a ``T``
      when the text is ASCII with nothing JSON escapes; otherwise ``dumps(convert(value))``.
    ``w`` and ``convert`` may raise on bytes no server sends; the caller then takes the
    general path.
    """
    if convert is int:
        return "int", _writer(convert)
    special = _JSON_WRITERS.get(convert)
    if special is not None:
        return special
    if convert is decode_utf8 or convert is numeric_text:
        return "string", _writer(convert)
    if convert is timestamptz_text:
        return "utc_timestamp", convert
    # The rest (timestamps, arrays, floats, ...) as dumps(converter(value)): checking the
    # bytes for what JSON escapes costs as much as the converter's own fast paths.
    return "convert", convert


def text_json_column(convert: Converter, values: list[bytes]) -> list[bytes] | None:
    """``[dumps(convert(v)) for v in values]`` (no NULLs), written for the whole column in
    a few C-level passes where ``convert`` allows it: floats (one ``dumps`` of them all,
    split at its commas), flat arrays of plain strings (their text with its braces and
    commas replaced); None where it does not (the caller then writes each value)."""
    if convert is float_text:
        if any(map(FLOAT_SPECIAL.__contains__, values)):
            return None
        floats = list(map(float, values))  # what float_text does with the rest
        pieces = dumps(floats)[1:-1].split(b",")  # a number holds no comma
        return pieces if len(pieces) == len(values) and values else None
    if convert in STRING_ARRAYS:
        flat = b"".join(values)
        count = len(values)
        # convert_strings' first case, '{a,b}' -> ["a", "b"], with nothing JSON escapes and
        # no quote, backslash, NULL, empty or nested array; a newline then parts values
        if (
            not flat.isascii()
            or JSON_ESCAPES.search(flat) is not None
            or flat.count(b"{") != count
            or flat.count(b"}") != count
            or b"NULL" in flat
            or b"{}" in values
            or not all(map(bytes.startswith, values, repeat(b"{")))
            or not all(map(bytes.endswith, values, repeat(b"}")))
        ):
            return None
        text = b"\n".join(values).replace(b",", b'","')
        return text.replace(b"{", b'["').replace(b"}", b'"]').split(b"\n")
    return None


def decodes_text(convert: Converter) -> bool:
    """Whether ``convert(value)`` is ``value.decode("utf-8", "replace")`` (text, varchar,
    numeric, unknown types...): a generated caller may inline it."""
    return convert is decode_utf8 or convert is numeric_text


def _writer(convert: Converter) -> JsonWriter:
    def write(value: bytes) -> bytes:
        return dumps(convert(value))

    return write


def json_default(obj: Any) -> Any:
    """orjson's ``default`` as pgtail uses it (see `dumps`)."""
    if isinstance(obj, bytes | bytearray | memoryview):
        return hex_text(bytes(obj))
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def dumps(obj: Any) -> bytes:
    """orjson.dumps as pgtail uses it (Fragments embed as JSON; bytes become "\\x<hex>")."""
    return orjson.dumps(obj, default=json_default)
