"""`pgtail top` on a terminal: the view model laid out with rich for a given width.

Fits 80 columns: the slot table's least important columns give way first
(`pgtail.columns`), names are cut with an ellipsis, never a column of zero width; each
slot's cause and fix wrap below the table. Colour says the state (green ok, yellow
warn, red fail, dim for what the server cannot show). Names are data: control and
formatting characters in them show as \\uXXXX escapes, never reach the terminal.
Pure: a view in, a renderable out.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.console import Group
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
        lag_t = ("~" if row.lag_estimated else "") + human_seconds(row.lag_seconds)
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
    fit = fit_columns(headers, rows, width, separator=3, importance=importance, flex=flex)
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


def _header(view: TopView) -> Text:
    facts = view.facts
    when = datetime.fromtimestamp(facts.taken_at).strftime("%H:%M:%S")
    rate = _rate(view.wal_rate) if view.wal_rate is not None else "…"
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("pgtail top", style="bold")
    text.append(f"  PG {view.major}  {escape_text(facts.database)}  WAL {_lsn(facts.current_lsn)} ")
    text.append(rate, style="bold")
    text.append(f"  {when}  q quits", style="dim")
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
            f"xid {t.xid}: {t.changes} changes ({human_bytes(t.bytes)}, {t.table})"
            for t in activity.largest[:3]
        )
        out.append(Text(f"largest transactions: {escape_text(sizes)}", overflow="fold"))
    if activity.more_pending:
        out.append(Text("more changes pending than one interval reads", style="yellow"))
    return out


def render(view: TopView, width: int) -> RenderableType:
    """The whole screen for one interval, at most ``width`` cells wide."""
    parts: list[RenderableType] = [_header(view)]
    if view.slots:
        rows = [slot_cells(r) for r in view.slots]
        styles = [STATUS_STYLE.get(r.cause.status, "") for r in view.slots]
        parts.append(
            _table(
                [h for h, _ in _SLOT_COLUMNS],
                [i for _, i in _SLOT_COLUMNS],
                rows,
                styles,
                width,
                _FLEX,
            )
        )
        for r in view.slots:
            line = Text()
            line.append(f"{r.slot.name}: ", style="bold")
            line.append(escape_text(r.cause.summary), style=STATUS_STYLE.get(r.cause.status, ""))
            if r.cause.fix:
                line.append(f"\n  fix: {escape_text(r.cause.fix)}", style="dim")
            parts.append(line)
    else:
        parts.append(Text("no replication slots", style="dim"))
    if view.pins:
        pins = Text("holding back: ", style="bold")
        pins.append(escape_text("; ".join(f"{p.kind} {p.subject} ({p.detail})" for p in view.pins)))
        parts.append(pins)
    if view.publication is not None:
        parts.extend(_publication(view.publication, width))
    for note in view.notes:
        parts.append(Text(note, style="dim"))
    return Group(*parts)
