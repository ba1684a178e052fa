"""Converters of json and jsonb, from both wire formats; ends in this family's registration
table.

Both become an orjson.Fragment of the JSON text, so the JSON lines renderer embeds the
document as JSON rather than as a string.
"""

from __future__ import annotations

import json

import orjson

from pgtail.values.base import Converter, TypeEntry, safe_binary, safe_str
from pgtail.values.oids import JSON, JSON_ARRAY, JSONB, JSONB_ARRAY


def json_spaced(value: bytes) -> bytes:
    """json's text with its raw line breaks and tabs made spaces: json keeps its input
    text, where they can only be insignificant whitespace (they are invalid inside JSON
    strings), and they would break JSON lines (a tab: the Spark source's tab-separated
    lines)."""
    if b"\n" in value or b"\r" in value or b"\t" in value:
        value = value.replace(b"\n", b" ").replace(b"\r", b" ").replace(b"\t", b" ")
    return value


_JSON_ERROR = orjson.JSONDecodeError

# A JSON text's shape: its bytes with the ones that play the same part wherever they are
# valid made one -- the digits 1-9 (a number's, a string's, a \u escape's), and the ASCII
# letters and punctuation valid only inside a string (not those of true, false, null, an
# exponent, an escape or a hex digit). Two texts of one shape lex and parse alike, token
# for token: when one is one JSON value, so is the other (the same grammar; its numbers
# and \u escapes may differ, which the json module's fallback below takes as well). So a
# shape orjson took once needs no parse again: a cheap check per value of a large
# transaction, whose values mostly share a few shapes.
JSON_SHAPE = bytes.maketrans(
    b"23456789ghijkmopqvwxyzGHIJKLMNOPQRSTUVWXYZ!#$%&'()*;<=>?@^_`|~",
    b"11111111" + b"g" * 54,
)
json_shapes: set[bytes] = set()  # the shapes of values orjson took (bounded)
_SHAPES_MAX = 4096
_SHAPE_BYTES_MAX = 512


def learn_json_shape(value: bytes) -> None:
    """orjson's check of ``value`` (raising its JSONDecodeError, a ValueError); then its
    shape is known (`JSON_SHAPE`), when short and while there is room."""
    orjson.loads(value)
    if len(value) <= _SHAPE_BYTES_MAX and len(json_shapes) < _SHAPES_MAX:
        json_shapes.add(value.translate(JSON_SHAPE))


def one_json_value(value: bytes | str) -> None:
    """Raise ValueError unless ``value`` is one JSON value: it is embedded in the JSON line
    as it is, and a malformed one (``1,"op":"delete"``) would add fields to the line.

    A known shape first (`JSON_SHAPE`), then orjson (fast); what it refuses but
    PostgreSQL's json and jsonb take (numbers past a double, a json string's lone
    surrogate escape, deep nesting) by the json module's grammar, which has no such
    limits."""
    try:
        if type(value) is bytes:
            if value.translate(JSON_SHAPE) not in json_shapes:
                learn_json_shape(value)
        else:
            orjson.loads(value)
    except _JSON_ERROR:
        try:
            json.loads(value)
        except RecursionError:
            pass  # nested deeper than the json module goes: PostgreSQL's own limit is higher
        except ValueError:
            raise ValueError("not one JSON value") from None


def json_checked(value: bytes) -> bytes:
    """``value`` once `one_json_value` took it (jsonb prints no line breaks)."""
    one_json_value(value)
    return value


def json_text_spaced(value: bytes) -> bytes:
    """json's text checked, with its line breaks and tabs made spaces (`json_spaced`)."""
    one_json_value(value)
    return json_spaced(value)


def json_text(value: bytes) -> orjson.Fragment:
    one_json_value(value)
    return orjson.Fragment(json_spaced(value))


def jsonb_text(value: bytes | str) -> orjson.Fragment:
    one_json_value(value)
    return orjson.Fragment(value)


def _json_str(value: str) -> orjson.Fragment:
    one_json_value(value)
    if "\n" in value or "\r" in value or "\t" in value:
        value = value.replace("\n", " ").replace("\r", " ").replace("\t", " ")
    return orjson.Fragment(value)


def _jsonb_binary(value: bytes) -> orjson.Fragment:
    """jsonb's binary form: its format version (1), then its text; ValueError for any
    other, as for a malformed text (the column's malformed value)."""
    if value[:1] != b"\x01":
        raise ValueError(f"not jsonb's binary format version 1: {value[:1]!r}")
    return orjson.Fragment(json_checked(value[1:]))


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    # no fallback: a value that is not JSON, in either format, is the column's malformed
    # value (an array element that is not falls back to its text or hex string)
    JSON: TypeEntry("json", JSON_ARRAY, json_text, safe_str(_json_str), json_text),
    JSONB: TypeEntry("jsonb", JSONB_ARRAY, jsonb_text, safe_str(jsonb_text), _jsonb_binary),
}
# the binary converters of array elements
ELEMENT_BINARY: dict[int, Converter] = {
    JSON: safe_binary(json_text),
    JSONB: safe_binary(_jsonb_binary),
}
