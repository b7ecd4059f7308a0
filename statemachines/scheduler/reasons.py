"""Why a job's tasks are not scheduled, in Volcano's words: `TaskSchedulingReason` and
`JobInfo.FitError()` (`pkg/scheduler/api/job_info.go`), read from a session's job state.

Apart from the fit errors themselves (`fiterrors.py`), which the session state
(`state.py`) holds, so that this reading of the state imports it one way only.
"""

from __future__ import annotations

from statemachines.scheduler.fiterrors import histogram
from statemachines.scheduler.state import JobState, TaskState


def task_reason(job: JobState, task: TaskState) -> tuple[str, str, str]:
    """`TaskSchedulingReason`: (reason, message, nominated node) from the last transaction."""
    status, node, evicted = task.last_tx if task.last_tx is not None else (task.status, task.node, task.evicted)
    if status == "Allocated":
        return "Schedulable", f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}, once minAvailable is satisfied", ""
    if status == "Pipelined":
        message = (
            f"Pod {task.namespace}/{task.name} can possibly be assigned to {node}, "
            "once resource is released and minAvailable is satisfied"
        )
        return "Unschedulable", message, node if evicted else ""
    if status == "Pending":
        fe = job.fit_errors.get(task.uid)
        if fe is not None:
            return "Unschedulable", fe.message(), ""
        return "Unschedulable", "", ""
    return status, "", ""


def job_fit_error(job: JobState) -> str:
    """`JobInfo.FitError()`: readiness, status histogram, pending reasons, origin."""
    counts = {status: len(bucket) for status, bucket in job.index.items()}
    counts["minAvailable"] = job.min_available
    ready = "pod group is ready" if job.is_ready() else "pod group is not ready"
    message = f"{ready}, {', '.join(histogram(counts))}"
    pending = job.index.get("Pending")
    if pending:
        reasons: dict[str, int] = {}
        for task in pending.values():
            reason = task_reason(job, task)[0]
            reasons[reason] = reasons.get(reason, 0) + 1
        message += f"; Pending: {', '.join(histogram(reasons))}"
    for uid, fe in job.fit_errors.items():  # first recorded (Volcano: first in Go map order)
        origin = job.tasks.get(uid)
        if origin is not None:
            message += f". Origin reason is {origin.name}: {fe.message()}"
            break
    return message
