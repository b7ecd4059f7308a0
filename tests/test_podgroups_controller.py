"""Volcano's podgroup controller as a fold (statemachines/podgroups/): which pods get a PodGroup, and which.

Table-driven from the cases of Volcano's `pkg/controllers/podgroup/pg_controller_test.go`
(TestAddPodGroup, Test_pgcontroller_buildPodGroupFromPod with owner annotations not inherited,
TestBuildPodGroupFromPodWithNetworkTopology, TestNoPodGroupCreatedForWhenKubeGroupNameAnnotationExists),
restated on the engine: watch records in, commands out.
"""

from __future__ import annotations

from typing import Any

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.records import decode
from tests.builders import record

NS = "ns1"
POD_UID = "7a1c0000-0000-4000-8000-000000000001"
RS_UID = "7a1c0000-0000-4000-8000-0000000000aa"
RS_REF = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": RS_UID,
          "controller": True, "blockOwnerDeletion": True}
ONE_CPU = {"count/pods": "1", "cpu": "1", "pods": "1", "requests.cpu": "1"}


def plain_pod(name: str = "p", uid: str = POD_UID, *, scheduler: str = "volcano", owners: list | None = None,
              annotations: dict | None = None, labels: dict | None = None, priority_class: str = "",
              resources: dict | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "10",
                            "creationTimestamp": "2026-12-01T10:00:00Z"}
    given = {"ownerReferences": owners, "annotations": annotations, "labels": labels}
    meta.update({k: v for k, v in given.items() if v is not None})
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [
        {"name": "c", "image": "busybox", "resources": resources if resources is not None else {"requests": {"cpu": "1"}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def podgroup_record(rtype: str, name: str) -> bytes:
    return record(rtype, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "resourceVersion": "11"},
                          "spec": {"minMember": 1}, "status": {"phase": "Pending"}})


def run(records: list[bytes], **engine_options: Any) -> list[o.Output]:
    engine = Engine(**engine_options)
    out: list[o.Output] = []
    for seq, data in enumerate(records, 1):
        out += [x for x in engine.apply(seq, decode(data))
                if isinstance(x, (o.CreateWorkloadPodGroup, o.AnnotatePodGroupName))]
    return out


def created(pod: dict[str, Any]) -> dict[str, Any]:
    """The one PodGroup manifest decided for one pod ADDED (and its annotation command)."""
    out = run([record("ADDED", pod)])
    assert [type(x) for x in out] == [o.CreateWorkloadPodGroup, o.AnnotatePodGroupName], out
    create, annotate = out
    assert (annotate.name, annotate.uid, annotate.podgroup) == (pod["metadata"]["name"], pod["metadata"]["uid"], create.name)
    assert create.job == annotate.job == f"{NS}/{create.name}"
    assert (create.pod, create.pod_uid) == (pod["metadata"]["name"], pod["metadata"]["uid"])
    assert create.podgroup["metadata"]["name"] == create.name
    return create.podgroup


POD_REF = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": POD_UID, "controller": True, "blockOwnerDeletion": True}

# (case, pod, the PodGroup manifest's metadata and spec)
MANIFESTS = [
    ("owned by a ReplicaSet, with a priorityClassName: one PodGroup for the owner, owned by it",
     plain_pod(owners=[RS_REF], priority_class="high-priority"),
     {"name": f"podgroup-{RS_UID}", "namespace": NS, "ownerReferences": [RS_REF]},
     {"minMember": 1, "minResources": ONE_CPU, "priorityClassName": "high-priority"}),
    ("owned by a StatefulSet, its reference as the pod has it (no blockOwnerDeletion)",
     plain_pod(owners=[{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "sts-uid", "controller": True}]),
     {"name": "podgroup-sts-uid", "namespace": NS,
      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "sts-uid", "controller": True}]},
     {"minMember": 1, "minResources": ONE_CPU}),
    ("no ownerReferences, no priorityClassName: the pod's own PodGroup, owned by the pod",
     plain_pod(),
     {"name": f"podgroup-{POD_UID}", "namespace": NS, "ownerReferences": [POD_REF]},
     {"minMember": 1, "minResources": ONE_CPU}),
    ("ownerReferences but none a controller: the pod's own PodGroup",
     plain_pod(owners=[{**RS_REF, "controller": False}]),
     {"name": f"podgroup-{POD_UID}", "namespace": NS, "ownerReferences": [POD_REF]},
     {"minMember": 1, "minResources": ONE_CPU}),
    ("queue from the annotation; preemptable and cooldown copied from annotations and labels",
     plain_pod(annotations={"scheduling.volcano.sh/queue-name": "test-queue", "volcano.sh/preemptable": "true",
                            "volcano.sh/revocable-zone": "*", "other": "x"},
               labels={"volcano.sh/cooldown-time": "60s", "app": "web"}),
     {"name": f"podgroup-{POD_UID}", "namespace": NS, "ownerReferences": [POD_REF],
      "annotations": {"volcano.sh/preemptable": "true", "volcano.sh/revocable-zone": "*"},
      "labels": {"volcano.sh/cooldown-time": "60s"}},
     {"minMember": 1, "minResources": ONE_CPU, "queue": "test-queue"}),
    ("jdb-min-available wins over jdb-max-unavailable",
     plain_pod(annotations={"volcano.sh/jdb-min-available": "2", "volcano.sh/jdb-max-unavailable": "1"}),
     {"name": f"podgroup-{POD_UID}", "namespace": NS, "ownerReferences": [POD_REF],
      "annotations": {"volcano.sh/jdb-min-available": "2"}},
     {"minMember": 1, "minResources": ONE_CPU}),
    ("jdb-max-unavailable alone is copied",
     plain_pod(annotations={"volcano.sh/jdb-max-unavailable": "30%"}),
     {"name": f"podgroup-{POD_UID}", "namespace": NS, "ownerReferences": [POD_REF],
      "annotations": {"volcano.sh/jdb-max-unavailable": "30%"}},
     {"minMember": 1, "minResources": ONE_CPU}),
    ("minResources: the pod's quota usage, requests and limits",
     plain_pod(resources={"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": "1"},
                          "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}),
     {"name": f"podgroup-{POD_UID}", "namespace": NS, "ownerReferences": [POD_REF]},
     {"minMember": 1, "minResources": {
         "count/pods": "1", "cpu": "500m", "limits.cpu": "1", "limits.memory": "1Gi", "memory": "1Gi",
         "nvidia.com/gpu": "1", "pods": "1", "requests.cpu": "500m", "requests.memory": "1Gi",
         "requests.nvidia.com/gpu": "1"}}),
]


