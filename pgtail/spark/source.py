"""The ``pgoutput`` PySpark data source: a replication slot as a Structured Streaming
source with exactly-once replay, and as a batch source that peeks pending changes.

Offsets are LSNs: ``{"slots": {"<slot>": <lsn int>}}``, where an LSN ``L`` means "every
transaction whose commit record starts before ``L`` has been delivered". A micro-batch
``[start, end)`` is replayed on an executor by peeking the slot up to ``end`` and keeping
the transactions whose commit LSN lies in the range; ``commit(end)`` on the driver then
advances the slot. Decoding is `pgtail.changes.Assembler`'s; this module only adapts it.

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

from pgtail.errors import ConfigurationError, DataLossError, redact
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.spark.schema import SCHEMA

if TYPE_CHECKING:
    import psycopg2.extensions
    import pyarrow as pa

log = logging.getLogger("pgtail.spark")

NAME = "pgoutput"
DEFAULT_BATCH_ROWS = 10_000
# With no new changes, the offset still moves on once this much WAL has gone by, so the
# slot releases WAL written for other tables without an empty micro-batch per trigger.
IDLE_ADVANCE_BYTES = 16 * 1024 * 1024

OPTIONS = {
    "dsn": "libpq connection string or URI (default: DATABASE_URL, then PG* variables)",
    "slot": "the replication slot (pgoutput plugin) to read",
    "slots": "several slots, one partition each: 'slot_a:pub_a,slot_b:pub_b1+pub_b2'",
    "publication": "publication name(s), comma-separated, for slots without their own",
    "startinglsn": "first LSN of a new query / a batch read (default: slot position)",
    "endinglsn": "batch reads only: stop at this LSN (default: what is flushed now)",
    "failondataloss": "true (default) / false: fail when the slot moved past a batch start",
    "maxbytespertrigger": "WAL bytes per micro-batch and slot (rounded to transactions)",
    "binary": "true / false (default): binary transfer of column values (PostgreSQL 14+)",
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

    dsn: str
    slots: tuple[SlotSpec, ...]
    starting_lsn: int | None = None
    ending_lsn: int | None = None
    fail_on_data_loss: bool = True
    max_bytes_per_trigger: int | None = None
    binary: bool = False
    messages: bool = True
    batch_rows: int = DEFAULT_BATCH_ROWS
    busy_timeout: float = 10.0


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
    starting = parse_lsn(opts["startinglsn"]) if opts.get("startinglsn") else None
    ending = parse_lsn(opts["endinglsn"]) if opts.get("endinglsn") else None
    return Settings(
        dsn=resolve_dsn(opts.get("dsn")),
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
    )


@dataclass(frozen=True)
class SlotPartition(InputPartition):
    """Everything an executor needs to replay one slot's share of a batch (picklable)."""

    dsn: str
    slot: str
    start: int  # first commit LSN to keep
    end: int  # peek up to here; commit LSNs < end are kept
    plugin_options: tuple[str, ...]
    binary: bool
    fail_on_data_loss: bool
    batch_rows: int
    busy_timeout: float = 10.0
    check_data_loss: bool = True

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


def read_partition(partition: SlotPartition) -> Iterator[pa.RecordBatch]:
    """Replay one slot between two offsets as Arrow batches (runs on an executor)."""
    from pgtail import catalog
    from pgtail.changes import Assembler, Change, Message, Truncate
    from pgtail.spark import sql
    from pgtail.spark.schema import RowBuffer

    start, end = partition.start, partition.end
    if partition.check_data_loss:
        check_data_loss(partition.slot, _confirmed(partition), start, partition.fail_on_data_loss)
    assembler = Assembler(1, binary=partition.binary)
    rows = RowBuffer()
    options = list(partition.plugin_options)
    for _lsn, payload in catalog.peek_until(
        partition.dsn,
        partition.slot,
        end,
        options,
        partition.busy_timeout,
        application_name=sql.APPLICATION_NAME,
    ):
        wanted = assembler.user_types_wanted(payload)
        if wanted:  # a Relation using types that are not built in: ask pg_type first
            assembler.add_user_types(catalog.lookup_user_types(partition.dsn, wanted), wanted)
        for event in assembler.feed(payload):
            if isinstance(event, Change):
                if start <= event.tx.commit_lsn < end:
                    rows.add_change(event)
            elif isinstance(event, Truncate):
                if start <= event.tx.commit_lsn < end:
                    rows.add_truncate(event)
            elif isinstance(event, Message):
                if event.tx is not None:
                    if start <= event.tx.commit_lsn < end:
                        rows.add_message(event)
                # A non-transactional message's LSN is the end of its record; offsets never
                # fall inside one, so "record starts in [start, end)" is "lsn in (start, end]".
                elif start < event.lsn <= end:
                    rows.add_message(event)
        if rows.rows >= partition.batch_rows:
            yield rows.take()
    if partition.check_data_loss:
        # The peek held the slot; if it was not past `start` afterwards, it was not before.
        check_data_loss(partition.slot, _confirmed(partition), start, partition.fail_on_data_loss)
    if rows.rows:
        yield rows.take()


