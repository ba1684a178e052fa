"""``pgtail slot ...``: list, create, drop, advance, inspect and peek replication slots.

Thin: each command calls one `pgtail.catalog` function and prints the result, a
rich table on a terminal, aligned plain text when piped, JSON with ``--json``.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import click

from pgtail.cli import cli
from pgtail.cli.completers import complete_logical_slot, complete_slot
from pgtail.cli.output_options import (
    event_filter,
    filter_options,
    max_changes_option,
    output_options,
    render_settings,
)
from pgtail.cli.printing import print_fields, print_json, print_table, stdout_is_terminal
from pgtail.cli.shared_options import (
    LSN,
    PEEK_PUBLICATION_HELP,
    SLOT_NAME,
    connection_options,
    json_option,
    publication_option,
)
from pgtail.doctor.findings import human_bytes
from pgtail.lsn import format_lsn

if TYPE_CHECKING:
    from pgtail.catalog import PeekedChange, SlotInfo
    from pgtail.changes import Event
    from pgtail.filters import EventFilter
    from pgtail.top.model import SlotRow, TopView


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _lsn(value: int | None) -> str:
    return format_lsn(value) if value is not None else "-"


# --------------------------------------------------------------------------- commands


@cli.group("slot")
def slot() -> None:
    """Manage logical replication slots.

    A slot remembers how far a consumer has read and keeps the WAL it still needs;
    an abandoned slot makes the server keep WAL forever. pgtail creates pgoutput
    slots.

    \b
    Examples:
      pgtail slot list
      pgtail slot create app
      pgtail slot peek app --publication app_pub --max-changes 10
      pgtail slot drop app --force
    """


def _active(slot_info: SlotInfo) -> str:
    if slot_info.active:
        return f"yes ({slot_info.active_pid})" if slot_info.active_pid else "yes"
    return "no"


def _slot_row(s: SlotInfo, optional: Sequence[str]) -> list[str]:
    row = [
        s.name,
        s.plugin or "-",
        s.slot_type,
        s.database or "-",
        _active(s),
        _yes(s.temporary),
        _yes(s.two_phase),
        _lsn(s.confirmed_flush_lsn),
        _lsn(s.restart_lsn),
        human_bytes(s.lag_bytes),
        human_bytes(s.retained_bytes),
        s.wal_status or "-",
        human_bytes(s.safe_wal_size) if s.safe_wal_size is not None else "-",
    ]
    for column in optional:
        value = getattr(s, column)
        if isinstance(value, bool):
            row.append(_yes(value))
        elif value is None:
            row.append("-")
        elif hasattr(value, "isoformat"):
            row.append(value.isoformat(sep=" ", timespec="seconds"))
        else:
            row.append(str(value))
    return row


_HEADERS = [
    "slot",
    "plugin",
    "type",
    "database",
    "active",
    "temporary",
    "two_phase",
    "confirmed_flush",
    "restart_lsn",
    "lag",
    "retained",
    "wal_status",
    "safe_wal_size",
]


# `slot list` leaves out what `slot info` and --json show (type, restart_lsn, synced)
_LIST_HEADERS = {
    "slot": "slot",
    "plugin": "plugin",
    "database": "database",
    "active": "active",
    "temporary": "temp",
    "two_phase": "2pc",
    "confirmed_flush": "confirmed_flush",
    "lag": "lag",
    "retained": "retained",
    "wal_status": "wal_status",
    "safe_wal_size": "safe_wal_size",
    "inactive_since": "inactive_since",
    "conflicting": "conflicting",
    "invalidation_reason": "invalidation_reason",
    "failover": "failover",
    "lag_time": "lag_time",
    "catalog_xmin_age": "xmin_age",
    "state": "state",
}

# on a narrow terminal the least important columns give way first (higher stays longer)
_LIST_IMPORTANCE = {
    "slot": 100,
    "active": 90,
    "state": 88,
    "lag": 85,
    "retained": 84,
    "wal_status": 80,
    "lag_time": 75,
    "database": 70,
    "catalog_xmin_age": 60,
    "invalidation_reason": 55,
    "safe_wal_size": 50,
    "inactive_since": 45,
    "conflicting": 40,
    "confirmed_flush": 30,
    "plugin": 20,
    "temporary": 10,
    "two_phase": 5,
    "failover": 1,
}


# a slot or database name is cut only once every other column (ranked below this) has gone
_NAMES_BEFORE = 101


def _seconds(value: float | None, at_least: bool = False) -> str:
    """A time, or '> 5 min' for a lower bound, '-' when nothing observed tells."""
    from pgtail.doctor.slot_causes import human_seconds

    return "-" if value is None else ("> " if at_least else "") + human_seconds(value)


def _print_listing(view: TopView) -> None:
    optional = view.facts.slots.optional_columns
    full = [*_HEADERS, *optional, "lag_time", "catalog_xmin_age", "state"]
    keep = [i for i, h in enumerate(full) if h in _LIST_HEADERS]
    rows = []
    for r in view.slots:
        s = r.slot
        row = _slot_row(s, optional)
        if s.slot_type != "logical":
            row[1] = s.slot_type  # plugin column: "physical"
        row += [
            _seconds(r.lag_seconds, r.lag_at_least),
            _count(s.catalog_xmin_age),
            r.cause.code.replace("_", " "),
        ]
        rows.append([row[i] for i in keep])
    if not rows:
        click.echo("no replication slots", err=True)
        return
    print_table(
        [_LIST_HEADERS[full[i]] for i in keep],
        rows,
        importance=[_LIST_IMPORTANCE[full[i]] for i in keep],
        flex=(0, 2),
        fold=None,
        names_first=_NAMES_BEFORE,
    )
    for note in view.notes:
        if "two_phase" in note or "pg_monitor" in note or "inactive_since" in note:
            click.echo(f"note: {note}", err=True)


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


@slot.command("list")
@connection_options
@json_option()
def slot_list(dsn: str | None, as_json: bool) -> None:
    """List every replication slot on the server, worst first.

    Shows plugin, database, activity (with the walsender PID), its state (the
    cause `pgtail top` and `slot info` name), temporary, two-phase, the confirmed
    position and its lag behind the current WAL (in bytes, and in time where
    observed: > marks a lower bound), the WAL each slot retains, wal_status /
    safe_wal_size (13+), the age of its catalog_xmin, and on newer servers
    inactive_since, conflicting, invalidation_reason and failover. On a narrow
    terminal the least important columns give way before a name is cut. `slot
    info` and --json add the slot type, restart_lsn, xmin, the consumer's
    positions, spill/stream statistics (14+) and the cause with its fix.

    \b
    Examples:
      pgtail slot list
      pgtail slot list --json | jq '.[] | select(.active | not) | .slot_name'
    """
    from pgtail import catalog
    from pgtail.top.model import build_view

    view = build_view(catalog.read_replication(dsn))
    if as_json:
        optional = view.facts.slots.optional_columns
        print_json([row.to_dict(optional) for row in view.slots])
    else:
        _print_listing(view)


@slot.command("info")
@click.argument("name", type=SLOT_NAME, shell_complete=complete_slot)
@connection_options
@json_option()
def slot_info(name: str, dsn: str | None, as_json: bool) -> None:
    """Show everything about one slot, and why it holds WAL or is behind.

    Besides what `slot list` shows: xmin / catalog_xmin and their age, who
    consumes it (PID, application_name, client address) and the positions it
    reported (sent, write, flush, replay, with the lag in time), spill and stream
    statistics (pg_stat_replication_slots, PostgreSQL 14+), and its root cause
    with the fix: no consumer, consumer not confirming, server side slow or
    spilling, pinned by an old or prepared transaction, invalidated or about to be.

    \b
    Example:
      pgtail slot info app
    """
    from pgtail import catalog
    from pgtail.top.model import build_view

    view = build_view(catalog.read_replication(dsn))
    found = [row for row in view.slots if row.slot.name == name]
    if not found:
        raise catalog.slot_missing_error(name)
    row = found[0]
    optional = view.facts.slots.optional_columns
    if as_json:
        print_json(row.to_dict(optional))
        return
    s = row.slot
    pairs = list(zip([*_HEADERS, *optional], _slot_row(s, optional), strict=True))
    pairs.insert(8, ("current_wal", _lsn(s.current_lsn)))
    pairs += _activity_pairs(row, view.facts.version_num)
    width = shutil.get_terminal_size().columns if stdout_is_terminal() else None
    print_fields(pairs[1:], title=f"slot {s.name}", width=width)
    for note in view.notes:
        if ("two_phase" in note and s.two_phase is None) or "pg_monitor" in note:
            click.echo(f"note: {note}", err=True)


def _activity_pairs(row: SlotRow, version: int) -> list[tuple[str, str]]:
    """`slot info`'s lines beyond the slot's own columns."""
    s, sender, stats = row.slot, row.sender, row.stats
    pairs = [
        ("xmin", f"{_count(s.xmin)} (age {_count(s.xmin_age)})" if s.xmin else "-"),
        (
            "catalog_xmin",
            f"{_count(s.catalog_xmin)} (age {_count(s.catalog_xmin_age)})"
            if s.catalog_xmin
            else "-",
        ),
        ("lag_time", _seconds(row.lag_seconds, row.lag_at_least)),
        ("consumer", row.consumer),
    ]
    if sender is not None:
        pairs += [
            ("sent_lsn", _lsn(sender.sent_lsn)),
            ("write_lsn", _lsn(sender.write_lsn)),
            ("flush_lsn", _lsn(sender.flush_lsn)),
            ("replay_lsn", _lsn(sender.replay_lsn)),
            ("last_reply", _seconds(sender.reply_ago) + " ago" if sender.reply_ago else "-"),
        ]
    if stats is not None:
        pairs += [
            ("spilled", f"{human_bytes(stats.spill_bytes)} in {stats.spill_txns} transactions"),
            ("streamed", f"{human_bytes(stats.stream_bytes)} in {stats.stream_txns} transactions"),
        ]
        if stats.total_bytes is not None:
            pairs.append(
                ("decoded", f"{human_bytes(stats.total_bytes)} in {stats.total_txns} transactions")
            )
    elif version < 140000:
        pairs.append(("spilled", "needs PostgreSQL 14+ (pg_stat_replication_slots)"))
    pairs.append(("cause", row.cause.summary))
    if row.cause.fix:
        pairs.append(("fix", row.cause.fix))
    return pairs


@slot.command("create")
@click.argument("name", type=SLOT_NAME)
@connection_options
@click.option(
    "--temporary",
    is_flag=True,
    help="Temporary slot: dropped as soon as this command disconnects, so it only proves "
    "that a slot can be created (`pgtail stream` without --slot uses its own temporary slot).",
)
@click.option(
    "--two-phase", is_flag=True, help="Decode prepared transactions at PREPARE time (two_phase)."
)
@click.option(
    "--if-not-exists",
    is_flag=True,
    help="Succeed if a pgoutput slot of that name already exists in this database.",
)
def slot_create(
    name: str, temporary: bool, two_phase: bool, if_not_exists: bool, dsn: str | None
) -> None:
    """Create a logical replication slot using pgoutput.

    The slot is created in the database you connect to, and from that moment
    keeps all WAL its consumer has not confirmed: drop slots you no longer use.
    Slot names may use lower case letters, digits and underscores.

    \b
    Examples:
      pgtail slot create app
      pgtail slot create app postgresql://me@db/shop --if-not-exists
      pgtail slot create app -h db.example.com -U me -d shop
    """
    from pgtail import catalog

    result = catalog.create_slot(
        dsn,
        name,
        temporary=temporary,
        two_phase=two_phase,
        if_not_exists=if_not_exists,
        log=lambda line: click.echo(line, err=True),
    )
    if result.created:
        click.echo(f"created replication slot {name} (pgoutput) at {_lsn(result.lsn)}")
        if temporary:
            click.echo(
                "note: a temporary slot lives only as long as the session that created it; "
                "it was dropped when this command disconnected (`pgtail stream` without --slot "
                "streams through a temporary slot of its own)",
                err=True,
            )
    else:
        click.echo(f"replication slot {name} already exists")


@slot.command("drop")
@click.argument("name", type=SLOT_NAME, shell_complete=complete_slot)
@connection_options
@click.option("--if-exists", is_flag=True, help="Succeed if there is no such slot.")
@click.option(
    "--force", is_flag=True, help="Drop an active slot: terminate the walsender using it first."
)
def slot_drop(name: str, if_exists: bool, force: bool, dsn: str | None) -> None:
    """Drop a replication slot, releasing the WAL it holds.

    An active slot (a consumer is streaming it) is refused unless --force, which
    terminates that walsender with pg_terminate_backend, waits until the slot is
    inactive, then drops it.

    \b
    Examples:
      pgtail slot drop app
      pgtail slot drop app --force
    """
    from pgtail import catalog

    result = catalog.drop_slot(dsn, name, if_exists=if_exists, force=force)
    if result.terminated_pid is not None:
        click.echo(f"terminated walsender PID {result.terminated_pid} that was using slot {name}")
    if result.dropped:
        click.echo(f"dropped replication slot {name}")
    else:
        click.echo(f"replication slot {name} does not exist; nothing to do")


@slot.command("advance")
@click.argument("name", type=SLOT_NAME, shell_complete=complete_logical_slot)
@click.argument("lsn", type=LSN)
@connection_options
def slot_advance(name: str, lsn: int, dsn: str | None) -> None:
    """Move a slot forward to LSN, skipping (discarding) the changes before it.

    Uses pg_replication_slot_advance. A slot never moves backwards; a target
    beyond the current WAL position stops at the current position.

    \b
    Example:
      pgtail slot advance app 0/1A2B3C40
    """
    from pgtail import catalog

    result = catalog.advance_slot(dsn, name, lsn)
    click.echo(
        f"advanced replication slot {name} from {_lsn(result.previous_lsn)} to {_lsn(result.lsn)}"
    )
    if result.lsn < result.requested_lsn:
        click.echo(
            f"note: {_lsn(result.requested_lsn)} is beyond the WAL flushed so far; "
            f"the slot stopped at {_lsn(result.lsn)}",
            err=True,
        )


@slot.command("peek")
@click.argument("name", type=SLOT_NAME, shell_complete=complete_logical_slot)
@publication_option(PEEK_PUBLICATION_HELP)
@max_changes_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Deprecated: the same as --max-changes.",
)
@filter_options
@output_options
@connection_options
def slot_peek(name: str, publications: tuple[str, ...], dsn: str | None, **opts: Any) -> None:
    """Show a slot's pending changes without consuming them.

    Reads through the SQL interface (pg_logical_slot_peek_binary_changes), so the
    slot stays where it is, and renders with the same renderers and options as
    `stream`; --max-changes counts changes (rows, truncates, messages) as `stream`
    does. The slot must not be in use by a stream.

    Two defaults differ from `stream`'s, on purpose: a peek consumes nothing, so it
    shows all that is pending. It shows logical decoding messages without
    --messages (hide them with --ops insert,update,delete,truncate), and without
    --publication it decodes through every publication of the database, where
    `stream` refuses to choose (what a stream confirms is gone); name
    --publication to see what a stream through it would get.

    \b
    Examples:
      pgtail slot peek app --publication app_pub --max-changes 20
      pgtail slot peek app --format json | jq -c '{op, table}'
    """
    from pgtail.render import make_renderer

    if opts["limit"] is not None:
        click.echo("pgtail: warning: --limit is deprecated; use --max-changes", err=True)
        if opts["max_changes"] is None:
            opts["max_changes"] = opts["limit"]
    fmt, render_options = render_settings(opts, stdout_is_terminal())
    flt = event_filter(opts)
    max_changes: int | None = opts["max_changes"]
    rows = _peek_rows(dsn, name, publications, max_changes, flt)
    sys.stdout.flush()
    out = sys.stdout.buffer
    if fmt == "raw":
        shown, more = _print_raw(rows, out, max_changes)
    else:
        renderer = make_renderer(fmt, out, render_options)
        try:
            shown, more = _render_peeked(dsn, rows, renderer.render, max_changes, flt)
        finally:
            renderer.close()
            out.flush()
    if not rows:
        click.echo(f"no pending changes in slot {name}", err=True)
    elif not shown and fmt != "raw" and not flt.is_noop:
        click.echo(f"no pending changes in slot {name} pass the filters", err=True)
    elif more:
        click.echo(
            f"note: stopped after {shown} change{'' if shown == 1 else 's'} (--max-changes);"
            " more are pending",
            err=True,
        )


# pgoutput messages that are changes, as --max-changes counts them: Insert, Update,
# Delete, Truncate, logical decoding Message
_CHANGE_TYPES = frozenset(b"IUDTM")


def _peek_rows(
    dsn: str | None,
    name: str,
    publications: tuple[str, ...],
    max_changes: int | None,
    flt: EventFilter,
) -> list[PeekedChange]:
    """The pending messages that hold the first ``max_changes`` changes and one more, if
    there is one (all of them without ``max_changes``).

    The server can only stop after a number of messages (finishing the transaction it
    is in), so ask for more messages until they hold enough changes or the slot has no
    more; peeking never moves the slot, so each ask starts from the beginning again.
    """
    from pgtail import catalog

    if max_changes is None:
        return catalog.peek_changes(dsn, name, publications)[1]
    limit = 4 * max_changes + 16  # a small transaction: Begin, (Relation,) change, Commit
    while True:
        rows = catalog.peek_changes(dsn, name, publications, limit=limit)[1]
        if len(rows) < limit:  # the server ran out of pending changes
            return rows
        if flt.is_noop:
            count = sum(1 for r in rows if r.data[:1] and r.data[0] in _CHANGE_TYPES)
        else:
            count = _render_peeked(dsn, rows, _ignore, None, flt)[0]
        if count > max_changes:
            return rows
        limit *= 4


def _ignore(_event: Event) -> None:
    pass


def _render_peeked(
    dsn: str | None,
    rows: Sequence[PeekedChange],
    render: Callable[[Event], None],
    max_changes: int | None,
    flt: EventFilter,
) -> tuple[int, bool]:
    """Assemble, filter and render ``rows``, stopping after ``max_changes`` changes.

    Returns how many changes it rendered and whether ``rows`` hold more."""
    from pgtail.stream.peek import peek_events

    return peek_events(dsn, rows, render, max_changes, flt)


def _print_raw(
    rows: Sequence[PeekedChange], out: BinaryIO, max_changes: int | None
) -> tuple[int, bool]:
    """``--format raw``: the protocol trace of the peeked messages, up to ``max_changes``
    changes (the filters do not apply: raw shows the protocol as it is)."""
    from pgtail.render.raw import RawRenderer
    from pgtail.stream.peek import peek_raw

    renderer = RawRenderer(out)
    try:
        return peek_raw(rows, renderer.render_message, max_changes)
    finally:
        renderer.close()
        out.flush()
