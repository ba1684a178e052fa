"""`pgtail.sqlnames`: the one quote_ident, checked against the server's own quote_ident()
for every key word the server knows and for awkward names, on each server version."""

from __future__ import annotations

import pytest

from pgtail import catalog, sqlnames
from pgtail.render import sql as render_sql
from tests.helpers import Database

AWKWARD = [
    "a",
    "_x",
    "orders",
    "Orders",
    "UPPER",
    "Ab",
    "a b",
    " lead",
    'a"b',
    '"',
    "1a",
    "9lives",
    "ünï",
    "café",
    "a-b",
    "a.b",
    "x$y",
    "$x",
    "snake_case_9",
    "",
    "authorization",
    "between",
    "bigint",
]


def test_one_helper_everywhere() -> None:
    assert catalog.quote_ident is sqlnames.quote_ident
    assert render_sql.quote_ident is sqlnames.quote_ident
    assert render_sql.RESERVED_KEYWORDS is sqlnames.RESERVED_KEYWORDS


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("authorization", '"authorization"'),  # reserved (can be function or type)
        ("between", '"between"'),  # column-name key word
        ("bigint", '"bigint"'),
        ("name", "name"),  # unreserved: bare
        ("x$y", "x$y"),
        ("", '""'),
    ],
)
def test_quote_ident_pure(name: str, quoted: str) -> None:
    assert sqlnames.quote_ident(name) == quoted


def test_quote_qualified_and_publication_names() -> None:
    assert sqlnames.quote_qualified("My Schema", "select") == '"My Schema"."select"'
    assert sqlnames.publication_names_option(["a", 'B"c']) == '"a","B""c"'


def test_quote_ident_agrees_with_the_server(db: Database) -> None:
    """Bare exactly when the server's quote_ident() leaves a name bare, for every word of
    pg_get_keywords() (whatever its category) and the awkward names above."""
    keywords = [str(r[0]) for r in db.execute("SELECT word FROM pg_get_keywords()")]
    assert len(keywords) > 400
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            for name in keywords + AWKWARD:
                cur.execute("SELECT quote_ident(%s)", (name,))
                row = cur.fetchone()
                assert row is not None
                ours = sqlnames.quote_ident(name)
                if "$" in name and not name.startswith("$"):
                    # the server quotes any '$'; after the first character an unquoted
                    # '$' is part of the identifier all the same
                    assert ours == name
                elif ours != row[0]:
                    # a key word only a newer major reserves (json was unreserved in 16):
                    # quoted here all the same, which names the same column
                    assert db.major < 18 and ours == f'"{name}"' == f'"{row[0]}"', name
                    assert name in sqlnames.RESERVED_KEYWORDS, name
                if name:  # what we write names the same column
                    cur.execute(f"SELECT 1 AS {ours}")
                    assert cur.description is not None
                    assert cur.description[0].name == name
    finally:
        conn.close()
