"""Table renderer: exact text at fixed widths without colour, for every event kind."""

from __future__ import annotations

import io
from typing import Any

import orjson
import pytest

from pgtail.changes import (
    CommitPrepared,
    Event,
    Message,
    RollbackPrepared,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.render import RenderOptions, make_renderer
from pgtail.render.cells import show_string
from pgtail.render.psql_values import pg_interval
from pgtail.render.table import CHUNK_ROWS, TableRenderer
from tests.events import TIME, TX, USERS, change, col

FULL = Table(
    2,
    "Sales",
    "Order Items",
    "full",
    (col("id", 23, True), col("qty", 23, True), col("note", 25, True), col("doc", 3802, True)),
)


def render(events: list[Event], **options: Any) -> str:
    out = io.BytesIO()
    renderer = TableRenderer(out, RenderOptions(**options))
    for event in events:
        renderer.render(event)
    renderer.close()
    return out.getvalue().decode("utf-8")


HEADER = "── xid 741 · lsn 0/16B3748 · 2026-11-21 23:55:34.123456+00 ─────────────────────"


def test_insert_update_delete_null_toast_and_quoted_strings() -> None:
    text = render(
        [
            TxBegin(TX),
            change("insert", USERS, {"id": 1, "name": "alice", "bio": None, "score": "1.50"}),
            change("insert", USERS, {"id": 2, "name": "NULL", "bio": "", "score": "NaN"}),
            change(
                "insert",
                USERS,
                {"id": 3, "name": "⋯ unchanged toast", "bio": ' "q" ', "score": "-2"},
            ),
            change("update", USERS, {"id": 2, "name": "bob", "score": "2"}, toast=("bio",)),
            change(
                "update",
                USERS,
                {"id": 4, "name": "x\x1b[31mred", "bio": "b", "score": None},
                {"id": 2},
                "key",
            ),
            change("delete", USERS, None, {"id": 4}, "key"),
            TxCommit(TX),
        ],
        width=80,
    )
    assert text == (
        f"{HEADER}\n"
        " public.users  key: id\n"
        " op     │    id │ name                │ bio               │ score\n"
        "────────┼───────┼─────────────────────┼───────────────────┼───────\n"
        " insert │     1 │ alice               │ NULL              │  1.50\n"
        ' insert │     2 │ "NULL"              │ ""                │   NaN\n'
        ' insert │     3 │ "⋯ unchanged toast" │ " \\"q\\" "         │    -2\n'
        " update │     2 │ bob                 │ ⋯ unchanged toast │     2\n"
        ' update │ 2 → 4 │ "x\\u001b[31mred"    │ b                 │  NULL\n'
        " delete │     4 │                     │                   │\n"
        " note: old rows: key only, if it changed (REPLICA IDENTITY DEFAULT); whole\n"
        "   rows: ALTER TABLE public.users REPLICA IDENTITY FULL\n"
        "\n"
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("plain", "plain"),
        ("NULL", '"NULL"'),
        ("null", "null"),
        ("", '""'),
        (" lead", '" lead"'),
        ("trail\t", '"trail\\t"'),
        ('"quoted"', '"\\"quoted\\""'),
        ("⋯ unchanged toast", '"⋯ unchanged toast"'),
        ("⋯", '"⋯"'),
        ("unchanged", "unchanged"),
        ("a\nb", '"a\\nb"'),
        ("bell\x07", '"bell\\u0007"'),
        ("csi\x9b", '"csi\\u009b"'),
        ("bidi\u202e", '"bidi\\u202e"'),
        ("ünïcödé 🎉", "ünïcödé 🎉"),
    ],
)
def test_strings_are_never_confused_with_markers(value: str, shown: str) -> None:
    assert show_string(value) == shown


