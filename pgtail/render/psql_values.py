"""Values as psql shows them. The events carry JSON-ready values (ISO 8601 intervals and
timestamps, true/false, Python floats); the table renderer (`pgtail.render.table`) shows
what psql would show for the same row: ``1 day 02:00:00``, ``2026-11-22 00:11:08.5+00``,
floats in PostgreSQL's shortest form, arrays as ``{t,"b c",NULL}``. Which value gets which
form: by its Python type in `pgtail.render.cells.show_value`, by its column's type OID in
`DISPLAY_OF_TYPE`.

These run once per value shown: each is a plain module-level function (or closure made
once at import) that the renderer binds by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson

from pgtail.values import to_text

_INF = float("inf")


def pg_time(text: str) -> str:
    """An ISO 8601 timestamp as psql prints it: ``2026-11-22 00:11:08.5+00``."""
    text = text.replace("T", " ", 1)
    if text.endswith("+00:00"):
        return text[:-3]
    return text


_ISO_INTERVAL = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)D)?"
    r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?)?\Z"
)


def pg_interval(text: str) -> str:
    """An ISO 8601 interval (``P1DT2H``) as psql prints it (``1 day 02:00:00``): PostgreSQL's
    EncodeInterval with IntervalStyle postgres. Anything else (``infinity``) is kept."""
    match = _ISO_INTERVAL.match(text)
    if match is None:
        return text
    years, months, days, hours, minutes, seconds = match.groups()
    parts: list[str] = []
    before = False  # the last part was negative: a positive one after it gets a "+"
    for value, unit in ((years, "year"), (months, "mon"), (days, "day")):
        number = int(value) if value else 0
        if number:
            plus = "+" if before and number > 0 else ""
            parts.append(f"{plus}{number} {unit}{'' if number == 1 else 's'}")
            before = number < 0
    if not parts or hours or minutes or seconds:
        fields = (hours or "0", minutes or "0", seconds or "0")
        minus = any(f.startswith("-") for f in fields)
        whole, _, fraction = fields[2].lstrip("-").partition(".")
        sign = "-" if minus else ("+" if before else "")
        clock = f"{sign}{abs(int(fields[0])):02d}:{abs(int(fields[1])):02d}:{int(whole):02d}"
        parts.append(clock + (f".{fraction}" if fraction else ""))
    return " ".join(parts)


def _pg_float(digits: int) -> Callable[[Any], str]:
    """A float as PostgreSQL prints it: the shortest exact digits, in exponent form when
    the exponent is below -4 or at least ``digits`` (15 for float8, 6 for float4)."""
    high = 10.0**digits

    def show(value: Any) -> str:
        if type(value) is not float or value != value or value in (_INF, -_INF):
            return str(value)  # NaN and the infinities arrive as text already
        text = repr(value)
        if "e" not in text and (1e-4 <= abs(value) < high or value == 0):
            return text[:-2] if text.endswith(".0") else text  # Python's form but for ".0"
        decimal = Decimal(repr(value))
        sign, numerals, exponent = decimal.as_tuple()
        assert isinstance(exponent, int)
        numbers = "".join(map(str, numerals)).rstrip("0") or "0"
        point = len(numerals) + exponent - 1  # the power of ten of the first digit
        head = "-" if sign else ""
        if point < -4 or point >= digits:
            mantissa = numbers[0] + (f".{numbers[1:]}" if len(numbers) > 1 else "")
            return f"{head}{mantissa}e{'-' if point < 0 else '+'}{abs(point):02d}"
        return head + format(abs(decimal), "f").rstrip("0").rstrip(".")

    return show


def _array_element(value: Any, show: Callable[[Any], str]) -> str:
    if value is None:
        return "NULL"
    if type(value) is list:
        return pg_array(value, show)
    text = show(value)
    if text == "" or text.upper() == "NULL" or _ARRAY_QUOTES.search(text) is not None:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


_ARRAY_QUOTES = re.compile(r'[{}",\\ \t\n\r\v\f]')


def pg_array(values: list[Any], show: Callable[[Any], str]) -> str:
    return "{" + ",".join([_array_element(v, show) for v in values]) + "}"


def element_text(value: Any) -> str:
    """An array element as psql shows it, before quoting."""
    kind = type(value)
    if kind is str:
        return str(value)
    if kind is bool:
        return "t" if value else "f"
    if kind is float:
        return pg_float8(value)
    if kind is orjson.Fragment:
        return to_text(value)
    return str(value)


def array_of(show: Callable[[Any], str]) -> Callable[[Any], str]:
    def show_array(value: Any) -> str:
        return pg_array(value, show) if type(value) is list else str(value)

    return show_array


pg_float8 = _pg_float(15)
pg_float4 = _pg_float(6)

# type OID -> how psql shows a value of it, for the types whose JSON-ready form does not
# say it by its Python type (booleans, float8 and arrays: see
# `pgtail.render.cells.show_value`)
DISPLAY_OF_TYPE: dict[int, Callable[[Any], str]] = {
    1186: pg_interval,
    1187: array_of(pg_interval),
    700: pg_float4,
    1021: array_of(pg_float4),
    1115: array_of(pg_time),
    1185: array_of(pg_time),
}
