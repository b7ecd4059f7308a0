"""The cronjob controller's commands (statemachines/cronjobs/), carried out on the cluster.

`CronJobCommands` is a mixin of `vcbus.k8s.actuator.Actuator` (its `api` client). The three
commands are keyed `<namespace>/<cronjob>` and act only for the CronJob that is under that name
now (the command's uid), as Volcano's controller acts on the CronJob its lister holds:

- CreateCronJobRun posts the run's vcjob as Volcano's getJobFromTemplate builds it: the name,
  the template's labels and annotations (with `volcano.sh/cronjob-scheduled-timestamp`), the
  CronJob as controlling owner (`blockOwnerDeletion`, as `metav1.NewControllerRef`), the
  template's spec. A run's name must be `<cronjob>-<minutes>`; a CronJob that is gone or was
  replaced drops it; AlreadyExists is done.
- DeleteCronJobRun deletes the run (Replace, a history limit): only a vcjob the CronJob controls,
  with the command's uid as a precondition (another vcjob of the name is left alone); NotFound
  and a conflicting uid are done. Default options, as Volcano's `DeleteJobClient`.
- UpdateCronJobStatus replaces the status (the status subresource, a JSON patch) with the whole
  status Volcano's `UpdateStatus` writes, for the CronJob the command names: one of another uid
  (deleted and made again) is left alone, counted as stale; the patch tests the uid too.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines.model.cronjob import API_VERSION
from vcbus.k8s import rawcalls
from vcbus.k8s.ownership import Refused

GROUP, VERSION = API_VERSION.split("/")
CRONJOBS, JOBS = "cronjobs", "jobs"


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


def run_manifest(ns: str, cmd: o.CreateCronJobRun) -> dict[str, Any]:
    """The run's vcjob, as Volcano's getJobFromTemplate makes it."""
    owner = {"apiVersion": API_VERSION, "kind": "CronJob", "name": cmd.cronjob, "uid": cmd.cronjob_uid,
             "controller": True, "blockOwnerDeletion": True}
    meta: dict[str, Any] = {"name": cmd.name, "namespace": ns, "ownerReferences": [owner]}
    if cmd.labels:
        meta["labels"] = dict(cmd.labels)
    if cmd.annotations:
        meta["annotations"] = dict(cmd.annotations)
    return {"apiVersion": API_VERSION, "kind": "Job", "metadata": meta, "spec": cmd.spec}


def status_patch(cmd: o.UpdateCronJobStatus) -> list[dict[str, Any]]:
    """A JSON patch: the CronJob's uid tested, then its whole status (what the command leaves out is gone)."""
    return [{"op": "test", "path": "/metadata/uid", "value": cmd.uid},
            {"op": "add", "path": "/status", "value": msgspec.to_builtins(cmd.status)}]


def controlled_by(job: dict, cronjob: str) -> bool:
    refs = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("kind") == "CronJob" and r.get("apiVersion") == API_VERSION
               and r.get("name") == cronjob for r in refs)


class CronJobCommands:
    """Handlers `_<Command>(namespace, name, cmd, index)`; see the module docstring."""

    api: Any
    stale: int

    def _cronjob(self, ns: str, name: str) -> dict | None:
        return rawcalls.read(self.api, rawcalls.object_path(GROUP, VERSION, ns, CRONJOBS, name))

    def _CreateCronJobRun(self, ns: str, name: str, cmd: o.CreateCronJobRun, index: int) -> str:
        if cmd.cronjob != name or not cmd.name.startswith(f"{name}-") or not cmd.name[len(name) + 1:].isdigit():
            raise Refused(f"CreateCronJobRun for {ns}/{name} names run {cmd.name} of CronJob {cmd.cronjob}")
        cronjob = self._cronjob(ns, name)
        if cronjob is None or cronjob["metadata"].get("uid") != cmd.cronjob_uid:
            return "dropped"  # gone, or another CronJob of the name
        try:
            rawcalls.call(self.api, "POST", rawcalls.object_path(GROUP, VERSION, ns, JOBS), body=run_manifest(ns, cmd))
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    def _DeleteCronJobRun(self, ns: str, name: str, cmd: o.DeleteCronJobRun, index: int) -> str:
        path = rawcalls.object_path(GROUP, VERSION, ns, JOBS, cmd.name)
        job = rawcalls.read(self.api, path)
        if job is None or (cmd.uid and job["metadata"].get("uid") != cmd.uid):
            return "done"  # gone, or another vcjob of the name now
        if not controlled_by(job, name):
            raise Refused(f"vcjob {ns}/{cmd.name} is not a run of CronJob {ns}/{name}")
        try:
            rawcalls.call(self.api, "DELETE", path, body={"preconditions": {"uid": job["metadata"].get("uid")}})
        except ApiException as err:
            if _status(err) in (404, 409):
                return "done"
            raise
        return "applied"

    def _UpdateCronJobStatus(self, ns: str, name: str, cmd: o.UpdateCronJobStatus, index: int) -> str:
        if cmd.name != name or not cmd.uid:
            raise Refused(f"UpdateCronJobStatus for {ns}/{name} names CronJob {cmd.name} uid {cmd.uid!r}")
        for attempt in range(2):
            cronjob = self._cronjob(ns, name)
            if cronjob is None:
                return "dropped"
            if cronjob["metadata"].get("uid") != cmd.uid:  # deleted and made again meanwhile
                self.stale += 1
                return "dropped"
            path = rawcalls.object_path(GROUP, VERSION, ns, CRONJOBS, name) + "/status"
            try:
                rawcalls.call(self.api, "PATCH", path, body=status_patch(cmd), content_type=rawcalls.JSON_PATCH)
            except ApiException as err:
                if _status(err) == 404:
                    return "dropped"
                if _status(err) in (409, 422) and attempt == 0:  # the uid's test: read it again
                    continue
                raise
            return "applied"
        raise AssertionError("unreachable")
