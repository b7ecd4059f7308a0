"""The scheduler's, queue controller's and GC's commands on a real API server, idempotent under redelivery."""

from __future__ import annotations

import logging
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines.admission.mutate import mutate_job
from tests.podsim import PodSimulator
from vcbus.k8s.actuator import JOB_GROUP, JOB_PLURAL, JOB_VERSION, PG_GROUP, PG_PLURAL, PG_VERSION, Actuator
from vcbus.k8s.watching import KubeApiError

pytestmark = pytest.mark.k8s
T0, T1 = "2026-11-30T08:00:00Z", "2026-11-30T08:05:00Z"


@pytest.fixture
def env(k8s, k8s_namespace):
    api = k8s.api_client()
    return api, client.CoreV1Api(api), client.CustomObjectsApi(api), Actuator(api), k8s_namespace


@pytest.fixture(scope="module")
def nodes(k8s):
    # PodSimulator's nodes, not KWOK's: no kubelet may run or reap the bound pods (an evicted pod must stay terminating)
    sim = PodSimulator(k8s.api_client())
    names = ("act-node-1", "act-node-2")
    for name in names:
        try:
            sim.create_node(name, cpu="4", memory="8Gi")
        except KubeApiError as err:
            if err.status != 409:
                raise
    yield names
    for name in names:  # other tests schedule onto whatever nodes exist
        sim.delete_node(name)


def make_pod(core, ns: str, name: str, **meta) -> client.V1Pod:
    return core.create_namespaced_pod(ns, {
        "metadata": {"name": name, **meta},
        "spec": {"schedulerName": "volcano", "containers": [{"name": "c", "image": "busybox"}]},
    })


def conditions(core, ns: str, name: str) -> dict:
    pod = core.read_namespaced_pod(name, ns)
    return {c.type: c for c in pod.status.conditions or []}


def key(ns: str, name: str = "j") -> str:
    return f"{ns}/{name}"


# ------------------------------------------------------------------ BindPod


def test_bind_binds_once_and_a_redelivery_is_done(env, nodes):
    api, core, custom, act, ns = env
    pod = make_pod(core, ns, "p-0")
    cmd = o.BindPod(job=key(ns), seq=1, name="p-0", uid=pod.metadata.uid, node=nodes[0])
    assert act.apply(cmd) == "applied"
    got = core.read_namespaced_pod("p-0", ns)
    assert got.spec.node_name == nodes[0]
    assert conditions(core, ns, "p-0")["PodScheduled"].status == "True"  # the apiserver's part of a bind
    assert act.apply(cmd) == "done"


def test_bind_of_a_pod_bound_elsewhere_is_refused_and_logged(env, nodes, caplog):
    api, core, custom, act, ns = env
    pod = make_pod(core, ns, "p-0")
    assert act.apply(o.BindPod(job=key(ns), seq=1, name="p-0", uid=pod.metadata.uid, node=nodes[0])) == "applied"
    with caplog.at_level(logging.WARNING, logger="vcbus.actuator"):
        assert act.apply(o.BindPod(job=key(ns), seq=2, name="p-0", uid=pod.metadata.uid, node=nodes[1])) == "dropped"
    assert core.read_namespaced_pod("p-0", ns).spec.node_name == nodes[0]
    assert f"bound to {nodes[0]}" in caplog.text and "p-0" in caplog.text


def test_bind_of_a_deleted_pod_or_of_an_older_incarnation_is_done(env, nodes):
    api, core, custom, act, ns = env
    assert act.apply(o.BindPod(job=key(ns), seq=1, name="never-was", node=nodes[0])) == "done"
    old = make_pod(core, ns, "p-0")
    core.delete_namespaced_pod("p-0", ns)  # unbound: gone at once
    new = make_pod(core, ns, "p-0")
    assert act.apply(o.BindPod(job=key(ns), seq=2, name="p-0", uid=old.metadata.uid, node=nodes[0])) == "done"
    assert core.read_namespaced_pod("p-0", ns).spec.node_name is None  # the uid precondition held
    assert act.apply(o.BindPod(job=key(ns), seq=3, name="p-0", uid=new.metadata.uid, node=nodes[0])) == "applied"


