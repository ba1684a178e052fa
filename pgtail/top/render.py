"""`pgtail top` on a terminal: the view model laid out with rich for a given width.

Fits 80 columns: the slot table's least important columns give way first
(`pgtail.columns`), names are cut (with an ellipsis) only once every less important
column has gone, never a column of zero width; each slot's cause and fix wrap below the
table, their lines keeping their indent. Slots come worst first. Given a height, nothing
is cut silently: what does not fit is left out whole and the last line says what and
how to see it. Colour says the state (green ok, yellow warn, red fail, dim for what the
server cannot show). Names are data: control and formatting characters in them show as
\\uXXXX escapes, never reach the terminal. Pure: a view in, a renderable out.
"""

from __future__ import annotations

import io
import textwrap
from datetime import datetime
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from pgtail.columns import fit_columns
from pgtail.doctor.findings import human_bytes
from pgtail.doctor.slot_causes import human_seconds
from pgtail.lsn import format_lsn
from pgtail.render.escape import escape_text

if TYPE_CHECKING:
    from rich.console import RenderableType

    from pgtail.top.changes import PublicationActivity
    from pgtail.top.model import SlotRow, TopView

STATUS_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}

# slot table: header, importance (higher stays longer on a narrow terminal)
_SLOT_COLUMNS = (
    ("slot", 100),
    ("consumer", 70),
    ("lag", 95),
    ("lag_t", 85),
    ("retained", 94),
    ("trend", 80),
    ("wal", 75),
    ("safe", 60),
    ("spill/s", 55),
    ("stream/s", 50),
    ("xmin_age", 45),
    ("sent", 30),
    ("flush", 29),
    ("replay", 28),
)
_FLEX = (0, 1)
# a name (slot, consumer) is cut only once the columns ranked below this have given way
_NAMES_BEFORE = 80
_PUB_COLUMNS = (("table", 100), ("op", 90), ("changes", 80), ("per s", 85))


