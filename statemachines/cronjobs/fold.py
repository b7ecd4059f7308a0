"""Volcano's cronjob controller folded on its own: CronJob records, vcjob records and timers in.

`CronJobFold.apply(seq, record)` takes a `CronJobRecord` (statemachines/model/cronjob.py),
a decoded vcjob record (`statemachines.model.records.Observed` of a Job) or a `TimerRecord`.
Time is the log's: a record's `time`, else when its object was written. With
`timers="by-time"` (replay) a timer whose time the log has passed fires first, at its own
time (Volcano's controller woke then, 100 ms after the scheduled time); with "recorded" (the
bus) only a TIMER record fires it, at that record's time. The same log gives the same
decisions, byte for byte.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.cronjobs.controller import CronJobController
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.objects import Job
from statemachines.model.record_time import object_time
from statemachines.model.records import TimerRecord
from statemachines.model.timefmt import ZERO_TIME, normalize
from statemachines.timers.heap import TimerHeap


class CronJobFold:
    def __init__(self, *, timers: str = "by-time") -> None:
        if timers not in ("by-time", "recorded"):
            raise ValueError(f"timers must be 'by-time' or 'recorded', not {timers!r}")
        self.by_time = timers == "by-time"
        self.now = ZERO_TIME
        self.seq = 0
        self.out: list[o.Output] = []
        self.timers = TimerHeap()
        self.controller = CronJobController(self)

    def apply(self, seq: int, record: Any) -> list[o.Output]:
        self.seq = seq
        out: list[o.Output] = []
        self.out = out
        if isinstance(record, TimerRecord):
            if record.time:
                self._advance(normalize(record.time))
            timer = self.timers.take(record.timer.id)
            if timer is not None:
                self.controller.fire(timer)
            return out
        obj = record.object
        when = record.time or object_time(obj)
        if when:
            when = normalize(when)
            self.fire_due(when)
            self._advance(when)
        if isinstance(record, CronJobRecord):
            self.controller.cronjob(record.type, obj, record.zones)
        elif isinstance(obj, Job):
            self.controller.job(record.type, obj)
        return out

    def finish(self, until: str) -> list[o.Output]:
        """End of input: fire the timers due by `until` (by-time mode)."""
        self.out = []
        self.fire_due(normalize(until))
        self._advance(normalize(until))
        return self.out

    def fire_due(self, now: str) -> None:
        if not self.by_time:
            return
        heap = self.timers
        while heap.heap and heap.heap[0][0] <= now:
            timer = next(heap.pop_due(heap.heap[0][0]), None)
            if timer is None:
                continue
            heap.discard(timer)
            self._advance(timer.due)
            self.controller.fire(timer)

    def pending_timers(self) -> list:
        return self.timers.pending()

    def _advance(self, when: str) -> None:
        if when > self.now:
            self.now = when
