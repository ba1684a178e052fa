"""UPDATE and DELETE statements of one table from its values' text, generated like the
INSERT builders (`pgtail.render.sql_literals.text_insert_builders`).

`SqlRenderer` writes an Update or Delete from its `Change` (`pgtail.render.sql`); these
builders write the same statements, byte for byte, straight from the text values the
server sent, for the assembler's quick lane (`pgtail.changes.fastpath`):

`text_row_encoders` gives a table's INSERT (as `text_insert_builders`) and:

- an UPDATE for an Update that carries no old row (the key did not change; the
  table has a key: primary key or REPLICA IDENTITY USING INDEX):
  ``UPDATE t SET <the other columns> WHERE <key from the new row>;``;
- a DELETE for a Delete with its old key (``K``: the key's columns, the others
  sent as NULL): ``DELETE FROM t WHERE <key>;``;
- a DELETE for a Delete with the whole old row (REPLICA IDENTITY FULL):
  ``DELETE FROM t WHERE (tableoid, ctid) = (SELECT … WHERE <every column> LIMIT 1);``;
- an UPDATE for an Update with its old key (``K``: the key changed) or its whole old row
  (``O``: REPLICA IDENTITY FULL) and its new row: SET holds the columns whose literal
  differs from the old one's (all of the new row's when none does; unchanged-TOAST
  columns never), WHERE the old key, or the whole old row as a FULL DELETE's.

Each takes ``(seq, v0, ..., vN)``, every column's text (bytes) or None for NULL, and
gives the statement's bytes; the UPDATEs with an old row take ``(seq, old, new,
new_kinds)`` (`pgtail.changes.OldNewEncoder`). Updates without an old row that hold
unchanged TOAST values take the general path. The source holds
only indexes; names, literals and casts are bound in its namespace
(`pgtail._codegen.define_shared`), so tables of one shape share compiled code. Without
generated code (``PGTAIL_NO_CODEGEN=1``), loops give the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from pgtail import _codegen
from pgtail.changes import InsertEncoder, OldNewEncoder
from pgtail.render.sql_literals import (
    Literal,
    builder_namespace,
    literal_lines,
    quote_literal,
    text_insert_builders,
)
from pgtail.values import Converter, decodes_text, to_text


class TextRowEncoders(NamedTuple):
    """One table's SQL statements from text values (see the module docstring)."""

    insert: tuple[InsertEncoder, InsertEncoder]  # plain, with NULLs
    update: tuple[InsertEncoder, InsertEncoder] | None  # None: the table has no key
    key_delete: InsertEncoder | None  # None: the table has no key
    full_delete: tuple[InsertEncoder, InsertEncoder]
    key_update: OldNewEncoder | None  # None: the table has no key
    full_update: OldNewEncoder


def text_row_encoders(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int] | None,
    compare_as: Sequence[str | None],
) -> TextRowEncoders:
    """A table's INSERT, UPDATE (no old row) and DELETE (old key, whole old row)
    statements from its values' text, ``encode(seq, v0, ..., vN)`` each: the INSERT
    as `pgtail.render.sql_literals.text_insert_builders` writes it, the others as
    `SqlRenderer` writes them from a Change. ``keys``: the key columns' positions (None
    without a key: no UPDATE nor key DELETE). One generated source per shape (types,
    key positions, cast columns), compiled once for every table of that shape."""
    head = f"INSERT INTO {name} ({', '.join(idents)}) VALUES ("
    key_update = _when_called(name, idents, fns, converters, keys, compare_as) if keys else None
    full_update = _when_called(name, idents, fns, converters, None, compare_as)
    if not _codegen.enabled():
        insert = text_insert_builders(head, fns, converters)
        update = _loop_update(name, idents, fns, converters, keys) if keys else None
        key_delete = _loop_key_delete(name, idents, fns, converters, keys) if keys else None
        full = _loop_full_delete(name, idents, fns, converters, compare_as)
        return TextRowEncoders(insert, update, key_delete, full, key_update, full_update)
    namespace = builder_namespace(head)
    lines = literal_lines(fns, namespace, "x")
    exprs = _convert_exprs(converters, namespace)
    values = ", ".join(f"{{x{i}}}" for i in range(len(fns)))
    functions = [
        ("plain", False, [*lines, f"    return f'{{HEAD}}{values});\\n'.encode('utf-8')"]),
        ("with_nulls", True, [*lines, f"    return f'{{HEAD}}{values});\\n'.encode('utf-8')"]),
    ]
    if keys:
        update_body = _update_tail(name, idents, keys, lines, namespace)
        functions += [
            ("update_plain", False, update_body),
            ("update_with_nulls", True, update_body),
        ]
        functions.append(
            ("key_delete", True, _key_delete_body(name, idents, keys, lines, namespace))
        )
    full_body = _full_delete_tail(name, idents, fns, compare_as, lines, namespace)
    functions += [
        ("full_delete_plain", False, full_body),
        ("full_delete_with_nulls", True, full_body),
    ]
    args = "".join(f", v{i}" for i in range(len(fns)))
    source: list[str] = []
    for fname, with_nulls, body in functions:
        source.append(f"def {fname}(seq{args}):")
        if fname != "key_delete":
            source += _convert_lines(exprs, with_nulls)
        else:
            source += [f"    x{i} = None if v{i} is None else {exprs[i]}" for i in keys or ()]
        source += body
    names = [fname for fname, _, _ in functions]
    made = dict(
        zip(
            names,
            _codegen.define_shared("\n".join(source), names, "SQL text rows", namespace),
            strict=True,
        )
    )
    return TextRowEncoders(
        (made["plain"], made["with_nulls"]),
        (made["update_plain"], made["update_with_nulls"]) if keys else None,
        made.get("key_delete"),
        (made["full_delete_plain"], made["full_delete_with_nulls"]),
        key_update,
        full_update,
    )


