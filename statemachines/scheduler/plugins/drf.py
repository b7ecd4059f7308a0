"""drf plugin (`pkg/scheduler/plugins/drf/drf.go`, reference §7.2; no hierarchy): jobs with the smaller
dominant share go first; preemption only towards a fairer share."""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption
from statemachines.scheduler.framework import PERMIT, Session
from statemachines.scheduler.resources import Res
from statemachines.scheduler.state import TaskState

NAME = "drf"
SHARE_DELTA = 1e-6


def open_plugin(ssn: Session, option: PluginOption) -> None:
    total = ssn.total
    names = total.names()
    shares: dict[str, float] = {}
    allocated: dict[str, Res] = {}

    def compute(alloc: Res) -> float:
        best = 0.0
        for name in names:
            t = total.get(name)
            a = alloc.get(name)
            s = (0.0 if a == 0 else 1.0) if t == 0 else a / t
            if s > best:
                best = s
        return best

    for job in ssn.jobs.values():
        alloc = job.allocated.copy()
        allocated[job.key] = alloc
        shares[job.key] = compute(alloc)

    ssn.add("job_order", NAME, lambda job: shares.get(job.key, 0.0))

    def preemptable(preemptor: TaskState, preemptees: list[TaskState]) -> tuple[list[TaskState], int]:
        pjob = preemptor.job
        if pjob is None or pjob.key not in allocated:
            return [], PERMIT
        ls = compute(allocated[pjob.key].plus(preemptor.req))
        allocations: dict[str, Res] = {}
        victims = []
        for t in preemptees:
            job = t.job
            if job is None or job.key not in allocated:
                continue
            if job.key not in allocations:
                allocations[job.key] = allocated[job.key].copy()
            rs = compute(allocations[job.key].sub(t.req))
            if ls < rs or abs(ls - rs) <= SHARE_DELTA:
                victims.append(t)
        return victims, PERMIT

    ssn.add("preemptable", NAME, preemptable)

    def on_allocate(task: TaskState) -> None:
        job = task.job
        if job is not None and job.key in allocated:
            alloc = allocated[job.key].add(task.req)
            shares[job.key] = compute(alloc)

    def on_deallocate(task: TaskState) -> None:
        job = task.job
        if job is not None and job.key in allocated:
            alloc = allocated[job.key].sub(task.req)
            shares[job.key] = compute(alloc)

    ssn.allocate_handlers.append(on_allocate)
    ssn.deallocate_handlers.append(on_deallocate)
