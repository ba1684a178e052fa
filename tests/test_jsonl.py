"""The JSON lines renderer on hand-built events: every shape, exact bytes where it matters."""

from __future__ import annotations

import io
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from pgtail.changes import (
    Change,
    Column,
    CommitPrepared,
    Message,
    RollbackPrepared,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.errors import ConfigurationError
from pgtail.filters import EventFilter, parse_ops
from pgtail.render import RenderOptions, make_renderer
from pgtail.render.jsonl import JsonLinesRenderer

# Every test here runs with the generated encoders and decoder and without them.
pytestmark = pytest.mark.usefixtures("both_ways")


T0 = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
TX = Transaction(xid=42, commit_lsn=0x16B374D848, end_lsn=0x16B374D878, commit_time=T0)
TABLE = Table(
    relation_id=1,
    schema="public",
    name="items",
    replica_identity="default",
    columns=(
        Column("id", 23, -1, True, "integer"),
        Column("name", 25, -1, False, "text"),
        Column("body", 25, -1, False, "text"),
    ),
)
FULL = Table(2, "s", "full_t", "full", (Column("id", 23, -1, False, "integer"),))


def render(*events: Any, tx_lines: bool = False) -> list[dict[str, Any]]:
    out = io.BytesIO()
    renderer = make_renderer("json", out, RenderOptions(tx_lines=tx_lines))
    for event in events:
        renderer.render(event)
    renderer.close()
    data = out.getvalue()
    assert data == b"" or data.endswith(b"\n")
    return [orjson.loads(line) for line in data.splitlines()]


def change(op: str = "insert", **kw: Any) -> Change:
    fields: dict[str, Any] = dict(
        op=op,
        table=TABLE,
        tx=TX,
        seq=0,
        new={"id": 1, "name": "a"},
        old=None,
        old_kind=None,
        unchanged_toast=(),
    )
    fields.update(kw)
    return Change(**fields)


def test_insert_exact_bytes() -> None:
    out = io.BytesIO()
    JsonLinesRenderer(out).render(change())
    assert out.getvalue() == (
        b'{"op":"insert","schema":"public","table":"items","xid":42,'
        b'"commit_lsn":"16/B374D848","end_lsn":"16/B374D878",'
        b'"commit_time":"2026-01-02T03:04:05.000006+00:00","seq":0,'
        b'"replica_identity":"default","key":{"id":1},"old":null,"old_kind":null,'
        b'"new":{"id":1,"name":"a"},"unchanged_toast":[]}\n'
    )


def test_fast_line_equals_record() -> None:
    renderer = JsonLinesRenderer(io.BytesIO())
    events = [
        change(),
        change("update", new={"id": 2, "name": "b"}, old={"id": 1}, old_kind="key", seq=1),
        change("update", new={"id": 1}, unchanged_toast=("body",), seq=2),
        change("delete", new=None, old={"id": 1}, old_kind="key", seq=3),
        change("update", table=FULL, new={"id": 2}, old={"id": 1}, old_kind="full", seq=4),
    ]
    for event in events:
        assert orjson.loads(renderer.change_line(event)) == orjson.loads(
            orjson.dumps(renderer.record(event))
        )


def test_key_old_and_unchanged_toast() -> None:
    lines = render(
        change("update", new={"id": 2, "name": "b"}, old={"id": 1}, old_kind="key"),
        change("update", new={"id": 1}, unchanged_toast=("body",), seq=1),
        change("delete", new=None, old={"id": 1}, old_kind="key", seq=2),
        change("update", table=FULL, new={"id": 2}, old={"id": 1}, old_kind="full", seq=3),
    )
    assert lines[0]["key"] == {"id": 1} and lines[0]["old_kind"] == "key"
    assert lines[1]["unchanged_toast"] == ["body"] and "body" not in lines[1]["new"]
    assert lines[1]["old"] is None and lines[1]["key"] == {"id": 1}
    assert lines[2]["new"] is None and lines[2]["op"] == "delete"
    assert lines[3]["key"] is None  # REPLICA IDENTITY FULL has no key columns
    assert lines[3]["old_kind"] == "full" and lines[3]["replica_identity"] == "full"


def test_tx_lines_only_with_option() -> None:
    events = (TxBegin(TX), change(), TxCommit(TX))
    assert [r["op"] for r in render(*events)] == ["insert"]
    lines = render(*events, tx_lines=True)
    assert [r["op"] for r in lines] == ["begin", "insert", "commit"]
    assert lines[0] == {
        "op": "begin",
        "xid": 42,
        "commit_lsn": "16/B374D848",
        "end_lsn": "16/B374D878",
        "commit_time": "2026-01-02T03:04:05.000006+00:00",
    }
    assert lines[2]["op"] == "commit" and lines[2]["end_lsn"] == "16/B374D878"


def test_truncate_shape() -> None:
    (line,) = render(Truncate((TABLE, FULL), True, False, TX, 3))
    assert line["op"] == "truncate"
    assert line["tables"] == [
        {"schema": "public", "table": "items"},
        {"schema": "s", "table": "full_t"},
    ]
    assert line["cascade"] is True and line["restart_identity"] is False
    assert line["xid"] == 42 and line["seq"] == 3


def test_message_shapes_text_and_base64() -> None:
    text, binary = render(
        Message("app", "héllo".encode(), True, 0x10, TX, 0),
        Message("bin", b"\xff\x00", False, 0x20, None, 0),
    )
    assert text["content"] == "héllo" and text["content_encoding"] == "utf-8"
    assert text["transactional"] is True and text["xid"] == 42 and text["lsn"] == "0/10"
    assert binary["content"] == "/wA=" and binary["content_encoding"] == "base64"
    assert binary["xid"] is None and "commit_lsn" not in binary


def test_prepared_transaction_shapes() -> None:
    prepared = Transaction(
        xid=7, commit_lsn=0x100, end_lsn=0x130, commit_time=T0, gid="g1", prepared=True
    )
    lines = render(
        TxBegin(prepared),
        change(tx=prepared),
        TxCommit(prepared),
        CommitPrepared(7, "g1", 0x200, 0x230, T0),
        RollbackPrepared(8, "g2", 0x300, 0x330, T0, T0),
    )
    assert [r["op"] for r in lines] == ["insert", "prepare", "commit_prepared", "rollback_prepared"]
    assert lines[0]["gid"] == "g1" and lines[0]["prepared"] is True
    assert lines[1]["end_lsn"] == "0/130"
    assert lines[2] == {
        "op": "commit_prepared",
        "xid": 7,
        "gid": "g1",
        "commit_lsn": "0/200",
        "end_lsn": "0/230",
        "commit_time": "2026-01-02T03:04:05.000006+00:00",
    }
    assert lines[3]["prepare_end_lsn"] == "0/300" and lines[3]["rollback_end_lsn"] == "0/330"


def test_origin_only_when_set() -> None:
    with_origin = Transaction(1, 0x10, 0x20, T0, origin="upstream", origin_lsn=5)
    (line,) = render(change(tx=with_origin))
    assert line["origin"] == "upstream"
    (plain,) = render(change())
    assert "origin" not in plain and "gid" not in plain and "prepared" not in plain


def test_filter_tables_ops_redact() -> None:
    flt = EventFilter(tables=("public.it*",), ops=parse_ops("insert,truncate"), redact=("name",))
    assert flt.apply(change(table=FULL)) is None
    assert flt.apply(change("delete", new=None, old={"id": 1}, old_kind="key")) is None
    redacted = flt.apply(change())
    assert isinstance(redacted, Change)
    assert redacted.new == {"id": 1, "name": "***"}
    narrowed = flt.apply(Truncate((TABLE, FULL), False, False, TX, 0))
    assert isinstance(narrowed, Truncate) and narrowed.tables == (TABLE,)
    assert flt.apply(Message("p", b"", False, 1, None, 0)) is None
    assert flt.apply(TxBegin(TX)) == TxBegin(TX)
    bare = EventFilter(tables=("items",))
    assert bare.apply(change()) is not None  # a bare name matches in any schema
    assert EventFilter(exclude=("s.*",)).apply(change(table=FULL)) is None
    assert EventFilter().is_noop


def test_redact_keeps_keys_and_nulls() -> None:
    flt = EventFilter(redact=("id", "name"))
    out = flt.apply(change(new={"id": 1, "name": None}))
    assert isinstance(out, Change)
    assert out.new == {"id": 1, "name": None}  # key column and NULL stay as they are


def test_parse_ops_rejects_unknown() -> None:
    assert parse_ops(None) is None
    assert parse_ops("Insert, delete") == frozenset({"insert", "delete"})
    with pytest.raises(ConfigurationError, match="upsert"):
        parse_ops("insert,upsert")


# --- the fast path: inserts encoded straight from their text ---------------------------

_FAST_COLUMNS = [
    # name, type OID, values to try (None: NULL)
    ("id", 23, [b"1", b"-5", b"0", b"2147483647"]),
    ("big", 20, [b"-9223372036854775808", b"12", None, b"0", b"10", b"007", b"+5"]),
    (
        'od"d %s',
        25,
        [b"plain", b"tab\there", b'quote"d', b"back\\slash", "é ✓".encode(), b"", None],
    ),
    ("price", 1700, [b"12.50", b"NaN", b"-0.001", None]),
    ("doc", 3802, [b'{"a": [1, 2]}', b"null", None]),
    ("raw", 114, [b'{"a":\n1}', None]),
    ("flag", 16, [b"t", b"f", None]),
    ("ratio", 701, [b"1.5", b"Infinity", b"1e+100", b"15", None]),
    (
        "at",
        1184,
        [
            b"2024-01-02 03:04:05.5+00",
            b"infinity",
            None,
            b"12345-01-02 03:04:05+00",  # a five-digit year: the first space moves
            b"2024-01-02 03:04:05+00 BC",
            b"2024-01-02 03:04:05+05:30",  # not UTC: the converter's
            b'2024-01-02 03:0"4:05+00',  # malformed: what JSON escapes
            "2024-01-02 03:04:05é+00".encode(),
            b"2024-01-02\t03:04:05+00",
            b"2024-01-02 03:04 :05+00",  # two spaces: only the first becomes a T
        ],
    ),
    ("tags", 1009, [b'{a,"b c",NULL}', b"{}", None]),
    ("mood", 16_384, [b"happy", None]),  # a user type (enum): its text
]


FastColumns = list[tuple[str, int, list[bytes | None]]]


def _fast_rows(fast_columns: FastColumns) -> list[list[bytes | None]]:
    rows = []
    for n in range(max(len(v) for *_, v in fast_columns)):
        rows.append([values[n % len(values)] for *_, values in fast_columns])
    # and rows without NULLs: each value once, the other columns at their first value
    for i, (*_, values) in enumerate(fast_columns):
        for value in values[1:]:
            if value is not None:
                row = [first for *_, (first, *_) in fast_columns]
                row[i] = value
                rows.append(row)
    return rows


def _fast_payloads(key: str, fast_columns: FastColumns = _FAST_COLUMNS) -> list[bytes]:
    from tests import pgbytes as pb

    keys = key.split(",")
    columns = [(name, oid, name in keys) for name, oid, _ in fast_columns]
    relation = pb.relation(7, "we ird", "t%d", columns, "d" if key else "n")
    rows = _fast_rows(fast_columns)
    key_positions = [i for i, (name, *_) in enumerate(fast_columns) if name in keys]
    pairs = list(zip(rows, rows[1:] + rows[:1], strict=True))  # an old row, a new one
    return [
        relation,
        pb.begin(100, T0, 9),
        *(pb.insert(7, row) for row in rows),
        *(pb.update(7, row) for row in rows),  # no old row: an insert's line
        *(pb.delete(7, row, "O") for row in rows),  # the whole old row
        *(  # the old key, the other columns NULL
            pb.delete(7, [v if i in key_positions else None for i, v in enumerate(row)], "K")
            for row in rows
        ),
        # an update with the whole old row (FULL), and with its old key (a key change)
        *(pb.update(7, new, old=row, old_kind="O") for row, new in pairs),
        *(
            pb.update(
                7,
                new,
                old=[v if i in key_positions else None for i, v in enumerate(row)],
                old_kind="K",
            )
            for row, new in (pairs if key_positions else ())
        ),  # fmt: skip
        pb.commit(100, 140, T0),
    ]


@pytest.mark.parametrize("key", ["id", "id,big", ""], ids=["one-key", "two-keys", "no-key"])
def test_encoded_rows_render_as_changes_do(key: str) -> None:
    """Inserts, updates without an old row, deletes with the old row or key; rows with and
    without NULLs, awkward names, every kind of writer: the same bytes."""
    from pgtail.changes import Assembler, EncodedRows
    from pgtail.render.jsonl import json_line_encoder

    payloads = _fast_payloads(key)
    outputs = []
    for encoder in (None, json_line_encoder):
        asm = Assembler(1, encoder=encoder)
        events = [e for p in payloads for e in asm.feed(p)]
        if encoder is not None:
            inserts = [e for e in events if isinstance(e, EncodedRows)]
            assert sum(e.count for e in inserts) == len(payloads) - 3  # every row encoded
        out = io.BytesIO()
        renderer = JsonLinesRenderer(out)
        for event in events:
            renderer.render(event)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
    assert outputs[0].count(b"\n") == len(payloads) - 3


def test_updates_with_an_old_row_or_key_take_the_quick_lane() -> None:
    """An Update with its old key or whole old row becomes the line straight from the
    payload (an `EncodedRows` of op update); one with unchanged TOAST in its new row or
    its old row, or a binary value, goes the general way; the bytes are the same."""
    from pgtail.changes import Assembler, Change, EncodedRows
    from pgtail.render.jsonl import json_line_encoder
    from tests import pgbytes as pb

    columns = [("id", 23, True), ('na"me', 25, False), ("body", 25, False)]
    full_columns = [(n, oid, True) for n, oid, _ in columns]
    payloads = [
        pb.relation(16384, "public", "items", columns),
        pb.relation(16385, "public", "full", full_columns, replica_identity="f"),
        pb.begin(0x100, 0, 7),
        pb.update(16384, [b"2", b"n", "u"], old=[b"1", None, None], old_kind="K"),  # general
        pb.update(16384, [b"3", None, b"b"], old=[b"2", None, None], old_kind="K"),
        pb.update(16385, [b"1", b'n"ew \xc3\xa9', b"b"], old=[b"1", b"old", b"b"], old_kind="O"),
        pb.update(16385, [b"1", b"x", None], old=[b"1", b"x", None], old_kind="O"),
        pb.update(16385, [b"1", b"y", b"b"], old=[b"1", b"x", "u"], old_kind="O"),  # general
        pb.update(16385, [b"1", ("b", b"z"), b"b"], old=[b"1", b"x", b"b"], old_kind="O"),
        pb.update(16385, [b"1", b"x", "u"], old=[b"1", b"x", b"b"], old_kind="O"),  # general
        pb.commit(0x100, 0x200, 0),
    ]
    fast, slow = Assembler(1, encoder=json_line_encoder), Assembler(1)
    events = [e for p in payloads for e in fast.feed(p)]
    general = [e for p in payloads for e in slow.feed(p)]
    outputs = []
    for each in (events, general):
        out = io.BytesIO()
        renderer = JsonLinesRenderer(out)
        for event in each:
            renderer.render(event)
        outputs.append(out.getvalue())
    encoded = [(e.table.name, e.op, e.count) for e in events if type(e) is EncodedRows]
    assert encoded == [("items", "update", 1), ("full", "update", 2)]
    assert sum(type(e) is Change for e in events) == 4
    assert outputs[0] == outputs[1]
    lines = [orjson.loads(line) for line in outputs[0].splitlines()]
    assert lines[1]["key"] == lines[1]["old"] == {"id": 2}
    assert lines[1]["new"] == {"id": 3, 'na"me': None, "body": "b"}
    assert lines[2]["old_kind"] == "full" and lines[2]["new"]['na"me'] == 'n"ew é'


def test_encoded_rows_keep_their_op_through_filters_and_rendering() -> None:
    """An encoded run of updates renders with op "update", and --ops / --table filter it
    by its own op and table."""
    from pgtail.changes import EncodedRows

    lines = b'"seq":0,"x":1}\n"seq":1,"x":2}\n'
    updates = EncodedRows(TABLE, TX, 0, 2, lines, "update")
    inserts = EncodedRows(FULL, TX, 2, 2, lines)
    assert [r["op"] for r in render(updates, inserts)] == ["update"] * 2 + ["insert"] * 2
    assert [(r["table"], r["seq"]) for r in render(updates.head(1))] == [("items", 0)]
    only_updates = EventFilter(ops=parse_ops("update"))
    assert only_updates.apply(updates) is updates
    assert only_updates.apply(inserts) is None
    assert EventFilter(ops=parse_ops("insert")).apply(updates) is None
    assert EventFilter(tables=("s.*",)).apply(updates) is None
    assert EventFilter(tables=("s.*",)).apply(inserts) is inserts


# --- generated encoders and the plain ones ----------------------------------------------

# tables the encoders shape differently: one string or timestamptz column checked on its
# own, several checked together, and wider than the decoder's unrolled readers
_ONE_TEXT: FastColumns = [("t", 25, [b"plain", b'q"', "é".encode(), b"", None, b"a\x01"])]
_ONE_TIME: FastColumns = [("at", 1184, _FAST_COLUMNS[8][2])]
_TWO_TIMES: FastColumns = [*_ONE_TIME, ("at2", 1184, [b"2024-01-02 03:04:05+00", None])]
_WIDE: FastColumns = [
    (f"c{i}{name}", oid, values[i % len(values) :] + values[: i % len(values)])
    for i, (name, oid, values) in enumerate(_FAST_COLUMNS * 7)
]
_ODD_VALUES: FastColumns = [  # values no server sends: the encoders may raise (both ways)
    ("id", 23, [b"1", b"x1", b"", b"007", b"+5", b"-0", b" 5", None]),
    ("at", 1184, [b"2024-01-02 03:04:05+00", b"+00", b"", b"\xff+00", None]),
    ("t", 25, [b"a", b"\xff\xfe", b"\x00", None]),
    ("flag", 16, [b"t", b"x", b"", None]),
    ("doc", 3802, [b"{}", b"{", b"", None]),
]
_ONE_ODD_TIME: FastColumns = [("at", 1184, [b"2024-01-02 03:04:05+00", b"+00", b"x+00", None])]
_TABLES = {
    "fast": _FAST_COLUMNS,
    "one-text": _ONE_TEXT,
    "one-timestamptz": _ONE_TIME,
    "two-timestamptz": _TWO_TIMES,
    "wide": _WIDE,
    "odd-values": _ODD_VALUES,
    "one-odd-timestamptz": _ONE_ODD_TIME,
}


def _encoder_outcomes(fast_columns: FastColumns, key: list[str]) -> list[bytes | str]:
    """Every encoder of the table on every row: the line, or "raised"."""
    from pgtail.render.jsonl import json_line_encoder
    from pgtail.values import converters

    table = Table(
        9,
        "s",
        "t",
        "default",
        tuple(Column(name, oid, -1, name in key, None) for name, oid, _ in fast_columns),
    )
    encoders = json_line_encoder(table, [converters(oid)[0] for _, oid, _ in fast_columns])
    assert encoders is not None and encoders.full_delete is not None
    assert encoders.key_delete is not None
    functions = [encoders.plain, encoders.with_nulls, *encoders.full_delete, encoders.key_delete]
    outcomes: list[bytes | str] = []
    for seq, row in enumerate(_fast_rows(fast_columns)):
        for function in functions:
            try:
                outcomes.append(function(seq, *row))
            except Exception:
                outcomes.append("raised")
    return outcomes


@pytest.mark.parametrize("name", list(_TABLES))
def test_generated_and_plain_encoders_write_the_same_bytes(
    codegen: Callable[[bool], None], name: str
) -> None:
    """Each encoder on each row (those with NULLs through the plain one too): the same line,
    or both raise (the assembler then takes the general path)."""
    fast_columns = _TABLES[name]
    for key in ([], [fast_columns[0][0]], [c[0] for c in fast_columns[:2]]):
        codegen(True)
        generated = _encoder_outcomes(fast_columns, key)
        codegen(False)
        plain = _encoder_outcomes(fast_columns, key)
        assert plain == generated
        assert sum(isinstance(line, bytes) for line in plain) > len(plain) // 3


@pytest.mark.parametrize("name", [name for name in _TABLES if "odd" not in name])
def test_generated_and_plain_paths_render_the_same(
    codegen: Callable[[bool], None], name: str
) -> None:
    """Decoded, assembled and rendered (the fast path where it applies, the general path
    for the rest): the same bytes both ways."""
    from pgtail.changes import Assembler
    from pgtail.render.jsonl import json_line_encoder

    payloads = _fast_payloads(_TABLES[name][0][0], _TABLES[name])
    outputs = []
    for enabled in (True, False):
        codegen(enabled)
        for encoder in (json_line_encoder, None):
            asm = Assembler(1, encoder=encoder)
            out = io.BytesIO()
            renderer = JsonLinesRenderer(out)
            for payload in payloads:
                for event in asm.feed(payload):
                    renderer.render(event)
            outputs.append(out.getvalue())
    assert outputs[0].count(b"\n") == len(payloads) - 3
    assert outputs == [outputs[0]] * 4


def test_plain_encoders_are_not_generated(codegen: Callable[[bool], None]) -> None:
    from pgtail.render.jsonl import json_line_encoder
    from pgtail.values import converters

    table = Table(9, "s", "t", "default", (Column("n", 23, -1, True, None),))
    codegen(False)
    encoders = json_line_encoder(table, [converters(23)[0]])
    assert encoders is not None
    assert not encoders.plain.__code__.co_filename.startswith("<")
    codegen(True)
    encoders = json_line_encoder(table, [converters(23)[0]])
    assert encoders is not None
    assert encoders.plain.__code__.co_filename.startswith("<pgtail JSON lines, 1 columns #")


def test_traceback_through_generated_encoder_shows_its_line(
    codegen: Callable[[bool], None],
) -> None:
    from pgtail.render.jsonl import json_line_encoder
    from pgtail.values import converters

    codegen(True)
    table = Table(9, "s", "t", "default", (Column("n", 23, -1, True, None),))
    encoders = json_line_encoder(table, [converters(23)[0]])
    assert encoders is not None
    with pytest.raises(ValueError) as caught:
        encoders.plain(0, b"x1")
    text = "".join(traceback.format_exception(caught.value))
    assert '"<pgtail JSON lines, 1 columns #' in text
    assert "    j0 = int(v0)\n" in text


def test_c1_control_characters_are_escaped_on_every_path() -> None:
    """U+0080..U+009F were written raw (orjson does): escaped like the C0 ones, in text
    written by the fast path (with and without NULLs), the general path (an update with
    its old key), a jsonb document's strings, a table's name, and a snapshot's rows."""
    from pgtail.changes import Assembler, EncodedRows, SnapshotRows, TableCopy
    from pgtail.render.jsonl import json_line_encoder
    from tests import pgbytes as pb

    c1 = "a\x85b\x9b[31m\x80\x9f é©"
    text = c1.encode()
    doc = orjson.dumps({"k": c1})
    payloads = [
        pb.relation(7, "s\x9c", "t", [("id", 23, True), ("v", 25, False), ("d", 3802, False)]),
        pb.begin(100, T0, 9),
        pb.insert(7, [b"1", text, doc]),
        pb.insert(7, [b"2", text, None]),
        pb.update(7, [b"3", text, doc], old=[b"4", None, None]),
        pb.commit(100, 140, T0),
    ]
    out = io.BytesIO()
    renderer = JsonLinesRenderer(out)
    asm = Assembler(1, encoder=json_line_encoder)
    events = [e for p in payloads for e in asm.feed(p)]
    table = next(e.table for e in events if isinstance(e, EncodedRows))
    copy = TableCopy(table, 0x100, 0, 1, 1)
    row = {"id": 5, "v": c1, "d": orjson.Fragment(doc)}
    events.append(SnapshotRows(copy, 0, 1, rows=(row,)))
    for event in events:
        renderer.render(event)
    lines = out.getvalue().splitlines()
    assert len(lines) == 4
    for raw in lines:
        assert not any(0x80 <= ord(ch) <= 0x9F for ch in raw.decode()), raw
        assert b"\\u0085" in raw and b"\\u009f" in raw and "é©".encode() in raw
        record = orjson.loads(raw)
        assert record["schema"] == "s\x9c"
        assert record["new"]["v"] == c1
        if record["new"]["d"] is not None:
            assert record["new"]["d"] == {"k": c1}
