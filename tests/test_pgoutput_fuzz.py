"""Property tests of the pgoutput decoder: any bytes either decode or raise DecodeError
(never IndexError, struct.error, KeyError, UnicodeDecodeError, ValueError, ...), and
TupleData built from random columns decodes back to exactly those columns."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pgtail.errors import DecodeError
from pgtail.pgoutput import Decoder, Insert, PgoutputMessage, Update, _fastrows, decode_tuple, parse
from tests import pgbytes as pb
from tests.pgoutput_corpus import VALID_MESSAGES, expected_tuple

MESSAGE_CLASSES = typing.get_args(PgoutputMessage)

# the mode fixture below runs once per test, not per example, which is what it is for
_ONCE_PER_TEST = HealthCheck.function_scoped_fixture
FUZZ = settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, _ONCE_PER_TEST],
)


# Every test here runs with the generated decoder code and without it.
pytestmark = pytest.mark.usefixtures("both_ways")


TYPE_BYTES = b"BCORYIUDTMSEcAbPKrp"


def _check(decode: Callable[[], object]) -> None:
    try:
        message = decode()
    except DecodeError as exc:
        text = str(exc)
        assert text and "\n" not in text
        # the fast paths' fallbacks: the careful parsers must always explain the failure
        assert "malformed" not in text, text
    else:
        assert isinstance(message, MESSAGE_CLASSES)


def _decodes_or_decode_error(payload: bytes) -> None:
    for in_stream in (False, True):
        _check(functools.partial(parse, payload, in_stream=in_stream))
    for version in (1, 2, 3, 4):
        for in_stream in (False, True):
            decoder = Decoder(version)
            decoder.in_stream = in_stream
            _check(functools.partial(decoder.decode, payload))


@FUZZ
@given(st.binary(max_size=200))
@example(b"")
@example(b"I\x00\x00\x00\x01N\xff\xff")
@example(b"T\x7f\xff\xff\xff\x00")
@example(b"M\x00" + b"\x00" * 8 + b"\x00\xff\xff\xff\xff")
def test_arbitrary_bytes(payload: bytes) -> None:
    _decodes_or_decode_error(payload)


@FUZZ
@given(st.sampled_from(TYPE_BYTES), st.binary(max_size=120))
def test_arbitrary_body_after_every_type_byte(kind: int, body: bytes) -> None:
    _decodes_or_decode_error(bytes([kind]) + body)


@st.composite
def mutated_messages(draw: st.DrawFn) -> bytes:
    payload, _ = draw(st.sampled_from(VALID_MESSAGES))
    data = bytearray(payload)
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "set", "insert", "delete", "cut"]))
        position = draw(st.integers(0, max(0, len(data) - 1)))
        if action == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "set" and data:
            data[position] = draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, ord("n"), ord("t")]))
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=6))
        elif action == "delete" and data:
            del data[position : position + draw(st.integers(1, 4))]
        elif action == "cut":
            del data[position:]
    return bytes(data)


@FUZZ
@given(mutated_messages())
def test_mutated_valid_messages(payload: bytes) -> None:
    _decodes_or_decode_error(payload)


@FUZZ
@given(st.binary(max_size=100), st.integers(0, 110))
def test_decode_tuple_arbitrary(data: bytes, offset: int) -> None:
    try:
        tup, end = decode_tuple(data, offset, "Insert.new_tuple")
    except DecodeError as exc:
        assert str(exc).startswith("Insert.new_tuple: ")
    else:
        assert offset + 2 <= end <= len(data)
        assert len(tup.kinds) == len(tup.values)


columns = st.lists(
    st.one_of(
        st.none(),
        st.just("u"),
        st.binary(max_size=40),
        st.binary(max_size=40).map(lambda raw: ("b", raw)),
    ),
    max_size=90,  # past the unrolled readers' limit of 64 columns
)


@settings(max_examples=400, deadline=None, suppress_health_check=[_ONCE_PER_TEST])
@given(columns, st.binary(max_size=5), st.binary(max_size=5))
def test_tuple_round_trip(cols: list[object], before: bytes, after: bytes) -> None:
    data = before + pb.tuple_data(cols) + after
    tup, end = decode_tuple(data, len(before), "x")
    assert tup == expected_tuple(*cols)
    assert end == len(data) - len(after)


@settings(max_examples=300, deadline=None, suppress_health_check=[_ONCE_PER_TEST])
@given(columns, columns, st.integers(0, 2**32 - 1), st.one_of(st.none(), st.integers(0, 2**32 - 1)))
def test_row_messages_round_trip(
    new: list[object], old: list[object], relation_id: int, xid: int | None
) -> None:
    in_stream = xid is not None
    assert parse(pb.insert(relation_id, new, xid=xid), in_stream=in_stream) == Insert(
        xid, relation_id, expected_tuple(*new)
    )
    payload = pb.update(relation_id, new, old, "O", xid=xid)
    assert parse(payload, in_stream=in_stream) == Update(
        xid, relation_id, "O", expected_tuple(*old), expected_tuple(*new)
    )


ROW_PARSERS = {
    ord("I"): (_fastrows.parse_insert, _fastrows.parse_insert_careful),
    ord("U"): (_fastrows.parse_update, _fastrows.parse_update_careful),
    ord("D"): (_fastrows.parse_delete, _fastrows.parse_delete_careful),
}


@FUZZ
@given(
    st.one_of(
        mutated_messages(),
        st.sampled_from([p for p, _ in VALID_MESSAGES]),
        st.builds(
            lambda k, body: bytes([k]) + body, st.sampled_from(b"IUD"), st.binary(max_size=60)
        ),
    )
)
def test_fast_and_careful_row_parsers_agree(payload: bytes) -> None:
    """Insert/Update/Delete have a fast path and a careful parser that explains errors:
    on any input both accept the same messages with the same result, or both refuse."""
    if not payload or payload[0] not in ROW_PARSERS:
        return
    fast, careful = ROW_PARSERS[payload[0]]
    for in_stream in (False, True):
        try:
            expected = careful(payload, in_stream)
        except DecodeError as exc:
            with pytest.raises(DecodeError) as info:
                fast(payload, in_stream)
            assert str(info.value) == str(exc)
        else:
            assert fast(payload, in_stream) == expected


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_every_valid_message_under_every_version(version: int) -> None:
    """Sanity for the fuzz corpus: each seed decodes (or is refused as too new)."""
    decoded = 0
    for payload, in_stream in VALID_MESSAGES:
        decoder = Decoder(version)
        decoder.in_stream = in_stream
        try:
            decoder.decode(payload)
            decoded += 1
        except DecodeError as exc:
            assert "protocol version" in str(exc)
    assert decoded >= 30
