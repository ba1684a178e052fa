"""The typed change log written by the executors themselves: ``pgtail spark run
--writer pyarrow`` (the default for a local ``--output``).

`pgtail.spark.changelog.ChangeLogWriter` has Spark write the logs: the source's rows go
into the JVM, are cached, looked at once to find the tables, then read again, converted
by an Arrow UDF and written by Spark's Parquet writer, one job per table. Here the task
that reads a slot's share of a micro-batch also writes it, with no row crossing into the
JVM:

- on the executor (`stage_partition`, the ``read`` of the ``pgtail_changelog`` source):
  each table's changes are typed from their values' text (the stage lines of
  `pgtail.spark.text_rows.stage_columns_encoder`, which also hold the JSON the log keeps;
  a row decoded one by one, or written before its table changed, from its JSON:
  `pgtail.spark.arrow_rows.arrow_columns_reader`) and written with pyarrow to a staged
  file under ``<output>/_pg_staging/`` (the columns looked up in the catalog when the
  table first appears; a staged file records them as Spark would, so Spark reads it
  back the same). The task's thread only decodes; a second thread builds what it decoded into
  record batches, converts and writes them (`_Background`). The task's rows are one
  manifest row per file (`MANIFEST`).
- on the driver (`ChangeLogCommitter`, the ``foreachBatch`` function): once every task
  of the batch succeeded, each table's columns are checked against its log (a retyped
  column stops the run before anything moves), then each staged file moves into
  ``<schema>.<table>/pgtail_batch=<id>/``, which is replaced: a batch Spark replays after a
  failure (same id, same offsets, same changes) replaces its first attempt, as with
  Spark's writer. Files of failed task attempts are never moved; the staging directory
  is emptied after each batch.

The layout of the logs is `pgtail.spark.changelog`'s; `materialize` and `read_changes`
read them whichever wrote them. Local outputs only (a path or ``file://``): the driver
moves what the executors wrote, so on a cluster the path must be shared storage, as it
must for Spark's own file commit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import queue
import shutil
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import LongType, StringType, StructField, StructType

from pgtail.catalog.spark import ColumnType
from pgtail.errors import ConfigurationError
from pgtail.spark.changelog import (
    LOG_METADATA,
    ROW_JSON,
    LogColumns,
    batch_path,
    log_schema,
    messages_path,
    recorded_columns,
    require_local,
    table_dir,
)
from pgtail.spark.source import (
    PgoutputDataSource,
    PgoutputStreamReader,
    Settings,
    SlotPartition,
    parse_options,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyarrow import parquet as pq

    from pgtail.changes import EncodedRows, Table
    from pgtail.spark.schema import PendingRows

NAME = "pgtail_changelog"
STAGING_DIR = "_pg_staging"  # hidden from Spark's readers (a leading _)
CONVERT_ROWS = 32_768  # rows of one table converted at once (so little is left at the end)
FLUSH_ROWS = 65_536  # rows of one table written at once (a row group)
STAGE_QUEUE = 8  # batches read (`DEFAULT_BATCH_ROWS` rows each) waiting to be staged
SWITCH_INTERVAL = 0.0001  # seconds: `sys.setswitchinterval` while a task stages
SPARK_SCHEMA_KEY = b"org.apache.spark.sql.parquet.row.metadata"  # where Spark keeps it
_JSON_COLUMNS = frozenset({"_pg_key", "_pg_before", "_pg_after"})  # a row's JSON each

MANIFEST = StructType(
    [
        StructField("kind", StringType(), False),  # "table" or "messages"
        StructField("schema", StringType(), True),
        StructField("table", StringType(), True),
        StructField("file", StringType(), False),  # the staged file, a local path
        StructField("rows", LongType(), False),
        StructField("columns", StringType(), True),  # JSON: the columns it was written with
    ]
)


def local_path(path: str | Path) -> Path:
    """A local output (`is_local`) as a Path."""
    return Path(str(path).removeprefix("file://"))


def _columns_json(columns: Sequence[ColumnType]) -> str:
    import orjson

    return orjson.dumps([dataclasses.asdict(c) for c in columns]).decode()


def _columns_of_json(text: str) -> tuple[ColumnType, ...]:
    import orjson

    return tuple(ColumnType(**item) for item in orjson.loads(text))


class LocalFiles:
    """`pgtail.spark.changelog.LogFiles` of a local log, without Spark: a batch's schema
    is the one Spark (or `Stager`) recorded in a Parquet footer."""

    def dirs(self, path: str) -> list[str]:
        root = local_path(path)
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    def schema(self, batch: str) -> StructType | None:
        from pyarrow import parquet as pq

        for file in sorted(local_path(batch).glob("*.parquet")):
            try:
                metadata = pq.read_schema(file).metadata or {}
            except Exception:  # a file cut short
                continue
            if SPARK_SCHEMA_KEY in metadata:
                return StructType.fromJson(_loads(metadata[SPARK_SCHEMA_KEY]))
        return None


def _loads(raw: bytes) -> Any:
    import orjson

    return orjson.loads(raw)


def file_schema(spark_schema: StructType) -> pa.Schema:
    """The Arrow schema of a staged file of ``spark_schema``, recording it as Spark's
    writer does (field metadata included: the PostgreSQL types)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow = to_arrow_schema(spark_schema, timezone="UTC")
    return arrow.with_metadata({SPARK_SCHEMA_KEY: spark_schema.json().encode()})


