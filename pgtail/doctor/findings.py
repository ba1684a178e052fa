"""The doctor's findings: a `Check` with its status, the report's totals and verdict,
and the helpers every room of the doctor shares (sizes as PostgreSQL shows and reads them,
SQL names and literals for the fixes). Pure: no connection, no catalog."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pgtail.errors import ConfigurationError
from pgtail.sqlnames import quote_ident

Status = Literal["ok", "info", "warn", "fail"]
STATUSES: tuple[Status, ...] = ("ok", "info", "warn", "fail")
STATUS_ORDER: dict[str, int] = {status: rank for rank, status in enumerate(STATUSES)}


@dataclass(frozen=True, slots=True)
class Check:
    id: str  # stable identifier: "wal_level", "table.replica_identity", ...
    section: str  # server, role, publication, table, slot
    subject: str  # what it is about: a setting, a role, a table, a slot
    status: Status
    summary: str  # one line of explanation
    fix: str | None = None  # the exact fix (SQL to run), when there is one

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "section": self.section,
            "subject": self.subject,
            "status": self.status,
            "summary": self.summary,
            "fix": self.fix,
        }


def overall(checks: Iterable[Check]) -> Status:
    worst: Status = "ok"
    for check in checks:
        if STATUS_ORDER[check.status] > STATUS_ORDER[worst]:
            worst = check.status
    return worst


def counts(checks: Iterable[Check]) -> dict[str, int]:
    """How many checks of each status (every status present, in order)."""
    found: dict[str, int] = dict.fromkeys(STATUSES, 0)
    for check in checks:
        found[check.status] += 1
    return found


def failed(checks: Iterable[Check], *, strict: bool = False) -> bool:
    """Does the report fail: a fail, or with ``strict`` (for CI) also a warn?"""
    worst = STATUS_ORDER[overall(checks)]
    return worst >= STATUS_ORDER["warn" if strict else "fail"]


def report_dict(checks: Sequence[Check]) -> dict[str, Any]:
    return {
        "status": overall(checks),
        "counts": counts(checks),
        "checks": [c.to_dict() for c in checks],
    }


# --------------------------------------------------------------------------- sizes


def human_bytes(value: int | None) -> str:
    """1536 -> '1.5 kB' (binary multiples, as PostgreSQL's pg_size_pretty)."""
    if value is None:
        return "-"
    size = float(value)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if abs(size) < 1024 or unit == "TB":
            if unit == "bytes":
                return f"{int(size)} bytes"
            return f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|bytes?|kb|mb|gb|tb)?\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """'512MB', '1GB', '4096' -> bytes."""
    match = _SIZE.match(text)
    if not match:
        raise ConfigurationError(f"invalid size {text!r}", hint="write e.g. 512MB, 1GB or 4096")
    number = float(match.group(1))
    unit = (match.group(2) or "b").lower()
    factor = {"b": 1, "byte": 1, "bytes": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3}.get(
        unit, 1024**4
    )
    return int(number * factor)


# --------------------------------------------------------------------------- SQL in the fixes


def ident(name: str) -> str:
    return quote_ident(name)


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