def test_bind_of_a_pod_being_deleted_is_done(env, nodes):
    api, core, custom, act, ns = env
    pod = make_pod(core, ns, "p-0", finalizers=["vcbus.test/hold"])
    core.delete_namespaced_pod("p-0", ns)
    assert core.read_namespaced_pod("p-0", ns).metadata.deletion_timestamp is not None
    assert act.apply(o.BindPod(job=key(ns), seq=1, name="p-0", uid=pod.metadata.uid, node=nodes[0])) == "done"
    core.patch_namespaced_pod("p-0", ns, {"metadata": {"finalizers": None}})


def make_claim(core, ns: str, name: str) -> client.V1PersistentVolumeClaim:
    return core.create_namespaced_persistent_volume_claim(ns, {"metadata": {"name": name}, "spec": {
        "storageClassName": "local", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}})


@pytest.fixture
def volume(env):
    """`volume(name)`: a static PV of class `local` (deleted after the test)."""
    core = env[1]
    made = []

    def make(name: str, ref: dict | None = None) -> str:
        name = f"{env[4]}-{name}"
        spec = {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                "hostPath": {"path": "/data"}}
        if ref is not None:
            spec["claimRef"] = ref
        core.create_persistent_volume({"metadata": {"name": name}, "spec": spec})
        made.append(name)
        return name

    yield make
    for name in made:
        core.delete_persistent_volume(name)


def test_bind_with_volumes_writes_each_pvs_claim_ref_first_and_a_redelivery_is_done(env, nodes, volume):
    """VolumeBinding's PreBind before the bind: the PV's claimRef (with the claim's uid) and bound-by-controller,
    as kube-scheduler writes them; the PVC is left to the PV controller (none runs here)."""
    api, core, custom, act, ns = env
    claim = make_claim(core, ns, "data")
    pv = volume("pv")
    pod = make_pod(core, ns, "p-0")
    cmd = o.BindPod(job=key(ns), seq=1, name="p-0", uid=pod.metadata.uid, node=nodes[0],
                    volumes=[o.VolumeBinding(claim="data", claim_uid=claim.metadata.uid, volume=pv)])
    assert act.apply(cmd) == "applied"
    got = core.read_persistent_volume(pv)
    ref = got.spec.claim_ref
    assert (ref.kind, ref.namespace, ref.name, ref.uid) == ("PersistentVolumeClaim", ns, "data", claim.metadata.uid)
    assert got.metadata.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert core.read_namespaced_pod("p-0", ns).spec.node_name == nodes[0]
    assert act.apply(cmd) == "done"


def test_bind_whose_volume_another_claim_holds_or_is_gone_is_not_sent(env, nodes, volume, caplog):
    api, core, custom, act, ns = env
    claim = make_claim(core, ns, "data")
    taken = volume("taken", ref={"kind": "PersistentVolumeClaim", "namespace": ns, "name": "other", "uid": "u-1"})
    pod = make_pod(core, ns, "p-0")
    for pv, words in ((taken, f"claimed by {ns}/other"), (f"{ns}-never-was", "gone")):
        cmd = o.BindPod(job=key(ns), seq=1, name="p-0", uid=pod.metadata.uid, node=nodes[0],
                        volumes=[o.VolumeBinding(claim="data", claim_uid=claim.metadata.uid, volume=pv)])
        with caplog.at_level(logging.WARNING, logger="vcbus.actuator"):
            assert act.apply(cmd) == "dropped"
        assert words in caplog.text
        assert core.read_namespaced_pod("p-0", ns).spec.node_name is None
    assert core.read_persistent_volume(taken).spec.claim_ref.name == "other"
    # a claim re-created since the session chose (another uid): not bound either, the PV not written
    free = volume("free")
    cmd = o.BindPod(job=key(ns), seq=2, name="p-0", uid=pod.metadata.uid, node=nodes[0],
                    volumes=[o.VolumeBinding(claim="data", claim_uid="an-older-uid", volume=free)])
    assert act.apply(cmd) == "dropped"
    assert core.read_persistent_volume(free).spec.claim_ref is None