def _conform(array: Any, kind: Any) -> Any:
    return array if array.type == kind else array.cast(kind)


class _Background:
    """One thread that runs a task's jobs (building, converting and writing what the
    task read), in the order given, while the task reads on. At most ``queued`` jobs
    wait, so memory stays bounded; the first failure is raised in the task's thread, at
    the next job or at `join`."""

    def __init__(self, queued: int) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=queued)
        self.error: BaseException | None = None
        self._cancelled = False
        self._thread = threading.Thread(target=self._run, name="pgtail-stage", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if self.error is None and not self._cancelled:
                try:
                    job()
                except BaseException as exc:  # raised in the task's thread
                    self.error = exc

    def submit(self, job: Callable[[], None]) -> None:
        self._raise()
        self._jobs.put(job)

    def join(self) -> None:
        """Wait for every job; raise the first failure."""
        self._jobs.put(None)
        self._thread.join()
        self._raise()

    def cancel(self) -> None:
        """Skip the jobs not started, wait for the one running."""
        self._cancelled = True
        self._jobs.put(None)
        self._thread.join()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error


class _StagedFile:
    """One file a task stages: record batches gathered, converted `CONVERT_ROWS` rows at
    a time (`arrays`), and written `FLUSH_ROWS` rows at a time (a row group each)."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        self.schema = schema
        self.raw: list[pa.RecordBatch] = []  # the source's rows, not converted yet
        self.raw_rows = 0
        self.typed: list[pa.RecordBatch] = []  # converted, not written yet
        self.typed_rows = 0
        self.rows = 0  # written
        self.writer: pq.ParquetWriter | None = None

    def arrays(self, rows: pa.Table) -> list[Any]:
        """The file's columns of ``rows`` (the source's)."""
        return [rows.column(field.name).combine_chunks() for field in self.schema]

    def add(self, batch: pa.RecordBatch) -> None:
        self.raw.append(batch)
        self.raw_rows += batch.num_rows
        if self.raw_rows >= CONVERT_ROWS:
            self._convert()

    def _convert(self) -> None:
        import pyarrow as pa

        if not self.raw:
            return
        rows = pa.Table.from_batches(self.raw)
        self.raw, self.raw_rows = [], 0
        arrays = [_conform(a, f.type) for a, f in zip(self.arrays(rows), self.schema, strict=True)]
        self.typed.append(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
        self.typed_rows += rows.num_rows
        if self.typed_rows >= FLUSH_ROWS:
            self._write()

    def _write(self) -> None:
        import pyarrow as pa
        from pyarrow import parquet as pq

        if not self.typed:
            return
        rows = pa.Table.from_batches(self.typed)
        self.typed, self.typed_rows = [], 0
        if self.writer is None:
            self.writer = pq.ParquetWriter(
                self.path,
                self.schema,
                compression="snappy",
                # a row's JSON is unique: a dictionary of it would be tried, then dropped
                use_dictionary=[n for n in self.schema.names if n not in _JSON_COLUMNS],
            )
        self.writer.write_table(rows, row_group_size=rows.num_rows)
        self.rows += rows.num_rows

    def close(self) -> None:
        self._convert()
        self._write()
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def discard(self) -> None:
        if self.writer is not None:
            with contextlib.suppress(Exception):  # already broken: its file goes anyway
                self.writer.close()
            self.writer = None


class _TableFile(_StagedFile):
    """A table's changes: its columns typed, then `LOG_METADATA`. Typed from the values'
    text (`add_lines`: the stage lines of `stage_columns_encoder`) when the lines have
    the file's columns; otherwise (rows decoded one by one, or written before the table
    changed) from the row's JSON (`arrow_columns_reader`): the same values either way."""

    def __init__(self, path: Path, qualified: str, columns: Sequence[ColumnType]) -> None:
        from pgtail.spark.arrow_rows import arrow_columns_reader

        self.columns = tuple(columns)
        super().__init__(path, file_schema(log_schema(qualified, self.columns)))
        count = len(self.columns)
        targets = [self.schema.field(i).type for i in range(count)]
        self.read = arrow_columns_reader(self.columns, targets)
        self._read_lines: Callable[[bytes], tuple[Any, list[Any], list[Any]]] | None = None
        self._shape = [(c.name, c.type_oid, c.typmod) for c in self.columns]
        self._matches: dict[int, tuple[Table, bool]] = {}

    def arrays(self, rows: pa.Table) -> list[Any]:
        import pyarrow.compute as pc

        texts = pc.coalesce(*(rows.column(name) for name in ROW_JSON))
        typed = self.read(texts) if self.columns else []
        return [*typed, *(rows.column(source).combine_chunks() for _, source in LOG_METADATA)]

    def takes_lines(self, table: Table) -> bool:
        """Whether stage lines of ``table`` (as its Relation message had it) hold the
        file's columns, in order, of the same types."""
        found = self._matches.get(id(table))
        if found is None or found[0] is not table:
            shape = [(c.name, c.type_oid, c.type_modifier) for c in table.columns]
            found = (table, bool(self.columns) and shape == self._shape)
            self._matches[id(table)] = found
        return found[1]

    def add_lines(self, runs: Sequence[EncodedRows]) -> None:
        """Runs of stage lines (of a table `takes_lines` holds), typed from their text."""
        import pyarrow as pa

        from pgtail.spark.schema import RUN_COLUMNS, empty_lists, run_values
        from pgtail.spark.text_rows import stage_columns_reader

        if self._read_lines is None:
            targets = [self.schema.field(i).type for i in range(len(self.columns))]
            self._read_lines = stage_columns_reader(self.columns, targets)
        lines = runs[0].lines if len(runs) == 1 else b"".join(run.lines for run in runs)
        count = sum(run.count for run in runs)
        seq, (key, old, new), typed = self._read_lines(lines)
        if len(seq) != count:
            names = ", ".join(sorted({run.table.qualified_name for run in runs}))
            raise ValueError(f"{count} stage lines of {names} do not split")
        schema = self.schema
        log_name = {source: name for name, source in LOG_METADATA}
        shared = run_values(
            runs, [(attr, schema.field(log_name[name]).type) for name, attr in RUN_COLUMNS]
        )
        found = dict(zip((name for name, _ in RUN_COLUMNS), shared, strict=True))
        found.update(seq=seq, key=key, before=old, after=new)
        found["unchanged_toast"] = empty_lists(count, schema.field("_pg_unchanged_toast").type)
        width = len(self.columns)
        metadata = [
            _conform(found[source], schema.field(width + i).type)
            for i, (_, source) in enumerate(LOG_METADATA)
        ]
        arrays = [_conform(a, schema.field(i).type) for i, a in enumerate(typed)]
        self.add_typed(pa.RecordBatch.from_arrays([*arrays, *metadata], schema=schema))

    def add_typed(self, batch: pa.RecordBatch) -> None:
        """Rows already typed, after those added before (converted first)."""
        self._convert()
        self.typed.append(batch)
        self.typed_rows += batch.num_rows
        if self.typed_rows >= FLUSH_ROWS:
            self._write()


