"""The queue controller (statemachines/queues/): the machine table, counts, commands, hierarchy.

The machine is checked three ways for every (state, trigger, PodGroups left):
the compiled table (`fire`), the real `transitions.Machine` (`fire_with_transitions`)
and a direct transcription of Volcano's `pkg/controllers/queue/state/*.go`
closures written out here. The controller is driven with watch records through
the Engine (Harness), as the decider and `vcbus replay` drive it. No test here uses
fixtures, so tests/test_determinism.py replays every log built here twice.
"""

from __future__ import annotations

import itertools

import pytest

from statemachines import outputs as o
from statemachines.queues.machine import (
    CLOSE_QUEUE,
    FN_CLOSE,
    FN_OPEN,
    FN_SYNC,
    GRAPH,
    MACHINE,
    OPEN_QUEUE,
    STATES,
    SYNC_QUEUE,
    TRIGGERS,
    Check,
    UnknownState,
    fire,
    fire_with_transitions,
    handling,
    trigger_of,
)
from tests.builders import NS, T0, Harness, owner_ref, scenario

QAPI = "scheduling.volcano.sh/v1beta1"


# ---------------------------------------------------------------- builders


def queue_obj(name: str = "q", *, state: str | None = "", parent: str | None = None, uid: str | None = None,
              annotations: dict | None = None, **counts: int) -> dict:
    meta: dict = {"name": name, "uid": uid or f"uid-q-{name}", "resourceVersion": "1", "creationTimestamp": T0}
    if annotations:
        meta["annotations"] = annotations
    spec: dict = {"weight": 1}
    if parent is not None:
        spec["parent"] = parent
    status: dict = dict(counts)
    if state is not None:
        status["state"] = state
    return {"apiVersion": QAPI, "kind": "Queue", "metadata": meta, "spec": spec, "status": status}


def pg_obj(name: str, queue: str = "q", phase: str = "", *, namespace: str = NS) -> dict:
    meta = {"name": name, "namespace": namespace, "uid": f"uid-pg-{name}", "resourceVersion": "1",
            "creationTimestamp": T0, "ownerReferences": [owner_ref(name)]}
    return {"apiVersion": QAPI, "kind": "PodGroup", "metadata": meta, "spec": {"minMember": 1, "queue": queue},
            "status": {"phase": phase} if phase else {}}


def queue_command(queue: str, action: str, *, name: str | None = None, uid: str | None = None) -> dict:
    """What `vcctl queue operate -a open|close -n <queue>` creates (namespace default)."""
    name = name or f"{queue}-{action.lower()}-x"
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}", "resourceVersion": "1",
                     "creationTimestamp": T0},
        "action": action,
        "target": {"apiVersion": QAPI, "kind": "Queue", "name": queue, "uid": f"uid-q-{queue}"},
    }


def queue_outs(outs) -> list[tuple]:
    """The queue controller's outputs, compactly: what the assertions compare."""
    rows = []
    for x in outs:
        if not x.job.startswith("_/"):
            continue
        if isinstance(x, o.UpdateQueueStatus):
            counts = None if x.counts is None else tuple(x.counts[k] for k in
                                                          ("pending", "running", "inqueue", "unknown", "completed"))
            rows.append(("status", x.queue, x.state, counts))
        elif isinstance(x, o.QueueStateChanged):
            rows.append(("state", x.queue, x.from_state, x.to_state, x.action))
        elif isinstance(x, o.RecordEvent):
            assert (x.kind, x.name, x.api_version, x.component) == ("Queue", x.job[2:], QAPI, "vc-controller-manager")
            rows.append(("event", x.name, x.event_type, x.reason, x.message))
        elif isinstance(x, o.DeleteBusCommand):
            rows.append(("consume", x.job[2:], x.namespace, x.name))
        else:
            raise AssertionError(f"unexpected queue output {x}")
    return rows


Z = (0, 0, 0, 0, 0)


# ---------------------------------------------------------------- the machine, table-driven


