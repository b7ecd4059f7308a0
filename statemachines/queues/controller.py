"""Volcano's queue controller as a fold: Queue, PodGroup and Command records in, queue decisions out.

Volcano: `pkg/controllers/queue/queue_controller.go` (workers, Command handling),
`queue_controller_handler.go` (what enqueues a request), `queue_controller_action.go`
(syncQueue, openQueue, closeQueue and the hierarchy), `state/*.go` (the machine,
statemachines/queues/machine.py). Requests:

- a Queue ADDED (or first seen), or its `spec.parent` changed: SyncQueue;
- a PodGroup added, deleted, or its `status.phase` changed: SyncQueue on `spec.queue`;
- a `bus.volcano.sh` Command whose target is a `scheduling.volcano.sh/v1beta1` Queue
  (ADDED only): the Command is deleted (`DeleteBusCommand`), then its action runs.

Requests a request makes (the hierarchy: closing a parent closes its open children,
reopening it reopens those it closed) are handled in order right after it, within the
same record: one FIFO, as Volcano's work queue, but without its concurrency.

The state is the queue's `status.state` as the log shows it, overlaid by our own
writes until they come back (a record that shows a state we wrote, or the one before
our writes, is our write lagging; anything else is someone else's write and is
adopted, as Volcano's lister would). Outputs (job `_/<queue>`): `UpdateQueueStatus`
(the state, only when it changes), `QueueStateChanged`, and `RecordEvent` on the Queue
where Volcano records one.

The PodGroup counts by phase (`status.pending`, `running`, ...) are not written: since
Volcano's f14999ca3 ("move metrics related with podgroup to vc-controller", November
2024) its syncQueue counts them into its metrics and applies `status.state` alone, and
only when the state changes (`queue_controller_action.go`). So a PodGroup's phase change
writes nothing unless it moves the queue's state (Closing -> Closed when the last one
goes). The counts are on `/metrics` under Volcano's names (`podgroup_counts`), and
`vcbus queue list/get` count the PodGroups themselves, as vcctl does.

Where vcbus differs (docs/queues.md): the `volcano.sh/closed-by-parent` annotation and
the `spec.parent: root` default are kept in this fold, not written to the Queue (no
command patches queue metadata or spec); a request that would fail and be retried
(opening under a closed parent, an invalid state) records Volcano's final Warning event
at once instead of after `--max-requeue-num` retries; a missing parent skips the
hierarchy check instead of retrying it.

Each queue's PodGroups and their counts by phase are kept in `podgroups.py`.
"""

from __future__ import annotations

from collections import deque
from typing import Any, TypeGuard

from statemachines import outputs as o
from statemachines.model.objects import Command, OwnerReference, PodGroup, Queue
from statemachines.queues.machine import (
    CLOSE_QUEUE,
    CLOSED_OR_CLOSING,
    FN_CLOSE,
    FN_OPEN,
    OPEN,
    OPEN_QUEUE,
    SYNC_QUEUE,
    Check,
    UnknownState,
    fire,
    handling,
    trigger_of,
)
from statemachines.queues.podgroups import COUNTED, QueuePodGroups

QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
CLOSED_BY_PARENT = "volcano.sh/closed-by-parent"
ROOT = "root"
COMPONENT = "vc-controller-manager"
OUT_OF_SYNC = "OutOfSync"
COMMAND_ISSUED = "CommandIssued"
MAX_TRAIL = 32  # our writes not yet seen back; older ones are forgotten
MAX_REQUESTS = 10_000  # per record: a cycle in the hierarchy must not hang the fold


class QueueEntry:
    __slots__ = ("name", "key", "uid", "resource_version", "parent", "state", "trail", "closed_by_parent")

    def __init__(self, name: str, uid: str, parent: str, recorded: str, resource_version: str = "") -> None:
        self.name = name
        self.key = queue_key(name)  # the outputs' `job`
        self.uid = uid
        self.resource_version = resource_version  # of the last Queue record: what a status write was computed from
        self.parent = parent
        self.state = recorded  # `status.state`
        self.trail: list[str] = [recorded]  # the last recorded state, then our writes since
        self.closed_by_parent = False

    @property
    def effective_parent(self) -> str:
        """`spec.parent`, with Volcano's default (updateQueueParent writes `root`)."""
        return self.parent or ("" if self.name == ROOT else ROOT)


def is_queue_reference(ref: OwnerReference | None) -> TypeGuard[OwnerReference]:
    """Volcano's IsQueueReference: the Command targets a scheduling.volcano.sh/v1beta1 Queue."""
    return ref is not None and ref.api_version == QUEUE_API_VERSION and ref.kind == "Queue"


def queue_key(name: str) -> str:
    return f"_/{name}"


