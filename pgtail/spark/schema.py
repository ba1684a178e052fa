"""The row layout of the ``pgoutput`` Spark source: one row per change.

`SCHEMA` is the Spark schema, `arrow_schema()` the exact Arrow schema Spark expects
from ``read()``, and `RowBuffer` turns pgtail change events into Arrow record batches.
``key``, ``before`` and ``after`` are JSON objects (``pgtail.values.dumps``) so the
typed values of the foundation survive: numbers stay numbers, json stays nested.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pgtail.values import dumps

if TYPE_CHECKING:
    import pyarrow as pa

    from pgtail.catalog.spark import ColumnType
    from pgtail.changes import Change, EncodedRows, Message, Table, Truncate

MESSAGE_TYPE = StructType(
    [
        StructField("prefix", StringType(), False),
        StructField("content", BinaryType(), False),
        StructField("transactional", BooleanType(), False),
    ]
)

SCHEMA = StructType(
    [
        StructField("op", StringType(), False),  # insert update delete truncate message
        StructField("schema", StringType(), True),
        StructField("table", StringType(), True),
        StructField("xid", LongType(), True),
        StructField("commit_lsn", LongType(), True),
        StructField("end_lsn", LongType(), True),
        StructField("seq", IntegerType(), False),
        StructField("commit_ts", TimestampType(), True),
        StructField("key", StringType(), True),
        StructField("before", StringType(), True),
        StructField("after", StringType(), True),
        StructField("unchanged_toast", ArrayType(StringType(), False), False),
        StructField("origin", StringType(), True),
        StructField("message", MESSAGE_TYPE, True),
    ]
)

COLUMNS = tuple(field.name for field in SCHEMA.fields)
_NO_COLUMNS: list[str] = []  # shared by every row without unchanged TOAST (never mutated)


def arrow_schema() -> pa.Schema:
    """The Arrow schema of every batch ``read()`` yields (what Spark checks against)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(SCHEMA, timezone="UTC")


_ENCODED_FIELDS = ("seq", "key", "old", "new")


