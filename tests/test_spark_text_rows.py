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

    db15.execute("CREATE DOMAIN positive AS int CHECK (VALUE > 0)")
    db15.execute(TABLE)
    db15.execute("ALTER TABLE every REPLICA IDENTITY FULL")
    db15.execute("CREATE PUBLICATION p FOR TABLE every")
    db15.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    start = confirmed(db15)
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
