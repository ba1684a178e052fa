"""Many rows stored as JSON at once, vectorised: an Arrow array of rows -> an Arrow array
per column (`arrow_columns_reader`), with the values `pgtail.spark.json_rows` gives one
row at a time; what Arrow's JSON reader cannot read as the converters would is read by
them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from pgtail.catalog.spark import ColumnType
from pgtail.spark.json_rows import JSON_TYPES, columns_reader, is_json_column, row_reader
from pgtail.spark.types import base_type

_DECODER = json.JSONDecoder()

BYTEA = 17
DATE = 1082
JSONB = 3802


def _parse_type(column: ColumnType, target: Any) -> Any:
    """The Arrow type Arrow's JSON reader parses the column's members as (then cast to
    ``target``), or None for a column only the converters read: json/jsonb (their text is
    kept as written), bytea (hex) and arrays of more than one dimension."""
    import pyarrow as pa

    column = base_type(column)
    oid = column.element_oid or column.type_oid
    if oid in JSON_TYPES or oid == BYTEA or (column.element_oid and column.dimensions > 1):
        return None
    if oid == DATE:  # the reader parses no dates from strings; a cast does
        return pa.list_(pa.string()) if column.element_oid else pa.string()
    return target


def _follow(column: ColumnType, following: str | None) -> str | None:
    """``,"<following>":`` where a jsonb ``column``'s value ends (`json_member_reader`),
    or None: not jsonb, nothing following, or a name that could continue jsonb text."""
    if following is None or base_type(column).type_oid != JSONB:
        return None
    follow = "," + orjson.dumps(following).decode() + ":"
    return None if follow[2:3] in (":", ",", "]", "}", " ", "\\") else follow


def json_member_reader(
    column: ColumnType, following: str | None = None
) -> Callable[[Sequence[str | None]], list[Any]]:
    """The values of a json or jsonb ``column`` (not an array) of rows stored as JSON by
    pgtail, when it is the table's only json column: the text of its member as written
    (null: None), found without parsing the rest of the row.

    Why the first ``"<name>":`` after a ``{`` or ``,`` is the member's key: before it
    come only other columns' keys and values that are not json, and in those every ``"``
    that is part of a name or string is escaped; after its value comes ``,`` or ``}``.
    A row where that does not hold (not written compactly, the column absent) is read by
    `row_reader`, so the values are the same either way.

    Where the value ends: found by parsing it, or, for a jsonb column followed by
    ``following`` (the name of the next column, in the row when present), at the first
    ``,"<following>":`` after it, without parsing. That sequence never occurs inside
    jsonb's text: PostgreSQL escapes every ``"`` inside a string, so a ``"`` is followed
    by ``:`` only as a key's closing quote, and jsonb follows a closing quote with ``,``,
    ``:``, ``]``, ``}`` or a space, never with the first character of the name (a name
    starting with one of those is parsed). The first ``,"`` alone would not do:
    ``{"d": ","}`` holds one. A value found so that holds ``,"`` is parsed instead: it
    may have run into other members (a column dropped since the row was written, then
    the next column's key comes later), while jsonb's text holds one only where a
    string ends in a comma (PostgreSQL writes ``, `` between items).
    """
    key = orjson.dumps(column.name).decode() + ":"
    decode = _DECODER.raw_decode
    general = row_reader([column])
    follow = _follow(column, following)

    def end_of(text: str, start: int) -> int:
        """Where the value starting at ``start`` ends, or -1."""
        if follow is not None:
            end = text.find(follow, start)
            # ',"' there may be other members (a column dropped since the row was
            # written) or a string ending in a comma: the value is parsed
            if end > start and text.find(',"', start, end) < 0:
                return end
        try:
            return int(decode(text, start)[1])
        except (ValueError, RecursionError):
            return -1

    def read(texts: Sequence[str | bytes | None]) -> list[Any]:
        values: list[Any] = []
        append = values.append
        for text in texts:
            if text is None:
                append(None)
                continue
            if isinstance(text, bytes):
                text = text.decode()
            at = text.find(key)
            if at > 0 and text[at - 1] in "{,":
                start = at + len(key)
                end = end_of(text, start)
                if end > 0 and text[end : end + 1] in (",", "}"):
                    raw = text[start:end]
                    append(None if raw == "null" else raw)
                    continue
            append(general(text)[0])
        return values

    return read


def json_member_arrow(column: ColumnType, following: str | None = None) -> Callable[[Any], Any]:
    """`json_member_reader` for an Arrow array of rows (null: no row), giving an Arrow
    string array; for a jsonb column, found by Arrow's kernels, with no Python object
    per row (json columns: by `json_member_reader`).

    A jsonb value starts after the first ``,"<name>":`` of the row (or a leading
    ``{"<name>":``: see `json_member_reader` for why nothing before it looks so) and ends
    at the first ``,"<following>":`` after it, else at the row's closing ``}``. It is
    taken only when its text holds no ``,"``: jsonb's text holds one only where a string
    ends in a comma (PostgreSQL writes ``, `` between items and escapes every ``"`` in a
    string), and a value found past other members (a column dropped since the row was
    written) always does. Such rows, and rows where the column is not found, are read
    by `json_member_reader`, so the values are the same either way.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    by_rows = json_member_reader(column, following)
    string = pa.string()

    def one_by_one(texts: Any) -> Any:
        return pa.array(by_rows(texts.to_pylist()), string)

    if base_type(column).type_oid != JSONB:
        return one_by_one
    key = orjson.dumps(column.name).decode() + ":"
    key_bytes = len(key.encode())
    follow = _follow(column, following)
    none = pa.scalar(None, string)

    def read(texts: Any) -> Any:
        if texts.type != string:
            return one_by_one(texts)
        count = len(texts)
        at = pc.if_else(pc.starts_with(texts, "{" + key), 0, pc.find_substring(texts, "," + key))
        start = pc.add(at, 1 + key_bytes)
        last = pc.subtract(pc.binary_length(texts), 1)
        if follow is None:
            end = last
        else:
            found = pc.find_substring(texts, follow)
            end = pc.if_else(pc.greater_equal(found, 0), found, last)
        size = pc.subtract(end, start)
        ok = pc.and_(pc.greater_equal(at, 0), pc.greater(size, 0))
        ok = pc.and_(ok, pc.or_(pc.less(end, last), pc.ends_with(texts, "}")))
        ok = pc.fill_null(ok, False)
        offsets = pa.Array.from_buffers(
            pa.int32(), count, [None, texts.buffers()[1]], offset=texts.offset
        )
        data = texts.buffers()[2]
        if data is None:  # every row null or empty
            data = pa.py_buffer(b"")
        size = pc.if_else(ok, size, 0)
        views = pa.ListViewArray.from_arrays(
            pc.if_else(ok, pc.add(offsets, start), 0),
            size,
            pa.Array.from_buffers(pa.uint8(), data.size, [None, data]),
        )
        flat = pc.list_flatten(views)
        ends = pc.cumulative_sum(size)
        bounds = pa.concat_arrays([pa.array([0], pa.int32()), ends.cast(pa.int32())])
        values = pa.Array.from_buffers(
            string,
            count,
            [None, bounds.buffers()[1], flat.buffers()[1].slice(flat.offset, len(flat))],
            offset=0,
        )
        # a value with ',"' in it may have run into other members (or holds a string
        # ending in a comma): read one by one, as is a row where the column was not found
        ok = pc.and_(ok, pc.equal(pc.find_substring(values, ',"'), -1))
        found = pc.if_else(pc.and_(ok, pc.not_equal(values, "null")), values, none)
        again = pc.and_(pc.invert(ok), pc.is_valid(texts))
        if pc.any(again).as_py():
            found = pc.replace_with_mask(found, again, one_by_one(texts.filter(again)))
        return found

    return read


def arrow_columns_reader(
    columns: Sequence[ColumnType], targets: Sequence[Any]
) -> Callable[[Any], list[Any]]:
    """`columns_reader` for an Arrow array of rows stored as JSON (None: no row), giving
    an Arrow array per column of the Arrow type in ``targets`` (what Spark takes for
    `spark_field`'s type), with the same values.

    Arrow's JSON reader parses every column it can (numbers, booleans, strings, decimals,
    timestamps, dates, arrays of them) in one pass. It refuses what it would read
    differently from the converters (a string where a number is expected, "NaN" in a
    decimal, "infinity" or a BC date in a timestamp, a fraction past the scale, a nested
    array, ...); a column it refuses, and json/jsonb/bytea columns, are read by
    `columns_reader` (the table's only json column, not an array, by
    `json_member_reader`), so the values are the same either way.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    columns = tuple(columns)
    targets = tuple(targets)
    parsed = {i: _parse_type(c, t) for i, (c, t) in enumerate(zip(columns, targets, strict=True))}
    vector = [i for i, p in parsed.items() if p is not None]
    # the table's only json column (the usual table), not an array: found, not parsed
    json_columns = [i for i, c in enumerate(columns) if is_json_column(c)]
    member = {
        i: json_member_arrow(columns[i], columns[i + 1].name if i + 1 < len(columns) else None)
        for i in json_columns
        if len(json_columns) == 1 and not base_type(columns[i]).element_oid
    }
    slow_readers: dict[tuple[int, ...], Callable[[Sequence[Any]], list[list[Any]]]] = {}

    def parse(data: Any, indices: Sequence[int]) -> dict[int, Any]:
        schema = pa.schema([pa.field(columns[i].name, parsed[i]) for i in indices])
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, data.size + 1)),
            parse_options=pj.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
        found = {}
        for i in indices:
            values = table.column(columns[i].name).combine_chunks()
            found[i] = values if values.type == targets[i] else pc.cast(values, targets[i])
        return found

    def read(texts: Any) -> list[Any]:
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks()
        count = len(texts)
        found: dict[int, Any] = {}
        if vector and count:
            rows = pc.fill_null(texts, "{}")  # no row: every column null
            lines = pc.binary_join_element_wise(rows, pa.scalar("", rows.type), "\n")
            _, offsets, data = lines.buffers()
            width = pa.int64() if pa.types.is_large_string(lines.type) else pa.int32()
            offsets = pa.Array.from_buffers(width, count + 1, [None, offsets], lines.offset)
            start, end = offsets[0].as_py(), offsets[count].as_py()
            data = data.slice(start, end - start)
            try:
                found = parse(data, vector)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                for i in vector:  # which columns does it refuse?
                    with contextlib.suppress(pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        found.update(parse(data, [i]))
        rest = tuple(i for i in range(len(columns)) if i not in found and i not in member)
        rows = texts.to_pylist() if rest else []
        if rest:
            if rest not in slow_readers:
                slow_readers[rest] = columns_reader([columns[i] for i in rest])
            for i, values in zip(rest, slow_readers[rest](rows), strict=True):
                found[i] = pa.array(values, type=targets[i])
        for i, read_member in member.items():
            values = read_member(texts)
            found[i] = values if values.type == targets[i] else values.cast(targets[i])
        return [found[i] for i in range(len(columns))]

    return read
