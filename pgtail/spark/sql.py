"""The pgoutput options the Spark source reads a slot with.

The statements themselves (slot state, WAL position, peeking a slot up to an LSN,
advancing it) are `pgtail.catalog`'s (`pgtail.catalog.decoding`): the Spark source
builds no SQL and opens connections only through the catalog, as ``pgtail-spark``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgtail.errors import ServerCapabilityError
from pgtail.sqlnames import publication_names_option

APPLICATION_NAME = "pgtail-spark"


def missing_slot_hint(slot: str) -> str:
    """What to do about a slot the source was told to read that does not exist."""
    return (
        f"create it with: pgtail slot create {slot} --publication <pub> "
        f"(or SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput'))"
    )


# the hint of a missing publication ({name}: the first one missing)
MISSING_PUBLICATION_HINT = (
    "create it: CREATE PUBLICATION {name} FOR TABLE ... (or fix the publication option)"
)


def quote_publication_names(names: Sequence[str]) -> str:
    """``publication_names`` as pgoutput parses it (SplitIdentifierString): always quoted,
    so names keep their case and may hold commas."""
    return publication_names_option(names)


def plugin_options(
    publications: Sequence[str], *, binary: bool, messages: bool, server_version: int
) -> list[str]:
    options = ["proto_version", "1", "publication_names", quote_publication_names(publications)]
    if server_version >= 140000:
        options += ["messages", "true" if messages else "false"]
        if binary:
            options += ["binary", "true"]
    elif binary:
        raise ServerCapabilityError(
            "binary transfer needs PostgreSQL 14 or later", hint="set binary=false"
        )
    return options
