"""Volcano's vcjob and queue admission webhooks as pure functions.

- `mutate`: the job mutating webhook (defaults, JSON Patch);
- `validate`: the job validating webhook (CREATE fragments, UPDATE rules);
- `policies`, `podtemplate`, `fields`: the pieces of job validation;
- `queues`, `queue_resources`: the queue webhooks and the queue index;
- `quantity`, `resources`, `semantic`: Kubernetes quantity arithmetic, pod
  resource totals and semantic equality;
- `review`: AdmissionReview routing for the HTTPS adapter (`vcbus.webhook`).
"""

from __future__ import annotations

from statemachines.admission.mutate import apply_patch, job_patch, mutate_job
from statemachines.admission.queues import QueueIndex, default_queues, queue_patch, validate_queue
from statemachines.admission.validate import Problem, Verdict, validate_create, validate_update

__all__ = [
    "Problem",
    "QueueIndex",
    "Verdict",
    "apply_patch",
    "default_queues",
    "job_patch",
    "mutate_job",
    "queue_patch",
    "validate_create",
    "validate_queue",
    "validate_update",
]
