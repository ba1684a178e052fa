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

from pgtail import catalog
from pgtail.catalog import (
    CLIENT_ENCODING,
    connect_interruptibly,
    decoding_options,
    primary_message,
    translate_connect_error,
)


def open_replication(dsn: str, application_name: str) -> Any:
    """A ``LogicalReplicationConnection`` to ``dsn``; a `PgtailError` when it fails."""
    options = decoding_options(dsn)
    try:
        return connect_interruptibly(
            lambda: psycopg2.connect(
                dsn,
                connection_factory=psycopg2.extras.LogicalReplicationConnection,
                application_name=application_name,
                options=options,
                client_encoding=CLIENT_ENCODING,
            ),
            "connect to the server",
        )
    except psycopg2.Error as exc:
        raise translate_connect_error(exc, dsn) from None


class ConnectionLost(Exception):
    """The replication connection or its server went away (``original``: the error that
    said so, when there was one)."""

    def __init__(self, message: str, original: BaseException | None = None) -> None:
        super().__init__(message)
        self.original = original


def lost(exc: BaseException) -> Exception:
    """The exception to raise for a psycopg2 error during streaming.

    A server error that is not about the connection or the server going away (a
    missing publication while decoding, ...) would only happen again after a
    reconnect: it is an error for the user. Without a SQLSTATE the connection is gone
    for a reason the facts checked before reconnecting tell.
    """
    if getattr(exc, "pgcode", None) and not catalog.is_transient(exc):
        return ServerError(exc)
    return ConnectionLost(catalog.describe_disconnect(exc), exc)


class ServerError(Exception):
    """The server reported an error on the replication connection (not a lost one)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(primary_message(exc))
        self.original = exc
