"""Range and multirange types (int4, int8, num, date, ts, tstz), from both wire formats.

A range is the str PostgreSQL prints ("[1,10)", "empty"), but with each bound written as
to_text of its JSON-ready value, so both wire formats give the same text. Ends in the
table of range types; `range_types` builds their entries from their element types'.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping
from typing import Any

from pgtail.values.base import Converter, StrConverter, TypeEntry, type_entry
from pgtail.values.literals import to_text
from pgtail.values.oids import DATE, INT4, INT8, NUMERIC, TIMESTAMP, TIMESTAMPTZ

_I32 = struct.Struct(">i")

_RANGE_EMPTY = 0x01
_RANGE_LB_INC = 0x02
_RANGE_UB_INC = 0x04
_RANGE_LB_INF = 0x08
_RANGE_UB_INF = 0x10
_RANGE_QUOTE = re.compile(r'[\s"\\(),\[\]{}]')


def _range_bound_text(value: Any) -> str:
    text = to_text(value)
    if text == "" or _RANGE_QUOTE.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _range_format(lower_inc: bool, lower: Any, upper: Any, upper_inc: bool) -> str:
    """Bounds of None are infinite (open)."""
    return (
        ("[" if lower_inc else "(")
        + ("" if lower is None else _range_bound_text(lower))
        + ","
        + ("" if upper is None else _range_bound_text(upper))
        + ("]" if upper_inc else ")")
    )


def _range_bound_parse(text: str, pos: int, stop: str) -> tuple[str | None, int]:
    """One bound of range_out's text from `pos` up to an unquoted char of `stop`."""
    out: list[str] = []
    quoted = False
    in_quotes = False
    while True:
        char = text[pos]
        if in_quotes:
            if char == '"':
                if text[pos + 1 : pos + 2] == '"':
                    out.append('"')
                    pos += 1
                else:
                    in_quotes = False
            elif char == "\\":
                pos += 1
                out.append(text[pos])
            else:
                out.append(char)
        elif char in stop:
            break
        elif char == '"':
            in_quotes = quoted = True
        elif char == "\\":
            pos += 1
            out.append(text[pos])
        else:
            out.append(char)
        pos += 1
    if not out and not quoted:
        return None, pos
    return "".join(out), pos


def _range_parse(text: str, pos: int, element: StrConverter) -> tuple[str, int]:
    """Parse one range at `pos`; returns (representation, position after it)."""
    if text.startswith("empty", pos):
        return "empty", pos + 5
    lower_inc = text[pos] == "["
    lower, pos = _range_bound_parse(text, pos + 1, ",")
    upper, pos = _range_bound_parse(text, pos + 1, ")]")
    upper_inc = text[pos] == "]"
    return (
        _range_format(
            lower_inc,
            None if lower is None else element(lower),
            None if upper is None else element(upper),
            upper_inc,
        ),
        pos + 1,
    )


def _make_range(element_type: TypeEntry) -> tuple[StrConverter, Converter]:
    element_str, element_binary = element_type.text_str, element_type.binary

    def from_str(text: str) -> str:
        result, end = _range_parse(text, 0, element_str)
        if end != len(text):
            raise ValueError("range trailing text")
        return result

    def from_binary(value: bytes) -> str:
        result, end = _range_binary(value, 0, len(value), element_binary)
        if end != len(value):
            raise ValueError("range trailing bytes")
        return result

    return from_str, from_binary


def _range_binary(value: bytes, pos: int, end: int, element: Converter) -> tuple[str, int]:
    flags = value[pos]
    pos += 1
    if flags & _RANGE_EMPTY:
        return "empty", pos
    bounds: list[Any] = []
    for infinite in (flags & _RANGE_LB_INF, flags & _RANGE_UB_INF):
        if infinite:
            bounds.append(None)
            continue
        (length,) = _I32.unpack_from(value, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise ValueError("range bound past the end")
        bounds.append(element(value[pos : pos + length]))
        pos += length
    return _range_format(
        bool(flags & _RANGE_LB_INC), bounds[0], bounds[1], bool(flags & _RANGE_UB_INC)
    ), pos


def _make_multirange(element_type: TypeEntry) -> tuple[StrConverter, Converter]:
    element_str, element_binary = element_type.text_str, element_type.binary

    def from_str(text: str) -> str:
        if text[0] != "{" or text[-1] != "}":
            raise ValueError("not a multirange")
        parts: list[str] = []
        pos = 1
        while text[pos] != "}":
            part, pos = _range_parse(text, pos, element_str)
            parts.append(part)
            if text[pos] == ",":
                pos += 1
        if pos != len(text) - 1:
            raise ValueError("multirange trailing text")
        return "{" + ",".join(parts) + "}"

    def from_binary(value: bytes) -> str:
        (count,) = _I32.unpack_from(value)
        pos = 4
        parts: list[str] = []
        for _ in range(count):
            (length,) = _I32.unpack_from(value, pos)
            pos += 4
            end = pos + length
            if length < 0 or end > len(value):
                raise ValueError("multirange range past the end")
            part, after = _range_binary(value, pos, end, element_binary)
            if after != end:
                raise ValueError("multirange range length")
            parts.append(part)
            pos = end
        if pos != len(value):
            raise ValueError("multirange trailing bytes")
        return "{" + ",".join(parts) + "}"

    return from_str, from_binary


# --- registration ------------------------------------------------------------------------

# (range oid, range array oid, multirange oid, multirange array oid, name stem, element)
_RANGES = (
    (3904, 3905, 4451, 6150, "int4", INT4),
    (3926, 3927, 4536, 6157, "int8", INT8),
    (3906, 3907, 4532, 6151, "num", NUMERIC),
    (3912, 3913, 4535, 6155, "date", DATE),
    (3908, 3909, 4533, 6152, "ts", TIMESTAMP),
    (3910, 3911, 4534, 6153, "tstz", TIMESTAMPTZ),
)

INT4RANGE, INT8RANGE, NUMRANGE, DATERANGE, TSRANGE, TSTZRANGE = (r[0] for r in _RANGES)
(
    INT4MULTIRANGE,
    INT8MULTIRANGE,
    NUMMULTIRANGE,
    DATEMULTIRANGE,
    TSMULTIRANGE,
    TSTZMULTIRANGE,
) = (r[2] for r in _RANGES)


def range_types(elements: Mapping[int, TypeEntry]) -> dict[int, TypeEntry]:
    """The entries of the range and multirange types, given their element types' entries."""
    types: dict[int, TypeEntry] = {}
    for range_oid, range_array, multi_oid, multi_array, stem, element_oid in _RANGES:
        element = elements[element_oid]
        types[range_oid] = type_entry(f"{stem}range", range_array, *_make_range(element))
        types[multi_oid] = type_entry(f"{stem}multirange", multi_array, *_make_multirange(element))
    return types
