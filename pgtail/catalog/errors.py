"""The one translation of psycopg2 errors into pgtail errors (`pgtail.errors`).

A server error is classified by its SQLSTATE (``exc.pgcode``) first; the message text
is read only to name the object a generic code is about (a slot or a publication) and
where no code exists (libpq's own errors while connecting, a lost connection). Each
caller gets the wording that fits what it was doing: a catalog statement
(`translate_error`), a slot read through SQL functions (`translate_slot_error`), the
replication stream (`translate_replication_error`), or connecting
(`translate_connect_error`).

What is worth retrying is decided here too: `is_transient` (a server or connection
away for now -- starting up, shutting down, recovering, refusing connections -- as
opposed to a condition that will not heal: a dropped slot or publication, a revoked
privilege, a wrong password), and `ServerUnavailable` is the pgtail error that says
so. `describe_disconnect` words a lost connection in PostgreSQL's terms, never in
psycopg2's or libpq's internal ones.
"""

from __future__ import annotations

import os
import re
import shlex
from typing import Literal

from pgtail.errors import (
    ConfigurationError,
    ConnectionFailed,
    DataLossError,
    PgtailError,
    PublicationError,
    ReplicationError,
    ServerCapabilityError,
    ServerUnavailable,
    ServerUnreachable,
    SlotError,
    redact,
)

# SQLSTATEs pgtail tells apart (PostgreSQL's errcodes.txt)
INSUFFICIENT_PRIVILEGE = "42501"
UNDEFINED_OBJECT = "42704"
DUPLICATE_OBJECT = "42710"
OBJECT_IN_USE = "55006"  # replication slot "x" is active for PID n
OBJECT_NOT_IN_PREREQUISITE_STATE = "55000"  # wal_level too low, slot invalidated, ...
CONFIGURATION_LIMIT_EXCEEDED = "53400"  # all replication slots are in use
UNDEFINED_FILE = "58P01"  # requested WAL segment has already been removed
ADMIN_SHUTDOWN = "57P01"  # pg_terminate_backend, or a fast/smart shutdown
CRASH_SHUTDOWN = "57P02"  # another server process crashed: every session is ended
CANNOT_CONNECT_NOW = "57P03"  # starting up, shutting down, in recovery

# SQLSTATEs of a server or connection that is away for now: class 08 (connection
# exception), the shutdowns and "cannot connect now" (57P01-57P03), an idle session
# timeout (57P05), class 53 (insufficient resources: too many connections, out of
# memory) and the system errors of class 58 but for a removed WAL segment (58P01,
# which never comes back).
_TRANSIENT_SQLSTATES = ("08", "57P01", "57P02", "57P03", "57P05", "53", "58000", "58030")

# libpq reports a failed connection attempt without a SQLSTATE: its text is all there
# is. The server's own reasons for turning a connection away for now...
_UNAVAILABLE_TEXTS = (
    "the database system is starting up",
    "the database system is not yet accepting connections",
    "the database system is not accepting connections",
    "the database system is shutting down",
    "the database system is in recovery mode",
    "sorry, too many clients already",
    "remaining connection slots are reserved",
    "number of requested standby connections exceeds max_wal_senders",  # one lingers
)
# ...and the network's: nothing listening (yet), no answer, the socket file missing
# while the server restarts. A host name that does not resolve is not among them.
_UNREACHABLE_TEXTS = (
    "connection refused",
    "could not connect to server",
    "could not send",
    "could not receive",
    "timeout expired",
    "connection timed out",
    "no such file or directory",
    "server closed the connection unexpectedly",
    "connection reset by peer",
)
# How psycopg2 and libpq report a connection the server closed (no SQLSTATE): the
# wording users should see instead, in PostgreSQL's terms.
_DISCONNECT_WORDING = (
    # the walsender ended COPY: it does so when the server shuts down
    ("no copy in progress", "the server ended the replication stream: it is shutting down"),
    # the socket closed with no error message: a crash, an immediate shutdown, a kill
    (
        "and no message from the libpq",
        "the server closed the replication connection: it stopped or restarted",
    ),
    (
        "server closed the connection unexpectedly",
        "the server closed the replication connection: it stopped or restarted",
    ),
    ("eof detected", "the server closed the replication connection: it stopped or restarted"),
    ("connection already closed", "the replication connection was closed"),
    ("connection closed", "the replication connection was closed"),
    ("connection reset by peer", "the network connection to the server was reset"),
    ("broken pipe", "the network connection to the server was broken"),
    ("connection timed out", "the network connection to the server timed out"),
    ("file descriptor", "the replication connection was closed"),
)

