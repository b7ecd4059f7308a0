"""The compiled graph (`fire`) against the real `transitions.Machine` (`fire_with_transitions`),
and both against the status functions of Volcano's `pkg/controllers/job/state/*.go`.

For every (phase, trigger) and a deterministic spread of specs and statuses,
`fire()` must pick the same destination as `transitions` does, raise
IllegalTransition exactly when `transitions` refuses the trigger, and match a
direct transcription of the Go status function.
"""

from __future__ import annotations

import itertools

import pytest

from statemachines.job.handling import Check
from statemachines.job.machine import (
    GRAPH,
    HANDLERS,
    MACHINE,
    IllegalTransition,
    fire,
    fire_with_transitions,
    handling,
)
from statemachines.model.objects import JobSpec, TaskSpec
from statemachines.model.status import JobStatus
from statemachines.model.vocabulary import Phase

PHASES = [p.value for p in Phase]
TRIGGERS = list(MACHINE.events)


def _specs() -> list[JobSpec]:
    one = [TaskSpec(name="t", replicas=2, min_available=2)]
    return [
        JobSpec(min_available=2, max_retry=3, tasks=one),
        JobSpec(min_available=1, max_retry=1, tasks=[TaskSpec(name="t", replicas=3, min_available=1)]),
        JobSpec(min_available=2, max_retry=3, min_success=2, tasks=[TaskSpec(name="t", replicas=3)]),
        JobSpec(min_available=0, max_retry=2, tasks=[TaskSpec(name="t", replicas=0)]),
        JobSpec(min_available=2, max_retry=3, tasks=[TaskSpec(name="t", replicas=2)]),
        JobSpec(min_available=2, max_retry=3, tasks=[TaskSpec(name="a", replicas=2, min_available=1),
                                                     TaskSpec(name="b", replicas=1, min_available=1)]),
        JobSpec(min_available=1, max_retry=3, min_success=1,
                tasks=[TaskSpec(name="a", replicas=1), TaskSpec(name="b", replicas=2, min_available=1)]),
    ]


