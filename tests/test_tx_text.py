"""A transaction's own text, made in one format for the usual transaction
(`pgtail.render.tx_text`): byte for byte what the general way makes, for any transaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from pgtail.changes import Transaction
from pgtail.render.jsonl import tx_fields, tx_part
from pgtail.render.sql import tx_begin, tx_comment
from pgtail.render.tx_text import second_text
from pgtail.values import dumps

_MAX_LSN = (1 << 64) - 1

times = st.one_of(
    st.datetimes(timezones=st.just(UTC)),
    st.just(datetime.max.replace(tzinfo=UTC)),
    st.just(datetime.min.replace(tzinfo=UTC)),
    st.datetimes(timezones=st.just(timezone(timedelta(hours=2)))),  # not UTC: general way
)
transactions = st.builds(
    Transaction,
    xid=st.integers(0, (1 << 32) - 1),
    commit_lsn=st.integers(0, _MAX_LSN),
    end_lsn=st.integers(0, _MAX_LSN),
    commit_time=times,
    origin=st.one_of(st.none(), st.text(max_size=8)),
    origin_lsn=st.one_of(st.none(), st.integers(0, _MAX_LSN)),
    gid=st.one_of(st.none(), st.text(max_size=8)),
    prepared=st.booleans(),
    streamed=st.booleans(),
)


@given(transactions)
def test_the_json_fields_of_a_transaction_are_those_of_its_dict(tx: Transaction) -> None:
    assert tx_part(tx) == dumps(tx_fields(tx))[1:-1] + b","


@given(transactions)
def test_the_sql_begin_of_a_transaction_is_its_comment_and_begin(tx: Transaction) -> None:
    assert tx_begin(tx) == (tx_comment(tx) + "\nBEGIN;\n").encode("utf-8")
    if tx.origin is None and tx.gid is None and not tx.prepared and not tx.streamed:
        text = tx_begin(tx).decode()
        assert f"commit_time={tx.commit_time.isoformat(timespec='microseconds')}\n" in text


@given(st.lists(st.datetimes(timezones=st.just(UTC)), min_size=1, max_size=50))
def test_a_seconds_text_is_isoformats_whatever_came_before(whens: list[datetime]) -> None:
    for when in whens:  # the cache holds earlier seconds: each answer is its own
        assert second_text(when).decode() == when.isoformat(timespec="seconds")[:19]
