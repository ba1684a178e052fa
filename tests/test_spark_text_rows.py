"""The typed read's columns built from the server's text (`pgtail.spark.text_rows`): the
same Arrow arrays as the decoded rows' values and as the JSON route they replace
(but for jsonb's null)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

from pgtail.lsn import parse_lsn  # noqa: E402
from tests.helpers import confirmed, settle  # noqa: E402

pytestmark = pytest.mark.server

TABLE = """
CREATE TABLE every (
    id bigint PRIMARY KEY, i2 smallint, i4 int, f4 real, f8 double precision,
    dec numeric(12, 2), num numeric, b boolean, t text, vc varchar(20), ch char(3), nm name,
    tz timestamptz, ts timestamp, d date, by bytea, j json, jb jsonb, u uuid, iv interval,
    ta text[], ia int[], jba jsonb[], multi int[][], pos positive
)
"""
ROWS = [
    "(1, -32768, 2147483647, 0.1, 0.30000000000000004, 1234567890.12, 12345678901234567890.5,"
    " true, 'caf\u00e9 \U0001f600', '', 'ab', 'nm', '2024-05-06 07:08:09.123456+02',"
    " '2024-05-06 07:08:09', '2024-05-06', '\\x00ff', '{\"a\":  [1.50, 2]}', '\"s\"',"
    " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '1 day 2 hours', ARRAY['x', NULL, 'y'],"
    " ARRAY[1, NULL], ARRAY['{\"k\": 1}'::jsonb, NULL], ARRAY[[1, 2], [3, 4]], 7)",
    "(2, NULL, NULL, 'NaN', '-Infinity', 'NaN', 'Infinity', false,"
    " E'tab\\there\\nnew\\rline \\\\ \"quoted\" \\x1f\\x1b', NULL, NULL, NULL, 'infinity',"
    " '-infinity', '0044-03-15 BC', '\\x', '[]', '{\"k\": \"a\\tb\\u001f\"}', NULL, NULL,"
    " '{}', '{}', '{}', NULL, NULL)",
    "(3, 0, 0, 'Infinity', 1e300, -0.50, 'NaN', NULL, '\\N', 'x', ' ', '', "
    " '0001-01-01 00:00:00+00', '10000-01-01 00:00:00', '5874897-12-31', NULL, NULL,"
    " 'null', NULL, NULL, ARRAY[E'a\\tb', '', 'NULL'], NULL, NULL, NULL, 1)",
    "(4, 1, 1, -1.5e-07, 1.5e-07, 0, 0.000, true, E'\\x1f', ',', 'a\"b', 'x',"
    " '1970-01-01 00:00:00+00', '2000-02-29 23:59:59.999999', '2000-02-29', '\\xdead',"
    " 'true', '1.5e300', NULL, '-1 mons', ARRAY['\"q\"', E'\\\\'], ARRAY[0], NULL, NULL, 2)",
]


def _every(db: Any) -> int:
    """``every`` (REPLICA IDENTITY FULL), publication ``p``, slot ``s``: the slot's start."""
    db.execute("CREATE DOMAIN positive AS int CHECK (VALUE > 0)")
    db.execute(TABLE)
    db.execute("ALTER TABLE every REPLICA IDENTITY FULL")
    db.execute("CREATE PUBLICATION p FOR TABLE every")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    return confirmed(db)


def same(a: Any, b: Any) -> bool:
    """Arrow arrays of one type and the same values (NaN equal to NaN)."""
    import math

    def values(array: Any) -> list[Any]:
        return ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in array.to_pylist()]

    return bool(a.type == b.type and values(a) == values(b))


