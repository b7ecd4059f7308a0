"""NodeVolumeLimits (kube-scheduler's `nodevolumelimits/csi.go`, run by Volcano's predicates plugin by
default): a node's CSINode caps the CSI volumes of each driver on it. The shapes follow kube-scheduler's
`csi_test.go` (`TestCSILimits`: volumes of existing pods, the same volume counted once, limits per driver,
VolumeAttachments, unbound claims counted by their StorageClass's provisioner, in-tree volumes through CSI
migration)."""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue
from tests.test_sched_interpod import place
from tests.test_sched_volumes import pvc, storage_class

DRIVER = "csi.example.com"
EXCEEDED = "node(s) exceed max volume count"
NODES = [node("n1"), node("n2")]


def csinode(name: str, count: int | None, driver: str = DRIVER) -> dict:
    entry: dict = {"name": driver, "nodeID": name}
    if count is not None:
        entry["allocatable"] = {"count": count}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [entry]}}


def csi_pv(name: str, driver: str = DRIVER, handle: str | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "csi": {"driver": driver, "volumeHandle": handle or f"h-{name}"}},
            "status": {"phase": "Bound"}}


def ebs_pv(name: str, volume_id: str) -> dict:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": "1Gi"}, "awsElasticBlockStore": {"volumeID": volume_id}},
            "status": {"phase": "Bound"}}


def attachment(name: str, node_name: str, pv: str, attacher: str = DRIVER) -> dict:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node_name, "source": {"persistentVolumeName": pv}}}


def using(name: str, *claims: str, node_name: str = "", group: str | None = None, deleting: bool = False,
          inline: list | None = None) -> dict:
    p = pod(name, group, node=node_name, phase="Running" if node_name else "Pending", deleting=deleting)
    p["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    p["spec"]["volumes"] += inline or []
    return p


def bound(*names: str) -> list[dict]:
    """A bound claim `c-<name>` and its CSI PV `<name>` per name."""
    return [obj for n in names for obj in (pvc(f"c-{n}", n), csi_pv(n))]


# n1 holds two CSI volumes (a and b) of a pod already there; its CSINode allows 2 of DRIVER
FULL_N1 = [*bound("a", "b"), using("old", "c-a", "c-b", node_name="n1"), csinode("n1", 2)]


@pytest.mark.parametrize(
    ("objects", "claims", "expected"),
    [
        # a third volume on n1 exceeds its limit; n2 has no CSINode: no limit there
        ([*FULL_N1, *bound("c")], ("c-c",), "bound to n2"),
        ([*FULL_N1, *bound("c"), csinode("n2", 0)], ("c-c",),
         f"0/2 nodes are unavailable: 2 {EXCEEDED}."),
        # a volume the node has already counts once (the pod shares old's volume a)
        ([*FULL_N1, csinode("n2", 0)], ("c-a",), "bound to n1"),
        # the limit is per driver: another driver's volume is not limited by it
        ([*FULL_N1, pvc("c-x", "x"), csi_pv("x", "other.example.com"), csinode("n2", 0, "other.example.com")],
         ("c-x",), "bound to n1"),
        # a CSINode entry without a count limits nothing
        ([*bound("a", "b", "c"), using("old", "c-a", "c-b", node_name="n1"), csinode("n1", None),
          csinode("n2", 0)], ("c-c",), "bound to n1"),
        # a VolumeAttachment of a CSI PV no pod on the node uses counts; one of another node does not
        ([*bound("a", "c"), using("old", "c-a", node_name="n1"), csi_pv("att"), attachment("va", "n1", "att"),
          csinode("n1", 2), csinode("n2", 0)], ("c-c",), f"0/2 nodes are unavailable: 2 {EXCEEDED}."),
        ([*bound("a", "c"), using("old", "c-a", node_name="n1"), csi_pv("att"), attachment("va", "n2", "att"),
          csinode("n1", 2), csinode("n2", 0)], ("c-c",), "bound to n1"),
        # ... but not twice when a pod there uses its PV
        ([*bound("a", "c"), using("old", "c-a", node_name="n1"), attachment("va", "n1", "a"),
          csinode("n1", 2), csinode("n2", 0)], ("c-c",), "bound to n1"),
        # an existing pod's claim whose PV is gone counts by its StorageClass's provisioner
        ([pvc("c-gone", "gone-pv", cls="fast"), storage_class("fast"), pvc("c-c", "c"), csi_pv("c", "example.com/csi"),
          using("old", "c-gone", node_name="n1"), csinode("n1", 1, "example.com/csi"),
          csinode("n2", 0, "example.com/csi")], ("c-c",), f"0/2 nodes are unavailable: 2 {EXCEEDED}."),
        ([pvc("c-c", "c"), csi_pv("c", "example.com/csi"), using("old", node_name="n1"),
          csinode("n1", 1, "example.com/csi"), csinode("n2", 0, "example.com/csi")], ("c-c",), "bound to n1"),
        # an in-tree EBS PV counts as ebs.csi.aws.com on a node with a CSINode (CSI migration)
        ([pvc("c-e1", "e1"), ebs_pv("e1", "vol-1"), pvc("c-e2", "e2"), ebs_pv("e2", "vol-2"),
          using("old", "c-e1", node_name="n1"), csinode("n1", 1, "ebs.csi.aws.com"),
          csinode("n2", 0, "ebs.csi.aws.com")], ("c-e2",), f"0/2 nodes are unavailable: 2 {EXCEEDED}."),
        # a pod being deleted no longer holds its volumes
        ([*bound("a", "b", "c"), using("old", "c-a", "c-b", node_name="n1", deleting=True), csinode("n1", 2),
          csinode("n2", 0)], ("c-c",), "bound to n1"),
    ],
)
def test_volume_limits(objects, claims, expected):
    assert place(*NODES, *objects, incoming=using("pg-w-0", *claims, group="pg")) == expected


def test_an_inline_in_tree_volume_is_counted():
    incoming = using("pg-w-0", group="pg", inline=[{"name": "disk", "awsElasticBlockStore": {"volumeID": "vol-9"}}])
    objects = [pvc("c-e1", "e1"), ebs_pv("e1", "vol-1"), using("old", "c-e1", node_name="n1"),
               csinode("n1", 1, "ebs.csi.aws.com"), csinode("n2", 0, "ebs.csi.aws.com")]
    assert place(*NODES, *objects, incoming=incoming) == f"0/2 nodes are unavailable: 2 {EXCEEDED}."


def test_pods_placed_earlier_in_the_session_count():
    """A gang of two, each pod with its own volume, on nodes that take one volume each: one per node."""
    cluster = Cluster(queue(), *NODES, *bound("a", "b"), csinode("n1", 1), csinode("n2", 1),
                      podgroup("pg", 2, phase="Inqueue"), using("pg-w-0", "c-a", group="pg"),
                      using("pg-w-1", "c-b", group="pg"))
    assert sorted(b.node for b in outs_of(cluster.session().outputs, o.BindPod)) == ["n1", "n2"]


def test_the_filter_can_be_turned_off():
    config = {"actions": "enqueue, allocate, backfill",
              "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates", "arguments": {
                  "predicate.NodeVolumeLimitsEnable": False}}, {"name": "proportion"}, {"name": "nodeorder"}]}]}
    cluster = Cluster(queue(), *NODES, *FULL_N1, *bound("c"), csinode("n2", 0), podgroup("pg", 1, phase="Inqueue"),
                      using("pg-w-0", "c-c", group="pg"), config=config)
    assert len(cluster.session().binds) == 1  # as in Volcano: nothing counted
