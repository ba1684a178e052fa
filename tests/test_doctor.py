"""`pgtail doctor` and `pgtail identity` on real PostgreSQL 15 and 18: every check seen
passing and failing on a purposely broken setup. The oracle for replica identity checks
is the server itself: a table the doctor fails is one whose UPDATE/DELETE really fails."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import orjson
import psycopg2
import pytest

from pgtail import catalog, doctor
from pgtail.doctor import Check
from pgtail.errors import ServerCapabilityError
from pgtail.server import LocalServer, start_server
from tests.helpers import Database, run_cli, streaming


def checks_for(checks: list[Check], check_id: str, subject: str | None = None) -> list[Check]:
    return [c for c in checks if c.id == check_id and (subject is None or c.subject == subject)]


def one(checks: list[Check], check_id: str, subject: str | None = None) -> Check:
    found = checks_for(checks, check_id, subject)
    assert len(found) == 1, (check_id, subject, checks)
    return found[0]


def run_doctor(dsn: str, **kwargs: object) -> list[Check]:
    publications = kwargs.pop("publications", ())
    slots = kwargs.pop("slots", ())
    facts = catalog.doctor_facts(dsn, publications, slots)  # type: ignore[arg-type]
    return doctor.evaluate(facts, **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- server


@pytest.fixture
def replica_server(pg: LocalServer) -> Iterator[LocalServer]:
    server = start_server(pg.bindir, settings={"wal_level": "replica", "max_wal_senders": "1"})
    try:
        yield server
    finally:
        server.destroy()


def test_wal_level_replica_fails(replica_server: LocalServer) -> None:
    checks = run_doctor(replica_server.dsn())
    check = one(checks, "wal_level")
    assert check.status == "fail"
    with pytest.raises(ServerCapabilityError, match="wal_level") as info:
        catalog.create_slot(replica_server.dsn(), "x")
    assert "wal_level = logical" in str(info.value)
    assert "'replica'" in check.summary
    assert check.fix is not None and "wal_level = logical" in check.fix
    assert doctor.overall(checks) == "fail"
    code, out, _ = run_cli(["doctor", "--dsn", replica_server.dsn()])
    assert code == 1
    assert "[FAIL] wal_level" in out
    code, out, _ = run_cli(["doctor", "--json", "--dsn", replica_server.dsn()])
    assert code == 1
    report = orjson.loads(out)
    assert report["status"] == "fail"
    assert {"id": "wal_level", "status": "fail"}.items() <= next(
        c for c in report["checks"] if c["id"] == "wal_level"
    ).items()


def test_healthy_server_passes(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key, n int); CREATE PUBLICATION p FOR TABLE t")
    checks = run_doctor(db.dsn, publications=["p"])
    for check_id in (
        "wal_level",
        "max_replication_slots",
        "max_wal_senders",
        "replication_privilege",
        "create_publication",
    ):
        assert one(checks, check_id).status == "ok", check_id
    assert one(checks, "table.replica_identity", "public.t").status == "ok"
    assert doctor.overall(checks) == "ok"
    code, out, _ = run_cli(["doctor", "--publication", "p", "--dsn", db.dsn])
    assert code == 0, out
    assert "0 failure(s)" in out


def test_slots_in_use_counted(pg: LocalServer) -> None:
    server = start_server(
        pg.bindir, settings={"max_replication_slots": "2", "max_wal_senders": "2"}
    )
    try:
        dsn = server.dsn()
        assert one(run_doctor(dsn), "max_replication_slots").status == "ok"
        catalog.create_slot(dsn, "one")
        check = one(run_doctor(dsn), "max_replication_slots")
        assert check.status == "warn" and "1 of 2" in check.summary
        catalog.create_slot(dsn, "two")
        check = one(run_doctor(dsn), "max_replication_slots")
        assert check.status == "fail" and "all 2" in check.summary
        assert check.fix is not None and "max_replication_slots" in check.fix

        database = Database(server, "postgres")
        database.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
        assert one(run_doctor(dsn), "max_wal_senders").status == "ok"
        with streaming(database, "one", "p"):
            check = one(run_doctor(dsn), "max_wal_senders")
            assert check.status == "warn" and "1 of 2" in check.summary
            with streaming(database, "two", "p"):
                check = one(run_doctor(dsn), "max_wal_senders")
                assert check.status == "fail" and "all 2 WAL senders" in check.summary
                assert check.fix is not None and "max_wal_senders" in check.fix
    finally:
        server.destroy()


def _problems(checks: list[Check]) -> list[tuple[str, str, str]]:
    return [(c.status, c.id, c.subject) for c in checks if c.status in ("warn", "fail")]


def test_demo_schema(db: Database) -> None:
    """The demo's tables give no spurious warning: short text columns are no unchanged TOAST
    risk, FULL is an INFO. Its one failure is real: page_views (REPLICA IDENTITY NOTHING)
    sits in a publication of updates and deletes; published for inserts only, it is fine."""
    from pgtail.demo import DEMO_PUBLICATION, SCHEMA

    db.execute(SCHEMA)
    db.execute(
        "INSERT INTO customers (name, email, country) VALUES ('Ann', 'ann@example.com', 'NL');"
        "INSERT INTO orders (customer_id, status, total, items, tags) "
        "VALUES (1, 'new', 9.5, '[{\"sku\": \"KB-101\"}]', '{gift}');"
        "INSERT INTO documents (title, body) VALUES ('readme', 'short');"
        "INSERT INTO page_views (path) VALUES ('/')"
    )
    checks = run_doctor(db.dsn, publications=[DEMO_PUBLICATION])
    assert _problems(checks) == [("fail", "table.replica_identity", "public.page_views")]
    fix = one(checks, "table.replica_identity", "public.page_views").fix
    assert fix == "ALTER TABLE public.page_views REPLICA IDENTITY FULL;"
    assert one(checks, "table.replica_identity", "public.inventory").status == "info"
    # --json carries the same findings as the text, with their severity; a FAIL exits 1
    args = ["doctor", "--publication", DEMO_PUBLICATION, "--dsn", db.dsn]
    code, text, _ = run_cli(args)
    json_code, out, _ = run_cli([*args, "--json"])
    assert code == json_code == 1
    report = orjson.loads(out)
    assert report["status"] == "fail"
    assert report["counts"] == {
        "ok": len(checks) - 2,
        "info": 1,  # inventory's FULL
        "warn": 0,
        "fail": 1,  # page_views
    }
    assert [(c["status"], c["subject"], c["summary"]) for c in report["checks"]] == [
        (c.status, c.subject, c.summary) for c in checks
    ]
    mark = {"ok": "ok", "info": "INFO", "warn": "WARN", "fail": "FAIL"}
    for c in report["checks"]:
        assert f"[{mark[c['status']]}] {c['subject']}: {c['summary']}" in text
    db.execute(
        f"ALTER PUBLICATION {DEMO_PUBLICATION} DROP TABLE page_views;"
        "CREATE PUBLICATION demo_log FOR TABLE page_views WITH (publish = 'insert')"
    )
    code, out, _ = run_cli(
        [
            "doctor",
            "--publication",
            DEMO_PUBLICATION,
            "--publication",
            "demo_log",
            "--strict",
            "--dsn",
            db.dsn,
        ]
    )
    assert code == 0, out
    assert "0 warning(s), 0 failure(s)" in out


SHOP = """
CREATE ROLE {owner};
CREATE TABLE customers (id bigserial primary key, email text not null unique,
    name text not null, country char(2), created_at timestamptz not null default now());