def test_full_identity_shows_old_and_new_and_changed_only_hides_the_rest() -> None:
    old = {"id": 1, "qty": 2, "note": "same", "doc": orjson.Fragment(b'{"a": 1}')}
    new = {"id": 1, "qty": 3, "note": "same", "doc": orjson.Fragment(b'{"a": 1}')}
    events: list[Event] = [
        TxBegin(TX),
        change("update", FULL, new, old, "full"),
        change("delete", FULL, None, old, "full"),
        TxCommit(TX),
    ]
    head = f'{HEADER}\n "Sales"."Order Items"  replica identity full\n'
    assert render(events) == head + (
        " op     │ id │   qty │ note │ doc\n"
        "────────┼────┼───────┼──────┼──────────\n"
        ' update │  1 │ 2 → 3 │ same │ {"a": 1}\n'
        ' delete │  1 │     2 │ same │ {"a": 1}\n'
        "\n"
    )
    assert render(events, changed_only=True) == head + (
        " op     │ id │   qty │ note │ doc\n"
        "────────┼────┼───────┼──────┼──────────\n"
        " update │  1 │ 2 → 3 │      │\n"
        ' delete │  1 │     2 │ same │ {"a": 1}\n'
        "\n"
    )
    # only updates: the unchanged columns are left out, but for the first one, which
    # tells the rows apart (REPLICA IDENTITY FULL names no key)
    assert render(events[:2] + events[3:], changed_only=True) == head + (
        " op     │ id │   qty\n────────┼────┼───────\n update │  1 │ 2 → 3\n\n"
    )


def test_changed_only_keeps_the_key_and_hides_unchanged_toast() -> None:
    events: list[Event] = [
        TxBegin(TX),
        change("update", USERS, {"id": 7, "name": "n", "score": "1"}, toast=("bio",)),
        TxCommit(TX),
    ]
    assert render(events, changed_only=True).splitlines()[2:5] == [
        " op     │ id │ name │ score",
        "────────┼────┼──────┼───────",
        " update │  7 │ n    │     1",
    ]


def test_replica_identity_notes() -> None:
    nothing = Table(3, "public", "log", "nothing", (col("line", 25),))
    nokey = Table(4, "public", "NoKey", "default", (col("line", 25),))
    index = Table(5, "app", "accounts", "index", (col("email", 25, True), col("name", 25)))
    text = render(
        [
            TxBegin(TX),
            change("update", nothing, {"line": "a"}),
            change("insert", nokey, {"line": "b"}),
            change("update", nokey, {"line": "c"}),
            change("delete", index, None, {"email": "a@b"}, "key"),
            TxCommit(TX),
        ],
        width=80,
    )
    assert text == (
        f"{HEADER}\n"
        " public.log\n"
        " op     │ line\n"
        "────────┼──────\n"
        " update │ a\n"
        " note: no old rows: REPLICA IDENTITY NOTHING; fix: ALTER TABLE public.log\n"
        "   REPLICA IDENTITY FULL\n"
        ' public."NoKey"\n'
        " op     │ line\n"
        "────────┼──────\n"
        " insert │ b\n"
        " update │ c\n"
        " note: no old rows: no primary key (REPLICA IDENTITY DEFAULT); fix: add one,\n"
        '   or ALTER TABLE public."NoKey" REPLICA IDENTITY FULL\n'
        " app.accounts  key: email\n"
        " op     │ email │ name\n"
        "────────┼───────┼──────\n"
        " delete │ a@b   │\n"
        " note: old rows: index columns only (REPLICA IDENTITY USING INDEX); whole\n"
        "   rows: ALTER TABLE app.accounts REPLICA IDENTITY FULL\n"
        "\n"
    )


def test_inserts_only_need_no_note() -> None:
    text = render([TxBegin(TX), change("insert", USERS, {"id": 1}), TxCommit(TX)])
    assert "note:" not in text


def test_collapse_counts_rows_and_truncate_keeps_order() -> None:
    rows: list[Event] = [
        change("insert", USERS, {"id": i, "name": f"u{i}", "bio": None, "score": "1"})
        for i in range(5)
    ]
    text = render(
        [
            TxBegin(TX),
            *rows,
            change("delete", USERS, None, {"id": 1}, "key"),
            Truncate((USERS,), False, False, TX, 9),
            change("insert", USERS, {"id": 9}),
            TxCommit(TX),
        ],
        collapse=2,
        width=60,
    )
    assert text == (
        "── xid 741 · lsn 0/16B3748 · 2026-11-21 23:55:34.123456+00 ─\n"
        " public.users  key: id\n"
        " op     │ id │ name │ bio  │ score\n"
        "────────┼────┼──────┼──────┼───────\n"
        " insert │  0 │ u0   │ NULL │     1\n"
        " insert │  1 │ u1   │ NULL │     1\n"
        " TRUNCATE public.users\n"
        " … 5 more rows of public.users not shown (4 insert, 1\n"
        "   delete; --collapse 2)\n"
        "\n"
    )


