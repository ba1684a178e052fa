"""SQL renderer: exact statements for every event kind, quoting helpers, warnings."""

from __future__ import annotations

import io
import traceback
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from pgtail.changes import (
    CommitPrepared,
    Message,
    RollbackPrepared,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.render import RenderOptions, make_renderer
from pgtail.render.sql import (
    RESERVED_KEYWORDS,
    SqlRenderer,
    comment_string,
    literal,
    quote_ident,
    quote_literal,
)
from tests.events import TIME, TX, USERS, change, col

# Every test here runs with the generated INSERT builders and without them.
pytestmark = pytest.mark.usefixtures("both_ways")

FULL = Table(
    2,
    "Sales",
    "order",
    "full",
    (col("n", 23, True), col("doc", 114, True), col("v", 701, True)),
)
NOTHING = Table(3, "public", "log", "nothing", (col("line", 25),))
NOKEY = Table(4, "public", "nokey", "default", (col("line", 25),))


def render(*events: object, warn: list[str] | None = None) -> str:
    out = io.BytesIO()
    extra: dict[str, object] = {"warn": warn.append} if warn is not None else {}
    renderer = SqlRenderer(out, RenderOptions(extra=extra))
    for event in events:
        renderer.render(event)  # type: ignore[arg-type]
    renderer.close()
    return out.getvalue().decode("utf-8")


# --- quoting helpers ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("users", "users"),
        ("_x9", "_x9"),
        ("x$y", "x$y"),
        ("Users", '"Users"'),
        ("my table", '"my table"'),
        ('a"b', '"a""b"'),
        ("select", '"select"'),
        ("user", '"user"'),
        ("int", '"int"'),  # column-name keyword
        ("left", '"left"'),  # type/function-name keyword
        ("name", "name"),  # unreserved keyword: bare
        ("9lives", '"9lives"'),
        ("$x", '"$x"'),
        ("ünï", '"ünï"'),
        ("", '""'),
    ],
)
def test_quote_ident(name: str, quoted: str) -> None:
    assert quote_ident(name) == quoted


def test_reserved_keywords_include_the_usual_suspects() -> None:
    assert {"select", "user", "table", "order", "group", "from", "json_table"} <= RESERVED_KEYWORDS
    assert "name" not in RESERVED_KEYWORDS and "text" not in RESERVED_KEYWORDS


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("plain", "'plain'"),
        ("", "''"),
        ("O'Reilly", "'O''Reilly'"),
        ("back\\slash", "E'back\\\\slash'"),
        ("line\nbreak", "E'line\\nbreak'"),
        ("cr\r tab\t bell\x07 del\x7f", "E'cr\\r tab\\t bell\\x07 del\\x7F'"),
        ("it's \\", "E'it''s \\\\'"),
        ("ünï 🎉 */ --", "'ünï 🎉 */ --'"),
    ],
)
def test_quote_literal(text: str, quoted: str) -> None:
    assert quote_literal(text) == quoted


def test_quote_literal_rejects_nul() -> None:
    with pytest.raises(ValueError, match="NUL"):
        quote_literal("a\x00b")


def test_comment_string_escapes_line_breaks() -> None:
    assert comment_string('g "1"\n*/\r--') == '"g \\"1\\"\\n*/\\r--"'


@pytest.mark.parametrize(
    ("value", "oid", "sql"),
    [
        (None, 23, "NULL"),
        (-5, 23, "-5"),
        (9223372036854775807, 20, "9223372036854775807"),
        (True, 16, "true"),
        (False, 16, "false"),
        ("1.50", 1700, "1.50"),
        ("-0.001", 1700, "-0.001"),
        ("NaN", 1700, "'NaN'::numeric"),
        ("Infinity", 1700, "'Infinity'::numeric"),
        (1.1, 701, "'1.1'::double precision"),
        ("-Infinity", 700, "'-Infinity'::real"),
        ("x'y", 25, "'x''y'"),
        ("ab  ", 1042, "'ab  '"),  # bpchar: uncast, never character(1)
        ("101", 1560, "'101'"),  # bit: uncast, never bit(1)
        ("\\x00ff", 17, "E'\\\\x00ff'::bytea"),
        (["a b", None, 'q"'], 1009, 'E\'{"a b",NULL,"q\\\\""}\'::text[]'),
        ([[1, 2], [3, None]], 1007, "'{{1,2},{3,NULL}}'::integer[]"),
        (orjson.Fragment(b'{"a": 1}'), 3802, "'{\"a\": 1}'::jsonb"),
        (orjson.Fragment(b'{"a": "it\'s"}'), 114, "'{\"a\": \"it''s\"}'::json"),
        (
            "2026-11-21T23:55:34.123456+00:00",
            1184,
            "'2026-11-21T23:55:34.123456+00:00'::timestamp with time zone",
        ),
        ("infinity", 1114, "'infinity'::timestamp without time zone"),
        ("happy", 90001, "'happy'"),  # unknown type: uncast literal
    ],
)
def test_literals(value: Any, oid: int, sql: str) -> None:
    assert literal(value, col("c", oid)) == sql