CREATE TABLE products (sku text primary key, title text not null, description text,
    price numeric(10, 2) not null, tags text[] not null default '{{}}');
CREATE TABLE orders (id bigserial primary key, customer_id bigint not null references customers,
    status text not null default 'new', note text, items jsonb not null);
ALTER TABLE customers OWNER TO {owner}; ALTER TABLE products OWNER TO {owner};
ALTER TABLE orders OWNER TO {owner};
INSERT INTO customers (email, name, country)
    SELECT 'c' || g || '@example.com', 'Customer ' || g, 'DE' FROM generate_series(1, 200) g;
INSERT INTO products SELECT 'SKU-' || g, 'Product ' || g, repeat('nice. ', 40), g, '{{new}}'
    FROM generate_series(1, 50) g;
INSERT INTO orders (customer_id, status, note, items)
    SELECT 1 + g % 200, 'paid', NULL, jsonb_build_array(jsonb_build_object('sku', 'SKU-1'))
    FROM generate_series(1, 1000) g;
CREATE PUBLICATION shop_pub FOR TABLE customers, products, orders;
GRANT SELECT ON customers, products, orders TO {streamer};
ALTER ROLE {streamer} REPLICATION;
"""


def test_healthy_shop(db: Database, role: str) -> None:
    """A small shop: primary keys, ordinary columns, a streaming role with REPLICATION and
    SELECT. No FAIL, no WARN, exit 0 even with --strict."""
    owner = "shop_owner_" + uuid.uuid4().hex[:6]
    db.execute(SHOP.format(owner=owner, streamer=role))
    try:
        dsn = db.server.dsn(db.name, user=role)
        catalog.create_slot(dsn, "shop")
        checks = run_doctor(dsn, publications=["shop_pub"], slots=["shop"])
        assert _problems(checks) == [], checks
        for table in ("public.customers", "public.products", "public.orders"):
            assert one(checks, "table.replica_identity", table).status == "ok"
        code, out, _ = run_cli(
            ["doctor", "--publication", "shop_pub", "--slot", "shop", "--strict", "--dsn", dsn]
        )
        assert code == 0, out
        code, out, _ = run_cli(["doctor", "--publication", "shop_pub", "--json", "--dsn", dsn])
        assert code == 0
        report = orjson.loads(out)
        assert report["counts"]["fail"] == 0 and report["counts"]["warn"] == 0
    finally:
        db.execute(f"DROP OWNED BY {owner}; DROP ROLE {owner}")


# --------------------------------------------------------------------------- role


@pytest.fixture
def role(db: Database) -> Iterator[str]:
    name = "r_" + uuid.uuid4().hex[:10]
    db.execute(f"CREATE ROLE {name} LOGIN")
    try:
        yield name
    finally:
        db.execute(f"DROP OWNED BY {name}; DROP ROLE {name}")


def test_role_without_replication(db: Database, role: str) -> None:
    dsn = db.server.dsn(db.name, user=role)
    checks = run_doctor(dsn)
    check = one(checks, "replication_privilege")
    assert check.status == "fail"
    assert check.fix is not None and f"ALTER ROLE {role} REPLICATION" in check.fix
    with pytest.raises(ServerCapabilityError, match="REPLICATION"):
        catalog.create_slot(dsn, "mine")
    # no publication in the database: the one it needs cannot be created (surprising, but
    # a superuser may still create it)
    create = one(checks, "create_publication")
    assert create.status == "warn"
    assert create.fix == f"GRANT CREATE ON DATABASE {db.name} TO {role};"
    # the fixes work
    db.execute(f"ALTER ROLE {role} REPLICATION")
    db.execute(f"GRANT CREATE ON DATABASE {db.name} TO {role}")
    checks = run_doctor(dsn)
    assert one(checks, "replication_privilege").status == "ok"
    assert one(checks, "create_publication").status == "ok"
    # and the role can now create a slot
    catalog.create_slot(dsn, "mine")


def test_streaming_role_of_an_existing_publication(db: Database, role: str) -> None:
    """A role with LOGIN REPLICATION that streams a publication someone else made gets no
    FAIL: it need not create publications, and SELECT matters only for a copy."""
    db.execute(
        "CREATE TABLE orders (id int primary key, status text);"
        "CREATE PUBLICATION app_pub FOR TABLE orders;"
        f"ALTER ROLE {role} REPLICATION"
    )
    dsn = db.server.dsn(db.name, user=role)
    checks = run_doctor(dsn, publications=["app_pub"])
    assert not [c for c in checks if c.status in ("fail", "warn")], checks
    create = one(checks, "create_publication")
    assert create.status == "info" and "streams existing publications" in create.summary
    select = one(checks, "select_privilege")
    assert select.status == "info" and "public.orders" in select.summary
    code, out, _ = run_cli(["doctor", "--publication", "app_pub", "--strict", "--dsn", dsn])
    assert code == 0, out
    # the role really streams: it creates a slot and decodes the publication
    catalog.create_slot(dsn, "app")
    db.execute("INSERT INTO orders VALUES (1, 'new')")
    rows = db.execute(
        "SELECT count(*) FROM pg_logical_slot_peek_binary_changes('app', NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'app_pub')"
    )
    assert rows[0][0] > 0  # type: ignore[operator]
    # the SELECT fix runs as given and silences the note
    assert select.fix is not None
    db.execute(select.fix)
    assert one(run_doctor(dsn, publications=["app_pub"]), "select_privilege").status == "ok"


@pytest.fixture
def owner_role(db: Database) -> Iterator[str]:
    name = "o_" + uuid.uuid4().hex[:10]
    db.execute(f"CREATE ROLE {name}")
    try:
        yield name
    finally:
        db.execute(f"DROP OWNED BY {name}; DROP ROLE {name}")


def _create_publication_as(dsn: str, statement: str) -> str | None:
    """Run ``statement`` as the role of ``dsn``: None, or the server's error."""
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
        return None
    except psycopg2.Error as exc:
        return str(exc)
    finally:
        conn.close()


