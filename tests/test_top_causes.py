"""Root causes of slots (`pgtail.doctor.slot_causes`), the top view model and its 80-column
rendering, the column fitting of `slot list` / `publication list`, and the change counter
of `top --publication`: pure, on constructed facts."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from rich.console import Console

from pgtail import doctor
from pgtail.catalog.facts import (
    DoctorFacts,
    OpenTransaction,
    ReplicationFacts,
    RoleFacts,
    SenderFacts,
    ServerFacts,
    SlotInfo,
    SlotListing,
    SlotStats,
    TransactionWait,
)
from pgtail.cli.printing import fitted_table
from pgtail.columns import fit_columns
from pgtail.doctor.slot_causes import SlotTrend, Watched, slot_cause, slot_trend
from pgtail.top.changes import ChangeCounter
from pgtail.top.model import build_view, version_notes
from pgtail.top.render import render
from tests import pgbytes

MB = 1024 * 1024
CURRENT = 100 * MB


def slot(**kw: Any) -> SlotInfo:
    base: dict[str, Any] = dict(
        name="s",
        plugin="pgoutput",
        slot_type="logical",
        database="shop",
        temporary=False,
        active=True,
        active_pid=42,
        two_phase=False,
        restart_lsn=CURRENT - 1000,
        confirmed_flush_lsn=CURRENT - 500,
        current_lsn=CURRENT,
        wal_status="reserved",
        safe_wal_size=None,
    )
    base.update(kw)
    return SlotInfo(**base)


def sender(**kw: Any) -> SenderFacts:
    base: dict[str, Any] = dict(
        pid=42,
        slot="s",
        application_name="app",
        client_addr="10.0.0.5/32",
        state="streaming",
        started_ago=60.0,
        sent_lsn=CURRENT,
        write_lsn=CURRENT - 500,
        flush_lsn=CURRENT - 500,
        replay_lsn=CURRENT - 500,
        write_lag=0.1,
        flush_lag=0.2,
        replay_lag=0.2,
        reply_ago=1.0,
    )
    base.update(kw)
    return SenderFacts(**base)


def stats(spill_bytes: int = 0) -> SlotStats:
    return SlotStats(1 if spill_bytes else 0, 1, spill_bytes, 0, 0, 0, 10, 1000)


def tx(**kw: Any) -> OpenTransaction:
    base: dict[str, Any] = dict(
        pid=77,
        database="shop",
        user="u",
        application_name="batch",
        state="idle in transaction",
        age_seconds=900.0,
        xid=1234,
        xmin_age=50,
    )
    base.update(kw)
    return OpenTransaction(**base)


def facts(
    *slots: SlotInfo,
    senders: tuple[SenderFacts, ...] = (),
    version: int = 150000,
    transactions: tuple[OpenTransaction, ...] = (),
    prepared: tuple[OpenTransaction, ...] = (),
    stats_by_slot: dict[str, SlotStats] | None = None,
    taken_at: float = 1000.0,
    current: int = CURRENT,
    changes: dict[str, int] | None = None,
    waits: tuple[TransactionWait, ...] = (),
    sees_all: bool = True,
) -> ReplicationFacts:
    optional = ("inactive_since",) if version >= 170000 else ()
    return ReplicationFacts(
        version_num=version,
        taken_at=taken_at,
        current_lsn=current,
        database="shop",
        settings={},
        slots=SlotListing(version, optional, slots),
        stats=stats_by_slot or {},
        senders=senders,
        transactions=transactions,
        prepared=prepared,
        database_changes=changes if changes is not None else {"shop": 10, "other": 10},
        waits=waits,
        role="me",
        sees_all=sees_all,
    )


def trend(**kw: Any) -> SlotTrend:
    base: dict[str, Any] = dict(
        seconds=2.0,
        wal_rate=MB,
        retained_rate=0.0,
        confirmed_rate=MB,
        spill_rate=0.0,
        stream_rate=0.0,
        database_change_rate=100.0,
        other_change_rate=0.0,
    )
    base.update(kw)
    return SlotTrend(**base)


def doctor_facts_with(replication: ReplicationFacts) -> DoctorFacts:
    return DoctorFacts(
        server=ServerFacts(150000, {"wal_level": "logical"}, 0, 0, False),
        role=RoleFacts("me", False, True, (), True, "shop"),
        requested_publications=(),
        publications=(),
        tables=(),
        publication_rows=(),
        requested_slots=(),
        slots=replication.slots,
        walsenders=(),
        replication=replication,
    )


# --------------------------------------------------------------------------- each cause


def test_invalidated() -> None:
    s = slot(active=False, active_pid=None, wal_status="lost")
    cause = slot_cause(facts(s), s)
    assert (cause.code, cause.status) == ("invalidated", "fail")
    assert "pg_drop_replication_slot('s')" in (cause.fix or "")


def test_about_to_be_invalidated() -> None:
    s = slot(active=False, active_pid=None, wal_status="unreserved")
    cause = slot_cause(facts(s), s)
    assert (cause.code, cause.status) == ("unreserved", "fail")
    assert "next checkpoint" in cause.summary


def test_forecast_of_invalidation_at_the_current_rate() -> None:
    s = slot(active=False, active_pid=None, safe_wal_size=100 * MB, restart_lsn=0)
    cause = slot_cause(facts(s), s, trend(wal_rate=MB))
    assert cause.code == "no_consumer" and cause.status == "warn"
    assert cause.invalidation_in == pytest.approx(100.0)
    assert "invalidates it in 100 s" in cause.summary
    # far away: no forecast
    far = slot_cause(facts(s), s, trend(wal_rate=1000.0))
    assert far.invalidation_in is None and "invalidates" not in far.summary


def test_no_consumer_since_when() -> None:
    since = datetime(2026, 1, 2, 3, 4, 5)
    s = slot(active=False, active_pid=None, restart_lsn=0, inactive_since=since)
    cause = slot_cause(facts(s, version=170000), s)
    assert cause.code == "no_consumer" and cause.status == "warn"
    assert "since 2026-01-02 03:04:05" in cause.summary
    old = slot_cause(facts(s, version=150000), replace(s, inactive_since=None))
    assert "PostgreSQL 17+" in old.summary


def test_server_side_slow_and_spilling() -> None:
    s = slot()
    behind = sender(sent_lsn=CURRENT - 10 * MB)
    cause = slot_cause(facts(s, senders=(behind,)), s)
    assert (cause.code, cause.status) == ("server_slow", "warn")
    spilled = facts(s, senders=(behind,), stats_by_slot={"s": stats(spill_bytes=50 * MB)})
    cause = slot_cause(spilled, s)
    assert cause.code == "spilling" and "--streaming" in (cause.fix or "")
    # spilled before but not in this interval: not the reason now
    assert slot_cause(spilled, s, trend(spill_rate=0.0)).code == "server_slow"


def test_pinned_by_an_open_or_prepared_transaction() -> None:
    s = slot(restart_lsn=CURRENT - 20 * MB)
    cause = slot_cause(facts(s, senders=(sender(),), transactions=(tx(),)), s)
    assert cause.code == "pinned" and "PID 77" in cause.summary
    assert "pg_terminate_backend(77)" in (cause.fix or "")
    prepared = tx(pid=None, prepared_gid="g1", state="prepared", age_seconds=5000.0)
    cause = slot_cause(facts(s, senders=(sender(),), prepared=(prepared,)), s)
    assert cause.code == "pinned" and "COMMIT PREPARED 'g1'" in (cause.fix or "")
    # a transaction that has not written (no xid) does not hold the restart position
    cause = slot_cause(facts(s, senders=(sender(),), transactions=(tx(xid=None),)), s)
    assert cause.code != "pinned"


def test_not_confirming_is_decided_by_time_not_bytes() -> None:
    s = slot(confirmed_flush_lsn=CURRENT - 30 * MB, restart_lsn=CURRENT - 30 * MB)
    # 30 MB sent beyond what it confirmed, but it replied a second ago and the server
    # measures no flush lag past the window: one look does not call it stuck
    fresh = facts(s, senders=(sender(flush_lsn=CURRENT - 30 * MB),))
    cause = slot_cause(fresh, s)
    assert cause.code == "ok" and "one look cannot tell" in cause.summary
    # 2 kB unconfirmed for 25 s (flush_lag, measured by the server): not confirming
    small = slot(confirmed_flush_lsn=CURRENT - 2000, restart_lsn=CURRENT - 2000)
    f = facts(small, senders=(sender(flush_lsn=CURRENT - 2000, flush_lag=25.0),))
    cause = slot_cause(f, small)
    assert (cause.code, cause.status) == ("not_confirming", "warn")
    assert (
        "PID 42 'app' from 10.0.0.5/32" in cause.summary
        and "waits 26 s for its flush" in cause.summary
    )
    assert "heartbeat" in (cause.fix or "")  # one look cannot tell an idle database apart
    # a consumer that never sent a flush position, connected 40 s ago
    never = facts(small, senders=(sender(flush_lsn=None, flush_lag=None, started_ago=40.0),))
    assert slot_cause(never, small).code == "not_confirming"
    # what a live view saw: the confirmed position stayed 21 s while more was sent
    quiet = facts(small, senders=(sender(flush_lag=None),))
    seen = Watched(seconds=30.0, unconfirmed_seconds=21.0)
    cause = slot_cause(quiet, small, trend(database_change_rate=50.0), seen)
    assert cause.code == "not_confirming" and "has not moved for 21 s" in cause.summary
    assert "heartbeat" not in (cause.fix or "")
    soon = slot_cause(quiet, small, trend(), Watched(seconds=30.0, unconfirmed_seconds=6.0))
    assert soon.code == "ok" and "not confirming past 20 s" in soon.summary
    idle = slot_cause(quiet, small, trend(database_change_rate=0.0, other_change_rate=100.0), seen)
    assert idle.code == "idle_database"
    assert "pg_logical_emit_message" in (idle.fix or "")
    # looks under 2 s apart: the change counters lag, so no idle database from them
    quick = trend(seconds=0.5, database_change_rate=0.0, other_change_rate=100.0)
    assert slot_cause(quiet, small, quick, seen).code == "not_confirming"


def test_a_slot_being_created_names_the_transaction_it_waits_for() -> None:
    creating = slot(confirmed_flush_lsn=None, restart_lsn=CURRENT - 400_000, active_pid=55)
    wait = TransactionWait(55, 900, 77, 90.0, "shop", "batch", "idle in transaction")
    cause = slot_cause(facts(creating, waits=(wait,)), creating)
    assert (cause.code, cause.status) == ("creating", "warn")
    assert "PID 77 (batch) in shop (xid 900, open 90 s" in cause.summary
    assert "behind" not in cause.summary  # a null position is not a number
    assert "pg_terminate_backend(77)" in (cause.fix or "")
    view = build_view(facts(creating, waits=(wait,)))
    assert view.slots[0].lag_seconds is None and creating.lag_bytes is None
    # a blocker hidden from the role: its xid, and the grant that shows it
    hidden = TransactionWait(55, 900, None, None, None, None, None)
    cause = slot_cause(facts(creating, waits=(hidden,), sees_all=False), creating)
    assert "xid 900" in cause.summary and "GRANT pg_monitor TO me" in (cause.fix or "")
    # a prepared transaction: its gid and COMMIT PREPARED
    prepared = tx(pid=None, prepared_gid="g1", state="prepared", xid=900)
    cause = slot_cause(facts(creating, waits=(hidden,), prepared=(prepared,)), creating)
    assert "'g1'" in cause.summary and "COMMIT PREPARED 'g1'" in (cause.fix or "")
    alone = slot_cause(facts(creating), creating)
    assert alone.code == "creating" and alone.status == "info"


def test_hidden_positions_decide_nothing() -> None:
    s = slot(confirmed_flush_lsn=CURRENT - 300 * MB, restart_lsn=CURRENT - 300 * MB)
    hidden = sender(
        application_name="",
        client_addr=None,
        state=None,
        started_ago=None,
        sent_lsn=None,
        write_lsn=None,
        flush_lsn=None,
        replay_lsn=None,
        write_lag=None,
        flush_lag=None,
        replay_lag=None,
        reply_ago=None,
    )
    f = facts(s, senders=(hidden,), sees_all=False)
    cause = slot_cause(f, s, trend(), Watched(seconds=60.0))
    assert (cause.code, cause.status) == ("hidden", "info")
    assert "not confirming" not in cause.summary and cause.fix == "GRANT pg_monitor TO me;"
    view = build_view(f)
    assert sum("GRANT pg_monitor TO me;" in n for n in view.notes) == 1
    assert view.slots[0].lag_seconds is None


def test_lag_in_time_only_from_observations() -> None:
    since = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    s = slot(active=False, active_pid=None, inactive_since=since)
    f = replace(facts(s, version=170000), taken_at=since.timestamp() + 23 * 60)
    row = build_view(f, facts(s, version=170000, taken_at=0.0, current=0)).slots[0]
    assert (row.lag_seconds, row.lag_at_least) == (23 * 60, True)  # a bound, not a rate
    assert render_text(build_view(f)).count("> 23 min") == 1
    old = slot(active=False, active_pid=None)
    row = build_view(facts(old), facts(old, taken_at=0.0, current=0)).slots[0]
    assert row.lag_seconds is None  # 13-16, one look: nothing observed
    seen = build_view(facts(old), watched={"s": Watched(120.0, 0.0, 120.0)}).slots[0]
    assert (seen.lag_seconds, seen.lag_at_least) == (120.0, True)


def render_text(view: Any, width: int = 120, height: int | None = None) -> str:
    return "\n".join(_lines(render(view, width, height), width))


def test_keeping_up() -> None:
    s = slot()
    cause = slot_cause(facts(s, senders=(sender(),)), s)
    assert (cause.code, cause.status) == ("ok", "ok")


def test_physical_slot_of_a_standby_that_keeps_up() -> None:
    s = slot(
        slot_type="physical",
        plugin=None,
        database=None,
        confirmed_flush_lsn=None,
        restart_lsn=CURRENT - 100,
    )
    assert slot_cause(facts(s, senders=(sender(),)), s).code == "ok"
    behind = replace(s, restart_lsn=CURRENT - 50 * MB)
    stuck = sender(flush_lag=40.0)
    assert slot_cause(facts(behind, senders=(stuck,)), behind).code == "not_confirming"


def test_trend_between_two_looks() -> None:
    a = slot(restart_lsn=10 * MB, confirmed_flush_lsn=10 * MB, current_lsn=20 * MB)
    b = replace(a, current_lsn=24 * MB, restart_lsn=11 * MB, confirmed_flush_lsn=12 * MB)
    before = facts(
        a,
        taken_at=100.0,
        current=20 * MB,
        changes={"shop": 5, "other": 0},
        stats_by_slot={"s": stats(0)},
    )
    now = facts(
        b,
        taken_at=102.0,
        current=24 * MB,
        changes={"shop": 5, "other": 300},
        stats_by_slot={"s": stats(4 * MB)},
    )
    t = slot_trend(before, now, "s")
    assert t is not None
    assert t.wal_rate == 2 * MB and t.confirmed_rate == MB
    assert t.retained_rate == 1.5 * MB  # 10 MB -> 13 MB retained in 2 s
    assert t.spill_rate == 2 * MB
    assert t.database_change_rate == 0 and t.other_change_rate == 150
    assert slot_trend(before, now, "nosuch") is None


def test_doctor_names_the_same_verdict_as_top() -> None:
    lagging = slot(name="lag", confirmed_flush_lsn=CURRENT - 30 * MB, restart_lsn=CURRENT - 30 * MB)
    gone = slot(name="gone", active=False, active_pid=None, restart_lsn=CURRENT - 336 * MB)
    replication = facts(lagging, gone, senders=(sender(slot="lag", flush_lag=45.0),))
    checks = [c for c in doctor.evaluate(doctor_facts_with(replication)) if c.section == "slot"]
    view = build_view(replication)
    assert [(c.id, c.subject, c.status, c.summary) for c in checks] == [
        ("slot.activity", r.slot.name, r.cause.status, r.cause.summary)
        for r in sorted(view.slots, key=lambda r: ["lag", "gone"].index(r.slot.name))
    ]
    assert checks[0].status == "warn" and "not confirming" in checks[0].summary
    assert checks[1].status == "warn" and "336.0 MB" in checks[1].summary  # never [ok]


# --------------------------------------------------------------------------- versions


def test_version_notes_say_what_needs_a_newer_server() -> None:
    twelve = " ".join(version_notes(120000))
    assert "13+" in twelve and "14+" in twelve and "17+" in twelve
    assert "pg_stat_replication_slots" not in " ".join(version_notes(150000))
    assert version_notes(180000) == []


# --------------------------------------------------------------------------- rendering


def _lines(renderable: Any, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text().splitlines()


def _view() -> Any:
    long_name = "a_rather_long_replication_slot_name_for_the_orders_service"
    rows = (
        slot(name=long_name, database="production_orders"),
        slot(name="gone", active=False, active_pid=None, restart_lsn=0),
    )
    before = facts(*rows, senders=(sender(slot=long_name),), taken_at=0.0, current=CURRENT - MB)
    now = facts(*rows, senders=(sender(slot=long_name),), transactions=(tx(),))
    return build_view(now, before)


@pytest.mark.parametrize("width", [80, 100, 160])
def test_top_fits_the_terminal(width: int) -> None:
    lines = _lines(render(_view(), width), width)
    assert max(len(line) for line in lines) <= width
    header = next(line for line in lines if line.startswith("slot"))
    cells = [c.strip() for c in header.split("┃")]
    assert cells[:1] == ["slot"] and "lag" in cells and "retained" in cells
    assert all(cells)  # no column of zero width
    text = "\n".join(lines)
    assert "a_rather_long" in text
    # the long name is cut (not dropped) only where the less important columns have gone
    assert ("…" in text) == (width == 80)
    assert "gone: no consumer" in text and "holding back:" in text
    if width == 160:  # the whole name, before the positions (less important) show
        assert "a_rather_long_replication_slot_name_for_the_orders_service │" in text
        assert "sent" not in cells


def test_fit_columns_never_gives_zero_width() -> None:
    headers = ["slot", "plugin", "database", "active", "lag", "retained", "wal_status"]
    rows = [["x" * 40, "pgoutput", "db" * 10, "yes (12345)", "12.5 MB", "1.2 GB", "extended"]]
    for width in (20, 40, 80, 120):
        fit = fit_columns(headers, rows, width, importance=[9, 1, 5, 8, 7, 6, 2], flex=(0, 2))
        assert all(w >= 1 for w in fit.widths)
        assert sum(fit.widths) + 2 * (len(fit.keep) - 1) <= max(width, fit.widths[0])
        assert fit.keep[0] == 0
    narrow = fit_columns(headers, rows, 40, importance=[9, 1, 5, 8, 7, 6, 2], flex=(0, 2))
    assert [headers[i] for i in narrow.keep][:2] == ["slot", "active"]  # plugin went first


def test_slot_and_publication_tables_at_80_columns() -> None:
    headers = [
        "slot",
        "plugin",
        "database",
        "active",
        "temp",
        "2pc",
        "confirmed_flush",
        "lag",
        "retained",
        "wal_status",
        "safe_wal_size",
        "inactive_since",
        "conflicting",
        "invalidation_reason",
        "failover",
        "lag_time",
        "xmin_age",
    ]
    row = [
        "orders_cdc_slot",
        "pgoutput",
        "production",
        "yes (4242)",
        "no",
        "no",
        "0/1A2B3C40",
        "12.5 MB",
        "1.2 GB",
        "extended",
        "-",
        "2026-11-26 15:00:00",
        "no",
        "-",
        "no",
        "3 s",
        "1234",
    ]
    importance = [100, 20, 70, 90, 10, 5, 30, 85, 84, 80, 50, 45, 40, 55, 1, 75, 60]
    lines = _lines(fitted_table(headers, [row], 80, importance=importance, fold=None), 80)
    assert max(len(line) for line in lines) <= 80
    cells = [c.strip() for c in lines[0].split("┃")]
    assert all(cells) and {"slot", "lag", "retained", "active"} <= set(cells)
    assert "12.5 MB" in lines[-1] and "1.2 GB" in lines[-1]
    pub = ["publication", "owner", "operations", "via_root", "tables", "objects"]
    objects = ", ".join(f"public.table_number_{i}" for i in range(12))
    prow = ["app_pub", "app_owner", "insert,update,delete,truncate", "no", "12", objects]
    lines = _lines(
        fitted_table(pub, [prow], 80, importance=[100, 40, 70, 30, 80, 90], flex=(0, 1)), 80
    )
    assert max(len(line) for line in lines) <= 80
    cells = [c.strip() for c in lines[0].split("┃")]
    assert cells[-1] == "objects"
    width = len(lines[0]) - lines[0].rindex("┃") - 2
    assert width >= 16  # the objects column is readable, not 3 cells wide
    assert "public.table_number_11" in "".join(line.split("│")[-1].strip() for line in lines)


# --------------------------------------------------------------------------- change rates


def test_change_counter_counts_per_table_and_op_and_the_largest_transactions() -> None:
    counter = ChangeCounter()
    messages = [
        pgbytes.begin(100, 0, 7),
        pgbytes.relation(16400, "public", "orders", [("id", 23, True)]),
        *[pgbytes.insert(16400, [b"1"]) for _ in range(3)],
        pgbytes.delete(16400, [b"1"]),
        pgbytes.commit(100, 110, 0),
        pgbytes.begin(200, 0, 8),
        pgbytes.insert(16400, [b"2"]),
        pgbytes.commit(200, 210, 0),
    ]
    activity = counter.count("pub", messages, 2.0)
    rates = {(r.table, r.op): (r.count, r.rate) for r in activity.rates}
    assert rates == {("public.orders", "insert"): (4, 2.0), ("public.orders", "delete"): (1, 0.5)}
    assert [(t.xid, t.changes) for t in activity.largest] == [(7, 4), (8, 1)]
    # the relation cache lasts across intervals
    later = counter.count(
        "pub",
        [pgbytes.begin(300, 0, 9), pgbytes.insert(16400, [b"3"]), pgbytes.commit(300, 310, 0)],
        1.0,
    )
    assert later.rates[0].table == "public.orders"


def test_names_with_terminal_escapes_are_shown_escaped() -> None:
    evil = "shop\x1b]0;owned\x07"
    s = slot(database=evil, active=False, active_pid=None)
    view = build_view(replace(facts(s), database=evil), transactions_free(evil))
    text = "\n".join(_lines(render(view, 160), 160))
    assert "\x1b" not in text and "\x07" not in text
    assert "shop\\u001b]0;owned\\u0007" in text


def transactions_free(database: str) -> ReplicationFacts:
    """An earlier look of the same slot (so the view has a trend)."""
    s = slot(database=database, active=False, active_pid=None)
    return replace(facts(s, taken_at=0.0), database=database)


# --------------------------------------------------------------------------- layout rules


def test_worst_first_and_nothing_cut_silently() -> None:
    fine = slot(name="a_fine")
    stuck = slot(
        name="z_stuck",
        active_pid=43,
        confirmed_flush_lsn=CURRENT - 2000,
        restart_lsn=CURRENT - 2000,
    )
    idle = [slot(name=f"idle_{i}", active=False, active_pid=None) for i in range(6)]
    now = facts(
        fine,
        stuck,
        *idle,
        senders=(
            sender(slot="a_fine"),
            sender(pid=43, slot="z_stuck", flush_lsn=CURRENT - 2000, flush_lag=40.0),
        ),
    )
    view = build_view(now)
    assert [r.slot.name for r in view.slots][:2] == ["z_stuck", "idle_0"]  # warn, then info
    assert view.slots[-1].slot.name == "a_fine"
    text = render_text(view, 80, 16).splitlines()
    assert len(text) <= 16
    assert "below: resize the terminal, or pgtail top --json" in text[-1]
    assert re.search(r"the causes of \d+ slots", text[-1]), text[-1]
    whole = render_text(view, 80)
    assert "below: resize" not in whole and "q quits" in whole
    once = "\n".join(_lines(render(view, 80, live=False), 80))
    assert "q quits" not in once
    # wrapped lines keep their indent: every line after a cause's first starts with spaces
    for line in whole.splitlines():
        if line.startswith("       "):
            continue  # a fix's continuation
        assert not line.startswith(" ") or line.startswith("  ")


def test_a_name_is_cut_only_after_the_less_important_columns() -> None:
    headers = ["slot", "active", "lag", "confirmed_flush", "xmin_age"]
    row = ["orders_to_warehouse_sync_slot_01x", "yes (1234)", "12.5 MB", "0/1A2B3C40", "1234"]
    importance = [100, 90, 85, 30, 60]
    cut = fit_columns(headers, [row], 60, importance=importance, flex=(0,))
    assert cut.widths[0] < len(row[0])  # without the rule: the name is cut
    fit = fit_columns(headers, [row], 60, importance=importance, flex=(0,), names_first=101)
    assert fit.widths[0] == len(row[0]) and [headers[i] for i in fit.keep] == [
        "slot",
        "active",
        "lag",
    ]


def test_singular_and_plural_of_changes() -> None:
    counter = ChangeCounter()
    messages = [
        pgbytes.begin(100, 0, 7),
        pgbytes.relation(16400, "public", "orders", [("id", 23, True)]),
        pgbytes.insert(16400, [b"1"]),
        pgbytes.commit(100, 110, 0),
    ]
    view = replace(build_view(facts(slot())), publication=counter.count("pub", messages, 2.0))
    text = render_text(view, 120)
    assert "xid 7: 1 change (" in text and "1 changes" not in text
