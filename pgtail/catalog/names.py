"""Names as a user writes them: ``[schema.]table [(col, ...)]`` with PostgreSQL's
identifier rules, single names, and the lexical guard on a ``--where`` row filter.

Pure: nothing here talks to the server. Quoting for display is `pgtail.sqlnames`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pgtail.errors import ConfigurationError
from pgtail.sqlnames import quote_ident

# the operations a publication publishes, in PostgreSQL's order
OPERATIONS = ("insert", "update", "delete", "truncate")

_UNQUOTED_STOP = set(' \t\n."(),')


@dataclass(frozen=True, slots=True)
class TableSpec:
    """``schema.table (col, ...)`` as the user wrote it, after SQL identifier rules."""

    schema: str | None
    name: str
    columns: tuple[str, ...] | None = None

    def display(self) -> str:
        base = quote_ident(self.name)
        if self.schema is not None:
            base = f"{quote_ident(self.schema)}.{base}"
        if self.columns is not None:
            base += " (" + ", ".join(quote_ident(c) for c in self.columns) + ")"
        return base


def parse_ident(text: str, pos: int) -> tuple[str, int]:
    """One SQL identifier at ``pos`` (quoted with "" escapes, or unquoted and folded)."""
    n = len(text)
    while pos < n and text[pos].isspace():
        pos += 1
    if pos >= n:
        raise ConfigurationError(f"missing name in {text!r}")
    if text[pos] == '"':
        out: list[str] = []
        pos += 1
        while True:
            end = text.find('"', pos)
            if end < 0:
                raise ConfigurationError(f"unterminated quoted name in {text!r}")
            out.append(text[pos:end])
            if end + 1 < n and text[end + 1] == '"':
                out.append('"')
                pos = end + 2
                continue
            pos = end + 1
            break
        name = "".join(out)
        if not name:
            raise ConfigurationError(f'empty quoted name "" in {text!r}')
        return name, pos
    start = pos
    while pos < n and text[pos] not in _UNQUOTED_STOP:
        pos += 1
    if pos == start:
        raise ConfigurationError(f"expected a name at position {start + 1} of {text!r}")
    word = text[start:pos]
    # PostgreSQL folds unquoted identifiers to lower case (ASCII only)
    return "".join(c.lower() if "A" <= c <= "Z" else c for c in word), pos


def skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def parse_table_spec(text: str, *, allow_columns: bool = True) -> TableSpec:
    """Parse ``[schema.]table [(col, ...)]`` with PostgreSQL identifier rules.

    ``'"My Schema"."Tab.le" (id, "Total")'`` -> schema ``My Schema``, table ``Tab.le``,
    columns ``id``, ``Total``. Unquoted names fold to lower case, as in SQL.
    """
    first, pos = parse_ident(text, 0)
    pos = skip_space(text, pos)
    schema: str | None = None
    name = first
    if pos < len(text) and text[pos] == ".":
        schema = first
        name, pos = parse_ident(text, pos + 1)
        pos = skip_space(text, pos)
    columns: tuple[str, ...] | None = None
    if pos < len(text) and text[pos] == "(":
        if not allow_columns:
            raise ConfigurationError(f"a column list is not allowed here: {text!r}")
        cols: list[str] = []
        pos += 1
        while True:
            col, pos = parse_ident(text, pos)
            cols.append(col)
            pos = skip_space(text, pos)
            if pos < len(text) and text[pos] == ",":
                pos += 1
                continue
            if pos < len(text) and text[pos] == ")":
                pos = skip_space(text, pos + 1)
                break
            raise ConfigurationError(
                f"expected ',' or ')' in the column list of {text!r}",
                hint='write it as schema.table(col1, col2); quote odd names: "My Col"',
            )
        columns = tuple(cols)
    if pos != len(text):
        raise ConfigurationError(
            f"unexpected {text[pos:]!r} in table name {text!r}",
            hint='write schema.table or schema.table(col1, col2); quote odd names: "My Table"',
        )
    return TableSpec(schema, name, columns)


def parse_name(text: str) -> str:
    """One SQL identifier (e.g. a schema or index name), quoted or unquoted."""
    name, pos = parse_ident(text, 0)
    if skip_space(text, pos) != len(text):
        raise ConfigurationError(f"unexpected {text[pos:]!r} in name {text!r}")
    return name


def check_row_filter(expr: str) -> str:
    """Make sure a ``--where`` expression cannot leave the ``WHERE (...)`` it is put in.

    The expression is SQL by nature and goes into the statement as-is, so it is scanned
    with PostgreSQL's lexical rules: string literals ('', E'', $tag$), quoted names and
    parentheses are tracked; a semicolon, a comment or a parenthesis that closes more
    than it opened is refused. What remains is one expression, which the server parses.
    """
    text = expr.strip()
    if not text:
        raise ConfigurationError("empty --where row filter")
    depth = 0
    pos = 0
    n = len(text)
    while pos < n:
        ch = text[pos]
        if ch == "'":
            escapes = (
                pos > 0
                and text[pos - 1] in "eE"
                and (pos == 1 or not (text[pos - 2].isalnum() or text[pos - 2] == "_"))
            )
            pos = _skip_quoted(text, pos, "'", backslash=escapes)
            continue
        if ch == '"':
            pos = _skip_quoted(text, pos, '"', backslash=False)
            continue
        if ch == "$":
            match = re.match(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$", text[pos:])
            if match and not (pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] == "_")):
                tag = match.group(0)
                end = text.find(tag, pos + len(tag))
                if end < 0:
                    raise ConfigurationError(f"unterminated {tag} string in --where {expr!r}")
                pos = end + len(tag)
                continue
        if ch == ";":
            raise ConfigurationError(
                f"--where must be one expression; ';' is not allowed: {expr!r}"
            )
        if text.startswith("--", pos) or text.startswith("/*", pos):
            raise ConfigurationError(f"comments are not allowed in --where: {expr!r}")
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ConfigurationError(
                    f"unbalanced ')' in --where {expr!r}",
                    hint="the row filter must be a single boolean expression",
                )
        pos += 1
    if depth != 0:
        raise ConfigurationError(f"unbalanced '(' in --where {expr!r}")
    return text


def _skip_quoted(text: str, pos: int, quote: str, *, backslash: bool) -> int:
    pos += 1
    while pos < len(text):
        ch = text[pos]
        if backslash and ch == "\\":
            pos += 2
            continue
        if ch == quote:
            if pos + 1 < len(text) and text[pos + 1] == quote:
                pos += 2
                continue
            return pos + 1
        pos += 1
    raise ConfigurationError(f"unterminated {quote} quote in --where {text!r}")


def split_names(value: str) -> tuple[str, ...]:
    """A comma-separated list of names (as in ``publication_names``); stops at junk."""
    names: list[str] = []
    pos = 0
    while pos < len(value):
        try:
            name, pos = parse_ident(value, pos)
        except ConfigurationError:
            break
        names.append(name)
        pos = skip_space(value, pos)
        if pos < len(value) and value[pos] == ",":
            pos += 1
    return tuple(names)
