"""Who writes the change logs (``pgtail spark run --writer``): one interface, two writers.

A `LogWriter` is all `pgtail.spark.pipeline.run` and the initial load
(`pgtail.spark.load`) ask of a writer: the read whose tasks feed it (`stream_reader` for
the slot, `load_reader` for a load's ranges) and the ``foreachBatch`` function that
commits a batch (`sink`). Neither branches on which writer it has.

- `PyarrowWriter` (``pyarrow``, the default for a local output): the task that reads a
  batch converts and writes its typed files itself (`pgtail.spark.direct`); its sink
  moves them into the logs.
- `SparkWriter` (``spark``): the tasks hand the source's rows to Spark; its sink
  converts them and writes them with Spark's Parquet writer
  (`pgtail.spark.changelog.ChangeLogWriter`), on any file system Spark writes.

The logs are the same either way: their layout is `pgtail.spark.changelog`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pgtail.errors import ConfigurationError
from pgtail.spark.changelog import (
    CONCURRENT_WRITES,
    ChangeLogSink,
    ChangeLogWriter,
    is_local,
    require_local,
)

WRITERS = ("auto", "pyarrow", "spark")


def chosen_writer(writer: str, output: str | Path) -> str:
    """``pyarrow`` or ``spark``: who writes the change logs (``auto``: pyarrow for a
    local output, where the driver can move what the executors staged)."""
    if writer not in WRITERS:
        raise ConfigurationError(f"unknown writer {writer!r}", hint="use " + ", ".join(WRITERS))
    if writer == "auto":
        return "pyarrow" if is_local(output) else "spark"
    if writer == "pyarrow":
        require_local(output)
    return writer


class LogWriter(Protocol):
    """What writes the change logs under one output."""

    @property
    def name(self) -> str:
        """``pyarrow`` or ``spark``."""
        ...

    def stream_reader(self, spark: Any) -> Any:
        """The DataStreamReader of the slot whose micro-batches `sink` commits (the
        source's options are the caller's to add)."""
        ...

    def load_reader(self, reader: Any) -> Any:
        """``reader``, the batch read of a load's ranges, set up for this writer."""
        ...

    def sink(self) -> ChangeLogSink:
        """A new ``foreachBatch`` function (close it when its query or load ends)."""
        ...


@dataclass(frozen=True)
class PyarrowWriter:
    """The executors write typed files; the driver moves them into the logs."""

    root: str  # the output, an absolute local path: Python workers run anywhere
    name: str = "pyarrow"

    def stream_reader(self, spark: Any) -> Any:
        from pgtail.spark.direct import NAME

        return spark.readStream.format(NAME).option("path", self.root)

    def load_reader(self, reader: Any) -> Any:
        return reader.option("output", self.root)

    def sink(self) -> ChangeLogSink:
        from pgtail.spark.direct import ChangeLogCommitter

        return ChangeLogCommitter(self.root)


@dataclass(frozen=True)
class SparkWriter:
    """The executors hand over the source's rows; Spark's Parquet writer writes them."""

    output: str
    dsn: str  # the driver looks up each batch's columns in the catalog
    concurrent_writes: int = CONCURRENT_WRITES
    name: str = "spark"

    def stream_reader(self, spark: Any) -> Any:
        from pgtail.spark.source import NAME

        return spark.readStream.format(NAME)

    def load_reader(self, reader: Any) -> Any:
        return reader

    def sink(self) -> ChangeLogSink:
        return ChangeLogWriter(self.output, self.dsn, self.concurrent_writes)


def log_writer(
    writer: str, output: str | Path, dsn: str, concurrent_writes: int = CONCURRENT_WRITES
) -> LogWriter:
    """The writer ``writer`` names (`chosen_writer`) for the logs under ``output``, whose
    tables are looked up through ``dsn``."""
    if chosen_writer(writer, output) == "pyarrow":
        from pgtail.spark.direct import local_path

        return PyarrowWriter(str(local_path(str(output).rstrip("/")).resolve()))
    return SparkWriter(str(output).rstrip("/"), dsn, concurrent_writes)
