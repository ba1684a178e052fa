"""Client-side event filters: ``--table`` / ``--exclude`` globs, ``--ops``, ``--redact``.

Applied after decoding, before rendering. Filtering never affects what is confirmed:
a transaction whose changes are all filtered out is still confirmed once handled.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pgtail.changes import Change, EncodedRows, Event, Message, Table, Truncate
from pgtail.errors import ConfigurationError

OPS = ("insert", "update", "delete", "truncate", "message")
REDACTED = "***"


def parse_ops(text: str | Iterable[str] | None) -> frozenset[str] | None:
    """``"insert,update"`` -> {"insert", "update"}; None or empty: every op."""
    if text is None:
        return None
    parts = text.split(",") if isinstance(text, str) else [p for t in text for p in t.split(",")]
    ops = {p.strip().lower() for p in parts if p.strip()}
    if not ops:
        return None
    unknown = sorted(ops - set(OPS))
    if unknown:
        raise ConfigurationError(
            f"unknown operation {', '.join(unknown)!s} in --ops",
            hint=f"choose from {','.join(OPS)}",
        )
    return frozenset(ops)


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    regexes = []
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern:
            continue
        if "." not in pattern:
            pattern = "*." + pattern  # a bare table name matches it in any schema
        regexes.append(fnmatch.translate(pattern))
    if not regexes:
        return None
    return re.compile("|".join(f"(?:{r})" for r in regexes))


@dataclass(frozen=True)
class EventFilter:
    """Which events to keep, and which column values to mask."""

    tables: tuple[str, ...] = ()  # glob patterns on schema.table; empty: every table
    exclude: tuple[str, ...] = ()
    ops: frozenset[str] | None = None  # None: every op
    redact: tuple[str, ...] = ()  # column names whose values are masked (keys stay visible)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include_re", _compile(self.tables))
        object.__setattr__(self, "_exclude_re", _compile(self.exclude))
        object.__setattr__(self, "_redact", frozenset(self.redact))
        object.__setattr__(self, "_cache", {})

    @property
    def is_noop(self) -> bool:
        return not (self.tables or self.exclude or self.ops is not None or self.redact)

    def table_selected(self, table: Table) -> bool:
        cache: dict[tuple[str, str], bool] = self._cache  # type: ignore[attr-defined]
        key = (table.schema, table.name)
        found = cache.get(key)
        if found is None:
            name = table.qualified_name
            include: re.Pattern[str] | None = self._include_re  # type: ignore[attr-defined]
            exclude: re.Pattern[str] | None = self._exclude_re  # type: ignore[attr-defined]
            found = (include is None or include.fullmatch(name) is not None) and (
                exclude is None or exclude.fullmatch(name) is None
            )
            cache[key] = found
        return found

    def apply(self, event: Event) -> Event | None:
        """The event to render (possibly redacted or narrowed), or None to drop it."""
        if isinstance(event, Change):
            if self.ops is not None and event.op not in self.ops:
                return None
            if not self.table_selected(event.table):
                return None
            if self.redact:
                return self._redacted(event)
            return event
        if isinstance(event, EncodedRows):
            if self.redact:
                raise TypeError("--redact needs decoded rows, not encoded ones")
            if self.ops is not None and event.op not in self.ops:
                return None
            return event if self.table_selected(event.table) else None
        if isinstance(event, Truncate):
            if self.ops is not None and "truncate" not in self.ops:
                return None
            kept = tuple(t for t in event.tables if self.table_selected(t))
            if not kept:
                return None
            if len(kept) != len(event.tables):
                return dataclasses.replace(event, tables=kept)
            return event
        if isinstance(event, Message):
            if self.ops is not None and "message" not in self.ops:
                return None
            return event
        return event

    def _redacted(self, change: Change) -> Change:
        names: frozenset[str] = self._redact  # type: ignore[attr-defined]
        keys = set(change.table.key_columns)
        masked = names - keys

        def mask(row: dict[str, Any] | None) -> dict[str, Any] | None:
            if row is None or not masked.intersection(row):
                return row
            return {k: (REDACTED if k in masked and v is not None else v) for k, v in row.items()}

        new = mask(change.new)
        old = mask(change.old) if change.old_kind == "full" else change.old
        if new is change.new and old is change.old:
            return change
        return dataclasses.replace(change, new=new, old=old)
