"""Unit tests of pgtail.changes on hand-built pgoutput bytes (see tests/pgbytes.py)."""

from __future__ import annotations

import linecache
import struct
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgtail import pgoutput as po
from pgtail.changes import (
    Assembler,
    Change,
    Column,
    CommitPrepared,
    EncodedRows,
    Event,
    Message,
    RollbackPrepared,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
    fastpath,
)
from pgtail.changes import assembler as assembler_module
from pgtail.changes import fastpath as fastpath_module
from pgtail.changes.fastpath import encode_line
from pgtail.changes.held import SpilledRun
from pgtail.changes.tables import new_change, row_builders, unknown_type_oids
from pgtail.errors import DecodeError, SpillError
from pgtail.values import UserType
from tests import pgbytes as pb

INT4 = 23
TEXT = 25
T0 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
T1 = datetime(2024, 5, 6, 7, 8, 10, 654321, tzinfo=UTC)

# public.items: id int4 (key), name text, body text; replica identity default
ITEMS_COLUMNS = [("id", INT4, True), ("name", TEXT, False), ("body", TEXT, False)]
ITEMS = pb.relation(16384, "public", "items", ITEMS_COLUMNS)
ITEMS_FULL = pb.relation(
    16384,
    "public",
    "items",
    [("id", INT4, True), ("name", TEXT, True), ("body", TEXT, True)],
    replica_identity="f",
)


def items_in(xid: int) -> bytes:
    """public.items's Relation message, sent inside streamed transaction ``xid``."""
    return pb.relation(16384, "public", "items", ITEMS_COLUMNS, xid=xid)


@pytest.fixture(autouse=True, params=["generated", "plain"])
def codegen(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test runs with the per-table row functions generated and with the plain ones
    (PGTAIL_NO_CODEGEN=1): the events must be the same."""
    if request.param == "plain":
        monkeypatch.setenv("PGTAIL_NO_CODEGEN", "1")
    else:
        monkeypatch.delenv("PGTAIL_NO_CODEGEN", raising=False)
    return str(request.param)


def run(asm: Assembler, payloads: Iterable[bytes]) -> list[Event]:
    events: list[Event] = []
    for payload in payloads:
        events.extend(asm.feed(payload))
    return events


def rows(events: Iterable[Event]) -> list[tuple[str, Any, Any]]:
    """(op, new, old) of every Change."""
    return [(e.op, e.new, e.old) for e in events if isinstance(e, Change)]


def tx_block(
    xid: int, body: list[bytes], commit_lsn: int = 0x1000, end_lsn: int = 0x1010
) -> list[bytes]:
    return [pb.begin(commit_lsn, T0, xid), *body, pb.commit(commit_lsn, end_lsn, T0)]


# --- plain transactions -------------------------------------------------------------


def test_begin_commit_assembly() -> None:
    asm = Assembler(1)
    assert list(asm.feed(pb.begin(0x16B374D848, T0, 777))) == []
    assert asm.open_transactions()
    assert list(asm.feed(ITEMS)) == []
    assert list(asm.feed(pb.insert(16384, [b"1", b"one", b"x"]))) == []
    assert list(asm.feed(pb.insert(16384, [b"2", None, b"y"]))) == []
    events = list(asm.feed(pb.commit(0x16B374D848, 0x16B374D878, T1)))
    assert not asm.open_transactions()

    tx = Transaction(xid=777, commit_lsn=0x16B374D848, end_lsn=0x16B374D878, commit_time=T1)
    table = Table(
        16384,
        "public",
        "items",
        "default",
        (
            Column("id", INT4, -1, True, "integer"),
            Column("name", TEXT, -1, False, "text"),
            Column("body", TEXT, -1, False, "text"),
        ),
    )
    assert events == [
        TxBegin(tx),
        Change("insert", table, tx, 0, {"id": 1, "name": "one", "body": "x"}, None, None, ()),
        Change("insert", table, tx, 1, {"id": 2, "name": None, "body": "y"}, None, None, ()),
        TxCommit(tx),
    ]
    change = events[1]
    assert isinstance(change, Change)
    assert change.key == {"id": 1}
    assert change.table.key_columns == ("id",)
    assert change.table.qualified_name == "public.items"


def test_empty_transaction_still_has_boundaries() -> None:
    events = run(Assembler(1), tx_block(5, []))
    assert [type(e) for e in events] == [TxBegin, TxCommit]


def test_fast_change_constructor_equals_dataclass_init() -> None:
    table = Table(1, "s", "t", "full", ())
    tx = Transaction(1, 2, 3, T0)
    args = ("update", table, tx, 4, {"a": 1}, {"a": 0}, "full", ("b",))
    fast = new_change(*args)
    assert fast == Change(*args)  # type: ignore[arg-type]
    assert hash(fast.tx) == hash(tx)
    with pytest.raises(AttributeError):
        fast.op = "insert"  # type: ignore[misc]


@pytest.mark.parametrize("width", [1, 3, 250])  # 250: past the generated builders' limit
def test_row_builders_any_column_names_and_widths(width: int) -> None:
    odd = ["a'b", '"x"', "new\nline", "{c0}", "\\", "é ünï", "v[0]", "self"]
    names = [odd[i] if i < len(odd) else f"col{i}" for i in range(width)]
    rel = pb.relation(5, "s", "wide", [(n, INT4, i == 0) for i, n in enumerate(names)])
    text = [str(i).encode() for i in range(width)]
    binary = [("b", struct.pack("!i", i)) for i in range(width)]
    for row, asm in ((text, Assembler(1)), (binary, Assembler(1, binary=True))):
        events = run(asm, [rel, *tx_block(1, [pb.insert(5, row), pb.update(5, row)])])
        inserted, updated = [e for e in events if isinstance(e, Change)]
        assert inserted.new == {n: i for i, n in enumerate(names)}
        assert updated.new == inserted.new
        assert inserted == Change(
            "insert", inserted.table, inserted.tx, 0, inserted.new, None, None, ()
        )
        assert list(inserted.new) == names  # column order kept


def test_row_functions_generated_or_plain_give_the_same_events(codegen: str) -> None:
    """The generated row functions are registered with linecache (a traceback shows their
    line); the plain ones are ordinary functions; both give equal events."""
    names = ("a'b", "new\nline", "id")
    table = Table(5, "s", "t", "default", ())
    converters = [bytes.decode, bytes.decode, int]
    row, insert = row_builders(table, names, converters)  # type: ignore[arg-type]
    generated = row.__code__.co_filename.startswith("<pgtail rows of 3 columns")
    assert generated == (codegen == "generated")
    if generated:
        assert linecache.getline(row.__code__.co_filename, 2).strip().startswith("return {")
    values = (b"x", b"y", b"7")
    tx = Transaction(1, 2, 3, T0)
    assert row(values) == {"a'b": "x", "new\nline": "y", "id": 7}
    assert list(row(values)) == list(names)
    assert insert(values, tx, 4) == Change("insert", table, tx, 4, row(values), None, None, ())


def test_user_types_are_looked_up_before_the_relation_is_fed() -> None:
    """The assembler does no lookup itself: it says which types a Relation needs; what it
    is handed before the Relation decides the columns' values; a failed lookup (nothing
    handed down) leaves them as an unknown type's, and is not asked for again."""
    posint = 90_001  # a domain over int4
    mood = 90_002  # an enum
    rel = pb.relation(7, "public", "typed", [("id", INT4, True), ("p", posint, False)])
    rel_both = pb.relation(
        7, "public", "typed", [("id", INT4, True), ("p", posint, False), ("m", mood, False)]
    )
    found = {posint: UserType("d", base=INT4)}

    asm = Assembler(1)
    assert asm.user_types_wanted(ITEMS) == []  # built-in types only
    assert asm.user_types_wanted(pb.begin(0x10, T0, 1)) == []  # not a Relation
    assert asm.user_types_wanted(rel) == [posint]
    assert unknown_type_oids(po.PARSERS[po.MSG_RELATION](rel_both, False), {mood}) == [posint]
    asm.add_user_types(found, [posint])
    assert asm.user_types_wanted(rel) == []
    assert asm.user_types_wanted(rel_both) == [mood]
    asm.add_user_types({}, [mood])  # the lookup failed: not asked again
    assert asm.user_types_wanted(rel_both) == []
    body = [pb.insert(7, [b"1", b"5", b"happy"])]
    events = run(asm, [rel_both, *tx_block(1, body)])
    assert rows(events) == [("insert", {"id": 1, "p": 5, "m": "happy"}, None)]

    # handed down up front, as data
    events = run(Assembler(1, user_types=found), [rel, *tx_block(1, [pb.insert(7, [b"1", b"5"])])])
    assert rows(events) == [("insert", {"id": 1, "p": 5}, None)]
    # never handed down: the value stays text
    events = run(Assembler(1), [rel, *tx_block(1, [pb.insert(7, [b"1", b"5"])])])
    assert rows(events) == [("insert", {"id": 1, "p": "5"}, None)]


