"""The task machine: the compiled table (`fire`) against `transitions` itself, against Volcano's
`TaskCompleted` / `TaskFailed` (`pkg/controllers/cache/cache.go`), and in the engine.

For every (phase, trigger) and a deterministic spread of task specs and pod
lists, `fire()` must pick the same destination and raise the same Volcano
event as the real `transitions.Machine`, and raise `TaskCompleted` /
`TaskFailed` exactly when a direct transcription of Volcano's cache tests
says so. The per-task counts the engine keeps incrementally must equal a
recount of the cached pods after every record of every example log.
"""

from __future__ import annotations

import io
import itertools
import pathlib
import random

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.task.counts import TaskBook, counts_of
from statemachines.task.machine import (
    GRAPH,
    MACHINE,
    POD_SUCCEEDED,
    POD_UPDATED,
    PODS_CHANGED,
    TRIGGERS,
    IllegalTransition,
    fire,
    fire_with_transitions,
)
from statemachines.task.phases import TaskCheck, TaskPhase
from tests.builders import Harness, job, pod, policy, running_job, task
from vcbus.watchlog import decode_record, read_records

ROOT = pathlib.Path(__file__).resolve().parents[1]
PHASES = [p.value for p in TaskPhase]


class P:
    """A cached pod as the counts see it."""

    def __init__(self, phase: str, restarts: int = 0, task: str = "t") -> None:
        self.task, self.phase, self.restarts = task, phase, restarts
        self.deleting = self.out_of_sync = False


def _pod_lists() -> list[list[P]]:
    out = []
    grid = itertools.product(range(3), range(3), range(4), range(3), range(2), range(5))
    for i, (pending, running, succeeded, failed, unknown, restarts) in enumerate(grid):
        if i % 7:  # a seventh of the grid (7 is prime to every dimension, so each still varies)
            continue
        pods = [P("Pending") for _ in range(pending)] + [P("Running") for _ in range(running)]
        pods += [P("Succeeded", 7) for _ in range(succeeded)] + [P("Failed", 9) for _ in range(failed)]
        pods += [P("Unknown", 4) for _ in range(unknown)] + ([P("") ] if i % 3 == 0 else [])
        live = [p for p in pods if p.phase in ("Running", "Pending")]
        for k in range(restarts):  # spread the restarts over the live pods
            if live:
                live[k % len(live)].restarts += 1
        out.append(pods)
    return out


SPECS = [  # (replicas, minAvailable, maxRetry)
    (2, None, 0), (3, 1, 3), (3, 2, -1), (0, None, 0), (1, 0, 1), (2, 2, 2), (3, None, 5),
]
POD_LISTS = _pod_lists()
CASES = [(spec, pods) for spec in SPECS for pods in POD_LISTS]


def check(spec, pods) -> TaskCheck:
    return TaskCheck(spec[0], spec[1], spec[2], counts_of(pods))


def test_the_spread_is_wide():
    assert len(CASES) > 1000


@pytest.mark.parametrize("phase,trigger", sorted(GRAPH), ids=[f"{p}_{t}" for p, t in sorted(GRAPH)])
def test_fire_agrees_with_transitions_machine(phase, trigger):
    seen = set()
    for spec, pods in CASES[::4]:
        c = check(spec, pods)
        got = fire(phase, trigger, c)
        assert got == fire_with_transitions(phase, trigger, c), (spec, c)
        seen.add(got)
    assert len({dest for dest, _ in seen}) == 4  # the spread reaches every phase


def test_every_phase_has_every_trigger_and_nothing_else():
    assert set(GRAPH) == {(p, t) for p in PHASES for t in TRIGGERS}
    assert set(MACHINE.states) == set(PHASES)
    assert set(MACHINE.events) == set(TRIGGERS)


@pytest.mark.parametrize("phase", PHASES)
def test_an_unknown_trigger_is_refused_by_both(phase):
    c = check(SPECS[0], POD_LISTS[3])
    with pytest.raises(IllegalTransition):
        fire(phase, "pod_exploded", c)
    with pytest.raises(IllegalTransition):
        fire_with_transitions(phase, "pod_exploded", c)


# ---------------------------------------------------------------- against Volcano's cache tests


def volcano_task_completed(spec, pods) -> bool:
    """`jobCache.TaskCompleted`: succeeded pods >= replicas, replicas > 0."""
    replicas = spec[0]
    if replicas <= 0:
        return False
    return sum(1 for p in pods if p.phase == "Succeeded") >= replicas


