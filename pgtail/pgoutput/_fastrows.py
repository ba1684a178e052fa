"""The decoder's fast path: generated TupleData readers, the row messages and per-table
text-row encoders. Private to `pgtail.pgoutput`, which dispatches to it.

Insert, Update, Delete, Begin and Commit come with every row or transaction, so they
are read here with one struct read for the fixed head and a tuple reader generated
per column count (`_codegen`); any failure falls back to the careful parsers below,
which raise the precise DecodeError. `text_tuple_reader` reads a text TupleData's
values in one generated function (for the JSON and SQL renderers' fast path, which
`pgtail.changes` wires); its contract is the wire offset of the TupleData in the payload.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import timedelta
from types import FunctionType
from typing import Any

from pgtail import _codegen
from pgtail.errors import DecodeError
from pgtail.pgoutput._reads import (
    UINT32,
    Layout,
    expect_end,
    read_byte,
    read_timestamp,
    xid_layout,
)
from pgtail.pgoutput.messages import (
    KIND_BINARY,
    KIND_NULL,
    KIND_TEXT,
    KIND_UNCHANGED_TOAST,
    PG_EPOCH,
    TUPLE_KEY,
    TUPLE_NEW,
    TUPLE_OLD,
    Begin,
    Commit,
    Delete,
    Insert,
    TupleData,
    Update,
)

# Begin: Int64 final LSN; Int64 commit timestamp; Int32 xid.
_BEGIN = Layout("Begin", ("final_lsn", "Q"), ("commit_time", "q"), ("xid", "I"))
# Commit: Int8 flags (unused); Int64 commit LSN; Int64 end LSN; Int64 commit timestamp.
_COMMIT = Layout(
    "Commit", ("flags", "B"), ("commit_lsn", "Q"), ("end_lsn", "Q"), ("commit_time", "q")
)
# Insert: [Int32 xid]; Int32 relation OID; Byte1('N'); TupleData.
_INSERT = xid_layout("Insert", ("relation_id", "I"), ("tuple_marker", "B"))
# Update: [Int32 xid]; Int32 relation OID; [Byte1('K'|'O') TupleData]; Byte1('N') TupleData.
_UPDATE = xid_layout("Update", ("relation_id", "I"), ("tuple_marker", "B"))
# Delete: [Int32 xid]; Int32 relation OID; Byte1('K'|'O'); TupleData.
_DELETE = xid_layout("Delete", ("relation_id", "I"), ("tuple_marker", "B"))


# --- TupleData ------------------------------------------------------------------
#
# The hot path. TupleData is "Int16 number of columns; per column Byte1 kind ('n' null,
# 'u' unchanged TOAST, 't' text, 'b' binary); for 't' and 'b': Int32 length and the
# value bytes". Readers unrolled for a fixed column count (generated once per count)
# run about a third faster than a loop, and most tables are narrow; wider tuples use
# the loop. Fast paths only catch failures; _tuple_error re-walks the bytes slowly to
# say exactly what is wrong.

_UNROLL_MAX = 64
_MAX_COLUMNS = 1664  # MaxTupleAttributeNumber
_TupleReader = Callable[[bytes, int], tuple[TupleData, int]]
_tuple_readers: dict[int, _TupleReader] = {}


_make_tuple: Callable[..., TupleData]
_make_insert: Callable[..., Insert]
_make_update: Callable[..., Update]
_make_delete: Callable[..., Delete]
_make_begin: Callable[..., Begin]
_make_commit: Callable[..., Commit]


@_codegen.on_reset
def _build_constructors() -> None:
    """Bind the constructors the parsers call (and forget the tuple readers and text
    tuple code built with the old ones): at import, and on `_codegen.reset`."""
    global _make_tuple, _make_insert, _make_update, _make_delete, _make_begin, _make_commit
    _make_tuple = _codegen.fast_constructor(TupleData)
    _make_insert = _codegen.fast_constructor(Insert)
    _make_update = _codegen.fast_constructor(Update)
    _make_delete = _codegen.fast_constructor(Delete)
    _make_begin = _codegen.fast_constructor(Begin)
    _make_commit = _codegen.fast_constructor(Commit)
    _tuple_readers.clear()
    _text_tuple_readers.clear()


class _BadKind(Exception):
    """Internal: an unknown column kind in a fast path (turned into DecodeError)."""


def _loop_reader(natts: int) -> _TupleReader:
    """The reader of wide tuples, and of every tuple without generated code."""

    def read(buf: bytes, pos: int) -> tuple[TupleData, int]:
        kinds = bytearray()
        values: list[bytes | None] = []
        for _ in range(natts):
            kind = buf[pos]
            kinds.append(kind)
            if kind == 116 or kind == 98:  # t, b
                start = pos + 5
                pos = start + UINT32(buf, pos + 1)[0]
                values.append(buf[start:pos])
            elif kind == 110 or kind == 117:  # n, u
                pos += 1
                values.append(None)
            else:
                raise _BadKind
        return _make_tuple(bytes(kinds), tuple(values)), pos

    return read


def _unrolled_reader(natts: int) -> _TupleReader:
    if natts == 0:
        empty = TupleData(b"", ())
        return lambda buf, pos: (empty, pos)
    lines = ["def read(buf, p):"]
    for i in range(natts):
        lines += [
            f"    k{i} = buf[p]",
            f"    if k{i} == 116 or k{i} == 98:",
            "        s = p + 5",
            "        p = s + UINT32(buf, p + 1)[0]",
            f"        v{i} = buf[s:p]",
            f"    elif k{i} == 110 or k{i} == 117:",
            "        p += 1",
            f"        v{i} = None",
            "    else:",
            "        raise _BadKind",
        ]
    kinds = ", ".join(f"k{i}" for i in range(natts))
    values = ", ".join(f"v{i}" for i in range(natts))
    lines.append(f"    return _make_tuple(bytes(({kinds},)), ({values},)), p")
    namespace: dict[str, Any] = {
        "UINT32": UINT32,
        "_BadKind": _BadKind,
        "_make_tuple": _make_tuple,
    }
    reader: _TupleReader = _codegen.define(
        "\n".join(lines), "read", f"pgoutput tuple reader {natts}", namespace
    )
    return reader


def _tuple_reader(natts: int) -> _TupleReader:
    reader = _tuple_readers.get(natts)
    if reader is None:
        if natts <= _UNROLL_MAX and _codegen.enabled():
            reader = _unrolled_reader(natts)
        else:
            reader = _loop_reader(natts)
        if natts <= _MAX_COLUMNS:  # garbage counts above it are not worth remembering
            _tuple_readers[natts] = reader
    return reader


# read(payload, offset, seq) -> (seq, v0, ..., vN), [seq, v0, ..., vN] or None
# (see text_tuple_reader)
TextTupleReader = Callable[[bytes, int, int], "tuple[Any, ...] | list[Any] | None"]
_text_tuple_readers: dict[int, TextTupleReader] = {}


def text_tuple_reader(natts: int) -> TextTupleReader:
    """A fast reader of a text-mode TupleData (an Insert's or Update's new row, a Delete's
    old row or key): ``read(buf, offset, seq)``, for the fast path of the JSON and SQL
    renderers' lines (`pgtail.changes.fastpath` hands the values to their encoders).

    ``offset`` is where the TupleData starts (its column count). When the tuple has
    ``natts`` columns, all text, and ends where ``buf`` does, returns the tuple
    ``(seq, v0, ..., vN)`` of each value's bytes; when some are NULL, the list
    ``[seq, v0, ..., vN]`` with None for those (the caller picks its encoder by the
    type, at no cost per value). Returns None for anything else: another count or kind
    (binary, unchanged TOAST), a truncated or overlong tuple; the caller then takes the
    general path (`decode_tuple`), whose errors are precise. One generated function per
    column count (without generated code, `_loop_text_tuple_reader`).
    """
    if not _codegen.enabled():
        return _loop_text_tuple_reader(natts)
    read = _text_tuple_readers.get(natts)
    if read is not None:
        return read
    values = "".join(f", v{i}" for i in range(natts))
    lines = [
        "def read(buf, p, seq):",
        "    try:",
        f"        if (buf[p] << 8 | buf[p + 1]) != {natts}:",
        "            return None",
        "        p += 2",
        "        nulls = False",
    ]
    for i in range(natts):
        lines += [
            "        k = buf[p]",
            "        if k == 116:",  # 't'
            "            s = p + 5",
            "            p = s + UINT32(buf, p + 1)[0]",
            f"            v{i} = buf[s:p]",
            "        elif k == 110:",  # 'n'
            "            p += 1",
            f"            v{i} = None",
            "            nulls = True",
            "        else:",
            "            return None",
        ]
    lines += [
        "        if p != len(buf):",
        "            return None",
        "    except Exception:",  # the general path decides, and raises precisely
        "        return None",
        "    if nulls:",
        f"        return [seq{values}]",
        f"    return (seq{values},)",
    ]
    code = _codegen.code_of("\n".join(lines), "read", f"pgoutput text tuple {natts}")
    read = FunctionType(code, {"UINT32": UINT32}, "read")
    if natts <= _MAX_COLUMNS:
        _text_tuple_readers[natts] = read
    return read


def _loop_text_tuple_reader(natts: int) -> TextTupleReader:
    """`text_tuple_reader` written as a loop: the same results, without generated code."""

    def read(buf: bytes, p: int, seq: int) -> tuple[Any, ...] | list[Any] | None:
        try:
            if (buf[p] << 8 | buf[p + 1]) != natts:
                return None
            p += 2
            nulls = False
            values: list[Any] = [seq]
            for _ in range(natts):
                kind = buf[p]
                if kind == 116:  # t
                    start = p + 5
                    p = start + UINT32(buf, p + 1)[0]
                    values.append(buf[start:p])
                elif kind == 110:  # n
                    p += 1
                    values.append(None)
                    nulls = True
                else:
                    return None
            if p != len(buf):
                return None
        except Exception:  # the general path decides, and raises precisely
            return None
        return values if nulls else tuple(values)

    return read


_build_constructors()


def decode_tuple(buf: bytes, offset: int, where: str) -> tuple[TupleData, int]:
    """Decode the TupleData at ``offset``; return it and the offset just after it.

    ``where`` names the field for errors, e.g. ``"Update.old_tuple"``.
    """
    try:
        natts = (buf[offset] << 8) | buf[offset + 1]
        tup, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, offset + 2)
    except (IndexError, struct.error, _BadKind):
        raise _tuple_error(buf, offset, where) from None
    if pos > len(buf):
        raise _tuple_error(buf, offset, where)
    return tup, pos


def _tuple_error(buf: bytes, offset: int, where: str) -> DecodeError:
    """Walk a TupleData that failed the fast path and describe the first problem."""
    size = len(buf)
    if offset + 2 > size:
        return DecodeError(
            f"{where}: truncated (needs 2 bytes for the column count at offset {offset}, "
            f"{max(0, size - offset)} left)"
        )
    natts = (buf[offset] << 8) | buf[offset + 1]
    pos = offset + 2
    for column in range(natts):
        if pos >= size:
            return DecodeError(
                f"{where}: truncated at column {column} of {natts} (no kind byte at offset {pos})"
            )
        kind = buf[pos]
        if kind in (KIND_NULL, KIND_UNCHANGED_TOAST):
            pos += 1
        elif kind in (KIND_TEXT, KIND_BINARY):
            if pos + 5 > size:
                return DecodeError(
                    f"{where}: truncated at column {column} of {natts} (needs 4 bytes for "
                    f"the value length at offset {pos + 1}, {size - pos - 1} left)"
                )
            length = UINT32(buf, pos + 1)[0]
            pos += 5
            if pos + length > size:
                return DecodeError(
                    f"{where}: truncated at column {column} of {natts} (value of {length} "
                    f"bytes at offset {pos}, {size - pos} left)"
                )
            pos += length
        else:
            return DecodeError(
                f"{where}: column {column} has unknown kind byte 0x{kind:02x} at offset {pos} "
                "(expected n, u, t or b)"
            )
    return DecodeError(f"{where}: malformed TupleData at offset {offset}")


# Begin and Commit come with every transaction (one each per row in autocommit
# workloads), so they skip the generic helpers when the length is right.

BEGIN_LENGTH = 1 + _BEGIN.size
COMMIT_LENGTH = 1 + _COMMIT.size
# (final_lsn, commit_time, xid) of a Begin and (flags, commit_lsn, end_lsn, commit_time)
# of a Commit, from offset 1: for a reader that makes no message of them (the small-
# transaction lane, `pgtail.changes.fastpath.QuickLane`); commit_time is microseconds
# (see `pg_timestamp`)
unpack_begin = _BEGIN.unpack_from
unpack_commit = _COMMIT.unpack_from


def parse_begin(buf: bytes, in_stream: bool) -> Begin:
    if len(buf) != BEGIN_LENGTH:
        _BEGIN.read(buf, 1)
        expect_end(buf, BEGIN_LENGTH, "Begin")
    final_lsn, micros, xid = unpack_begin(buf, 1)
    try:
        commit_time = PG_EPOCH + timedelta(0, 0, micros)
    except OverflowError:  # infinity, or out of range
        commit_time = read_timestamp(micros, "Begin.commit_time")
    return _make_begin(final_lsn, commit_time, xid)


def parse_commit(buf: bytes, in_stream: bool) -> Commit:
    if len(buf) != COMMIT_LENGTH:
        _COMMIT.read(buf, 1)
        expect_end(buf, COMMIT_LENGTH, "Commit")
    flags, commit_lsn, end_lsn, micros = unpack_commit(buf, 1)
    try:
        commit_time = PG_EPOCH + timedelta(0, 0, micros)
    except OverflowError:  # infinity, or out of range
        commit_time = read_timestamp(micros, "Commit.commit_time")
    return _make_commit(flags, commit_lsn, end_lsn, commit_time)


def _row_head(
    buf: bytes, in_stream: bool, layouts: tuple[Layout, Layout]
) -> tuple[int | None, int, int, int]:
    """Insert/Update/Delete head: xid (in a stream only), relation OID, tuple marker,
    and the offset after them; ``layouts`` is the message's (plain, in-stream) pair."""
    layout = layouts[1] if in_stream else layouts[0]
    try:
        fields = layout.unpack_from(buf, 1)
    except struct.error:
        raise layout.truncated(buf, 1) from None
    if in_stream:
        xid, relation_id, marker = fields
        return xid, relation_id, marker, 10
    relation_id, marker = fields
    return None, relation_id, marker, 6