class Stager:
    """The files one task stages under ``<output>/_pg_staging/<task>/``: a table's
    changes (`add`, the source's record batches in order) go to that table's file.
    Used by one thread at a time."""

    def __init__(self, output: str | Path, dsn: str) -> None:
        self.output = local_path(output)
        self.directory = self.output / STAGING_DIR / uuid.uuid4().hex
        self.dsn = dsn
        self.tables: dict[tuple[str, str], _TableFile] = {}
        self.messages: _StagedFile | None = None
        self._conn: Any = None

    def _columns(self, schema_name: str, table_name: str) -> tuple[ColumnType, ...]:
        """The table's columns in the catalog now; when it was dropped since, those its
        log was last written with (the JSON metadata columns keep every value)."""
        from pgtail import catalog
        from pgtail.spark import slot_options

        if self._conn is None:
            self._conn = catalog.open_connection(
                self.dsn, application_name=slot_options.APPLICATION_NAME
            )
        try:
            return tuple(catalog.table_columns(self._conn, schema_name, table_name))
        except ConfigurationError:
            directory = table_dir(self.output, schema_name, table_name)
            return recorded_columns(LocalFiles(), directory) or ()

    def _file(self, schema_name: str, table_name: str) -> _TableFile:
        key = (schema_name, table_name)
        found = self.tables.get(key)
        if found is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"{len(self.tables):05d}.parquet"
            found = _TableFile(
                path, f"{schema_name}.{table_name}", self._columns(schema_name, table_name)
            )
            self.tables[key] = found
        return found

    def add(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc

        from pgtail.spark.schema import SCHEMA

        ops = batch.column("op")
        messages = pc.equal(ops, "message")
        if pc.any(messages).as_py():
            if self.messages is None:
                self.directory.mkdir(parents=True, exist_ok=True)
                self.messages = _StagedFile(
                    self.directory / "messages.parquet", file_schema(SCHEMA)
                )
            self.messages.add(batch.filter(messages))
            batch = batch.filter(pc.invert(messages))
        if not batch.num_rows:
            return
        schemas, tables = batch.column("schema"), batch.column("table")
        first = (schemas[0].as_py(), tables[0].as_py())
        if (
            pc.all(pc.equal(schemas, first[0])).as_py()
            and pc.all(pc.equal(tables, first[1])).as_py()
        ):
            self._file(*first).add(batch)  # the usual batch: one table
            return
        import pyarrow as pa

        pairs = pa.Table.from_batches([batch]).group_by(["schema", "table"]).aggregate([])
        for schema_name, table_name in zip(
            pairs.column("schema").to_pylist(), pairs.column("table").to_pylist(), strict=True
        ):
            mask = pc.and_(pc.equal(schemas, schema_name), pc.equal(tables, table_name))
            self._file(schema_name, table_name).add(batch.filter(mask))

    def add_pending(self, pending: PendingRows) -> None:
        """Rows a task read (`read_partition` with ``stage``), in order: those decoded
        one by one as their record batch (`add`), runs of stage lines table by table
        (`_TableFile.add_lines`; their JSON through `add` when the table changed since)."""
        import itertools

        from pgtail.spark.schema import encoded_batch
        from pgtail.spark.text_rows import stage_head

        for part in pending.parts:
            if isinstance(part, dict):
                self.add(pending.build(part))
                continue
            for _, grouped in itertools.groupby(part, key=lambda run: id(run.table)):
                runs = list(grouped)
                table = runs[0].table
                file = self._file(table.schema, table.name)
                if file.takes_lines(table):
                    file.add_lines(runs)
                else:
                    self.add(encoded_batch(runs, pending.schema, stage_head(runs)))

    def finish(self) -> pa.RecordBatch:
        """Close every file; the manifest of what was staged (`MANIFEST`'s rows)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        self._close_connection()
        for file in self._files():
            file.close()
        rows: list[dict[str, Any]] = []
        for (schema_name, table_name), table in self.tables.items():
            rows.append(
                {
                    "kind": "table",
                    "schema": schema_name,
                    "table": table_name,
                    "file": str(table.path),
                    "rows": table.rows,
                    "columns": _columns_json(table.columns),
                }
            )
        if self.messages is not None:
            rows.append(
                {
                    "kind": "messages",
                    "schema": None,
                    "table": None,
                    "file": str(self.messages.path),
                    "rows": self.messages.rows,
                    "columns": None,
                }
            )
        return pa.RecordBatch.from_pylist(rows, schema=to_arrow_schema(MANIFEST))

    def abort(self) -> None:
        """Drop what this task staged (its attempt failed or was cut short)."""
        self._close_connection()
        for file in self._files():
            file.discard()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _files(self) -> list[_StagedFile]:
        return [*self.tables.values(), *([self.messages] if self.messages else [])]

    def _close_connection(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None


def stage_partition(partition: SlotPartition, output: str) -> Iterator[pa.RecordBatch]:
    """Read one slot's share of a batch as the source does (`read_partition`) and stage
    it as typed per-table files; yields the manifest (runs on an executor).

    The task's thread only decodes (`read_partition` ``later``: rows as the decoder
    wrote them); a second thread (`_Background`) builds them into record batches,
    converts and writes them, while the decoding goes on."""
    from pgtail.spark.source import read_partition

    stager = Stager(output, partition.dsn)
    switch = sys.getswitchinterval()
    # The reading thread holds the GIL all the time; the other one takes it back after
    # each Arrow call. With Python's 5 ms interval it would wait up to that long each
    # time, and fall behind (the reading then waits on the queue).
    sys.setswitchinterval(SWITCH_INTERVAL)
    background = _Background(STAGE_QUEUE)
    try:
        for pending in read_partition(partition, later=True, stage=True):
            background.submit(functools.partial(stager.add_pending, pending))
        background.join()
        manifest = stager.finish()
    except BaseException:
        background.cancel()
        stager.abort()
        raise
    finally:
        sys.setswitchinterval(switch)
    yield manifest


def _replace_dir(target: Path, files: Sequence[Path]) -> None:
    """``target`` holds exactly ``files`` (moved in), whatever it held before."""
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for i, file in enumerate(files):
        os.replace(file, target / f"part-{i:05d}-{file.parent.name}.parquet")


class ChangeLogCommitter:
    """The ``foreachBatch`` function of `pgtail.spark.pipeline.run` with the pyarrow
    writer: moves the files the executors staged for a batch into the change logs (see
    the module docstring). ``changes`` counts each batch's changes (its rows are the
    manifest's)."""

    def __init__(self, output: str | Path) -> None:
        require_local(output)
        self.output = local_path(str(output).rstrip("/"))
        self.log_columns = LogColumns(self.output, LocalFiles())
        self.changes: dict[int | str, int] = {}

    def counted(self, batch_id: int | str) -> int | None:
        return self.changes.get(batch_id)

    def __call__(self, frame: Any, batch_id: int | str) -> None:
        try:
            self._commit(frame.collect(), batch_id)
        finally:
            # moved, or never to be (a replay of the batch stages its files again)
            shutil.rmtree(self.output / STAGING_DIR, ignore_errors=True)

    def _commit(self, staged: Sequence[Any], batch_id: int | str) -> None:
        tables: dict[tuple[str, str], list[tuple[Path, tuple[ColumnType, ...]]]] = {}
        messages: list[Path] = []
        for row in staged:
            if row["kind"] == "messages":
                messages.append(Path(row["file"]))
            else:
                entry = (Path(row["file"]), _columns_of_json(row["columns"]))
                tables.setdefault((row["schema"], row["table"]), []).append(entry)
        # every check before anything moves: a retyped column leaves the logs untouched
        for key, entries in sorted(tables.items()):
            self.log_columns.check(key, *(columns for _, columns in entries))
        for key, entries in sorted(tables.items()):
            target = Path(batch_path(self.output, *key, batch_id))
            _replace_dir(target, [file for file, _ in entries])
        if messages:
            _replace_dir(Path(messages_path(self.output, batch_id)), messages)
        for key, entries in tables.items():
            self.log_columns.record(key, entries[-1][1])
        self.changes[batch_id] = sum(int(row["rows"]) for row in staged)

    def close(self) -> None:
        pass


