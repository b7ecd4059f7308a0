"""The actuator's order: which commands may be applied at once, and which status writes a later one replaces.

Volcano's job controller creates a job's pods in parallel goroutines and waits
for them all before it writes the job's status; its scheduler binds in
parallel; its work queue folds many pod changes of one job into one status
write. The actuator keeps the same order with *lanes*, one per job key (the
command's `job`, `<ns>/<vcjob>`, or `_/<queue>` for a queue):

- a **pod command** (CreatePod, DeletePod, BindPod, EvictPod,
  UpdatePodCondition) waits only for the earlier commands of its lane on the
  same pod and for the lane's earlier job-wide commands: a job's pods are
  created, bound and killed side by side, while a kill still goes before the
  re-create of that pod name;
- a **job-wide command** (its PodGroup's create, update and delete, PVCs,
  plugin hooks, bus Commands, the garbage collector's delete) waits for every
  earlier command of its lane, and every later one waits for it: the
  PodGroup exists before the pods that name it, a job's services before its
  pods;
- a **status write** (the vcjob's status, its PodGroup's, a queue's) waits
  for every earlier command of its lane, as a job-wide command does, so it
  goes after the writes it reports; but nothing later waits for it. No
  command depends on a status having been written (the actuator checks a
  pod's job by its uid and version, never by its phase), and Volcano's
  controller and scheduler create and bind while a status write is under
  way; a job whose pods change one by one would otherwise have its creates
  and binds cut into rounds, one per status write;
- a **RecordEvent** waits for nothing and nothing waits for it (Kubernetes'
  event recorder, which Volcano uses, writes events asynchronously).

Lanes never wait for each other: two jobs' commands are independent, as in
Volcano's controller workers.

Superseded writes. A status write that waits in its lane is dropped when a
later write of the same object arrives (`replaces`): the vcjob status and a
PodGroup's status are replaced whole, so only the last one need reach the API
server; a queue's status only when the later write sets every field the earlier
one sets. A pod's PodScheduled=False condition waiting its turn is dropped when
a later command of the same pod (same uid) makes it useless: another condition
write, its bind (the Binding sets PodScheduled=True), its eviction or its
delete. A scheduler whose sessions saw a gang's pods arrive one by one writes
a condition for each pending pod; without this, the gang's binds, which come
a session later, would wait behind those writes. The bus keeps every decision:
only the API calls shrink.

This module holds the order alone (no I/O, no asyncio): `vcbus.k8s.actuating`
admits the commands it receives, runs what `Lanes` says is ready, and tells it
what finished.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o

POD_COMMANDS = (o.CreatePod, o.DeletePod, o.BindPod, o.EvictPod, o.UpdatePodCondition)
STATUS_WRITES = (o.UpdateJobStatus, o.UpdatePodGroupStatus, o.UpdateQueueStatus)

WAITING, READY, RUNNING, DONE, SUPERSEDED = "waiting", "ready", "running", "done", "superseded"


def lane_of(cmd: Any) -> str | None:
    """The lane of a command: its job key; None for a RecordEvent (it waits for nothing)."""
    return None if cmd.__class__ is o.RecordEvent else cmd.job


def pod_of(cmd: Any) -> str | None:
    """The pod a pod command acts on; None for a job-wide command."""
    return cmd.name if isinstance(cmd, POD_COMMANDS) else None


def status_object(cmd: Any) -> tuple | None:
    """The object a status write replaces the status of (None: not a status write)."""
    if cmd.__class__ is o.UpdateJobStatus:
        return ("Job", cmd.job)
    if cmd.__class__ is o.UpdatePodGroupStatus:
        return ("PodGroup", cmd.job, cmd.name)
    if cmd.__class__ is o.UpdateQueueStatus:
        return ("Queue", cmd.queue)
    return None


def _queue_fields(cmd: o.UpdateQueueStatus) -> set[str]:
    fields = {k for k in ("state", "allocated") if getattr(cmd, k) is not None}
    return fields | {f"counts.{k}" for k in (cmd.counts or {})}


OVERTAKE_CONDITION = (o.UpdatePodCondition, o.BindPod, o.EvictPod, o.DeletePod)


def overtakes_condition(later: Any, earlier: Any) -> bool:
    """Whether `later` makes an earlier PodScheduled=False write of the same pod useless: a later
    condition replaces it whole, a bind makes the pod scheduled, an eviction or a delete ends it."""
    return (earlier.__class__ is o.UpdatePodCondition and later.__class__ in OVERTAKE_CONDITION
            and later.name == earlier.name and later.job == earlier.job and bool(later.uid)
            and later.uid == earlier.uid)


def replaces(later: Any, earlier: Any) -> bool:
    """Whether applying `later` makes applying `earlier` (before it, not yet applied) useless."""
    if earlier.__class__ is o.UpdatePodCondition:
        return overtakes_condition(later, earlier)
    key = status_object(later)
    if key is None or key != status_object(earlier):
        return False
    if later.__class__ is o.UpdateQueueStatus:  # only the fields given are written
        return _queue_fields(later) >= _queue_fields(earlier)
    return True  # the vcjob's and a PodGroup's status are replaced whole


class Item:
    """One command in the actuator's hands: where it stands, and what to ack when it is done."""

    __slots__ = ("cmd", "msg_id", "index", "lane", "pod", "trails", "state", "msgs", "stream_seq", "result", "done",
                 "kept", "admitted")

    def __init__(self, cmd: Any, msg_id: str, index: int, stream_seq: int = 0) -> None:
        self.cmd = cmd
        self.msg_id = msg_id
        self.index = index
        self.lane = lane_of(cmd)
        self.pod = pod_of(cmd)
        self.trails = cmd.__class__ in STATUS_WRITES  # waits for what it reports; nothing waits for it
        self.state = WAITING
        self.msgs: list[Any] = []  # the stored copies to ack once it is done (a redelivery adds one)
        self.stream_seq = stream_seq  # its VCBUS_CMDS sequence (0: offered ahead of its store)
        self.result: str | None = None
        self.done: Any = None  # a future the service sets when it is over (for whoever waits on it)
        self.kept = 0.0  # when its stored copies were last received or kept alive (the service's clock)
        self.admitted = 0.0  # when it entered its lane (time.perf_counter(); the audit's wait)

    def __repr__(self) -> str:
        return f"Item({type(self.cmd).__name__} {self.cmd.job} {self.pod or ''} {self.msg_id} {self.state})"


