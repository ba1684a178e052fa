"""Column values: type OID -> converters from pgoutput's text and binary wire formats.

Both formats of a value become ONE JSON-ready Python value, so a text-mode and a binary-mode
stream of the same changes render identically; `to_text` goes back to PostgreSQL input text.

Representation (text forms as printed with DateStyle=ISO, IntervalStyle=postgres,
bytea_output=hex, extra_float_digits=1, which pgtail sets on every session it decodes in,
see `pgtail.connection.DECODING_SETTINGS`; a UTF-8 database):

- bool -> bool; int2/int4/int8/oid/xid/xid8/cid -> int.
- float4/float8 -> float; NaN/Infinity/-Infinity -> the strings "NaN", "Infinity", "-Infinity".
  A binary float4 becomes the shortest decimal that round-trips as float4 (what PostgreSQL
  prints), so binary 1.1f gives 1.1, not 1.100000023841858.
- numeric -> exact str as PostgreSQL prints it (trailing zeros per scale), "NaN", "Infinity".
- money -> the amount as a plain decimal str with 2 fraction digits ("-1234.50"); the currency
  symbol and grouping of the text form (lc_monetary) are dropped.
- text, varchar, bpchar (with its padding), name, "char", xml, refcursor, unknown -> str.
  A "char" byte >= 0x80 is "\\ooo" (octal), as PostgreSQL prints it.
- bytea -> "\\x<hex>" str; uuid -> canonical str; macaddr/macaddr8 -> "08:00:2b:01:02:03".
- json/jsonb -> orjson.Fragment of the JSON text (embedded as JSON, not as a string). Line breaks
  of json (which keeps its input text) are turned into spaces, valid JSON either way.
- inet/cidr -> str as PostgreSQL prints it ("/n" on inet only when not a full host mask).
- bit/varbit -> "0101"; pg_lsn -> "16/B374D848"; tsvector -> its text form str.
- date -> "YYYY-MM-DD"; BC dates keep PostgreSQL's suffix: "0044-03-15 BC"; years past 9999
  print with more digits; "infinity"/"-infinity".
- time -> "HH:MM:SS[.ffffff]"; timetz -> "HH:MM:SS[.ffffff]+HH[:MM[:SS]]" (PostgreSQL's form).
- timestamp -> "YYYY-MM-DDTHH:MM:SS[.ffffff]"; timestamptz -> the same in UTC + "+00:00"
  (text values arriving in another session TimeZone are normalised to UTC). Fractions drop
  trailing zeros as PostgreSQL does; BC values end in " BC"; "infinity"/"-infinity".
- interval -> ISO 8601 as PostgreSQL's IntervalStyle iso_8601 prints it ("P1Y2M3DT4H5M6.5S",
  "PT0S", per-field signs), or "infinity"/"-infinity".
- int4/int8/num/date/ts/tstz ranges and multiranges -> the str PostgreSQL prints ("[1,10)",
  "empty", "{[1,3),[5,7)}") with each bound written in the form above
  ("[2024-01-01T05:00:00+00:00,)").
- arrays (any number of dimensions) -> nested lists with None for NULL; lower bounds such as
  "[0:1]={...}" are dropped. Arrays of types with a ';' delimiter (box) are out of scope.
- Types that are not built in convert by what pg_type says of them (`UserType`, passed to
  `converters`): an enum -> its label str (from both formats: enum_send sends the label), a
  domain -> as its base type, an array of either -> a list of them. Other user types
  (composites, extension types), or any without a UserType: text -> the text str; binary ->
  "\\x<hex>" of the send function's bytes. A value that does not parse falls back the same
  way instead of raising; only the hot paths of bool, integers and floats trust the server.

Every string form above is accepted by PostgreSQL as input, so `'<to_text(v)>'::<type_name>`
reproduces the value (type_name gives "bpchar" and '"bit"' for character(n) and bit(n): their
bare SQL names would mean length 1).
"""

from __future__ import annotations

import csv
import re
import struct
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any, Literal, NamedTuple, cast

import orjson

__all__ = [
    "Converter",
    "converters",
    "JSON_ESCAPES",
    "UserType",
    "decodes_text",
    "dumps",
    "json_default",
    "text_json",
    "to_text",
    "type_name",
]

Converter = Callable[[bytes], Any]
StrConverter = Callable[[str], Any]

# Built-in type OIDs (pg_type.dat).
BOOL = 16
BYTEA = 17
CHAR = 18
NAME = 19
INT8 = 20
INT2 = 21
INT4 = 23
TEXT = 25
OID = 26
XID = 28
CID = 29
JSON = 114
XML = 142
CIDR = 650
FLOAT4 = 700
FLOAT8 = 701
UNKNOWN = 705
MACADDR8 = 774
MONEY = 790
MACADDR = 829
INET = 869
BPCHAR = 1042
VARCHAR = 1043
DATE = 1082
TIME = 1083
TIMESTAMP = 1114
TIMESTAMPTZ = 1184
INTERVAL = 1186
TIMETZ = 1266
BIT = 1560
VARBIT = 1562
NUMERIC = 1700
REFCURSOR = 1790
UUID = 2950
PG_LSN = 3220
TSVECTOR = 3614
JSONB = 3802
XID8 = 5069