def test_binary_and_mixed_tuple_kinds() -> None:
    asm = Assembler(1, binary=True)
    events = run(
        asm,
        [
            ITEMS,
            *tx_block(
                9,
                [
                    pb.insert(16384, [("b", struct.pack("!i", -5)), ("b", b"bin"), ("b", b"z")]),
                    pb.insert(16384, [("b", struct.pack("!i", 6)), None, b"text-mode"]),
                ],
            ),
        ],
    )
    assert rows(events) == [
        ("insert", {"id": -5, "name": "bin", "body": "z"}, None),
        ("insert", {"id": 6, "name": None, "body": "text-mode"}, None),
    ]


# --- key / old / new / unchanged TOAST -----------------------------------------------


def test_update_without_old_tuple() -> None:
    events = run(Assembler(1), [ITEMS, *tx_block(1, [pb.update(16384, [b"1", b"n", "u"])])])
    (change,) = [e for e in events if isinstance(e, Change)]
    assert change.op == "update"
    assert change.new == {"id": 1, "name": "n"}
    assert change.old is None and change.old_kind is None
    assert change.unchanged_toast == ("body",)
    assert "body" not in change.new
    assert change.key == {"id": 1}


def test_update_with_key_old_tuple() -> None:
    # the key changed: "K" carries the old key, non-key columns are sent as NULL
    payload = pb.update(16384, [b"2", b"n", "u"], old=[b"1", None, None], old_kind="K")
    events = run(Assembler(1), [ITEMS, *tx_block(1, [payload])])
    (change,) = [e for e in events if isinstance(e, Change)]
    assert change.old == {"id": 1}
    assert change.old_kind == "key"
    assert change.new == {"id": 2, "name": "n"}
    assert change.unchanged_toast == ("body",)
    assert change.key == {"id": 1}


def test_update_with_full_old_tuple() -> None:
    payload = pb.update(16384, [b"1", b"new", b"b"], old=[b"1", b"old", None], old_kind="O")
    events = run(Assembler(1), [ITEMS_FULL, *tx_block(1, [payload])])
    (change,) = [e for e in events if isinstance(e, Change)]
    assert change.table.replica_identity == "full"
    assert change.old == {"id": 1, "name": "old", "body": None}
    assert change.old_kind == "full"
    assert change.new == {"id": 1, "name": "new", "body": "b"}
    assert change.unchanged_toast == ()
    assert change.key == {"id": 1, "name": "old", "body": None}


def test_delete_with_key_and_full_old_tuple() -> None:
    key_delete = pb.delete(16384, [b"3", None, None], old_kind="K")
    full_delete = pb.delete(16384, [b"4", b"four", b"x"], old_kind="O")
    events = run(
        Assembler(1), [ITEMS, *tx_block(1, [key_delete]), ITEMS_FULL, *tx_block(2, [full_delete])]
    )
    deletes = [e for e in events if isinstance(e, Change)]
    assert [(c.op, c.new, c.old, c.old_kind) for c in deletes] == [
        ("delete", None, {"id": 3}, "key"),
        ("delete", None, {"id": 4, "name": "four", "body": "x"}, "full"),
    ]
    assert deletes[0].key == {"id": 3}


@pytest.mark.parametrize(
    ("identity", "expected"),
    [("d", "default"), ("n", "nothing"), ("f", "full"), ("i", "index")],
)
def test_replica_identity_names(identity: str, expected: str) -> None:
    rel = pb.relation(1, "s", "t", [("a", INT4, identity in "di")], replica_identity=identity)
    events = run(Assembler(1), [rel, *tx_block(1, [pb.insert(1, [b"7"])])])
    change = events[1]
    assert isinstance(change, Change)
    assert change.table.replica_identity == expected
    assert change.key == ({"a": 7} if identity in "di" else None)


def test_table_without_key_has_no_key() -> None:
    rel = pb.relation(1, "s", "t", [("a", INT4, False)], replica_identity="n")
    events = run(Assembler(1), [rel, *tx_block(1, [pb.insert(1, [b"7"])])])
    change = events[1]
    assert isinstance(change, Change)
    assert change.key is None


def test_wrong_column_count_is_a_decode_error() -> None:
    asm = Assembler(1)
    with pytest.raises(DecodeError, match="2 columns for public.items"):
        run(asm, [ITEMS, *tx_block(1, [pb.insert(16384, [b"1", None])])])


# --- truncate and messages -------------------------------------------------------------


def test_truncate_event() -> None:
    other = pb.relation(16390, "app", "other", [("k", INT4, True)])
    events = run(
        Assembler(1),
        [
            ITEMS,
            other,
            *tx_block(3, [pb.truncate([16384, 16390], cascade=True, restart_identity=True)]),
        ],
    )
    (trunc,) = [e for e in events if isinstance(e, Truncate)]
    assert [t.qualified_name for t in trunc.tables] == ["public.items", "app.other"]
    assert trunc.cascade and trunc.restart_identity
    assert trunc.seq == 0
    assert trunc.tx.xid == 3


def test_transactional_message_is_held_non_transactional_yields_at_once() -> None:
    asm = Assembler(1)
    assert list(asm.feed(pb.begin(0x2000, T0, 8))) == []
    assert list(asm.feed(pb.message("app", b"held", 0x1F00))) == []
    now = list(asm.feed(pb.message("audit", b"\x00now", 0x1F10, transactional=False)))
    assert now == [Message("audit", b"\x00now", False, 0x1F10, None, 0)]
    assert list(asm.feed(ITEMS)) == []
    assert list(asm.feed(pb.insert(16384, [b"1", b"a", b"b"]))) == []
    events = list(asm.feed(pb.commit(0x2000, 0x2030, T0)))
    assert [type(e) for e in events] == [TxBegin, Message, Change, TxCommit]
    msg = events[1]
    assert isinstance(msg, Message)
    assert (msg.prefix, msg.content, msg.transactional, msg.lsn, msg.seq) == (
        "app",
        b"held",
        True,
        0x1F00,
        0,
    )
    assert msg.tx is not None and msg.tx.xid == 8
    change = events[2]
    assert isinstance(change, Change) and change.seq == 1


