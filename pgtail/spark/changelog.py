"""The typed change log of ``pgtail spark run``: one Parquet log per table.

``<output>/<schema>.<table>/pgtail_batch=<id>/`` holds a micro-batch of a table's changes:
its columns with Spark types (`pgtail.spark.types`; each field records its PostgreSQL
type), then the `LOG_METADATA` columns, prefixed ``_pg_``; ``<output>/_messages/`` the
logical decoding messages, untyped. Two writers write a batch (`ChangeLogSink`, the
``foreachBatch`` function of `pgtail.spark.pipeline.run`, chosen through
`pgtail.spark.writers`): `ChangeLogWriter` here, with Spark's Parquet writer, and
`pgtail.spark.direct.ChangeLogCommitter`, with pyarrow. The
layout they share is written here once: where a batch goes (`batch_path`,
`messages_path`), what a row holds (a table's columns from the first of `ROW_JSON` that
is not null, then `LOG_METADATA`), the columns each log was last written with and the
check that none changed its type (`LogColumns`, `recorded_columns`). `read_changes` reads
every log back as the source's untyped rows.
"""

from __future__ import annotations

import functools
import string
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from pgtail.catalog.spark import ColumnType
from pgtail.errors import ConfigurationError

METADATA_PREFIX = "_pg_"  # the change log's own columns; a table column may not start so
# The partition directory of a micro-batch: pgtail_batch=<id>. Not "_pg_batch", which
# pandas, pyarrow, DuckDB and Polars take for a hidden directory (earlier versions wrote
# it: `rename_old_batches` renames those, the readers here read both).
BATCH_COLUMN = "pgtail_batch"
OLD_BATCH_COLUMN = "_pg_batch"
MESSAGES_DIR = "_messages"  # logical decoding messages, untyped (the source's columns)
CONCURRENT_WRITES = 4  # tables of a batch written at once (`run_all`)

# The metadata columns after a table's own, each from the source's column of that name.
LOG_METADATA: tuple[tuple[str, str], ...] = (
    ("_pg_op", "op"),
    ("_pg_commit_lsn", "commit_lsn"),
    ("_pg_end_lsn", "end_lsn"),
    ("_pg_commit_time", "commit_ts"),
    ("_pg_xid", "xid"),
    ("_pg_seq", "seq"),
    ("_pg_unchanged_toast", "unchanged_toast"),
    ("_pg_origin", "origin"),
    ("_pg_schema", "schema"),
    ("_pg_table", "table"),
    ("_pg_key", "key"),
    ("_pg_before", "before"),
    ("_pg_after", "after"),
)
ROW_JSON = ("after", "before")  # a row's typed columns: from the first not null of these


class ChangeLogSink(Protocol):
    """What writes a micro-batch into the change logs (``foreachBatch``)."""

    def __call__(self, frame: Any, batch_id: int | str) -> None: ...

    def counted(self, batch_id: int | str) -> int | None:
        """The changes batch ``batch_id`` wrote, when the writer counts them."""
        ...

    def close(self) -> None: ...


def metadata_fields() -> list[Any]:
    """The change log's metadata fields (StructFields, all nullable), in order."""
    from pyspark.sql.types import StructField

    from pgtail.spark.schema import SCHEMA

    return [StructField(name, SCHEMA[source].dataType, True) for name, source in LOG_METADATA]


def log_schema(table: str, columns: Sequence[ColumnType]) -> Any:
    """The Spark schema of a table's change log: its columns typed by
    `pgtail.spark.types.spark_field` (each field's metadata records the PostgreSQL type),
    then `LOG_METADATA`. A column named ``_pg_...`` is refused."""
    from pyspark.sql.types import StructField, StructType

    from pgtail.spark.types import field_metadata, spark_field

    for column in columns:
        if column.name.startswith(METADATA_PREFIX):
            kept = f"starts with {METADATA_PREFIX!r}, which the change log keeps for its metadata"
        elif column.name == BATCH_COLUMN:
            kept = "is the name of the change log's batch directories (a column to readers)"
        else:
            continue
        raise ConfigurationError(
            f"column {column.name!r} of {table} {kept}",
            hint="rename the column, or read the slot with format pgoutput in your own job",
        )
    fields = [
        StructField(c.name, spark_field(c)[0].dataType, True, field_metadata(c)) for c in columns
    ]
    return StructType([*fields, *metadata_fields()])


