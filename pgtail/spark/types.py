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
(`pgtail.values`) to the Python value Spark stores. `pgtail.spark.json_rows.row_reader` applies
the same functions to a row stored as JSON (the change log's ``before``/``after``), and
`field_metadata` / `column_of` record a column's PostgreSQL type in its Spark field so a
typed Parquet file says which rule made it.
"""

from __future__ import annotations

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


def same(value: Any) -> Any:
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
    21: (ShortType(), same),
    23: (IntegerType(), same),
    20: (LongType(), same),
    700: (FloatType(), _float),
    701: (DoubleType(), _float),
    16: (BooleanType(), same),
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


def base_type(column: ColumnType) -> ColumnType:
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
    column = base_type(column)  # a domain: its base type's rule
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
