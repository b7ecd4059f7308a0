"""Volcano's queue controller folded on its own: the queue decisions of a log, without the job controller.

Volcano runs its queue controller beside the job controller
(`pkg/controllers/queue/`): it watches Queues, PodGroups and bus Commands of
every namespace. `statemachines.engine.Engine` folds it together with the job
controller (`Engine.queue_controller`); `QueueFold` folds it alone, so that a
log split into partitions by job (vcbus's bus with N > 1 partitions) can still
have one queue controller that sees every job's PodGroups.

Same log in, same queue decisions out as the engine's, byte for byte: the
outputs are stamped with the record's sequence and with the log's time as the
engine keeps it (`now`: the latest time of the records folded so far, TIMER
records included; never a record the engine ignores). Given only the records
the queue controller reads (PodGroups, Queues, Commands, TIMER records: the
bus's queue role), the decisions are the same and so is their time wherever
the log's times grow with its order (records stamped by the bridge). Only the
outputs' place among the record's outputs differs: the engine puts the job
controller's first.

`QueuesElsewhere` is the other half: what an `Engine(queue_controller=False)`
has in the controller's place (the partitions' deciders, whose queue
decisions `QueueFold` makes), so the engine folds no queue state and decides
no queue-scoped outputs, at the cost of nothing per record.
"""

from __future__ import annotations

from statemachines import outputs as o
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.objects import Command, PodGroup, Queue
from statemachines.model.record_time import object_time
from statemachines.model.records import Decoded, Observed, TimerRecord
from statemachines.model.timefmt import ZERO_TIME, normalize
from statemachines.queues.controller import QueueController


class QueueFold:
    """The queue controller over a log of watch records; `apply` as `Engine.apply`."""

    # what a host of the decider reads of an engine (vcbus.bus.rebuilding: a snapshot's configuration)
    explain = False
    queue_controller_on = True
    cronjob_controller = None  # no CronJob controller here (with N > 1 partitions none runs: vcbus.bus.rebuilding)
    jobflow_controller = None  # nor the jobflow controller
    timer_mode = "recorded"
    strict_queues = None
    max_pods = 0
    _render_pod = None
    _render_podgroup = None

    def __init__(self) -> None:
        self.now = ZERO_TIME
        self.seq = 0
        self.out: list[o.Output] = []
        self.queue_controller = QueueController(self)

    def apply(self, seq: int, record: Decoded, *, raw: bytes | None = None) -> list[o.Output]:
        """Fold one record; return the queue decisions it caused."""
        self.seq = seq
        out: list[o.Output] = []
        self.out = out
        # exact classes (mypy narrows on them); a CronJob record moves the time as a watch event does
        if type(record) is Observed or type(record) is CronJobRecord:
            when = record.time or object_time(record.object)
            if when:
                self._advance(normalize(when))
            obj = record.object
            if isinstance(obj, PodGroup):
                self.queue_controller.podgroup(record.type, obj)
            elif isinstance(obj, Queue):
                self.queue_controller.queue(record.type, obj)
            elif isinstance(obj, Command):
                self.queue_controller.command(record.type, obj)
        elif type(record) is TimerRecord and record.time:
            self._advance(normalize(record.time))
        return out

    def pending_timers(self) -> list:
        """The queue controller sets no timers."""
        return []

    def _advance(self, when: str) -> None:
        if when > self.now:
            self.now = when


class QueuesElsewhere:
    """The queue controller of an engine that leaves it to a `QueueFold`: takes every record, decides nothing."""

    __slots__ = ()

    def podgroup(self, rtype: str, pg: PodGroup) -> None:
        pass

    def queue(self, rtype: str, q: Queue) -> None:
        pass

    def command(self, rtype: str, cmd: Command) -> None:
        pass
