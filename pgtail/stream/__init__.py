"""Stream a replication slot with pgoutput, render every change, confirm progress.

``run(StreamConfig(...), out) -> StreamResult`` is the library entry point (the CLI and
the demo call it). The package's rooms:

- ``session``: the replication session -- connect, START_REPLICATION, the read loop,
  keepalives, reconnects, signals (``signals``), and ``run`` itself;
- ``writer``: the writer thread and the ``--output`` state file (`OutputState`);
- ``policy``: `StreamPolicy`, the pure rules for ``--end``, skipping what was already
  written, ``--max-changes`` and batching (beside the pure `pgtail.feedback.Feedback`);
- ``options``: the pgoutput protocol version and START_REPLICATION options;
- ``config``: `StreamConfig`, `ReconnectPolicy`, `StreamResult`;
- ``publications``: which publications to read (every statement is the catalog's);
- ``bounded``: `read_range`, the changes committed between two LSNs, read through the
  replication protocol without moving the slot (the Spark executors' read).
"""

from __future__ import annotations

from pgtail.stream.config import (
    FIRST_CONTACT_WAIT,
    Logger,
    ReconnectPolicy,
    StopReason,
    StreamConfig,
    Streaming,
    StreamResult,
)
from pgtail.stream.policy import StreamPolicy
from pgtail.stream.protocol_options import max_proto_version
from pgtail.stream.session import run
from pgtail.stream.writer import OutputState

__all__ = [
    "FIRST_CONTACT_WAIT",
    "Logger",
    "OutputState",
    "ReconnectPolicy",
    "StopReason",
    "StreamConfig",
    "StreamPolicy",
    "StreamResult",
    "Streaming",
    "max_proto_version",
    "run",
]
