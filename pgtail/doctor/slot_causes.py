"""Why a slot holds WAL or is behind, named: one root cause per slot with its fix.

Pure: `ReplicationFacts` in (one look; two looks give a `SlotTrend`), a `SlotCause` out.
Shared by `pgtail top` (one line per slot), `slot info`, `slot list` (the order) and the
doctor (its slot.activity check): one verdict per slot everywhere.
The rules, first match wins; a state comes only from facts that exist (a null position is
never read as a number, a value hidden from the role decides nothing):
  invalidated            the slot lost its WAL or conflicted: drop and re-create it
  about to be            wal_status unreserved (gone at the next checkpoint)
  no consumer            inactive (since inactive_since, 17+, or since this view saw it)
  being created          no confirmed position yet: names the transaction it waits for
  server side slow       the walsender's sent position is behind the WAL: decoding is
                         slow; spilling large transactions to disk (suggest streaming)
  pinned                 confirmed far ahead of restart_lsn while a transaction that has
                         written (or a prepared one) is open: it holds the restart position
  hidden                 the walsender's positions are hidden from this role (pg_monitor)
  idle database          not confirming (below) while its database had no changes and
                         others wrote: nothing to confirm (suggest a heartbeat)
  not confirming         what was sent stayed unconfirmed for CONFIRM_WINDOW or longer, by
                         time whatever the bytes: the server's flush_lag, the time since
                         the consumer's last reply, or what a live view saw (`Watched`)
  keeping up
A forecast of invalidation (safe_wal_size at the rate retained WAL grows) is added to any
of them and makes it at least a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pgtail.doctor.findings import Check, Status, human_bytes, literal
from pgtail.sqlnames import quote_ident

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        OpenTransaction,
        ReplicationFacts,
        SenderFacts,
        SlotInfo,
    )

BEHIND_BYTES = 1024 * 1024  # a slot this far behind (or a gap this wide) is "behind"
FORECAST_SECONDS = 3600.0  # warn when invalidation is nearer than this
# what was sent and stays unconfirmed this long is "not confirming" (two feedback
# intervals of a consumer at the usual 10 s, whatever the byte rate)
CONFIRM_WINDOW = 20.0
NO_CONSUMER_WARN_BYTES = 64 * 1024 * 1024  # a slot without consumer holding this warns
# a transaction younger than this is not named as what pins a restart position: the
# server moves restart positions only at its running-transactions records (every 15 s),
# so a slot's restart_lsn normally trails by that much anyway
PIN_SECONDS = 15.0
TREND_SECONDS = 2.0  # two looks this far apart, at least, tell an idle database


@dataclass(frozen=True, slots=True)
class Watched:
    """What a live view saw of one slot over its looks (`pgtail.top.history`)."""

    seconds: float  # how long it has watched the slot
    # how long the confirmed position has stayed while more was sent beyond it (0: it
    # moved at the last look, or nothing was sent beyond it)
    unconfirmed_seconds: float = 0.0
    inactive_seconds: float | None = None  # seen without a consumer this long (at least)

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class SlotTrend:
    """How a slot and the server moved between two looks (per second)."""

    seconds: float
    wal_rate: float  # server WAL bytes/s
    retained_rate: float  # growth of the slot's retained WAL, bytes/s (negative: freed)
    confirmed_rate: float  # confirmed_flush_lsn advance, bytes/s
    spill_rate: float | None  # spill_bytes/s (None before PostgreSQL 14)
    stream_rate: float | None
    database_change_rate: float | None  # rows changed/s in the slot's database
    other_change_rate: float  # rows changed/s in every other database

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class SlotCause:
    slot: str
    code: str  # invalidated, unreserved, no_consumer, creating, server_slow, spilling,
    #            pinned, hidden, idle_database, not_confirming, ok
    status: Status
    summary: str
    fix: str | None = None
    invalidation_in: float | None = None  # forecast, seconds

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def to_check(self) -> Check:
        return Check("slot.cause", "slot", self.slot, self.status, self.summary, self.fix)


def human_seconds(seconds: float | None) -> str:
    """45 -> '45 s', 600 -> '10 min', 7200 -> '2.0 h', 3 days -> '3.0 d'."""
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def slot_trend(before: ReplicationFacts, now: ReplicationFacts, name: str) -> SlotTrend | None:
    """The slot's movement between two looks; None if it is missing from either."""
    old = next((s for s in before.slots.slots if s.name == name), None)
    new = next((s for s in now.slots.slots if s.name == name), None)
    seconds = now.taken_at - before.taken_at
    if old is None or new is None or seconds <= 0:
        return None

    def rate(a: int | None, b: int | None) -> float:
        return (b - a) / seconds if a is not None and b is not None else 0.0

    def stat_rate(field: str) -> float | None:
        a, b = before.stats.get(name), now.stats.get(name)
        if a is None or b is None:
            return None
        return max(0.0, float(getattr(b, field) - getattr(a, field)) / seconds)

    db = new.database
    db_rate: float | None = None
    if db is not None and db in before.database_changes and db in now.database_changes:
        db_rate = max(0.0, (now.database_changes[db] - before.database_changes[db]) / seconds)
    others = sum(
        max(0, count - before.database_changes.get(other, count))
        for other, count in now.database_changes.items()
        if other != db
    )
    return SlotTrend(
        seconds=seconds,
        wal_rate=max(0.0, (now.current_lsn - before.current_lsn) / seconds),
        retained_rate=rate(old.retained_bytes, new.retained_bytes),
        confirmed_rate=rate(old.confirmed_flush_lsn, new.confirmed_flush_lsn),
        spill_rate=stat_rate("spill_bytes"),
        stream_rate=stat_rate("stream_bytes"),
        database_change_rate=db_rate,
        other_change_rate=others / seconds,
    )


