"""The options that say what to show and how, declared once for `stream` and `slot peek`.

Both commands render change events with the same renderers, so they take the same
``--format``, ``--color``, ``--max-width``, ``--changed-only``, ``--collapse``, ``--tx``,
the same filters (``--table``, ``--exclude``, ``--ops``, ``--redact``) and the same
``--max-changes``. `render_settings` and `event_filter` turn the parsed values into
what the library takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import click

from pgtail.cli.shared_options import Checked, split_commas
from pgtail.render import FORMATS, RenderOptions, terminal_style

if TYPE_CHECKING:
    from pgtail.filters import EventFilter

F = TypeVar("F", bound=Callable[..., Any])


# one type object, so both commands declare --ops alike
def _parse_ops(text: str) -> Any:
    from pgtail.filters import parse_ops  # the filters import the change events

    return parse_ops(text)


OPS = Checked("operations", _parse_ops)

# one help for both commands; `stream --create-publication` says what --table means there
TABLE_HELP = "Only these tables (schema.table glob, repeatable)."


def _apply(decorators: list[Callable[[Any], Any]], f: F) -> F:
    # click lists options in the order they are declared above the function
    for decorator in reversed(decorators):
        f = decorator(f)
    return f


def output_options(f: F) -> F:
    """``--format``, ``--tx``, ``--color``, ``--changed-only``, ``--max-width``,
    ``--collapse``: read back by `render_settings`."""
    return _apply(
        [
            click.option(
                "--format",
                "fmt",
                type=click.Choice(FORMATS),
                default=None,
                help="Output format (default: table on a terminal, json otherwise).",
            ),
            click.option(
                "--tx", "tx_lines", is_flag=True, help="JSON: also emit begin/commit lines."
            ),
            click.option(
                "--color",
                type=click.Choice(["auto", "always", "never"]),
                default="auto",
                show_default=True,
                help="Colour (table format); NO_COLOR is honoured.",
            ),
            click.option(
                "--changed-only",
                is_flag=True,
                help="Table: show only changed columns (and the key columns).",
            ),
            click.option(
                "--max-width",
                type=click.IntRange(min=4),
                default=40,
                show_default=True,
                help="Table: truncate values longer than this (numbers are never cut).",
            ),
            click.option(
                "--collapse",
                type=click.IntRange(min=1),
                default=200,
                show_default=True,
                help="Table: summarize after this many rows per table per transaction.",
            ),
        ],
        f,
    )


def filter_options(f: F) -> F:
    """``--table``, ``--exclude``, ``--ops``, ``--redact``: read back by `event_filter`."""
    return _apply(
        [
            click.option("--table", "tables", multiple=True, metavar="GLOB", help=TABLE_HELP),
            click.option(
                "--exclude", multiple=True, metavar="GLOB", help="Skip these tables (glob)."
            ),
            click.option(
                "--ops",
                type=OPS,
                metavar="OPS",
                help="Only these operations: insert,update,delete,truncate,message.",
            ),
            click.option(
                "--redact",
                multiple=True,
                metavar="COLUMNS",
                help="Mask these columns' values: column, table.column or schema.table.column"
                " globs (comma-separated; keys stay visible).",
            ),
        ],
        f,
    )


def max_changes_option(f: F) -> F:
    """``--max-changes N``: rows, truncates and messages, counted after the filters."""
    return click.option(
        "--max-changes",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Stop after N changes.",
    )(f)


def render_settings(opts: Mapping[str, Any], is_tty: bool) -> tuple[str, RenderOptions]:
    """The format (``--format``, else table on a terminal, json otherwise) and the
    renderer options the `output_options` ask for."""
    fmt = opts["fmt"] or ("table" if is_tty else "json")
    color, width = terminal_style(is_tty, opts["color"])
    return fmt, RenderOptions(
        color=color,
        width=width,
        tx_lines=opts["tx_lines"],
        changed_only=opts["changed_only"],
        max_width=opts["max_width"],
        collapse=opts["collapse"],
    )


def event_filter(opts: Mapping[str, Any]) -> EventFilter:
    """The `EventFilter` the `filter_options` ask for."""
    from pgtail.filters import EventFilter

    return EventFilter(
        tables=tuple(opts["tables"]),
        exclude=tuple(opts["exclude"]),
        ops=opts["ops"],
        redact=split_commas(opts["redact"]),
    )
