"""Column values: type OID -> converters from pgoutput's text and binary wire formats.

Both formats of a value become ONE JSON-ready Python value, so a text-mode and a binary-mode
stream of the same changes render identically; `to_text` goes back to PostgreSQL input text.

Representation (text forms as printed with DateStyle=ISO, IntervalStyle=postgres,
bytea_output=hex, extra_float_digits=1, which pgtail sets on every session it decodes in,
see `pgtail.catalog.connection.DECODING_SETTINGS`; a UTF-8 database):

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

from pgtail.values.base import Converter, StrConverter
from pgtail.values.literals import to_text
from pgtail.values.oids import (
    BIT,
    BIT_ARRAY,
    BOOL,
    BOOL_ARRAY,
    BPCHAR,
    BPCHAR_ARRAY,
    BYTEA,
    BYTEA_ARRAY,
    CHAR,
    CHAR_ARRAY,
    CID,
    CID_ARRAY,
    CIDR,
    CIDR_ARRAY,
    DATE,
    DATE_ARRAY,
    FLOAT4,
    FLOAT4_ARRAY,
    FLOAT8,
    FLOAT8_ARRAY,
    INET,
    INET_ARRAY,
    INT2,
    INT2_ARRAY,
    INT4,
    INT4_ARRAY,
    INT8,
    INT8_ARRAY,
    INTERVAL,
    INTERVAL_ARRAY,
    JSON,
    JSON_ARRAY,
    JSONB,
    JSONB_ARRAY,
    MACADDR,
    MACADDR8,
    MACADDR8_ARRAY,
    MACADDR_ARRAY,
    MONEY,
    MONEY_ARRAY,
    NAME,
    NAME_ARRAY,
    NUMERIC,
    NUMERIC_ARRAY,
    OID,
    OID_ARRAY,
    PG_LSN,
    PG_LSN_ARRAY,
    REFCURSOR,
    REFCURSOR_ARRAY,
    TEXT,
    TEXT_ARRAY,
    TIME,
    TIME_ARRAY,
    TIMESTAMP,
    TIMESTAMP_ARRAY,
    TIMESTAMPTZ,
    TIMESTAMPTZ_ARRAY,
    TIMETZ,
    TIMETZ_ARRAY,
    TSVECTOR,
    TSVECTOR_ARRAY,
    UNKNOWN,
    UUID,
    UUID_ARRAY,
    VARBIT,
    VARBIT_ARRAY,
    VARCHAR,
    VARCHAR_ARRAY,
    XID,
    XID8,
    XID8_ARRAY,
    XID_ARRAY,
    XML,
    XML_ARRAY,
)
from pgtail.values.ranges import (
    DATEMULTIRANGE,
    DATERANGE,
    INT4MULTIRANGE,
    INT4RANGE,
    INT8MULTIRANGE,
    INT8RANGE,
    NUMMULTIRANGE,
    NUMRANGE,
    TSMULTIRANGE,
    TSRANGE,
    TSTZMULTIRANGE,
    TSTZRANGE,
)
from pgtail.values.registry import UserType, UserTypes, converters, is_built_in, type_name
from pgtail.values.tojson import (
    JSON_ESCAPES,
    JsonKind,
    JsonWriter,
    decodes_text,
    dumps,
    json_default,
    text_json,
    text_json_column,
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
    "text_json_column",
    "to_text",
    "type_name",
]
# Also importable from here, as before the package was split.
__all__ += [
    "StrConverter",
    "UserTypes",
    "is_built_in",
    "JsonKind",
    "JsonWriter",
    "BOOL",
    "BYTEA",
    "CHAR",
    "NAME",
    "INT8",
    "INT2",
    "INT4",
    "TEXT",
    "OID",
    "XID",
    "CID",
    "JSON",
    "XML",
    "CIDR",
    "FLOAT4",
    "FLOAT8",
    "UNKNOWN",
    "MACADDR8",
    "MONEY",
    "MACADDR",
    "INET",
    "BPCHAR",
    "VARCHAR",
    "DATE",
    "TIME",
    "TIMESTAMP",
    "TIMESTAMPTZ",
    "INTERVAL",
    "TIMETZ",
    "BIT",
    "VARBIT",
    "NUMERIC",
    "REFCURSOR",
    "UUID",
    "PG_LSN",
    "TSVECTOR",
    "JSONB",
    "XID8",
    "BOOL_ARRAY",
    "BYTEA_ARRAY",
    "CHAR_ARRAY",
    "NAME_ARRAY",
    "INT2_ARRAY",
    "INT4_ARRAY",
    "TEXT_ARRAY",
    "XID_ARRAY",
    "CID_ARRAY",
    "BPCHAR_ARRAY",
    "VARCHAR_ARRAY",
    "INT8_ARRAY",
    "FLOAT4_ARRAY",
    "FLOAT8_ARRAY",
    "OID_ARRAY",
    "MACADDR_ARRAY",
    "INET_ARRAY",
    "CIDR_ARRAY",
    "JSON_ARRAY",
    "XML_ARRAY",
    "MACADDR8_ARRAY",
    "MONEY_ARRAY",
    "DATE_ARRAY",
    "TIME_ARRAY",
    "TIMESTAMP_ARRAY",
    "TIMESTAMPTZ_ARRAY",
    "INTERVAL_ARRAY",
    "TIMETZ_ARRAY",
    "BIT_ARRAY",
    "VARBIT_ARRAY",
    "NUMERIC_ARRAY",
    "REFCURSOR_ARRAY",
    "UUID_ARRAY",
    "PG_LSN_ARRAY",
    "TSVECTOR_ARRAY",
    "JSONB_ARRAY",
    "XID8_ARRAY",
    "INT4RANGE",
    "INT8RANGE",
    "NUMRANGE",
    "DATERANGE",
    "TSRANGE",
    "TSTZRANGE",
    "INT4MULTIRANGE",
    "INT8MULTIRANGE",
    "NUMMULTIRANGE",
    "DATEMULTIRANGE",
    "TSMULTIRANGE",
    "TSTZMULTIRANGE",
]