def test_creating_a_publication_needs_create_and_ownership(
    db: Database, role: str, owner_role: str
) -> None:
    db.execute(
        f"CREATE TABLE orders (id int primary key); ALTER TABLE orders OWNER TO {owner_role};"
        f"CREATE TABLE notes (id int primary key); ALTER ROLE {role} REPLICATION"
    )
    dsn = db.server.dsn(db.name, user=role)
    statement = "CREATE PUBLICATION app_pub FOR TABLE orders"
    checks = run_doctor(dsn, publications=["app_pub"])
    assert one(checks, "publication.exists", "app_pub").status == "fail"
    create = one(checks, "create_publication")
    assert create.status == "fail"
    assert f"CREATE on database {db.name}" in create.summary
    assert "ownership of 2 table(s)" in create.summary
    # the fix says both: CREATE on the database, and the tables' ownership
    assert create.fix == (
        f"GRANT CREATE ON DATABASE {db.name} TO {role}; GRANT {owner_role} TO {role}; "
        f"ALTER TABLE public.notes OWNER TO {role};"
    )
    assert "permission denied" in (_create_publication_as(dsn, statement) or "")
    # CREATE alone is not enough: the server wants the owner
    db.execute(f"GRANT CREATE ON DATABASE {db.name} TO {role}")
    create = one(run_doctor(dsn, publications=["app_pub"]), "create_publication")
    assert create.status == "fail" and "CREATE on" not in create.summary
    assert "must be owner" in (_create_publication_as(dsn, statement) or "")
    # the whole fix, run as given, lets the role create it
    assert create.fix is not None
    db.execute(create.fix)
    assert one(run_doctor(dsn, publications=["app_pub"]), "create_publication").status == "ok"
    assert _create_publication_as(dsn, statement) is None
    checks = run_doctor(dsn, publications=["app_pub"])
    assert not [c for c in checks if c.status in ("fail", "warn")], checks


def test_managed_replication_role_counts(db: Database, role: str) -> None:
    db.execute(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'rds_replication') "
        "THEN CREATE ROLE rds_replication; END IF; END $$"
    )
    db.execute(f"GRANT rds_replication TO {role}")
    check = one(run_doctor(db.server.dsn(db.name, user=role)), "replication_privilege")
    assert check.status == "ok" and "rds_replication" in check.summary


# --------------------------------------------------------------------------- replica identity

IDENTITY_SETUP = """
CREATE TABLE pk (id int primary key, v text);
CREATE TABLE nopk (id int, v text);
CREATE TABLE full_t (id int, v int);
ALTER TABLE full_t REPLICA IDENTITY FULL;
CREATE TABLE nothing_t (id int primary key, v int);
ALTER TABLE nothing_t REPLICA IDENTITY NOTHING;
CREATE TABLE idx (id int not null, code int not null, v int);
CREATE UNIQUE INDEX idx_code ON idx (code);
ALTER TABLE idx REPLICA IDENTITY USING INDEX idx_code;
CREATE TABLE dropped_idx (id int not null, v int);
CREATE UNIQUE INDEX dropped_idx_id ON dropped_idx (id);
ALTER TABLE dropped_idx REPLICA IDENTITY USING INDEX dropped_idx_id;
DROP INDEX dropped_idx_id;
CREATE TABLE invalid_idx (id int not null, v int);
CREATE UNIQUE INDEX invalid_idx_id ON invalid_idx (id);
ALTER TABLE invalid_idx REPLICA IDENTITY USING INDEX invalid_idx_id;
UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'invalid_idx_id'::regclass;
CREATE TABLE "Mixed Case" ("Id" int primary key, "Some Col" int);
CREATE TABLE nullable_key (id int, code int, v int);
CREATE UNIQUE INDEX nullable_key_code ON nullable_key (code);
CREATE TABLE "Odd Key" (id int, "Code" int not null, v int);
CREATE UNIQUE INDEX "Odd Key Code" ON "Odd Key" ("Code");
CREATE TABLE partial_only (id int not null, v int);
CREATE UNIQUE INDEX partial_only_id ON partial_only (id) WHERE id > 0;
CREATE PUBLICATION p FOR TABLE pk, nopk, full_t, nothing_t, idx, dropped_idx, invalid_idx,
  "Mixed Case", nullable_key, "Odd Key", partial_only;
"""

EXPECTED_IDENTITY = {
    "public.pk": "ok",
    "public.nopk": "fail",
    "public.full_t": "info",
    "public.nothing_t": "fail",
    "public.idx": "ok",
    "public.dropped_idx": "fail",
    "public.invalid_idx": "fail",
    'public."Mixed Case"': "ok",
    "public.nullable_key": "fail",
    'public."Odd Key"': "fail",
    "public.partial_only": "fail",
}

# the one fix of each failing table: a key it has wherever one can be named, else FULL
EXPECTED_FIX = {
    "public.nopk": "ALTER TABLE public.nopk REPLICA IDENTITY FULL;",
    "public.nothing_t": "ALTER TABLE public.nothing_t REPLICA IDENTITY DEFAULT;",
    "public.dropped_idx": "ALTER TABLE public.dropped_idx REPLICA IDENTITY FULL;",
    "public.invalid_idx": "REINDEX INDEX CONCURRENTLY public.invalid_idx_id;",
    "public.nullable_key": "ALTER TABLE public.nullable_key ALTER COLUMN code SET NOT NULL; "
    "ALTER TABLE public.nullable_key REPLICA IDENTITY USING INDEX nullable_key_code;",
    'public."Odd Key"': 'ALTER TABLE public."Odd Key" REPLICA IDENTITY USING INDEX "Odd Key Code";',
    "public.partial_only": "ALTER TABLE public.partial_only REPLICA IDENTITY FULL;",
}


def _update_fails(db: Database, table: str) -> bool:
    """Does the server refuse an UPDATE of ``table`` for want of a replica identity?"""
    column = '"Some Col"' if "Mixed" in table else "v"
    columns = "1, 1, 1" if table.endswith(("nullable_key", '"Odd Key"')) else "1, 1"
    # a row, so the UPDATE has work to do
    db.execute(f"INSERT INTO {table} SELECT {columns} WHERE NOT EXISTS (SELECT FROM {table})")
    try:
        db.execute(f"UPDATE {table} SET {column} = NULL")
        return False
    except psycopg2.Error as exc:
        assert "replica identity" in str(exc)
        return True


