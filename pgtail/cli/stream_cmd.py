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
from typing import Any

import click

from pgtail.cli import ExitCode, cli
from pgtail.errors import ConfigurationError
from pgtail.filters import EventFilter, parse_ops
from pgtail.lsn import format_lsn, parse_lsn
from pgtail.render import RenderOptions, terminal_style
from pgtail.stream import ReconnectPolicy, StreamConfig, run


def _split(values: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(p.strip() for v in values for p in v.split(",") if p.strip())


def _log(message: str) -> None:
    with contextlib.suppress(Exception):
        click.echo(message, err=True)


@cli.command("stream")
@click.argument("dsn_arg", metavar="[DSN]", required=False)
@click.option(
    "--dsn",
    default=None,
    metavar="DSN",
    help="libpq connection string or URI; default: DATABASE_URL, then libpq's PG* variables.",
)
@click.option("--slot", metavar="NAME", help="Stream this slot (default: a temporary slot).")
@click.option("--create-slot", is_flag=True, help="Create --slot if it does not exist.")
@click.option(
    "--publication",
    "publications",
    multiple=True,
    metavar="NAME",
    envvar="PGTAIL_PUBLICATION",
    help="Publication to stream (repeatable; env PGTAIL_PUBLICATION). Default: the only one.",
)
@click.option(
    "--create-publication",
    is_flag=True,
    help="Create a publication for this run (of --table/--schema, else all tables) "
    "and drop it on exit.",
)
@click.option(
    "--schema",
    "schemas",
    multiple=True,
    metavar="NAME",
    help="With --create-publication: publish every table of this schema (PG15+).",
)
@click.option(
    "--proto-version",
    type=click.IntRange(1, 4),
    default=None,
    help="pgoutput protocol version (default: the highest the server supports).",
)
@click.option("--binary", is_flag=True, help="Binary tuple data (PG14+).")
@click.option("--messages", is_flag=True, help="Include logical decoding messages (PG14+).")
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
@click.option("--start", "start", metavar="LSN", help="Start at this LSN (default: the slot's).")
@click.option(
    "--end",
    "end",
    metavar="LSN",
    help="Stop after the last transaction committed at or before LSN.",
)
@click.option(
    "--max-changes",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Stop after N changes.",
)
@click.option(
    "--idle-exit",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Exit when nothing arrives for SECONDS.",
)
@click.option(
    "--table",
    "tables",
    multiple=True,
    metavar="GLOB",
    help="Only these tables (schema.table glob, repeatable); with --create-publication,"
    " the tables to publish.",
)
@click.option("--exclude", multiple=True, metavar="GLOB", help="Skip these tables (glob).")
@click.option(
    "--ops", metavar="LIST", help="Only these operations: insert,update,delete,truncate,message."
)
@click.option(
    "--redact",
    multiple=True,
    metavar="COLUMNS",
    help="Mask these columns' values (comma-separated; keys stay visible).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "table", "sql", "raw"]),
    default=None,
    help="Output format (default: table on a terminal, json otherwise).",
)
@click.option(
    "--output",
    "-o",
    metavar="FILE",
    help="Append to FILE, fsync'd before the position is confirmed.",
)
@click.option("--tx", "tx_lines", is_flag=True, help="JSON: also emit begin/commit lines.")
@click.option(
    "--color",
    type=click.Choice(["auto", "always", "never"]),
    default="auto",
    show_default=True,
    help="Colour (table format); NO_COLOR is honoured.",
)
@click.option("--changed-only", is_flag=True, help="Table: show only changed columns.")
@click.option(
    "--max-width",
    type=click.IntRange(min=4),
    default=40,
    show_default=True,
    help="Table: truncate values longer than this.",
)
@click.option(
    "--collapse",
    type=click.IntRange(min=1),
    default=200,
    show_default=True,
    help="Table: summarize after this many rows per table per transaction.",
)
@click.option(
    "--status-interval",
    type=click.FloatRange(min=0.1),
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
    help="Reconnect this many times in a row after a lost connection (0: never).",
)
@click.option(
    "--reconnect-max-delay",
    type=click.FloatRange(min=0.1),
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
    pgtail dies, but nothing can be resumed either. Ctrl-C or SIGTERM stops cleanly.

    \b
    Examples:
      pgtail stream --slot app --create-slot --publication app_pub | jq .
      pgtail stream --format sql --table 'public.orders*' --ops insert,update
      pgtail stream --slot app -o changes.jsonl --end 0/5A3B2C10
    """
    if opts["output"] is None and sys.stdout is None:
        raise ConfigurationError(
            "standard output is closed", hint="use --output FILE, or give pgtail a stdout"
        )
    is_tty = opts["output"] is None and _isatty()
    fmt = opts["fmt"] or ("table" if is_tty else "json")
    start = parse_lsn(opts["start"]) if opts["start"] else None
    end = parse_lsn(opts["end"]) if opts["end"] else None
    tables = tuple(opts["tables"])
    color, width = terminal_style(is_tty, opts["color"])
    config = StreamConfig(
        dsn=opts["dsn"] or opts["dsn_arg"],
        slot=opts["slot"],
        create_slot=opts["create_slot"],
        publications=_split(opts["publications"]),
        create_publication=opts["create_publication"],
        publication_tables=tables if opts["create_publication"] else (),
        publication_schemas=tuple(opts["schemas"]),
        proto_version=opts["proto_version"],
        binary=opts["binary"],
        messages=opts["messages"],
        streaming=opts["streaming"],
        two_phase=opts["two_phase"],
        origin=opts["origin"],
        start_lsn=start,
        end_lsn=end,
        max_changes=opts["max_changes"],
        idle_exit=opts["idle_exit"],
        format=fmt,
        render_options=RenderOptions(
            color=color,
            width=width,
            tx_lines=opts["tx_lines"],
            changed_only=opts["changed_only"],
            max_width=opts["max_width"],
            collapse=opts["collapse"],
        ),
        output=opts["output"],
        status_interval=opts["status_interval"],
        filter=EventFilter(
            tables=tables,
            exclude=tuple(opts["exclude"]),
            ops=parse_ops(opts["ops"]),
            redact=_split(opts["redact"]),
        ),
        reconnect=ReconnectPolicy(
            attempts=opts["reconnect_attempts"], max_delay=opts["reconnect_max_delay"]
        ),
    )
    out = sys.stdout.buffer
    result = run(config, out, log=_log)
    if result.reason == "signal":
        _log(f"pgtail: stopped; confirmed up to {format_lsn(result.confirmed_lsn)}")
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
    if result.reason == "closed":
        _quiet_stdout()


def _isatty() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _quiet_stdout() -> None:
    # the reader of our output went away: keep the interpreter's final flush quiet
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except Exception:
        pass