# --- statements --------------------------------------------------------------------------


def test_transaction_insert_update_delete() -> None:
    text = render(
        TxBegin(TX),
        change("insert", USERS, {"id": 1, "name": "alice", "bio": None, "score": "1.50"}),
        change("update", USERS, {"id": 1, "name": "bob", "score": "2"}, toast=("bio",)),
        change(
            "update", USERS, {"id": 2, "name": "x", "bio": "b", "score": None}, {"id": 1}, "key"
        ),
        change("delete", USERS, None, {"id": 2}, "key"),
        TxCommit(TX),
    )
    assert text == (
        "-- xid=741 commit_lsn=0/16B3748 end_lsn=0/16B3778 "
        "commit_time=2026-11-21T23:55:34.123456+00:00\n"
        "BEGIN;\n"
        "INSERT INTO public.users (id, name, bio, score) VALUES (1, 'alice', NULL, 1.50);\n"
        "UPDATE public.users SET name = 'bob', score = 2 WHERE id = 1;\n"
        "UPDATE public.users SET id = 2, name = 'x', bio = 'b', score = NULL WHERE id = 1;\n"
        "DELETE FROM public.users WHERE id = 2;\n"
        "COMMIT;\n"
    )


def test_full_identity_uses_the_whole_old_row_and_changes_one_row() -> None:
    old = {"n": 1, "doc": orjson.Fragment(b'{"a": 1}'), "v": None}
    new = {"n": 2, "doc": orjson.Fragment(b'{"a": 1}'), "v": None}
    text = render(
        change("update", FULL, new, old, "full"), change("delete", FULL, None, old, "full")
    )
    where = (
        '(tableoid, ctid) = (SELECT tableoid, ctid FROM "Sales"."order" WHERE '
        "n IS NOT DISTINCT FROM 1 AND doc::jsonb IS NOT DISTINCT FROM '{\"a\": 1}'::jsonb "
        "AND v IS NOT DISTINCT FROM NULL LIMIT 1)"
    )
    # json has no equality operator: compared as jsonb; unchanged columns (the same
    # literal, doc among them) are not SET
    assert text == (
        f'UPDATE "Sales"."order" SET n = 2 WHERE {where};\n'
        f'DELETE FROM "Sales"."order" WHERE {where};\n'
    )


def test_update_leaves_out_unchanged_columns_when_the_old_row_is_known() -> None:
    old = {"n": 1, "doc": None, "v": 1.5}
    new = {"n": 1, "doc": None, "v": 2.5}
    text = render(change("update", FULL, new, old, "full"))
    assert text.startswith('UPDATE "Sales"."order" SET v = \'2.5\'::double precision WHERE')
    # an update that changed nothing still updates the row
    same = render(change("update", FULL, old, old, "full"))
    assert same.startswith(
        'UPDATE "Sales"."order" SET n = 1, doc = NULL, v = \'1.5\'::double precision WHERE'
    )