_PLAIN = frozenset(string.ascii_letters + string.digits + "_-")


def path_name(name: str) -> str:
    """A schema or table name as part of a directory name: letters, digits, ``_`` and
    ``-`` as they are, every other character (and a leading ``_``) as ``%XX`` of its
    UTF-8 bytes, the escape Spark uses for partition values. So ``<schema>.<table>`` is
    never ambiguous (``a.b`` + ``c`` against ``a`` + ``b.c``), never nests (``/``), never
    holds what Hadoop paths or Spark's globs take apart (``:``, ``*``, ``{``) and is never
    hidden from Spark (a leading ``_`` or ``.``)."""
    pieces = []
    for i, ch in enumerate(name):
        if ch in _PLAIN and not (i == 0 and ch == "_"):
            pieces.append(ch)
        else:
            pieces.append("".join(f"%{byte:02X}" for byte in ch.encode()))
    return "".join(pieces)


def table_of_dir(name: str) -> tuple[str, str] | None:
    """(schema, table) of a directory `table_dir` named, or None for another name."""
    from urllib.parse import unquote

    parts = name.split(".")
    if len(parts) != 2 or name.startswith(("_", ".")):
        return None
    return unquote(parts[0], errors="strict"), unquote(parts[1], errors="strict")


def batch_path(root: str | Path, schema_name: str, table_name: str, batch_id: int | str) -> str:
    """Where a table's rows of one batch go."""
    return f"{table_dir(root, schema_name, table_name)}/{BATCH_COLUMN}={batch_id}"


def messages_path(root: str | Path, batch_id: int | str) -> str:
    """Where the messages of one batch go."""
    return f"{str(root).rstrip('/')}/{MESSAGES_DIR}/{BATCH_COLUMN}={batch_id}"


def table_dir(root: str | Path, schema_name: str, table_name: str) -> str:
    """Where a table's change log (or snapshot) lives: ``<root>/<schema>.<table>``, each
    name as `path_name` writes it (plain names as they are)."""
    return f"{str(root).rstrip('/')}/{path_name(schema_name)}.{path_name(table_name)}"


def typed_columns(columns: Sequence[ColumnType], schema: Any, json: Any) -> list[Any]:
    """The typed values of ``columns`` from the row JSON ``json`` (a Column), as Columns
    named and typed as the first fields of ``schema``, by the typed read's rule: its
    converters, vectorised (`pgtail.spark.arrow_rows.arrow_columns_reader`)."""
    from pyspark.sql.types import StructType

    columns = tuple(columns)
    fields = schema.fields[: len(columns)]
    if not fields:
        return []
    struct = StructType(fields)
    built: list[tuple[Any, Any]] = []  # (rows reader, Arrow type): once per Python worker

    def convert(texts: Any) -> Any:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        if not built:
            from pgtail.spark.arrow_rows import arrow_columns_reader

            arrow = to_arrow_type(struct, timezone="UTC")
            targets = [arrow.field(i).type for i in range(arrow.num_fields)]
            built.append((arrow_columns_reader(columns, targets), arrow))
        read, arrow = built[0]
        return pa.StructArray.from_arrays(read(texts), fields=list(arrow))

    from pyspark.sql.pandas.functions import arrow_udf

    # A scalar Arrow UDF (a batch of rows per call; no pandas needed on the executors);
    # the lambda has no type hints for Spark to read the UDF's kind from: scalar it is
    make_udf: Any = arrow_udf  # (its stubs know the kinds given by type hints only)
    values = make_udf(lambda texts: convert(texts), struct)(json)
    return [values.getField(f.name).alias(f.name, metadata=f.metadata) for f in fields]