def _rate(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{human_bytes(int(value))}/s".replace(" bytes/s", " B/s")


def _trend(value: float | None) -> str:
    if value is None:
        return "-"
    sign = "+" if value > 0 else ("-" if value < 0 else "")
    return sign + _rate(abs(value))


def _lsn(value: int | None) -> str:
    return format_lsn(value) if value is not None else "-"


def slot_cells(row: SlotRow) -> list[str]:
    s = row.slot
    trend = row.trend
    lag_t = "-"
    if row.lag_seconds is not None:
        lag_t = ("> " if row.lag_at_least else "") + human_seconds(row.lag_seconds)
    safe = human_bytes(s.safe_wal_size) if s.safe_wal_size is not None else "-"
    if row.cause.invalidation_in is not None:
        safe = human_seconds(row.cause.invalidation_in)
    sender = row.sender
    return [
        s.name,
        row.consumer if s.active else "none",
        human_bytes(s.lag_bytes),
        lag_t,
        human_bytes(s.retained_bytes),
        _trend(trend.retained_rate if trend else None),
        s.wal_status or "-",
        safe,
        _rate(trend.spill_rate if trend else None),
        _rate(trend.stream_rate if trend else None),
        str(s.catalog_xmin_age if s.catalog_xmin_age is not None else "-"),
        _lsn(sender.sent_lsn if sender else None),
        _lsn(sender.flush_lsn if sender else None),
        _lsn(sender.replay_lsn if sender else None),
    ]


def _table(
    headers: list[str],
    importance: list[int],
    rows: list[list[str]],
    styles: list[str],
    width: int,
    flex: tuple[int, ...],
) -> Table:
    rows = [[escape_text(cell) for cell in row] for row in rows]  # names are data
    fit = fit_columns(
        headers,
        rows,
        width,
        separator=3,
        importance=importance,
        flex=flex,
        names_first=_NAMES_BEFORE,
    )
    table = Table(show_edge=False, pad_edge=False, header_style="bold")
    for i, w in zip(fit.keep, fit.widths, strict=True):
        right = headers[i] not in ("slot", "consumer", "wal", "table", "op")
        table.add_column(
            headers[i],
            width=w,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if right else "left",
        )
    for row, style in zip(rows, styles, strict=True):
        table.add_row(*(Text(cell, style=style) for cell in fit.cut(row)))
    return table


def _header(view: TopView, live: bool) -> Text:
    facts = view.facts
    when = datetime.fromtimestamp(facts.taken_at).strftime("%H:%M:%S")
    rate = _rate(view.wal_rate) if view.wal_rate is not None else "…"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("pgtail top", style="bold")
    text.append(f"  PG {view.major}  {escape_text(facts.database)}  WAL {_lsn(facts.current_lsn)} ")
    text.append(rate, style="bold")
    text.append(f"  {when}" + ("  q quits" if live else ""), style="dim")
    return text


def _publication(activity: PublicationActivity, width: int) -> list[RenderableType]:
    title = Text(f"publication {escape_text(activity.publication)}", style="bold")
    if not activity.available:
        return [title + Text(f": {escape_text(activity.reason or '')}", style="yellow")]
    out: list[RenderableType] = [title]
    if not activity.rates:
        out.append(Text("  no changes in this interval", style="dim"))
        return out
    rows = [[r.table, r.op, str(r.count), f"{r.rate:.1f}"] for r in activity.rates[:10]]
    out.append(
        _table(
            [h for h, _ in _PUB_COLUMNS],
            [i for _, i in _PUB_COLUMNS],
            rows,
            [""] * len(rows),
            width,
            (0,),
        )
    )
    if activity.largest:
        sizes = ", ".join(
            f"xid {t.xid}: {_plural(t.changes, 'change')} ({human_bytes(t.bytes)}, {t.table})"
            for t in activity.largest[:3]
        )
        out.append(Text(f"largest transactions: {escape_text(sizes)}", overflow="fold"))
    if activity.more_pending:
        out.append(Text("more changes pending than one interval reads", style="yellow"))
    return out


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _wrapped(text: str, width: int, first: str, rest: str, style: str) -> list[Text]:
    """``text`` wrapped at spaces to ``width``, the first line after ``first``, the others
    after ``rest`` (a hanging indent), each line one Text."""
    lines = textwrap.wrap(
        text,
        max(10, width),
        initial_indent=first,
        subsequent_indent=rest,
        break_on_hyphens=False,
    )
    return [Text(line, style=style, no_wrap=True, overflow="ellipsis") for line in lines]


def _cause_lines(row: SlotRow, width: int) -> list[Text]:
    name = escape_text(row.slot.name)
    lines = _wrapped(
        f"{name}: {escape_text(row.cause.summary)}",
        width,
        "",
        "  ",
        STATUS_STYLE.get(row.cause.status, ""),
    )
    if lines:
        lines[0].stylize("bold", 0, len(name) + 1)
    if row.cause.fix:
        lines += _wrapped(escape_text(row.cause.fix), width, "  fix: ", "       ", "dim")
    return lines


def _lines(renderable: RenderableType, width: int) -> list[Text]:
    """A renderable as the lines it takes at ``width`` (to count and to cut them)."""
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    return [
        Text.assemble(*((seg.text, seg.style or "") for seg in line if not seg.control))
        for line in console.render_lines(renderable, console.options, pad=False)
    ]


def render(view: TopView, width: int, height: int | None = None, live: bool = True) -> Group:
    """The whole screen for one interval, at most ``width`` cells wide and, with
    ``height``, as many lines: then what does not fit is left out whole, worst slots
    kept first, and the last line says what is below. ``live``: the key hint."""
    header = [_header(view, live)]
    table: list[Text] = []
    causes: list[list[Text]] = []
    if view.slots:
        rows = [slot_cells(r) for r in view.slots]
        styles = [STATUS_STYLE.get(r.cause.status, "") for r in view.slots]
        headers = [h for h, _ in _SLOT_COLUMNS]
        importance = [i for _, i in _SLOT_COLUMNS]
        table = _lines(_table(headers, importance, rows, styles, width, _FLEX), width)
        causes = [_cause_lines(r, width) for r in view.slots]
    else:
        table = [Text("no replication slots", style="dim")]
    pins: list[Text] = []
    if view.pins:
        text = "; ".join(f"{p.kind} {p.subject} ({p.detail})" for p in view.pins)
        pins = _wrapped(escape_text(text), width, "holding back: ", "  ", "")
        pins[0].stylize("bold", 0, len("holding back:"))
    publication: list[Text] = []
    if view.publication is not None:
        publication = _lines(Group(*_publication(view.publication, width)), width)
    notes = [line for note in view.notes for line in _wrapped(note, width, "", "  ", "dim")]
    every = header + table + [line for c in causes for line in c] + pins + publication + notes
    if height is None or len(every) <= height:
        return Group(*every)
    return Group(*_fit_height(view, width, height, header, table, causes, pins, publication, notes))


def _fit_height(
    view: TopView,
    width: int,
    height: int,
    header: list[Text],
    table: list[Text],
    causes: list[list[Text]],
    pins: list[Text],
    publication: list[Text],
    notes: list[Text],
) -> list[Text]:
    """The screen cut to ``height`` lines: the header and the table first (worst slots
    first), then what holds back, then each slot's cause in order, the publication and
    the notes, each whole or not at all; the last line says what was left out."""
    room = height - 1 - len(header)  # the last line is the marker
    shown_rows = len(view.slots)
    table_head = len(table) - shown_rows
    if len(table) > room:
        shown_rows = max(0, room - table_head)
        table = table[: table_head + shown_rows] if shown_rows else []
    room -= len(table)
    kept_pins = pins if len(pins) <= room else []
    room -= len(kept_pins)
    kept_causes: list[list[Text]] = []
    for lines in causes[:shown_rows]:
        if len(lines) > room:
            break
        kept_causes.append(lines)
        room -= len(lines)
    left_out = []
    kept_pub = publication if len(publication) <= room else []
    room -= len(kept_pub)
    kept_notes = notes if len(notes) <= room else []
    if pins and not kept_pins:
        left_out.append("holding back")
    if publication and not kept_pub:
        left_out.append("publication")
    if notes and not kept_notes:
        left_out.append("notes")
    hidden_rows = len(view.slots) - shown_rows
    hidden_causes = shown_rows - len(kept_causes)
    what = [_plural(hidden_rows, "more slot")] if hidden_rows else []
    if hidden_causes:
        what.append(
            ("the causes of " if hidden_causes > 1 else "the cause of ")
            + _plural(hidden_causes, "more slot" if hidden_rows else "slot")
        )
    marker = Text(
        ", ".join(what + left_out) + " below: resize the terminal, or pgtail top --json",
        style="reverse",
        no_wrap=True,
        overflow="ellipsis",
    )
    out = header + table + [line for c in kept_causes for line in c] + kept_pins
    return [*out, *kept_pub, *kept_notes, marker][:height]
