"""Decoded events built by hand for the renderer tests: one transaction, a table with a
key, and a builder of changes in that transaction. The renderers' expected output
(headers, timestamps, xids) is written against these values."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pgtail.changes import Change, Column, Table, Transaction

TIME = datetime(2026, 11, 21, 23, 55, 34, 123456, tzinfo=UTC)
TX = Transaction(741, 0x16B3748, 0x16B3778, TIME)


def col(name: str, oid: int, key: bool = False) -> Column:
    return Column(name, oid, -1, key, None)


USERS = Table(
    1,
    "public",
    "users",
    "default",
    (col("id", 20, True), col("name", 25), col("bio", 25), col("score", 1700)),
)


def change(
    op: str,
    table: Table,
    new: dict[str, Any] | None,
    old: dict[str, Any] | None = None,
    old_kind: str | None = None,
    toast: tuple[str, ...] = (),
) -> Change:
    """A change of ``table`` in TX."""
    return Change(op, table, TX, 0, new, old, old_kind, toast)  # type: ignore[arg-type]
