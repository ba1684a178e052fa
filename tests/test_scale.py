"""pgtail at scale (issue 34): thousands of tables and one very large value.

- Tables of the same column types share their generated code: the first change of a new
  table compiles nothing once a table of its shape was seen (counted through the
  ``<pgtail ...>`` sources `pgtail._codegen` registers with linecache), and each table's
  lines still carry its own names.
- A snapshot of many tables (plain, partitioned with leaf and root publishing) reads
  the same Relations and estimates as one table at a time did.
- A value of a few MB (text with quotes, backslashes and control characters; bytea)
  renders the same in json, sql and table on every path, and its SQL replays into a
  server equal to the source. Past `LARGE_VALUE` it takes the large-value path: its
  line in pieces, handed to the writer part by part (never held whole), the same bytes
  as the usual path's, with and without generated code.
"""

from __future__ import annotations

import io
import linecache
import random
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import psycopg2.extensions
import pytest

from pgtail import pgoutput as po
from pgtail.changes import Assembler, EncodedRows
from pgtail.changes.fastpath import install_encoders
from pgtail.changes.tables import TableInfo
from pgtail.render import row_encoder
from pgtail.render.jsonl import JsonLinesRenderer
from pgtail.render.sql import SqlRenderer
from tests import pgbytes as pb
from tests.helpers import Database, create_database, drop_database, run_stream

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
    encoder = row_encoder(fmt, redact=False)
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
            asm = Assembler(2, encoder=row_encoder(fmt, redact=False))
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


class _CountingCursor(psycopg2.extensions.cursor):
    statements = 0

    def execute(self, query: Any, vars: Any = None) -> None:  # noqa: A002 - psycopg2's name
        type(self).statements += 1
        super().execute(query, vars)


def test_snapshot_tables_reads_the_catalog_in_a_few_queries(db: Database) -> None:
    """Forty tables of every kind a snapshot copies (plain, partitioned through the leaves
    and through the root, a column list, a row filter, generated columns, each replica
    identity): the same Relations, filters and estimates as each table read alone, in a
    number of queries that does not grow with the tables."""
    from pgtail.catalog import snapshot_tables

    major = db.major
    ddl = []
    for i in range(30):
        identity = ["DEFAULT", "FULL", "NOTHING"][i % 3]
        ddl += [
            f"CREATE TABLE t{i:02} (id int PRIMARY KEY, v text, n numeric, w int)",
            f"ALTER TABLE t{i:02} REPLICA IDENTITY {identity}",
            f"INSERT INTO t{i:02} SELECT g, 'v', g, g FROM generate_series(1, {i * 40}) g",
        ]
    ddl += [
        "CREATE TABLE k (a int NOT NULL, b text NOT NULL,"
        " c int GENERATED ALWAYS AS (a * 2) STORED)",
        "CREATE UNIQUE INDEX k_ab ON k (b, a)",
        "ALTER TABLE k REPLICA IDENTITY USING INDEX k_ab",
        "INSERT INTO k SELECT g, 'b' || g FROM generate_series(1, 500) g",
    ]
    for root in ("r", "l"):
        ddl.append(f"CREATE TABLE {root} (id int, v text) PARTITION BY RANGE (id)")
        for n in range(4):
            ddl.append(
                f"CREATE TABLE {root}{n} PARTITION OF {root} FOR VALUES FROM ({n * 1000})"
                f" TO ({n * 1000 + 1000})"
            )
        ddl.append(f"INSERT INTO {root} SELECT g, 'x' FROM generate_series(0, 3999) g")
    for statement in ddl:
        db.execute(statement)
    db.execute("VACUUM ANALYZE")
    plain = ", ".join(f"t{i:02}" for i in range(30))
    if major >= 13:
        db.execute(
            f"CREATE PUBLICATION a FOR TABLE {plain}, k, r WITH (publish_via_partition_root)"
        )
    else:
        db.execute(f"CREATE PUBLICATION a FOR TABLE {plain}, k, r0, r1, r2, r3")
    db.execute("CREATE PUBLICATION b FOR TABLE l0, l1, l2, l3")
    if major >= 15:
        db.execute("CREATE TABLE f (id int PRIMARY KEY, v text, x int)")
        db.execute("CREATE PUBLICATION c FOR TABLE f (id, v) WHERE (id > 10)")
    publications = ["a", "b", "c"] if major >= 15 else ["a", "b"]

    conn = db.connect(cursor_factory=_CountingCursor)
    try:
        _CountingCursor.statements = 0
        every = snapshot_tables(conn, publications, lambda schema, name: True)
        statements = _CountingCursor.statements
        alone = [
            snapshot_tables(conn, publications, lambda schema, name, t=t: name == t)
            for t in [t.relation.name for t in every]
        ]
    finally:
        conn.close()
    names = [t.relation.name for t in every]
    assert len(every) == 30 + 1 + 4 + (1 if major >= 13 else 4) + (1 if major >= 15 else 0)
    assert names == sorted(names)
    assert [[t] for t in every] == alone
    assert statements <= 10
    by_name = {t.relation.name: t for t in every}
    assert by_name["t03"].rows_estimate == 120
    assert [c.name for c in by_name["t04"].relation.columns] == ["id", "v", "n", "w"]
    keys = {name: [c.is_key for c in by_name[name].relation.columns] for name in by_name}
    assert keys["t03"] == [1, 0, 0, 0]  # DEFAULT: the primary key
    assert keys["t04"] == [1, 1, 1, 1]  # FULL
    assert keys["t05"] == [0, 0, 0, 0]  # NOTHING
    assert [by_name[n].relation.replica_identity for n in ("t03", "t04", "t05", "k")] == list(
        "dfni"
    )
    assert [c.name for c in by_name["k"].relation.columns][:2] == ["a", "b"]
    assert keys["k"][:2] == [1, 1]
    if major < 15:  # (a generated column: pgoutput sends none before the column lists)
        assert len(keys["k"]) == 2
    assert by_name["k"].rows_estimate == 500
    assert [by_name[f"l{n}"].rows_estimate for n in range(4)] == [1000] * 4
    if major >= 13:
        assert by_name["r"].partitioned and by_name["r"].rows_estimate == 4000
    if major >= 15:
        assert [c.name for c in by_name["f"].relation.columns] == ["id", "v"]
        assert by_name["f"].row_filter == "((id > 10))"


