"""The registry: type OID -> (text converter, binary converter), and a built-in type's SQL
name.

It gathers the registration tables of the type families (numbers, strings, jsontypes,
network, misc, datetimes, then ranges over them), gives arrays their element types, and
answers for types that are not built in from what pg_type says of them (`UserType`,
looked up by the layer that owns connections and handed down as data). It imports the
families; they never import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from pgtail.values.arrays import array_binary_of, make_text_array
from pgtail.values.arrays import register as _register_arrays
from pgtail.values.base import (
    Converter,
    StrConverter,
    TypeEntry,
    decode_utf8,
    hex_text,
    identity_str,
)
from pgtail.values.datetimes import TYPES as _DATETIME_TYPES
from pgtail.values.jsontypes import ELEMENT_BINARY as _JSON_ELEMENT_BINARY
from pgtail.values.jsontypes import TYPES as _JSON_TYPES
from pgtail.values.misc import TYPES as _MISC_TYPES
from pgtail.values.network import TYPES as _NETWORK_TYPES
from pgtail.values.numbers import TYPES as _NUMBER_TYPES
from pgtail.values.ranges import range_types
from pgtail.values.strings import TYPES as _STRING_TYPES

# Built-in type OID -> its entry; ranges after the types of their bounds.
BUILTIN_TYPES: dict[int, TypeEntry] = {
    **_NUMBER_TYPES,
    **_STRING_TYPES,
    **_JSON_TYPES,
    **_NETWORK_TYPES,
    **_MISC_TYPES,
    **_DATETIME_TYPES,
}
BUILTIN_TYPES.update(range_types(BUILTIN_TYPES))
# Array OID -> element OID.
BUILTIN_ARRAYS: dict[int, int] = {
    t.array_oid: oid for oid, t in BUILTIN_TYPES.items() if t.array_oid
}
_register_arrays(BUILTIN_TYPES)
_register_arrays(  # (their elements fall back to hex)
    {
        oid: BUILTIN_TYPES[oid]._replace(binary=binary)
        for oid, binary in _JSON_ELEMENT_BINARY.items()
    }
)

_cache: dict[tuple[int, int], tuple[Converter, Converter]] = {}


class UserType(NamedTuple):
    """What pg_type says of a type that is not built in, for `converters`."""

    kind: str  # typtype: "e" enum, "d" domain, "b" base, "c" composite, "r"/"m" range, ...
    element: int = 0  # an array type's element type (typelem where typcategory = 'A')
    base: int = 0  # a domain's base type (typbasetype)


UserTypes = Mapping[int, UserType]


def is_built_in(type_oid: int) -> bool:
    """A type `converters` knows without asking the server (see UserType)."""
    return type_oid in BUILTIN_TYPES or type_oid in BUILTIN_ARRAYS


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
    known = BUILTIN_TYPES.get(type_oid)
    if known is not None:
        return known.text, known.binary, known.text_str
    if type_oid in BUILTIN_ARRAYS:
        element = BUILTIN_TYPES[BUILTIN_ARRAYS[type_oid]]
        binary = array_binary_of((BUILTIN_ARRAYS[type_oid],))
        return make_text_array(element.text_str), binary, identity_str
    info = user_types.get(type_oid)
    if info is None or depth > _USER_DEPTH:
        return decode_utf8, hex_text, identity_str
    if info.kind == "e":  # enum_send sends the label's text
        return decode_utf8, decode_utf8, identity_str
    if info.kind == "d" and info.base:  # (a type modifier changes no converter)
        return _converters_of(info.base, user_types, depth + 1)
    if info.element:
        _, element_binary, element_str = _converters_of(info.element, user_types, depth + 1)
        binary = array_binary_of(_sent_elements(info.element, user_types), element_binary)
        return make_text_array(element_str), binary, identity_str
    return decode_utf8, hex_text, identity_str


def _sent_elements(type_oid: int, user_types: UserTypes) -> list[int]:
    """The element types a binary array of ``type_oid`` may name: the type, and for a
    domain its base types (an array built by a cast names the base)."""
    oids = [type_oid]
    for _ in range(_USER_DEPTH):
        info = user_types.get(type_oid)
        if info is None or info.kind != "d" or not info.base:
            break
        type_oid = info.base
        oids.append(type_oid)
    return oids


def type_name(type_oid: int) -> str | None:
    """The SQL name of a built-in type for a cast ("integer", "text[]"), or None."""
    known = BUILTIN_TYPES.get(type_oid)
    if known is not None:
        return known.name
    element = BUILTIN_ARRAYS.get(type_oid)
    if element is not None:
        return BUILTIN_TYPES[element].name + "[]"
    return None
