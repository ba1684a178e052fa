"""The pure standby-feedback object: what is safe to confirm, and when."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pgtail.feedback import Feedback, PipeProgress


def test_first_update_is_due_at_once() -> None:
    fb = Feedback(status_interval=10.0)
    assert fb.due(0.0)
    assert fb.next_due_in(0.0) == 0.0


def test_nothing_confirmed_before_anything_written() -> None:
    fb = Feedback()
    assert fb.flush_lsn == 0


def test_start_lsn_is_a_floor() -> None:
    fb = Feedback(start_lsn=1000)
    assert fb.flush_lsn == 1000
    fb.written(500)  # an old transaction re-sent below the slot position
    assert fb.flush_lsn == 1000
    fb.written(1500)
    assert fb.flush_lsn == 1500


def test_written_moves_forward_only() -> None:
    fb = Feedback()
    fb.written(300)
    fb.written(200)
    assert fb.flush_lsn == 300
    assert fb.written_lsn == 300


def test_idle_advances_past_written() -> None:
    fb = Feedback()
    fb.written(300)
    fb.idle(900)
    assert fb.flush_lsn == 900
    fb.written(600)  # cannot happen in practice; must not move backwards anyway
    assert fb.flush_lsn == 900


def test_idle_never_moves_backwards() -> None:
    fb = Feedback()
    fb.idle(900)
    fb.idle(100)
    assert fb.flush_lsn == 900


def test_heartbeat_due_after_interval() -> None:
    fb = Feedback(status_interval=10.0)
    fb.sent(fb.flush_lsn, 100.0)
    assert not fb.due(105.0)
    assert fb.next_due_in(105.0) == 5.0
    assert fb.due(110.0)
    assert fb.next_due_in(111.0) == 0.0


def test_progress_due_quickly_but_rate_limited() -> None:
    fb = Feedback(status_interval=10.0, min_interval=0.05)
    fb.sent(0, 100.0)
    fb.written(10)
    assert fb.progress_pending()
    assert not fb.due(100.01)
    assert fb.due(100.06)
    fb.sent(fb.flush_lsn, 100.06)
    assert not fb.progress_pending()
    assert not fb.due(100.2)


def test_sent_records_highest() -> None:
    fb = Feedback()
    fb.sent(50, 1.0)
    fb.sent(20, 2.0)
    assert fb.sent_lsn == 50
    assert fb.last_sent == 2.0


def test_reset_connection_makes_update_due_and_keeps_position() -> None:
    fb = Feedback(status_interval=10.0)
    fb.written(77)
    fb.sent(77, 1.0)
    assert not fb.due(2.0)
    fb.reset_connection()
    assert fb.due(2.0)
    assert fb.flush_lsn == 77


@given(
    st.lists(
        st.tuples(st.sampled_from(["written", "idle"]), st.integers(0, 2**64 - 1)),
        max_size=50,
    ),
    st.integers(0, 2**64 - 1),
)
def test_flush_lsn_is_monotonic_and_bounded(ops: list[tuple[str, int]], start: int) -> None:
    fb = Feedback(start_lsn=start)
    previous = fb.flush_lsn
    reported = [start]
    for kind, lsn in ops:
        if kind == "written":
            fb.written(lsn)
        else:
            fb.idle(lsn)
        reported.append(lsn)
        assert fb.flush_lsn >= previous
        # never more than something we were told is safe
        assert fb.flush_lsn == max(reported)
        previous = fb.flush_lsn


# --- PipeProgress: output into a pipe is confirmed once its reader used it -------------


def test_pipe_nothing_confirmed_while_unread() -> None:
    pipe = PipeProgress(grace=1.0)
    pipe.wrote(100, 10)
    pipe.wrote(100, 20)
    assert pipe.observe(200, 0.0) == 0  # all still in the pipe
    assert pipe.observe(200, 5.0) == 0
    assert not pipe.settled


def test_pipe_consumed_is_confirmed_only_after_the_grace_period() -> None:
    pipe = PipeProgress(grace=1.0)
    pipe.wrote(100, 10)
    pipe.wrote(100, 20)
    assert pipe.observe(0, 0.0) == 0  # consumed just now: the reader may still leave
    assert pipe.observe(0, 0.5) == 0
    assert pipe.observe(0, 1.0) == 20
    assert pipe.settled
    assert pipe.observe(0, 9.0) == 0  # nothing new


def test_pipe_partly_consumed_confirms_only_whole_transactions() -> None:
    pipe = PipeProgress(grace=1.0)
    pipe.wrote(100, 10)
    pipe.wrote(50, 0)  # a batch in the middle of a large transaction
    pipe.wrote(50, 20)
    assert pipe.observe(120, 0.0) == 0  # 80 bytes consumed: not even the first one
    assert pipe.observe(60, 0.1) == 0  # 140: the first one, waiting for the grace
    assert pipe.observe(60, 1.1) == 10
    assert not pipe.settled
    assert pipe.observe(0, 1.2) == 0
    assert pipe.observe(0, 2.2) == 20
    assert pipe.settled


def test_pipe_grace_counts_from_when_consumption_was_first_seen() -> None:
    pipe = PipeProgress(grace=1.0)
    pipe.wrote(100, 10)
    assert pipe.observe(0, 5.0) == 0  # bytes written at 0, seen consumed only at 5
    assert pipe.observe(0, 5.9) == 0
    assert pipe.observe(0, 6.0) == 10


def test_pipe_next_check() -> None:
    pipe = PipeProgress(grace=1.0)
    assert pipe.next_check_in(0.0) is None and pipe.settled
    pipe.wrote(100, 10)
    assert pipe.next_check_in(0.0) == 0.25  # waiting for the reader
    pipe.observe(0, 0.0)
    assert pipe.next_check_in(0.4) == 0.6
    pipe.observe(0, 1.0)
    assert pipe.next_check_in(1.0) is None


def test_pipe_bytes_without_a_transaction_end_must_be_consumed_to_settle() -> None:
    pipe = PipeProgress(grace=1.0)
    pipe.wrote(100, 0)
    assert not pipe.settled
    pipe.observe(30, 0.0)
    assert not pipe.settled
    pipe.observe(0, 0.1)
    assert pipe.settled


@given(
    st.lists(
        st.tuples(st.integers(0, 500), st.booleans(), st.integers(0, 600), st.floats(0, 3)),
        max_size=40,
    )
)
def test_pipe_confirms_only_what_was_consumed_a_grace_period_ago(
    steps: list[tuple[int, bool, int, float]],
) -> None:
    pipe = PipeProgress(grace=1.0)
    now = 0.0
    lsn = 0
    ends: list[tuple[int, int]] = []  # (end offset, lsn)
    first_seen: dict[int, float] = {}  # lsn -> when its end was first seen consumed
    confirmed = 0
    consumed_to = 0
    for nbytes, ends_tx, unread, step in steps:
        now += step
        confirm = 0
        if ends_tx:
            lsn += 10
            confirm = lsn
        pipe.wrote(nbytes, confirm)
        if confirm:
            ends.append((pipe.offset, confirm))
        # the reader only ever takes bytes out
        unread = min(unread, pipe.offset - consumed_to)
        consumed_to = pipe.offset - unread
        for offset, tx in ends:
            if offset <= consumed_to and tx not in first_seen:
                first_seen[tx] = now
        got = pipe.observe(unread, now)
        if got:
            assert got > confirmed
            assert first_seen[got] + 1.0 <= now
            confirmed = got
        assert pipe.offset >= pipe.consumed_to