# --- one large value ----------------------------------------------------------------

_ALPHABET = [*"abc 'x\"\\\n\r\t\x01\x1f\x7f", "é", "⋯", "\u2028", "\x85", "\u200b", "中"]
_ALPHABET += ["e\u0301", "\U0001f44d"]  # a combining accent (no cell of its own), an emoji


def _reference_literal(text: str) -> str:
    """`quote_literal` as it was written first: one translate table."""
    escapes = {i: f"\\x{i:02X}" for i in range(0x20)}
    escapes.update({ord("\\"): "\\\\", ord("'"): "''", 0x7F: "\\x7F"})
    escapes.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})
    if re.search(r"[\\\x00-\x1f\x7f]", text) is None:
        return "'" + text.replace("'", "''") + "'"
    return "E'" + text.translate(escapes) + "'"


def test_literals_and_cells_of_long_values_are_the_plain_ones() -> None:
    """Long strings of every awkward character: the SQL literal is what one translate
    table writes, and the table cell what showing the whole value and cutting it gives."""
    from pgtail.render.cells import show_value, truncate, value_cell
    from pgtail.render.sql_literals import quote_literal

    rng = random.Random(34)
    texts = ["", " a", "a ", '"q', "⋯", "x" * 5000, "\x01" + "y" * 3000, "\u0301" * 900 + "é"]
    for _ in range(3000):
        alphabet = rng.sample(_ALPHABET, rng.randint(1, len(_ALPHABET)))
        texts.append("".join(rng.choice(alphabet) for _ in range(rng.choice([3, 60, 700]))))
    for text in texts:
        if "\x00" not in text:
            assert quote_literal(text) == _reference_literal(text), repr(text[:40])
        for width in (4, 10, 40, 200):
            whole, cells = truncate(show_value(text), width)
            assert value_cell(text, width) == (cells, ((whole, ""),)), (repr(text[:40]), width)


