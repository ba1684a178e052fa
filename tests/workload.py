"""A reusable workload on a real server: every supported type, every replica identity,
TOAST, truncate, logical messages, two-phase commit and a streamed transaction.

Use it from any test that needs real pgoutput bytes::

    from tests import workload

    conn = db.connect()
    workload.create_schema(conn)
    workload.create_slot(conn, slot)  # before the workload, so the slot sees it
    info = workload.run(conn, tag=db.name)  # tag: GIDs are server-wide
    payloads = workload.peek(conn, slot, workload.options(2, streaming="on"))

`EXPECTED_*` below hold the values a test can assert exactly (JSON-ready, as
`pgtail.values` represents them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pgtail.lsn import parse_lsn

PUBLICATION = "wl_pub"
SCHEMA = "wl"
STREAMED_ROWS = 2000  # rows 1..2000 committed; 2001..3000 rolled back; 3001..4000 and
ROLLED_BACK = range(2001, 3001)  # 4001..4500 (a released savepoint) committed too
BIG_TEXT_CHUNKS = 3200  # md5 chain of 3200 * 32 hex chars = 102,400 bytes, really TOASTed

SCHEMA_SQL = f"""
CREATE SCHEMA {SCHEMA};
SET search_path = {SCHEMA};
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');

CREATE TABLE all_types (
    id int PRIMARY KEY,
    b bool, i2 int2, i4 int4, i8 int8, o oid,
    f4 float4, f8 float8, n numeric, n_scaled numeric(10,3),
    t text, vc varchar(10), bp char(5), nm name, ch "char",
    by bytea, u uuid, j json, jb jsonb,
    d date, tm time, ttz timetz, ts timestamp, tstz timestamptz, iv interval,
    ip inet, cd cidr, mac macaddr, m money, bt bit(4), vb varbit, tsv tsvector,
    ia int4[], ta text[], ia2 int4[][], tsa timestamptz[], na numeric[], ja jsonb[],
    mo mood, moa mood[], fa float4[]
);

CREATE TABLE full_ident (id int, v text);
ALTER TABLE full_ident REPLICA IDENTITY FULL;

CREATE TABLE index_ident (id int NOT NULL, code text NOT NULL, v text);
CREATE UNIQUE INDEX index_ident_code ON index_ident (code);
ALTER TABLE index_ident REPLICA IDENTITY USING INDEX index_ident_code;

CREATE TABLE no_ident (id int, v text);
ALTER TABLE no_ident REPLICA IDENTITY NOTHING;

CREATE TABLE toasted (id int PRIMARY KEY, big text, small text);

CREATE TABLE trunc_me (id serial PRIMARY KEY, v text);

CREATE TABLE evolve (id int PRIMARY KEY, v text);

CREATE TABLE prepared (id int PRIMARY KEY, v text);

CREATE TABLE streamed (id int PRIMARY KEY, v text);

CREATE TABLE ddl_rollback (id int PRIMARY KEY);  -- altered in a streamed, aborted tx

CREATE TABLE late_rel (id int PRIMARY KEY);  -- first written in the rolled-back savepoint
"""

# FOR TABLES IN SCHEMA needs PostgreSQL 15; before it, the same tables by name
PUBLICATION_SQL = f"CREATE PUBLICATION {PUBLICATION} FOR TABLES IN SCHEMA {SCHEMA}"
PUBLICATION_SQL_BEFORE_15 = (
    f"SELECT format('CREATE PUBLICATION {PUBLICATION} FOR TABLE %s', "
    f"string_agg(c.oid::regclass::text, ', ' ORDER BY c.relname)) FROM pg_class c "
    f"WHERE c.relnamespace = '{SCHEMA}'::regnamespace AND c.relkind = 'r'"
)

# Row 1: ordinary values; row 2: special values (NaN, infinities, NULLs inside arrays,
# quoting); row 3: NULL everywhere but the key.
ALL_TYPES_INSERT = r"""
INSERT INTO all_types VALUES
(1, true, -32768, 2147483647, -9223372036854775808, 4294967295,
 1.5, 3.141592653589793, 12345678901234567890.000000000123, 1.5,
 'héllo "world"', 'varchar', 'ab', 'a_name', 'x',
 '\x00ff10', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.5, "x"]}', '{"b": {"c": null}}',
 '2024-02-29', '12:34:56.789', '12:34:56+05:30', '2024-02-29 12:34:56.000001',
 '2024-02-29 12:34:56.789+00', '1 year 2 mons 3 days 04:05:06.5',
 '192.168.0.1/24', '10.0.0.0/8', '08:00:2b:01:02:03', 12.34, B'1010', B'110', 'a fat:2 cat:1',
 '{1,2,3}', '{"a b","c,d","e\"f",NULL,""}', '{{1,2},{3,NULL}}',
 '{"2024-01-01 00:00:00+00",NULL}', '{1.50,NaN}', '{"{\"k\": 1}",null}',
 'happy', '{sad,ok}', '{Infinity,-Infinity,NaN,0.1}'),
