"""Every exception pgtail raises.

`PgtailError` is the root; each subclass carries a message a user can act on.
psycopg2 errors are translated into these once, in `pgtail.catalog.errors`. All of
them stay picklable: Spark ships them between processes, so every constructor
argument is stored in ``args``. `redact` hides passwords in the text of a message.
"""

from __future__ import annotations

import re

_PASSWORD_KV = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_PASSWORD_URI = re.compile(r"(postgres(?:ql)?://[^:/@\s]*:)([^@\s]*)(@)", re.IGNORECASE)


_URI_USERINFO = re.compile(r"^\s*postgres(?:ql)?://([^@/?#]*)@", re.IGNORECASE)
_URI_PASSWORD_PARAM = re.compile(r"[?&]password=([^&#]*)", re.IGNORECASE)


def _passwords_in(dsn: str) -> list[str]:
    """The password texts a connection string holds, as written (read by pattern, not by
    libpq: a malformed string, which libpq's message quotes, has them too)."""
    found = []
    userinfo = _URI_USERINFO.match(dsn)
    if userinfo and ":" in userinfo.group(1):
        found.append(userinfo.group(1).split(":", 1)[1])
    found += _URI_PASSWORD_PARAM.findall(dsn)
    for match in _PASSWORD_KV.finditer(dsn):
        value = match.group(2)
        found.append(value)
        if value.startswith("'") and value.endswith("'") and len(value) > 1:
            found.append(value[1:-1])
    return sorted({p for p in found if p}, key=len, reverse=True)


def redact(text: str, dsn: str | None = None) -> str:
    """Hide passwords in a DSN, URI or error message; with ``dsn``, also every password
    that connection string holds where the message quotes it (libpq quotes a malformed
    URI's password: 'invalid percent-encoded token: "..."')."""
    if dsn:  # as libpq quotes a token (a short password would match anything unquoted)
        for password in _passwords_in(dsn):
            text = text.replace(f'"{password}"', '"********"')
    text = _PASSWORD_KV.sub(r"\1********", text)
    return _PASSWORD_URI.sub(r"\1********\3", text)


class Interrupted(Exception):  # noqa: N818 - a stop, not an error
    """A signal (SIGINT, SIGTERM) cancelled a command that waited on the server; the
    command ended without its effect. ``signum``: that signal."""

    def __init__(self, signum: int | None, what: str = "") -> None:
        super().__init__(signum, what)
        self.signum = signum
        self.what = what  # what was cancelled ("create replication slot 'app'")


class PgtailError(Exception):
    """Root of every error pgtail raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.message = message
        self.hint = hint

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.message, self.hint))

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} ({self.hint})"
        return self.message


def _rebuild(cls: type[PgtailError], message: str, hint: str | None) -> PgtailError:
    return cls(message, hint=hint)


class DecodeError(PgtailError):
    """Bytes that are not valid pgoutput (truncated, garbage, unknown message)."""


class ConfigurationError(PgtailError):
    """Bad user input: an option, an LSN that does not parse, a missing publication name."""


class ConnectionFailed(PgtailError):
    """The server cannot be reached, or refuses us (authentication, missing database)."""


class ServerUnavailable(ConnectionFailed):
    """The server cannot serve us right now but may in a moment: it is starting up,
    shutting down or recovering, refuses connections, has no connection slot free, or
    the connection dropped. The stream retries these; every other error is final."""


class ServerUnreachable(ServerUnavailable):
    """Nothing answers at the address (connection refused, no socket file, a timeout):
    the server is down or restarting -- or the host or port is wrong. Before a run has
    ever reached the server, a typo is as likely as a restart, so it waits only briefly."""


class ServerCapabilityError(PgtailError):
    """The server cannot do what was asked: wal_level, version too old, missing privilege."""


class SlotError(PgtailError):
    """A replication slot is missing, in use, of the wrong plugin, or cannot be created."""


class PublicationError(PgtailError):
    """A publication is missing or cannot be created/altered as asked."""


class ReplicationError(PgtailError):
    """The replication stream failed in a way that reconnecting did not fix."""


class SpillError(PgtailError):
    """A transaction held past the memory bound cannot go to its temporary file."""


class DataLossError(PgtailError):
    """Changes that should have been delivered are no longer available from the slot."""
