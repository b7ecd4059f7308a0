"""The status projection: for every job, the `status` object Volcano would write.

A fold over the domain events: each `StatusChanged` carries the whole status
the controller wrote, so the view is simply the last one per job. A job whose
first appearance already carried a status (a running cluster, nearly every
recorded `kubectl get -w` log) starts from that adopted status, which its
`JobObserved` carries: a job the controller then leaves alone still reports
the status the log showed. The view is the JSON-ready dict that goes into
the vcjob's status subresource (and into the `vcbus_status` KV bucket on the
bus). `position` is the last applied `seq`:
re-applying an event at or below it changes nothing, which makes re-delivery
harmless and lets a rebuild from sequence 1 equal the live view.

A job one of whose records was set aside (`record.poison.v1`) gets a
condition `{"type": "Poisoned", "status": "True", "reason": "RecordPoisoned",
"message": ...}` appended to its status conditions (a status of its own if it
has none yet) until every such record's retry was decided (`record.retried.v1`),
so its owner sees that the job's view may be missing something.

Each task's phase (the task machine, statemachines/task/) is folded from
`task.phase.changed.v1` beside the status (`task_phases`): Volcano's status
has no task phase, so it is not put into the status object itself; the
replay report and the history bucket carry it as the job's `tasks`.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from statemachines import outputs as o
from statemachines.model.status import JobStatus


class StatusView:
    def __init__(self) -> None:
        self.statuses: dict[str, JobStatus] = {}
        self.deleted: set[str] = set()
        self.poisoned: dict[str, dict[tuple[str, int], o.RecordPoisoned]] = {}
        self.tasks: dict[str, dict[str, str]] = {}  # job -> task -> task phase
        self.pods: dict[str, dict[str, dict[str, int]]] = {}  # job -> task -> pod phase -> pods, when it last moved
        self.position = 0

    def apply(self, event: o.Output, position: int | None = None) -> bool:
        """Fold one event; `position` defaults to the event's seq. False when already applied."""
        pos = event.seq if position is None else position
        if pos < self.position:
            return False
        self.position = pos
        # by exact class, `type(event) is` (mypy narrows on it; the outputs are never subclassed): a failed
        # isinstance against a msgspec Struct class goes through its metaclass's __instancecheck__, and most
        # events fail several
        if type(event) is o.StatusChanged:
            self.statuses[event.job] = event.status
            self.deleted.discard(event.job)
        elif type(event) is o.JobObserved:
            # a new incarnation: its adopted status, or none until the controller writes one
            if event.status is not None:
                self.statuses[event.job] = event.status
            else:
                self.statuses.pop(event.job, None)
            self.deleted.discard(event.job)
        elif type(event) is o.TaskPhaseChanged:
            self.tasks.setdefault(event.job, {})[event.task] = event.to_phase
            self.pods.setdefault(event.job, {})[event.task] = pod_counts(event)
        elif type(event) is o.JobDeleted:
            self.deleted.add(event.job)
        elif type(event) is o.RecordPoisoned:
            self.poisoned.setdefault(event.job, {})[(event.stream, event.sequence)] = event
        elif type(event) is o.RecordRetried:
            records = self.poisoned.get(event.job, {})
            records.pop((event.stream, event.sequence), None)
            if not records:
                self.poisoned.pop(event.job, None)
        return True

    def apply_all(self, events: Iterable[o.Output]) -> StatusView:
        for e in events:
            self.apply(e)
        return self

    def status(self, job: str) -> dict | None:
        status = self.statuses.get(job)
        poisoned = self.poisoned.get(job)
        if status is None and not poisoned:
            return None
        out = msgspec.to_builtins(status) if status is not None else {}
        out.setdefault("state", {})
        if poisoned:
            out["conditions"] = [*(out.get("conditions") or []), poisoned_condition(list(poisoned.values()))]
        return out

    def task_phases(self, job: str) -> dict[str, str]:
        """Each task's phase, by task name ({} before any task moved)."""
        return dict(sorted(self.tasks.get(job, {}).items()))

    def task_pods(self, job: str) -> dict[str, dict[str, int]]:
        """Each task's pods by phase when the task last moved ({} before any task moved)."""
        return dict(sorted(self.pods.get(job, {}).items()))

    def jobs(self) -> list[str]:
        return sorted(self.statuses)


def pod_counts(event: o.TaskPhaseChanged) -> dict[str, int]:
    """The task's pods by pod phase in a move, named as `status.taskStatusCount` names them (zeros left out)."""
    counts = (("Pending", event.pending), ("Running", event.running), ("Succeeded", event.succeeded),
              ("Failed", event.failed), ("Unknown", event.unknown))
    return {phase: n for phase, n in counts if n}


def poisoned_condition(records: list[o.RecordPoisoned]) -> dict[str, str]:
    """The `Poisoned` status condition for a job's records set aside (latest first in the message)."""
    last = records[-1]
    where = ", ".join(f"{r.stream} seq {r.sequence}" for r in records)
    return {
        "type": "Poisoned",
        "status": "True",
        "reason": "RecordPoisoned",
        "message": f"{len(records)} record(s) set aside ({where}); last: {last.reason}",
        "lastTransitionTime": last.time,
    }
