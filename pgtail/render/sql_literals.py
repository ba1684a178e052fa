"""SQL literals of column values, and the INSERT builders that inline them.

`quote_literal` writes a string constant (an escape string ``E'...'`` when it holds a
backslash or a control character, so a statement stays on one line); `column_literal`
gives the function that writes a value of one column: integers, booleans and finite
numerics plainly, text types as a quoted literal, other built-in types as
``'<text>'::<type>``, types without a built-in name uncast (see `pgtail.render.sql` for
the whole mapping). `insert_builder` and `text_insert_builders` build one table's INSERT
statements, generated (`pgtail._codegen`) so the common cases take no call per value.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from pgtail import _codegen
from pgtail.changes import Column, InsertEncoder, LargeEncoder
from pgtail.render.large import large_encoder, utf8_chunks
from pgtail.values import Converter, decodes_text, to_text, type_name

# Characters that make a literal an escape string (E'...'): backslash, because a
# server with standard_conforming_strings = off would read it as an escape, and
# control characters, written as escapes so every statement stays on one line.
_NEEDS_ESCAPE = re.compile(r"[\\\x00-\x1f\x7f]")
# the other control characters, written \xHH once backslashes are doubled (rare: one
# regex pass over text that holds any, none over text that holds none)
_OTHER_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LINE_CONTROLS = ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t")
_PLAIN_NUMERIC = re.compile(r"-?[0-9]+(?:\.[0-9]+)?\Z")


def quote_literal(text: str) -> str:
    """``text`` as an SQL string constant.

    ``'...'`` with quotes doubled; when the text holds a backslash or a control
    character, an escape string ``E'...'`` (backslashes doubled, controls as
    ``\\n``/``\\r``/``\\t``/``\\xHH``), which reads the same whatever
    ``standard_conforming_strings`` is and keeps the statement on one line.
    PostgreSQL text cannot hold NUL; a NUL raises ValueError.
    """
    if _NEEDS_ESCAPE.search(text) is None:
        return "'" + text.replace("'", "''") + "'"
    if "\x00" in text:
        raise ValueError("PostgreSQL text cannot contain NUL (0x00) characters")
    return "".join(("E'", _escaped(text), "'"))  # (one copy of a large text, not two)


def _escaped(text: str) -> str:
    """The inside of an escape string ``E'...'`` of ``text`` (no NUL in it); each
    character is escaped by itself, so the escapes of a text's parts joined are the
    whole's (`quote_literal_pieces`)."""
    # str.replace copies at memory speed, where str.translate took ~0.1 us a character
    # (a bytea's "\\x<hex>" holds one backslash: 14 s for 50 MB)
    escaped = text.replace("\\", "\\\\").replace("'", "''")
    for control, escape in _LINE_CONTROLS:
        if control in escaped:
            escaped = escaped.replace(control, escape)
    # isprintable: a fast test that none is left (False also for some non-ASCII, which
    # the regex then passes)
    if not escaped.isprintable() and _OTHER_CONTROL.search(escaped) is not None:
        escaped = _OTHER_CONTROL.sub(_hex_escape, escaped)
    return escaped


# quote_literal's test on the UTF-8 bytes of a text (these are ASCII: in UTF-8 their
# bytes stand only for themselves)
_NEEDS_ESCAPE_BYTES = re.compile(rb"[\\\x00-\x1f\x7f]")
_NUL_BYTE = re.compile(rb"\x00")


def quote_literal_pieces(value: memoryview, chunks: Iterator[memoryview]) -> Iterator[bytes] | None:
    """``quote_literal(value.decode("utf-8", "replace")).encode()`` in pieces, one a
    chunk of ``value`` (``chunks``: its views, each cut before a character), made as
    they are taken, so a large text is never copied whole; None when it holds a NUL
    (`quote_literal` raises)."""
    if _NEEDS_ESCAPE_BYTES.search(value) is None:
        return _plain_pieces(chunks)
    if _NUL_BYTE.search(value) is not None:
        return None
    return _escaped_pieces(chunks)


