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
from statemachines.model.records import Observed, decode
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


# ---------------------------------------------------------------- the owners' annotations


def replica_set(rtype: str = "ADDED", name: str = "web-5d8f", uid: str = RS_UID, annotations: dict | None = None,
                kind: str = "ReplicaSet", replicas: int = 3) -> bytes:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "9",
                            "creationTimestamp": "2026-12-01T09:59:00Z"}
    if annotations is not None:
        meta["annotations"] = annotations
    return record(rtype, {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                          "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}}})


def created_after(owners: list[bytes], pod: dict[str, Any]) -> dict[str, Any]:
    out = run([*owners, record("ADDED", pod)])
    assert [type(x) for x in out] == [o.CreateWorkloadPodGroup, o.AnnotatePodGroupName], out
    return out[0].podgroup


def cpus(n: int) -> dict[str, str]:
    return {"count/pods": str(n), "cpu": str(n), "pods": str(n), "requests.cpu": str(n)}


# (case, owner annotations, pod annotations, PodGroup annotations, minMember) - Volcano's
# Test_pgcontroller_buildPodGroupFromPod scenarios 2 and 3 and TestAddPodGroup's "pod owners with
# group-min-member annotation", restated
INHERITED = [
    ("min-member 3, a volcano.sh/ key inherited, the pod's jdb-min-available over the owner's",
     {"scheduling.volcano.sh/group-min-member": "3", "volcano.sh/custom-key": "custom-value",
      "volcano.sh/jdb-min-available": "2"},
     {"volcano.sh/jdb-min-available": "1"},
     {"volcano.sh/custom-key": "custom-value", "volcano.sh/jdb-min-available": "1"}, 3),
    ("the owner's jdb-max-unavailable inherited",
     {"scheduling.volcano.sh/group-min-member": "3", "volcano.sh/jdb-max-unavailable": "20%"}, None,
     {"volcano.sh/jdb-max-unavailable": "20%"}, 3),
    ("min-member 2; keys without the volcano.sh/ prefix (the owner's queue-name too) are not copied",
     {"scheduling.volcano.sh/group-min-member": "2", "scheduling.volcano.sh/queue-name": "q1", "app": "x",
      "volcano.sh/preemptable": "false"},
     {"volcano.sh/preemptable": "true"}, {"volcano.sh/preemptable": "true"}, 2),
    ("min-member 0 is taken: minMember 0, minResources empty",
     {"scheduling.volcano.sh/group-min-member": "0"}, None, None, 0),
    ("a signed number is a number to ParseInt", {"scheduling.volcano.sh/group-min-member": "+4"}, None, None, 4),
    ("negative: 1", {"scheduling.volcano.sh/group-min-member": "-2"}, None, None, 1),
    ("not a number: 1", {"scheduling.volcano.sh/group-min-member": "three"}, None, None, 1),
    ("spaces: 1", {"scheduling.volcano.sh/group-min-member": " 3"}, None, None, 1),
    ("beyond int32: 1", {"scheduling.volcano.sh/group-min-member": "2147483648"}, None, None, 1),
    ("no annotations: 1", None, None, None, 1),
]


@pytest.mark.parametrize("case,owner,pod_notes,notes,members", INHERITED, ids=[c[0] for c in INHERITED])
def test_the_owners_annotations_are_read_as_volcano_reads_them(case, owner, pod_notes, notes, members):
    pg = created_after([replica_set(annotations=owner)], plain_pod(owners=[RS_REF], annotations=pod_notes))
    assert pg["metadata"].get("annotations") == notes
    assert pg["spec"]["minMember"] == members
    assert pg["spec"]["minResources"] == (cpus(members) if members else {})
    assert "queue" not in pg["spec"]


def test_every_owner_kind_is_read_and_the_first_owner_wins_a_key():
    sts_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "sts-uid", "controller": True}
    ds_ref = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "ds-uid"}
    owners = [replica_set(kind="StatefulSet", name="db", uid="sts-uid",
                          annotations={"scheduling.volcano.sh/group-min-member": "2", "volcano.sh/a": "sts"}),
              replica_set(kind="DaemonSet", name="agent", uid="ds-uid",
                          annotations={"scheduling.volcano.sh/group-min-member": "5", "volcano.sh/a": "ds",
                                       "volcano.sh/b": "ds"})]
    pg = created_after(owners, plain_pod(owners=[sts_ref, ds_ref]))
    assert pg["spec"]["minMember"] == 2
    assert pg["metadata"]["annotations"] == {"volcano.sh/a": "sts", "volcano.sh/b": "ds"}
    assert pg["metadata"]["name"] == "podgroup-sts-uid"


