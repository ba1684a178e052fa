"""Renderers: change events in, bytes out.

Every output format implements `Renderer`: ``render(event)`` writes the event's
bytes to the binary stream it was given, ``close()`` finishes any partial output.
Renderers never flush, fsync or confirm anything: the stream loop does that, after
it has handed a whole transaction to the renderer. They import no psycopg2.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol

from pgtail.changes import Event, InsertEncoders, Table
from pgtail.values import Converter


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
    The width is the terminal's, or None when the output is not a terminal.
    """
    if color == "always":
        use_color = True
    elif color == "never":
        use_color = False
    else:
        use_color = is_tty and not os.environ.get("NO_COLOR")
    width = shutil.get_terminal_size((100, 24)).columns if is_tty else None
    return use_color, width


class Renderer(Protocol):
    def render(self, event: Event) -> None: ...

    def close(self) -> None: ...


RendererFactory = Callable[[BinaryIO, RenderOptions], Renderer]

FORMATS = ("json", "table", "sql", "raw")


def make_renderer(fmt: str, out: BinaryIO, options: RenderOptions | None = None) -> Renderer:
    """The renderer for ``--format fmt`` writing to ``out``."""
    opts = options or RenderOptions()
    if fmt == "json":
        from pgtail.render.jsonl import JsonLinesRenderer

        return JsonLinesRenderer(out, opts)
    if fmt == "table":
        from pgtail.render.table import TableRenderer

        return TableRenderer(out, opts)
    if fmt == "sql":
        from pgtail.render.sql import SqlRenderer

        return SqlRenderer(out, opts)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


InsertEncoderFactory = Callable[[Table, Sequence[Converter]], InsertEncoders | None]


def insert_encoder(fmt: str) -> InsertEncoderFactory | None:
    """The ``encoder`` an `Assembler` takes for ``--format fmt``: the renderer's fast path
    for changes that arrive as text (see `pgtail.changes.EncodedRows`), or None."""
    if fmt == "json":
        from pgtail.render import jsonl

        return jsonl.insert_encoder
    if fmt == "sql":
        from pgtail.render import sql

        return sql.insert_encoder
    return None
