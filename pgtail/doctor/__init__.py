"""`pgtail doctor` checks: facts read by `pgtail.catalog` in, check results out.

Pure: no connection, no clock; of the catalog it knows only the fact types
(`pgtail.catalog.facts`). The catalog's guarded DDL calls back into
`publication_problems` and `identity_breaks`, handed to it by the command.

Each check has a status by its consequence, one line of explanation and, when
something should change, the one fix for it (SQL that can be run as given):
  fail  a change will be rejected at the source or lost, or pgtail cannot stream
  warn  it works, but a user will be surprised (WAL piling up, unchanged TOAST)
  info  merely worth knowing (what FULL costs, privileges the task does not need)
  ok    checked and fine
A healthy setup has neither fail nor warn. Also answers "what will the stream carry
for this table" for `pgtail identity`.

One module per room of the report: `findings` (the Check, the verdict, sizes),
`server` (settings and slots), `slot_causes` (why a slot holds WAL), `role`
(privileges), `tables` (replica identity, TOAST, row filters, column lists,
partitioning) and `publications`; `report.evaluate` puts them in report order. The
package's names are imported when first used (`pgtail._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail._lazy import lazy_names

# the package's names, imported when first used (`pgtail._lazy`)
if TYPE_CHECKING:
    from pgtail.doctor.findings import (
        STATUS_ORDER,
        STATUSES,
        Check,
        Status,
        counts,
        failed,
        human_bytes,
        overall,
        parse_size,
        report_dict,
    )
    from pgtail.doctor.publications import (
        publication_checks,
        publication_problems,
        run_publication_checks,
    )
    from pgtail.doctor.report import evaluate
    from pgtail.doctor.role import role_checks
    from pgtail.doctor.server import server_checks, slot_checks
    from pgtail.doctor.tables import (
        Identity,
        UnchangedToast,
        identity_breaks,
        identity_fix,
        identity_of,
        identity_remedy,
        stream_carries,
        table_checks,
        table_publication_checks,
        unchanged_toast,
        usable_index,
    )


__all__ = [
    "STATUSES",
    "STATUS_ORDER",
    "Check",
    "Identity",
    "Status",
    "UnchangedToast",
    "counts",
    "evaluate",
    "failed",
    "human_bytes",
    "identity_breaks",
    "identity_fix",
    "identity_of",
    "identity_remedy",
    "overall",
    "parse_size",
    "publication_checks",
    "publication_problems",
    "report_dict",
    "role_checks",
    "run_publication_checks",
    "server_checks",
    "slot_checks",
    "stream_carries",
    "table_checks",
    "table_publication_checks",
    "unchanged_toast",
    "usable_index",
]

if not TYPE_CHECKING:  # mypy reads the imports above, and flags a name not there
    __getattr__, __dir__ = lazy_names(__name__)
