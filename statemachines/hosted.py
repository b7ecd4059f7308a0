"""What the controllers that fold beside the job engine share: outputs stamped from their host.

Volcano's cronjob and jobflow controllers (statemachines/cronjobs/, statemachines/jobflows/) run
inside `Engine.apply` on the records of their kinds. Their outputs go to the host's `out`, stamped
with the record's `seq` and the log's `now`, and their Kubernetes Events are the controller
manager's, on the object of their kind.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.objects import Job

COMPONENT = "vc-controller-manager"


class JobLister:
    """Volcano's vcjob lister: every vcjob by namespace/name, at its last version. The engine keeps one for
    all the controllers beside it (each record listed once)."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}

    def list(self, rtype: str, job: Job) -> bool:
        """A vcjob record into the lister; False when it brings nothing new (the version already listed)."""
        meta = job.metadata
        key = f"{meta.namespace}/{meta.name}"
        if rtype == "DELETED":
            self.jobs.pop(key, None)
            return True
        old = self.jobs.get(key)
        if old is not None and old.metadata.resource_version == meta.resource_version:
            return False
        self.jobs[key] = job
        return True


class HostedController:
    """`KIND`/`API_VERSION`: the object the controller's Events are about. `lister`: the engine's shared
    one (the engine lists each vcjob record, then calls `on_job`), else the controller's own (`job`)."""

    KIND = ""
    API_VERSION = ""

    def __init__(self, host: Any, lister: JobLister | None = None) -> None:
        self.host = host
        self.lister = lister or JobLister()
        self.jobs = self.lister.jobs
        self.deleting: set[str] = set()  # uids of the vcjobs the controller asked to delete

    def job(self, rtype: str, job: Job) -> None:
        """A vcjob record, for a controller with a lister of its own (the domain tests' folds)."""
        if self.lister.list(rtype, job):
            self.on_job(rtype, job)

    def on_job(self, rtype: str, job: Job) -> None:
        """A vcjob record that brought something new, once listed."""
        raise NotImplementedError

    def emit(self, cls: type, key: str, /, **fields: Any) -> None:
        fields["job"] = key
        fields["seq"] = self.host.seq
        fields["time"] = self.host.now
        self.host.out.append(cls(**fields))

    def event_on(self, key: str, name: str, event_type: str, reason: str, message: str) -> None:
        self.emit(o.RecordEvent, key, event_type=event_type, reason=reason, message=message, kind=self.KIND,
                  name=name, api_version=self.API_VERSION, component=COMPONENT)
