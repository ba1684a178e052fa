"""JSON-ready values back to PostgreSQL input text: `to_text`.

`'<to_text(v)>'::<type_name>` reproduces the value (see `pgtail.values`); the SQL renderer
builds its literals from it, the table renderer prints it, and range bounds are written
with it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

_NEEDS_QUOTES = re.compile(r'[{}",\\ \t\n\r\v\f]')


def _array_element(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, list):
        return _array_literal(value)
    text = to_text(value)
    if text == "" or text.upper() == "NULL" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _array_literal(values: list[Any]) -> str:
    return "{" + ",".join([_array_element(v) for v in values]) + "}"


def to_text(value: Any) -> str:
    """PostgreSQL input text for a JSON-ready value: `'<to_text(v)>'::<type_name>` is v."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return _array_literal(value)
    if isinstance(value, orjson.Fragment):
        return orjson.dumps(value).decode("utf-8")
    if value is None:
        raise TypeError("NULL has no input text; render it as NULL")
    raise TypeError(f"not a JSON-ready value: {type(value).__name__}")
