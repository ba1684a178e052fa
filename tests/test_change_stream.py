"""The sans-IO change stream (`pgtail.stream.change_stream`), fed hand-built payloads:
the end position, skipping what was written, --max-changes on a whole and on a partly
written transaction, batching at transaction boundaries and on a drained socket, and
the user types it asks for before a Relation."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pgtail import changes as ch
from pgtail.render import row_encoder
from pgtail.stream.change_stream import ChangeStream, RawChangeStream, Stop
from pgtail.stream.policy import StreamPolicy
from pgtail.stream.writer import Batch
from tests import pgbytes as pb

WHEN = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
REL = pb.relation(1, "public", "t", [("id", 23, True), ("v", 25, False)])


def tx(n: int, rows: int = 1) -> list[bytes]:
    """Transaction ``n`` (xid 100+n) committing at n*1000, ending at n*1000+8."""
    commit_lsn = n * 1000
    out = [pb.begin(commit_lsn, WHEN, 100 + n)]
    out += [pb.insert(1, [str(i).encode(), b"x"]) for i in range(rows)]
    out.append(pb.commit(commit_lsn, commit_lsn + 8, WHEN))
    return out


def make(policy: StreamPolicy, *, fast: bool = False) -> tuple[ChangeStream, list[Batch]]:
    batches: list[Batch] = []
    encoder = row_encoder("json") if fast else None
    assembler = ch.Assembler(1, binary=False, encoder=encoder)
    stream = ChangeStream(assembler, policy, batches.append)
    assert stream.feed(REL) is None
    return stream, batches


def feed_all(stream: ChangeStream, payloads: list[bytes]) -> None:
    for payload in payloads:
        assert stream.feed(payload) is None


def kinds(batch: Batch) -> list[str]:
    return [type(item).__name__ for item in batch.items]


def changes_in(batches: list[Batch]) -> int:
    total = 0
    for batch in batches:
        for item in batch.items:
            if isinstance(item, ch.EncodedRows):
                total += item.count
            elif isinstance(item, ch.Change):
                total += 1
    return total


def test_drained_socket_closes_one_batch_of_whole_transactions() -> None:
    stream, batches = make(StreamPolicy())
    feed_all(stream, tx(1) + tx(2) + tx(3))
    assert batches == []  # nothing handed over before the socket is drained
    stream.drained()
    (batch,) = batches
    assert (batch.confirm_lsn, batch.position, batch.transactions, batch.changes) == (
        3008,
        3008,
        3,
        3,
    )
    assert kinds(batch).count("TxCommit") == 3
    stream.drained()
    assert len(batches) == 1  # an empty batch is never handed over


def test_batch_cut_inside_a_transaction_splits_at_its_start() -> None:
    stream, batches = make(StreamPolicy(batch_size=5))
    feed_all(stream, tx(1) + tx(2, rows=4))
    # tx 1: begin, insert, commit (3 items); tx 2 adds begin, insert -> 5: cut
    whole, started = batches
    assert (whole.confirm_lsn, whole.position, whole.transactions, whole.changes) == (
        1008,
        1008,
        1,
        1,
    )
    assert kinds(whole)[-3:] == ["TxBegin", "Change", "TxCommit"]
    assert (started.confirm_lsn, started.position, started.transactions) == (0, 0, 0)
    assert kinds(started)[0] == "TxBegin"


def test_end_stops_before_a_transaction_committing_after_it() -> None:
    stream, batches = make(StreamPolicy(end_lsn=2000))
    with pytest.raises(Stop) as stop:
        feed_all(stream, tx(1) + tx(2) + tx(3))
    assert stop.value.reason == "end"
    assert batches[-1].confirm_lsn == 2008
    assert changes_in(batches) == 2


def test_already_written_transactions_are_skipped() -> None:
    policy = StreamPolicy()
    policy.resume_after(2008)
    stream, batches = make(policy)
    feed_all(stream, tx(1) + tx(2) + tx(3))
    stream.drained()
    (batch,) = batches
    assert batch.confirm_lsn == 3008
    assert batch.changes == 1
    assert [item.tx.xid for item in batch.items if isinstance(item, ch.TxBegin)] == [103]


@pytest.mark.parametrize("fast", [False, True])
def test_max_changes_ending_a_transaction_confirms_it(fast: bool) -> None:
    stream, batches = make(StreamPolicy(max_changes=3), fast=fast)
    with pytest.raises(Stop) as stop:
        feed_all(stream, tx(1) + tx(2, rows=2) + tx(3))
    assert stop.value.reason == "max_changes"
    assert changes_in(batches) == 3
    assert batches[-1].confirm_lsn == 2008  # tx 2 was written whole
    assert stream.policy.limit_reached


@pytest.mark.parametrize("fast", [False, True])
def test_max_changes_inside_a_transaction_confirms_nothing_of_it(fast: bool) -> None:
    stream, batches = make(StreamPolicy(max_changes=2), fast=fast)
    with pytest.raises(Stop) as stop:
        feed_all(stream, tx(1) + tx(2, rows=3))
    assert stop.value.reason == "max_changes"
    assert changes_in(batches) == 2
    assert max(batch.confirm_lsn for batch in batches) == 1008  # tx 2 only partly
    assert batches[-1].confirm_lsn == 0


def test_user_types_are_asked_for_before_a_relation() -> None:
    stream, batches = make(StreamPolicy())
    custom = pb.relation(2, "public", "u", [("id", 23, True), ("mood", 91234, False)])
    assert stream.feed(custom) == [91234]
    stream.add_user_types({}, [91234])  # not found: the column stays text
    feed_all(stream, [pb.begin(1000, WHEN, 7), pb.insert(2, [b"1", b"happy"])])
    feed_all(stream, [pb.commit(1000, 1008, WHEN)])
    assert stream.feed(custom) is None  # asked once
    stream.drained()
    (change,) = [item for item in batches[0].items if isinstance(item, ch.Change)]
    assert change.table.name == "u"
    assert change.new == {"id": 1, "mood": "happy"}


def test_signal_hands_over_what_was_taken() -> None:
    stream, batches = make(StreamPolicy())
    feed_all(stream, tx(1))
    with pytest.raises(Stop) as stop:
        stream.stop("signal")
    assert stop.value.reason == "signal"
    assert batches[0].confirm_lsn == 1008


# --------------------------------------------------------------------------- slot peek's rules


def peek_stream(max_changes: int | None) -> tuple[ChangeStream, list[Batch]]:
    batches: list[Batch] = []
    stream = ChangeStream(
        ch.Assembler(1),
        StreamPolicy(max_changes=max_changes),
        batches.append,
        stop_before_more=True,
        keep_empty=True,
    )
    assert stream.feed(REL) is None
    return stream, batches


def test_stop_before_more_shows_the_commit_and_stops_before_the_next_begin() -> None:
    """``slot peek --max-changes 2``: transaction 1 whole, commit included; transaction 2's
    Begin is taken back with the change past the limit, and `Stop` says more came."""
    stream, batches = peek_stream(2)
    with pytest.raises(Stop) as stop:
        feed_all(stream, tx(1, rows=2) + tx(2))
    assert stop.value.reason == "max_changes"
    assert [k for b in batches for k in kinds(b)] == ["TxBegin", "Change", "Change", "TxCommit"]


def test_stop_before_more_does_not_stop_when_nothing_more_comes() -> None:
    stream, batches = peek_stream(2)
    feed_all(stream, tx(1, rows=2))
    stream.drained()
    assert [k for b in batches for k in kinds(b)] == ["TxBegin", "Change", "Change", "TxCommit"]
    assert stream.policy.changes == 2


def test_keep_empty_shows_a_transaction_with_no_change() -> None:
    """A transaction that changed no published table: peek shows its begin and commit,
    `pgtail stream` shows nothing of it."""
    empty = [pb.begin(1000, WHEN, 7), pb.commit(1000, 1008, WHEN)]
    stream, batches = peek_stream(None)
    feed_all(stream, empty)
    stream.drained()
    assert [k for b in batches for k in kinds(b)] == ["TxBegin", "TxCommit"]
    streamed, streamed_batches = make(StreamPolicy())
    feed_all(streamed, empty)
    streamed.drained()
    assert [k for b in streamed_batches for k in kinds(b)] == []


def test_raw_mode_traces_messages_with_their_lsn_and_stops_at_max_changes() -> None:
    batches: list[Batch] = []
    raw = RawChangeStream(1, StreamPolicy(max_changes=2), batches.append)
    payloads = [REL, *tx(1, rows=3)]
    with pytest.raises(Stop) as stop:
        for lsn, payload in enumerate(payloads, start=100):
            raw.feed(payload, lsn)
    assert stop.value.reason == "max_changes"
    (batch,) = batches
    assert [(type(m).__name__, lsn) for m, lsn in batch.items] == [
        ("Relation", 100),
        ("Begin", 101),
        ("Insert", 102),
        ("Insert", 103),
    ]
    assert raw.open_transactions()  # its commit was not read


def test_raw_mode_stop_before_more_shows_the_rest_of_the_transaction() -> None:
    """``slot peek --format raw --max-changes 1``: the rest of the last transaction after
    its first change is shown up to the next change; then `Stop`."""
    batches: list[Batch] = []
    raw = RawChangeStream(1, StreamPolicy(max_changes=1), batches.append, stop_before_more=True)
    rel2 = pb.relation(2, "public", "u", [("id", 23, True)])
    with pytest.raises(Stop):
        for payload in [
            REL,
            pb.begin(1000, WHEN, 7),
            pb.insert(1, [b"1", b"x"]),
            rel2,
            pb.insert(2, [b"2"]),
            pb.commit(1000, 1008, WHEN),
        ]:
            raw.feed(payload)
    names = [type(m).__name__ for b in batches for m, _ in b.items]
    assert names == ["Relation", "Begin", "Insert", "Relation"]


def test_no_fast_path_with_redact() -> None:
    """--redact masks decoded values: the renderer offers no encoder then."""
    assert row_encoder("json") is not None
    assert row_encoder("json", redact=True) is None
    assert row_encoder("sql", redact=True) is None
