"""The SQL renderer's oracle: replaying its output reproduces the source tables exactly.

A workload of inserts, updates (of TOASTed and of key columns), deletes, truncates and a
rolled-back savepoint runs over tables with awkward names and every value type
`pgtail.values` supports, under REPLICA IDENTITY DEFAULT, FULL and USING INDEX. The slot is
read through the SQL interface (pgoutput, protocol 1, text and binary), assembled into
events by `pgtail.changes.Assembler`, rendered by `SqlRenderer`, replayed with psql (or
statement by statement when psql is missing) into a fresh database with the same schema,
and every table is compared row for row with the source.
"""

from __future__ import annotations

import io
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len

from pgtail import catalog
from pgtail.changes import Assembler, Column, EncodedRows, Event
from pgtail.changes.fastpath import EncoderFactory
from pgtail.render import RenderOptions
from pgtail.render.sql import (
    SqlRenderer,
    literal,
    quote_ident,
    quote_literal,
    sql_statement_encoder,
)
from pgtail.render.table import TableRenderer
from pgtail.server import LocalServer, embedded_bindir
from tests.helpers import Database, create_database, drop_database

PAYLOAD_COLUMNS = """
    c_bool boolean, c_int2 smallint, c_int4 integer, c_int8 bigint, c_oid oid,
    c_float4 real, c_float8 double precision, c_numeric numeric, c_numeric_s numeric(12,4),
    c_money money, c_text text, c_varchar varchar(20), c_bpchar char(6), c_name name,
    c_char "char", c_bytea bytea, c_uuid uuid, c_json json, c_jsonb jsonb,
    c_inet inet, c_cidr cidr, c_macaddr macaddr, c_macaddr8 macaddr8, c_bit bit(5),
    c_varbit varbit, c_pg_lsn pg_lsn, c_tsvector tsvector, c_date date, c_time time,
    c_timetz timetz, c_ts timestamp, c_tstz timestamptz, c_interval interval,
    c_int_arr integer[], c_text_arr text[], c_text_2d text[], c_num_arr numeric[],
    c_jsonb_arr jsonb[], c_tstz_arr timestamptz[], c_bytea_arr bytea[], c_bool_arr boolean[],
    c_float_arr double precision[],
    "Select" text, "user" integer, "a""b" text, "with space" text, "ünï" text, "x$y" text
"""

NORMAL = {
    "c_bool": "true",
    "c_int2": "12",
    "c_int4": "-7",
    "c_int8": "9000000000",
    "c_oid": "4294967295",
    "c_float4": "1.1",
    "c_float8": "3.141592653589793",
    "c_numeric": "12345.678900",
    "c_numeric_s": "1.5",
    "c_money": "12.34",
    "c_text": "plain",
    "c_varchar": "O'Reilly",
    "c_bpchar": "ab",
    "c_name": 'Name"Q',
    "c_char": "z",
    "c_bytea": "\\x00ff27275c0a",
    "c_uuid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "c_json": '{"b": [1, 2.50, "x\\"y"], "a": null, "a": 2}',
    "c_jsonb": '{"k": "é\\n", "n": 1.50}',
    "c_inet": "192.168.0.1/24",
    "c_cidr": "10.0.0.0/8",
    "c_macaddr": "08:00:2b:01:02:03",
    "c_macaddr8": "08:00:2b:01:02:03:04:05",
    "c_bit": "10101",
    "c_varbit": "1",
    "c_pg_lsn": "16/B374D848",
    "c_tsvector": "a:1 fat:2B cat",
    "c_date": "2026-02-28",
    "c_time": "23:59:59.999999",
    "c_timetz": "12:00:00+05:30",
    "c_ts": "2026-11-21 23:55:34.123456",
    "c_tstz": "2026-11-21 23:55:34.5+02",
    "c_interval": "1 year 2 mons 3 days 04:05:06.5",
    "c_int_arr": "{1,NULL,3}",
    "c_text_arr": '{"a b","NULL",NULL,"x\\"y","{}","",\'q\',"back\\\\slash"}',
    "c_text_2d": "{{a,b},{c,d}}",
    "c_num_arr": "{1.50,NaN}",
    "c_jsonb_arr": '{"{\\"a\\": 1}","[]"}',
    "c_tstz_arr": '{"2026-01-01 00:00:00+00",infinity}',
    "c_bytea_arr": '{"\\\\x00ff",NULL}',
    "c_bool_arr": "{t,f,NULL}",
    "c_float_arr": "{NaN,-Infinity,1.5}",
    '"Select"': "select",
    '"user"': "5",
    '"a""b"': 'a"b',
    '"with space"': "with space",
    '"ünï"': "ünïcødé 🎉",
    '"x$y"': "$$ dollar $$",
}

