"""The pgoutput decoder: every message of protocol versions 1-4 built byte by byte,
every error path, timestamps, Decoder state, and bytes captured from real servers."""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from pgtail import pgoutput as po
from pgtail.errors import ConfigurationError, DecodeError
from pgtail.pgoutput import (
    Begin,
    BeginPrepare,
    Commit,
    CommitPreparedMessage,
    Decoder,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgoutputMessage,
    Prepare,
    Relation,
    RollbackPreparedMessage,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    TruncateMessage,
    TupleData,
    Type,
    Update,
    _fastrows,
    decode_tuple,
    parse,
    pg_timestamp,
)
from tests import pgbytes as pb
from tests.pgoutput_corpus import (
    CASES,
    COLUMNS,
    KEY,
    LSN_A,
    LSN_B,
    REL,
    ROW,
    ROW_EXPECTED,
    SUBXID,
    T1,
    T1_US,
    T2,
    T2_US,
    VALID_MESSAGES,
    XID,
    expected_tuple,
)

# Every test here runs with the generated decoder code and without it.
pytestmark = pytest.mark.usefixtures("both_ways")


if TYPE_CHECKING:
    from tests.helpers import Database


# --- every message, exactly --------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "in_stream", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_parse_every_message(payload: bytes, in_stream: bool, expected: PgoutputMessage) -> None:
    assert parse(payload, in_stream=in_stream) == expected
    # bytearray and memoryview payloads decode the same (values come back as bytes)
    assert parse(bytearray(payload), in_stream=in_stream) == expected
    assert parse(memoryview(payload), in_stream=in_stream) == expected


def test_every_message_type_is_covered() -> None:
    assert {payload[0] for payload, _ in VALID_MESSAGES} == set(b"BCORYIUDTMSEcAbPKrp")


def test_decoded_values_are_bytes_and_hashable() -> None:
    message = parse(pb.insert(REL, ROW))
    assert isinstance(message, Insert)
    assert all(v is None or type(v) is bytes for v in message.new.values)
    assert type(message.new.kinds) is bytes
    assert hash(message) == hash(parse(pb.insert(REL, ROW)))


def test_in_stream_changes_the_layout() -> None:
    # The same bytes mean different things in and out of a stream: the first four
    # bytes are the xid inside one.
    payload = pb.truncate([REL], xid=XID)
    assert parse(payload, in_stream=True) == TruncateMessage(XID, 0, (REL,))
    with pytest.raises(DecodeError):
        parse(payload, in_stream=False)


def test_relation_column_is_key() -> None:
    message = parse(pb.relation(REL, "public", "t", COLUMNS, "d"))
    assert isinstance(message, Relation)
    assert [c.is_key for c in message.columns] == [True, False, False]


def test_truncate_properties() -> None:
    flags = [
        parse(pb.truncate([REL], cascade=bool(options & 1), restart_identity=bool(options & 2)))
        for options in range(4)
    ]
    assert [(t.cascade, t.restart_identity) for t in flags if isinstance(t, TruncateMessage)] == [
        (False, False),
        (True, False),
        (False, True),
        (True, True),
    ]


# --- TupleData --------------------------------------------------------------------


@pytest.mark.parametrize("width", [0, 1, 2, 63, 64, 65, 200, 1664])
def test_tuple_every_width(width: int) -> None:
    kinds_cycle: list[object] = [b"v", None, "u", ("b", b"\x00b"), b""]
    columns = [
        (bytes(f"v{i}", "ascii") if kinds_cycle[i % 5] == b"v" else kinds_cycle[i % 5])
        for i in range(width)
    ]
    data = b"xx" + pb.tuple_data(columns) + b"rest"
    tup, end = decode_tuple(data, 2, "Insert.new_tuple")
    assert tup == expected_tuple(*columns)
    assert end == len(data) - 4


def test_tuple_all_kinds_exact() -> None:
    data = pb.tuple_data([b"text", None, "u", ("b", b"\x00\x00"), b"", ("b", b"")])
    tup, end = decode_tuple(data, 0, "x")
    assert end == len(data)
    assert tup.kinds == b"tnubtb"
    assert tup.values == (b"text", None, None, b"\x00\x00", b"", b"")


def test_tuple_value_containing_every_byte() -> None:
    value = bytes(range(256)) * 300  # 76800 bytes: a long length prefix
    tup, _ = decode_tuple(pb.tuple_data([value, ("b", value)]), 0, "x")
    assert tup.values == (value, value)


@pytest.mark.parametrize("width", [3, 100])
def test_tuple_errors(width: int) -> None:
    good = pb.tuple_data([b"abc"] * width)
    for cut in range(len(good)):
        with pytest.raises(DecodeError, match=r"^Delete\.old_tuple: "):
            decode_tuple(good[:cut], 0, "Delete.old_tuple")
    bad_kind = bytearray(good)
    bad_kind[2 + 8 * (width - 1)] = ord("x")  # the last column's kind byte
    with pytest.raises(DecodeError, match=rf"column {width - 1} has unknown kind byte 0x78"):
        decode_tuple(bytes(bad_kind), 0, "Insert.new_tuple")


def test_tuple_length_overflow() -> None:
    # A negative Int32 length (or one far past the end) is a truncation, not a crash.
    data = pb.u16(1) + b"t" + pb.i32(-1) + b"abc"
    with pytest.raises(DecodeError, match=r"value of 4294967295 bytes"):
        decode_tuple(data, 0, "Insert.new_tuple")