def volcano_closure(state: str, action: str, podgroups: int) -> tuple[str, str]:
    """(queue function, new state) transcribed from pkg/controllers/queue/state/*.go."""
    none_left = podgroups == 0
    close = "Closed" if none_left else "Closing"
    if state in ("", "Open"):  # open.go (specState is "" or Open)
        if action == "OpenQueue":
            return "SyncQueue", "Open"
        if action == "CloseQueue":
            return "CloseQueue", close
        return "SyncQueue", "Open"
    if state == "Closing":  # closing.go
        if action == "OpenQueue":
            return "OpenQueue", "Open"
        return "SyncQueue", close  # CloseQueue, and default with specState Closing
    if state == "Closed":  # closed.go
        if action == "OpenQueue":
            return "OpenQueue", "Open"
        return "SyncQueue", "Closed"
    if state == "Unknown":  # unknown.go
        if action == "OpenQueue":
            return "OpenQueue", "Open"
        if action == "CloseQueue":
            return "CloseQueue", close
        return "SyncQueue", "Unknown"
    raise AssertionError(state)


ACTIONS = ["OpenQueue", "CloseQueue", "SyncQueue", "AbortJob", "anything"]
GRID = list(itertools.product(["", *STATES], ACTIONS, [0, 1, 3]))


@pytest.mark.parametrize("state,action,podgroups", GRID, ids=[f"{s or 'empty'}-{a}-{n}" for s, a, n in GRID])
def test_every_state_and_action_through_the_table_and_transitions(state, action, podgroups):
    fn, dest = volcano_closure(state, action, podgroups)
    check = Check(podgroups)
    trigger = trigger_of(action)
    assert handling(state, action) == fn
    assert fire(state, trigger, check) == dest
    assert fire_with_transitions(state, trigger, check) == dest


def test_the_machine_has_exactly_volcanos_states_and_actions():
    assert set(MACHINE.states) == {"Open", "Closing", "Closed", "Unknown"}
    assert set(MACHINE.events) == {OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE} == set(TRIGGERS)
    assert set(GRAPH) == set(itertools.product(STATES, TRIGGERS))  # every state handles every trigger
    assert {FN_SYNC, FN_OPEN, FN_CLOSE} == {handling(s, a) for s in STATES for a in ACTIONS}


@pytest.mark.parametrize("state", ["Foo", "open"])
def test_a_state_volcano_does_not_know_is_refused(state):
    with pytest.raises(UnknownState):
        handling(state, SYNC_QUEUE)


# ---------------------------------------------------------------- a new queue, counts


def test_a_new_queue_without_state_becomes_open():
    h = Harness()
    outs = h.feed("ADDED", queue_obj("q", state=None))
    assert queue_outs(outs) == [("status", "q", "Open", None), ("state", "q", "", "Open", "SyncQueue")]
    assert outs[0].job == "_/q" and outs[0].seq == 1 and outs[0].time == T0


def test_an_open_queue_is_not_written():
    h = Harness()
    assert queue_outs(h.feed("ADDED", queue_obj("q", state="Open"))) == []


def test_podgroup_phases_write_nothing_while_the_state_holds():
    """Volcano's syncQueue counts the PodGroups by phase into its metrics and applies the state
    alone, only when it changes (`queue_controller_action.go`, since f14999ca3): no count writes."""
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    for rtype, pg in [("ADDED", pg_obj("a")), ("MODIFIED", pg_obj("a", phase="Pending")),
                      ("ADDED", pg_obj("b", phase="Inqueue")), ("MODIFIED", pg_obj("a", phase="Running")),
                      ("MODIFIED", pg_obj("b", phase="Unknown")), ("MODIFIED", pg_obj("b", phase="Completed")),
                      ("ADDED", pg_obj("c", "other", phase="Running")), ("DELETED", pg_obj("a", phase="Running")),
                      ("DELETED", pg_obj("b", phase="Completed"))]:
        assert queue_outs(h.feed(rtype, pg)) == [], (rtype, pg["metadata"]["name"])


def test_the_counts_by_phase_follow_the_podgroups_for_the_metrics():
    """What Volcano's syncQueue counts for its metrics (`pkg/controllers/metrics/queue.go`), here at any time."""
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    qc = h.engine.queue_controller

    def counts() -> tuple[int, ...]:
        return tuple(qc.podgroup_counts()["q"][p] for p in ("Pending", "Running", "Inqueue", "Unknown", "Completed"))

    for rtype, pg, want in [
        ("ADDED", pg_obj("a"), Z),  # phase "": listed, not counted
        ("MODIFIED", pg_obj("a", phase="Pending"), (1, 0, 0, 0, 0)),
        ("ADDED", pg_obj("b", phase="Inqueue"), (1, 0, 1, 0, 0)),
        ("MODIFIED", pg_obj("a", phase="Running"), (0, 1, 1, 0, 0)),
        ("MODIFIED", pg_obj("b", phase="Unknown"), (0, 1, 0, 1, 0)),
        ("MODIFIED", pg_obj("b", phase="Completed"), (0, 1, 0, 0, 1)),
        ("ADDED", pg_obj("c", "other", phase="Running"), (0, 1, 0, 0, 1)),  # another queue, not known
        ("DELETED", pg_obj("a", phase="Running"), (0, 0, 0, 0, 1)),
        ("DELETED", pg_obj("b", phase="Completed"), Z),
    ]:
        h.feed(rtype, pg)
        assert counts() == want, (rtype, pg["metadata"]["name"])
    assert list(qc.podgroup_counts()) == ["q"]  # only the queues the controller knows, as Volcano's syncQueue


