"""The pure standby-feedback object: what is safe to confirm, and when."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pgtail.feedback import Feedback


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