def test_tuple_column_count_missing() -> None:
    with pytest.raises(DecodeError, match=r"column count"):
        decode_tuple(b"\x00", 0, "Insert.new_tuple")


# --- timestamps -------------------------------------------------------------------


def test_timestamps() -> None:
    epoch = datetime(2000, 1, 1, tzinfo=UTC)
    assert pg_timestamp(0) == epoch
    assert pg_timestamp(1) == epoch + timedelta(microseconds=1)
    assert pg_timestamp(-1) == epoch - timedelta(microseconds=1)
    assert pg_timestamp(T1_US) == T1
    assert pg_timestamp(T1_US).microsecond == 123456
    assert pg_timestamp(T2_US).microsecond == 999999
    assert pg_timestamp(T1_US).tzinfo is not None
    assert pg_timestamp(T1_US).utcoffset() == timedelta(0)
    # a large value: float arithmetic would lose the microseconds here
    late = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert pg_timestamp(pb.pg_time(late)) == late
    early = datetime(1, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
    assert pg_timestamp(pb.pg_time(early)) == early


def test_timestamp_infinity() -> None:
    infinity = pg_timestamp(2**63 - 1)
    assert infinity == datetime.max.replace(tzinfo=UTC)
    assert infinity.tzinfo is UTC
    minus_infinity = pg_timestamp(-(2**63))
    assert minus_infinity == datetime.min.replace(tzinfo=UTC)
    assert minus_infinity.tzinfo is UTC
    message = parse(pb.commit(LSN_A, LSN_B, 2**63 - 1))
    assert isinstance(message, Commit)
    assert message.commit_time == datetime.max.replace(tzinfo=UTC)


def test_timestamp_out_of_range() -> None:
    beyond = pb.pg_time(datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)) + 1
    with pytest.raises(DecodeError, match="outside the range"):
        pg_timestamp(beyond)
    with pytest.raises(DecodeError, match=r"^Begin\.commit_time: .*outside the range"):
        parse(pb.begin(LSN_A, beyond, XID))
    with pytest.raises(DecodeError, match=r"^StreamAbort\.abort_time: "):
        parse(pb.stream_abort(XID, XID, LSN_A, -(2**63) + 1))


# --- errors -----------------------------------------------------------------------


@pytest.mark.parametrize(("payload", "in_stream"), VALID_MESSAGES, ids=[c[0] for c in CASES])
def test_every_truncation_is_a_decode_error(payload: bytes, in_stream: bool) -> None:
    for cut in range(len(payload)):
        short = payload[:cut]
        if short == pb.stream_abort(XID, SUBXID):
            # A v4 abort cut just before abort_lsn is a complete pre-v4 abort.
            assert parse(short) == StreamAbort(XID, SUBXID, None, None)
            continue
        with pytest.raises(DecodeError) as info:
            parse(short, in_stream=in_stream)
        text = str(info.value)
        assert "truncated" in text or "unexpected" in text or (cut == 0 and "empty" in text)


@pytest.mark.parametrize(("payload", "in_stream"), VALID_MESSAGES, ids=[c[0] for c in CASES])
def test_trailing_data_is_a_decode_error(payload: bytes, in_stream: bool) -> None:
    # a pre-v4 Stream Abort with bytes added reads as a truncated v4 one (length decides)
    expected = "trailing data|StreamAbort.abort_" if payload[:1] == b"A" else "trailing data"
    for extra in (b"\x00", b"N", b"garbage\x00"):
        with pytest.raises(DecodeError, match=expected):
            parse(payload + extra, in_stream=in_stream)


def _error(payload: bytes, in_stream: bool = False) -> str:
    with pytest.raises(DecodeError) as info:
        parse(payload, in_stream=in_stream)
    return str(info.value)