def test_interleaved_relations_are_grouped_per_table() -> None:
    other = Table(9, "public", "other", "default", (col("k", 23, True),))
    text = render(
        [
            TxBegin(TX),
            change("insert", USERS, {"id": 1}),
            change("insert", other, {"k": 1}),
            change("insert", USERS, {"id": 2}),
            TxCommit(TX),
        ]
    )
    lines = text.splitlines()
    assert [line for line in lines if line.startswith(" public.")] == [
        " public.users  key: id",
        " public.other  key: k",
    ]
    assert lines.index(" insert │  2 │      │     │") < lines.index(" public.other  key: k")


def test_too_many_columns_fold_vertically_on_a_narrow_terminal() -> None:
    wide = Table(
        6,
        "public",
        "wide",
        "default",
        (col("id", 23, True), *(col(f"column_{i}", 25) for i in range(10))),
    )
    values = {f"column_{i}": f"value number {i}" for i in range(10)}
    text = render(
        [
            TxBegin(TX),
            change("insert", wide, {"id": 1, **values}),
            change("update", wide, {"id": 1, **values, "column_3": None}),
            TxCommit(TX),
        ],
        width=40,
    )
    assert text == (
        "── xid 741 · lsn 0/16B3748 ─────────────\n"
        "   2026-11-21 23:55:34.123456+00\n"
        " public.wide  key: id\n"
        "─[ insert 1 ]───────────────────────────\n"
        " id       │ 1\n"
        + "".join(f" column_{i} │ value number {i}\n" for i in range(10))
        + "─[ update 2 ]───────────────────────────\n"
        " id       │ 1\n"
        + "".join(f" column_{i} │ {'NULL' if i == 3 else f'value number {i}'}\n" for i in range(10))
        + " note: old rows: key only, if it\n"
        "   changed (REPLICA IDENTITY DEFAULT);\n"
        "   whole rows: ALTER TABLE public.wide\n"
        "   REPLICA IDENTITY FULL\n"
        "\n"
    )
    for line in text.splitlines():
        assert len(line) <= 40, line


def test_long_values_are_cut_and_columns_shrink_to_the_width() -> None:
    text = render(
        [
            TxBegin(TX),
            change(
                "insert",
                USERS,
                {
                    "id": 1,
                    "name": "a very long name that goes on and on and on",
                    "bio": "b" * 100,
                    "score": "12345678901234567890.5",
                },
            ),
            TxCommit(TX),
        ],
        width=60,
        max_width=30,
    )
    lines = text.splitlines()
    assert lines[2:5] == [  # a number is never cut: the text columns give way
        " op     │ id │ name      │ bio      │                  score",
        "────────┼────┼───────────┼──────────┼───────────────────────",
        " insert │  1 │ a very l… │ bbbbbbb… │ 12345678901234567890.5",
    ]
    wide = render([TxBegin(TX), change("insert", USERS, {"id": 1, "bio": "b" * 100})], width=200)
    assert " │ " + "b" * 39 + "…" in wide  # --max-width 40 by default


def test_update_cells_share_a_narrow_column_or_fold() -> None:
    table = Table(7, "public", "t", "full", (col("c0", 25, True), col("c1", 25, True)))
    old = dict.fromkeys(("c0", "c1"), "old value here, quite long")
    new = dict.fromkeys(("c0", "c1"), "new value here, quite long")
    text = render([TxBegin(TX), change("update", table, new, old, "full"), TxCommit(TX)])
    assert text.splitlines()[2:5] == [
        " op     │ c0                                 │ c1",
        "────────┼────────────────────────────────────┼──────────────────────────────────",
        " update │ old value here… → new value here,… │ old value here… → new value here…",
    ]
    # six of them would leave each side a few characters: fold instead
    table = Table(7, "public", "t", "full", tuple(col(f"c{i}", 25, True) for i in range(6)))
    old = {f"c{i}": "old value here" for i in range(6)}
    new = {f"c{i}": "new value here" for i in range(6)}
    text = render([TxBegin(TX), change("update", table, new, old, "full"), TxCommit(TX)])
    assert text.splitlines()[1:] == [
        " public.t  replica identity full",
        "─[ update 1 ]" + "─" * 67,
        *(f" c{i} │ old value here → new value here" for i in range(6)),
        "",
    ]


