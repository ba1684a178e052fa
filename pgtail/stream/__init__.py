"""Stream a replication slot with pgoutput, render every change, confirm progress.

``run(StreamConfig(...), out) -> StreamResult`` is the library entry point (the CLI and
the demo call it). The package's rooms:

- ``session``: the replication session -- START_REPLICATION, what it confirms and when
  it stops, reconnects, and ``run`` itself; ``signals``: SIGINT, SIGTERM and SIGHUP;
- ``reader``: `Reader`, the one read loop of a replication connection (keepalives,
  status updates, the wait on the socket, errors) that the session and ``bounded`` pull;
- ``connection``: opening a replication connection (the one place that does it);
- ``ddl``: the catalog facts SQL replay's DDL needs, looked up before a batch renders;
- ``waiting``: waiting on the server inside a run (a signal ends the wait);
- ``setup``: preflight before the stream starts, and CREATE_REPLICATION_SLOT;
- ``change_stream``: `ChangeStream`, payloads in, batches of events out (sans-IO);
- ``writer``: the writer thread and the ``--output`` state file (`OutputState`);
- ``policy``: `StreamPolicy`, the pure rules for ``--end``, skipping what was already
  written, ``--max-changes`` and batching (beside the pure `pgtail.feedback.Feedback`);
- ``protocol_options``: the pgoutput protocol version and START_REPLICATION options;
- ``config``: `StreamConfig`, `ReconnectPolicy`, `StreamResult`;
- ``publication_choice``: which publications to read (every statement is the catalog's);
- ``retry``: bounded backoff for start-up steps and reconnects;
- ``snapshot``: ``--snapshot``, the existing rows before the changes;
- ``peek``: ``slot peek``'s read through the change stream;
- ``gc_tuning``: fewer cyclic garbage collections while a stream runs;
- ``bounded``: `read_range`, the changes committed between two LSNs, read through the
  replication protocol without moving the slot (the Spark executors' read).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail._lazy import lazy_names

# the package's names, imported when first used (`pgtail._lazy`)
if TYPE_CHECKING:
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

if not TYPE_CHECKING:  # mypy reads the imports above, and flags a name not there
    __getattr__, __dir__ = lazy_names(__name__)
