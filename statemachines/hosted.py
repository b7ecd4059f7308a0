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


class HostedController:
    """`KIND`/`API_VERSION`: the object the controller's Events are about."""

    KIND = ""
    API_VERSION = ""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.jobs: dict[str, Job] = {}  # every vcjob, by namespace/name (Volcano's job lister)
        self.deleting: set[str] = set()  # uids of the vcjobs the controller asked to delete

    def list_job(self, rtype: str, job: Job) -> bool:
        """A vcjob record into the lister; False when it brings nothing new (the version already listed)."""
        meta = job.metadata
        key = f"{meta.namespace}/{meta.name}"
        if rtype == "DELETED":
            self.jobs.pop(key, None)
            self.deleting.discard(meta.uid)
            return True
        old = self.jobs.get(key)
        if old is not None and old.metadata.resource_version == meta.resource_version:
            return False
        self.jobs[key] = job
        return True

    def emit(self, cls: type, key: str, /, **fields: Any) -> None:
        fields["job"] = key
        fields["seq"] = self.host.seq
        fields["time"] = self.host.now
        self.host.out.append(cls(**fields))

    def event_on(self, key: str, name: str, event_type: str, reason: str, message: str) -> None:
        self.emit(o.RecordEvent, key, event_type=event_type, reason=reason, message=message, kind=self.KIND,
                  name=name, api_version=self.API_VERSION, component=COMPONENT)