def list_dirs(spark: Any, path: str) -> list[str]:
    """The names of the directories in ``path`` (any Hadoop file system), sorted; a
    local path's need no Spark (``spark`` may be None)."""
    if is_local(path):
        local = Path(path.removeprefix("file://"))
        return (
            sorted(entry.name for entry in local.iterdir() if entry.is_dir())
            if local.is_dir()
            else []
        )
    context = spark.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(context._jsc.hadoopConfiguration())
    if not fs.exists(hadoop_path):
        return []
    return sorted(
        str(status.getPath().getName())
        for status in fs.listStatus(hadoop_path)
        if status.isDirectory()
    )


def batch_value(name: str) -> str | None:
    """The batch of a batch directory's name (``pgtail_batch=<batch>``, or an earlier
    version's ``_pg_batch=<batch>``), or None for another name."""
    for column in (BATCH_COLUMN, OLD_BATCH_COLUMN):
        if name.startswith(column + "="):
            return name[len(column) + 1 :]
    return None


def batch_ids(names: Iterable[str]) -> list[int]:
    """The ids of the micro-batch directories among ``names``, sorted."""
    values = (batch_value(name) for name in names)
    return sorted(int(value) for value in values if value is not None and value.isdigit())


def batch_dirs(names: Iterable[str]) -> list[str]:
    """The batch directories among ``names``, oldest first as far as a name tells: an
    initial load's (``pgtail_batch=snapshot-...``, `pgtail.spark.load`), then the
    micro-batches' by id."""
    loads: list[tuple[str, str]] = []
    batches: list[tuple[int, str]] = []
    for name in names:
        value = batch_value(name)
        if value is None:
            continue
        if value.isdigit():
            batches.append((int(value), name))
        elif value.startswith("snapshot-"):
            loads.append((value, name))
    return [name for _, name in sorted(loads)] + [name for _, name in sorted(batches)]


def rename_old_batches(spark: Any, root: str, names: Sequence[str]) -> int:
    """Rename an earlier version's ``_pg_batch=<id>`` directories under ``root`` (each
    table's log and the messages) to ``pgtail_batch=<id>``: a rename, no file rewritten.
    Returns how many were renamed."""
    renamed = 0
    for name in names:
        if name.startswith(".") or (name.startswith("_") and name != MESSAGES_DIR):
            continue
        directory = f"{root}/{name}"
        for batch in list_dirs(spark, directory):
            if batch.startswith(OLD_BATCH_COLUMN + "="):
                new = BATCH_COLUMN + batch[len(OLD_BATCH_COLUMN) :]
                rename_path(spark, f"{directory}/{batch}", f"{directory}/{new}")
                renamed += 1
    return renamed


def rename_path(spark: Any, source: str, target: str) -> None:
    if is_local(source):
        Path(source.removeprefix("file://")).rename(target.removeprefix("file://"))
        return
    context = spark.sparkContext
    jvm = context._jvm
    old = jvm.org.apache.hadoop.fs.Path(source)
    fs = old.getFileSystem(context._jsc.hadoopConfiguration())
    if not fs.rename(old, jvm.org.apache.hadoop.fs.Path(target)):
        raise ConfigurationError(
            f"could not rename {source} to {target}",
            hint="check that the output is writable, and rename it by hand",
        )


class LogFiles(Protocol):
    """How a writer looks at the logs' files: `SparkFiles` (any file system) or
    `pgtail.spark.direct.LocalFiles` (pyarrow, a local output)."""

    def dirs(self, path: str) -> list[str]:
        """The names of the directories in ``path``, sorted."""
        ...

    def schema(self, batch: str) -> Any:
        """The Spark schema (StructType) a batch directory's files were written with;
        None when none is readable (a batch cut short)."""
        ...