def test_each_replica_identity(db: Database) -> None:
    db.execute(IDENTITY_SETUP)
    checks = run_doctor(db.dsn, publications=["p"])
    for table, status in EXPECTED_IDENTITY.items():
        check = one(checks, "table.replica_identity", table)
        assert check.status == status, (table, check)
        # the oracle: the server agrees about which UPDATEs fail
        assert _update_fails(db, table) == (status == "fail"), table
        if status == "fail":
            assert check.fix
    assert "no longer exists" in one(checks, "table.replica_identity", "public.dropped_idx").summary
    assert "not valid" in one(checks, "table.replica_identity", "public.invalid_idx").summary
    assert "no primary key or unique index can be named" in (
        one(checks, "table.replica_identity", "public.nopk").summary
    )
    code, out, _ = run_cli(["doctor", "--publication", "p", "--dsn", db.dsn])
    assert code == 1
    assert "[FAIL] public.nothing_t" in out
    # every fix is one runnable statement (or two) without placeholders; run as given, it
    # makes the check pass and the UPDATE work
    for table, fix in EXPECTED_FIX.items():
        check = one(checks, "table.replica_identity", table)
        assert check.fix == fix, table
        assert "<" not in fix and "--" not in fix
        db.execute(fix)
    checks = run_doctor(db.dsn, publications=["p"])
    for table in EXPECTED_FIX:
        assert one(checks, "table.replica_identity", table).status in ("ok", "info"), table
        assert not _update_fails(db, table), table
    assert doctor.overall(checks) == "info"  # FULL tables: their cost is worth knowing
    code, out, _ = run_cli(["doctor", "--publication", "p", "--strict", "--dsn", db.dsn])
    assert code == 0, out


def test_identity_index_fix_suggests_usable_index(db: Database) -> None:
    db.execute(
        "CREATE TABLE u (id int not null, v text); CREATE UNIQUE INDEX u_id ON u (id);"
        "CREATE PUBLICATION p FOR TABLE u WITH (publish = 'insert');"
        "ALTER PUBLICATION p SET (publish = 'insert, update')"
    )
    check = one(run_doctor(db.dsn), "table.replica_identity", "public.u")
    assert check.status == "fail"
    assert check.fix == "ALTER TABLE public.u REPLICA IDENTITY USING INDEX u_id;"
    db.execute(check.fix)
    assert one(run_doctor(db.dsn), "table.replica_identity", "public.u").status == "ok"


def test_insert_only_publication_needs_no_identity(db: Database) -> None:
    db.execute(
        "CREATE TABLE logs (at timestamptz, line text);"
        "CREATE PUBLICATION p FOR TABLE logs WITH (publish = 'insert')"
    )
    check = one(run_doctor(db.dsn), "table.replica_identity", "public.logs")
    assert check.status == "ok" and "no replica identity needed" in check.summary
    assert not checks_for(run_doctor(db.dsn), "table.unchanged_toast")


# a value pglz cannot shrink (random hex), wide enough to be stored out of line
WIDE = "(SELECT string_agg(md5(random()::text), '') FROM generate_series(1, 200))"


def _unchanged_toast_seen(db: Database, statement: str) -> str:
    """What test_decoding (the server's own view) shows for ``statement``'s UPDATE."""
    slot = "td_" + uuid.uuid4().hex[:8]
    db.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    try:
        db.execute(statement)
        rows = db.execute(
            "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL) "
            "WHERE data LIKE 'table %%UPDATE%%'",
            (slot,),
        )
        return "\n".join(str(r[0]) for r in rows)
    finally:
        db.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def test_unchanged_toast_columns(db: Database) -> None:
    db.execute(
        "CREATE TABLE docs (id int primary key, status text, country char(2), code varchar(5),"
        " n numeric, meta jsonb, tags text[], body text, note text);"
        "CREATE PUBLICATION p FOR TABLE docs"
    )
    # an empty table, and one of short values: nothing is out of line, nothing to warn of
    check = one(run_doctor(db.dsn), "table.unchanged_toast", "public.docs")
    assert check.status == "ok" and "no value stored out of line" in check.summary
    # numeric (main) and char(2), varchar(5) (too short to gain from it) do not go out of line
    assert "status, meta, tags, body, note" in check.summary
    db.execute(
        "INSERT INTO docs SELECT g, 'new', 'NL', 'abc', 1.5, '{\"a\": 1}', '{x,y}', 'short', "
        "repeat('n', 500) FROM generate_series(1, 100) g"
    )
    checks = run_doctor(db.dsn)
    assert not [c for c in checks if c.status in ("warn", "fail")], checks
    # large values in body: the table's TOAST relation holds data, and only body is named
    db.execute(f"UPDATE docs SET body = {WIDE} WHERE id <= 20")
    check = one(run_doctor(db.dsn), "table.unchanged_toast", "public.docs")
    assert check.status == "warn"
    assert check.summary.startswith("UPDATEs that leave body unchanged send no value for it")
    assert "in its TOAST table" in check.summary
    assert (
        check.fix == "ALTER TABLE public.docs REPLICA IDENTITY FULL; -- the old row then carries it"
    )
    # the server agrees: an UPDATE of status leaves body out, and nothing else
    seen = _unchanged_toast_seen(db, "UPDATE docs SET status = 'paid' WHERE id = 1")
    assert "body[text]:unchanged-toast-datum" in seen
    assert seen.count("unchanged-toast-datum") == 1
    code, out, _ = run_cli(["doctor", "--dsn", db.dsn])
    assert code == 0 and "[WARN] public.docs" in out  # a warning does not fail...
    code, out, _ = run_cli(["doctor", "--strict", "--dsn", db.dsn])
    assert code == 1  # ...unless --strict
    # the fix, run as given: the old row carries body; FULL is then an INFO, never a WARN
    db.execute(check.fix)
    checks = run_doctor(db.dsn)
    assert not checks_for(checks, "table.unchanged_toast")
    full = one(checks, "table.replica_identity", "public.docs")
    assert full.status == "info" and full.fix is None
    assert not [c for c in checks if c.status in ("warn", "fail")], checks
    seen = _unchanged_toast_seen(db, "UPDATE docs SET status = 'sent' WHERE id = 1")
    assert "old-key:" in seen and "body[text]:'" in seen.split("new-tuple:")[0]