EDGE = {
    **NORMAL,
    "c_bool": "false",
    "c_int2": "-32768",
    "c_int4": "2147483647",
    "c_int8": "-9223372036854775808",
    "c_oid": "0",
    "c_float4": "NaN",
    "c_float8": "-Infinity",
    "c_numeric": "-12345678901234567890.123456789012345",
    "c_numeric_s": "NaN",
    "c_money": "-92233720368547758.08",
    "c_text": 'it\'s a "quote" \\ backslash\nnewline\r\ttab ünïcødé 🎉 */ -- ; $$ /*',
    "c_varchar": "",
    "c_bpchar": "",
    "c_bytea": "\\x",
    "c_json": "[]",
    "c_jsonb": '"\\u00e9 \\"q\\""',
    "c_inet": "::1",
    "c_date": "0044-03-15 BC",
    "c_time": "00:00:00",
    "c_timetz": "00:00:00-11:30",
    "c_ts": "-infinity",
    "c_tstz": "infinity",
    "c_interval": "-1 days +02:00:00",
    "c_int_arr": "{}",
    "c_text_arr": "{}",
    '"Select"': "NULL",
    '"a""b"': "'; DROP TABLE x; --",
}

SPECIAL_FLOATS = {**NORMAL, "c_float4": "-0", "c_float8": "1e-310", "c_numeric": "Infinity"}

NULLS = dict.fromkeys(NORMAL)

SCHEMA = f"""
CREATE SCHEMA "Sch ema";
CREATE SCHEMA "ünïcödé";
CREATE TABLE "Sch ema"."MixedCase" ("ID" bigint PRIMARY KEY, "Big Text" text, {PAYLOAD_COLUMNS});
CREATE TABLE public."select" (n integer, "Big Text" text, {PAYLOAD_COLUMNS});
ALTER TABLE public."select" REPLICA IDENTITY FULL;
CREATE TABLE public."user" (k1 text NOT NULL, "K 2" integer NOT NULL, note text,
                            {PAYLOAD_COLUMNS});
CREATE UNIQUE INDEX "user key" ON public."user" (k1, "K 2");
ALTER TABLE public."user" REPLICA IDENTITY USING INDEX "user key";
CREATE TABLE "ünïcödé"."tab""quote" (a integer, b text, "Value" text, PRIMARY KEY (a, b));
CREATE TABLE public.seq_table (id serial PRIMARY KEY, v text);
CREATE TYPE public.mood AS ENUM ('sad', 'ok', 'hap''py');
CREATE TABLE public."Énum" (id integer PRIMARY KEY, m public.mood, ms public.mood[]);
"""

TABLES = [
    '"Sch ema"."MixedCase"',
    'public."select"',
    'public."user"',
    '"ünïcödé"."tab""quote"',
    "public.seq_table",
]
ENUM_TABLE = 'public."Énum"'


def _big(seed: int) -> str:
    """A value stored out of line (TOASTed): long and not very compressible."""
    return os.urandom(12000).hex() + str(seed)


