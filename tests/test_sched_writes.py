"""What a session writes to pods and as Events: only where Volcano's scheduler would make the API call.

Volcano (`pkg/scheduler/cache/cache.go`, `RecordJobStatusEvent` and `taskUnschedulable`, called for
every job at session close by `pkg/scheduler/framework/job_updater.go`):

- a pod's PodScheduled=False condition, for its Allocated, Pending and Pipelined ungated tasks, is
  written (pods/status, with a Warning FailedScheduling Event on the pod) only when the condition
  differs from the pod's (`podConditionHaveUpdate`) or a non-empty nominated node differs from the
  pod's `status.nominatedNodeName`; an empty nominated node changes nothing;
- a bound task gets no condition from the scheduler (the API server's binding sets PodScheduled=True);
- the gang Events are one per PodGroup (Warning Unschedulable while Pending/Inqueue/Unknown, Normal
  Scheduled when the status was written), never one per pod.

vcbus says each of those once (it does not repeat what it last said; Volcano re-records its Events
every second and leaves them to Kubernetes' aggregation).
"""

from __future__ import annotations

import copy

import pytest

from statemachines import outputs as o
from statemachines.scheduler.emitted import condition_due, remember
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue
from tests.test_sched_evict import preempt_scene

PIPELINED = ("Pod default/high-w-0 can possibly be assigned to n1, once resource is released and minAvailable "
             "is satisfied")


def pod_writes(result) -> list:
    return outs_of(result.outputs, o.UpdatePodCondition)


def pod_events(result) -> list:
    """The events of the pod writes (not the binder's Scheduled, which a bind that shows gets)."""
    return [e for e in outs_of(result.outputs, o.RecordEvent) if e.kind == "Pod" and e.reason != "Scheduled"]


def bind_events(result) -> list:
    return [e for e in outs_of(result.outputs, o.RecordEvent) if e.kind == "Pod" and e.reason == "Scheduled"]


def write_back(cluster: Cluster, result) -> None:
    """What the API server shows after the actuator applied the session's pod conditions."""
    for c in pod_writes(result):
        obj = copy.deepcopy(cluster.get("Pod", c.name))
        status = obj["status"]
        status["conditions"] = [x for x in status.get("conditions") or [] if x["type"] != "PodScheduled"] + [
            {"type": "PodScheduled", "status": c.status, "reason": c.reason, "message": c.message}]
        if c.nominated_node:
            status["nominatedNodeName"] = c.nominated_node
        cluster.update(obj)


def volcano_writes(cluster: Cluster, c: o.UpdatePodCondition) -> bool:
    """`taskUnschedulable` on the pod as the cluster has it: would Volcano call UpdateStatus?"""
    status = cluster.get("Pod", c.name)["status"]
    cond = next((x for x in status.get("conditions") or [] if x["type"] == "PodScheduled"), None)
    update_cond = cond is None or (cond["status"], cond["reason"], cond["message"]) != (c.status, c.reason, c.message)
    update_nominated = bool(c.nominated_node) and status.get("nominatedNodeName", "") != c.nominated_node
    return update_cond or update_nominated


def check_against_volcano(cluster: Cluster, result) -> None:
    """Every pod write is one Volcano makes, and each comes with exactly its FailedScheduling Event."""
    writes = pod_writes(result)
    assert all(c.status == "False" for c in writes)
    assert [c.name for c in writes if not volcano_writes(cluster, c)] == []
    events = pod_events(result)
    assert [(e.name, e.event_type, e.reason, e.message) for e in events] == [
        (c.name, "Warning", "FailedScheduling", c.message) for c in writes]


# ------------------------------------------------------------------ the rule itself