def test_no_identity_becomes_a_comment_and_a_warning() -> None:
    warnings: list[str] = []
    text = render(
        change("update", NOTHING, {"line": "a\nb"}),
        change("delete", NOTHING, None),
        change("delete", NOKEY, None),
        warn=warnings,
    )
    lines = text.splitlines()
    assert all(line.startswith("-- ") for line in lines)
    assert lines[0] == (
        "-- cannot replay: public.log has REPLICA IDENTITY NOTHING, so the server sent no old "
        "row to find it by; fix: ALTER TABLE public.log REPLICA IDENTITY FULL (or add a "
        "primary key and use DEFAULT)"
    )
    assert lines[1] == "-- UPDATE public.log SET line = E'a\\nb' WHERE <row unknown>;"
    assert lines[3] == "-- DELETE FROM public.log WHERE <row unknown>;"
    assert "has no primary key and REPLICA IDENTITY DEFAULT" in lines[4]
    assert warnings == [
        "cannot replay changes to public.log: "
        + lines[0].removeprefix("-- cannot replay: ")
        + "; they are written as comments",
        "cannot replay changes to public.nokey: "
        + lines[4].removeprefix("-- cannot replay: ")
        + "; they are written as comments",
        "2 change(s) to public.log could not be replayed and were written as comments",
        "1 change(s) to public.nokey could not be replayed and were written as comments",
    ]


def test_update_without_old_key_and_with_toasted_key_is_a_comment() -> None:
    text = render(change("update", USERS, {"name": "x"}, toast=("id",)))
    assert text.splitlines()[0].startswith(
        "-- cannot replay: key column(s) id of public.users were not sent (unchanged TOAST)"
    )


def test_identifier_with_line_break_stays_inside_its_comment() -> None:
    table = Table(5, "public", "a\nb", "nothing", (col("x\r", 25),))
    text = render(change("delete", table, None))
    assert all(line.startswith("-- ") for line in text.splitlines())


def test_truncate_message_and_two_phase() -> None:
    prepared = Transaction(742, 0x2000, 0x2030, TIME, gid="g'1\n*/", prepared=True)
    origin = Transaction(743, 0x3000, 0x3030, TIME, origin="node */\n1", origin_lsn=0x10)
    text = render(
        TxBegin(prepared),
        Truncate((USERS, FULL), True, True, prepared, 0),
        Message("pfx\n", b"hi */\n-- there", True, 0x2010, prepared, 1),
        TxCommit(prepared),
        CommitPrepared(742, "g'1\n*/", 0x2100, 0x2130, TIME),
        RollbackPrepared(744, "two", 0x2200, 0x2230, TIME, TIME),
        Message("p", b"\xff\x00", False, 0x2300, None, 0),
        TxBegin(origin),
        TxCommit(origin),
    )
    assert text == (
        "-- xid=742 commit_lsn=0/2000 end_lsn=0/2030 commit_time=2026-11-21T23:55:34.123456+00:00"
        ' gid="g\'1\\n*/" prepared\n'
        "BEGIN;\n"
        'TRUNCATE public.users, "Sales"."order" RESTART IDENTITY CASCADE;\n'
        '-- message prefix="pfx\\n" transactional lsn=0/2010 content="hi */\\n-- there"\n'
        "PREPARE TRANSACTION E'g''1\\n*/';\n"
        "-- xid=742 commit_lsn=0/2100 end_lsn=0/2130 commit_time=2026-11-21T23:55:34.123456+00:00\n"
        "COMMIT PREPARED E'g''1\\n*/';\n"
        "-- xid=744 rollback_end_lsn=0/2230 rollback_time=2026-11-21T23:55:34.123456+00:00\n"
        "ROLLBACK PREPARED 'two';\n"
        '-- message prefix="p" non-transactional lsn=0/2300 content_hex=ff00\n'
        "-- xid=743 commit_lsn=0/3000 end_lsn=0/3030 commit_time=2026-11-21T23:55:34.123456+00:00"
        ' origin="node */\\n1" origin_lsn=0/10\n'
        "BEGIN;\n"
        "COMMIT;\n"
    )


def test_make_renderer_builds_the_sql_renderer() -> None:
    out = io.BytesIO()
    renderer = make_renderer("sql", out, RenderOptions())
    assert isinstance(renderer, SqlRenderer)
    renderer.render(change("insert", NOTHING, {"line": "x"}))
    assert out.getvalue() == b"INSERT INTO public.log (line) VALUES ('x');\n"


def test_table_replaced_by_a_new_relation_message_is_picked_up() -> None:
    renamed = Table(1, "public", "people", "default", USERS.columns)
    text = render(
        change("insert", USERS, {"id": 1}),
        change("insert", renamed, {"id": 2}),
    )
    assert text == (
        "INSERT INTO public.users (id) VALUES (1);\nINSERT INTO public.people (id) VALUES (2);\n"
    )