def _insert(
    cur: psycopg2.extensions.cursor, table: str, extra: dict[str, object], values: dict[str, object]
) -> None:
    row = {**extra, **values}
    cols = ", ".join(row)
    marks = ", ".join(["%s"] * len(row))
    cur.execute(f"INSERT INTO {table} ({cols}) VALUES ({marks})", list(row.values()))


def workload(conn: psycopg2.extensions.connection) -> None:
    """Changes of every kind, committed in several transactions."""
    cur = conn.cursor()
    # the SQL interface decodes only flushed WAL: commit synchronously (the test
    # servers run with synchronous_commit = off)
    cur.execute("SET synchronous_commit = on")
    conn.autocommit = False
    mixed, full, index, quoted, seq = TABLES
    # T1: inserts everywhere, NULLs, edge values, TOASTed values
    special = SPECIAL_FLOATS
    if conn.server_version < 140000:  # numeric has infinities from PostgreSQL 14
        special = {**SPECIAL_FLOATS, "c_numeric": "NaN"}
    for i, values in enumerate([NORMAL, EDGE, special, NULLS]):
        _insert(cur, mixed, {'"ID"': i + 1, '"Big Text"': _big(i)}, values)
        _insert(cur, full, {"n": i, '"Big Text"': _big(i)}, values)
        _insert(cur, index, {"k1": f"key {i}", '"K 2"': i, "note": "n"}, values)
    for a, b in [(1, "x"), (2, "O'y"), (3, "z\\")]:
        cur.execute(f"INSERT INTO {quoted} VALUES (%s, %s, %s)", (a, b, f"v{a}"))
    cur.execute(f"INSERT INTO {seq} (v) SELECT 'r' || g FROM generate_series(1, 5) g")
    cur.execute(
        f"INSERT INTO {ENUM_TABLE} VALUES (1, 'hap''py', '{{sad,hap''py}}'), (2, NULL, NULL)"
    )
    conn.commit()
    # T2: updates leaving TOASTed values unchanged, of a TOASTed value, of the key
    cur.execute(f"UPDATE {mixed} SET c_text = 'changed', c_int4 = NULL WHERE \"ID\" = 1")
    cur.execute(f'UPDATE {mixed} SET "ID" = 100, c_bool = NULL WHERE "ID" = 2')
    cur.execute(f'UPDATE {mixed} SET "Big Text" = %s WHERE "ID" = 3', (_big(33),))
    cur.execute(f'UPDATE {mixed} SET c_text = NULL, c_json = %s WHERE "ID" = 4', ("{}",))
    cur.execute(f'UPDATE {mixed} SET "Select" = "Select" WHERE "ID" = 100')  # no-op update
    conn.commit()
    # T3: REPLICA IDENTITY FULL with duplicate rows: change exactly one of them
    for _ in range(2):
        _insert(cur, full, {"n": 10, '"Big Text"': "dup"}, NORMAL)
        _insert(cur, full, {"n": 11, '"Big Text"': None}, NULLS)
    cur.execute(
        f"UPDATE {full} SET c_text = %s "
        f"WHERE ctid = (SELECT ctid FROM {full} WHERE n = 10 LIMIT 1)",
        ("one of two",),
    )
    cur.execute(f"DELETE FROM {full} WHERE ctid = (SELECT ctid FROM {full} WHERE n = 11 LIMIT 1)")
    cur.execute(f"UPDATE {full} SET c_int4 = 42 WHERE n = 0")  # TOASTed column untouched
    cur.execute(f"UPDATE {full} SET n = 20, c_uuid = NULL WHERE n = 1")
    cur.execute(f"DELETE FROM {full} WHERE n = 2")
    conn.commit()
    # T4: USING INDEX: update a non-key column, the key, delete
    cur.execute(f"UPDATE {index} SET note = 'updated', c_jsonb = '[1]' WHERE k1 = 'key 0'")
    cur.execute(f"UPDATE {index} SET k1 = 'key ''moved''', \"K 2\" = 99 WHERE k1 = 'key 1'")
    cur.execute(f"DELETE FROM {index} WHERE k1 = 'key 2'")
    # composite key with quotes and backslashes: update both key columns, delete
    cur.execute(f"UPDATE {quoted} SET a = 10, b = 'ten\\' WHERE a = 1")
    cur.execute(f"UPDATE {quoted} SET \"Value\" = 'new' WHERE a = 2")
    cur.execute(f"DELETE FROM {quoted} WHERE a = 3")
    conn.commit()
    # T5: a rolled-back savepoint: its changes must not be replayed
    cur.execute(f'DELETE FROM {mixed} WHERE "ID" = 3')
    cur.execute("SAVEPOINT s1")
    cur.execute(f"DELETE FROM {mixed}")
    cur.execute(f"INSERT INTO {seq} (v) VALUES ('rolled back')")
    # a non-transactional message is delivered even though its savepoint rolls back
    cur.execute("SELECT pg_logical_emit_message(false, 'pgtail', 'not transactional')")
    cur.execute("ROLLBACK TO SAVEPOINT s1")
    cur.execute(f"INSERT INTO {seq} (v) VALUES ('kept')")
    cur.execute("SELECT pg_logical_emit_message(true, 'pgtail', 'a */ message\n-- with lines')")
    conn.commit()
    # T6: truncates (with RESTART IDENTITY, and of two tables at once), then inserts again
    cur.execute(f"TRUNCATE {seq} RESTART IDENTITY")
    cur.execute(f"INSERT INTO {seq} (v) VALUES ('after truncate')")
    conn.commit()
    cur.execute(f"TRUNCATE {index}, {quoted}")
    cur.execute(f"INSERT INTO {quoted} VALUES (7, '', NULL)")
    _insert(cur, index, {"k1": "", '"K 2"': 0, "note": None}, EDGE)
    conn.commit()
    cur.execute(f"UPDATE {ENUM_TABLE} SET m = 'sad' WHERE id = 1")
    cur.execute(f"DELETE FROM {ENUM_TABLE} WHERE id = 2")
    conn.commit()
    conn.autocommit = True


