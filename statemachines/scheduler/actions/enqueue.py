"""enqueue action (`pkg/scheduler/actions/enqueue/enqueue.go`, reference §4): Pending -> Inqueue.

Queues in QueueOrder, each popping its best Pending job (JobOrder) once per turn; a job
without minResources is admitted unconditionally, otherwise when JobEnqueueable votes yes.
A rejected job does not block the next one of its queue."""

from __future__ import annotations

from statemachines.scheduler.accounting import QueueState
from statemachines.scheduler.actions.heap import KeyHeap
from statemachines.scheduler.framework import Session
from statemachines.scheduler.state import JobState


def execute(ssn: Session) -> None:
    queues: KeyHeap[QueueState] = KeyHeap(ssn.queue_key)
    seen: set[str] = set()
    jobs_by_queue: dict[str, KeyHeap[JobState]] = {}
    for job in ssn.jobs.values():
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.uid not in seen:
            seen.add(queue.uid)
            queues.push(queue)
        if job.is_pending():
            heap = jobs_by_queue.get(job.queue)
            if heap is None:
                heap = jobs_by_queue[job.queue] = KeyHeap(ssn.job_key)
            heap.push(job)
    while queues:
        queue = queues.pop()
        jobs = jobs_by_queue.get(queue.uid)
        if not jobs:
            continue
        job = jobs.pop()
        if job.min_resources is None or ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            job.phase = "Inqueue"
            ssn.enqueued.append(job)
        queues.push(queue)