# Array type OIDs (pg_type.typarray of the element types above).
BOOL_ARRAY = 1000
BYTEA_ARRAY = 1001
CHAR_ARRAY = 1002
NAME_ARRAY = 1003
INT2_ARRAY = 1005
INT4_ARRAY = 1007
TEXT_ARRAY = 1009
XID_ARRAY = 1011
CID_ARRAY = 1012
BPCHAR_ARRAY = 1014
VARCHAR_ARRAY = 1015
INT8_ARRAY = 1016
FLOAT4_ARRAY = 1021
FLOAT8_ARRAY = 1022
OID_ARRAY = 1028
MACADDR_ARRAY = 1040
INET_ARRAY = 1041
CIDR_ARRAY = 651
JSON_ARRAY = 199
XML_ARRAY = 143
MACADDR8_ARRAY = 775
MONEY_ARRAY = 791
DATE_ARRAY = 1182
TIME_ARRAY = 1183
TIMESTAMP_ARRAY = 1115
TIMESTAMPTZ_ARRAY = 1185
INTERVAL_ARRAY = 1187
TIMETZ_ARRAY = 1270
BIT_ARRAY = 1561
VARBIT_ARRAY = 1563
NUMERIC_ARRAY = 1231
REFCURSOR_ARRAY = 2201
UUID_ARRAY = 2951
PG_LSN_ARRAY = 3221
TSVECTOR_ARRAY = 3643
JSONB_ARRAY = 3807
XID8_ARRAY = 271

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_F4 = struct.Struct(">f")
_F8 = struct.Struct(">d")
_TIMETZ = struct.Struct(">qi")
_INTERVAL = struct.Struct(">qii")
_NUMERIC_HEAD = struct.Struct(">hhHH")
_ARRAY_HEAD = struct.Struct(">iiI")


def _hex(value: bytes) -> str:
    return "\\x" + value.hex()


def _decode(value: bytes) -> str:
    # "replace" so that a non-UTF-8 database cannot stop a stream; valid UTF-8 costs the same.
    return value.decode("utf-8", "replace")


def _identity(value: str) -> str:
    return value


# what a converter raises on bytes it cannot parse (never on what a server sends)
_UNPARSABLE = (ValueError, IndexError, KeyError, OverflowError, struct.error)


def _with_fallback(convert: Callable[[Any], Any], fallback: Callable[[Any], Any]) -> Any:
    def safe(value: Any) -> Any:
        try:
            return convert(value)
        except _UNPARSABLE:
            return fallback(value)

    return safe


def _safe_text(convert: Converter) -> Converter:
    """A text converter that falls back to the text str instead of raising."""
    return cast(Converter, _with_fallback(convert, _decode))


def _safe_str(convert: StrConverter) -> StrConverter:
    """A str converter that falls back to the str itself instead of raising."""
    return cast(StrConverter, _with_fallback(convert, _identity))


def _safe_binary(convert: Converter) -> Converter:
    """A binary converter that falls back to the hex string instead of raising."""
    return cast(Converter, _with_fallback(convert, _hex))


# --- bool, integers ----------------------------------------------------------------------

_BOOL_TEXT: dict[bytes | str, bool] = {b"t": True, b"f": False, "t": True, "f": False}
_BOOL_BINARY: dict[bytes, bool] = {b"\x01": True, b"\x00": False}


def _make_int_binary(unpack: Callable[[bytes], tuple[int]]) -> Converter:
    # A struct unpack of the usual width is faster than int.from_bytes; any other width
    # (the server never sends one) still gives int.from_bytes's answer rather than raising.
    def convert(value: bytes) -> int:
        try:
            return unpack(value)[0]
        except struct.error:
            return int.from_bytes(value, "big", signed=True)

    return convert


_int2_binary = _make_int_binary(struct.Struct(">h").unpack)
_int4_binary = _make_int_binary(struct.Struct(">i").unpack)
_int8_binary = _make_int_binary(struct.Struct(">q").unpack)


def _uint_binary(value: bytes) -> int:
    return int.from_bytes(value, "big")


# --- floats ------------------------------------------------------------------------------

_FLOAT_SPECIAL: dict[bytes | str, str] = {
    b"NaN": "NaN",
    b"Infinity": "Infinity",
    b"-Infinity": "-Infinity",
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
}


def _float_text(value: bytes | str) -> float | str:
    special = _FLOAT_SPECIAL.get(value)
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


_U32 = struct.Struct(">I")
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
        return _hex(value)
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


def _numeric_text(value: bytes) -> str:
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


# --- strings and byte strings ------------------------------------------------------------


def _char_binary(value: bytes) -> str:
    if not value or value[0] == 0:
        return ""
    byte = value[0]
    return f"\\{byte:03o}" if byte >= 0x80 else chr(byte)


_BYTEA_ESCAPE = re.compile(rb"\\(\\|[0-7]{3})")


def _bytea_str(text: str) -> str:
    if text.startswith("\\x"):
        return text
    # bytea_output = escape: printable ASCII as is, "\\\\" and "\\ooo" escapes.
    raw = text.encode("latin-1")
    unescaped = _BYTEA_ESCAPE.sub(
        lambda m: b"\\" if m.group(1) == b"\\" else bytes([int(m.group(1), 8)]), raw
    )
    return _hex(unescaped)


def _bytea_text(value: bytes) -> str:
    if value[:2] == b"\\x":
        return value.decode("ascii")
    return _bytea_str(value.decode("latin-1"))


def _uuid_binary(value: bytes) -> str:
    h = value.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _mac_binary(value: bytes) -> str:
    return value.hex(":")


def _bit_binary(value: bytes) -> str:
    (length,) = _I32.unpack_from(value)
    data = value[4:]
    if length == 0:
        return ""
    return bin(int.from_bytes(data, "big"))[2:].zfill(len(data) * 8)[:length]


def _lsn_binary(value: bytes) -> str:
    (lsn,) = _U64.unpack(value)
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


# --- json --------------------------------------------------------------------------------


def _json_text(value: bytes) -> orjson.Fragment:
    # json keeps its input text; raw line breaks can only be insignificant whitespace
    # (they are invalid inside JSON strings), and they would break JSON lines.
    if b"\n" in value or b"\r" in value:
        value = value.replace(b"\n", b" ").replace(b"\r", b" ")
    return orjson.Fragment(value)


def _json_str(value: str) -> orjson.Fragment:
    if "\n" in value or "\r" in value:
        value = value.replace("\n", " ").replace("\r", " ")
    return orjson.Fragment(value)