def test_errors_name_message_and_field() -> None:
    assert _error(b"") == "empty pgoutput message"
    assert _error(b"Z") == "unknown pgoutput message type 'Z'"
    assert _error(b"\x00abc") == "unknown pgoutput message type 0x00"
    assert _error(b"B" + pb.u64(1)).startswith("Begin.commit_time: truncated")
    assert _error(pb.begin(1, 1, 1)[:-1]).startswith("Begin.xid: truncated")
    assert _error(pb.commit(1, 2, 3) + b"!").startswith("Commit: 1 bytes of trailing data")
    assert _error(b"I" + pb.u32(REL) + b"K" + ROW) == (
        "Insert.tuple_marker: unexpected byte 0x4b at offset 5 (expected N)"
    )
    assert _error(b"U" + pb.u32(REL) + b"X" + ROW).startswith(
        "Update.tuple_marker: unexpected byte 0x58 at offset 5 (expected K, O or N)"
    )
    assert _error(b"U" + pb.u32(REL) + b"K" + KEY + b"K" + ROW).startswith(
        "Update.new_tuple.tuple_marker: unexpected byte 0x4b"
    )
    assert _error(b"U" + pb.u32(REL) + b"O" + ROW).startswith("Update.new_tuple_marker: truncated")
    assert _error(pb.update(REL, ROW, ROW, "O")[:20]).startswith("Update.old_tuple: truncated")
    assert _error(pb.update(REL, ROW, KEY, "K")[:-3]).startswith("Update.new_tuple: truncated")
    assert _error(pb.delete(REL, ROW, "N")).startswith(
        "Delete.tuple_marker: unexpected byte 0x4e at offset 5 (expected K or O)"
    )
    assert _error(pb.delete(REL, KEY, "K")[:-1]).startswith("Delete.old_tuple: truncated")
    assert _error(pb.delete(REL, KEY, "K", xid=1)[:8], in_stream=True).startswith(
        "Delete.relation_id: truncated"
    )
    assert _error(pb.relation(REL, "public", "t", COLUMNS, "x")).startswith(
        "Relation.replica_identity: unknown value 0x78"
    )
    assert _error(pb.relation(REL, "public", "t", COLUMNS, "d")[:-2]).startswith(
        "Relation.columns[2].type_modifier: truncated"
    )
    assert _error(pb.relation(REL, "public", "t", COLUMNS, "d")[:32]).startswith(
        "Relation.columns[1].name: truncated"
    )
    assert _error(b"R" + pb.u32(REL) + b"public").startswith("Relation.namespace: truncated")
    assert _error(pb.truncate([1, 2])[:-1]).startswith("Truncate.relation_ids: truncated")
    assert _error(b"T" + pb.u32(0xFFFFFFFF) + pb.u8(0)).startswith(
        "Truncate.relation_ids: truncated"
    )
    assert _error(pb.message("p", b"abc", 1)[:-1]).startswith(
        "Message.content: truncated (needs 3 bytes"
    )
    assert _error(pb.stream_start(XID, 2)).startswith(
        "StreamStart.first_segment: unexpected value 2"
    )
    assert _error(pb.stream_abort(XID, XID, 1, 1)[:12]).startswith(
        "StreamAbort.abort_lsn: truncated"
    )
    assert _error(pb.stream_abort(XID, XID)[:6]).startswith("StreamAbort.subxid: truncated")
    assert _error(pb.stream_stop() + b"x").startswith("StreamStop: 1 bytes of trailing data")
    assert _error(pb.rollback_prepared(1, 2, 3, 4, 5, "g")[:-1]).startswith(
        "RollbackPrepared.gid: truncated"
    )


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (pb.origin(1, "x")[:-2] + b"\xff\x00", "Origin.name"),
        (
            pb.relation(REL, "pub\xe9", "t", [], "d").replace("pub\xe9".encode(), b"pub\xe9"),
            "Relation.namespace",
        ),
        (
            b"R" + pb.u32(REL) + pb.cstring("public") + b"\xc3\x28\x00" + b"d" + pb.u16(0),
            "Relation.name",
        ),
        (
            b"R"
            + pb.u32(REL)
            + pb.cstring("p")
            + pb.cstring("t")
            + b"d"
            + pb.u16(1)
            + pb.u8(0)
            + b"\xed\xa0\x80\x00"
            + pb.u32(23)
            + pb.i32(-1),
            "Relation.columns[0].name",
        ),
        (b"Y" + pb.u32(1) + pb.cstring("p") + b"\x80\x00", "Type.name"),
        (b"M" + pb.u8(0) + pb.u64(0) + b"\xfe\x00" + pb.u32(0), "Message.prefix"),
        (pb.begin_prepare(1, 2, 3, 4, "g")[:-2] + b"\xc0\x00", "BeginPrepare.gid"),
        (pb.prepare(1, 2, 3, 4, "g")[:-2] + b"\xc0\x00", "Prepare.gid"),
        (pb.commit_prepared(1, 2, 3, 4, "g")[:-2] + b"\xc0\x00", "CommitPrepared.gid"),
        (pb.stream_prepare(1, 2, 3, 4, "g")[:-2] + b"\xc0\x00", "StreamPrepare.gid"),
    ],
)
def test_bad_utf8(payload: bytes, field: str) -> None:
    message = _error(payload)
    assert message.startswith(f"{field}: invalid UTF-8 at offset ")


def test_decode_error_pickles() -> None:
    with pytest.raises(DecodeError) as info:
        parse(b"U" + pb.u32(REL) + b"X")
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is DecodeError
    assert str(copy) == str(info.value)


# --- Decoder ----------------------------------------------------------------------


def test_decoder_caches_relations_and_types() -> None:
    decoder = Decoder(1)
    first = decoder.decode(pb.relation(REL, "public", "users", COLUMNS, "d"))
    assert decoder.relations == {REL: first}
    decoder.decode(pb.relation(REL + 1, "public", "other", [], "f"))
    altered = decoder.decode(pb.relation(REL, "public", "users", COLUMNS[:1], "f"))
    assert decoder.relations[REL] is altered
    assert isinstance(altered, Relation)
    assert altered.replica_identity == "f"
    assert sorted(decoder.relations) == [REL, REL + 1]
    mood = decoder.decode(pb.type_(70_000, "public", "mood"))
    assert decoder.types == {70_000: mood}
    # other messages leave the caches alone
    decoder.decode(pb.insert(REL, ROW))
    assert sorted(decoder.relations) == [REL, REL + 1]
    assert list(decoder.types) == [70_000]


