"""Real pgoutput bytes from every PostgreSQL major from 14, decoded into change events and checked.

One workload (tests/workload.py) runs once per server while a slot per mode watches it;
each mode (protocol version x text/binary x streaming x two-phase) is then captured with
pg_logical_slot_peek_binary_changes and fed through `Assembler`.
"""

from __future__ import annotations

import io
import select
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
import psycopg2
import psycopg2.extras
import pytest

from pgtail import catalog
from pgtail.changes import (
    Assembler,
    Change,
    CommitPrepared,
    EncodedRows,
    Event,
    InsertEncoders,
    Message,
    RollbackPrepared,
    Table,
    Transaction,
    Truncate,
    TxBegin,
    TxCommit,
)
from pgtail.changes import assembler as assembler_module
from pgtail.render import RenderOptions, jsonl, make_renderer
from pgtail.render import sql as sql_render
from pgtail.server import LocalServer
from pgtail.values import UserType, dumps
from tests import workload as wl
from tests.helpers import fresh_database

# every mode asks for logical messages, which pgoutput sends from PostgreSQL 14
pytestmark = pytest.mark.min_major(14)


@dataclass(frozen=True)
class Mode:
    proto: int
    binary: bool = False
    streaming: str | None = None  # "on", or "parallel" (protocol 4)
    two_phase: bool = False

    @property
    def name(self) -> str:
        parts = [f"v{self.proto}", "binary" if self.binary else "text"]
        if self.streaming:
            parts.append(f"stream-{self.streaming}")
        if self.two_phase:
            parts.append("2pc")
        return "-".join(parts)

    def min_major(self) -> int:
        if self.proto >= 4 or self.streaming == "parallel":
            return 16
        if self.proto >= 3 or self.two_phase:
            return 15
        return 14  # binary, streaming, protocol 2 and logical messages

    def options(self) -> list[str]:
        return wl.options(
            self.proto, binary=self.binary, streaming=self.streaming, two_phase=self.two_phase
        )


MODES = [
    Mode(1),
    Mode(1, binary=True),
    Mode(2),
    Mode(2, streaming="on"),
    Mode(2, binary=True, streaming="on"),
    Mode(3, two_phase=True),
    Mode(3, streaming="on", two_phase=True),
    Mode(3, binary=True, streaming="on", two_phase=True),
    Mode(4, streaming="parallel", two_phase=True),
    Mode(4, binary=True, streaming="parallel", two_phase=True),
    Mode(4, binary=True),
]
MODE_IDS = [m.name for m in MODES]


