"""A JSON columns line with a tail (`pgtail.render.jsonl.row_encoders`' ``text_tail``):
after the layout's fields, the row's values as delimited fields, so a reader can type
them without parsing the JSON (`pgtail.spark.text_rows`, with Arrow's CSV reader).

The tail: `TAIL_SEPARATOR` before each value, a newline at the end. A value is the
server's text (a column flagged True) or the value's JSON, as the row's JSON holds it
(the others); `TAIL_NULL` for NULL. The row is the new one, or the old row (or key:
the other columns NULL) of a delete. A line where a value holds a separator, newline,
carriage return or `TAIL_ESCAPE` is written with each of them preceded by `TAIL_ESCAPE`
(`escaped_line`; Arrow's escaping: the next character as it is).

Generated source (`with_tail`, `tailed_source`) and its hand-written twin (`LoopTail`)
give the same bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from pgtail.render.jsonl_code import column_code
from pgtail.values import JsonKind

TAIL_SEPARATOR = b"\x1f"  # before each field of the tail (and between the layout's)
TAIL_NULL = b"\x00"  # NULL: PostgreSQL text never holds a NUL, and JSON escapes it
TAIL_ESCAPE = b"\x1b"
SPECIALS = b"\n\r\x1b\x1f"  # what a value may not hold unescaped in a tailed line
_SPECIAL = re.compile(rb"([\n\r\x1b\x1f])")

Function = tuple[str, list[str], bytes, list[str]]  # `row_encoders`' (name, body, template, values)


def specials(template: bytes) -> int:
    """How many of `SPECIALS` a line of ``template`` holds when no value holds one: its
    separators and its newline. (Its other text is JSON, whose names never hold one.)"""
    return len(template) - len(template.translate(None, SPECIALS))


def escape_field(value: bytes) -> bytes:
    """``value`` with `TAIL_ESCAPE` before each separator, newline, carriage return and
    escape it holds (Arrow's CSV escaping: the next character as it is)."""
    return _SPECIAL.sub(b"\x1b\\1", value)


def escaped_line(template: bytes, arguments: tuple[Any, ...]) -> bytes:
    """``template % arguments`` with each value that is bytes escaped (`escape_field`)."""
    return template % tuple(
        escape_field(value) if type(value) is bytes else value for value in arguments
    )


def with_tail(
    functions: list[Function],
    kinds: list[tuple[JsonKind, Callable[[bytes], Any]]],
    text_tail: Sequence[bool],
    checked: set[int],
    namespace: dict[str, Any],
) -> list[Function]:
    """``functions`` with the row's tail: the plain ones' template gets a field per column
    (the server's text ``v{i}``, or ``j{i}`` in the column's JSON format), the nullable
    ones' a ``%b`` per column and the lines that make their arguments ``t{i}``.

    The plain ones look for what needs escaping only where it can be (`tailed_source`):
    in the values ``checked`` (whose check for what JSON escapes set ``u``) and in the
    other values written as their text. (A value written as its JSON never holds one.)"""
    if len(text_tail) != len(kinds):
        raise ValueError(f"text_tail: {len(text_tail)} flags for {len(kinds)} columns")
    namespace.update(_NUL=TAIL_NULL, _SPECIALS=SPECIALS, _escaped_line=escaped_line)
    plain: list[bytes] = []
    plain_args: list[str] = []
    lines: list[str] = []
    for i, ((kind, _), text) in enumerate(zip(kinds, text_tail, strict=True)):
        if text:
            plain += [b"%b"]
            plain_args += [f"v{i}"]
        else:
            plain += [column_code(i, kind)[2][1:]]  # ":%d" -> "%d", ':"%b"' -> '"%b"'
            plain_args += [f"j{i}"]
        lines.append(f"    t{i} = _NUL if v{i} is None else {'v' if text else 'j'}{i}")
    piece = b"".join(TAIL_SEPARATOR + p for p in plain) + b"\n"
    nullable_piece = b"".join(TAIL_SEPARATOR + b"%b" for _ in kinds) + b"\n"
    nullable_args = [f"t{i}" for i in range(len(kinds))]
    unchecked = [f"v{i}" for i, text in enumerate(text_tail) if text and i not in checked]
    looks = ["    x = " + " + ".join(unchecked)] if unchecked else []
    looks += ["    u = 0"] if not checked else []
    needs = "u or len(x.translate(None, _SPECIALS)) != len(x)" if unchecked else "u"
    tailed = []
    for fname, body, template, values in functions:
        if "plain" in fname:
            code = [*body, *looks, f"    if {needs}:"]
            tailed.append((fname, code, template + piece, [*values, *plain_args]))
        else:
            tailed.append(
                (fname, [*body, *lines], template + nullable_piece, [*values, *nullable_args])
            )
    return tailed


def tailed_source(
    fname: str, body: list[str], template: bytes, arguments: str, namespace: dict[str, Any]
) -> list[str]:
    """The source of a function whose line has a tail: ``body``, the line, and the check
    that no value needs escaping (one ``bytes.translate``, a C pass that costs a third of
    a regular expression search), else the escaped line. A plain function's body ends
    in ``if <a value may need it>:`` (`with_tail`): the check is made only then."""
    namespace[f"{fname}_specials"] = specials(template)
    check = [
        f"    line = {fname}_line % ({arguments})",
        f"    if len(line) - len(line.translate(None, _SPECIALS)) == {fname}_specials:",
        "        return line",
        f"    return _escaped_line({fname}_line, ({arguments}))",
    ]
    if body and body[-1].startswith("    if "):
        return [
            *body,
            *("    " + line for line in check),
            f"    return {fname}_line % ({arguments})",
        ]
    return [*body, *check]


class LoopTail:
    """`with_tail`'s lines without generated code, for `row_encoders`' hand-written twin:
    the same template and arguments, the same check."""

    def __init__(self, template: bytes, text_tail: Sequence[bool], nullable: bool) -> None:
        self.template = template
        self.text_tail = tuple(text_tail)
        self.nullable = nullable
        self.specials = specials(template)

    def line(self, arguments: tuple[Any, ...], values: tuple[Any, ...], row: list[Any]) -> bytes:
        """The line of ``arguments`` (the layout's), then the tail of ``values`` (the
        server's text, None for NULL) and ``row`` (the same values as the JSON part's
        arguments)."""
        both = zip(self.text_tail, values, row, strict=True)
        if self.nullable:
            tail = [TAIL_NULL if v is None else v if text else json for text, v, json in both]
        else:
            tail = [v if text else json for text, v, json in both]
        arguments += tuple(tail)
        line = self.template % arguments
        if len(line) - len(line.translate(None, SPECIALS)) == self.specials:
            return line
        return escaped_line(self.template, arguments)
