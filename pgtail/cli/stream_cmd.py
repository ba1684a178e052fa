"""``pgtail stream``: tail a replication slot as tables, JSON lines, SQL or a raw trace.

Thin: parses options into a `pgtail.stream.StreamConfig`, calls `pgtail.stream.run`,
and turns how the stream ended into an exit code (0, or 130/143/129 after
Ctrl-C/SIGTERM/SIGHUP).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

import click

from pgtail.cli import ExitCode, cli
from pgtail.cli.completers import complete_logical_slot
from pgtail.cli.output_options import (
    event_filter,
    filter_options,
    max_changes_option,
    output_options,
    render_settings,
)
from pgtail.cli.printing import stdout_is_terminal
from pgtail.cli.shared_options import (
    LSN,
    SLOT_NAME,
    Seconds,
    binary_option,
    connection_options,
    publication_option,
    usage_error,
)
from pgtail.errors import ConfigurationError
from pgtail.lsn import format_lsn

if TYPE_CHECKING:
    from pgtail.stream import StreamResult


def _log(message: str) -> None:
    with contextlib.suppress(Exception):
        click.echo(message, err=True)


@cli.command("stream")
@connection_options
@click.option(
    "--slot",
    type=SLOT_NAME,
    metavar="NAME",
    shell_complete=complete_logical_slot,
    help="Stream this slot (default: a temporary slot).",
)
@click.option("--create-slot", is_flag=True, help="Create --slot if it does not exist.")
@publication_option()
@click.option(
    "--create-publication",
    is_flag=True,
    help="Create a publication for this run of the --table tables (names, not globs) and "
    "--schema schemas, else of all tables, and drop it on exit.",
)
@click.option(
    "--schema",
    "schemas",
    multiple=True,
    metavar="SCHEMA",
    help="With --create-publication: publish every table of this schema (PG15+).",
)
@click.option(
    "--proto-version",
    type=click.IntRange(1, 4),
    default=None,
    help="pgoutput protocol version (default: the highest the server supports).",
)
@binary_option
@click.option(
    "--messages",
    is_flag=True,
    help="Include logical decoding messages (PG14+; --ops with message implies it).",
)
@click.option(
    "--streaming",
    type=click.Choice(["off", "on", "parallel"]),
    default="off",
    show_default=True,
    help="Receive large transactions while in progress (PG14+).",
)
@click.option("--two-phase", is_flag=True, help="Decode prepared transactions (PG15+).")
@click.option(
    "--origin",
    type=click.Choice(["any", "none"]),
    default=None,
    help="Only changes without a replication origin ('none'), or all (PG16+).",
)
@click.option(
    "--start", "start", type=LSN, metavar="LSN", help="Start at this LSN (default: the slot's)."
)
@click.option(
    "--end",
    "end",
    type=LSN,
    metavar="LSN",
    help="Stop after the last transaction committed at or before LSN.",
)
@click.option(
    "--snapshot",
    is_flag=True,
    help='First every existing row of the published tables (JSON op "snapshot"; SQL: '
    "each table emptied and filled in one transaction), then every change, with no gap "
    "and no duplicate. An existing --slot gets a temporary slot's snapshot, and its "
    "changes to the copied tables from before it are skipped.",
)
@click.option(
    "--no-ddl",
    is_flag=True,
    help="With --format sql: write changes of a table's shape as comments, and no "
    "CREATE TABLE IF NOT EXISTS / ALTER TABLE (for a target with a schema of its own).",
)
@click.option(
    "--snapshot-table",
    "snapshot_tables",
    multiple=True,
    metavar="GLOB",
    help="With --snapshot (implied): copy only the tables matching GLOB (table or "
    "schema.table; repeatable).",
)
@max_changes_option
@click.option(
    "--idle-exit",
    type=Seconds(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Exit when nothing arrives for SECONDS.",
)
@filter_options
@output_options
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Append to FILE, fsync'd before the position is confirmed. The slot, position and "
    "size written are kept in FILE.pgtail-state, so a restart neither repeats nor loses "
    "changes; delete it to start the bookkeeping afresh.",
)
@click.option(
    "--status-interval",
    type=Seconds(min=0.1),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="Heartbeat feedback interval.",
)
@click.option(
    "--reconnect-attempts",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Reconnect this many times in a row after a lost connection (0: never). Given, "
    "also how often a first connection that finds no server is retried (else for a few "
    "seconds).",
)
@click.option(
    "--reconnect-max-delay",
    type=Seconds(min=0.1),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Longest wait between reconnects.",
)
@click.pass_context
def stream_command(ctx: click.Context, /, **opts: Any) -> None:
    """Stream changes from a replication slot.

    Confirms a position to the server only once everything before it is written (and
    fsync'd with --output). Without --slot, a TEMPORARY slot is used: nothing leaks if
    pgtail dies, but nothing can be resumed either. Ctrl-C, SIGTERM or SIGHUP stops
    cleanly; with --output, SIGHUP reopens FILE instead (log rotation).

    \b
    Examples:
      pgtail stream --slot app --create-slot --publication app_pub | jq .
      pgtail stream --format sql --table 'public.orders*' --ops insert,update
      pgtail stream --slot app -o changes.jsonl --end 0/5A3B2C10
      pgtail stream --snapshot --format sql | psql -v ON_ERROR_STOP=1 -d target
      pgtail stream postgresql://me@db.example.com/shop --slot app
      pgtail stream -h /var/run/postgresql -U me -d shop --slot app
    """
    if opts["output"] is None and sys.stdout is None:
        raise ConfigurationError(
            "standard output is closed", hint="use --output FILE, or give pgtail a stdout"
        )
    is_tty = opts["output"] is None and stdout_is_terminal()
    fmt, render_options = render_settings(opts, is_tty)
    start, end = opts["start"], opts["end"]
    if start is not None and end is not None and end < start:
        raise usage_error("--end is before --start")
    if opts["no_ddl"] and fmt != "sql":
        raise usage_error("--no-ddl applies to --format sql only")
    snapshot = opts["snapshot"] or bool(opts["snapshot_tables"])
    if snapshot and start is not None:
        raise usage_error(
            "--snapshot cannot be combined with --start (the rows are consistent"
            " with the point the new slot's changes start at)"
        )
    tables = tuple(opts["tables"])
    # --ops message asks for messages: without them decoded, it would show nothing and
    # confirm past them (gone from the slot), so it implies --messages
    messages = opts["messages"] or "message" in (opts["ops"] or ())
    from pgtail.stream import FIRST_CONTACT_WAIT, ReconnectPolicy, StreamConfig, run

    config = StreamConfig(
        dsn=opts["dsn"],
        slot=opts["slot"],
        create_slot=opts["create_slot"],
        publications=opts["publications"],
        create_publication=opts["create_publication"],
        publication_tables=tables if opts["create_publication"] else (),
        publication_schemas=tuple(opts["schemas"]),
        proto_version=opts["proto_version"],
        binary=opts["binary"],
        messages=messages,
        streaming=opts["streaming"],
        two_phase=opts["two_phase"],
        origin=opts["origin"],
        start_lsn=start,
        end_lsn=end,
        max_changes=opts["max_changes"],
        idle_exit=opts["idle_exit"],
        format=fmt,
        ddl=not opts["no_ddl"],
        render_options=render_options,
        output=opts["output"],
        status_interval=opts["status_interval"],
        filter=event_filter(opts),
        reconnect=ReconnectPolicy(
            attempts=opts["reconnect_attempts"],
            max_delay=opts["reconnect_max_delay"],
            # a server that does not answer before it was ever reached: a few seconds (a
            # restart), unless --reconnect-attempts asks to wait for it
            first_contact_wait=(None if _given(ctx, "reconnect_attempts") else FIRST_CONTACT_WAIT),
        ),
        snapshot=snapshot,
        snapshot_tables=tuple(opts["snapshot_tables"]),
    )
    out = sys.stdout.buffer
    result = run(config, out, log=_log)
    if result.reason == "signal":
        # on a terminal, a copy's progress bar (redrawn in place) may be left mid-line
        _stopped_by_signal(result, bar=fmt == "table" and render_options.width is not None)
    if result.reason == "closed":
        _log(_reader_gone_message(result, temporary=config.slot is None, snapshot=snapshot))
        _quiet_stdout()


def _stopped_by_signal(result: StreamResult, *, bar: bool) -> None:
    """Say where a run a signal stopped left the slot, and exit with the signal's status
    (``bar``: the output is a terminal that may show a copy's progress bar)."""
    dropped = f"; {result.dropped_slot}" if result.dropped_slot else ""
    if result.dropped_slot and bar:  # the copy's progress bar was cut mid-line
        _log("")
    if result.confirmed_lsn:
        lsn = format_lsn(result.confirmed_lsn)
        _log(f"pgtail: stopped; confirmed up to {lsn}{dropped}")
    else:
        _log(f"pgtail: stopped; nothing was confirmed{dropped}")
    code = int(
        {signal.SIGTERM: ExitCode.SIGTERM, signal.SIGHUP: ExitCode.SIGHUP}.get(
            signal.Signals(result.signal or signal.SIGINT), ExitCode.SIGINT
        )
    )
    if result.abandoned:
        # output is stuck in a blocked write: leave without the interpreter's final
        # flush of stdout, which would block too
        sys.stderr.flush()
        os._exit(code)
    # sys.exit, not ctx.exit: click returns (rather than raises) Exit outside standalone mode
    sys.exit(code)


def _reader_gone_message(result: StreamResult, *, temporary: bool, snapshot: bool) -> str:
    """What a run whose output's reader went away (exited or failed) leaves behind."""
    confirmed = (
        f"confirmed up to {format_lsn(result.confirmed_lsn)}"
        if result.confirmed_lsn
        else "nothing was confirmed"
    )
    if temporary:
        rest = "the slot was temporary: what was not confirmed is gone with it"
    elif snapshot and not result.confirmed_lsn:
        rest = "the snapshot did not finish: run the same command again to copy it again"
    else:
        rest = (
            f"what was not confirmed (the transaction the reader failed on or did not take)"
            f" is still in slot {result.slot} and comes again on the next run"
        )
    return f"pgtail: the reader of the output went away; {confirmed}; {rest}"


def _given(ctx: click.Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source != click.core.ParameterSource.DEFAULT


def _quiet_stdout() -> None:
    # the reader of our output went away: keep the interpreter's final flush quiet
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except Exception:
        pass
