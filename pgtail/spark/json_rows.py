"""Rows stored as JSON (a change log's ``_pg_before``/``_pg_after``, pgtail's row JSON) ->
the Spark values of their columns, by `pgtail.spark.types.spark_field`'s converters, one
row or many at a time; and a row's members as the JSON text they were written as
(`raw_items`, `raw_members`, `raw_object`: a json/jsonb value keeps the server's text).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from pgtail.catalog.spark import ColumnType
from pgtail.spark.types import base_type, same, spark_field

JSON_TYPES = frozenset({114, 3802})  # json, jsonb: their values are JSON text (Fragments)
_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


def _skip_space(text: str, i: int) -> int:
    end = len(text)
    while i < end and text[i] in _WHITESPACE:
        i += 1
    return i


def raw_items(text: str) -> list[tuple[str | None, str]]:
    """The members of a JSON object (name, JSON text of the value) or the elements of a
    JSON array (None, JSON text), in order, each value's text exactly as written.

    Why: a json/jsonb value is embedded in pgtail's row JSON as the server's text
    (``orjson.Fragment``); parsing and writing it again would change that text.
    """
    space = _skip_space
    decode = _DECODER.raw_decode
    i = space(text, 0)
    opening = text[i : i + 1]
    if opening not in ("{", "["):
        raise ValueError("not a JSON object or array")
    closing = "}" if opening == "{" else "]"
    items: list[tuple[str | None, str]] = []
    i = space(text, i + 1)
    if text[i : i + 1] == closing:
        return items
    while True:
        name: str | None = None
        if closing == "}":
            name, i = decode(text, i)
            i = space(text, i)
            if text[i : i + 1] != ":":
                raise ValueError(f"expected ':' at {i}")
            i = space(text, i + 1)
        _, end = decode(text, i)
        items.append((name, text[i:end]))
        i = space(text, end)
        mark = text[i : i + 1]
        if mark == closing:
            return items
        if mark != ",":
            raise ValueError(f"expected ',' or {closing!r} at {i}")
        i = space(text, i + 1)


def _walk(text: str, values: dict[str, Any]) -> dict[str, str] | None:
    """The JSON text of each member of the object ``text``, given its members as orjson
    parsed them, when ``text`` is compact (no space between members, as orjson writes):
    a value orjson wrote is exactly ``orjson.dumps`` of what it parsed; a value that is
    not (a json column's own text) is found by the scanner. None otherwise."""
    if text[:1] != "{":
        return None
    dumps = orjson.dumps
    decode = _DECODER.raw_decode
    raws: dict[str, str] = {}
    pos = 1
    for name, value in values.items():
        key = dumps(name).decode()
        pos += len(key)
        if not text.startswith(key, pos - len(key)) or text[pos : pos + 1] != ":":
            return None
        pos += 1
        piece = dumps(value).decode()
        end = pos + len(piece)
        if not (text.startswith(piece, pos) and text[end : end + 1] in (",", "}")):
            try:
                _, end = decode(text, pos)
            except ValueError:
                return None
            piece = text[pos:end]
        raws[name] = piece
        pos = end + 1 if text[end : end + 1] == "," else end
    return raws if text[pos:] == "}" else None


def raw_members(text: str | bytes) -> dict[str, str]:
    """The members of a JSON object: name -> the JSON text of its value (see `raw_items`)."""
    if isinstance(text, bytes):
        text = text.decode()
    try:
        found = _walk(text, orjson.loads(text))
    except (orjson.JSONDecodeError, AttributeError):  # not an object, or past orjson
        found = None
    if found is not None:
        return found
    return {str(name): value for name, value in raw_items(text)}


def raw_object(items: Sequence[tuple[str, str]] | dict[str, str]) -> str:
    """A JSON object from (name, value JSON text) pairs: the inverse of `raw_items`."""
    pairs = items.items() if isinstance(items, dict) else items
    return "{" + ",".join(f"{orjson.dumps(name).decode()}:{raw}" for name, raw in pairs) + "}"


def _json_value(raw: str) -> Any:
    # a json/jsonb value as pgtail's converters give it: a Fragment of its text (SQL NULL
    # and the JSON document null are both written as null: null)
    return None if raw == "null" else orjson.Fragment(raw)


def _json_array(raw: str) -> Any:
    if raw == "null":
        return None
    if not raw.startswith("["):
        return orjson.Fragment(raw)
    return [_json_value(v) if not v.startswith("[") else _json_array(v) for _, v in raw_items(raw)]


def is_json_column(column: ColumnType) -> bool:
    """json, jsonb, a domain over either, or an array of them: values kept as written."""
    column = base_type(column)
    return (column.element_oid or column.type_oid) in JSON_TYPES


def _row_parser(columns: Sequence[ColumnType]) -> Callable[[str | bytes], dict[str, Any]]:
    """Row JSON -> the JSON-ready values by column name, as pgtail's converters gave them:
    orjson.loads, except json/jsonb columns, which get a Fragment of their text."""
    raw = {
        c.name: (_json_array if c.element_oid else _json_value)
        for c in columns
        if is_json_column(c)
    }
    loads = orjson.loads
    if not raw:
        return loads

    def slow(text: str) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, value in raw_items(text):
            assert name is not None
            as_json = raw.get(name)
            values[name] = loads(value) if as_json is None else as_json(value)
        return values

    if len(raw) == 1:
        [(only, as_json)] = raw.items()
        key = orjson.dumps(only).decode() + ":"
        dumps = orjson.dumps

        def one_json(text: str | bytes) -> dict[str, Any]:
            # One json column (the usual case): every other member orjson wrote, so its
            # text is dumps of what loads gave; the json value's text lies between them.
            if isinstance(text, bytes):
                text = text.decode()
            try:
                values: dict[str, Any] = loads(text)
            except orjson.JSONDecodeError:
                return slow(text)
            if not isinstance(values, dict):
                return slow(text)
            if only not in values:
                return values
            names = list(values)
            at = names.index(only)
            head = dumps({n: values[n] for n in names[:at]}).decode()[:-1]
            tail = dumps({n: values[n] for n in names[at + 1 :]}).decode()[1:]
            start = len(head) + (1 if at else 0)  # past "{" or the comma after the head
            end = len(text) - len(tail) - (1 if tail != "}" else 0)
            if (
                text.startswith(head)
                and (not at or text[len(head)] == ",")
                and text.startswith(key, start)
                and text.endswith(tail)
                and (tail == "}" or text[end] == ",")
                and start + len(key) <= end
            ):
                values[only] = as_json(text[start + len(key) : end])
                return values
            return with_json(text)

    def with_json(text: str | bytes) -> dict[str, Any]:
        if isinstance(text, bytes):
            text = text.decode()
        # orjson parses the row; the text of the json values is found by walking it
        try:
            values: dict[str, Any] = loads(text)
            raws = _walk(text, values)
        except (orjson.JSONDecodeError, AttributeError):
            raws = None
        if raws is None:
            return slow(text)
        for name, as_json in raw.items():
            if name in raws:
                values[name] = as_json(raws[name])
        return values

    return one_json if len(raw) == 1 else with_json


def row_reader(columns: Sequence[ColumnType]) -> Callable[[str | bytes | None], list[Any]]:
    """A function from a row stored as JSON (``pgtail.values.dumps`` of the row) to the
    Spark values of ``columns``, in order, by the converters of `spark_field`; a column
    the row lacks (or no row: None) is null."""
    parse = _row_parser(columns)
    pairs = [(c.name, spark_field(c)[1]) for c in columns]
    nulls = [None] * len(columns)

    def read(text: str | bytes | None) -> list[Any]:
        if text is None:
            return list(nulls)
        get = parse(text).get
        return [convert(get(name)) for name, convert in pairs]

    return read


def columns_reader(
    columns: Sequence[ColumnType],
) -> Callable[[Sequence[str | bytes | None]], list[list[Any]]]:
    """`row_reader` for many rows at once, column by column: the values of each column."""
    parse = _row_parser(columns)
    pairs = [(c.name, spark_field(c)[1]) for c in columns]

    def read(texts: Sequence[str | bytes | None]) -> list[list[Any]]:
        empty: dict[str, Any] = {}
        rows = [empty if text is None else parse(text) for text in texts]
        result = []
        for name, convert in pairs:
            if convert is same:  # ints, booleans: as JSON gave them
                result.append([row.get(name) for row in rows])
            else:
                result.append([convert(row.get(name)) for row in rows])
        return result

    return read
