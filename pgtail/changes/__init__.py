"""pgoutput messages -> change events a renderer can use without knowing the protocol.

- `pgtail.changes.events`: the event types (frozen slots dataclasses) and the encoder
  interface a renderer implements (`InsertEncoders`);
- `pgtail.changes.tables`: the relation cache's entries (column names, key columns,
  converters, the per-table row functions);
- `pgtail.changes.held`: holding a transaction until its commit, spilling a large one;
- `pgtail.changes.fastpath`: one row payload -> a line or an event for every lane
  (`row_event`), the small-transaction lane (`QuickLane`), the renderer's encoders
  (`EncoderFactory`) wired into the relation cache, the wire offsets;
- `pgtail.changes.assembler`: the `Assembler`, messages in, whole transactions out;
- `pgtail.changes.ddl`: `DdlTracker`, the `TableDdl` SQL replay writes before a table's
  first change or its changed definition;
- `pgtail.changes.schema_events`: `SchemaTracker`, a table's changed definition as a
  `SchemaChange` event between the assembler's events;
- `pgtail.changes.copy_rows`: `TableRows`, a snapshot's COPY rows as `SnapshotRows`
  events through the converters streamed rows use.

Pure: no psycopg2, no I/O. Types that are not built in are looked up by the caller and
handed down as data (`Assembler.user_types_wanted`, `Assembler.add_user_types`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail._lazy import lazy_names

# the package's names, imported when first used (`pgtail._lazy`)
if TYPE_CHECKING:
    from pgtail.changes.assembler import DEFAULT_SPILL_BYTES, Assembler
    from pgtail.changes.events import (
        LARGE_VALUE,
        Change,
        Column,
        CommitPrepared,
        EncodedRows,
        Event,
        InsertEncoder,
        InsertEncoders,
        LargeEncoder,
        Message,
        OldKind,
        OldNewEncoder,
        Op,
        ReplicaIdentity,
        RollbackPrepared,
        RowsEncoder,
        SchemaChange,
        SnapshotBegin,
        SnapshotEnd,
        SnapshotRows,
        Table,
        TableCopy,
        Transaction,
        Truncate,
        TxBegin,
        TxCommit,
    )
    from pgtail.changes.fastpath import NO_EVENTS, EncoderFactory
    from pgtail.changes.tables import Converter, unknown_type_oids

__all__ = [
    "DEFAULT_SPILL_BYTES",
    "Assembler",
    "Change",
    "Column",
    "CommitPrepared",
    "Converter",
    "EncodedRows",
    "EncoderFactory",
    "Event",
    "InsertEncoder",
    "InsertEncoders",
    "LARGE_VALUE",
    "LargeEncoder",
    "Message",
    "NO_EVENTS",
    "OldKind",
    "OldNewEncoder",
    "Op",
    "ReplicaIdentity",
    "RollbackPrepared",
    "RowsEncoder",
    "SchemaChange",
    "SnapshotBegin",
    "SnapshotEnd",
    "SnapshotRows",
    "Table",
    "TableCopy",
    "Transaction",
    "Truncate",
    "TxBegin",
    "TxCommit",
    "unknown_type_oids",
]

if not TYPE_CHECKING:  # mypy reads the imports above, and flags a name not there
    __getattr__, __dir__ = lazy_names(__name__)
