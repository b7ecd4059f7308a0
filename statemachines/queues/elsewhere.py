"""The queue controller of an engine that leaves it to another: the bus's partitions with N > 1.

Volcano runs its queue controller beside the job controller (`pkg/controllers/queue/`): it
watches Queues, PodGroups and bus Commands of every namespace. With N > 1 partitions each
partition's decider sees only its own jobs' PodGroups, so its engine
(`Engine(queue_controller=False)`) has `QueuesElsewhere` in the controller's place: it folds no
queue state and decides no queue-scoped outputs, at the cost of nothing per record. The role
that folds every partition's PodGroups, Queues and Commands (`vcbus.bus.queueing`: an
`Engine(job_controller=False)`) makes those decisions.
"""

from __future__ import annotations

from statemachines.model.objects import Command, PodGroup, Queue


class QueuesElsewhere:
    """The queue controller of an engine that leaves it to the role: takes every record, decides nothing."""

    __slots__ = ()

    def podgroup(self, rtype: str, pg: PodGroup) -> None:
        pass

    def queue(self, rtype: str, q: Queue) -> None:
        pass

    def command(self, rtype: str, cmd: Command) -> None:
        pass
