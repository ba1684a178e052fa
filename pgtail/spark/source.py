"""The ``pgoutput`` PySpark data source: a replication slot as a Structured Streaming
source with exactly-once replay, and as a batch source that reads pending changes.

Offsets are LSNs: ``{"slots": {"<slot>": <lsn int>}}``, where an LSN ``L`` means "every
transaction whose commit record starts before ``L`` has been delivered". The driver plans
offsets without decoding anything: the end of a micro-batch is the server's flushed WAL
position (``maxBytesPerTrigger`` caps the distance from the start, in WAL bytes). An
executor reads ``[start, end)`` through the replication protocol with
`pgtail.stream.bounded.read_range` -- the session code of ``pgtail stream``, the same
protocol version, streaming of large transactions (14+) and binary choices -- and never
moves the slot; ``commit(end)`` on the driver then advances it. Decoding is
`pgtail.changes.Assembler`'s; this module only adapts it.

Spark speculation must stay off (``spark.speculation=false``): two tasks cannot read one
slot at the same time, and a second one fails with a clear error instead. Spark reports a
batch as done only when it plans the next one, so the last batch of a finished query is
confirmed by `pgtail.spark.pipeline.commit_checkpoint` (``pgtail spark run`` calls it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pgtail.catalog.spark import ColumnType
from pgtail.errors import ConfigurationError, DataLossError, redact
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.spark.schema import SCHEMA

if TYPE_CHECKING:
    import psycopg2.extensions
    import pyarrow as pa

log = logging.getLogger("pgtail.spark")

NAME = "pgoutput"
DEFAULT_BATCH_ROWS = 10_000

OPTIONS = {
    "dsn": "libpq connection string or URI (default: DATABASE_URL, then PG* variables)",
    "password": "the password, kept out of option dsn (a key Spark's redaction hides)",
    "sslpassword": "the client key's password, kept out of option dsn likewise",
    "slot": "the replication slot (pgoutput plugin) to read",
    "slots": "several slots, one partition each: 'slot_a:pub_a,slot_b:pub_b1+pub_b2'",
    "publication": "publication name(s), comma-separated, for slots without their own",
    "table": "schema.table: only its changes, as its own columns with Spark types",
    "startinglsn": "first LSN of a new query / a batch read (default: slot position)",
    "endinglsn": "batch reads only: stop at this LSN (default: what is flushed now)",
    "failondataloss": "true (default) / false: fail when the slot moved past a batch start",
    "maxbytespertrigger": "WAL bytes per micro-batch and slot (rounded to transactions)",
    "binary": "true / false (default): binary transfer of column values (PostgreSQL 14+)",
    "streaming": "true (default) / false: large transactions sent while in progress (14+)",
    "messages": "true (default) / false: include pg_logical_emit_message messages",
    "batchrows": f"rows per Arrow batch (default {DEFAULT_BATCH_ROWS})",
    "slotbusytimeout": "seconds to wait for a slot held by another reader (default 10)",
}


@dataclass(frozen=True, slots=True)
class SlotSpec:
    name: str
    publications: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Settings:
    """The parsed, validated options of one source (no connection needed to build it)."""

    dsn: str = field(repr=False)  # with its password (`pgtail.spark.secrets`)
    slots: tuple[SlotSpec, ...]
    starting_lsn: int | None = None
    ending_lsn: int | None = None
    fail_on_data_loss: bool = True
    max_bytes_per_trigger: int | None = None
    binary: bool = False
    streaming: bool = True
    messages: bool = True
    batch_rows: int = DEFAULT_BATCH_ROWS
    busy_timeout: float = 10.0
    table: tuple[str, str] | None = None  # (schema, name): the typed per-table read


def _bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ConfigurationError(f"option {name}={text!r} is not a boolean", hint="use true or false")


def _positive_int(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigurationError(
            f"option {name}={text!r} must be a positive integer", hint=f"e.g. {name}=1000000"
        )
    return value


def _names(text: str, sep: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(sep) if part.strip())


def parse_options(options: Mapping[str, str]) -> Settings:
    """Validate the data source options; `ConfigurationError` names the bad one."""
    from pgtail.catalog import resolve_dsn
    from pgtail.spark.secrets import join_dsn, option_secrets

    opts = {k.lower(): v for k, v in options.items() if v is not None}
    unknown = sorted(set(opts) - set(OPTIONS) - {"path"})
    if unknown:
        raise ConfigurationError(
            f"unknown option {unknown[0]!r} for format pgoutput",
            hint="known options: " + ", ".join(sorted(OPTIONS)),
        )
    default_pubs = _names(opts.get("publication", ""), ",")
    specs: list[SlotSpec] = []
    if "slot" in opts and "slots" in opts:
        raise ConfigurationError("give either option slot or option slots, not both")
    if "slots" in opts:
        for item in _names(opts["slots"], ","):
            name, _, pubs = item.partition(":")
            publications = _names(pubs, "+") or default_pubs
            specs.append(SlotSpec(name.strip(), publications))
    elif opts.get("slot", "").strip():
        specs.append(SlotSpec(opts["slot"].strip(), default_pubs))
    if not specs:
        raise ConfigurationError(
            "option slot is required", hint='.option("slot", "<name>") or .option("slots", ...)'
        )
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"slot listed twice in option slots: {opts.get('slots')!r}")
    for spec in specs:
        if not spec.publications:
            raise ConfigurationError(
                f"no publication for slot {spec.name!r}",
                hint='.option("publication", "<name>") (pgoutput needs publication names)',
            )
    table = None
    if opts.get("table", "").strip():
        from pgtail.catalog import parse_table_spec

        spec_ = parse_table_spec(opts["table"].strip(), allow_columns=False)
        table = (spec_.schema or "public", spec_.name)
    starting = parse_lsn(opts["startinglsn"]) if opts.get("startinglsn") else None
    ending = parse_lsn(opts["endinglsn"]) if opts.get("endinglsn") else None
    return Settings(
        dsn=join_dsn(resolve_dsn(opts.get("dsn")), option_secrets(opts)),
        slots=tuple(specs),
        starting_lsn=starting,
        ending_lsn=ending,
        fail_on_data_loss=_bool("failOnDataLoss", opts.get("failondataloss", "true")),
        max_bytes_per_trigger=(
            _positive_int("maxBytesPerTrigger", opts["maxbytespertrigger"])
            if "maxbytespertrigger" in opts
            else None
        ),
        binary=_bool("binary", opts.get("binary", "false")),
        streaming=_bool("streaming", opts.get("streaming", "true")),
        messages=_bool("messages", opts.get("messages", "true")),
        batch_rows=(
            _positive_int("batchRows", opts["batchrows"])
            if "batchrows" in opts
            else DEFAULT_BATCH_ROWS
        ),
        busy_timeout=(
            float(_positive_int("slotBusyTimeout", opts["slotbusytimeout"]))
            if "slotbusytimeout" in opts
            else 10.0
        ),
        table=table,
    )


@dataclass(frozen=True)
class SlotPartition(InputPartition):
    """Everything an executor needs to replay one slot's share of a batch (picklable)."""

    dsn: str
    slot: str
    start: int  # first commit LSN to keep
    end: int  # commit LSNs < end are kept
    proto_version: int
    replication_options: tuple[tuple[str, str], ...]  # START_REPLICATION's
    binary: bool
    fail_on_data_loss: bool
    batch_rows: int
    busy_timeout: float = 10.0
    check_data_loss: bool = True
    table: tuple[str, str] | None = None  # the typed per-table read
    columns: tuple[ColumnType, ...] = ()

    def __repr__(self) -> str:  # never show a password in Spark's logs or UI
        return (
            f"SlotPartition(slot={self.slot!r}, start={format_lsn(self.start)}, "
            f"end={format_lsn(self.end)}, dsn={redact(self.dsn)!r})"
        )


