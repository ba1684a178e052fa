"""``pgtail top``: a live view of the server's logical replication.

Thin: `pgtail.top.looks` gives one view per look (and with --publication reads a
temporary slot of top's own for the change rates); the command shows each view
(`pgtail.top.render`) or prints it as one JSON document per interval.
"""

from __future__ import annotations

import contextlib
import select
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import click
import orjson

from pgtail.cli import cli
from pgtail.cli.printing import stdout_is_terminal
from pgtail.cli.shared_options import (
    PUBLICATION_FORM,
    Seconds,
    connection_options,
    json_option,
    publication_option,
)

if TYPE_CHECKING:
    from pgtail.top.model import TopView


@cli.command("top")
@click.option(
    "--interval",
    type=Seconds(min=0.2, max=3600),
    default=2.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds between two looks.",
)
@click.option(
    "--once",
    is_flag=True,
    help="Take two looks --interval apart (for rates), print one view and exit.",
)
@publication_option(
    "Also show change rates per table and operation and the largest transactions of this "
    f"publication {PUBLICATION_FORM}, decoded from a temporary slot of top's own (needs "
    "REPLICATION and a free slot entry; users' slots are never read). One publication."
)
@json_option("One JSON document per interval, one per line (the default when piped).")
@connection_options
def top(
    interval: float,
    once: bool,
    publications: tuple[str, ...],
    as_json: bool,
    dsn: str | None,
) -> None:
    """A live view of logical replication: which slot holds WAL, and why.

    Every slot: who consumes it (PID, application_name, client address), lag in
    bytes and in time, retained WAL and its trend, wal_status and safe_wal_size
    with a forecast of invalidation at the current rate, spill/stream rates
    (PostgreSQL 14+), sent/flush/replay positions, catalog_xmin age, and one line
    naming the root cause with its fix: no consumer, consumer not confirming,
    server side slow or spilling, pinned by an old or prepared transaction, an
    idle database (send a heartbeat), invalidated or about to be, being created
    (and the transaction it waits for). Worst slots first; not confirming is
    decided by time, lag in time only from observations. Below: the server's WAL
    rate and what holds back the oldest position. Quit with q or Ctrl-C. On a
    terminal it fits the width (80 columns and up) and height, saying what is
    left out; piped or with --json it prints one JSON document per interval.

    \b
    Examples:
      pgtail top
      pgtail top --publication app_pub --interval 1
      pgtail top --once --json | jq '.slots[] | {slot_name, cause: .cause.summary}'
    """
    from pgtail.top.looks import TopLooks

    if len(publications) > 1:
        raise click.BadParameter(
            "top samples one publication; got " + ", ".join(publications),
            param_hint="'--publication'",
        )
    with TopLooks(dsn, publications[0] if publications else None) as looks:
        if looks.note is not None:
            click.echo(f"pgtail: note: {looks.note}", err=True)
        if as_json or not stdout_is_terminal():
            _print_json(looks.views(), once, interval)
        else:
            _live(looks.views(), once, interval)


def _print_json(views: Iterator[TopView], once: bool, interval: float) -> None:
    out = sys.stdout.buffer
    if once:  # the second look has the rates
        next(views)
        time.sleep(interval)
    for view in views:
        out.write(orjson.dumps(view.to_dict()) + b"\n")
        out.flush()
        if once:
            return
        time.sleep(interval)


def _live(views: Iterator[TopView], once: bool, interval: float) -> None:
    from rich.console import Console
    from rich.live import Live

    from pgtail.top.render import render

    console = Console()
    if once:
        next(views)
        time.sleep(interval)
        console.print(render(next(views), console.width, live=False))
        return
    with _keys() as pressed, Live(console=console, auto_refresh=False, screen=True) as live:
        try:
            for view in views:
                live.update(render(view, console.width, console.height), refresh=True)
                if pressed(interval):
                    return
        except KeyboardInterrupt:
            return


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], bool]]:
    """A wait that returns True when q is pressed (the terminal in cbreak mode)."""
    stdin = sys.stdin
    if not stdin.isatty():

        def wait(seconds: float) -> bool:
            time.sleep(seconds)
            return False

        yield wait
        return
    import termios
    import tty

    fd = stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def wait_key(seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([fd], [], [], left)
            if ready and stdin.read(1) in ("q", "Q"):
                return True
        return False

    try:
        yield wait_key
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
