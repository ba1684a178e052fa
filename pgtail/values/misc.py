"""Converters of bit and varbit, pg_lsn and tsvector, from both wire formats: built-in types
of no larger family. Ends in this family's registration table.
"""

from __future__ import annotations

import struct

from pgtail.values.base import TypeEntry, decode_utf8, identity_str, type_entry
from pgtail.values.oids import (
    BIT,
    BIT_ARRAY,
    PG_LSN,
    PG_LSN_ARRAY,
    TSVECTOR,
    TSVECTOR_ARRAY,
    VARBIT,
    VARBIT_ARRAY,
)

_I32 = struct.Struct(">i")

_U64 = struct.Struct(">Q")


def _bit_binary(value: bytes) -> str:
    (length,) = _I32.unpack_from(value)
    data = value[4:]
    if length == 0:
        return ""
    return bin(int.from_bytes(data, "big"))[2:].zfill(len(data) * 8)[:length]


def _lsn_binary(value: bytes) -> str:
    (lsn,) = _U64.unpack(value)
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


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


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    # A bare bit in a cast means bit(1); the quoted type name takes any length.
    BIT: type_entry('"bit"', BIT_ARRAY, identity_str, _bit_binary, decode_utf8),
    VARBIT: type_entry("bit varying", VARBIT_ARRAY, identity_str, _bit_binary, decode_utf8),
    PG_LSN: type_entry("pg_lsn", PG_LSN_ARRAY, identity_str, _lsn_binary, decode_utf8),
    TSVECTOR: type_entry("tsvector", TSVECTOR_ARRAY, identity_str, _tsvector_binary, decode_utf8),
}
