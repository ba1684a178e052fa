"""Table cells: how one value is shown (quoted, escaped, the psql way), cut to a width
and painted, and how column widths are fitted to the terminal; the table renderer
(`pgtail.render.table`) lays the cells out. See that module's docstring for what the
markers and quoting mean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson
from rich.cells import cell_len, set_cell_size
from rich.color import ColorSystem
from rich.style import Style

from pgtail.render.escape import escape_text
from pgtail.render.psql_values import element_text, pg_array, pg_float8, pg_time
from pgtail.values import to_text

NULL_MARKER = "NULL"
TOAST_MARKER = "⋯ unchanged toast"
ELLIPSIS = "…"
ARROW = " → "
RULE = "─"
SEP = " │ "
CROSS = "─┼─"

STYLES = {
    "null": "dim",
    "toast": "dim italic",
    "unchanged": "dim",
    "old": "red",
    "arrow": "dim",
    "new": "green",
    "insert": "green",
    "update": "yellow",
    "delete": "red",
    "header": "bold",
    "key": "bold cyan",
    "rule": "bold blue",
    "title": "bold",
    "note": "yellow",
    "truncate": "bold red",
    "message": "magenta",
    "summary": "dim",
    "border": "dim",
}

# characters that force a string to be shown JSON-quoted and escaped: C0/C1
# controls, DEL, zero-width and bidirectional formatting characters, line separators
_NEEDS_QUOTES = re.compile(
    '\\A(?:|["⋯].*|\\s.*|.*\\s)\\Z|[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]',
    re.DOTALL,
)
_MARKERS = frozenset({NULL_MARKER, TOAST_MARKER})
_JSON_SPACE = re.compile(r"\s*[\r\n]\s*")

# timestamp, timestamptz: shown as psql shows them (space, "+00"), kept to 19 cells
# (date and time to the second) before a table is folded; date: 10
TIME_OIDS = frozenset({1114, 1184})
MIN_WIDTH_OF_TYPE = {1114: 19, 1184: 19, 1082: 10}

# right-aligned (numeric) column types: int2, int4, int8, oid, float4, float8, numeric, money
NUMERIC_OIDS = frozenset({21, 23, 20, 26, 700, 701, 1700, 790})

# what a number arrives as (int, float; numeric and money are exact str, told by type)
NUMBER_TYPES = (int, float)
NO_LIMIT = 1 << 30  # the max_width of a numeric column: its values are never cut
# user types (a domain over int...) start here: told numeric by their values
FIRST_USER_OID = 16384

Cell = tuple[int, tuple[tuple[str, str], ...]]  # (width in cells, ((text, style), ...))
BLANK: Cell = (0, ())
NULL_CELL: Cell = (len(NULL_MARKER), ((NULL_MARKER, "null"),))
TOAST_CELL: Cell = (cell_len(TOAST_MARKER), ((TOAST_MARKER, "toast"),))


def needs_quotes(text: str) -> bool:
    """``_NEEDS_QUOTES.search(text) is not None``, without a regex pass over ASCII text
    (whose unsafe characters are exactly what ``isprintable`` refuses): a large value is
    scanned at C speed."""
    if not text or text[0] in '"⋯' or text[0].isspace() or text[-1].isspace():
        return True
    if text.isascii():
        return not text.isprintable()
    return _NEEDS_QUOTES.search(text) is not None


def show_string(text: str) -> str:
    """How a string value is shown: as is, or JSON-quoted (see the module docstring)."""
    if text in _MARKERS or needs_quotes(text):
        return escape_text(json.dumps(text, ensure_ascii=False))
    return text


def show_value(value: Any) -> str:
    """The text shown for a JSON-ready value (not None; NULL is a marker)."""
    kind = type(value)
    if kind is str:
        return show_string(value)
    if kind is int:
        return str(value)
    if kind is bool:
        return "t" if value else "f"  # as psql shows them
    if kind is float:
        return pg_float8(value)
    if kind is orjson.Fragment:
        return escape_text(_JSON_SPACE.sub(" ", to_text(value)))
    if kind is list:
        return escape_text(pg_array(value, element_text))
    return escape_text(str(value))


def truncate(text: str, width: int) -> tuple[str, int]:
    """``text`` cut to ``width`` cells with an ellipsis; (text, cells)."""
    if text.isascii():
        if len(text) <= width:
            return text, len(text)
        if width <= 0:
            return "", 0
        return text[: width - 1] + ELLIPSIS, width
    cells = cell_len(text)
    if cells <= width:
        return text, cells
    if width <= 0:
        return "", 0
    cut = set_cell_size(text, width - 1).rstrip(" ") if width > 1 else ""
    return cut + ELLIPSIS, cell_len(cut) + 1


def fit_cell(cell: Cell, width: int) -> Cell:
    """``cell`` cut to ``width``; an ``old → new`` cell shares the width between both sides."""
    if cell[0] <= width:
        return cell
    segs = cell[1]
    if len(segs) == 3:
        (old, old_style), arrow, (new, new_style) = segs
        room = width - len(ARROW)
        if room >= 2:
            old_w = cell_len(old)
            new_w = cell_len(new)
            half = room // 2
            if old_w <= half:
                new_room = room - old_w
                old_room = old_w
            elif new_w <= room - half:
                old_room = room - new_w
                new_room = new_w
            else:
                old_room = half
                new_room = room - half
            old_t, ow = truncate(old, old_room)
            new_t, nw = truncate(new, new_room)
            return (ow + len(ARROW) + nw, ((old_t, old_style), arrow, (new_t, new_style)))
        text = "".join(s[0] for s in segs)
        t, w = truncate(text, width)
        return (w, ((t, new_style),))
    parts: list[tuple[str, str]] = []
    used = 0
    for text, style in segs:
        t, w = (
            truncate(text, width - used)
            if used + cell_len(text) > width
            else (text, cell_len(text))
        )
        parts.append((t, style))
        used += w
        if used >= width:
            break
    return (used, tuple(parts))


def _shown_head(value: str, length: int) -> str:
    """The start of `show_value` of a string longer than ``length``, enough to cut to
    ``length - 2`` cells the same way: showing each character depends on it alone (and
    whether to quote on the whole), so a large value is not escaped whole to show a
    few characters of it. Of other text, a start of growing length is shown until it
    spans more cells than the cut keeps (a character may take 0, 1, 2 or, escaped, 6)."""
    if not value.isascii():
        quoted = value in _MARKERS or needs_quotes(value)
        size = 4 * length + 64
        while size < len(value):
            head = value[:size]
            if quoted:
                head = escape_text(json.dumps(head, ensure_ascii=False)[:-1])
            if cell_len(head) >= length + 8:
                return head
            size *= 4
        return show_value(value)
    head = value[:length]
    if needs_quotes(value):
        head = escape_text(json.dumps(head)[:-1])  # without the closing quote
    return head


def value_cell(value: Any, max_width: int, style: str = "") -> Cell:
    """The cell of one value, cut to ``max_width``; a number is never cut (a number cut
    short reads as another number): pass `NO_LIMIT` for a numeric column's text."""
    if value is None:
        return NULL_CELL
    if type(value) is str and len(value) > max_width + 2 and max_width < NO_LIMIT:
        text = _shown_head(value, max_width + 2)
    else:
        text = show_value(value)
    if (len(text) <= max_width or type(value) in NUMBER_TYPES) and text.isascii():
        return (len(text), ((text, style),))
    text, width = truncate(text, max_width)
    return (width, ((text, style),))


