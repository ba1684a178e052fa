"""pgtail.catalog against real PostgreSQL 15 and 18: slots and publications, names that
need quoting, and SQL injection attempts that must fail without touching the database."""

from __future__ import annotations

import time
from contextlib import suppress
from functools import partial

import psycopg2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgtail import catalog, doctor
from pgtail.catalog import TableSpec, TableTarget, parse_table_spec
from pgtail.errors import (
    ConfigurationError,
    PublicationError,
    ServerCapabilityError,
    SlotError,
)
from pgtail.lsn import parse_lsn
from tests.helpers import Database, streaming, write

# as the CLI calls them: with the doctor's replica identity rule as the guard
create_publication = partial(catalog.create_publication, guard=doctor.publication_problems)
alter_publication = partial(catalog.alter_publication, guard=doctor.publication_problems)
set_replica_identity = partial(catalog.set_replica_identity, guard=doctor.identity_breaks)


def current_lsn(db: Database) -> int:
    return parse_lsn(str(db.execute("SELECT pg_current_wal_lsn()::text")[0][0]))


# --------------------------------------------------------------------------- slots


def test_slot_lifecycle(db: Database) -> None:
    created = catalog.create_slot(db.dsn, "app")
    assert created.created and created.lsn is not None
    listing = catalog.list_slots(db.dsn)
    (slot,) = [s for s in listing.slots if s.name == "app"]
    assert slot.plugin == "pgoutput" and slot.slot_type == "logical"
    assert slot.database == db.name
    assert not slot.active and not slot.temporary and not slot.two_phase
    assert slot.confirmed_flush_lsn == created.lsn
    assert slot.lag_bytes is not None and slot.lag_bytes >= 0
    # pg_replication_slots.wal_status is new in PostgreSQL 13: before it, the fact is absent
    assert slot.wal_status == ("reserved" if db.major >= 13 else None)

    data = catalog.get_slot(db.dsn, "app").to_list()[0]
    assert data["slot_name"] == "app"
    if db.major >= 17:
        assert {"inactive_since", "invalidation_reason", "failover", "conflicting"} <= set(data)
        assert data["inactive_since"] is not None
    else:
        assert "inactive_since" not in data and "failover" not in data
        # pg_replication_slots.conflicting is new in PostgreSQL 16
        assert ("conflicting" in data) == (db.major >= 16)

    with pytest.raises(SlotError, match="already exists"):
        catalog.create_slot(db.dsn, "app")
    again = catalog.create_slot(db.dsn, "app", if_not_exists=True)
    assert not again.created

    dropped = catalog.drop_slot(db.dsn, "app")
    assert dropped.dropped and dropped.terminated_pid is None
    assert not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'app'")
    with pytest.raises(SlotError, match="does not exist"):
        catalog.drop_slot(db.dsn, "app")
    assert not catalog.drop_slot(db.dsn, "app", if_exists=True).dropped
    with pytest.raises(SlotError, match="does not exist"):
        catalog.get_slot(db.dsn, "app")


def test_slot_two_phase_and_temporary(db: Database) -> None:
    if db.major >= 14:
        catalog.create_slot(db.dsn, "tp", two_phase=True)
        (slot,) = catalog.get_slot(db.dsn, "tp").slots
        assert slot.two_phase
    else:  # pg_create_logical_replication_slot's twophase argument is new in 14
        with pytest.raises(
            ServerCapabilityError, match=f"need PostgreSQL 14 or later \\(server is {db.major}\\)"
        ):
            catalog.create_slot(db.dsn, "tp", two_phase=True)
        assert not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'tp'")
    made = catalog.create_slot(db.dsn, "tmp", temporary=True)
    assert made.created and made.temporary
    # the session that created it has ended, and the temporary slot goes with it
    for _ in range(100):
        if not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'tmp'"):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the temporary slot outlived its session")


