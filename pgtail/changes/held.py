"""Holding a transaction until its commit, within a memory bound.

`OpenTx` is one transaction being held: the events converted on arrival (encoded lines
gathered into `EncodedRows` by `RowRun`; past the bound, the oldest moved to a temporary
file as `SpilledRun`s) and, once it has gone raw, the rest as payloads in `Held`, which
spills them to a temporary file of its own. The assembler decides what goes where.
"""

from __future__ import annotations

import itertools
import struct
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import IO, Any

from pgtail import pgoutput as po
from pgtail.changes.events import EncodedRows, Op, Table, Transaction
from pgtail.changes.tables import TableInfo
from pgtail.errors import DecodeError, SpillError

_SCHEMA = frozenset((po.MSG_RELATION, po.MSG_TYPE))  # survive a subtransaction abort
_RECORD_LEN = struct.Struct("!I")
RECORD_OVERHEAD = 48  # rough per-payload cost of a held bytes object and its list slot
LINE_OVERHEAD = 8  # an encoded insert's line: its bytes, joined, plus a list slot until then
_RUN_LINES = 256  # encoded lines per EncodedRows: joined on arrival, a chunk at a time
_RAW_SHARE = 8  # a raw part's in-memory buffer: this fraction of the bound
_SPILLED_COST = 100  # what a SpilledRun left in rows costs


class Held:
    """The raw payloads of one transaction: in memory up to a bound, then in a temp file.

    Records keep their order. Once the in-memory part passes ``limit`` bytes it is
    appended to an anonymous temporary file as length-prefixed records, so a huge
    (streamed) transaction costs disk, not memory. ``truncate`` drops everything from
    a record index on (a rolled-back subtransaction), keeping schema messages.
    """

    __slots__ = ("records", "mem_bytes", "limit", "file", "file_count", "marks", "spills")

    def __init__(self, limit: int) -> None:
        self.records: list[bytes] = []
        self.mem_bytes = 0
        self.limit = limit
        self.file: IO[bytes] | None = None
        self.file_count = 0  # records in the file (they come before `records`)
        self.marks: dict[int, int] = {}  # record index -> file offset (-1 while in memory)
        self.spills = 0  # how many times the memory part went to the file

    def __len__(self) -> int:
        return self.file_count + len(self.records)

    def append(self, payload: bytes) -> None:
        self.records.append(payload)
        self.mem_bytes += len(payload) + RECORD_OVERHEAD
        if self.mem_bytes > self.limit:
            self.spill()

    def mark(self) -> int:
        """Remember the position of the next record (to truncate there later)."""
        index = len(self)
        self.marks[index] = -1
        return index

    def spill(self) -> None:
        try:
            self._spill()
        except OSError as exc:
            raise _spill_error(exc) from exc

    def _spill(self) -> None:
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="pgtail-tx-")  # noqa: SIM115 - closed by close()
        out = self.file
        out.seek(0, 2)
        offset = out.tell()
        base = self.file_count
        pending = sorted(i for i, off in self.marks.items() if off < 0 and i >= base)
        pack = _RECORD_LEN.pack
        batch: list[bytes] = []
        for i, payload in enumerate(self.records):
            if pending and pending[0] == base + i:
                self.marks[pending.pop(0)] = offset
            batch.append(pack(len(payload)))
            batch.append(payload)
            offset += 4 + len(payload)
            if len(batch) >= 8192:
                out.write(b"".join(batch))
                batch.clear()
        if batch:
            out.write(b"".join(batch))
        self.file_count += len(self.records)
        self.records = []
        self.mem_bytes = 0
        self.spills += 1

    def truncate(self, index: int) -> None:
        """Drop the records from ``index`` on, except Relation and Type messages."""
        kept: list[bytes] = []
        if index < self.file_count:
            assert self.file is not None
            offset = self.marks[index] if index else 0
            self.file.seek(offset)
            kept.extend(
                p for p in _read_records(self.file, self.file_count - index) if p[0] in _SCHEMA
            )
            self.file.seek(offset)
            self.file.truncate()
            self.file_count = index
            kept.extend(p for p in self.records if p[0] in _SCHEMA)
        else:
            start = index - self.file_count
            kept.extend(self.records[:start])
            kept.extend(p for p in self.records[start:] if p[0] in _SCHEMA)
        self.records = kept
        self.mem_bytes = sum(len(p) + RECORD_OVERHEAD for p in kept)
        self.marks = {i: off for i, off in self.marks.items() if i < index}

    def __iter__(self) -> Iterator[bytes]:
        # a plain list iterator when nothing spilled: no generator frame per record
        if self.file is None or not self.file_count:
            return iter(self.records)
        return itertools.chain(self._from_file(), self.records)

    def _from_file(self) -> Iterator[bytes]:
        assert self.file is not None
        self.file.flush()
        self.file.seek(0)
        yield from _read_records(self.file, self.file_count)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        self.records = []


