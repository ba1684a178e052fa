"""`--table`, `--exclude` and `--redact`: the pattern forms, and the warning at start for
a pattern that matches nothing the publications send (a typo must not leak a column or
hide a table without a word). Pure matching first, then through the CLI."""

from __future__ import annotations

import subprocess
from typing import Any

import orjson
import pytest

from pgtail.changes import Column, Table
from pgtail.errors import ConfigurationError
from pgtail.filters import EventFilter, parse_redact
from tests.helpers import run_stream, write


def table(schema: str, name: str, *columns: str, key: str = "id") -> Table:
    return Table(
        1,
        schema,
        name,
        "default",
        tuple(Column(c, 25, -1, c == key, "text") for c in columns),
    )


CUSTOMERS = table("public", "customers", "id", "email", "name")
BILLING = table("billing", "customers", "id", "email", "iban")

PUBLISHED = {
    ("public", "customers"): ("id", "email", "name"),
    ("billing", "customers"): ("id", "email", "iban"),
    ("public", "orders"): ("id", "total"),
}


@pytest.mark.parametrize(
    "pattern,public,billing",
    [
        ("email", {"email"}, {"email"}),
        ("customers.email", {"email"}, {"email"}),
        ("public.customers.email", {"email"}, set()),
        ("billing.*.iban", set(), {"iban"}),
        ("cust*.e*", {"email"}, {"email"}),
        ("orders.email", set(), set()),
        ("id", set(), set()),  # keys stay visible
    ],
)
def test_redact_forms(pattern: str, public: set[str], billing: set[str]) -> None:
    flt = EventFilter(redact=(pattern,))
    assert flt.masked_columns(CUSTOMERS) == public
    assert flt.masked_columns(BILLING) == billing


@pytest.mark.parametrize("pattern", ["a.b.c.d", ".email", "customers.", "a..b"])
def test_redact_bad_forms(pattern: str) -> None:
    with pytest.raises(ConfigurationError, match="column, table.column or schema.table.column"):
        parse_redact(pattern)


def test_unmatched_patterns() -> None:
    flt = EventFilter(
        tables=("public.orders", "public.nosuchtable", "cust*"),
        exclude=("billing.*", "nothing_*"),
        redact=("customers.email", "emial", "orders.iban", "billing.customers.iban"),
    )
    assert flt.unmatched(PUBLISHED) == [
        ("--table", "public.nosuchtable"),
        ("--exclude", "nothing_*"),
        ("--redact", "emial"),
        ("--redact", "orders.iban"),
    ]
    assert EventFilter(tables=("x",)).unmatched({}) == [("--table", "x")]
    assert EventFilter(redact=("email",)).unmatched(PUBLISHED) == []


# --------------------------------------------------------------------------- through the CLI


def stream(dsn: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_stream(dsn, "--idle-exit", "1", *args, timeout=60)


def setup(db: Any) -> None:
    db.execute("CREATE TABLE customers (id int PRIMARY KEY, email text, name text)")
    db.execute("CREATE TABLE orders (id int PRIMARY KEY, total int)")
    db.execute("CREATE TABLE private (id int PRIMARY KEY)")
    db.execute("CREATE PUBLICATION pub FOR TABLE customers, orders")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    write(db, "INSERT INTO customers VALUES (1, 'ann@example.org', 'Ann')")
    write(db, "INSERT INTO orders VALUES (1, 42)")


def test_cli_redact_table_column_masks_and_typos_warn(db: Any) -> None:
    setup(db)
    run = stream(
        db.dsn,
        "--slot",
        "s",
        "--publication",
        "pub",
        "--redact",
        "customers.email",
        "--redact",
        "emial,orders.email",
        "--table",
        "public.nosuchtable",
        "--table",
        "customers",
        "--table",
        "orders",
        "--exclude",
        "private",
    )
    assert run.returncode == 0, run.stderr
    records = [orjson.loads(x) for x in run.stdout.splitlines()]
    assert [r["new"] for r in records] == [
        {"id": 1, "email": "***", "name": "Ann"},
        {"id": 1, "total": 42},
    ]
    assert b"ann@example.org" not in run.stdout
    warnings = [x for x in run.stderr.decode().splitlines() if "warning" in x]
    assert warnings == [
        "pgtail: warning: --table 'public.nosuchtable' matches no table that publication"
        " 'pub' publishes: nothing of it will be shown",
        "pgtail: warning: --exclude 'private' matches no table that publication 'pub'"
        " publishes: it excludes nothing",
        "pgtail: warning: --redact 'emial' matches no column that publication 'pub'"
        " publishes: it masks nothing",
        "pgtail: warning: --redact 'orders.email' matches no column that publication 'pub'"
        " publishes: it masks nothing",
    ]


def test_cli_only_unmatched_table_warns_and_shows_nothing(db: Any) -> None:
    setup(db)
    run = stream(db.dsn, "--slot", "s", "--table", "public.nosuchtable")
    assert run.returncode == 0
    assert run.stdout == b""
    assert b"--table 'public.nosuchtable' matches no table" in run.stderr


def test_cli_matching_patterns_say_nothing(db: Any) -> None:
    setup(db)
    run = stream(
        db.dsn, "--slot", "s", "--table", "public.*", "--exclude", "orders", "--redact", "email"
    )
    assert run.returncode == 0, run.stderr
    assert b"warning" not in run.stderr
    assert [orjson.loads(x)["new"]["email"] for x in run.stdout.splitlines()] == ["***"]


@pytest.mark.min_major(15)
def test_cli_redact_of_a_column_left_out_by_the_column_list_warns(db: Any) -> None:
    db.execute("CREATE TABLE customers (id int PRIMARY KEY, email text, name text)")
    db.execute("CREATE PUBLICATION pub FOR TABLE customers (id, name)")
    db.execute("SELECT pg_create_logical_replication_slot('s', 'pgoutput')")
    run = stream(db.dsn, "--slot", "s", "--redact", "email", "--redact", "name")
    assert run.returncode == 0, run.stderr
    assert b"--redact 'email' matches no column" in run.stderr
    assert b"--redact 'name'" not in run.stderr


def test_cli_bad_redact_is_an_error(db: Any) -> None:
    run = stream(db.dsn, "--redact", "a.b.c.d")
    assert run.returncode == 1
    assert b"--redact 'a.b.c.d': expected column, table.column or schema.table.column" in (
        run.stderr
    )
