"""pgoutput messages -> change events a renderer can use without knowing the protocol.

- `pgtail.changes.events`: the event types (frozen slots dataclasses) and the encoder
  interface a renderer implements (`InsertEncoders`);
- `pgtail.changes.tables`: the relation cache's entries (column names, key columns,
  converters, the per-table row functions);
- `pgtail.changes.held`: holding a transaction until its commit, spilling a large one;
- `pgtail.changes.fastpath`: the renderer's fast path for rows that arrive as text (the
  encoder interface wired into the relation cache, the wire offsets, `EncodedRows`' lines);
- `pgtail.changes.assembler`: the `Assembler`, messages in, whole transactions out.

Pure: no psycopg2, no I/O. Types that are not built in are looked up by the caller and
handed down as data (`Assembler.user_types_wanted`, `Assembler.add_user_types`).
"""

from pgtail.changes.assembler import DEFAULT_SPILL_BYTES, NO_EVENTS, Assembler
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
from pgtail.changes.tables import Converter, unknown_type_oids

__all__ = [
    "DEFAULT_SPILL_BYTES",
    "Assembler",
    "Change",
    "Column",
    "CommitPrepared",
    "Converter",
    "EncodedRows",
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