def _convert_exprs(converters: Sequence[Converter], namespace: dict[str, Any]) -> list[str]:
    """Each value's conversion, ``v<i>``'s: inline where the converter is a plain decode,
    else a call of ``C<i>`` (bound in ``namespace``)."""
    exprs = []
    for i, convert in enumerate(converters):
        namespace[f"C{i}"] = convert
        exprs.append(f'v{i}.decode("utf-8", "replace")' if decodes_text(convert) else f"C{i}(v{i})")
    return exprs


def _when_called(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int] | None,
    compare_as: Sequence[str | None],
) -> OldNewEncoder:
    """The UPDATE with an old key (``keys``) or whole old row (None), made at its first
    call: most tables never see a key change nor a FULL update, and pay no compile."""
    made: list[OldNewEncoder] = []

    def update(
        seq: int, old: tuple[bytes | None, ...], new: tuple[bytes | None, ...], kinds: bytes
    ) -> bytes:
        if not made:
            made.append(_old_new_encoder(name, idents, fns, converters, keys, compare_as))
        return made[0](seq, old, new, kinds)

    return update


def _old_new_encoder(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int] | None,
    compare_as: Sequence[str | None],
) -> OldNewEncoder:
    """`_when_called`'s encoder: generated (`_old_new_update`), or the loop's."""
    slow = _loop_old_new_update(name, idents, fns, converters, keys, compare_as)
    if not _codegen.enabled():
        return slow
    namespace = builder_namespace("")
    lines = literal_lines(fns, namespace, "x")
    exprs = _convert_exprs(converters, namespace)
    namespace.update(SLOW=slow, JOIN=", ".join, TOAST=b"u")
    source = _old_new_update(name, idents, fns, keys, compare_as, lines, exprs, namespace)
    fname = "full_update" if keys is None else "key_update"
    (encode,) = _codegen.define_shared("\n".join(source), [fname], "SQL text update", namespace)
    return encode


def _convert_lines(exprs: Sequence[str], with_nulls: bool) -> list[str]:
    if with_nulls:
        return [f"    x{i} = None if v{i} is None else {e}" for i, e in enumerate(exprs)]
    return [f"    x{i} = {e}" for i, e in enumerate(exprs)]


def _key_parts(
    keys: Sequence[int],
    idents: Sequence[str],
    namespace: dict[str, Any],
    start: str,
    var: str = "x",
) -> str:
    """The f-string text of ``k = v AND …`` over the literals ``<var><i>`` of ``keys``
    (``k IS NULL`` for a NULL, as `pgtail.render.sql._Plan.key_condition`)."""
    namespace.update(IS=" IS ", EQ=" = ", NUL="NULL")
    parts = []
    for j, i in enumerate(keys):
        namespace[f"K{i}"] = (start if j == 0 else " AND ") + idents[i]
        parts.append(f"{{K{i}}}{{IS if {var}{i} == NUL else EQ}}{{{var}{i}}}")
    return "".join(parts)


def _set_columns(natts: int, keys: Sequence[int]) -> list[int]:
    """An Update's SET columns: all but the key's (all of them when all are key)."""
    key_set = set(keys)
    return [i for i in range(natts) if i not in key_set] or list(range(natts))


