"""Retrying: a start-up step while the server is away for now, and reconnecting after
a lost replication connection, with the reconnect policy's bounded backoff; a sleep
that a signal ends early.

``session.py`` calls them; `reconnect` takes the running `Session` (as `RetryHost`).
"""

from __future__ import annotations

import contextlib
import select
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pgtail.errors import ReplicationError, ServerUnavailable, ServerUnreachable
from pgtail.lsn import format_lsn
from pgtail.stream.change_stream import Stop
from pgtail.stream.connection import ConnectionLost

if TYPE_CHECKING:
    from pgtail.feedback import Feedback
    from pgtail.stream.config import Logger, ReconnectPolicy, StreamConfig
    from pgtail.stream.policy import StreamPolicy
    from pgtail.stream.signals import Signals


class RetryHost(Protocol):
    """What reconnecting uses of the running `Session` (a Protocol: ``session.py``
    imports this module)."""

    config: StreamConfig
    signals: Signals
    temporary: bool
    feedback: Feedback
    policy: StreamPolicy
    position: int
    received_since_connect: bool
    reconnects: int

    def log(self, message: str) -> None: ...

    def close_connection(self) -> None: ...

    def check_facts(self) -> None: ...

    def connect(self, first: bool) -> None: ...


def retry_start(
    step: Callable[[], None],
    policy: ReconnectPolicy,
    log: Logger,
    signals: Signals,
    close: Callable[[], None],
    *,
    first_contact: bool = False,
) -> None:
    """Run a start-up step; while the server is away for now (`ServerUnavailable`:
    starting up, shutting down, recovering, refusing connections), try it again
    with the reconnect backoff, one line on stderr per attempt.

    ``first_contact``: the run has not reached the server yet. Then a server that
    does not answer at all (`ServerUnreachable`: a wrong port as likely as a restart)
    is tried only for the policy's ``first_contact_wait``, unless it has answered
    in between (it is starting up: worth the whole backoff). ``close`` closes what a
    failed attempt left open."""
    attempt = 0
    began = time.monotonic()
    answered = False  # the server said it is starting up, shutting down, ...
    while True:
        try:
            step()
            return
        except ServerUnavailable as exc:
            close()
            if signals.received is not None:  # a signal while libpq was connecting
                raise Stop("signal") from None
            attempt += 1
            if attempt > policy.attempts:
                if policy.attempts:
                    raise ServerUnavailable(
                        f"{exc.message} (gave up after {policy.attempts} attempts)",
                        hint=exc.hint,
                    ) from None
                raise
            delay = policy.delay(attempt)
            answered = answered or not isinstance(exc, ServerUnreachable)
            wait = policy.first_contact_wait
            if first_contact and not answered and wait is not None:
                left = began + wait - time.monotonic()
                if left <= 0:
                    raise ServerUnreachable(
                        f"{exc.message} (tried for {wait:g}s)",
                        hint="check the host and port, and that the server is running and"
                        " accepts TCP connections there; --reconnect-attempts N waits longer",
                    ) from None
                if attempt == 1:  # one line for the short wait, then the error
                    log(f"pgtail: {exc.message}; trying again for {wait:g}s")
                delay = min(delay, left)
            else:
                log(f"pgtail: {exc.message}; retrying in {delay:.1f}s (attempt {attempt})")
            if sleep_unless_signalled(signals, delay):
                raise Stop("signal") from None


def reconnect(stream: RetryHost, lost: ConnectionLost, attempt: int) -> int:
    """The replication connection was lost: reconnect with the backoff (the facts that
    will not heal checked first) and return the attempts used so far; raise when a
    temporary slot went with the connection, or the attempts run out."""
    stream.close_connection()
    detail = str(lost) or "connection lost"
    if stream.temporary:
        raise ReplicationError(
            f"lost the replication connection ({detail}); the temporary slot went"
            f" with it, so pgtail cannot resume (last confirmed"
            f" {format_lsn(stream.feedback.sent_lsn)})",
            hint="use --slot NAME --create-slot for a slot that survives reconnects",
        ) from None
    stream.policy.resume_after(stream.position)
    if stream.received_since_connect:
        attempt = 0  # it worked for a while: a fresh series of attempts
    announced = False  # the loss is not told yet
    while True:
        attempt += 1
        if attempt > stream.config.reconnect.attempts:
            raise ReplicationError(
                f"lost the replication connection ({detail}) and could not"
                f" reconnect after {stream.config.reconnect.attempts} attempts",
                hint="rerun pgtail: it resumes from the slot's confirmed position",
            ) from None
        delay = stream.config.reconnect.delay(attempt)
        if announced:
            stream.log(
                f"pgtail: replication connection lost ({detail});"
                f" reconnecting in {delay:.1f}s (attempt {attempt})"
            )
        # the first wait is silent: what will not heal (the slot dropped with
        # --force, ...) then ends the run with its one line
        if sleep_unless_signalled(stream.signals, delay):
            raise Stop("signal") from None
        try:
            stream.check_facts()
            if not announced:
                announced = True
                stream.log(
                    f"pgtail: replication connection lost ({detail});"
                    f" reconnecting (attempt {attempt})"
                )
            stream.connect(first=False)
            stream.reconnects += 1
            stream.log("pgtail: reconnected; resuming from the slot's position")
            break
        except ServerUnavailable as exc:
            if not announced:
                announced = True
                stream.log(f"pgtail: replication connection lost ({detail})")
            detail = exc.message
            stream.close_connection()
            continue
    return attempt


def sleep_unless_signalled(signals: Signals, delay: float) -> bool:
    deadline = time.monotonic() + delay
    while True:
        if signals.received is not None:
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        with contextlib.suppress(InterruptedError):
            select.select([signals.fd], [], [], remaining)
        signals.drain()