# --- generated INSERT builders agree with the literal functions ------------------------

BUILDER_CASES: list[tuple[Any, int]] = [
    (None, 20),
    (7, 20),
    ("7", 23),
    (True, 16),
    (False, 16),
    (None, 16),
    ("t", 16),
    ("1.50", 1700),
    ("1e5", 1700),
    (3, 1700),
    (None, 1700),
    ("plain", 25),
    ("", 25),
    ("it's", 25),
    ("back\\slash", 25),
    ("line\nbreak", 25),
    ("tab\there", 25),
    ("del\x7f", 25),
    ("line\u2028sep", 25),  # not printable, but no escape needed
    ("ünïcödé", 25),
    (12, 25),
    (None, 25),
    ("2026-11-21T23:55:34+00:00", 1184),
    ("it's\r", 1184),
    (1.5, 701),
    (float("nan"), 701),
    (orjson.Fragment(b'{"a": "it\'s"}'), 3802),
    (orjson.Fragment(b'{"a": "x\\ny"}'), 3802),
    (orjson.Fragment(b'{"a": "\xe2\x80\xa8"}'), 114),
    ("{}", 3802),
    (None, 3802),
    (["a", "b c", "", "NULL", "null", "Null", 'q"', "x\\y", "é", "a,b", "{x}"], 1009),
    (["line\nbreak", "it's"], 1009),
    ([1, None, 2], 1007),
    ([[1, 2], [3, None]], 1007),
    ([1.5, 2.0], 1022),
    ([True, None], 1000),
    ([], 1009),
    ("{a,b}", 1009),
    (None, 1009),
    ("happy", 90001),
    ("ab  ", 1042),
    ("101", 1560),
]


@pytest.mark.parametrize(("value", "oid"), BUILDER_CASES)
def test_insert_builder_writes_what_the_literal_functions_write(value: Any, oid: int) -> None:
    table = Table(50, "public", "t", "default", (col("a", oid), col("b", oid)))
    expected = literal(value, col("a", oid))
    insert = change("insert", table, {"a": value, "b": value})
    assert render(insert, insert) == (
        f"INSERT INTO public.t (a, b) VALUES ({expected}, {expected});\n" * 2
    )


def test_insert_builder_mixed_row_and_many_column_sets() -> None:
    # more distinct column sets than the builder cache holds: the rest take the slow path
    columns = tuple(col(f"c{i}", oid) for i, (_, oid) in enumerate(BUILDER_CASES))
    table = Table(51, "public", "wide", "default", columns)
    row = {f"c{i}": value for i, (value, _) in enumerate(BUILDER_CASES)}
    events = []
    expected = []
    for n in range(len(BUILDER_CASES) + 30):
        names = [f"c{i}" for i in range(len(BUILDER_CASES)) if i != n % len(BUILDER_CASES)]
        if n >= len(BUILDER_CASES):
            names.reverse()
        events.append(change("insert", table, {k: row[k] for k in names}))
        values = ", ".join(literal(row[k], columns[int(k[1:])]) for k in names)
        expected.append(f"INSERT INTO public.wide ({', '.join(names)}) VALUES ({values});\n")
    assert render(*events) == "".join(expected)
    assert render(change("insert", table, {})) == "INSERT INTO public.wide () VALUES ();\n"


# --- generated builders and the plain ones ----------------------------------------------


def test_generated_and_plain_builders_write_the_same_statements(
    codegen: Callable[[bool], None],
) -> None:
    columns = tuple(col(f"c{i}", oid) for i, (_, oid) in enumerate(BUILDER_CASES))
    table = Table(51, "public", "wide", "default", columns)
    events = []
    for n in range(len(BUILDER_CASES)):  # each value in each column
        row = {
            c.name: BUILDER_CASES[(i + n) % len(BUILDER_CASES)][0] for i, c in enumerate(columns)
        }
        events.append(change("insert", table, row))
    events.append(change("insert", table, {"c1": 7, "c0": None}))
    codegen(True)
    generated = render(*events)
    codegen(False)
    plain = render(*events)
    assert plain == generated
    assert plain.count(";\n") == len(events)


