"""The replay report: the projections of a replayed log, as `vcbus replay --json` prints it.

The report is a stable contract used by scripts (docs/replay.md):

    {"input": {"events": N, "ignored": N, "invalid": N},
     "jobs": [{"namespace", "name", "uid", "status", "history", "actions", "commands",
               "divergences", "pendingTimers"}]}

`history` are phase transitions (`reason`: the action being executed, kept for
compatibility; `cause`: why the phase moved, in words), `actions` every resolution of a bus event
(the default SyncJob included; `policyText`: the matched policy by its content), `commands` what the controller asked of the
cluster. Each entry's `seq` is the 1-based position of the record that caused it.

A log with Volcano's CronJobs or JobFlows adds `"cronjobs"` and `"jobflows"`: per CronJob its machine's
moves (`states`), each scheduled run's moves (`runs`: created, skipped, missed, replaced, pruned, and
why) and the last status written; per JobFlow its phases with their causes, the vcjobs it created and
deleted (`jobs`), its failed syncs (`errors`) and the last status written (`owner_report`).

A divergence that Volcano's delayed-action race explains carries
`"known": "volcano-delayed-action-race"` (`known_race`; docs/fidelity.md): it is
no vcbus error, and `vcbus replay --compare` does not fail on it.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import Struct

from projections.history import HistoryView, JobHistory, command_entry
from projections.status import StatusView
from statemachines import outputs as o
from statemachines.hosted import split_owner_key


class InputCounts(Struct):
    events: int = 0
    ignored: int = 0
    invalid: int = 0


def action_entry(a: o.ActionResolved, *, explain: bool = False) -> dict:
    entry = {
        "seq": a.seq,
        "time": a.time,
        "event": a.event,
        "exitCode": a.exit_code,
        "task": a.task,
        "pod": a.pod,
        "action": a.action,
        "policy": a.policy,
        "phase": a.phase,
    }
    if a.policy_text:
        entry["policyText"] = a.policy_text
    if a.delay:
        entry["delay"] = a.delay
    if a.reason:
        entry["reason"] = a.reason
    if explain and a.explain:
        entry["explain"] = list(a.explain)
    return entry


def action_entries(h: JobHistory, *, explain: bool = False) -> list[dict]:
    """`action_entry` of each of `h.actions`, rendered once each: the projector writes a job's whole
    report after every batch of events, and a job's actions run to thousands (one per pod event), so
    rendering them all at each write made the writes quadratic in the job's history. The entries are
    kept with the list they render (`h.rendered`); a new list (`HistoryView.restart`) starts again.
    A new list is returned each time (callers slice and extend it); the entries are shared: read only."""
    if explain:
        return [action_entry(a, explain=True) for a in h.actions]
    memo = h.rendered
    if memo is None or memo[0] is not h.actions:
        memo = h.rendered = (h.actions, [])
    entries = memo[1]
    if len(entries) < len(h.actions):
        entries.extend([action_entry(a) for a in h.actions[len(entries):]])
    return list(entries)


def phase_entry(p: o.PhaseChanged) -> dict:
    return {
        "seq": p.seq,
        "time": p.time,
        "from": p.from_phase,
        "to": p.to_phase,
        "reason": p.action,
        "cause": p.cause,
        "retryCount": p.retry_count,
        "version": p.version,
    }


KNOWN_RACE = "volcano-delayed-action-race"
_CYCLING = frozenset({"Pending", "Running"})  # where Volcano's job stays when a firing's write is lost


def known_race(h: JobHistory, d: o.Divergence) -> str | None:
    """`KNOWN_RACE` when Volcano's delayed-action race explains the divergence `d`, else None.

    Volcano runs a delayed action (a policy with a `timeout`, e.g. PodPending ->
    RestartJob after 5m) on a goroutine of its own, outside the job's work queue,
    with the job as its cache held it; its status write then usually loses a 409
    conflict against the worker's writes, so the action never happens and the job
    keeps cycling between Pending and Running. vcbus applies every firing (and
    fails the job at maxRetry). So: after vcbus fired a delayed action of this job,
    a recorded phase of Pending or Running that differs from vcbus's, or a recorded
    retryCount below vcbus's (the lost restarts were not counted), is that race.
    """
    fired = [t.seq for t in h.timers if isinstance(t, o.TimerFired)]
    return race_explains(d, min(fired) if fired else None)


def race_explains(d: o.Divergence, first_fired: int | None) -> str | None:
    """`known_race` given the seq of the job's first fired delayed action (None: none fired);
    `vcbus divergences` uses it with the events of the bus."""
    if first_fired is None or d.seq < first_fired:
        return None
    field = d.field.split(" ", 1)[0]
    if field == "phase":
        return KNOWN_RACE if d.recorded in _CYCLING and d.decided != d.recorded else None
    if field == "retryCount":
        try:
            return KNOWN_RACE if int(d.recorded) < int(d.decided) else None
        except ValueError:
            return None
    return None


def divergence_entry(h: JobHistory, d: o.Divergence) -> dict:
    entry = {"seq": d.seq, "time": d.time, "field": d.field, "recorded": d.recorded, "decided": d.decided}
    known = known_race(h, d)
    if known is not None:
        entry["known"] = known
    return entry


def job_report(
    h: JobHistory,
    status: dict | None,
    *,
    explain: bool = False,
    pending_timers: list | None = None,
    deleted: bool = False,
    tasks: dict[str, str] | None = None,
    task_pods: dict[str, dict[str, int]] | None = None,
) -> dict:
    namespace, name = h.key.split("/", 1)
    report = {
        "namespace": namespace,
        "name": name,
        "uid": h.uid,
        "deleted": deleted,
        "status": status,
        "history": [phase_entry(p) for p in h.phases],
        "actions": action_entries(h, explain=explain),
        "commands": [command_entry(c) for c in h.commands],
        "divergences": [divergence_entry(h, d) for d in h.divergences],
        "errors": [{"seq": e.seq, "message": e.message} for e in h.errors],
        "pendingTimers": [
            {"timer": t.id, "action": t.action, "due": t.due, "pod": t.pod, "policy": t.policy}
            for t in pending_timers or ()
        ],
    }
    if tasks:  # the task machine's phase of each task (statemachines/task/); Volcano's status has none
        report["tasks"] = tasks
        # and its pods by phase when it last moved: what a finished job's tasks ended with, which the
        # status does not say (the kill that finishes a job counts only the pods it failed to delete)
        report["taskPods"] = task_pods or {}
    if h.observed is not None and h.observed.adopted_phase:
        report["adopted"] = {
            "seq": h.observed.seq,
            "phase": h.observed.adopted_phase,
            "retryCount": h.observed.retry_count,
            "version": h.observed.version,
        }
    return report


_OWNER_KINDS = {o.CronJobStateChanged: "cronjobs", o.CronJobRunChanged: "cronjobs",
                o.JobFlowStateChanged: "jobflows", o.JobFlowSyncFailed: "jobflows"}


def owner_report(h: JobHistory) -> dict:
    """A CronJob's or JobFlow's part of the report: its machine's moves, its runs (a CronJob's) or the vcjobs
    it made and deleted (a JobFlow's), its failed syncs, and the last status written."""
    _, namespace, name = split_owner_key(h.key) or ("", *h.key.split("/", 1))
    states, runs, errors = [], [], []
    for m in h.moves:
        if isinstance(m, (o.CronJobStateChanged, o.JobFlowStateChanged)):
            states.append({"seq": m.seq, "time": m.time, "from": m.from_state, "to": m.to_state, "cause": m.cause})
        elif isinstance(m, o.CronJobRunChanged):
            runs.append({"seq": m.seq, "time": m.time, "run": m.run, "scheduled": m.scheduled, "from": m.from_state,
                         "to": m.to_state, "cause": m.cause})
        elif isinstance(m, o.JobFlowSyncFailed):
            errors.append({"seq": m.seq, "message": m.message})
    report: dict[str, Any] = {"namespace": namespace, "name": name, "states": states}
    status: Any = None
    if _OWNER_KINDS[type(h.moves[0])] == "cronjobs":
        report["runs"] = runs
        for c in h.commands:
            if isinstance(c, o.UpdateCronJobStatus):
                status = c.status
    else:
        jobs = []
        for c in h.commands:
            if isinstance(c, o.CreateJobFlowJob):
                jobs.append({"seq": c.seq, "time": c.time, "name": c.name, "template": c.template, "op": "create"})
            elif isinstance(c, o.DeleteJobFlowJob):
                jobs.append({"seq": c.seq, "time": c.time, "name": c.name, "op": "delete"})
            elif isinstance(c, o.UpdateJobFlowStatus):
                status = c.status
        report["jobs"] = jobs
        report["errors"] = errors
    report["status"] = msgspec.to_builtins(status) if status is not None else None
    return report


def build_report(
    counts: InputCounts,
    history: HistoryView,
    statuses: StatusView,
    *,
    job: str | None = None,
    explain: bool = False,
    pending_timers: dict[str, list] | None = None,
) -> dict:
    jobs = []
    owners: dict[str, list[dict]] = {"cronjobs": [], "jobflows": []}
    for key in sorted(history.jobs):
        owner = split_owner_key(key)  # a CronJob's, JobFlow's or JobTemplate's key: its own, never a vcjob's
        if job is not None and key != job and (owner is None or f"{owner[1]}/{owner[2]}" != job):
            continue  # (`--job NS/NAME` shows the vcjob, CronJob and JobFlow of that name)
        h = history.jobs[key]
        if owner is not None:
            if h.moves:
                owners[_OWNER_KINDS[type(h.moves[0])]].append(owner_report(h))
            continue
        if h.observed is None and not h.actions:
            continue  # pods of a job the log never showed
        jobs.append(
            job_report(
                h,
                statuses.status(key),
                explain=explain,
                pending_timers=(pending_timers or {}).get(key),
                deleted=key in statuses.deleted,
                tasks=statuses.task_phases(key),
                task_pods=statuses.task_pods(key),
            )
        )
    report: dict[str, Any] = {
        "input": {"events": counts.events, "ignored": counts.ignored, "invalid": counts.invalid},
        "jobs": jobs,
    }
    for kind, entries in owners.items():  # only when the log has any: other reports stay as they were
        if entries:
            report[kind] = entries
    return report