# ------------------------------------------------------------------ EvictPod


def test_evict_marks_the_pod_as_volcano_does_then_deletes_it(env, nodes):
    api, core, custom, act, ns = env
    pod = make_pod(core, ns, "victim")
    act.apply(o.BindPod(job=key(ns), seq=1, name="victim", uid=pod.metadata.uid, node=nodes[0]))
    PodSimulator(api).start(f"{ns}/victim")  # Running by one status write, and no kubelet finishes its deletion
    cmd = o.EvictPod(job=key(ns), seq=2, time=T1, name="victim", uid=pod.metadata.uid, reason="preempt")
    assert act.apply(cmd) == "applied"
    got = core.read_namespaced_pod("victim", ns)
    assert got.metadata.deletion_timestamp is not None  # bound: graceful deletion waits for the kubelet
    conds = {c.type: c for c in got.status.conditions}
    assert (conds["Ready"].status, conds["Ready"].reason, conds["Ready"].message) == (
        "False", "Evict", "Pod is evicted, because of preempt")
    target = conds["DisruptionTarget"]
    assert (target.status, target.reason, target.message) == (
        "True", "PreemptionByScheduler", "volcano: preempting to accommodate a higher priority pod")
    assert target.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ") == T1
    assert act.apply(cmd) == "done"  # redelivered: already going


def test_evict_with_a_stale_uid_or_of_a_gone_pod_is_done(env, nodes):
    api, core, custom, act, ns = env
    make_pod(core, ns, "p-0")
    assert act.apply(o.EvictPod(job=key(ns), seq=1, name="p-0", uid="an-older-one", reason="reclaim")) == "done"
    got = core.read_namespaced_pod("p-0", ns)
    assert got.metadata.deletion_timestamp is None and "DisruptionTarget" not in conditions(core, ns, "p-0")
    assert act.apply(o.EvictPod(job=key(ns), seq=2, name="gone", reason="reclaim")) == "done"
    cmd = o.EvictPod(job=key(ns), seq=3, name="p-0", uid=got.metadata.uid, reason="reclaim")
    assert act.apply(cmd) == "applied"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("p-0", ns)  # unbound: deleted at once
    assert err.value.status == 404
    assert act.apply(cmd) == "done"


# ------------------------------------------------------------------ UpdatePodCondition


def test_pod_scheduled_condition_and_nominated_node(env, nodes):
    api, core, custom, act, ns = env
    pod = make_pod(core, ns, "p-0")
    uid = pod.metadata.uid
    first = o.UpdatePodCondition(job=key(ns), seq=1, time=T0, name="p-0", uid=uid, reason="Unschedulable",
                                 message="0/2 nodes are unavailable: 2 Insufficient cpu.")
    assert act.apply(first) == "applied"
    cond = conditions(core, ns, "p-0")["PodScheduled"]
    assert (cond.status, cond.reason, cond.message) == ("False", "Unschedulable", first.message)
    assert cond.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ") == T0
    assert act.apply(first) == "done"  # nothing changes: no write
    # Same status, another reason: the transition time stays; the nominated node is set.
    pipelined = o.UpdatePodCondition(
        job=key(ns), seq=2, time=T1, name="p-0", uid=uid, reason="Unschedulable", nominated_node=nodes[1],
        message=f"Pod {ns}/p-0 can possibly be assigned to {nodes[1]}, once resource is released and minAvailable is satisfied")
    assert act.apply(pipelined) == "applied"
    got = core.read_namespaced_pod("p-0", ns)
    cond = {c.type: c for c in got.status.conditions}["PodScheduled"]
    assert cond.message == pipelined.message and cond.last_transition_time.strftime("%Y-%m-%dT%H:%M:%SZ") == T0
    assert got.status.nominated_node_name == nodes[1]
    # A later condition without a nominated node leaves it (Volcano never clears it).
    assert act.apply(o.UpdatePodCondition(job=key(ns), seq=3, time=T1, name="p-0", uid=uid,
                                          reason="Unschedulable", message="x")) == "applied"
    assert core.read_namespaced_pod("p-0", ns).status.nominated_node_name == nodes[1]


