"""The podgroup controller's commands on a real API server (vcbus/k8s/workload_podgroups.py).

The engine decides from the pods as the API server returns them (no controller-manager runs on
envtest: the ReplicaSet's pod is created here with the ownerReference its controller would set);
the actuator creates the PodGroup and annotates the pods, idempotent under redelivery, and
refuses what is not a pod's own PodGroup.
"""

from __future__ import annotations

import msgspec
import pytest
from kubernetes import client

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.records import decode
from vcbus.k8s import rawcalls
from vcbus.k8s.actuator import PG_GROUP, PG_PLURAL, PG_VERSION, Actuator

pytestmark = pytest.mark.k8s
GROUP_NAME = "scheduling.k8s.io/group-name"


def pod_manifest(name: str, *, owner: dict | None = None, scheduler: str = "volcano") -> dict:
    meta: dict = {"name": name, "labels": {"app": "web"}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}]}}


def live(api, ns: str, name: str) -> dict:
    pod = rawcalls.read(api, rawcalls.pod_path(ns, name))
    assert pod is not None
    return pod


def decided(pods: list[dict]) -> list[o.Output]:
    engine = Engine()
    out: list[o.Output] = []
    for seq, pod in enumerate(pods, 1):
        out += engine.apply(seq, decode(msgspec.json.encode({"type": "ADDED", "object": pod})))
    return [x for x in out if isinstance(x, (o.CreateWorkloadPodGroup, o.AnnotatePodGroupName))]


@pytest.fixture
def cluster(k8s, k8s_namespace):
    api = k8s.api_client()
    return api, client.CoreV1Api(api), client.CustomObjectsApi(api), Actuator(api), k8s_namespace


def test_a_replicasets_pods_get_one_podgroup_owned_by_it_and_the_annotation(cluster):
    api, core, custom, act, ns = cluster
    rs = client.AppsV1Api(api).create_namespaced_replica_set(ns, {
        "metadata": {"name": "web-5d8f"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_manifest("x")["spec"]}}})
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.metadata.name, "uid": rs.metadata.uid,
             "controller": True, "blockOwnerDeletion": True}
    for i in range(2):
        core.create_namespaced_pod(ns, pod_manifest(f"web-5d8f-{i}", owner=owner))
    cmds = decided([live(api, ns, f"web-5d8f-{i}") for i in range(2)])
    assert [type(c) for c in cmds] == [o.CreateWorkloadPodGroup, o.AnnotatePodGroupName, o.AnnotatePodGroupName]
    assert [act.apply(c) for c in cmds] == ["applied"] * 3
    assert [act.apply(c) for c in cmds] == ["done"] * 3  # redelivered
    pg_name = f"podgroup-{rs.metadata.uid}"
    pg = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, pg_name)
    assert pg["metadata"]["ownerReferences"] == [owner]
    assert pg["spec"] == {"minMember": 1, "queue": "default", "minResources": {
        "count/pods": "1", "cpu": "250m", "memory": "64Mi", "pods": "1", "requests.cpu": "250m",
        "requests.memory": "64Mi"}}
    assert pg["status"] == {"phase": "Pending"}
    for i in range(2):
        annotations = core.read_namespaced_pod(f"web-5d8f-{i}", ns).metadata.annotations
        assert annotations == {GROUP_NAME: pg_name}


