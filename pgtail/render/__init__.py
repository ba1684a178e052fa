"""Renderers: change events in, bytes out.

Every output format implements `Renderer`: ``render(event)`` writes the event's
bytes to the binary stream it was given, ``close()`` finishes any partial output.
Renderers never flush, fsync or confirm anything: the stream loop does that, after
it has handed a whole transaction to the renderer. They import no psycopg2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, BinaryIO

from pgtail.render.options import Renderer, RenderOptions, terminal_style

if TYPE_CHECKING:
    from pgtail.changes.fastpath import EncoderFactory

RendererFactory = Callable[[BinaryIO, RenderOptions], Renderer]

FORMATS = ("json", "table", "sql", "raw")

__all__ = [
    "FORMATS",
    "Renderer",
    "RendererFactory",
    "RenderOptions",
    "row_encoder",
    "make_renderer",
    "terminal_style",
]


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


def row_encoder(fmt: str, *, redact: bool = False) -> EncoderFactory | None:
    """The ``encoder`` an `Assembler` takes for ``--format fmt``: the renderer's fast path
    for the rows of inserts, updates and deletes that arrive as text (see
    `pgtail.changes.fastpath`), or None.

    None with ``redact``: ``--redact`` masks values of the decoded rows, which a line
    written on arrival never has."""
    if redact:
        return None
    if fmt == "json":
        from pgtail.render import jsonl

        return jsonl.json_line_encoder
    if fmt == "sql":
        from pgtail.render import sql

        return sql.sql_statement_encoder
    return None