def data_loss_error(slot: str, confirmed: int, start: int) -> DataLossError:
    return DataLossError(
        f"replication slot {slot!r} is already at {format_lsn(confirmed)}, past the batch "
        f"start {format_lsn(start)}: the changes in between were consumed by someone else "
        "and cannot be delivered",
        hint="make sure only this query reads the slot; to skip the lost changes and go on, "
        "set failOnDataLoss=false (or start a new query with a new checkpoint)",
    )


def check_data_loss(slot: str, confirmed: int, start: int, fail: bool) -> None:
    if confirmed > start:
        if fail:
            raise data_loss_error(slot, confirmed, start)
        log.warning("%s (failOnDataLoss=false: going on)", data_loss_error(slot, confirmed, start))


def partition_events(partition: SlotPartition, *, stage: bool = False) -> Iterator[Any]:
    """The events of one slot between two offsets (`read_range`; runs on an executor).
    ``stage``: rows as `pgtail.spark.direct` stages them (`stage_columns_encoder`)."""
    from pgtail.render.jsonl import json_columns_encoder
    from pgtail.spark import slot_options
    from pgtail.spark.text_rows import stage_columns_encoder, text_columns_encoder
    from pgtail.stream.bounded import RangeRead, read_range

    start = partition.start

    def check(confirmed: int) -> None:
        if partition.check_data_loss:
            check_data_loss(partition.slot, confirmed, start, partition.fail_on_data_loss)

    read = RangeRead(
        proto_version=partition.proto_version,
        options=dict(partition.replication_options),
        binary=partition.binary,
        application_name=slot_options.APPLICATION_NAME,
        busy_timeout=partition.busy_timeout,
        missing_hint=slot_options.missing_slot_hint(partition.slot),
        # the rows straight from the server's text: the typed read's (`text_rows`), the
        # staged log's (their JSON and text, `stage_columns_encoder`), or their JSON, as
        # `pgtail stream` writes it
        encoder=(
            text_columns_encoder
            if partition.table is not None
            else stage_columns_encoder
            if stage
            else json_columns_encoder
        ),
    )
    return read_range(partition.dsn, partition.slot, start, partition.end, read, on_position=check)


