"""The queue role: Volcano's queue, cronjob and jobflow controllers over every partition, when VCBUS_K8S has N > 1.

A queue's decisions (job key `_/<queue>`: `UpdateQueueStatus` with its state
and the PodGroup counts by phase, `QueueStateChanged`, `DeleteBusCommand` of a
queue Command, the Queue's events) depend on the PodGroups of every job in the
queue, and a CronJob's or a JobFlow's on every vcjob it made (a run, a flow's
vcjobs: each has a name of its own, so another partition); with N > 1
partitions each decider sees only its own jobs. Volcano runs these controllers
beside the job controller (`pkg/controllers/queue/`, `pkg/controllers/cronjob/`,
`pkg/controllers/jobflow/`, `pkg/controllers/jobtemplate/`), and so does vcbus
with partitions:

- every partition's decider runs none of them (`Engine(queue_controller=False,
  cronjobs=False, jobflows=False)`, chosen by the decider once it knows the
  stream has N > 1 partitions);
- the **queue role** (`QueueDecider`) folds the records of every partition
  those controllers read, PodGroups, Queues, Commands, vcjobs, CronJobs,
  JobFlows and JobTemplates, and TIMER records (one consumer, `vcbus-queues`,
  filtering `vcbus.k8s.<kind>.>` of those kinds: without the pods, a small
  part of a busy log), through the engine without the job controller
  (`Engine(job_controller=False)`), and publishes those outputs. The CronJob
  controller's timers are the role's: it appends their TIMER records, and
  their ids (`<seq>.h<order>`, statemachines/hosted.py) are never a
  partition's.

Its clock, as each partition's decider's, is the latest time of the records
it folds. Records from the bridge carry the time they were observed, in
stream order, so every role's clock is the one decider's and the outputs are
a one-partition decider's, byte for byte; a log imported with object times
only (`kubectl get -w` output), whose times go back and forth, may give
outputs with another `time` (never other decisions).

It is a decider in everything else (`vcbus.bus.decider.Decider`): rebuild from
its ack floor or a snapshot (`vcbus-queues.<seq>`), pipelined atomic batches,
records acked once their outputs are stored, one owner enforced by a pinned
consumer (a second queue role is refused). Only the outputs' ids differ from
a one-partition decider's: `<seq>:q<index>`
(the index among the role's outputs of the record), since the
record's partition decider stores the job controller's outputs under
`<seq>:<index>` and one id must never name two messages.

Poison. A record of a partition is folded only once that partition's decider
has decided it, and skipped when it set it aside (`vcbus.bus.verdicts`): as
with one partition, where a record set aside is folded by no controller. A
record the role itself cannot fold (one of its controllers fails on it) is set
aside by the role alone, with a poison event of component `queues` (with one
partition the whole record would be set aside: the partition's decider has
folded it already, and never waits for the role).

A consumer of the layout before 4 December 2026 (the queue controller's
kinds alone: no role ran the cronjob or jobflow controller) has those
controllers started on the role's first start (`vcbus.bus.starting`).

With one partition the decider runs these controllers itself, as it always
did, and no queue role runs. `vcbus up` runs the queue role in the process
that runs partition 0's decider.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from statemachines.engine import Engine
from statemachines.model.records import decode
from vcbus.bus import bigrecords
from vcbus.bus import partitions as parts
from vcbus.bus import poison as p
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import MSG_ID
from vcbus.bus.connecting import Bus
from vcbus.bus.decider import Decider
from vcbus.bus.deciding import Deciding
from vcbus.bus.publisher import Prepared
from vcbus.bus.consumers import consumer_api
from vcbus.bus.starting import KINDS as STARTED_KINDS
from vcbus.bus.starting import older_layout, start_message, started, starts_message
from vcbus.bus.verdicts import Verdicts, partition_of

log = logging.getLogger("vcbus.decider")

CONSUMER = "vcbus-queues"
COMPONENT = "queues"  # the role's own poison events (a partition's decider skips only the `decider` ones)
# what the queue, cronjob and jobflow controllers read; TIMER: the CronJob's syncs and the log's time
KINDS = ("podgroup", "queue", "command", "job", "cronjob", "jobflow", "jobtemplate", s.TIMER_KIND)


def role_engine() -> Engine:
    """The controllers beside the job controller, alone; their timers fire by the log's time, as a decider's."""
    return Engine(job_controller=False)


@dataclass(frozen=True)
class QueueRole(parts.Partition):
    """The records of the kinds the queue, cronjob and jobflow controllers read, of every partition."""

    @property
    def consumer(self) -> str:
        return CONSUMER

    @property
    def name(self) -> str:
        return "queues"

    @property
    def filters(self) -> list[str]:
        return [f"{s.K8S_PREFIX}.{kind}.>" for kind in KINDS]

    @property
    def consumer_filters(self) -> list[str]:
        return self.filters

    @property
    def whole(self) -> bool:
        return False

    @property
    def merged(self) -> bool:
        return False

    @property
    def queue_outputs(self) -> bool:
        return True

    def mine(self, subject: str) -> bool:
        return subject.split(".", 3)[2] in KINDS

    def shared(self, subject: str) -> bool:
        return False


class QueueDeciding(Deciding):
    """The role's records into messages: poison events of component `queues`, output ids `<seq>:q<index>`."""

    component = COMPONENT

    def messages(self, seq: int, outs: list, *, prepare: bool) -> tuple:
        result = super().messages(seq, outs, prepare=prepare)
        if not prepare:
            return result
        if isinstance(result, bigrecords.Split):  # more than one batch: rare here, but correct
            result = result.lists()
        commands, events = result
        return [_queue_id(m) for m in commands], [_queue_id(m) for m in events]


