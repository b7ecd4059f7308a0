"""The volume checks without a storage driver (Volcano's predicates plugin running kube-scheduler's
VolumeZone and VolumeBinding): where a pod with claims lands, or its PodScheduled message. The shapes
follow kube-scheduler's `volumezone/volume_zone_test.go` (`TestSingleZone`, `TestMultiZone`,
`TestWithBinding`) and `volumebinding/volume_binding_test.go` (`TestVolumeBinding`)."""

from __future__ import annotations

import pytest

from tests.sched_builders import Cluster, node, pod, podgroup, queue
from tests.test_sched_interpod import place

ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BIND_COMPLETED = {"pv.kubernetes.io/bind-completed": "yes"}


def pvc(name: str, volume: str = "", *, cls: str | None = None, bound: bool = True, phase: str = "",
        deleting: bool = False, owner: str = "") -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-pvc-{name}"}
    if volume and bound:
        meta["annotations"] = dict(BIND_COMPLETED)
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "pg-w-0", "uid": owner,
                                    "controller": True}]
    spec: dict = {"volumeName": volume} if volume else {}
    if cls is not None:
        spec["storageClassName"] = cls
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Bound" if volume else "Pending")}}


def pv(name: str, labels: dict | None = None, *, zones: list | None = None, fields: list | None = None) -> dict:
    """A PV; `zones`: a required node affinity `topology.kubernetes.io/zone In zones`."""
    spec: dict = {}
    if zones is not None or fields is not None:
        term: dict = {}
        if zones is not None:
            term["matchExpressions"] = [{"key": ZONE, "operator": "In", "values": zones}]
        if fields is not None:
            term["matchFields"] = fields
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [term]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": spec}


def storage_class(name: str, mode: str | None = "Immediate") -> dict:
    obj: dict = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                 "provisioner": "example.com/csi"}
    if mode is not None:
        obj["volumeBindingMode"] = mode
    return obj


def zoned(name: str, zone: str | None = None, **labels: str) -> dict:
    all_labels = {"kubernetes.io/hostname": name, **labels}
    if zone:
        all_labels[ZONE] = zone
    return node(name, labels=all_labels)


def claiming(*claims: str, ephemeral: str = "") -> dict:
    p = pod("pg-w-0", "pg")
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    if ephemeral:
        volumes.append({"name": ephemeral, "ephemeral": {"volumeClaimTemplate": {"spec": {}}}})
    p["spec"]["volumes"] = volumes
    return p


A_B = [zoned("n1", "za"), zoned("n2", "zb")]
ALL = "0/2 nodes are unavailable: 2 "
ZONE_FAILS = "0/2 nodes are unavailable: 2 node(s) had no available volume zone."
AFFINITY_FAILS = "0/2 nodes are unavailable: 2 node(s) didn't match PersistentVolume's node affinity."


