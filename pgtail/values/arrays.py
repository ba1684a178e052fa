"""Arrays of any element type, from both wire formats: nested lists, None for NULL.

Text arrays are array_out's output parsed with an element's text converter (strings, the
common case, take the fastest paths: a split, csv, or slicing around quotes); binary
arrays name their element type, whose binary converter `register` gave this module from
the registry's table (the registry imports this module, never the reverse).
"""

from __future__ import annotations

import csv
import re
import struct
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pgtail.values.base import (
    Converter,
    StrConverter,
    TypeEntry,
    decode_utf8,
    hex_text,
    identity_str,
)

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")

# --- text: array_out's output ------------------------------------------------------------

_ARRAY_TOKEN = re.compile(r'[{}]|"(?:[^"\\]|\\.)*"|[^,{}"]+', re.S)
_UNESCAPE = re.compile(r"\\(.)", re.S)


# One element of a one-dimensional array: "quoted" (group 1) or plain (group 2).
_ARRAY_ROW_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"|([^,"]+)', re.S)
_ARRAY_ROW_PLAIN_ITEM = re.compile(r'"([^"]*)"|([^,"]+)')  # no backslash: no escapes


def _parse_row(inner: str, element: StrConverter) -> list[Any]:
    """A one-dimensional array's elements, some of them quoted."""
    if "\\" not in inner:
        if element is identity_str:  # text[] and friends: skip the calls
            return [
                quoted if not plain else None if plain == "NULL" else plain
                for quoted, plain in _ARRAY_ROW_PLAIN_ITEM.findall(inner)
            ]
        return [
            element(quoted) if not plain else None if plain == "NULL" else element(plain)
            for quoted, plain in _ARRAY_ROW_PLAIN_ITEM.findall(inner)
        ]
    items: list[Any] = []
    append = items.append
    for quoted, plain in _ARRAY_ROW_ITEM.findall(inner):
        if plain:
            append(None if plain == "NULL" else element(plain))
        elif "\\" in quoted:
            append(element(_UNESCAPE.sub(r"\1", quoted)))
        else:
            append(element(quoted))
    return items


def _parse_array(text: str, element: StrConverter) -> list[Any]:
    """Parse array_out's output (canonical quoting) into nested lists."""
    if text[:1] == "[":  # "[0:1]={...}": explicit lower bounds, dropped
        text = text[text.index("=") + 1 :]
    if text == "{}":
        return []
    inner = text[1:-1]
    if inner[:1] != "{":  # one dimension
        if '"' not in inner:
            # Nothing quoted: no escapes or delimiters inside elements.
            if element is identity_str:
                return [None if item == "NULL" else item for item in inner.split(",")]
            return [None if item == "NULL" else element(item) for item in inner.split(",")]
        return _parse_row(inner, element)
    root: list[Any] | None = None
    current: list[Any] = []
    stack: list[list[Any]] = []
    for token in _ARRAY_TOKEN.findall(text):
        if token == "{":
            new: list[Any] = []
            if root is None:
                root = new
            else:
                current.append(new)
                stack.append(current)
            current = new
        elif token == "}":
            if stack:
                current = stack.pop()
        elif token[0] == '"':
            item = token[1:-1]
            if "\\" in item:
                item = _UNESCAPE.sub(r"\1", item)
            current.append(element(item))
        else:
            current.append(None if token == "NULL" else element(token))
    if root is None:
        raise ValueError("not an array")
    return root


_csv_reader = csv.reader


def _plain_items(segment: str) -> list[str | None]:
    if "NULL" in segment:
        return [None if item == "NULL" else item for item in segment.split(",")]
    return segment.split(",")  # type: ignore[return-value]  # list is invariant


def _flat_strings(text: str) -> list[str | None] | None:
    """A one-dimensional array of strings without backslashes, or None for any other.

    Without a backslash no element holds a '"' (array_out escapes it), so splitting on '"'
    leaves the quoted elements at odd positions and comma-separated plain ones between.
    """
    if text[:1] != "{" or text[-1:] != "}" or text[1:2] == "{" or "\\" in text:
        return None
    inner = text[1:-1]
    if '"' not in inner:
        return _plain_items(inner) if inner else []
    if ",," in inner or inner[0] == "," or inner[-1] == ",":
        return None  # an empty unquoted element (never printed) or a comma inside quotes
    pieces = inner.split('"')
    count = len(pieces)
    if not count & 1:
        return None
    items: list[str | None] = []
    head = pieces[0]
    if head:  # plain elements, then the comma before the first quote
        if head[-1] != ",":
            return None
        items = _plain_items(head[:-1])
    for i in range(1, count, 2):
        items.append(pieces[i])
        between = pieces[i + 1]
        if i + 2 < count:  # ',' or ',plain,...,' up to the next quoted element
            if between == ",":
                continue
            if len(between) < 3 or between[0] != "," or between[-1] != ",":
                return None
            items += _plain_items(between[1:-1])
        elif between:  # after the last quoted element: ',plain,...'
            if len(between) < 2 or between[0] != ",":
                return None
            items += _plain_items(between[1:])
    return items


