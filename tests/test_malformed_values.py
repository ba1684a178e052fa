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
    encoder = render.row_encoder(fmt) if fmt else None
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


def _grammar_valid(text: bytes) -> bool:
    """One JSON value by the grammar (the json module's, without NaN and Infinity)."""
    import json

    def no_constant(name: str) -> None:
        raise ValueError(name)

    try:
        json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError):
        return False
    return True


def test_texts_of_one_json_shape_are_json_alike() -> None:
    """The shape the JSON fast path remembers (`JSON_SHAPE`): any two texts of one shape
    are both one JSON value or both not -- random texts, valid and not, each against
    random texts of its shape."""
    import json
    import random

    from pgtail.values.jsontypes import JSON_SHAPE

    rng = random.Random(29)
    classes: dict[int, list[int]] = {}
    for byte in range(128):
        classes.setdefault(JSON_SHAPE[byte], []).append(byte)
    assert len(classes[ord("1")]) == 9 and len(classes[ord("g")]) == 54
    alphabet = "0123456789abcdefgxyzEGNZtrulsn+-.:,[]{}\"\\/ !#'~\x01é"

    def value(depth: int) -> object:
        pick = rng.randrange(7 if depth < 3 else 4)
        if pick == 0:
            return rng.choice([0, 7, -30, 1.5e10, 10**30, 0.25, True, False, None])
        if pick in (1, 2, 3):
            return "".join(rng.choice(alphabet) for _ in range(rng.randrange(6)))
        if pick in (4, 5):
            return [value(depth + 1) for _ in range(rng.randrange(3))]
        return {str(value(depth + 1)): value(depth + 1) for _ in range(rng.randrange(3))}

    texts = []
    for _ in range(400):
        text = json.dumps(value(0), ensure_ascii=rng.random() < 0.5).encode()
        texts.append(text)
        cut = rng.randrange(len(text) + 1)  # and broken ones: cut, doubled, a byte replaced
        texts += [text[:cut], text[:cut] + text, text[:cut] + rng.choice(alphabet).encode()]
    valid = 0
    for text in texts:
        expected = _grammar_valid(text)
        valid += expected
        for _ in range(5):
            twin = bytes(rng.choice(classes.get(JSON_SHAPE[b], [b])) for b in text)
            assert twin.translate(JSON_SHAPE) == text.translate(JSON_SHAPE)
            assert _grammar_valid(twin) == expected, (text, twin)
    assert 300 < valid < len(texts) - 300


@pytest.mark.parametrize("fmt", ["json", None])
def test_a_known_json_shape_does_not_let_a_malformed_value_through(fmt: str | None) -> None:
    """Values of a shape seen before skip the parse; others, malformed, still raise."""
    good = [b'{"k": 1, "tag": "x"}', b'{"k": 2, "tag": "y"}', b"[1, 2]", b'"x"']
    _render(fmt, [_relation(JSONB), *_tx(*(pb.insert(16384, [b"1", v]) for v in good))])
    for bad in (b'{"k": 1, "tag": "x"', b'{"k": 1, "tag": "x"}}', b"[1, 2],3", b'"x'):
        with pytest.raises(DecodeError, match=r"column 'v' \(jsonb\) of public\.items"):
            _render(fmt, [_relation(JSONB), *_tx(pb.insert(16384, [b"1", bad]))])


@pytest.mark.parametrize("nulls", [False, True], ids=["plain", "with-nulls"])
@pytest.mark.parametrize("value", [b"99999999999999999999999", b"-9223372036854775809"])
def test_a_bigint_past_64_bits_is_named_by_the_json_fast_path_too(
    nulls: bool, value: bytes
) -> None:
    """Inserts, updates and deletes the JSON fast path writes: it wrote the number as it
    is, which no JSON reader of 64-bit integers takes (the general path names it)."""
    key = None if nulls else b"1"
    for change in (
        pb.insert(16384, [key, value]),
        pb.update(16384, [key, value]),
        pb.delete(16384, [key, value], old_kind="O"),
    ):
        with pytest.raises(DecodeError, match=r"column 'v' \(bigint\)"):
            _render("json", [_relation(INT8), *_tx(change)])
    # the edges of 64 bits (what orjson writes) and overlong texts of small numbers pass
    for fits in (b"-9223372036854775808", b"18446744073709551615", b"+00000000000000000000042"):
        line = _render("json", [_relation(INT8), *_tx(pb.insert(16384, [key, fits]))])
        assert orjson.loads(line)["new"]["v"] == int(fits)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("type_oid", "value"),
    [
        (JSONB, b"\x01" + b'1,"op":"delete"'),
        (JSONB, b"\x01{"),
        (JSONB, b"\x01"),
        (JSONB, b"\x02{}"),  # another format version
        (JSONB, b""),
        (JSON, b'1,"op":"delete"'),
        (JSON, b"{"),
    ],
)
def test_a_binary_json_value_that_is_not_one_json_value(
    fmt: str | None, type_oid: int, value: bytes
) -> None:
    """It became a hex string: the value of another type, silently."""
    row = [("b", b"\0\0\0\1"), ("b", value)]
    with pytest.raises(DecodeError, match=r"binary value for column 'v' \(jsonb?\) of public"):
        _render(fmt, [_relation(type_oid), *_tx(pb.insert(16384, row))], True)
    good = b"\x01" + b'{"a": 1}' if type_oid == JSONB else b'{"a": 1}'
    insert = pb.insert(16384, [row[0], ("b", good)])
    out = _render("json", [_relation(type_oid), *_tx(insert)], True)
    assert orjson.loads(out.splitlines()[0])["new"]["v"] == {"a": 1}
