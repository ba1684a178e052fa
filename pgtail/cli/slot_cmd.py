"""``pgtail slot ...``: list, create, drop, advance, inspect and peek replication slots.

Thin: each command calls one `pgtail.catalog` function and prints the result, a
rich table on a terminal, aligned plain text when piped, JSON with ``--json``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
import orjson

from pgtail.catalog import SlotInfo, SlotListing
from pgtail.cli import cli, dsn_option
from pgtail.cli.options import (
    LSN,
    PEEK_PUBLICATION_HELP,
    SLOT_NAME,
    connection_options,
    json_option,
    publication_option,
)
from pgtail.doctor import human_bytes
from pgtail.lsn import format_lsn

# --------------------------------------------------------------------------- output helpers
# (shared by the publication and doctor commands)


def stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def print_json(value: Any) -> None:
    sys.stdout.flush()
    out = sys.stdout.buffer
    out.write(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS) + b"\n")
    out.flush()


def print_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, title: str | None = None
) -> None:
    """A rich table on a terminal; aligned columns without decoration when piped."""
    if stdout_is_terminal():
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
        for i, header in enumerate(headers):
            last = i == len(headers) - 1
            table.add_column(header, overflow="fold" if last else "ellipsis", no_wrap=not last)
        for row in rows:
            table.add_row(*(Text(cell) for cell in row))  # names are data, not rich markup
        Console().print(table)
        return
    if title:
        click.echo(title)
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for line in [list(headers), *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def print_fields(pairs: Sequence[tuple[str, str]], *, title: str | None = None) -> None:
    """Key/value lines (``info``/``show``)."""
    if title:
        click.echo(title)
    width = max((len(k) for k, _ in pairs), default=0)
    for key, value in pairs:
        click.echo(f"  {key.ljust(width)}  {value}")


def _yes(value: bool | None) -> str:
    return "" if value is None else ("yes" if value else "no")


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
      pgtail slot peek app --publication app_pub --limit 10
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
}


def _print_listing(listing: SlotListing) -> None:
    full = _HEADERS + list(listing.optional_columns)
    keep = [i for i, h in enumerate(full) if h in _LIST_HEADERS]
    rows = []
    for s in listing.slots:
        row = _slot_row(s, listing.optional_columns)
        if s.slot_type != "logical":
            row[1] = s.slot_type  # plugin column: "physical"
        rows.append([row[i] for i in keep])
    if not rows:
        click.echo("no replication slots", err=True)
        return
    print_table([_LIST_HEADERS[full[i]] for i in keep], rows)


@slot.command("list")
@connection_options
@json_option()
def slot_list(dsn: str | None, as_json: bool) -> None:
    """List every replication slot on the server.

    Shows plugin, database, activity (with the walsender PID), temporary,
    two-phase, the confirmed position and its lag behind the current WAL, the
    WAL each slot retains, wal_status / safe_wal_size, and on newer servers
    inactive_since, conflicting, invalidation_reason and failover. `slot info`
    and --json add the slot type, restart_lsn and the current WAL position.

    \b
    Examples:
      pgtail slot list
      pgtail slot list --json | jq '.[] | select(.active | not) | .slot_name'
    """
    from pgtail import catalog

    listing = catalog.list_slots(dsn)
    if as_json:
        print_json(listing.to_list())
    else:
        _print_listing(listing)


@slot.command("info")
@click.argument("name", type=SLOT_NAME)
@connection_options
@json_option()
def slot_info(name: str, dsn: str | None, as_json: bool) -> None:
    """Show everything about one slot.

    \b
    Example:
      pgtail slot info app
    """
    from pgtail import catalog

    listing = catalog.get_slot(dsn, name)
    data = listing.to_list()[0]
    if as_json:
        print_json(data)
        return
    s = listing.slots[0]
    pairs = [
        (h, v)
        for h, v in zip(
            _HEADERS + list(listing.optional_columns),
            _slot_row(s, listing.optional_columns),
            strict=True,
        )
    ]
    pairs[0] = ("slot", s.name)
    pairs.insert(8, ("current_wal", _lsn(s.current_lsn)))
    print_fields(pairs[1:], title=f"slot {s.name}")


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
        dsn, name, temporary=temporary, two_phase=two_phase, if_not_exists=if_not_exists
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
@click.argument("name", type=SLOT_NAME)
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
@click.argument("name", type=SLOT_NAME)
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
@click.argument("name", type=SLOT_NAME)
@publication_option(PEEK_PUBLICATION_HELP)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Stop after about N messages (the server finishes the transaction).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "table", "sql"]),
    default=None,
    help="Output format (default: table on a terminal, json otherwise).",
)
@dsn_option
def slot_peek(
    name: str,
    publications: tuple[str, ...],
    limit: int | None,
    fmt: str | None,
    dsn: str | None,
) -> None:
    """Show a slot's pending changes without consuming them.

    Reads through the SQL interface (pg_logical_slot_peek_binary_changes), so the
    slot stays where it is, and renders with the same renderers as `stream`.
    The slot must not be in use by a stream.

    \b
    Examples:
      pgtail slot peek app --publication app_pub --limit 20
      pgtail slot peek app --format json | jq -c '{op, table}'
    """
    from pgtail import catalog
    from pgtail.changes import Assembler
    from pgtail.render import RenderOptions, make_renderer, terminal_style

    if fmt is None:
        fmt = "table" if stdout_is_terminal() else "json"
    _names, changes = catalog.peek_changes(dsn, name, publications, limit=limit)
    sys.stdout.flush()
    out = sys.stdout.buffer
    color, width = terminal_style(stdout_is_terminal())
    renderer = make_renderer(fmt, out, RenderOptions(color=color, width=width))
    assembler = Assembler(1)
    try:
        for change in changes:
            wanted = assembler.user_types_wanted(change.data)
            if wanted:  # a Relation using types that are not built in: ask pg_type first
                assembler.add_user_types(catalog.lookup_user_types(dsn, wanted), wanted)
            for event in assembler.feed(change.data):
                renderer.render(event)
    finally:
        renderer.close()
        out.flush()
    if not changes:
        click.echo(f"no pending changes in slot {name}", err=True)
    elif assembler.open_transactions():
        click.echo("note: the last transaction is incomplete (limit reached)", err=True)