def test_if_not_exists_refuses_other_plugin(db: Database) -> None:
    db.execute("SELECT pg_create_logical_replication_slot('td', 'test_decoding')")
    with pytest.raises(SlotError, match="test_decoding"):
        catalog.create_slot(db.dsn, "td", if_not_exists=True)


@pytest.mark.parametrize(
    "name", ["MySlot", "my slot", "x'); DROP TABLE victim; --", 'a"b', "drop table victim"]
)
def test_slot_names_are_parameters_not_sql(db: Database, name: str) -> None:
    db.execute("CREATE TABLE victim (id int primary key)")
    with pytest.raises(SlotError):
        catalog.create_slot(db.dsn, name)
    assert db.execute("SELECT count(*) FROM victim") == [(0,)]
    assert db.execute(
        "SELECT count(*) FROM pg_replication_slots WHERE database = %s", (db.name,)
    ) == [(0,)]
    with pytest.raises(SlotError, match="does not exist"):
        catalog.drop_slot(db.dsn, name)


def test_drop_active_slot_needs_force(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    catalog.create_slot(db.dsn, "busy")
    with streaming(db, "busy", "p") as pid:
        with pytest.raises(SlotError, match=f"active \\(walsender PID {pid}\\)"):
            catalog.drop_slot(db.dsn, "busy")
        assert db.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name='busy'") == [
            (1,)
        ]
        result = catalog.drop_slot(db.dsn, "busy", force=True)
        assert result.dropped and result.terminated_pid == pid
    assert not db.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'busy'")
    assert not db.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))


def test_advance(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key)")
    start = catalog.create_slot(db.dsn, "adv").lsn
    assert start is not None
    db.execute("INSERT INTO t SELECT generate_series(1, 1000)")
    db.execute("CHECKPOINT")  # synchronous_commit is off: make the WAL flushed
    # a slot advances at most to the flushed WAL
    target = parse_lsn(str(db.execute("SELECT pg_current_wal_flush_lsn()::text")[0][0]))
    assert target > start
    result = catalog.advance_slot(db.dsn, "adv", target)
    assert result.previous_lsn == start and result.lsn == target
    (slot,) = catalog.get_slot(db.dsn, "adv").slots
    assert slot.confirmed_flush_lsn == target

    with pytest.raises(SlotError, match="backwards"):
        catalog.advance_slot(db.dsn, "adv", "0/1")
    (slot,) = catalog.get_slot(db.dsn, "adv").slots
    assert slot.confirmed_flush_lsn == target

    far = catalog.advance_slot(db.dsn, "adv", "FF/0")
    assert far.requested_lsn == parse_lsn("FF/0") and far.lsn < far.requested_lsn
    with pytest.raises(ConfigurationError, match="invalid LSN"):
        catalog.advance_slot(db.dsn, "adv", "nonsense")
    with pytest.raises(SlotError, match="does not exist"):
        catalog.advance_slot(db.dsn, "nope", target)


