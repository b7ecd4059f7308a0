"""The vcjob `status` object, exactly as Volcano writes it, and how it is counted.

Field names and `omitempty` behaviour follow `volcano.sh/apis`
`batch/v1alpha1.JobStatus`: zero counters, empty maps and nil durations are
left out of the JSON. The structs are mutable on purpose: the controller code
copies a status, changes the copy and compares it with the old one, as
Volcano's syncJob does (`reflect.DeepEqual`).
"""

from __future__ import annotations

import msgspec
from msgspec import Struct

from statemachines.model.vocabulary import Phase


class JobState(Struct, rename="camel", omit_defaults=True, gc=False):
    phase: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class JobCondition(Struct, rename="camel", omit_defaults=True, gc=False):
    status: str
    last_transition_time: str | None = None


class JobStatus(Struct, rename="camel", omit_defaults=True, gc=False):
    state: JobState = msgspec.field(default_factory=JobState)
    min_available: int = 0
    task_status_count: dict[str, dict[str, dict[str, int]]] | None = None
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    version: int = 0
    retry_count: int = 0
    running_duration: str | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[JobCondition] | None = None

    @property
    def phase(self) -> str:
        return self.state.phase


# Pod phases as Volcano classifies them; anything else (including "") is Unknown.
POD_PHASES = frozenset(("Pending", "Running", "Succeeded", "Failed"))


def copy_status(status: JobStatus) -> JobStatus:
    """A copy deep enough that changing the copy never changes `status`."""
    return msgspec.structs.replace(status, state=msgspec.structs.replace(status.state))


def copy_killed(status: JobStatus, version: int, terminating: int) -> JobStatus:
    """`copy_status` with the counts of a kill: only the pods going away, `terminating`.

    (Volcano's killJob counts the pods whose deletion failed too; here deletion is a
    command, so none does.) One `replace`: a kill runs on every pod record while a
    job is Restarting, Completing, Aborting or Terminating."""
    return msgspec.structs.replace(
        status,
        state=msgspec.structs.replace(status.state),
        version=version,
        terminating=terminating,
        pending=0,
        running=0,
        succeeded=0,
        failed=0,
        unknown=0,
        task_status_count=None,
    )


def set_transition(status: JobStatus, now: str) -> None:
    """LTT = now, and the current phase's condition moved to the end with that time."""
    status.state.last_transition_time = now
    phase = status.state.phase
    kept = []
    for c in status.conditions or ():  # a loop, not a comprehension: one call less (every status change)
        if c.status != phase:
            kept.append(c)
    kept.append(JobCondition(status=phase, last_transition_time=now))
    status.conditions = kept


def set_counts(status: JobStatus, per_task: dict[str, dict[str, int]]) -> None:
    """Totals and taskStatusCount from per-task phase counters ("Unknown" for any other phase)."""
    if not per_task:  # no pod counted: all zero
        status.pending = status.running = status.succeeded = status.failed = status.unknown = 0
        status.task_status_count = None
        return
    pending = running = succeeded = failed = unknown = 0
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for task, counter in per_task.items():  # a counter usually holds one or two phases
        counts[task] = {"phase": counter}
        for phase, n in counter.items():
            if phase == "Running":
                running += n
            elif phase == "Pending":
                pending += n
            elif phase == "Succeeded":
                succeeded += n
            elif phase == "Failed":
                failed += n
            elif phase == "Unknown":
                unknown += n
    status.pending, status.running, status.succeeded = pending, running, succeeded
    status.failed, status.unknown = failed, unknown
    # An empty map is left out of the JSON, so it reads back as nil (docs/fidelity.md).
    status.task_status_count = counts


def initial_status(min_available: int, now: str) -> JobStatus:
    """What the first sync writes: phase Pending, LTT now, the Pending condition."""
    status = JobStatus(min_available=min_available)
    status.state.phase = Phase.PENDING
    set_transition(status, now)
    return status