class QueueDecider(Decider):
    """The queue role's decider: `role_engine()` over the records of `QueueRole`."""

    deciding_kind = QueueDeciding  # its records into messages

    def __init__(self, bus: Bus, **options) -> None:  # Decider's options
        options.pop("engine", None)
        options.pop("partition", None)
        super().__init__(bus, engine=role_engine(), **options)
        self.fold.partition = QueueRole()
        self.verdicts: Verdicts | None = None
        self._partitions = 1
        self._stop = asyncio.Event()

    async def run(self, *, stop: asyncio.Event | None = None, until_idle: bool = False):
        self._stop = stop or asyncio.Event()
        self.verdicts = Verdicts(self.bus.nc, self.js, count=self._partitions, poisoned=self.poisoned, stop=self._stop,
                                 until_idle=until_idle)
        return await super().run(stop=self._stop, until_idle=until_idle)

    def _layout(self, count: int) -> parts.Partition:
        self._partitions = count
        if self.verdicts is not None:
            self.verdicts.count = count
        return QueueRole()

    async def _consumer(self) -> tuple[int, str | None]:
        await self._start_late()
        return await super()._consumer()

    async def _start_late(self) -> None:
        """A consumer of the layout that ran no CronJob or JobFlow controller (`vcbus.bus.starting`): the
        controllers' start TIMER records appended (once: not when the log has them), before the consumer
        is brought to the filters of this layout."""
        try:
            have = await consumer_api(self.bus.nc, "INFO", CONSUMER)
        except NotFoundError:
            return
        cfg = have.get("config") or {}
        if not older_layout(list(cfg.get("filter_subjects") or [cfg.get("filter_subject") or ""])):
            return
        if set(await started(self.js)) >= set(STARTED_KINDS):
            return  # appended by a start that stopped before the consumer was brought up to date
        floor = int(((have.get("ack_floor") or {}).get("stream_seq")) or 0)
        log.warning(starts_message(floor))
        due = self.clock()
        await self.outbox.store([start_message(kind, due) for kind in STARTED_KINDS],
                                what="the CronJob and JobFlow controllers' start TIMER records")

    async def _rebuild(self, floor: int) -> None:
        assert self.verdicts is not None
        await self.verdicts.start()  # before the poison events stored so far are read
        self.fold.poisoned |= await p.poisoned_sequences(self.js, COMPONENT)
        await super()._rebuild(floor)

    async def _handle(self, msg: Msg) -> None:
        """A partition's record waits for that partition's verdict (`vcbus.bus.verdicts`)."""
        if self._stop.is_set():  # given up waiting (or stopping): the rest is decided next time
            return
        seq = msg.metadata.sequence.stream
        part = partition_of(msg.subject)
        if seq > self.applied and part is not None and seq not in self.poisoned:
            assert self.verdicts is not None
            if not self.verdicts.known(part, seq):
                await self.outbox.send(self.applied)  # what was decided before it need not wait with it
            if not await self.verdicts.decided(part, seq):
                self._stop.set()
                return
        await super()._handle(msg)

    async def _decide_live(self, seq: int, subject: str, data: bytes, headers: dict | None) -> None:
        if partition_of(subject) is None and seq not in self.poisoned and self.partition.mine(subject):
            try:
                decode(data)
            except Exception:  # every partition's decider fails on it too and sets it aside: theirs to report
                self.poisoned.add(seq)
                self.fold.applied = seq
                return
        await super()._decide_live(seq, subject, data, headers)

    def _fresh_engine(self) -> Engine:
        return role_engine()


def _queue_id(msg: Prepared) -> Prepared:
    """`<seq>:<index>` -> `<seq>:q<index>` (the message id and the CloudEvents id)."""
    headers = dict(msg.headers)
    seq, _, index = headers[MSG_ID].partition(":")
    headers[MSG_ID] = headers["ce-id"] = f"{seq}:q{index}"
    return msg._replace(headers=headers)


async def queue_role_needed(bus: Bus) -> bool:
    """Whether VCBUS_K8S has more than one partition (then the queue role must run)."""
    return await parts.partitions(bus.js) > 1
