"""What the session's helpers (``setup.py``, ``retry.py``) need of the running
session: `typing.Protocol` classes, so they depend on this description rather
than on ``session.py`` (which imports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pgtail import catalog
    from pgtail.feedback import Feedback
    from pgtail.stream.config import StreamConfig
    from pgtail.stream.policy import StreamPolicy
    from pgtail.stream.publications import HeldPublication
    from pgtail.stream.signals import Signals
    from pgtail.values import UserType


class SetupHost(Protocol):
    """What preflight, the facts checked before a reconnect and slot creation read of
    the session, and what preflight finds out into it."""

    config: StreamConfig
    dsn: str
    slot: str
    temporary: bool
    feedback: Feedback
    server: catalog.ServerInfo | None
    publications: tuple[str, ...]
    held_publication: HeldPublication | None
    proto_version: int
    options: dict[str, str]
    exported: tuple[str, int] | None

    def log(self, message: str) -> None: ...

    def lookup_types(self, type_oids: Sequence[int]) -> dict[int, UserType]: ...


class RetryHost(Protocol):
    """What retrying a start-up step and reconnecting use of the session."""

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