Kind = Literal[
    "slot_busy",
    "slot_missing",
    "publication_missing",
    "wal_removed",
    "privilege",
    "wal_level",
    "slots_full",
]


def primary_message(exc: BaseException) -> str:
    """The server's primary message, else the first line of the error (passwords hidden)."""
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    if primary:
        return str(primary)
    text = redact(str(exc).strip())
    return text.splitlines()[0] if text else type(exc).__name__


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` says the server or the connection is away for now (worth retrying),
    rather than a condition that will not heal (a missing slot, publication, database or
    privilege, a wrong password).

    By SQLSTATE; without one (libpq's own errors), by its text.
    """
    code = getattr(exc, "pgcode", None) or ""
    if code:
        return code.startswith(_TRANSIENT_SQLSTATES)
    lower = str(exc).lower()
    return (
        any(text in lower for text in _UNAVAILABLE_TEXTS)
        or any(text in lower for text in _UNREACHABLE_TEXTS)
        or any(text in lower for text, _ in _DISCONNECT_WORDING)
    )


def describe_disconnect(exc: BaseException) -> str:
    """What ended a replication connection, in PostgreSQL's terms (never psycopg2's
    "error with status PGRES_COPY_BOTH and no message from the libpq")."""
    code = getattr(exc, "pgcode", None) or ""
    primary = primary_message(exc)
    if code == ADMIN_SHUTDOWN:
        return "terminated by administrator command: pg_terminate_backend or a server shutdown"
    if code == CRASH_SHUTDOWN:
        return "the server is restarting after a crash of another server process"
    if code:
        return primary
    lower = primary.lower()
    for text in _UNAVAILABLE_TEXTS:
        if text in lower:
            return text
    for text, wording in _DISCONNECT_WORDING:
        if text in lower:
            return wording
    return primary


def classify(exc: BaseException) -> Kind | None:
    """What went wrong, by SQLSTATE when the error has one, else by its text."""
    code = getattr(exc, "pgcode", None) or ""
    lower = primary_message(exc).lower()
    if code:
        if code == OBJECT_IN_USE and "replication slot" in lower:
            return "slot_busy"
        if code == UNDEFINED_OBJECT:
            if "replication slot" in lower:
                return "slot_missing"
            if "publication" in lower and "not part of the publication" not in lower:
                return "publication_missing"
        if code == UNDEFINED_FILE:
            return "wal_removed"
        if code == INSUFFICIENT_PRIVILEGE:
            return "privilege"
        if code == OBJECT_NOT_IN_PREREQUISITE_STATE and "wal_level" in lower:
            return "wal_level"
        if code == CONFIGURATION_LIMIT_EXCEEDED:
            return "slots_full"
    # no code (or one that does not say): the message is all there is
    if "is active for pid" in lower:
        return "slot_busy"
    if "does not exist" in lower and "replication slot" in lower:
        return "slot_missing"
    if "publication" in lower and "does not exist" in lower:
        return "publication_missing"
    if "requested wal segment" in lower or "has been removed" in lower:
        return "wal_removed"
    if "permission denied" in lower or "must be superuser or replication role" in lower:
        return "privilege"
    if "logical decoding requires" in lower or "wal_level" in lower:
        return "wal_level"
    if "all replication slots are in use" in lower:
        return "slots_full"
    return None


def translate_error(exc: BaseException) -> PgtailError:
    """A server error from a catalog statement -> the pgtail error a user can act on."""
    diag = getattr(exc, "diag", None)
    primary = (
        getattr(diag, "message_primary", None) or str(exc).strip().splitlines()[0]
        if str(exc).strip()
        else type(exc).__name__
    )
    server_hint = getattr(diag, "message_hint", None)
    detail = getattr(diag, "message_detail", None)
    message = primary if not detail else f"{primary}: {detail}"
    code = getattr(exc, "pgcode", None) or ""
    lower = primary.lower()
    if code == INSUFFICIENT_PRIVILEGE:
        return ServerCapabilityError(message, hint=server_hint or _privilege_hint(lower))
    if code == OBJECT_NOT_IN_PREREQUISITE_STATE and "wal_level" in lower:
        return ServerCapabilityError(
            message, hint="ALTER SYSTEM SET wal_level = logical; then restart PostgreSQL"
        )
    if code == CONFIGURATION_LIMIT_EXCEEDED:
        return ServerCapabilityError(
            message,
            hint=server_hint
            or "free a slot (pgtail slot drop NAME) or raise max_replication_slots and restart",
        )
    kind = classify(exc)
    if kind == "slot_busy":
        return slot_busy_error(_quoted_name(primary) or "?", _pid(primary))
    if kind == "slot_missing" and _quoted_name(primary):
        return slot_missing_error(_quoted_name(primary) or "?")
    if kind == "publication_missing" and _quoted_name(primary):
        return publication_missing_error(_quoted_name(primary) or "?")
    if "replication slot" in lower:
        if "was not created in this database" in lower:
            return SlotError(message, hint="connect to the database the slot was created in")
        return SlotError(message, hint=server_hint)
    if "publication" in lower and code in (UNDEFINED_OBJECT, DUPLICATE_OBJECT, "55000", "42P17"):
        return PublicationError(message, hint=server_hint)
    if code[:2] in ("42", "22", "0A"):  # syntax, data, feature not supported: our input
        return ConfigurationError(message, hint=server_hint)
    return PgtailError(message, hint=server_hint)


def _privilege_hint(lower: str) -> str:
    if "replication" in lower:
        return "ALTER ROLE <role> REPLICATION (or grant rds_replication on RDS)"
    if "superuser" in lower:
        return "connect as a superuser for FOR ALL TABLES / FOR TABLES IN SCHEMA"
    if "owner" in lower:
        return "connect as the table owner"
    return "connect as a role with the needed privilege"


def slot_busy(exc: BaseException) -> bool:
    """The slot is in use by another process (worth retrying for a moment)."""
    return classify(exc) == "slot_busy"


def translate_slot_error(exc: BaseException, slot: str) -> PgtailError:
    """An error from a slot function (peek, advance) read through SQL, as a pgtail error."""
    raw = str(exc).strip()
    text = redact(raw).splitlines()[0] if raw else type(exc).__name__
    kind = classify(exc)
    if kind == "slot_busy":
        return SlotError(
            f"replication slot {slot!r} is in use by another process ({text})",
            hint=(
                "only one reader per slot: stop the other pgtail/Spark reader; in Spark "
                "set spark.speculation=false so no two tasks read one slot at once"
            ),
        )
    if kind == "slot_missing":
        return slot_missing_error(slot)
    if kind == "publication_missing":
        return PublicationError(text, hint="create the publication or fix the publication option")
    if kind == "privilege":
        return ServerCapabilityError(
            f"not allowed to use replication slot {slot!r}: {text}",
            hint="the role needs the REPLICATION attribute",
        )
    if kind == "wal_level":
        return ServerCapabilityError(text, hint="set wal_level = logical and restart")
    return ReplicationError(f"reading replication slot {slot!r} failed: {text}")


def translate_replication_error(
    exc: BaseException, slot: str, *, during: str = "START_REPLICATION"
) -> PgtailError:
    """An error on the replication connection (START_REPLICATION, or while streaming;
    ``during="reconnect"``: START_REPLICATION again after a lost connection).

    `ServerUnavailable` when the server or the connection is away for now (`is_transient`).
    """
    text = primary_message(exc)
    if is_transient(exc):
        return ServerUnavailable(describe_disconnect(exc))
    kind = classify(exc)
    if kind == "slot_busy":
        return SlotError(text, hint="stop the other consumer, or pg_terminate_backend(<that PID>)")
    if kind == "slot_missing":
        if during != "START_REPLICATION":
            return slot_dropped(slot)
        return SlotError(text, hint="add --create-slot, or: pgtail slot create " + slot)
    if getattr(exc, "pgcode", None) == OBJECT_NOT_IN_PREREQUISITE_STATE and (
        "can no longer get changes" in text.lower()
    ):
        detail = getattr(getattr(exc, "diag", None), "message_detail", None)
        return DataLossError(
            f"replication slot {slot!r} was invalidated" + (f": {detail}" if detail else ""),
            hint="drop and re-create the slot; changes since its position are gone",
        )
    if kind == "publication_missing" and during != "START_REPLICATION":
        # Only PostgreSQL 17 and older stop here (18 skips a missing publication), and
        # there creating it again does not help: the slot decodes each change with the
        # catalog as it was then, where the new publication does not exist yet.
        return PublicationError(
            f"{text} (dropped while pgtail was streaming it)",
            hint="the slot cannot decode past the DROP, even once the publication exists"
            " again: stream it with --publication naming one that existed before the drop,"
            " or create the publication again, then move the slot past that with"
            f" pgtail slot advance {slot} LSN (e.g. pg_current_wal_lsn(); the changes in"
            " between are lost)",
        )
    if kind == "publication_missing" or "publication" in text.lower():
        return PublicationError(text)
    if kind == "wal_removed":
        return DataLossError(text)
    if during != "START_REPLICATION":
        return ReplicationError(f"the server stopped the replication stream: {text}")
    return ReplicationError(f"START_REPLICATION failed: {text}")


def slot_dropped(slot: str) -> SlotError:
    """The slot a run was streaming is gone (dropped while it ran)."""
    return SlotError(
        f"replication slot {slot!r} was dropped while pgtail was streaming it",
        hint=f"pgtail slot create {slot} starts a new slot at the current WAL position;"
        " changes since the last confirmed position are not in it",
    )


def translate_create_slot_error(exc: BaseException, slot: str) -> SlotError:
    """CREATE_REPLICATION_SLOT failed (on the replication connection)."""
    text = primary_message(exc)
    if classify(exc) == "slots_full":
        return SlotError(
            f"cannot create replication slot: {text}",
            hint="drop unused slots (pgtail slot list) or raise max_replication_slots",
        )
    return SlotError(f"cannot create replication slot {slot!r}: {text}")


def describe_target(dsn: str) -> str:
    """A short, password-free description of where we connect, for messages."""
    try:
        from psycopg2.extensions import parse_dsn

        params = parse_dsn(dsn) if dsn else {}
    except Exception:
        return redact(dsn) or "(libpq defaults)"
    host = params.get("host") or os.environ.get("PGHOST") or "local socket"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or "(default database)"
    return f"{host}:{port}/{dbname}"


def translate_connect_error(exc: BaseException, dsn: str) -> PgtailError:
    """A psycopg2 error raised while connecting -> a pgtail error with a fix.

    By text: libpq reports these before (or without) a server error, so there is no
    SQLSTATE to go by. A server that is away for now (starting up, shutting down,
    recovering, out of connection slots, not listening yet) is a `ServerUnavailable`.
    """
    raw = redact(str(exc).strip(), dsn)
    first = raw.splitlines()[0] if raw else type(exc).__name__
    target = describe_target(dsn)
    lower = raw.lower()
    for text in _UNAVAILABLE_TEXTS:
        if text in lower:
            return ServerUnavailable(
                f"PostgreSQL at {target} is not accepting connections: {text}",
                hint="it is starting up, shutting down or recovering, or has no connection"
                " slot free: try again in a moment",
            )
    if "password authentication failed" in lower or "no password supplied" in lower:
        return ConnectionFailed(
            f"authentication failed for {target}: {first}",
            hint="check the user and password (PGPASSWORD, ~/.pgpass or the DSN)",
        )
    if "does not exist" in lower and "database" in lower:
        return ConnectionFailed(
            f"{first} on {target}", hint="check dbname in the DSN or PGDATABASE"
        )
    refused_replication = "no pg_hba.conf entry for replication connection" in lower
    if (
        "must be superuser or replication role" in lower
        or "permission denied to start wal sender" in lower
        or refused_replication
    ):
        return ServerCapabilityError(
            f"the role may not open a replication connection: {first}",
            hint="ALTER ROLE <role> REPLICATION, and allow 'replication' in pg_hba.conf",
        )
    if "no pg_hba.conf entry" in lower:
        return ConnectionFailed(
            f"the server refused the connection: {first}",
            hint="add a pg_hba.conf entry for this host/user/database",
        )
    if "could not translate host name" in lower:
        return ConnectionFailed(
            f"cannot reach PostgreSQL at {target}: {first}",
            hint="is the server running and accepting TCP connections on that host and port?",
        )
    if "could not connect" in lower or "timeout" in lower or is_transient(exc):
        return ServerUnreachable(
            f"cannot reach PostgreSQL at {target}: {first}",
            hint="is the server running and accepting TCP connections on that host and port?",
        )
    if "invalid dsn" in lower or 'missing "="' in lower or "invalid connection option" in lower:
        return ConnectionFailed(
            f"invalid connection string: {first}", hint="use key=value pairs or a postgresql:// URI"
        )
    return ConnectionFailed(f"cannot connect to {target}: {first}")


# --------------------------------------------------------------------------- one message per
# condition: every command that meets a missing or busy slot, a missing publication or an
# invalid slot name says it with these words (a caller may pass a hint that fits it better,
# such as the stream's --create-slot).

_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_PID = re.compile(r"\bPID (\d+)", re.IGNORECASE)
SLOT_NAME_MAX = 63  # NAMEDATALEN - 1
_SLOT_NAME = re.compile(r"[a-z0-9_]+")


def _quoted_name(text: str) -> str | None:
    match = _QUOTED.search(text)
    return match.group(1).replace('""', '"') if match else None


def _pid(text: str) -> int | None:
    match = _PID.search(text)
    return int(match.group(1)) if match else None


def slot_missing_error(slot: str, hint: str | None = None) -> SlotError:
    """There is no replication slot of that name."""
    return SlotError(
        f"replication slot {slot!r} does not exist",
        hint=hint or f"create it: pgtail slot create {slot} (pgtail slot list shows the slots)",
    )


def slot_busy_error(slot: str, pid: int | None) -> SlotError:
    """Another process (a walsender, or a session decoding through SQL) holds the slot."""
    if pid is None:
        return SlotError(
            f"replication slot {slot!r} is in use by another process",
            hint="stop the other consumer (pgtail slot list shows its PID)",
        )
    return SlotError(
        f"replication slot {slot!r} is active for PID {pid}",
        hint=f"stop the other consumer, or SELECT pg_terminate_backend({pid})",
    )


def publication_missing_error(
    name: str, database: str | None = None, hint: str | None = None
) -> PublicationError:
    """There is no publication of that name (in the connected database)."""
    where = f" in database {database!r}" if database else ""
    return PublicationError(
        f"publication {name!r} does not exist{where}",
        hint=hint
        or "pgtail publication list shows the publications; "
        f"create it with: pgtail publication create {shlex.quote(name)} --table ...",
    )


def check_slot_name(name: str) -> str:
    """``name`` if the server would accept it as a replication slot name, else the error
    (the server's rule: 1 to 63 lower case letters, digits and underscores)."""
    if not _SLOT_NAME.fullmatch(name) or len(name) > SLOT_NAME_MAX:
        raise SlotError(
            f"invalid replication slot name {name!r}",
            hint=f"a slot name is 1 to {SLOT_NAME_MAX} lower case letters, digits and _",
        )
    return name
