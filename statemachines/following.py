"""What the log shows of another controller's writes: adopted, compared, followed.

A job's status in a watch record was written by someone else (Volcano, or
vcbus's own actuator): it never drives decisions. It is

- adopted when the job first appears with a status (`adopt`: a restarted
  controller carries on from it);
- compared with vcbus's own status on every later record (`compare`): fine if it
  is a state vcbus passed through, a `Divergence` otherwise, and at the end of a
  log (`final_divergences`);
- followed for its version (`follow_version`), as Volcano's count of versions
  depends on timing.

`engine` is the `Engine` running the job (its `emit`, `jobs` and `out`).
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.status import JobCondition, JobState, JobStatus, copy_status


def adopt(recorded: Any) -> JobStatus:
    """A status found on a job's first appearance becomes ours (a restarted controller)."""
    return JobStatus(
        state=JobState(
            phase=recorded.state.phase,
            reason=recorded.state.reason,
            message=recorded.state.message,
            last_transition_time=recorded.state.last_transition_time,
        ),
        min_available=recorded.min_available,
        task_status_count=recorded.task_status_count,
        pending=recorded.pending,
        running=recorded.running,
        succeeded=recorded.succeeded,
        failed=recorded.failed,
        terminating=recorded.terminating,
        unknown=recorded.unknown,
        version=recorded.version,
        retry_count=recorded.retry_count,
        running_duration=recorded.running_duration,
        controlled_resources=recorded.controlled_resources,
        conditions=[
            JobCondition(status=c.get("status") or "", last_transition_time=c.get("lastTransitionTime"))
            for c in recorded.conditions or ()
        ]
        or None,
    )


def follow_version(entry: Any, version: int, *, recorded: str | None = None) -> None:
    """Another controller's version, shown by the log, becomes vcbus's.

    Volcano bumps `status.version` once per request it handles in Aborting, Aborted,
    Completing and Terminating, so its count depends on timing, and vcbus's own
    counter drifts from it; pods Volcano then creates with its version would look
    outdated to vcbus ("event from job version 10 < current 12") and their events
    would be ignored. So vcbus follows, as it adopts a recorded status when a job
    first appears:

    - a recorded status (`recorded`: its phase) whose (phase, version) is news:
      neither a status vcbus wrote itself nor one the log showed before;
    - a pod whose `volcano.sh/job-version` is above vcbus's (`recorded` None): vcbus
      never creates pods above its own version, and older pods are genuinely outdated.

    When vcbus is the controller its own writes come back as recorded statuses,
    and its pods carry its own versions, so nothing is followed (docs/fidelity.md)."""
    status = entry.status
    if status is None or not status.state.phase or version == status.version:
        return
    if recorded is not None:
        if (recorded, version) in entry.versions:
            return
        entry.versions.add((recorded, version))
    elif version < status.version:
        return
    entry.status = copy_status(status)  # emitted outputs hold the old object: never mutate it
    entry.status.version = version


def compare(engine: Any, entry: Any, phase: str, retry: int, rv: str) -> None:
    """A recorded status is someone else's write: fine if it is a state we passed through.

    Writes reach the log after the events that caused them, so the recorded
    status may lag behind ours. It diverges when it is not on the trail of
    states vcbus went through since the last recorded one.
    """
    if not phase or entry.recorded == (phase, retry):
        return
    entry.recorded = (phase, retry)
    trail = entry.trail
    if (phase, retry) in trail:
        del trail[: trail.index((phase, retry))]
        return
    ours = entry.status
    assert ours is not None
    diverged(engine, entry, phase, retry, rv)
    entry.trail = [(ours.state.phase, ours.retry_count)]


def diverged(engine: Any, entry: Any, phase: str, retry: int, rv: str, *, final: bool = False) -> None:
    ours = entry.status
    assert ours is not None
    suffix = " (end of log)" if final else ""
    if phase != ours.state.phase:
        engine.emit(
            o.Divergence,
            entry,
            field="phase" + suffix,
            recorded=phase,
            decided=ours.state.phase,
            resource_version=rv,
        )
    if retry != ours.retry_count:
        engine.emit(
            o.Divergence,
            entry,
            field="retryCount" + suffix,
            recorded=str(retry),
            decided=str(ours.retry_count),
            resource_version=rv,
        )


def final_divergences(engine: Any, *, cut: bool = False) -> None:
    """At the end of a log: jobs whose last recorded status is not where vcbus ended.

    `cut`: the log was cut short (`--until`), so a status write that was still to
    come is no divergence: a recorded status on the trail of states vcbus went
    through since (a cut in mid-transition) is left out."""
    for entry in engine.jobs.values():
        if entry.recorded is None or entry.status is None or entry.job is None:
            continue
        phase, retry = entry.recorded
        if (phase, retry) != (entry.status.state.phase, entry.status.retry_count):
            if cut and (phase, retry) in entry.trail:
                continue
            diverged(engine, entry, phase, retry, "", final=True)