def _spill_error(exc: OSError) -> SpillError:
    where = tempfile.gettempdir()
    return SpillError(
        f"cannot hold a large transaction until its commit in {where}: {exc.strerror or exc}",
        hint="past 64 MiB a transaction waits in a temporary file there; free space, or "
        "set TMPDIR to a larger disk, and run pgtail again: nothing unwritten was confirmed",
    )


def _read_records(source: IO[bytes], count: int) -> Iterator[bytes]:
    read = source.read
    unpack = _RECORD_LEN.unpack
    for _ in range(count):
        header = read(4)
        (length,) = unpack(header)
        payload = read(length)
        if len(payload) != length:
            raise DecodeError("held transaction file is truncated")
        yield payload


class RowRun:
    """Encoded lines of one table and op, becoming an EncodedRows _RUN_LINES at a time."""

    __slots__ = ("lines", "table", "op", "first_seq")

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.table: Table | None = None
        self.op: Op = "insert"
        self.first_seq = 0

    def add(
        self, table: Table, tx: Transaction, seq: int, line: bytes, op: Op = "insert"
    ) -> EncodedRows | None:
        """Add the line of change ``seq``; return the changes it completes, if any (the
        previous table's or op's, or a full run)."""
        done = None
        if table is not self.table or op is not self.op or len(self.lines) >= _RUN_LINES:
            done = self.take(tx)
            self.table = table
            self.op = op
            self.first_seq = seq
        self.lines.append(line)
        return done

    def take(self, tx: Transaction) -> EncodedRows | None:
        """The changes collected so far (None if none); the run starts again empty."""
        lines = self.lines
        table = self.table
        self.table = None
        if not lines or table is None:
            return None
        self.lines = []
        return EncodedRows(table, tx, self.first_seq, len(lines), b"".join(lines), self.op)


class SpilledRun:
    """An EncodedRows whose lines wait in its transaction's lines file (see make_room)."""

    __slots__ = ("table", "tx", "first_seq", "count", "op", "offset", "length")

    def __init__(self, rows: EncodedRows, offset: int) -> None:
        self.table = rows.table
        self.tx = rows.tx
        self.first_seq = rows.first_seq
        self.count = rows.count
        self.op = rows.op
        self.offset = offset  # where its lines start in the lines file
        self.length = len(rows.lines)


def changes_in(rows: Iterable[Any]) -> int:
    """How many changes held rows stand for (encoded rows count each of theirs)."""
    return sum(e.count if type(e) is EncodedRows or type(e) is SpilledRun else 1 for e in rows)


