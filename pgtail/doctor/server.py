"""The doctor's server room: the settings logical replication needs (wal_level, slots
and WAL senders to spare, not a standby) and the replication slots asked for or present,
with the WAL they hold."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail.doctor.findings import Check, human_bytes, literal
from pgtail.doctor.slot_causes import slot_cause

if TYPE_CHECKING:
    from pgtail.catalog.facts import (
        DoctorFacts,
        SlotInfo,
    )


def _int(settings: dict[str, str], name: str) -> int | None:
    value = settings.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def server_checks(facts: DoctorFacts) -> list[Check]:
    settings = facts.server.settings
    checks: list[Check] = []
    wal_level = settings.get("wal_level", "?")
    on_command_line = facts.server.wal_level_source == "command line"
    if wal_level == "logical":
        checks.append(Check("wal_level", "server", "wal_level", "ok", "wal_level is logical"))
    else:
        checks.append(
            Check(
                "wal_level",
                "server",
                "wal_level",
                "fail",
                f"wal_level is {wal_level!r}: logical decoding needs 'logical'"
                + (
                    ", and it is set on the server's command line (postgres -c wal_level=...),"
                    " which overrides ALTER SYSTEM and postgresql.conf"
                    if on_command_line
                    else ""
                ),
                "change -c wal_level to logical where the server is started (pg_ctl -o,"
                " its service unit, its container's command), then restart PostgreSQL"
                if on_command_line
                else "ALTER SYSTEM SET wal_level = logical; -- then restart PostgreSQL",
            )
        )
    for setting, used, what in (
        ("max_replication_slots", facts.server.slots_in_use, "slots"),
        ("max_wal_senders", facts.server.senders_in_use, "WAL senders"),
    ):
        limit = _int(settings, setting)
        if limit is None:
            continue
        fix = f"ALTER SYSTEM SET {setting} = {max(10, limit * 2)}; -- then restart PostgreSQL"
        if limit == 0:
            checks.append(
                Check(
                    setting,
                    "server",
                    setting,
                    "fail",
                    f"{setting} is 0: no replication is possible",
                    fix,
                )
            )
        elif used >= limit:
            checks.append(
                Check(
                    setting,
                    "server",
                    setting,
                    "fail",
                    f"all {limit} {what} are in use ({setting} = {limit})",
                    fix,
                )
            )
        elif used >= limit - 1:
            checks.append(
                Check(
                    setting,
                    "server",
                    setting,
                    "warn",
                    f"{used} of {limit} {what} in use; one left",
                    fix,
                )
            )
        else:
            checks.append(
                Check(setting, "server", setting, "ok", f"{used} of {limit} {what} in use")
            )
    if facts.server.in_recovery and facts.server.version_num < 160000:
        checks.append(
            Check(
                "standby",
                "server",
                "recovery",
                "fail",
                "this server is a standby; logical decoding on a standby needs PostgreSQL 16+",
                "connect to the primary",
            )
        )
    return checks


def slot_checks(facts: DoctorFacts, wal_warn_bytes: int | None = None) -> list[Check]:
    checks: list[Check] = []
    slots = {s.name: s for s in facts.slots.slots}
    for name in facts.requested_slots:
        if name not in slots:
            checks.append(
                Check(
                    "slot.exists",
                    "slot",
                    name,
                    "fail",
                    f"replication slot {name!r} does not exist",
                    f"SELECT pg_create_logical_replication_slot({literal(name)}, 'pgoutput');",
                )
            )
    wanted = [slots[n] for n in facts.requested_slots if n in slots] or (
        [] if facts.requested_slots else list(facts.slots.slots)
    )
    keep = _int(facts.server.settings, "max_slot_wal_keep_size")
    for slot in wanted:
        checks.extend(_slot_checks(slot, facts, keep, wal_warn_bytes))
    known_pubs = set(facts.all_publications)
    for sender in facts.walsenders:
        if sender.database != facts.role.database:
            continue
        for pub in sender.publications:
            if pub not in known_pubs:
                checks.append(
                    Check(
                        "slot.publication",
                        "slot",
                        sender.slot or f"walsender {sender.pid}",
                        "fail",
                        f"slot {sender.slot!r} (walsender PID {sender.pid}) streams publication "
                        f"{pub!r}, which does not exist",
                        "restart the consumer with a publication that exists "
                        "(pgtail publication list)",
                    )
                )
    return checks


def _restart_or_drop(name: str, drop: str, *, now: bool = False) -> str:
    # Not `pgtail stream --slot NAME`: it refuses to choose among several publications,
    # and the slot may be a `pgtail spark run`'s, whose checkpoint another reader would
    # break (what it confirms is gone for the pipeline). Only its own consumer may read it.
    return (
        f"restart the program that reads slot {name}{' now' if now else ''} (its pgtail"
        " stream with the same --publication, or its pgtail spark run with the same"
        f" --checkpoint; any other reader takes its changes away), or, if nothing reads it"
        f" any more: {drop}"
    )


def _slot_checks(
    slot: SlotInfo, facts: DoctorFacts, keep: int | None, wal_warn_bytes: int | None
) -> list[Check]:
    drop = f"SELECT pg_drop_replication_slot({literal(slot.name)});"
    if slot.invalidated:
        return [_invalidated_check(slot, drop)]
    checks = _wal_keep_checks(slot, keep, drop)
    # a slot asked for is one pgtail is about to stream: what the stream would refuse fails
    if slot.name in facts.requested_slots:
        checks.extend(_requested_slot_checks(slot, facts))
    checks.append(_activity_check(slot, facts, wal_warn_bytes, drop))
    return checks


def _invalidated_check(slot: SlotInfo, drop: str) -> Check:
    reason = slot.invalidation_reason or (
        "conflict with recovery" if slot.conflicting else "its WAL was removed"
    )
    return Check(
        "slot.invalidated",
        "slot",
        slot.name,
        "fail",
        f"slot {slot.name!r} is invalidated ({reason}); it can no longer be streamed",
        drop + " -- then create it again and resynchronise the consumer",
    )


def _wal_keep_checks(slot: SlotInfo, keep: int | None, drop: str) -> list[Check]:
    """A slot past, or near, max_slot_wal_keep_size."""
    checks: list[Check] = []
    subject = slot.name
    retained = slot.retained_bytes
    if slot.wal_status == "unreserved":
        checks.append(
            Check(
                "slot.wal_keep",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} holds {human_bytes(retained)}, past max_slot_wal_keep_size: "
                "it will be invalidated at the next checkpoint",
                _restart_or_drop(slot.name, drop, now=True),
            )
        )
    elif (
        keep is not None
        and keep > 0
        and slot.safe_wal_size is not None
        and (slot.safe_wal_size < keep // 5)
    ):
        checks.append(
            Check(
                "slot.wal_keep",
                "slot",
                subject,
                "warn",
                f"slot {slot.name!r} is near max_slot_wal_keep_size: "
                f"{human_bytes(slot.safe_wal_size)} left before it is invalidated",
                _restart_or_drop(slot.name, drop),
            )
        )
    return checks


def _requested_slot_checks(slot: SlotInfo, facts: DoctorFacts) -> list[Check]:
    """What the stream would refuse of a slot asked for: its type, plugin and database."""
    checks: list[Check] = []
    subject = slot.name
    if slot.slot_type != "logical":
        checks.append(
            Check(
                "slot.plugin",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} is a physical slot; pgtail streams logical pgoutput slots",
                f"SELECT pg_create_logical_replication_slot({literal(slot.name + '_pgoutput')}, "
                "'pgoutput');",
            )
        )
    elif slot.plugin != "pgoutput":
        checks.append(
            Check(
                "slot.plugin",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} uses plugin {slot.plugin!r}; pgtail streams pgoutput slots "
                "(a new slot starts from now: changes before it are not in it)",
                f"SELECT pg_create_logical_replication_slot({literal(slot.name + '_pgoutput')}, "
                "'pgoutput');",
            )
        )
    if slot.slot_type == "logical" and slot.database != facts.role.database:
        checks.append(
            Check(
                "slot.database",
                "slot",
                subject,
                "fail",
                f"slot {slot.name!r} belongs to database {slot.database!r}, not "
                f"{facts.role.database!r}: it can be streamed only while connected to "
                f"{slot.database!r}",
                f"connect with dbname={slot.database} (pgtail ... -d {slot.database})",
            )
        )
    return checks


def _activity_check(
    slot: SlotInfo, facts: DoctorFacts, wal_warn_bytes: int | None, drop: str
) -> Check:
    """Active, or inactive and holding how much WAL."""
    subject = slot.name
    retained = slot.retained_bytes
    max_wal = _int(facts.server.settings, "max_wal_size")
    if slot.wal_status is not None:
        extended = slot.wal_status == "extended"
    else:  # before PostgreSQL 13: compare with max_wal_size ourselves
        extended = retained is not None and max_wal is not None and retained > max_wal
    verdict = _verdict(slot, facts)
    if slot.active and verdict is None:
        return Check(
            "slot.activity",
            "slot",
            subject,
            "ok",
            f"active (PID {slot.active_pid}), {human_bytes(slot.lag_bytes)} behind",
        )
    elif slot.active and verdict is not None:
        return verdict
    elif extended and retained is not None:
        return Check(
            "slot.activity",
            "slot",
            subject,
            "warn",
            f"inactive slot {slot.name!r} holds {human_bytes(retained)} of WAL "
            f"({retained} bytes), past max_wal_size ({human_bytes(max_wal)}): WAL the "
            "server would otherwise have recycled piles up until it is read",
            _restart_or_drop(slot.name, drop),
        )
    elif retained is not None and wal_warn_bytes is not None and retained >= wal_warn_bytes:
        return Check(
            "slot.activity",
            "slot",
            subject,
            "warn",
            f"inactive slot {slot.name!r} holds {human_bytes(retained)} of WAL "
            f"({retained} bytes), past --wal-warn {human_bytes(wal_warn_bytes)}",
            _restart_or_drop(slot.name, drop),
        )
    elif verdict is not None:
        return verdict
    else:
        return Check(
            "slot.activity",
            "slot",
            subject,
            "ok",
            f"inactive, holds {human_bytes(retained)} of WAL",
        )


def _verdict(slot: SlotInfo, facts: DoctorFacts) -> Check | None:
    """The slot's state as `pgtail top` and `slot info` name it (`slot_causes`, one look),
    as the doctor's slot.activity check; None without the replication facts."""
    replication = facts.replication
    if replication is None:
        return None
    seen = next((s for s in replication.slots.slots if s.name == slot.name), None)
    if seen is None:
        return None
    cause = slot_cause(replication, seen)
    return Check("slot.activity", "slot", slot.name, cause.status, cause.summary, cause.fix)
