"""A snapshot's COPY text split column by column, and its rows encoded column by column:
the same values and the same bytes as row by row, generated code on and off."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgtail import pgoutput as po
from pgtail.changes.copy_rows import TableRows, copy_columns, copy_fields
from pgtail.render import make_renderer, row_encoder
from pgtail.render.jsonl_rows import (
    _dumps_each,
    escapes_nothing,
    int_texts,
    interleave,
    template_literals,
)
from pgtail.values import JSON_ESCAPES

# COPY TO's text format (CopyAttributeOutText): these bytes escaped, NULL as \N
_COPY_ESCAPES = {
    ord("\\"): b"\\\\",
    ord("\b"): b"\\b",
    ord("\f"): b"\\f",
    ord("\n"): b"\\n",
    ord("\r"): b"\\r",
    ord("\t"): b"\\t",
    ord("\v"): b"\\v",
}


def copy_text(rows: list[list[bytes | None]]) -> bytes:
    """The reference: rows as COPY ... TO STDOUT writes them, byte by byte."""
    out = bytearray()
    for row in rows:
        fields = []
        for value in row:
            if value is None:
                fields.append(b"\\N")
            else:
                fields.append(b"".join(_COPY_ESCAPES.get(b, bytes([b])) for b in value))
        out += b"\t".join(fields) + b"\n"
    return bytes(out)


def transpose(rows: list[list[bytes | None]], width: int) -> list[list[bytes | None]]:
    return [[row[i] for row in rows] for i in range(width)]


_values = st.one_of(st.none(), st.binary(max_size=12), st.sampled_from([b"\\N", b"N", b"\\"]))


@given(
    st.integers(1, 5).flatmap(
        lambda w: st.tuples(
            st.just(w), st.lists(st.lists(_values, min_size=w, max_size=w), max_size=8)
        )
    )
)
def test_copy_columns_round_trip(shape: tuple[int, list[list[bytes | None]]]) -> None:
    width, rows = shape
    data = copy_text(rows)
    assert copy_columns(data, width) == transpose(rows, width)
    assert [copy_fields(line) for line in data.split(b"\n")[:-1]] == rows


_raw_fields = st.binary(max_size=8).map(lambda b: b.replace(b"\t", b"").replace(b"\n", b""))


@given(
    st.integers(1, 4).flatmap(
        lambda w: st.tuples(
            st.just(w),
            st.lists(st.lists(_raw_fields, min_size=w, max_size=w), min_size=1, max_size=6),
        )
    )
)
def test_copy_columns_agree_with_copy_fields_on_any_escapes(
    shape: tuple[int, list[list[bytes]]],
) -> None:
    """Whatever follows a backslash (COPY never writes \\x or a lone one at the end):
    the columns hold what `copy_fields` makes of each line."""
    width, rows = shape
    data = b"".join(b"\t".join(row) + b"\n" for row in rows)
    lines = [copy_fields(line) for line in data.split(b"\n")[:-1]]
    assert copy_columns(data, width) == transpose(lines, width)


def test_copy_columns_rejects_another_width() -> None:
    with pytest.raises(ValueError):
        copy_columns(b"1\t2\n3\t4\n", 3)
    with pytest.raises(ValueError):
        copy_columns(b"1\t2\n3\t4\n", 0)
    assert copy_columns(b"1\t2\n3\t4\n", 1 + 1) == [[b"1", b"3"], [b"2", b"4"]]


@given(
    st.lists(
        st.recursive(
            st.none() | st.booleans() | st.floats() | st.text(),
            lambda c: st.lists(c, max_size=3),
            max_leaves=6,
        ),
        max_size=6,
    )
)
def test_dumps_each_is_dumps_of_each(objects: list[Any]) -> None:
    assert _dumps_each(objects) == [orjson.dumps(o) for o in objects]


def test_dumps_each_with_a_newline_in_a_fragment() -> None:
    objects = [orjson.Fragment(b"[1,\n,2]"), 1.5, orjson.Fragment(b'{"a":\n1}')]
    assert _dumps_each(objects) == [b"[1,\n,2]", b"1.5", b'{"a":\n1}']


# --- the rows encoder ------------------------------------------------------------------

# (name, type OID, texts a server sends, and a few it does not)
_COLUMNS: list[tuple[str, int, list[bytes]]] = [
    ("id", 20, [b"1", b"-42", b"9223372036854775807", b"007", b"x", b"99999999999999999999999"]),
    ("name", 25, [b"name 1", b"", b'q"', b"a\tb", "é".encode(), b"\\", b"a\x01", b"\xff"]),
    ("qty", 23, [b"0", b"-1", b"1000"]),
    ("price", 1700, [b"0.01", b"NaN", b"-12.50", b"Infinity"]),
    (
        "created",
        1184,
        [
            b"2026-11-26 16:31:07.23717+00",
            b"2024-01-02 03:04:05+00",
            b"infinity",
            b"2024-01-02 03:04:05+05:30",
            b"0044-03-15 12:00:00+00 BC",
            b"+00",
            b"x\n+00",
        ],
    ),
    ("flag", 16, [b"t", b"f", b"x"]),
    ("meta", 3802, [b'{"k": 1, "tag": "x"}', b"{}", b'"a\\tb"', b"[1, 2]", b'1,"op":"x"', b"{"]),
    (
        "tags",
        1009,
        [
            b"{a,b}",
            b"{}",
            b'{"a b",NULL,c}',
            b'{"a\\\\b"}',
            b"{{a},{b}}",
            b"[0:1]={a,b}",
            b"{a,,b}",
            b"{NULL}",
            b"{null}",
            b"{a\x01}",
            "{é}".encode(),
            b"{,}",
            b"{a,b}}",
        ],
    ),
    ("ratio", 701, [b"1.5", b"NaN", b"-Infinity", b"1e+300", b"0", b"inf", b"-0", b" 2.5", b"1,5"]),
    (
        "ref",
        2950,
        [b"8dae231d-aea8-4bc2-86d6-44044a4bf485", b"00000000-0000-0000-0000-000000000000"],
    ),
    ("at", 1114, [b"2024-01-02 03:04:05", b"infinity"]),
    ("raw", 17, [b"\\x00ff5c", b"\\x"]),
    ("doc", 114, [b'{"a":\n1}', b"[1,\n,2]", b"{}"]),
]


def _relation(columns: list[tuple[str, int, list[bytes]]]) -> po.Relation:
    return po.Relation(
        None,
        7,
        "public",
        "bench",
        "d",
        tuple(po.RelationColumn(int(i == 0), n, oid, -1) for i, (n, oid, _) in enumerate(columns)),
    )


def _rendered(relation: po.Relation, data: bytes, columns_path: bool) -> bytes | str:
    """The JSON lines of the rows ``data``, by the column path or row by row."""
    rows = TableRows(relation, encoder=row_encoder("json"))
    assert rows._encoders is not None and rows._encoders.rows is not None
    if not columns_path:
        rows._encoders = rows._encoders._replace(rows=None)
    out = io.BytesIO()
    try:
        renderer = make_renderer("json", out)
        renderer.render(rows.rows(data))
        renderer.render(rows.rows(data))  # the seqs go on
    except Exception:
        return "raised"
    return out.getvalue()


def _table_rows(usual: bool) -> Any:
    """A table's columns (a prefix of the mixed shape, or a few of its columns) and rows:
    the usual texts first, values no server sends with ``usual`` False."""

    def values(column: tuple[str, int, list[bytes]]) -> Any:
        texts = column[2][:2] if usual else column[2]
        return st.one_of(st.none(), st.sampled_from(texts)) if not usual else st.sampled_from(texts)

    return st.lists(
        st.sampled_from(_COLUMNS), min_size=1, max_size=len(_COLUMNS), unique_by=lambda c: c[0]
    ).flatmap(
        lambda columns: st.tuples(
            st.just(columns),
            st.lists(st.tuples(*[values(c) for c in columns]).map(list), min_size=1, max_size=6),
        )
    )


@pytest.mark.parametrize("enabled", [True, False], ids=["generated", "plain"])
@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=st.one_of(_table_rows(True), _table_rows(False)))
def test_rows_encoder_writes_what_row_by_row_writes(
    codegen: Callable[[bool], None], enabled: bool, table: Any
) -> None:
    codegen(enabled)
    columns, rows = table
    relation = _relation(columns)
    data = copy_text(rows)
    assert _rendered(relation, data, True) == _rendered(relation, data, False)


def test_rows_encoder_on_the_usual_rows(codegen: Callable[[bool], None]) -> None:
    """The mixed shape's usual rows (no NULL, nothing escaped) take the column path (it
    does not raise), and write what row by row writes, generated code on and off."""
    relation = _relation(_COLUMNS[:10])
    rows = [[texts[i % 2] for _, _, texts in _COLUMNS[:10]] for i in range(5)]
    rows[3][1] = None
    data = copy_text(rows)
    outcomes = []
    for enabled in (True, False):
        codegen(enabled)
        encoders = row_encoder("json")(
            TableRows(relation).table, TableRows(relation).info.text_converters
        )
        assert encoders is not None and encoders.rows is not None
        lines = encoders.rows(10, copy_columns(data, 10))
        assert lines.count(b"\n") == 5 and b'"seq":14,' in lines
        rendered = _rendered(relation, data, True)
        assert rendered == _rendered(relation, data, False)
        assert isinstance(rendered, bytes)
        first = orjson.loads(rendered.split(b"\n")[0])
        assert first["new"]["tags"] == ["a", "b"] and first["key"] == {"id": 1}
        outcomes.append((lines, rendered))
    assert outcomes[0] == outcomes[1]


_array_texts = st.lists(
    st.lists(st.text(alphabet='ab,{}"\\ NUL\x01é', max_size=4), max_size=3).map(
        lambda items: ("{" + ",".join(items) + "}").encode()
    ),
    min_size=1,
    max_size=5,
)
_float_texts = st.lists(
    st.one_of(
        st.floats().map(lambda f: repr(f).encode()),
        st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"1e+300", b"-0", b"inf"]),
    ),
    min_size=1,
    max_size=5,
)


@given(arrays=_array_texts, floats=_float_texts)
def test_text_json_column_is_dumps_of_each(arrays: list[bytes], floats: list[bytes]) -> None:
    """Whole columns of text arrays and floats at once: each value's JSON, or None."""
    from pgtail.values import converters, dumps, text_json_column

    for oid, column in ((1009, arrays), (1015, arrays), (701, floats), (700, floats)):
        convert = converters(oid)[0]
        at_once = text_json_column(convert, column)
        assert at_once is None or at_once == [dumps(convert(v)) for v in column]
    assert text_json_column(converters(1009)[0], [b"{a,b}", b"{c}"]) == [b'["a","b"]', b'["c"]']
    assert text_json_column(converters(701)[0], [b"1.5", b"2"]) == [b"1.5", b"2.0"]
    assert text_json_column(converters(25)[0], [b"a"]) is None


