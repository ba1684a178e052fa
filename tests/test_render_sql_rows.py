"""SQL UPDATE and DELETE statements from text values (`pgtail.render.sql_rows`): byte for
byte what `SqlRenderer` writes from the `Change`, for every replica identity, many types
and NULLs, with generated code and without it."""

from __future__ import annotations

import io
from typing import Any

import pytest

from pgtail.changes import Change, Table
from pgtail.render.sql import SqlRenderer, sql_statement_encoder
from pgtail.values import converters
from tests.events import change, col

# Every test here runs with the generated builders and without them.
pytestmark = pytest.mark.usefixtures("both_ways")

# (name, type oid, text values as the server sends them, None for NULL)
_COLUMNS: list[tuple[str, int, list[bytes | None]]] = [
    (
        "id",
        2950,
        [b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", b"00000000-0000-0000-0000-000000000000"],
    ),
    ("Name", 1043, [b"plain", b"it's", b"back\\slash", b"line\nbreak", "é".encode(), b"", None]),
    ("select", 23, [b"7", b"-2147483648", None]),
    ("f", 701, [b"1.5", b"NaN", b"-Infinity", b"1e-310", None]),
    ("day", 1082, [b"2024-02-29", b"infinity", None]),
    ("raw", 17, [b"\\x00ff", b"\\x", b"\\xAB", "\\x\u00e9".encode(), b"x'y", b"\\x0'1", None]),
    ("ok", 16, [b"t", b"f", None]),
    ("amount", 1700, [b"12.50", b"NaN", b"-0.001", None]),
    ("doc", 114, [b'{"a": "it\'s"}', b'{"a":\n1}', None]),
    ("pt", 600, [b"(1,2)", None]),
    ("tags", 1009, [b'{a,"b c",NULL}', b"{}", None]),
    ("mood", 16_384, [b"happy", None]),
    ("big", 20, [b"9223372036854775807", None]),
]


def _table(identity: str, keys: set[str]) -> Table:
    columns = tuple(col(n, oid, n in keys) for n, oid, _ in _COLUMNS)
    return Table(70, "Odd Schema", "t", identity, columns)  # type: ignore[arg-type]


def _rows() -> list[list[bytes | None]]:
    longest = max(len(values) for *_, values in _COLUMNS)
    rows = [
        [values[(n + i) % len(values)] for i, (*_, values) in enumerate(_COLUMNS)]
        for n in range(longest * 2)
    ]
    # and each without its NULLs (the plain encoders' rows)
    firsts = [values[0] for *_, values in _COLUMNS]
    return rows + [[firsts[i] if v is None else v for i, v in enumerate(row)] for row in rows]


def _converted(table: Table, row: list[bytes | None]) -> dict[str, Any]:
    return {
        c.name: None if v is None else converters(c.type_oid)[0](v)
        for c, v in zip(table.columns, row, strict=True)
    }


def _expected(event: Change) -> bytes:
    return SqlRenderer(io.BytesIO()).change_sql(event).encode("utf-8")


def _encoders(table: Table) -> Any:
    encoders = sql_statement_encoder(table, [converters(c.type_oid)[0] for c in table.columns])
    assert encoders is not None
    return encoders


# DEFAULT (a primary key), USING INDEX (a key of two columns, quoted names), FULL (the
# server flags every column as part of the key)
IDENTITIES = [
    ("default", {"id"}),
    ("index", {"select", "Name"}),
    ("full", {n for n, _, _ in _COLUMNS}),
]


@pytest.mark.parametrize(("identity", "keys"), IDENTITIES, ids=[i for i, _ in IDENTITIES])
def test_update_without_old_row(identity: str, keys: set[str]) -> None:
    table = _table(identity, keys)
    encoders = _encoders(table)
    assert encoders.update is not None
    plain, with_nulls = encoders.update
    checked = 0
    for row in _rows():
        expected = _expected(change("update", table, _converted(table, row)))
        assert with_nulls(0, *row) == expected
        if None not in row:
            assert plain(0, *row) == expected
            checked += 1
    assert checked


@pytest.mark.parametrize(("identity", "keys"), IDENTITIES, ids=[i for i, _ in IDENTITIES])
def test_delete_by_old_key(identity: str, keys: set[str]) -> None:
    table = _table(identity, keys)
    delete = _encoders(table).key_delete
    assert delete is not None
    for row in _rows():
        key_only = [v if c.name in keys else None for c, v in zip(table.columns, row, strict=True)]
        old = {k: v for k, v in _converted(table, key_only).items() if k in keys}
        assert delete(0, *key_only) == _expected(change("delete", table, None, old, "key"))


def test_delete_by_whole_old_row() -> None:
    table = _table("full", {n for n, _, _ in _COLUMNS})
    plain, with_nulls = _encoders(table).full_delete
    for row in _rows():
        expected = _expected(change("delete", table, None, _converted(table, row), "full"))
        assert b"pt::text IS NOT DISTINCT FROM" in expected or row[9] is None
        assert with_nulls(0, *row) == expected
        if None not in row:
            assert plain(0, *row) == expected


def test_no_key_no_update_or_key_delete() -> None:
    """Without a key the renderer writes such changes as comments: the general path."""
    encoders = _encoders(_table("default", set()))
    assert encoders.update is None
    assert encoders.key_delete is None
    assert encoders.full_delete is not None


def test_all_key_columns_set_them_all() -> None:
    table = Table(71, "public", "k", "default", (col("a", 23, True), col("b", 25, True)))
    plain, _ = _encoders(table).update
    assert plain(0, b"1", b"x") == b"UPDATE public.k SET a = 1, b = 'x' WHERE a = 1 AND b = 'x';\n"
    assert plain(0, b"1", b"x") == _expected(change("update", table, {"a": 1, "b": "x"}))


def _old_new_pairs() -> list[tuple[list[bytes | None], list[bytes | None], bytes]]:
    """(old row, new row, new row's kinds): rows that differ in some columns, in none, in
    all; NULLs on either side; unchanged TOAST in the new row (its value None)."""
    rows = _rows()
    pairs = []
    for n, old in enumerate(rows):
        for shift in (0, 1, 3):
            new = rows[(n + shift) % len(rows)]
            # keep every other column of the old row: some columns differ, some not
            mixed = [
                o if i % 2 == n % 2 else v for i, (o, v) in enumerate(zip(old, new, strict=True))
            ]
            pairs.append((old, mixed, b"".join(b"n" if v is None else b"t" for v in mixed)))
    old = rows[0]
    for toasted in ({1}, {0, 1}, set(range(len(_COLUMNS)))):  # unchanged TOAST in the new row
        new = [None if i in toasted else v for i, v in enumerate(rows[2])]
        kinds = b"".join(
            b"u" if i in toasted else b"n" if v is None else b"t" for i, v in enumerate(new)
        )
        pairs += [
            (old, new, kinds),
            (old, [None if i in toasted else o for i, o in enumerate(old)], kinds),
        ]
    # the same text in json, a line break apart (one literal): not SET
    doc = [c for c, _, _ in _COLUMNS].index("doc")
    spaced = list(old)
    spaced[doc] = b'{"a": 1}'
    broken = list(old)
    broken[doc] = b'{"a":\n1}'
    pairs.append((spaced, broken, b"t" * len(old)))
    return pairs


def _old_new_change(
    table: Table,
    keys: set[str] | None,
    old: list[bytes | None],
    new: list[bytes | None],
    kinds: bytes,
) -> Change:
    """The Change the assembler makes of an Update with an old key (``keys``) or whole
    old row (None) and a new row."""
    toast = tuple(c.name for c, k in zip(table.columns, kinds, strict=True) if k == ord("u"))
    new_row = {k: v for k, v in _converted(table, new).items() if k not in toast}
    old_row = _converted(table, old)
    if keys is not None:
        old_row = {k: v for k, v in old_row.items() if k in keys}
    kind = "full" if keys is None else "key"
    return change("update", table, new_row, old_row, kind, toast)


@pytest.mark.parametrize(("identity", "keys"), IDENTITIES, ids=[i for i, _ in IDENTITIES])
def test_update_with_old_key_or_row(identity: str, keys: set[str]) -> None:
    """A key change (old key K and new row) under every identity with a key, and FULL's
    updates (whole old row O): byte for byte the renderer's statement, NULLs, unchanged
    TOAST (left out of SET), rows that changed in no column (all SET)."""
    table = _table(identity, keys)
    encoders = _encoders(table)
    assert encoders.key_update is not None
    assert encoders.full_update is not None
    seen: set[bytes] = set()
    for old, new, kinds in _old_new_pairs():
        key_old = [v if c.name in keys else None for c, v in zip(table.columns, old, strict=True)]
        for encode, old_values, old_keys in (
            (encoders.key_update, key_old, keys),
            (encoders.full_update, old, None),
        ):
            expected = _expected(_old_new_change(table, old_keys, old_values, new, kinds))
            assert encode(0, tuple(old_values), tuple(new), kinds) == expected
            seen.add(expected.partition(b" WHERE ")[0])
    assert len(seen) > 20  # many SET lists


def test_full_update_compares_through_casts_and_skips_unchanged() -> None:
    table = Table(
        72, "public", "g", "full", (col("id", 23, True), col("pt", 600, True), col("n", 25, True))
    )
    full = _encoders(table).full_update
    assert full is not None
    statement = full(0, (b"1", b"(1,2)", b"a"), (b"1", b"(1,2)", b"b"), b"ttt")
    assert statement == (
        b"UPDATE public.g SET n = 'b' WHERE (tableoid, ctid) = (SELECT tableoid, ctid FROM public.g"
        b" WHERE id IS NOT DISTINCT FROM 1 AND pt::text IS NOT DISTINCT FROM '(1,2)'::text"
        b" AND n IS NOT DISTINCT FROM 'a' LIMIT 1);\n"
    )
    # nothing changed: every column SET to what it is
    same = full(0, (b"1", None, b"a"), (b"1", None, b"a"), b"tnt")
    assert same.startswith(b"UPDATE public.g SET id = 1, pt = NULL, n = 'a' WHERE ")
    assert b"pt IS NOT DISTINCT FROM NULL" in same


def _sql_of(events: list[Any]) -> bytes:
    out = io.BytesIO()
    renderer = SqlRenderer(out)
    for event in events:
        renderer.render(event)
    return out.getvalue()


def test_updates_with_an_old_row_take_the_quick_lane() -> None:
    """Fed to the assembler, an Update with its old key or old row becomes the renderer's
    statement straight from the payload (an `EncodedRows`); one it cannot take (an old
    row holding unchanged TOAST, a binary value) the general way; the output is the same."""
    from pgtail.changes import Assembler, EncodedRows
    from tests import pgbytes as pb

    columns = [("id", 23, True), ("name", 25, False), ("body", 25, False)]
    full_columns = [(n, oid, True) for n, oid, _ in columns]
    payloads = [
        pb.relation(16384, "public", "items", columns),
        pb.relation(16385, "public", "full", full_columns, replica_identity="f"),
        pb.begin(0x100, 0, 7),
        pb.update(16384, [b"2", b"n", "u"], old=[b"1", None, None], old_kind="K"),  # a key change
        pb.update(16384, [b"3", None, b"b"], old=[b"2", None, None], old_kind="K"),
        pb.update(16385, [b"1", b"new", b"b"], old=[b"1", b"old", b"b"], old_kind="O"),  # FULL
        pb.update(16385, [b"1", b"x", None], old=[b"1", b"x", None], old_kind="O"),  # no change
        pb.update(16385, [b"1", b"y", b"b"], old=[b"1", b"x", "u"], old_kind="O"),  # general
        pb.update(16385, [b"1", ("b", b"z"), b"b"], old=[b"1", b"x", b"b"], old_kind="O"),
        pb.commit(0x100, 0x200, 0),
    ]
    events: list[Any] = []
    general: list[Any] = []
    fast, slow = Assembler(1, encoder=sql_statement_encoder), Assembler(1)
    for payload in payloads:
        events += fast.feed(payload)
        general += slow.feed(payload)
    encoded = [e for e in events if type(e) is EncodedRows]
    assert [(e.table.name, e.op, e.count) for e in encoded] == [
        ("items", "update", 2),
        ("full", "update", 2),
    ]
    assert sum(type(e) is Change for e in events) == 2
    assert _sql_of(events) == _sql_of(general)
    assert b"UPDATE public.items SET id = 2, name = 'n' WHERE id = 1;\n" in _sql_of(events)