@pytest.mark.parametrize(("previous", "recorded", "recorded_nominated", "new", "due"), [
    # no memory: the pod's record decides
    (None, None, "", ("Unschedulable", "m", ""), True),  # no condition yet
    (None, ("Unschedulable", "m"), "", ("Unschedulable", "m", ""), False),  # the same condition
    (None, ("Unschedulable", "m"), "", ("Unschedulable", "other", ""), True),  # another message
    (None, ("Unschedulable", "m"), "", ("Schedulable", "m", ""), True),  # another reason
    (None, ("Unschedulable", "m"), "n1", ("Unschedulable", "m", "n1"), False),  # nominated already
    (None, ("Unschedulable", "m"), "n1", ("Unschedulable", "m", "n2"), True),  # another nominated node
    (None, ("Unschedulable", "m"), "", ("Unschedulable", "m", "n1"), True),  # a first nominated node
    (None, ("Unschedulable", "m"), "n1", ("Unschedulable", "m", ""), False),  # none: the pod keeps n1
    # memory: what vcbus last wrote decides (its record may lag)
    (("Unschedulable", "m", ""), None, "", ("Unschedulable", "m", ""), False),
    (("Unschedulable", "m", ""), None, "", ("Unschedulable", "m2", ""), True),
    (("Unschedulable", "m", "n1"), None, "", ("Unschedulable", "m", ""), False),  # not cleared by ""
    (("Unschedulable", "m", "n1"), None, "", ("Unschedulable", "m", "n1"), False),
    (("Unschedulable", "m", "n1"), None, "", ("Unschedulable", "m", "n2"), True),
    (("Unschedulable", "m", ""), None, "n1", ("Unschedulable", "m", "n1"), False),  # the record has it
])
def test_condition_due_is_volcanos_task_unschedulable(previous, recorded, recorded_nominated, new, due):
    assert condition_due(previous, recorded, recorded_nominated, *new) is due


def test_the_memory_keeps_the_nominated_node_a_later_condition_does_not_name():
    memory: dict = {}
    first = o.UpdatePodCondition(job="ns/j", seq=1, name="p", reason="Unschedulable", message="m", nominated_node="n1")
    later = o.UpdatePodCondition(job="ns/j", seq=1, name="p", reason="Unschedulable", message="m2")
    remember(memory, first)
    remember(memory, later)
    assert memory == {"Pod:ns/p:condition": ("Unschedulable", "m2", "n1")}
    remember(memory, o.UpdatePodCondition(job="ns/j", seq=1, name="p", reason="Unschedulable", message="m2",
                                          nominated_node="n2"))
    assert memory["Pod:ns/p:condition"] == ("Unschedulable", "m2", "n2")


# ------------------------------------------------------------------ preemption: the nominated node


def test_pipelined_again_without_a_new_eviction_writes_nothing():
    # session 1 evicts for high-w-0 and nominates n1; session 2 pipelines it onto n1 again (the
    # victims still releasing) without evicting: nominated node "", the condition unchanged. Volcano's
    # taskUnschedulable makes no call (it never clears nominatedNodeName), so no command, no Event.
    cluster = preempt_scene()
    first = cluster.session()
    [cond] = pod_writes(first)
    assert (cond.name, cond.message, cond.nominated_node) == ("high-w-0", PIPELINED, "n1")
    again = cluster.session()
    assert pod_writes(again) == [] and pod_events(again) == []
    assert cluster.cache.emitted["Pod:default/high-w-0:condition"] == ("Unschedulable", PIPELINED, "n1")


def test_pipelined_again_after_a_restart_reads_the_pods_record():
    # a scheduler without the memory (restarted, its log of outputs lost) compares with the pod as
    # the actuator left it: condition and nominatedNodeName already there, nothing to write
    cluster = preempt_scene()
    first = cluster.session()
    write_back(cluster, first)
    cluster.cache.emitted.clear()
    again = cluster.session()
    assert pod_writes(again) == [] and pod_events(again) == []


def test_a_new_nominated_node_alone_is_written_with_its_event():
    # the pod carries this very condition, but no nominated node: Volcano updates the pod
    # (nominatedNodeName) and records FailedScheduling
    cluster = preempt_scene()
    preemptor = copy.deepcopy(cluster.get("Pod", "high-w-0"))
    preemptor["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": PIPELINED}]
    cluster.update(preemptor)
    result = cluster.session()
    [cond] = pod_writes(result)
    assert (cond.message, cond.nominated_node) == (PIPELINED, "n1")
    check_against_volcano(cluster, result)


def test_preemption_sessions_write_only_what_volcano_writes():
    cluster = preempt_scene()
    for _ in range(3):
        result = cluster.session()
        check_against_volcano(cluster, result)
        write_back(cluster, result)
    for name in ("low-w-0", "low-w-1"):
        cluster.add(cluster.get("Pod", name), "DELETED")
    result = cluster.session()
    assert [(b.name, b.node) for b in result.binds] == [("high-w-0", "n1")]
    assert pod_writes(result) == []  # bound: no condition from the scheduler


