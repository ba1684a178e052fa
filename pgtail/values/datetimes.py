"""Converters of date, time, timetz, timestamp, timestamptz and interval, from both wire
formats; ends in this family's registration table.

Binary values are microseconds (days for date) since 2000-01-01, printed as PostgreSQL
prints them (its j2date/date2j for years outside 1..9999, " BC", infinities); timestamps
use ISO 8601's 'T', timestamptz in UTC + "+00:00" (text in another TimeZone is
normalised), intervals IntervalStyle iso_8601. Rows of a stream are mostly close in time,
so the "YYYY-MM-DDTHH:MM:" of a minute is cached.
"""

from __future__ import annotations

import re
import struct
from datetime import date, datetime, timedelta

from pgtail.values.base import TypeEntry, decode_utf8, hex_text, identity_str, safe_str, type_entry
from pgtail.values.oids import (
    DATE,
    DATE_ARRAY,
    INTERVAL,
    INTERVAL_ARRAY,
    TIME,
    TIME_ARRAY,
    TIMESTAMP,
    TIMESTAMP_ARRAY,
    TIMESTAMPTZ,
    TIMESTAMPTZ_ARRAY,
    TIMETZ,
    TIMETZ_ARRAY,
)

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_TIMETZ = struct.Struct(">qi")
_INTERVAL = struct.Struct(">qii")

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
        return hex_text(value)
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
        return hex_text(value)
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


def timestamptz_text(value: bytes) -> str:
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


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    DATE: type_entry("date", DATE_ARRAY, identity_str, _date_binary, decode_utf8),
    TIME: type_entry("time without time zone", TIME_ARRAY, identity_str, _time_binary, decode_utf8),
    TIMETZ: type_entry(
        "time with time zone", TIMETZ_ARRAY, identity_str, _timetz_binary, decode_utf8
    ),
    TIMESTAMP: TypeEntry(
        "timestamp without time zone",
        TIMESTAMP_ARRAY,
        _timestamp_text,
        _timestamp_str,
        _timestamp_binary,
    ),
    TIMESTAMPTZ: TypeEntry(
        "timestamp with time zone",
        TIMESTAMPTZ_ARRAY,
        timestamptz_text,
        safe_str(_timestamptz_str),
        _timestamptz_binary,
    ),
    INTERVAL: type_entry("interval", INTERVAL_ARRAY, _interval_str, _interval_binary),
}
