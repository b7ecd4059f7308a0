"""The replay report: the projections of a replayed log, as `vcbus replay --json` prints it.

The report is a stable contract used by scripts (docs/replay.md):

    {"input": {"events": N, "ignored": N, "invalid": N},
     "jobs": [{"namespace", "name", "uid", "status", "history", "actions", "commands",
               "divergences", "pendingTimers"}]}

`history` are phase transitions (`reason`: the action being executed, kept for
compatibility; `cause`: why the phase moved, in words), `actions` every resolution of a bus event
(the default SyncJob included; `policyText`: the matched policy by its content), `commands` what the controller asked of the
cluster. Each entry's `seq` is the 1-based position of the record that caused it.
"""

from __future__ import annotations

from msgspec import Struct

from projections.history import HistoryView, JobHistory, command_entry
from projections.status import StatusView
from statemachines import outputs as o


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


def job_report(
    h: JobHistory,
    status: dict | None,
    *,
    explain: bool = False,
    pending_timers: list | None = None,
    deleted: bool = False,
) -> dict:
    namespace, name = h.key.split("/", 1)
    report = {
        "namespace": namespace,
        "name": name,
        "uid": h.uid,
        "deleted": deleted,
        "status": status,
        "history": [phase_entry(p) for p in h.phases],
        "actions": [action_entry(a, explain=explain) for a in h.actions],
        "commands": [command_entry(c) for c in h.commands],
        "divergences": [
            {"seq": d.seq, "time": d.time, "field": d.field, "recorded": d.recorded, "decided": d.decided}
            for d in h.divergences
        ],
        "errors": [{"seq": e.seq, "message": e.message} for e in h.errors],
        "pendingTimers": [
            {"timer": t.id, "action": t.action, "due": t.due, "pod": t.pod, "policy": t.policy}
            for t in pending_timers or ()
        ],
    }
    if h.observed is not None and h.observed.adopted_phase:
        report["adopted"] = {
            "seq": h.observed.seq,
            "phase": h.observed.adopted_phase,
            "retryCount": h.observed.retry_count,
            "version": h.observed.version,
        }
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
    for key in sorted(history.jobs):
        if job is not None and key != job:
            continue
        h = history.jobs[key]
        if h.observed is None and not h.actions:
            continue  # pods of a job the log never showed
        jobs.append(
            job_report(
                h,
                statuses.status(key),
                explain=explain,
                pending_timers=(pending_timers or {}).get(key),
                deleted=key in statuses.deleted,
            )
        )
    return {
        "input": {"events": counts.events, "ignored": counts.ignored, "invalid": counts.invalid},
        "jobs": jobs,
    }