def _statuses(spec: JobSpec) -> list[JobStatus]:
    out = []
    tasks = [t.name for t in spec.tasks]
    grid = itertools.product(range(3), range(3), range(4), range(3), range(3), range(4))
    for i, (pending, running, succeeded, failed, terminating, retry) in enumerate(grid):
        if i % 7:
            continue
        # spread succeeded/failed over the tasks, so the per-task check sees both outcomes
        counts = {}
        for k, name in enumerate(tasks):
            s = succeeded if k == 0 else (succeeded + k) % 2
            f = failed if k == len(tasks) - 1 else 0
            if s or f:
                counts[name] = {"phase": {"Succeeded": s, "Failed": f}}
        out.append(JobStatus(pending=pending, running=running, succeeded=succeeded, failed=failed,
                             terminating=terminating, retry_count=retry, min_available=(i // 7) % 3,
                             task_status_count=counts or None))
    return out


CHECKS = [Check(spec, status) for spec in _specs() for status in _statuses(spec)]


@pytest.mark.parametrize("phase,trigger", sorted(GRAPH), ids=[f"{p}_{t}" for p, t in sorted(GRAPH)])
def test_fire_agrees_with_transitions_machine(phase, trigger):
    # building a Machine per call is slow: guarded triggers get a third of the spread, unguarded a sample
    guarded = any(guards for _, guards in GRAPH[(phase, trigger)])
    checks = CHECKS[::3] if guarded else CHECKS[::25]
    assert len(checks) > (300 if guarded else 40)
    for check in checks:
        assert fire(phase, trigger, check) == fire_with_transitions(phase, trigger, check), check


ILLEGAL = [(p, t) for p in PHASES for t in TRIGGERS if (p, t) not in GRAPH]


@pytest.mark.parametrize("phase,trigger", ILLEGAL, ids=[f"{p}_{t}" for p, t in ILLEGAL])
def test_illegal_trigger_is_refused_by_both(phase, trigger):
    for check in CHECKS[::40]:
        with pytest.raises(IllegalTransition):
            fire(phase, trigger, check)
        with pytest.raises(IllegalTransition):
            fire_with_transitions(phase, trigger, check)


def test_every_phase_and_trigger_is_covered():
    assert len(GRAPH) + len(ILLEGAL) == len(PHASES) * len(TRIGGERS)
    assert set(MACHINE.states) == set(PHASES)


# ---------------------------------------------------------------- against Volcano's status functions


def _total(spec):
    return sum(t.replicas for t in spec.tasks)


def _task_min_total(spec):
    return sum(t.min_available if t.min_available is not None else t.replicas for t in spec.tasks)


def volcano_pending(spec, s):
    return "Running" if spec.min_available <= s.running + s.succeeded + s.failed else None


def volcano_running(spec, s):
    total = _total(spec)
    if total == 0:
        return None
    if spec.min_success is not None and s.succeeded >= spec.min_success:
        return "Completed"
    if s.succeeded + s.failed == total:
        if spec.min_available >= _task_min_total(spec):
            for t in spec.tasks:
                if t.min_available is None:
                    continue
                counts = (s.task_status_count or {}).get(t.name)
                if counts is not None and counts["phase"].get("Succeeded", 0) < t.min_available:
                    return "Failed"
        if spec.min_success is not None and s.succeeded < spec.min_success:
            return "Failed"
        if s.succeeded >= spec.min_available:
            return "Completed"
        return "Failed"
    if s.pending > total - spec.min_available:
        return "Pending"
    return None


def volcano_restarting(spec, s):
    if s.retry_count >= spec.max_retry:
        return "Failed"
    if _total(spec) - s.terminating >= s.min_available:
        return "Pending"
    return None


def _alive(s):
    return s.terminating != 0 or s.pending != 0 or s.running != 0


VOLCANO = {
    ("Pending", "pending_check"): volcano_pending,
    ("Running", "running_check"): volcano_running,
    ("Restarting", "restarting_check"): volcano_restarting,
    ("Aborting", "aborting_check"): lambda spec, s: None if _alive(s) else "Aborted",
    ("Completing", "completing_check"): lambda spec, s: None if _alive(s) else "Completed",
    ("Terminating", "terminating_check"): lambda spec, s: None if _alive(s) else "Terminated",
    ("Pending", "restart"): lambda spec, s: "Restarting",
    ("Running", "restart"): lambda spec, s: "Restarting",
    ("Pending", "abort"): lambda spec, s: "Aborting",
    ("Running", "abort"): lambda spec, s: "Aborting",
    ("Pending", "complete"): lambda spec, s: "Completing",
    ("Running", "complete"): lambda spec, s: "Completing",
    ("Pending", "terminate"): lambda spec, s: "Terminating",
    ("Running", "terminate"): lambda spec, s: "Terminating",
    ("Aborting", "resume"): lambda spec, s: "Restarting",
    ("Aborted", "resume"): lambda spec, s: "Restarting",
}


def test_volcano_transcription_covers_the_graph():
    assert set(VOLCANO) == set(GRAPH)


@pytest.mark.parametrize("phase,trigger", sorted(VOLCANO), ids=[f"{p}_{t}" for p, t in sorted(VOLCANO)])
def test_fire_agrees_with_volcano_status_function(phase, trigger):
    outcomes = set()
    for check in CHECKS:
        want = VOLCANO[(phase, trigger)](check.spec, check.status)
        assert fire(phase, trigger, check) == want, check
        outcomes.add(want)
    if trigger.endswith("_check"):
        assert None in outcomes and len(outcomes) > 1  # the spread exercises both sides


def test_spread_reaches_every_running_check_row():
    rows = GRAPH[("Running", "running_check")]
    hit = set()
    for check in CHECKS:
        for i, (_, guards) in enumerate(rows):
            if all(fn(check) == want for fn, want in guards):
                hit.add(i)
                break
    assert hit == set(range(len(rows)))


@pytest.mark.parametrize("phase", PHASES)
def test_every_handler_trigger_exists_from_its_phase(phase):
    for action in ("SyncJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition", "AbortJob",
                   "CompleteJob", "TerminateJob", "ResumeJob", "EnqueueJob", "NotAnAction"):
        h = handling(phase, action)
        if h.trigger is not None:
            assert (phase, h.trigger) in GRAPH, (phase, action)
    assert phase in HANDLERS