def _plain_pieces(chunks: Iterator[memoryview]) -> Iterator[bytes]:
    yield b"'"
    for chunk in chunks:
        text = chunk.tobytes()
        if b"'" in text or not text.isascii():
            text = text.decode("utf-8", "replace").replace("'", "''").encode()
        yield text
    yield b"'"


def _escaped_pieces(chunks: Iterator[memoryview]) -> Iterator[bytes]:
    yield b"E'"
    for chunk in chunks:
        text = chunk.tobytes()
        if not text.isascii():
            yield _escaped(text.decode("utf-8", "replace")).encode()
            continue
        # ASCII: `_escaped` on the bytes (a third faster than on a str)
        text = text.replace(b"\\", b"\\\\").replace(b"'", b"''")
        for control, escape in _LINE_CONTROL_BYTES:
            if control in text:
                text = text.replace(control, escape)
        if len(text.translate(None, _OTHER_CONTROL_BYTES)) != len(text):
            text = _OTHER_CONTROL.sub(_hex_escape, text.decode()).encode()
        yield text
    yield b"'"


_LINE_CONTROL_BYTES = tuple((c.encode(), e.encode()) for c, e in _LINE_CONTROLS)
_OTHER_CONTROL_BYTES = bytes([*range(1, 9), 11, 12, *range(14, 32), 127])


def _hex_escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02X}"


def comment_string(text: str) -> str:
    """A user-controlled string for a ``--`` comment: JSON-quoted, so newlines,
    carriage returns and other control characters are escapes."""
    return json.dumps(text, ensure_ascii=False)


# --- literals per column type -------------------------------------------------

_INT_OIDS = frozenset({20, 21, 23})  # int8, int2, int4
_BOOL_OID = 16
_NUMERIC_OID = 1700
# text, varchar, name, and (uncast, see module doc) bpchar: a quoted literal is enough
_TEXT_OIDS = frozenset({25, 1043, 19, 1042})
# types whose bare SQL name implies a length of 1, or that need quoting as a name:
# "char", bpchar, bit and their arrays; written as uncast literals
_UNCAST_OIDS = frozenset({18, 1002, 1042, 1014, 1560, 1561})
# types without an equality operator, compared through a cast in a FULL identity WHERE:
# json (and json[]) as jsonb, xml and the geometric types (and their arrays) as text
COMPARE_AS = {114: "jsonb", 199: "jsonb[]", 142: "text", 143: "text[]"}
COMPARE_AS.update(dict.fromkeys((600, 601, 602, 603, 604, 628, 718), "text"))
COMPARE_AS.update(dict.fromkeys((1017, 1018, 1019, 1020, 1027, 629, 719), "text[]"))

Literal = Callable[[Any], str]
_Fragment = orjson.Fragment
_dumps = orjson.dumps  # of a Fragment: its JSON text, as values.to_text gives it
_call: Any = operator.call  # call(f, x) == f(x): map() applies a list of functions in C


def _int_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if type(value) is int:
        return str(value)
    return quote_literal(to_text(value))


