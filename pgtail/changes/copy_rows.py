"""A snapshot's rows -> `SnapshotRows` events, through the converters streamed rows use.

`TableRows` takes one table's Relation (as pgoutput would send it, built by
`pgtail.catalog` from the catalogs) and the rows of ``COPY ... TO STDOUT`` in text
format, whose values are the type output functions' text, the text pgoutput sends: each
row becomes what a streamed insert of it becomes -- a line of the renderer's encoder
(`pgtail.changes.InsertEncoders`) or a row dict from the same converters. Pure: the
caller reads the COPY data and hands down its lines.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any

from pgtail import pgoutput as po
from pgtail import values
from pgtail.changes.events import InsertEncoders, SnapshotRows, Table, TableCopy
from pgtail.changes.fastpath import EncoderFactory
from pgtail.changes.tables import TableInfo

# COPY's text format escapes these on output (CopyAttributeOutText); NULL is ``\N``
_UNESCAPES = {
    b"b": b"\b",
    b"f": b"\f",
    b"n": b"\n",
    b"r": b"\r",
    b"t": b"\t",
    b"v": b"\v",
    b"\\": b"\\",
}
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)


def _unescape_match(match: re.Match[bytes]) -> bytes:
    char = match.group(1)
    return _UNESCAPES.get(char, char)


def copy_fields(line: bytes) -> list[bytes | None]:
    """One row of COPY text output (without its newline) -> the values, None for NULL."""
    fields: list[bytes | None] = list(line.split(b"\t"))
    for i, field in enumerate(fields):
        if field is not None and b"\\" in field:
            fields[i] = None if field == b"\\N" else _ESCAPE.sub(_unescape_match, field)
    return fields


def copy_columns(data: bytes, width: int) -> list[list[bytes | None]]:
    """Whole rows of COPY text output (each ending in a newline) of a table of ``width``
    columns -> the values column by column, None for NULL. Split once for the whole
    chunk (COPY escapes tabs and newlines in values); only a column holding a backslash
    is looked at value by value. Raises ValueError when the rows do not have ``width``
    values each."""
    fields: list[bytes | None] = data.replace(b"\n", b"\t").split(b"\t")  # type: ignore[assignment]
    fields.pop()  # after the last newline
    if width < 1 or len(fields) != data.count(b"\n") * width:
        raise ValueError(f"COPY rows of other than {width} values")
    columns = [fields[i::width] for i in range(width)]
    if b"\\" in data:
        for i, column in enumerate(columns):
            if b"\\" in b"".join(column):  # type: ignore[arg-type]  # no None yet
                columns[i] = [_unescape(value) for value in column]  # type: ignore[arg-type]
    return columns


def _unescape(field: bytes) -> bytes | None:
    if b"\\" not in field:
        return field
    return None if field == b"\\N" else _ESCAPE.sub(_unescape_match, field)


class TableRows:
    """Converts one table's COPY rows into `SnapshotRows` (one per call of `rows`)."""

    def __init__(
        self,
        relation: po.Relation,
        copy: TableCopy | None = None,
        *,
        lsn: int = 0,
        rows_estimate: int = 0,
        number: int = 1,
        tables: int = 1,
        user_types: values.UserTypes | None = None,
        encoder: EncoderFactory | None = None,
        masked: Collection[str] = (),
        masked_value: Any = None,
    ) -> None:
        info = TableInfo(relation, {}, user_types)
        self.info = info
        self.copy = copy or TableCopy(info.table, lsn, rows_estimate, number, tables)
        self.seq = 0
        self._masked = [i for i, name in enumerate(info.names) if name in masked]
        self._masked_value = masked_value
        encoders = None
        if encoder is not None and not self._masked:
            encoders = encoder(info.table, info.text_converters)
        self._encoders = encoders

    @property
    def table(self) -> Table:
        return self.copy.table

    def rows(self, data: bytes) -> SnapshotRows:
        """The event for ``data``: whole rows of COPY text output, each ending in a
        newline."""
        first = self.seq
        encoders = self._encoders
        if encoders is not None and encoders.copy_text is not None:
            count = data.count(b"\n")
            self.seq += count
            return SnapshotRows(self.copy, first, count, lines=encoders.copy_text(data))
        if encoders is not None and encoders.rows is not None:
            try:
                columns = copy_columns(data, len(self.info.names))
                count = len(columns[0])
                encoded = encoders.rows(first, columns)
                self.seq += count
                return SnapshotRows(self.copy, first, count, lines=encoded)
            except Exception:  # noqa: BLE001, S110 - row by row decides (and raises)
                pass
        lines = data.split(b"\n")
        lines.pop()  # after the last newline
        self.seq += len(lines)
        if encoders is not None:
            try:
                return SnapshotRows(
                    self.copy,
                    first,
                    len(lines),
                    lines=self._encode(encoders, lines, first, b"\\" in data),
                )
            except Exception:  # noqa: BLE001, S110 - the general path decides (and raises)
                pass
        info = self.info
        text_row = info.text_row
        converters = info.text_converters
        names = info.names
        rows: list[dict[str, Any]] = []
        for line in lines:
            if b"\\" in line:
                fields = copy_fields(line)
                row = {
                    name: None if value is None else convert(value)
                    for name, convert, value in zip(names, converters, fields, strict=True)
                }
            else:
                row = text_row(tuple(line.split(b"\t")))
            for i in self._masked:
                if row[names[i]] is not None:
                    row[names[i]] = self._masked_value
            rows.append(row)
        return SnapshotRows(self.copy, first, len(lines), rows=tuple(rows))

    @staticmethod
    def _encode(encoders: InsertEncoders, lines: list[bytes], first: int, escaped: bool) -> bytes:
        plain = encoders.plain
        if not escaped:  # no escapes, no NULLs in the whole chunk: the usual case
            return b"".join(
                [plain(seq, *line.split(b"\t")) for seq, line in enumerate(lines, first)]
            )
        with_nulls = encoders.with_nulls
        return b"".join(
            [
                with_nulls(seq, *copy_fields(line))
                if b"\\" in line
                else plain(seq, *line.split(b"\t"))
                for seq, line in enumerate(lines, first)
            ]
        )