def test_unchanged_toast_with_no_identity_gets_one_fix(db: Database) -> None:
    db.execute(
        "CREATE TABLE notes (id int, code int not null, body text);"
        "CREATE UNIQUE INDEX notes_code ON notes (code);"
        "CREATE PUBLICATION p FOR TABLE notes WITH (publish = 'insert');"
        "ALTER TABLE notes ALTER COLUMN body SET STORAGE EXTERNAL;"
        f"INSERT INTO notes SELECT g, g, {WIDE} FROM generate_series(1, 5) g;"
        "ALTER PUBLICATION p SET (publish = 'insert, update, delete')"
    )
    checks = run_doctor(db.dsn)
    # a unique index could serve, but FULL is the one fix that also carries body
    check = one(checks, "table.replica_identity", "public.notes")
    assert check.status == "fail" and check.fix == "ALTER TABLE public.notes REPLICA IDENTITY FULL;"
    assert "FULL also carries" in check.summary and "(body)" in check.summary
    assert not checks_for(checks, "table.unchanged_toast")
    db.execute(check.fix)
    checks = run_doctor(db.dsn)
    assert not [c for c in checks if c.status in ("warn", "fail")], checks


def test_unchanged_toast_unreadable_table(db: Database, role: str) -> None:
    """A role that may not read the table cannot tell which column is out of line: every
    column that can be is named."""
    db.execute(
        "CREATE TABLE docs (id int primary key, title text, body text);"
        f"INSERT INTO docs SELECT g, 't', {WIDE} FROM generate_series(1, 5) g;"
        f"CREATE PUBLICATION p FOR TABLE docs; ALTER ROLE {role} REPLICATION"
    )
    check = one(run_doctor(db.server.dsn(db.name, user=role)), "table.unchanged_toast")
    assert check.status == "warn" and "title, body" in check.summary
    assert "may not read the table" in check.summary
    check = one(run_doctor(db.dsn), "table.unchanged_toast")
    assert check.status == "warn" and "leave body unchanged" in check.summary


@pytest.mark.min_major(15)  # row filters, column lists
def test_row_filter_and_column_list_coverage(db: Database) -> None:
    db.execute(
        "CREATE TABLE o (id int primary key, region text, total int);"
        "CREATE PUBLICATION rf FOR TABLE o WHERE (region = 'eu');"
        "CREATE PUBLICATION cl FOR TABLE o (region, total);"
        "CREATE PUBLICATION good FOR TABLE o (id, total) WHERE (id > 0);"
    )
    checks = run_doctor(db.dsn, publications=["rf"])
    check = one(checks, "table.row_filter", "public.o")
    assert check.status == "fail" and "region" in check.summary
    checks = run_doctor(db.dsn, publications=["cl"])
    check = one(checks, "table.column_list", "public.o")
    assert check.status == "fail" and "id" in check.summary
    checks = run_doctor(db.dsn, publications=["good"])
    assert one(checks, "table.row_filter", "public.o").status == "ok"
    assert not checks_for(checks, "table.column_list")
    # the server agrees: with rf and cl in place an UPDATE fails
    db.execute("INSERT INTO o VALUES (1, 'eu', 1)")
    with pytest.raises(psycopg2.Error):
        db.execute("UPDATE o SET total = 2")
    db.execute("DROP PUBLICATION rf; DROP PUBLICATION cl")
    db.execute("UPDATE o SET total = 2")


@pytest.mark.min_major(13)  # publish_via_partition_root
def test_partitioned_table(db: Database) -> None:
    db.execute(
        "CREATE TABLE m (id int, at date, v text, primary key (id, at)) PARTITION BY RANGE (at);"
        "CREATE TABLE m_1 PARTITION OF m FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');"
        "CREATE TABLE m_2 (id int not null, at date not null, v text);"
        "ALTER TABLE m ATTACH PARTITION m_2 FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');"
        "CREATE PUBLICATION root FOR TABLE m WITH (publish_via_partition_root = true);"
    )
    checks = run_doctor(db.dsn, publications=["root"])
    assert one(checks, "table.partitioning", "public.m").status == "ok"
    # the leaves are checked too: both got the primary key from the parent
    assert one(checks, "table.replica_identity", "public.m_1").status == "ok"
    assert one(checks, "table.replica_identity", "public.m_2").status == "ok"
    db.execute("ALTER PUBLICATION root SET (publish_via_partition_root = false)")
    checks = run_doctor(db.dsn, publications=["root"])
    for leaf in ("public.m_1", "public.m_2"):
        check = one(checks, "table.partitioning", leaf)
        assert check.status == "warn" and f"arrive as {leaf}, not as public.m" in check.summary
        assert check.fix == "ALTER PUBLICATION root SET (publish_via_partition_root = true);"
        assert one(checks, "table.replica_identity", leaf).status == "ok"
    # a partition published on its own is just a table
    db.execute("CREATE PUBLICATION leaf FOR TABLE m_1")
    assert not checks_for(run_doctor(db.dsn, publications=["leaf"]), "table.partitioning")


@pytest.mark.min_major(15)  # row filters, column lists
def test_root_row_filter_applies_to_partitions(db: Database) -> None:
    db.execute(
        "CREATE TABLE m (id int, region text, at date, primary key (id, at)) "
        "PARTITION BY RANGE (at);"
        "CREATE TABLE m_1 PARTITION OF m FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');"
        "CREATE PUBLICATION rf FOR TABLE m WHERE (region = 'eu') WITH (publish_via_partition_root);"
        "INSERT INTO m VALUES (1, 'eu', '2024-05-01')"
    )
    check = one(run_doctor(db.dsn), "table.row_filter", "public.m_1")
    assert check.status == "fail" and "region" in check.summary
    with pytest.raises(psycopg2.Error, match="WHERE"):
        db.execute("UPDATE m SET at = at")


def test_missing_publication_and_slot(db: Database) -> None:
    checks = run_doctor(db.dsn, publications=["nope"], slots=["nada"])
    assert one(checks, "publication.exists", "nope").status == "fail"
    assert one(checks, "slot.exists", "nada").status == "fail"
    checks = run_doctor(db.dsn)
    assert one(checks, "publication.exists").status == "warn"  # no publication at all
    # the fixes, run as given (a superuser's), make both pass
    for check_id, subject in (("publication.exists", "nope"), ("slot.exists", "nada")):
        fix = one(run_doctor(db.dsn, publications=["nope"], slots=["nada"]), check_id, subject).fix
        assert fix is not None
        if fix.startswith("pgtail "):  # a command line (a check before it changes anything)
            import shlex

            code, _, err = run_cli([*shlex.split(fix, comments=True)[1:], "--dsn", db.dsn])
            assert code == 0, err
        else:
            db.execute(fix)
    checks = run_doctor(db.dsn, publications=["nope"], slots=["nada"])
    assert not checks_for(checks, "publication.exists") and not checks_for(checks, "slot.exists")
    # a publication of no table yet is surprising; with one, it is fine
    assert one(checks, "publication.tables", "nope").status == "warn"  # FOR ALL TABLES, none
    db.execute("CREATE PUBLICATION empty")
    assert one(run_doctor(db.dsn), "publication.tables", "empty").status == "warn"
    db.execute("CREATE TABLE t (id int primary key); ALTER PUBLICATION empty ADD TABLE t")
    checks = run_doctor(db.dsn)
    assert one(checks, "publication.tables", "empty").status == "ok"
    assert one(checks, "publication.tables", "nope").status == "ok"


