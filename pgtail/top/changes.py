"""Change rates per table and operation, and the largest transactions, from the pgoutput
messages `pgtail top --publication` reads from a temporary slot of its own.

Pure: raw pgoutput messages in (decoded with pgtail's `Decoder`), counts out. The slot is
read through the SQL interface, which returns committed transactions only: "largest" are
the largest committed in the interval; a transaction still open shows in the pins and,
when it spills, in the slot statistics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pgtail.pgoutput import (
    Begin,
    Commit,
    Decoder,
    Delete,
    Insert,
    Relation,
    TruncateMessage,
    Update,
)
from pgtail.sqlnames import quote_ident

LARGEST = 5  # how many of the largest transactions a view keeps


@dataclass(frozen=True, slots=True)
class TableRate:
    table: str  # schema-qualified, quoted as SQL would
    op: str  # insert, update, delete, truncate
    count: int
    rate: float  # per second over the interval

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table, "op": self.op, "count": self.count, "rate": self.rate}


@dataclass(frozen=True, slots=True)
class TransactionSize:
    xid: int
    changes: int
    bytes: int  # pgoutput bytes of its changes
    table: str  # the table with most of its changes

    def to_dict(self) -> dict[str, Any]:
        return {"xid": self.xid, "changes": self.changes, "bytes": self.bytes, "table": self.table}


@dataclass(frozen=True, slots=True)
class PublicationActivity:
    publication: str
    available: bool
    reason: str | None  # why there are no rates (no privilege, no free slot, no publication)
    seconds: float
    rates: tuple[TableRate, ...]  # busiest first
    largest: tuple[TransactionSize, ...]
    more_pending: bool = False  # the interval's read stopped at its limit

    def to_dict(self) -> dict[str, Any]:
        return {
            "publication": self.publication,
            "available": self.available,
            "reason": self.reason,
            "seconds": self.seconds,
            "rates": [r.to_dict() for r in self.rates],
            "largest_transactions": [t.to_dict() for t in self.largest],
            "more_pending": self.more_pending,
        }


def unavailable(publication: str, reason: str) -> PublicationActivity:
    return PublicationActivity(publication, False, reason, 0.0, (), ())


class ChangeCounter:
    """Counts what one interval's messages change; keeps the relation cache across
    intervals (a Relation message comes once per table and session)."""

    def __init__(self) -> None:
        self._decoder = Decoder(1)
        self._names: dict[int, str] = {}

    def _name(self, relation_id: int) -> str:
        return self._names.get(relation_id, f"oid {relation_id}")

    def count(
        self, publication: str, messages: Iterable[bytes], seconds: float, *, more: bool = False
    ) -> PublicationActivity:
        ops: Counter[tuple[str, str]] = Counter()
        largest: list[TransactionSize] = []
        xid = 0
        tx_changes = 0
        tx_bytes = 0
        tx_tables: Counter[str] = Counter()
        for data in messages:
            message = self._decoder.decode(data)
            if isinstance(message, Relation):
                self._names[message.relation_id] = (
                    f"{quote_ident(message.namespace or 'pg_catalog')}.{quote_ident(message.name)}"
                )
            elif isinstance(message, Begin):
                xid, tx_changes, tx_bytes = message.xid, 0, 0
                tx_tables.clear()
            elif isinstance(message, Insert | Update | Delete):
                table = self._name(message.relation_id)
                ops[(table, type(message).__name__.lower())] += 1
                tx_changes += 1
                tx_bytes += len(data)
                tx_tables[table] += 1
            elif isinstance(message, TruncateMessage):
                for relation_id in message.relation_ids:
                    ops[(self._name(relation_id), "truncate")] += 1
                tx_changes += 1
            elif isinstance(message, Commit) and tx_changes:
                top = tx_tables.most_common(1)[0][0] if tx_tables else "-"
                largest.append(TransactionSize(xid, tx_changes, tx_bytes, top))
                largest = sorted(largest, key=lambda t: -t.changes)[:LARGEST]
        per = seconds if seconds > 0 else 1.0
        rates = tuple(
            TableRate(table, op, count, count / per)
            for (table, op), count in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        return PublicationActivity(publication, True, None, seconds, rates, tuple(largest), more)