def test_pod_condition_of_a_bound_gone_or_other_pod(env, nodes):
    api, core, custom, act, ns = env
    pod = make_pod(core, ns, "p-0")
    act.apply(o.BindPod(job=key(ns), seq=1, name="p-0", uid=pod.metadata.uid, node=nodes[0]))
    late = o.UpdatePodCondition(job=key(ns), seq=2, time=T1, name="p-0", uid=pod.metadata.uid,
                                reason="Unschedulable", message="late")
    assert act.apply(late) == "dropped"  # bound meanwhile
    assert conditions(core, ns, "p-0")["PodScheduled"].status == "True"
    assert act.apply(o.UpdatePodCondition(job=key(ns), seq=3, name="gone", reason="Unschedulable")) == "done"
    make_pod(core, ns, "p-1")
    assert act.apply(o.UpdatePodCondition(job=key(ns), seq=4, name="p-1", uid="older", reason="Unschedulable")) == "done"
    assert "PodScheduled" not in conditions(core, ns, "p-1")


# ------------------------------------------------------------------ PodGroups and Queues


def test_podgroup_status_is_replaced_and_its_spec_kept(env):
    api, core, custom, act, ns = env
    custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": {"name": "pg"},
        "spec": {"minMember": 3, "queue": "default"}})
    custom.patch_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "pg",
                                          {"status": {"phase": "Running", "running": 3, "succeeded": 1}})
    cond = {"type": "Scheduled", "status": "True", "transitionID": "s-1", "lastTransitionTime": T1,
            "reason": "tasks in gang are ready to be scheduled"}
    cmd = o.UpdatePodGroupStatus(job=key(ns, "pg"), seq=1, name="pg",  # a PodGroup of no vcjob: its own key
                                 status={"phase": "Inqueue", "conditions": [cond], "running": 1})
    assert act.apply(cmd) == "applied"
    got = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "pg")
    assert got["status"] == {"phase": "Inqueue", "conditions": [cond], "running": 1}  # succeeded: gone
    assert got["spec"] == {"minMember": 3, "queue": "default"}
    assert act.apply(cmd) == "applied"  # redelivered: the same status again
    assert custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, "pg")["status"] == got["status"]
    assert act.apply(o.UpdatePodGroupStatus(job=key(ns), seq=2, name="gone", status={"phase": "Pending"})) == "done"


@pytest.fixture
def queue_name(k8s):
    return f"act-q-{uuid.uuid4().hex[:8]}"


def _queue(custom, name: str) -> dict:
    return custom.get_cluster_custom_object(PG_GROUP, PG_VERSION, "queues", name)


def _spec(custom, name: str) -> dict:
    """The queue's spec without what the CRD defaults (dequeueStrategy)."""
    spec = _queue(custom, name)["spec"]
    assert spec.pop("dequeueStrategy") == "traverse"
    return spec


def test_create_queue_once(env, queue_name):
    api, core, custom, act, ns = env
    cmd = o.CreateQueue(job=f"_/{queue_name}", seq=1, queue=queue_name, weight=1, reclaimable=False)
    assert act.apply(cmd) == "applied"
    assert act.apply(cmd) == "done"
    assert _spec(custom, queue_name) == {"weight": 1, "reclaimable": False}
    child = o.CreateQueue(job=f"_/{queue_name}-c", seq=2, queue=f"{queue_name}-c", weight=2, parent=queue_name)
    assert act.apply(child) == "applied"
    assert _spec(custom, f"{queue_name}-c") == {"weight": 2, "reclaimable": True, "parent": queue_name}