class Lanes:
    """The commands admitted and not finished, per lane, in the order they were admitted."""

    def __init__(self) -> None:
        self._lanes: dict[str, list[Item]] = {}
        self._conditions: dict[tuple[str, str | None], Item] = {}  # (lane, pod): its last condition write admitted
        self.superseded = 0

    def __len__(self) -> int:
        return sum(len(lane) for lane in self._lanes.values())

    def admit(self, item: Item) -> tuple[list[Item], list[Item]]:
        """Add `item` after everything admitted before it: (the items now ready, the items it supersedes)."""
        if item.lane is None:
            item.state = READY
            return [item], []
        lane = self._lanes.setdefault(item.lane, [])
        gone: list[Item] = []
        if status_object(item.cmd) is not None:
            gone = [other for other in lane if other.state in (WAITING, READY) and replaces(item.cmd, other.cmd)]
        elif item.cmd.__class__ in OVERTAKE_CONDITION:
            condition = self._conditions.get((item.lane, item.pod))
            if condition is not None and condition.state in (WAITING, READY) and overtakes_condition(item.cmd,
                                                                                                    condition.cmd):
                del self._conditions[(item.lane, item.pod)]  # another incarnation's stays, for its own bind
                gone = [condition]
        if gone:
            for other in gone:
                other.state = SUPERSEDED
            lane[:] = [other for other in lane if other.state != SUPERSEDED]
            self.superseded += len(gone)
        if item.cmd.__class__ is o.UpdatePodCondition:
            self._conditions[(item.lane, item.pod)] = item  # the pod's latest, until it starts
        lane.append(item)
        return self._ready(lane), gone

    def start(self, item: Item) -> bool:
        """Mark a ready item running; False if it was superseded meanwhile (skip it)."""
        if item.state != READY:
            return False
        item.state = RUNNING
        if item.lane is not None and self._conditions.get((item.lane, item.pod)) is item:
            del self._conditions[(item.lane, item.pod)]
        return True

    def finish(self, item: Item) -> list[Item]:
        """`item` is over: the items of its lane that are ready now."""
        item.state = DONE
        if item.lane is None:
            return []
        lane = self._lanes.get(item.lane)
        if lane is None:
            return []
        try:
            lane.remove(item)
        except ValueError:
            return []
        if not lane:
            del self._lanes[item.lane]
            return []
        return self._ready(lane)

    @staticmethod
    def _ready(lane: list[Item]) -> list[Item]:
        """Mark and return the waiting items of `lane` nothing before them holds up."""
        ready: list[Item] = []
        pods: set[str] = set()
        for position, item in enumerate(lane):
            if item.pod is None:  # job-wide or a status write: only once everything before it is over
                if position == 0 and item.state == WAITING:
                    item.state = READY
                    ready.append(item)
                if item.trails:
                    continue  # what comes after a status write does not wait for it
                break
            if item.state == WAITING and item.pod not in pods:
                item.state = READY
                ready.append(item)
            pods.add(item.pod)
        return ready
