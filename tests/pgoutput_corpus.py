"""Every pgoutput message of protocol versions 1-4, built byte by byte with ``pgbytes``,
with the message the decoder must make of it: the cases ``test_pgoutput`` checks one by
one, and the seeds ``test_pgoutput_fuzz`` mutates."""

from __future__ import annotations

from datetime import UTC, datetime

from pgtail.pgoutput import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    Begin,
    BeginPrepare,
    Commit,
    CommitPreparedMessage,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgoutputMessage,
    Prepare,
    Relation,
    RelationColumn,
    RollbackPreparedMessage,
    StreamAbort,
    StreamCommit,
    StreamPrepare,
    StreamStart,
    StreamStop,
    TruncateMessage,
    TupleData,
    Type,
    Update,
)
from tests import pgbytes as pb


def expected_tuple(*columns: object) -> TupleData:
    """The TupleData the decoder makes of ``pgbytes.tuple_data(columns)``."""
    kinds = bytearray()
    values: list[bytes | None] = []
    for value in columns:
        if value is None:
            kinds.append(KIND_NULL)
            values.append(None)
        elif value == "u":
            kinds.append(KIND_UNCHANGED_TOAST)
            values.append(None)
        elif isinstance(value, tuple):
            kinds.append(KIND_BINARY)
            values.append(value[1])
        else:
            assert isinstance(value, bytes)
            kinds.append(KIND_TEXT)
            values.append(value)
    return TupleData(bytes(kinds), tuple(values))