def test_decoder_stream_state() -> None:
    decoder = Decoder(2)
    assert decoder.in_stream is False
    assert decoder.decode(pb.insert(REL, ROW)) == Insert(None, REL, ROW_EXPECTED)
    assert decoder.decode(pb.stream_start(XID, True)) == StreamStart(XID, True)
    assert decoder.in_stream is True
    in_stream = [
        pb.relation(REL, "public", "users", COLUMNS, "d", xid=XID),
        pb.type_(70_000, "public", "mood", xid=XID),
        pb.insert(REL, ROW, xid=XID),
        pb.update(REL, ROW, KEY, "K", xid=XID),
        pb.delete(REL, ROW, "O", xid=XID),
        pb.truncate([REL], cascade=True, xid=XID),
        pb.message("p", b"c", LSN_A, xid=XID),
    ]
    decoded = [decoder.decode(payload) for payload in in_stream]
    assert [getattr(m, "xid", None) for m in decoded] == [XID] * len(in_stream)
    assert decoder.relations[REL].xid == XID
    assert decoder.types[70_000].xid == XID
    assert decoder.decode(pb.stream_stop()) == StreamStop()
    assert decoder.in_stream is False
    assert decoder.decode(pb.stream_commit(XID, LSN_A, LSN_B, T1_US)) == StreamCommit(
        XID, 0, LSN_A, LSN_B, T1
    )
    assert decoder.decode(pb.insert(REL, ROW)) == Insert(None, REL, ROW_EXPECTED)
    # after Stop, a message with an xid prefix no longer parses as such
    with pytest.raises(DecodeError):
        decoder.decode(pb.truncate([REL], cascade=True, xid=XID))


def test_decoder_stream_abort_by_version() -> None:
    short, extended = pb.stream_abort(XID, SUBXID), pb.stream_abort(XID, SUBXID, LSN_B, T2_US)
    for version in (2, 3):
        decoder = Decoder(version)
        assert decoder.decode(short) == StreamAbort(XID, SUBXID, None, None)
        with pytest.raises(DecodeError, match="only in protocol version 4"):
            decoder.decode(extended)
    decoder = Decoder(4)
    assert decoder.decode(short) == StreamAbort(XID, SUBXID, None, None)
    assert decoder.decode(extended) == StreamAbort(XID, SUBXID, LSN_B, T2)


@pytest.mark.parametrize(
    ("version", "rejected"),
    [(1, "SEcAbPKrp"), (2, "bPKrp"), (3, ""), (4, "")],
)
def test_decoder_rejects_messages_newer_than_its_version(version: int, rejected: str) -> None:
    decoder = Decoder(version)
    for payload, in_stream in VALID_MESSAGES:
        decoder.in_stream = in_stream
        if chr(payload[0]) in rejected:
            with pytest.raises(
                DecodeError, match=f"not part of pgoutput protocol version {version}"
            ):
                decoder.decode(payload)
        elif payload[0] == ord("A") and version < 4 and len(payload) > 9:
            with pytest.raises(DecodeError):
                decoder.decode(payload)
        else:
            assert decoder.decode(payload) == parse(payload, in_stream=in_stream)


def test_decoder_errors() -> None:
    decoder = Decoder(4)
    with pytest.raises(DecodeError, match="empty"):
        decoder.decode(b"")
    with pytest.raises(DecodeError, match="unknown pgoutput message type 'z'"):
        decoder.decode(b"z")
    for bad in (0, 5, -1):
        with pytest.raises(ConfigurationError, match="protocol version"):
            Decoder(bad)
    # a failed decode leaves the state unchanged
    decoder.decode(pb.stream_start(1, True))
    with pytest.raises(DecodeError):
        decoder.decode(b"E!")
    assert decoder.in_stream is True


def test_decoder_default_version_is_1() -> None:
    assert Decoder().protocol_version == 1


# --- real servers -----------------------------------------------------------------


def _peek(db: Database, slot: str, *options: str) -> list[tuple[int, bytes]]:
    """(xid, payload) rows of pg_logical_slot_peek_binary_changes."""
    # The test servers run with synchronous_commit = off, and decoding reads only
    # flushed WAL: commit one WAL-writing transaction synchronously to flush everything
    # before it. (It changes no published table, so pgoutput sends nothing for it.)
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET synchronous_commit = on")
            cur.execute("CREATE TEMP TABLE flush_wal ()")
    finally:
        conn.close()
    placeholders = ", ".join(["%s"] * len(options))
    rows = db.execute(
        f"SELECT xid::text::bigint, data FROM pg_logical_slot_peek_binary_changes("
        f"%s, NULL, NULL, {placeholders})",
        (slot, *options),
    )
    found = [(int(str(xid)), bytes(data)) for xid, data in rows]  # type: ignore[call-overload]
    if db.major < 15:
        found = _without_empty_transactions(found)
    return found