@pytest.mark.min_major(12)
def test_a_large_value_streams_whole_in_every_format(db: Database) -> None:
    """A few MB of text holding quotes, backslashes and control characters, and of bytea:
    the JSON carries them exactly, the SQL replays into a server equal to the source, the
    table shows their start."""
    text = ('it\'s a \\path\\ "q"\n\ttab\r\x01\x7f é中 ' * 150_000)[: 3 << 20]
    data = bytes(range(256)) * (8 << 10)  # 2 MB
    db.execute("CREATE TABLE big (id int PRIMARY KEY, t text, b bytea)")
    db.execute("CREATE PUBLICATION big_pub FOR TABLE big")
    for fmt in ("json", "sql", "table"):
        db.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"s_{fmt}",))
    db.execute("INSERT INTO big VALUES (1, %s, %s)", (text, data))
    outputs = {}
    for fmt in ("json", "sql", "table"):
        done = run_stream(
            db.dsn, "--slot", f"s_{fmt}", "--publication", "big_pub", "--format", fmt,
            "--max-changes", "1", "--max-width", "30",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs[fmt] = done.stdout
    (line,) = outputs["json"].splitlines()
    assert orjson.loads(line)["new"] == {"id": 1, "t": text, "b": "\\x" + data.hex()}
    replayed = create_database(db.server)
    try:
        replayed.execute("CREATE TABLE big (id int PRIMARY KEY, t text, b bytea)")
        conn = replayed.connect()
        try:
            with conn.cursor() as cur:
                for statement in outputs["sql"].decode().splitlines():
                    if statement and not statement.startswith("--"):
                        cur.execute(statement)
                cur.execute("SELECT id, t, b FROM big")
                rows = cur.fetchall()
        finally:
            conn.close()
    finally:
        drop_database(db.server, replayed.name)
    assert [(r[0], r[1], bytes(r[2])) for r in rows] == [(1, text, data)]
    shown = outputs["table"].decode()
    assert ' "it\'s a \\\\path\\\\ \\"q\\"\\n\\ttab… ' in shown  # --max-width 30
    assert "\\x000102030405" in shown
    assert len(outputs["table"]) < 10_000


def _large_run(fmt: str, payloads: list[bytes]) -> tuple[list[Any], list[Any], bytes]:
    """The events of ``payloads`` for ``fmt``, the parts an `OutputBuffer` handed over
    while rendering them, and the whole output."""
    from pgtail.render import make_renderer
    from pgtail.stream.writer import OutputBuffer

    encoder = row_encoder(fmt, redact=False) if fmt != "table" else None
    asm = Assembler(2, encoder=encoder)
    events = [e for p in payloads for e in asm.feed(p)]
    out = OutputBuffer()
    parts: list[Any] = []
    out.hand_over = parts.append
    renderer = make_renderer(fmt, out)
    for event in events:
        renderer.render(event)
    renderer.close()
    rest = out.take()
    pieces = [p for part in [*parts, rest] for p in ([part] if type(part) is bytes else part)]
    return events, parts, b"".join(pieces)


@pytest.mark.parametrize("enabled", [True, False])
def test_a_large_value_is_written_in_pieces_as_the_usual_line(
    enabled: bool, codegen: Callable[[bool], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Text of some MB (every awkward character, multi-byte ones across the chunks'
    cuts) in a row with a bytea and a NULL: json and sql write the line in pieces, handed
    over part by part, table gets the value decoded from the payload; the bytes are the
    usual path's."""
    from pgtail.changes import fastpath
    from pgtail.stream.writer import HAND_OVER_BYTES

    codegen(enabled)
    rng = random.Random(34)
    block = "".join(rng.choice(_ALPHABET) for _ in range(100_003))
    text = (block * 80)[: 6 << 20]  # about 9 MB of UTF-8
    data = bytes(range(256)) * 4096  # 1 MB: its hex text is 2 MB
    payloads = [
        pb.relation(
            7,
            "public",
            "big",
            [("id", 23, True), ("t", 25, False), ("b", 17, False), ("n", 25, False)],
        ),
        pb.begin(100, T0, 9),
        pb.insert(7, [b"1", text.encode(), b"\\x" + data.hex().encode(), None]),
        pb.commit(100, 140, T0),
    ]
    for fmt in ("json", "sql", "table"):
        events, parts, large = _large_run(fmt, payloads)
        if fmt == "table":
            (change,) = [e for e in events if type(e).__name__ == "Change"]
            assert change.new["t"] == text
        else:
            (rows,) = [e for e in events if isinstance(e, EncodedRows)]
            assert rows.pieces and not rows.lines
            assert len(parts) >= 2  # handed over before the line was rendered whole
            sizes = [sum(map(len, p)) if type(p) is list else len(p) for p in parts]
            assert max(sizes) < HAND_OVER_BYTES + (3 << 20)
        with monkeypatch.context() as patch:
            patch.setattr(fastpath, "LARGE_VALUE", 1 << 40)  # the usual path
            usual_events, _, usual = _large_run(fmt, payloads)
        assert not any(getattr(e, "pieces", ()) for e in usual_events)
        assert large == usual, fmt
    (line,) = _large_run("json", payloads)[2].splitlines()
    assert orjson.loads(line)["new"] == {"id": 1, "t": text, "b": "\\x" + data.hex(), "n": None}


def test_utf8_chunks_cut_between_characters() -> None:
    """Chunks of any size, of UTF-8 and of bytes that are not: decoded one by one, the
    same text as the whole; escaped one by one (JSON, SQL), the whole's escapes."""
    from pgtail.render.large import json_string_pieces, utf8_chunks
    from pgtail.render.sql_literals import quote_literal, quote_literal_pieces

    rng = random.Random(3)
    samples = [b"\x80\x80\x80\x80\x80abc", b"\xf0\x9f\x98", b"\xe4\xb8\xad" * 5]
    for _ in range(300):
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 40)))
        raw = text.encode()
        if rng.random() < 0.3:
            raw += bytes(rng.randint(0x80, 0xFF) for _ in range(3)) + raw
        samples.append(raw)
    for raw in samples:
        whole = raw.decode("utf-8", "replace")
        for size in (1, 2, 3, 5, 8):
            chunks = list(utf8_chunks(memoryview(raw), size))
            assert b"".join(chunks) == raw
            assert "".join(bytes(c).decode("utf-8", "replace") for c in chunks) == whole
            json_pieces = b"".join(json_string_pieces(memoryview(raw)))
            assert json_pieces == orjson.dumps(whole)
            sql = quote_literal_pieces(memoryview(raw), utf8_chunks(memoryview(raw), size))
            if "\x00" in whole:
                assert sql is None
            else:
                assert sql is not None and b"".join(sql) == quote_literal(whole).encode()