def test_queue_status_writes_only_the_fields_given(env, queue_name):
    api, core, custom, act, ns = env
    job = f"_/{queue_name}"
    act.apply(o.CreateQueue(job=job, seq=1, queue=queue_name))
    assert "status" not in _queue(custom, queue_name)
    assert act.apply(o.UpdateQueueStatus(job=job, seq=2, queue=queue_name, state="Open")) == "applied"
    assert _queue(custom, queue_name)["status"] == {"state": "Open"}
    alloc = o.UpdateQueueStatus(job=job, seq=3, queue=queue_name, allocated={"cpu": "2", "memory": "4Gi", "pods": "2"})
    assert act.apply(alloc) == "applied"
    counts = o.UpdateQueueStatus(job=job, seq=4, queue=queue_name, counts={"pending": 1, "running": 2, "inqueue": 0})
    assert act.apply(counts) == "applied"
    assert act.apply(counts) == "applied"  # redelivered: the same fields again
    q = _queue(custom, queue_name)
    assert q["status"] == {"state": "Open", "allocated": {"cpu": "2", "memory": "4Gi", "pods": "2"},
                           "pending": 1, "running": 2, "inqueue": 0}
    # allocated is replaced whole: a resource that drops out goes; the rest stays.
    assert act.apply(o.UpdateQueueStatus(job=job, seq=5, queue=queue_name, allocated={"cpu": "1"})) == "applied"
    assert act.apply(o.UpdateQueueStatus(job=job, seq=6, queue=queue_name, state="Closed")) == "applied"
    q = _queue(custom, queue_name)
    assert q["status"] == {"state": "Closed", "allocated": {"cpu": "1"}, "pending": 1, "running": 2, "inqueue": 0}
    assert _spec(custom, queue_name) == {"weight": 1, "reclaimable": True}
    bad = o.UpdateQueueStatus(job=job, seq=7, queue=queue_name, state="Open", counts={"waiting": 1})
    assert act.apply(bad) == "dropped"  # a malformed command: retrying would not help
    assert _queue(custom, queue_name)["status"]["state"] == "Closed"
    assert act.apply(o.UpdateQueueStatus(job="_/nope", seq=8, queue=f"{queue_name}-nope", state="Open")) == "done"


# ------------------------------------------------------------------ DeleteJob


def test_delete_job_with_a_uid_precondition(env):
    api, core, custom, act, ns = env
    seed = yaml.safe_load(open("examples/resnet-dist-train.yaml").read())
    seed["metadata"]["namespace"] = ns
    job = custom.create_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, mutate_job(seed))
    name = job["metadata"]["name"]
    assert act.apply(o.DeleteJob(job=key(ns, name), seq=1, uid="an-older-one")) == "done"
    assert custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)["metadata"]["uid"] == \
        job["metadata"]["uid"]
    cmd = o.DeleteJob(job=key(ns, name), seq=2, uid=job["metadata"]["uid"])
    assert act.apply(cmd) == "applied"
    # Foreground propagation, as Volcano's collector: the job waits for its dependents under the
    # `foregroundDeletion` finalizer. The test server has no garbage collector (no
    # kube-controller-manager), so the test finishes its work by removing the finalizer.
    deleting = custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)["metadata"]
    assert deleting.get("deletionTimestamp")
    assert "foregroundDeletion" in deleting.get("finalizers", [])
    custom.patch_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as err:
        custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)
    assert err.value.status == 404
    assert act.apply(cmd) == "done"


# ------------------------------------------------------------------ events


def _events(core, ns: str) -> list:
    return sorted(core.list_namespaced_event(ns).items, key=lambda e: (e.reason, e.message))