# the text converters of arrays whose elements are strings (`make_text_array`): a whole
# column of them may go to JSON at once (`pgtail.values.tojson.text_json_column`)
STRING_ARRAYS: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


def make_text_array(element: StrConverter) -> Converter:
    def convert(value: bytes) -> list[Any] | str:
        text = value.decode("utf-8", "replace")
        try:
            return _parse_array(text, element)
        except (ValueError, IndexError, KeyError, OverflowError, struct.error):
            return text

    if element is not identity_str:
        return convert

    def convert_strings(value: bytes) -> list[Any] | str:
        text = value.decode("utf-8", "replace")
        if text[:1] == "{" and text[-1:] == "}" and text[1:2] != "{" and "\\" not in text:
            inner = text[1:-1]
            if '"' not in inner:
                return _plain_items(inner) if inner else []
            # Without a backslash no quoted element holds a '"', so this is CSV; without
            # "NULL" anywhere no element is NULL (csv would not tell NULL from "NULL").
            if "NULL" not in inner and ",," not in inner and inner[0] != "," != inner[-1]:
                try:
                    return next(_csv_reader((inner,)))
                except csv.Error:  # a field past csv's size limit
                    pass
            items = _flat_strings(text)
            if items is not None:
                return items
        try:
            return _parse_array(text, identity_str)
        except (ValueError, IndexError, KeyError, OverflowError, struct.error):
            return text

    STRING_ARRAYS.add(convert_strings)
    return convert_strings


# --- binary: array_send's output ---------------------------------------------------------

_ARRAY_HEAD = struct.Struct(">iiI")  # ndim, has nulls, element type
_ARRAY_BOUNDS = [struct.Struct(f">{2 * n}i") for n in range(7)]  # up to MAXDIM = 6


_ARRAY_HEAD_1D = struct.Struct(">iiIii")  # ndim, has nulls, element type, size, lower bound
_ARRAY_ERRORS = (ValueError, IndexError, KeyError, OverflowError, struct.error)
_U32_FROM = _U32.unpack_from


def _array_binary(value: bytes, element: Converter | None = None) -> list[Any] | str:
    """A binary array; ``element`` converts its elements (default: by the element type
    the array names, for a built-in one)."""
    try:
        ndim, has_nulls, element_oid, size, _lower = _ARRAY_HEAD_1D.unpack_from(value)
    except struct.error:
        ndim = 0  # shorter than one dimension's header: empty or malformed
    if ndim != 1:
        try:
            return _array_items(value, element)
        except _ARRAY_ERRORS:
            return hex_text(value)
    # One dimension, the common case: no dimension bookkeeping.
    end = len(value)
    if size * 4 > end - 20:
        return hex_text(value)
    if element is None:
        element = _ELEMENT_BINARY.get(element_oid) or _binary_converter(element_oid)
    try:
        if element is decode_utf8 and not has_nulls and value.isascii():
            # Strings, no NULL, all ASCII (so every length is >= 0, and str offsets are byte
            # offsets): decode once and slice the elements.
            # Small arrays, the usual case, are unrolled: a loop costs more than the slicing.
            text = value.decode("ascii")
            unpack = _U32_FROM
            if size == 1:
                end1 = 24 + unpack(value, 20)[0]
                return [text[24:end1]] if end1 == end else hex_text(value)
            if size == 2:
                end1 = 24 + unpack(value, 20)[0]
                end2 = end1 + 4 + unpack(value, end1)[0]
                return [text[24:end1], text[end1 + 4 : end2]] if end2 == end else hex_text(value)
            if size == 3:
                end1 = 24 + unpack(value, 20)[0]
                end2 = end1 + 4 + unpack(value, end1)[0]
                end3 = end2 + 4 + unpack(value, end2)[0]
                if end3 != end:
                    return hex_text(value)
                return [text[24:end1], text[end1 + 4 : end2], text[end2 + 4 : end3]]
            if size == 4:
                end1 = 24 + unpack(value, 20)[0]
                end2 = end1 + 4 + unpack(value, end1)[0]
                end3 = end2 + 4 + unpack(value, end2)[0]
                end4 = end3 + 4 + unpack(value, end3)[0]
                if end4 != end:
                    return hex_text(value)
                return [
                    text[24:end1],
                    text[end1 + 4 : end2],
                    text[end2 + 4 : end3],
                    text[end3 + 4 : end4],
                ]
            strings: list[Any] = []
            append = strings.append
            pos = 20
            for _ in range(size):
                start = pos + 4
                pos = start + unpack(value, pos)[0]
                append(text[start:pos])
            return strings if pos == end else hex_text(value)
        items: list[Any] = []
        append = items.append
        pos = 20
        unpack = _I32.unpack_from
        if element is decode_utf8:
            for _ in range(size):
                (length,) = unpack(value, pos)
                pos += 4
                if length < 0:
                    append(None)
                else:
                    append(value[pos : pos + length].decode("utf-8", "replace"))
                    pos += length
        else:
            for _ in range(size):
                (length,) = unpack(value, pos)
                pos += 4
                if length < 0:
                    append(None)
                else:
                    append(element(value[pos : pos + length]))
                    pos += length
    except _ARRAY_ERRORS:
        return hex_text(value)
    # A length past the end shows here: slices stop at the end, positions do not.
    return items if pos == end else hex_text(value)


