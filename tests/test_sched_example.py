"""The worked example (reference §10): resnet-dist-train, 1 master + 2 workers, 3 CPU / 8Gi each,
minAvailable 3, on nodes of 5 CPU / 16Gi, through the whole cache -> session -> outputs loop."""

from __future__ import annotations

from statemachines import outputs as o
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue

PG = "resnet-dist-train-uid1"
PODS = [("resnet-dist-train-master-0", "master"), ("resnet-dist-train-worker-0", "worker"),
        ("resnet-dist-train-worker-1", "worker")]
MESSAGE = (
    "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; "
    "Pending: 1 Unschedulable, 2 Schedulable. Origin reason is resnet-dist-train-worker-1: "
    "0/2 nodes are unavailable: 2 Insufficient cpu."
)


def resnet(nodes: int) -> Cluster:
    objects = [queue("default"), queue("root", reclaimable=False)]
    objects += [node(f"node-{i}", cpu="5", memory="16Gi") for i in range(1, nodes + 1)]
    objects.append(podgroup(PG, 3, min_task_member={"master": 1, "worker": 2},
                            min_resources={"cpu": "9", "memory": "24Gi", "pods": "3"}, owner="resnet-dist-train"))
    return Cluster(*objects)


def create_pods(cluster: Cluster) -> None:
    for name, role in PODS:
        cluster.add(pod(name, PG, cpu="3", memory="8Gi", role=role))


def test_session_one_enqueues_the_job_without_pods():
    cluster = resnet(2)
    result = cluster.session()
    assert [e.podgroup for e in outs_of(result.outputs, o.JobEnqueued)] == [PG]
    [status] = outs_of(result.outputs, o.UpdatePodGroupStatus)
    assert status.job == "default/resnet-dist-train"
    assert status.status == {"phase": "Inqueue"}  # no tasks: no condition
    [event] = [e for e in outs_of(result.outputs, o.RecordEvent) if e.kind == "PodGroup"]
    assert (event.event_type, event.reason) == ("Warning", "Unschedulable")
    assert event.message == "0/0 tasks in gang unschedulable: pod group is not ready, 3 minAvailable"
    assert event.component == "vc-scheduler" and event.name == PG
    assert result.binds == []


def test_two_nodes_nothing_bound_and_volcanos_exact_condition():
    cluster = resnet(2)
    cluster.write_statuses(cluster.session())
    create_pods(cluster)
    result = cluster.session()
    assert result.binds == [] and not outs_of(result.outputs, o.BindPod)
    [status] = outs_of(result.outputs, o.UpdatePodGroupStatus)
    assert status.status["phase"] == "Inqueue"
    [cond] = status.status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Unschedulable", "True", "NotEnoughResources")
    assert cond["message"] == MESSAGE
    assert cond["transitionID"] == result.uid
    [unschedulable] = outs_of(result.outputs, o.JobUnschedulable)
    assert unschedulable.message == MESSAGE
    [event] = [e for e in outs_of(result.outputs, o.RecordEvent) if e.kind == "PodGroup"]
    assert event.message == "3/3 tasks in gang unschedulable: " + MESSAGE.split(": ", 1)[1]
    conditions = {c.name: (c.reason, c.message) for c in outs_of(result.outputs, o.UpdatePodCondition)}
    assert conditions == {
        "resnet-dist-train-master-0": ("Schedulable", "Pod default/resnet-dist-train-master-0 can possibly be "
                                       "assigned to node-1, once minAvailable is satisfied"),
        "resnet-dist-train-worker-0": ("Schedulable", "Pod default/resnet-dist-train-worker-0 can possibly be "
                                       "assigned to node-2, once minAvailable is satisfied"),
        "resnet-dist-train-worker-1": ("Unschedulable", "0/2 nodes are unavailable: 2 Insufficient cpu."),
    }
    queue_writes = outs_of(result.outputs, o.UpdateQueueStatus)
    assert all(q.allocated == {"cpu": "0", "memory": "0"} for q in queue_writes)


def test_two_nodes_repeats_nothing_in_the_next_session():
    cluster = resnet(2)
    cluster.write_statuses(cluster.session())
    create_pods(cluster)
    first = cluster.session()
    cluster.write_statuses(first)
    again = cluster.session()
    assert not outs_of(again.outputs, o.UpdatePodGroupStatus)  # same condition text: no write
    assert not outs_of(again.outputs, o.RecordEvent)
    assert not outs_of(again.outputs, o.UpdatePodCondition)
    assert again.podgroups[0]["conditions"][0]["message"] == MESSAGE


def test_three_nodes_one_bind_per_node_then_running_after_the_binds_land():
    cluster = resnet(3)
    cluster.write_statuses(cluster.session())
    create_pods(cluster)
    result = cluster.session()
    assert sorted(b.node for b in result.binds) == ["node-1", "node-2", "node-3"]
    assert [(b.name, b.node) for b in outs_of(result.outputs, o.BindPod)] == [
        ("resnet-dist-train-master-0", "node-1"),
        ("resnet-dist-train-worker-0", "node-2"),
        ("resnet-dist-train-worker-1", "node-3"),
    ]
    [status] = outs_of(result.outputs, o.UpdatePodGroupStatus)
    assert status.status["phase"] == "Inqueue"  # Binding does not count as scheduled
    assert [c["type"] for c in status.status["conditions"]] == ["Scheduled"]
    assert status.status["conditions"][0]["reason"] == "tasks in gang are ready to be scheduled"
    [event] = [e for e in outs_of(result.outputs, o.RecordEvent) if e.kind == "PodGroup"]
    assert event.message == "0/3 tasks in gang unschedulable: pod group is ready, 3 Binding, 3 minAvailable"
    allocated = {q.queue: q.allocated for q in outs_of(result.outputs, o.UpdateQueueStatus)}
    assert allocated["default"] == {"cpu": "9", "memory": "24Gi", "pods": "3"}
    assert allocated["root"] == {"cpu": "9", "memory": "24Gi", "pods": "3"}

    cluster.write_statuses(result)
    between = cluster.session()  # binds still in flight: assumed Binding, nothing new
    assert not between.binds and not outs_of(between.outputs, o.UpdatePodGroupStatus)

    cluster.land_binds(result)
    landed = cluster.session()
    assert sorted(e.pod for e in outs_of(landed.outputs, o.PodBound)) == [n for n, _ in PODS]
    [status] = outs_of(landed.outputs, o.UpdatePodGroupStatus)
    assert status.status["phase"] == "Running"
    events = [(e.kind, e.event_type, e.reason, e.message) for e in outs_of(landed.outputs, o.RecordEvent)]
    nodes = {bind.name: bind.node for bind in result.binds}
    assert events == [("Pod", "Normal", "Scheduled", f"Successfully assigned default/{n} to {nodes[n]}") for n, _ in PODS] + [
        ("PodGroup", "Normal", "Scheduled", "pod group is ready")]
    assert not outs_of(landed.outputs, o.UpdateQueueStatus)  # allocated unchanged
    cluster.write_statuses(landed)
    assert not outs_of(cluster.session().outputs, o.PodBound)  # reported once