def _split_style(style: str, color_system: ColorSystem) -> tuple[str, str]:
    rendered = Style.parse(style).render("\x00", color_system=color_system)
    before, _, after = rendered.partition("\x00")
    return before, after


class Painter:
    """Turns (text, style) pieces into text with or without ANSI codes."""

    def __init__(self, color: bool, color_system: str) -> None:
        self.color = color
        self.codes: dict[str, tuple[str, str]] = {}
        if color:
            system = {
                "standard": ColorSystem.STANDARD,
                "256": ColorSystem.EIGHT_BIT,
                "truecolor": ColorSystem.TRUECOLOR,
            }.get(color_system, ColorSystem.STANDARD)
            self.codes = {name: _split_style(spec, system) for name, spec in STYLES.items()}

    def paint(self, text: str, style: str) -> str:
        if not style or not self.color or not text:
            return text
        before, after = self.codes[style]
        return before + text + after

    def cell(self, segs: tuple[tuple[str, str], ...]) -> str:
        if not self.color:
            if len(segs) == 1:
                return segs[0][0]
            return "".join(s[0] for s in segs)
        codes = self.codes
        out = []
        for text, style in segs:
            if style and text:
                before, after = codes[style]
                out.append(before + text + after)
            else:
                out.append(text)
        return "".join(out)


def pad(text: str, width: int, target: int, right: bool, last: bool = False) -> str:
    gap = target - width
    if gap <= 0:
        return text
    if right:
        return " " * gap + text
    return text if last else text + " " * gap


def fit_widths(
    widths: list[int], total: int, minimums: Callable[[], list[int]]
) -> list[int] | None:
    """Column widths that fit ``total`` cells with separators, or None to fold."""
    overhead = 1 + len(SEP) * (len(widths) - 1)
    room = total - overhead
    if sum(widths) <= room:
        return widths
    minimum = [min(w, m) for w, m in zip(widths, minimums(), strict=True)]
    if sum(minimum) > room:
        return None
    # the largest cap such that sum(min(w, max(cap, min))) fits
    low, high = min(minimum), max(widths)
    while low < high:
        cap = (low + high + 1) // 2
        if sum(min(w, max(cap, m)) for w, m in zip(widths, minimum, strict=True)) <= room:
            low = cap
        else:
            high = cap - 1
    fitted = [min(w, max(low, m)) for w, m in zip(widths, minimum, strict=True)]
    # hand out what is left one cell at a time to the columns that were cut
    spare = room - sum(fitted)
    for i, w in enumerate(widths):
        if spare <= 0:
            break
        if fitted[i] < w:
            fitted[i] += 1
            spare -= 1
    return fitted


_MARKER_STYLES = frozenset({"arrow", "null", "toast"})


class _Shown(str):
    """A value's display text, shown as is (`show_value` does not quote it)."""

    __slots__ = ()


def displayed(
    row: dict[str, Any] | None, displays: tuple[tuple[str, Callable[[Any], str]], ...]
) -> dict[str, Any] | None:
    if row is None:
        return None
    shown = dict(row)
    for name, show in displays:
        value = shown.get(name)
        if value is not None:
            shown[name] = _Shown(escape_text(show(value)))
    return shown


def psql_times(cells: list[Cell], positions: tuple[int, ...]) -> None:
    """Rewrite the timestamp cells of a row the psql way (display only)."""
    for i in positions:
        segs = cells[i][1]
        if segs and segs[0][1] != "toast":
            new_segs = tuple(
                (text, style) if style in _MARKER_STYLES else (pg_time(text), style)
                for text, style in segs
            )
            cells[i] = (sum(cell_len(t) for t, _ in new_segs), new_segs)


def same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if type(a) is orjson.Fragment:
        return bool(to_text(a) == to_text(b))
    if type(a) is float:
        return repr(a) == repr(b)
    return bool(a == b)
