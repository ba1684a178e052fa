"""The initial load of ``pgtail spark run --snapshot``: the published tables' rows,
consistent with the slot, written into the change logs as ``_pg_op = 'snapshot'`` rows.

On the driver (`initial_load`): a temporary replication slot on a replication connection
exports a snapshot at its consistent point X (`pgtail.stream.snapshot`); the driver keeps
that connection open, idle, until the load is committed -- it is what keeps the exported
snapshot alive between the load's batches (and it holds one replication slot entry and
the snapshot's xmin meanwhile). The tables are split into block ranges by size
(`pgtail.spark.load_plan`) and read in batches of ranges, one Spark job each, one task
per range: each task opens its own connection, imports the snapshot (``SET TRANSACTION
SNAPSHOT``), copies its blocks and converts the rows as the stream's inserts are
converted (`pgtail.changes.copy_rows.TableRows`, the Spark source's encoder), and the
batch is written by the run's writer -- as a micro-batch of changes would be -- to
``<schema>.<table>/pgtail_batch=snapshot-<X>-<n>/``. A batch that fails and is run again
rewrites the same directories.

Every row is stamped ``commit_lsn`` = ``end_lsn`` = X; each table's first range also
writes one marker row (``seq`` -1, no columns) so even an empty table records that it
was loaded at X. `pgtail.spark.pipeline.materialize` takes a table's latest snapshot as
its state at X and applies only the changes that committed at X or after (the slot's
changes before X are in the snapshot: the rule `pgtail stream --snapshot` applies for a
slot that exists). The slot is not read while the load runs, so it is never confirmed
past X before the load is committed.

The load is recorded in ``<output>/_pgtail_load.json``: ``loading`` before its first
file, ``done`` once every batch is written. A run that finds a load still ``loading``
(the last one crashed) deletes its directories and loads those tables again, from a new
snapshot; `materialize` refuses an output whose load is unfinished.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import fnmatch
import json
import pickle
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from pgtail.errors import ConfigurationError
from pgtail.lsn import format_lsn
from pgtail.spark.load_plan import BlockRange, TableSize, admit
from pgtail.spark.writers import LogWriter, log_writer

if TYPE_CHECKING:
    import pyarrow as pa

    from pgtail.catalog import SnapshotTable
    from pgtail.changes import SnapshotRows

LOAD_FORMAT = "pgtail_load"
LOAD_FILE = "_pgtail_load.json"
BATCH_PREFIX = "snapshot-"  # pgtail_batch=snapshot-<X as 16 hex digits>-<batch of the load>
SNAPSHOT_OP = "snapshot"
MARKER_SEQ = -1
HANDOFF_BATCHES = 8  # record batches (one COPY chunk of ~512 KiB each) waiting per task


@dataclass(frozen=True, slots=True)
class LoadTask:
    """What one task reads: a block range of one table under the exported snapshot."""

    dsn: str
    snapshot_name: str
    lsn: int
    table: SnapshotTable
    first: int | None
    stop: int | None
    number: int  # the range's number in its table: the first writes the table's marker

    def __repr__(self) -> str:  # never a password in Spark's logs
        return (
            f"LoadTask({self.table.qualified_name}, blocks {self.first or 0}.."
            f"{'' if self.stop is None else self.stop})"
        )


def batch_name(lsn: int, batch: int) -> str:
    return f"{BATCH_PREFIX}{lsn:016X}-{batch}"


# --- on an executor -----------------------------------------------------------------


def _marker(task: LoadTask) -> pa.RecordBatch:
    import pyarrow as pa

    from pgtail.spark.schema import arrow_schema

    schema = arrow_schema()
    relation = task.table.relation
    row: dict[str, Any] = {name: None for name in schema.names}
    row.update(
        op=SNAPSHOT_OP,
        schema=relation.namespace,
        table=relation.name,
        commit_lsn=task.lsn,
        end_lsn=task.lsn,
        seq=MARKER_SEQ,
        unchanged_toast=[],
    )
    return pa.RecordBatch.from_pylist([row], schema=schema)


def rows_batch(event: SnapshotRows, key_names: Sequence[str], lsn: int) -> pa.RecordBatch:
    """The Spark source's rows (`pgtail.spark.schema.SCHEMA`) of a chunk of snapshot rows:
    op ``snapshot``, at ``lsn``, ``key`` and ``after`` as an insert of the row has them."""
    import pyarrow as pa

    from pgtail.changes import EncodedRows, Transaction
    from pgtail.spark.schema import arrow_schema, empty_lists, encoded_columns
    from pgtail.values import dumps

    schema = arrow_schema()
    table = event.copy.table
    count = event.count
    if event.lines:
        tx = Transaction(0, lsn, lsn, datetime.min)
        run = EncodedRows(table, tx, event.first_seq, count, event.lines)
        seq, key, after = encoded_columns([run], ("seq", "key", "new"))
    else:
        seq = pa.array(range(event.first_seq, event.first_seq + count), pa.int32())
        key = pa.array(
            [dumps({n: row[n] for n in key_names}) if key_names else None for row in event.rows],
            pa.string(),
        )
        after = pa.array([dumps(row) for row in event.rows], pa.string())
    arrays = {
        "op": pa.repeat(pa.scalar(SNAPSHOT_OP), count),
        "schema": pa.repeat(pa.scalar(table.schema), count),
        "table": pa.repeat(pa.scalar(table.name), count),
        "commit_lsn": pa.repeat(pa.scalar(lsn, pa.int64()), count),
        "end_lsn": pa.repeat(pa.scalar(lsn, pa.int64()), count),
        "seq": seq,
        "key": key,
        "after": after,
        "unchanged_toast": empty_lists(count, schema.field("unchanged_toast").type),
    }
    return pa.RecordBatch.from_arrays(
        [
            arrays[f.name].cast(f.type) if f.name in arrays else pa.nulls(count, f.type)
            for f in schema
        ],
        schema=schema,
    )


class _Handoff:
    """Runs a producer in a thread; what it `put`s comes out of `run`, in order, at
    most `HANDOFF_BATCHES` waiting. The producer's error is raised in the consumer; a
    consumer that stops early stops the producer at its next `put`."""

    _DONE = object()

    def __init__(self) -> None:
        import queue

        self.queue: queue.Queue[Any] = queue.Queue(maxsize=HANDOFF_BATCHES)
        self.stopped = False
        self.error: BaseException | None = None

    def put(self, item: Any) -> None:
        import queue

        while not self.stopped:
            try:
                self.queue.put(item, timeout=0.5)
                return
            except queue.Full:
                continue
        raise _Stopped

    def run(self, produce: Callable[[], None]) -> Iterator[Any]:
        import threading

        def work() -> None:
            try:
                produce()
            except _Stopped:
                return
            except BaseException as exc:  # raised in the consumer
                self.error = exc
            with contextlib.suppress(_Stopped):
                self.put(self._DONE)

        thread = threading.Thread(target=work, name="pgtail-load-copy", daemon=True)
        thread.start()
        try:
            while True:
                item = self.queue.get()
                if item is self._DONE:
                    break
                yield item
        finally:
            self.stopped = True
            thread.join()
        if self.error is not None:
            raise self.error


class _Stopped(Exception):
    pass


def read_task(task: LoadTask) -> Iterator[pa.RecordBatch]:
    """The rows of one range as the source's record batches (runs on an executor)."""
    from pgtail import catalog
    from pgtail.catalog.block_ranges import copy_blocks
    from pgtail.changes import unknown_type_oids
    from pgtail.changes.copy_rows import TableRows
    from pgtail.render.jsonl import json_columns_encoder
    from pgtail.spark import slot_options

    reader = catalog.SnapshotReader(
        task.dsn, task.snapshot_name, slot_options.APPLICATION_NAME + " load"
    )
    try:
        relation = task.table.relation
        wanted = unknown_type_oids(relation, ())
        user_types = catalog.user_types(reader.conn, wanted) if wanted else None
        rows = TableRows(
            relation, lsn=task.lsn, user_types=user_types, encoder=json_columns_encoder
        )
        key_names = rows.table.key_columns
        if task.number == 0:
            yield _marker(task)

        def handle(data: bytes) -> None:
            handoff.put(rows_batch(rows.rows(data), key_names, task.lsn))

        # COPY hands its rows to ``handle`` while it runs: it runs in a thread of its
        # own, and its batches come out of a short queue as they are made (memory stays
        # bounded on a range of any size; the caller writes while the copy goes on)
        handoff = _Handoff()
        yield from handoff.run(
            lambda: copy_blocks(reader, task.table, task.first, task.stop, handle)
        )
    finally:
        reader.close()