class QueueController:
    """The queue controller's decisions; outputs go to `host.out`, stamped with `host.seq`/`host.now`."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.queues: dict[str, QueueEntry] = {}
        self.podgroups = QueuePodGroups()  # each queue's PodGroups and their counts by phase
        self.consumed: set[str] = set()  # Command uids already consumed
        self._requests: deque[tuple[str, str, str]] = deque()
        self._draining = False

    # ------------------------------------------------------------------ output

    def emit(self, cls: type, queue: str, /, **fields: Any) -> None:
        host = self.host
        fields["job"] = queue_key(queue)  # the stamp goes into `fields`: one dict passed on (`Engine.emit`)
        fields["seq"] = host.seq
        fields["time"] = host.now
        host.out.append(cls(**fields))

    def record_event(self, queue: str, reason: str, message: str, *, event_type: str = "Normal") -> None:
        self.emit(
            o.RecordEvent,
            queue,
            event_type=event_type,
            reason=reason,
            message=message,
            kind="Queue",
            name=queue,
            api_version=QUEUE_API_VERSION,
            component=COMPONENT,
        )

    def podgroup_counts(self) -> dict[str, dict[str, int]]:
        """Each known queue's PodGroups by phase: what Volcano's syncQueue puts in its metrics
        (`pkg/controllers/metrics/queue.go` UpdateQueueMetrics), read when `/metrics` is scraped."""
        counts_of = self.podgroups.counts_of
        return {name: dict(zip(COUNTED, counts_of(name), strict=True)) for name in sorted(self.queues)}

    # ------------------------------------------------------------------ input (queue_controller_handler.go)

    def queue(self, rtype: str, q: Queue) -> None:
        meta = q.metadata
        name = meta.name
        if rtype == "DELETED":
            self.queues.pop(name, None)
            self.podgroups.forget_queue(name)  # deleteQueue forgets the queue's PodGroups
            return
        recorded = q.status.state
        entry = self.queues.get(name)
        annotation = (meta.annotations or {}).get(CLOSED_BY_PARENT)
        if entry is None or (entry.uid and meta.uid and entry.uid != meta.uid):
            entry = self.queues[name] = QueueEntry(name, meta.uid, q.spec.parent, recorded, meta.resource_version)
            entry.closed_by_parent = annotation == "true"
            self.request(name, SYNC_QUEUE, OUT_OF_SYNC)
            return
        entry.uid = entry.uid or meta.uid
        entry.resource_version = meta.resource_version
        self._observe(entry, recorded)
        if annotation is not None:
            entry.closed_by_parent = annotation == "true"
        old_parent, entry.parent = entry.parent, q.spec.parent
        if rtype == "ADDED" or old_parent != entry.parent:
            self.request(name, SYNC_QUEUE, OUT_OF_SYNC)

    def _observe(self, entry: QueueEntry, recorded: str) -> None:
        """A recorded state: our write coming back (it is on the trail), or someone else's (adopted)."""
        trail = entry.trail
        if recorded in trail:
            del trail[: trail.index(recorded)]
            return
        entry.state = recorded
        entry.trail = [recorded]

    def podgroup(self, rtype: str, pg: PodGroup) -> None:
        meta = pg.metadata
        key = f"{meta.namespace}/{meta.name}"
        queue = pg.spec.queue
        podgroups = self.podgroups
        if rtype == "DELETED":
            podgroups.forget(key)
            self.request(queue, SYNC_QUEUE, OUT_OF_SYNC)
            return
        phase = pg.status.phase
        old = podgroups.phase.get(key)
        if old is not None and rtype == "MODIFIED" and old == phase:
            return  # updatePodGroup: only a phase change counts
        podgroups.set_phase(key, phase)
        podgroups.add(queue, key)
        self.request(queue, SYNC_QUEUE, OUT_OF_SYNC)

    def command(self, rtype: str, cmd: Command) -> None:
        meta = cmd.metadata
        if rtype == "DELETED":
            self.consumed.discard(meta.uid)
            return
        if rtype != "ADDED" or not is_queue_reference(cmd.target):
            return
        if meta.uid and meta.uid in self.consumed:
            return  # deleted already: Volcano's Delete gets NotFound and stops
        self.consumed.add(meta.uid)
        target = cmd.target.name
        self.emit(o.DeleteBusCommand, target, name=meta.name, namespace=meta.namespace)
        self.request(target, cmd.action, COMMAND_ISSUED)

    # ------------------------------------------------------------------ the worker (queue_controller.go)

    def request(self, queue: str, action: str, event: str) -> None:
        requests = self._requests
        if self._draining:
            requests.append((queue, action, event))
            return
        self._draining = True
        try:
            handled = 0
            if not requests:  # the usual case (nothing queued): handled at once, not queued and popped
                handled = 1
                self._handle(queue, action, event)
            else:
                requests.append((queue, action, event))
            while requests and handled < MAX_REQUESTS:
                handled += 1
                self._handle(*requests.popleft())
            requests.clear()
        finally:
            self._draining = False

    def _handle(self, name: str, action: str, event: str) -> None:
        entry = self.queues.get(name)
        if entry is None:
            return  # handleQueue: the queue is gone (or not yet seen): nothing to do
        try:
            fn = handling(entry.state, action)
        except UnknownState:
            self._failed(name, action, event, f"queue {name} state {entry.state} is invalid", wrapped=False)
            return
        trigger = trigger_of(action)
        if fn == FN_OPEN:
            self._open(entry, action, event)
        elif fn == FN_CLOSE:
            self._close(entry)
        else:
            self._sync(entry, trigger)

    def _failed(self, name: str, action: str, event: str, err: str, *, wrapped: bool = True) -> None:
        """handleQueueErr after the last retry: a Warning event named after the action."""
        if wrapped:
            err = f"sync queue {name} failed for {err}, event is {event}, action is {action}"
        self.record_event(name, action, f"{action} queue failed for {err}", event_type="Warning")

    # ------------------------------------------------------------------ queue functions (queue_controller_action.go)

    def _write(self, entry: QueueEntry, state: str, fn: str) -> bool:
        """Write the state if it changes (Volcano's "ignore update when state does not change"); True when
        it did."""
        old = entry.state
        if state == old:
            return False
        entry.state = state
        entry.trail.append(state)
        if len(entry.trail) > MAX_TRAIL:
            del entry.trail[0]
        name = entry.name
        self.emit(o.UpdateQueueStatus, name, queue=name, state=state, uid=entry.uid,
                  resource_version=entry.resource_version)
        self.emit(o.QueueStateChanged, name, queue=name, from_state=old, to_state=state, action=fn)
        return True

    def _sync(self, entry: QueueEntry, trigger: str) -> None:
        name = entry.name
        state = fire(entry.state, trigger, Check(self.podgroups.podgroups_of(name)))
        self._write(entry, state, SYNC_QUEUE)
        self._sync_hierarchy(entry)

    def _open(self, entry: QueueEntry, action: str, event: str) -> None:
        name = entry.name
        if entry.state != OPEN:
            parent_name = entry.parent
            if parent_name and parent_name != ROOT:
                parent = self.queues.get(parent_name)
                if parent is None:
                    err = (f"Failed to get parent queue {parent_name} of queue {name}: "
                           f'queue.scheduling.volcano.sh "{parent_name}" not found')
                    self._failed(name, action, event, err)
                    return
                if parent.state in CLOSED_OR_CLOSING:
                    err = (f"Failed to open queue {name} because its parent queue {parent_name} "
                           "is closing or closed. Open the parent queue first.")
                    self._failed(name, action, event, err)
                    return
            for child in self._children(name):
                if child.closed_by_parent:
                    self.request(child.name, OPEN_QUEUE, "")
        state = fire(entry.state, OPEN_QUEUE, Check(self.podgroups.podgroups_of(name)))
        self._write(entry, state, FN_OPEN)
        entry.closed_by_parent = False

    def _close(self, entry: QueueEntry) -> None:
        name = entry.name
        if entry.state not in CLOSED_OR_CLOSING:
            if name == ROOT:
                return  # closeHierarchicalQueue: "Root queue cannot be closed", and nothing else happens
            for child in self._children(name):
                if child.state not in CLOSED_OR_CLOSING:
                    child.closed_by_parent = True
                    self.request(child.name, CLOSE_QUEUE, "")
        state = fire(entry.state, CLOSE_QUEUE, Check(self.podgroups.podgroups_of(name)))
        if self._write(entry, state, FN_CLOSE):
            self.record_event(name, CLOSE_QUEUE, "Close queue succeed")

    def _children(self, name: str) -> list[QueueEntry]:
        return [q for _, q in sorted(self.queues.items()) if q.name != ROOT and q.effective_parent == name]

    def _sync_hierarchy(self, entry: QueueEntry) -> None:
        """syncHierarchicalQueue: follow the parent's Closed/Closing, or reopen with it."""
        if entry.name == ROOT:
            return
        parent = self.queues.get(entry.effective_parent)
        if parent is None:
            return  # Volcano retries until the parent exists; the next sync here does the same check
        if parent.state in CLOSED_OR_CLOSING:
            if entry.state not in CLOSED_OR_CLOSING:
                entry.closed_by_parent = True
                self.request(entry.name, CLOSE_QUEUE, "")
        elif parent.state == OPEN and entry.state in CLOSED_OR_CLOSING and entry.closed_by_parent:
            self.request(entry.name, OPEN_QUEUE, "")