def _jsonb_binary(value: bytes) -> orjson.Fragment | str:
    try:
        if value[0] == 1:  # jsonb's binary format version
            return orjson.Fragment(value[1:])
    except IndexError:
        pass
    return _hex(value)


# --- inet --------------------------------------------------------------------------------

_PGSQL_AF_INET = 2
_PGSQL_AF_INET6 = 3


def _ipv6_text(address: bytes) -> str:
    # PostgreSQL's (BIND's) inet_net_ntop_ipv6: longest zero run (>= 2 words) becomes "::",
    # and ::a.b.c.d / ::ffff:a.b.c.d keep the embedded IPv4 address in dotted form.
    words = struct.unpack(">8H", address)
    best_base, best_len, cur_base, cur_len = -1, 0, -1, 0
    for i, word in enumerate(words):
        if word == 0:
            if cur_base == -1:
                cur_base, cur_len = i, 1
            else:
                cur_len += 1
        elif cur_base != -1:
            if best_base == -1 or cur_len > best_len:
                best_base, best_len = cur_base, cur_len
            cur_base = -1
    if cur_base != -1 and (best_base == -1 or cur_len > best_len):
        best_base, best_len = cur_base, cur_len
    if best_base != -1 and best_len < 2:
        best_base = -1
    out: list[str] = []
    for i in range(8):
        if best_base != -1 and best_base <= i < best_base + best_len:
            if i == best_base:
                out.append(":")
            continue
        if i != 0:
            out.append(":")
        if (
            i == 6
            and best_base == 0
            and (
                best_len == 6
                or (best_len == 7 and words[7] != 1)
                or (best_len == 5 and words[5] == 0xFFFF)
            )
        ):
            out.append(".".join(str(b) for b in address[12:16]))
            break
        out.append(f"{words[i]:x}")
    if best_base != -1 and best_base + best_len == 8:
        out.append(":")
    return "".join(out)


def _make_inet_binary(is_cidr_type: bool) -> Converter:
    def convert(value: bytes) -> str:
        family, bits, _is_cidr, size = value[0], value[1], value[2], value[3]
        address = value[4 : 4 + size]
        if family == _PGSQL_AF_INET and size == 4:
            text = ".".join(str(b) for b in address)
            full = 32
        elif family == _PGSQL_AF_INET6 and size == 16:
            text = _ipv6_text(address)
            full = 128
        else:
            raise ValueError("inet family")
        if is_cidr_type or bits != full:
            text += f"/{bits}"
        return text

    return convert


# --- tsvector ----------------------------------------------------------------------------

_WEIGHTS = ("", "C", "B", "A")


def _tsvector_binary(value: bytes) -> str:
    (count,) = _I32.unpack_from(value)
    pos = 4
    parts: list[str] = []
    for _ in range(count):
        end = value.index(b"\x00", pos)
        lexeme = value[pos:end].decode("utf-8", "replace")
        pos = end + 1
        (npos,) = struct.unpack_from(">H", value, pos)
        pos += 2
        item = "'" + lexeme.replace("'", "''").replace("\\", "\\\\") + "'"
        if npos:
            entries = struct.unpack_from(f">{npos}H", value, pos)
            pos += 2 * npos
            item += ":" + ",".join(f"{e & 0x3FFF}{_WEIGHTS[e >> 14]}" for e in entries)
        parts.append(item)
    if pos != len(value):
        raise ValueError("tsvector trailing bytes")
    return " ".join(parts)


# --- dates and times ---------------------------------------------------------------------

_USECS_PER_SEC = 1_000_000
_USECS_PER_MINUTE = 60 * _USECS_PER_SEC
_USECS_PER_HOUR = 60 * _USECS_PER_MINUTE
_USECS_PER_DAY = 24 * _USECS_PER_HOUR
_PG_EPOCH_JDATE = 2451545  # date2j(2000, 1, 1)
_PG_EPOCH = datetime(2000, 1, 1)
_PG_EPOCH_ORDINAL = date(2000, 1, 1).toordinal()
_FAST_DAYS_MIN = 1 - _PG_EPOCH_ORDINAL  # 0001-01-01
_FAST_DAYS_MAX = date(9999, 12, 31).toordinal() - _PG_EPOCH_ORDINAL


def _j2date(jd: int) -> tuple[int, int, int]:
    """PostgreSQL's j2date: Julian day -> (astronomical year, month, day)."""
    julian = jd + 32044
    quad = julian // 146097
    extra = (julian - quad * 146097) * 4 + 3
    julian += 60 + quad * 3 + extra // 146097
    quad = julian // 1461
    julian -= quad * 1461
    y = julian * 4 // 1461
    julian = ((julian + 305) % 365 if y != 0 else (julian + 306) % 366) + 123
    y += quad * 4
    year = y - 4800
    quad = julian * 2141 // 65536
    day = julian - 7834 * quad // 256
    month = (quad + 10) % 12 + 1
    return year, month, day


def _date2j(year: int, month: int, day: int) -> int:
    """PostgreSQL's date2j (astronomical year)."""
    if month > 2:
        month += 1
        year += 4800
    else:
        month += 13
        year += 4799
    century = year // 100
    julian = year * 365 - 32167
    julian += year // 4 - century + century // 4
    julian += 7834 * month // 256 + day
    return julian


def _date_parts(days: int) -> tuple[str, bool]:
    """Days since 2000-01-01 -> ("YYYY-MM-DD", is_bc)."""
    if _FAST_DAYS_MIN <= days <= _FAST_DAYS_MAX:
        return date.fromordinal(days + _PG_EPOCH_ORDINAL).isoformat(), False
    year, month, day = _j2date(days + _PG_EPOCH_JDATE)
    if year <= 0:
        return f"{1 - year:04d}-{month:02d}-{day:02d}", True
    return f"{year:04d}-{month:02d}-{day:02d}", False