def raw_limit(limit: int) -> int:
    """The bytes an open transaction bound to ``limit`` holds as raw payloads in memory
    (`Held`'s limit: each payload counts its length and `RECORD_OVERHEAD`)."""
    return max(1, limit // _RAW_SHARE)


class OpenTx:
    """A transaction being held: Begin / Begin Prepare .. Commit / Prepare, or a streamed xid.

    Its changes are decoded and converted as they arrive, into ``rows`` (events of
    ``tx``, whose fields the commit fills in; ``seq`` is the row's index, which stays
    right because a rolled-back subtransaction only ever drops the tail), while their
    estimated size stays under the bound. Past it, encoded rows (the oldest first) move
    to a temporary file until half the bound is free (`make_room`), so a large transaction
    of plain inserts keeps being encoded on arrival, while the server is still sending it.
    When that frees too little the transaction goes ``raw``: the rest
    of it is held as payloads in ``held`` (spilled to a file past a smaller bound) and
    decoded at the commit with the relation cache as it was when it went raw
    (``raw_tables``), plus the Relation / Type messages held in order with the payloads.
    """

    __slots__ = (
        "xid",
        "held",
        "rows",
        "rows_bytes",
        "rows_limit",
        "raw",
        "raw_tables",
        "raw_type_names",
        "own",
        "view",
        "view_base",
        "origin",
        "origin_lsn",
        "subxacts",
        "begin",
        "tx",
        "deferred",
        "count",
        "run",
        "lines_file",
        "spilled_upto",
    )

    def __init__(self, xid: int, limit: int, begin: po.Begin | po.BeginPrepare | None) -> None:
        self.xid = xid
        # converted rows and raw payloads share the bound: once rows fill it, the raw
        # part only buffers its file writes
        self.held = Held(raw_limit(limit))
        self.rows: list[Any] = []
        self.rows_bytes = 0
        self.rows_limit = limit
        self.raw = False
        self.raw_tables: dict[int, TableInfo] = {}
        self.raw_type_names: dict[int, str] = {}
        # Relations this transaction received: they win over the shared cache, which
        # another (streamed) transaction may have changed since (see `Assembler._view`)
        self.own: dict[int, TableInfo] = {}
        self.view: dict[int, TableInfo] = {}
        self.view_base: dict[int, TableInfo] | None = None
        self.origin: str | None = None
        self.origin_lsn: int | None = None
        self.subxacts: dict[int, int] = {}  # streamed: subxid -> position of its first record
        self.begin = begin
        # The Transaction of every event converted on arrival; its fields are only known
        # at the commit, which fills them in (see `Assembler._replay`).
        self.tx = Transaction(xid=xid, commit_lsn=0, end_lsn=0, commit_time=datetime.min)
        self.deferred = False  # raw only until it is large enough (see _DEFERRED_ROWS)
        self.count = 0  # events in rows (an EncodedRows counts its inserts): the next seq
        self.run = RowRun()  # encoded lines not yet in rows
        self.lines_file: IO[bytes] | None = None  # the lines of the _SpilledRuns in rows
        self.spilled_upto = 0  # rows before this index hold no EncodedRows

    def close_run(self) -> None:
        """Put the encoded lines collected so far into rows, as one EncodedRows."""
        done = self.run.take(self.tx)
        if done is not None:
            self.rows.append(done)

    def add(self, event: Any, cost: int) -> None:
        """Hold a converted event (seq ``self.count``) of ``cost`` estimated bytes."""
        self.close_run()
        self.rows.append(event)
        self.count += 1
        self.rows_bytes += cost

    def add_line(self, table: Table, line: bytes, op: Op = "insert") -> None:
        """Hold the encoded line of change ``self.count``."""
        done = self.run.add(table, self.tx, self.count, line, op)
        if done is not None:
            self.rows.append(done)
        self.count += 1
        self.rows_bytes += len(line) + LINE_OVERHEAD

    def make_room(self) -> bool:
        """Past the bound: move encoded rows, the oldest first, to the lines file until
        half the bound is free. False when too few of the rows are encoded: the
        caller then makes the transaction raw."""
        try:
            return self._make_room()
        except OSError as exc:
            raise _spill_error(exc) from exc

    def _make_room(self) -> bool:
        self.close_run()
        rows = self.rows
        goal = self.rows_limit // 2
        lines_file = self.lines_file
        index = self.spilled_upto
        while index < len(rows) and self.rows_bytes > goal:
            row = rows[index]
            if type(row) is EncodedRows and not row.pieces:  # (a large value's: held)
                if lines_file is None:
                    lines_file = self.lines_file = tempfile.TemporaryFile(  # noqa: SIM115 - closed by close()
                        prefix="pgtail-lines-"
                    )
                lines_file.seek(0, 2)  # after the last spilled run (see truncate)
                rows[index] = SpilledRun(row, lines_file.tell())
                lines_file.write(row.lines)
                self.rows_bytes -= len(row.lines) + row.count * LINE_OVERHEAD - _SPILLED_COST
            index += 1
        self.spilled_upto = index
        return self.rows_bytes <= self.rows_limit

    def take_rows(self) -> Iterable[Any]:
        """The rows, for the commit, with the spilled inserts read back in order; the
        transaction holds none of them afterwards."""
        rows = self.rows
        self.rows = []
        if self.lines_file is None:
            return rows
        return self._read_back(rows, self.lines_file)

    @staticmethod
    def _read_back(rows: list[Any], lines_file: IO[bytes]) -> Iterator[Any]:
        lines_file.flush()
        seek = lines_file.seek
        read = lines_file.read
        for row in rows:
            if type(row) is SpilledRun:
                seek(row.offset)
                lines = read(row.length)
                if len(lines) != row.length:
                    raise DecodeError("held transaction file is truncated")
                yield EncodedRows(row.table, row.tx, row.first_seq, row.count, lines, row.op)
            else:
                yield row

    def go_raw(self, tables: dict[int, TableInfo], type_names: dict[int, str]) -> None:
        self.close_run()  # what was encoded so far stays before what is held raw
        self.deferred = False
        self.raw = True
        self.raw_tables = tables
        self.raw_type_names = type_names

    def mark(self) -> int:
        """The position of the next record: rows first, then the raw payloads. Encoded
        lines before it are closed into rows, so that it falls between two rows."""
        if not self.raw:
            self.close_run()
            return len(self.rows)
        return len(self.rows) + self.held.mark()

    def truncate(self, position: int) -> None:
        """Drop every record from ``position`` on (schema messages stay, see Held).

        The open run of encoded lines goes too: it began after the last mark."""
        self.run = RowRun()
        if position < len(self.rows):
            spilled = [r for r in self.rows[position:] if type(r) is SpilledRun]
            if spilled:  # their lines are the file's tail: cut it there
                assert self.lines_file is not None
                self.lines_file.truncate(spilled[0].offset)
            del self.rows[position:]
            self.spilled_upto = min(self.spilled_upto, position)
            if self.raw:
                self.held.truncate(0)
        elif self.raw:
            self.held.truncate(position - len(self.rows))
            return
        before = self.count
        self.count = changes_in(self.rows)
        if before:
            self.rows_bytes = self.rows_bytes * self.count // before

    def close(self) -> None:
        self.held.close()
        self.rows = []
        self.run = RowRun()
        if self.lines_file is not None:
            self.lines_file.close()
            self.lines_file = None
