"""JSON lines of many inserts at once, column by column (a snapshot's rows).

`rows_encoder` makes the `pgtail.changes.RowsEncoder` of a table for `row_encoders`:
given a chunk's values column by column, it writes each column's JSON with one C-level
pass where it can (``map(int, ...)``, one check of a whole column for what JSON escapes)
and lays the lines out with one ``b"".join`` of a list filled column by column by slice
assignments (`interleave`), so no Python frame and no bytes format runs per row except a
column's own converter. Its bytes are those of the per-row encoders, value by
value: a value is written as ``with_nulls`` writes it (`value_json`), or by a shortcut
that gives the same bytes. It raises on anything unusual; the caller then encodes the
chunk row by row. Plain code, the same with and without ``PGTAIL_NO_CODEGEN``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

import orjson

from pgtail.changes import RowsEncoder
from pgtail.values import JSON_ESCAPES, JsonKind, json_default, text_json_column
from pgtail.values.jsontypes import JSON_SHAPE, json_shapes, learn_json_shape

_escapes = JSON_ESCAPES.search
_dumps = functools.partial(orjson.dumps, default=json_default)
_NEWLINE = orjson.Fragment(b"\n")
_JSON_ESCAPED = bytes(range(0x20)) + b'"\\'  # the bytes JSON_ESCAPES matches
# integers as ``b"%d" % int(text)`` writes them, one a line
_CANONICAL_INTS = re.compile(rb"(?:-?[1-9][0-9]*|0)(?:\n(?:-?[1-9][0-9]*|0))*")

# A column's part of the row template and its values (bytes) for it: '"%b"' (ASCII
# text with nothing JSON escapes, written as it is), '"%b:00"' (UTC timestamps with their
# first space made a T), "%b" (each value's JSON text).
ColumnJson = tuple[bytes, Sequence[bytes]]


def escapes_nothing(text: bytes) -> bool:
    """``JSON_ESCAPES.search(text) is None``, several times faster on a whole column: one
    C pass deleting those bytes, then the lengths compared."""
    return len(text.translate(None, _JSON_ESCAPED)) == len(text)


def int64(number: int) -> int:
    """``number``, when JSON readers take it (orjson: -2**63 to 2**64 - 1, what the
    general path writes); OverflowError for any other -- no bigint holds it, and the
    general path then names the column (`pgtail.errors.DecodeError`)."""
    if -(2**63) <= number < 2**64:
        return number
    raise OverflowError(f"integer {number} does not fit 64 bits")


def one_json_each(values: Sequence[bytes]) -> None:
    """ValueError unless each of ``values`` is one JSON value (orjson's check, once per
    shape: see `pgtail.values.jsontypes.JSON_SHAPE`)."""
    shapes = json_shapes
    for value in values:
        if value.translate(JSON_SHAPE) not in shapes:
            learn_json_shape(value)


def value_json(kind: JsonKind, write: Callable[[bytes], Any], value: bytes | None) -> bytes:
    """One value's JSON text, as the generated ``with_nulls`` encoder writes it."""
    if value is None:
        return b"null"
    if kind == "int":
        if len(value) > 19:
            return b"%d" % int64(int(value))
        if not value.isdigit() or (value[0] == 48 and len(value) > 1):
            return b"%d" % int(value)
        return value  # the server's text of an integer is its JSON
    if kind == "string":
        if value.isascii() and _escapes(value) is None:
            return b'"' + value + b'"'
        result: bytes = write(value)
        return result
    if kind == "raw":
        one_json_each((value,))
        return value
    if kind == "convert":
        return _dumps(write(value))
    if kind == "utc_timestamp":
        if value[-3:] == b"+00" and value.isascii() and _escapes(value) is None:
            return b'"' + value[:-3].replace(b" ", b"T", 1) + b'+00:00"'
        return _dumps(write(value))
    result = write(value)
    return result


def _dumps_each(objects: list[Any]) -> list[bytes]:
    """``[dumps(o) for o in objects]``, from one ``dumps`` of them all: many orjson
    results alive at once cost several times more to allocate than the one result split
    afterwards. The items are kept apart by a raw newline, which orjson never writes
    (and ",\\n," is in no JSON text: a value's own JSON text could only hold a newline
    between tokens, never between two commas); any doubt and each is dumped alone."""
    count = len(objects)
    if count < 2:
        return [_dumps(o) for o in objects]
    items: list[Any] = [_NEWLINE] * (2 * count - 1)
    items[::2] = objects
    pieces = _dumps(items)[1:-1].split(b",\n,")
    if len(pieces) != count:
        return [_dumps(o) for o in objects]
    return pieces