@pytest.mark.parametrize(
    ("column", "value"),
    [(("id", 20), b"99999999999999999999999"), (("meta", 3802), b'1,"op":"delete"')],
)
def test_snapshot_rows_of_values_no_json_reader_takes_are_not_written(
    codegen: Callable[[bool], None], column: tuple[str, int], value: bytes
) -> None:
    """A bigint past 64 bits, a jsonb value that is not one JSON value: the column path
    wrote them as they are (a number no reader takes, a line with another "op")."""
    relation = _relation([("k", 23, []), (*column, [])])
    data = copy_text([[b"1", value], [b"2", value]])
    for enabled in (True, False):
        codegen(enabled)
        rows = TableRows(relation, encoder=row_encoder("json"))
        assert rows._encoders is not None and rows._encoders.rows is not None
        with pytest.raises((ValueError, OverflowError)):
            rows._encoders.rows(0, copy_columns(data, 2))
        assert _rendered(relation, data, True) == "raised"


def test_rows_encoder_with_percent_signs_in_names(codegen: Callable[[bool], None]) -> None:
    """Column names holding ``%b``, ``%d`` and ``%%`` stay text in the lines laid out
    column by column (`interleave` of the template's literals), as row by row writes
    them; a column of integers the server would not write (``007``) included."""
    names = ["%b", "a%%d", "100%", "%d"]
    columns = [(name, oid, []) for name, oid in zip(names, (20, 25, 23, 1700), strict=True)]
    relation = _relation(columns)
    data = copy_text([[b"007", b"x%by", b"-0", b"1.5"], [b"8", b"%d", b"12", b"NaN"]])
    for enabled in (True, False):
        codegen(enabled)
        rendered = _rendered(relation, data, True)
        assert rendered == _rendered(relation, data, False)
        assert isinstance(rendered, bytes)
        first = orjson.loads(rendered.split(b"\n")[0])
        assert first["new"] == {"%b": 7, "a%%d": "x%by", "100%": 0, "%d": "1.5"}
        table = TableRows(relation)
        encoders = row_encoder("json")(table.table, table.info.text_converters)
        assert encoders is not None and encoders.rows is not None
        assert encoders.rows(0, copy_columns(data, 4)).count(b"\n") == 2  # does not raise


def test_interleave_and_template_literals() -> None:
    literals = template_literals(b'{"seq":%d,"a%%b":"%b:00"}\n')
    assert literals == [b'{"seq":', b',"a%b":"', b':00"}\n']
    lines = interleave(literals, [[b"1", b"2"], [b"x", b"y"]], 2)
    assert lines == b'{"seq":1,"a%b":"x:00"}\n{"seq":2,"a%b":"y:00"}\n'
    assert interleave(literals, [[], []], 0) == b""
    with pytest.raises(ValueError):
        interleave(literals, [[b"1", b"2"], [b"x"]], 2)
    assert int_texts(range(-1, 2)) == [b"-1", b"0", b"1"] and int_texts([]) == []


@given(st.binary(max_size=40))
def test_escapes_nothing_is_the_regex(text: bytes) -> None:
    assert escapes_nothing(text) == (JSON_ESCAPES.search(text) is None)
    for byte in range(256):
        one = bytes([byte]) + text
        assert escapes_nothing(one) == (JSON_ESCAPES.search(one) is None)
