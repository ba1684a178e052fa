"""`pgtail top`'s looks: one view per look, read through `pgtail.catalog`.

The one module of `pgtail.top` that reads: a `catalog.Watcher` takes each look (one
connection kept open), and with a publication a `catalog.ChangeSampler` reads the changes
of a temporary slot of top's own, which `changes` counts; `model` builds the view. The
command only shows the views.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType

from pgtail import catalog
from pgtail.catalog.facts import ReplicationFacts
from pgtail.errors import PgtailError
from pgtail.top.changes import ChangeCounter, PublicationActivity, unavailable
from pgtail.top.history import SlotHistory
from pgtail.top.model import TopView, build_view

# a temporary slot that could not start while transactions were open is tried again
# every this many looks
RETRY_LOOKS = 10


class TopLooks:
    """The connections of a live view. `note`: None, or the one line that says why there
    are no per-table rates (the temporary slot could not start); `views` gives one view
    per look. Use as a context manager: leaving it drops the temporary slot."""

    def __init__(self, dsn: str | None, publication: str | None) -> None:
        self.publication = publication
        self._watcher = catalog.Watcher(dsn)
        self._sampler: catalog.ChangeSampler | None = None
        self.note: str | None = None
        try:
            if publication is not None:
                sampler = catalog.ChangeSampler(dsn, publication)
                self._sampler = sampler
                self.note = sampler.start()
                if self.note is not None and not sampler.retriable:
                    self._sampler = None
                    sampler.close()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> TopLooks:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self._sampler is not None:
                self._sampler.close()
                self._sampler = None
        finally:
            self._watcher.close()

    def views(self) -> Iterator[TopView]:
        """One view per look; the first look is shown without rates, every later one with."""
        sampler = self._sampler
        publication = self.publication
        reason = self.note
        counter = ChangeCounter()
        history = SlotHistory()
        before: ReplicationFacts | None = None
        hide = (sampler.slot,) if sampler is not None else ()
        looks = 0
        while True:
            facts = self._watcher.look()
            activity: PublicationActivity | None = None
            if sampler is not None and reason is not None and looks % RETRY_LOOKS == 0 and looks:
                reason = sampler.start()  # open transactions kept it from starting: try again
            looks += 1
            if publication is not None:
                if sampler is None or reason is not None:
                    activity = unavailable(publication, reason or "not available")
                else:
                    try:
                        activity = _sample(sampler, counter, publication, facts, before)
                    except PgtailError as exc:  # the publication dropped, the slot terminated
                        reason = f"reading the temporary slot stopped: {exc}"
                        sampler.close()
                        sampler = self._sampler = None
                        activity = unavailable(publication, reason)
            view = build_view(facts, before, activity, hide=hide, watched=history.see(facts))
            before = facts
            yield view


def _sample(
    sampler: catalog.ChangeSampler,
    counter: ChangeCounter,
    publication: str,
    facts: ReplicationFacts,
    before: ReplicationFacts | None,
) -> PublicationActivity:
    messages, more = sampler.read()
    seconds = facts.taken_at - before.taken_at if before is not None else 0.0
    return counter.count(publication, messages, seconds, more=more)