@pytest.mark.parametrize("case,pod,metadata,spec", MANIFESTS, ids=[m[0] for m in MANIFESTS])
def test_the_podgroup_is_built_as_volcanos_pg_controller_builds_it(case, pod, metadata, spec):
    assert created(pod) == {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                            "metadata": metadata, "spec": spec, "status": {"phase": "Pending"}}


# (case, pod annotations, spec.networkTopology or None)
TOPOLOGIES = [
    ("hard mode with a tier", {"volcano.sh/network-topology-mode": "hard",
                               "volcano.sh/network-topology-highest-tier": "2"}, {"mode": "hard", "highestTierAllowed": 2}),
    ("soft mode only", {"volcano.sh/network-topology-mode": "soft"}, {"mode": "soft"}),
    ("mode in capitals", {"volcano.sh/network-topology-mode": "SOFT"}, {"mode": "soft"}),
    ("a tier only: hard", {"volcano.sh/network-topology-highest-tier": "1"}, {"mode": "hard", "highestTierAllowed": 1}),
    ("an invalid mode: hard", {"volcano.sh/network-topology-mode": "invalid"}, {"mode": "hard"}),
    ("a tier that is no number is left out", {"volcano.sh/network-topology-highest-tier": " 3"}, {"mode": "hard"}),
    ("no annotation: no networkTopology", {}, None),
]


