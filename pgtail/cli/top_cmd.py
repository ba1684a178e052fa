"""``pgtail top``: a live view of the server's logical replication.

Thin: a loop that takes a look (`pgtail.catalog.Watcher`), builds the view
(`pgtail.top.model`) and shows it (`pgtail.top.render`) or prints it as one JSON
document per interval; with --publication it also reads a temporary slot of its own
(`pgtail.catalog.ChangeSampler`) and counts the changes (`pgtail.top.changes`).
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
from pgtail.errors import PgtailError

if TYPE_CHECKING:
    from pgtail.catalog import ChangeSampler, ReplicationFacts
    from pgtail.top.changes import ChangeCounter, PublicationActivity
    from pgtail.top.model import TopView


# a temporary slot that could not start while transactions were open is tried again
# every this many looks
RETRY_LOOKS = 10


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
    idle database (send a heartbeat), invalidated or about to be. Below: the
    server's WAL rate and what holds back the oldest position. Quit with q or
    Ctrl-C. On a terminal it fits the width (80 columns and up); piped or with
    --json it prints one JSON document per interval.

    \b
    Examples:
      pgtail top
      pgtail top --publication app_pub --interval 1
      pgtail top --once --json | jq '.slots[] | {slot_name, cause: .cause.summary}'
    """
    from pgtail import catalog

    if len(publications) > 1:
        raise click.BadParameter(
            "top samples one publication; got " + ", ".join(publications),
            param_hint="'--publication'",
        )
    publication = publications[0] if publications else None
    watcher = catalog.Watcher(dsn)
    sampler: ChangeSampler | None = None
    reason: str | None = None
    try:
        if publication is not None:
            sampler = catalog.ChangeSampler(dsn, publication)
            reason = sampler.start()
            if reason is not None:
                click.echo(f"pgtail: note: {reason}", err=True)
                if not sampler.retriable:
                    sampler = None
        views = _views(watcher, sampler, publication, reason)
        if as_json or not stdout_is_terminal():
            _print_json(views, once, interval)
        else:
            _live(views, once, interval)
    finally:
        if sampler is not None:
            sampler.close()
        watcher.close()


def _views(
    watcher: object,
    sampler: ChangeSampler | None,
    publication: str | None,
    reason: str | None,
) -> Iterator[TopView]:
    """One view per look; the first look is shown without rates, every later one with."""
    from pgtail import catalog
    from pgtail.top.changes import ChangeCounter, unavailable
    from pgtail.top.model import build_view

    assert isinstance(watcher, catalog.Watcher)
    counter = ChangeCounter()
    before: ReplicationFacts | None = None
    hide = (sampler.slot,) if sampler is not None else ()
    looks = 0
    while True:
        facts = watcher.look()
        activity: PublicationActivity | None = None
        if sampler is not None and reason is not None and looks % RETRY_LOOKS == 0 and looks:
            reason = sampler.start()  # open transactions kept it from starting: try again
        looks += 1
        if publication is not None:
            if sampler is None or reason is not None:
                activity = unavailable(publication, reason or "not available")
            else:
                try:
                    activity = _sample(sampler, counter, publication, facts, before)
                except PgtailError as exc:  # the publication dropped, the slot terminated
                    reason = f"reading the temporary slot stopped: {exc}"
                    sampler.close()
                    sampler = None
                    activity = unavailable(publication, reason)
        view = build_view(facts, before, activity, hide=hide)
        before = facts
        yield view


def _sample(
    sampler: ChangeSampler,
    counter: ChangeCounter,
    publication: str,
    facts: ReplicationFacts,
    before: ReplicationFacts | None,
) -> PublicationActivity:
    messages, more = sampler.read()
    seconds = facts.taken_at - before.taken_at if before is not None else 0.0
    return counter.count(publication, messages, seconds, more=more)


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
        console.print(render(next(views), console.width))
        return
    with _keys() as pressed, Live(console=console, auto_refresh=False, screen=True) as live:
        try:
            for view in views:
                live.update(render(view, console.width), refresh=True)
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