def test_non_transactional_message_outside_transaction() -> None:
    events = run(Assembler(1), [pb.message("p", b"c", 5, transactional=False)])
    assert events == [Message("p", b"c", False, 5, None, 0)]


# --- origin ------------------------------------------------------------------------------


def test_origin_sets_transaction_origin() -> None:
    events = run(
        Assembler(1),
        [
            ITEMS,
            pb.begin(0x3000, T0, 11),
            pb.origin(0xABCDEF, "upstream"),
            pb.insert(16384, [b"1", b"a", b"b"]),
            pb.commit(0x3000, 0x3040, T0),
        ],
    )
    txs = {e.tx for e in events if isinstance(e, (TxBegin, Change, TxCommit))}
    assert txs == {Transaction(11, 0x3000, 0x3040, T0, origin="upstream", origin_lsn=0xABCDEF)}


# --- schema changes -------------------------------------------------------------------


def test_schema_change_mid_transaction() -> None:
    items_v2 = pb.relation(
        16384,
        "public",
        "items",
        [("id", INT4, True), ("name", TEXT, False), ("body", TEXT, False), ("n", INT4, False)],
    )
    asm = Assembler(1)
    events = run(
        asm,
        [
            *tx_block(1, [ITEMS, pb.insert(16384, [b"1", b"a", b"b"])]),
            *tx_block(
                2,
                [
                    pb.insert(16384, [b"2", b"a", b"b"]),
                    items_v2,
                    pb.insert(16384, [b"3", b"a", b"b", b"42"]),
                ],
            ),
            *tx_block(3, [pb.insert(16384, [b"4", b"a", b"b", b"43"])]),
        ],
    )
    changes_ = [e for e in events if isinstance(e, Change)]
    assert [len(c.table.columns) for c in changes_] == [3, 3, 4, 4]
    assert changes_[2].new == {"id": 3, "name": "a", "body": "b", "n": 42}
    assert [c.seq for c in changes_] == [0, 0, 1, 0]
    assert len(asm.tables()[16384].columns) == 4  # the live cache is the newest


def test_schema_change_replay_consumed_after_later_feeds() -> None:
    """A returned iterator does not depend on what is fed after it."""
    items_v2 = pb.relation(16384, "public", "items", [("id", INT4, True)])
    asm = Assembler(1)
    run(asm, [ITEMS])
    pending: list[Iterator[Event]] = []
    for payload in tx_block(1, [pb.insert(16384, [b"1", b"a", b"b"])]):
        pending.append(asm.feed(payload))
    # a later transaction changes the schema before the first one is consumed
    later = run(asm, tx_block(2, [items_v2, pb.insert(16384, [b"2"])]))
    earlier = [e for it in pending for e in it]
    assert rows(earlier) == [("insert", {"id": 1, "name": "a", "body": "b"}, None)]
    assert rows(later) == [("insert", {"id": 2}, None)]


def test_resent_relation_reuses_its_table() -> None:
    """Streamed transactions resend the Relation (with their xid); nothing is rebuilt."""
    cols = [("id", INT4, True)]
    asm = Assembler(2)
    tables = []
    for xid in (31, 32):
        payloads = streamed(
            xid,
            [pb.relation(1, "s", "t", cols, xid=xid), pb.insert(1, [b"1"], xid=xid)],
        )
        events = run(asm, [*payloads, pb.stream_commit(xid, 1, 2, T0)])
        tables += [e.table for e in events if isinstance(e, Change)]
    run(asm, [pb.relation(1, "s", "t", [*cols, ("v", TEXT, False)])])
    events = run(asm, tx_block(33, [pb.insert(1, [b"2", b"x"])]))
    tables += [e.table for e in events if isinstance(e, Change)]
    assert tables[0] is tables[1]
    assert tables[2] is not tables[0] and len(tables[2].columns) == 2


def test_user_type_name_from_type_message() -> None:
    rel = pb.relation(1, "s", "t", [("mood", 70001, False), ("moods", 70000, False)])
    events = run(
        Assembler(1),
        [
            pb.type_(70001, "public", "mood"),
            pb.type_(70000, "public", "_mood"),
            rel,
            *tx_block(1, [pb.insert(1, [b"happy", b"{happy,sad}"])]),
        ],
    )
    change = events[1]
    assert isinstance(change, Change)
    assert [c.type_name for c in change.table.columns] == ["public.mood", "public._mood"]
    assert change.new is not None and change.new["mood"] == "happy"


# --- errors ---------------------------------------------------------------------------


def test_unknown_relation_is_a_clear_decode_error() -> None:
    asm = Assembler(1)
    with pytest.raises(DecodeError, match="Insert for relation 12345 before its Relation message"):
        run(asm, tx_block(1, [pb.insert(12345, [b"1"])]))


@pytest.mark.parametrize(
    ("bad_insert", "match"),
    [
        (pb.insert(16384, [b"1", b"a", b"b"])[:-1], "Insert.new_tuple: truncated"),
        (pb.insert(16384, [b"1", b"a", b"b"]) + b"\x00", "trailing data"),
        (pb.insert(16384, [b"1", b"a", b"b"]).replace(b"N", b"X", 1), "Insert"),
        (b"I\x00\x00", "Insert.relation_id: truncated"),
    ],
)
def test_malformed_held_insert_raises_the_decoders_error(bad_insert: bytes, match: str) -> None:
    asm = Assembler(1)
    with pytest.raises(DecodeError, match=match):
        run(asm, [ITEMS, *tx_block(1, [bad_insert])])


def test_streamed_insert_fast_path_reads_past_the_xid() -> None:
    asm = Assembler(2)
    rel = items_in(42)
    payloads = streamed(42, [rel, pb.insert(16384, [b"7", None, "u"], xid=42)])
    events = run(asm, [*payloads, pb.stream_commit(42, 1, 2, T0)])
    (change,) = [e for e in events if isinstance(e, Change)]
    assert (change.new, change.unchanged_toast) == ({"id": 7, "name": None}, ("body",))


@pytest.mark.parametrize(
    ("payloads", "match"),
    [
        ([pb.insert(16384, [b"1", b"a", b"b"])], "Insert outside a transaction"),
        ([pb.commit(1, 2, T0)], "Commit without a Begin"),
        ([pb.begin(1, T0, 1), pb.begin(2, T0, 2)], "has no Commit yet"),
        ([pb.stream_stop()], "Stream Stop without a Stream Start"),
        ([pb.prepare(1, 2, T0, 3, "g")], "Prepare without a Begin Prepare"),
        ([b""], "empty pgoutput message"),
    ],
)
def test_protocol_order_errors(payloads: list[bytes], match: str) -> None:
    with pytest.raises(DecodeError, match=match):
        run(Assembler(3), payloads)


# --- streamed transactions ---------------------------------------------------------------


def streamed(xid: int, body: list[bytes], first: bool = True) -> list[bytes]:
    return [pb.stream_start(xid, first), *body, pb.stream_stop()]


