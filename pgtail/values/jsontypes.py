"""Converters of json and jsonb, from both wire formats; ends in this family's registration
table.

Both become an orjson.Fragment of the JSON text, so the JSON lines renderer embeds the
document as JSON rather than as a string.
"""

from __future__ import annotations

import json

import orjson

from pgtail.values.base import TypeEntry, hex_text, safe_binary, safe_str
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


def one_json_value(value: bytes | str) -> None:
    """Raise ValueError unless ``value`` is one JSON value: it is embedded in the JSON line
    as it is, and a malformed one (``1,"op":"delete"``) would add fields to the line.

    orjson first (fast); what it refuses but PostgreSQL's json and jsonb take (numbers
    past a double, a json string's lone surrogate escape, deep nesting) by the json
    module's grammar, which has no such limits."""
    try:
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


def _jsonb_binary(value: bytes) -> orjson.Fragment | str:
    try:
        if value[0] == 1:  # jsonb's binary format version
            return orjson.Fragment(json_checked(value[1:]))
    except IndexError:
        pass
    return hex_text(value)


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    # text: no fallback, a value that is not JSON is the column's malformed value (an
    # array element or a binary value that is not falls back to its text or hex string)
    JSON: TypeEntry("json", JSON_ARRAY, json_text, safe_str(_json_str), safe_binary(json_text)),
    JSONB: TypeEntry(
        "jsonb", JSONB_ARRAY, jsonb_text, safe_str(jsonb_text), safe_binary(_jsonb_binary)
    ),
}
