"""UPDATE and DELETE statements of one table from its values' text, generated like the
INSERT builders (`pgtail.render.sql_literals.text_insert_builders`).

`SqlRenderer` writes an Update or Delete from its `Change` (`pgtail.render.sql`); these
builders write the same statements, byte for byte, straight from the text values the
server sent, for the assembler's quick lane (`pgtail.changes.fastpath`):

- `update_builders`: an Update that carries no old row (the key did not change; the
  table has a key: primary key or REPLICA IDENTITY USING INDEX):
  ``UPDATE t SET <the other columns> WHERE <key from the new row>;``;
- `key_delete_builder`: a Delete with its old key (``K``: the key's columns, the others
  sent as NULL): ``DELETE FROM t WHERE <key>;``;
- `full_delete_builders`: a Delete with the whole old row (REPLICA IDENTITY FULL):
  ``DELETE FROM t WHERE (tableoid, ctid) = (SELECT … WHERE <every column> LIMIT 1);``.

Each takes ``(seq, v0, ..., vN)``, every column's text (bytes) or None for NULL, and
gives the statement's bytes. Changes with an old row and a new one (a key change, FULL's
updates) and those with unchanged TOAST values take the general path. The source holds
only indexes; names, literals and casts are bound in its namespace
(`pgtail._codegen.define_shared`), so tables of one shape share compiled code. Without
generated code (``PGTAIL_NO_CODEGEN=1``), loops give the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pgtail import _codegen
from pgtail.changes import InsertEncoder
from pgtail.render.sql_literals import (
    Literal,
    _builder_namespace,
    _literal_lines,
    quote_literal,
)
from pgtail.values import Converter, decodes_text, to_text


def _converted(converters: Sequence[Converter], namespace: dict[str, Any]) -> list[str]:
    exprs = []
    for i, convert in enumerate(converters):
        namespace[f"C{i}"] = convert
        exprs.append(f'v{i}.decode("utf-8", "replace")' if decodes_text(convert) else f"C{i}(v{i})")
    return exprs


def _convert_lines(exprs: Sequence[str], with_nulls: bool) -> list[str]:
    if with_nulls:
        return [f"    x{i} = None if v{i} is None else {e}" for i, e in enumerate(exprs)]
    return [f"    x{i} = {e}" for i, e in enumerate(exprs)]


def _define(
    label: str,
    body: Callable[[bool], list[str]],
    names: Sequence[str],
    nulls: Sequence[bool],
    natts: int,
    namespace: dict[str, Any],
) -> list[Callable[..., Any]]:
    args = "".join(f", v{i}" for i in range(natts))
    source: list[str] = []
    for name, with_nulls in zip(names, nulls, strict=True):
        source += [f"def {name}(seq{args}):", *body(with_nulls)]
    return _codegen.define_shared("\n".join(source), names, label, namespace)


def _key_parts(
    keys: Sequence[int], idents: Sequence[str], namespace: dict[str, Any], start: str
) -> str:
    """The f-string text of ``k = v AND …`` over the literals ``x<i>`` of ``keys``
    (``k IS NULL`` for a NULL, as `pgtail.render.sql._Plan.key_condition`)."""
    namespace.update(IS=" IS ", EQ=" = ", NUL="NULL")
    parts = []
    for j, i in enumerate(keys):
        namespace[f"K{i}"] = (start if j == 0 else " AND ") + idents[i]
        parts.append(f"{{K{i}}}{{IS if x{i} == NUL else EQ}}{{x{i}}}")
    return "".join(parts)


def update_builders(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int],
) -> tuple[InsertEncoder, InsertEncoder]:
    """``UPDATE name SET … WHERE <key>;`` for an Update without an old row: every
    column but the key's SET (all of them when all are key columns), the key from the
    new row; a plain encoder (no NULLs) and one for rows with NULLs."""
    natts = len(idents)
    key_set = set(keys)
    sets = [i for i in range(natts) if i not in key_set] or list(range(natts))
    if not _codegen.enabled():
        return _loop_update(name, idents, fns, converters, keys, sets)
    namespace = _builder_namespace(f"UPDATE {name} SET ")
    lines = _literal_lines(fns, namespace, "x")
    exprs = _converted(converters, namespace)
    set_parts = []
    for j, i in enumerate(sets):
        namespace[f"N{i}"] = (", " if j else "") + idents[i] + " = "
        set_parts.append(f"{{N{i}}}{{x{i}}}")
    where = _key_parts(keys, idents, namespace, " WHERE ")
    tail = [*lines, f"    return f'{{HEAD}}{''.join(set_parts)}{where};\\n'.encode('utf-8')"]

    def body(with_nulls: bool) -> list[str]:
        return [*_convert_lines(exprs, with_nulls), *tail]

    plain, with_nulls = _define(
        "SQL text update", body, ["plain", "with_nulls"], [False, True], natts, namespace
    )
    return plain, with_nulls


def key_delete_builder(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int],
) -> InsertEncoder:
    """``DELETE FROM name WHERE <key>;`` from a Delete's old key (the other columns
    arrive as NULL and are not read)."""
    if not _codegen.enabled():
        return _loop_key_delete(name, idents, fns, converters, keys)
    namespace = _builder_namespace(f"DELETE FROM {name}")
    lines = _literal_lines(fns, namespace, "x")
    exprs = _converted(converters, namespace)
    where = _key_parts(keys, idents, namespace, " WHERE ")

    def body(_: bool) -> list[str]:
        return [
            *(f"    x{i} = None if v{i} is None else {exprs[i]}" for i in keys),
            *(lines[i] for i in keys),
            f"    return f'{{HEAD}}{where};\\n'.encode('utf-8')",
        ]

    (delete,) = _define("SQL text key delete", body, ["key_delete"], [True], len(idents), namespace)
    return delete


def full_delete_builders(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    converters: Sequence[Converter],
    compare_as: Sequence[str | None],
) -> tuple[InsertEncoder, InsertEncoder]:
    """``DELETE FROM name WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM name
    WHERE … LIMIT 1);`` from a Delete's whole old row: each column ``IS NOT DISTINCT
    FROM`` its value, through its cast for types without equality (``compare_as``)."""
    natts = len(idents)
    if not _codegen.enabled():
        return _loop_full_delete(name, idents, fns, converters, compare_as)
    namespace = _builder_namespace(f"DELETE FROM {name} WHERE (tableoid, ctid) = ")
    namespace["SELECT"] = f"(SELECT tableoid, ctid FROM {name} WHERE "
    lines = _literal_lines(fns, namespace, "x")
    exprs = _converted(converters, namespace)
    parts = []
    for i in range(natts):
        lead = " AND " if i else ""
        cast = compare_as[i]
        if cast is None:
            namespace[f"D{i}"] = f"{lead}{idents[i]} IS NOT DISTINCT FROM "
            parts.append(f"{{D{i}}}{{x{i}}}")
        else:  # the cast column's whole condition, by the plan's own rule
            namespace[f"P{i}"] = _compare_part(lead, idents[i], cast, fns[i])
            lines[i] = f"    x{i} = P{i}(x{i})"
            parts.append(f"{{x{i}}}")
    cond = "".join(parts) if parts else "true"
    tail = [*lines, f"    return f'{{HEAD}}{{SELECT}}{cond} LIMIT 1);\\n'.encode('utf-8')"]

    def body(with_nulls: bool) -> list[str]:
        return [*_convert_lines(exprs, with_nulls), *tail]

    plain, with_nulls = _define(
        "SQL text full delete",
        body,
        ["full_delete_plain", "full_delete_with_nulls"],
        [False, True],
        natts,
        namespace,
    )
    return plain, with_nulls


def _compare_part(lead: str, ident: str, cast: str, fn: Literal) -> Callable[[Any], str]:
    """One column's condition in a FULL identity's WHERE, compared through ``cast``."""
    suffix = "::" + cast
    if_null = f"{lead}{ident} IS NOT DISTINCT FROM {fn(None)}"
    head = f"{lead}{ident}{suffix} IS NOT DISTINCT FROM "

    def part(value: Any) -> str:
        if value is None:
            return if_null
        return head + quote_literal(to_text(value)) + suffix

    return part


# --- the same statements without generated code -------------------------------------------


def _literals_of(
    fns: Sequence[Literal], converters: Sequence[Converter], values: Sequence[bytes | None]
) -> list[str]:
    return [
        fn(None if value is None else convert(value))
        for fn, convert, value in zip(fns, converters, values, strict=True)
    ]


def _key_text(idents: Sequence[str], keys: Sequence[int], literals: Sequence[str]) -> str:
    return " AND ".join(
        idents[i] + (" IS " if literals[i] == "NULL" else " = ") + literals[i] for i in keys
    )


def _loop_update(
    name: str,
    idents: Sequence[str],
    fns: Sequence[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int],
    sets: Sequence[int],
) -> tuple[InsertEncoder, InsertEncoder]:
    def update(seq: int, *values: bytes | None) -> bytes:
        literals = _literals_of(fns, converters, values)
        assignments = ", ".join(f"{idents[i]} = {literals[i]}" for i in sets)
        where = _key_text(idents, keys, literals)
        return f"UPDATE {name} SET {assignments} WHERE {where};\n".encode()

    return update, update


def _loop_key_delete(
    name: str,
    idents: Sequence[str],
    fns: Sequence[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int],
) -> InsertEncoder:
    def delete(seq: int, *values: bytes | None) -> bytes:
        literals = {
            i: fns[i](None if values[i] is None else converters[i](values[i]))  # type: ignore[arg-type]
            for i in keys
        }
        where = " AND ".join(
            idents[i] + (" IS " if literals[i] == "NULL" else " = ") + literals[i] for i in keys
        )
        return f"DELETE FROM {name} WHERE {where};\n".encode()

    return delete


def _loop_full_delete(
    name: str,
    idents: Sequence[str],
    fns: Sequence[Literal],
    converters: Sequence[Converter],
    compare_as: Sequence[str | None],
) -> tuple[InsertEncoder, InsertEncoder]:
    parts = [
        _compare_part(" AND " if i else "", idents[i], cast, fns[i]) if cast is not None else None
        for i, cast in enumerate(compare_as)
    ]

    def delete(seq: int, *values: bytes | None) -> bytes:
        conds = []
        for i, value in enumerate(values):
            converted = None if value is None else converters[i](value)
            part = parts[i]
            if part is not None:
                conds.append(part(converted))
            else:
                lead = " AND " if i else ""
                conds.append(f"{lead}{idents[i]} IS NOT DISTINCT FROM {fns[i](converted)}")
        cond = "".join(conds) if conds else "true"
        return (
            f"DELETE FROM {name} WHERE (tableoid, ctid) = "
            f"(SELECT tableoid, ctid FROM {name} WHERE {cond} LIMIT 1);\n"
        ).encode()

    return delete, delete
