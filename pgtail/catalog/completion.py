"""Names for shell completion: the slots and publications a server has, or nothing.

Shell completion runs on every TAB, so this must be quick and quiet: a short connect
and statement timeout, and any failure (no server configured, a wrong password, a
server that does not answer) gives an empty list rather than an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import psycopg2

from pgtail.catalog.connection import resolve_dsn

CONNECT_TIMEOUT = 2  # seconds: libpq's connect_timeout takes whole seconds (2 at least)
STATEMENT_TIMEOUT_MS = 2000

NameKind = Literal["slot", "logical_slot", "publication"]

_QUERIES: dict[str, str] = {
    "slot": "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s ORDER BY 1",
    # logical slots of the database connected to: the only ones it can stream or peek
    "logical_slot": "SELECT slot_name FROM pg_replication_slots WHERE slot_type = 'logical'"
    " AND database = current_database() AND slot_name LIKE %s ORDER BY 1",
    "publication": "SELECT pubname FROM pg_publication WHERE pubname LIKE %s ORDER BY 1",
}


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def names_for_completion(
    dsn: str | None, kind: NameKind, prefix: str = "", settings: Mapping[str, str] | None = None
) -> list[str]:
    """The names of ``kind`` on the server that start with ``prefix``; [] on any failure.

    ``dsn`` as every command takes it (else ``DATABASE_URL``, else libpq's environment);
    ``settings`` are further libpq keywords (host, port, user, dbname) that override it.
    """
    try:
        conn = psycopg2.connect(
            resolve_dsn(dsn),
            connect_timeout=CONNECT_TIMEOUT,
            application_name="pgtail completion",
            options=f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            **(settings or {}),
        )
    except Exception:  # noqa: BLE001 - completion never fails, it only offers nothing
        return []
    try:
        with conn.cursor() as cur:
            cur.execute(_QUERIES[kind], (_like_prefix(prefix),))
            return [str(row[0]) for row in cur.fetchall()]
    except Exception:  # noqa: BLE001
        return []
    finally:
        conn.close()