def _stage_task(task: LoadTask, output: str) -> Iterator[pa.RecordBatch]:
    """A range staged as typed files by the pyarrow writer; yields the manifest."""
    from pgtail.spark.direct import Stager

    stager = Stager(output, task.dsn)
    try:
        for rows in read_task(task):
            stager.add(rows)
        manifest = stager.finish()
    except BaseException:
        stager.abort()
        raise
    yield manifest


@dataclass(frozen=True)
class LoadPartition(InputPartition):
    task: LoadTask


class _LoadReader(DataSourceReader):
    def __init__(self, tasks: Sequence[LoadTask], output: str | None) -> None:
        self.tasks = list(tasks)
        self.output = output

    def partitions(self) -> Sequence[LoadPartition]:
        return [LoadPartition(task) for task in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LoadPartition)
        if self.output is not None:
            return _stage_task(partition.task, self.output)
        return read_task(partition.task)


class LoadDataSource(DataSource):
    """``format("pgtail_load")``, the batch read of a load's ranges (one partition
    each): option ``tasks``, the `LoadTask`s (pickled, base64); with option ``output``
    each task stages its rows for the pyarrow writer and its row is the manifest
    (`pgtail.spark.direct.MANIFEST`), else its rows are the source's; options
    ``password``, ``sslpassword``: the secrets the tasks' DSN goes without."""

    @classmethod
    def name(cls) -> str:
        return LOAD_FORMAT

    def schema(self) -> StructType:
        if self.options.get("output"):
            from pgtail.spark.direct import MANIFEST

            return MANIFEST
        from pgtail.spark.schema import SCHEMA

        return SCHEMA

    def reader(self, schema: StructType) -> _LoadReader:
        from pgtail.spark.secrets import join_dsn, option_secrets

        tasks = pickle.loads(base64.b64decode(self.options["tasks"]))  # noqa: S301 - ours
        secrets = option_secrets(self.options)
        tasks = [dataclasses.replace(t, dsn=join_dsn(t.dsn, secrets)) for t in tasks]
        return _LoadReader(tasks, self.options.get("output") or None)