T1 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
T1_US = pb.pg_time(T1)
T2 = datetime(2025, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
T2_US = pb.pg_time(T2)
LSN_A = 0x16_B374D848
LSN_B = 0x16_B374D900
LSN_MAX = (1 << 64) - 1
XID = 4_000_000_000  # above 2**31: xids are unsigned
SUBXID = 4_000_000_007
REL = 16_384
ROW = pb.tuple_data([b"1", b"alice", None, "u", ("b", b"\x00\x01\x00"), b""])
ROW_EXPECTED = expected_tuple(b"1", b"alice", None, "u", ("b", b"\x00\x01\x00"), b"")
KEY = pb.tuple_data([b"1", None, None, None, None, None])
KEY_EXPECTED = expected_tuple(b"1", None, None, None, None, None)
COLUMNS = [("id", 23, True), ("näme", 1043, False, 68), ("", 25, False)]
COLUMNS_EXPECTED = (
    RelationColumn(1, "id", 23, -1),
    RelationColumn(0, "näme", 1043, 68),
    RelationColumn(0, "", 25, -1),
)


def _cases() -> list[tuple[str, bytes, bool, PgoutputMessage]]:
    """(id, payload, in_stream, expected message) for every message type and variant."""
    cases: list[tuple[str, bytes, bool, PgoutputMessage]] = [
        ("begin", pb.begin(LSN_A, T1_US, XID), False, Begin(LSN_A, T1, XID)),
        (
            "begin-max-lsn",
            pb.begin(LSN_MAX, 0, 0),
            False,
            Begin(LSN_MAX, datetime(2000, 1, 1, tzinfo=UTC), 0),
        ),
        ("commit", pb.commit(LSN_A, LSN_B, T1_US), False, Commit(0, LSN_A, LSN_B, T1)),
        ("origin", pb.origin(LSN_A, "node_a"), False, Origin(LSN_A, "node_a")),
        ("origin-empty-name", pb.origin(0, ""), False, Origin(0, "")),
        (
            "type",
            pb.type_(70_000, "public", "mood"),
            False,
            Type(None, 70_000, "public", "mood"),
        ),
        (
            "type-stream",
            pb.type_(70_000, "", "mood", xid=XID),
            True,
            Type(XID, 70_000, "", "mood"),
        ),
        ("insert", pb.insert(REL, ROW), False, Insert(None, REL, ROW_EXPECTED)),
        ("insert-stream", pb.insert(REL, ROW, xid=XID), True, Insert(XID, REL, ROW_EXPECTED)),
        (
            "insert-zero-columns",
            pb.insert(REL, pb.tuple_data([])),
            False,
            Insert(None, REL, TupleData(b"", ())),
        ),
        ("update-no-old", pb.update(REL, ROW), False, Update(None, REL, None, None, ROW_EXPECTED)),
        (
            "update-key",
            pb.update(REL, ROW, KEY, "K"),
            False,
            Update(None, REL, "K", KEY_EXPECTED, ROW_EXPECTED),
        ),
        (
            "update-old",
            pb.update(REL, ROW, ROW, "O"),
            False,
            Update(None, REL, "O", ROW_EXPECTED, ROW_EXPECTED),
        ),
        (
            "update-no-old-stream",
            pb.update(REL, ROW, xid=XID),
            True,
            Update(XID, REL, None, None, ROW_EXPECTED),
        ),
        (
            "update-key-stream",
            pb.update(REL, ROW, KEY, "K", xid=XID),
            True,
            Update(XID, REL, "K", KEY_EXPECTED, ROW_EXPECTED),
        ),
        (
            "update-old-stream",
            pb.update(REL, ROW, ROW, "O", xid=XID),
            True,
            Update(XID, REL, "O", ROW_EXPECTED, ROW_EXPECTED),
        ),
        ("delete-key", pb.delete(REL, KEY, "K"), False, Delete(None, REL, "K", KEY_EXPECTED)),
        ("delete-old", pb.delete(REL, ROW, "O"), False, Delete(None, REL, "O", ROW_EXPECTED)),
        (
            "delete-key-stream",
            pb.delete(REL, KEY, "K", xid=XID),
            True,
            Delete(XID, REL, "K", KEY_EXPECTED),
        ),
        (
            "delete-old-stream",
            pb.delete(REL, ROW, "O", xid=XID),
            True,
            Delete(XID, REL, "O", ROW_EXPECTED),
        ),
        ("truncate-none", pb.truncate([]), False, TruncateMessage(None, 0, ())),
        ("truncate-plain", pb.truncate([REL]), False, TruncateMessage(None, 0, (REL,))),
        (
            "truncate-cascade",
            pb.truncate([REL, REL + 1], cascade=True),
            False,
            TruncateMessage(None, 1, (REL, REL + 1)),
        ),
        (
            "truncate-restart",
            pb.truncate([REL], restart_identity=True),
            False,
            TruncateMessage(None, 2, (REL,)),
        ),
        (
            "truncate-both",
            pb.truncate([REL, 1, 2], cascade=True, restart_identity=True),
            False,
            TruncateMessage(None, 3, (REL, 1, 2)),
        ),
        (
            "truncate-stream",
            pb.truncate([REL], cascade=True, restart_identity=True, xid=XID),
            True,
            TruncateMessage(XID, 3, (REL,)),
        ),
        (
            "message-transactional",
            pb.message("app", b"hello", LSN_A),
            False,
            LogicalMessage(None, True, LSN_A, "app", b"hello"),
        ),
        (
            "message-non-transactional",
            pb.message("app", b"\x00\xff binary", LSN_A, transactional=False),
            False,
            LogicalMessage(None, False, LSN_A, "app", b"\x00\xff binary"),
        ),
        (
            "message-empty",
            pb.message("", b"", 0, transactional=False),
            False,
            LogicalMessage(None, False, 0, "", b""),
        ),
        (
            "message-stream",
            pb.message("päth", b"x", LSN_B, xid=XID),
            True,
            LogicalMessage(XID, True, LSN_B, "päth", b"x"),
        ),
        ("stream-start-first", pb.stream_start(XID, True), False, StreamStart(XID, True)),
        ("stream-start-next", pb.stream_start(XID, False), True, StreamStart(XID, False)),
        ("stream-stop", pb.stream_stop(), True, StreamStop()),
        (
            "stream-commit",
            pb.stream_commit(XID, LSN_A, LSN_B, T1_US),
            False,
            StreamCommit(XID, 0, LSN_A, LSN_B, T1),
        ),
        ("stream-abort", pb.stream_abort(XID, SUBXID), False, StreamAbort(XID, SUBXID, None, None)),
        (
            "stream-abort-top-level",
            pb.stream_abort(XID, XID),
            False,
            StreamAbort(XID, XID, None, None),
        ),
        (
            "stream-abort-v4-parallel",
            pb.stream_abort(XID, SUBXID, LSN_B, T2_US),
            False,
            StreamAbort(XID, SUBXID, LSN_B, T2),
        ),
        (
            "begin-prepare",
            pb.begin_prepare(LSN_A, LSN_B, T1_US, XID, "gid-1"),
            False,
            BeginPrepare(LSN_A, LSN_B, T1, XID, "gid-1"),
        ),
        (
            "prepare",
            pb.prepare(LSN_A, LSN_B, T1_US, XID, "gid-1"),
            False,
            Prepare(0, LSN_A, LSN_B, T1, XID, "gid-1"),
        ),
        (
            "commit-prepared",
            pb.commit_prepared(LSN_A, LSN_B, T2_US, XID, "gid-1"),
            False,
            CommitPreparedMessage(0, LSN_A, LSN_B, T2, XID, "gid-1"),
        ),
        (
            "rollback-prepared",
            pb.rollback_prepared(LSN_A, LSN_B, T1_US, T2_US, XID, "gïd"),
            False,
            RollbackPreparedMessage(0, LSN_A, LSN_B, T1, T2, XID, "gïd"),
        ),
        (
            "stream-prepare",
            pb.stream_prepare(LSN_A, LSN_B, T1_US, XID, ""),
            False,
            StreamPrepare(0, LSN_A, LSN_B, T1, XID, ""),
        ),
    ]
    for identity in "dnfi":
        cases.append(
            (
                f"relation-{identity}",
                pb.relation(REL, "public", "users", COLUMNS, identity),
                False,
                Relation(None, REL, "public", "users", identity, COLUMNS_EXPECTED),
            )
        )
    cases += [
        (
            "relation-stream",
            pb.relation(REL, "", "t", COLUMNS, "f", xid=XID),
            True,
            Relation(XID, REL, "", "t", "f", COLUMNS_EXPECTED),
        ),
        (
            "relation-no-columns",
            pb.relation(REL, "s", "empty", [], "n"),
            False,
            Relation(None, REL, "s", "empty", "n", ()),
        ),
    ]
    return cases


CASES = _cases()
VALID_MESSAGES: list[tuple[bytes, bool]] = [(payload, stream) for _, payload, stream, _ in CASES]