@pytest.mark.parametrize("case,annotations,topology", TOPOLOGIES, ids=[t[0] for t in TOPOLOGIES])
def test_network_topology_comes_from_the_pods_annotations(case, annotations, topology):
    assert created(plain_pod(annotations=annotations))["spec"].get("networkTopology") == topology


# (case, records, engine options, the commands decided as (type, job key, pod))
PG_RS = f"podgroup-{RS_UID}"
FOLDS = [
    ("a pod that has the group-name annotation gets nothing",
     [record("ADDED", plain_pod(annotations={"scheduling.k8s.io/group-name": "mine"}))], {}, []),
    ("a pod for another scheduler gets nothing",
     [record("ADDED", plain_pod(scheduler="default-scheduler"))], {}, []),
    ("a pod first seen MODIFIED gets nothing (Volcano handles pods when they are added)",
     [record("MODIFIED", plain_pod())], {}, []),
    ("another scheduler name the controller is configured with",
     [record("ADDED", plain_pod(scheduler="volcano2"))], {"scheduler_names": ("volcano", "volcano2")},
     [("CreateWorkloadPodGroup", f"{NS}/podgroup-{POD_UID}", "p"), ("AnnotatePodGroupName", f"{NS}/podgroup-{POD_UID}", "p")]),
    ("three pods of one ReplicaSet: one PodGroup, three annotations",
     [record("ADDED", plain_pod(f"web-{i}", f"{POD_UID[:-1]}{i}", owners=[RS_REF])) for i in range(3)], {},
     [("CreateWorkloadPodGroup", f"{NS}/{PG_RS}", "web-0")] + [("AnnotatePodGroupName", f"{NS}/{PG_RS}", f"web-{i}") for i in range(3)]),
    ("a PodGroup the log already shows is not created again",
     [podgroup_record("ADDED", PG_RS), record("ADDED", plain_pod(owners=[RS_REF]))], {},
     [("AnnotatePodGroupName", f"{NS}/{PG_RS}", "p")]),
    ("after its DELETED the PodGroup is created again for the next pod",
     [record("ADDED", plain_pod("a", f"{POD_UID[:-1]}a", owners=[RS_REF])), podgroup_record("ADDED", PG_RS),
      podgroup_record("DELETED", PG_RS), record("ADDED", plain_pod("b", f"{POD_UID[:-1]}b", owners=[RS_REF]))], {},
     [("CreateWorkloadPodGroup", f"{NS}/{PG_RS}", "a"), ("AnnotatePodGroupName", f"{NS}/{PG_RS}", "a"),
      ("CreateWorkloadPodGroup", f"{NS}/{PG_RS}", "b"), ("AnnotatePodGroupName", f"{NS}/{PG_RS}", "b")]),
    ("a pod with no uid to name its PodGroup by gets nothing",
     [record("ADDED", plain_pod(uid=""))], {}, []),
]


@pytest.mark.parametrize("case,records,options,expected", FOLDS, ids=[f[0] for f in FOLDS])
def test_which_pods_get_a_podgroup(case, records, options, expected):
    out = run(records, **options)
    assert [(type(x).__name__, x.job, x.pod if isinstance(x, o.CreateWorkloadPodGroup) else x.name) for x in out] == expected


def test_the_commands_are_stamped_with_the_record_and_decode_back_typed():
    out = run([record("ADDED", plain_pod(owners=[RS_REF]), time="2026-12-01T10:00:05Z")])
    assert [(x.seq, x.time) for x in out] == [(1, "2026-12-01T10:00:05Z")] * 2
    for x in out:
        assert o.command_decoder.decode(o.encoder.encode(x)) == x
