"""Volcano's jobflow and jobtemplate controllers as a fold: JobFlow, JobTemplate and vcjob records in.

Volcano: `pkg/controllers/jobflow/jobflow_controller_handler.go` (what enqueues a sync: a JobFlow
added; a JobFlow updated to phase Succeed with jobRetainPolicy delete; a vcjob controlled by a
JobFlow updated), `jobflow_controller_action.go` (syncJobFlow: the retain policy, deployJob and
judge, createJob from the JobTemplate, getAllJobStatus and getRunningHistories), `state/*.go`
(the phase each state's function decides: statemachines/jobflows/machine.py), and
`pkg/controllers/jobtemplate/` (a JobTemplate added, or a vcjob labelled as made from one:
`status.jobDependsOnList` lists the vcjobs made from it).

What Volcano's controller does not do, vcbus does not either: a flow's `patch` is not applied to
the vcjob (the JobTemplate's spec is copied as it is), `dependsOn.probe` (httpGet, tcpSocket,
taskStatus) is never evaluated (a dependency is met when every target's vcjob is Completed), and
nothing sets the Terminating phase.

Where vcbus differs: Volcano lists a flow's vcjobs from an informer's cache in no fixed order;
vcbus takes them by name, so the status lists are in name order. A created vcjob counts as
existing from the decision on (Volcano's cache may not show it yet, and a second create is
AlreadyExists). Volcano reads a flow's phase from its cache; vcbus from the status it last wrote,
until the JobFlow's record shows someone else's. Time is the log's.

A sync that fails (the JobTemplate a flow names does not exist, a phase Volcano does not know)
writes nothing, as Volcano's, and is requeued as handleJobFlowErr requeues it: with the rate
limiter's backoff (5 ms doubled per failure, statemachines.hosted.backoff) while fewer than 15
requeues (`--max-requeue-num`) were made since the last sync that succeeded, then dropped with a
Warning event `SyncJobFlow`. A JobTemplate's record does not sync a flow (Volcano's jobflow
controller does not watch them).
"""

from __future__ import annotations

from typing import Any

import msgspec

from statemachines.hosted import HostedController, JobLister, owner_key
from statemachines.jobflows import machine as m
from statemachines.model.jobflow import (
    API_VERSION,
    CREATED_BY_JOB_FLOW,
    CREATED_BY_JOB_TEMPLATE,
    DELETE,
    FlowCondition,
    FlowJobStatus,
    FlowState,
    JobFlow,
    JobFlowStatus,
    JobRunningHistory,
    JobTemplate,
    JobTemplateStatus,
    object_string,
)
from statemachines.model.objects import Job
from statemachines.model.timefmt import fmt, parse, parse_duration
from statemachines.outputs import (
    CreateJobFlowJob,
    DeleteJobFlowJob,
    JobFlowStateChanged,
    JobFlowSyncFailed,
    UpdateJobFlowStatus,
    UpdateJobTemplateStatus,
)
from statemachines.timers.rules import Timer

_spec_decoder = msgspec.json.Decoder()
ACTION = "SyncJobFlow"  # the request's action (every request Volcano's jobflow controller enqueues)
KIND_KEY = "jobflow"  # its outputs' key: `<namespace>/jobflow:<name>` (statemachines.hosted.owner_key)
MAX_REQUEUE = 15  # Volcano's --max-requeue-num default
# getAllJobStatus: the phases with a list of their own; a vcjob in any other is unKnown, except
# Completing and Terminating, which Volcano counts in its map and then writes nowhere
LISTED = ("Pending", "Running", "Completed", "Terminated", "Failed")
COUNTED = (*LISTED, "Completing", "Terminating")


def job_name(jobflow: str, flow: str) -> str:
    """getJobName: a flow's vcjob is `<jobflow>-<flow>`."""
    return f"{jobflow}-{flow}"


def jobflow_of(job: Job) -> str:
    """The JobFlow a vcjob is controlled by (Volcano's isControlledBy and getJobFlowNameByJob), or ""."""
    refs = job.metadata.owner_references or ()
    controller = next((r for r in refs if r.controller), None)
    if controller is None or controller.api_version != API_VERSION or controller.kind != "JobFlow":
        return ""
    return next((r.name for r in refs if r.kind == "JobFlow" and "volcano" in r.api_version), "")


def phase_of(job: Job) -> str:
    return job.status.state.phase if job.status is not None else ""


