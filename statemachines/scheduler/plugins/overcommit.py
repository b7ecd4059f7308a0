"""overcommit plugin (`pkg/scheduler/plugins/overcommit/overcommit.go`, reference §4.2): a job may
enqueue while the inqueue reservations plus its minResources fit in total x factor - used."""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption, arg_float
from statemachines.scheduler.framework import PERMIT, REJECT, Session
from statemachines.scheduler.plugins.proportion import deduct_gated, inqueue_resource
from statemachines.scheduler.resources import Res, exceeds_on_requested
from statemachines.scheduler.state import JobState

NAME = "overcommit"
DEFAULT_FACTOR = 1.2


def open_plugin(ssn: Session, option: PluginOption) -> None:
    factor = arg_float(option.arguments, "overcommit-factor", DEFAULT_FACTOR)
    if factor < 1.0:
        factor = DEFAULT_FACTOR
    used = Res()
    for node in ssn.node_list:
        used.add(node.used)
    idle = ssn.total.scaled(factor).sub(used)
    inqueue = Res()
    for job in ssn.jobs.values():
        if job.min_resources is None:
            continue
        if job.phase == "Inqueue":
            inqueue.add(deduct_gated(job, job.min_resources))
        elif job.phase == "Running" and job.allocated_num() >= job.fact.min_member:
            inqueue.add(inqueue_resource(job))

    def enqueueable(job: JobState) -> int:
        if job.min_resources is None:
            return PERMIT
        min_req = job.min_resources
        names = exceeds_on_requested(inqueue.plus(min_req), idle, min_req)
        if not names:
            return PERMIT
        message = "resource in cluster is overused: " + ", ".join(f"overused {n}" for n in names)
        ssn.record_event(job, "Normal", "Unschedulable", message, "enqueue")
        job.enqueue_message = message
        return REJECT

    def enqueued(job: JobState) -> None:
        if job.min_resources is not None:
            inqueue.add(deduct_gated(job, job.min_resources))

    ssn.add("job_enqueueable", NAME, enqueueable)
    ssn.add("job_enqueued", NAME, enqueued)