@dataclass
class Capture:
    major: int
    info: wl.Info
    payloads: dict[str, list[tuple[int, bytes]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # mode name -> server error
    user_types: dict[int, UserType] = field(default_factory=dict)  # the workload's enums


def _decode(
    mode: Mode, payloads: list[tuple[int, bytes]], user_types: dict[int, UserType] | None = None
) -> list[Event]:
    asm = Assembler(mode.proto, binary=mode.binary, user_types=user_types)
    events: list[Event] = []
    for _lsn, payload in payloads:
        events.extend(asm.feed(payload))
    assert not asm.open_transactions()
    return events


@pytest.fixture(scope="module")
def capture(pg: LocalServer) -> Iterator[Capture]:
    for database in fresh_database(pg):
        conn = database.connect()
        try:
            wl.create_schema(conn)
            slots = {}
            for i, mode in enumerate(MODES):
                if mode.min_major() > pg.major:
                    continue
                slots[mode.name] = f"{database.name}_{i}"
                wl.create_slot(conn, slots[mode.name], two_phase=mode.two_phase)
            info = wl.run(conn, tag=database.name)
            result = Capture(pg.major, info)
            with conn.cursor() as cur:
                cur.execute(
                    f"SELECT oid FROM pg_type WHERE typnamespace = '{wl.SCHEMA}'::regnamespace"
                )
                result.user_types = catalog.user_types(conn, [int(r[0]) for r in cur.fetchall()])
            # text output functions run in this session: a non-UTC zone must not matter
            with conn.cursor() as cur:
                cur.execute("SET TimeZone = 'Asia/Kolkata'")
            for mode in MODES:
                slot = slots.get(mode.name) or f"{database.name}_0"
                try:
                    result.payloads[mode.name] = wl.peek(conn, slot, mode.options())
                except psycopg2.Error as exc:
                    result.errors[mode.name] = str(exc).strip()
            yield result
        finally:
            conn.close()


def events_for(capture: Capture, mode: Mode) -> list[Event]:
    assert mode.name not in capture.errors, capture.errors.get(mode.name)
    return _decode(mode, capture.payloads[mode.name], capture.user_types)


def changes_of(events: list[Event], table: str) -> list[Change]:
    return [e for e in events if isinstance(e, Change) and e.table.name == table]


def as_json(value: Any) -> Any:
    return orjson.loads(dumps(value))


# --- every mode on its own ------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_capture_decodes_exactly(capture: Capture, mode: Mode) -> None:
    if mode.min_major() > capture.major:
        # not a skip: the server must refuse what it cannot do, and we must not guess
        assert mode.name in capture.errors
        # (PostgreSQL 14 refuses the two_phase option before it looks at the protocol)
        error = capture.errors[mode.name]
        assert "proto" in error or "stream" in error or "option: two_phase" in error
        return
    events = events_for(capture, mode)
    info = capture.info
    raw_kinds = {chr(p[0]) for _, p in capture.payloads[mode.name]}

    # transactions are well formed: begin, changes numbered from 0, commit
    open_tx: Transaction | None = None
    seq = 0
    for event in events:
        if isinstance(event, TxBegin):
            assert open_tx is None
            open_tx, seq = event.tx, 0
        elif isinstance(event, TxCommit):
            assert event.tx == open_tx
            open_tx = None
        elif isinstance(event, (Change, Truncate)) or (
            isinstance(event, Message) and event.transactional
        ):
            assert event.tx == open_tx and event.seq == seq
            seq += 1
    assert open_tx is None

    # every type: exact values (text and binary give the same JSON)
    all_types = changes_of(events, "all_types")
    assert [c.op for c in all_types] == ["insert"] * 3 + ["update", "update", "delete"]
    table = all_types[0].table
    assert table.qualified_name == "wl.all_types"
    assert table.replica_identity == "default" and table.key_columns == ("id",)
    assert {c.name: c.type_name for c in table.columns}["tstz"] == "timestamp with time zone"
    assert {c.name: c.type_name for c in table.columns}["mo"] == "wl.mood"
    for change, expected in zip(
        all_types[:3], [wl.EXPECTED_ROW_1, wl.EXPECTED_ROW_2, None], strict=True
    ):
        assert change.new is not None
        got = as_json(change.new)
        if expected is None:  # row 3: NULL everywhere but the key
            assert got == {name: (3 if name == "id" else None) for name in got}
            assert len(got) == len(wl.EXPECTED_ROW_1)
            continue
        assert got == expected
    update_in_place, update_key, delete = all_types[3:]
    assert update_in_place.old is None and update_in_place.old_kind is None
    assert update_in_place.key == {"id": 1}
    assert update_in_place.new is not None
    assert (update_in_place.new["t"], update_in_place.new["i4"]) == ("changed", 2147483646)
    assert update_key.old == {"id": 2} and update_key.old_kind == "key"
    assert update_key.new is not None and update_key.new["id"] == 20
    assert update_key.key == {"id": 2}
    assert delete.new is None and delete.old == {"id": 3} and delete.old_kind == "key"

    # REPLICA IDENTITY FULL
    full = changes_of(events, "full_ident")
    assert [(c.op, c.new, c.old, c.old_kind) for c in full] == [
        ("insert", {"id": 1, "v": "a"}, None, None),
        ("insert", {"id": 2, "v": "b"}, None, None),
        ("update", {"id": 1, "v": "a2"}, {"id": 1, "v": "a"}, "full"),
        ("delete", None, {"id": 2, "v": "b"}, "full"),
    ]
    assert full[0].table.replica_identity == "full"

    # REPLICA IDENTITY USING INDEX (code)
    index = changes_of(events, "index_ident")
    assert [(c.op, c.new, c.old, c.old_kind) for c in index] == [
        ("insert", {"id": 1, "code": "k1", "v": "v"}, None, None),
        ("update", {"id": 1, "code": "k1", "v": "v2"}, None, None),
        ("update", {"id": 1, "code": "k2", "v": "v2"}, {"code": "k1"}, "key"),
        ("delete", None, {"code": "k2"}, "key"),
    ]
    assert index[0].table.replica_identity == "index"
    assert index[0].table.key_columns == ("code",)
    assert [c.key for c in index] == [
        {"code": "k1"},
        {"code": "k1"},
        {"code": "k1"},
        {"code": "k2"},
    ]

    # REPLICA IDENTITY NOTHING
    nothing = changes_of(events, "no_ident")
    assert [(c.op, c.new) for c in nothing] == [
        ("insert", {"id": 1, "v": "x"}),
        ("insert", {"id": 2, "v": "with message"}),
    ]
    assert nothing[0].table.replica_identity == "nothing" and nothing[0].key is None

    # TOAST: the untouched big value is reported as unchanged, never as NULL or a value
    toasted = changes_of(events, "toasted")
    assert [c.op for c in toasted] == ["insert", "update", "update"]
    assert toasted[0].new == {"id": 1, "big": info.big_text, "small": "s"}
    assert len(info.big_text) == wl.BIG_TEXT_CHUNKS * 32
    assert toasted[1].new == {"id": 1, "small": "s2"}
    assert toasted[1].unchanged_toast == ("big",)
    assert toasted[2].new == {"id": 1, "big": info.big_text_updated, "small": "s2"}
    assert toasted[2].unchanged_toast == ()

    # truncate
    truncates = [e for e in events if isinstance(e, Truncate)]
    assert len(truncates) == 1
    assert [t.qualified_name for t in truncates[0].tables] == ["wl.trunc_me"]
    assert truncates[0].cascade and truncates[0].restart_identity
    assert [c.op for c in changes_of(events, "trunc_me")] == ["insert", "insert"]

    # logical messages
    messages = [e for e in events if isinstance(e, Message)]
    assert [(m.prefix, m.content, m.transactional) for m in messages] == [
        ("wl", b"transactional", True),
        ("wl", b"not transactional", False),
        ("wl-bin", b"\x00\xff", False),
    ]
    assert messages[0].tx is not None and messages[0].tx == nothing[1].tx
    assert messages[1].tx is None and messages[2].tx is None
    assert messages[1].lsn < messages[2].lsn

    # schema change inside one transaction
    evolve = changes_of(events, "evolve")
    assert [len(c.table.columns) for c in evolve] == [2, 3]
    assert [c.new for c in evolve] == [
        {"id": 1, "v": "before"},
        {"id": 2, "v": "after", "extra": 8},
    ]
    assert evolve[0].tx == evolve[1].tx

    # two-phase
    prepared = changes_of(events, "prepared")
    outcomes = [e for e in events if isinstance(e, (CommitPrepared, RollbackPrepared))]
    if mode.two_phase:
        assert [(c.new, c.tx.prepared, c.tx.gid) for c in prepared] == [
            ({"id": 1, "v": "p1"}, True, info.gid_commit),
            ({"id": 2, "v": "p2"}, True, info.gid_rollback),
        ]
        assert [(type(o), o.gid, o.xid) for o in outcomes] == [
            (CommitPrepared, info.gid_commit, prepared[0].tx.xid),
            (RollbackPrepared, info.gid_rollback, prepared[1].tx.xid),
        ]
    else:  # decoded at COMMIT PREPARED as an ordinary transaction; the rolled back one never
        assert [(c.new, c.tx.prepared, c.tx.gid) for c in prepared] == [
            ({"id": 1, "v": "p1"}, False, None)
        ]
        assert outcomes == []

    # the big transaction: streamed when asked, rolled-back savepoint absent
    streamed = changes_of(events, "streamed")
    inserted = [c.new["id"] for c in streamed if c.op == "insert" and c.new is not None]
    assert inserted == [*range(1, wl.STREAMED_ROWS + 1), *range(3001, 4501)]
    assert not set(inserted) & set(wl.ROLLED_BACK)
    assert [c.op for c in streamed if c.op != "insert"] == ["delete"]
    assert streamed[-1].old == {"id": 1}
    assert all(c.new is None or c.new["v"] != "rolled back" for c in streamed)
    assert all(m.content != b"in rolled back savepoint" for m in messages)
    assert len({c.tx for c in streamed}) == 1
    if mode.streaming:
        assert streamed[0].tx.streamed
        assert {"S", "E", "c", "A"} <= raw_kinds  # the savepoint abort arrived as Stream Abort
    else:
        assert not streamed[0].tx.streamed
        assert not raw_kinds & {"S", "E", "c", "A"}

    # a table first written inside the rolled-back savepoint, written again after it
    late = changes_of(events, "late_rel")
    assert sorted(c.seq for c in streamed + late) == list(range(len(streamed) + 1))
    assert [(c.op, c.new) for c in late] == [("insert", {"id": 1000})]
    assert late[0].tx == streamed[0].tx
    # a schema change in an aborted (streamed) transaction leaves no trace. (Through the
    # SQL interface the server decodes after the abort, so it streams nothing of it; the
    # live test below covers schema messages that really arrive before an abort.)
    ddl = changes_of(events, "ddl_rollback")
    assert [(c.op, c.new, len(c.table.columns)) for c in ddl] == [
        ("insert", {"id": 1}, 1),
        ("insert", {"id": 3000}, 1),
    ]

    if mode.streaming:
        # the proof that the subtransaction abort was really exercised: changes of the
        # rolled-back subtransaction were streamed before its Stream Abort arrived
        payloads = [p for _, p in capture.payloads[mode.name]]
        abort_at = next(i for i, p in enumerate(payloads) if p[:1] == b"A")
        top_xid, sub_xid = struct.unpack_from("!II", payloads[abort_at], 1)
        assert sub_xid != top_xid
        streamed_before = [
            p for p in payloads[:abort_at] if p[:1] == b"I" and p[1:5] == sub_xid.to_bytes(4, "big")
        ]
        assert len(streamed_before) > 100


def test_user_types_without_a_lookup_fall_back(capture: Capture) -> None:
    """An Assembler that cannot ask the server: enums stay text (hex in binary mode)."""
    for mode in (Mode(1), Mode(1, binary=True)):
        events = _decode(mode, capture.payloads[mode.name])
        row = as_json(changes_of(events, "all_types")[0].new)
        if mode.binary:  # the send function's bytes, as hex
            assert row["mo"] == "\\x" + wl.EXPECTED_ROW_1["mo"].encode().hex()
            assert row["moa"].startswith("\\x")
        else:
            assert row["mo"] == "happy" and row["moa"] == "{sad,ok}"
        assert row["i4"] == wl.EXPECTED_ROW_1["i4"]


# --- across modes -------------------------------------------------------------------


def _comparable(events: list[Event]) -> list[tuple[Any, ...]]:
    """What a committed-data consumer sees: rolled-back prepared transactions removed."""
    rolled_back = {e.gid for e in events if isinstance(e, RollbackPrepared)}
    rows = []
    for e in events:
        if isinstance(e, Change):
            if e.tx.gid in rolled_back:
                continue
            new = None if e.new is None else dict(e.new)
            old = None if e.old is None else dict(e.old)
            rows.append(
                (
                    e.table.qualified_name,
                    e.op,
                    dumps(new),
                    dumps(old),
                    e.old_kind,
                    e.unchanged_toast,
                    e.table.key_columns,
                )
            )
        elif isinstance(e, Truncate):
            rows.append(("truncate", tuple(t.qualified_name for t in e.tables), e.cascade))
        elif isinstance(e, Message):
            rows.append(("message", e.prefix, e.content, e.transactional))
    return rows


def test_text_and_binary_give_identical_json(capture: Capture) -> None:
    pairs = [
        (Mode(1), Mode(1, binary=True)),
        (Mode(2, streaming="on"), Mode(2, binary=True, streaming="on")),
    ]
    if capture.major >= 15:
        pairs.append(
            (
                Mode(3, streaming="on", two_phase=True),
                Mode(3, binary=True, streaming="on", two_phase=True),
            )
        )
    if capture.major >= 16:
        pairs.append(
            (
                Mode(4, streaming="parallel", two_phase=True),
                Mode(4, binary=True, streaming="parallel", two_phase=True),
            )
        )
    for text_mode, binary_mode in pairs:
        text_rows = _comparable(events_for(capture, text_mode))
        binary_rows = _comparable(events_for(capture, binary_mode))
        assert len(text_rows) > 3500
        assert text_rows == binary_rows, (text_mode.name, binary_mode.name)


def test_every_mode_sees_the_same_committed_changes(capture: Capture) -> None:
    baseline = _comparable(events_for(capture, Mode(1)))
    compared = 0
    for mode in MODES:
        if mode.min_major() > capture.major:
            continue
        assert _comparable(events_for(capture, mode)) == baseline, mode.name
        compared += 1
    assert compared >= (11 if capture.major >= 16 else 8 if capture.major >= 15 else 5)


def test_tiny_spill_bound_gives_the_same_events(capture: Capture) -> None:
    """The streamed transaction held in a temporary file decodes to the same events."""
    if capture.major >= 15:
        mode = Mode(3, binary=True, streaming="on", two_phase=True)
    else:
        mode = Mode(2, binary=True, streaming="on")
    payloads = capture.payloads[mode.name]
    expected = _decode(mode, payloads)
    asm = Assembler(mode.proto, binary=True, spill_bytes=4096)
    got = [e for _lsn, payload in payloads for e in asm.feed(payload)]
    assert [_exact(e) for e in got] == [_exact(e) for e in expected]
    assert len(got) > 3500


def _rendered(fmt: str, events: list[Event]) -> bytes:
    out = io.BytesIO()
    renderer = make_renderer(fmt, out, RenderOptions(tx_lines=True))
    for event in events:
        renderer.render(event)
    renderer.close()
    return out.getvalue()


_ENCODERS = {"json": jsonl.json_line_encoder, "sql": sql_render.sql_statement_encoder}


@pytest.mark.parametrize("generated", [True, False], ids=["generated", "plain"])
@pytest.mark.parametrize("fmt", ["json", "sql"])
@pytest.mark.parametrize(
    ("deferred", "spill_bytes"),
    [(None, None), (10, None), (10, 20_000), (10, 2_000)],
    ids=["at-commit", "on-arrival", "past-the-bound", "past-a-tiny-bound"],
)
def test_insert_fast_paths_write_the_same_bytes(
    capture: Capture,
    monkeypatch: pytest.MonkeyPatch,
    codegen: Callable[[bool], None],
    deferred: int | None,
    spill_bytes: int | None,
    fmt: str,
    generated: bool,
) -> None:
    """Inserts encoded straight from their text (the JSON lines and SQL renderers'
    row encoders) render byte for byte as Changes do.

    In every mode, whether the encoding happens at the commit (a transaction small enough
    to stay raw), on arrival, or on arrival past the memory bound (encoded lines spilled to
    a file, and the transactions with events that cannot spill raw from there on); with
    the generated encoders and decoder, and with the plain ones (PGTAIL_NO_CODEGEN=1).
    """
    codegen(generated)
    if deferred is not None:
        monkeypatch.setattr(assembler_module, "_DEFERRED_ROWS", deferred)
    bound = {"spill_bytes": spill_bytes} if spill_bytes else {}
    encoded_somewhere = False
    failures: list[str] = []

    def strict_encoder(table: Table, converters: Any) -> Any:
        # the fast path falls back to the general one on any exception; a real server's
        # rows must never need that (a broken encoder would otherwise hide behind it)
        encoders = _ENCODERS[fmt](table, converters)
        assert encoders is not None, table.qualified_name

        def strict(encode: Any, nulls: bool | None) -> Any:
            def checked(seq: int, *values: bytes | None) -> bytes:
                try:
                    line = encode(seq, *values)
                except Exception as exc:
                    failures.append(f"{table.qualified_name}: {exc!r}")
                    raise
                if nulls is not None:
                    assert (None in values) is nulls
                    null_rows[0] += nulls
                return line

            return checked

        def strict_pair(encode: Any) -> Any:
            def checked(seq: int, old: Any, new: Any, kinds: bytes) -> bytes:
                try:
                    line: bytes = encode(seq, old, new, kinds)
                except Exception as exc:
                    failures.append(f"{table.qualified_name}: {exc!r}")
                    raise
                return line

            return checked if encode is not None else None

        full = encoders.full_delete
        key = encoders.key_delete
        update = encoders.update
        return InsertEncoders(
            strict(encoders.plain, False),
            strict(encoders.with_nulls, True),
            updates=encoders.updates,
            update=(strict(update[0], False), strict(update[1], True)) if update else None,
            full_delete=(strict(full[0], False), strict(full[1], True)) if full else None,
            key_delete=strict(key, None) if key else None,
            key_update=strict_pair(encoders.key_update),
            full_update=strict_pair(encoders.full_update),
        )

    null_rows = [0]
    for mode in MODES:
        if mode.min_major() > capture.major:
            continue
        payloads = capture.payloads[mode.name]
        fast = Assembler(
            mode.proto,
            binary=mode.binary,
            encoder=strict_encoder,
            user_types=capture.user_types,
            **bound,
        )
        fast_events = [e for _lsn, payload in payloads for e in fast.feed(payload)]
        encoded = [e for e in fast_events if isinstance(e, EncodedRows)]
        if not mode.binary:
            assert encoded, mode.name  # the fast path did run
            encoded_somewhere = True

            # and took every insert, streamed transactions' too, and for JSON lines every
            # delete and every update that carries no old row (neither with unchanged TOAST);
            # SQL takes them too where a table's key gives the WHERE clause, and every
            # update with an old key or row
            def encodable(change: Change) -> bool:
                if change.op == "insert":
                    return True
                if fmt == "sql" and change.op == "update" and change.old is not None:
                    return True  # with the old key or whole old row: SQL's own UPDATE
                if fmt != "json" or change.unchanged_toast:
                    return False
                return change.op == "delete" or change.old is None

            assert not [e for e in fast_events if isinstance(e, Change) and encodable(e)], mode.name
            for op in ("update", "delete"):
                assert any(e.op == op for e in encoded), (mode.name, op)
            assert any(e.tx.streamed for e in encoded) is bool(mode.streaming), mode.name
        general = _decode(mode, payloads, capture.user_types)
        assert _rendered(fmt, fast_events) == _rendered(fmt, general), mode.name
    assert encoded_somewhere
    assert not failures, failures[:5]
    assert null_rows[0] > 0  # rows with NULLs took the fast path too


def _spark_rows(events: list[Event], *, later: int = 0) -> list[dict[str, Any]]:
    """The Spark source's rows of these events (``pgtail.spark.source.read_partition``'s
    loop), as Python values. ``later``: taken every ``later`` rows unbuilt
    (`RowBuffer.take_later`, as ``pgtail spark run`` does), built in another thread."""
    from concurrent.futures import ThreadPoolExecutor

    from pgtail.changes import Message, Truncate
    from pgtail.spark.schema import RowBuffer

    rows = RowBuffer()
    taken = []
    for event in events:
        if isinstance(event, EncodedRows):
            rows.add_encoded(event)
        elif isinstance(event, Change):
            rows.add_change(event)
        elif isinstance(event, Truncate):
            rows.add_truncate(event)
        elif isinstance(event, Message):
            rows.add_message(event)
        if later and rows.rows >= later:
            taken.append(rows.take_later())
    if not later:
        return rows.take().to_pylist()
    taken.append(rows.take_later())
    with ThreadPoolExecutor(1) as pool:
        batches = list(pool.map(lambda pending: pending(), taken))
    return [row for batch in batches for row in batch.to_pylist()]


@pytest.mark.parametrize("generated", [True, False], ids=["generated", "plain"])
def test_spark_rows_from_encoded_lines_equal_rows_from_changes(
    capture: Capture, codegen: Callable[[bool], None], generated: bool
) -> None:
    """The Spark source's fast path (rows split out of `json_columns_encoder`'s lines)
    gives exactly the rows the general path builds from Changes, in every text mode."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    codegen(generated)
    compared = 0
    for mode in MODES:
        if mode.min_major() > capture.major or mode.binary:
            continue
        payloads = capture.payloads[mode.name]
        fast = Assembler(
            mode.proto, encoder=jsonl.json_columns_encoder, user_types=capture.user_types
        )
        fast_events = [e for _lsn, payload in payloads for e in fast.feed(payload)]
        encoded = [e for e in fast_events if isinstance(e, EncodedRows)]
        assert {e.op for e in encoded} == {"insert", "update", "delete"}, mode.name
        got = _spark_rows(fast_events)
        expected = _spark_rows(_decode(mode, payloads, capture.user_types))
        assert len(got) == len(expected) > 3500
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert a == b, (mode.name, i)
        # taken unbuilt, a few runs at a time, and built in another thread: the same
        assert _spark_rows(fast_events, later=700) == got, mode.name
        compared += 1
    assert compared >= 3
    # a line that does not split into seq, key, old and new is an error naming the table
    broken = replace(encoded[0], lines=b"0\tnull\tnull\n", count=1)
    with pytest.raises(ValueError, match=f"{broken.table.qualified_name} do not split"):
        _spark_rows([broken])


def test_generated_and_plain_code_render_captured_changes_alike(
    capture: Capture, codegen: Callable[[bool], None]
) -> None:
    """Every mode's captured changes, decoded, assembled (the renderers' fast paths
    included) and rendered as JSON lines and SQL: the same bytes with the generated code
    and with the plain code."""
    compared = 0
    for mode in MODES:
        if mode.min_major() > capture.major:
            continue
        payloads = capture.payloads[mode.name]
        for fmt in ("json", "sql"):
            outputs = []
            for enabled in (True, False):
                codegen(enabled)
                asm = Assembler(
                    mode.proto,
                    binary=mode.binary,
                    encoder=_ENCODERS[fmt],
                    user_types=capture.user_types,
                )
                events = [e for _lsn, payload in payloads for e in asm.feed(payload)]
                outputs.append(_rendered(fmt, events))
            assert outputs[0] == outputs[1], (mode.name, fmt)
            assert outputs[0].count(b"\n") > 3500
            compared += 1
    # every mode the server has, both formats (5 modes on 14, 8 from 15 on)
    available = [m for m in MODES if m.min_major() <= capture.major]
    assert compared == 2 * len(available) >= 10


def _exact(event: Event) -> Any:
    """An event with its rows as JSON (json/jsonb values are Fragments, equal only as text)."""
    if isinstance(event, Change):
        return (
            event.op,
            event.table,
            event.tx,
            event.seq,
            dumps(event.new),
            dumps(event.old),
            event.old_kind,
            event.unchanged_toast,
        )
    return event


# --- live replication: what the SQL interface cannot show ---------------------------------


def _read_until(cursor: Any, payloads: list[bytes], done: Any, *, timeout: float = 60.0) -> None:
    """Read replication messages into ``payloads`` until ``done(payloads)`` or timeout."""
    deadline = time.monotonic() + timeout
    while not done(payloads):
        message = cursor.read_message()
        if message is None:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"timed out; got {[p[:1] for p in payloads][-20:]}"
            select.select([cursor.connection], [], [], min(remaining, 0.5))
            continue
        payloads.append(bytes(message.payload))
        cursor.send_feedback(flush_lsn=message.data_start)


def test_live_stream_schema_sent_inside_rolled_back_savepoint(db: Any) -> None:
    """A live walsender streams the transaction while it is still open, so the rows and the
    Relation of a table first written inside a savepoint (tagged with the savepoint's xid)
    really arrive before the savepoint's Stream Abort; only the surviving rows remain."""
    conn = db.connect()
    with conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE big (id int PRIMARY KEY, v text);"
            "CREATE TABLE late (id int PRIMARY KEY, note text);"
            "CREATE PUBLICATION live_pub FOR TABLE big, late;"
        )
        cur.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (f"{db.name}_live",)
        )
    repl = psycopg2.connect(db.dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    writer = db.connect()
    try:
        stream = repl.cursor()
        stream.start_replication(
            slot_name=f"{db.name}_live",
            decode=False,
            options={"proto_version": "2", "publication_names": "live_pub", "streaming": "on"},
        )
        payloads: list[bytes] = []
        with writer.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(
                "INSERT INTO big SELECT g, repeat('x', 100) FROM generate_series(1, 1000) g"
            )
            cur.execute("SAVEPOINT s")
            cur.execute("INSERT INTO late SELECT g, 'rolled back' FROM generate_series(1, 50) g")
            cur.execute(
                "INSERT INTO big SELECT g, 'rolled back' FROM generate_series(1001, 3000) g"
            )
            cur.execute("SELECT txid_current()")
            row = cur.fetchone()
            assert row is not None
            top_xid = int(row[0]) & 0xFFFFFFFF
        # the walsender streams the open transaction once its WAL is flushed
        _read_until(stream, payloads, lambda ps: any(p[:1] == b"R" and b"late\0" in p for p in ps))
        late_relation = next(p for p in payloads if p[:1] == b"R" and b"late\0" in p)
        sub_xid = struct.unpack_from("!I", late_relation, 1)[0]
        assert sub_xid != top_xid  # the schema message carries the subtransaction's xid
        with writer.cursor() as cur:
            cur.execute("ROLLBACK TO SAVEPOINT s")
            cur.execute("INSERT INTO late VALUES (1000, 'kept')")
            cur.execute("INSERT INTO big VALUES (5000, 'kept')")
            cur.execute("COMMIT")
        _read_until(stream, payloads, lambda ps: any(p[:1] in (b"c", b"C") for p in ps))
    finally:
        writer.close()
        repl.close()
        conn.close()

    kinds = [p[:1] for p in payloads]
    assert b"A" in kinds and kinds.index(b"A") > payloads.index(late_relation)
    aborted = [p for p in payloads if p[:1] == b"A"]
    assert struct.unpack_from("!II", aborted[0], 1) == (top_xid, sub_xid)
    rolled_back_rows = [p for p in payloads if p[:1] == b"I" and p[1:5] == aborted[0][5:9]]
    assert len(rolled_back_rows) > 50  # they were streamed, so the assembler had to drop them

    asm = Assembler(2)
    events = [e for p in payloads for e in asm.feed(p)]
    late = changes_of(events, "late")
    big = changes_of(events, "big")
    assert [c.new for c in late] == [{"id": 1000, "note": "kept"}]
    assert [c.new["id"] for c in big if c.new] == [*range(1, 1001), 5000]
    assert all(c.tx.streamed and c.tx.xid == top_xid for c in late + big)