# ------------------------------------------------------------------ gangs


def gang_cluster(jobs: int, replicas: int, nodes: int) -> Cluster:
    return Cluster(queue(), queue("root", reclaimable=False),
                   *[node(f"n{i:03d}", cpu="32", memory="256Gi") for i in range(nodes)],
                   *[podgroup(f"gang-{j}", replicas, phase="Inqueue", owner=f"gang-{j}") for j in range(jobs)])


def add_pods(cluster: Cluster, job: int, first: int, last: int) -> None:
    for i in range(first, last):
        cluster.add(pod(f"gang-{job}-worker-{i}", f"gang-{job}", role="worker"))


def land(cluster: Cluster, result, phase: str = "Pending") -> None:
    cluster.land_binds(result, phase)
    cluster.write_statuses(result)
    write_back(cluster, result)


def test_a_gang_run_scheduled_in_one_session_writes_no_pod_condition_and_one_event_per_podgroup():
    # Volcano's benchmark (10 vcjobs x 100 pods, minAvailable 100, nodes of 32 cpu / 256Gi) when a
    # session sees every pod: 1,000 binds, no PodScheduled write, no pod Event; per PodGroup one
    # Warning Unschedulable (still Inqueue: Binding does not count) and, once the binds land, one
    # Normal Scheduled
    cluster = gang_cluster(10, 100, 100)
    for j in range(10):
        add_pods(cluster, j, 0, 100)
    result = cluster.session()
    assert len(result.binds) == 1000
    assert pod_writes(result) == [] and pod_events(result) == []
    gang = [(e.name, e.event_type, e.reason, e.message) for e in outs_of(result.outputs, o.RecordEvent)]
    assert gang == [(f"gang-{j}", "Warning", "Unschedulable",
                     "0/100 tasks in gang unschedulable: pod group is ready, 100 Binding, 100 minAvailable")
                    for j in range(10)]
    land(cluster, result)
    landed = cluster.session()
    # the binds show: the binder's Scheduled on each pod (Volcano's 1,000), and nothing else on pods
    assert pod_writes(landed) == [] and pod_events(landed) == []
    assert sorted(e.name for e in bind_events(landed)) == sorted(
        f"gang-{j}-worker-{i}" for j in range(10) for i in range(100))
    assert [(e.name, e.event_type, e.reason) for e in outs_of(landed.outputs, o.RecordEvent) if e.kind == "PodGroup"] == [
        (f"gang-{j}", "Normal", "Scheduled") for j in range(10)]
    cluster.write_statuses(landed)
    for p in [p for (kind, _), p in list(cluster.objects.items()) if kind == "Pod"]:
        running = copy.deepcopy(p)
        running["status"]["phase"] = "Running"
        cluster.update(running)
    later = cluster.session()  # the PodGroups' running counts change: status written, no new Event
    assert outs_of(later.outputs, o.UpdatePodGroupStatus)
    assert not outs_of(later.outputs, o.RecordEvent) and pod_writes(later) == []


def test_a_gang_seen_half_created_gets_volcanos_conditions_once_per_change():
    # a session that sees only some of a gang's pods finds it invalid (fewer than minAvailable):
    # Volcano writes PodScheduled=False on each of them (the job's FitError, which counts the Pending
    # tasks, so each session that sees more pods writes them all again); once all are there they bind
    cluster = gang_cluster(2, 100, 100)
    add_pods(cluster, 0, 0, 100)
    add_pods(cluster, 1, 0, 40)
    first = cluster.session()
    check_against_volcano(cluster, first)
    assert {b.name.rsplit("-worker-", 1)[0] for b in first.binds} == {"gang-0"}
    assert {c.name for c in pod_writes(first)} == {f"gang-1-worker-{i}" for i in range(40)}
    assert {c.message for c in pod_writes(first)} == {
        "pod group is not ready, 100 minAvailable, 40 Pending; Pending: 40 Unschedulable"}
    land(cluster, first)
    same = cluster.session()  # nothing new for gang-1: nothing said again
    check_against_volcano(cluster, same)
    assert pod_writes(same) == []
    write_back(cluster, same)
    add_pods(cluster, 1, 40, 100)
    last = cluster.session()
    check_against_volcano(cluster, last)
    assert pod_writes(last) == [] and len(last.binds) == 100