def _time_text(usecs: int) -> str:
    seconds, fraction = divmod(usecs, _USECS_PER_SEC)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    if fraction:
        return f"{hour:02d}:{minute:02d}:{second:02d}.{fraction:06d}".rstrip("0")
    return f"{hour:02d}:{minute:02d}:{second:02d}"


_MINUTE_HEADS: dict[int, str] = {}


def _minute_head(minute: int) -> str | None:
    """The "YYYY-MM-DDTHH:MM:" of a minute since 2000-01-01 in years 1..9999 (cached), or None."""
    if not _FAST_DAYS_MIN * 1440 <= minute <= _FAST_DAYS_MAX * 1440 + 1439:
        return None
    head = (_PG_EPOCH + timedelta(0, minute * 60)).isoformat()[:17]
    if len(_MINUTE_HEADS) >= 4096:
        _MINUTE_HEADS.clear()
    _MINUTE_HEADS[minute] = head
    return head


# "SS" per second and ".fff" (trailing zeros dropped) per millisecond, the zone appended:
# whole-millisecond timestamps (the common case) join three cached strings.
_SECONDS = [f"{second:02d}" for second in range(60)]
_MILLIS = [f".{milli:03d}".rstrip("0") if milli else "" for milli in range(1000)]
_MILLIS_TZ = [text + "+00:00" for text in _MILLIS]


def _timestamp_format(usecs: int, zone: str) -> str:
    """Microseconds since 2000-01-01 -> ISO 8601 with 'T', then `zone`, then " BC" if BC."""
    minute, usec_of_minute = divmod(usecs, _USECS_PER_MINUTE)
    head = _MINUTE_HEADS.get(minute) or _minute_head(minute)
    if head is not None:
        # Rows of a stream are mostly close in time: "YYYY-MM-DDTHH:MM:" is cached per minute.
        second, fraction = divmod(usec_of_minute, _USECS_PER_SEC)
        if fraction:
            return f"{head}{second:02d}.{fraction:06d}".rstrip("0") + zone
        return f"{head}{second:02d}{zone}"
    if usecs == _INT64_MAX:
        return "infinity"
    if usecs == _INT64_MIN:
        return "-infinity"
    days, time_of_day = divmod(usecs, _USECS_PER_DAY)
    day_text, bc = _date_parts(days)
    text = day_text + "T" + _time_text(time_of_day) + zone
    return text + " BC" if bc else text


def _date_binary(value: bytes) -> str:
    (days,) = _I32.unpack(value)
    if days == _INT32_MAX:
        return "infinity"
    if days == _INT32_MIN:
        return "-infinity"
    text, bc = _date_parts(days)
    return text + " BC" if bc else text


def _time_binary(value: bytes) -> str:
    return _time_text(_I64.unpack(value)[0])


def _zone_text(zone_west: int) -> str:
    """PostgreSQL's EncodeTimezone for a zone in seconds west of UTC: +05:30, -04, +00."""
    sign = "+" if zone_west <= 0 else "-"
    minutes, second = divmod(abs(zone_west), 60)
    hour, minute = divmod(minutes, 60)
    if second:
        return f"{sign}{hour:02d}:{minute:02d}:{second:02d}"
    if minute:
        return f"{sign}{hour:02d}:{minute:02d}"
    return f"{sign}{hour:02d}"


def _timetz_binary(value: bytes) -> str:
    usecs, zone_west = _TIMETZ.unpack(value)
    return _time_text(usecs) + _zone_text(zone_west)