# --------------------------------------------------------------------------- slots


def test_inactive_slot_holding_wal(db: Database) -> None:
    db.execute("CREATE TABLE t (id int, pad text)")
    catalog.create_slot(db.dsn, "idle")
    db.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 20000) g")
    low = int(
        db.execute(  # type: ignore[call-overload]
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots "
            "WHERE slot_name = 'idle'"
        )[0][0]
    )
    facts = catalog.doctor_facts(db.dsn, (), ["idle"])
    high = int(
        db.execute(  # type: ignore[call-overload]
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots "
            "WHERE slot_name = 'idle'"
        )[0][0]
    )
    (slot,) = [s for s in facts.slots.slots if s.name == "idle"]
    assert slot.retained_bytes is not None
    assert low >= 2_000_000  # the insert wrote a few MB of WAL
    assert low <= slot.retained_bytes <= high
    warn = one(doctor.evaluate(facts, wal_warn_bytes=1_000_000), "slot.activity", "idle")
    assert warn.status == "warn"
    assert f"({slot.retained_bytes} bytes)" in warn.summary
    assert warn.fix is not None and "pg_drop_replication_slot('idle')" in warn.fix
    # not `pgtail stream --slot idle`: it fails with several publications, and would take
    # the changes of a spark run reading the slot away from its checkpoint
    assert "pgtail stream --slot" not in warn.fix
    assert "its pgtail spark run with the same --checkpoint" in warn.fix
    fine = one(doctor.evaluate(facts), "slot.activity", "idle")  # default threshold 1 GB
    # the verdict top and slot info give: a slot without consumer holding a few MB informs
    assert fine.status == "info" and "no consumer" in fine.summary
    code, out, _ = run_cli(
        ["doctor", "--slot", "idle", "--wal-warn", "1MB", "--json", "--dsn", db.dsn]
    )
    assert code == 0  # a warning does not fail
    report = orjson.loads(out)
    assert report["status"] == "warn"
    assert any(c["id"] == "slot.activity" and c["status"] == "warn" for c in report["checks"])


def test_streaming_a_missing_publication(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION gone FOR TABLE t")
    catalog.create_slot(db.dsn, "s")
    with streaming(db, "s", "gone"):
        db.execute("DROP PUBLICATION gone")
        checks = run_doctor(db.dsn, slots=["s"])
        check = one(checks, "slot.publication", "s")
        assert check.status == "fail" and "'gone'" in check.summary
        assert one(checks, "slot.activity", "s").status == "ok"


@pytest.fixture
def small_wal_server(pg: LocalServer) -> Iterator[LocalServer]:
    """max_wal_size at its smallest, so a slot soon holds WAL past it."""
    server = start_server(pg.bindir, settings={"max_wal_size": "32MB", "min_wal_size": "32MB"})
    try:
        yield server
    finally:
        server.destroy()


def _retained(cur: psycopg2.extensions.cursor, slot: str) -> int:
    cur.execute(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn) FROM pg_replication_slots "
        "WHERE slot_name = %s",
        (slot,),
    )
    row = cur.fetchone()
    assert row is not None
    return int(row[0])


def test_inactive_slot_past_max_wal_size(small_wal_server: LocalServer) -> None:
    """An inactive slot holding WAL the server would otherwise have recycled warns with the
    size it holds: wal_status 'extended' (from 13), retained WAL past max_wal_size (12)."""
    dsn = small_wal_server.dsn()
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id serial primary key, pad text)")
        cur.execute("CREATE PUBLICATION p FOR TABLE t")
    catalog.create_slot(dsn, "idle")
    checks = run_doctor(dsn)
    assert not [c for c in checks if c.status in ("warn", "fail")], checks
    check = one(checks, "slot.activity", "idle")
    assert check.status == "info" and "no consumer" in check.summary
    try:
        with conn.cursor() as cur:
            for _ in range(40):
                cur.execute(
                    "INSERT INTO t (pad) SELECT repeat('x', 1000) FROM generate_series(1, 3000)"
                )
                cur.execute("SELECT pg_switch_wal()")
                cur.execute("CHECKPOINT")
                if _retained(cur, "idle") > 48 * 1024**2:
                    break
            if small_wal_server.major >= 13:
                cur.execute("SELECT wal_status FROM pg_replication_slots")
                assert cur.fetchone() == ("extended",)
            low = _retained(cur, "idle")
            checks = run_doctor(dsn)
            high = _retained(cur, "idle")
    finally:
        conn.close()
    check = one(checks, "slot.activity", "idle")
    assert check.status == "warn", check
    held = int(check.summary.split("(")[1].split(" bytes")[0])
    assert low <= held <= high
    assert "past max_wal_size (32.0 MB)" in check.summary
    assert check.fix is not None and "pg_drop_replication_slot('idle')" in check.fix
    assert not [c for c in checks if c.status == "fail"], checks
    code, _, _ = run_cli(["doctor", "--dsn", dsn])
    assert code == 0
    code, out, _ = run_cli(["doctor", "--strict", "--json", "--dsn", dsn])
    assert code == 1
    report = orjson.loads(out)
    assert report["status"] == "warn" and report["counts"]["warn"] == 1
    # streaming the slot to now (here: advancing it) releases the WAL: the warning goes
    catalog.advance_slot(dsn, "idle", catalog.list_slots(dsn).slots[0].current_lsn)
    check = one(run_doctor(dsn), "slot.activity", "idle")
    (slot,) = catalog.list_slots(dsn).slots
    assert slot.retained_bytes is not None
    if small_wal_server.major >= 13 or slot.retained_bytes < 32 * 1024**2:
        assert check.status == "info", check
    else:  # 12 may keep restart_lsn where it was until the slot decodes further
        assert check.status == "warn", check