def column_json(
    kind: JsonKind, write: Callable[[bytes], Any], column: list[bytes | None]
) -> ColumnJson:
    """One column of a chunk -> its template part and values (see `ColumnJson`)."""
    try:  # a join raises on a NULL (None), and costs less than ``None in column``
        joined = (b"\n" if kind == "int" else b"").join(column)  # type: ignore[arg-type]
    except TypeError:
        return b"%b", [value_json(kind, write, value) for value in column]
    values: list[bytes] = column  # type: ignore[assignment]  # no None in it
    if kind == "int":
        if max(map(len, values)) > 19:  # (a chunk has a row)
            for value in values:
                int64(int(value))
        if _CANONICAL_INTS.fullmatch(joined) is not None:
            return b"%b", values  # the server's text of an integer is its JSON
        return b"%b", int_texts(list(map(int, values)))
    if kind == "raw":
        one_json_each(values)
        return b"%b", values
    if kind == "call":
        return b"%b", list(map(write, values))
    if kind == "convert":
        at_once = text_json_column(write, values)
        if at_once is not None:
            return b"%b", at_once
        return b"%b", _dumps_each(list(map(write, values)))
    clean = joined.isascii() and escapes_nothing(joined)
    if kind == "string" and clean:
        return b'"%b"', values
    if kind == "utc_timestamp" and clean and all(map(bytes.endswith, values, repeat(b"+00"))):
        # '"' + v[:-3].replace(" ", "T", 1) + '+00:00"': the first space is never in "+00"
        return b'"%b:00"', list(map(bytes.replace, values, repeat(b" "), repeat(b"T"), repeat(1)))
    return b"%b", [value_json(kind, write, value) for value in values]


def int_texts(numbers: Sequence[int]) -> list[bytes]:
    """``[b"%d" % n for n in numbers]``, from one orjson ``dumps`` of them all (a number
    holds no comma); orjson takes -2**63 to 2**64 - 1 and raises on any other."""
    if not numbers:
        return []
    return orjson.dumps(list(numbers))[1:-1].split(b",")


def template_literals(template: bytes) -> list[bytes]:
    """A line template's text around its ``%b``/``%d`` conversions (``%%`` made ``%``):
    one more piece than it has conversions."""
    literals = [b""]
    for piece in _CONVERSION.split(template):
        if piece in (b"%b", b"%d"):
            literals.append(b"")
        else:
            literals[-1] += b"%" if piece == b"%%" else piece
    return literals


_CONVERSION = re.compile(rb"(%[%bd])")


def interleave(literals: Sequence[bytes], values: Sequence[Sequence[bytes]], count: int) -> bytes:
    """``count`` lines, each ``literals[0] + values[0][i] + literals[1] + ...
    + values[-1][i] + literals[-1]``: one ``b"".join`` of a list laid out by slice
    assignments (C loops), no formatting of each line. ValueError when a column's length
    is not ``count``."""
    if len(literals) != len(values) + 1:
        raise ValueError(f"{len(values)} columns for {len(literals) - 1} conversions")
    if count == 0:
        return b""
    step = 2 * len(values)  # a line's values and the text after each
    items = [literals[-1] + literals[0]] * (count * step + 1)  # between two lines
    items[0] = literals[0]
    items[-1] = literals[-1]
    for j, column in enumerate(values):
        items[1 + 2 * j :: step] = column  # raises unless len(column) == count
        if j + 1 < len(values):
            items[2 + 2 * j :: step] = [literals[j + 1]] * count
    return b"".join(items)


def rows_encoder(
    kinds: Sequence[tuple[JsonKind, Callable[[bytes], Any]]],
    names: Sequence[str],
    key_positions: Sequence[int],
    template_of: Callable[[dict[str, bytes]], bytes],
) -> RowsEncoder:
    """The `RowsEncoder` of a table whose columns' JSON kinds are ``kinds`` and names
    ``names``: ``template_of`` lays out an
    insert's line (from ``"seq":%d`` on) given each column's ``"name":<part>`` piece, with
    the key's values after the seq and then every column's."""
    layouts: dict[tuple[bytes, ...], list[bytes]] = {}
    width = len(kinds)
    quoted = [(name, orjson.dumps(name).replace(b"%", b"%%") + b":") for name in names]

    def encode(first_seq: int, columns: Sequence[list[bytes | None]]) -> bytes:
        if len(columns) != width:
            raise ValueError(f"{len(columns)} columns, not {width}")
        parts = []
        values: list[Sequence[bytes]] = []
        for (kind, write), column in zip(kinds, columns, strict=True):
            part, json = column_json(kind, write, column)
            parts.append(part)
            values.append(json)
        shape = tuple(parts)
        literals = layouts.get(shape)
        if literals is None:
            template = template_of(
                {name: head + part for (name, head), part in zip(quoted, parts, strict=True)}
            )
            literals = layouts[shape] = template_literals(template)
        count = len(columns[0])
        seqs = int_texts(range(first_seq, first_seq + count))
        keys = [values[i] for i in key_positions]
        return interleave(literals, [seqs, *keys, *values], count)

    return encode