def read_partition(
    partition: SlotPartition, *, later: bool = False, stage: bool = False
) -> Iterator[Any]:
    """Replay one slot between two offsets as Arrow batches (runs on an executor).
    ``later``: the untyped rows as `pgtail.spark.schema.PendingRows`, each built into its
    batch by calling it (in another thread: the reading thread only decodes). ``stage``
    (with ``later``): their runs of encoded rows are stage lines, for
    `pgtail.spark.direct.Stager.add_pending` (not to be called)."""
    from pgtail.spark.schema import TypedRowBuffer

    if stage and not later:
        raise ValueError("stage lines are for the stager (later)")
    events = partition_events(partition, stage=stage)
    if partition.table is not None:
        if later:
            raise ValueError("the typed per-table read builds its batches as it reads")
        return _read_table(partition, events, TypedRowBuffer(*partition.table, partition.columns))
    return untyped_batches(events, partition.batch_rows, later=later)


def untyped_batches(
    events: Iterator[Any], batch_rows: int, *, later: bool = False
) -> Iterator[Any]:
    """The source's rows (`pgtail.spark.schema.SCHEMA`) of the events, ``batch_rows`` to a
    record batch (``later``: to a `pgtail.spark.schema.PendingRows`)."""
    from pgtail.changes import Change, EncodedRows, Message
    from pgtail.spark.schema import RowBuffer

    rows = RowBuffer()
    add_change, add_truncate, add_message = rows.add_change, rows.add_truncate, rows.add_message
    add_encoded = rows.add_encoded
    take = rows.take_later if later else rows.take
    for event in events:
        cls = type(event)
        if cls is EncodedRows:
            add_encoded(event)
        elif cls is Change:
            add_change(event)
        elif cls is Message:
            add_message(event)
        else:
            add_truncate(event)
        if rows.rows >= batch_rows:
            yield take()
    if rows.rows:
        yield take()


def _read_table(
    partition: SlotPartition, events: Iterator[Any], rows: Any
) -> Iterator[pa.RecordBatch]:
    """The typed per-table read: that table's changes and truncates, nothing else."""
    from pgtail.changes import Change, EncodedRows, Truncate

    wanted = rows.wanted
    for event in events:
        cls = type(event)
        if cls is EncodedRows:
            if wanted(event.table):
                rows.add_encoded(event)
        elif cls is Change:
            if wanted(event.table):
                rows.add_change(event)
        elif cls is Truncate:
            rows.add_truncate(event)
        if rows.rows >= partition.batch_rows:
            yield rows.take()
    if rows.rows:
        yield rows.take()


