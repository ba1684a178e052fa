"""Values no server sends (a proxy, a bug or a future server might): one `DecodeError`
naming the table and the column, from the assembler and from every renderer -- never a
ValueError, KeyError, TypeError or AttributeError, and never a JSON line that says
something else than the row (a json value that adds a field)."""

from __future__ import annotations

import io
import struct
from collections.abc import Iterable
from datetime import UTC, datetime

import orjson
import pytest

from pgtail import render
from pgtail.changes import Assembler, Event
from pgtail.errors import DecodeError
from tests import pgbytes as pb

INT4, INT8, TEXT, JSON, JSONB, INT4_ARRAY = 23, 20, 25, 114, 3802, 1007
T0 = datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)


# public.items: id int4 (key), v <type>
def _relation(type_oid: int) -> bytes:
    return pb.relation(16384, "public", "items", [("id", INT4, True), ("v", type_oid, False)])


def _tx(*body: bytes) -> list[bytes]:
    return [pb.begin(0x1000, T0, 7), *body, pb.commit(0x1000, 0x1010, T0)]


@pytest.fixture(autouse=True, params=["generated", "plain"])
def codegen(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "plain":
        monkeypatch.setenv("PGTAIL_NO_CODEGEN", "1")
    else:
        monkeypatch.delenv("PGTAIL_NO_CODEGEN", raising=False)
    return str(request.param)


def _render(fmt: str | None, payloads: Iterable[bytes], binary: bool = False) -> bytes:
    """Feed ``payloads`` (with the renderer's fast path when ``fmt`` has one) and render
    the events in ``fmt`` (None: only assemble)."""
    encoder = render.insert_encoder(fmt) if fmt else None
    asm = Assembler(1, binary=binary, encoder=encoder)
    events: list[Event] = []
    for payload in payloads:
        events.extend(asm.feed(payload))
    out = io.BytesIO()
    if fmt is not None:
        renderer = render.make_renderer(fmt, out)
        for event in events:
            renderer.render(event)
        renderer.close()
    return out.getvalue()


FORMATS = [None, "json", "sql", "table"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "change",
    [
        pb.insert(16384, [b"x", b"a"]),
        pb.insert(16384, [b"x", None]),  # the way with NULLs
        pb.update(16384, [b"x", b"a"]),
        pb.delete(16384, [b"x", None]),  # old key
        pb.delete(16384, [b"x", None], old_kind="O"),  # old row
    ],
    ids=["insert", "insert-nulls", "update", "delete-key", "delete-full"],
)
def test_a_text_int_that_is_not_a_number(fmt: str | None, change: bytes) -> None:
    with pytest.raises(DecodeError, match=r"column 'id' \(integer\) of public\.items: b'x'"):
        _render(fmt, [_relation(TEXT), *_tx(change)])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("width", [0, 3, 9])
def test_a_binary_int_of_another_width(fmt: str | None, width: int) -> None:
    value = ("b", b"\x01" * width)
    with pytest.raises(DecodeError, match=r"binary value for column 'v' \(bigint\)"):
        _render(fmt, [_relation(INT8), *_tx(pb.insert(16384, [("b", b"\0\0\0\1"), value]))], True)


def _int4_array_of(element_oid: int, *elements: bytes) -> bytes:
    head = struct.pack("!iiIii", 1, 0, element_oid, len(elements), 1)
    return head + b"".join(struct.pack("!i", len(e)) + e for e in elements)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_binary_array_of_another_element_type(fmt: str | None) -> None:
    good = _int4_array_of(INT4, b"\0\0\0\1")
    row = [("b", b"\0\0\0\1"), ("b", good)]
    _render(fmt, [_relation(INT4_ARRAY), *_tx(pb.insert(16384, row))], True)  # fine
    text_elements = _int4_array_of(TEXT, b"abc")
    row = [("b", b"\0\0\0\1"), ("b", text_elements)]
    with pytest.raises(DecodeError, match=r"column 'v' \(integer\[\]\) of public\.items"):
        _render(fmt, [_relation(INT4_ARRAY), *_tx(pb.insert(16384, row))], True)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("type_oid", [JSON, JSONB])
@pytest.mark.parametrize(
    "value", [b'1,"op":"delete"', b'{"a": 1}, "op": "delete", "b": {}', b"", b"{", b'"a']
)
def test_a_json_value_that_is_not_one_json_value(
    fmt: str | None, type_oid: int, value: bytes
) -> None:
    """It was embedded in the JSON line as it is: ``1,"op":"delete"`` added a field."""
    for change in (pb.insert(16384, [b"1", value]), pb.update(16384, [b"1", value])):
        with pytest.raises(DecodeError, match=r"column 'v' \(jsonb?\) of public\.items"):
            _render(fmt, [_relation(type_oid), *_tx(change)])


@pytest.mark.parametrize("type_oid", [JSON, JSONB])
@pytest.mark.parametrize(
    "value",
    [
        b"1" + b"0" * 400,  # numeric past a double: jsonb keeps it
        b"1e999",
        b'{"a": [1, 2.50, "\\u00e9"], "b": null}',
        b"  [true, false]  ",
    ],
)
def test_json_values_postgresql_takes_stay_as_they_are(type_oid: int, value: bytes) -> None:
    out = _render("json", [_relation(type_oid), *_tx(pb.insert(16384, [b"1", value]))])
    line = out.splitlines()[0]
    assert b'"v":' + value + b"}" in line
    if b"e999" not in value and len(value) < 100:
        assert orjson.loads(line)["new"]["v"] == orjson.loads(value)


def test_a_lone_surrogate_in_json_stays_as_it_is() -> None:
    """json keeps its input text, and takes a lone surrogate escape (orjson does not)."""
    value = b'"\\ud800"'
    out = _render("json", [_relation(JSON), *_tx(pb.insert(16384, [b"1", value]))])
    assert b'"v":"\\ud800"}' in out


@pytest.mark.parametrize("type_oid", [TEXT, 1043])  # text, varchar
def test_a_nul_byte_in_text_for_the_sql_renderer(type_oid: int) -> None:
    """PostgreSQL text holds no NUL: the SQL renderer raised ValueError."""
    for change in (
        pb.insert(16384, [b"1", b"a\x00b"]),
        pb.update(16384, [b"1", b"a\x00b"]),
        pb.delete(16384, [b"1", b"a\x00b"], old_kind="O"),
    ):
        with pytest.raises(
            DecodeError, match=r"public\.items: cannot write the value of column 'v' \(.*\) as SQL"
        ):
            _render("sql", [_relation(type_oid), *_tx(change)])
    # JSON and the table show it, escaped
    out = _render("json", [_relation(type_oid), *_tx(pb.insert(16384, [b"1", b"a\x00b"]))])
    assert orjson.loads(out.splitlines()[0])["new"]["v"] == "a\x00b"


def test_an_integer_no_json_reader_takes_is_named_too() -> None:
    """An update with its old key (no fast path) of a bigint past 64 bits: orjson's
    TypeError before."""
    change = pb.update(16384, [b"1", b"99999999999999999999999"], old=[b"2", None])
    with pytest.raises(DecodeError, match=r"column 'v' \(bigint\) as JSON"):
        _render("json", [_relation(INT8), *_tx(change)])