class SparkFiles:
    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def dirs(self, path: str) -> list[str]:
        return list_dirs(self.spark, path)

    def schema(self, batch: str) -> Any:
        try:
            return self.spark.read.parquet(batch).schema
        except Exception:  # no data file yet
            return None


def recorded_columns(files: LogFiles | Any, directory: str) -> tuple[ColumnType, ...] | None:
    """The columns (with their PostgreSQL types) of the latest batch of a table's change
    log, as its Parquet schema records them; None when it has no readable batch.
    ``files``: a `LogFiles`, or a SparkSession (`SparkFiles`)."""
    from pgtail.spark.types import recorded_in

    if not hasattr(files, "schema"):
        files = SparkFiles(files)
    directory = str(directory).rstrip("/")
    for batch_dir in reversed(batch_dirs(files.dirs(directory))):
        schema = files.schema(f"{directory}/{batch_dir}")
        if schema is not None:  # else an earlier batch says
            return recorded_in(schema.fields)
    return None


class LogColumns:
    """The columns each table's log was last written with (looked up in the log the
    first time), and the check that a batch's columns change none of their types."""

    def __init__(self, output: str | Path, files: LogFiles) -> None:
        self.output = str(output).rstrip("/")
        self.files = files
        self.columns: dict[tuple[str, str], tuple[ColumnType, ...]] = {}

    def known(self, key: tuple[str, str]) -> tuple[ColumnType, ...] | None:
        found = self.columns.get(key)
        if found is None:
            found = recorded_columns(self.files, table_dir(self.output, *key))
        return found

    def check(self, key: tuple[str, str], *written: Sequence[ColumnType]) -> None:
        """`ConfigurationError` when columns written in this order (after the log's)
        change a type."""
        known = self.known(key)
        for columns in written:
            if known is not None:
                refuse_retyped(f"{key[0]}.{key[1]}", known, columns)
            known = tuple(columns)

    def record(self, key: tuple[str, str], columns: Sequence[ColumnType]) -> None:
        self.columns[key] = tuple(columns)


def refuse_retyped(table: str, known: Sequence[ColumnType], current: Sequence[ColumnType]) -> None:
    from pgtail.spark.types import spark_field

    before = {c.name: c for c in known}
    for column in current:
        old = before.get(column.name)
        if old is None:
            continue
        if spark_field(old)[0].dataType != spark_field(column)[0].dataType:
            raise ConfigurationError(
                f"column {column.name!r} of {table} changed type from {old.type_name} to "
                f"{column.type_name}: a typed change log keeps one type per column",
                hint="materialize the change log as it is, then go on with a new --output "
                "and a new --checkpoint: the slot still holds every change of this batch",
            )


def refuse_untyped_log(root: str, names: Sequence[str]) -> None:
    """`ConfigurationError` when ``root`` holds the single untyped change log of earlier
    versions (Spark's file sink, partitioned ``schema=.../table=...``)."""
    if "_spark_metadata" in names or any(name.startswith("schema=") for name in names):
        raise ConfigurationError(
            f"{root} holds an untyped change log of an earlier pgtail (one log partitioned "
            "by schema and table), not typed change logs",
            hint="read it with spark.read.parquet; write typed logs to a new --output with "
            "a new --checkpoint",
        )


RUN_FILE = "_pgtail_run.json"  # in an output: the query (checkpoint) whose batches it holds