@dataclass
class SourceDriver:
    """Driver-side state of one source: settings and a lazily opened connection."""

    settings: Settings
    conn: psycopg2.extensions.connection | None = None
    checked_publications: bool = False
    server_version: int = 0
    proto_version: int = 1
    replication_options: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    columns: tuple[ColumnType, ...] = ()

    def connection(self) -> psycopg2.extensions.connection:
        from pgtail import catalog
        from pgtail.spark import slot_options

        if self.conn is None or self.conn.closed:
            self.conn = catalog.open_connection(
                self.settings.dsn, application_name=slot_options.APPLICATION_NAME
            )
            server = catalog.server_info(self.conn)
            self.server_version = server.version_num
            for spec in self.settings.slots:
                self.proto_version, options = slot_options.replication_options(
                    server,
                    spec.publications,
                    binary=self.settings.binary,
                    messages=self.settings.messages,
                    streaming=self.settings.streaming,
                )
                self.replication_options[spec.name] = tuple(sorted(options.items()))
            if self.settings.table is not None:
                self.columns = tuple(catalog.table_columns(self.conn, *self.settings.table))
        return self.conn

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()
        self.conn = None

    def validate(self) -> dict[str, int]:
        """Check slots and publications; return each slot's confirmed position."""
        from pgtail import catalog
        from pgtail.spark import slot_options

        conn = self.connection()
        positions: dict[str, int] = {}
        for spec in self.settings.slots:
            state = catalog.require_slot(
                conn, spec.name, missing_hint=slot_options.missing_slot_hint(spec.name)
            )
            assert state.confirmed_flush_lsn is not None
            positions[spec.name] = state.confirmed_flush_lsn
        if not self.checked_publications:
            catalog.require_publications(
                conn,
                sorted({p for s in self.settings.slots for p in s.publications}),
                hint=slot_options.MISSING_PUBLICATION_HINT,
            )
            self.checked_publications = True
        return positions

    def initial(self) -> dict[str, int]:
        positions = self.validate()
        if self.settings.starting_lsn is not None:
            for name, confirmed in positions.items():
                check_data_loss(
                    name, confirmed, self.settings.starting_lsn, self.settings.fail_on_data_loss
                )
            return {name: self.settings.starting_lsn for name in positions}
        return positions

    def latest(
        self,
        start: Mapping[str, int],
        max_bytes: int | None,
        caps: Mapping[str, int] | None,
        *,
        wait: bool = False,
    ) -> dict[str, int]:
        """The end offset of the next batch for each slot (see the module docstring)."""
        from pgtail import catalog

        positions = self.validate()
        conn = self.connection()
        flushed = catalog.wait_flushed(conn) if wait else catalog.wal_position(conn)
        result: dict[str, int] = {}
        for spec in self.settings.slots:
            confirmed = positions[spec.name]
            begin = start.get(spec.name, confirmed)
            check_data_loss(spec.name, confirmed, begin, self.settings.fail_on_data_loss)
            begin = max(begin, confirmed) if not self.settings.fail_on_data_loss else begin
            cap = flushed
            if caps is not None and spec.name in caps:
                cap = min(cap, caps[spec.name])
            if max_bytes is not None:
                cap = min(cap, begin + max_bytes)
            # No decoding: the batch ends where the WAL does (or the byte cap); the
            # executor finds what commits in between, which may be nothing.
            result[spec.name] = max(begin, cap)
        return result

    def partitions(
        self, start: Mapping[str, int], end: Mapping[str, int], *, check: bool = True
    ) -> list[SlotPartition]:
        from pgtail import catalog
        from pgtail.spark import slot_options

        conn = self.connection()
        parts = []
        for spec in self.settings.slots:
            begin = start.get(spec.name)
            stop = end.get(spec.name)
            if begin is None and stop is not None:
                # A slot added to a running query: it starts where the slot is.
                begin = catalog.require_slot(
                    conn, spec.name, missing_hint=slot_options.missing_slot_hint(spec.name)
                ).confirmed_flush_lsn
            if begin is None or stop is None or stop <= begin:
                continue
            parts.append(
                SlotPartition(
                    dsn=self.settings.dsn,
                    slot=spec.name,
                    start=begin,
                    end=stop,
                    proto_version=self.proto_version,
                    replication_options=self.replication_options[spec.name],
                    binary=self.settings.binary,
                    fail_on_data_loss=self.settings.fail_on_data_loss,
                    batch_rows=self.settings.batch_rows,
                    busy_timeout=self.settings.busy_timeout,
                    check_data_loss=check,
                    table=self.settings.table,
                    columns=self.columns,
                )
            )
        return parts

    def commit(self, end: Mapping[str, int]) -> None:
        from pgtail import catalog
        from pgtail.spark import slot_options

        conn = self.connection()
        for spec in self.settings.slots:
            if spec.name in end:
                catalog.advance_to(
                    conn,
                    spec.name,
                    end[spec.name],
                    self.settings.busy_timeout,
                    missing_hint=slot_options.missing_slot_hint(spec.name),
                )