@pytest.mark.parametrize(
    ("objects", "incoming", "expected"),
    [
        # VolumeZone: the PV's zone label keeps the pod to that zone's nodes
        ([*A_B, pvc("d", "pv-b"), pv("pv-b", {ZONE: "zb"})], claiming("d"), "bound to n2"),
        ([*A_B, pvc("d", "pv-b"), pv("pv-b", {ZONE: "zc"})], claiming("d"), ZONE_FAILS),
        # a multi-zone label (`__`-separated), and the beta label matched against the GA one
        ([*A_B, pvc("d", "pv-m"), pv("pv-m", {ZONE: "zc__zb"})], claiming("d"), "bound to n2"),
        ([*A_B, pvc("d", "pv-b"), pv("pv-b", {BETA_ZONE: "zb"})], claiming("d"), "bound to n2"),
        # a node without any topology label is not constrained by VolumeZone
        ([zoned("n1"), pvc("d", "pv-b"), pv("pv-b", {ZONE: "zb"})], claiming("d"), "bound to n1"),
        # ... but a node with a region only must match a zone label it lacks
        ([zoned("n1", None, **{REGION: "r1"}), pvc("d", "pv-b"), pv("pv-b", {ZONE: "zb"})], claiming("d"),
         "0/1 nodes are unavailable: 1 node(s) had no available volume zone."),
        # an empty zone in the label: the label is ignored
        ([*A_B, pvc("d", "pv-x"), pv("pv-x", {ZONE: "zb__"})], claiming("d"), "bound to n1"),
        # VolumeBinding: a bound claim's PV node affinity
        ([*A_B, pvc("d", "pv-b"), pv("pv-b", zones=["zb"])], claiming("d"), "bound to n2"),
        ([*A_B, pvc("d", "pv-c"), pv("pv-c", zones=["zc"])], claiming("d"), AFFINITY_FAILS),
        # matchFields see a node without a name (CheckNodeAffinity builds one from the labels alone)
        ([*A_B, pvc("d", "pv-f"), pv("pv-f", fields=[{"key": "metadata.name", "operator": "In", "values": ["n1"]}])],
         claiming("d"), AFFINITY_FAILS),
        # two claims: both PVs' constraints hold
        ([*A_B, zoned("n3", "zb"), pvc("d", "pv-b"), pv("pv-b", zones=["zb"]), pvc("e", "pv-3"),
          pv("pv-3", zones=["zb", "za"])], claiming("d", "e"), "bound to n2"),
        # a bound claim whose PV is gone
        ([*A_B, pvc("d", "pv-gone"), pv("pv-b", {ZONE: "zb"})], claiming("d"),
         ALL + 'plugin VolumeZone pre-predicates failed persistentvolume "pv-gone" not found.'),
        # the claims' PreFilter failures, in Volcano's PreFilter order (VolumeZone's, then VolumeBinding's)
        ([*A_B], claiming("d"), ALL + 'plugin VolumeZone pre-predicates failed persistentvolumeclaim "d" not found.'),
        ([*A_B, pvc("d")], claiming("d"),
         ALL + "plugin VolumeZone pre-predicates failed PersistentVolumeClaim had no pv name and storageClass name."),
        ([*A_B, pvc("d", cls="fast")], claiming("d"),
         ALL + 'plugin VolumeZone pre-predicates failed storageclass.storage.k8s.io "fast" not found.'),
        ([*A_B, pvc("d", cls="fast"), storage_class("fast")], claiming("d"),
         ALL + "plugin VolumeZone pre-predicates failed PersistentVolume had no name."),
        # an unbound immediate ephemeral claim (VolumeZone reads persistentVolumeClaim volumes only)
        ([*A_B, pvc("pg-w-0-scratch", cls="fast", owner="uid-pg-w-0"), storage_class("fast")],
         claiming(ephemeral="scratch"),
         ALL + "plugin VolumeBinding pre-predicates failed pod has unbound immediate PersistentVolumeClaims."),
        # prebound (volumeName set, binding not completed): unbound immediate
        ([*A_B, pvc("d", "pv-b", bound=False), pv("pv-b", {ZONE: "zb"})], claiming("d"),
         ALL + "plugin VolumeBinding pre-predicates failed pod has unbound immediate PersistentVolumeClaims."),
        ([*A_B, pvc("d", "pv-b", phase="Lost"), pv("pv-b")], claiming("d"),
         ALL + 'plugin VolumeBinding pre-predicates failed persistentvolumeclaim "d" bound to non-existent '
               'persistentvolume "pv-b".'),
        ([*A_B, pvc("d", "pv-b", deleting=True), pv("pv-b")], claiming("d"),
         ALL + 'plugin VolumeBinding pre-predicates failed persistentvolumeclaim "d" is being deleted.'),
        ([*A_B], claiming(ephemeral="scratch"),
         ALL + "plugin VolumeBinding pre-predicates failed waiting for ephemeral volume controller to create the "
               'persistentvolumeclaim "pg-w-0-scratch".'),
        ([*A_B, pvc("pg-w-0-scratch", "pv-b", owner="someone-else"), pv("pv-b")], claiming(ephemeral="scratch"),
         ALL + "plugin VolumeBinding pre-predicates failed PVC default/pg-w-0-scratch was not created for pod "
               "default/pg-w-0 (pod is not owner)."),
        ([*A_B, pvc("pg-w-0-scratch", "pv-b", owner="uid-pg-w-0"), pv("pv-b", zones=["zb"])],
         claiming(ephemeral="scratch"), "bound to n2"),
        # a WaitForFirstConsumer claim still unbound needs a provisioner or a matching PV: not evaluated
        ([*A_B, pvc("d", cls="wait"), storage_class("wait", "WaitForFirstConsumer")], claiming("d"),
         ALL + "vcbus's scheduler does not evaluate spec.volumes[0].persistentVolumeClaim "
               "(an unbound WaitForFirstConsumer claim to provision)."),
        # a StorageClass without volumeBindingMode
        ([*A_B, pvc("d", cls="odd"), storage_class("odd", None)], claiming("d"),
         ALL + 'plugin VolumeZone pre-predicates failed VolumeBindingMode not set for StorageClass "odd".'),
    ],
)
def test_volume_checks(objects, incoming, expected):
    assert place(*objects, incoming=incoming) == expected