class ChangeLogStreamReader(PgoutputStreamReader):
    """The ``pgoutput`` stream reader whose tasks stage typed files (`stage_partition`)
    instead of handing their rows to Spark."""

    def __init__(self, settings: Settings, output: str) -> None:
        super().__init__(settings)
        self._output = output

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "output": self._output}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._output = state["output"]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        # Spark hands an InputPartition(None) when there was nothing to plan.
        if not isinstance(partition, SlotPartition):
            return iter(())
        return stage_partition(partition, self._output)


class ChangeLogDataSource(PgoutputDataSource):
    """``format("pgtail_changelog")``, the source of ``pgtail spark run --writer pyarrow``:
    the ``pgoutput`` options plus ``path`` (the output); its rows are `MANIFEST`'s."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _settings(self) -> tuple[Settings, str]:
        settings = parse_options(self.options)
        output = self.options.get("path")
        if not output:
            raise ConfigurationError(f"format {NAME} needs option path (the change log root)")
        if settings.table is not None:
            raise ConfigurationError(f"format {NAME} reads every table; option table is not one")
        return settings, str(output)

    def schema(self) -> StructType:
        self._settings()
        return MANIFEST

    def reader(self, schema: StructType) -> Any:
        raise ConfigurationError(
            f"format {NAME} is a streaming source (pgtail spark run)",
            hint='read a slot once with spark.read.format("pgoutput")',
        )

    def streamReader(self, schema: StructType) -> ChangeLogStreamReader:
        return ChangeLogStreamReader(*self._settings())