def test_truncate_messages_and_two_phase() -> None:
    prepared = Transaction(742, 0x2000, 0x2030, TIME, gid="g'1\n", prepared=True)
    origin = Transaction(743, 0x3000, 0x3030, TIME, origin="node1", origin_lsn=0x10, streamed=True)
    other = Table(8, "public", "b", "default", ())
    text = render(
        [
            TxBegin(prepared),
            Truncate((USERS, other), True, True, prepared, 0),
            Message("pfx", b"hello\nworld", True, 0x2010, prepared, 1),
            TxCommit(prepared),
            CommitPrepared(742, "g'1\n", 0x2100, 0x2130, TIME),
            RollbackPrepared(744, "two", 0x2200, 0x2230, TIME, TIME),
            Message("bin", b"\xff\x00", False, 0x2300, None, 0),
            TxBegin(origin),
            TxCommit(origin),
        ]
    )
    assert text == (
        '── PREPARE TRANSACTION "g\'1\\n" · xid 742 · lsn 0/2000 ──────────────────────────\n'
        "   2026-11-21 23:55:34.123456+00\n"
        " TRUNCATE public.users, public.b RESTART IDENTITY CASCADE\n"
        ' message "pfx" (transactional, 11 bytes, lsn 0/2010): "hello\\nworld"\n'
        " prepared; COMMIT or ROLLBACK PREPARED follows\n"
        "\n"
        '── COMMIT PREPARED "g\'1\\n" · xid 742 · lsn 0/2100 ──────────────────────────────\n'
        "   2026-11-21 23:55:34.123456+00\n"
        "\n"
        '── ROLLBACK PREPARED "two" · xid 744 · lsn 0/2230 ──────────────────────────────\n'
        "   2026-11-21 23:55:34.123456+00\n"
        "\n"
        ' message "bin" (non-transactional, 2 bytes, lsn 0/2300): 0xff00\n'
        "\n"
        "── xid 743 · lsn 0/3000 · 2026-11-21 23:55:34.123456+00 ────────────────────────\n"
        '   origin "node1" @ 0/10 · streamed\n'
        "\n"
    )


def test_long_message_is_cut_to_the_width() -> None:
    text = render([Message("p", b"x" * 500, False, 0x10, None, 0)], width=80)
    line = text.splitlines()[0]
    assert len(line) == 80 and line.endswith("x…")


def test_colour_styles_markers_and_escapes_values() -> None:
    text = render(
        [
            TxBegin(TX),
            change("insert", USERS, {"id": 1, "name": "\x1b[2J", "bio": None}, toast=("score",)),
            TxCommit(TX),
        ],
        color=True,
    )
    assert "\x1b[2mNULL\x1b[0m" in text  # dim NULL
    assert "\x1b[2;3m⋯ unchanged toast\x1b[0m" in text  # dim italic marker
    assert "\x1b[32minsert\x1b[0m" in text
    assert "\x1b[2J" not in text and '"\\u001b[2J"' in text


def test_big_transactions_are_written_in_chunks() -> None:
    out = io.BytesIO()
    renderer = TableRenderer(out, RenderOptions(collapse=0))
    renderer.render(TxBegin(TX))
    after_begin = len(out.getvalue())
    for i in range(CHUNK_ROWS):
        renderer.render(change("insert", USERS, {"id": i}))
    # a full chunk is printed before the transaction ends, and nothing is kept
    assert len(out.getvalue()) > after_begin
    assert out.getvalue().decode().count(" insert │") == CHUNK_ROWS
    renderer.render(change("insert", USERS, {"id": -1}))
    renderer.render(TxCommit(TX))
    assert out.getvalue().decode().count(" insert │") == CHUNK_ROWS + 1


def test_collapsed_rows_are_not_kept() -> None:
    out = io.BytesIO()
    renderer = TableRenderer(out, RenderOptions(collapse=3))
    renderer.render(TxBegin(TX))
    for i in range(10_000):
        renderer.render(change("insert", USERS, {"id": i}))
    size = len(out.getvalue())
    renderer.render(TxCommit(TX))
    text = out.getvalue().decode()
    assert text.count(" insert │") == 3
    assert "9,997 more rows of public.users not shown (9,997 insert; --collapse 3)" in text
    assert size <= len(HEADER.encode()) + 1  # nothing printed before the commit


def test_make_renderer_builds_the_table_renderer() -> None:
    out = io.BytesIO()
    renderer = make_renderer("table", out, RenderOptions(width=100))
    assert isinstance(renderer, TableRenderer)
    renderer.render(TxBegin(TX))
    renderer.close()
    assert out.getvalue().decode().startswith("── xid 741")
    assert len(out.getvalue().decode().splitlines()[0]) == 100