def test_a_claim_bound_later_lets_the_pod_go_to_its_volumes_zone():
    cluster = Cluster(queue(), *A_B, storage_class("fast"), pvc("d", cls="fast"), podgroup("pg", 1, phase="Inqueue"),
                      claiming("d"))
    assert cluster.session().binds == []
    cluster.add(pv("pv-b", {ZONE: "zb"}, zones=["zb"]))
    cluster.update(pvc("d", "pv-b", cls="fast"))  # the PV controller bound it
    assert [b.node for b in cluster.session().binds] == ["n2"]


def test_the_volume_predicates_can_be_turned_off():
    config = {"actions": "enqueue, allocate, backfill",
              "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates", "arguments": {
                  "predicate.VolumeZoneEnable": False, "predicate.VolumeBindingEnable": False}},
                  {"name": "proportion"}, {"name": "nodeorder"}]}]}
    cluster = Cluster(queue(), *A_B, podgroup("pg", 1, phase="Inqueue"), claiming("d"), config=config)
    assert [b.node for b in cluster.session().binds] == ["n1"]  # Volcano checks nothing then either


def test_pods_waiting_on_an_unbound_wait_for_first_consumer_claim_are_counted_on_metrics():
    """The /metrics count of pods held back by what vcbus does not evaluate includes those whose claim is
    an unbound WaitForFirstConsumer one (found from the PVC and its StorageClass, as the session finds it),
    not a pod whose claim is missing (refused with VolumeZone's words: evaluated), and none when the
    predicates plugin does not run VolumeBinding."""
    from statemachines.scheduler.config import DEFAULT_CONFIG, config_from_dict
    from statemachines.scheduler.plugins.predicates import unevaluated_pods

    waiting = [claiming("d"), pod("pg-w-1", "pg"), pod("pg-w-2", "pg")]
    waiting[1]["spec"]["volumes"] = [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    waiting[2]["spec"]["volumes"] = [{"name": "m", "persistentVolumeClaim": {"claimName": "missing"}}]
    ephemeral = pvc("pg-w-1-e", cls="wait", owner="uid-pg-w-1")
    ephemeral["metadata"]["ownerReferences"][0]["uid"] = waiting[1]["metadata"]["uid"]
    cluster = Cluster(queue(), *A_B, pvc("d", cls="wait"), ephemeral, storage_class("wait", "WaitForFirstConsumer"),
                      podgroup("pg", 3, phase="Inqueue"), *waiting)
    snapshot = cluster.cache.snapshot()
    assert unevaluated_pods(snapshot, DEFAULT_CONFIG) == {
        "spec.volumes[].persistentVolumeClaim (an unbound WaitForFirstConsumer claim to provision)": 1,
        "spec.volumes[].ephemeral (an unbound WaitForFirstConsumer claim to provision)": 1}
    off = config_from_dict({"actions": "allocate", "tiers": [{"plugins": [{"name": "predicates", "arguments": {
        "predicate.VolumeBindingEnable": False}}]}]})
    assert unevaluated_pods(snapshot, off) == {}