def _without_empty_transactions(rows: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Before PostgreSQL 15 pgoutput sends a transaction that changed no published table
    (DDL, the flush above) as an empty Begin/Commit pair: leave those pairs out."""
    out: list[tuple[int, bytes]] = []
    for row in rows:
        if row[1][:1] == b"C" and out and out[-1][1][:1] == b"B":
            out.pop()
        else:
            out.append(row)
    return out


def test_real_server_protocol_1(db: Database) -> None:
    run = db.execute
    run("CREATE TABLE items (id int PRIMARY KEY, name text, note text)")
    run("CREATE TABLE audit (id int, what text)")
    run("ALTER TABLE audit REPLICA IDENTITY FULL")
    run("CREATE PUBLICATION pub FOR TABLE items, audit")
    run("SELECT pg_create_logical_replication_slot('s1', 'pgoutput')")
    run("INSERT INTO items VALUES (1, 'a', NULL), (2, '', 'x')")
    run("UPDATE items SET name = 'b' WHERE id = 1")
    run("UPDATE items SET id = 3 WHERE id = 2")
    run("DELETE FROM items WHERE id = 1")
    run("INSERT INTO audit VALUES (7, 'w')")
    run("UPDATE audit SET what = 'v'")
    run("DELETE FROM audit")
    run("TRUNCATE items, audit RESTART IDENTITY CASCADE")
    run("SELECT pg_logical_emit_message(true, 'app', 'in tx')")
    run("SELECT pg_logical_emit_message(false, 'app', '\\x00ff'::bytea)")
    oids = run("SELECT 'items'::regclass::oid::int8, 'audit'::regclass::oid::int8")[0]
    items_oid, audit_oid = int(str(oids[0])), int(str(oids[1]))

    # logical decoding messages are sent from PostgreSQL 14 (the messages option)
    with_messages = db.major >= 14
    options = ("messages", "true") if with_messages else ()
    rows = _peek(db, "s1", "proto_version", "1", "publication_names", "pub", *options)
    decoder = Decoder(1)
    messages = [decoder.decode(payload) for _, payload in rows]

    # Relations are sent before first use (and again after invalidations): check them
    # apart from the change sequence.
    relations = [m for m in messages if isinstance(m, Relation)]
    assert {(r.namespace, r.name, r.replica_identity) for r in relations} == {
        ("public", "items", "d"),
        ("public", "audit", "f"),
    }
    items = decoder.relations[items_oid]
    assert [(c.name, c.type_oid, c.is_key) for c in items.columns] == [
        ("id", 23, True),
        ("name", 25, False),
        ("note", 25, False),
    ]
    assert decoder.relations[audit_oid].name == "audit"

    sequence = [m for m in messages if not isinstance(m, Relation)]
    assert [type(m).__name__ for m in sequence] == [
        *("Begin", "Insert", "Insert", "Commit"),
        *("Begin", "Update", "Commit"),
        *("Begin", "Update", "Commit"),
        *("Begin", "Delete", "Commit"),
        *("Begin", "Insert", "Commit"),
        *("Begin", "Update", "Commit"),
        *("Begin", "Delete", "Commit"),
        *("Begin", "TruncateMessage", "Commit"),
        *(("Begin", "LogicalMessage", "Commit", "LogicalMessage") if with_messages else ()),
    ]

    # Each transaction: Begin.xid equals the xid of its rows, final_lsn == commit_lsn.
    begins = [(i, m) for i, m in enumerate(messages) if isinstance(m, Begin)]
    commits = [m for m in messages if isinstance(m, Commit)]
    transactions = 9 if with_messages else 8
    assert len(begins) == len(commits) == transactions
    now = datetime.now(UTC)
    for (index, begin_message), commit_message in zip(begins, commits, strict=True):
        assert rows[index][0] == begin_message.xid
        assert begin_message.final_lsn == commit_message.commit_lsn
        assert commit_message.end_lsn > commit_message.commit_lsn
        assert begin_message.commit_time == commit_message.commit_time
        assert abs(now - commit_message.commit_time) < timedelta(minutes=5)
    assert len({b.xid for _, b in begins}) == transactions

    changes = [m for m in sequence if not isinstance(m, Begin | Commit)]
    assert changes[0] == Insert(None, items_oid, TupleData(b"ttn", (b"1", b"a", None)))
    assert changes[1] == Insert(None, items_oid, TupleData(b"ttt", (b"2", b"", b"x")))
    # key unchanged: no old tuple; key changed: the old key
    assert changes[2] == Update(None, items_oid, None, None, TupleData(b"ttn", (b"1", b"b", None)))
    assert changes[3] == Update(
        None,
        items_oid,
        "K",
        TupleData(b"tnn", (b"2", None, None)),
        TupleData(b"ttt", (b"3", b"", b"x")),
    )
    assert changes[4] == Delete(None, items_oid, "K", TupleData(b"tnn", (b"1", None, None)))
    assert changes[5] == Insert(None, audit_oid, TupleData(b"tt", (b"7", b"w")))
    assert changes[6] == Update(
        None, audit_oid, "O", TupleData(b"tt", (b"7", b"w")), TupleData(b"tt", (b"7", b"v"))
    )
    assert changes[7] == Delete(None, audit_oid, "O", TupleData(b"tt", (b"7", b"v")))
    assert isinstance(changes[8], TruncateMessage)
    assert changes[8].options == 3 and changes[8].cascade and changes[8].restart_identity
    assert sorted(changes[8].relation_ids) == sorted([items_oid, audit_oid])
    if not with_messages:
        return
    transactional, non_transactional = changes[9], changes[10]
    assert isinstance(transactional, LogicalMessage)
    assert isinstance(non_transactional, LogicalMessage)
    assert (transactional.transactional, transactional.prefix, transactional.content) == (
        True,
        "app",
        b"in tx",
    )
    assert transactional.lsn <= commits[-1].commit_lsn  # the end of its WAL record
    assert (non_transactional.transactional, non_transactional.content) == (False, b"\x00\xff")
    assert non_transactional.xid is None


def _streamed_workload(db: Database) -> None:
    """One transaction larger than logical_decoding_work_mem (64kB on the test servers),
    with a rolled-back savepoint, so it is streamed and a subtransaction is aborted."""
    run = db.execute
    run("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    run("CREATE PUBLICATION pub FOR TABLE big")
    run("SELECT pg_create_logical_replication_slot('s2', 'pgoutput')")
    conn = db.connect()
    try:
        conn.autocommit = False
        with conn.cursor() as cur:
            cur.execute(
                "INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g"
            )
            cur.execute("SAVEPOINT sp")
            cur.execute(
                "INSERT INTO big SELECT g, repeat('y', 200) FROM generate_series(2001, 3000) g"
            )
            cur.execute("ROLLBACK TO SAVEPOINT sp")
            cur.execute("UPDATE big SET pad = 'z' WHERE id = 1")
        conn.commit()
    finally:
        conn.close()


def _check_streamed(messages: list[PgoutputMessage]) -> StreamAbort:
    starts = [m for m in messages if isinstance(m, StreamStart)]
    assert starts, "the transaction was not streamed"
    top_xid = starts[0].xid
    assert starts[0].first_segment is True
    assert all(not s.first_segment for s in starts[1:])
    assert all(s.xid == top_xid for s in starts)
    assert sum(isinstance(m, StreamStop) for m in messages) == len(starts)
    inserts = [m for m in messages if isinstance(m, Insert)]
    # every change inside the stream carries an xid: the top-level one or the savepoint's
    assert all(m.xid is not None for m in inserts)
    assert {m.xid for m in inserts if m.new.values[1] == b"x" * 200} == {top_xid}
    sub_xids = {m.xid for m in inserts if m.new.values[1] == b"y" * 200}
    assert len(sub_xids) == 1 and top_xid not in sub_xids
    assert len([m for m in inserts if m.new.values[1] == b"x" * 200]) == 2000
    aborts = [m for m in messages if isinstance(m, StreamAbort)]
    aborted = sub_xids.pop()
    assert [(a.xid, a.subxid) for a in aborts] == [(top_xid, aborted)]
    updates = [m for m in messages if isinstance(m, Update)]
    assert [u.new.values for u in updates] == [(b"1", b"z")]
    # ROLLBACK TO keeps the savepoint: the update runs in a fresh subtransaction
    assert updates[0].xid not in (None, top_xid, aborted)
    assert isinstance(messages[-1], StreamCommit)
    assert messages[-1].xid == top_xid
    return aborts[0]


@pytest.mark.min_major(14)  # streaming
def test_real_server_streamed_transaction(db: Database) -> None:
    """Protocol 2, streaming on: Stream Start/Stop blocks whose changes carry xids."""
    _streamed_workload(db)
    rows = _peek(db, "s2", "proto_version", "2", "publication_names", "pub", "streaming", "on")
    decoder = Decoder(2)
    abort = _check_streamed([decoder.decode(payload) for _, payload in rows])
    assert (abort.abort_lsn, abort.abort_time) == (None, None)
    assert decoder.in_stream is False


@pytest.mark.min_major(16)  # protocol 4, streaming = parallel
def test_real_server_parallel_streaming_abort(db: Database) -> None:
    """Protocol 4, streaming = parallel (PostgreSQL 16+): Stream Abort carries the abort
    LSN and time, told apart from the short form by its length alone."""
    db18 = db  # every major from 16
    _streamed_workload(db18)
    rows = _peek(
        db18, "s2", "proto_version", "4", "publication_names", "pub", "streaming", "parallel"
    )
    decoder = Decoder(4)
    messages = [decoder.decode(payload) for _, payload in rows]
    abort = _check_streamed(messages)
    commit_message = messages[-1]
    assert isinstance(commit_message, StreamCommit)
    assert abort.abort_lsn is not None and abort.abort_time is not None
    assert 0 < abort.abort_lsn < commit_message.commit_lsn
    assert abort.abort_time.tzinfo is not None
    assert abort.abort_time <= commit_message.commit_time
    # the same bytes under protocol 4 with streaming = on: the short form
    rows = _peek(db18, "s2", "proto_version", "4", "publication_names", "pub", "streaming", "on")
    decoder = Decoder(4)
    abort = _check_streamed([decoder.decode(payload) for _, payload in rows])
    assert (abort.abort_lsn, abort.abort_time) == (None, None)


@pytest.mark.min_major(15)  # pgoutput's two_phase option
def test_real_server_two_phase(db: Database) -> None:
    """Protocol 3 with two_phase: Begin Prepare / Prepare / Commit Prepared with a GID."""
    run = db.execute
    run("CREATE TABLE tp (id int PRIMARY KEY)")
    run("CREATE PUBLICATION pub FOR TABLE tp")
    run("SELECT pg_create_logical_replication_slot('s3', 'pgoutput', false, true)")
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute("INSERT INTO tp VALUES (1)")
            cur.execute("PREPARE TRANSACTION 'gïd-1'")
            cur.execute("COMMIT PREPARED 'gïd-1'")
            cur.execute("BEGIN")
            cur.execute("INSERT INTO tp VALUES (2)")
            cur.execute("PREPARE TRANSACTION 'g2'")
            cur.execute("ROLLBACK PREPARED 'g2'")
    finally:
        conn.close()
    rows = _peek(db, "s3", "proto_version", "3", "publication_names", "pub", "two_phase", "on")
    decoder = Decoder(3)
    messages = [m for m in (decoder.decode(p) for _, p in rows) if not isinstance(m, Relation)]
    assert [type(m).__name__ for m in messages] == [
        *("BeginPrepare", "Insert", "Prepare", "CommitPreparedMessage"),
        *("BeginPrepare", "Insert", "Prepare", "RollbackPreparedMessage"),
    ]
    begin1, _, prepare1, commit1, begin2, _, prepare2, rollback2 = messages
    assert isinstance(begin1, BeginPrepare) and isinstance(prepare1, Prepare)
    assert isinstance(commit1, CommitPreparedMessage) and isinstance(
        rollback2, RollbackPreparedMessage
    )
    assert isinstance(begin2, BeginPrepare) and isinstance(prepare2, Prepare)
    assert begin1.gid == prepare1.gid == commit1.gid == "gïd-1"
    assert begin1.xid == prepare1.xid == commit1.xid
    assert begin1.prepare_lsn == prepare1.prepare_lsn
    assert begin1.end_lsn == prepare1.end_lsn
    assert rollback2.gid == "g2" and rollback2.xid == begin2.xid
    assert rollback2.prepare_end_lsn == prepare2.end_lsn
    assert rollback2.prepare_time == prepare2.prepare_time
    assert rollback2.rollback_time >= rollback2.prepare_time


def test_real_server_origin_and_type(db: Database) -> None:
    """A user-defined type column brings a Type message; a transaction replayed under a
    replication origin brings an Origin message after Begin."""
    run = db.execute
    origin_name = f"pgtail_{db.name}"
    run("CREATE TYPE mood AS ENUM ('sad', 'happy')")
    run("CREATE TABLE feelings (id int PRIMARY KEY, how mood)")
    run("CREATE PUBLICATION pub FOR TABLE feelings")
    run("SELECT pg_create_logical_replication_slot('s4', 'pgoutput')")
    mood_oid = int(str(run("SELECT 'mood'::regtype::oid::int8")[0][0]))
    run("SELECT pg_replication_origin_create(%s)", (origin_name,))
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_replication_origin_session_setup(%s)", (origin_name,))
            cur.execute("BEGIN")
            cur.execute(
                "SELECT pg_replication_origin_xact_setup('0/ABCDEF'::pg_lsn, "
                "'2024-05-06 07:08:09.123456+00')"
            )
            cur.execute("INSERT INTO feelings VALUES (1, 'happy')")
            cur.execute("COMMIT")
            cur.execute("SELECT pg_replication_origin_session_reset()")
        rows = _peek(db, "s4", "proto_version", "1", "publication_names", "pub")
    finally:
        conn.close()
        run("SELECT pg_replication_origin_drop(%s)", (origin_name,))
    decoder = Decoder(1)
    messages = [decoder.decode(payload) for _, payload in rows]
    assert [type(m).__name__ for m in messages] == [
        "Begin",
        "Origin",
        "Type",
        "Relation",
        "Insert",
        "Commit",
    ]
    assert messages[1] == Origin(0xABCDEF, origin_name)
    # the origin's timestamp becomes the commit time: microseconds survive the trip
    begin_message, commit_message = messages[0], messages[5]
    assert isinstance(begin_message, Begin) and isinstance(commit_message, Commit)
    assert begin_message.commit_time == commit_message.commit_time == T1
    assert messages[2] == Type(None, mood_oid, "public", "mood")
    assert decoder.types == {mood_oid: messages[2]}
    relation_message = messages[3]
    assert isinstance(relation_message, Relation)
    assert [(c.name, c.type_oid) for c in relation_message.columns] == [
        ("id", 23),
        ("how", mood_oid),
    ]
    assert isinstance(messages[4], Insert)
    assert messages[4].new == TupleData(b"tt", (b"1", b"happy"))


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_real_server_unchanged_toast_and_binary(db: Database, binary: bool) -> None:
    """An UPDATE that leaves a TOASTed column alone sends it as 'u'; with binary = true
    the other values arrive in binary format ('b'), NULLs stay 'n'."""
    if binary and db.major < 14:
        pytest.skip("binary tuple data needs PostgreSQL 14+")
    run = db.execute
    run("CREATE TABLE docs (id int PRIMARY KEY, body text, n int, note text)")
    run("ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL")  # out of line, uncompressed
    run("CREATE PUBLICATION pub FOR TABLE docs")
    run("SELECT pg_create_logical_replication_slot('s5', 'pgoutput')")
    run("INSERT INTO docs VALUES (1, repeat('x', 10000), 1, NULL)")
    run("UPDATE docs SET n = 2")
    options = ["proto_version", "1", "publication_names", "pub"]
    if binary:
        options += ["binary", "true"]
    decoder = Decoder(1)
    changes = [
        m
        for m in (decoder.decode(payload) for _, payload in _peek(db, "s5", *options))
        if isinstance(m, Insert | Update)
    ]
    assert len(changes) == 2
    inserted, updated = changes
    assert isinstance(inserted, Insert) and isinstance(updated, Update)
    one, two = (b"\x00\x00\x00\x01", b"\x00\x00\x00\x02") if binary else (b"1", b"2")
    kind = "b" if binary else "t"
    body = b"x" * 10000
    assert inserted.new == TupleData(f"{kind}{kind}{kind}n".encode(), (one, body, one, None))
    assert updated.old_kind is None and updated.old is None
    assert updated.new == TupleData(f"{kind}u{kind}n".encode(), (one, None, two, None))


def test_text_tuple_reader_takes_only_whole_text_and_null_tuples() -> None:
    """The fast path's reader: a text / NULL tuple's values (a tuple, a list when some
    are NULL), None for the rest; it runs no encoder (pgoutput only decodes)."""
    read = po.text_tuple_reader(3)
    data = pb.tuple_data([b"1", None, b"x y"])
    assert read(b"..." + data, 3, 7) == [7, b"1", None, b"x y"]
    data = pb.tuple_data([b"1", b"", b"z"])
    whole = read(data, 0, 8)
    assert type(whole) is tuple and whole == (8, b"1", b"", b"z")
    assert read(pb.tuple_data([b"1", "u", b"z"]), 0, 1) is None  # unchanged TOAST
    assert read(pb.tuple_data([b"1", ("b", b"\x00"), b"z"]), 0, 1) is None  # binary
    assert read(pb.tuple_data([b"1", b"2"]), 0, 1) is None  # another column count
    assert read(data + b"x", 0, 1) is None  # bytes after the tuple
    for cut in range(len(data)):  # truncated anywhere
        assert read(data[:cut], 0, 1) is None, cut


# --- generated code and the plain path ------------------------------------------------


def test_the_switch_selects_generated_or_plain_code(codegen: Callable[[bool], None]) -> None:
    def filenames() -> list[str]:
        read = po.text_tuple_reader(2)
        return [_fastrows._tuple_reader(n).__code__.co_filename for n in (2, 65)] + [
            read.__code__.co_filename  # type: ignore[attr-defined]
        ]

    codegen(False)
    assert (_fastrows._make_tuple, _fastrows._make_insert, _fastrows._make_begin) == (
        TupleData,
        Insert,
        Begin,
    )
    assert not [name for name in filenames() if name.startswith("<pgtail")]
    codegen(True)
    assert _fastrows._make_tuple is not TupleData and _fastrows._make_commit is not Commit
    reader, wide, encoder = filenames()
    assert reader.startswith("<pgtail pgoutput tuple reader 2 #")
    assert not wide.startswith("<")  # wider than the unrolled readers: the loop
    assert encoder.startswith("<pgtail pgoutput text tuple 2 #")


def _outcome(function: Callable[..., object], *args: Any) -> tuple[object, ...]:
    """What ``function(*args)`` gave, comparable across the two ways: its value (and the
    value's exact type and repr), or its exception's type and message."""
    try:
        value = function(*args)
    except Exception as exc:
        return ("raised", type(exc), str(exc))
    return ("value", value, type(value), repr(value))


def _decoder_outcomes() -> list[tuple[object, ...]]:
    """Every message of the decoder tests, truncated too; tuples of every width and kind,
    cut anywhere; the text tuple readers on whole, odd and broken tuples."""

    def parse_in(payload: bytes, in_stream: bool) -> PgoutputMessage:
        return parse(payload, in_stream=in_stream)

    outcomes = []
    for payload, in_stream in VALID_MESSAGES:
        for cut in (len(payload), len(payload) - 1, 3):
            outcomes.append(_outcome(parse_in, payload[:cut], in_stream))
    kinds_cycle: list[Any] = [b"v", None, "u", ("b", b"\x00b"), b"", b"'\\\n\xff"]
    for width in (0, 1, 2, 5, 63, 64, 65, 70, 200):
        columns = [kinds_cycle[(i * 7 + width) % 6] for i in range(width)]
        data = b"xx" + pb.tuple_data(columns)
        for cut in sorted({len(data), len(data) - 1, len(data) // 2, 3}):
            outcomes.append(_outcome(decode_tuple, data[:cut], 2, "Insert.new_tuple"))
        bad = bytearray(data)
        if width:
            bad[-1 if columns[-1] in (None, "u") else 2] = ord("x")
            outcomes.append(_outcome(decode_tuple, bytes(bad), 2, "Delete.old_tuple"))

    for width in (0, 1, 3, 64, 65, 200):
        read = po.text_tuple_reader(width)
        rows: list[list[pb.Value]] = [
            [b"%d" % i for i in range(width)],
            [None if i % 3 == 0 else b"x\ty'" * i for i in range(width)],
            ["u"] * width,
        ]
        for row in rows:
            data = pb.tuple_data(row)
            for buf, offset in ((data, 0), (b"..." + data, 3), (data + b"x", 0), (data[:-1], 0)):
                outcomes.append(_outcome(read, buf, offset, width))
    return outcomes


def test_generated_and_plain_decoders_give_the_same_results(
    codegen: Callable[[bool], None],
) -> None:
    codegen(True)
    generated = _decoder_outcomes()
    codegen(False)
    plain = _decoder_outcomes()
    assert len(plain) > 250
    raised = sum(1 for outcome in plain if outcome[0] == "raised")
    assert 50 < raised < len(plain) - 100, raised
    assert plain == generated


def test_traceback_through_generated_code_shows_its_line(
    codegen: Callable[[bool], None],
) -> None:
    codegen(True)
    read = _fastrows._unrolled_reader(3)
    with pytest.raises(IndexError) as caught:
        read(b"t\x00\x00\x00\x01a", 0)  # one column of three
    text = "".join(traceback.format_exception(caught.value))
    assert '"<pgtail pgoutput tuple reader 3 #' in text
    assert "    k1 = buf[p]\n" in text
