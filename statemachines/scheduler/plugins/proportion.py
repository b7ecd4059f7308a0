"""proportion plugin (`pkg/scheduler/plugins/proportion/proportion.go`, reference §6): queue fair share.

At open, for every queue that has a job in the session: realCapability, allocated, request
(with the pods an admitted PodGroup still awaits, `awaited_request`), inqueue and elastic; then the deserved shares by iterative water-filling over the queue
weights, clamped by realCapability and request and raised to the guarantee. Then:
queue order (priority, then smaller share), Overused, Allocatable, Preemptive,
Reclaimable, the enqueue vote (an admitted job's awaited pods join its queue's request and the
shares are filled again) and live share updates on (de)allocation.
"""

from __future__ import annotations

from statemachines.scheduler.accounting import QueueState
from statemachines.scheduler.config import PluginOption
from statemachines.scheduler.framework import PERMIT, REJECT, Session
from statemachines.scheduler.model import ALLOCATED_STATUS, PENDING
from statemachines.scheduler.resources import (
    EPS,
    PODS,
    Res,
    exceeded_part,
    exceeds_on_requested,
    is_scalar_name,
    less_equal,
    max_dims,
    min_dims,
    share,
)
from statemachines.scheduler.state import JobState, TaskState

NAME = "proportion"
INF = float("inf")


def inqueue_resource(job: JobState) -> Res:
    """`GetInqueueResource`: max(minResources - allocated, 0) on the dimensions minResources lists
    (cpu, memory, pods, scalars), minus scheduling-gated pods' requests (`DeductSchGatedResources`)."""
    minres = job.min_resources
    out = Res()
    if minres is None:
        return out
    alloc = job.allocated
    raw = job.fact.min_resources_names
    if "cpu" in raw and minres.cpu - alloc.cpu > 0:
        out.cpu = minres.cpu - alloc.cpu
    if "memory" in raw and minres.mem - alloc.mem > 0:
        out.mem = minres.mem - alloc.mem
    for name in raw:
        if name in ("cpu", "memory"):
            continue
        if name != PODS and (name.startswith("count/") or not is_scalar_name(name)):
            continue
        reserved = minres.sc.get(name, 0.0) - alloc.sc.get(name, 0.0)
        if reserved > 0:
            out.sc[name] = reserved
    return deduct_gated(job, out)


def deduct_gated(job: JobState, res: Res) -> Res:
    gated = Res()
    for task in job.tasks.values():
        if task.fact.gated and not task.fact.only_volcano_gate:
            gated.add(task.req)
    if gated.is_empty():
        return res
    out = res.copy()
    out.cpu = max(out.cpu - gated.cpu, 0.0)
    out.mem = max(out.mem - gated.mem, 0.0)
    for name, value in res.sc.items():
        if name in gated.sc:
            out.sc[name] = max(value - gated.sc[name], 0.0)
    return out


AWAITING_PODS = frozenset({"Inqueue", "Running", "Unknown"})  # admitted: the controller creates the pods


def awaited_request(job: JobState) -> Res:
    """The requests of the pods an admitted PodGroup's `minTaskMember` promises that do not exist yet.

    Volcano's controller creates all the pods of a job the moment its PodGroup is Inqueue, in one
    parallel burst, so its next session sees them; vcbus's actuator creates them a command at a time,
    and a session in between must not hand their share to another queue. A missing pod is counted at
    the request of an existing pod of its task, else at the PodGroup's minResources per member (the
    job controller sums minResources over the first minMember pods); without either it is not counted.
    Not Volcano's: docs/scheduler.md, "Queue shares"."""
    want = job.fact.min_task_member
    out = Res()
    if not want:
        return out
    have: dict[str, int] = {}
    sample: dict[str, Res] = {}
    for t in job.tasks.values():
        have[t.role] = have.get(t.role, 0) + 1
        if t.role not in sample:
            sample[t.role] = t.req
    per_member: Res | None = None
    for role in sorted(want):
        missing = want[role] - have.get(role, 0)
        if missing <= 0:
            continue
        req = sample.get(role)
        if req is None:
            if per_member is None:
                minres, members = job.min_resources, job.fact.min_member
                per_member = minres.scaled(1 / members) if minres is not None and members > 0 else Res()
            req = per_member
        out.add(req.scaled(missing))
    return out


def update_share(q: QueueState) -> None:
    best = 0.0
    for name in q.deserved.names():
        s = share(q.allocated.get(name), q.deserved.get(name))
        if s > best:
            best = s
    q.share = best


def _equal(a: Res, b: Res) -> bool:
    return a.cpu == b.cpu and a.mem == b.mem and a.sc == b.sc


def water_fill(queues: list[QueueState], total: Res) -> None:
    """§6.2: distribute `total` by weight until every queue is met or capped."""
    remaining = total.copy()
    met: set[str] = set()
    while True:
        total_weight = sum(q.weight for q in queues if q.uid not in met)
        if total_weight == 0:
            break
        old_remaining = remaining.copy()
        increased = Res()
        decreased = Res()
        for q in queues:
            if q.uid in met:
                continue
            old = q.deserved.copy()
            deserved = q.deserved.add(remaining.scaled(q.weight / total_weight))
            if q.real_capability is not None:
                deserved = min_dims(deserved, q.real_capability, infinity=True)
            deserved = min_dims(deserved, q.request)
            q.deserved = max_dims(deserved, q.guarantee)
            update_share(q)
            if less_equal(q.request, q.deserved) or _equal(q.deserved, old):
                met.add(q.uid)
            inc, dec = _diff(q.deserved, old)
            increased.add(inc)
            decreased.add(dec)
        remaining = exceeded_part(remaining.plus(decreased), increased)
        if remaining.is_empty() or _equal(remaining, old_remaining):
            break


