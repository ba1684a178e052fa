"""Converters of json and jsonb, from both wire formats; ends in this family's registration
table.

Both become an orjson.Fragment of the JSON text, so the JSON lines renderer embeds the
document as JSON rather than as a string.
"""

from __future__ import annotations

import orjson

from pgtail.values.base import _hex, _safe_binary, _safe_str, _Type
from pgtail.values.oids import JSON, JSON_ARRAY, JSONB, JSONB_ARRAY


def json_spaced(value: bytes) -> bytes:
    """json's text with its raw line breaks and tabs made spaces: json keeps its input
    text, where they can only be insignificant whitespace (they are invalid inside JSON
    strings), and they would break JSON lines (a tab: the Spark source's tab-separated
    lines)."""
    if b"\n" in value or b"\r" in value or b"\t" in value:
        value = value.replace(b"\n", b" ").replace(b"\r", b" ").replace(b"\t", b" ")
    return value


def _json_text(value: bytes) -> orjson.Fragment:
    return orjson.Fragment(json_spaced(value))


def _json_str(value: str) -> orjson.Fragment:
    if "\n" in value or "\r" in value or "\t" in value:
        value = value.replace("\n", " ").replace("\r", " ").replace("\t", " ")
    return orjson.Fragment(value)


def _jsonb_binary(value: bytes) -> orjson.Fragment | str:
    try:
        if value[0] == 1:  # jsonb's binary format version
            return orjson.Fragment(value[1:])
    except IndexError:
        pass
    return _hex(value)


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, _Type] = {
    # _json_text cannot raise: it takes no fallback.
    JSON: _Type("json", JSON_ARRAY, _json_text, _safe_str(_json_str), _safe_binary(_json_text)),
    JSONB: _Type("jsonb", JSONB_ARRAY, orjson.Fragment, orjson.Fragment, _jsonb_binary),
}