def encoded_columns(
    runs: Sequence[EncodedRows], fields: Sequence[str] = _ENCODED_FIELDS
) -> list[pa.Array]:
    """The ``fields`` (of seq, key, old and new) of every line of ``runs``
    (`json_columns_encoder`'s lines, in order) as Arrow arrays: seq int32, the others
    strings (``null``: null).

    Arrow's CSV reader splits them, tab-separated, without quoting (JSON text never
    holds a raw tab or newline), in C++, with no Python object per value. A line it
    cannot take (not four fields, not UTF-8) is an error naming the table."""
    import pyarrow as pa
    from pyarrow import csv

    lines = runs[0].lines if len(runs) == 1 else b"".join(run.lines for run in runs)
    count = sum(run.count for run in runs)
    string = pa.string()
    try:
        table = csv.read_csv(
            pa.BufferReader(lines),
            read_options=csv.ReadOptions(
                column_names=_ENCODED_FIELDS,
                use_threads=False,
                block_size=min(max(1 << 20, len(lines) + 1), (1 << 31) - 1),
            ),
            parse_options=csv.ParseOptions(
                delimiter="\t",
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=csv.ConvertOptions(
                column_types={"seq": pa.int32(), "key": string, "old": string, "new": string},
                null_values=["null"],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
                include_columns=list(fields),
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        names = sorted({run.table.qualified_name for run in runs})
        raise ValueError(f"encoded rows of {', '.join(names)} do not split: {exc}") from None
    if table.num_rows != count:
        names = sorted({run.table.qualified_name for run in runs})
        raise ValueError(f"{count} encoded rows of {', '.join(names)} do not split")
    return [table.column(name).combine_chunks() for name in fields]


def empty_lists(count: int, kind: pa.DataType) -> pa.Array:
    """``count`` empty lists of type ``kind`` (no unchanged TOAST in an encoded row)."""
    import pyarrow as pa

    return pa.ListArray.from_arrays(
        pa.repeat(pa.scalar(0, pa.int32()), count + 1), pa.array([], kind.value_type), type=kind
    )


def join_batches(batches: list[pa.RecordBatch], schema: pa.Schema) -> pa.RecordBatch:
    """One record batch of ``batches`` (of ``schema``), in order; empty when none."""
    import pyarrow as pa

    if len(batches) == 1:
        return batches[0]
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=schema)
    return pa.concat_batches(batches)


class RowBuffer:
    """Collects rows column by column and hands them out as Arrow record batches.

    Rows come one by one (`add_change`, ...) or as `EncodedRows` whose lines
    `pgtail.render.jsonl.json_columns_encoder` wrote (`add_encoded`). Consecutive runs
    of encoded rows are kept as they are and become Arrow columns together, when the
    rows are taken (`encoded_columns`: no Python object per value). `take_later` hands
    the rows over unbuilt, so another thread can build them (`PendingRows`).
    """

    def __init__(self) -> None:
        self._schema = arrow_schema()
        self._columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
        self._key_cache: dict[int, tuple[Table, tuple[str, ...]]] = {}
        self._pending = 0  # rows in _columns
        self._encoded: list[EncodedRows] = []  # runs after the last part; then no _columns
        self._parts: list[Any] = []  # before those: column lists and lists of runs, in order
        self.rows = 0

    def _append(
        self,
        *,
        op: str,
        schema: str | None,
        table: str | None,
        xid: int | None,
        commit_lsn: int | None,
        end_lsn: int | None,
        seq: int,
        commit_ts: datetime | None,
        origin: str | None,
        key: str | None = None,
        before: str | None = None,
        after: str | None = None,
        unchanged_toast: tuple[str, ...] = (),
        message: dict[str, Any] | None = None,
    ) -> None:
        if self._encoded:
            self._close_encoded()
        c = self._columns
        c["op"].append(op)
        c["schema"].append(schema)
        c["table"].append(table)
        c["xid"].append(xid)
        c["commit_lsn"].append(commit_lsn)
        c["end_lsn"].append(end_lsn)
        c["seq"].append(seq)
        c["commit_ts"].append(commit_ts)
        c["key"].append(key)
        c["before"].append(before)
        c["after"].append(after)
        c["unchanged_toast"].append(list(unchanged_toast))
        c["origin"].append(origin)
        c["message"].append(message)
        self.rows += 1
        self._pending += 1

    def _key_columns(self, table: Table) -> tuple[str, ...]:
        found = self._key_cache.get(id(table))
        if found is None or found[0] is not table:
            found = (table, table.key_columns)
            self._key_cache[id(table)] = found
        return found[1]

    def add_change(self, change: Change) -> None:
        # The hot path (one call per row): direct appends, no keyword call. JSON stays
        # bytes: Arrow takes UTF-8 bytes for a string column without a decode per value.
        tx = change.tx
        table = change.table
        old = change.old
        new = change.new
        names = self._key_columns(table)
        if self._encoded:
            self._close_encoded()
        # As `Change.key`, but only the replica identity columns, whatever the old tuple held.
        key: bytes | None = None
        if names:
            source = old if old is not None else new
            if source is not None:
                key = dumps({n: source[n] for n in names if n in source})
        c = self._columns
        c["op"].append(change.op)
        c["schema"].append(table.schema)
        c["table"].append(table.name)
        c["xid"].append(tx.xid)
        c["commit_lsn"].append(tx.commit_lsn)
        c["end_lsn"].append(tx.end_lsn)
        c["seq"].append(change.seq)
        c["commit_ts"].append(tx.commit_time)
        c["key"].append(key)
        c["before"].append(None if old is None else dumps(old))
        c["after"].append(None if new is None else dumps(new))
        unchanged = change.unchanged_toast
        c["unchanged_toast"].append(list(unchanged) if unchanged else _NO_COLUMNS)
        c["origin"].append(tx.origin)
        c["message"].append(None)
        self.rows += 1
        self._pending += 1

    def add_encoded(self, rows: EncodedRows) -> None:
        """A run of changes to one table in one transaction, as encoded lines (kept as
        they are until the rows are taken)."""
        if self._pending:
            self._close_columns()
        self._encoded.append(rows)
        self.rows += rows.count

    def add_truncate(self, truncate: Truncate) -> None:
        tx = truncate.tx
        for table in truncate.tables:
            self._append(
                op="truncate",
                schema=table.schema,
                table=table.name,
                xid=tx.xid,
                commit_lsn=tx.commit_lsn,
                end_lsn=tx.end_lsn,
                seq=truncate.seq,
                commit_ts=tx.commit_time,
                origin=tx.origin,
            )

    def add_message(self, message: Message) -> None:
        tx = message.tx
        self._append(
            op="message",
            schema=None,
            table=None,
            xid=tx.xid if tx is not None else None,
            commit_lsn=tx.commit_lsn if tx is not None else None,
            end_lsn=tx.end_lsn if tx is not None else message.lsn,
            seq=message.seq,
            commit_ts=tx.commit_time if tx is not None else None,
            origin=tx.origin if tx is not None else None,
            message={
                "prefix": message.prefix,
                "content": bytes(message.content),
                "transactional": message.transactional,
            },
        )

    def _close_columns(self) -> None:
        self._parts.append(self._columns)
        self._columns = {name: [] for name in COLUMNS}
        self._pending = 0

    def _close_encoded(self) -> None:
        self._parts.append(self._encoded)
        self._encoded = []

    def take_later(self) -> PendingRows:
        """The rows collected so far, to be built into a record batch by calling what
        this returns (in any thread); the buffer starts empty again."""
        if self._pending:
            self._close_columns()
        if self._encoded:
            self._close_encoded()
        parts, self._parts = self._parts, []
        self.rows = 0
        return PendingRows(self._schema, parts)

    def take(self) -> pa.RecordBatch:
        """The rows collected so far as one record batch; the buffer starts empty again."""
        return self.take_later()()


class PendingRows:
    """Rows taken from a `RowBuffer`, not yet built: calling it builds the record batch
    (`RowBuffer.take`'s). Each part is the column lists of rows added one by one, or a
    list of `EncodedRows`."""

    __slots__ = ("schema", "parts")

    def __init__(self, schema: pa.Schema, parts: list[Any]) -> None:
        self.schema = schema
        self.parts = parts

    def __call__(self) -> pa.RecordBatch:
        return join_batches([self.build(part) for part in self.parts], self.schema)

    def build(self, part: Any) -> pa.RecordBatch:
        """One of `parts` as a record batch."""
        import pyarrow as pa

        schema = self.schema
        if isinstance(part, dict):
            arrays = [pa.array(part[field.name], type=field.type) for field in schema]
            return pa.RecordBatch.from_arrays(arrays, schema=schema)
        return encoded_batch(part, schema)


RUN_COLUMNS: tuple[tuple[str, str], ...] = (  # (column, the attribute of a run it holds)
    ("op", "op"),
    ("schema", "table.schema"),
    ("table", "table.name"),
    ("xid", "tx.xid"),
    ("commit_lsn", "tx.commit_lsn"),
    ("end_lsn", "tx.end_lsn"),
    ("commit_ts", "tx.commit_time"),
    ("origin", "tx.origin"),
)


def run_values(runs: Sequence[EncodedRows], columns: Sequence[tuple[str, Any]]) -> list[pa.Array]:
    """For each (attribute of a run, dotted: ``tx.xid``; Arrow type) of ``columns``: an
    array of that value for every change of ``runs``, in order (one value per run,
    run-length decoded)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = sum(run.count for run in runs)
    first = runs[0]
    if all(run.tx is first.tx and run.table is first.table and run.op == first.op for run in runs):
        return [pa.repeat(pa.scalar(attrgetter(p)(first), kind), count) for p, kind in columns]
    ends = pa.array(itertools.accumulate(run.count for run in runs), pa.int32())
    # (many runs: one per small transaction) each object a run holds is fetched once,
    # then its attributes by `map`, with no Python frame per run
    held: dict[str, list[Any]] = {"": list(runs)}
    arrays = []
    for path, kind in columns:
        owner, _, name = path.rpartition(".")
        if owner not in held:
            held[owner] = list(map(attrgetter(owner), runs))
        values = pa.array(list(map(attrgetter(name), held[owner])), kind)
        arrays.append(pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, values)))
    return arrays


def encoded_batch(
    runs: Sequence[EncodedRows], schema: pa.Schema, fields: Sequence[pa.Array] | None = None
) -> pa.RecordBatch:
    """The source's rows of consecutive runs of encoded rows, as one record batch: the
    JSON columns split out of the lines (``fields``: seq, key, old and new, split
    already; else by `encoded_columns`), the columns every change of a run shares
    repeated (`run_values`)."""
    import pyarrow as pa

    count = sum(run.count for run in runs)
    seq, key, old, new = encoded_columns(runs) if fields is None else fields
    shared = run_values(runs, [(value, schema.field(name).type) for name, value in RUN_COLUMNS])
    arrays = {
        **dict(zip((name for name, _ in RUN_COLUMNS), shared, strict=True)),
        "seq": seq,
        "key": key,
        "before": old,
        "after": new,
        "unchanged_toast": empty_lists(count, schema.field("unchanged_toast").type),
        "message": pa.nulls(count, schema.field("message").type),
    }
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=schema)


# --- the typed per-table read: the table's columns, then these ------------------------

METADATA = (
    StructField("op", StringType(), False),  # insert update delete truncate
    StructField("commit_lsn", LongType(), False),
    StructField("commit_time", TimestampType(), False),
    StructField("xid", LongType(), False),
    StructField("seq", IntegerType(), False),  # position in the transaction
    StructField("unchanged_toast", ArrayType(StringType(), False), False),
)


def table_schema(columns: Sequence[ColumnType]) -> StructType:
    """The Spark schema of a typed per-table read (see `pgtail.spark.types`)."""
    from pgtail.errors import ConfigurationError
    from pgtail.spark.types import spark_field

    fields = [spark_field(column)[0] for column in columns]
    clash = {f.name for f in fields} & {f.name for f in METADATA}
    if clash:
        raise ConfigurationError(
            f"column {sorted(clash)[0]!r} has the name of a metadata column of the typed read",
            hint="read the table without option table (JSON rows), or rename the column",
        )
    return StructType([*fields, *METADATA])


class TypedRowBuffer:
    """One table's changes as rows of its own columns, typed, plus `METADATA`.

    A Relation message that changes the table's columns (a column added, dropped,
    renamed or retyped mid-stream) stops the read with a `ConfigurationError`: the
    schema of a Spark query is fixed when it starts.
    """

    def __init__(self, schema_name: str, table_name: str, columns: Sequence[ColumnType]):
        from pyspark.sql.pandas.types import to_arrow_schema

        from pgtail.spark.text_rows import text_columns_reader
        from pgtail.spark.types import spark_field

        self.schema_name = schema_name
        self.table_name = table_name
        self._names = tuple(c.name for c in columns)
        self._types = tuple(c.type_oid for c in columns)
        self._converters = tuple(spark_field(c)[1] for c in columns)
        self._arrow = to_arrow_schema(table_schema(columns), timezone="UTC")
        self._width = len(self._arrow)
        self._read_text = text_columns_reader(
            columns, [self._arrow.field(i).type for i in range(len(columns))]
        )
        self._columns: list[list[Any]] = [[] for _ in range(self._width)]
        self._batches: list[pa.RecordBatch] = []  # before the rows in _columns/_encoded
        self._encoded: list[EncodedRows] = []  # runs of encoded rows, built at once
        self._checked: Table | None = None
        self.rows = 0

    def wanted(self, table: Table) -> bool:
        return table.name == self.table_name and table.schema == self.schema_name

    def _check(self, table: Table) -> None:
        if table is self._checked:
            return
        names = tuple(c.name for c in table.columns)
        types = tuple(c.type_oid for c in table.columns)
        if names != self._names or types != self._types:
            from pgtail.errors import ConfigurationError

            raise ConfigurationError(
                f"table {table.qualified_name} changed while it was read: columns "
                f"{list(self._names)} are now {list(names)} (or their types changed)",
                hint="a typed read keeps the schema its query started with: start a new "
                "query (new checkpoint) from this position with startingLsn",
            )
        self._checked = table

    def add_change(self, change: Change) -> None:
        table = change.table
        self._check(table)
        self._flush_encoded()
        row = change.new if change.new is not None else change.old
        tx = change.tx
        columns = self._columns
        i = 0
        for name, convert in zip(self._names, self._converters, strict=True):
            columns[i].append(None if row is None else convert(row.get(name)))
            i += 1
        columns[i].append(change.op)
        columns[i + 1].append(tx.commit_lsn)
        columns[i + 2].append(tx.commit_time)
        columns[i + 3].append(tx.xid)
        columns[i + 4].append(change.seq)
        columns[i + 5].append(list(change.unchanged_toast))
        self.rows += 1

    def add_encoded(self, rows: EncodedRows) -> None:
        """A run of changes to the table in one transaction, as the lines
        `pgtail.spark.text_rows.text_columns_encoder` wrote (a change's new row, or its
        old one: a delete). The runs are kept until the next row added one by one or
        `take`, then converted to the typed columns at once, with the values of
        `add_change` (`pgtail.spark.text_rows.text_columns_reader`)."""
        self._check(rows.table)
        self._flush()
        self._encoded.append(rows)
        self.rows += rows.count

    def _flush_encoded(self) -> None:
        """The encoded rows kept so far become a record batch of their own."""
        import pyarrow as pa

        runs = self._encoded
        if not runs:
            return
        self._encoded = []
        arrow = self._arrow
        n = len(self._names)
        count = sum(run.count for run in runs)
        lines = runs[0].lines if len(runs) == 1 else b"".join(run.lines for run in runs)
        seq, typed = self._read_text(lines)
        op, commit_lsn, commit_time, xid = run_values(
            runs,
            [
                ("op", arrow.field(n).type),
                ("tx.commit_lsn", arrow.field(n + 1).type),
                ("tx.commit_time", arrow.field(n + 2).type),
                ("tx.xid", arrow.field(n + 3).type),
            ],
        )
        arrays = [
            *typed,
            op,
            commit_lsn,
            commit_time,
            xid,
            seq.cast(arrow.field(n + 4).type),
            empty_lists(count, arrow.field(len(arrow) - 1).type),
        ]
        self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=arrow))

    def add_truncate(self, truncate: Truncate) -> None:
        tx = truncate.tx
        for table in truncate.tables:
            if not self.wanted(table):
                continue
            self._flush_encoded()
            columns = self._columns
            n = len(self._names)
            for i in range(n):
                columns[i].append(None)
            columns[n].append("truncate")
            columns[n + 1].append(tx.commit_lsn)
            columns[n + 2].append(tx.commit_time)
            columns[n + 3].append(tx.xid)
            columns[n + 4].append(truncate.seq)
            columns[n + 5].append([])
            self.rows += 1

    def _flush(self) -> None:
        """The rows added one by one so far become a record batch of their own."""
        import pyarrow as pa

        if not self._columns[0]:  # op: one value per row
            return
        arrays = [
            pa.array(values, type=field.type)
            for values, field in zip(self._columns, self._arrow, strict=True)
        ]
        self._batches.append(pa.RecordBatch.from_arrays(arrays, schema=self._arrow))
        self._columns = [[] for _ in range(self._width)]

    def take(self) -> pa.RecordBatch:

        self._flush()
        self._flush_encoded()
        batches = self._batches
        self._batches = []
        self.rows = 0
        return join_batches(batches, self._arrow)