def _update_tail(
    name: str,
    idents: Sequence[str],
    keys: Sequence[int],
    lines: list[str],
    namespace: dict[str, Any],
) -> list[str]:
    """``UPDATE name SET … WHERE <key>;`` for an Update without an old row: the key
    from the new row."""
    namespace["UHEAD"] = f"UPDATE {name} SET "
    set_parts = []
    for j, i in enumerate(_set_columns(len(idents), keys)):
        namespace[f"N{i}"] = (", " if j else "") + idents[i] + " = "
        set_parts.append(f"{{N{i}}}{{x{i}}}")
    where = _key_parts(keys, idents, namespace, " WHERE ")
    return [*lines, f"    return f'{{UHEAD}}{''.join(set_parts)}{where};\\n'.encode('utf-8')"]


def _key_delete_body(
    name: str,
    idents: Sequence[str],
    keys: Sequence[int],
    lines: list[str],
    namespace: dict[str, Any],
) -> list[str]:
    """``DELETE FROM name WHERE <key>;`` from a Delete's old key (the other columns
    arrive as NULL and are not read)."""
    namespace["DHEAD"] = f"DELETE FROM {name}"
    where = _key_parts(keys, idents, namespace, " WHERE ")
    return [*(lines[i] for i in keys), f"    return f'{{DHEAD}}{where};\\n'.encode('utf-8')"]


def _full_delete_tail(
    name: str,
    idents: Sequence[str],
    fns: list[Literal],
    compare_as: Sequence[str | None],
    lines: list[str],
    namespace: dict[str, Any],
) -> list[str]:
    """``DELETE FROM name WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM name
    WHERE … LIMIT 1);`` from a Delete's whole old row: each column ``IS NOT DISTINCT
    FROM`` its value, through its cast for types without equality (``compare_as``)."""
    namespace["FHEAD"] = (
        f"DELETE FROM {name} WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM {name} WHERE "
    )
    own = list(lines)
    parts = []
    for i, ident in enumerate(idents):
        lead = " AND " if i else ""
        cast = compare_as[i]
        if cast is None:
            namespace[f"D{i}"] = f"{lead}{ident} IS NOT DISTINCT FROM "
            parts.append(f"{{D{i}}}{{x{i}}}")
        else:  # the cast column's whole condition, by the plan's own rule
            namespace[f"P{i}"] = _compare_part(lead, ident, cast, fns[i])
            own[i] = f"    x{i} = P{i}(x{i})"
            parts.append(f"{{x{i}}}")
    cond = "".join(parts) if parts else "true"
    return [*own, f"    return f'{{FHEAD}}{cond} LIMIT 1);\\n'.encode('utf-8')"]


def _old_new_update(
    name: str,
    idents: Sequence[str],
    fns: Sequence[Literal],
    keys: Sequence[int] | None,
    compare_as: Sequence[str | None],
    lines: list[str],
    exprs: Sequence[str],
    namespace: dict[str, Any],
) -> list[str]:
    """``key_update`` (``keys``: from the old key) or ``full_update`` (None: from the whole
    old row), ``encode(seq, old, new, new_kinds)``: each old literal ``y<i>`` once (the
    WHERE's, and what a new one is compared with), a new one only where the text changed
    (a key column, or any column of a FULL row) or must be SET (a column not in the old
    key). An update holding unchanged TOAST, or whose literals all equal the old ones
    (SET them all), is the loop's (``SLOW``), as rare."""
    natts = len(idents)
    olds = "".join(f"o{i}, " for i in range(natts))
    news = "".join(f"v{i}, " for i in range(natts))
    body = [
        f"def {'key_update' if keys is not None else 'full_update'}(seq, old, new, kinds):",
        "    if TOAST in kinds:",
        "        return SLOW(seq, old, new, kinds)",
        f"    {olds}= old",
        f"    {news}= new",
    ]
    known = range(natts) if keys is None else keys  # the old row's columns
    cast = [keys is None and compare_as[i] is not None for i in range(natts)]
    for i in known:
        body.append(f"    x{i} = None if o{i} is None else {exprs[i].replace(f'v{i}', f'o{i}')}")
        if cast[i]:  # the WHERE's part by the plan's rule (`_compare_part`); no literal yet
            body.append(f"    w{i} = P{i}(x{i})")
        else:
            body += [lines[i], f"    y{i} = x{i}"]
    body.append("    s = []")
    known_set = set(known)
    for i in range(natts):
        namespace[f"A{i}"] = idents[i] + " = "
        new_literal = [f"x{i} = None if v{i} is None else {exprs[i]}", lines[i].strip()]
        if i not in known_set:  # not in the old key: always SET
            body += [f"    {line}" for line in new_literal]
            body.append(f"    s.append(A{i} + x{i})")
            continue
        body.append(f"    if v{i} != o{i}:")
        if cast[i]:  # the old literal, for the comparison
            old_literal = [f"x{i} = None if o{i} is None else {exprs[i].replace(f'v{i}', f'o{i}')}"]
            body += [f"        {line}" for line in [*old_literal, lines[i].strip(), f"y{i} = x{i}"]]
        body += [f"        {line}" for line in new_literal]
        body += [f"        if x{i} != y{i}:", f"            s.append(A{i} + x{i})"]
    body += ["    if not s:", "        return SLOW(seq, old, new, kinds)"]
    namespace["UHEAD"] = f"UPDATE {name} SET "
    if keys is not None:
        where = _key_parts(keys, idents, namespace, " WHERE ", "y")
        tail = f"{where};"
    else:
        namespace["FWHERE"] = f" WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM {name} WHERE "
        parts = []
        for i, ident in enumerate(idents):
            lead = " AND " if i else ""
            if cast[i]:
                cast_to = compare_as[i]
                assert cast_to is not None
                namespace[f"P{i}"] = _compare_part(lead, ident, cast_to, fns[i])
                parts.append(f"{{w{i}}}")
            else:
                namespace[f"D{i}"] = f"{lead}{ident} IS NOT DISTINCT FROM "
                parts.append(f"{{D{i}}}{{y{i}}}")
        tail = f"{{FWHERE}}{''.join(parts) if parts else 'true'} LIMIT 1);"
    body.append(f"    return f'{{UHEAD}}{{JOIN(s)}}{tail}\\n'.encode('utf-8')")
    return body


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


