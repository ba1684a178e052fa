"""Printing for the commands: one decision between pretty and machine output.

A rich table fitted to the terminal, or aligned plain columns when piped; indented
JSON for ``--json``; key/value lines for ``info``/``show``. Text from the database is
shown with its control characters escaped.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click
import orjson

from pgtail.render.escape import escape_text


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
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    importance: Sequence[int] | None = None,
    flex: Sequence[int] = (0,),
    fold: int | None = -1,
    names_first: int | None = None,
) -> None:
    """A rich table on a terminal, fitted to its width (`pgtail.columns`: the least
    important columns give way, never a column of zero width; names are cut with an
    ellipsis, the ``fold`` column wraps); aligned columns without decoration when piped.
    Text from the database is shown with its control characters escaped."""
    headers = [escape_text(h) for h in headers]
    rows = [[escape_text(cell) for cell in row] for row in rows]
    title = escape_text(title) if title else title
    if stdout_is_terminal():
        from rich.console import Console

        console = Console()
        console.print(
            fitted_table(headers, rows, console.width, title, importance, flex, fold, names_first)
        )
        return
    if title:
        click.echo(title)
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for line in [list(headers), *rows]:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())


def fitted_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    title: str | None = None,
    importance: Sequence[int] | None = None,
    flex: Sequence[int] = (0,),
    fold: int | None = -1,
    names_first: int | None = None,
) -> Any:
    """The rich Table `print_table` prints on a terminal ``width`` cells wide."""
    from rich.table import Table
    from rich.text import Text

    from pgtail.columns import fit_columns

    if fold is not None and fold < 0:
        fold += len(headers)
    # a rich column without edges is its width, one cell of padding each side and a rule
    fit = fit_columns(
        headers,
        rows,
        width,
        separator=3,
        importance=importance,
        flex=flex,
        fold=fold,
        names_first=names_first,
    )
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for i, w in zip(fit.keep, fit.widths, strict=True):
        folds = i == fold
        table.add_column(
            headers[i],
            width=w,
            no_wrap=not folds,
            overflow="fold" if folds else "ellipsis",
        )
    for row in rows:
        cells = [row[i] if i == fold else c for i, c in zip(fit.keep, fit.cut(row), strict=True)]
        table.add_row(*(Text(cell) for cell in cells))  # names are data, not rich markup
    return table


def print_fields(
    pairs: Sequence[tuple[str, str]], *, title: str | None = None, width: int | None = None
) -> None:
    """Key/value lines (``info``/``show``), control characters escaped; with ``width``
    (a terminal's) a long value wraps at spaces, its lines under its first."""
    import textwrap

    if title:
        click.echo(escape_text(title))
    key_width = max((len(k) for k, _ in pairs), default=0)
    room = max(20, width - key_width - 4) if width is not None else 0
    indent = " " * (key_width + 4)
    for key, value in pairs:
        text = escape_text(value)
        lines = textwrap.wrap(text, room, break_on_hyphens=False) if room else [text]
        click.echo(f"  {key.ljust(key_width)}  " + f"\n{indent}".join(lines or [""]))
