"""What `pgtail top` saw of each slot over its looks: since when a slot's confirmed
position has stayed while more was sent beyond it, and since when it has had no consumer.
The rules (`pgtail.doctor.slot_causes`) decide "not confirming" by that time, whatever
the byte rate; one-look commands have only what the server measured.
Pure: facts in, `Watched` out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pgtail.doctor.slot_causes import Watched

if TYPE_CHECKING:
    from pgtail.catalog.facts import ReplicationFacts, SlotInfo


class SlotHistory:
    """Feed every look to `see`; it returns what was seen of each slot until then."""

    def __init__(self) -> None:
        self._first: dict[str, float] = {}  # slot -> first look that had it
        self._confirmed: dict[str, tuple[int | None, float]] = {}  # position, since when
        self._inactive: dict[str, float] = {}  # slot -> first look without consumer

    def see(self, facts: ReplicationFacts) -> dict[str, Watched]:
        now = facts.taken_at
        names = {s.name for s in facts.slots.slots}
        for table in (self._first, self._confirmed, self._inactive):
            for gone in [n for n in table if n not in names]:  # dropped (or re-created)
                del table[gone]
        return {s.name: self._watch(facts, s, now) for s in facts.slots.slots}

    def _watch(self, facts: ReplicationFacts, slot: SlotInfo, now: float) -> Watched:
        name = slot.name
        first = self._first.setdefault(name, now)
        if slot.active:
            self._inactive.pop(name, None)
            inactive = None
        else:
            inactive = now - self._inactive.setdefault(name, now)
        sender = facts.sender_of(slot)
        sent = sender.sent_lsn if sender is not None else None
        confirmed = slot.confirmed_flush_lsn if slot.slot_type == "logical" else slot.restart_lsn
        unconfirmed = 0.0
        if not slot.active or sent is None or confirmed is None or sent <= confirmed:
            self._confirmed.pop(name, None)  # nothing waits for it to confirm
        else:
            position, since = self._confirmed.get(name, (None, now))
            if position != confirmed:
                since = now  # it moved: start again
            self._confirmed[name] = (confirmed, since)
            unconfirmed = now - since
        return Watched(now - first, unconfirmed, inactive)
