"""What `vcbus why-pending` shows for a job: everything the session knew about why it waits.

One `JobReport` per PodGroup per session: its queue (state, share, deserved, allocated),
phase, the enqueue rejection (if an enqueue vote said no), the gang condition message, and
for each task its status, the reason/message its pod condition carries and its fit errors
per node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from msgspec import Struct

from statemachines.scheduler.resources import EPS, Res, to_quantities

if TYPE_CHECKING:
    from statemachines.scheduler.framework import Session
    from statemachines.scheduler.state import JobState


class TaskReport(Struct, frozen=True, gc=False):
    name: str
    role: str
    status: str
    node: str = ""
    reason: str = ""
    message: str = ""
    node_errors: dict[str, tuple[str, ...]] = {}  # node -> reasons (this session)
    fit_error: str = ""  # the task's FitErrors text
    too_big: str = ""  # a Pending task's request above every node's allocatable: `Insufficient cpu: ...`


class JobReport(Struct, frozen=True, gc=False):
    podgroup: str  # <ns>/<podgroup>
    job: str  # <ns>/<vcjob> owning it (or the podgroup)
    queue: str
    queue_state: str
    queue_share: float
    queue_deserved: dict[str, str]
    queue_allocated: dict[str, str]
    phase: str
    min_member: int
    tasks_total: int
    ready: bool
    valid: str = ""  # gang jobValid failure message, "" when valid
    enqueue_message: str = ""
    condition_type: str = ""  # Scheduled | Unschedulable (this session's gang condition)
    condition_message: str = ""
    fit_error: str = ""  # the job's FitError string
    tasks: list[TaskReport] = []


def largest(ssn: Session) -> dict[str, tuple[float, str]]:
    """Per resource the largest allocatable of the session's nodes and the node that has it (first by name)."""
    if ssn.largest is None:
        out: dict[str, tuple[float, str]] = {}
        for node in ssn.node_list:
            alloc = node.alloc
            for name, value in (("cpu", alloc.cpu), ("memory", alloc.mem), *alloc.sc.items()):
                if name not in out or value > out[name][0]:
                    out[name] = (value, node.name)
        ssn.largest = out
    return ssn.largest


def too_big(ssn: Session, task: Any) -> str:  # a TaskState
    """`Insufficient <resource>: requests <q>, the largest allocatable is <q> (<node>)` for the first
    resource (cpu, memory, then by name) the task asks more of than any node has, or ""."""
    if not ssn.node_list:
        return ""
    most = largest(ssn)
    req = task.req
    for name, value in (("cpu", req.cpu), ("memory", req.mem), *sorted(req.sc.items())):
        have, node = most.get(name, (0.0, ""))
        if value - have >= EPS:
            asked, top = _quantity(name, value), _quantity(name, have)
            where = f" ({node})" if node else " (no node has it)"
            return f"Insufficient {name}: requests {name} {asked}, the largest allocatable is {name} {top}{where}"
    return ""


def _quantity(name: str, value: float) -> str:
    if name == "cpu":
        return to_quantities(Res(cpu=value))[name]
    if name == "memory":
        return to_quantities(Res(mem=value))[name]
    return to_quantities(Res(sc={name: value}))[name]


def job_report(ssn: Session, job: JobState, fit_error: str, pod_lines: list[tuple[Any, str, str, str]]) -> JobReport:
    queue = ssn.queues.get(job.queue)
    lines = {task.uid: (reason, message) for task, reason, message, _ in pod_lines}
    tasks = []
    for task in sorted(job.tasks.values(), key=lambda t: t.name):
        fe = job.fit_errors.get(task.uid)
        reason, message = lines.get(task.uid, ("", ""))
        tasks.append(
            TaskReport(
                name=task.name,
                role=task.role,
                status=task.status,
                node=task.node,
                reason=reason,
                message=message,
                node_errors={n: fe.nodes[n].reasons_ for n in sorted(fe.nodes)} if fe else {},
                fit_error=fe.message() if fe else "",
                too_big=too_big(ssn, task) if task.status == "Pending" else "",
            )
        )
    cond = next((c for c in job.conditions if c.transition_id == ssn.uid), None)
    valid = ssn.job_valid(job)
    return JobReport(
        podgroup=job.key,
        job=job.fact.owner,
        queue=job.queue,
        queue_state=queue.state if queue else "",
        queue_share=queue.share if queue else 0.0,
        queue_deserved=to_quantities(queue.deserved) if queue and queue.has_attr else {},
        queue_allocated=to_quantities(queue.allocated) if queue and queue.has_attr else {},
        phase=job.phase,
        min_member=job.min_available,
        tasks_total=len(job.tasks),
        ready=job.is_ready(),
        valid=valid[1] if valid else "",
        enqueue_message=job.enqueue_message,
        condition_type=cond.type if cond else "",
        condition_message=cond.message if cond else "",
        fit_error=fit_error,
        tasks=tasks,
    )