def _key_text(
    idents: Sequence[str], keys: Sequence[int], literals: Sequence[str] | Mapping[int, str]
) -> str:
    return " AND ".join(
        idents[i] + (" IS " if literals[i] == "NULL" else " = ") + literals[i] for i in keys
    )


def _loop_update(
    name: str,
    idents: Sequence[str],
    fns: Sequence[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int],
) -> tuple[InsertEncoder, InsertEncoder]:
    sets = _set_columns(len(idents), keys)

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
    condition = _full_condition(idents, fns, converters, compare_as)

    def delete(seq: int, *values: bytes | None) -> bytes:
        return (
            f"DELETE FROM {name} WHERE (tableoid, ctid) = "
            f"(SELECT tableoid, ctid FROM {name} WHERE {condition(values)} LIMIT 1);\n"
        ).encode()

    return delete, delete


def _full_condition(
    idents: Sequence[str],
    fns: Sequence[Literal],
    converters: Sequence[Converter],
    compare_as: Sequence[str | None],
) -> Callable[[Sequence[bytes | None]], str]:
    """The loops' WHERE of a whole old row (text values): each column ``IS NOT DISTINCT
    FROM`` its value, through its cast for types without equality."""
    parts = [
        _compare_part(" AND " if i else "", idents[i], cast, fns[i]) if cast is not None else None
        for i, cast in enumerate(compare_as)
    ]

    def condition(values: Sequence[bytes | None]) -> str:
        conds = []
        for i, value in enumerate(values):
            converted = None if value is None else converters[i](value)
            part = parts[i]
            if part is not None:
                conds.append(part(converted))
            else:
                lead = " AND " if i else ""
                conds.append(f"{lead}{idents[i]} IS NOT DISTINCT FROM {fns[i](converted)}")
        return "".join(conds) if conds else "true"

    return condition


def _loop_old_new_update(
    name: str,
    idents: Sequence[str],
    fns: Sequence[Literal],
    converters: Sequence[Converter],
    keys: Sequence[int] | None,
    compare_as: Sequence[str | None],
) -> OldNewEncoder:
    """An Update with its old key (``keys``) or whole old row (None) and its new row, by
    loops: what `SqlRenderer` writes from its Change."""
    natts = len(idents)
    full = _full_condition(idents, fns, converters, compare_as) if keys is None else None
    known = range(natts) if keys is None else keys

    def literal(i: int, value: bytes | None) -> str:
        return fns[i](None if value is None else converters[i](value))

    def update(
        seq: int, old: tuple[bytes | None, ...], new: tuple[bytes | None, ...], kinds: bytes
    ) -> bytes:
        olds = {i: literal(i, old[i]) for i in known}
        news = [(i, literal(i, value)) for i, value in enumerate(new) if kinds[i] != 117]  # u
        sets = [f"{idents[i]} = {lit}" for i, lit in news if olds.get(i) != lit]
        if not sets:  # nothing changed: SET what is (see `SqlRenderer._set_list`)
            sets = [f"{idents[i]} = {lit}" for i, lit in news]
        if not sets:
            sets = [f"{idents[0]} = {idents[0]}"]
        if full is not None:
            where = (
                f"(tableoid, ctid) = (SELECT tableoid, ctid FROM {name} WHERE {full(old)} LIMIT 1)"
            )
        else:
            where = _key_text(idents, known, olds)
        return f"UPDATE {name} SET {', '.join(sets)} WHERE {where};\n".encode()

    return update
