"""Volcano's worker loop for one job: a request resolved to an action, run in the job's phase.

A request (from a pod, PodGroup, job or Command record, statemachines/intake/)
is resolved against the job's policies (`statemachines.policies.resolve`,
`ActionResolved`); an action with a timeout becomes a timer
(statemachines/timers/), any other runs at once in the job's current phase
through the job machine and its controller (`execute`: Volcano's
state.Execute). A status write that changed the phase is followed by one more
pass in the new phase (`follow_up`), as Volcano gets it from its own write's
watch event. A fired timer runs its action the same way (`run_timer`).

`engine` is the `Engine` running the job: its `emit`, `explain`, its timer
heap and `_why` (what is being executed, for `PhaseChanged.cause`).
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.cache import JobEntry
from statemachines.cronjobs.controller import ACTION as CRONJOB_ACTION
from statemachines.hosted import BACKOFF_POLICY
from statemachines.job.causes import policy_text
from statemachines.job.handling import PodOp
from statemachines.job.kill import Target, kill_job, kill_target
from statemachines.job.machine import handling
from statemachines.job.sync import SyncError, sync_job
from statemachines.job.writes import spec_facts
from statemachines.jobflows.controller import ACTION as JOBFLOW_ACTION
from statemachines.model.vocabulary import Action, Event
from statemachines.policies import Request, fixed_answer, policy_answer
from statemachines.timers.rules import Timer, cancels_on_execute
from statemachines.timers.scheduling import rule_a, rule_b, schedule

MAX_FOLLOWUPS = 16  # a phase change triggers one more pass; no chain in Volcano's graph is longer
JOB_TARGETS: dict[str, str] = {Action.RESTART_TASK: "task", Action.RESTART_POD: "pod", Action.RESTART_PARTITION: "partition"}
_SYNC_JOB = Action.SYNC_JOB.value
_SYNC_MEMBER = Action.SYNC_JOB  # what `fixed_answer` answers most requests with (the member: statemachines/policies.py)
_OUT_OF_SYNC = Event.OUT_OF_SYNC.value
_SYNC, _KILL_JOB = PodOp.SYNC, PodOp.KILL_JOB


def handle(engine: Any, entry: JobEntry, req: Request) -> None:
    process(engine, entry, req)
    if entry.followup:
        follow_up(engine, entry)


def follow_up(engine: Any, entry: JobEntry) -> None:
    """Our status write changed the phase: one more OutOfSync pass, as Volcano's watch gives it."""
    rounds = 0
    while entry.followup and rounds < MAX_FOLLOWUPS:
        entry.followup = False
        rounds += 1
        process(engine, entry, Request(event=_OUT_OF_SYNC, source="self"))


def process(engine: Any, entry: JobEntry, req: Request) -> None:
    if entry.timers:  # no timer of the job pending: rule A has nothing to cancel
        rule_a(engine, entry, req)
    job = entry.job
    status = entry.status
    if job is None or status is None:
        return
    res = fixed_answer(req) or policy_answer(
        job, req, version=status.version, explain=engine.explain, memo=spec_facts(entry).resolutions)
    action = res.action
    policy = res.policy
    engine.executing = (req, res)
    # one of these per request: built by its keywords (`JobContext.emit`)
    engine.out.append(o.ActionResolved(
        job=entry.key, seq=engine.seq, time=engine.now,
        event=req.event, exit_code=req.exit_code, task=req.task, pod=req.pod, action=action, policy=policy,
        delay=res.delay_text, phase=status.state.phase, reason=res.reason, explain=res.explain,
        policy_text="" if policy == "default" or policy[:1] not in ("j", "t") else policy_text(job, policy),
    ))
    if res.delay != 0:  # Volcano registers any non-zero delay; a negative one fires at once
        schedule(engine, entry, req, res)
        return
    if action is _SYNC_MEMBER:  # as most requests resolve: no target, no ExecuteAction event, no timer to cancel
        execute(engine, entry, action, None)
        return
    if action != _SYNC_JOB:
        engine.emit(o.RecordEvent, entry, reason="ExecuteAction", message=f"Start to execute action {action} ")
    ok = execute(engine, entry, action, target(action, req.task, req.pod, req.partition))
    if ok and cancels_on_execute(action):  # only after a successful Execute
        rule_b(engine, entry, action, task=req.task, pod=req.pod, partition=req.partition)


