"""The view model of one interval of `pgtail top`: per slot what it is, who reads it,
how far behind (bytes and time), what it retains and how that moves, its statistics and
its root cause; the server's WAL rate; what pins the oldest position; what the server
version cannot show. `TopView.to_dict` is the JSON document printed per interval.
Pure: facts in, data out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pgtail.doctor.findings import STATUS_ORDER
from pgtail.doctor.slot_causes import (
    SlotCause,
    SlotTrend,
    Watched,
    human_seconds,
    slot_cause,
    slot_trend,
)
from pgtail.lsn import format_lsn
from pgtail.sqlnames import quote_ident

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        OpenTransaction,
        ReplicationFacts,
        SenderFacts,
        SlotInfo,
        SlotStats,
    )
    from pgtail.top.changes import PublicationActivity


@dataclass(frozen=True, slots=True)
class SlotRow:
    slot: SlotInfo
    sender: SenderFacts | None
    stats: SlotStats | None
    trend: SlotTrend | None
    cause: SlotCause
    # observed only: the walsender's flush_lag; or at least how long it was seen
    # unconfirmed, or without consumer (inactive_since, 17+, or this view's looks)
    lag_seconds: float | None
    lag_at_least: bool  # lag_seconds is a lower bound ("> 5 min"), not a measure
    watched: Watched | None = None

    @property
    def consumer(self) -> str:
        """Who reads it: 'PID app@addr', '-' when nobody."""
        if self.sender is None:
            return f"{self.slot.active_pid}" if self.slot.active_pid else "-"
        who = self.sender.application_name or "?"
        if self.sender.client_addr:  # a host address without its /32 or /128
            who += "@" + self.sender.client_addr.removesuffix("/32").removesuffix("/128")
        return f"{self.sender.pid} {who}"

    def to_dict(self, optional: tuple[str, ...]) -> dict[str, Any]:
        return {
            **self.slot.to_dict(optional),
            "consumer": self.sender.to_dict() if self.sender else None,
            "stats": self.stats.to_dict() if self.stats else None,
            "trend": self.trend.to_dict() if self.trend else None,
            "lag_seconds": self.lag_seconds,
            "lag_seconds_at_least": self.lag_at_least,
            "watched": self.watched.to_dict() if self.watched else None,
            "cause": self.cause.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class Pin:
    """Something that holds back the oldest WAL position or the xmin horizon."""

    kind: str  # slot, transaction, prepared, slot_xmin
    subject: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "subject": self.subject, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class TopView:
    facts: ReplicationFacts
    wal_rate: float | None  # bytes/s between the last two looks
    slots: tuple[SlotRow, ...]
    pins: tuple[Pin, ...]
    notes: tuple[str, ...]  # what this server version cannot show, and why a part is off
    publication: PublicationActivity | None = None

    @property
    def major(self) -> int:
        return self.facts.version_num // 10000

    def to_dict(self) -> dict[str, Any]:
        facts = self.facts
        optional = facts.slots.optional_columns
        return {
            "taken_at": datetime.fromtimestamp(facts.taken_at, UTC).isoformat(),
            "server_version": facts.version_num,
            "database": facts.database,
            "current_lsn": format_lsn(facts.current_lsn),
            "wal_rate_bytes_per_second": self.wal_rate,
            "slots": [row.to_dict(optional) for row in self.slots],
            "pins": [p.to_dict() for p in self.pins],
            "transactions": [t.to_dict() for t in facts.transactions],
            "prepared": [t.to_dict() for t in facts.prepared],
            "notes": list(self.notes),
            "publication": self.publication.to_dict() if self.publication else None,
        }


def version_notes(version: int) -> list[str]:
    """What a column needs where this server lacks it."""
    notes = []
    if version < 130000:
        notes.append("wal_status and safe_wal_size (invalidation forecast) need PostgreSQL 13+")
    if version < 140000:
        notes.append("spill/stream statistics (pg_stat_replication_slots) need PostgreSQL 14+")
    elif version < 150000:
        notes.append("decoded totals (total_txns, total_bytes) need PostgreSQL 15+")
    if version < 140000:
        notes.append("two_phase (shown as -) needs PostgreSQL 14+")
    if version < 170000:
        notes.append("inactive_since (how long a slot has had no consumer) needs PostgreSQL 17+")
    return notes


def privilege_note(facts: ReplicationFacts) -> str | None:
    """One line naming what a role without pg_monitor cannot see, and the grant."""
    if facts.sees_all:
        return None
    return (
        f"role {facts.role} lacks pg_monitor: other roles' open transactions, their "
        "consumers' sent/flush positions and lags are hidden, and no cause is drawn from "
        f"them; to see them: GRANT pg_monitor TO {quote_ident(facts.role)};"
    )


def lag_seconds(
    facts: ReplicationFacts, slot: SlotInfo, sender: SenderFacts | None, watched: Watched | None
) -> tuple[float | None, bool]:
    """How far behind in time, from observations only: (seconds, is it a lower bound)."""
    if slot.lag_bytes is None:
        return None, False
    if sender is not None and not sender.hidden:
        if sender.flush_lag is not None:
            return sender.flush_lag, False
        sent, confirmed = sender.sent_lsn, slot.confirmed_flush_lsn
        if sent is not None and confirmed is not None and confirmed >= sent:
            return 0.0, False  # it confirmed all it was sent
        if watched is not None and watched.unconfirmed_seconds >= 1:
            return float(math.floor(watched.unconfirmed_seconds)), True
        return None, False
    if slot.lag_bytes == 0:
        return 0.0, False
    if slot.active:
        return None, False
    if slot.inactive_since is not None:
        return float(math.floor(max(0.0, facts.taken_at - slot.inactive_since.timestamp()))), True
    if watched is not None and (watched.inactive_seconds or 0) >= 1:
        return float(math.floor(watched.inactive_seconds or 0)), True
    return None, False


def severity_order(rows: list[SlotRow]) -> list[SlotRow]:
    """Worst first (fail, warn, info, ok), then the most WAL retained, then by name."""
    return sorted(
        rows,
        key=lambda r: (
            -STATUS_ORDER[r.cause.status],
            -(r.slot.retained_bytes or 0),
            r.slot.name,
        ),
    )


def _describe(tx: OpenTransaction) -> str:
    age = human_seconds(tx.age_seconds)
    if tx.prepared_gid is not None:
        return f"prepared {age} ago in {tx.database} (xid {tx.xid})"
    held = f"xid {tx.xid}" if tx.xid is not None else "no xid"
    if tx.xmin_age is not None:
        held += f", xmin age {tx.xmin_age}"
    return f"open {age} in {tx.database}, {tx.state} ({held})"


def pins(facts: ReplicationFacts) -> list[Pin]:
    """The oldest restart position's slot, the oldest writing and prepared transactions,
    and the slot with the oldest xmin / catalog_xmin."""
    found: list[Pin] = []
    held = [s for s in facts.slots.slots if s.retained_bytes is not None]
    if held:
        oldest = max(held, key=lambda s: s.retained_bytes or 0)
        found.append(
            Pin("slot", oldest.name, f"oldest restart_lsn: retains {_bytes(oldest.retained_bytes)}")
        )
    writers = [t for t in facts.transactions if t.xid is not None]
    if writers:
        tx = writers[0]
        found.append(Pin("transaction", f"PID {tx.pid}", _describe(tx)))
    elif facts.transactions:
        tx = facts.transactions[0]
        found.append(Pin("transaction", f"PID {tx.pid}", _describe(tx)))
    if facts.prepared:
        tx = facts.prepared[0]
        found.append(Pin("prepared", str(tx.prepared_gid), _describe(tx)))
    for attr in ("xmin_age", "catalog_xmin_age"):
        aged = [s for s in facts.slots.slots if getattr(s, attr) is not None]
        if aged:
            slot = max(aged, key=lambda s: getattr(s, attr) or 0)
            column = attr.removesuffix("_age")
            found.append(
                Pin("slot_xmin", slot.name, f"{column} age {getattr(slot, attr)} transactions")
            )
    return found


def _bytes(value: int | None) -> str:
    from pgtail.doctor.findings import human_bytes

    return human_bytes(value)


def build_view(
    facts: ReplicationFacts,
    before: ReplicationFacts | None = None,
    publication: PublicationActivity | None = None,
    notes: tuple[str, ...] = (),
    hide: tuple[str, ...] = (),
    watched: dict[str, Watched] | None = None,
) -> TopView:
    """The view of ``facts``, worst slot first; with the previous look, rates and trends
    too, and with ``watched`` (`pgtail.top.history`) what a live view saw of each slot.
    Slots named in ``hide`` (top's own temporary slot) are left out."""
    wal_rate: float | None = None
    if before is not None and facts.taken_at > before.taken_at:
        wal_rate = max(
            0.0, (facts.current_lsn - before.current_lsn) / (facts.taken_at - before.taken_at)
        )
    rows = []
    for slot in facts.slots.slots:
        if slot.name in hide:
            continue
        trend = slot_trend(before, facts, slot.name) if before is not None else None
        sender = facts.sender_of(slot)
        seen = watched.get(slot.name) if watched is not None else None
        lag, at_least = lag_seconds(facts, slot, sender, seen)
        rows.append(
            SlotRow(
                slot=slot,
                sender=sender,
                stats=facts.stats.get(slot.name),
                trend=trend,
                cause=slot_cause(facts, slot, trend, seen),
                lag_seconds=lag,
                lag_at_least=at_least,
                watched=seen,
            )
        )
    hidden = privilege_note(facts)
    return TopView(
        facts=facts,
        wal_rate=wal_rate,
        slots=tuple(severity_order(rows)),
        pins=tuple(pins(facts)),
        notes=(*notes, *([hidden] if hidden else []), *version_notes(facts.version_num)),
        publication=publication,
    )