def parse_insert_careful(buf: bytes, in_stream: bool) -> Insert:
    xid, relation_id, marker, pos = _row_head(buf, in_stream, _INSERT)
    if marker != TUPLE_NEW:
        raise _marker_error("Insert", marker, pos - 1, "N")
    new, pos = decode_tuple(buf, pos, "Insert.new_tuple")
    if pos != len(buf):
        expect_end(buf, pos, "Insert")
    return Insert(xid, relation_id, new)


def parse_update_careful(buf: bytes, in_stream: bool) -> Update:
    xid, relation_id, marker, pos = _row_head(buf, in_stream, _UPDATE)
    old: TupleData | None
    if marker == TUPLE_NEW:
        old_kind = None
        old = None
    elif marker in (TUPLE_KEY, TUPLE_OLD):
        old_kind = "K" if marker == TUPLE_KEY else "O"
        old, pos = decode_tuple(buf, pos, "Update.old_tuple")
        marker = read_byte(buf, pos, "Update.new_tuple_marker")
        pos += 1
        if marker != TUPLE_NEW:
            raise _marker_error("Update.new_tuple", marker, pos - 1, "N")
    else:
        raise _marker_error("Update", marker, pos - 1, "K, O or N")
    new, pos = decode_tuple(buf, pos, "Update.new_tuple")
    if pos != len(buf):
        expect_end(buf, pos, "Update")
    return Update(xid, relation_id, old_kind, old, new)