def test_an_owner_of_another_namespace_or_name_is_not_read():
    other = record("ADDED", {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {
        "name": "web-5d8f", "namespace": "elsewhere", "uid": "x", "annotations": {"scheduling.volcano.sh/group-min-member": "3"}}})
    out = run([other, replica_set(name="web-other", uid="y", annotations={"scheduling.volcano.sh/group-min-member": "3"}),
               replica_set(annotations={}), record("ADDED", plain_pod(owners=[RS_REF]))])
    assert out[0].podgroup["spec"]["minMember"] == 1


def test_a_pod_before_its_owner_waits_for_the_owners_record():
    """The watches are apart: a pod can come before its ReplicaSet, which Volcano's Get would have found."""
    records = [replica_set(name="web-other", uid="y"),  # the log carries ReplicaSets
               record("ADDED", plain_pod("web-0", f"{POD_UID[:-1]}0", owners=[RS_REF]), time="2026-12-01T10:00:01Z"),
               record("ADDED", plain_pod("web-1", f"{POD_UID[:-1]}1", owners=[RS_REF]), time="2026-12-01T10:00:01Z"),
               replica_set(annotations={"scheduling.volcano.sh/group-min-member": "3"})]
    engine = Engine()
    decided = [[type(x).__name__ for x in engine.apply(seq, decode(data))
                if isinstance(x, (o.CreateWorkloadPodGroup, o.AnnotatePodGroupName))]
               for seq, data in enumerate(records, 1)]
    assert decided == [[], [], [], ["CreateWorkloadPodGroup", "AnnotatePodGroupName", "AnnotatePodGroupName"]]
    out = run(records)
    assert out[0].podgroup["spec"]["minMember"] == 3 and out[0].seq == 4
    assert [x.name for x in out[1:]] == ["web-0", "web-1"]


def test_a_pod_whose_owner_is_deleted_is_handled_without_it():
    """Volcano's Get of a deleted owner fails: the PodGroup is built without its annotations."""
    records = [replica_set(name="web-other", uid="y"),
               record("ADDED", plain_pod(owners=[RS_REF])),
               replica_set("DELETED", annotations={"scheduling.volcano.sh/group-min-member": "3"})]
    out = run(records)
    assert [type(x) for x in out] == [o.CreateWorkloadPodGroup, o.AnnotatePodGroupName]
    assert out[0].podgroup["spec"]["minMember"] == 1
    later = run([*records, record("ADDED", plain_pod("q", f"{POD_UID[:-1]}q", owners=[RS_REF]))])
    assert [x.name for x in later if isinstance(x, o.AnnotatePodGroupName)] == ["p", "q"]


def test_a_log_without_owners_of_that_kind_does_not_wait():
    """A log recorded before vcbus watched ReplicaSets: Volcano's failed Get, no wait."""
    out = run([replica_set(kind="StatefulSet", name="db", uid="s"), record("ADDED", plain_pod(owners=[RS_REF]))])
    assert [type(x) for x in out] == [o.CreateWorkloadPodGroup, o.AnnotatePodGroupName]


def test_an_owners_annotations_changing_later_change_nothing():
    """Volcano updates a PodGroup only from a pod without the group-name annotation; every pod has it."""
    out = run([replica_set(annotations={"scheduling.volcano.sh/group-min-member": "2"}),
               record("ADDED", plain_pod(owners=[RS_REF])),
               replica_set("MODIFIED", annotations={"scheduling.volcano.sh/group-min-member": "3"}),
               record("ADDED", plain_pod("q", f"{POD_UID[:-1]}q", owners=[RS_REF]))])
    assert [type(x).__name__ for x in out] == ["CreateWorkloadPodGroup", "AnnotatePodGroupName", "AnnotatePodGroupName"]
    assert out[0].podgroup["spec"]["minMember"] == 2


def test_a_pod_deleted_while_it_waits_for_its_owner_gets_nothing():
    """Volcano's queued request for a pod that is gone finds no pod: no PodGroup, no annotation."""
    gone = plain_pod("web-0", f"{POD_UID[:-1]}0", owners=[RS_REF])
    out = run([replica_set(name="web-other", uid="y"), record("ADDED", gone),
               record("ADDED", plain_pod("web-1", f"{POD_UID[:-1]}1", owners=[RS_REF])), record("DELETED", gone),
               replica_set(annotations={"scheduling.volcano.sh/group-min-member": "2"})])
    assert [(type(x).__name__, x.pod if isinstance(x, o.CreateWorkloadPodGroup) else x.name) for x in out] == [
        ("CreateWorkloadPodGroup", "web-1"), ("AnnotatePodGroupName", "web-1")]