def test_streamed_transaction_commit() -> None:
    asm = Assembler(2)
    rel = items_in(500)
    assert run(asm, streamed(500, [rel, pb.insert(16384, [b"1", b"a", b"b"], xid=500)])) == []
    assert asm.open_transactions()
    assert (
        run(asm, streamed(500, [pb.insert(16384, [b"2", b"c", b"d"], xid=500)], first=False)) == []
    )
    events = run(asm, [pb.stream_commit(500, 0x5000, 0x5050, T1)])
    assert not asm.open_transactions()
    tx = Transaction(500, 0x5000, 0x5050, T1, streamed=True)
    assert events[0] == TxBegin(tx) and events[-1] == TxCommit(tx)
    assert rows(events) == [
        ("insert", {"id": 1, "name": "a", "body": "b"}, None),
        ("insert", {"id": 2, "name": "c", "body": "d"}, None),
    ]
    assert [e.seq for e in events if isinstance(e, Change)] == [0, 1]


def test_stream_abort_of_whole_transaction() -> None:
    asm = Assembler(2)
    run(asm, [ITEMS])
    run(asm, streamed(600, [pb.insert(16384, [b"1", b"a", b"b"], xid=600)]))
    assert asm.open_transactions()
    assert run(asm, [pb.stream_abort(600, 600)]) == []
    assert not asm.open_transactions()
    # a later commit of that xid (never happens) would be empty, not resurrect rows
    assert rows(run(asm, [pb.stream_commit(600, 1, 2, T0)])) == []


def _subxact_stream() -> list[bytes]:
    """Top xid 700; savepoint sub 701 (with nested 702); sub 703 after it; top rows around."""
    rel_other = pb.relation(16390, "app", "other", [("k", INT4, True)], xid=701)
    return [
        *streamed(
            700,
            [
                pb.insert(16384, [b"1", b"top", b"x"], xid=700),
                rel_other,  # first sent inside the savepoint that is rolled back
                pb.insert(16390, [b"10"], xid=701),
                pb.insert(16384, [b"2", b"sub", b"x"], xid=701),
                pb.message("m", b"in-sub", 0x10, xid=700),  # messages carry the top xid
            ],
        ),
        *streamed(
            700,
            [
                pb.insert(16384, [b"3", b"nested", b"x"], xid=702),
                pb.update(16384, [b"1", b"changed-in-sub", "u"], xid=702),
            ],
            first=False,
        ),
        pb.stream_abort(700, 702),  # PostgreSQL aborts the nested one first, then its parent
        pb.stream_abort(700, 701),
        *streamed(
            700,
            [
                pb.insert(16384, [b"4", b"top-after", b"x"], xid=700),
                pb.insert(16390, [b"11"], xid=700),  # needs the Relation sent inside 701
                pb.insert(16384, [b"5", b"kept-sub", b"x"], xid=703),
            ],
            first=False,
        ),
        pb.stream_commit(700, 0x7000, 0x7070, T0),
    ]


def test_stream_abort_of_subtransaction_drops_only_its_changes() -> None:
    asm = Assembler(2)
    events = run(asm, [ITEMS, *_subxact_stream()])
    assert rows(events) == [
        ("insert", {"id": 1, "name": "top", "body": "x"}, None),
        ("insert", {"id": 4, "name": "top-after", "body": "x"}, None),
        ("insert", {"k": 11}, None),
        ("insert", {"id": 5, "name": "kept-sub", "body": "x"}, None),
    ]
    assert not any(isinstance(e, Message) for e in events)
    assert [e.seq for e in events if isinstance(e, Change)] == [0, 1, 2, 3]


def test_subtransaction_abort_of_unknown_subxid_is_harmless() -> None:
    asm = Assembler(2)
    run(asm, [ITEMS, *streamed(710, [pb.insert(16384, [b"1", b"a", b"b"], xid=710)])])
    run(asm, [pb.stream_abort(710, 799)])
    events = run(asm, [pb.stream_commit(710, 1, 2, T0)])
    assert len(rows(events)) == 1


def test_interleaved_streamed_transactions() -> None:
    asm = Assembler(4)
    rel_a = items_in(801)
    rel_b = items_in(802)
    payloads = [
        *streamed(801, [rel_a, pb.insert(16384, [b"1", b"a", b"1"], xid=801)]),
        *streamed(802, [rel_b, pb.insert(16384, [b"2", b"b", b"1"], xid=802)]),
        *streamed(801, [pb.insert(16384, [b"3", b"a", b"2"], xid=801)], first=False),
        *streamed(802, [pb.insert(16384, [b"4", b"b", b"2"], xid=802)], first=False),
    ]
    assert run(asm, payloads) == []
    committed_b = run(asm, [pb.stream_commit(802, 0x8200, 0x8210, T0)])
    assert asm.open_transactions()
    assert run(asm, [pb.stream_abort(801, 801, 0x8300, T1)]) == []
    assert not asm.open_transactions()
    assert [e.new["id"] for e in committed_b if isinstance(e, Change) and e.new] == [2, 4]
    assert {e.tx.xid for e in committed_b if isinstance(e, Change)} == {802}


def test_stream_interleaved_with_plain_transaction() -> None:
    asm = Assembler(2)
    run(asm, [ITEMS])
    run(asm, streamed(900, [pb.insert(16384, [b"1", b"s", b"x"], xid=900)]))
    plain = run(asm, tx_block(901, [pb.insert(16384, [b"2", b"p", b"x"])]))
    assert rows(plain) == [("insert", {"id": 2, "name": "p", "body": "x"}, None)]
    streamed_events = run(asm, [pb.stream_commit(900, 1, 2, T0)])
    assert rows(streamed_events) == [("insert", {"id": 1, "name": "s", "body": "x"}, None)]


def test_streamed_schema_change_of_other_transaction_does_not_leak() -> None:
    """Xid 950 replays with its own Relation even though 951 replaced it later."""
    cols3 = [("id", INT4, True), ("name", TEXT, False), ("body", TEXT, False)]
    cols1 = [("id", INT4, True)]
    asm = Assembler(2)
    run(
        asm,
        streamed(
            950,
            [
                pb.relation(16384, "public", "items", cols3, xid=950),
                pb.insert(16384, [b"1", b"a", b"b"], xid=950),
            ],
        ),
    )
    run(
        asm,
        streamed(
            951,
            [
                pb.relation(16384, "public", "items", cols1, xid=951),
                pb.insert(16384, [b"2"], xid=951),
            ],
        ),
    )
    run(asm, streamed(950, [pb.insert(16384, [b"3", b"c", b"d"], xid=950)], first=False))
    events_950 = run(asm, [pb.stream_commit(950, 1, 2, T0)])
    events_951 = run(asm, [pb.stream_commit(951, 3, 4, T0)])
    assert [c[1] for c in rows(events_950)] == [
        {"id": 1, "name": "a", "body": "b"},
        {"id": 3, "name": "c", "body": "d"},
    ]
    assert rows(events_951) == [("insert", {"id": 2}, None)]


def test_stream_origin() -> None:
    asm = Assembler(2)
    events = run(
        asm,
        [
            ITEMS,
            pb.stream_start(990, True),
            pb.origin(0, "up"),
            pb.insert(16384, [b"1", b"a", b"b"], xid=990),
            pb.stream_stop(),
            pb.stream_commit(990, 1, 2, T0),
        ],
    )
    assert events[0] == TxBegin(Transaction(990, 1, 2, T0, origin="up", streamed=True))