# --- on the driver -------------------------------------------------------------------


def selector(patterns: Sequence[str]) -> Callable[[str, str], bool]:
    """(schema, table) -> whether the load copies it: ``--snapshot-table`` globs (none:
    every published table), ``table`` meaning ``*.table``."""
    globs = [p if "." in p else "*." + p for p in patterns if p.strip()]
    regex = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in globs)) if globs else None

    def selected(schema: str, name: str) -> bool:
        return regex is None or regex.fullmatch(f"{schema}.{name}") is not None

    return selected


def read_record(spark: Any, output: str) -> dict[str, Any] | None:
    """The output's load record, or None."""
    from pgtail.spark.changelog import read_text

    text = read_text(spark, f"{output}/{LOAD_FILE}")
    if not text:
        return None
    try:
        return dict(json.loads(text))
    except (ValueError, TypeError):
        return None


def _write_record(spark: Any, output: str, record: Mapping[str, Any]) -> None:
    from pgtail.spark.changelog import write_text

    write_text(spark, f"{output}/{LOAD_FILE}", json.dumps(record) + "\n")


def refuse_unfinished(spark: Any, output: str) -> None:
    """`ConfigurationError` when the output's initial load did not finish."""
    record = read_record(spark, output)
    if record is not None and record.get("state") != "done":
        raise ConfigurationError(
            f"{output} holds an initial load (at {format_lsn(int(record['lsn']))}) that did "
            "not finish: its tables are incomplete",
            hint="run pgtail spark run again with the same --output and --checkpoint: it "
            "loads them again",
        )


def _delete_batches(spark: Any, output: str, lsn: int) -> None:
    """Delete the directories an unfinished load at ``lsn`` wrote."""
    from pgtail.spark.changelog import BATCH_COLUMN, is_local, list_dirs

    prefix = f"{BATCH_COLUMN}={BATCH_PREFIX}{lsn:016X}-"
    context = spark.sparkContext
    for name in list_dirs(spark, output):
        if name.startswith(("_", ".")):
            continue
        for batch in list_dirs(spark, f"{output}/{name}"):
            if not batch.startswith(prefix):
                continue
            path = f"{output}/{name}/{batch}"
            if is_local(path):
                import shutil

                shutil.rmtree(path.removeprefix("file://"), ignore_errors=True)
            else:
                hadoop = context._jvm.org.apache.hadoop.fs.Path(path)
                hadoop.getFileSystem(context._jsc.hadoopConfiguration()).delete(hadoop, True)


@dataclass(frozen=True, slots=True)
class LoadResult:
    lsn: int
    tables: int
    ranges: int
    batches: int


