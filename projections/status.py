"""The status projection: for every job, the `status` object Volcano would write.

A fold over the domain events: each `StatusChanged` carries the whole status
the controller wrote, so the view is simply the last one per job, kept as the
JSON-ready dict that goes into the vcjob's status subresource (and into the
`vcbus_status` KV bucket on the bus). `position` is the last applied `seq`:
re-applying an event at or below it changes nothing, which makes re-delivery
harmless and lets a rebuild from sequence 1 equal the live view.
"""

from __future__ import annotations

from typing import Iterable

import msgspec

from statemachines import outputs as o


class StatusView:
    def __init__(self) -> None:
        self.statuses: dict[str, o.StatusChanged] = {}
        self.deleted: set[str] = set()
        self.position = 0

    def apply(self, event: o.Output, position: int | None = None) -> bool:
        """Fold one event; `position` defaults to the event's seq. False when already applied."""
        pos = event.seq if position is None else position
        if pos < self.position:
            return False
        self.position = pos
        if isinstance(event, o.StatusChanged):
            self.statuses[event.job] = event
            self.deleted.discard(event.job)
        elif isinstance(event, o.JobDeleted):
            self.deleted.add(event.job)
        return True

    def apply_all(self, events: Iterable[o.Output]) -> "StatusView":
        for e in events:
            self.apply(e)
        return self

    def status(self, job: str) -> dict | None:
        ev = self.statuses.get(job)
        if ev is None:
            return None
        out = msgspec.to_builtins(ev.status)
        out.setdefault("state", {})
        return out

    def jobs(self) -> list[str]:
        return sorted(self.statuses)