def parse_delete_careful(buf: bytes, in_stream: bool) -> Delete:
    xid, relation_id, marker, pos = _row_head(buf, in_stream, _DELETE)
    if marker == TUPLE_KEY:
        old_kind = "K"
    elif marker == TUPLE_OLD:
        old_kind = "O"
    else:
        raise _marker_error("Delete", marker, pos - 1, "K or O")
    old, pos = decode_tuple(buf, pos, "Delete.old_tuple")
    if pos != len(buf):
        expect_end(buf, pos, "Delete")
    return Delete(xid, relation_id, old_kind, old)


# Insert / Update / Delete are the hot path: one struct read for the fixed head
# (relation OID, tuple marker, column count), then the tuple reader directly. Any
# failure falls back to the careful parser above, which raises the precise error (a
# property test checks both agree on every input); so the fast path only has to be
# right about what it accepts.

_HEAD = struct.Struct("!IBH").unpack_from  # relation OID, tuple marker, column count
_STREAM_HEAD = struct.Struct("!IIBH").unpack_from  # xid first, inside a stream
_MARKER_HEAD = struct.Struct("!BH").unpack_from  # Update's 'N' marker after the old tuple


class _Malformed(Exception):
    """Internal: the fast path saw something the careful parser must explain."""


def parse_insert(buf: bytes, in_stream: bool) -> Insert:
    try:
        if in_stream:
            xid, relation_id, marker, natts = _STREAM_HEAD(buf, 1)
            pos = 12
        else:
            xid = None
            relation_id, marker, natts = _HEAD(buf, 1)
            pos = 8
        if marker != TUPLE_NEW:
            raise _Malformed
        new, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
        if pos != len(buf):
            raise _Malformed
    except (IndexError, struct.error, _BadKind, _Malformed):
        return parse_insert_careful(buf, in_stream)  # raises the precise DecodeError
    return _make_insert(xid, relation_id, new)


