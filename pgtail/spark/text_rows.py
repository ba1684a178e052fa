"""The typed read's rows from the server's text, with no JSON in between: an encoder for
the range read (`text_columns_encoder`, the shape of
`pgtail.render.jsonl.json_columns_encoder`) writes each change's row as one delimited
line of its text values, and `text_columns_reader` has Arrow's CSV reader build the typed
columns from those lines, in C++.

A line: ``seq`` then one field per column, separated by `SEPARATOR` (US, 0x1f), ending
in a newline. NULL is `NULL` (a NUL byte, which PostgreSQL text never holds), so an empty
string stays one. A value holding the separator, a newline, a carriage return or the
escape character (`ESCAPE`, ESC 0x1b) has each of them preceded by `ESCAPE` (Arrow's
escaping: the next character as it is).

The columns of a type in `NATIVE` are written as the server's text and parsed by Arrow
as their Spark type (integers, floats, booleans, decimals, dates, timestamps; strings as
they are); a column Arrow refuses (``infinity``, a BC date, numeric ``NaN``, ...) is
read as text and converted value by value, as `pgtail.spark.schema.TypedRowBuffer`
converts a decoded row. Every other column (arrays, bytea, intervals, domains, ...) is
written as the JSON value pgtail's JSON output holds for it and read by
`pgtail.spark.arrow_rows.arrow_columns_reader`, as before: the same values either way.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from pgtail.catalog.spark import ColumnType
from pgtail.changes import EncodedRows, InsertEncoders, Table
from pgtail.render.jsonl import row_encoders
from pgtail.render.jsonl_tail import TAIL_ESCAPE as ESCAPE
from pgtail.render.jsonl_tail import TAIL_NULL as NULL
from pgtail.render.jsonl_tail import TAIL_SEPARATOR as SEPARATOR
from pgtail.render.jsonl_tail import escape_field
from pgtail.spark.json_rows import JSON_TYPES
from pgtail.values.tojson import json_default

if TYPE_CHECKING:
    from pgtail.values import Converter

_SPECIAL = re.compile(rb"[\n\r\x1b]").search

# bool, name, int8, int2, int4, text, json, float4, float8, bpchar, varchar, date,
# timestamp, timestamptz, numeric, uuid, jsonb: Arrow parses their text as Spark holds them
NATIVE = frozenset({16, 19, 20, 21, 23, 25, 114, 700, 701, 1042, 1043, 1082, 1114, 1184,
                    1700, 2950, 3802})  # fmt: skip
JSON = 114
INTEGERS = (20, 21, 23)  # int8, int2, int4


def text_columns_encoder(
    table: Table, text_converters: Sequence[Converter]
) -> InsertEncoders | None:
    """Encoders of one line per change (see the module docstring): an insert's or an
    update's new row, a delete's old row (or old key, the other columns NULL)."""
    columns = table.columns
    if not columns or len(text_converters) != len(columns):
        return None
    width = len(columns)
    as_json = [(i, text_converters[i]) for i, c in enumerate(columns) if c.type_oid not in NATIVE]
    dumps = orjson.dumps

    def line(seq: int, values: list[Any]) -> bytes:
        for i, convert in as_json:
            value = values[i]
            if value is not NULL:
                values[i] = dumps(convert(value), default=json_default)
        body = SEPARATOR.join(values)
        if body.count(SEPARATOR) != width - 1 or _SPECIAL(body) is not None:
            body = SEPARATOR.join([v if v is NULL else escape_field(v) for v in values])
        return b"%d\x1f%b\n" % (seq, body)

    def plain(seq: int, *values: bytes) -> bytes:
        return line(seq, list(values))

    def with_nulls(seq: int, *values: bytes | None) -> bytes:
        return line(seq, [NULL if v is None else v for v in values])

    return InsertEncoders(
        plain,
        with_nulls,
        updates=True,
        full_delete=(plain, with_nulls),
        key_delete=with_nulls,
    )


def _stage_layout(key: bytes, old: bytes, old_kind: bytes, new: bytes) -> bytes:
    """A stage line's head (`stage_columns_encoder`): seq, then the key, old row and new
    row as `pgtail.render.jsonl.json_columns_encoder` writes them (`NULL` for none)."""

    def field(json: bytes) -> bytes:
        return NULL if json == b"null" else json

    return b"%d" + SEPARATOR + field(key) + SEPARATOR + field(old) + SEPARATOR + field(new)


def stage_columns_encoder(
    table: Table, text_converters: Sequence[Converter]
) -> InsertEncoders | None:
    """Encoders of one stage line per change, for ``pgtail spark run``'s tasks
    (`pgtail.spark.direct`): ``seq``, ``key``, ``old``, ``new`` (the JSON the change log
    keeps, as `json_columns_encoder` writes it), then the row's values as
    `text_columns_encoder`'s fields: a `NATIVE` column's server text, another's JSON
    (`pgtail.render.jsonl.row_encoders`' text tail). `stage_columns_reader` types the
    columns from the fields, with no JSON parsed (but the non-`NATIVE` values')."""
    # A json column's field is its JSON (its text as the row's JSON embeds it, line
    # breaks made spaces), read as the string it is; an integer's, its JSON (the digits
    # of its text, checked).
    text = [c.type_oid in NATIVE and c.type_oid not in (JSON, *INTEGERS) for c in table.columns]
    return row_encoders(table, text_converters, _stage_layout, "stage lines", text_tail=text)


def _read_fields(lines: bytes, names: Sequence[str], types: dict[str, Any]) -> Any:
    """The fields ``types`` names (of the Arrow type it gives each) of lines of the
    fields ``names``, by Arrow's CSV reader (a pyarrow Table)."""
    import pyarrow as pa
    from pyarrow import csv

    return csv.read_csv(
        pa.BufferReader(lines),
        read_options=csv.ReadOptions(
            column_names=list(names),
            use_threads=False,
            block_size=min(max(1 << 20, len(lines) + 1), (1 << 31) - 1),
        ),
        parse_options=csv.ParseOptions(
            delimiter=SEPARATOR.decode(),
            quote_char=False,
            double_quote=False,
            escape_char=ESCAPE.decode(),
            newlines_in_values=True,
            ignore_empty_lines=False,
        ),
        convert_options=csv.ConvertOptions(
            column_types=types,
            include_columns=list(types),
            true_values=["t"],
            false_values=["f"],
            null_values=[NULL.decode()],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )


def stage_head(runs: Sequence[EncodedRows]) -> list[Any]:
    """The seq (int32), key, old and new (strings) of runs of stage lines of one table
    (`stage_columns_encoder`), without typing the values: for rows whose table changed
    since (`pgtail.spark.direct` types those from their JSON)."""
    import pyarrow as pa

    width = len(runs[0].table.columns)
    names = ["seq", *STAGE_HEAD, *(f"c{i}" for i in range(width))]
    lines = runs[0].lines if len(runs) == 1 else b"".join(run.lines for run in runs)
    types = {"seq": pa.int32(), **dict.fromkeys(STAGE_HEAD, pa.string())}
    table = _read_fields(lines, names, types)
    count = sum(run.count for run in runs)
    if table.num_rows != count:
        raise ValueError(f"{count} stage lines of {runs[0].table.qualified_name} do not split")
    return [table.column(name).combine_chunks() for name in types]


def _csv_type(column: ColumnType, target: Any) -> Any:
    """The Arrow type the CSV reader parses a `NATIVE` column's text as."""
    import pyarrow as pa

    if pa.types.is_floating(target):  # as a Python float, then Spark's float
        return pa.float64()
    return target


def text_columns_reader(
    columns: Sequence[ColumnType], targets: Sequence[Any]
) -> Callable[[bytes], tuple[Any, list[Any]]]:
    """From the lines of `text_columns_encoder` (joined): the seq column (int32) and an
    Arrow array per column of the type in ``targets``, the values `TypedRowBuffer`
    gives the decoded rows."""
    read = _fields_reader(columns, targets, ())

    def read_columns(lines: bytes) -> tuple[Any, list[Any]]:
        seq, _, typed = read(lines)
        return seq, typed

    return read_columns


STAGE_HEAD = ("key", "old", "new")  # a stage line's JSON fields, after seq


def stage_columns_reader(
    columns: Sequence[ColumnType], targets: Sequence[Any]
) -> Callable[[bytes], tuple[Any, list[Any], list[Any]]]:
    """From the lines of `stage_columns_encoder` (joined) of a table whose columns are
    ``columns`` (the encoder's, in order): the seq column (int32), the key, old and new
    rows' JSON (strings, null: none) and an Arrow array per column of the type in
    ``targets``, the values `pgtail.spark.arrow_rows.arrow_columns_reader` gives from
    the JSON (the new row's, else the old row's): a json or jsonb value that is JSON's
    null is NULL there (the row's JSON holds ``null`` for both), so it is here too."""
    return _fields_reader(columns, targets, STAGE_HEAD, json_null=True)


def _fields_reader(
    columns: Sequence[ColumnType],
    targets: Sequence[Any],
    head: Sequence[str],
    *,
    json_null: bool = False,
) -> Callable[[bytes], tuple[Any, list[Any], list[Any]]]:
    """`text_columns_reader` of lines with the string fields ``head`` after seq
    (``json_null``: a json or jsonb column's ``null`` read as NULL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pgtail.spark.arrow_rows import arrow_columns_reader
    from pgtail.spark.types import spark_field
    from pgtail.values.registry import converters

    columns = tuple(columns)
    targets = tuple(targets)
    names = ["seq", *head, *(f"c{i}" for i in range(len(columns)))]
    native = [i for i, c in enumerate(columns) if c.type_oid in NATIVE]
    json_at = [i for i in range(len(columns)) if i not in native]
    json_null_at = [i for i in native if json_null and columns[i].type_oid in JSON_TYPES]
    string = pa.string()
    typed = {"seq": pa.int32()}
    typed.update({f"c{i}": _csv_type(columns[i], targets[i]) for i in native})
    read_json = (
        arrow_columns_reader([columns[i] for i in json_at], [targets[i] for i in json_at])
        if json_at
        else None
    )

    def read_csv(lines: bytes, types: dict[str, Any], include: Sequence[str]) -> Any:
        return _read_fields(lines, names, {n: types.get(n, string) for n in include})

    def one_by_one(i: int, texts: Any) -> Any:
        text = converters(columns[i].type_oid, columns[i].typmod)[0]
        spark = spark_field(columns[i])[1]
        return pa.array(
            [None if t is None else spark(text(t.encode())) for t in texts.to_pylist()],
            type=targets[i],
        )

    def read(lines: bytes) -> tuple[Any, list[Any], list[Any]]:
        found: dict[int, Any] = {}
        try:
            table = read_csv(lines, typed, names)
        except pa.ArrowInvalid:  # a column Arrow refuses: which?
            table = read_csv(lines, {"seq": pa.int32()}, names)
            for i in native:
                with contextlib.suppress(pa.ArrowInvalid):
                    found[i] = read_csv(lines, typed, [f"c{i}"]).column(0)
                if i not in found:
                    found[i] = one_by_one(i, table.column(f"c{i}").combine_chunks())
        for i in native:
            values = found.get(i)
            if values is None:
                values = table.column(f"c{i}")
            values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
            found[i] = values if values.type == targets[i] else values.cast(targets[i])
        if read_json is not None:
            pieces: list[Any] = []
            for n, i in enumerate(json_at):
                key = orjson.dumps(columns[i].name).decode()
                pieces.append(("{" if n == 0 else ",") + key + ":")
                pieces.append(pc.fill_null(table.column(f"c{i}").combine_chunks(), "null"))
            rows = pc.binary_join_element_wise(*pieces, "}", "")
            for i, values in zip(json_at, read_json(rows), strict=True):
                found[i] = values
        for i in json_null_at:
            values = found[i]
            found[i] = pc.if_else(pc.equal(values, "null"), pa.scalar(None, values.type), values)
        seq = table.column("seq").combine_chunks()
        fields = [table.column(name).combine_chunks() for name in head]
        return seq, fields, [found[i] for i in range(len(columns))]

    return read
