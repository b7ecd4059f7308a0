"""The cronjob controller's commands (statemachines/cronjobs/), carried out on the cluster.

`CronJobCommands` is a mixin of `vcbus.k8s.actuator.Actuator` (its `api` client). The three
commands are keyed `<namespace>/cronjob:<cronjob>` (a command under another key is refused) and act only for the CronJob that is under that name
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

The calls themselves are vcbus/k8s/owned_jobs.py's, shared with the JobFlow's commands.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.cronjob import API_VERSION
from vcbus.k8s import rawcalls
from vcbus.k8s.owned_jobs import create_owned, delete_owned, keyed_name, owned_manifest, replace_status
from vcbus.k8s.ownership import Refused

GROUP, VERSION = API_VERSION.split("/")
CRONJOBS = "cronjobs"


def run_manifest(ns: str, cmd: o.CreateCronJobRun) -> dict[str, Any]:
    """The run's vcjob, as Volcano's getJobFromTemplate makes it."""
    owner = {"apiVersion": API_VERSION, "kind": "CronJob", "name": cmd.cronjob, "uid": cmd.cronjob_uid}
    return owned_manifest(ns, cmd.name, owner, cmd.labels, cmd.annotations, cmd.spec)


class CronJobCommands:
    """Handlers `_<Command>(namespace, name, cmd, index)`; see the module docstring."""

    api: Any
    stale: int

    def _cronjob(self, ns: str, name: str) -> dict | None:
        return rawcalls.read(self.api, rawcalls.object_path(GROUP, VERSION, ns, CRONJOBS, name))

    def _CreateCronJobRun(self, ns: str, name: str, cmd: o.CreateCronJobRun, index: int) -> str:
        name = keyed_name("cronjob", ns, name, cmd)
        if cmd.cronjob != name or not cmd.name.startswith(f"{name}-") or not cmd.name[len(name) + 1:].isdigit():
            raise Refused(f"CreateCronJobRun for {ns}/{name} names run {cmd.name} of CronJob {cmd.cronjob}")
        cronjob = self._cronjob(ns, name)
        if cronjob is None or cronjob["metadata"].get("uid") != cmd.cronjob_uid:
            return "dropped"  # gone, or another CronJob of the name
        return create_owned(self.api, ns, run_manifest(ns, cmd))

    def _DeleteCronJobRun(self, ns: str, name: str, cmd: o.DeleteCronJobRun, index: int) -> str:
        name = keyed_name("cronjob", ns, name, cmd)
        return delete_owned(self.api, ns, cmd.name, cmd.uid, (API_VERSION, "CronJob", name))

    def _UpdateCronJobStatus(self, ns: str, name: str, cmd: o.UpdateCronJobStatus, index: int) -> str:
        name = keyed_name("cronjob", ns, name, cmd)
        if cmd.name != name or not cmd.uid:
            raise Refused(f"UpdateCronJobStatus for {ns}/{name} names CronJob {cmd.name} uid {cmd.uid!r}")
        return replace_status(self, rawcalls.object_path(GROUP, VERSION, ns, CRONJOBS, name), cmd.uid, cmd.status)