# --- two-phase -------------------------------------------------------------------------


def test_prepared_transaction_and_its_outcome() -> None:
    asm = Assembler(3)
    events = run(
        asm,
        [
            ITEMS,
            pb.begin_prepare(0xA000, 0xA040, T0, 1001, "gid-1"),
            pb.insert(16384, [b"1", b"a", b"b"]),
            pb.prepare(0xA000, 0xA040, T0, 1001, "gid-1"),
        ],
    )
    tx = Transaction(1001, 0xA000, 0xA040, T0, gid="gid-1", prepared=True)
    assert events[0] == TxBegin(tx) and events[-1] == TxCommit(tx)
    assert rows(events) == [("insert", {"id": 1, "name": "a", "body": "b"}, None)]
    assert not asm.open_transactions()
    outcome = run(
        asm,
        [
            pb.commit_prepared(0xB000, 0xB040, T1, 1001, "gid-1"),
            pb.rollback_prepared(0xA040, 0xC040, T0, T1, 1002, "gid-2"),
        ],
    )
    assert outcome == [
        CommitPrepared(1001, "gid-1", 0xB000, 0xB040, T1),
        RollbackPrepared(1002, "gid-2", 0xA040, 0xC040, T0, T1),
    ]


def test_stream_prepare() -> None:
    asm = Assembler(3)
    run(asm, [ITEMS, *streamed(1100, [pb.insert(16384, [b"1", b"a", b"b"], xid=1100)])])
    events = run(asm, [pb.stream_prepare(0xD000, 0xD040, T0, 1100, "sp")])
    tx = Transaction(1100, 0xD000, 0xD040, T0, gid="sp", prepared=True, streamed=True)
    assert events[0] == TxBegin(tx)
    assert len(rows(events)) == 1
    assert not asm.open_transactions()


# --- spill to disk ------------------------------------------------------------------------


class _CountingTempFiles:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened = 0
        real = tempfile.TemporaryFile

        def counting(*args: Any, **kwargs: Any) -> Any:
            self.opened += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(tempfile, "TemporaryFile", counting)


def _rendered_json(events: Iterable[Event]) -> bytes:
    from io import BytesIO

    from pgtail.render.jsonl import JsonLinesRenderer

    out = BytesIO()
    renderer = JsonLinesRenderer(out)
    for event in events:
        renderer.render(event)
    return out.getvalue()


def test_encoded_inserts_past_the_bound_go_to_a_file_not_raw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plain inserts past the memory bound keep being encoded on arrival: the oldest
    encoded lines move to a file and come back, in order, at the commit."""
    from pgtail.render.jsonl import json_line_encoder

    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", 10)
    counter = _CountingTempFiles(monkeypatch)
    body = [pb.insert(16384, [str(i).encode(), b"n", b"x" * (i % 90)]) for i in range(3000)]
    bound = 150_000
    asm = Assembler(1, spill_bytes=bound, encoder=json_line_encoder)
    head = [ITEMS, *tx_block(4, body)[:-1]]
    for payload in head:
        assert list(asm.feed(payload)) == []
        held = asm._current
        assert held is None or held.rows_bytes <= bound  # never past the bound
    held = asm._current
    assert held is not None and not held.raw  # never raw: every row encoded on arrival
    assert held.lines_file is not None and counter.opened == 1  # one file for all spills
    spilled = [r for r in held.rows if type(r) is SpilledRun]
    assert 0 < len(spilled) < len(held.rows)  # the oldest runs spilled, the newest not
    assert held.rows[: len(spilled)] == spilled
    lines_file = held.lines_file
    events = run(asm, [pb.commit(0x1000, 0x1010, T0)])
    assert lines_file.closed  # and gone with the transaction
    assert sum(e.count for e in events if isinstance(e, EncodedRows)) == 3000
    general = run(Assembler(1), [ITEMS, *tx_block(4, body)])
    assert _rendered_json(events) == _rendered_json(general)


def test_a_full_disk_while_holding_is_an_error_not_a_second_copy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failure to spill is not a decode failure: it propagates as a SpillError naming
    the directory (the CLI prints it) instead of sending the change it was holding down
    the raw path a second time."""
    from pgtail.render.jsonl import json_line_encoder

    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", 10)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", full)
    body = [pb.insert(16384, [str(i).encode(), b"n", b"x" * 50]) for i in range(500)]
    # encoded lines (make_room), then events going raw (Held.spill)
    for encoder in (json_line_encoder, None):
        asm = Assembler(1, spill_bytes=10_000, encoder=encoder)
        fed = 0
        with pytest.raises(SpillError, match="No space left on device") as caught:
            for payload in [ITEMS, *tx_block(4, body)]:
                fed += payload[:1] == b"I"
                list(asm.feed(payload))
        assert tempfile.gettempdir() in str(caught.value) and "TMPDIR" in str(caught.value)
        held = asm._current
        assert held is not None and held.raw is (encoder is None)
        assert 0 < fed < len(body)
        assert held.count + len(held.held) == fed  # each change fed held once, not twice


