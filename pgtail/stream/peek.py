"""``slot peek``'s read: the messages `catalog.peek_changes` returned, driven through the
change stream (`ChangeStream`, or its raw mode) as ``pgtail stream`` reads a slot, with
peek's own two rules: ``--max-changes`` stops at the first change past the limit (what
follows the last one shown, its commit, is still shown, and the stop says more are
pending), and a transaction with nothing to show is shown as its begin and commit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pgtail import catalog
from pgtail import changes as ch
from pgtail.catalog import PeekedChange
from pgtail.filters import EventFilter
from pgtail.stream.change_stream import ChangeStream, RawChangeStream, Stop
from pgtail.stream.policy import StreamPolicy
from pgtail.stream.writer import Batch

# the SQL interface decodes with protocol version 1
_PROTO_VERSION = 1


def peek_events(
    dsn: str | None,
    rows: Sequence[PeekedChange],
    render: Callable[[Any], None],
    max_changes: int | None,
    flt: EventFilter,
) -> tuple[int, bool]:
    """Assemble, filter and render ``rows``, stopping before the first change past
    ``max_changes``. Returns how many changes it rendered and whether ``rows`` hold more."""
    policy = StreamPolicy(max_changes=max_changes)
    stream = ChangeStream(
        ch.Assembler(_PROTO_VERSION),
        policy,
        _render_batch(render),
        None if flt.is_noop else flt,
        stop_before_more=True,
        keep_empty=True,
    )
    try:
        for row in rows:
            wanted = stream.feed(row.data)
            if wanted:  # a Relation using types that are not built in: ask pg_type first
                stream.add_user_types(catalog.lookup_user_types(dsn, wanted), wanted)
        stream.drained()
    except Stop:
        return policy.changes, True
    return policy.changes, False


def peek_raw(
    rows: Sequence[PeekedChange],
    render: Callable[[Any, int], None],
    max_changes: int | None,
) -> tuple[int, bool]:
    """The protocol trace of ``rows`` (``render(message, lsn)``), up to ``max_changes``
    changes (the filters do not apply: raw shows the protocol as it is). Returns how many
    changes it rendered (counted with ``max_changes`` only) and whether ``rows`` hold
    more."""
    policy = StreamPolicy(max_changes=max_changes)

    def render_batch(batch: Batch) -> None:
        for message, lsn in batch.items:
            render(message, lsn)

    stream = RawChangeStream(_PROTO_VERSION, policy, render_batch, stop_before_more=True)
    try:
        for row in rows:
            stream.feed(row.data, row.lsn)
        stream.drained()
    except Stop:
        return policy.changes, True
    return policy.changes, False


def _render_batch(render: Callable[[Any], None]) -> Callable[[Batch], None]:
    def render_batch(batch: Batch) -> None:
        for item in batch.items:
            render(item)

    return render_batch