def read(db: Any, encoder: Any, start: int, end: int) -> list[Any]:
    """The typed read's batch of ``every`` between two LSNs: `TypedRowBuffer` fed by a
    range read with ``encoder`` (None: every change decoded, `add_change`)."""
    from pgtail import catalog
    from pgtail.changes import Change, EncodedRows
    from pgtail.spark.schema import TypedRowBuffer
    from pgtail.spark.slot_options import replication_options
    from pgtail.stream.bounded import RangeRead, read_range

    with catalog.connect(db.dsn) as conn:
        server = catalog.server_info(conn)
        columns = catalog.table_columns(conn, "public", "every")
    version, opts = replication_options(
        server, ("p",), binary=False, messages=False, streaming=True
    )
    buffer = TypedRowBuffer("public", "every", columns)
    encoded = 0
    for event in read_range(db.dsn, "s", start, end, RangeRead(version, opts, encoder=encoder)):
        if type(event) is EncodedRows:
            buffer.add_encoded(event)
            encoded += event.count
        elif type(event) is Change:
            buffer.add_change(event)
    # every change was encoded (none fell back to the decoded route)
    assert encoded == (0 if encoder is None else 2 * len(ROWS) + 1)
    return buffer.take().columns


def test_the_typed_columns_from_the_servers_text_equal_the_decoded_values_and_the_json_route(
    db15: Any,
) -> None:
    """Every type of the rule, with NULLs, empty strings, tabs, newlines, the line's own
    separator and escape, quotes, backslashes, unicode, NaN and the infinities, BC and far
    dates, numeric with scale, arrays, bytea, json and jsonb, a domain: the columns built
    from the lines of `text_columns_encoder` equal those of the decoded changes
    (`add_change`) and those the JSON route built from `json_columns_encoder`'s lines
    (`arrow_columns_reader`), inserts and deletes (the whole old row) alike."""
    import pyarrow.compute as pc

    from pgtail.render.jsonl import json_columns_encoder
    from pgtail.spark.arrow_rows import arrow_columns_reader
    from pgtail.spark.schema import encoded_columns
    from pgtail.spark.text_rows import text_columns_encoder

    start = _every(db15)
    db15.execute("INSERT INTO every VALUES " + ", ".join(ROWS))
    db15.execute("DELETE FROM every WHERE id IN (1, 2, 3, 4)")
    db15.execute("INSERT INTO every (id) VALUES (5)")
    settle(db15)
    end = parse_lsn(str(db15.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))

    decoded = read(db15, None, start, end)
    from_text = read(db15, text_columns_encoder, start, end)
    assert len(from_text) == len(decoded)
    for mine, expected in zip(from_text, decoded, strict=True):
        assert same(mine, expected), [
            (x, y) for x, y in zip(mine.to_pylist(), expected.to_pylist(), strict=True) if x != y
        ]
    # the JSON route: the lines' new row, else the old one, read by Arrow's JSON reader
    from pgtail import catalog
    from pgtail.changes import EncodedRows
    from pgtail.spark.slot_options import replication_options
    from pgtail.stream.bounded import RangeRead, read_range

    with catalog.connect(db15.dsn) as conn:
        server = catalog.server_info(conn)
        columns = catalog.table_columns(conn, "public", "every")
    version, opts = replication_options(
        server, ("p",), binary=False, messages=False, streaming=True
    )
    runs = [
        e
        for e in read_range(
            db15.dsn, "s", start, end, RangeRead(version, opts, encoder=json_columns_encoder)
        )
        if type(e) is EncodedRows
    ]
    _, old, new = encoded_columns(runs, ("seq", "old", "new"))
    targets = [a.type for a in decoded[: len(columns)]]
    by_json = arrow_columns_reader(columns, targets)(pc.coalesce(new, old))
    # the one difference: a jsonb value that is JSON null, which the JSON route read as
    # SQL NULL (the decoded value, and now the typed read, is the text "null")
    for mine, expected in zip(from_text, by_json, strict=False):
        pairs = zip(mine.to_pylist(), expected.to_pylist(), strict=True)
        assert mine.type == expected.type
        assert all(x == y or (x, y) == ("null", None) or x != x for x, y in pairs), (mine, expected)