def test_podgroups_seen_before_their_queue_hold_it_closing_when_it_appears():
    h = Harness()
    h.feed("ADDED", pg_obj("a", phase="Running"))
    h.feed("ADDED", pg_obj("b", phase="Inqueue", namespace="other"))
    outs = h.feed("ADDED", queue_obj("q", state=None))
    assert queue_outs(outs) == [("status", "q", "Open", None), ("state", "q", "", "Open", "SyncQueue")]
    assert queue_outs(h.feed("ADDED", queue_command("q", "CloseQueue")))[1:3] == [
        ("status", "q", "Closing", None), ("state", "q", "Open", "Closing", "CloseQueue")]


def test_our_write_coming_back_late_is_not_taken_for_someone_elses():
    h = Harness()
    h.feed("ADDED", queue_obj("q", state=None))  # we write Open
    h.feed("ADDED", pg_obj("a", phase="Pending"))  # we write pending 1
    assert queue_outs(h.feed("MODIFIED", queue_obj("q", state="Open"))) == []  # the first write lands
    assert queue_outs(h.feed("MODIFIED", queue_obj("q", state="Open", pending=1))) == []
    assert queue_outs(h.feed("MODIFIED", pg_obj("a", phase="Pending"))) == []


def test_someone_elses_state_is_adopted_and_kept_as_volcano_keeps_it():
    """Volcano's state object comes from status.state; a Queue update alone enqueues nothing."""
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    assert queue_outs(h.feed("MODIFIED", queue_obj("q", state="Closed"))) == []
    # the next sync starts from Closed: closed.go keeps it Closed, so nothing is written
    assert queue_outs(h.feed("ADDED", pg_obj("a", phase="Pending"))) == []
    assert queue_outs(h.feed("ADDED", queue_command("q", "OpenQueue")))[1:3] == [
        ("status", "q", "Open", None), ("state", "q", "Closed", "Open", "OpenQueue")]


def test_a_deleted_queue_forgets_its_podgroups_as_volcano_does():
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    h.feed("ADDED", pg_obj("a", phase="Running"))
    assert queue_outs(h.feed("DELETED", queue_obj("q", state="Open", running=1))) == []
    # deleteQueue dropped c.podGroups[q]: the new queue lists no PodGroup until one changes, so it closes at once
    assert queue_outs(h.feed("ADDED", queue_obj("q", state=None, uid="uid-q2"))) == [
        ("status", "q", "Open", None), ("state", "q", "", "Open", "SyncQueue")]
    assert queue_outs(h.feed("ADDED", queue_command("q", "CloseQueue")))[1:3] == [
        ("status", "q", "Closed", None), ("state", "q", "Open", "Closed", "CloseQueue")]


# ---------------------------------------------------------------- commands


def test_close_then_closed_when_the_last_podgroup_goes():
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    h.feed("ADDED", pg_obj("a", phase="Running"))
    outs = h.feed("ADDED", queue_command("q", "CloseQueue"))
    assert queue_outs(outs) == [
        ("consume", "q", "default", "q-closequeue-x"),
        ("status", "q", "Closing", None),
        ("state", "q", "Open", "Closing", "CloseQueue"),
        ("event", "q", "Normal", "CloseQueue", "Close queue succeed"),
    ]
    assert queue_outs(h.feed("MODIFIED", pg_obj("a", phase="Completed"))) == []  # still listed: Closing holds
    assert queue_outs(h.feed("DELETED", pg_obj("a", phase="Completed"))) == [
        ("status", "q", "Closed", None), ("state", "q", "Closing", "Closed", "SyncQueue")]