def _timestamp_binary(value: bytes) -> str:
    usecs: int
    try:
        (usecs,) = _I64.unpack(value)
    except struct.error:
        return _hex(value)
    # A cached minute (the common case): the rest is table lookups for whole milliseconds.
    minute, usec_of_minute = divmod(usecs, _USECS_PER_MINUTE)
    head = _MINUTE_HEADS.get(minute)
    if head is not None:
        second, fraction = divmod(usec_of_minute, _USECS_PER_SEC)
        if fraction % 1000:
            return head + _SECONDS[second] + f".{fraction:06d}".rstrip("0")
        return head + _SECONDS[second] + _MILLIS[fraction // 1000]
    return _timestamp_format(usecs, "")


def _timestamptz_binary(value: bytes) -> str:
    usecs: int
    try:
        (usecs,) = _I64.unpack(value)
    except struct.error:
        return _hex(value)
    minute, usec_of_minute = divmod(usecs, _USECS_PER_MINUTE)
    head = _MINUTE_HEADS.get(minute)
    if head is not None:
        second, fraction = divmod(usec_of_minute, _USECS_PER_SEC)
        if fraction % 1000:
            return head + _SECONDS[second] + f".{fraction:06d}".rstrip("0") + "+00:00"
        return head + _SECONDS[second] + _MILLIS_TZ[fraction // 1000]
    return _timestamp_format(usecs, "+00:00")


def _timestamp_str(text: str) -> str:
    # "2024-01-02 03:04:05.5" -> "2024-01-02T03:04:05.5"; BC and infinity keep their words.
    return text.replace(" ", "T", 1)


def _timestamp_text(value: bytes) -> str:
    return value.decode("utf-8", "replace").replace(" ", "T", 1)


_TIMESTAMPTZ_RE = re.compile(
    r"(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?"
    r"(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?"
)


_ZONE_OFFSETS: dict[str, timedelta] = {}
_UTC_HEADS: dict[str, str] = {}


def _zone_offset(zone: str) -> timedelta:
    """ "+05:30" / "-04" / "-04:56:02" -> the offset east of UTC (cached: few distinct)."""
    offset = _ZONE_OFFSETS.get(zone)
    if offset is None:
        parts = [int(p) for p in zone[1:].split(":")] + [0, 0]
        offset = timedelta(hours=parts[0], minutes=parts[1], seconds=parts[2])
        if zone[0] == "-":
            offset = -offset
        if len(_ZONE_OFFSETS) < 1024:
            _ZONE_OFFSETS[zone] = offset
    return offset


def _timestamptz_str(text: str) -> str:
    if text.endswith("+00"):
        return text[:-3].replace(" ", "T", 1) + "+00:00"
    if text[4:5] == "-" and text[10:11] == " " and text[-3:] != " BC":
        # A 4-digit AD year in another session TimeZone. A whole-hour (or whole-minute)
        # offset only changes the text up to the hour (minute): convert and cache that head.
        if text[-3] in "+-":
            head, zone = 13, text[-3:]
        elif text[-6] in "+-":
            head, zone = 16, text[-6:]
        else:
            head, zone = 0, ""
        if head:
            key = text[:head] + zone
            utc_head = _UTC_HEADS.get(key)
            if utc_head is None:
                try:
                    moment = datetime.fromisoformat(text[:16]) - _zone_offset(zone)
                except (ValueError, OverflowError):
                    moment = None  # year 1 or 9999 crossed: the general path below
                if moment is not None:
                    utc_head = moment.isoformat()[:head]
                    if len(_UTC_HEADS) >= 4096:
                        _UTC_HEADS.clear()
                    _UTC_HEADS[key] = utc_head
            if utc_head is not None:
                return utc_head + text[head : -len(zone)] + "+00:00"
    match = _TIMESTAMPTZ_RE.fullmatch(text)
    if match is None:
        if text in ("infinity", "-infinity"):
            return text
        raise ValueError(text)
    year_s, month, day, hour, minute, second, fraction, sign, zh, zm, zs, bc = match.groups()
    year = 1 - int(year_s) if bc else int(year_s)
    days = _date2j(year, int(month), int(day)) - _PG_EPOCH_JDATE
    seconds = days * 86400 + int(hour) * 3600 + int(minute) * 60 + int(second)
    if sign:
        offset = int(zh) * 3600 + int(zm or 0) * 60 + int(zs or 0)
        seconds += -offset if sign == "+" else offset
    usecs = seconds * _USECS_PER_SEC + (int(fraction.ljust(6, "0")) if fraction else 0)
    return _timestamp_format(usecs, "+00:00")


def _timestamptz_text(value: bytes) -> str:
    text = value.decode("utf-8", "replace")
    if text[-3:] == "+00":
        return text[:-3].replace(" ", "T", 1) + "+00:00"
    try:
        return _timestamptz_str(text)
    except (ValueError, IndexError, OverflowError):
        return text


def _interval_format(months: int, days: int, usecs: int) -> str:
    """PostgreSQL's EncodeInterval, IntervalStyle iso_8601."""
    if usecs == _INT64_MAX and days == _INT32_MAX and months == _INT32_MAX:
        return "infinity"
    if usecs == _INT64_MIN and days == _INT32_MIN and months == _INT32_MIN:
        return "-infinity"
    # C division truncates toward zero; every field keeps the sign of its source.
    year = abs(months) // 12 * (1 if months >= 0 else -1)
    month = months - year * 12
    sign = 1 if usecs >= 0 else -1
    rest = abs(usecs)
    hour, rest = divmod(rest, _USECS_PER_HOUR)
    minute, rest = divmod(rest, _USECS_PER_MINUTE)
    second, fraction = divmod(rest, _USECS_PER_SEC)
    if not (year or month or days or hour or minute or second or fraction):
        return "PT0S"
    parts = ["P"]
    if year:
        parts.append(f"{year}Y")
    if month:
        parts.append(f"{month}M")
    if days:
        parts.append(f"{days}D")
    if hour or minute or second or fraction:
        parts.append("T")
    if hour:
        parts.append(f"{sign * hour}H")
    if minute:
        parts.append(f"{sign * minute}M")
    if second or fraction:
        seconds = f"{second}.{fraction:06d}".rstrip("0") if fraction else str(second)
        parts.append(("-" if sign < 0 else "") + seconds + "S")
    return "".join(parts)


def _interval_binary(value: bytes) -> str:
    usecs, days, months = _INTERVAL.unpack(value)
    return _interval_format(months, days, usecs)


_INTERVAL_UNITS = {
    "year": 12,
    "years": 12,
    "mon": 1,
    "mons": 1,
}


def _interval_str(text: str) -> str:
    # IntervalStyle postgres: "-1 years +2 mons 3 days -04:05:06.5"; iso_8601 passes through.
    if text.startswith("P") or text in ("infinity", "-infinity"):
        return text
    months = days = usecs = 0
    tokens = text.split(" ")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if ":" in token:
            negative = token[0] == "-"
            hour, minute, second = token.lstrip("+-").split(":")
            whole, _, fraction = second.partition(".")
            value = (
                int(hour) * _USECS_PER_HOUR
                + int(minute) * _USECS_PER_MINUTE
                + int(whole) * _USECS_PER_SEC
                + (int(fraction.ljust(6, "0")) if fraction else 0)
            )
            usecs += -value if negative else value
            i += 1
            continue
        number = int(token)
        unit = tokens[i + 1]
        if unit in ("day", "days"):
            days += number
        else:
            months += number * _INTERVAL_UNITS[unit]
        i += 2
    return _interval_format(months, days, usecs)


# --- arrays ------------------------------------------------------------------------------

_ARRAY_TOKEN = re.compile(r'[{}]|"(?:[^"\\]|\\.)*"|[^,{}"]+', re.S)
_UNESCAPE = re.compile(r"\\(.)", re.S)


# One element of a one-dimensional array: "quoted" (group 1) or plain (group 2).
_ARRAY_ROW_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)"|([^,"]+)', re.S)
_ARRAY_ROW_PLAIN_ITEM = re.compile(r'"([^"]*)"|([^,"]+)')  # no backslash: no escapes


def _parse_row(inner: str, element: StrConverter) -> list[Any]:
    """A one-dimensional array's elements, some of them quoted."""
    if "\\" not in inner:
        if element is _identity:  # text[] and friends: skip the calls
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
            if element is _identity:
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