def _stage_workload(db: Any) -> tuple[int, int]:
    """``every`` under REPLICA IDENTITY FULL (inserts, whole-row deletes, NULLs), then
    DEFAULT (inserts, an update without an old row whose values need escaping, key
    deletes), then with a column added: (start, end) LSNs."""
    start = _every(db)
    db.execute("INSERT INTO every VALUES " + ", ".join(ROWS))
    db.execute("DELETE FROM every WHERE id IN (1, 2, 3, 4)")
    db.execute("INSERT INTO every (id) VALUES (5)")
    db.execute("ALTER TABLE every REPLICA IDENTITY DEFAULT")
    db.execute("INSERT INTO every VALUES " + ", ".join(ROWS))
    db.execute("UPDATE every SET j = E'{\"a\":\\n 1}', t = E'a\\x1bb\\x1fc\\rd' WHERE id = 4")
    db.execute("DELETE FROM every WHERE id IN (1, 5)")
    db.execute(
        "INSERT INTO every (id, t, vc, j, jb) VALUES"
        " (7, E'x\\x1fy\\x1bz\\nw\\r', E'\\x1b', E'{\"a\":\\n 1}', 'null')"
    )
    db.execute("ALTER TABLE every ADD COLUMN extra int")
    db.execute("INSERT INTO every (id, t, extra) VALUES (6, E'\\x1b[1mbold', 7)")
    settle(db)
    end = parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
    return start, end


@pytest.mark.parametrize("generated", [True, False], ids=["generated", "plain"])
def test_stage_lines_hold_the_json_lines_and_type_the_columns_as_the_json_route(
    db15: Any, codegen: Any, generated: bool
) -> None:
    """The stage lines (`stage_columns_encoder`, generated and plain alike) hold the key,
    old and new rows byte for byte as `json_columns_encoder`'s lines, and the columns
    `stage_columns_reader` types from their values equal those the JSON route
    (`arrow_columns_reader` of the new row, else the old one) reads from that JSON:
    inserts, whole-row and key deletes, an update, NULLs, values holding the line's
    separator, escape, newline and carriage return, json with a line break, jsonb null."""
    import pyarrow.compute as pc

    from pgtail import catalog
    from pgtail.changes import EncodedRows
    from pgtail.render.jsonl import json_columns_encoder
    from pgtail.spark.arrow_rows import arrow_columns_reader
    from pgtail.spark.changelog import log_schema
    from pgtail.spark.direct import file_schema
    from pgtail.spark.schema import encoded_columns
    from pgtail.spark.slot_options import replication_options
    from pgtail.spark.text_rows import stage_columns_encoder, stage_columns_reader
    from pgtail.stream.bounded import RangeRead, read_range

    codegen(generated)
    start, end = _stage_workload(db15)
    with catalog.connect(db15.dsn) as conn:
        server = catalog.server_info(conn)
        columns = catalog.table_columns(conn, "public", "every")[:-1]  # before "extra"
    version, opts = replication_options(
        server, ("p",), binary=False, messages=False, streaming=True
    )
    schema = file_schema(log_schema("public.every", columns))
    targets = [schema.field(i).type for i in range(len(columns))]

    def runs(encoder: Any) -> list[Any]:
        found = [
            e
            for e in read_range(
                db15.dsn, "s", start, end, RangeRead(version, opts, encoder=encoder)
            )
            if type(e) is EncodedRows and len(e.table.columns) == len(columns)
        ]
        return found

    staged = runs(stage_columns_encoder)
    json_runs = runs(json_columns_encoder)
    # the same changes encoded (the JSON decides which: the others go the general way)
    assert [(r.op, r.count) for r in staged] == [(r.op, r.count) for r in json_runs]
    assert sum(r.count for r in staged) >= 10
    lines = b"".join(run.lines for run in staged)
    assert b"\x1b\n" in lines and b"\x1b\x1f" in lines and b"\x1b\x1b" in lines  # escaped
    seq, head, typed = stage_columns_reader(columns, targets)(lines)
    json_seq, key, old, new = encoded_columns(json_runs)
    assert seq.equals(json_seq)
    for mine, expected in zip(head, (key, old, new), strict=True):
        assert mine.to_pylist() == expected.to_pylist()
    by_json = arrow_columns_reader(columns, targets)(pc.coalesce(new, old))
    for column, mine, expected in zip(columns, typed, by_json, strict=True):
        assert same(mine, expected), (column.name, mine, expected)


