"""Converters of bool, the integer types (int2/4/8, oid, xid, cid, xid8), float4/float8,
numeric and money, from both wire formats; ends in this family's registration table.

bool and the integers trust the server (no fallback: the per-value hot path); a binary
float4 becomes the shortest decimal that reads back as the same float4, as PostgreSQL
prints it; numeric stays an exact str.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from decimal import Decimal

from pgtail.values.base import Converter, TypeEntry, hex_text, identity_str, safe_binary, type_entry
from pgtail.values.oids import (
    BOOL,
    BOOL_ARRAY,
    CID,
    CID_ARRAY,
    FLOAT4,
    FLOAT4_ARRAY,
    FLOAT8,
    FLOAT8_ARRAY,
    INT2,
    INT2_ARRAY,
    INT4,
    INT4_ARRAY,
    INT8,
    INT8_ARRAY,
    MONEY,
    MONEY_ARRAY,
    NUMERIC,
    NUMERIC_ARRAY,
    OID,
    OID_ARRAY,
    XID,
    XID8,
    XID8_ARRAY,
    XID_ARRAY,
)

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")

_F4 = struct.Struct(">f")
_F8 = struct.Struct(">d")
_NUMERIC_HEAD = struct.Struct(">hhHH")

# --- bool, integers ----------------------------------------------------------------------

BOOL_TEXT: dict[bytes | str, bool] = {b"t": True, b"f": False, "t": True, "f": False}
_BOOL_BINARY: dict[bytes, bool] = {b"\x01": True, b"\x00": False}


def _make_int_binary(unpack: Callable[[bytes], tuple[int]]) -> Converter:
    # Of its own width only: any other (the server never sends one) raises struct.error,
    # which the assembler reports as the column's malformed value (a 9-byte "bigint"
    # would otherwise become an integer no JSON reader takes).
    def convert(value: bytes) -> int:
        return unpack(value)[0]

    return convert


_int2_binary = _make_int_binary(struct.Struct(">h").unpack)
_int4_binary = _make_int_binary(struct.Struct(">i").unpack)
_int8_binary = _make_int_binary(struct.Struct(">q").unpack)
_uint4_binary = _make_int_binary(struct.Struct(">I").unpack)  # oid, xid, cid
_uint8_binary = _make_int_binary(struct.Struct(">Q").unpack)  # xid8


# --- floats ------------------------------------------------------------------------------

FLOAT_SPECIAL: dict[bytes | str, str] = {
    b"NaN": "NaN",
    b"Infinity": "Infinity",
    b"-Infinity": "-Infinity",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
}


def float_text(value: bytes | str) -> float | str:
    special = FLOAT_SPECIAL.get(value)
    return float(value) if special is None else special


def _float_special(number: float) -> str:
    if number != number:
        return "NaN"
    return "Infinity" if number > 0 else "-Infinity"


_INF = float("inf")


def _float8_binary(value: bytes) -> float | str:
    number: float = _F8.unpack(value)[0]
    if number != number or number == _INF or number == -_INF:
        return _float_special(number)
    return number


_FLOAT4_MIN_NORMAL = 1.1754943508222875e-38


def _float4_tie(number: float, candidate: float, text: str) -> bool:
    """PostgreSQL (Ryu) never picks a decimal exactly halfway to the next float4."""
    if candidate == number:
        return False
    bits = _U32.unpack(_F4.pack(number))[0]
    bits += 1 if abs(candidate) > abs(number) else -1
    neighbour: float = _F4.unpack(_U32.pack(bits))[0]
    midpoint = (number + neighbour) / 2  # exact in a double
    return candidate == midpoint and Decimal(text) == Decimal(midpoint)


_FLOAT4_DIGITS = (6, 7, 8)


def _float4_binary(value: bytes) -> float | str:
    number: float = _F4.unpack(value)[0]
    if number != number or number == _INF or number == -_INF:
        return _float_special(number)
    # PostgreSQL prints float4 as the shortest decimal that reads back as the same float4;
    # the text converter parses that decimal, so find it here too (at most 9 digits).
    pack, unpack = _F4.pack, _F4.unpack
    # With a normal float4's 24 bits, a decimal of <= 6 digits that round-trips is what "%.6g"
    # prints (trailing zeros dropped); subnormals have fewer bits, so search from 1 digit.
    for digits in _FLOAT4_DIGITS if abs(number) >= _FLOAT4_MIN_NORMAL else range(1, 9):
        text = f"{number:.{digits}g}"
        candidate = float(text)
        if unpack(pack(candidate))[0] == number and not _float4_tie(number, candidate, text):
            return candidate
    return float(f"{number:.9g}")


# --- numeric, money ----------------------------------------------------------------------

_NUMERIC_SPECIAL = {0xC000: "NaN", 0xD000: "Infinity", 0xF000: "-Infinity"}
_NUMERIC_NEG = 0x4000


_DIGIT_STRUCTS = [struct.Struct(f">{n}H") for n in range(33)]


def _digit_struct(count: int) -> struct.Struct:
    if 0 <= count < len(_DIGIT_STRUCTS):
        return _DIGIT_STRUCTS[count]
    return struct.Struct(f">{max(count, 0)}H")


_NUMERIC_1 = struct.Struct(">hhHHH").unpack
_NUMERIC_2 = struct.Struct(">hhHHHH").unpack
_NUMERIC_3 = struct.Struct(">hhHHHHH").unpack
_NUMERIC_4 = struct.Struct(">hhHHHHHH").unpack
_POW10 = [10**n for n in range(64)]
# ".0" ... ".999": the fraction of a small dscale, ready to append.
_NUMERIC_FRACTIONS = [[""]] + [[f".{n:0{scale}d}" for n in range(10**scale)] for scale in (1, 2, 3)]
_NUMERIC_FORMATS = ["%d"] + [f"%d.%0{scale}d" for scale in range(1, 64)]


def _numeric_binary(value: bytes) -> str:
    # Up to 4 base-10000 digits (16 decimal digits: most stored amounts): one unpack, the
    # digits as one integer scaled to dscale decimal digits, then the point put in.
    text: str
    size = len(value)
    if size == 12:
        ndigits, weight, sign, dscale, high, low = _NUMERIC_2(value)
        number = high * 10000 + low
        shift = dscale + 4 * weight - 4
    elif size == 10:
        ndigits, weight, sign, dscale, number = _NUMERIC_1(value)
        shift = dscale + 4 * weight
    elif size == 14:
        ndigits, weight, sign, dscale, high, middle, low = _NUMERIC_3(value)
        number = (high * 10000 + middle) * 10000 + low
        shift = dscale + 4 * weight - 8
    elif size == 16:
        ndigits, weight, sign, dscale, high, upper, lower, low = _NUMERIC_4(value)
        number = ((high * 10000 + upper) * 10000 + lower) * 10000 + low
        shift = dscale + 4 * weight - 12
    else:
        return _numeric_binary_general(value)
    if 2 * ndigits + 8 != size or dscale > 63 or not -64 < shift < 64:
        return _numeric_binary_general(value)
    if shift >= 0:
        number *= _POW10[shift]
    else:
        number //= _POW10[-shift]
    if dscale < 4:
        if dscale:
            whole, fraction = divmod(number, _POW10[dscale])
            text = str(whole) + _NUMERIC_FRACTIONS[dscale][fraction]
        else:
            text = str(number)
    else:
        text = _NUMERIC_FORMATS[dscale] % divmod(number, _POW10[dscale])
    if sign:
        return "-" + text if sign == _NUMERIC_NEG else _numeric_binary_general(value)
    return text


def _numeric_binary_general(value: bytes) -> str:
    ndigits: int
    weight: int
    sign: int
    dscale: int
    try:
        ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(value)
        digits = _digit_struct(ndigits).unpack_from(value, 8)
    except struct.error:
        return hex_text(value)
    special = _NUMERIC_SPECIAL.get(sign)
    if special is not None:
        return special
    if ndigits == 0:
        return "0." + "0" * dscale if dscale else "0"
    if ndigits <= 8 and dscale <= 256 and -64 <= weight <= 64:  # str() of huge ints: limited
        # Small values: one integer scaled to dscale digits (the digits past dscale are
        # zeros), then the point put in.
        number = 0
        for digit in digits:
            number = number * 10000 + digit
        shift = dscale - 4 * (ndigits - weight - 1)
        if shift >= 0:
            number *= 10**shift
        else:
            number //= 10**-shift
        if dscale:
            text = str(number).rjust(dscale + 1, "0")
            text = text[:-dscale] + "." + text[-dscale:]
        else:
            text = str(number)
        return "-" + text if sign == _NUMERIC_NEG else text
    # The base-10000 digits as one decimal string; the point sits after (weight+1) groups.
    text = ("%04d" * ndigits) % digits
    point = (weight + 1) * 4
    if point <= 0:
        integral = "0"
        fraction = "0" * -point + text
    elif point >= len(text):
        integral = (text + "0" * (point - len(text))).lstrip("0") or "0"
        fraction = ""
    else:
        integral = text[:point].lstrip("0") or "0"
        fraction = text[point:]
    if dscale:
        if len(fraction) < dscale:
            fraction += "0" * (dscale - len(fraction))
        result = integral + "." + fraction[:dscale]
    else:
        result = integral
    return "-" + result if sign == _NUMERIC_NEG else result


def numeric_text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _money_format(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    units, fraction = divmod(abs(cents), 100)
    return f"{sign}{units}.{fraction:02d}"


def _money_binary(value: bytes) -> str:
    return _money_format(_I64.unpack(value)[0])


_NON_DIGITS = re.compile(r"\D+")


def _money_str(text: str) -> str:
    # "$1,234.50", "-$1,234.50", "(1.234,50 €)": sign and digits carry the amount.
    digits = _NON_DIGITS.sub("", text)
    if not digits:
        raise ValueError(text)
    cents = int(digits)
    if "-" in text or "(" in text:
        cents = -cents
    return _money_format(cents)


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    BOOL: TypeEntry(
        "boolean",
        BOOL_ARRAY,
        BOOL_TEXT.__getitem__,
        BOOL_TEXT.__getitem__,
        _BOOL_BINARY.__getitem__,
    ),
    INT2: TypeEntry("smallint", INT2_ARRAY, int, int, _int2_binary),
    INT4: TypeEntry("integer", INT4_ARRAY, int, int, _int4_binary),
    INT8: TypeEntry("bigint", INT8_ARRAY, int, int, _int8_binary),
    OID: TypeEntry("oid", OID_ARRAY, int, int, _uint4_binary),
    XID: TypeEntry("xid", XID_ARRAY, int, int, _uint4_binary),
    CID: TypeEntry("cid", CID_ARRAY, int, int, _uint4_binary),
    XID8: TypeEntry("xid8", XID8_ARRAY, int, int, _uint8_binary),
    FLOAT4: TypeEntry("real", FLOAT4_ARRAY, float_text, float_text, safe_binary(_float4_binary)),
    FLOAT8: TypeEntry(
        "double precision", FLOAT8_ARRAY, float_text, float_text, safe_binary(_float8_binary)
    ),
    NUMERIC: TypeEntry("numeric", NUMERIC_ARRAY, numeric_text, identity_str, _numeric_binary),
    MONEY: type_entry("money", MONEY_ARRAY, _money_str, _money_binary),
}
