"""The jobflow and jobtemplate controllers' commands (statemachines/jobflows/), carried out on the cluster.

`JobFlowCommands` is a mixin of `vcbus.k8s.actuator.Actuator` (its `api` client). The JobFlow's
commands are keyed `<namespace>/jobflow:<jobflow>` (a JobTemplate's `<namespace>/jobtemplate:<name>`; a command
under another key is refused) and act only for the JobFlow under that name now (the
command's uid), as Volcano's controller acts on the JobFlow its lister holds:

- CreateJobFlowJob posts the flow's vcjob as Volcano's loadJobTemplateAndSetJob builds it: the name
  `<jobflow>-<flow>`, the labels and annotations `volcano.sh/createdByJobTemplate` and
  `volcano.sh/createdByJobFlow`, the JobFlow as controlling owner (`SetControllerReference`:
  `controller`, `blockOwnerDeletion`), the JobTemplate's spec. A JobFlow that is gone or was
  replaced drops it; AlreadyExists is done.
- DeleteJobFlowJob (jobRetainPolicy delete) deletes only a vcjob the JobFlow controls, with the
  command's uid as a precondition.
- UpdateJobFlowStatus and UpdateJobTemplateStatus replace the status subresource with the whole
  status Volcano's `UpdateStatus` writes, for the object of the command's uid (stale otherwise).

The calls are vcbus/k8s/owned_jobs.py's, shared with the CronJob's commands.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.jobflow import API_VERSION
from vcbus.k8s import rawcalls
from vcbus.k8s.owned_jobs import create_owned, delete_owned, keyed_name, owned_manifest, replace_status
from vcbus.k8s.ownership import Refused

GROUP, VERSION = API_VERSION.split("/")
JOBFLOWS, JOBTEMPLATES = "jobflows", "jobtemplates"


def flow_job_manifest(ns: str, cmd: o.CreateJobFlowJob) -> dict[str, Any]:
    """The flow's vcjob, as Volcano's loadJobTemplateAndSetJob makes it."""
    owner = {"apiVersion": API_VERSION, "kind": "JobFlow", "name": cmd.jobflow, "uid": cmd.jobflow_uid}
    return owned_manifest(ns, cmd.name, owner, cmd.labels, cmd.annotations, cmd.spec)


class JobFlowCommands:
    """Handlers `_<Command>(namespace, name, cmd, index)`; see the module docstring."""

    api: Any
    stale: int

    def _jobflow(self, ns: str, name: str) -> dict | None:
        return rawcalls.read(self.api, rawcalls.object_path(GROUP, VERSION, ns, JOBFLOWS, name))

    def _CreateJobFlowJob(self, ns: str, name: str, cmd: o.CreateJobFlowJob, index: int) -> str:
        name = keyed_name("jobflow", ns, name, cmd)
        if cmd.jobflow != name or cmd.name != f"{name}-{cmd.template}" or not cmd.template:
            raise Refused(f"CreateJobFlowJob for {ns}/{name} names vcjob {cmd.name} of JobFlow {cmd.jobflow}")
        jobflow = self._jobflow(ns, name)
        if jobflow is None or jobflow["metadata"].get("uid") != cmd.jobflow_uid:
            return "dropped"  # gone, or another JobFlow of the name
        return create_owned(self.api, ns, flow_job_manifest(ns, cmd))

    def _DeleteJobFlowJob(self, ns: str, name: str, cmd: o.DeleteJobFlowJob, index: int) -> str:
        name = keyed_name("jobflow", ns, name, cmd)
        return delete_owned(self.api, ns, cmd.name, cmd.uid, (API_VERSION, "JobFlow", name))

    def _UpdateJobFlowStatus(self, ns: str, name: str, cmd: o.UpdateJobFlowStatus, index: int) -> str:
        name = keyed_name("jobflow", ns, name, cmd)
        if cmd.name != name or not cmd.uid:
            raise Refused(f"UpdateJobFlowStatus for {ns}/{name} names JobFlow {cmd.name} uid {cmd.uid!r}")
        return replace_status(self, rawcalls.object_path(GROUP, VERSION, ns, JOBFLOWS, name), cmd.uid, cmd.status)

    def _UpdateJobTemplateStatus(self, ns: str, name: str, cmd: o.UpdateJobTemplateStatus, index: int) -> str:
        name = keyed_name("jobtemplate", ns, name, cmd)
        if cmd.name != name or not cmd.uid:
            raise Refused(f"UpdateJobTemplateStatus for {ns}/{name} names JobTemplate {cmd.name} uid {cmd.uid!r}")
        return replace_status(self, rawcalls.object_path(GROUP, VERSION, ns, JOBTEMPLATES, name), cmd.uid, cmd.status)