def _make_text_array(element: StrConverter) -> Converter:
    def convert(value: bytes) -> list[Any] | str:
        text = value.decode("utf-8", "replace")
        try:
            return _parse_array(text, element)
        except (ValueError, IndexError, KeyError, OverflowError, struct.error):
            return text

    if element is not _identity:
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
            return _parse_array(text, _identity)
        except (ValueError, IndexError, KeyError, OverflowError, struct.error):
            return text

    return convert_strings


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
            return _hex(value)
    # One dimension, the common case: no dimension bookkeeping.
    end = len(value)
    if size * 4 > end - 20:
        return _hex(value)
    if element is None:
        element = _ELEMENT_BINARY.get(element_oid) or _binary_converter(element_oid)
    try:
        if element is _decode and not has_nulls and value.isascii():
            # Strings, no NULL, all ASCII (so every length is >= 0, and str offsets are byte
            # offsets): decode once and slice the elements.
            # Small arrays, the usual case, are unrolled: a loop costs more than the slicing.
            text = value.decode("ascii")
            unpack = _U32_FROM
            if size == 1:
                end1 = 24 + unpack(value, 20)[0]
                return [text[24:end1]] if end1 == end else _hex(value)
            if size == 2:
                end1 = 24 + unpack(value, 20)[0]
                end2 = end1 + 4 + unpack(value, end1)[0]
                return [text[24:end1], text[end1 + 4 : end2]] if end2 == end else _hex(value)
            if size == 3:
                end1 = 24 + unpack(value, 20)[0]
                end2 = end1 + 4 + unpack(value, end1)[0]
                end3 = end2 + 4 + unpack(value, end2)[0]
                if end3 != end:
                    return _hex(value)
                return [text[24:end1], text[end1 + 4 : end2], text[end2 + 4 : end3]]
            if size == 4:
                end1 = 24 + unpack(value, 20)[0]
                end2 = end1 + 4 + unpack(value, end1)[0]
                end3 = end2 + 4 + unpack(value, end2)[0]
                end4 = end3 + 4 + unpack(value, end3)[0]
                if end4 != end:
                    return _hex(value)
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
            return strings if pos == end else _hex(value)
        items: list[Any] = []
        append = items.append
        pos = 20
        unpack = _I32.unpack_from
        if element is _decode:
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
        return _hex(value)
    # A length past the end shows here: slices stop at the end, positions do not.
    return items if pos == end else _hex(value)


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
    if element is _decode:
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


# --- the type table ----------------------------------------------------------------------


class _Type(NamedTuple):
    name: str
    array_oid: int
    text: Converter  # text-format bytes -> value
    text_str: StrConverter  # text already decoded (array elements) -> value
    binary: Converter  # send-function bytes -> value


def _from_str(convert: StrConverter) -> Converter:
    def text(value: bytes) -> Any:
        return convert(value.decode("utf-8", "replace"))

    return text


def _type(
    name: str,
    array_oid: int,
    text_str: StrConverter,
    binary: Converter,
    text: Converter | None = None,
    *,
    safe: bool = True,
) -> _Type:
    if safe:
        text_str = _safe_str(text_str)
        binary = _safe_binary(binary)
    if text is None:
        text = _from_str(text_str)
    elif safe and text is not _decode and text is not _json_text:  # neither can raise
        text = _safe_text(text)
    return _Type(name, array_oid, text, text_str, binary)


def _text_type(name: str, array_oid: int) -> _Type:
    return _Type(name, array_oid, _decode, _identity, _decode)


_TYPES: dict[int, _Type] = {
    BOOL: _Type(
        "boolean",
        BOOL_ARRAY,
        _BOOL_TEXT.__getitem__,
        _BOOL_TEXT.__getitem__,
        _BOOL_BINARY.__getitem__,
    ),
    INT2: _Type("smallint", INT2_ARRAY, int, int, _int2_binary),
    INT4: _Type("integer", INT4_ARRAY, int, int, _int4_binary),
    INT8: _Type("bigint", INT8_ARRAY, int, int, _int8_binary),
    OID: _Type("oid", OID_ARRAY, int, int, _uint_binary),
    XID: _Type("xid", XID_ARRAY, int, int, _uint_binary),
    CID: _Type("cid", CID_ARRAY, int, int, _uint_binary),
    XID8: _Type("xid8", XID8_ARRAY, int, int, _uint_binary),
    FLOAT4: _Type("real", FLOAT4_ARRAY, _float_text, _float_text, _safe_binary(_float4_binary)),
    FLOAT8: _Type(
        "double precision", FLOAT8_ARRAY, _float_text, _float_text, _safe_binary(_float8_binary)
    ),
    NUMERIC: _Type("numeric", NUMERIC_ARRAY, _numeric_text, _identity, _numeric_binary),
    MONEY: _type("money", MONEY_ARRAY, _money_str, _money_binary),
    TEXT: _text_type("text", TEXT_ARRAY),
    VARCHAR: _text_type("character varying", VARCHAR_ARRAY),
    # "character" alone means character(1) in a cast; bpchar keeps any length.
    BPCHAR: _text_type("bpchar", BPCHAR_ARRAY),
    NAME: _text_type("name", NAME_ARRAY),
    XML: _text_type("xml", XML_ARRAY),
    REFCURSOR: _text_type("refcursor", REFCURSOR_ARRAY),
    UNKNOWN: _text_type("unknown", 0),
    CHAR: _type('"char"', CHAR_ARRAY, _identity, _char_binary, _decode),
    BYTEA: _type("bytea", BYTEA_ARRAY, _bytea_str, _hex, _bytea_text),
    UUID: _type("uuid", UUID_ARRAY, _identity, _uuid_binary, _decode),
    JSON: _type("json", JSON_ARRAY, _json_str, _json_text, _json_text),
    JSONB: _Type("jsonb", JSONB_ARRAY, orjson.Fragment, orjson.Fragment, _jsonb_binary),
    INET: _type("inet", INET_ARRAY, _identity, _make_inet_binary(False), _decode),
    CIDR: _type("cidr", CIDR_ARRAY, _identity, _make_inet_binary(True), _decode),
    MACADDR: _type("macaddr", MACADDR_ARRAY, _identity, _mac_binary, _decode),
    MACADDR8: _type("macaddr8", MACADDR8_ARRAY, _identity, _mac_binary, _decode),
    # A bare bit in a cast means bit(1); the quoted type name takes any length.
    BIT: _type('"bit"', BIT_ARRAY, _identity, _bit_binary, _decode),
    VARBIT: _type("bit varying", VARBIT_ARRAY, _identity, _bit_binary, _decode),
    PG_LSN: _type("pg_lsn", PG_LSN_ARRAY, _identity, _lsn_binary, _decode),
    TSVECTOR: _type("tsvector", TSVECTOR_ARRAY, _identity, _tsvector_binary, _decode),
    DATE: _type("date", DATE_ARRAY, _identity, _date_binary, _decode),
    TIME: _type("time without time zone", TIME_ARRAY, _identity, _time_binary, _decode),
    TIMETZ: _type("time with time zone", TIMETZ_ARRAY, _identity, _timetz_binary, _decode),
    TIMESTAMP: _Type(
        "timestamp without time zone",
        TIMESTAMP_ARRAY,
        _timestamp_text,
        _timestamp_str,
        _timestamp_binary,
    ),
    TIMESTAMPTZ: _Type(
        "timestamp with time zone",
        TIMESTAMPTZ_ARRAY,
        _timestamptz_text,
        _safe_str(_timestamptz_str),
        _timestamptz_binary,
    ),
    INTERVAL: _type("interval", INTERVAL_ARRAY, _interval_str, _interval_binary),
}