def _offset(positions: Mapping[str, int]) -> dict[str, Any]:
    return {"slots": {name: int(lsn) for name, lsn in sorted(positions.items())}}


def _positions(offset: Mapping[str, Any]) -> dict[str, int]:
    slots = offset.get("slots")
    if not isinstance(slots, dict):
        raise ConfigurationError(
            f"unexpected offset {offset!r} in the checkpoint",
            hint="the checkpoint was written by another source; use a new checkpoint directory",
        )
    return {str(k): int(v) for k, v in slots.items()}


class PgoutputStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, settings: Settings) -> None:
        self._driver = SourceDriver(settings)
        self._target: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Pickled to executors for read(): never with a connection.
        return {"settings": self._driver.settings, "target": self._target}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._driver = SourceDriver(state["settings"])
        self._target = state["target"]

    def initialOffset(self) -> dict[str, Any]:
        return _offset(self._driver.initial())

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self._driver.settings.max_bytes_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxBytes(limit)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else None
        return _offset(self._driver.latest(_positions(start), max_bytes, self._target))

    def prepareForTriggerAvailableNow(self) -> None:
        from pgtail import catalog

        self._driver.validate()
        flushed = catalog.wait_flushed(self._driver.connection())
        self._target = {spec.name: flushed for spec in self._driver.settings.slots}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[SlotPartition]:
        return self._driver.partitions(_positions(start), _positions(end))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark hands an InputPartition(None) when there was nothing to plan.
        if not isinstance(partition, SlotPartition):
            return iter(())
        return read_partition(partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._driver.commit(_positions(end))

    def stop(self) -> None:
        self._driver.close()


class PgoutputBatchReader(DataSourceReader):
    """``spark.read.format("pgoutput")``: the pending changes of the slot(s), once."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def partitions(self) -> Sequence[SlotPartition]:
        driver = SourceDriver(self._settings)
        try:
            start = driver.initial()
            caps = None
            if self._settings.ending_lsn is not None:
                caps = {name: self._settings.ending_lsn for name in start}
            # what is flushed now (up to endingLsn): an executor never waits for more WAL
            end = driver.latest(start, None, caps, wait=True)
            return driver.partitions(start, end)
        finally:
            driver.close()

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        # Spark hands an InputPartition(None) when there was nothing to plan.
        if not isinstance(partition, SlotPartition):
            return iter(())
        return read_partition(partition)


class PgoutputDataSource(DataSource):
    """``format("pgoutput")``: changes of a PostgreSQL logical replication slot."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        settings = parse_options(self.options)
        if settings.table is None:
            return SCHEMA
        from pgtail.spark.schema import table_schema

        driver = SourceDriver(settings)
        try:
            driver.connection()
            return table_schema(driver.columns)
        finally:
            driver.close()

    def reader(self, schema: StructType) -> PgoutputBatchReader:
        return PgoutputBatchReader(parse_options(self.options))

    def streamReader(self, schema: StructType) -> PgoutputStreamReader:
        return PgoutputStreamReader(parse_options(self.options))
