"""Converters of inet, cidr, macaddr and macaddr8, from both wire formats; ends in this
family's registration table.

The binary forms print as PostgreSQL prints the text forms (IPv6 zero runs, embedded IPv4,
"/n" on inet only when not a full host mask), so both formats give the same str.
"""

from __future__ import annotations

import struct

from pgtail.values.base import Converter, TypeEntry, decode_utf8, identity_str, type_entry
from pgtail.values.oids import (
    CIDR,
    CIDR_ARRAY,
    INET,
    INET_ARRAY,
    MACADDR,
    MACADDR8,
    MACADDR8_ARRAY,
    MACADDR_ARRAY,
)

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


def _mac_binary(value: bytes) -> str:
    return value.hex(":")


# --- registration ------------------------------------------------------------------------

TYPES: dict[int, TypeEntry] = {
    INET: type_entry("inet", INET_ARRAY, identity_str, _make_inet_binary(False), decode_utf8),
    CIDR: type_entry("cidr", CIDR_ARRAY, identity_str, _make_inet_binary(True), decode_utf8),
    MACADDR: type_entry("macaddr", MACADDR_ARRAY, identity_str, _mac_binary, decode_utf8),
    MACADDR8: type_entry("macaddr8", MACADDR8_ARRAY, identity_str, _mac_binary, decode_utf8),
}