class FlowEntry:
    __slots__ = ("key", "flow", "status", "trail", "pending", "timer", "failures")

    def __init__(self, key: str, flow: JobFlow) -> None:
        self.key = key  # its outputs' key, `<namespace>/jobflow:<name>` (statemachines.hosted.owner_key)
        self.flow = flow
        self.status = flow.status  # as we believe it: the record's, overlaid by our writes
        self.trail: list[JobFlowStatus] = [flow.status]
        self.pending: set[str] = set()  # vcjobs asked for, not seen yet
        self.timer: Timer | None = None  # a failed sync's requeue
        self.failures = 0  # failed syncs since the last that succeeded (the rate limiter's NumRequeues)


class JobFlowController(HostedController):
    """Outputs go to `host.out` stamped with `host.seq`/`host.now`."""

    KIND = "JobFlow"
    API_VERSION = API_VERSION
    ACTION = ACTION
    KIND_KEY = KIND_KEY

    def __init__(self, host: Any, lister: JobLister | None = None) -> None:
        super().__init__(host, lister)
        self.flows: dict[str, FlowEntry] = {}
        self.templates: dict[str, JobTemplate] = {}
        self.template_writes: dict[str, JobTemplateStatus] = {}  # our last status write, by template key

    def event(self, e: FlowEntry, event_type: str, reason: str, message: str) -> None:
        self.event_on(e.key, e.flow.metadata.name, event_type, reason, message)

    def entry(self, key: str) -> FlowEntry | None:
        return self.flows.get(key)

    # ------------------------------------------------------------------ input

    def jobflow(self, rtype: str, flow: JobFlow) -> None:
        meta = flow.metadata
        if self.keep(rtype, ("JobFlow", f"{meta.namespace}/{meta.name}"), 1, self.jobflow, flow):
            return  # held (statemachines.hosted): started after the JobTemplates, which its sync reads
        key = owner_key(KIND_KEY, meta.namespace, meta.name)
        e = self.flows.get(key)
        if rtype == "DELETED":
            if e is not None:
                self.cancel(e.timer, "JobFlow deleted")
                self._deleted(e)
                del self.flows[key]
            return
        if e is None or e.flow.metadata.uid != meta.uid:
            if e is not None:
                self.cancel(e.timer, "another JobFlow of the name")
            e = self.flows[key] = FlowEntry(key, flow)  # addJobFlow
            self.sync(e)
            return
        if e.flow.metadata.resource_version == meta.resource_version:
            return
        e.flow = flow
        if flow.status in e.trail:
            del e.trail[: e.trail.index(flow.status)]  # our write, lagging or caught up
        else:
            e.status, e.trail = flow.status, [flow.status]  # someone else's: adopted
        # updateJobFlow: only a Succeed flow whose vcjobs are to be deleted is synced again
        if flow.status.state.phase == m.SUCCEED and flow.spec.job_retain_policy == DELETE:
            self.sync(e)

    def template(self, rtype: str, template: JobTemplate) -> None:
        meta = template.metadata
        key = f"{meta.namespace}/{meta.name}"
        if self.keep(rtype, ("JobTemplate", key), 0, self.template, template):
            return  # held: statemachines.hosted
        old = self.templates.get(key)
        if rtype == "DELETED":
            self.templates.pop(key, None)
            self.template_writes.pop(key, None)
            return
        self.templates[key] = template
        if old is not None and old.metadata.uid == meta.uid:
            return
        self.template_writes.pop(key, None)
        self.sync_template(key)  # addJobTemplate (Volcano's jobflow controller does not watch JobTemplates)

    def on_job(self, rtype: str, job: Job) -> None:
        if self.held is not None:
            return  # listed; synced when started
        meta = job.metadata
        if rtype == "DELETED":
            self.deleting.discard(meta.uid)
            return
        name = jobflow_of(job)
        if name:
            e = self.flows.get(owner_key(KIND_KEY, meta.namespace, name))
            if e is not None:
                e.pending.discard(meta.name)
                if rtype == "MODIFIED":  # updateJob (Volcano has no add handler for vcjobs)
                    self.sync(e)
        if rtype == "ADDED":  # the jobtemplate controller's addJob
            parts = (meta.labels or {}).get(CREATED_BY_JOB_TEMPLATE, "").split(".")
            if len(parts) == 2 and parts[0] and parts[1]:
                self.sync_template(f"{parts[0]}/{parts[1]}")

    # ------------------------------------------------------------------ the jobflow sync

    def sync(self, e: FlowEntry) -> None:
        flow = e.flow
        phase = e.status.state.phase
        state = m.PHASES.get(phase)
        if state is None:  # NewState: nil
            self._failed(e, f"jobflow {flow.metadata.name} state {{{phase}}} is invalid")
            return
        if not m.syncs(state):  # failedState, terminatingState: nothing
            e.failures = 0
            return
        if flow.spec.job_retain_policy == DELETE and state == m.SUCCEED:
            for job in self._created_by(e):
                if job.metadata.uid not in self.deleting:
                    self.deleting.add(job.metadata.uid)
                    self.emit(DeleteJobFlowJob, e.key, name=job.metadata.name, uid=job.metadata.uid)
            e.failures = 0
            return
        missing = self._deploy(e)
        if missing:
            self._failed(e, f"sync jobflow {flow.metadata.name} failed for jobtemplates.flow.volcano.sh \"{missing}\" "
                         "not found, event is OutOfSync, action is SyncJobFlow")
            return
        e.failures = 0  # handleJobFlowErr: Forget
        status, counts = self._status(e)
        after = m.fire(state, m.SYNC, counts)
        status = msgspec.structs.replace(status, state=FlowState(phase="" if after == m.NEW else after))
        if status != e.status:
            e.status = status
            e.trail.append(status)
            meta = flow.metadata
            self.emit(UpdateJobFlowStatus, e.key, name=meta.name, status=status, uid=meta.uid,
                      resource_version=meta.resource_version)
        if after != state:
            self.emit(JobFlowStateChanged, e.key, from_state=state, to_state=after, cause=_cause(after, status, counts))

    def _failed(self, e: FlowEntry, message: str) -> None:
        """handleJobFlowErr: requeued with the rate limiter's backoff while fewer than `MAX_REQUEUE` requeues
        were made since the last success; then a Warning event and the request dropped (`Forget`)."""
        self.emit(JobFlowSyncFailed, e.key, message=message)
        if e.failures < MAX_REQUEUE:
            self.requeue_failed(e)
            return
        self.event(e, "Warning", ACTION, f"{ACTION} JobFlow failed for {message}")
        e.failures = 0

    def _deploy(self, e: FlowEntry) -> str:
        """deployJob: each flow's vcjob, in the flows' order, once its targets are Completed; the name of a
        JobTemplate not found (the sync stops there), else ""."""
        flow = e.flow
        ns = flow.metadata.namespace
        for f in flow.spec.flows or ():
            name = job_name(flow.metadata.name, f.name)
            if f"{ns}/{name}" in self.jobs or name in e.pending:
                continue
            targets = f.depends_on.targets if f.depends_on is not None else None
            if targets is not None and not all(self._completed(ns, job_name(flow.metadata.name, t)) for t in targets):
                continue  # judge: a target not created yet, or not Completed
            template = self.templates.get(f"{ns}/{f.name}")
            if template is None:
                return f.name
            marks = {CREATED_BY_JOB_TEMPLATE: object_string(ns, f.name),
                     CREATED_BY_JOB_FLOW: object_string(ns, flow.metadata.name)}
            self.emit(CreateJobFlowJob, e.key, name=name, jobflow=flow.metadata.name, jobflow_uid=flow.metadata.uid,
                      template=f.name, labels=marks, annotations=dict(marks),
                      spec=_spec_decoder.decode(template.spec))
            self.event(e, "Normal", "Created", f"create a job named {name}!")
            e.pending.add(name)
        return ""

    def _completed(self, ns: str, name: str) -> bool:
        job = self.jobs.get(f"{ns}/{name}")
        return job is not None and phase_of(job) == "Completed"

    def _created_by(self, e: FlowEntry) -> list[Job]:
        """getAllJobsCreatedByJobFlow: the vcjobs labelled as the flow's, in its namespace (by name)."""
        meta = e.flow.metadata
        mark = object_string(meta.namespace, meta.name)
        return sorted((j for j in self.jobs.values() if j.metadata.namespace == meta.namespace
                       and (j.metadata.labels or {}).get(CREATED_BY_JOB_FLOW) == mark),
                      key=lambda j: j.metadata.name)

    def _status(self, e: FlowEntry) -> tuple[JobFlowStatus, m.Counts]:
        """getAllJobStatus, with the running histories getRunningHistories keeps."""
        jobs = self._created_by(e)
        by_phase: dict[str, list[str]] = {p: [] for p in COUNTED}
        unknown: list[str] = []
        conditions: dict[str, FlowCondition] = {}
        now = self.host.now
        entries = list(e.status.job_status_list or ())
        for job in jobs:
            meta, phase = job.metadata, phase_of(job)
            by_phase.get(phase, unknown).append(meta.name)
            st = job.status
            conditions[meta.name] = FlowCondition(
                phase=phase, create_timestamp=meta.creation_timestamp,
                running_duration=st.running_duration if st is not None else None,
                task_status_count=st.task_status_count if st is not None else None)
            end = None
            if st is not None and st.running_duration and meta.creation_timestamp:
                end = fmt(parse(meta.creation_timestamp) + int(parse_duration(st.running_duration)))
            entry = FlowJobStatus(name=meta.name, state=phase, start_timestamp=meta.creation_timestamp,
                                  end_timestamp=end, restart_count=st.retry_count if st is not None else 0,
                                  running_histories=_histories(entries, meta.name, phase, now) or None)
            at = [i for i, x in enumerate(entries) if x.name == meta.name]
            for i in at:
                entries[i] = entry
            if not at:
                entries.append(entry)
        status = JobFlowStatus(
            pending_jobs=by_phase["Pending"] or None, running_jobs=by_phase["Running"] or None,
            failed_jobs=by_phase["Failed"] or None, completed_jobs=by_phase["Completed"] or None,
            terminated_jobs=by_phase["Terminated"] or None, un_know_jobs=unknown or None,
            job_status_list=entries or None, conditions=conditions or None, state=e.status.state)
        counts = m.Counts(running=len(by_phase["Running"]), completed=len(by_phase["Completed"]),
                          failed=len(by_phase["Failed"]), terminated=len(by_phase["Terminated"]),
                          flows=len(e.flow.spec.flows or ()))
        return status, counts

    def _deleted(self, e: FlowEntry) -> None:
        state = m.PHASES.get(e.status.state.phase, m.NEW)  # a phase Volcano does not know ends as New's would
        self.emit(JobFlowStateChanged, e.key, from_state=state, to_state=m.fire(state, m.DELETE, m.Counts()),
                  cause="JobFlow deleted")

    # ------------------------------------------------------------------ the jobtemplate sync

    def sync_template(self, key: str) -> None:
        """syncJobTemplate: the names of the vcjobs labelled as made from it, when there are any."""
        template = self.templates.get(key)
        if template is None:
            return
        meta = template.metadata
        mark = object_string(meta.namespace, meta.name)
        names = sorted(j.metadata.name for j in self.jobs.values()
                       if j.metadata.namespace == meta.namespace
                       and (j.metadata.labels or {}).get(CREATED_BY_JOB_TEMPLATE) == mark)
        if not names:
            return
        status = JobTemplateStatus(job_depends_on_list=names)
        if status == self.template_writes.get(key, template.status):
            return
        self.template_writes[key] = status
        self.emit(UpdateJobTemplateStatus, owner_key("jobtemplate", meta.namespace, meta.name), name=meta.name,
                  status=status, uid=meta.uid,
                  resource_version=meta.resource_version)