def _who(sender: SenderFacts | None, slot: SlotInfo) -> str:
    if sender is None:
        return f"PID {slot.active_pid}" if slot.active_pid else "a consumer"
    parts = [f"PID {sender.pid}"]
    if sender.application_name:
        parts.append(repr(sender.application_name))
    if sender.client_addr:
        parts.append(f"from {sender.client_addr}")
    return " ".join(parts)


def _pinning(facts: ReplicationFacts) -> OpenTransaction | None:
    """The oldest transaction that has written (an xid) or is prepared: it holds every
    logical slot's restart position at or before its start."""
    writers = [
        t
        for t in (*facts.prepared, *facts.transactions)
        if t.xid is not None and (t.age_seconds or 0.0) >= PIN_SECONDS
    ]
    return max(writers, key=lambda t: t.age_seconds or 0.0, default=None)


def _pin_fix(tx: OpenTransaction) -> str:
    if tx.prepared_gid is not None:
        gid = literal(tx.prepared_gid)
        return f"COMMIT PREPARED {gid}; -- or ROLLBACK PREPARED {gid}; (in {tx.database})"
    return f"end it (COMMIT or ROLLBACK in that session), or SELECT pg_terminate_backend({tx.pid});"


def _pin_text(tx: OpenTransaction) -> str:
    age = human_seconds(tx.age_seconds)
    if tx.prepared_gid is not None:
        return f"prepared transaction {tx.prepared_gid!r} (xid {tx.xid}, prepared {age} ago)"
    who = f" ({tx.application_name})" if tx.application_name else ""
    return f"transaction of PID {tx.pid}{who} in {tx.database} (xid {tx.xid}, open {age})"


def _forecast(slot: SlotInfo, facts: ReplicationFacts, trend: SlotTrend | None) -> float | None:
    """Seconds until max_slot_wal_keep_size invalidates the slot at the rate its retained
    WAL grows now (the server's WAL rate for an inactive slot); None: not bounded, not
    growing, or not known."""
    if slot.safe_wal_size is None or trend is None:
        return None
    growth = trend.retained_rate if slot.active else trend.wal_rate
    if growth <= 0:
        return None
    return max(0.0, slot.safe_wal_size / growth)