# --- ranges and multiranges --------------------------------------------------------------
# A range is the str PostgreSQL prints ("[1,10)", "empty"), but with each bound written as
# to_text of its JSON-ready value, so both wire formats give the same text.

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


def _make_range(element_oid: int) -> tuple[StrConverter, Converter]:
    element_type = _TYPES[element_oid]
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


def _make_multirange(element_oid: int) -> tuple[StrConverter, Converter]:
    element_type = _TYPES[element_oid]
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


# (range oid, range array oid, multirange oid, multirange array oid, name stem, element)
_RANGES = (
    (3904, 3905, 4451, 6150, "int4", INT4),
    (3926, 3927, 4536, 6157, "int8", INT8),
    (3906, 3907, 4532, 6151, "num", NUMERIC),
    (3912, 3913, 4535, 6155, "date", DATE),
    (3908, 3909, 4533, 6152, "ts", TIMESTAMP),
    (3910, 3911, 4534, 6153, "tstz", TIMESTAMPTZ),
)
for _range_oid, _range_array, _multi_oid, _multi_array, _stem, _element_oid in _RANGES:
    _TYPES[_range_oid] = _type(f"{_stem}range", _range_array, *_make_range(_element_oid))
    _TYPES[_multi_oid] = _type(f"{_stem}multirange", _multi_array, *_make_multirange(_element_oid))

INT4RANGE, INT8RANGE, NUMRANGE, DATERANGE, TSRANGE, TSTZRANGE = (r[0] for r in _RANGES)
(
    INT4MULTIRANGE,
    INT8MULTIRANGE,
    NUMMULTIRANGE,
    DATEMULTIRANGE,
    TSMULTIRANGE,
    TSTZMULTIRANGE,
) = (r[2] for r in _RANGES)

# Array OID -> element OID.
_ARRAYS: dict[int, int] = {t.array_oid: oid for oid, t in _TYPES.items() if t.array_oid}
# Element OID -> its binary converter (for arrays; arrays of arrays are not listed).
_ELEMENT_BINARY: dict[int, Converter] = {oid: t.binary for oid, t in _TYPES.items()}


def _binary_converter(type_oid: int) -> Converter:
    known = _TYPES.get(type_oid)
    if known is not None:
        return known.binary
    if type_oid in _ARRAYS:
        return _array_binary
    return _hex


_cache: dict[tuple[int, int], tuple[Converter, Converter]] = {}


class UserType(NamedTuple):
    """What pg_type says of a type that is not built in, for `converters`."""

    kind: str  # typtype: "e" enum, "d" domain, "b" base, "c" composite, "r"/"m" range, ...
    element: int = 0  # an array type's element type (typelem where typcategory = 'A')
    base: int = 0  # a domain's base type (typbasetype)


UserTypes = Mapping[int, UserType]


def is_built_in(type_oid: int) -> bool:
    """A type `converters` knows without asking the server (see UserType)."""
    return type_oid in _TYPES or type_oid in _ARRAYS


def converters(
    type_oid: int, type_modifier: int = -1, user_types: UserTypes | None = None
) -> tuple[Converter, Converter]:
    """(text converter, binary converter) for a column of this type; memoized.

    A type that is not built in converts by what ``user_types`` says of it: an enum as its
    label (the same str from both formats), a domain as its base type, an array of such
    types as an array of them. Anything else, or a type ``user_types`` does not know,
    gives its text str, or hex of its binary form.
    """
    if user_types and type_oid in user_types and not is_built_in(type_oid):
        return _converters_of(type_oid, user_types, 0)[:2]  # per database: not memoized
    key = (type_oid, type_modifier)
    found = _cache.get(key)
    if found is None:
        found = _cache[key] = _converters_of(type_oid, {}, 0)[:2]
    return found


_USER_DEPTH = 16  # domains of domains of ...: no loop can come from pg_type, but be safe