def test_timestamps_show_as_psql_does_and_are_not_cut_to_stubs() -> None:
    table = Table(
        10,
        "public",
        "events",
        "default",
        (col("id", 23, True), col("at", 1184), col("local", 1114), col("note", 25)),
    )
    new = {
        "id": 1,
        "at": "2026-11-22T00:11:30.049198+00:00",
        "local": "2026-11-22T01:11:30",
        "note": "n" * 41,
    }
    events: list[Event] = [
        TxBegin(TX),
        change("insert", table, new),
        change("update", table, {**new, "at": None}, {"id": 1, "at": new["at"]}, "key"),
        change("delete", table, None, {"id": 1}, "key"),
        TxCommit(TX),
    ]
    wide = render(events, width=120).splitlines()
    assert wide[4] == (
        " insert │  1 │ 2026-11-22 00:11:30.049198+00        │ 2026-11-22 01:11:30 │ "
        + "n" * 39
        + "…"
    )
    assert wide[5].startswith(" update │  1 │ 2026-11-22 00:11:30.049198+00 → NULL │")
    # too narrow for the timestamps: fold rather than cut them; blank cells get no line
    narrow = render(events, width=60).splitlines()
    assert narrow[2:8] == [
        "─[ insert 1 ]" + "─" * 47,
        " id    │ 1",
        " at    │ 2026-11-22 00:11:30.049198+00",
        " local │ 2026-11-22 01:11:30",
        " note  │ " + "n" * 39 + "…",
        "─[ update 2 ]" + "─" * 47,
    ]
    assert narrow[12:15] == [
        "─[ delete 3 ]" + "─" * 47,
        " id    │ 1",
        " note: old rows: key only, if it changed (REPLICA IDENTITY",
    ]


def test_long_truncates_and_headers_stay_within_the_width() -> None:
    tables = tuple(Table(100 + i, "public", f"table_number_{i}", "default", ()) for i in range(8))
    long_origin = Transaction(745, 0x10, 0x20, TIME, origin="o" * 200)
    text = render(
        [
            TxBegin(long_origin),
            Truncate(tables, True, False, long_origin, 0),
            TxCommit(long_origin),
        ],
        width=60,
    )
    lines = text.splitlines()
    assert all(len(line) <= 60 for line in lines), text
    assert lines[1] == '   origin "' + "o" * 48 + "…"
    assert lines[2].startswith(" TRUNCATE public.table_number_0, public.table_number_1,")
    assert lines[-2:] == ["   public.table_number_6, public.table_number_7 CASCADE", ""]


@pytest.mark.parametrize(
    ("iso", "shown"),
    [
        ("P1DT2H", "1 day 02:00:00"),
        ("P1Y2M", "1 year 2 mons"),
        ("PT-1S", "-00:00:01"),
        ("PT0S", "00:00:00"),
        ("P-1D", "-1 days"),
        ("P1DT-2H", "1 day -02:00:00"),
        ("P-1Y2M-3DT4H", "-1 years +2 mons -3 days +04:00:00"),
        ("PT-0.25S", "-00:00:00.25"),
        ("P3DT100H", "3 days 100:00:00"),
        ("infinity", "infinity"),
    ],
)
def test_intervals_are_shown_as_psql_shows_them(iso: str, shown: str) -> None:
    assert pg_interval(iso) == shown


def test_values_are_shown_as_psql_shows_them() -> None:
    table = Table(
        20,
        "public",
        "kinds",
        "default",
        (
            col("id", 23, True),
            col("i", 1186),
            col("b", 16),
            col("f", 701),
            col("bs", 1000),
            col("ts", 1185),
            col("by", 17),
        ),
    )
    new = {
        "id": 1,
        "i": "P1DT2H",
        "b": False,
        "f": 100.0,
        "bs": [True, None],
        "ts": ["2026-11-22T01:20:29.328234+00:00"],
        "by": "\\x0102",
    }
    text = render([TxBegin(TX), change("insert", table, new), TxCommit(TX)], width=120)
    assert text.splitlines()[4] == (
        ' insert │  1 │ 1 day 02:00:00 │ f │ 100 │ {t,NULL} │ {"2026-11-22 01:20:29.328234+00"}'
        " │ \\x0102"
    )
    # an unchanged interval is compared by value; a changed one shows both sides psql's way
    old = {**new, "i": "PT-1S"}
    updated = render(
        [TxBegin(TX), change("update", table, new, old, "full"), TxCommit(TX)], width=200
    )
    assert "-00:00:01 → 1 day 02:00:00" in updated


