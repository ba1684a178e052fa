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

The package, one module per job (the registry imports the families, never the reverse):
`registry` (type OID -> converters: `converters`, `type_name`, `UserType`), one module per
type family each ending in its registration table (`numbers`, `strings`, `jsontypes`,
`network`, `misc`, `datetimes`, `ranges`, and `arrays` of any of them), `base` (what they
share: `Converter`, fallbacks, the type entry), `oids`, `tojson` (`dumps`, `text_json`)
and `literals` (`to_text`). Everything is importable from here as before.
"""

from __future__ import annotations

from pgtail.values.base import (
    Converter as Converter,
)
from pgtail.values.base import (
    StrConverter as StrConverter,
)
from pgtail.values.base import (
    _hex as _hex,
)
from pgtail.values.literals import (
    to_text as to_text,
)
from pgtail.values.oids import (
    BIT as BIT,
)
from pgtail.values.oids import (
    BIT_ARRAY as BIT_ARRAY,
)
from pgtail.values.oids import (
    BOOL as BOOL,
)
from pgtail.values.oids import (
    BOOL_ARRAY as BOOL_ARRAY,
)
from pgtail.values.oids import (
    BPCHAR as BPCHAR,
)
from pgtail.values.oids import (
    BPCHAR_ARRAY as BPCHAR_ARRAY,
)
from pgtail.values.oids import (
    BYTEA as BYTEA,
)
from pgtail.values.oids import (
    BYTEA_ARRAY as BYTEA_ARRAY,
)
from pgtail.values.oids import (
    CHAR as CHAR,
)
from pgtail.values.oids import (
    CHAR_ARRAY as CHAR_ARRAY,
)
from pgtail.values.oids import (
    CID as CID,
)
from pgtail.values.oids import (
    CID_ARRAY as CID_ARRAY,
)
from pgtail.values.oids import (
    CIDR as CIDR,
)
from pgtail.values.oids import (
    CIDR_ARRAY as CIDR_ARRAY,
)
from pgtail.values.oids import (
    DATE as DATE,
)
from pgtail.values.oids import (
    DATE_ARRAY as DATE_ARRAY,
)
from pgtail.values.oids import (
    FLOAT4 as FLOAT4,
)
from pgtail.values.oids import (
    FLOAT4_ARRAY as FLOAT4_ARRAY,
)
from pgtail.values.oids import (
    FLOAT8 as FLOAT8,
)
from pgtail.values.oids import (
    FLOAT8_ARRAY as FLOAT8_ARRAY,
)
from pgtail.values.oids import (
    INET as INET,
)
from pgtail.values.oids import (
    INET_ARRAY as INET_ARRAY,
)
from pgtail.values.oids import (
    INT2 as INT2,
)
from pgtail.values.oids import (
    INT2_ARRAY as INT2_ARRAY,
)
from pgtail.values.oids import (
    INT4 as INT4,
)
from pgtail.values.oids import (
    INT4_ARRAY as INT4_ARRAY,
)
from pgtail.values.oids import (
    INT8 as INT8,
)
from pgtail.values.oids import (
    INT8_ARRAY as INT8_ARRAY,
)
from pgtail.values.oids import (
    INTERVAL as INTERVAL,
)
from pgtail.values.oids import (
    INTERVAL_ARRAY as INTERVAL_ARRAY,
)
from pgtail.values.oids import (
    JSON as JSON,
)
from pgtail.values.oids import (
    JSON_ARRAY as JSON_ARRAY,
)
from pgtail.values.oids import (
    JSONB as JSONB,
)
from pgtail.values.oids import (
    JSONB_ARRAY as JSONB_ARRAY,
)
from pgtail.values.oids import (
    MACADDR as MACADDR,
)
from pgtail.values.oids import (
    MACADDR8 as MACADDR8,
)
from pgtail.values.oids import (
    MACADDR8_ARRAY as MACADDR8_ARRAY,
)
from pgtail.values.oids import (
    MACADDR_ARRAY as MACADDR_ARRAY,
)
from pgtail.values.oids import (
    MONEY as MONEY,
)
from pgtail.values.oids import (
    MONEY_ARRAY as MONEY_ARRAY,
)
from pgtail.values.oids import (
    NAME as NAME,
)
from pgtail.values.oids import (
    NAME_ARRAY as NAME_ARRAY,
)
from pgtail.values.oids import (
    NUMERIC as NUMERIC,
)
from pgtail.values.oids import (
    NUMERIC_ARRAY as NUMERIC_ARRAY,
)
from pgtail.values.oids import (
    OID as OID,
)
from pgtail.values.oids import (
    OID_ARRAY as OID_ARRAY,
)
from pgtail.values.oids import (
    PG_LSN as PG_LSN,
)
from pgtail.values.oids import (
    PG_LSN_ARRAY as PG_LSN_ARRAY,
)
from pgtail.values.oids import (
    REFCURSOR as REFCURSOR,
)
from pgtail.values.oids import (
    REFCURSOR_ARRAY as REFCURSOR_ARRAY,
)
from pgtail.values.oids import (
    TEXT as TEXT,
)
from pgtail.values.oids import (
    TEXT_ARRAY as TEXT_ARRAY,
)
from pgtail.values.oids import (
    TIME as TIME,
)
from pgtail.values.oids import (
    TIME_ARRAY as TIME_ARRAY,
)
from pgtail.values.oids import (
    TIMESTAMP as TIMESTAMP,
)
from pgtail.values.oids import (
    TIMESTAMP_ARRAY as TIMESTAMP_ARRAY,
)
from pgtail.values.oids import (
    TIMESTAMPTZ as TIMESTAMPTZ,
)
from pgtail.values.oids import (
    TIMESTAMPTZ_ARRAY as TIMESTAMPTZ_ARRAY,
)
from pgtail.values.oids import (
    TIMETZ as TIMETZ,
)
from pgtail.values.oids import (
    TIMETZ_ARRAY as TIMETZ_ARRAY,
)
from pgtail.values.oids import (
    TSVECTOR as TSVECTOR,
)
from pgtail.values.oids import (
    TSVECTOR_ARRAY as TSVECTOR_ARRAY,
)
from pgtail.values.oids import (
    UNKNOWN as UNKNOWN,
)
from pgtail.values.oids import (
    UUID as UUID,
)
from pgtail.values.oids import (
    UUID_ARRAY as UUID_ARRAY,
)
from pgtail.values.oids import (
    VARBIT as VARBIT,
)
from pgtail.values.oids import (
    VARBIT_ARRAY as VARBIT_ARRAY,
)
from pgtail.values.oids import (
    VARCHAR as VARCHAR,
)
from pgtail.values.oids import (
    VARCHAR_ARRAY as VARCHAR_ARRAY,
)
from pgtail.values.oids import (
    XID as XID,
)
from pgtail.values.oids import (
    XID8 as XID8,
)
from pgtail.values.oids import (
    XID8_ARRAY as XID8_ARRAY,
)
from pgtail.values.oids import (
    XID_ARRAY as XID_ARRAY,
)
from pgtail.values.oids import (
    XML as XML,
)
from pgtail.values.oids import (
    XML_ARRAY as XML_ARRAY,
)
from pgtail.values.ranges import (
    DATEMULTIRANGE as DATEMULTIRANGE,
)
from pgtail.values.ranges import (
    DATERANGE as DATERANGE,
)
from pgtail.values.ranges import (
    INT4MULTIRANGE as INT4MULTIRANGE,
)
from pgtail.values.ranges import (
    INT4RANGE as INT4RANGE,
)
from pgtail.values.ranges import (
    INT8MULTIRANGE as INT8MULTIRANGE,
)
from pgtail.values.ranges import (
    INT8RANGE as INT8RANGE,
)
from pgtail.values.ranges import (
    NUMMULTIRANGE as NUMMULTIRANGE,
)
from pgtail.values.ranges import (
    NUMRANGE as NUMRANGE,
)
from pgtail.values.ranges import (
    TSMULTIRANGE as TSMULTIRANGE,
)
from pgtail.values.ranges import (
    TSRANGE as TSRANGE,
)
from pgtail.values.ranges import (
    TSTZMULTIRANGE as TSTZMULTIRANGE,
)
from pgtail.values.ranges import (
    TSTZRANGE as TSTZRANGE,
)
from pgtail.values.registry import (
    _ARRAYS as _ARRAYS,
)
from pgtail.values.registry import (
    _TYPES as _TYPES,
)
from pgtail.values.registry import (
    UserType as UserType,
)
from pgtail.values.registry import (
    UserTypes as UserTypes,
)
from pgtail.values.registry import (
    converters as converters,
)
from pgtail.values.registry import (
    is_built_in as is_built_in,
)
from pgtail.values.registry import (
    type_name as type_name,
)
from pgtail.values.tojson import (
    JSON_ESCAPES as JSON_ESCAPES,
)
from pgtail.values.tojson import (
    JsonKind as JsonKind,
)
from pgtail.values.tojson import (
    JsonWriter as JsonWriter,
)
from pgtail.values.tojson import (
    _json_bytes as _json_bytes,
)
from pgtail.values.tojson import (
    decodes_text as decodes_text,
)
from pgtail.values.tojson import (
    dumps as dumps,
)
from pgtail.values.tojson import (
    json_default as json_default,
)
from pgtail.values.tojson import (
    text_json as text_json,
)

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