def execute(engine: Any, entry: JobEntry, action: str, target: Target | None) -> bool:
    """Run `action` in the job's current phase (Volcano's state.Execute): the pod work of its row
    (syncJob, killJob or killTarget); False if the sync failed."""
    assert entry.status is not None
    h = handling(entry.status.state.phase, action)
    try:
        op = h.op
        if op is _SYNC:
            sync_job(engine, entry, h, action)
        elif op is _KILL_JOB:
            kill_job(engine, entry, h, action)
        else:
            kill_target(engine, entry, h, action, target)
    except SyncError as err:
        sync_failed(engine, entry, action, err)
        return False
    return True


def sync_failed(engine: Any, entry: JobEntry, action: str, err: SyncError | str) -> None:
    """The sync cannot proceed: TerminateJob at once.

    Volcano requeues the request with backoff and, after --max-requeue-num (15)
    failures, forces TerminateJob. Nothing in the log can change the outcome
    of those retries, so vcbus takes that path at once (docs/fidelity.md). A refused
    pod create's requeues are modelled (statemachines/intake/refusals.py): the log
    shows each one's outcome; it comes here after the last."""
    assert entry.status is not None
    engine.emit(o.SyncFailed, entry, message=str(err))
    engine.executing = f"sync failed ({err}), retry limit reached -> TerminateJob"
    engine.emit(
        o.RecordEvent,
        entry,
        reason="ExecuteAction",
        message=f"Job failed on action {action} for retry limit reached",
    )
    h = handling(entry.status.state.phase, Action.TERMINATE_JOB)
    if h.op is PodOp.KILL_JOB:
        kill_job(engine, entry, h, Action.TERMINATE_JOB)


def run_timer(engine: Any, timer: Timer) -> None:
    """A delayed action is due: run it in the job's current phase, without re-checking policies."""
    engine.timers.discard(timer)
    timer.cancelled = True  # fired: it cannot fire again
    if engine.gc.timers.get(timer.job) is timer:
        engine.gc.fire(timer)
        return
    if timer.action == CRONJOB_ACTION or timer.action == JOBFLOW_ACTION:  # statemachines/cronjobs/, jobflows/
        controller = engine.cronjob_controller if timer.action == CRONJOB_ACTION else engine.jobflow_controller
        if controller is not None:
            controller.fire(timer)
        return
    entry = engine.jobs.get(timer.job)
    if entry is None or entry.job is None or entry.status is None:
        return
    engine.emit(o.TimerFired, entry, timer=timer.id, action=timer.action)
    if timer.policy == BACKOFF_POLICY:  # a refused create's sync, requeued (statemachines/intake/refusals.py)
        if entry.requeue is timer:
            entry.requeue = None
        engine.executing = timer
        handle(engine, entry, Request(event=_OUT_OF_SYNC, source="timer"))
        return
    engine.emit(
        o.ActionResolved,
        entry,
        event=timer.event,
        task=timer.task,
        pod=timer.pod,
        action=timer.action,
        policy=f"timer:{timer.policy}",
        phase=entry.status.state.phase,
        policy_text=policy_text(entry.job, timer.policy),
    )
    engine.executing = timer
    execute(engine, entry, timer.action, target(timer.action, timer.task, timer.pod, timer.partition))
    rule_b(engine, entry, timer.action, task=timer.task, pod=timer.pod, partition=timer.partition)
    follow_up(engine, entry)


def target(action: str, task: str, pod: str, partition: str) -> Target | None:
    kind = JOB_TARGETS.get(action)
    if kind is None:
        return None
    return Target(kind=kind, task=task, pod=pod, partition=partition)
