"""Names from the database that hold terminal escapes are shown escaped by every command
that prints them for a person (as the stream renderers do), and a hint that repeats a
name quotes it for the shell. In-process through main() against real PostgreSQL."""

from __future__ import annotations

import shlex

import psycopg2
import pytest

from tests.helpers import Database, run_cli

TITLE = "\x1b]0;owned\x07"  # sets the terminal's title
TABLE = f"t{TITLE}x"
PUB = "p\x1b[31mred"
DATABASE = "d\x1b[2Jclear"


def assert_escaped(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text)
    assert "\\u001b" in text, text


def test_publication_list_show_and_doctor_escape_names(db: Database) -> None:
    db.execute(f'CREATE TABLE "{TABLE}" (id int PRIMARY KEY)')
    db.execute(f'CREATE PUBLICATION "{PUB}" FOR TABLE "{TABLE}"')
    for args in (["publication", "list"], ["publication", "show", PUB], ["doctor"]):
        code, out, err = run_cli([*args, "--dsn", db.dsn])
        assert code in (0, 1), err
        assert_escaped(out)
        assert "\x1b" not in err


def test_slot_list_and_info_escape_the_database_name(db: Database) -> None:
    admin = psycopg2.connect(db.server.dsn("postgres"))
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{DATABASE}"')
    try:
        conn = psycopg2.connect(db.server.dsn(DATABASE))
        conn.autocommit = True
        conn.cursor().execute("SELECT pg_create_logical_replication_slot('hostile', 'pgoutput')")
        conn.close()
        for args in (["slot", "list"], ["slot", "info", "hostile"]):
            code, out, err = run_cli([*args, "--dsn", db.dsn])
            assert code == 0, err
            assert_escaped(out)
    finally:
        admin.cursor().execute("SELECT pg_drop_replication_slot('hostile')")
        admin.cursor().execute(f'DROP DATABASE "{DATABASE}"')
        admin.close()


@pytest.mark.parametrize("name", ["a b", "x;rm -rf ~", "it's"])
def test_hint_repeating_a_name_quotes_it_for_the_shell(db: Database, name: str) -> None:
    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    code, _, err = run_cli(["stream", "--publication", name, "--dsn", db.dsn])
    assert code == 1
    assert f"pgtail publication create {shlex.quote(name)} --table" in err, err
    code, out, _ = run_cli(["doctor", "--publication", name, "--dsn", db.dsn])
    assert code == 1
    assert shlex.quote(name) in out


def test_an_error_naming_a_hostile_name_is_escaped(db: Database) -> None:
    code, _, err = run_cli(["publication", "show", PUB, "--dsn", db.dsn])
    assert code == 1
    assert "\x1b" not in err and "pgtail: error: publication " in err