(2, false, 0, -1, 0, 0,
 'NaN', '-Infinity', 'NaN', -0.001,
 '', 'x', 'abcde', '', '\',
 '\x', '00000000-0000-0000-0000-000000000000', '[]', '"s"',
 'infinity', '00:00:00', '00:00:00-01', '-infinity',
 'infinity', '-1 days',
 '::1', '2001:db8::/32', '00:00:00:00:00:00', -0.5, B'0000', B'', '',
 '{}', '{NULL}', '{{NULL,NULL}}',
 '{-infinity,infinity}', '{Infinity,-Infinity}', '{}',
 'sad', '{}', '{{1.5},{NULL}}'),
(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
 NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
"""

EXPECTED_ROW_1: dict[str, Any] = {
    "id": 1,
    "b": True,
    "i2": -32768,
    "i4": 2147483647,
    "i8": -9223372036854775808,
    "o": 4294967295,
    "f4": 1.5,
    "f8": 3.141592653589793,
    "n": "12345678901234567890.000000000123",
    "n_scaled": "1.500",
    "t": 'héllo "world"',
    "vc": "varchar",
    "bp": "ab   ",
    "nm": "a_name",
    "ch": "x",
    "by": "\\x00ff10",
    "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "j": {"a": [1, 2.5, "x"]},
    "jb": {"b": {"c": None}},
    "d": "2024-02-29",
    "tm": "12:34:56.789",
    "ttz": "12:34:56+05:30",
    "ts": "2024-02-29T12:34:56.000001",
    "tstz": "2024-02-29T12:34:56.789+00:00",
    "iv": "P1Y2M3DT4H5M6.5S",
    "ip": "192.168.0.1/24",
    "cd": "10.0.0.0/8",
    "mac": "08:00:2b:01:02:03",
    "m": "12.34",
    "bt": "1010",
    "vb": "110",
    "tsv": "'a' 'cat':1 'fat':2",
    "ia": [1, 2, 3],
    "ta": ["a b", "c,d", 'e"f', None, ""],
    "ia2": [[1, 2], [3, None]],
    "tsa": ["2024-01-01T00:00:00+00:00", None],
    "na": ["1.50", "NaN"],
    "ja": [{"k": 1}, None],
    "mo": "happy",
    "moa": ["sad", "ok"],
    "fa": ["Infinity", "-Infinity", "NaN", 0.1],
}

EXPECTED_ROW_2: dict[str, Any] = {
    "id": 2,
    "b": False,
    "i2": 0,
    "i4": -1,
    "i8": 0,
    "o": 0,
    "f4": "NaN",
    "f8": "-Infinity",
    "n": "NaN",
    "n_scaled": "-0.001",
    "t": "",
    "vc": "x",
    "bp": "abcde",
    "nm": "",
    "ch": "\\",
    "by": "\\x",
    "u": "00000000-0000-0000-0000-000000000000",
    "j": [],
    "jb": "s",
    "d": "infinity",
    "tm": "00:00:00",
    "ttz": "00:00:00-01",
    "ts": "-infinity",
    "tstz": "infinity",
    "iv": "P-1D",
    "ip": "::1",
    "cd": "2001:db8::/32",
    "mac": "00:00:00:00:00:00",
    "m": "-0.50",
    "bt": "0000",
    "vb": "",
    "tsv": "",
    "ia": [],
    "ta": [None],
    "ia2": [[None, None]],
    "tsa": ["-infinity", "infinity"],
    "na": ["Infinity", "-Infinity"],
    "ja": [],
    "mo": "sad",
    "moa": [],
    "fa": [[1.5], [None]],
}


@dataclass(frozen=True)
class Info:
    """What a test needs to know about one run of the workload."""

    gid_commit: str
    gid_rollback: str
    big_text: str  # the TOASTed value of toasted.big (row 1) before its update
    big_text_updated: str


def create_schema(conn: Any) -> None:
    with conn.cursor() as cur:
        cur.execute(SCHEMA_SQL)
        cur.execute("RESET search_path")
        if conn.server_version >= 150000:
            cur.execute(PUBLICATION_SQL)
        else:
            cur.execute(PUBLICATION_SQL_BEFORE_15)
            cur.execute(cur.fetchone()[0])


def create_slot(conn: Any, name: str, *, two_phase: bool = False) -> None:
    with conn.cursor() as cur:
        if two_phase:
            cur.execute(
                "SELECT pg_create_logical_replication_slot(%s, 'pgoutput', false, true)", (name,)
            )
        else:
            cur.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def run(conn: Any, tag: str) -> Info:
    """Run the whole workload (autocommit connection). ``tag`` makes the GIDs unique."""
    gid_commit = f"wl_{tag}_commit"
    gid_rollback = f"wl_{tag}_rollback"
    with conn.cursor() as cur:
        # the test servers run with synchronous_commit = off, and logical decoding reads
        # only flushed WAL: flush every commit so a peek right afterwards sees it all
        cur.execute("SET synchronous_commit = on")
        cur.execute(f"SET search_path = {SCHEMA}")

        # every type; updates with and without a key change; a key-only delete
        cur.execute(ALL_TYPES_INSERT)
        cur.execute("UPDATE all_types SET t = 'changed', i4 = i4 - 1 WHERE id = 1")
        cur.execute("UPDATE all_types SET id = 20 WHERE id = 2")
        cur.execute("DELETE FROM all_types WHERE id = 3")

        # REPLICA IDENTITY FULL: full old rows
        cur.execute("INSERT INTO full_ident VALUES (1, 'a'), (2, 'b')")
        cur.execute("UPDATE full_ident SET v = 'a2' WHERE id = 1")
        cur.execute("DELETE FROM full_ident WHERE id = 2")

        # REPLICA IDENTITY USING INDEX (code)
        cur.execute("INSERT INTO index_ident VALUES (1, 'k1', 'v')")
        cur.execute("UPDATE index_ident SET v = 'v2' WHERE id = 1")
        cur.execute("UPDATE index_ident SET code = 'k2' WHERE id = 1")
        cur.execute("DELETE FROM index_ident WHERE code = 'k2'")

        # REPLICA IDENTITY NOTHING: insert only
        cur.execute("INSERT INTO no_ident VALUES (1, 'x')")

        # TOAST: a 100 kB value that does not compress, updated around and then itself
        cur.execute(
            "INSERT INTO toasted SELECT 1, string_agg(md5(g::text), '' ORDER BY g), 's' "
            "FROM generate_series(1, %s) g",
            (BIG_TEXT_CHUNKS,),
        )
        cur.execute("UPDATE toasted SET small = 's2' WHERE id = 1")
        cur.execute("UPDATE toasted SET big = big || 'Z' WHERE id = 1")
        cur.execute("SELECT big FROM toasted WHERE id = 1")
        row = cur.fetchone()
        assert row is not None
        big_text_updated = str(row[0])

        # truncate
        cur.execute("INSERT INTO trunc_me (v) VALUES ('a'), ('b')")
        cur.execute("TRUNCATE trunc_me RESTART IDENTITY CASCADE")

        # logical messages, transactional and not
        cur.execute("BEGIN")
        cur.execute("INSERT INTO no_ident VALUES (2, 'with message')")
        cur.execute("SELECT pg_logical_emit_message(true, 'wl', 'transactional')")
        cur.execute("COMMIT")
        cur.execute("SELECT pg_logical_emit_message(false, 'wl', 'not transactional')")
        cur.execute("SELECT pg_logical_emit_message(false, 'wl-bin', '\\x00ff'::bytea)")

        # schema change in the middle of a transaction
        cur.execute("BEGIN")
        cur.execute("INSERT INTO evolve VALUES (1, 'before')")
        cur.execute("ALTER TABLE evolve ADD COLUMN extra int DEFAULT 7")
        cur.execute("INSERT INTO evolve VALUES (2, 'after', 8)")
        cur.execute("COMMIT")

        # two-phase: one committed, one rolled back
        cur.execute("BEGIN")
        cur.execute("INSERT INTO prepared VALUES (1, 'p1')")
        cur.execute("PREPARE TRANSACTION %s", (gid_commit,))
        cur.execute("COMMIT PREPARED %s", (gid_commit,))
        cur.execute("BEGIN")
        cur.execute("INSERT INTO prepared VALUES (2, 'p2')")
        cur.execute("PREPARE TRANSACTION %s", (gid_rollback,))
        cur.execute("ROLLBACK PREPARED %s", (gid_rollback,))

        # a transaction big enough to be streamed (logical_decoding_work_mem = 64kB), with
        # a rolled-back savepoint (and a message inside it) and a released one
        cur.execute("BEGIN")
        cur.execute(
            "INSERT INTO streamed SELECT g, repeat('x', 100) FROM generate_series(1, %s) g",
            (STREAMED_ROWS,),
        )
        cur.execute("SAVEPOINT s1")
        cur.execute(
            "INSERT INTO streamed SELECT g, 'rolled back' FROM generate_series(%s, %s) g",
            (ROLLED_BACK.start, ROLLED_BACK.stop - 1),
        )
        # a table first touched inside the savepoint, touched again after its rollback
        cur.execute("INSERT INTO late_rel SELECT g FROM generate_series(1, 300) g")
        cur.execute("UPDATE streamed SET v = 'rolled back' WHERE id <= 10")
        cur.execute("SELECT pg_logical_emit_message(true, 'wl', 'in rolled back savepoint')")
        cur.execute("ROLLBACK TO SAVEPOINT s1")
        cur.execute("INSERT INTO late_rel VALUES (1000)")
        cur.execute("INSERT INTO streamed SELECT g, 'after' FROM generate_series(3001, 4000) g")
        cur.execute("SAVEPOINT s2")
        cur.execute("INSERT INTO streamed SELECT g, 'released' FROM generate_series(4001, 4500) g")
        cur.execute("RELEASE SAVEPOINT s2")
        cur.execute("DELETE FROM streamed WHERE id = 1")
        cur.execute("COMMIT")

        # a streamed transaction that changes a table's schema, then aborts: what follows
        # must be decoded with the schema as it was
        cur.execute("INSERT INTO ddl_rollback VALUES (1)")
        cur.execute("BEGIN")
        cur.execute("ALTER TABLE ddl_rollback ADD COLUMN extra text")
        cur.execute(
            "INSERT INTO ddl_rollback SELECT g, repeat('y', 100) FROM generate_series(2, 2001) g"
        )
        cur.execute("ROLLBACK")
        cur.execute("INSERT INTO ddl_rollback VALUES (3000)")
        cur.execute("RESET search_path")
        cur.execute("RESET synchronous_commit")
    return Info(
        gid_commit=gid_commit,
        gid_rollback=gid_rollback,
        big_text=big_text_updated[:-1],
        big_text_updated=big_text_updated,
    )


def options(
    proto_version: int,
    *,
    binary: bool = False,
    streaming: str | None = None,
    two_phase: bool = False,
    messages: bool = True,
) -> list[str]:
    """pgoutput options for pg_logical_slot_peek_binary_changes, as a flat list."""
    opts = ["proto_version", str(proto_version), "publication_names", PUBLICATION]
    if binary:
        opts += ["binary", "true"]
    if streaming:
        opts += ["streaming", streaming]
    if two_phase:
        opts += ["two_phase", "true"]
    if messages:
        opts += ["messages", "true"]
    return opts


def peek(conn: Any, slot: str, opts: Sequence[str]) -> list[tuple[int, bytes]]:
    """(lsn, pgoutput payload) of everything the slot holds, without consuming it."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
            "%s, NULL, NULL, VARIADIC %s::text[])",
            (slot, list(opts)),
        )
        return [(parse_lsn(lsn), bytes(data)) for lsn, data in cur.fetchall()]
