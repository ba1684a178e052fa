"""pgtail at scale (issue 34): thousands of tables and one very large value.

- Tables of the same column types share their generated code: the first change of a new
  table compiles nothing once a table of its shape was seen (counted through the
  ``<pgtail ...>`` sources `pgtail._codegen` registers with linecache), and each table's
  lines still carry its own names.
- A snapshot of many tables (plain, partitioned with leaf and root publishing) reads
  the same Relations and estimates as one table at a time did.
- A value of a few MB (text with quotes, backslashes and control characters; bytea)
  renders the same in json, sql and table on every path, and its SQL replays into a
  server equal to the source.
"""

from __future__ import annotations

import io
import linecache
from collections.abc import Callable
from datetime import UTC, datetime

import orjson
import pytest

from pgtail import pgoutput as po
from pgtail.changes import Assembler, EncodedRows
from pgtail.changes.fastpath import install_encoders
from pgtail.changes.tables import TableInfo
from pgtail.render import insert_encoder
from pgtail.render.jsonl import JsonLinesRenderer
from pgtail.render.sql import SqlRenderer
from tests import pgbytes as pb

T0 = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)


def _generated_sources() -> int:
    return sum(1 for name in linecache.cache if name.startswith("<pgtail "))


def _relation(oid: int, name: str, columns: list[tuple[str, int]]) -> po.Relation:
    return po.Relation(
        None,
        oid,
        "public",
        name,
        "d",
        tuple(po.RelationColumn(1 if i == 0 else 0, c, t, -1) for i, (c, t) in enumerate(columns)),
    )


@pytest.mark.parametrize("fmt", ["json", "sql", "table"])
def test_tables_of_one_shape_share_their_generated_code(
    fmt: str, codegen: Callable[[bool], None]
) -> None:
    """A table of a shape seen before compiles nothing; one of a new shape at most once."""
    codegen(True)
    encoder = insert_encoder(fmt, redact=False)
    shape = [23, 25, 1700, 1184, 16, 3802, 1009]  # int, text, numeric, timestamptz, ...

    def table_info(oid: int, prefix: str, types: list[int]) -> TableInfo:
        relation = _relation(
            oid, f"{prefix}{oid}", [(f"{prefix}c{i}", t) for i, t in enumerate(types)]
        )
        info = TableInfo(relation, {})
        if encoder is not None:
            encoders = encoder(info.table, info.text_converters)
            assert encoders is not None
            install_encoders(info, encoders)
        return info

    before = _generated_sources()
    table_info(1, "a", [*shape, 20, 20])  # a shape no other test builds: nine columns
    first = _generated_sources() - before
    assert first <= 3  # rows (once per column count), the format's encoder, the tuple reader
    before = _generated_sources()
    for oid in range(2, 40):
        table_info(oid, f"t{oid}_", [*shape, 20, 20])
    assert _generated_sources() - before == 0
    before = _generated_sources()
    table_info(50, "b", [*shape, 20, 25])  # a new shape, same column count
    assert _generated_sources() - before <= 1


def test_shared_code_writes_each_tables_own_names(codegen: Callable[[bool], None]) -> None:
    """Two tables of one shape, streamed: each line names its table and its columns."""
    outputs = {}
    for enabled in (True, False):
        codegen(enabled)
        for fmt in ("json", "sql"):
            asm = Assembler(2, encoder=insert_encoder(fmt, redact=False))
            payloads = [
                pb.relation(7, "s", "one", [("id", 23, True), ("it's", 25, False)]),
                pb.relation(8, "s", "two", [("key", 23, True), ("v\nw", 25, False)]),
                pb.begin(100, T0, 9),
                pb.insert(7, [b"1", b"a"]),
                pb.insert(8, [b"2", b"b"]),
                pb.insert(7, [b"3", None]),
                pb.insert(8, [b"4", None]),
                pb.commit(100, 140, T0),
            ]
            out = io.BytesIO()
            renderer = JsonLinesRenderer(out) if fmt == "json" else SqlRenderer(out)
            events = [e for p in payloads for e in asm.feed(p)]
            if fmt == "json":
                assert any(isinstance(e, EncodedRows) for e in events)
            for event in events:
                renderer.render(event)
            renderer.close()
            outputs[enabled, fmt] = out.getvalue()
    assert outputs[True, "json"] == outputs[False, "json"]
    assert outputs[True, "sql"] == outputs[False, "sql"]
    rows = [orjson.loads(line) for line in outputs[True, "json"].splitlines()]
    assert [(r["table"], r["new"]) for r in rows] == [
        ("one", {"id": 1, "it's": "a"}),
        ("two", {"key": 2, "v\nw": "b"}),
        ("one", {"id": 3, "it's": None}),
        ("two", {"key": 4, "v\nw": None}),
    ]
    sql_text = outputs[True, "sql"].decode()
    assert "INSERT INTO s.one (id, \"it's\") VALUES (1, 'a');" in sql_text
    assert "INSERT INTO s.two (key, " in sql_text