def deletes(records: list[bytes]) -> list[tuple[str, str, str]]:
    engine = Engine()
    return [(x.job, x.name, x.owner_uid) for seq, data in enumerate(records, 1)
            for x in engine.apply(seq, decode(data)) if isinstance(x, o.DeleteWorkloadPodGroup)]


STS_REF = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "sts-uid", "controller": True}
# (case, records, the DeleteWorkloadPodGroup decided) - Volcano's addReplicaSet / addStatefulSet
SCALED = [
    ("a ReplicaSet scaled to 0: its PodGroup deleted",
     [replica_set(), record("ADDED", plain_pod(owners=[RS_REF])), replica_set("MODIFIED", replicas=0)],
     [(f"{NS}/{PG_RS}", PG_RS, RS_UID)]),
    ("a StatefulSet scaled to 0 likewise",
     [replica_set(kind="StatefulSet", name="db", uid="sts-uid"), record("ADDED", plain_pod(owners=[STS_REF])),
      replica_set("MODIFIED", kind="StatefulSet", name="db", uid="sts-uid", replicas=0)],
     [(f"{NS}/podgroup-sts-uid", "podgroup-sts-uid", "sts-uid")]),
    ("a ReplicaSet at 0 with no PodGroup: nothing to delete",
     [replica_set(replicas=0), replica_set("MODIFIED", replicas=0)], []),
    ("its PodGroup already DELETED: nothing",
     [replica_set(), record("ADDED", plain_pod(owners=[RS_REF])), podgroup_record("ADDED", PG_RS),
      podgroup_record("DELETED", PG_RS), replica_set("MODIFIED", replicas=0)], []),
    ("a ReplicaSet deleted at 0 replicas: the garbage collector's, not a delete",
     [replica_set(), record("ADDED", plain_pod(owners=[RS_REF])), replica_set("DELETED", replicas=0)], []),
    ("a DaemonSet has no replicas: never",
     [replica_set(kind="DaemonSet", name="agent", uid="ds-uid"),
      record("ADDED", plain_pod(owners=[{**STS_REF, "kind": "DaemonSet", "name": "agent", "uid": "ds-uid"}])),
      record("MODIFIED", {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
          "name": "agent", "namespace": NS, "uid": "ds-uid"}, "spec": {"replicas": 0}})], []),
]


@pytest.mark.parametrize("case,records,expected", SCALED, ids=[c[0] for c in SCALED])
def test_an_owner_scaled_to_zero_has_its_podgroup_deleted(case, records, expected):
    assert deletes(records) == expected


def batch_job(rtype: str = "ADDED", name: str = "pi", uid: str = "bj-uid", annotations: dict | None = None) -> bytes:
    """A batch/v1 Job whose pods are for Volcano's scheduler (its kind is the vcjob's: told by apiVersion)."""
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid, "resourceVersion": "12",
                            "creationTimestamp": "2026-12-01T09:59:00Z", "annotations": annotations or {}}
    return record(rtype, {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                          "spec": {"parallelism": 2, "completions": 2, "backoffLimit": 6,
                                   "template": {"spec": {"schedulerName": "volcano", "restartPolicy": "Never",
                                                         "containers": [{"name": "c", "image": "x"}]}}},
                          "status": {"active": 2, "startTime": "2026-12-01T09:59:00Z",
                                     "conditions": [{"type": "Complete", "status": "True"}]}})


BJ_REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "pi", "uid": "bj-uid", "controller": True,
          "blockOwnerDeletion": True}


def test_a_batch_jobs_annotations_are_read_as_volcanos_case_job_reads_them():
    """getAnnotationsFromUpperRes, case "Job": a batch/v1 Job's group-min-member and volcano.sh/ keys, one
    PodGroup for the Job's pods (podgroup-<the Job's uid>), the Job's pods waiting for its record."""
    notes = {"scheduling.volcano.sh/group-min-member": "2", "volcano.sh/custom-key": "v"}
    decoded = decode(batch_job(annotations=notes))
    assert isinstance(decoded, Observed) and type(decoded.object).__name__ == "BatchJob"
    pg = created_after([batch_job(annotations=notes)], plain_pod("pi-abcde", owners=[BJ_REF]))
    assert (pg["metadata"]["name"], pg["spec"]["minMember"]) == ("podgroup-bj-uid", 2)
    assert pg["metadata"]["annotations"] == {"volcano.sh/custom-key": "v"}
    assert pg["spec"]["minResources"] == cpus(2)
    # a log that carries batch Jobs: a Job's pod before its Job's record waits for it
    records = [batch_job(name="other", uid="o"), record("ADDED", plain_pod("pi-abcde", owners=[BJ_REF])),
               batch_job(annotations=notes)]
    engine = Engine()
    decided = [[type(x).__name__ for x in engine.apply(seq, decode(data))] for seq, data in enumerate(records, 1)]
    assert decided == [[], [], ["CreateWorkloadPodGroup", "AnnotatePodGroupName"]]