def slot_cause(
    facts: ReplicationFacts,
    slot: SlotInfo,
    trend: SlotTrend | None = None,
    watched: Watched | None = None,
) -> SlotCause:
    """The one reason ``slot`` holds WAL or is behind, and its fix."""
    cause = _cause(facts, slot, trend, watched)
    eta = _forecast(slot, facts, trend)
    if eta is None or eta >= FORECAST_SECONDS or cause.code in ("invalidated", "unreserved"):
        return cause
    status: Status = "warn" if cause.status in ("ok", "info") else cause.status
    return SlotCause(
        cause.slot,
        cause.code,
        status,
        f"{cause.summary}; at this rate max_slot_wal_keep_size invalidates it in "
        f"{human_seconds(eta)} ({human_bytes(slot.safe_wal_size)} left)",
        cause.fix,
        eta,
    )


def _cause(
    facts: ReplicationFacts, slot: SlotInfo, trend: SlotTrend | None, watched: Watched | None
) -> SlotCause:
    name = slot.name
    drop = f"SELECT pg_drop_replication_slot({literal(name)});"
    if slot.invalidated:
        reason = slot.invalidation_reason or (
            "conflict with recovery" if slot.conflicting else "its WAL was removed"
        )
        return SlotCause(
            name,
            "invalidated",
            "fail",
            f"invalidated ({reason}): it can no longer be read",
            drop + " -- then create it again and resynchronise the consumer",
        )
    retained = human_bytes(slot.retained_bytes)
    if slot.wal_status == "unreserved":
        return SlotCause(
            name,
            "unreserved",
            "fail",
            f"holds {retained}, past max_slot_wal_keep_size: invalidated at the next checkpoint",
            f"start its consumer now, or {drop}",
        )
    if not slot.active:
        return _no_consumer(facts, slot, watched, drop)
    if slot.slot_type == "logical" and slot.confirmed_flush_lsn is None:
        return _creating(facts, slot)
    return _active_cause(facts, slot, trend, watched)


def _no_consumer(
    facts: ReplicationFacts, slot: SlotInfo, watched: Watched | None, drop: str
) -> SlotCause:
    if slot.inactive_since is not None:
        since = f" since {slot.inactive_since.isoformat(sep=' ', timespec='seconds')}"
    elif watched is not None and (watched.inactive_seconds or 0) >= 1:
        since = f" for at least {human_seconds(watched.inactive_seconds)} (seen by this view)"
    elif facts.version_num < 170000:
        since = " (since when: PostgreSQL 17+ shows inactive_since)"
    else:
        since = ""
    retained = slot.retained_bytes or 0
    max_wal = _setting(facts, "max_wal_size")
    extended = slot.wal_status == "extended" or (
        slot.wal_status is None and max_wal is not None and retained > max_wal
    )
    past = " (past max_wal_size)" if extended else ""
    return SlotCause(
        slot.name,
        "no_consumer",
        "warn" if extended or retained >= NO_CONSUMER_WARN_BYTES else "info",
        f"no consumer{since}; holds {human_bytes(slot.retained_bytes)} of WAL{past}",
        f"start its consumer (it resumes from the slot), or {drop}",
    )


def _setting(facts: ReplicationFacts, name: str) -> int | None:
    try:
        return int(facts.settings[name])
    except (KeyError, ValueError):
        return None