def initial_load(
    spark: Any,
    *,
    options: Mapping[str, str],
    output: str | Path,
    writer: str = "auto",
    tables: Sequence[str] = (),
    range_bytes: int | None = None,
    batch_bytes: int | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> LoadResult:
    """Load the published tables (``tables``: globs; none: all) into the change logs
    under ``output`` with ``writer`` (``auto``, ``pyarrow`` or ``spark``:
    `pgtail.spark.writers`), as the module docstring says. Call it before the streaming
    query of the same options starts (or while it is stopped); a load left unfinished by
    a crash is deleted first."""
    from pgtail import catalog
    from pgtail.catalog.block_ranges import TID_RANGE_VERSION, table_blocks
    from pgtail.spark import load_plan, slot_options
    from pgtail.spark.load_plan import plan_ranges
    from pgtail.spark.source import parse_options
    from pgtail.stream.snapshot import export_from_temporary_slot

    say = on_progress or (lambda line: None)
    range_bytes = range_bytes or load_plan.RANGE_BYTES
    batch_bytes = batch_bytes or load_plan.BATCH_BYTES
    settings = parse_options(options)
    logs = log_writer(writer, output, settings.dsn)
    publications = sorted({p for spec in settings.slots for p in spec.publications})
    root = str(output).rstrip("/")
    previous = read_record(spark, root)
    if previous is not None and previous.get("state") != "done":
        _delete_batches(spark, root, int(previous["lsn"]))
        say(f"an unfinished load at {format_lsn(int(previous['lsn']))} deleted: loading again")
    conn = catalog.open_connection(settings.dsn, application_name=slot_options.APPLICATION_NAME)
    try:
        server = catalog.server_info(conn)
    finally:
        conn.close()
    session = SimpleNamespace(
        dsn=settings.dsn,
        config=SimpleNamespace(application_name=slot_options.APPLICATION_NAME),
        server=server,
        log=say,  # the temporary slot's wait for open transactions is said
    )
    export_conn, snapshot_name, lsn = export_from_temporary_slot(cast(Any, session))
    try:
        reader = catalog.SnapshotReader(settings.dsn, snapshot_name, slot_options.APPLICATION_NAME)
        try:
            found = reader.tables(publications, selector(tables))
            sizes = table_blocks(reader.conn, [t.relation.relation_id for t in found])
        finally:
            reader.close()
        if not found and tables:
            raise ConfigurationError(
                "--snapshot-table " + ", ".join(tables) + " matches no published table",
                hint="name tables of publication " + ", ".join(publications),
            )
        tid_ranges = server.version_num >= TID_RANGE_VERSION
        planned = [
            TableSize(
                i,
                *sizes.get(t.relation.relation_id, (0, 8192)),
                splittable=tid_ranges and not t.partitioned and t.row_filter is None,
            )
            for i, t in enumerate(found)
        ]
        ranges = plan_ranges(
            planned, range_bytes=range_bytes, tasks=spark.sparkContext.defaultParallelism
        )
        batches = admit(ranges, batch_bytes)
        _write_record(
            spark,
            root,
            {
                "state": "loading",
                "lsn": lsn,
                "tables": [t.qualified_name for t in found],
                "patterns": list(tables),
            },
        )
        say(
            f"loading {len(found)} tables at {format_lsn(lsn)}: {len(ranges)} ranges in "
            f"{len(batches)} batches"
        )
        for number, batch in enumerate(batches):
            tasks = [_task(settings.dsn, snapshot_name, lsn, found, r) for r in batch]
            _write_batch(spark, logs, tasks, batch_name(lsn, number))
            say(f"[{number + 1}/{len(batches)}] {len(tasks)} ranges loaded")
        _write_record(
            spark,
            root,
            {"state": "done", "lsn": lsn, "tables": [t.qualified_name for t in found]},
        )
    finally:
        with contextlib.suppress(Exception):
            export_conn.close()
    return LoadResult(lsn, len(found), len(ranges), len(batches))


def _task(
    dsn: str, snapshot_name: str, lsn: int, found: Sequence[SnapshotTable], block_range: BlockRange
) -> LoadTask:
    return LoadTask(
        dsn,
        snapshot_name,
        lsn,
        found[block_range.table],
        block_range.first,
        block_range.stop,
        block_range.number,
    )


def _write_batch(spark: Any, logs: LogWriter, tasks: Sequence[LoadTask], name: str) -> None:
    """One batch of the load, one task per range, written as a micro-batch ``name``.
    The tasks' DSN goes without its password, which goes as option ``password``
    (`pgtail.spark.secrets`)."""
    from pgtail.spark.secrets import split_dsn

    public, secrets = split_dsn(tasks[0].dsn)
    shown = [dataclasses.replace(t, dsn=public) for t in tasks]
    reader = spark.read.format(LOAD_FORMAT).option(
        "tasks", base64.b64encode(pickle.dumps(shown)).decode()
    )
    for key, value in secrets.items():
        reader = reader.option(key, value)
    reader = logs.load_reader(reader)
    sink = logs.sink()
    try:
        sink(reader.load(), name)
    finally:
        sink.close()
