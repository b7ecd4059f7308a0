"""priority plugin (`pkg/scheduler/plugins/priority/priority.go`, reference §7.1): higher job and task
priority first; preemption only of lower priority; starving while ready + waiting < all tasks."""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption
from statemachines.scheduler.framework import PERMIT, Session
from statemachines.scheduler.state import JobState, TaskState

NAME = "priority"


def open_plugin(ssn: Session, option: PluginOption) -> None:
    ssn.add("task_order", NAME, lambda task: -task.fact.priority)
    ssn.add("job_order", NAME, lambda job: -job.priority)

    def preemptable(preemptor: TaskState, preemptees: list[TaskState]) -> tuple[list[TaskState], int]:
        pjob = preemptor.job
        if pjob is None:
            return [], PERMIT
        victims = []
        for t in preemptees:
            job = t.job
            if job is None:
                continue
            if job is not pjob:
                if job.priority < pjob.priority:
                    victims.append(t)
            elif t.fact.priority < preemptor.fact.priority:
                victims.append(t)
        return victims, PERMIT

    ssn.add("preemptable", NAME, preemptable)

    def starving(job: JobState) -> bool:
        return job.ready_num() + job.waiting_num() < len(job.tasks)

    ssn.add("job_starving", NAME, starving)