def _diff(new: Res, old: Res) -> tuple[Res, Res]:
    """`Resource.Diff(old, Zero)`: (increase, decrease) per dimension."""
    inc, dec = Res(), Res()
    if new.cpu > old.cpu:
        inc.cpu = new.cpu - old.cpu
    else:
        dec.cpu = old.cpu - new.cpu
    if new.mem > old.mem:
        inc.mem = new.mem - old.mem
    else:
        dec.mem = old.mem - new.mem
    for name in set(new.sc) | set(old.sc):
        left, right = new.sc.get(name, 0.0), old.sc.get(name, 0.0)
        if left > right:
            inc.sc[name] = left - right
        else:
            dec.sc[name] = right - left
    return inc, dec


def open_plugin(ssn: Session, option: PluginOption) -> None:
    total = ssn.total
    total_guarantee = Res()
    q: QueueState | None  # a session queue, then a job's queue looked up (or none)
    for q in ssn.queues.values():
        if q.fact.guarantee.cpu or q.fact.guarantee.mem or q.fact.guarantee.sc:
            total_guarantee.add(q.fact.guarantee)
    attrs: dict[str, QueueState] = {}
    for job in ssn.jobs.values():
        q = ssn.queues.get(job.queue)
        if q is None:
            continue
        if q.uid not in attrs:
            attrs[q.uid] = q
            q.has_attr = True
            q.guarantee = q.fact.guarantee.copy()
            cap = q.fact.capability
            real = exceeded_part(total, total_guarantee).add(q.guarantee)
            if cap is not None:
                cap = cap.copy()
                if cap.cpu <= 0:
                    cap.cpu = INF
                if cap.mem <= 0:
                    cap.mem = INF
                q.capability = cap
                real = min_dims(real, cap, infinity=True)
            q.real_capability = real
        for status, bucket in job.index.items():
            if status in ALLOCATED_STATUS:
                for t in bucket.values():
                    q.allocated.add(t.req)
                    q.request.add(t.req)
            elif status == PENDING:
                for t in bucket.values():
                    q.request.add(t.req)
        if job.phase in AWAITING_PODS and job.fact.min_task_member:
            q.request.add(awaited_request(job))
        if job.min_resources is not None and (
            job.phase == "Inqueue" or (job.phase == "Running" and job.allocated_num() >= job.fact.min_member)
        ):
            q.inqueue.add(inqueue_resource(job))
        q.elastic.add(exceeded_part(job.allocated, job.min_resources or Res()))

    ordered = [attrs[k] for k in sorted(attrs)]
    water_fill(ordered, total)

    ssn.add("queue_order", NAME, lambda q: (-q.priority, q.share))

    def reclaimable(reclaimer: TaskState, reclaimees: list[TaskState]) -> tuple[list[TaskState], int]:
        allocations: dict[str, Res] = {}
        victims = []
        for t in reclaimees:
            job = t.job
            if job is None:
                continue
            q = attrs.get(job.queue)
            if q is None:
                continue
            if q.uid not in allocations:
                allocations[q.uid] = q.allocated.copy()
            allocated = allocations[q.uid]
            if not less_equal(allocated, q.deserved):
                allocated.sub(t.req)
                victims.append(t)
        return victims, PERMIT

    ssn.add("reclaimable", NAME, reclaimable)
    ssn.add("overused", NAME, lambda q: q.has_attr and less_equal(q.deserved, q.allocated))

    def queue_allocatable(q: QueueState, tasks: list[TaskState]) -> bool:
        if q.state != "Open" or not q.has_attr:
            return False
        req = Res()
        for t in tasks:
            req.add(t.req)
        return not exceeds_on_requested(q.allocated.plus(req), q.deserved, req)

    ssn.add("allocatable", NAME, lambda q, task: queue_allocatable(q, [task]))
    ssn.add("preemptive", NAME, queue_allocatable)

    def enqueueable(job: JobState) -> int:
        q = ssn.queues[job.queue]
        if q.state != "Open":
            return REJECT
        if job.min_resources is None:
            return PERMIT
        min_req = job.min_resources
        want = min_req.plus(q.allocated).add(q.inqueue).sub(q.elastic)
        names = exceeds_on_requested(want, q.real_capability or Res(), min_req)
        if not names:
            return PERMIT
        message = "queue resource quota insufficient: " + ", ".join(f"insufficient {n}" for n in names)
        ssn.record_event(job, "Normal", "Unschedulable", message, "enqueue")
        job.enqueue_message = message
        return REJECT

    def enqueued(job: JobState) -> None:
        q = attrs.get(job.queue)
        if q is None:
            return
        if job.min_resources is not None:
            q.inqueue.add(deduct_gated(job, job.min_resources))
        awaited = awaited_request(job)
        if not awaited.is_empty():  # its pods are due now: the shares allocate uses count them (not Volcano's)
            q.request.add(awaited)
            for each in ordered:
                each.deserved = Res()
            water_fill(ordered, total)

    ssn.add("job_enqueueable", NAME, enqueueable)
    ssn.add("job_enqueued", NAME, enqueued)

    def on_allocate(task: TaskState) -> None:
        job = task.job
        q = attrs.get(job.queue) if job is not None else None
        if q is not None:
            q.allocated.add(task.req)
            update_share(q)

    def on_deallocate(task: TaskState) -> None:
        job = task.job
        q = attrs.get(job.queue) if job is not None else None
        if q is not None:
            q.allocated.sub(task.req)
            update_share(q)

    ssn.allocate_handlers.append(on_allocate)
    ssn.deallocate_handlers.append(on_deallocate)


__all__ = ["open_plugin", "water_fill", "inqueue_resource", "EPS"]