def test_advance_active_slot_refused(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    catalog.create_slot(db.dsn, "act")
    with streaming(db, "act", "p"), pytest.raises(SlotError, match="active"):
        catalog.advance_slot(db.dsn, "act", current_lsn(db))


def test_peek_does_not_consume(db: Database) -> None:
    db.execute('CREATE TABLE "Odd Tab" ("Id" int primary key, v text)')
    db.execute('CREATE PUBLICATION "My ""Pub""" FOR TABLE "Odd Tab"')
    catalog.create_slot(db.dsn, "pk")
    write(db, """INSERT INTO "Odd Tab" VALUES (1, 'a'), (2, 'b')""")
    write(db, """UPDATE "Odd Tab" SET v = 'c' WHERE "Id" = 1""")
    names, first = catalog.peek_changes(db.dsn, "pk", ['My "Pub"'])
    assert names == ('My "Pub"',)
    kinds = [chr(m.data[0]) for m in first]
    assert kinds == ["B", "R", "I", "I", "C", "B", "U", "C"]
    _, second = catalog.peek_changes(db.dsn, "pk", ['My "Pub"'])
    assert second == first  # not consumed
    _, limited = catalog.peek_changes(db.dsn, "pk", limit=1)  # all publications of the db
    assert [chr(m.data[0]) for m in limited] == ["B", "R", "I", "I", "C"]  # whole transaction
    with pytest.raises(PublicationError, match="does not exist"):
        catalog.peek_changes(db.dsn, "pk", ["nope"])
    with pytest.raises(SlotError, match="does not exist"):
        catalog.peek_changes(db.dsn, "nope", ['My "Pub"'])


def test_peek_without_publication(db: Database) -> None:
    catalog.create_slot(db.dsn, "np")
    with pytest.raises(PublicationError, match="no publication"):
        catalog.peek_changes(db.dsn, "np")


# --------------------------------------------------------------------------- publications


@pytest.fixture
def odd(db: Database) -> Database:
    db.execute(
        'CREATE SCHEMA "My Schema";'
        'CREATE TABLE "My Schema"."Tab.le" ("Id" int primary key, "Total Amount" numeric, '
        "note text);"
        "CREATE TABLE public.orders (id int primary key, total numeric, region text);"
        "CREATE TABLE public.nokey (a int, b text);"
        "CREATE TABLE victim (id int primary key);"
        "INSERT INTO victim VALUES (1);"
    )
    return db


def pub_count(db: Database) -> int:
    return int(db.execute("SELECT count(*) FROM pg_publication")[0][0])  # type: ignore[call-overload]


def test_create_show_list_drop(odd: Database) -> None:
    # column lists need PostgreSQL 15 (test_pg15_publication_features_refused_before_15)
    columns = ' ("Id", "Total Amount")' if odd.major >= 15 else ""
    change = create_publication(
        odd.dsn,
        'Pub "One"',
        tables=[
            TableTarget(parse_table_spec('"My Schema"."Tab.le"' + columns)),
            TableTarget(parse_table_spec("orders")),
        ],
        operations=["insert", "update"],
    )
    assert change.warnings == ()
    pub = catalog.get_publication(odd.dsn, 'Pub "One"')
    assert pub.operations == ("insert", "update")
    assert not pub.all_tables and not pub.via_partition_root
    by_name = {t.name: t for t in pub.tables}
    assert by_name["Tab.le"].schema == "My Schema"
    assert by_name["Tab.le"].columns == (("Id", "Total Amount") if columns else None)
    assert by_name["orders"].columns is None
    assert set(pub.published_tables) == {'"My Schema"."Tab.le"', "public.orders"}
    assert [p.name for p in catalog.list_publications(odd.dsn)] == ['Pub "One"']
    data = pub.to_dict()
    assert data["operations"] == ["insert", "update"]

    assert catalog.drop_publication(odd.dsn, 'Pub "One"')
    assert pub_count(odd) == 0
    assert not catalog.drop_publication(odd.dsn, 'Pub "One"', if_exists=True)
    with pytest.raises(PublicationError, match="does not exist"):
        catalog.drop_publication(odd.dsn, 'Pub "One"')


@pytest.mark.min_major(15)
def test_row_filter_is_stored_and_applied(odd: Database) -> None:
    odd.execute("ALTER TABLE orders REPLICA IDENTITY FULL")
    create_publication(
        odd.dsn, "eu", tables=[TableTarget(TableSpec("public", "orders"), "region = 'eu'")]
    )
    (table,) = catalog.get_publication(odd.dsn, "eu").tables
    assert table.row_filter == "(region = 'eu'::text)"


@pytest.mark.min_major(15)
def test_row_filter_with_quoted_column(odd: Database) -> None:
    create_publication(
        odd.dsn,
        "big",
        tables=[TableTarget(parse_table_spec('"My Schema"."Tab.le"'), '"Id" > 10')],
    )
    (table,) = catalog.get_publication(odd.dsn, "big").tables
    assert table.row_filter == '("Id" > 10)'


@pytest.mark.min_major(15)
@pytest.mark.parametrize(
    "where",
    [
        "true); DROP TABLE victim; --",
        "true) ; DELETE FROM victim; SELECT (1",
        "id > 0); DROP TABLE victim; CREATE PUBLICATION x FOR TABLE victim WHERE (true",
        "id > 0 -- ",
        "id > (SELECT count(*) FROM victim)",  # accepted lexically; the server refuses it
        "no_such_column > 1",
        "pg_terminate_backend(1) IS NULL",  # PostgreSQL allows only immutable built-ins
    ],
)
def test_row_filter_injection_fails_safely(odd: Database, where: str) -> None:
    before = odd.execute("SELECT count(*) FROM victim")
    with pytest.raises((ConfigurationError, PublicationError)):
        create_publication(
            odd.dsn,
            "inj",
            tables=[TableTarget(TableSpec(None, "victim"), where)],
            operations=["insert"],
        )
    assert odd.execute("SELECT count(*) FROM victim") == before == [(1,)]
    assert pub_count(odd) == 0


@pytest.mark.min_major(15)
def test_row_filter_injection_with_nonstandard_strings(odd: Database) -> None:
    # with standard_conforming_strings = off, '\'' is a whole literal to the server but
    # the start of a longer one to a standard scanner: the two must not disagree
    odd.execute(f'ALTER DATABASE "{odd.name}" SET standard_conforming_strings = off')
    where = "id = 1 OR '\\'' <> '' ) ; DROP TABLE victim ; -- '"
    with pytest.raises(ConfigurationError):
        create_publication(
            odd.dsn,
            "inj",
            tables=[TableTarget(TableSpec(None, "victim"), where)],
            operations=["insert"],
        )
    assert odd.execute("SELECT count(*) FROM victim") == [(1,)]
    assert pub_count(odd) == 0


def test_publication_name_injection_is_just_a_name(odd: Database) -> None:
    name = 'p"; DROP TABLE victim; --'
    create_publication(odd.dsn, name, tables=[TableTarget(TableSpec(None, "victim"))])
    assert odd.execute("SELECT pubname FROM pg_publication") == [(name,)]
    assert odd.execute("SELECT count(*) FROM victim") == [(1,)]
    assert catalog.drop_publication(odd.dsn, name)


@pytest.mark.parametrize("table", ["victim; DROP TABLE victim", 'victim"; DROP TABLE victim; --'])
def test_table_name_injection(odd: Database, table: str) -> None:
    with pytest.raises(ConfigurationError):
        create_publication(odd.dsn, "t", tables=[TableTarget(parse_table_spec(table))])
    assert odd.execute("SELECT count(*) FROM victim") == [(1,)]
    assert pub_count(odd) == 0


def test_missing_table(odd: Database) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        create_publication(odd.dsn, "m", tables=[TableTarget(TableSpec(None, "Orders"))])


def test_replica_identity_guard(odd: Database) -> None:
    with pytest.raises(PublicationError, match="nokey") as info:
        create_publication(odd.dsn, "g", tables=[TableTarget(TableSpec(None, "nokey"))])
    assert "REPLICA IDENTITY FULL" in str(info.value)
    assert pub_count(odd) == 0  # rolled back
    # inserts only: no identity needed
    create_publication(
        odd.dsn, "ins", tables=[TableTarget(TableSpec(None, "nokey"))], operations=["insert"]
    )
    forced = create_publication(
        odd.dsn, "g", tables=[TableTarget(TableSpec(None, "nokey"))], force=True
    )
    assert len(forced.warnings) == 1 and "nokey" in forced.warnings[0]
    assert pub_count(odd) == 2
    # and UPDATE really fails now, as the warning said
    odd.execute("INSERT INTO nokey VALUES (1, 'x')")
    with pytest.raises(psycopg2.Error, match="replica identity"):
        odd.execute("UPDATE nokey SET b = 'y'")


@pytest.mark.min_major(15)
def test_row_filter_outside_identity_refused(odd: Database) -> None:
    with pytest.raises(PublicationError, match="region"):
        create_publication(
            odd.dsn, "f", tables=[TableTarget(TableSpec(None, "orders"), "region = 'eu'")]
        )
    assert pub_count(odd) == 0


def test_pg15_publication_features_refused_before_15(odd: Database) -> None:
    """Column lists, row filters and schemas stop with one clear line, creating nothing."""
    if odd.major >= 15:
        pytest.skip("PostgreSQL 15+ has these features")
    odd.execute("ALTER TABLE orders REPLICA IDENTITY FULL")
    attempts: list[dict[str, object]] = [
        {"tables": [TableTarget(parse_table_spec("orders (id, total)"))]},
        {"tables": [TableTarget(TableSpec(None, "orders"), "region = 'eu'")]},
        {"schemas": ["My Schema"]},
    ]
    for kwargs in attempts:
        with pytest.raises(ServerCapabilityError, match="PostgreSQL 15 or later"):
            catalog.create_publication(odd.dsn, "new", **kwargs)  # type: ignore[arg-type]
    assert pub_count(odd) == 0


def test_add_and_remove(odd: Database) -> None:
    create_publication(odd.dsn, "ar")
    assert catalog.get_publication(odd.dsn, "ar").published_tables == ()
    with pytest.raises(PublicationError, match="nokey"):
        alter_publication(odd.dsn, "ar", "add", tables=[TableTarget(TableSpec(None, "nokey"))])
    assert catalog.get_publication(odd.dsn, "ar").published_tables == ()
    change = alter_publication(
        odd.dsn,
        "ar",
        "add",
        tables=[
            TableTarget(TableSpec(None, "orders")),
            # row filters need PostgreSQL 15
            TableTarget(TableSpec("My Schema", "Tab.le"), '"Id" > 0' if odd.major >= 15 else None),
        ],
    )
    assert set(change.publication.published_tables) == {"public.orders", '"My Schema"."Tab.le"'}
    alter_publication(odd.dsn, "ar", "remove", tables=[TableTarget(TableSpec(None, "orders"))])
    assert catalog.get_publication(odd.dsn, "ar").published_tables == ('"My Schema"."Tab.le"',)
    with pytest.raises(PublicationError, match="does not exist"):
        alter_publication(odd.dsn, "nope", "add", tables=[TableTarget(TableSpec(None, "orders"))])
    with pytest.raises(ConfigurationError):
        alter_publication(odd.dsn, "ar", "add")


def test_schema_and_all_tables(odd: Database) -> None:
    odd.execute('ALTER TABLE nokey SET SCHEMA "My Schema"')
    if odd.major >= 15:  # FOR TABLES IN SCHEMA: test_pg15_publication_features_refused_before_15
        with pytest.raises(PublicationError, match="nokey"):
            create_publication(odd.dsn, "s", schemas=["My Schema"])
        create_publication(odd.dsn, "s", schemas=["My Schema"], operations=["insert"])
        pub = catalog.get_publication(odd.dsn, "s")
        assert pub.schemas == ("My Schema",)
        assert set(pub.published_tables) == {'"My Schema"."Tab.le"', '"My Schema".nokey'}
    create_publication(odd.dsn, "all", all_tables=True, operations=["insert", "truncate"])
    everything = catalog.get_publication(odd.dsn, "all")
    assert everything.all_tables and len(everything.published_tables) == 4
    with pytest.raises(ConfigurationError):
        create_publication(odd.dsn, "x", all_tables=True, schemas=["public"])
    with pytest.raises(ConfigurationError, match="operation"):
        create_publication(odd.dsn, "x", operations=["upsert"])


@pytest.mark.min_major(13)  # publish_via_partition_root
def test_via_partition_root(db: Database) -> None:
    db.execute(
        "CREATE TABLE m (id int, at date, primary key (id, at)) PARTITION BY RANGE (at);"
        "CREATE TABLE m_2024 PARTITION OF m FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')"
    )
    create_publication(
        db.dsn, "root", tables=[TableTarget(TableSpec(None, "m"))], via_partition_root=True
    )
    pub = catalog.get_publication(db.dsn, "root")
    assert pub.via_partition_root and pub.published_tables == ("public.m",)
    create_publication(db.dsn, "leaves", tables=[TableTarget(TableSpec(None, "m"))])
    assert catalog.get_publication(db.dsn, "leaves").published_tables == ("public.m_2024",)
    # a partition without identity is caught even when published as its root
    db.execute(
        "CREATE TABLE n (id int, at date) PARTITION BY RANGE (at);"
        "CREATE TABLE n_1 PARTITION OF n FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')"
    )
    with pytest.raises(PublicationError, match="public.n_1"):
        create_publication(
            db.dsn, "nroot", tables=[TableTarget(TableSpec(None, "n"))], via_partition_root=True
        )
    if db.major < 15:  # row filters
        return
    # and so is a root row filter on a column outside the partitions' identity
    db.execute("ALTER TABLE m ADD COLUMN region text")
    with pytest.raises(PublicationError, match="region"):
        create_publication(
            db.dsn,
            "mfilter",
            tables=[TableTarget(TableSpec(None, "m"), "region = 'eu'")],
            via_partition_root=True,
        )


def test_identity_show_and_set(db: Database) -> None:
    db.execute(
        "CREATE TABLE t (id int primary key, code text not null unique, v text);"
        "CREATE PUBLICATION p FOR TABLE t"
    )
    report = catalog.table_identity(db.dsn, "public.t")
    assert report.table.replica_identity == "d"
    assert [p.name for p in report.publications] == ["p"]
    before, after = set_replica_identity(db.dsn, "t", "full")
    assert before.table.replica_identity == "d" and after.table.replica_identity == "f"
    _, after = set_replica_identity(db.dsn, "t", "index", "t_code_key")
    assert after.table.replica_identity == "i"
    assert after.table.identity_index is not None
    assert after.table.identity_index.name == "t_code_key"
    with pytest.raises(ConfigurationError, match="would fail"):
        set_replica_identity(db.dsn, "t", "nothing")
    assert db.execute("SELECT relreplident FROM pg_class WHERE relname = 't'") == [("i",)]
    _, after = set_replica_identity(db.dsn, "t", "nothing", force=True)
    assert after.table.replica_identity == "n"
    with pytest.raises(ConfigurationError):
        set_replica_identity(db.dsn, "t", "index")
    with pytest.raises(ConfigurationError):
        set_replica_identity(db.dsn, "t", "index", "no_such_index")
    with pytest.raises(ConfigurationError):
        set_replica_identity(db.dsn, "t; DROP TABLE t", "full")
    assert db.execute("SELECT count(*) FROM t") == [(0,)]


_TOKENS = [
    "'",
    '"',
    "(",
    ")",
    ";",
    "--",
    "/*",
    "*/",
    "$$",
    "$a$",
    "\\",
    "E'",
    "''",
    " ",
    "id",
    "1",
    "true",
    "=",
    "OR",
    "DROP TABLE victim",
    "COMMIT",
    "\n",
    "U&'",
    "::text",
]


@pytest.mark.min_major(15)
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.sampled_from(_TOKENS), min_size=1, max_size=12).map("".join))
def test_row_filter_fuzz_never_escapes(odd: Database, where: str) -> None:
    """Whatever --where holds, the result is one CREATE PUBLICATION or a clean error."""
    with suppress(ConfigurationError, PublicationError):
        create_publication(
            odd.dsn,
            "fz",
            tables=[TableTarget(TableSpec(None, "victim"), where)],
            operations=["insert"],
        )
    assert odd.execute("SELECT count(*) FROM victim") == [(1,)]
    assert odd.execute("SELECT count(*) FROM pg_publication WHERE pubname <> 'fz'") == [(0,)]
    odd.execute("DROP PUBLICATION IF EXISTS fz")
