"""`pgtail publication ...` in-process through main() against real PostgreSQL 15 and 18,
with names that need quoting and injection attempts through names and --where."""

from __future__ import annotations

import orjson
import pytest

from tests.helpers import Database, run_cli

SETUP = """
CREATE SCHEMA "My Schema";
CREATE TABLE "My Schema"."Tab.le" ("Id" int primary key, "Total Amount" numeric, note text);
CREATE TABLE orders (id int primary key, total numeric, region text);
CREATE TABLE nokey (a int, b text);
CREATE TABLE victim (id int primary key);
INSERT INTO victim VALUES (1);
"""


@pytest.fixture
def shop(db: Database) -> Database:
    db.execute(SETUP)
    return db


def state(db: Database) -> tuple[object, ...]:
    """What an injection could change: publications, tables, victim's rows."""
    return (
        db.execute("SELECT pubname FROM pg_publication ORDER BY 1"),
        db.execute(
            "SELECT relname FROM pg_class WHERE relkind = 'r' AND relnamespace::regnamespace::text "
            "IN ('public', '\"My Schema\"') ORDER BY 1"
        ),
        db.execute("SELECT * FROM victim"),
    )


@pytest.mark.min_major(15)  # column lists, row filters: test_pg15_features_refused_before_15
def test_create_show_list_drop(shop: Database) -> None:
    code, out, err = run_cli(
        [
            "publication", "create", "Shop Pub",
            "--table", '"My Schema"."Tab.le" ("Id", "Total Amount")',
            "--where", '"Id" > 10',
            "--table", "public.orders",
            "--ops", "insert,update,delete",
            "--dsn", shop.dsn,
        ]
    )  # fmt: skip
    assert code == 0, err
    assert out == "created publication Shop Pub: insert, update, delete on 2 table(s)\n"

    code, out, err = run_cli(["publication", "show", "Shop Pub", "--json", "--dsn", shop.dsn])
    assert code == 0, err
    pub = orjson.loads(out)
    assert pub["operations"] == ["insert", "update", "delete"]
    tables = {(t["schema"], t["table"]): t for t in pub["tables"]}
    odd = tables[("My Schema", "Tab.le")]
    assert odd["columns"] == ["Id", "Total Amount"]
    assert odd["row_filter"] == '("Id" > 10)'
    assert tables[("public", "orders")]["columns"] is None

    code, out, _ = run_cli(["publication", "show", "Shop Pub", "--dsn", shop.dsn])
    assert code == 0
    assert out.startswith("publication Shop Pub\n")
    assert '"My Schema"."Tab.le"  Id, Total Amount  ("Id" > 10)' in out

    code, out, _ = run_cli(["publication", "list", "--dsn", shop.dsn])
    header, row = out.splitlines()
    assert header.split() == ["publication", "owner", "operations", "via_root", "tables", "objects"]
    assert row.split("  ")[0] == "Shop Pub"
    assert row.split()[2:6] == ["postgres", "insert,update,delete", "no", "2"]
    code, out, _ = run_cli(["publication", "list", "--json", "--dsn", shop.dsn])
    assert [p["name"] for p in orjson.loads(out)] == ["Shop Pub"]

    code, out, _ = run_cli(["publication", "drop", "Shop Pub", "--dsn", shop.dsn])
    assert code == 0 and out == "dropped publication Shop Pub\n"
    code, _, err = run_cli(["publication", "drop", "Shop Pub", "--dsn", shop.dsn])
    assert code == 1 and "does not exist" in err
    code, out, _ = run_cli(["publication", "drop", "Shop Pub", "--if-exists", "--dsn", shop.dsn])
    assert code == 0 and "nothing to do" in out


@pytest.mark.parametrize(
    "where",
    [
        "true); DROP TABLE victim; --",
        "true); DELETE FROM victim; SELECT (true",
        "id > 0; DROP TABLE victim",
        "id = 1 /* ) */",
        "id > (SELECT 0)",
        "id IN (SELECT id FROM victim)",
        "nosuchcolumn = 1",
    ],
)
def test_where_injection_fails_safely(shop: Database, where: str) -> None:
    before = state(shop)
    code, out, err = run_cli(
        [
            "publication", "create", "inj", "--table", "victim", "--where", where,
            "--ops", "insert", "--dsn", shop.dsn,
        ]
    )  # fmt: skip
    assert code == 1, out
    assert err.startswith("pgtail: error:") and err.count("\n") == 1
    assert state(shop) == before


