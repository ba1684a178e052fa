"""Planning the initial load of ``pgtail spark run --snapshot`` (pure: sizes in, ranges
out; no Spark, no connection).

Each table is split into ranges of blocks (`plan_ranges`): about ``range_bytes`` of the
table's file each, and at least ``tasks`` of them for a table worth splitting, so every
executor core reads part of a large table. A range is read by one task with a TID range
scan (``ctid >= '(first,0)' AND ctid < '(stop,0)'``, PostgreSQL 14+); the first range of
a table has no lower bound and the last none above, so rows in blocks the table gained
after the plan are read too. A table that cannot be split (a server before 14, a
partitioned table, a row filter) is one range. `admit` then groups the ranges into the
load's batches, ``max_bytes`` of table at most each (a range larger than that is a batch
of its own), so one Spark job never holds a whole 100 GB table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RANGE_BYTES = 128 << 20  # a range of a large table: 128 MiB of its file
MIN_SPLIT_BYTES = 8 << 20  # a smaller table is one range (its tasks would cost more)
BATCH_BYTES = 8 << 30  # a batch of the load: 8 GiB of tables


@dataclass(frozen=True, slots=True)
class TableSize:
    """What the planner knows of one table: its place in the load, its size in blocks
    (`pgtail.catalog.block_ranges.table_blocks`) and whether it may be read in block ranges."""

    index: int
    blocks: int
    block_size: int = 8192
    splittable: bool = True

    @property
    def bytes(self) -> int:
        return self.blocks * self.block_size


@dataclass(frozen=True, slots=True)
class BlockRange:
    """Blocks [first, stop) of table ``table`` (None: no bound), the ``number``-th range
    of ``ranges`` of that table; ``bytes`` its planned size."""

    table: int
    first: int | None
    stop: int | None
    number: int
    ranges: int
    bytes: int


def ranges_of(table: TableSize, range_bytes: int, tasks: int) -> list[BlockRange]:
    """One table's ranges (see the module docstring)."""
    size = table.bytes
    if not table.splittable or table.blocks <= 1 or size < MIN_SPLIT_BYTES:
        return [BlockRange(table.index, None, None, 0, 1, size)]
    tasks = max(tasks, 1)
    count = max(-(-size // max(range_bytes, 1)), tasks)
    count = -(-count // tasks) * tasks  # a multiple of the cores: none waits on a last one
    count = min(count, table.blocks)
    per = -(-table.blocks // count)
    count = -(-table.blocks // per)  # no empty range at the end
    out = []
    for number in range(count):
        first = number * per
        stop = min(first + per, table.blocks)
        out.append(
            BlockRange(
                table.index,
                first or None,
                None if number == count - 1 else stop,
                number,
                count,
                (stop - first) * table.block_size,
            )
        )
    return out


def plan_ranges(
    tables: Sequence[TableSize], *, range_bytes: int = RANGE_BYTES, tasks: int = 1
) -> list[BlockRange]:
    """Every table's ranges, table after table."""
    return [r for table in tables for r in ranges_of(table, range_bytes, tasks)]


def admit(ranges: Sequence[BlockRange], max_bytes: int = BATCH_BYTES) -> list[list[BlockRange]]:
    """The ranges in order, grouped into batches of at most ``max_bytes`` (at least one
    range each)."""
    batches: list[list[BlockRange]] = []
    current: list[BlockRange] = []
    size = 0
    for block_range in ranges:
        if current and size + block_range.bytes > max_bytes:
            batches.append(current)
            current, size = [], 0
        current.append(block_range)
        size += block_range.bytes
    if current:
        batches.append(current)
    return batches
