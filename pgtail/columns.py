"""Fitting a table's columns into a terminal width: which columns to show and how wide.

A column is never squeezed below what it needs (its header, or its widest value for a
column that must not be cut); when they do not all fit, the least important columns go
first. Names (``flex`` columns) give way down to a minimum and are cut with an ellipsis;
a ``fold`` column takes what is left and wraps. Pure: strings in, widths out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
FLEX_MIN = 8  # a name is cut no shorter than this
FOLD_MIN = 16  # a wrapping column gets at least this


@dataclass(frozen=True, slots=True)
class Fit:
    keep: tuple[int, ...]  # indexes of the columns shown, in order
    widths: tuple[int, ...]  # width of each column shown

    def cut(self, row: Sequence[str]) -> list[str]:
        """The row's kept cells, each cut to its width (wrapping is the renderer's)."""
        return [truncate(row[i], w) for i, w in zip(self.keep, self.widths, strict=True)]


def truncate(text: str, width: int) -> str:
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    return text[: width - 1] + ELLIPSIS


def fit_columns(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    separator: int = 2,
    importance: Sequence[int] | None = None,
    flex: Sequence[int] = (),
    fold: int | None = None,
    names_first: int | None = None,
) -> Fit:
    """Columns and widths for a table of ``rows`` within ``width`` cells.

    ``importance``: a rank per column, higher = dropped later (default: left to right
    matter more); ``flex``: columns cut with an ellipsis to fit; ``fold``: one column that
    wraps. The first column is never dropped. With ``names_first`` (a rank) a name (a
    ``flex`` column) is cut only once every column less important than it, or than
    ``names_first`` if that is lower, has given way."""
    fit = _fit(headers, rows, width, separator, importance, flex, fold)
    if names_first is None:
        return fit
    rank = (
        list(importance)
        if importance is not None
        else [len(headers) - i for i in range(len(headers))]
    )
    dropped: set[int] = set()
    while True:
        shown = dict(zip(fit.keep, fit.widths, strict=True))
        cut = [i for i in flex if i in shown and shown[i] < max(len(r[i]) for r in rows)]
        if not rows or not cut:
            return fit
        top = min(names_first, max(rank[i] for i in cut))
        lesser = [i for i in fit.keep if i != 0 and rank[i] < top]
        if not lesser:
            return fit
        dropped.add(min(lesser, key=lambda i: rank[i]))
        left = [i for i in range(len(headers)) if i not in dropped]
        sub = _fit(
            [headers[i] for i in left],
            [[r[i] for i in left] for r in rows],
            width,
            separator,
            [rank[i] for i in left],
            [left.index(i) for i in flex if i in left],
            left.index(fold) if fold is not None and fold in left else None,
        )
        fit = Fit(tuple(left[i] for i in sub.keep), sub.widths)


def _fit(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    separator: int,
    importance: Sequence[int] | None,
    flex: Sequence[int],
    fold: int | None,
) -> Fit:
    count = len(headers)
    natural = [max([len(headers[i]), *(len(r[i]) for r in rows)]) for i in range(count)]
    minimum = []
    for i in range(count):
        if i == fold:
            minimum.append(min(natural[i], max(FOLD_MIN, len(headers[i]))))
        elif i in flex:
            minimum.append(min(natural[i], max(FLEX_MIN, len(headers[i]))))
        else:
            minimum.append(natural[i])
    rank = list(importance) if importance is not None else [count - i for i in range(count)]
    keep = list(range(count))

    def total(columns: list[int]) -> int:
        return sum(minimum[i] for i in columns) + separator * (len(columns) - 1)

    for i in sorted(range(1, count), key=lambda c: rank[c]):
        if total(keep) <= width:
            break
        keep.remove(i)
    widths = {i: minimum[i] for i in keep}
    spare = width - total(keep)
    for i in [c for c in keep if c in flex or c == fold]:  # names first, then the fold
        if spare <= 0:
            break
        grow = min(spare, natural[i] - widths[i]) if i != fold else spare
        widths[i] += max(0, grow)
        spare -= max(0, grow)
    if fold in widths:
        widths[fold] = max(minimum[fold], min(widths[fold], natural[fold]))
    if total(keep) > width and keep:  # even the first column alone is too wide
        widths[keep[0]] = max(1, width - (total(keep) - minimum[keep[0]]))
    return Fit(tuple(keep), tuple(widths[i] for i in keep))