@pytest.mark.parametrize(
    "table",
    [
        "victim; DROP TABLE victim",
        'victim"; DROP TABLE victim; --',
        "victim) WHERE (true); DROP TABLE victim; --",
        "public.victim(id); DROP TABLE victim",
    ],
)
def test_table_injection_fails_safely(shop: Database, table: str) -> None:
    before = state(shop)
    code, _, err = run_cli(["publication", "create", "inj", "--table", table, "--dsn", shop.dsn])
    assert code == 1 and err.count("\n") == 1
    assert state(shop) == before


def test_name_injection_is_only_a_name(shop: Database) -> None:
    name = "x; DROP TABLE victim; --"
    before = state(shop)
    code, _, err = run_cli(["publication", "create", name, "--table", "victim", "--dsn", shop.dsn])
    assert code == 0, err
    assert shop.execute("SELECT pubname FROM pg_publication") == [(name,)]
    assert state(shop)[1:] == before[1:]
    code, _, _ = run_cli(["publication", "drop", name, "--dsn", shop.dsn])
    assert code == 0 and state(shop) == before


def test_replica_identity_refusal_and_force(shop: Database) -> None:
    code, _, err = run_cli(["publication", "create", "p", "--table", "nokey", "--dsn", shop.dsn])
    assert code == 1
    assert "UPDATE and DELETE on public.nokey fail" in err
    assert "ALTER TABLE public.nokey REPLICA IDENTITY FULL;" in err
    assert shop.execute("SELECT count(*) FROM pg_publication") == [(0,)]
    code, out, err = run_cli(
        ["publication", "create", "p", "--table", "nokey", "--force", "--dsn", shop.dsn]
    )
    assert code == 0
    assert err.startswith("warning: UPDATE and DELETE on public.nokey fail")
    assert out.startswith("created publication p")
    code, _, err = run_cli(
        ["publication", "create", "q", "--table", "nokey", "--ops", "insert", "--dsn", shop.dsn]
    )
    assert code == 0 and err == ""


@pytest.mark.min_major(15)  # FOR TABLES IN SCHEMA
def test_add_remove_schema(shop: Database) -> None:
    assert run_cli(["publication", "create", "p", "--dsn", shop.dsn])[0] == 0
    code, out, err = run_cli(
        ["publication", "add", "p", "--schema", '"My Schema"', "--table", "orders",
         "--dsn", shop.dsn]
    )  # fmt: skip
    assert code == 0, err
    assert out == "altered publication p: insert, update, delete, truncate on 2 table(s)\n"
    code, out, _ = run_cli(["publication", "show", "p", "--json", "--dsn", shop.dsn])
    pub = orjson.loads(out)
    assert pub["schemas"] == ["My Schema"]
    assert sorted(pub["published_tables"]) == ['"My Schema"."Tab.le"', "public.orders"]
    code, _, err = run_cli(["publication", "add", "p", "--table", "nokey", "--dsn", shop.dsn])
    assert code == 1 and "nokey" in err
    code, out, err = run_cli(
        ["publication", "remove", "p", "--schema", '"My Schema"', "--dsn", shop.dsn]
    )
    assert code == 0, err
    assert "on 1 table(s)" in out
    code, _, err = run_cli(["publication", "add", "p", "--dsn", shop.dsn])
    assert code == 2 and "nothing to change" in err
    code, _, err = run_cli(["publication", "add", "nope", "--table", "orders", "--dsn", shop.dsn])
    assert code == 1 and "does not exist" in err


def test_pg15_features_refused_before_15(shop: Database) -> None:
    """Column lists, --where and --schema stop with one clear line, changing nothing."""
    if shop.major >= 15:
        pytest.skip("PostgreSQL 15+ has these features")
    before = state(shop)
    attempts = [
        (["--table", "orders (id, total)"], "column lists need PostgreSQL 15 or later"),
        (["--table", "victim", "--where", "id > 0"], "need PostgreSQL 15 or later"),
        (["--schema", '"My Schema"'], "FOR TABLES IN SCHEMA needs PostgreSQL 15 or later"),
    ]
    for args, message in attempts:
        code, _, err = run_cli(["publication", "create", "p", *args, "--dsn", shop.dsn])
        assert code == 1 and message in err and err.count("\n") == 1, err
    assert run_cli(["publication", "create", "p", "--dsn", shop.dsn])[0] == 0
    code, _, err = run_cli(
        ["publication", "add", "p", "--schema", '"My Schema"', "--dsn", shop.dsn]
    )
    assert code == 1 and "needs PostgreSQL 15 or later" in err
    assert state(shop)[1:] == before[1:]