def test_requested_slot_of_another_plugin(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t;")
    db.execute("SELECT pg_create_logical_replication_slot('td', 'test_decoding')")
    checks = run_doctor(db.dsn, publications=["p"], slots=["td"])
    check = one(checks, "slot.plugin", "td")
    assert check.status == "fail" and "'test_decoding'" in check.summary
    # pgtail's stream refuses it for the same reason
    code, _, err = run_cli(["stream", "--slot", "td", "--publication", "p", "--dsn", db.dsn])
    assert code == 1 and "test_decoding" in err
    db.execute("SELECT pg_create_physical_replication_slot('phys')")
    try:
        physical = one(run_doctor(db.dsn, slots=["phys"]), "slot.plugin", "phys")
        assert physical.status == "fail" and "physical slot" in physical.summary
    finally:
        db.execute("SELECT pg_drop_replication_slot('phys')")
    # a slot not asked for belongs to some other consumer: its plugin is its business
    assert not checks_for(run_doctor(db.dsn, publications=["p"]), "slot.plugin")
    # the fix runs as given, and its slot passes
    assert check.fix == "SELECT pg_create_logical_replication_slot('td_pgoutput', 'pgoutput');"
    db.execute(check.fix)
    checks = run_doctor(db.dsn, publications=["p"], slots=["td_pgoutput"])
    assert not checks_for(checks, "slot.plugin")
    assert not [c for c in checks if c.status in ("warn", "fail")], checks


def test_requested_slot_of_another_database(db: Database) -> None:
    db.execute("CREATE TABLE t (id int primary key); CREATE PUBLICATION p FOR TABLE t")
    other = db.server.dsn("postgres")
    name = "elsewhere_" + uuid.uuid4().hex[:8]
    catalog.create_slot(other, name)
    try:
        checks = run_doctor(db.dsn, publications=["p"], slots=[name])
        check = one(checks, "slot.database", name)
        assert check.status == "fail" and "'postgres'" in check.summary
        assert check.fix == "connect with dbname=postgres (pgtail ... -d postgres)"
        code, _, err = run_cli(["stream", "--slot", name, "--publication", "p", "--dsn", db.dsn])
        assert code == 1 and "postgres" in err
        # connected to its database, as the fix says, the slot passes
        assert not checks_for(run_doctor(other, slots=[name]), "slot.database")
        # not asked for, it is just another slot on the server
        assert not checks_for(run_doctor(db.dsn, publications=["p"]), "slot.database")
    finally:
        catalog.drop_slot(other, name)


@pytest.fixture
def small_keep_server(pg: LocalServer) -> Iterator[LocalServer]:
    server = start_server(
        pg.bindir,
        settings={"max_slot_wal_keep_size": "1MB", "max_wal_size": "32MB", "min_wal_size": "32MB"},
    )
    try:
        yield server
    finally:
        server.destroy()


@pytest.mark.min_major(13)  # max_slot_wal_keep_size, wal_status
def test_invalidated_slot(small_keep_server: LocalServer) -> None:
    dsn = small_keep_server.dsn()
    catalog.create_slot(dsn, "lost")
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE t (pad text)")
            unreserved = []
            for _ in range(60):
                cur.execute("INSERT INTO t SELECT repeat('x', 1000) FROM generate_series(1, 3000)")
                cur.execute("SELECT pg_switch_wal()")
                cur.execute("SELECT wal_status FROM pg_replication_slots")
                status = cur.fetchone()
                if status is not None and status[0] == "lost":
                    break
                if status == ("unreserved",) and not unreserved:
                    # past max_slot_wal_keep_size: gone at the next checkpoint
                    unreserved = checks_for(run_doctor(dsn), "slot.wal_keep", "lost")
                cur.execute("CHECKPOINT")
            else:
                pytest.fail("the slot was never invalidated")
    finally:
        conn.close()
    assert [c.status for c in unreserved] == ["fail"], unreserved
    check = one(run_doctor(dsn), "slot.invalidated", "lost")
    assert check.status == "fail"
    assert check.fix is not None and "pg_drop_replication_slot('lost')" in check.fix


# --------------------------------------------------------------------------- identity command


def test_identity_cli_show_and_set(db: Database) -> None:
    db.execute(
        'CREATE SCHEMA "My Schema";'
        'CREATE TABLE "My Schema"."Tab.le" (id int primary key, code int not null, v text);'
        'CREATE UNIQUE INDEX "Code Idx" ON "My Schema"."Tab.le" (code);'
        'CREATE PUBLICATION p FOR TABLE "My Schema"."Tab.le"'
    )
    table = '"My Schema"."Tab.le"'
    code, out, err = run_cli(["identity", table, "--dsn", db.dsn])
    assert code == 0, err
    assert "DEFAULT" in out and "old key only (id)" in out
    code, out, err = run_cli(["identity", table, "--set", "full", "--dsn", db.dsn])
    assert code == 0, err
    before, after = out.split("after:")
    assert "old key only (id)" in before and "the full old row" in after
    code, out, err = run_cli(
        ["identity", table, "--set", "index", '"Code Idx"', "--json", "--dsn", db.dsn]
    )
    assert code == 0, err
    data = orjson.loads(out)
    assert data["before"]["mode"] == "full"
    assert data["after"]["replica_identity"] == "USING INDEX Code Idx"
    assert data["after"]["key_columns"] == ["code"]
    assert data["after"]["carries"]["delete"] == "old key only (code)"
    code, out, err = run_cli(["identity", table, "--set", "nothing", "--dsn", db.dsn])
    assert code == 1 and "would fail" in err and "--force" in err
    assert err.count("\n") == 1  # one line, no traceback
    assert db.execute("SELECT relreplident FROM pg_class WHERE relname = 'Tab.le'") == [("i",)]
    code, out, err = run_cli(["identity", "no_such_table", "--dsn", db.dsn])
    assert code == 1 and "does not exist" in err


def test_a_publication_dropped_while_doctor_reads_makes_it_read_again(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog object dropped between doctor's statements (a run replacing its
    publication) is read again, not reported as an error; an error that persists is."""
    from pgtail.catalog import survey

    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    read = survey._read_facts
    failures = [1]

    def racing(conn: psycopg2.extensions.connection, *args: object) -> object:
        if failures[0]:
            failures[0] -= 1
            with conn.cursor() as cur:  # what a concurrent DROP makes a later statement do
                cur.execute("SELECT 'public.dropped_meanwhile'::regclass")
        return read(conn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(survey, "_read_facts", racing)
    facts = catalog.doctor_facts(db.dsn)
    assert [p.name for p in facts.publications] == ["pub"]
    failures[0] = survey._READS  # every read fails: the error is the server's, at the end
    with pytest.raises(Exception, match="dropped_meanwhile"):
        catalog.doctor_facts(db.dsn)
    assert failures[0] == 0


def test_a_cache_lookup_missing_a_replaced_publication_makes_doctor_read_again(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI flake of issue 29: a run re-creating its publication while the doctor read
    pg_publication_tables made the server report "cache lookup failed for publication N"
    (XX000); that is read again too, while another internal error is not."""
    from pgtail.catalog import survey

    db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    db.execute("CREATE PUBLICATION pub FOR TABLE t")
    read = survey._read_facts
    failures = [(1, "cache lookup failed for publication 16390")]

    def racing(conn: psycopg2.extensions.connection, *args: object) -> object:
        count, message = failures[0]
        if count:
            failures[0] = (count - 1, message)
            with conn.cursor() as cur:  # what the server says in that window
                cur.execute(
                    f"DO $$ BEGIN RAISE EXCEPTION '{message}' USING ERRCODE = 'XX000'; END $$"
                )
        return read(conn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(survey, "_read_facts", racing)
    assert [p.name for p in catalog.doctor_facts(db.dsn).publications] == ["pub"]
    failures[0] = (1, "could not read block 0")
    with pytest.raises(Exception, match="could not read block"):
        catalog.doctor_facts(db.dsn)


def test_could_not_look_has_its_own_exit_status_and_a_json_document() -> None:
    """A CI gate tells a failed check (1) from a doctor that could not look (3)."""
    from pgtail.server import free_port

    dsn = f"host=127.0.0.1 port={free_port()} connect_timeout=5 password=secret123"
    code, out, err = run_cli(["doctor", "--json", "--dsn", dsn])
    assert code == 3, (out, err)
    report = orjson.loads(out)
    assert report["status"] == "error" and report["checks"] == []
    assert report["error"]["kind"] == "ServerUnreachable"  # nothing answers at the port
    assert "cannot reach PostgreSQL" in report["error"]["message"]
    assert report["error"]["hint"]
    assert "secret123" not in out + err
    assert err.startswith("pgtail: error: cannot reach PostgreSQL")
    code, out, err = run_cli(["doctor", "--dsn", dsn])
    assert (code, out) == (3, "")
    assert err.startswith("pgtail: error: cannot reach PostgreSQL")


def test_no_publication_fix_is_safe_for_a_table_without_replica_identity(db: Database) -> None:
    """The fix for "no publication" used to be CREATE PUBLICATION ... FOR ALL TABLES,
    which makes a keyless table's next UPDATE fail; then `publication create --all-tables`,
    which refuses that table: the fix given now names the table's fix first, and then
    the command works."""
    import shlex

    db.execute("CREATE TABLE keyless (v text)")
    db.execute("INSERT INTO keyless VALUES ('a')")
    # stream's error says there is none, without FOR ALL TABLES
    code, _, err = run_cli(["stream", "--dsn", db.dsn, "--idle-exit", "1"])
    assert code == 1 and "has no publication" in err
    assert "FOR ALL TABLES" not in err and "pgtail publication create pgtail" in err
    _, out, _ = run_cli(["doctor", "--json", "--dsn", db.dsn])
    (check,) = [c for c in orjson.loads(out)["checks"] if c["id"] == "publication.exists"]
    assert "FOR ALL TABLES" not in check["fix"]
    first, _, command = check["fix"].partition("; then: ")
    sql = first.removeprefix("first give each table a replica identity: ")
    assert sql == "ALTER TABLE public.keyless REPLICA IDENTITY FULL;", check["fix"]
    args = shlex.split(command, comments=True)
    assert args[0] == "pgtail"
    code, _, err = run_cli([*args[1:], "--dsn", db.dsn])
    assert code == 1 and "keyless" in err, err  # refused while the table has no identity
    db.execute(sql)
    code, _, err = run_cli([*args[1:], "--dsn", db.dsn])
    assert code == 0, err
    assert db.execute("SELECT count(*) FROM pg_publication") == [(1,)]
    db.execute("UPDATE keyless SET v = 'b'")  # the application still works


def test_dead_toast_data_alone_raises_no_unchanged_toast_warning(db: Database) -> None:
    """A TOAST relation holding only deleted rows' values (not vacuumed yet), in a table
    the sample read whole: no live value is out of line, so no UPDATE can leave one
    unchanged (this warned, garbled: "(whose, the rows sampled did not show)")."""
    db.execute("CREATE TABLE doc (id int PRIMARY KEY, body text)")
    db.execute("ALTER TABLE doc ALTER body SET STORAGE EXTERNAL")  # out of line, uncompressed
    db.execute("INSERT INTO doc VALUES (1, repeat('x', 9000)), (2, 'short')")
    db.execute("CREATE PUBLICATION p FOR TABLE doc")
    check = one(run_doctor(db.dsn, publications=["p"]), "table.unchanged_toast")
    assert check.status == "warn" and "body" in check.summary  # a live value out of line
    db.execute("DELETE FROM doc WHERE id = 1")
    toast = db.execute(
        "SELECT pg_relation_size(reltoastrelid) FROM pg_class WHERE relname = 'doc'"
    )[0][0]
    assert toast > 0  # the deleted row's value is still there
    check = one(run_doctor(db.dsn, publications=["p"]), "table.unchanged_toast")
    assert check.status == "ok", check
    assert "whose" not in check.summary


def test_wal_level_on_the_command_line_is_not_fixed_by_alter_system(pg: LocalServer) -> None:
    """postgres -c wal_level=replica overrides ALTER SYSTEM: the doctor says where it
    comes from and gives a fix that works."""
    server = start_server(pg.bindir)
    try:
        server.stop()

        def start_with_replica() -> None:
            server._cmd(
                [str(server.bindir / "pg_ctl"), "-D", str(server.datadir), "-l",
                 str(server.logfile), "-w", "-o", "-c wal_level=replica", "start"]
            )  # fmt: skip
            server._running = True

        start_with_replica()
        conn = psycopg2.connect(server.dsn())
        conn.autocommit = True
        conn.cursor().execute("ALTER SYSTEM SET wal_level = logical")
        conn.close()
        server.stop()
        start_with_replica()  # ALTER SYSTEM and a restart: still replica
        check = one(run_doctor(server.dsn()), "wal_level")
        assert check.status == "fail"
        assert "command line" in check.summary
        assert check.fix is not None and "ALTER SYSTEM" not in check.fix
        assert "-c wal_level" in check.fix
    finally:
        server.destroy()
