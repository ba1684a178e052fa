"""PostgreSQL column types -> Spark types, for the typed per-table read.

The rule (`spark_field`):

- smallint, integer, bigint -> short, int, long; real, double precision -> float, double
- numeric(p, s) with p <= 38 -> decimal(p, s); numeric with a larger or no precision ->
  string (Spark's decimals stop at 38 digits; the text keeps every digit); NaN and the
  infinities of a decimal column -> null
- boolean -> boolean; text, varchar, char, name -> string
- timestamp with time zone -> timestamp; timestamp -> timestamp_ntz; date -> date
  (infinity and dates Python cannot hold -> null)
- bytea -> binary; json, jsonb, uuid -> string (the server's text)
- a one-dimensional array of one of these -> array of it
- a domain -> its base type's rule (through domains over domains)
- anything else (intervals, ranges, geometric, network, enums, ...) -> string, the text
  pgtail shows in JSON output.

Each field comes with a function from the JSON-ready value pgtail's converters give
(`pgtail.values`) to the Python value Spark stores. `row_reader` applies the same
functions to a row stored as JSON (the change log's ``before``/``after``), and
`field_metadata` / `column_of` record a column's PostgreSQL type in its Spark field so a
typed Parquet file says which rule made it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    TimestampNTZType,
    TimestampType,
)

from pgtail.catalog.spark import ColumnType

Convert = Callable[[Any], Any]

NUMERIC = 1700
MAX_DECIMAL_PRECISION = 38


def _same(value: Any) -> Any:
    return value


def _text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()  # a Fragment (json), a list, a number


def _float(value: Any) -> Any:
    return None if value is None else float(value)


def _decimal(value: Any) -> Any:
    if value is None:
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _timestamp(value: Any) -> Any:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:  # infinity, BC, beyond year 9999
        return None


def _date(value: Any) -> Any:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        return None


def _bytes(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str) and value.startswith("\\x"):
        return bytes.fromhex(value[2:])
    return value.encode() if isinstance(value, str) else bytes(value)


_SCALARS: dict[int, tuple[DataType, Convert]] = {
    21: (ShortType(), _same),
    23: (IntegerType(), _same),
    20: (LongType(), _same),
    700: (FloatType(), _float),
    701: (DoubleType(), _float),
    16: (BooleanType(), _same),
    25: (StringType(), _text),
    1043: (StringType(), _text),
    1042: (StringType(), _text),
    19: (StringType(), _text),
    1184: (TimestampType(), _timestamp),
    1114: (TimestampNTZType(), _timestamp),
    1082: (DateType(), _date),
    17: (BinaryType(), _bytes),
    114: (StringType(), _text),
    3802: (StringType(), _text),
    2950: (StringType(), _text),
}


def _scalar(type_oid: int, typmod: int) -> tuple[DataType, Convert]:
    if type_oid == NUMERIC:
        if typmod >= 4:  # VARHDRSZ + (precision << 16 | scale)
            precision, scale = ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF
            if 0 < precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision:
                return DecimalType(precision, scale), _decimal
        return StringType(), _text
    return _SCALARS.get(type_oid, (StringType(), _text))


def _base(column: ColumnType) -> ColumnType:
    """A domain column as a column of its base type (other columns as they are)."""
    if not column.base_oid:
        return column
    return replace(
        column,
        type_oid=column.base_oid,
        typmod=column.base_typmod,
        element_oid=column.base_element_oid,
        base_oid=0,
    )


def spark_field(column: ColumnType) -> tuple[StructField, Convert]:
    """The Spark field of a column and the converter of its values (see the module doc)."""
    column = _base(column)  # a domain: its base type's rule
    if column.element_oid and column.dimensions <= 1:
        element, convert = _scalar(column.element_oid, column.typmod)

        def array(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, list) or any(isinstance(v, list) for v in value):
                raise ValueError(f"column {column.name!r}: not a one-dimensional array")
            return [convert(v) for v in value]

        return StructField(column.name, ArrayType(element, True), True), array
    if column.element_oid:
        return StructField(column.name, StringType(), True), _text
    data_type, convert = _scalar(column.type_oid, column.typmod)
    return StructField(column.name, data_type, True), convert


# --- rows stored as JSON ------------------------------------------------------------------

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
    column = _base(column)
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
            if convert is _same:  # ints, booleans: as JSON gave them
                result.append([row.get(name) for row in rows])
            else:
                result.append([convert(row.get(name)) for row in rows])
        return result

    return read


# --- a column's PostgreSQL type kept in its Spark field -----------------------------------

_METADATA_KEY = "pgtail.pg_type"


def field_metadata(column: ColumnType) -> dict[str, Any]:
    """Spark field metadata recording the column's PostgreSQL type (Parquet keeps it)."""
    return {
        _METADATA_KEY: {
            "type_oid": column.type_oid,
            "type_name": column.type_name,
            "typmod": column.typmod,
            "element_oid": column.element_oid,
            "dimensions": column.dimensions,
            "base_oid": column.base_oid,
            "base_typmod": column.base_typmod,
            "base_element_oid": column.base_element_oid,
        }
    }


def column_of(field: StructField) -> ColumnType | None:
    """The column a field made with `field_metadata` describes, or None."""
    recorded = (field.metadata or {}).get(_METADATA_KEY)
    if not isinstance(recorded, dict):
        return None
    return ColumnType(
        name=field.name,
        type_oid=int(recorded["type_oid"]),
        type_name=str(recorded["type_name"]),
        typmod=int(recorded["typmod"]),
        element_oid=int(recorded["element_oid"]),
        dimensions=int(recorded["dimensions"]),
        base_oid=int(recorded.get("base_oid", 0)),
        base_typmod=int(recorded.get("base_typmod", -1)),
        base_element_oid=int(recorded.get("base_element_oid", 0)),
    )


def recorded_in(fields: Sequence[StructField]) -> tuple[ColumnType, ...]:
    """The columns the fields made with `field_metadata` describe, in order (a change
    log's metadata fields describe none)."""
    found = (column_of(f) for f in fields)
    return tuple(c for c in found if c is not None)


# --- many rows at once, vectorised --------------------------------------------------------

BYTEA = 17
DATE = 1082
JSONB = 3802


def _parse_type(column: ColumnType, target: Any) -> Any:
    """The Arrow type Arrow's JSON reader parses the column's members as (then cast to
    ``target``), or None for a column only the converters read: json/jsonb (their text is
    kept as written), bytea (hex) and arrays of more than one dimension."""
    import pyarrow as pa

    column = _base(column)
    oid = column.element_oid or column.type_oid
    if oid in JSON_TYPES or oid == BYTEA or (column.element_oid and column.dimensions > 1):
        return None
    if oid == DATE:  # the reader parses no dates from strings; a cast does
        return pa.list_(pa.string()) if column.element_oid else pa.string()
    return target


def _follow(column: ColumnType, following: str | None) -> str | None:
    """``,"<following>":`` where a jsonb ``column``'s value ends (`json_member_reader`),
    or None: not jsonb, nothing following, or a name that could continue jsonb text."""
    if following is None or _base(column).type_oid != JSONB:
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

    if _base(column).type_oid != JSONB:
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
        if len(json_columns) == 1 and not _base(columns[i]).element_oid
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
