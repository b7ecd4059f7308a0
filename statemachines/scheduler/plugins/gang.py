"""gang plugin (`pkg/scheduler/plugins/gang/gang.go`, reference §3): job validity, readiness,
pipelining, starvation, the not-ready-first job order and the victim limit that keeps every
victim's job at >= minAvailable ready tasks. Its session-close conditions live in
`statemachines.scheduler.close`."""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption
from statemachines.scheduler.framework import PERMIT, REJECT, Session
from statemachines.scheduler.state import JobState, TaskState

NAME = "gang"
NOT_ENOUGH_PODS_OF_TASK = "NotEnoughPodsOfTask"
NOT_ENOUGH_TASKS = "NotEnoughTasks"


def job_valid(job: JobState) -> tuple[str, str] | None:
    """(reason, message) when the job cannot be gang-scheduled now, else None."""
    if not job.check_task_valid():
        return NOT_ENOUGH_PODS_OF_TASK, "Not enough valid pods of each task for gang-scheduling"
    valid = job.valid_num()
    if valid < job.min_available:
        return NOT_ENOUGH_TASKS, f"Not enough valid tasks for gang-scheduling, valid: {valid}, min: {job.min_available}"
    return None


def job_ready(job: JobState) -> bool:
    return job.check_task_ready() and job.is_ready()


def job_pipelined(job: JobState) -> int:
    return PERMIT if job.check_task_pipelined() and job.is_pipelined() else REJECT


def victims_keep_min(preemptor: TaskState, preemptees: list[TaskState]) -> tuple[list[TaskState], int]:
    """§3.4: walk the candidates; take one only while its job keeps > minAvailable ready tasks."""
    occupied: dict[str, int] = {}
    victims = []
    for t in preemptees:
        job = t.job
        if job is None:
            continue
        if job.key not in occupied:
            occupied[job.key] = job.ready_num()
        if occupied[job.key] > job.min_available:
            occupied[job.key] -= 1
            victims.append(t)
    return victims, PERMIT


def open_plugin(ssn: Session, option: PluginOption) -> None:
    ssn.add("job_valid", NAME, job_valid)
    ssn.add("reclaimable", NAME, victims_keep_min)
    ssn.add("preemptable", NAME, victims_keep_min)
    ssn.add("job_order", NAME, lambda job: 1 if job.is_ready() else 0)
    ssn.add("job_ready", NAME, job_ready)
    ssn.add("job_pipelined", NAME, job_pipelined)
    ssn.add("job_starving", NAME, lambda job: job.is_starving())
