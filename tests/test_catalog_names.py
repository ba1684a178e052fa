"""Pure helpers of pgtail.catalog: table specs with SQL identifier rules, quoting, and the
lexical guard that keeps a --where row filter inside its WHERE (...)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgtail.catalog import (
    TableSpec,
    check_row_filter,
    parse_name,
    parse_table_spec,
    publication_names_option,
    quote_ident,
)
from pgtail.errors import ConfigurationError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("orders", TableSpec(None, "orders")),
        ("Orders", TableSpec(None, "orders")),
        ("public.orders", TableSpec("public", "orders")),
        ('"My Schema"."Tab.le"', TableSpec("My Schema", "Tab.le")),
        ('"a""b".c', TableSpec('a"b', "c")),
        (' public . "X" ', TableSpec("public", "X")),
        ("public.orders(id, total)", TableSpec("public", "orders", ("id", "total"))),
        ('orders ( "Id" , Total )', TableSpec(None, "orders", ("Id", "total"))),
        ('"t(1)"', TableSpec(None, "t(1)")),
        ("sch.ÄBc", TableSpec("sch", "Äbc")),
    ],
)
def test_parse_table_spec(text: str, expected: TableSpec) -> None:
    assert parse_table_spec(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a.b.c",
        '"unterminated',
        '""',
        "orders(id",
        "orders(id,)",
        "orders()",
        "orders id",
        "orders; drop table x",
        "a.",
        ".a",
        "orders(id) trailing",
    ],
)
def test_parse_table_spec_rejects(text: str) -> None:
    with pytest.raises(ConfigurationError):
        parse_table_spec(text)


def test_parse_table_spec_columns_not_allowed() -> None:
    with pytest.raises(ConfigurationError, match="column list"):
        parse_table_spec("t(a)", allow_columns=False)


def test_parse_name() -> None:
    assert parse_name("Sales") == "sales"
    assert parse_name('"Sales Dept"') == "Sales Dept"
    with pytest.raises(ConfigurationError):
        parse_name("a.b")


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("orders", "orders"),
        ("Orders", '"Orders"'),
        ("my table", '"my table"'),
        ('a"b', '"a""b"'),
        ("select", '"select"'),
        ("_x1$", "_x1$"),
        ("1abc", '"1abc"'),
    ],
)
def test_quote_ident(name: str, quoted: str) -> None:
    assert quote_ident(name) == quoted


@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            min_size=1,
            max_size=12,
        ),
        min_size=1,
        max_size=3,
    )
)
def test_display_round_trips(parts: list[str]) -> None:
    schema = parts[0] if len(parts) > 1 else None
    spec = TableSpec(schema, parts[-1], tuple(parts) if len(parts) == 3 else None)
    assert parse_table_spec(spec.display()) == spec


def test_publication_names_option() -> None:
    assert publication_names_option(["a", 'B "c"', "d,e"]) == '"a","B ""c""","d,e"'


@pytest.mark.parametrize(
    "expr",
    [
        "total > 100",
        "region = 'eu'",
        "note = 'it''s; fine -- really )'",
        "note = E'back\\'slash; )'",
        "note = $$ ; ) $$",
        "note = $tag$ ) ; $tag$",
        '"Weird;Col)" > 0',
        "(a > 1 AND (b < 2 OR c IS NULL))",
        "price::numeric > 0",
        "note = E'\\'); DROP TABLE x; --'",  # the escaped quote keeps it all one literal
    ],
)
def test_row_filter_accepts_one_expression(expr: str) -> None:
    assert check_row_filter(expr) == expr.strip()


@pytest.mark.parametrize(
    "expr",
    [
        "true); DROP TABLE x; --",
        "true) OR (true",
        "a > 1; DROP TABLE x",
        "a > 1 -- comment",
        "a > 1 /* x */",
        "(a > 1",
        "a > 'unterminated",
        "a > $$ open",
        '"unterminated > 1',
        "   ",
    ],
)
def test_row_filter_refuses_escape_attempts(expr: str) -> None:
    with pytest.raises(ConfigurationError):
        check_row_filter(expr)


def test_row_filter_plain_quote_is_not_escape_string() -> None:
    # in a standard string a backslash is an ordinary character: 'a\' ends the literal,
    # so what follows is outside it and must be checked
    with pytest.raises(ConfigurationError):
        check_row_filter("note = 'a\\'); DROP TABLE x; --'")