def render_slot(
    db: Database, slot: str, *, binary: bool, encoder: EncoderFactory | None = None
) -> tuple[str, list[Event]]:
    """Read the slot (without consuming it) and render its changes as SQL (with the
    renderer's quick lane when ``encoder`` is its encoder factory)."""
    options = ["proto_version", "1", "publication_names", "rt_pub"]
    if db.major >= 14:  # pgoutput's messages and binary options are new in PostgreSQL 14
        options += ["messages", "true", "binary", "true" if binary else "false"]
    rows = db.execute(
        "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
        "VARIADIC %s::text[])",
        (slot, options),
    )
    assert rows, "the slot produced no changes"
    assembler = Assembler(1, binary=binary, encoder=encoder)
    events: list[Event] = []
    for _lsn, data in rows:
        payload = bytes(data)
        wanted = assembler.user_types_wanted(payload)
        if wanted:
            assembler.add_user_types(catalog.lookup_user_types(db.dsn, wanted), wanted)
        events.extend(assembler.feed(payload))
    warnings: list[str] = []
    out = _Sink()
    renderer = SqlRenderer(out, RenderOptions(extra={"warn": warnings.append}))
    for event in events:
        renderer.render(event)
    renderer.close()
    assert warnings == []
    return out.getvalue().decode("utf-8"), events