# text values as the server sends them, for columns of each kind the builders inline
_TEXT_COLUMNS: list[tuple[str, int, list[bytes | None]]] = [
    ("id", 20, [b"1", b"-9223372036854775808", None]),
    ("Weird Name", 23, [b"7", None]),
    ("select", 16, [b"t", b"f", None]),
    ("price", 1700, [b"12.50", b"NaN", b"1e5", None]),
    ("t", 25, [b"plain", b"it's", b"back\\slash", b"line\nbreak", "é".encode(), b"", None]),
    ("doc", 114, [b'{"a": "it\'s"}', b'{"a":\n1}', None]),
    ("docb", 3802, [b'{"a": [1, 2]}', b'{"a": "x\\ny"}', None]),
    ("f", 701, [b"1.5", b"NaN", b"-Infinity", None]),
    ("r", 700, [b"2.5", None]),
    ("at", 1184, [b"2024-01-02 03:04:05.5+00", b"infinity", None]),
    ("tags", 1009, [b'{a,"b c",NULL}', b'{"it\'s"}', b"{}", None]),
    ("nums", 1007, [b"{1,NULL,2}", b"{{1,2},{3,4}}", None]),
    ("raw", 17, [b"\\x00ff", b"\\x", b"\\xDEADbe", "\\x\u00e9".encode(), b"x'y", b"\\x0'1", None]),
    ("mood", 16_384, [b"happy", None]),
    ("ch", 1042, [b"ab  ", None]),
    ("bits", 1560, [b"101", None]),
    ("n", 23, [b"5", None]),
]
_ODD_VALUES = [b"x1", b"", b"\xff", b"1 2"]  # for "n": no server sends them; both ways raise


def _text_outcomes() -> list[bytes | str]:
    from pgtail.render.sql import sql_statement_encoder
    from pgtail.values import converters

    table = Table(
        60, "Odd Schema", "t", "default", tuple(col(n, oid) for n, oid, _ in _TEXT_COLUMNS)
    )
    encoders = sql_statement_encoder(table, [converters(oid)[0] for _, oid, _ in _TEXT_COLUMNS])
    assert encoders is not None
    outcomes: list[bytes | str] = []
    longest = max(len(values) for *_, values in _TEXT_COLUMNS)
    rows = [
        [values[(n + i) % len(values)] for i, (*_, values) in enumerate(_TEXT_COLUMNS)]
        for n in range(longest * 2)
    ]
    rows += [[*rows[0][:-1], odd] for odd in _ODD_VALUES]
    for n, row in enumerate(rows):
        for encode in (encoders.plain, encoders.with_nulls):
            try:
                outcomes.append(encode(n, *row))
            except Exception:
                outcomes.append("raised")
    return outcomes


def test_generated_and_plain_text_encoders_write_the_same_statements(
    codegen: Callable[[bool], None],
) -> None:
    """The same statement from each value's text (NULLs through the plain encoder too),
    or both raise (the assembler then takes the general path)."""
    codegen(True)
    generated = _text_outcomes()
    codegen(False)
    plain = _text_outcomes()
    assert plain == generated
    assert sum(isinstance(line, bytes) for line in plain) > len(plain) // 4
    assert "raised" in plain


def test_plain_builders_are_not_generated(codegen: Callable[[bool], None]) -> None:
    from pgtail.render import sql_literals

    codegen(False)
    assert not sql_literals.insert_builder("X(", [str]).__code__.co_filename.startswith("<")
    codegen(True)
    assert sql_literals.insert_builder("X(", [str]).__code__.co_filename.startswith(
        "<pgtail SQL insert #"
    )


def test_traceback_through_a_generated_builder_shows_its_line(
    codegen: Callable[[bool], None],
) -> None:
    from pgtail.render import sql_literals

    def broken(value: Any) -> str:
        raise RuntimeError("a literal function's failure")

    codegen(True)
    build = sql_literals.insert_builder("X(", [sql_literals.text_literal, broken])
    with pytest.raises(RuntimeError) as caught:
        build(["a", "b"])
    text = "".join(traceback.format_exception(caught.value))
    assert '"<pgtail SQL insert #' in text
    assert "    v1 = L1(x1)\n" in text