def test_events_on_a_podgroup_a_pod_and_a_queue(env, queue_name):
    api, core, custom, act, ns = env
    pg = custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, {
        "apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "PodGroup", "metadata": {"name": "pg"},
        "spec": {"minMember": 1}})
    pod = make_pod(core, ns, "p-0")
    on_pg = o.RecordEvent(job=key(ns, "pg"), seq=5, time=T1, event_type="Warning", reason="Unschedulable",  # its own key
                          message="1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable",
                          kind="PodGroup", name="pg", component="vc-scheduler")
    on_pod = o.RecordEvent(job=key(ns), seq=5, time=T1, event_type="Warning", reason="FailedScheduling",
                           message="all nodes are unavailable", kind="Pod", name="p-0", component="vc-scheduler")
    for index, cmd in enumerate((on_pg, on_pod)):
        msg_id = f"sched:5:1:{index}"
        assert act.apply(cmd, index=index, msg_id=msg_id) == "applied"
        assert act.apply(cmd, index=index, msg_id=msg_id) == "done"  # redelivered: same name
    # The next session at the same cut records the event again.
    assert act.apply(on_pg, index=0, msg_id="sched:5:2:0") == "applied"
    events = _events(core, ns)
    assert [(e.reason, e.involved_object.kind, e.involved_object.name, e.involved_object.uid, e.source.component,
             e.type) for e in events] == [
        ("FailedScheduling", "Pod", "p-0", pod.metadata.uid, "vc-scheduler", "Warning"),
        ("Unschedulable", "PodGroup", "pg", pg["metadata"]["uid"], "vc-scheduler", "Warning"),
        ("Unschedulable", "PodGroup", "pg", pg["metadata"]["uid"], "vc-scheduler", "Warning"),
    ]
    assert events[1].involved_object.api_version == f"{PG_GROUP}/{PG_VERSION}"
    assert events[1].involved_object.namespace == ns and events[1].metadata.name.startswith("pg.")

    act.apply(o.CreateQueue(job=f"_/{queue_name}", seq=6, queue=queue_name))
    on_queue = o.RecordEvent(job=f"_/{queue_name}", seq=7, reason="OpenQueue", message="Open queue succeed",
                             kind="Queue", name=queue_name)
    assert act.apply(on_queue, index=0, msg_id="7:0") == "applied"
    assert act.apply(on_queue, index=0, msg_id="7:0") == "done"
    mine = [e for e in core.list_namespaced_event("default").items if e.involved_object.name == queue_name]
    assert len(mine) == 1
    ev = mine[0]
    assert (ev.involved_object.kind, ev.involved_object.namespace, ev.source.component) == (
        "Queue", None, "vc-controller-manager")
    assert ev.involved_object.uid == _queue(custom, queue_name)["metadata"]["uid"]


def test_events_on_gone_objects_are_dropped_and_cluster_keys_take_only_cluster_commands(env, nodes):
    api, core, custom, act, ns = env
    for cmd in (
        o.RecordEvent(job=key(ns), seq=1, reason="Scheduled", message="m", kind="PodGroup", name="gone"),
        o.RecordEvent(job="_/no-such-queue-x", seq=1, reason="OpenQueue", message="m", kind="Queue",
                      name="no-such-queue-x"),
        o.RecordEvent(job="_/scheduler", seq=1, reason="x", message="m"),  # a vcjob has a namespace
        o.BindPod(job="_/scheduler", seq=1, name="p", node=nodes[0]),
        o.DeleteJob(job="_/x", seq=1),
    ):
        assert act.apply(cmd) == "dropped", cmd
    assert core.list_namespaced_event(ns).items == []
    # but a pod's Scheduled event is written against the reference, as the recorder writes it (the API server
    # takes an Event whose involvedObject is gone; tests/test_api_refusals.py)
    gone = o.RecordEvent(job=key(ns), seq=1, reason="Scheduled", message="m", kind="Pod", name="gone")
    assert act.apply(gone) == "applied"
    assert [e.involved_object.name for e in core.list_namespaced_event(ns).items] == ["gone"]