def volcano_task_failed(spec, pods) -> bool:
    """`jobCache.TaskFailed`: restarts of Running/Pending pods >= maxRetry (0 -> 3, -1 never)."""
    replicas, _, max_retry = spec
    if replicas == 0 or max_retry == -1:
        return False
    if max_retry == 0:
        max_retry = 3
    return sum(p.restarts for p in pods if p.phase in ("Running", "Pending")) >= max_retry


@pytest.mark.parametrize("phase", PHASES)
def test_task_completed_is_raised_exactly_when_volcano_raises_it(phase):
    outcomes = set()
    for spec, pods in CASES:
        dest, event = fire(phase, POD_SUCCEEDED, check(spec, pods))
        want = volcano_task_completed(spec, pods)
        assert (event == "TaskCompleted") == want, (spec, counts_of(pods))
        assert event in (None, "TaskCompleted")
        if want:
            assert dest == "Completed"
        outcomes.add(want)
    assert outcomes == {True, False}


@pytest.mark.parametrize("phase", PHASES)
def test_task_failed_is_raised_exactly_when_volcano_raises_it(phase):
    outcomes = set()
    for spec, pods in CASES:
        dest, event = fire(phase, POD_UPDATED, check(spec, pods))
        want = volcano_task_failed(spec, pods)
        assert (event == "TaskFailed") == want, (spec, counts_of(pods))
        assert event in (None, "TaskFailed")
        outcomes.add(want)
    assert outcomes == {True, False}


@pytest.mark.parametrize("phase", PHASES)
def test_pods_changed_raises_nothing(phase):
    assert {fire(phase, PODS_CHANGED, check(spec, pods))[1] for spec, pods in CASES} == {None}


def derived(spec, pods) -> str:
    """The phase rule of phases.py, written out."""
    replicas, min_available, _ = spec
    task_min = replicas if min_available is None else min_available
    n = {ph: sum(1 for p in pods if p.phase == ph) for ph in ("Running", "Succeeded", "Failed")}
    if volcano_task_completed(spec, pods):
        return "Completed"
    if volcano_task_failed(spec, pods):
        return "Failed"
    if replicas > 0 and n["Succeeded"] + n["Failed"] >= replicas and n["Succeeded"] < task_min:
        return "Failed"
    if replicas > 0 and n["Running"] + n["Succeeded"] + n["Failed"] >= max(task_min, 1):
        return "Running"
    return "Pending"


@pytest.mark.parametrize("trigger", TRIGGERS)
def test_the_destination_depends_only_on_the_pods_and_the_spec(trigger):
    for spec, pods in CASES:
        want = derived(spec, pods)
        for phase in PHASES:
            assert fire(phase, trigger, check(spec, pods))[0] == want, (phase, spec, counts_of(pods))


# ---------------------------------------------------------------- the incremental counts


def test_the_book_follows_any_sequence_of_pod_changes():
    rng = random.Random(20261130)
    book, cache = TaskBook(), {}
    for _ in range(3000):
        name = f"p{rng.randrange(12)}"
        op = rng.random()
        if op < 0.2 and name in cache:
            book.forget(cache.pop(name))
        elif op < 0.6 and name in cache:
            pod = cache[name]
            book.forget(pod)
            pod.phase = rng.choice(["Pending", "Running", "Succeeded", "Failed", "Unknown", ""])
            pod.restarts = rng.randrange(4)
            pod.deleting, pod.out_of_sync = rng.random() < 0.2, rng.random() < 0.2
            book.count(pod)
        elif name not in cache:
            cache[name] = P(rng.choice(["Pending", "Running"]), rng.randrange(3), task=rng.choice("ab"))
            book.count(cache[name])
        for t in "ab":
            assert book.of(t).as_tuple() == counts_of(p for p in cache.values() if p.task == t).as_tuple()


EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.json*"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_engines_counts_equal_a_recount_after_every_record(name):
    engine = Engine()
    with open(ROOT / "examples" / name, "rb") as fh:
        for rec in read_records(fh):
            engine.apply(rec.seq, decode_record("log", rec))
            for entry in engine.jobs.values():
                for t, pods in entry.pods.items():
                    assert entry.tasks.of(t).as_tuple() == counts_of(pods.values()).as_tuple(), (rec.seq, t)
                for t, counts in entry.tasks.counts.items():
                    if t not in entry.pods:
                        assert counts.as_tuple() == (0,) * 8, (rec.seq, t)


# ---------------------------------------------------------------- in the engine


def moves(outs) -> list[tuple[str, str, str, str]]:
    return [(m.task, m.from_phase, m.to_phase, m.trigger) for m in outs.of(o.TaskPhaseChanged)]


