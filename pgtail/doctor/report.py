"""Every check of `pgtail doctor`, in the order of its report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail.doctor.publications import publication_checks, run_publication_checks
from pgtail.doctor.role import role_checks
from pgtail.doctor.server import server_checks, slot_checks

if TYPE_CHECKING:
    from pgtail.catalog.facts import DoctorFacts
    from pgtail.doctor.findings import Check


def evaluate(facts: DoctorFacts, *, wal_warn_bytes: int | None = None) -> list[Check]:
    """Every check, in report order: server, role, publications and tables, slots.

    An inactive slot warns once it holds WAL past max_wal_size (the server would
    otherwise have recycled it), or past ``wal_warn_bytes`` when given."""
    return [
        *server_checks(facts),
        *role_checks(facts),
        *publication_checks(facts),
        *slot_checks(facts, wal_warn_bytes),
        *run_publication_checks(facts),
    ]