def test_close_an_empty_queue_is_closed_at_once_and_open_reopens_it():
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    assert queue_outs(h.feed("ADDED", queue_command("q", "CloseQueue"))) == [
        ("consume", "q", "default", "q-closequeue-x"),
        ("status", "q", "Closed", None),
        ("state", "q", "Open", "Closed", "CloseQueue"),
        ("event", "q", "Normal", "CloseQueue", "Close queue succeed"),
    ]
    assert queue_outs(h.feed("ADDED", queue_command("q", "OpenQueue"))) == [
        ("consume", "q", "default", "q-openqueue-x"),
        ("status", "q", "Open", None),
        ("state", "q", "Closed", "Open", "OpenQueue"),  # openQueue records no Normal event
    ]


@pytest.mark.parametrize("action", ["OpenQueue", "CloseQueue"])
def test_a_command_is_consumed_once_and_only_when_added(action):
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    first = queue_outs(h.feed("ADDED", queue_command("q", action)))
    assert first[0] == ("consume", "q", "default", f"q-{action.lower()}-x")
    assert queue_outs(h.feed("ADDED", queue_command("q", action))) == []  # a relist: Delete would be NotFound
    assert queue_outs(h.feed("MODIFIED", queue_command("q", action))) == []  # AddFunc only
    assert queue_outs(h.feed("DELETED", queue_command("q", action))) == []


def test_commands_for_jobs_are_not_the_queue_controllers():
    h = Harness()
    h.feed("ADDED", queue_obj("j", state="Open"))
    cmd = queue_command("j", "CloseQueue")
    cmd["target"] = owner_ref("j")
    assert queue_outs(h.feed("ADDED", cmd)) == []


def test_a_command_for_a_missing_queue_is_consumed_and_dropped():
    h = Harness()
    assert queue_outs(h.feed("ADDED", queue_command("nope", "CloseQueue"))) == [
        ("consume", "nope", "default", "nope-closequeue-x")]


@pytest.mark.parametrize("action", ["SyncQueue", "AbortJob"])
def test_any_other_action_is_a_sync(action):
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Open"))
    assert queue_outs(h.feed("MODIFIED", queue_obj("q", state="Closing"))) == []  # adopted; no request
    # Closing with no PodGroup left: a sync closes it
    assert queue_outs(h.feed("ADDED", queue_command("q", action))) == [
        ("consume", "q", "default", f"q-{action.lower()}-x"),
        ("status", "q", "Closed", None),
        ("state", "q", "Closing", "Closed", "SyncQueue"),
    ]


def test_root_cannot_be_closed():
    h = Harness()
    h.feed("ADDED", queue_obj("root", state="Open"))
    assert queue_outs(h.feed("ADDED", queue_command("root", "CloseQueue"))) == [
        ("consume", "root", "default", "root-closequeue-x")]


def test_an_unknown_queue_stays_unknown_until_a_command():
    h = Harness()
    h.feed("ADDED", queue_obj("q", state="Unknown"))
    assert queue_outs(h.feed("ADDED", pg_obj("a", phase="Pending"))) == []  # unknown.go keeps Unknown
    assert queue_outs(h.feed("ADDED", queue_command("q", "CloseQueue")))[1:3] == [
        ("status", "q", "Closing", None), ("state", "q", "Unknown", "Closing", "CloseQueue")]


def test_an_invalid_state_fails_with_volcanos_warning():
    h = Harness()
    outs = h.feed("ADDED", queue_obj("q", state="Sleeping"))
    assert queue_outs(outs) == [
        ("event", "q", "Warning", "SyncQueue", "SyncQueue queue failed for queue q state Sleeping is invalid")]


# ---------------------------------------------------------------- hierarchy


def family(h: Harness) -> None:
    h.feed("ADDED", queue_obj("root", state="Open"))
    h.feed("ADDED", queue_obj("p", state="Open", parent="root"))
    h.feed("ADDED", queue_obj("c1", state="Open", parent="p"))
    h.feed("ADDED", queue_obj("c2", state="Open", parent="p"))


def test_closing_a_parent_closes_its_open_children_and_opening_it_reopens_them():
    h = Harness()
    family(h)
    h.feed("ADDED", pg_obj("a", "c2", phase="Running"))
    outs = queue_outs(h.feed("ADDED", queue_command("p", "CloseQueue")))
    assert [r for r in outs if r[0] == "state"] == [
        ("state", "p", "Open", "Closed", "CloseQueue"),
        ("state", "c1", "Open", "Closed", "CloseQueue"),
        ("state", "c2", "Open", "Closing", "CloseQueue"),
    ]
    outs = queue_outs(h.feed("ADDED", queue_command("p", "OpenQueue")))
    assert [r for r in outs if r[0] == "state"] == [
        ("state", "p", "Closed", "Open", "OpenQueue"),
        ("state", "c1", "Closed", "Open", "OpenQueue"),
        ("state", "c2", "Closing", "Open", "OpenQueue"),
    ]