def parse_update(buf: bytes, in_stream: bool) -> Update:
    try:
        if in_stream:
            xid, relation_id, marker, natts = _STREAM_HEAD(buf, 1)
            pos = 12
        else:
            xid = None
            relation_id, marker, natts = _HEAD(buf, 1)
            pos = 8
        old: TupleData | None
        if marker == TUPLE_NEW:  # no old tuple
            old_kind = None
            old = None
        elif marker in (TUPLE_KEY, TUPLE_OLD):
            old_kind = "K" if marker == TUPLE_KEY else "O"
            old, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
            marker, natts = _MARKER_HEAD(buf, pos)
            if marker != TUPLE_NEW:
                raise _Malformed
            pos += 3
        else:
            raise _Malformed
        new, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
        if pos != len(buf):
            raise _Malformed
    except (IndexError, struct.error, _BadKind, _Malformed):
        return parse_update_careful(buf, in_stream)  # raises the precise DecodeError
    return _make_update(xid, relation_id, old_kind, old, new)


def parse_delete(buf: bytes, in_stream: bool) -> Delete:
    try:
        if in_stream:
            xid, relation_id, marker, natts = _STREAM_HEAD(buf, 1)
            pos = 12
        else:
            xid = None
            relation_id, marker, natts = _HEAD(buf, 1)
            pos = 8
        if marker == TUPLE_KEY:
            old_kind = "K"
        elif marker == TUPLE_OLD:
            old_kind = "O"
        else:
            raise _Malformed
        old, pos = (_tuple_readers.get(natts) or _tuple_reader(natts))(buf, pos)
        if pos != len(buf):
            raise _Malformed
    except (IndexError, struct.error, _BadKind, _Malformed):
        return parse_delete_careful(buf, in_stream)  # raises the precise DecodeError
    return _make_delete(xid, relation_id, old_kind, old)


def _marker_error(where: str, marker: int, pos: int, expected: str) -> DecodeError:
    return DecodeError(
        f"{where}.tuple_marker: unexpected byte 0x{marker:02x} at offset {pos} "
        f"(expected {expected})"
    )