def _converters_of(
    type_oid: int, user_types: UserTypes, depth: int
) -> tuple[Converter, Converter, StrConverter]:
    """(text, binary, text_str) of a type (text_str: for it as an array element)."""
    known = _TYPES.get(type_oid)
    if known is not None:
        return known.text, known.binary, known.text_str
    if type_oid in _ARRAYS:
        element = _TYPES[_ARRAYS[type_oid]]
        return _make_text_array(element.text_str), _array_binary, _identity
    info = user_types.get(type_oid)
    if info is None or depth > _USER_DEPTH:
        return _decode, _hex, _identity
    if info.kind == "e":  # enum_send sends the label's text
        return _decode, _decode, _identity
    if info.kind == "d" and info.base:  # (a type modifier changes no converter)
        return _converters_of(info.base, user_types, depth + 1)
    if info.element:
        _, element_binary, element_str = _converters_of(info.element, user_types, depth + 1)

        def binary(value: bytes) -> list[Any] | str:
            return _array_binary(value, element_binary)

        return _make_text_array(element_str), binary, _identity
    return _decode, _hex, _identity


# --- text straight to JSON ---------------------------------------------------------------
# The JSON lines renderer's fast path for plain inserts (see pgtail.render.jsonl) writes a
# text-format value as JSON bytes without building the Python value first. Each writer
# here returns exactly dumps(converter(value)), or raises, and the caller then takes the
# general path; tests compare the two on arbitrary bytes.

JsonWriter = Callable[[bytes], bytes]
JsonKind = Literal["int", "string", "raw", "call", "convert", "utc_timestamp"]

# what JSON escapes in a string (orjson leaves DEL and non-ASCII as they are)
JSON_ESCAPES = re.compile(rb'[\x00-\x1f"\\]')
_BOOL_JSON: dict[bytes, bytes] = {b"t": b"true", b"f": b"false"}


def _json_bytes(value: bytes) -> bytes:
    # what _json_text's Fragment embeds
    if b"\n" in value or b"\r" in value:
        value = value.replace(b"\n", b" ").replace(b"\r", b" ")
    return value


# text converters whose JSON has a shortcut, by the converter (so a domain, which shares
# its base type's converter, takes it too)
_JSON_WRITERS: dict[Any, tuple[JsonKind, JsonWriter]] = {
    _BOOL_TEXT.__getitem__: ("call", _BOOL_JSON.__getitem__),
    orjson.Fragment: ("raw", bytes),  # jsonb prints no line breaks: embedded as it is
    _json_text: ("call", _json_bytes),
}


def text_json(convert: Converter) -> tuple[JsonKind, Callable[[bytes], Any]]:
    """How a text-format value goes straight to JSON bytes, given its text converter.

    The result is always ``dumps(convert(value))``:
    - ``("int", w)``: ``b"%d" % int(value)``;
    - ``("string", w)``: the text as a JSON string (``b'"' + value + b'"'``) when the value
      is ASCII with nothing JSON escapes, otherwise ``w(value)``;
    - ``("raw", w)``: the value's bytes as they are;
    - ``("call", w)``: ``w(value)``;
    - ``("convert", convert)``: no shortcut, ``dumps(convert(value))`` itself (the caller
      inlines it);
    - ``("utc_timestamp", convert)``: a timestamptz, whose text ``D T+00`` (the decoding
      session's TimeZone is UTC) is ``"DTT+00:00"`` with its first space made a ``T``
      when the text is ASCII with nothing JSON escapes; otherwise ``dumps(convert(value))``.
    ``w`` and ``convert`` may raise on bytes no server sends; the caller then takes the
    general path.
    """
    if convert is int:
        return "int", _writer(convert)
    special = _JSON_WRITERS.get(convert)
    if special is not None:
        return special
    if convert is _decode or convert is _numeric_text:
        return "string", _writer(convert)
    if convert is _timestamptz_text:
        return "utc_timestamp", convert
    # The rest (timestamps, arrays, floats, ...) as dumps(converter(value)): checking the
    # bytes for what JSON escapes costs as much as the converter's own fast paths.
    return "convert", convert


def decodes_text(convert: Converter) -> bool:
    """Whether ``convert(value)`` is ``value.decode("utf-8", "replace")`` (text, varchar,
    numeric, unknown types...): a generated caller may inline it."""
    return convert is _decode or convert is _numeric_text


def _writer(convert: Converter) -> JsonWriter:
    def write(value: bytes) -> bytes:
        return dumps(convert(value))

    return write


def type_name(type_oid: int) -> str | None:
    """The SQL name of a built-in type for a cast ("integer", "text[]"), or None."""
    known = _TYPES.get(type_oid)
    if known is not None:
        return known.name
    element = _ARRAYS.get(type_oid)
    if element is not None:
        return _TYPES[element].name + "[]"
    return None


# --- back to PostgreSQL input text -------------------------------------------------------

_NEEDS_QUOTES = re.compile(r'[{}",\\ \t\n\r\v\f]')


def _array_element(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, list):
        return _array_literal(value)
    text = to_text(value)
    if text == "" or text.upper() == "NULL" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _array_literal(values: list[Any]) -> str:
    return "{" + ",".join([_array_element(v) for v in values]) + "}"


def to_text(value: Any) -> str:
    """PostgreSQL input text for a JSON-ready value: `'<to_text(v)>'::<type_name>` is v."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return _array_literal(value)
    if isinstance(value, orjson.Fragment):
        return orjson.dumps(value).decode("utf-8")
    if value is None:
        raise TypeError("NULL has no input text; render it as NULL")
    raise TypeError(f"not a JSON-ready value: {type(value).__name__}")


def json_default(obj: Any) -> Any:
    """orjson's ``default`` as pgtail uses it (see `dumps`)."""
    if isinstance(obj, bytes | bytearray | memoryview):
        return _hex(bytes(obj))
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    raise TypeError(f"Type is not JSON serializable: {type(obj).__name__}")


def dumps(obj: Any) -> bytes:
    """orjson.dumps as pgtail uses it (Fragments embed as JSON; bytes become "\\x<hex>")."""
    return orjson.dumps(obj, default=json_default)
