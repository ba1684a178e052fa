"""What every renderer shares: its options (`RenderOptions`), the `Renderer` interface,
and the one decision of colour and width for output that may be a terminal.

Kept apart from ``render/__init__`` (which picks a renderer by format) so the renderers
import it without importing the package that imports them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pgtail.errors import DecodeError

if TYPE_CHECKING:
    from pgtail.changes import Change, Event


@dataclass(frozen=True)
class RenderOptions:
    color: bool = False  # ANSI colour (table format); the CLI decides from TTY/NO_COLOR/--color
    width: int | None = None  # terminal width for the table format; None: 80
    tx_lines: bool = False  # --tx: also emit begin/commit records (json)
    changed_only: bool = False  # --changed-only (table)
    max_width: int = 40  # --max-width: truncate long values (table)
    collapse: int = 200  # --collapse N rows per relation per transaction (table)
    extra: dict[str, object] = field(default_factory=dict)  # format-specific settings


def terminal_style(is_tty: bool, color: str = "auto") -> tuple[bool, int | None]:
    """Colour and width for output that may be a terminal, for the callers that build
    `RenderOptions` (the CLI, the demo); renderers themselves never look.

    ``color`` is ``--color``: always, never, or auto (a terminal, and NO_COLOR unset).
    The width is the terminal's; when the output is not a terminal, ``COLUMNS`` if set,
    else None.
    """
    if color == "always":
        use_color = True
    elif color == "never":
        use_color = False
    else:
        use_color = is_tty and not os.environ.get("NO_COLOR")
    if is_tty:
        width: int | None = shutil.get_terminal_size((100, 24)).columns
    else:  # piped: COLUMNS when set (as for a terminal: `COLUMNS=120 pgtail ... | less`)
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else None
    return use_color, width


class Renderer(Protocol):
    def render(self, event: Event) -> None: ...

    def close(self) -> None: ...


# what writing a value no server sends can raise (a NUL in SQL text, an integer past
# 64 bits in JSON): the renderer reports it as the change's malformed value
UNWRITABLE = (ValueError, TypeError, KeyError, AttributeError, OverflowError)


def unwritable_value(
    change: Change, exc: BaseException, write: Callable[[str, Any], object], form: str
) -> DecodeError:
    """The `DecodeError` for a change a renderer could not write: the table, and the
    column whose value ``write(name, value)`` refuses, with why."""
    table = change.table
    types = {c.name: c.type_name or str(c.type_oid) for c in table.columns}
    for row in (change.new, change.old):
        for name, value in (row or {}).items():
            try:
                write(name, value)
            except UNWRITABLE as value_exc:
                exc = value_exc
                return DecodeError(
                    f"{change.op} of {table.qualified_name}: cannot write the value of column"
                    f" {name!r} ({types.get(name, '?')}) as {form}: {exc}",
                    hint="the server (or something between it and pgtail) sent a value no"
                    " server sends; rerun with --debug and report it",
                )
    return DecodeError(f"{change.op} of {table.qualified_name}: cannot write it as {form}: {exc}")