def test_several_tables_on_every_major(shop: Database) -> None:
    """Two --table in create, remove and add (before 15 one TABLE keyword heads the list)."""
    tables = ["--table", "orders", "--table", '"My Schema"."Tab.le"']
    code, out, err = run_cli(["publication", "create", "two", *tables, "--dsn", shop.dsn])
    assert code == 0, err
    assert out == "created publication two: insert, update, delete, truncate on 2 table(s)\n"
    code, out, err = run_cli(["publication", "remove", "two", *tables, "--dsn", shop.dsn])
    assert code == 0, err
    assert out == "altered publication two: insert, update, delete, truncate on 0 table(s)\n"
    code, out, err = run_cli(["publication", "add", "two", *tables, "--dsn", shop.dsn])
    assert code == 0, err
    assert out == "altered publication two: insert, update, delete, truncate on 2 table(s)\n"
    pub = orjson.loads(run_cli(["publication", "show", "two", "--json", "--dsn", shop.dsn])[1])
    assert sorted(pub["published_tables"]) == ['"My Schema"."Tab.le"', "public.orders"]


def test_via_partition_root_refused_before_13(shop: Database) -> None:
    if shop.major >= 13:
        pytest.skip("PostgreSQL 13+ has publish_via_partition_root")
    before = state(shop)
    code, _, err = run_cli(
        ["publication", "create", "r", "--table", "orders", "--via-partition-root",
         "--dsn", shop.dsn]
    )  # fmt: skip
    assert code == 1 and err.count("\n") == 1, err
    assert "publish_via_partition_root needs PostgreSQL 13 or later (server is 12)" in err
    assert state(shop) == before


def test_usage_errors(shop: Database) -> None:
    code, _, err = run_cli(["publication", "create", "p", "--ops", "upsert", "--dsn", shop.dsn])
    assert code == 2 and "upsert" in err
    code, _, err = run_cli(["publication", "create", "p", "--where", "true", "--dsn", shop.dsn])
    assert code == 2 and "more --where than --table" in err
    code, _, err = run_cli(
        ["publication", "create", "p", "--all-tables", "--table", "orders", "--dsn", shop.dsn]
    )
    assert code == 2 and "--all-tables" in err


@pytest.mark.min_major(13)  # publish_via_partition_root
def test_via_partition_root_flag(db: Database) -> None:
    db.execute(
        "CREATE TABLE m (id int, at date, primary key (id, at)) PARTITION BY RANGE (at);"
        "CREATE TABLE m_1 PARTITION OF m FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')"
    )
    code, _, err = run_cli(
        ["publication", "create", "r", "--table", "m", "--via-partition-root", "--dsn", db.dsn]
    )
    assert code == 0, err
    pub = orjson.loads(run_cli(["publication", "show", "r", "--json", "--dsn", db.dsn])[1])
    assert pub["publish_via_partition_root"] is True
    assert pub["published_tables"] == ["public.m"]


def test_duplicate_and_bad_schema(shop: Database) -> None:
    assert run_cli(["publication", "create", "d", "--table", "orders", "--dsn", shop.dsn])[0] == 0
    code, _, err = run_cli(["publication", "create", "d", "--table", "orders", "--dsn", shop.dsn])
    assert code == 1 and "already exists" in err and err.count("\n") == 1
    before = state(shop)
    code, _, err = run_cli(
        ["publication", "add", "d", "--schema", "public; DROP TABLE victim", "--dsn", shop.dsn]
    )
    assert code == 1 and state(shop) == before
    code, _, err = run_cli(["publication", "add", "d", "--schema", "nosuch", "--dsn", shop.dsn])
    if shop.major >= 15:
        assert code == 1 and "nosuch" in err
    else:  # FOR TABLES IN SCHEMA
        assert code == 1 and "needs PostgreSQL 15 or later" in err


def test_removing_what_the_publication_does_not_hold_says_so(shop: Database) -> None:
    """Not `publication 'orders' does not exist`: the table is not in it."""
    shop.execute("CREATE PUBLICATION p FOR TABLE orders")
    code, _, err = run_cli(["publication", "remove", "p", "--table", "victim", "--dsn", shop.dsn])
    assert code == 1
    assert "pgtail: error: relation \"victim\" is not part of publication 'p'" in err, err
    assert "does not exist" not in err
    if shop.major < 15:
        return  # no FOR TABLES IN SCHEMA before 15
    code, _, err = run_cli(
        ["publication", "remove", "p", "--schema", '"My Schema"', "--dsn", shop.dsn]
    )
    assert code == 1
    assert "are not part of publication 'p'" in err and "does not exist" not in err, err
