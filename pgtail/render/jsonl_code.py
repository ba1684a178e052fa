"""The source `pgtail.render.jsonl.row_encoders` generates per column of a JSON lines
encoder: how each kind of value (`pgtail.values.text_json`) becomes its JSON from the
server's text, and the plain encoder's one check of all its strings. Shape only: the
source names columns by position, never by name.
"""

from __future__ import annotations

from pgtail.values import JsonKind

# a string longer than this that needs escaping is written by the nullable encoder
# (``return LARGE`` in the source: `row_encoders` puts the call there), with its quotes,
# rather than copied once more without them
LARGE_STRING = 1 << 20


def column_code(i: int, kind: JsonKind) -> tuple[list[str], list[str], bytes]:
    """`row_encoders`' source for column ``i`` of ``kind``: the lines that make ``j{i}``
    from ``v{i}`` in the plain encoder, those after the NULL test in the nullable one,
    and the column's format in the plain template."""
    value = f"v{i}"
    if kind == "int":
        # the server's text of an integer is its JSON, unless it is not canonical; one
        # of more than 19 characters may not fit 64 bits (no JSON reader takes it)
        return (
            [f"    j{i} = int({value})", f"    if len({value}) > 19:", f"        _int64(j{i})"],
            [
                f"    elif len(j{i}) > 19:",
                f"        j{i} = b'%d' % _int64(int(j{i}))",
                f"    elif not j{i}.isdigit() or (j{i}[0] == 48 and len(j{i}) > 1):",
                f"        j{i} = b'%d' % int(j{i})",
            ],
            b":%d",
        )
    if kind == "string":
        return (
            [f"    j{i} = {value}"],
            [
                f"    elif j{i}.isascii() and escapes(j{i}) is None:",
                f"        j{i} = b'\"' + j{i} + b'\"'",
                "    else:",
                f"        j{i} = w{i}(j{i})",
            ],
            b':"%b"',
        )
    if kind == "raw":
        # embedded as it is once orjson reads it as one JSON value (else the general
        # path decides: what orjson refuses and PostgreSQL takes, or a DecodeError)
        # (a shape orjson took before is not parsed again: see `JSON_SHAPE`)
        return (
            [
                f"    if {value}.translate(_shape) not in _shapes:",
                f"        _learn({value})",
                f"    j{i} = {value}",
            ],
            [f"    elif j{i}.translate(_shape) not in _shapes:", f"        _learn(j{i})"],
            b":%b",
        )
    if kind == "convert":
        return (
            [f"    j{i} = _dumps(c{i}({value}), default=_default)"],
            ["    else:", f"        j{i} = _dumps(c{i}(j{i}), default=_default)"],
            b":%b",
        )
    if kind == "utc_timestamp":
        # "D T+00" -> "DTT+00:00"; in plain its bytes are checked with the strings
        utc = "b'\"' + {x}[:-3].replace(b' ', b'T', 1) + b'+00:00\"'"
        convert = "_dumps(c{i}({x}), default=_default)"
        return (
            [
                f"    j{i} = {utc.format(x=value)} if {value}[-3:] == b'+00'"
                f" else {convert.format(i=i, x=value)}",
            ],
            [
                f"    elif j{i}[-3:] == b'+00' and j{i}.isascii() and escapes(j{i}) is None:",
                f"        j{i} = {utc.format(x=f'j{i}')}",
                f"    else:\n        j{i} = {convert.format(i=i, x=f'j{i}')}",
            ],
            b":%b",
        )
    return [f"    j{i} = w{i}({value})"], ["    else:", f"        j{i} = w{i}(j{i})"], b":%b"


def string_checks(strings: list[int], checked: list[int], flag: str | None = None) -> list[str]:
    """The plain encoder's one check of all string (and shortcut timestamp) values at
    once; per value only when it finds something JSON escapes (or non-ASCII, whose
    escaping orjson decides). ``flag``: a variable set to 1 when a value it checks
    holds something JSON escapes or non-ASCII (0 otherwise; see `checked_values`)."""
    if not strings and not checked:
        return []
    lines = [f"    {flag} = 0"] if flag and checked_values(strings, checked) else []
    indent = "    "
    if len(strings) + len(checked) > 1:
        lines += [
            "    s = " + " + ".join(f"v{i}" for i in [*strings, *checked]),
            "    if not s.isascii() or escapes(s) is not None:",
        ]
        indent += "    "
        lines += [f"{indent}{flag} = 1"] if flag else []
    for i in strings:
        lines += [
            f"{indent}if not v{i}.isascii() or escapes(v{i}) is not None:",
            *([f"{indent}    {flag} = 1"] if flag and indent == "    " else []),
            f"{indent}    if len(v{i}) > {LARGE_STRING}:",
            f"{indent}        return LARGE",
            f"{indent}    j{i} = w{i}(v{i})[1:-1]",
        ]
    for i in checked:  # the converter decides
        lines.append(f"{indent}j{i} = _dumps(c{i}(v{i}), default=_default)")
    return lines


def checked_values(strings: list[int], checked: list[int]) -> set[int]:
    """The columns `string_checks` looks at for what JSON escapes (every control
    character among it): the strings, and the timestamps checked with them."""
    return {*strings, *checked} if len(strings) + len(checked) > 1 else set(strings)
