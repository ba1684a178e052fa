"""Opening a replication connection: the one place that does it.

`open_replication` is what `pgtail stream` (`session.py`), its ``--snapshot`` export
(`snapshot.py`) and the Spark range read (`bounded.py`) connect with: psycopg2's
``LogicalReplicationConnection`` with the decoding session options and the client
encoding every reader expects, and a connect error translated once.
"""

from __future__ import annotations

from typing import Any

import psycopg2
import psycopg2.extras

from pgtail.catalog import CLIENT_ENCODING, decoding_options, translate_connect_error


def open_replication(dsn: str, application_name: str) -> Any:
    """A ``LogicalReplicationConnection`` to ``dsn``; a `PgtailError` when it fails."""
    try:
        return psycopg2.connect(
            dsn,
            connection_factory=psycopg2.extras.LogicalReplicationConnection,
            application_name=application_name,
            options=decoding_options(dsn),
            client_encoding=CLIENT_ENCODING,
        )
    except psycopg2.Error as exc:
        raise translate_connect_error(exc, dsn) from None
