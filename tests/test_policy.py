"""The pure stream policy: where a run ends, what it skips, how many changes it takes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pgtail.stream.policy import BATCH_SIZE, UNLIMITED, StreamPolicy


def test_without_end_nothing_is_past_it() -> None:
    policy = StreamPolicy()
    assert not policy.past_end(2**64 - 1)
    assert not policy.done_at(2**64 - 1, open_transaction=False)


def test_a_transaction_committing_at_the_end_is_taken() -> None:
    policy = StreamPolicy(end_lsn=1000)
    assert not policy.past_end(999)
    assert not policy.past_end(1000)
    assert policy.past_end(1001)


def test_idle_at_the_end_is_done() -> None:
    policy = StreamPolicy(end_lsn=1000)
    assert not policy.done_at(999, open_transaction=False)
    assert policy.done_at(1000, open_transaction=False)
    assert policy.done_at(5000, open_transaction=False)


def test_an_open_transaction_holds_the_end() -> None:
    """It may still commit at or before the end: the stream waits for it."""
    policy = StreamPolicy(end_lsn=1000)
    assert not policy.done_at(5000, open_transaction=True)


def test_nothing_is_written_at_first() -> None:
    policy = StreamPolicy()
    assert not policy.written(1)


def test_written_up_to_the_resume_position() -> None:
    policy = StreamPolicy()
    policy.resume_after(500)
    assert policy.written(499)
    assert policy.written(500)
    assert not policy.written(501)


def test_resume_position_never_moves_backwards() -> None:
    """A reconnect before anything new was handed over must not re-admit old output."""
    policy = StreamPolicy()
    policy.resume_after(500)
    policy.resume_after(0)
    policy.resume_after(300)
    assert policy.skip_upto == 500
    assert policy.written(400)


def test_no_limit_leaves_unlimited_room() -> None:
    policy = StreamPolicy()
    policy.took(10**9)
    assert policy.room() == UNLIMITED
    assert not policy.limit_reached


def test_max_changes_counts_down() -> None:
    policy = StreamPolicy(max_changes=10)
    assert policy.room() == 10
    policy.took(4)
    assert policy.room() == 6
    assert not policy.limit_reached
    policy.took(6)
    assert policy.room() == 0
    assert policy.limit_reached


def test_max_changes_counts_over_reconnects() -> None:
    """The limit is for the whole run: what was taken before a reconnect counts."""
    policy = StreamPolicy(max_changes=3)
    policy.took(2)
    policy.resume_after(100)  # what a reconnect does
    assert policy.room() == 1
    policy.took(1)
    assert policy.limit_reached


def test_batch_size_default() -> None:
    assert StreamPolicy().batch_size == BATCH_SIZE == 512


@given(
    end=st.one_of(st.none(), st.integers(0, 2**64 - 1)),
    lsn=st.integers(0, 2**64 - 1),
    open_transaction=st.booleans(),
)
def test_idle_end_and_past_end_agree(end: int | None, lsn: int, open_transaction: bool) -> None:
    """Done at a WAL end exactly when a commit just past it would be past the end."""
    policy = StreamPolicy(end_lsn=end)
    done = policy.done_at(lsn, open_transaction)
    assert done == (end is not None and not open_transaction and policy.past_end(lsn + 1))


@given(
    limit=st.integers(1, 1000),
    batches=st.lists(st.integers(0, 100), max_size=50),
)
def test_taking_at_most_the_room_never_passes_the_limit(limit: int, batches: list[int]) -> None:
    """A loop that takes at most ``room()`` each time stops at exactly ``max_changes``."""
    policy = StreamPolicy(max_changes=limit)
    for wanted in batches:
        if policy.limit_reached:
            break
        policy.took(min(wanted, policy.room()))
        assert policy.changes <= limit
        assert policy.room() == limit - policy.changes
    assert policy.limit_reached == (policy.changes == limit)