def _vcjob_x_records() -> list[bytes]:
    """vcjob `x` (2 replicas) in NS, its PodGroup Pending, then Inqueue: its pods are created then."""
    from tests.builders import job, podgroup

    return [record("ADDED", job("x", namespace=NS)),
            record("ADDED", podgroup("x", "Pending", namespace=NS)),
            record("MODIFIED", podgroup("x", "Inqueue", namespace=NS))]


def _batch_job_x_records() -> list[bytes]:
    """batch/v1 Job `x` in NS, its pod for the volcano scheduler, its PodGroup (as the controller made it,
    owned by the Job) Pending, Inqueue, Running."""
    ref = {**BJ_REF, "name": "x", "uid": "bj-x"}
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "podgroup-bj-x", "namespace": NS, "uid": "uid-podgroup-bj-x", "resourceVersion": "20",
                       "ownerReferences": [ref]},
          "spec": {"minMember": 1, "queue": "default"}, "status": {"phase": "Pending"}}

    def phase(p: str, rv: str) -> dict[str, Any]:
        return {**pg, "metadata": {**pg["metadata"], "resourceVersion": rv}, "status": {"phase": p}}

    return [batch_job(name="x", uid="bj-x"), record("ADDED", plain_pod("x-abcde", owners=[ref])),
            record("ADDED", pg), record("MODIFIED", phase("Inqueue", "21")), record("MODIFIED", phase("Running", "22"))]


def _by_key(records: list[bytes]) -> dict[str, list[str]]:
    engine = Engine()
    out: dict[str, list[str]] = {}
    for seq, data in enumerate(records, 1):
        for x in engine.apply(seq, decode(data)):
            out.setdefault(x.job, []).append(f"{type(x).__name__} {getattr(x, 'name', '')}")
    return out


def test_a_batch_job_and_a_vcjob_of_one_name_keep_their_own_podgroups():
    """A PodGroup is a vcjob's only when its owner is a Job of batch.volcano.sh: batch/v1 Job `x`'s PodGroup
    going Inqueue does not start vcjob `x`'s pods (its own PodGroup is still Pending), and every PodGroup
    command of vcjob `x` names its own; the batch Job's PodGroup is made under its own key. Its phase changes
    run passes of vcjob `x`, as Volcano's updatePodGroup queues syncs of the last owner of kind Job."""
    vcjob, batch = _vcjob_x_records(), _batch_job_x_records()
    mixed = _by_key(vcjob[:2] + batch)
    mine = mixed[f"{NS}/x"]
    assert not [line for line in mine if line.startswith("CreatePod ")]
    assert [line for line in mine if "PodGroup" in line] == ["CreatePodGroup x-uid-x", "UpdatePodGroup x-uid-x"]
    assert [line for line in mine if line.startswith("ActionResolved")] == ["ActionResolved "] * 4  # 2 of Inqueue, Running
    assert mixed[f"{NS}/podgroup-bj-x"] == ["CreateWorkloadPodGroup podgroup-bj-x", "AnnotatePodGroupName x-abcde"]
    # and the other way: vcjob x's own PodGroup Inqueue starts its pods, with the batch Job's records before
    both = _by_key(batch + vcjob)
    assert both[f"{NS}/x"] == _by_key(vcjob)[f"{NS}/x"]
    assert [line for line in both[f"{NS}/x"] if line.startswith(("CreatePod ", "UpdatePodGroup"))] == [
        "UpdatePodGroup x-uid-x", "CreatePod x-t-0", "CreatePod x-t-1"]  # its own PodGroup, never podgroup-bj-x


def test_a_batch_jobs_podgroup_is_published_as_no_vcjobs():
    """The bus's `Vcbus-Job` header (with N > 1 partitions: the partition) of a PodGroup names a vcjob owner
    only: batch/v1 Job `x`'s PodGroup is shared as any workload's, vcjob `x`'s goes with vcjob `x`."""
    from tests.builders import podgroup
    from vcbus.bus.publisher import prepare

    def job_header(data: bytes) -> str | None:
        msg = prepare(data, decode(data))
        assert msg is not None
        return msg.headers.get("Vcbus-Job")

    assert job_header(_batch_job_x_records()[2]) is None
    assert job_header(record("ADDED", podgroup("x", "Pending", namespace=NS))) == f"{NS}/x"