class _Sink:
    """A BinaryIO stand-in that keeps what was written (io.BytesIO works too)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(data)
        return len(data)

    def getvalue(self) -> bytes:
        return b"".join(self.parts)


def _psql() -> Path | None:
    found = embedded_bindir()
    if found is not None and (found / "psql").exists():
        return found / "psql"
    return None


def replay(target: Database, sql: str, tmp_path: Path) -> None:
    """Run the SQL on the target as a user would: psql -v ON_ERROR_STOP=1 -f file."""
    psql = _psql()
    if psql is not None:
        script = tmp_path / f"replay-{uuid.uuid4().hex[:8]}.sql"
        script.write_text(sql, encoding="utf-8")
        env = {**os.environ, "PGCLIENTENCODING": "UTF8"}
        result = subprocess.run(
            [str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", target.dsn, "-f", str(script)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        return
    conn = target.connect()
    try:
        with conn.cursor() as cur:
            for line in sql.splitlines():
                if line and not line.startswith("--"):
                    cur.execute(line)
    finally:
        conn.close()


def _heads(sql: str) -> str:
    return "\n".join(line[:160] for line in sql.splitlines())


def table_rows(db: Database, table: str) -> list[str]:
    rows = db.execute(f"SELECT t::text FROM {table} AS t")
    return sorted(str(r[0]) for r in rows)


@pytest.fixture
def target_factory(db: Database) -> Iterator[object]:
    """Fresh databases on the same server as ``db``, dropped afterwards."""
    made: list[str] = []
    server: LocalServer = db.server

    def make() -> Database:
        target = create_database(server, "rt_")
        made.append(target.name)
        return target

    yield make
    for name in made:
        drop_database(server, name)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_sql_replay_reproduces_every_table(
    db: Database, target_factory: object, tmp_path: Path, binary: bool
) -> None:
    if binary and db.major < 14:
        pytest.skip("binary tuple data needs PostgreSQL 14+")
    make = target_factory
    assert callable(make)
    target: Database = make()
    for database in (db, target):
        database.execute(SCHEMA)
    db.execute("CREATE PUBLICATION rt_pub FOR ALL TABLES")
    db.execute("SELECT pg_create_logical_replication_slot('rt_slot', 'pgoutput')")
    conn = db.connect()
    try:
        workload(conn)  # enums too: in binary mode their label, once pg_type is asked
    finally:
        conn.close()

    sql, events = render_slot(db, "rt_slot", binary=binary)
    # the workload's shapes all arrived and were rendered
    for needle in (
        'INSERT INTO "Sch ema"."MixedCase" ("ID", "Big Text", c_bool',
        'UPDATE "Sch ema"."MixedCase" SET "ID" = 100',
        'UPDATE public."select" SET',
        '(tableoid, ctid) = (SELECT tableoid, ctid FROM public."select" WHERE',
        'DELETE FROM public."user" WHERE k1 = ',
        'DELETE FROM "ünïcödé"."tab""quote" WHERE a = 3 AND b = E\'z\\\\\';',
        "TRUNCATE public.seq_table RESTART IDENTITY;",
        'TRUNCATE public."user", "ünïcödé"."tab""quote";',
        '-- message prefix="pgtail" transactional',
        '-- message prefix="pgtail" non-transactional',
        "BEGIN;",
        "COMMIT;",
    ):
        if needle.startswith("-- message") and db.major < 14:
            continue  # pgoutput sends logical messages from PostgreSQL 14
        assert needle in sql, f"{needle!r} not in the SQL output:\n{_heads(sql)}"
    assert "rolled back" not in sql
    # the unchanged TOASTed value is left out of SET; the changed one is set
    update_1 = next(line for line in sql.splitlines() if "c_text = 'changed'" in line)
    assert '"Big Text"' not in update_1
    assert sum(1 for e in events if type(e).__name__ == "Change") > 20

    # the table renderer takes the same real events: markers, notes, the width kept
    table_out = io.BytesIO()
    table_renderer = TableRenderer(table_out, RenderOptions(width=100))
    for event in events:
        table_renderer.render(event)
    table_renderer.close()
    shown = table_out.getvalue().decode("utf-8")
    assert "⋯ unchanged toast" in shown
    assert "note: old rows: key only, if it changed (REPLICA IDENTITY DEFAULT)" in shown
    assert 'TRUNCATE public."user", "ünïcödé"."tab""quote"' in shown
    assert "replica identity full" in shown
    for line in shown.splitlines():
        assert cell_len(line) <= 100, line

    replay(target, sql, tmp_path)
    tables = [*TABLES, ENUM_TABLE]
    for table in tables:
        source_rows = table_rows(db, table)
        assert table_rows(target, table) == source_rows, table
    # the data is not trivially empty: the comparison compared something
    assert len(table_rows(db, TABLES[0])) == 3
    assert len(table_rows(db, TABLES[1])) == 6
    assert table_rows(db, TABLES[4]) == ['(1,"after truncate")']
    # the sequence was restarted on the target too
    assert target.execute("SELECT last_value FROM public.seq_table_id_seq")[0][0] == 1


@pytest.mark.parametrize("generated", [True, False], ids=["generated", "plain"])
def test_quick_lane_writes_the_renderers_statements_and_they_replay(
    db: Database,
    target_factory: object,
    tmp_path: Path,
    codegen: Callable[[bool], None],
    generated: bool,
) -> None:
    """Inserts, updates (without an old row, with the old key or whole old row) and deletes
    by key or by whole row, written by
    the renderer's encoders straight from the text values (generated code, or its loops),
    are the statements the renderer writes from the events, and replay the same."""
    codegen(generated)
    make = target_factory
    assert callable(make)
    target: Database = make()
    for database in (db, target):
        database.execute(SCHEMA)
    db.execute("CREATE PUBLICATION rt_pub FOR ALL TABLES")
    db.execute("SELECT pg_create_logical_replication_slot('rt_slot', 'pgoutput')")
    conn = db.connect()
    try:
        workload(conn)
    finally:
        conn.close()
    general, _ = render_slot(db, "rt_slot", binary=False)
    quick, events = render_slot(db, "rt_slot", binary=False, encoder=sql_statement_encoder)
    assert quick == general
    lanes = {(e.table.name, e.op) for e in events if type(e) is EncodedRows}
    assert {("user", "update"), ("user", "delete"), ("select", "delete")} <= lanes, lanes
    # and updates with an old row: FULL's (the old row), key changes (the old key; the
    # one of MixedCase with an unchanged TOAST value in its new row)
    assert {("select", "update"), ("MixedCase", "update"), ('tab"quote', "update")} <= lanes
    replay(target, quick, tmp_path)
    for table in [*TABLES, ENUM_TABLE]:
        assert table_rows(target, table) == table_rows(db, table), table


def test_two_phase_replay(db: Database, target_factory: object, tmp_path: Path) -> None:
    """PREPARE TRANSACTION / COMMIT PREPARED / ROLLBACK PREPARED replay as such."""
    if db.major < 15:
        pytest.skip("two_phase in pgoutput needs protocol 3 (PostgreSQL 15)")
    make = target_factory
    assert callable(make)
    target: Database = make()
    for database in (db, target):
        database.execute('CREATE TABLE "T p" (id int PRIMARY KEY, v text)')
    db.execute("CREATE PUBLICATION rt_pub FOR ALL TABLES")
    db.execute("SELECT pg_create_logical_replication_slot('tp_slot', 'pgoutput', false, true)")
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("""INSERT INTO "T p" VALUES (1, 'committed')""")
            cur.execute("PREPARE TRANSACTION 'gid ''one'' */\nx'")
            cur.execute("BEGIN")
            cur.execute("""INSERT INTO "T p" VALUES (2, 'rolled back')""")
            cur.execute("PREPARE TRANSACTION 'gid two'")
            cur.execute("COMMIT PREPARED 'gid ''one'' */\nx'")
            cur.execute("ROLLBACK PREPARED 'gid two'")
    finally:
        conn.close()
    rows = db.execute(
        "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes('tp_slot', NULL, NULL, "
        "'proto_version', '3', 'publication_names', 'rt_pub', 'two_phase', 'true')"
    )
    assembler = Assembler(3)
    out = _Sink()
    renderer = SqlRenderer(out, RenderOptions())
    for _lsn, data in rows:
        for event in assembler.feed(bytes(data)):
            renderer.render(event)
    renderer.close()
    sql = out.getvalue().decode("utf-8")
    assert "PREPARE TRANSACTION E'gid ''one'' */\\nx';" in sql
    assert "COMMIT PREPARED E'gid ''one'' */\\nx';" in sql
    assert "ROLLBACK PREPARED 'gid two';" in sql
    for line in sql.splitlines():  # the gid in comments is escaped: one line each
        assert line.startswith("--") or line.endswith(";"), line
    replay(target, sql, tmp_path)
    assert target.execute('SELECT id, v FROM "T p"') == [(1, "committed")]
    assert target.execute("SELECT count(*) FROM pg_prepared_xacts")[0][0] == 0


# --- quoting survives the server: arbitrary text, bytea and identifiers ----------------

_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=_TEXT, data=st.binary(), name=_TEXT.filter(lambda s: 0 < len(s.encode()) < 64))
def test_arbitrary_values_survive_quoting(
    db18: Database, text: str, data: bytes, name: str
) -> None:
    conn = _hypothesis_connection(db18)
    text_col = Column("t", 25, -1, False, "text")
    varchar_col = Column("v", 1043, -1, False, "character varying")
    bytea_col = Column("b", 17, -1, False, "bytea")
    text_sql = literal(text, text_col)
    bytea_sql = literal("\\x" + data.hex(), bytea_col)
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT {quote_literal(text)}, {text_sql}, {bytea_sql}, "
            f"{literal(text, varchar_col)}, 1 AS {quote_ident(name)}"
        )
        row = cur.fetchone()
        assert row is not None
        assert row[0] == text
        assert row[1] == text
        assert bytes(row[2]) == data
        assert row[3] == text
        assert cur.description[4].name == name
        # a replay into a table, found again by the same literals
        cur.execute("TRUNCATE hyp")
        cur.execute(f"INSERT INTO hyp (t, b) VALUES ({text_sql}, {bytea_sql})")
        cur.execute(
            f"SELECT count(*) FROM hyp WHERE t = {text_sql} AND b IS NOT DISTINCT FROM {bytea_sql}"
        )
        assert cur.fetchone() == (1,)
        # every literal stays on one line
        assert "\n" not in text_sql and "\r" not in text_sql


_connections: dict[str, psycopg2.extensions.connection] = {}


def _hypothesis_connection(db: Database) -> psycopg2.extensions.connection:
    """One connection for the whole hypothesis test (per database)."""
    conn = _connections.get(db.name)
    if conn is None or conn.closed:
        for old in _connections.values():
            old.close()
        _connections.clear()
        conn = db.connect()
        conn.set_client_encoding("UTF8")
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE hyp (t text, b bytea)")
        _connections[db.name] = conn
    return conn


def test_quote_ident_agrees_with_the_server(db18: Database) -> None:
    """Every keyword and a set of awkward names: bare exactly when the server says so."""
    keywords = [r[0] for r in db18.execute("SELECT word FROM pg_get_keywords()")]
    names = keywords + [
        "a",
        "_x",
        "Ab",
        "a b",
        'a"b',
        "1a",
        "ünï",
        "select",
        "user",
        "x$y",
        "$x",
        "",
        "a-b",
        "café",
        "UPPER",
        "snake_case_9",
    ]
    conn = db18.connect()
    try:
        with conn.cursor() as cur:
            for name in names:
                cur.execute("SELECT quote_ident(%s)", (name,))
                row = cur.fetchone()
                assert row is not None
                server = row[0]
                ours = quote_ident(name)
                if "$" in name and name[0] != "$":
                    # PostgreSQL quotes any '$'; an unquoted '$' after the first
                    # character is a valid identifier all the same
                    assert ours == name
                    cur.execute(f"SELECT 1 AS {ours}")
                    assert cur.description[0].name == name
                    continue
                assert ours == server, name
                if name:
                    cur.execute(f"SELECT 1 AS {ours}")
                    assert cur.description[0].name == name
    finally:
        conn.close()