def read_text(spark: Any, path: str) -> str | None:
    """A small file's text (any Hadoop file system), or None when there is none."""
    if is_local(path):
        local = Path(path.removeprefix("file://"))
        return local.read_text("utf-8") if local.is_file() else None
    context = spark.sparkContext
    jvm = context._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(context._jsc.hadoopConfiguration())
    if not fs.exists(hadoop_path):
        return None
    stream = fs.open(hadoop_path)
    try:
        return str(jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8"))
    finally:
        stream.close()


def write_text(spark: Any, path: str, text: str) -> None:
    if is_local(path):
        local = Path(path.removeprefix("file://"))
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.with_name(local.name + ".partial")
        partial.write_text(text, "utf-8")
        partial.replace(local)
        return
    context = spark.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(context._jsc.hadoopConfiguration())
    stream = fs.create(hadoop_path, True)
    try:
        stream.write(bytearray(text.encode()))
    finally:
        stream.close()


def _location(path: str | Path) -> str:
    """A path as recorded and compared: local ones absolute (a run may name the same
    checkpoint relative to another directory)."""
    if is_local(path):
        return str(Path(str(path).removeprefix("file://")).resolve())
    return str(path)


def checkpoint_query(spark: Any, checkpoint: str | Path) -> str | None:
    """The id of the streaming query a checkpoint belongs to (Spark writes it in the
    checkpoint's ``metadata`` when the query first starts), or None for a new one."""
    import json

    text = read_text(spark, f"{str(checkpoint).rstrip('/')}/metadata")
    if not text:
        return None
    try:
        found = json.loads(text.splitlines()[0]).get("id")
    except (ValueError, AttributeError, IndexError):
        return None
    return str(found) if found else None


def holds_logs(names: Sequence[str]) -> bool:
    """Whether directory names of an output include a change log (a table's, or the
    messages'): the names `table_dir` writes are never hidden."""
    return MESSAGES_DIR in names or any(not name.startswith(("_", ".")) for name in names)


def refuse_other_checkpoint(
    spark: Any, output: str, names: Sequence[str], checkpoint: str | Path
) -> str | None:
    """`ConfigurationError` when ``output`` holds change logs another query wrote: its
    batch ids are that checkpoint's, and a new checkpoint, numbering from 0 again, would
    replace its ``pgtail_batch=0, 1, ...`` directories. Returns the recorded query id."""
    import json

    recorded: dict[str, Any] = {}
    text = read_text(spark, f"{output}/{RUN_FILE}")
    if text:
        try:
            recorded = dict(json.loads(text))
        except (ValueError, TypeError):
            recorded = {}
    if not holds_logs(names):
        return None
    query = checkpoint_query(spark, checkpoint)
    owner = recorded.get("query")
    wrote = recorded.get("checkpoint")
    if owner is None and wrote == _location(checkpoint):
        return None  # claimed for this checkpoint by an initial load before its query began
    if query is not None and (owner is None or owner == query):
        return str(owner) if owner else None  # its own log (or one of an older pgtail)
    by = f"the query of checkpoint {wrote} (id {owner})" if wrote else "another checkpoint"
    now = "a new one" if query is None else f"another query's (id {query})"
    elsewhere = "write to a new --output (materialize the old log first if you need it)"
    if wrote and wrote != _location(checkpoint):
        hint = f"go on with --checkpoint {wrote}, or {elsewhere}"
    elif wrote:
        hint = f"that checkpoint was deleted or replaced since: {elsewhere}"
    else:
        hint = f"go on with the checkpoint that wrote them, or {elsewhere}"
    raise ConfigurationError(
        f"{output} already holds change logs written by {by}, and checkpoint "
        f"{checkpoint} is {now}: its batches, numbered from 0 again, would replace "
        f"those logs' {BATCH_COLUMN}=<id> files",
        hint=hint,
    )


def record_run(spark: Any, output: str, checkpoint: str | Path, query: str | None) -> None:
    """Record in ``output`` the query (and its checkpoint) that writes its logs (None:
    not started yet; the output is claimed for the checkpoint by an initial load)."""
    import json

    text = json.dumps({"query": query, "checkpoint": _location(checkpoint)})
    write_text(spark, f"{output}/{RUN_FILE}", text + "\n")


def run_all(tasks: Sequence[Callable[[], None]], concurrent: int) -> None:
    """Run the tasks (each plans and writes one directory of a batch), up to
    ``concurrent`` at once: a batch touching many tables is many small Spark jobs, whose
    driver-side work (catalog lookup, planning, committing the files) then overlaps. The
    threads are Spark's `InheritableThread`, so each job keeps the streaming query's job
    group (stopping the query cancels it). The first failure is raised once all ended."""
    if len(tasks) <= 1 or concurrent <= 1:
        for task in tasks:
            task()
        return
    from pyspark import InheritableThread

    pending = list(reversed(tasks))
    failures: list[BaseException] = []
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                if failures or not pending:
                    return
                task = pending.pop()
            try:
                task()
            except BaseException as exc:  # raised in the caller's thread below
                with lock:
                    failures.append(exc)
                return

    threads = [InheritableThread(target=work) for _ in range(min(concurrent, len(tasks)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


class ChangeLogWriter:
    """The ``foreachBatch`` function of `run`: writes one micro-batch of the source's rows
    as typed per-table change logs, ``<output>/<schema>.<table>/pgtail_batch=<id>/``, and
    the messages under ``<output>/_messages/pgtail_batch=<id>/``.

    Each directory is overwritten, so a batch Spark replays after a failure (same id,
    same offsets, same changes) replaces what its first attempt wrote. A batch's columns
    are the table's columns in the catalog when it is written (looked up on the driver
    each batch): a column added mid-stream appears from then on (read the log with
    ``mergeSchema``; earlier rows are null there); a column whose Spark type changes
    stops the run with a `ConfigurationError`.
    """

    def __init__(
        self, output: str | Path, dsn: str, concurrent_writes: int = CONCURRENT_WRITES
    ) -> None:
        self.output = str(output).rstrip("/")
        self.dsn = dsn
        self.concurrent_writes = concurrent_writes
        self._lock = threading.Lock()
        self.log_columns: LogColumns | None = None
        self._conn: Any = None

    def counted(self, batch_id: int | str) -> int | None:
        return None  # Spark's progress counts them

    def connection(self) -> Any:
        from pgtail import catalog
        from pgtail.spark import slot_options

        if self._conn is None or self._conn.closed:
            self._conn = catalog.open_connection(
                self.dsn, application_name=slot_options.APPLICATION_NAME
            )
        return self._conn

    def close(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None

    def table_columns(
        self, spark: Any, schema_name: str, table_name: str
    ) -> tuple[ColumnType, ...]:
        """The columns a batch of the table is written with (see the class doc)."""
        from pgtail import catalog

        if self.log_columns is None:
            self.log_columns = LogColumns(self.output, SparkFiles(spark))
        key = (schema_name, table_name)
        try:
            current = tuple(catalog.table_columns(self.connection(), schema_name, table_name))
        except ConfigurationError:
            # dropped since these changes: the types last seen (the JSON keeps the rest)
            current = self.log_columns.known(key) or ()
        self.log_columns.check(key, current)
        self.log_columns.record(key, current)
        return current

    def __call__(self, frame: Any, batch_id: int | str) -> None:
        from pyspark.sql import functions as F

        from pgtail.spark.schema import COLUMNS

        if is_local(self.output):
            _no_checksum_files(frame.sparkSession, self.output)
        frame = frame.persist()  # each write below would read the slot again
        try:
            # the tables of the batch: a global aggregate (one final task, not a shuffle
            # into spark.sql.shuffle.partitions tasks as distinct() makes)
            [found] = frame.agg(
                F.collect_set(F.when(F.col("op") != "message", F.struct("schema", "table"))),
                F.max((F.col("op") == "message").cast("int")),
            ).collect()
            present, has_messages = found[0], bool(found[1])
            spark = frame.sparkSession

            def write_table(schema_name: str, table_name: str) -> None:
                with self._lock:  # one catalog connection
                    columns = self.table_columns(spark, schema_name, table_name)
                schema = log_schema(f"{schema_name}.{table_name}", columns)
                mine = frame.where(
                    (F.col("schema") == schema_name)
                    & (F.col("table") == table_name)
                    & (F.col("op") != "message")
                )
                typed = mine.select(
                    *typed_columns(columns, schema, F.coalesce(*ROW_JSON)),
                    *[F.col(source).alias(name) for name, source in LOG_METADATA],
                )
                target = batch_path(self.output, schema_name, table_name, batch_id)
                typed.write.mode("overwrite").parquet(target)

            def write_messages() -> None:
                target = messages_path(self.output, batch_id)
                messages = frame.where(F.col("op") == "message").select(*COLUMNS)
                messages.write.mode("overwrite").parquet(target)

            tasks: list[Callable[[], None]] = [
                functools.partial(write_table, row[0], row[1])
                for row in sorted(present, key=lambda r: (r[0], r[1]))
            ]
            if has_messages:
                tasks.append(write_messages)
            run_all(tasks, self.concurrent_writes)
        finally:
            frame.unpersist()


def _no_checksum_files(spark: Any, path: str) -> None:
    """Have Hadoop's local file system write no ``.<file>.crc`` beside each file of a
    local output (its instance is shared by the driver and local executors): Polars
    reads every file it finds in a directory."""
    context = spark.sparkContext
    hadoop_path = context._jvm.org.apache.hadoop.fs.Path(path)
    hadoop_path.getFileSystem(context._jsc.hadoopConfiguration()).setWriteChecksum(False)


def read_changes(
    spark: Any, changes: str | Path, batches: Mapping[str, Sequence[str]] | None = None
) -> Any:
    """The change log of every table (and the messages) as one DataFrame with the
    source's untyped columns (`pgtail.spark.schema.SCHEMA`); with ``batches`` (directory
    name in the output -> its batch directories' names), those batches only.

    Each batch directory is read by its files (``recursiveFileLookup``), not as a
    partition: a log may hold an earlier version's ``_pg_batch=<id>`` directories beside
    ``pgtail_batch=<id>`` ones, which Spark's partition discovery would refuse to mix."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from pgtail.spark.schema import COLUMNS, MESSAGE_TYPE, SCHEMA

    if is_local(changes) and not Path(str(changes).removeprefix("file://")).exists():
        raise ConfigurationError(
            f"change log {str(changes)!r} does not exist", hint="run pgtail spark run first"
        )
    root = str(changes).rstrip("/")
    names = list_dirs(spark, root)
    refuse_untyped_log(root, names)
    frames = []
    metadata = StructType(metadata_fields())
    source_of = dict(LOG_METADATA)
    for name in names:
        if name != MESSAGES_DIR and name.startswith((".", "_")):
            continue
        if batches is not None:
            chosen = list(batches.get(name, ()))
        else:
            chosen = batch_dirs(list_dirs(spark, f"{root}/{name}"))
        if not chosen:
            continue
        paths = [f"{root}/{name}/{batch}" for batch in chosen]
        if name == MESSAGES_DIR:
            messages = spark.read.schema(SCHEMA).option("recursiveFileLookup", "true")
            frames.append(messages.parquet(*paths).select(*COLUMNS))
            continue
        log = spark.read.schema(metadata).option("recursiveFileLookup", "true").parquet(*paths)
        renamed = {source: F.col(column) for column, source in source_of.items()}
        frames.append(
            log.select(
                *[
                    (
                        renamed[column] if column in renamed else F.lit(None).cast(MESSAGE_TYPE)
                    ).alias(column)
                    for column in COLUMNS
                ]
            )
        )
    if not frames:
        return spark.createDataFrame([], SCHEMA)
    return reduce(lambda a, b: a.unionByName(b), frames)


def is_local(path: str | Path) -> bool:
    """A plain local path (not s3a://, hdfs://, ...), which this process can look at."""
    text = str(path)
    return "://" not in text or text.startswith("file://")


def require_local(output: str | Path) -> None:
    """`ConfigurationError` unless the pyarrow writer can write ``output`` (`is_local`)."""
    if not is_local(output):
        raise ConfigurationError(
            f"the pyarrow writer writes local outputs only, not {str(output)!r}",
            hint="use --writer spark (or auto) for s3a://, hdfs:// and other file systems",
        )