def test_a_task_stages_the_same_files_from_the_values_text_as_from_the_json(
    db15: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`stage_partition` types a table's stage lines from their text, and rows written
    before the table changed (a column added since) from their JSON: the staged file
    equals the one staged from the JSON alone."""
    import pyarrow.parquet as pq

    from pgtail.spark import direct
    from pgtail.spark.source import SourceDriver, parse_options

    _stage_workload(db15)
    driver = SourceDriver(parse_options({"dsn": db15.dsn, "slot": "s", "publication": "p"}))
    try:
        first = driver.initial()
        [partition] = driver.partitions(first, driver.latest(first, None, None, wait=True))
    finally:
        driver.close()
    took: list[bool] = []
    real = direct._TableFile.takes_lines

    def watched(self: Any, table: Any) -> bool:
        took.append(real(self, table))
        return took[-1]

    def staged(output: Any) -> Any:
        [manifest] = direct.stage_partition(partition, str(output))
        [file] = [r["file"] for r in manifest.to_pylist() if r["table"] == "every"]
        return pq.read_table(file)

    monkeypatch.setattr(direct._TableFile, "takes_lines", watched)
    from_text = staged(tmp_path / "text")
    assert True in took and False in took  # both routes: the rows before "extra" by JSON
    monkeypatch.setattr(direct._TableFile, "takes_lines", lambda self, table: False)
    from_json = staged(tmp_path / "json")
    assert from_text.schema == from_json.schema
    assert from_text.num_rows == from_json.num_rows == 18
    for name in from_text.column_names:
        assert same(
            from_text.column(name).combine_chunks(), from_json.column(name).combine_chunks()
        ), name


def test_stage_lines_are_the_same_bytes_generated_and_plain(codegen: Any) -> None:
    """`row_encoders`' text tail: the generated encoders and the hand-written twin write
    the same bytes for every function, with and without NULLs, for values that need
    escaping in the line (separator, escape, newline, carriage return: in text, in json
    whitespace, in a float's surrounding space) and values that do not (unicode too)."""
    from pgtail.changes.events import Column, Table
    from pgtail.spark.text_rows import stage_columns_encoder
    from pgtail.values.registry import converters

    oids = [20, 25, 23, 1700, 1184, 1009, 3802, 114, 16, 701, 1082, 17, 1186, 2950, 1114]
    table = Table(
        relation_id=1,
        schema="public",
        name="t",
        replica_identity="default",
        columns=tuple(Column(f"c{i}", oid, -1, i == 0, None) for i, oid in enumerate(oids)),
    )
    conv = [converters(oid, -1)[0] for oid in oids]
    usual = [b"1", b"cafe", b"2", b"3.50", b"2024-01-01 00:00:00+00", b"{a,\"b c\"}",
             b'{"k": [1, 2]}', b'{"a": 1}', b"t", b"1.5", b"2024-02-29", b"\\x00ff",
             b"1 day", b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", b"2024-01-01 00:00:00"]  # fmt: skip
    rows = [tuple(usual)]
    for i, special in [(1, b"a\x1fb\x1bc\nd\re"), (1, b"\x1b[1m"), (1, b"caf\xc3\xa9"),
                       (6, b'{"a":\n 1}'), (7, b'{"a":\n\r 1}'),
                       (9, b"\n1.5"), (3, b"NaN"), (4, b"2024-01-01 00:00:00+02")]:  # fmt: skip
        row = list(usual)
        row[i] = special
        rows.append(tuple(row))
    rows += [tuple(None if i % 3 else v for i, v in enumerate(row)) for row in rows]

    def lines() -> list[bytes]:
        encoders = stage_columns_encoder(table, conv)
        assert encoders is not None and encoders.full_delete and encoders.key_delete
        out = []
        for row in rows:
            for function in (encoders.plain, encoders.full_delete[0]):
                if None not in row:
                    out.append(function(3, *row))
            for function in (encoders.with_nulls, encoders.full_delete[1], encoders.key_delete):
                out.append(function(3, *row))
        return out

    codegen(True)
    generated = lines()
    codegen(False)
    assert lines() == generated
    assert any(b"\x1b\x1f" in line for line in generated)
    assert all(line.count(b"\n") - line.count(b"\x1b\n") == 1 for line in generated)