def test_a_running_job_moves_its_task_to_running_then_completed_with_task_completed():
    h = running_job(job(tasks=[task("t", 2)]))
    assert moves(h.outputs) == [("t", "Pending", "Running", "pods_changed")]
    outs = h.set_pod("j-t-0", phase="Succeeded", exit_code=0)
    assert moves(outs) == [] and outs.events()[0] == "OutOfSync"
    outs = h.set_pod("j-t-1", phase="Succeeded", exit_code=0)
    assert moves(outs) == [("t", "Running", "Completed", "pod_succeeded")]
    assert outs.events()[0] == "TaskCompleted"
    [move] = outs.of(o.TaskPhaseChanged)
    assert (move.pod, move.succeeded, move.replicas, move.cause) == ("j-t-1", 2, 2, "all replicas succeeded (2 of 2)")
    # the move comes before the request it caused
    assert outs.index(move) < outs.index(outs.resolved()[0])


def test_task_failed_comes_from_the_task_machine_and_reaches_task_policies():
    j = job(tasks=[task("t", 2, max_retry=2, policies=[policy("RestartTask", "TaskFailed")])])
    h = running_job(j)
    outs = h.set_pod("j-t-0", restarts=2)
    assert moves(outs) == [("t", "Running", "Failed", "pod_updated")]
    [res] = outs.resolved()[:1]
    assert (res.event, res.task, res.action, res.policy) == ("TaskFailed", "t", "RestartTask", "task[t][0]")


def test_the_task_of_a_killed_job_goes_back_to_pending_as_its_pods_go():
    h = running_job(job(tasks=[task("t", 1)], policies=[policy("RestartJob", "PodFailed")]))
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    h.delete_pod("j-t-0")
    assert moves(h.outputs)[-2:] == [("t", "Running", "Failed", "pods_changed"),
                                     ("t", "Failed", "Pending", "pods_changed")]


def test_a_spec_change_resettles_the_task_phase():
    h = running_job(job(tasks=[task("t", 2)]))
    h.set_pod("j-t-0", phase="Succeeded", exit_code=0)

    def scale_down(obj):
        obj["spec"]["tasks"][0]["replicas"] = 1
        obj["spec"]["tasks"][0]["minAvailable"] = 1
        obj["spec"]["minAvailable"] = 1

    outs = h.update_job(scale_down)
    assert moves(outs)[:1] == [("t", "Running", "Completed", "pods_changed")]


def test_pods_seen_before_their_job_get_a_phase_when_the_job_appears():
    h = Harness()
    j = job(tasks=[task("t", 2)])
    h.job_obj = j
    outs = h.feed("ADDED", pod("j", "t", 0, phase="Running"))
    outs += h.feed("ADDED", pod("j", "t", 1, phase="Running"))
    assert moves(outs) == []  # no spec, no task phase (and no TaskCompleted/TaskFailed, as Volcano's cache)
    outs = h.create(j)
    assert moves(outs) == [("t", "Pending", "Running", "pods_changed")]
    assert outs.index(outs.of(o.JobObserved)[0]) < outs.index(outs.of(o.TaskPhaseChanged)[0])


def test_replay_outputs_carry_task_moves_for_every_example():
    for name in EXAMPLES:
        engine = Engine()
        got = []
        with open(ROOT / "examples" / name, "rb") as fh:
            for rec in read_records(io.BufferedReader(fh)):
                got.extend(x for x in engine.apply(rec.seq, decode_record("log", rec)) if isinstance(x, o.TaskPhaseChanged))
        assert got, name
        for move in got:
            assert move.from_phase != move.to_phase and move.to_phase in PHASES


def test_events_tail_summarises_a_task_move():
    from vcbus.cli.events import summary

    move = o.TaskPhaseChanged(job="default/j", seq=3, task="worker", from_phase="Running", to_phase="Completed",
                              cause="all replicas succeeded (2 of 2)")
    assert summary(move) == "task worker: Running -> Completed (all replicas succeeded (2 of 2))"


def test_a_pod_replaced_under_the_same_name_moves_the_task():
    h = running_job(job(tasks=[task("t", 1)]))
    assert h.entry.tasks.phases["t"] == "Running"
    outs = h.feed("ADDED", pod("j", "t", 0, phase="Pending", uid="uid-j-t-0-again", version=h.status.version))
    assert moves(outs) == [("t", "Running", "Pending", "pods_changed")]
    assert h.entry.tasks.of("t").as_tuple() == counts_of(h.entry.pods["t"].values()).as_tuple()