def array_binary_of(element_oids: Sequence[int], element: Converter | None = None) -> Converter:
    """The binary converter of a column of arrays whose elements are of one of
    ``element_oids`` (`_array_binary`; a domain's array names the domain or its base
    type): an array that names another element type (array_send always writes one)
    raises ValueError, the column's malformed value, rather than passing for the column's."""
    accepted = frozenset(element_oids)

    def binary(value: bytes) -> list[Any] | str:
        if len(value) >= 12 and _U32_FROM(value, 8)[0] not in accepted:
            raise ValueError(
                f"an array of type {_U32_FROM(value, 8)[0]} in a column of arrays of"
                f" type {element_oids[0]}"
            )
        return _array_binary(value, element)

    return binary


def _array_items(value: bytes, element: Converter | None = None) -> list[Any]:
    ndim, _flags, element_oid = _ARRAY_HEAD.unpack_from(value)
    if ndim <= 0:
        if ndim == 0:
            return []
        raise ValueError("array dimensions")
    dims = _ARRAY_BOUNDS[ndim].unpack_from(value, 12)[0::2]  # IndexError past MAXDIM
    if element is None:
        element = _binary_converter(element_oid)
    pos = 12 + 8 * ndim
    total = 1
    for size in dims:
        total *= size
    if total * 4 > len(value) - pos:
        raise ValueError("array shorter than its dimensions")
    unpack = _I32.unpack_from
    size_of_value = len(value)
    items: list[Any] = []
    append = items.append
    if element is decode_utf8:
        for _ in range(total):
            (length,) = unpack(value, pos)
            pos += 4
            if length < 0:
                append(None)
            else:
                end = pos + length
                append(value[pos:end].decode("utf-8", "replace"))
                pos = end
    else:
        for _ in range(total):
            (length,) = unpack(value, pos)
            pos += 4
            if length < 0:
                append(None)
            else:
                end = pos + length
                append(element(value[pos:end]))
                pos = end
    # A length past the end shows here: slices stop at the end, positions do not.
    if pos != size_of_value:
        raise ValueError("array element lengths do not add up")
    if ndim > 1:
        for size in reversed(dims[1:]):
            items = [items[i : i + size] for i in range(0, len(items), size)]
    return items


# --- registration ------------------------------------------------------------------------
# A binary array names its element type: the built-in types' binary converters and array
# OIDs, filled once by `register` with the registry's table.

# Element OID -> its binary converter (for arrays; arrays of arrays are not listed).
_ELEMENT_BINARY: dict[int, Converter] = {}
_ARRAY_OIDS: set[int] = set()


def register(types: Mapping[int, TypeEntry]) -> None:
    """Make the built-in types of ``types`` known as array elements (the registry's table)."""
    _ELEMENT_BINARY.update({oid: t.binary for oid, t in types.items()})
    _ARRAY_OIDS.update(t.array_oid for t in types.values() if t.array_oid)


def _binary_converter(type_oid: int) -> Converter:
    known = _ELEMENT_BINARY.get(type_oid)
    if known is not None:
        return known
    if type_oid in _ARRAY_OIDS:
        return _array_binary
    return hex_text