def test_a_bound_encoded_lines_cannot_free_makes_the_transaction_raw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Updates that carry their old key are held as events, which do not spill: past the
    bound the rest goes raw, after the encoded lines that did spill (all of it in order at
    the commit)."""
    from pgtail.render.jsonl import json_line_encoder

    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", 10)
    body: list[bytes] = []
    for i in range(1500):
        body.append(pb.insert(16384, [str(i).encode(), b"n", b"x" * 40]))
        if i >= 300:  # the key changes: the old key comes along
            old_key = [str(i).encode(), None, None]
            body.append(pb.update(16384, [str(-i).encode(), b"n", b"y" * 40], old=old_key))
    asm = Assembler(1, spill_bytes=60_000, encoder=json_line_encoder)
    run(asm, [ITEMS, *tx_block(4, body)[:-1]])
    held = asm._current
    assert held is not None and held.raw and held.lines_file is not None
    events = run(asm, [pb.commit(0x1000, 0x1010, T0)])
    general = run(Assembler(1), [ITEMS, *tx_block(4, body)])
    assert _rendered_json(events) == _rendered_json(general)
    seqs = [e.seq for e in events if isinstance(e, Change)]
    assert len(seqs) == len(body) - sum(e.count for e in events if isinstance(e, EncodedRows))


def _big_mixed_workload() -> list[bytes]:
    body: list[bytes] = []
    for i in range(300):
        body.append(pb.insert(16384, [str(i).encode(), f"name {i}".encode(), b"x" * (i % 50)]))
        if i % 7 == 0:
            body.append(pb.update(16384, [str(i).encode(), b"upd", "u"]))
        if i % 11 == 0:
            body.append(pb.delete(16384, [str(i).encode(), None, None]))
    stream_body: list[list[bytes]] = [[], [], []]
    for i in range(300):
        xid = 2000 if i < 100 or i >= 200 else (2001 if i < 150 else 2002)
        stream_body[i // 100].append(
            pb.insert(16384, [str(i).encode(), b"s", b"y" * (i % 30)], xid=xid)
        )
    return [
        ITEMS,
        *tx_block(1, body),
        *streamed(2000, stream_body[0]),
        *streamed(2000, stream_body[1], first=False),
        pb.stream_abort(2000, 2002),  # drops rows 150..199 (xid 2002) only
        *streamed(2000, stream_body[2], first=False),
        pb.stream_commit(2000, 0xE000, 0xE040, T0),
    ]


@pytest.mark.parametrize("spill_bytes", [1, 500, 20_000])
def test_spill_to_disk_gives_the_same_events(
    spill_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = run(Assembler(2), _big_mixed_workload())
    counter = _CountingTempFiles(monkeypatch)
    spilled = run(Assembler(2, spill_bytes=spill_bytes), _big_mixed_workload())
    assert counter.opened >= 2  # both the plain and the streamed transaction spilled
    assert spilled == expected
    ids = [e.new["id"] for e in spilled if isinstance(e, Change) and e.tx.streamed and e.new]
    assert ids == [*range(150), *range(200, 300)]


def test_no_spill_under_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = _CountingTempFiles(monkeypatch)
    run(Assembler(2), _big_mixed_workload())
    assert counter.opened == 0


def test_subtransaction_abort_inside_spilled_part(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = _CountingTempFiles(monkeypatch)
    for spill_bytes in (1, 300, 10**9):
        events = run(Assembler(2, spill_bytes=spill_bytes), [ITEMS, *_subxact_stream()])
        assert [r[1]["id"] if "id" in r[1] else r[1]["k"] for r in rows(events)] == [1, 4, 11, 5]
    assert counter.opened >= 2


def test_held_file_is_closed_after_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    files: list[Any] = []
    real = tempfile.TemporaryFile

    def keep(*args: Any, **kwargs: Any) -> Any:
        handle = real(*args, **kwargs)
        files.append(handle)
        return handle

    monkeypatch.setattr(tempfile, "TemporaryFile", keep)
    run(Assembler(2, spill_bytes=1), _big_mixed_workload())
    assert files and all(f.closed for f in files)


def test_reset_forgets_held_transactions() -> None:
    asm = Assembler(2)
    run(asm, [ITEMS, pb.begin(1, T0, 1), pb.insert(16384, [b"1", b"a", b"b"])])
    asm.reset()
    run(asm, [pb.stream_start(5, True), pb.insert(16384, [b"1", b"a", b"b"], xid=5)])
    assert asm.open_transactions()
    asm.reset()
    assert not asm.open_transactions()
    assert rows(run(asm, [ITEMS, *tx_block(2, [pb.insert(16384, [b"2", b"a", b"b"])])])) == [
        ("insert", {"id": 2, "name": "a", "body": "b"}, None)
    ]


# --- fuzz ---------------------------------------------------------------------------------

_VALID_POOL = [
    ITEMS,
    ITEMS_FULL,
    pb.begin(1, T0, 1),
    pb.commit(1, 2, T0),
    pb.origin(5, "o"),
    pb.insert(16384, [b"1", b"a", "u"]),
    pb.insert(16384, [b"x", None, b"b"]),  # a value the int converter cannot parse
    pb.update(16384, [b"1", b"a", "u"], old=[b"1", None, None]),
    pb.update(16384, [b"1", b"a", b"c"], old=[b"1", b"b", b"c"], old_kind="O"),
    pb.delete(16384, [b"1", None, None]),
    pb.truncate([16384]),
    pb.message("p", b"c", 1),
    pb.message("p", b"c", 1, transactional=False),
    pb.stream_start(7, True),
    pb.stream_stop(),
    pb.insert(16384, [b"1", b"a", b"b"], xid=7),
    pb.insert(16384, [b"1", b"a", b"b"], xid=8),
    pb.stream_abort(7, 8),
    pb.stream_abort(7, 7),
    pb.stream_commit(7, 1, 2, T0),
    pb.begin_prepare(1, 2, T0, 3, "g"),
    pb.prepare(1, 2, T0, 3, "g"),
    pb.commit_prepared(1, 2, T0, 3, "g"),
    pb.stream_prepare(1, 2, T0, 7, "g"),
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_VALID_POOL),
            st.binary(max_size=40),
            st.sampled_from(_VALID_POOL).flatmap(
                lambda p: st.integers(0, len(p)).map(lambda n: p[:n])
            ),
        ),
        max_size=25,
    ),
    st.sampled_from([1, 64, 1 << 20]),
)
def test_any_sequence_decodes_or_raises_decode_error(payloads: list[bytes], spill: int) -> None:
    """Whatever arrives, in whatever order: events, or DecodeError, never another error."""
    asm = Assembler(3, spill_bytes=spill)
    try:
        for payload in payloads:
            for _event in asm.feed(payload):
                pass
    except DecodeError:
        pass
    asm.reset()


# --- conversion on arrival ------------------------------------------------------------------


@pytest.mark.parametrize("deferred_rows", [0, 2])
def test_rows_are_converted_on_arrival_with_the_schema_of_that_moment(
    deferred_rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Relation in the middle of a transaction applies to the rows after it only.

    With ``deferred_rows`` 2 the first row and the Relation are held raw and converted
    when the second row arrives; the update after them is converted on arrival.
    """
    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", deferred_rows)
    wide = pb.relation(
        16384,
        "public",
        "items",
        [("id", INT4, True), ("name", TEXT, False), ("body", TEXT, False), ("n", INT4, False)],
    )
    payloads = [
        ITEMS,
        *tx_block(
            1,
            [
                pb.insert(16384, [b"1", b"a", b"b"]),
                wide,
                pb.insert(16384, [b"2", b"c", b"d", b"4"]),
                pb.update(16384, [b"2", b"e", "u", b"5"], old=[b"2", None, None, None]),
            ],
        ),
    ]
    asm = Assembler(1)
    seen: list[Event] = []
    for payload in payloads[:-1]:
        seen.extend(asm.feed(payload))
    assert seen == []
    held = asm._current
    assert held is not None and not held.raw and not held.deferred and len(held.rows) == 3
    assert len(held.held) == 0
    events = list(asm.feed(payloads[-1]))
    assert rows(events) == [
        ("insert", {"id": 1, "name": "a", "body": "b"}, None),
        ("insert", {"id": 2, "name": "c", "body": "d", "n": 4}, None),
        ("update", {"id": 2, "name": "e", "n": 5}, {"id": 2}),
    ]
    changes_ = [e for e in events if isinstance(e, Change)]
    assert [c.seq for c in changes_] == [0, 1, 2]
    assert {c.tx for c in changes_} == {events[0].tx}  # type: ignore[union-attr]
    assert events[0].tx.end_lsn == 0x1010  # type: ignore[union-attr]
    assert [len(c.table.columns) for c in changes_] == [3, 4, 4]
    # the same when the transaction goes raw at every possible point
    for spill_bytes in (1, 700, 1500, 2500):
        assert run(Assembler(1, spill_bytes=spill_bytes), payloads) == events


def test_going_raw_mid_transaction_keeps_order_tx_and_seq() -> None:
    body = [pb.insert(16384, [str(i).encode(), b"n", b"b"]) for i in range(50)]
    body.insert(10, pb.message("m", b"ten", 0x20))
    body.insert(20, pb.truncate([16384]))
    expected = run(Assembler(1), [ITEMS, *tx_block(3, body)])
    asm = Assembler(1, spill_bytes=4000)
    events = run(asm, [ITEMS, *tx_block(3, body)])
    assert events == expected
    assert [getattr(e, "seq", None) for e in events[1:-1]] == list(range(51 + 1))
    assert isinstance(events[11], Message) and events[11].tx == events[0].tx  # type: ignore[union-attr]
    assert isinstance(events[21], Truncate) and events[21].seq == 20


