"""How the Spark source reads a slot: the pgoutput options it reads with, the name it
connects as, and the hints of a missing slot or publication.

The statements themselves (slot state, WAL position, copying and advancing a slot) are
`pgtail.catalog`'s, the replication connection is `pgtail.stream.bounded`'s: the Spark
source builds no SQL and opens connections only through them, as ``pgtail-spark``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pgtail.catalog import ServerInfo
from pgtail.errors import ServerCapabilityError

APPLICATION_NAME = "pgtail-spark"


def missing_slot_hint(slot: str) -> str:
    """What to do about a slot the source was told to read that does not exist."""
    # a pgoutput slot has no publication of its own: the source names them when it reads
    return (
        f"create it with: pgtail slot create {slot} "
        f"(or SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput'))"
    )


# the hint of a missing publication ({name}: the first one missing)
MISSING_PUBLICATION_HINT = (
    "create it: CREATE PUBLICATION {name} FOR TABLE ... (or fix the publication option)"
)


def replication_options(
    server: ServerInfo,
    publications: Sequence[str],
    *,
    binary: bool,
    messages: bool,
    streaming: bool,
) -> tuple[int, dict[str, str]]:
    """The protocol version and START_REPLICATION options an executor reads with: those
    ``pgtail stream`` would choose (`pgtail.stream.protocol_options.replication_options`) -- the
    highest protocol version, messages and streaming of large transactions from 14 on."""
    from pgtail.stream.config import StreamConfig
    from pgtail.stream.protocol_options import replication_options as stream_options

    if binary and server.major < 14:
        raise ServerCapabilityError(
            "binary transfer needs PostgreSQL 14 or later", hint="set binary=false"
        )
    config = StreamConfig(
        binary=binary,
        messages=messages and server.major >= 14,
        streaming="on" if streaming and server.major >= 14 else "off",
    )
    return stream_options(config, server, tuple(publications))
