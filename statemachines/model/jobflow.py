"""Views of `flow.volcano.sh/v1alpha1` JobFlows and JobTemplates, and the record that carries one.

Volcano's types: volcano-sh/apis `pkg/apis/flow/v1alpha1/jobflow_types.go` (JobFlowSpec, Flow,
DependsOn, Probe, JobFlowStatus, JobStatus, JobRunningHistory, Condition, State) and
`jobtemplate_types.go` (a JobTemplate's spec is a vcjob's JobSpec, kept here as bytes: it is
copied into the vcjobs a JobFlow makes, never read). A flow's `patch` and `dependsOn.probe` are
kept as bytes too: Volcano's controller reads neither (docs/jobflows.md).

A JobFlow's status as Volcano writes it is built from these structs, so the status a record
shows and the one vcbus decided compare equal when they are the same (empty lists and zero
times are left out, as the API server stores them: Go's `omitempty`, and a null timestamp
pruned by the CRD's structural schema).
"""

from __future__ import annotations

from typing import Union

from msgspec import Raw, Struct

from statemachines.model.objects import Meta

API_VERSION = "flow.volcano.sh/v1alpha1"
RETAIN = "retain"
DELETE = "delete"
CREATED_BY_JOB_TEMPLATE = "volcano.sh/createdByJobTemplate"  # label and annotation of a flow's vcjob: "<ns>.<template>"
CREATED_BY_JOB_FLOW = "volcano.sh/createdByJobFlow"  # label and annotation of a flow's vcjob: "<ns>.<jobflow>"


class FlowDependsOn(Struct, frozen=True, rename="camel"):
    targets: list[str] | None = None
    probe: Raw | None = None  # httpGetList, tcpSocketList, taskStatusList: not read by Volcano's controller


class Flow(Struct, frozen=True, rename="camel"):
    name: str = ""
    depends_on: FlowDependsOn | None = None
    patch: Raw | None = None  # a JobSpec patch: not applied by Volcano's controller


class JobFlowSpec(Struct, frozen=True, rename="camel"):
    flows: list[Flow] | None = None
    job_retain_policy: str = ""


class JobRunningHistory(Struct, frozen=True, rename="camel", omit_defaults=True):
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    state: str = ""


class FlowJobStatus(Struct, frozen=True, rename="camel", omit_defaults=True):
    """A `status.jobStatusList` entry: one vcjob of the flow."""

    name: str = ""
    state: str = ""
    start_timestamp: str | None = None
    end_timestamp: str | None = None
    restart_count: int = 0
    running_histories: list[JobRunningHistory] | None = None


class FlowCondition(Struct, frozen=True, omit_defaults=True,
                    rename={"create_timestamp": "createTime", "running_duration": "runningDuration",
                            "task_status_count": "taskStatusCount"}):
    phase: str = ""
    create_timestamp: str | None = None
    running_duration: str | None = None
    task_status_count: dict[str, dict[str, dict[str, int]]] | None = None


class FlowState(Struct, frozen=True, omit_defaults=True):
    phase: str = ""


class JobFlowStatus(Struct, frozen=True, rename="camel", omit_defaults=True):
    pending_jobs: list[str] | None = None
    running_jobs: list[str] | None = None
    failed_jobs: list[str] | None = None
    completed_jobs: list[str] | None = None
    terminated_jobs: list[str] | None = None
    un_know_jobs: list[str] | None = None  # (sic: Volcano's field is `unKnowJobs`)
    job_status_list: list[FlowJobStatus] | None = None
    conditions: dict[str, FlowCondition] | None = None
    state: FlowState = FlowState()


class JobFlow(Struct, frozen=True, tag_field="kind", tag="JobFlow", rename="camel"):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: JobFlowSpec = JobFlowSpec()
    status: JobFlowStatus = JobFlowStatus()


class JobTemplateStatus(Struct, frozen=True, rename="camel", omit_defaults=True):
    job_depends_on_list: list[str] | None = None


class JobTemplate(Struct, frozen=True, tag_field="kind", tag="JobTemplate", rename="camel"):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: Raw = Raw(b"{}")
    status: JobTemplateStatus = JobTemplateStatus()


FLOW_KINDS = ("JobFlow", "JobTemplate")


class FlowRecord(Struct, frozen=True):
    """`{"type": ADDED|MODIFIED|DELETED, "object": <JobFlow or JobTemplate>, "time": ...}`."""

    type: str
    object: Union[JobFlow, JobTemplate]  # a run-time value: msgspec's tagged union
    time: str | None = None


def object_string(namespace: str, name: str) -> str:
    """Volcano's GenerateObjectString: the value of the createdBy labels and annotations."""
    return f"{namespace}.{name}"
