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
    ("raw", 17, [b"\\x00ff", b"\\x", None]),
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