def _creating(facts: ReplicationFacts, slot: SlotInfo) -> SlotCause:
    """A logical slot without a confirmed position: its creation has not finished, most
    often because it waits for the transactions running when it started to end."""
    creator = f"PID {slot.active_pid}" if slot.active_pid else "its creator"
    wait = facts.wait_of(slot.active_pid)
    if wait is None:
        return SlotCause(
            slot.name,
            "creating",
            "info",
            f"being created ({creator}): no confirmed position yet, it waits for a "
            "consistent point in the WAL",
        )
    prepared = next((t for t in facts.prepared if t.xid == wait.xid), None)
    if prepared is not None:
        what, fix = _pin_text(prepared), _pin_fix(prepared)
    elif wait.blocker_pid is not None and wait.blocker_age_seconds is not None:
        who = f" ({wait.blocker_application_name})" if wait.blocker_application_name else ""
        state = f", {wait.blocker_state}" if wait.blocker_state else ""
        what = (
            f"the transaction of PID {wait.blocker_pid}{who} in {wait.blocker_database} "
            f"(xid {wait.xid}, open {human_seconds(wait.blocker_age_seconds)}{state})"
        )
        fix = (
            "end it (COMMIT or ROLLBACK in that session), or SELECT "
            f"pg_terminate_backend({wait.blocker_pid});"
        )
    else:
        pid = f"PID {wait.blocker_pid}, " if wait.blocker_pid is not None else ""
        what = f"the transaction xid {wait.xid} ({pid}its age is hidden from this role)"
        fix = (
            f"GRANT pg_monitor TO {quote_ident(facts.role or 'your_role')}; shows its session; "
            f"end that transaction (find it: SELECT pid FROM pg_locks WHERE "
            f"locktype = 'transactionid' AND transactionid = '{wait.xid}' AND granted;)"
        )
    return SlotCause(
        slot.name,
        "creating",
        "warn",
        f"being created ({creator}), waiting for {what} to end: no confirmed position yet",
        fix,
    )


def _unconfirmed(
    sender: SenderFacts | None, sent: int | None, confirmed: int, watched: Watched | None
) -> tuple[float, str] | None:
    """How long the consumer has left what it was sent unconfirmed, and how that is known
    (the longest of what the server measured and what a live view saw); None when nothing
    beyond its confirmed position was sent, or nothing tells."""
    if sent is None or sent <= confirmed:
        return None
    found: list[tuple[float, str]] = []
    if watched is not None and watched.unconfirmed_seconds > 0:
        t = watched.unconfirmed_seconds
        found.append((t, f"its confirmed position has not moved for {human_seconds(t)}"))
    if sender is not None:
        if sender.flush_lag is not None:  # measured at its last reply; no reply since
            t = sender.flush_lag + (sender.reply_ago or 0.0)
            found.append((t, f"what it was sent waits {human_seconds(t)} for its flush"))
        if sender.reply_ago is not None:
            found.append((sender.reply_ago, f"no reply for {human_seconds(sender.reply_ago)}"))
        elif sender.started_ago is not None:
            t = sender.started_ago
            found.append((t, f"no reply in the {human_seconds(t)} since it connected"))
        if sender.flush_lsn is None and sender.started_ago is not None:
            t = sender.started_ago
            found.append((t, f"no flush confirmed in the {human_seconds(t)} since it connected"))
    return max(found, default=None, key=lambda f: f[0])