def _confirmed(partition: SlotPartition) -> int:
    """The slot's confirmed position, on a connection of its own (executor side)."""
    from pgtail import catalog
    from pgtail.spark import sql

    conn = catalog.open_connection(partition.dsn, application_name=sql.APPLICATION_NAME)
    try:
        state = catalog.require_slot(
            conn, partition.slot, missing_hint=sql.missing_slot_hint(partition.slot)
        )
    finally:
        conn.close()
    assert state.confirmed_flush_lsn is not None
    return state.confirmed_flush_lsn


@dataclass
class _Driver:
    """Driver-side state of one source: settings and a lazily opened connection."""

    settings: Settings
    conn: psycopg2.extensions.connection | None = None
    checked_publications: bool = False
    server_version: int = 0
    plugin_options: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def connection(self) -> psycopg2.extensions.connection:
        from pgtail import catalog
        from pgtail.spark import sql

        if self.conn is None or self.conn.closed:
            self.conn = catalog.open_connection(
                self.settings.dsn, application_name=sql.APPLICATION_NAME
            )
            self.server_version = catalog.server_version_num(self.conn)
            self.plugin_options = {
                spec.name: tuple(
                    sql.plugin_options(
                        spec.publications,
                        binary=self.settings.binary,
                        messages=self.settings.messages,
                        server_version=self.server_version,
                    )
                )
                for spec in self.settings.slots
            }
        return self.conn

    def close(self) -> None:
        if self.conn is not None and not self.conn.closed:
            self.conn.close()
        self.conn = None

    def validate(self) -> dict[str, int]:
        """Check slots and publications; return each slot's confirmed position."""
        from pgtail import catalog
        from pgtail.spark import sql

        conn = self.connection()
        positions: dict[str, int] = {}
        for spec in self.settings.slots:
            state = catalog.require_slot(
                conn, spec.name, missing_hint=sql.missing_slot_hint(spec.name)
            )
            assert state.confirmed_flush_lsn is not None
            positions[spec.name] = state.confirmed_flush_lsn
        if not self.checked_publications:
            catalog.require_publications(
                conn,
                sorted({p for s in self.settings.slots for p in s.publications}),
                hint=sql.MISSING_PUBLICATION_HINT,
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
            # a window cut short by max_bytes has more WAL behind it: it moves on even
            # when it holds nothing to deliver, or the stream would stall there
            limited = max_bytes is not None and begin + max_bytes < cap
            if max_bytes is not None:
                cap = min(cap, begin + max_bytes)
            if cap <= begin:
                result[spec.name] = begin
                continue
            last = catalog.last_emitted_lsn(
                conn, spec.name, cap, list(self.plugin_options[spec.name])
            )
            if last is not None and last > begin:
                # A commit or message record straddling `cap` ends the batch at its end.
                result[spec.name] = max(cap, last)
            elif limited or cap - begin >= IDLE_ADVANCE_BYTES:
                result[spec.name] = cap
            else:
                result[spec.name] = begin
        return result

    def partitions(
        self, start: Mapping[str, int], end: Mapping[str, int], *, check: bool = True
    ) -> list[SlotPartition]:
        from pgtail import catalog
        from pgtail.spark import sql

        conn = self.connection()
        parts = []
        for spec in self.settings.slots:
            begin = start.get(spec.name)
            stop = end.get(spec.name)
            if begin is None and stop is not None:
                # A slot added to a running query: it starts where the slot is.
                begin = catalog.require_slot(
                    conn, spec.name, missing_hint=sql.missing_slot_hint(spec.name)
                ).confirmed_flush_lsn
            if begin is None or stop is None or stop <= begin:
                continue
            parts.append(
                SlotPartition(
                    dsn=self.settings.dsn,
                    slot=spec.name,
                    start=begin,
                    end=stop,
                    plugin_options=self.plugin_options[spec.name],
                    binary=self.settings.binary,
                    fail_on_data_loss=self.settings.fail_on_data_loss,
                    batch_rows=self.settings.batch_rows,
                    busy_timeout=self.settings.busy_timeout,
                    check_data_loss=check,
                )
            )
        return parts

    def commit(self, end: Mapping[str, int]) -> None:
        from pgtail import catalog
        from pgtail.spark import sql

        conn = self.connection()
        for spec in self.settings.slots:
            if spec.name in end:
                catalog.advance_to(
                    conn,
                    spec.name,
                    end[spec.name],
                    self.settings.busy_timeout,
                    missing_hint=sql.missing_slot_hint(spec.name),
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
        self._driver = _Driver(settings)
        self._target: dict[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Pickled to executors for read(): never with a connection.
        return {"settings": self._driver.settings, "target": self._target}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._driver = _Driver(state["settings"])
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
        driver = _Driver(self._settings)
        try:
            start = driver.initial()
            if self._settings.ending_lsn is not None:
                end = {name: self._settings.ending_lsn for name in start}
            else:
                end = driver.latest(start, None, None, wait=True)
                # A batch read may stop anywhere flushed: no idle rule needed.
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
        return SCHEMA

    def reader(self, schema: StructType) -> PgoutputBatchReader:
        return PgoutputBatchReader(parse_options(self.options))

    def streamReader(self, schema: StructType) -> PgoutputStreamReader:
        return PgoutputStreamReader(parse_options(self.options))