def _histories(entries: list[FlowJobStatus], name: str, phase: str, now: str) -> list[JobRunningHistory]:
    """getRunningHistories: the vcjob's phases with their times; a new one opens when its phase changes."""
    found = next((x.running_histories for x in entries if x.name == name and x.running_histories), None)
    if found is None:
        return [JobRunningHistory(start_timestamp=now, state=phase)] if phase else []
    if found[-1].state == phase:
        return list(found)
    return [*found[:-1], msgspec.structs.replace(found[-1], end_timestamp=now),
            JobRunningHistory(start_timestamp=now, state=phase)]


def _cause(after: str, status: JobFlowStatus, counts: m.Counts) -> str:
    """JobFlowStateChanged.cause: the status that decided the phase, in words."""
    if after == m.SUCCEED:
        return f"all {counts.flows} vcjobs Completed"
    if after == m.FAILED:
        bad = [f"{n} Failed" for n in status.failed_jobs or ()] + [f"{n} Terminated" for n in status.terminated_jobs or ()]
        return "vcjob " + ", ".join(bad)
    if after == m.RUNNING:
        started = [f"{n} Running" for n in status.running_jobs or ()] + [f"{n} Completed" for n in status.completed_jobs or ()]
        return "vcjob " + ", ".join(started) + ", none Failed"
    return "no vcjob Running, Completed, Failed or Terminated yet"