def test_a_child_closed_on_its_own_stays_closed_when_the_parent_reopens():
    h = Harness()
    family(h)
    h.feed("ADDED", queue_command("c1", "CloseQueue", name="close-c1"))
    h.feed("ADDED", queue_command("p", "CloseQueue", name="close-p"))
    outs = queue_outs(h.feed("ADDED", queue_command("p", "OpenQueue", name="open-p")))
    assert [r for r in outs if r[0] == "state"] == [
        ("state", "p", "Closed", "Open", "OpenQueue"), ("state", "c2", "Closed", "Open", "OpenQueue")]


def test_a_child_cannot_open_under_a_closed_parent():
    h = Harness()
    family(h)
    h.feed("ADDED", queue_command("p", "CloseQueue", name="close-p"))
    outs = queue_outs(h.feed("ADDED", queue_command("c1", "OpenQueue", name="open-c1")))
    assert outs == [
        ("consume", "c1", "default", "open-c1"),
        ("event", "c1", "Warning", "OpenQueue",
         "OpenQueue queue failed for sync queue c1 failed for Failed to open queue c1 because its parent queue p "
         "is closing or closed. Open the parent queue first., event is CommandIssued, action is OpenQueue"),
    ]


def test_a_new_child_of_a_closed_parent_is_closed_by_its_first_sync():
    h = Harness()
    family(h)
    h.feed("ADDED", queue_command("p", "CloseQueue", name="close-p"))
    outs = queue_outs(h.feed("ADDED", queue_obj("c3", state=None, parent="p")))
    assert [r for r in outs if r[0] == "state"] == [
        ("state", "c3", "", "Open", "SyncQueue"), ("state", "c3", "Open", "Closed", "CloseQueue")]


def test_the_closed_by_parent_annotation_in_the_log_is_honoured():
    """A child Volcano closed with its parent (annotation written by Volcano) reopens with it here too."""
    h = Harness()
    h.feed("ADDED", queue_obj("root", state="Open"))
    h.feed("ADDED", queue_obj("p", state="Closed", parent="root"))
    h.feed("ADDED", queue_obj("c", state="Closed", parent="p", annotations={"volcano.sh/closed-by-parent": "true"}))
    outs = queue_outs(h.feed("ADDED", queue_command("p", "OpenQueue")))
    assert [r for r in outs if r[0] == "state"] == [
        ("state", "p", "Closed", "Open", "OpenQueue"), ("state", "c", "Closed", "Open", "OpenQueue")]


# ---------------------------------------------------------------- the job side is untouched


def test_queue_records_leave_the_job_machine_alone():
    h = Harness()
    h.feed("ADDED", queue_obj("default", state="Open"))
    h.feed("ADDED", pg_obj("x", "default", phase="Inqueue"))
    assert not h.engine.jobs or all(e.job is None for e in h.engine.jobs.values())
    assert all(x.job.startswith("_/") for x in h.outputs)


# ---------------------------------------------------------------- a scenario for tests/test_determinism.py


@scenario
def queue_lifecycle() -> list[bytes]:
    h = Harness()
    family(h)
    for i, phase in enumerate(["Pending", "Inqueue", "Running"]):
        h.tick(5)
        h.feed("ADDED", pg_obj(f"g{i}", "c1", phase=phase))
    h.feed("ADDED", queue_command("p", "CloseQueue", name="close-p"))
    for i in range(3):
        h.tick(5)
        h.feed("DELETED", pg_obj(f"g{i}", "c1"))
    h.feed("ADDED", queue_command("p", "OpenQueue", name="open-p"))
    return h.log


def test_the_queue_scenario_replays_to_what_was_decided_live():
    from tests.test_determinism import replay_outputs

    log = queue_lifecycle()
    h = Harness()
    for data in log:
        h.feed_raw(data)
    live = b"\n".join(o.encoder.encode(x) for x in h.outputs)
    assert live == replay_outputs(b"".join(r + b"\n" for r in log))
    assert [x.to_state for x in h.outputs if isinstance(x, o.QueueStateChanged) and x.queue == "c1"][-2:] == [
        "Closed", "Open"]