def _bool_literal(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "NULL"
    return quote_literal(to_text(value)) + "::boolean"


def text_literal(value: Any) -> str:
    if type(value) is str:
        if _NEEDS_ESCAPE.search(value) is None:
            return "'" + value.replace("'", "''") + "'"
        return quote_literal(value)
    if value is None:
        return "NULL"
    return quote_literal(to_text(value))


def _numeric_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if type(value) is str and _PLAIN_NUMERIC.match(value):
        return value
    if type(value) is int:
        return str(value)
    return quote_literal(to_text(value)) + "::numeric"


# one literal function per cast (a bounded set of built-in type names), so the INSERT
# builders below can recognise them and inline their common case
_CAST_LITERALS: dict[str, Literal] = {}
_CAST_SUFFIX: dict[Literal, str] = {}
_ARRAY_LITERALS: dict[str, Literal] = {}
_ARRAY_FNS: set[Literal] = set()


def _cast_literal(cast: str) -> Literal:
    found = _CAST_LITERALS.get(cast)
    if found is None:
        found = _CAST_LITERALS[cast] = _make_cast_literal(cast)
        _CAST_SUFFIX[found] = "::" + cast
    return found


def _make_cast_literal(cast: str) -> Literal:
    suffix = "::" + cast

    def literal(value: Any) -> str:
        kind = type(value)
        if kind is str:
            text: str = value
            if _NEEDS_ESCAPE.search(text) is None:
                return "'" + text.replace("'", "''") + "'" + suffix
            return quote_literal(text) + suffix
        if value is None:
            return "NULL"
        if kind is float:  # repr holds no quote or backslash; it reads back exactly
            return "'" + repr(value) + "'" + suffix
        if kind is _Fragment:
            return quote_literal(_dumps(value).decode("utf-8")) + suffix
        return quote_literal(to_text(value)) + suffix

    return literal


# array elements that need no quoting in an array literal (values.to_text quotes a
# subset of what this does not match; quoting more is still the same value)
_PLAIN_ELEMENT = re.compile(r'[^{}",\\\s]+\Z')


class _NotFlat(Exception):
    """An array element that is not a str, int or None (see `_array_text`)."""


def _array_element(element: Any) -> str:
    kind = type(element)
    if kind is str:
        text: str = element
        if _PLAIN_ELEMENT.match(text) is None or text.upper() == "NULL":
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return text
    if kind is int:
        return str(element)
    if element is None:
        return "NULL"
    raise _NotFlat


def _array_text(value: list[Any]) -> str:
    """``values.to_text`` of a list, with a fast path for flat lists of str / int."""
    try:
        # isalnum: non-empty and none of {}",\\ or white space, so _PLAIN_ELEMENT matches
        parts = [
            element
            if type(element) is str and element.isalnum() and element.upper() != "NULL"
            else _array_element(element)
            for element in value
        ]
    except _NotFlat:
        return to_text(value)
    return "{" + ",".join(parts) + "}"


def _array_literal(cast: str) -> Literal:
    found = _ARRAY_LITERALS.get(cast)
    if found is None:
        found = _ARRAY_LITERALS[cast] = _make_array_literal(cast)
        _CAST_SUFFIX[found] = "::" + cast
        _ARRAY_FNS.add(found)
    return found


def _make_array_literal(cast: str) -> Literal:
    suffix = "::" + cast

    def literal(value: Any) -> str:
        if type(value) is list:
            return quote_literal(_array_text(value)) + suffix
        if value is None:
            return "NULL"
        return quote_literal(to_text(value)) + suffix

    return literal


def column_literal(column: Column) -> Literal:
    """The function that writes a value of ``column`` as an SQL literal."""
    oid = column.type_oid
    if oid in _INT_OIDS:
        return _int_literal
    if oid == _BOOL_OID:
        return _bool_literal
    if oid == _NUMERIC_OID:
        return _numeric_literal
    if oid in _TEXT_OIDS or oid in _UNCAST_OIDS:
        return text_literal
    cast = type_name(oid)
    if cast is None:
        return text_literal
    if cast.endswith("[]"):
        return _array_literal(cast)
    return _cast_literal(cast)


def literal(value: Any, column: Column) -> str:
    """``value`` (JSON-ready, see `pgtail.values`) of ``column`` as an SQL literal."""
    return column_literal(column)(value)


# --- INSERT builders ------------------------------------------------------------

# Inline forms of the literal functions' common case, for the generated builders
# below; each falls back to the function itself (``L{i}``), so the text is the same.
# A str needs no escape string when it holds no backslash and isprintable() (which is
# False for every control character, _NEEDS_ESCAPE's other members).
_PLAIN_STR = "type({x}) is str and BS not in {x} and {x}.isprintable()"
_INLINE: dict[Literal, str] = {
    _int_literal: "str({x}) if type({x}) is int else L{i}({x})",
    _bool_literal: "T if {x} is True else F if {x} is False else L{i}({x})",
    text_literal: f"Q + {{x}}.replace(Q, QQ) + Q if {_PLAIN_STR} else L{{i}}({{x}})",
    _numeric_literal: "{x} if type({x}) is str and NUM({x}) else L{i}({x})",
}
_INLINE_CAST = (
    f"Q + {{x}}.replace(Q, QQ) + Q + S{{i}} if {_PLAIN_STR} else "
    "Q + t{i}.replace(Q, QQ) + Q + S{i} if type({x}) is FRAG"
    " and BS not in (t{i} := DUMPS({x}).decode()) and t{i}.isprintable() else L{i}({x})"
)
# a float's repr holds no quote or backslash (the cast literal's own float branch)
_INLINE_FLOAT = "Q + repr({x}) + Q + S{i} if type({x}) is float else L{i}({x})"
# bytea's hex text, ``\x`` and letters and digits (none a quote, a backslash or a
# control character): its escape string, its one backslash doubled (what
# `quote_literal` makes of it, without its regex and replaces)
_INLINE_BYTEA = (
    "EBS + {x}[1:] + Q + S{i} if type({x}) is str and {x}[:2] == BX and {x}[2:].isalnum()"
    " else L{i}({x})"
)
_FLOAT_CASTS = frozenset({"double precision", "real"})
_INLINE_ARRAY = (
    "Q + t{i}.replace(Q, QQ) + Q + S{i} if type({x}) is list"
    " and BS not in (t{i} := ARRAY({x})) and t{i}.isprintable() else L{i}({x})"
)


def _literal_lines(fns: list[Literal], namespace: dict[str, Any], target: str = "v") -> list[str]:
    """``<target><i> = <the literal of x<i>>`` for each column, inline for the common
    cases (target ``x``: the literal takes the value's place, which is freed then)."""
    lines = []
    for i, fn in enumerate(fns):
        namespace[f"L{i}"] = fn
        template = _INLINE.get(fn)
        suffix = _CAST_SUFFIX.get(fn)
        if template is None and suffix is not None:
            namespace[f"S{i}"] = suffix
            if fn in _ARRAY_FNS:
                template = _INLINE_ARRAY
            elif suffix == "::bytea":
                template = _INLINE_BYTEA
            elif suffix[2:] in _FLOAT_CASTS:
                template = _INLINE_FLOAT
            else:
                template = _INLINE_CAST
        if template is None:
            template = "L{i}({x})"
        lines.append(f"    {target}{i} = " + template.format(x=f"x{i}", i=i))
    return lines


def _builder_namespace(head: str) -> dict[str, Any]:
    return {
        "HEAD": head,
        "BS": "\\",
        "Q": "'",
        "QQ": "''",
        "T": "true",
        "F": "false",
        "NUM": _PLAIN_NUMERIC.match,
        "FRAG": _Fragment,
        "DUMPS": _dumps,
        "ARRAY": _array_text,
        "BX": "\\x",
        "EBS": "E'\\\\",
    }


def insert_builder(head: str, fns: list[Literal]) -> Callable[[Any], str]:
    """A function of a row's ``values()`` giving the INSERT statement: ``head``, the
    literal of each value by ``fns``, ``);``. Generated so that the common cases take
    no call per value; its source holds only indexes and names bound below, never a
    column name or value. Without generated code, a loop that calls each function."""
    if not _codegen.enabled():

        def build_loop(values: Any) -> str:
            return head + ", ".join(map(_call, fns, values)) + ");\n"

        return build_loop
    namespace = _builder_namespace(head)
    lines = _literal_lines(fns, namespace)
    args = "".join(f"x{i}, " for i in range(len(fns)))
    values = ", ".join(f"{{v{i}}}" for i in range(len(fns)))
    source = (
        f"def build(values):\n    ({args}) = values\n"
        + "".join(line + "\n" for line in lines)
        + f"    return f'{{HEAD}}{values});\\n'\n"
    )
    (build,) = _codegen.define_shared(source, ("build",), "SQL insert", namespace)
    return build


def text_insert_builders(
    head: str, fns: list[Literal], converters: Sequence[Converter]
) -> tuple[InsertEncoder, InsertEncoder]:
    """`insert_builder` for the text values of an Insert: ``encode(seq, v0, ..., vN)``
    converts each value (inline where the converter is a plain decode) and gives the
    statement's bytes; one function for rows without NULLs, one for rows with them.
    Without generated code, loops that call each converter and literal function."""
    if not _codegen.enabled():
        return _loop_text_insert_builders(head, fns, converters)
    namespace = _builder_namespace(head)
    # each literal replaces its value (x<i>): a large value's text is freed once quoted
    lines = _literal_lines(fns, namespace, "x")
    args = "".join(f", v{i}" for i in range(len(fns)))
    values = ", ".join(f"{{x{i}}}" for i in range(len(fns)))
    converted = []
    for i, convert in enumerate(converters):
        namespace[f"C{i}"] = convert
        converted.append(
            f'v{i}.decode("utf-8", "replace")' if decodes_text(convert) else f"C{i}(v{i})"
        )
    tail = [*lines, f"    return f'{{HEAD}}{values});\\n'.encode('utf-8')"]
    source = [
        f"def plain(seq{args}):",
        *(f"    x{i} = {expr}" for i, expr in enumerate(converted)),
        *tail,
        f"def with_nulls(seq{args}):",
        *(f"    x{i} = None if v{i} is None else {expr}" for i, expr in enumerate(converted)),
        *tail,
    ]
    plain, with_nulls = _codegen.define_shared(
        "\n".join(source), ["plain", "with_nulls"], "SQL text insert", namespace
    )
    return plain, with_nulls


def large_literals_encoder(
    with_nulls: InsertEncoder, fns: list[Literal], converters: Sequence[Converter]
) -> LargeEncoder | None:
    """`InsertEncoders.large` of the INSERT statements of `text_insert_builders`: a large
    value of a column whose literal is `quote_literal` of its text (text types, and
    built-in types written ``'<text>'::<type>``, bytea among them) written in pieces."""
    writers = {
        i: _literal_pieces
        for i, (fn, convert) in enumerate(zip(fns, converters, strict=True))
        if decodes_text(convert)
        and (fn is text_literal or (fn in _CAST_SUFFIX and fn not in _ARRAY_FNS))
    }
    if not writers:
        return None
    return large_encoder(with_nulls, _sql_string, writers)


def _literal_pieces(value: memoryview) -> Iterator[bytes] | None:
    return quote_literal_pieces(value, utf8_chunks(value))


def _sql_string(token: bytes) -> bytes:
    return b"'" + token + b"'"


def _loop_text_insert_builders(
    head: str, fns: list[Literal], converters: Sequence[Converter]
) -> tuple[InsertEncoder, InsertEncoder]:
    """`text_insert_builders` without generated code: the same statements, by loops."""

    def plain(seq: int, *values: bytes) -> bytes:
        literals = [
            fn(convert(value)) for fn, convert, value in zip(fns, converters, values, strict=True)
        ]
        return (head + ", ".join(literals) + ");\n").encode("utf-8")

    def with_nulls(seq: int, *values: bytes | None) -> bytes:
        literals = [
            fn(None if value is None else convert(value))
            for fn, convert, value in zip(fns, converters, values, strict=True)
        ]
        return (head + ", ".join(literals) + ");\n").encode("utf-8")

    return plain, with_nulls


# the same inline literals for the UPDATE and DELETE builders (`pgtail.render.sql_rows`)
builder_namespace = _builder_namespace
literal_lines = _literal_lines