@pytest.mark.parametrize(
    ("value", "shown"),
    [(100.0, "100"), (0.1, "0.1"), (1e15, "1e+15"), (1e14, "100000000000000"), (1e-5, "1e-05")],
)
def test_floats_are_shown_as_psql_shows_them(value: float, shown: str) -> None:
    table = Table(21, "public", "f", "default", (col("f", 701),))
    text = render([TxBegin(TX), change("insert", table, {"f": value}), TxCommit(TX)])
    assert text.splitlines()[4] == f" insert │ {shown}"


def test_each_note_once_per_table_per_run() -> None:
    events: list[Event] = []
    for i in range(3):
        events += [
            TxBegin(TX),
            change("update", USERS, {"id": i, "name": "n", "bio": "b", "score": "1"}),
            TxCommit(TX),
        ]
    text = render(events, width=200)
    assert text.count("note: old rows: key only, if it changed") == 1
    assert text.count("update │") == 3


def test_changed_only_says_when_there_is_no_old_row() -> None:
    events: list[Event] = []
    for i in range(2):
        events += [
            TxBegin(TX),
            change("update", USERS, {"id": i, "name": "n", "bio": "b", "score": "1"}),
            TxCommit(TX),
        ]
    text = render(events, width=200, changed_only=True)
    note = (
        "note: --changed-only: no old row to compare (REPLICA IDENTITY DEFAULT sends only"
        " the key, when it changes); all columns shown"
    )
    assert text.count(note) == 1, text
    assert text.count(" update │  0 │ n    │ b   │     1") == 1
    # without --changed-only, nothing to explain
    assert "--changed-only" not in render(events, width=200)
    # a full old row: compared, no note
    full: list[Event] = [
        TxBegin(TX),
        change("update", FULL, {"id": 1}, {"id": 1}, "full"),
        TxCommit(TX),
    ]
    assert "note:" not in render(full, changed_only=True)


@pytest.mark.parametrize("width", [160, 80, 40])
def test_no_line_is_wider_than_the_terminal_when_columns_are_cut_to_fit(width: int) -> None:
    """The rule under a header cut to fit was one cell wider than the terminal, so it
    wrapped into a lone ─ line."""
    wide = Table(
        9,
        "public",
        "wide",
        "default",
        tuple(col(f"column_with_a_long_name_{n}", 25, n == 0) for n in range(6)),
    )
    row = {f"column_with_a_long_name_{n}": "v" * 30 for n in range(6)}
    text = render([TxBegin(TX), change("insert", wide, row), TxCommit(TX)], width=width)
    assert all(len(line) <= width for line in text.splitlines()), text
    assert "─" * 3 in text  # the rule is there (not folded into a lone line)


def test_numbers_are_never_cut_and_a_domain_over_int_is_right_aligned() -> None:
    table = Table(
        10,
        "public",
        "n",
        "default",
        (col("id", 20, True), col("amount", 1700), col("level", 16500), col("label", 16501)),
    )
    rows = [
        change("insert", table, {"id": 1, "amount": "1" + "0" * 60, "level": 7, "label": "x"}),
        change("insert", table, {"id": 2, "amount": "5", "level": 12345, "label": "yy"}),
    ]
    text = render([TxBegin(TX), *rows, TxCommit(TX)], width=200, max_width=20)
    assert "1" + "0" * 60 in text and "…" not in text
    header, _, first, second = text.splitlines()[2:6]
    # level (a domain over int: a user type OID, int values) is right-aligned like id;
    # label (a user type with text values) is not
    assert first.index("     7 │") < second.index("12345 │") + 1
    assert first.endswith("│ x") and second.endswith("│ yy")
    folded = render([TxBegin(TX), *rows, TxCommit(TX)], width=40, max_width=20)
    assert "1" + "0" * 60 in folded  # folded vertically, the number still whole


def test_piped_table_output_takes_its_width_from_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    from pgtail.render.options import terminal_style

    monkeypatch.setenv("COLUMNS", "132")
    assert terminal_style(False, "never") == (False, 132)
    monkeypatch.setenv("COLUMNS", "junk")
    assert terminal_style(False, "never") == (False, None)
    monkeypatch.delenv("COLUMNS")
    assert terminal_style(False, "never") == (False, None)