def test_bad_value_in_a_rolled_back_subtransaction_is_never_decoded() -> None:
    """Converting on arrival must not fail on a change that a Stream Abort drops later."""
    bad = pb.insert(16384, [b"1", b"a"], xid=801)  # 2 columns for a 3-column relation
    payloads = [
        ITEMS,
        *streamed(800, [pb.insert(16384, [b"1", b"top", b"x"], xid=800), bad]),
        pb.stream_abort(800, 801),
        *streamed(800, [pb.insert(16384, [b"2", b"after", b"y"], xid=800)], first=False),
        pb.stream_commit(800, 0x3000, 0x3010, T0),
    ]
    events = run(Assembler(2), payloads)
    assert [r[1]["id"] for r in rows(events)] == [1, 2]
    assert [e.seq for e in events if isinstance(e, Change)] == [0, 1]
    # not rolled back: the error comes at the commit, as it always did
    asm = Assembler(2)
    run(asm, [ITEMS, *streamed(800, [bad])])
    with pytest.raises(DecodeError, match="2 columns for public.items"):
        run(asm, [pb.stream_commit(800, 0x3000, 0x3010, T0)])


def test_memory_bound_sends_the_rest_of_a_transaction_raw(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", 10)
    counter = _CountingTempFiles(monkeypatch)
    body = [pb.insert(16384, [str(i).encode(), b"n", b"x" * 100]) for i in range(2000)]
    asm = Assembler(1, spill_bytes=100_000)
    run(asm, [ITEMS, *tx_block(4, body[:-1])[:-1]])
    held = asm._current
    assert held is not None and held.raw
    assert 0 < len(held.rows) < 1000  # the converted part stopped at the bound
    assert held.rows_bytes <= 100_000 + 2000
    assert counter.opened == 1  # the raw rest went to a file
    events = run(asm, [body[-1], pb.commit(0x1000, 0x1010, T0)])
    assert [r[1]["id"] for r in rows(events)] == list(range(2000))
    assert [e.seq for e in events if isinstance(e, Change)] == list(range(2000))


def test_every_raw_boundary_gives_the_same_streamed_events() -> None:
    """Going raw before, inside or after a rolled-back subtransaction changes nothing."""
    expected = run(Assembler(2), [ITEMS, *_subxact_stream()])
    converted = set()
    for spill_bytes in range(1, 4000, 50):
        asm = Assembler(2, spill_bytes=spill_bytes)
        events = run(asm, [ITEMS, *_subxact_stream()][:-1])
        state = asm._streams[700]
        converted.add((len(state.rows), len(state.held)))
        events += run(asm, [_subxact_stream()[-1]])
        assert events == expected, spill_bytes
    assert len(converted) >= 3  # the raw boundary fell at several places
    big = _big_mixed_workload()
    expected = run(Assembler(2), big)
    for spill_bytes in (2_000, 9_000, 30_000, 60_000, 100_000):
        assert run(Assembler(2, spill_bytes=spill_bytes), big) == expected, spill_bytes


@pytest.mark.parametrize("fmt", ["json", "sql"])
def test_encoded_streamed_inserts_survive_subtransaction_aborts_as_events_do(fmt: str) -> None:
    """Inserts of a streamed transaction take the fast path too: a rolled-back
    subtransaction drops its encoded lines (and no others) wherever the raw boundary
    falls, and the rendering is the general path's, byte for byte."""
    from pgtail.render import make_renderer
    from pgtail.render import row_encoder as encoder_for

    def rendered(events: list[Event]) -> bytes:
        from io import BytesIO

        out = BytesIO()
        renderer = make_renderer(fmt, out)
        for event in events:
            renderer.render(event)
        renderer.close()
        return out.getvalue()

    encoder = encoder_for(fmt)
    stream = [ITEMS, *_subxact_stream()]
    expected = rendered(run(Assembler(2), stream))
    boundaries = set()
    for spill_bytes in [*range(1, 4000, 50), 10**9]:
        asm = Assembler(2, spill_bytes=spill_bytes, encoder=encoder)
        events = run(asm, stream[:-1])
        state = asm._streams[700]
        boundaries.add((state.count, len(state.held)))
        events += run(asm, stream[-1:])
        # the four surviving inserts encoded: on arrival, or from the raw part at the commit
        assert sum(e.count for e in events if isinstance(e, EncodedRows)) == 4
        assert rendered(events) == expected, spill_bytes
    assert len(boundaries) >= 3  # the raw boundary fell at several places
    big = _big_mixed_workload()
    expected = rendered(run(Assembler(2), big))
    for spill_bytes in (1, 2_000, 9_000, 30_000, 60_000, 100_000, 10**9):
        events = run(Assembler(2, spill_bytes=spill_bytes, encoder=encoder), big)
        assert rendered(events) == expected, spill_bytes


def test_converted_events_share_their_transaction_which_later_commits_leave_alone() -> None:
    asm = Assembler(1)
    first = run(asm, [ITEMS, *tx_block(1, [pb.insert(16384, [b"1", b"a", b"b"])], 0x10, 0x20)])
    second = run(asm, tx_block(2, [pb.insert(16384, [b"2", b"c", b"d"])], 0x30, 0x40))
    for events, (xid, commit_lsn, end_lsn) in ((first, (1, 0x10, 0x20)), (second, (2, 0x30, 0x40))):
        begin, change, commit = events
        assert isinstance(begin, TxBegin) and isinstance(change, Change)
        assert isinstance(commit, TxCommit)
        assert change.tx is begin.tx is commit.tx
        assert (begin.tx.xid, begin.tx.commit_lsn, begin.tx.end_lsn) == (xid, commit_lsn, end_lsn)
        assert begin.tx.commit_time == T0 and hash(begin.tx) == hash(change.tx)
    assert first[0].tx != second[0].tx  # type: ignore[union-attr]


def test_small_transaction_stays_raw_until_its_commit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", 5)
    body = [pb.insert(16384, [str(i).encode(), b"n", b"b"]) for i in range(8)]
    expected = run(Assembler(1), [ITEMS, *tx_block(9, body)])
    asm = Assembler(1)
    run(asm, [ITEMS, *tx_block(9, body[:4])[:-1]])
    # held as they came, in the quick lane (below the deferred bound: it stays below it)
    assert asm._current is None and asm._quick.records == body[:4]
    run(asm, body[4:5])  # the fifth change: converted from here on
    held = asm._current
    assert held is not None and not held.raw and not held.deferred and len(held.rows) == 5
    assert asm._quick.records is None
    run(asm, body[5:])
    assert len(held.rows) == 8
    assert run(asm, [pb.commit(0x1000, 0x1010, T0)]) == expected
    assert [r[1]["id"] for r in rows(expected)] == list(range(8))


@pytest.mark.parametrize("spill_bytes", [1, 3_000, 30_000, 10**9])
def test_catch_up_at_any_point_gives_the_same_events(spill_bytes: int) -> None:
    big = _big_mixed_workload()
    expected = run(Assembler(2), big)
    for deferred_rows in (0, 1, 7, 100, 10_000):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(assembler_module, "_DEFERRED_ROWS", deferred_rows)
            assert run(Assembler(2, spill_bytes=spill_bytes), big) == expected, deferred_rows


# --- small transactions made at their commit at once ----------------------------------

OTHER = pb.relation(16390, "public", "other", [("k", INT4, True), ("v", TEXT, False)])


@pytest.mark.parametrize("fmt", ["json", None])
def test_the_quick_lane_gives_what_the_general_way_gives(
    fmt: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transaction that comes as a Begin, row changes and a Commit is held as its
    payloads and made into events at the Commit (the assembler's quick lane). Whatever
    else comes inside it sends it down the general way first; events and errors are the
    same as with the lane closed."""
    from pgtail.render import row_encoder

    encoder = row_encoder(fmt) if fmt else None
    row = pb.insert(16384, [b"1", b"a", b"b"])
    big = pb.insert(16384, [b"2", b"a", b"x" * 5000])  # past the lane's bytes (spill 10 kB)
    cases: list[list[bytes]] = [
        [],  # an empty transaction (before PostgreSQL 15: it changed no published table)
        [row, pb.origin(0x99, "upstream"), row],  # an Origin inside it
        [row, pb.message("p", b"hi", 0x77), row],
        [row, ITEMS, row],  # a Relation inside it
        [row, pb.type_(70000, "public", "mood"), row],
        [row] * 12,  # more rows than the lane holds (the deferred bound below: 10)
        [row, big, row],
        [row, pb.truncate([16384])],
        [pb.insert(16999, [b"1"])],  # a relation never described: an error at the Commit
        [row, pb.begin(0x5000, T0, 1)],  # a second Begin: an error
    ]
    payloads: list[bytes] = [ITEMS]
    for xid, body in enumerate(cases, start=800):
        lsn = 0x1000 * xid
        payloads += [pb.begin(lsn, T0, xid), *body, pb.commit(lsn, lsn + 0x10, T1)]
    payloads += [pb.begin(0x900000, T0, 900), row, pb.commit(0x900000, 0x900010, T1)[:-1]]
    monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", 10)

    def events_of(lane_open: bool) -> tuple[list[Any], list[bool]]:
        with pytest.MonkeyPatch.context() as patch:
            if not lane_open:  # no Begin is of the length the lane takes
                patch.setattr(fastpath_module, "BEGIN_LENGTH", -1)
            asm = Assembler(1, encoder=encoder, spill_bytes=80_000)
            out: list[Any] = []
            open_after: list[bool] = []
            for payload in payloads:
                try:
                    out.extend(asm.feed(payload))
                except DecodeError as exc:
                    out.append(("error", str(exc)))
                    asm.reset()
                open_after.append(asm.open_transactions())
            return out, open_after

    quick, quick_open = events_of(True)
    general, general_open = events_of(False)
    assert quick == general
    assert quick_open == general_open  # an open transaction in the lane is one too
    assert sum(type(e) is TxCommit for e in quick) == len(cases) - 2
    assert [e for e in quick if type(e) is tuple] == [
        ("error", general[i][1]) for i, e in enumerate(general) if type(e) is tuple
    ]
    # an unknown relation; a second Begin, then its Commit without one; a cut Commit
    assert len([e for e in quick if type(e) is tuple]) == 4


@pytest.mark.parametrize("fmt", ["json", "sql", None])
def test_small_transactions_at_once_give_the_events_of_the_general_way(
    fmt: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small transaction held raw is made into events at its commit in one go
    (`changes.fastpath.quick_events`); the events are those of the general way, whatever it
    holds: inserts of two tables in turn, NULLs, unchanged TOAST, updates, deletes, a
    truncate, a Relation in the middle, more rows than the quick way takes, a bad row."""
    from pgtail.render import row_encoder

    encoder = row_encoder(fmt) if fmt else None
    many = [pb.insert(16384, [str(i).encode(), b"n", b"b"]) for i in range(100)]
    bodies: list[list[bytes]] = [
        [ITEMS, OTHER, pb.insert(16384, [b"1", b"one", b"x"])],
        [pb.insert(16384, [b"2", b"two", b"y"]), pb.insert(16384, [b"3", None, b"z"])],
        [
            pb.insert(16384, [b"4", b"a", b"b"]),
            pb.insert(16390, [b"1", b"v"]),
            pb.insert(16390, [b"2", b"w"]),
            pb.insert(16384, [b"5", b"c", b"d"]),
        ],
        [pb.update(16384, [b"4", b"renamed", "u"]), pb.insert(16384, [b"6", b"e", b"f"])],
        [pb.update(16384, [b"40", b"k", b"b"], old=[b"4", None, None])],
        [pb.delete(16384, [b"5", None, None]), pb.delete(16390, [b"1", None])],
        [pb.insert(16384, [b"7", b"g", b"h"]), pb.truncate([16390])],
        [pb.insert(16384, [b"8", b"i", b"j"]), OTHER, pb.insert(16390, [b"3", b"x"])],
        many,
        [pb.insert(16384, [b"oops", b"bad", b"row"])],  # not an int4: a conversion error
    ]
    payloads: list[bytes] = []
    for xid, body in enumerate(bodies, start=700):
        lsn = 0x1000 * xid
        payloads += [pb.begin(lsn, T0, xid), *body, pb.commit(lsn, lsn + 0x10, T1)]

    def events_of(quick_rows: int) -> list[Any]:
        monkeypatch.setattr(fastpath, "QUICK_ROWS", quick_rows)
        asm = Assembler(1, encoder=encoder)
        out: list[Any] = []
        for payload in payloads:
            try:
                out.extend(asm.feed(payload))
            except Exception as exc:  # noqa: BLE001 - the same error either way
                out.append(("error", type(exc).__name__, str(exc)))
        return out

    quick = events_of(64)
    general = events_of(0)  # no transaction is small enough: the general way for all
    assert quick == general
    assert sum(type(e) is TxCommit for e in quick) == len(bodies) - 1
    assert quick[-1][0] == "error"


def test_encode_line_hands_the_readers_values_to_the_renderers_encoder() -> None:
    """pgoutput only reads a text tuple's values; changes/ hands them to the renderer's
    encoder: ``plain`` when all are text, ``with_nulls`` when some are NULL, None (the
    general path) when the reader declines the tuple or the encoder raises."""
    calls: list[tuple[str, tuple[object, ...]]] = []

    def encoder(name: str) -> Any:
        def encode(seq: int, *values: bytes | None) -> bytes:
            calls.append((name, (seq, *values)))
            if values[0] == b"boom":
                raise ValueError("the encoder's own failure")
            return b"line %d" % seq

        return encode

    line = (po.text_tuple_reader(3), encoder("plain"), encoder("with_nulls"))

    def encode(payload: bytes, offset: int, seq: int) -> bytes | None:
        return encode_line(line, payload, offset, seq)

    assert encode(b"..." + pb.tuple_data([b"1", None, b"x y"]), 3, 7) == b"line 7"
    assert encode(pb.tuple_data([b"1", b"", b"z"]), 0, 8) == b"line 8"
    assert calls == [("with_nulls", (7, b"1", None, b"x y")), ("plain", (8, b"1", b"", b"z"))]
    calls.clear()
    assert encode(pb.tuple_data([b"1", "u", b"z"]), 0, 1) is None  # unchanged TOAST
    assert encode(pb.tuple_data([b"1", b"2"]), 0, 1) is None  # another column count
    assert calls == []
    assert encode(pb.tuple_data([b"boom", b"2", b"3"]), 0, 1) is None  # the encoder raised
    assert calls == [("plain", (1, b"boom", b"2", b"3"))]