def test_a_plain_pods_podgroup_is_owned_by_the_pod_and_a_new_pod_of_the_name_is_left_alone(cluster):
    api, core, custom, act, ns = cluster
    core.create_namespaced_pod(ns, pod_manifest("solo"))
    old = live(api, ns, "solo")
    create, annotate = decided([old])
    core.delete_namespaced_pod("solo", ns, grace_period_seconds=0)
    core.create_namespaced_pod(ns, pod_manifest("solo"))  # another incarnation of the name
    assert act.apply(create) == "dropped"  # its pod is gone
    assert act.apply(annotate) == "done"
    assert core.read_namespaced_pod("solo", ns).metadata.annotations is None
    new = live(api, ns, "solo")
    create, annotate = decided([new])
    assert [act.apply(create), act.apply(annotate)] == ["applied", "applied"]
    pg = custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, f"podgroup-{new['metadata']['uid']}")
    assert pg["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "solo",
                                                  "uid": new["metadata"]["uid"], "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert core.read_namespaced_pod("solo", ns).metadata.annotations == {GROUP_NAME: pg["metadata"]["name"]}
    # the patch's own uid precondition: the API server refuses it for another incarnation
    with pytest.raises(client.ApiException) as err:
        rawcalls.call(api, "PATCH", rawcalls.pod_path(ns, "solo"), content_type="application/strategic-merge-patch+json",
                      body={"metadata": {"uid": old["metadata"]["uid"], "annotations": {"x": "y"}}})
    assert err.value.status == 422 and "field is immutable" in err.value.body
    assert core.read_namespaced_pod("solo", ns).metadata.annotations == {GROUP_NAME: pg["metadata"]["name"]}


def test_an_annotated_pod_is_left_as_it_is(cluster):
    api, core, custom, act, ns = cluster
    core.create_namespaced_pod(ns, pod_manifest("p"))
    _, annotate = decided([live(api, ns, "p")])
    core.patch_namespaced_pod("p", ns, {"metadata": {"annotations": {GROUP_NAME: "someone-elses"}}})
    assert act.apply(annotate) == "done"
    assert core.read_namespaced_pod("p", ns).metadata.annotations == {GROUP_NAME: "someone-elses"}


def test_what_is_not_a_pods_own_podgroup_is_refused(cluster):
    api, core, custom, act, ns = cluster
    core.create_namespaced_pod(ns, pod_manifest("p"))
    core.create_namespaced_pod(ns, pod_manifest("other", scheduler="default-scheduler"))
    pod, other = live(api, ns, "p"), live(api, ns, "other")
    create, annotate = decided([pod])
    manifest = create.podgroup
    key = create.job
    foreign = {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": other["metadata"]["uid"], "controller": True}
    refused = [
        # owned by another pod than the one it is for
        o.CreateWorkloadPodGroup(job=key, seq=1, name=create.name, pod="p", pod_uid=create.pod_uid,
                                 podgroup={**manifest, "metadata": {**manifest["metadata"], "ownerReferences": [foreign]}}),
        # named after another uid than the pod's
        o.CreateWorkloadPodGroup(job=f"{ns}/podgroup-x", seq=1, name="podgroup-x", pod="p", pod_uid=create.pod_uid,
                                 podgroup={**manifest, "metadata": {**manifest["metadata"], "name": "podgroup-x"}}),
        # another kind
        o.CreateWorkloadPodGroup(job=key, seq=1, name=create.name, pod="p", pod_uid=create.pod_uid,
                                 podgroup={**manifest, "kind": "ConfigMap"}),
        # a pod of another scheduler
        o.CreateWorkloadPodGroup(job=f"{ns}/podgroup-{other['metadata']['uid']}", seq=1,
                                 name=f"podgroup-{other['metadata']['uid']}", pod="other",
                                 pod_uid=other["metadata"]["uid"], podgroup={**manifest, "metadata": {
                                     **manifest["metadata"], "name": f"podgroup-{other['metadata']['uid']}",
                                     "ownerReferences": [foreign]}}),
        o.AnnotatePodGroupName(job=f"{ns}/podgroup-{other['metadata']['uid']}", seq=1, name="other",
                               uid=other["metadata"]["uid"], podgroup=f"podgroup-{other['metadata']['uid']}"),
        # a PodGroup name other than the key's
        o.AnnotatePodGroupName(job=key, seq=1, name="p", uid=annotate.uid, podgroup="podgroup-x"),
    ]
    assert [act.apply(c) for c in refused] == ["refused"] * len(refused)
    assert act.refused == len(refused)
    assert custom.list_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL)["items"] == []
    assert all(not p.metadata.annotations for p in core.list_namespaced_pod(ns).items)


def test_a_pod_replaced_between_the_read_and_the_patch_is_done(cluster, monkeypatch):
    """A mock, for a fault the API server cannot be made to produce on cue: the pod is read, then
    replaced by another of its name before the patch. `_pod` answers the stale read once."""
    api, core, custom, act, ns = cluster
    core.create_namespaced_pod(ns, pod_manifest("r"))
    _, annotate = decided([live(api, ns, "r")])
    stale = act._pod(ns, "r", annotate.uid)
    core.delete_namespaced_pod("r", ns, grace_period_seconds=0)
    core.create_namespaced_pod(ns, pod_manifest("r"))
    reads = iter([stale])
    real = act._pod
    monkeypatch.setattr(act, "_pod", lambda *a: next(reads, None) or real(*a))
    assert act.apply(annotate) == "done"
    assert core.read_namespaced_pod("r", ns).metadata.annotations is None


def test_a_replicaset_scaled_to_zero_has_its_podgroup_deleted(cluster):
    """Volcano's `addReplicaSet` with `spec.replicas == 0` deletes `podgroup-<uid>`; only that owner's."""
    api, core, custom, act, ns = cluster
    apps = client.AppsV1Api(api)
    rs = apps.create_namespaced_replica_set(ns, {
        "metadata": {"name": "old-5d8f"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod_manifest("x")["spec"]}}})
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.metadata.name, "uid": rs.metadata.uid,
             "controller": True, "blockOwnerDeletion": True}
    core.create_namespaced_pod(ns, pod_manifest("old-5d8f-0", owner=owner))
    engine, seqs = Engine(), iter(range(1, 100))

    def fold(obj: dict, rtype: str = "ADDED") -> list[o.Output]:
        out = engine.apply(next(seqs), decode(msgspec.json.encode({"type": rtype, "object": obj})))
        return [x for x in out if isinstance(x, (o.CreateWorkloadPodGroup, o.AnnotatePodGroupName,
                                                 o.DeleteWorkloadPodGroup))]

    rs_path = f"/apis/apps/v1/namespaces/{ns}/replicasets/old-5d8f"
    assert fold(rawcalls.read(api, rs_path)) == []
    assert [act.apply(c) for c in fold(live(api, ns, "old-5d8f-0"))] == ["applied", "applied"]
    pg_name = f"podgroup-{rs.metadata.uid}"
    apps.patch_namespaced_replica_set("old-5d8f", ns, {"spec": {"replicas": 0}})
    deletes = fold(rawcalls.read(api, rs_path), "MODIFIED")
    assert [(type(c), c.job, c.owner_uid) for c in deletes] == [(o.DeleteWorkloadPodGroup, f"{ns}/{pg_name}", rs.metadata.uid)]
    forged = o.DeleteWorkloadPodGroup(job=f"{ns}/{pg_name}", seq=9, name=pg_name, owner_uid="someone-else")
    assert act.apply(forged) == "refused"  # names another owner's PodGroup
    assert act.apply(deletes[0]) == "applied"
    with pytest.raises(client.ApiException) as err:
        custom.get_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, pg_name)
    assert err.value.status == 404
    assert act.apply(deletes[0]) == "done"  # redelivered: NotFound
