"""Client-side event filters: ``--table`` / ``--exclude`` globs, ``--ops``, ``--redact``.

Applied after decoding, before rendering. Filtering never affects what is confirmed:
a transaction whose changes are all filtered out is still confirmed once handled.

``--table`` and ``--exclude`` take ``table`` or ``schema.table`` globs; ``--redact``
takes ``column``, ``table.column`` or ``schema.table.column`` globs. A pattern that
matches nothing the publications send is a silent no-op (a table never shown, a column
never masked): `EventFilter.unmatched` names them, for a warning at start.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping
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


def _table_regex(pattern: str) -> str | None:
    """The regex of one ``--table`` / ``--exclude`` glob on ``schema.table``."""
    pattern = pattern.strip()
    if not pattern:
        return None
    if "." not in pattern:
        pattern = "*." + pattern  # a bare table name matches it in any schema
    return fnmatch.translate(pattern)


def _compile(patterns: Iterable[str]) -> re.Pattern[str] | None:
    regexes = [r for r in map(_table_regex, patterns) if r is not None]
    if not regexes:
        return None
    return re.compile("|".join(f"(?:{r})" for r in regexes))


@dataclass(frozen=True, slots=True)
class RedactRule:
    """One ``--redact`` pattern: a column glob, in tables matching the table and schema
    globs (None: any)."""

    pattern: str
    schema: re.Pattern[str] | None
    table: re.Pattern[str] | None
    column: re.Pattern[str]

    def matches(self, schema: str, table: str, column: str) -> bool:
        return (
            self.column.fullmatch(column) is not None
            and (self.table is None or self.table.fullmatch(table) is not None)
            and (self.schema is None or self.schema.fullmatch(schema) is not None)
        )


def parse_redact(pattern: str) -> RedactRule:
    """``column``, ``table.column`` or ``schema.table.column`` (each part a glob)."""
    parts = pattern.strip().split(".")
    if len(parts) > 3 or not all(parts):
        raise ConfigurationError(
            f"--redact {pattern!r}: expected column, table.column or schema.table.column"
        )
    globs = [re.compile(fnmatch.translate(p)) for p in parts]
    schema, table = ([None] * (3 - len(globs)) + globs)[:2]
    return RedactRule(pattern.strip(), schema, table, globs[-1])


@dataclass(frozen=True)
class EventFilter:
    """Which events to keep, and which column values to mask."""

    tables: tuple[str, ...] = ()  # glob patterns on schema.table; empty: every table
    exclude: tuple[str, ...] = ()
    ops: frozenset[str] | None = None  # None: every op
    # columns whose values are masked (keys stay visible): column, table.column or
    # schema.table.column globs
    redact: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include_re", _compile(self.tables))
        object.__setattr__(self, "_exclude_re", _compile(self.exclude))
        object.__setattr__(
            self, "_redact", tuple(parse_redact(p) for p in self.redact if p.strip())
        )
        object.__setattr__(self, "_cache", {})
        # id(table) -> (table, its masked columns); the table is kept so the id stays its
        object.__setattr__(self, "_masked", {})

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

    def masked_columns(self, table: Table) -> frozenset[str]:
        """The columns of ``table`` whose values --redact masks: those a pattern matches,
        less the replica identity key (keys stay visible)."""
        rules: tuple[RedactRule, ...] = self._redact  # type: ignore[attr-defined]
        keys = set(table.key_columns)
        return frozenset(
            c.name
            for c in table.columns
            if c.name not in keys
            and any(r.matches(table.schema, table.name, c.name) for r in rules)
        )

    def unmatched(
        self, published: Mapping[tuple[str, str], Collection[str]]
    ) -> list[tuple[str, str]]:
        """The ``--table``, ``--exclude`` and ``--redact`` patterns that match nothing in
        ``published`` ((schema, table) -> the columns sent), as (option, pattern)."""
        names = [f"{schema}.{table}" for schema, table in published]
        out = []
        for option, patterns in (("--table", self.tables), ("--exclude", self.exclude)):
            for pattern in patterns:
                regex = _table_regex(pattern)
                if regex is not None and not any(re.fullmatch(regex, n) for n in names):
                    out.append((option, pattern.strip()))
        rules: tuple[RedactRule, ...] = self._redact  # type: ignore[attr-defined]
        for rule in rules:
            if not any(
                rule.matches(schema, table, column)
                for (schema, table), columns in published.items()
                for column in columns
            ):
                out.append(("--redact", rule.pattern))
        return out

    def _redacted(self, change: Change) -> Change:
        table = change.table
        found = self._masked.get(id(table))  # type: ignore[attr-defined]
        if found is None or found[0] is not table:
            found = (table, self.masked_columns(table))
            self._masked[id(table)] = found  # type: ignore[attr-defined]
        masked: frozenset[str] = found[1]

        def mask(row: dict[str, Any] | None) -> dict[str, Any] | None:
            if row is None or not masked.intersection(row):
                return row
            return {k: (REDACTED if k in masked and v is not None else v) for k, v in row.items()}

        new = mask(change.new)
        old = mask(change.old) if change.old_kind == "full" else change.old
        if new is change.new and old is change.old:
            return change
        return dataclasses.replace(change, new=new, old=old)
