"""The standard pipeline behind ``pgtail spark``: slot -> Spark -> typed Parquet change
log per table (`run`, written by a `pgtail.spark.writers.LogWriter`), and change logs ->
typed current state of every table (`materialize`, in `pgtail.spark.materialize`, no
database needed).

Both take a SparkSession (`session()` builds a local one); errors raised inside Spark's
Python workers come back as the pgtail error they were (`translate_spark_error`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgtail import errors
from pgtail.errors import ConfigurationError, PgtailError
from pgtail.spark import register, require_pyspark
from pgtail.spark.changelog import (
    CONCURRENT_WRITES,
    is_local,
    list_dirs,
    record_run,
    refuse_other_checkpoint,
    refuse_untyped_log,
    rename_old_batches,
)
from pgtail.spark.changelog import read_changes as read_changes
from pgtail.spark.materialize import follow_parallelism
from pgtail.spark.materialize import materialize as materialize
from pgtail.spark.writers import log_writer

_ERROR_LINE = re.compile(r"pgtail\.errors\.(\w+): (.+)")
# "SomeError: message" / "org.apache.spark.SparkException: message" lines of a Spark error
_EXCEPTION_LINE = re.compile(r"^\s*(?::\s*)?([A-Za-z_][\w.$]*(?:Error|Exception|Exit)): (.*\S)")
_PYTHON_TRACEBACK = "Traceback (most recent call last):"
SPARK_ERROR_HINT = "rerun with --debug for Spark's traceback"
WORKER_PYTHON_VARIABLES = ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")


def use_own_python(
    environ: MutableMapping[str, str] | None = None, executable: str | None = None
) -> dict[str, str]:
    """Make Spark's Python workers run this interpreter unless the user chose one.

    Without ``PYSPARK_PYTHON`` Spark starts workers with ``python3`` from the PATH, which
    in a virtualenv install is another interpreter without pgtail's dependencies (or with
    older ones). Returns the variables it set. Call before the SparkContext starts.
    """
    env = os.environ if environ is None else environ
    python = executable or sys.executable
    chosen: dict[str, str] = {}
    for name in WORKER_PYTHON_VARIABLES:
        if not env.get(name) and python:
            env[name] = python
            chosen[name] = python
    return chosen


_TRIGGER = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?|h|hours?)\s*$")


_LOCAL_MASTER = re.compile(r"^local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$")


def local_cores(master: str) -> int | None:
    """The cores of a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master;
    None for any other master."""
    match = _LOCAL_MASTER.match(master.strip())
    if match is None:
        return None
    cores = match.group(1)
    if cores is None:
        return 1
    if cores == "*":
        return os.cpu_count() or 1
    return max(int(cores), 1)


def session_defaults(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """Settings a session gets unless ``conf`` sets them: on a local master, as many
    shuffle partitions as cores. Spark's default of 200 makes ``materialize``'s
    shuffles 200 small Python tasks each (179 s against 30 s with 2, on 2 cores)."""
    cores = local_cores(master)
    if cores is None or "spark.sql.shuffle.partitions" in conf:
        return {}
    return {"spark.sql.shuffle.partitions": str(cores)}


def session(
    master: str = "local[*]", app_name: str = "pgtail", conf: Mapping[str, str] | None = None
) -> Any:
    """A SparkSession with the ``pgoutput`` format registered (speculation off; on a
    local master, `session_defaults`; on any other, `follow_parallelism`)."""
    require_pyspark()
    use_own_python()
    from pyspark.sql import SparkSession

    conf = {**session_defaults(master, conf or {}), **(conf or {})}

    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.speculation", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
        # Parquet's own timestamp type (UTC-adjusted for timestamp, local for
        # timestamp_ntz), which other readers understand, rather than legacy INT96
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        # no _SUCCESS file in a batch directory: Polars reads every file it finds there
        .config("spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except BaseException:
        end_unstarted_gateway()
        raise
    if str(spark.conf.get("spark.speculation", "false")).lower() == "true":
        raise ConfigurationError(
            "spark.speculation is on: two tasks could read one replication slot at once",
            hint="set spark.speculation=false for queries reading format pgoutput",
        )
    register(spark)
    follow_parallelism(spark)  # materialize looks again once executors have registered
    return spark


def end_unstarted_gateway() -> None:
    """Stop the JVM PySpark was starting when it gave up waiting for it (a Ctrl-C in
    Spark's first seconds): PySpark removes the file the JVM is to write its port to and
    forgets the process, which ignores SIGINT; its main thread then fails, and py4j's
    server thread would keep it running, an orphan, for good. Only a JVM this process
    started that never became Spark's gateway (none is known) is stopped (Linux: /proc)."""
    import signal

    from pyspark import SparkContext

    if SparkContext._gateway is not None:  # started: it ends with this process (stdin)
        return
    me = os.getpid()
    proc = Path("/proc")
    if not proc.is_dir():
        return
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == me and b"org.apache.spark.deploy.SparkSubmit" in (
                (entry / "cmdline").read_bytes()
            ):
                os.kill(int(entry.name), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            continue


# Spark's loggers that print a failed query's or task's error with its traceback
QUIETED_LOGGERS = (
    "org.apache.spark.sql.execution.streaming",  # the query's error
    "org.apache.spark.executor.Executor",  # a task's error (local executors log here)
    "org.apache.spark.scheduler.TaskSetManager",  # "Lost task", "aborting job"
    # a write job's abort ("Job N cancelled because SparkContext was shut down": Ctrl-C
    # during materialize)
    "org.apache.spark.sql.execution.datasources.FileFormatWriter",
)


def quiet_query_errors(spark: Any) -> None:
    """Stop Spark logging a failed streaming query's or task's error with its traceback
    (the caller reports the error itself, in one line)."""
    import contextlib

    # with another logging backend, Spark's own logs stay as they are
    with contextlib.suppress(Exception):
        jvm = spark.sparkContext._jvm
        level = jvm.org.apache.logging.log4j.Level.OFF
        for name in QUIETED_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)


class _Py4JRootRecords:
    """A filter of the root logger: drops the records py4j logs there itself."""

    def filter(self, record: Any) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def quiet_py4j_interrupts() -> None:
    """Stop py4j printing a Ctrl-C that lands inside one of its calls to the JVM (Spark's
    start-up, the first reads), and the failed calls after it, each with its traceback:
    py4j logs them through the root logger ("ERROR:root:KeyboardInterrupt while sending
    command."). The caller says "stopped" in one line. Other code's root records and
    every named logger (pgtail's warnings) are untouched."""
    import logging

    root = logging.getLogger()
    if not any(isinstance(f, _Py4JRootRecords) for f in root.filters):
        root.addFilter(_Py4JRootRecords())


def translate_spark_error(exc: BaseException) -> PgtailError | None:
    """The pgtail error inside a Spark/Py4J exception, rebuilt, or None."""
    if isinstance(exc, PgtailError):
        return exc
    text = str(exc)
    cause = exc.__cause__ or exc.__context__
    matches = list(_ERROR_LINE.finditer(text))
    if not matches and cause is not None:
        return translate_spark_error(cause)
    if not matches:
        return None
    match = matches[-1]
    cls = getattr(errors, match.group(1), None)
    if not (isinstance(cls, type) and issubclass(cls, PgtailError)):
        cls = PgtailError
    message = match.group(2).strip()
    return cls(message)


def spark_failure(exc: BaseException) -> PgtailError:
    """Any failure of a Spark job as one `PgtailError` line: the pgtail error it carries,
    or the exception Spark (or its Python worker) reported, without the traceback."""
    translated = translate_spark_error(exc)
    if translated is not None:
        return translated
    text = str(exc)
    lines = text.splitlines()
    found: list[tuple[str, str]] = []
    python_error: tuple[str, str] | None = None
    in_traceback = False
    for line in lines:
        if line.strip() == _PYTHON_TRACEBACK:
            in_traceback = True
            continue
        match = _EXCEPTION_LINE.match(line)
        if match:
            found.append((match.group(1), match.group(2)))
            if in_traceback and not line.startswith(" "):
                python_error = found[-1]  # the last line of a Python worker's traceback
                in_traceback = False
    if python_error is not None:
        name, message = python_error
    elif found:
        name, message = found[0]
    else:
        first = next((line.strip() for line in lines if line.strip()), "")
        name, message = type(exc).__name__, first or "failed"
    name = name.rsplit(".", 1)[-1]
    if len(message) > 300:
        message = message[:297] + "..."
    return PgtailError(f"Spark failed: {name}: {message}", hint=SPARK_ERROR_HINT)


def parse_trigger(text: str) -> dict[str, Any]:
    """``--trigger`` -> keyword arguments of ``DataStreamWriter.trigger``."""
    value = text.strip().lower()
    if value == "once":
        return {"once": True}
    if value in ("available-now", "availablenow", "available_now"):
        return {"availableNow": True}
    match = _TRIGGER.match(value)
    if not match:
        raise ConfigurationError(
            f"invalid trigger {text!r}", hint="use once, available-now or an interval like 10s"
        )
    amount, unit = float(match.group(1)), match.group(2)
    millis = (
        amount
        * {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit[0] if unit != "ms" else "ms"]
    )
    return {"processingTime": f"{int(millis)} milliseconds"}


@dataclass(frozen=True, slots=True)
class RunResult:
    batches: int
    rows: int


class Interrupted(KeyboardInterrupt):
    """Ctrl-C stopped `run`'s query (cleanly: its committed batches are confirmed on the
    slot); ``result`` is what it wrote until then."""

    def __init__(self, result: RunResult) -> None:
        super().__init__()
        self.result = result


def source_options(
    *,
    dsn: str | None,
    slot: str,
    publication: str,
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    options = {"slot": slot, "publication": publication}
    if dsn:
        options["dsn"] = dsn
    options.update(extra or {})
    return options


def validate_source(options: Mapping[str, str]) -> None:
    """Check options, slot and publication on the driver before Spark starts working."""
    from pgtail.spark.source import SourceDriver, parse_options

    driver = SourceDriver(parse_options(options))
    try:
        driver.validate()
    finally:
        driver.close()


def check_output(
    spark: Any, output: str | Path, checkpoint: str | Path
) -> tuple[list[str], str | None]:
    """Refuse an ``output`` that `run` must not write with ``checkpoint``: an earlier
    pgtail's untyped log, or logs another query wrote (`refuse_other_checkpoint`).
    Returns the output's directory names and the query id it records. ``spark`` may be
    None for local paths: `pgtail spark run` checks them so before Spark starts."""
    log_root = str(output).rstrip("/")
    names = list_dirs(spark, log_root)
    refuse_untyped_log(log_root, names)
    return names, refuse_other_checkpoint(spark, log_root, names, checkpoint)


def committed_offset(checkpoint: str | Path) -> dict[str, int] | None:
    """The slot positions of the last batch a checkpoint has committed to its sink, or None.

    Spark tells a source about a finished batch only when it plans the next one, so the
    last batch of an ``available-now`` run would otherwise stay unconfirmed on the slot.
    """
    import json

    if not is_local(checkpoint):
        return None  # the next run of the query confirms it
    root = Path(str(checkpoint).removeprefix("file://"))
    commits = [int(p.name) for p in (root / "commits").glob("*") if p.name.isdigit()]
    if not commits:
        return None
    offsets = root / "offsets" / str(max(commits))
    if not offsets.exists():
        return None
    for line in offsets.read_text().splitlines():
        if line.startswith("{") and '"slots"' in line:
            try:
                parsed = json.loads(line)
            except ValueError:
                continue
            slots = parsed.get("slots")
            if isinstance(slots, dict):
                return {str(k): int(v) for k, v in slots.items()}
    return None


def commit_checkpoint(options: Mapping[str, str], checkpoint: str | Path) -> dict[str, int] | None:
    """Advance the slot(s) to the last batch the checkpoint has committed (forward only)."""
    from pgtail.spark.source import SourceDriver, parse_options

    positions = committed_offset(checkpoint)
    if positions is None:
        return None
    driver = SourceDriver(parse_options(options))
    try:
        driver.commit(positions)
    finally:
        driver.close()
    return positions


def run(
    spark: Any,
    *,
    options: Mapping[str, str],
    output: str | Path,
    checkpoint: str | Path,
    trigger: str = "available-now",
    on_progress: Callable[[dict[str, Any]], None] | None = None,
    concurrent_writes: int = CONCURRENT_WRITES,
    writer: str = "auto",
    snapshot: bool = False,
    snapshot_tables: Sequence[str] = (),
    on_load: Callable[[str], None] | None = None,
) -> RunResult:
    """Stream the slot into typed per-table change logs under ``output``: one streaming
    query, one read of the slot per micro-batch.

    ``writer`` says who writes them (`pgtail.spark.writers`): ``pyarrow``, the task that
    reads a batch; ``spark``, Spark's Parquet writer (up to ``concurrent_writes`` tables
    of a batch at once); ``auto``, pyarrow for a local output. The logs are the same
    either way. Returns when the query ends (``once`` / ``available-now``);
    with an interval trigger it runs until interrupted (KeyboardInterrupt stops the query
    cleanly).

    ``snapshot`` (or ``snapshot_tables``, globs): first load the published tables (those
    only) into the logs, consistent with the slot (`pgtail.spark.load.initial_load`;
    ``on_load`` gets its progress lines). A load a crash left unfinished is loaded again
    whether asked or not.
    """
    from pgtail.spark.load import initial_load, read_record
    from pgtail.spark.secrets import hide_secrets
    from pgtail.spark.source import parse_options

    trigger_args = parse_trigger(trigger)
    validate_source(options)
    logs = log_writer(writer, output, parse_options(options).dsn, concurrent_writes)
    log_root = str(output).rstrip("/")
    names, owner = check_output(spark, output, checkpoint)
    # an earlier version's hidden batch directories, renamed before any new one is written
    rename_old_batches(spark, log_root, names)
    unfinished = read_record(spark, log_root)
    if unfinished is not None and unfinished.get("state") != "done" and not snapshot_tables:
        snapshot = True
        snapshot_tables = list(unfinished.get("patterns") or ())
    if snapshot or snapshot_tables:
        if owner is None:
            record_run(spark, log_root, checkpoint, None)  # the load's logs are this query's
        initial_load(
            spark,
            options=options,
            output=log_root,
            writer=logs.name,
            tables=snapshot_tables,
            on_progress=on_load,
        )
    sink = logs.sink()
    reader = logs.stream_reader(spark)
    for key, value in hide_secrets(options).items():  # no password in option dsn
        reader = reader.option(key, value)
    stream = (
        reader.load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(checkpoint))
        .outputMode("append")
        .trigger(**trigger_args)
    )
    try:
        try:
            query = stream.start()
        except Exception as exc:
            translated = translate_spark_error(exc)
            if translated is not None:
                raise translated from None
            raise
        if str(query.id) != owner:
            record_run(spark, log_root, checkpoint, str(query.id))
        return _await(query, options, checkpoint, on_progress, sink.counted)
    finally:
        sink.close()


def _await(
    query: Any,
    options: Mapping[str, str],
    checkpoint: str | Path,
    on_progress: Callable[[dict[str, Any]], None] | None,
    changes: Callable[[int], int | None] = lambda batch_id: None,
) -> RunResult:
    """Wait for the query; ``changes(batch id)`` counts a batch's changes when its rows
    are not changes (the pyarrow writer's manifests).

    Ctrl-C (SIGINT, in the main thread) stops the query between two waits, then raises
    `Interrupted`: PySpark's own handler would cancel the jobs from inside the signal
    handler, in the middle of a Py4J call, and print tracebacks. A second Ctrl-C
    interrupts at once."""
    import signal
    import threading

    batches = rows = 0
    seen: set[int] = set()
    asked = threading.Event()
    previous: Any = None
    if threading.current_thread() is threading.main_thread():

        def on_interrupt(signum: int, frame: Any) -> None:
            if asked.is_set():
                raise KeyboardInterrupt
            asked.set()

        previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        while True:
            try:
                done = query.awaitTermination(1)
            except Exception as exc:  # StreamingQueryException
                translated = translate_spark_error(exc)
                if translated is not None:
                    raise translated from None
                raise
            for progress in query.recentProgress:
                if "addBatch" not in (progress.get("durationMs") or {}):
                    # a trigger that found nothing new, reported under the id of the
                    # next batch (which must not be taken as seen)
                    continue
                batch_id = int(progress.get("batchId", -1))
                if batch_id in seen:
                    continue
                seen.add(batch_id)
                batches += 1
                counted = changes(batch_id)
                if counted is not None:
                    progress = {**progress, "numInputRows": counted}
                rows += int(progress.get("numInputRows", 0))
                if on_progress is not None:
                    on_progress(progress)
            if asked.is_set():
                raise Interrupted(RunResult(batches=batches, rows=rows))
            if done:
                break
    except KeyboardInterrupt:
        query.stop()
        commit_checkpoint(options, checkpoint)
        raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    commit_checkpoint(options, checkpoint)
    return RunResult(batches=batches, rows=rows)