def _active_cause(
    facts: ReplicationFacts, slot: SlotInfo, trend: SlotTrend | None, watched: Watched | None
) -> SlotCause:
    name = slot.name
    sender = facts.sender_of(slot)
    hidden = sender is not None and sender.hidden
    who = _who(None if hidden else sender, slot)
    current = facts.current_lsn or slot.current_lsn
    sent = sender.sent_lsn if sender is not None else None
    # a physical slot has no confirmed position: its standby's flush moves restart_lsn
    confirmed = slot.confirmed_flush_lsn if slot.slot_type == "logical" else slot.restart_lsn
    if confirmed is None:
        return SlotCause(name, "ok", "info", f"consumer {who}: no position reserved yet")
    stats = facts.stats.get(name)
    spilling = (
        stats is not None
        and stats.spill_bytes > 0
        and (trend is None or (trend.spill_rate or 0) > 0)
    )
    if sent is not None and current - sent >= BEHIND_BYTES:
        behind = human_bytes(current - sent)
        if spilling and stats is not None:
            return SlotCause(
                name,
                "spilling",
                "warn",
                f"server side slow: decoding is {behind} behind the WAL and spills large "
                f"transactions to disk ({human_bytes(stats.spill_bytes)} in "
                f"{stats.spill_txns} transactions so far)",
                "stream large transactions as they happen: pgtail stream --streaming "
                "(protocol 2+, PostgreSQL 14+); or raise logical_decoding_work_mem",
            )
        return SlotCause(
            name,
            "server_slow",
            "warn",
            f"server side slow: the walsender ({who}) has sent up to {behind} behind the "
            "WAL position: decoding is slower than WAL is written",
            "look for large transactions and bulk loads (pgtail top --publication) and the "
            "walsender's CPU; stream large transactions (pgtail stream --streaming)",
        )
    restart = slot.restart_lsn or confirmed
    pin = _pinning(facts)
    if pin is not None and confirmed - restart >= BEHIND_BYTES:
        return SlotCause(
            name,
            "pinned",
            "warn",
            f"the {_pin_text(pin)} pins its restart position: "
            f"{human_bytes(confirmed - restart)} of WAL kept behind what was confirmed",
            _pin_fix(pin),
        )
    if hidden:
        return SlotCause(
            name,
            "hidden",
            "info",
            f"consumer {who} connected; what it was sent and confirmed, and its lags, are "
            "hidden from this role: no verdict on whether it keeps up",
            f"GRANT pg_monitor TO {quote_ident(facts.role or 'your_role')};",
        )
    if sender is None:  # read through the SQL functions (pg_logical_slot_get_changes)
        return SlotCause(
            name,
            "ok",
            "ok",
            f"read right now by {who} through the SQL functions, "
            f"{human_bytes(max(0, current - confirmed))} behind the WAL",
        )
    lag = max(0, (sent if sent is not None else current) - confirmed)
    stalled = _unconfirmed(sender, sent, confirmed, watched)
    if stalled is not None and stalled[0] >= CONFIRM_WINDOW:
        return _not_confirming(slot, trend, who, lag, stalled[1])
    summary = f"keeping up: consumer {who}, {human_bytes(lag)} behind what was sent"
    if lag > 0 and watched is None:
        summary += "; one look cannot tell whether it confirms: watch it (pgtail top)"
    elif stalled is not None and lag > 0 and stalled[0] >= CONFIRM_WINDOW / 4:
        summary += f" ({stalled[1]}; not confirming past {human_seconds(CONFIRM_WINDOW)})"
    return SlotCause(name, "ok", "ok", summary)


def _not_confirming(
    slot: SlotInfo, trend: SlotTrend | None, who: str, lag: int, how: str
) -> SlotCause:
    name = slot.name
    # the change counters (pg_stat_database) lag up to a second (the statistics are sent
    # at most every 500 ms, before PostgreSQL 15 through the collector): a shorter
    # interval cannot tell an idle database
    if trend is not None and trend.seconds < TREND_SECONDS:
        trend = None
    if trend is not None and trend.database_change_rate == 0 and trend.wal_rate > 0:
        return SlotCause(
            name,
            "idle_database",
            "warn",
            f"its database {slot.database} has no changes while the server writes "
            f"{human_bytes(int(trend.wal_rate))}/s elsewhere: the consumer ({who}) has "
            f"nothing to confirm, so the slot stays {human_bytes(lag)} behind ({how})",
            f"send a heartbeat in {slot.database} every minute: SELECT "
            "pg_logical_emit_message(false, 'heartbeat', now()::text); or let the "
            "consumer confirm keepalive positions (pgtail stream does)",
        )
    idle_hint = (
        ""
        if trend is not None
        else "; if its database has no writes, send a heartbeat there: SELECT "
        "pg_logical_emit_message(false, 'heartbeat', now()::text);"
    )
    return SlotCause(
        name,
        "not_confirming",
        "warn",
        f"consumer connected ({who}) but not confirming: {how}, with {human_bytes(lag)} "
        "sent beyond its confirmed position",
        "the client is slow or stuck: it must confirm (flush feedback) what it has "
        "processed; check its logs and progress" + idle_hint,
    )


def slot_causes(facts: ReplicationFacts, before: ReplicationFacts | None = None) -> list[SlotCause]:
    """A cause for every slot, with trends when an earlier look is given."""
    return [
        slot_cause(facts, s, slot_trend(before, facts, s.name) if before else None)
        for s in facts.slots.slots
    ]
