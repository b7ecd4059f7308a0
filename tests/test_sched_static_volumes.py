"""VolumeBinding's static binding: an unbound WaitForFirstConsumer claim of a StorageClass that provisions
nothing gets a pre-provisioned PV on the node the pod goes to, chosen as kube-scheduler chooses it
(`volumebinding/binder.go` `findMatchingVolumes`, component-helpers' `FindMatchingVolume`: the smallest
Available PV of the claim's class that fits, its node affinity on the node), assumed for the rest of the
session (Reserve on allocate, Unreserve on discard) and carried by the pod's BindPod (the actuator writes
the PV's claimRef before the bind). The shapes follow kube-scheduler's `binder_test.go`
(`TestFindPodVolumesWithoutProvisioning`) and component-helpers' `pv_helpers_test.go`
(`TestFindMatchVolumeWithNode`, `TestFindMatchingVolume`)."""

from __future__ import annotations

import json

import pytest
import yaml

from statemachines import outputs as o
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue
from tests.test_sched_interpod import place
from tests.test_sched_volumes import BIND_COMPLETED, storage_class
from tests.test_schedule_cli import vcbus

HOST = "kubernetes.io/hostname"
NODES = [node("n1", labels={HOST: "n1"}), node("n2", labels={HOST: "n2"})]
CONFLICT = "node(s) didn't find available persistent volumes to bind"
NONE_FIT = f"0/2 nodes are unavailable: 2 {CONFLICT}."


def local(name: str = "local", provisioner: str = "kubernetes.io/no-provisioner") -> dict:
    """A WaitForFirstConsumer class of static PVs (the local-volume setup)."""
    cls = storage_class(name, "WaitForFirstConsumer")
    cls["provisioner"] = provisioner
    return cls


def claim(name: str, size: str = "1Gi", *, cls: str = "local", modes: tuple = ("ReadWriteOnce",),
          mode: str | None = None, selector: dict | None = None, notes: dict | None = None,
          vac: str | None = None) -> dict:
    spec: dict = {"storageClassName": cls, "accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if mode is not None:
        spec["volumeMode"] = mode
    if selector is not None:
        spec["selector"] = selector
    if vac is not None:
        spec["volumeAttributesClassName"] = vac
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-pvc-{name}"}
    if notes:
        meta["annotations"] = notes
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": "Pending"}}


def volume(name: str, size: str = "1Gi", *, host: str | None = None, cls: str = "local",
           modes: tuple = ("ReadWriteOnce",), mode: str | None = None, labels: dict | None = None,
           phase: str = "Available", ref: dict | None = None, deleting: bool = False, vac: str | None = None) -> dict:
    """A static PV; `host`: a local volume (required node affinity on the hostname)."""
    spec: dict = {"capacity": {"storage": size}, "accessModes": list(modes), "storageClassName": cls,
                  "local": {"path": "/mnt/disk"}}
    if host is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": HOST, "operator": "In", "values": [host]}]}]}}
    if mode is not None:
        spec["volumeMode"] = mode
    if ref is not None:
        spec["claimRef"] = ref
    if vac is not None:
        spec["volumeAttributesClassName"] = vac
    meta: dict = {"name": name, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def claiming(*claims: str, name: str = "pg-w-0", group: str = "pg", cpu: str = "1") -> dict:
    p = pod(name, group, cpu=cpu)
    p["spec"]["volumes"] = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return p


def ref(claim_name: str, uid: str | None = None) -> dict:
    out = {"kind": "PersistentVolumeClaim", "namespace": "default", "name": claim_name}
    if uid is not None:
        out["uid"] = uid
    return out


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        # a local PV on n2 only: the pod follows it
        ([claim("d"), volume("pv-2", host="n2")], "bound to n2"),
        # no PV at all, or none of the claim's class: every node fails with VolumeBinding's words
        ([claim("d")], NONE_FIT),
        ([claim("d"), volume("pv-2", host="n2", cls="other")], NONE_FIT),
        # too small; a larger one fits (capacity >= request)
        ([claim("d", "5Gi"), volume("pv-2", "4Gi", host="n2")], NONE_FIT),
        ([claim("d", "5Gi"), volume("pv-2", "5Gi", host="n2")], "bound to n2"),
        # access modes: the PV must offer every mode the claim asks for
        ([claim("d", modes=("ReadWriteMany",)), volume("pv-2", host="n2")], NONE_FIT),
        ([claim("d"), volume("pv-2", host="n2", modes=("ReadWriteOnce", "ReadOnlyMany"))], "bound to n2"),
        # volume mode: a nil mode is Filesystem on both sides
        ([claim("d", mode="Block"), volume("pv-2", host="n2")], NONE_FIT),
        ([claim("d", mode="Filesystem"), volume("pv-2", host="n2")], "bound to n2"),
        ([claim("d", mode="Block"), volume("pv-2", host="n2", mode="Block")], "bound to n2"),
        # the claim's label selector against the PV's labels
        ([claim("d", selector={"matchLabels": {"disk": "ssd"}}), volume("pv-2", host="n2", labels={"disk": "hdd"})],
         NONE_FIT),
        ([claim("d", selector={"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}),
          volume("pv-2", host="n2", labels={"disk": "ssd"})], "bound to n2"),
        # the volume attributes class must be the same (none on both sides counts)
        ([claim("d", vac="gold"), volume("pv-2", host="n2")], NONE_FIT),
        ([claim("d", vac="gold"), volume("pv-2", host="n2", vac="gold")], "bound to n2"),
        # a PV that is not Available (Released, Bound) or is being deleted is not taken
        ([claim("d"), volume("pv-2", host="n2", phase="Released")], NONE_FIT),
        ([claim("d"), volume("pv-2", host="n2", deleting=True)], NONE_FIT),
        # claimed by another claim (ref without a uid, or another incarnation of this one): not free
        ([claim("d"), volume("pv-2", host="n2", phase="Bound", ref=ref("e"))], NONE_FIT),
        ([claim("d"), volume("pv-2", host="n2", phase="Bound", ref=ref("d", "old-uid"))], NONE_FIT),
        # prebound to this claim (by name, or name and uid): taken whatever its phase
        ([claim("d"), volume("pv-2", host="n2", phase="Bound", ref=ref("d"))], "bound to n2"),
        ([claim("d"), volume("pv-2", host="n2", phase="Pending", ref=ref("d", "uid-pvc-d"))], "bound to n2"),
        # a PV without node affinity fits every node
        ([claim("d"), volume("pv-any")], "bound to n1"),
        # two claims: two distinct PVs, both on the node
        ([claim("d"), claim("e"), volume("pv-2a", host="n2"), volume("pv-2b", host="n2"), volume("pv-1", host="n1")],
         "bound to n2"),
        # a claim given a node to provision on, by a class that provisions nothing: never satisfied
        ([claim("d", notes={"volume.kubernetes.io/selected-node": "n2"}), volume("pv-2", host="n2")], NONE_FIT),
    ],
)
def test_static_binding(objects, expected):
    pvcs = [obj["metadata"]["name"] for obj in objects if obj["kind"] == "PersistentVolumeClaim"]
    assert place(*NODES, local(), local("other"), *objects, incoming=claiming(*pvcs)) == expected


def test_the_smallest_fitting_volume_is_chosen_and_ties_go_to_the_smallest_name():
    cluster = Cluster(queue(), *NODES, local(), claim("d", "2Gi"), volume("pv-c", "10Gi"), volume("pv-b", "5Gi"),
                      volume("pv-a", "1Gi"), volume("pv-d", "5Gi"), podgroup("pg", 1, phase="Inqueue"), claiming("d"))
    [bind] = outs_of(cluster.session().outputs, o.BindPod)
    assert bind.volumes == [o.VolumeBinding(claim="d", claim_uid="uid-pvc-d", volume="pv-b")]


def test_a_pods_smaller_claim_is_matched_first():
    """byPVCSize: the claims are matched smallest request first, whatever the pod's volume order: the 1Gi
    claim takes the 2Gi PV (the smallest that fits it), the 2Gi claim listed first gets the 5Gi one."""
    cluster = Cluster(queue(), *NODES, local(), claim("big", "2Gi"), claim("small", "1Gi"), volume("pv-2g", "2Gi"),
                      volume("pv-5g", "5Gi"), podgroup("pg", 1, phase="Inqueue"), claiming("big", "small"))
    [bind] = outs_of(cluster.session().outputs, o.BindPod)
    assert [(b.claim, b.volume) for b in bind.volumes] == [("small", "pv-2g"), ("big", "pv-5g")]


def test_a_claim_with_a_provisioner_is_not_evaluated():
    """A provisioning class: kube-scheduler would provision where no static PV matches; vcbus says so."""
    message = place(*NODES, local("csi", "example.com/csi"), claim("d", cls="csi"), volume("pv-2", host="n2", cls="csi"),
                    incoming=claiming("d"))
    assert message == ("0/2 nodes are unavailable: 2 vcbus's scheduler does not evaluate spec.volumes[0]."
                       "persistentVolumeClaim (an unbound WaitForFirstConsumer claim to provision).")


def test_a_bound_claims_conflict_and_an_unbound_claims_are_one_status():
    """`FindPodVolumes` gives one status whose reasons `Status.Message()` joins; Volcano takes that text."""
    bound = claim("b")
    bound["spec"]["volumeName"] = "pv-b"
    bound["metadata"]["annotations"] = dict(BIND_COMPLETED)
    message = place(*NODES, local(), bound, volume("pv-b", host="nowhere", phase="Bound", ref=ref("b")), claim("d"),
                    incoming=claiming("b", "d"))
    assert message == ("0/2 nodes are unavailable: 2 node(s) didn't match PersistentVolume's node affinity, "
                       f"{CONFLICT}.")


def test_no_volume_goes_to_two_claims_in_a_session():
    """Two one-pod jobs, each with its own claim, one PV: the first placed takes it (Reserve), the second
    finds none on any node."""
    cluster = Cluster(queue(), *NODES, local(), claim("a"), claim("b"), volume("pv", host="n2"),
                      podgroup("pa", 1, phase="Inqueue"), podgroup("pb", 1, phase="Inqueue"),
                      claiming("a", name="pa-w-0", group="pa"), claiming("b", name="pb-w-0", group="pb"))
    result = cluster.session()
    [bind] = outs_of(result.outputs, o.BindPod)
    assert (bind.name, bind.node, [v.volume for v in bind.volumes]) == ("pa-w-0", "n2", ["pv"])
    [cond] = [c for c in outs_of(result.outputs, o.UpdatePodCondition) if c.name == "pb-w-0"]
    assert cond.message == NONE_FIT


def test_pods_sharing_a_claim_share_its_volume():
    cluster = Cluster(queue(), *NODES, local(), claim("d"), volume("pv", host="n1"), podgroup("pg", 2, phase="Inqueue"),
                      claiming("d", name="pg-w-0"), claiming("d", name="pg-w-1"))
    binds = outs_of(cluster.session().outputs, o.BindPod)
    assert [(b.name, b.node, [v.volume for v in b.volumes]) for b in binds] == [
        ("pg-w-0", "n1", ["pv"]), ("pg-w-1", "n1", ["pv"])]


def test_a_discarded_gang_gives_its_volume_back():
    """Unreserve: gang pa (two pods) takes the PV for its first pod, then cannot place its second (too big) and
    is discarded; pb's pod then gets the PV in the same session."""
    cluster = Cluster(queue(), *NODES, local(), claim("a"), claim("b"), volume("pv", host="n2"),
                      podgroup("pa", 2, phase="Inqueue"), podgroup("pb", 1, phase="Inqueue"),
                      claiming("a", name="pa-w-0", group="pa"), pod("pa-w-1", "pa", cpu="64"),
                      claiming("b", name="pb-w-0", group="pb"))
    binds = outs_of(cluster.session().outputs, o.BindPod)
    assert [(b.name, [v.volume for v in b.volumes]) for b in binds] == [("pb-w-0", ["pv"])]


def test_a_bound_pods_volume_stays_taken_until_the_record_shows_it():
    """Across sessions: the projection assumes the PV claimed by the BindPod's claim (the PV record still shows
    it free), so the next session does not give it to another claim; once the PV record shows the claimRef
    the record says so itself."""
    cluster = Cluster(queue(), *NODES, local(), claim("a"), volume("pv", host="n2"), podgroup("pa", 1, phase="Inqueue"),
                      claiming("a", name="pa-w-0", group="pa"))
    assert [b.volumes[0].volume for b in outs_of(cluster.session().outputs, o.BindPod)] == ["pv"]
    cluster.add(claim("b"))
    cluster.add(podgroup("pb", 1, phase="Inqueue"))
    cluster.add(claiming("b", name="pb-w-0", group="pb"))
    assert outs_of(cluster.session().outputs, o.BindPod) == []
    cluster.update(volume("pv", host="n2", phase="Bound", ref=ref("a", "uid-pvc-a")))  # the actuator's write
    assert cluster.cache.snapshot().volumes["pv"].claim_ref == ("default", "a", "uid-pvc-a")
    assert outs_of(cluster.session().outputs, o.BindPod) == []


def test_a_volume_another_claim_took_sends_the_pod_back_to_scheduling():
    """The PV record shows another claim's claimRef (someone bound it first): the actuator refuses the bind,
    and the projection drops the assumed bind at once, so the next session places the pod again, on
    another PV (not after the 120 s a lost bind waits)."""
    cluster = Cluster(queue(), *NODES, local(), claim("a"), volume("pv", host="n2"), podgroup("pa", 1, phase="Inqueue"),
                      claiming("a", name="pa-w-0", group="pa"))
    assert [b.node for b in cluster.session().binds] == ["n2"]
    cluster.update(volume("pv", host="n2", phase="Bound", ref=ref("other", "uid-other")))
    cluster.add(volume("pv-1", host="n1"))
    binds = outs_of(cluster.session().outputs, o.BindPod)
    assert [(b.name, b.node, [v.volume for v in b.volumes]) for b in binds] == [("pa-w-0", "n1", ["pv-1"])]


def test_a_claim_the_pv_controller_bound_meanwhile_is_a_bound_claim():
    cluster = Cluster(queue(), *NODES, local(), claim("a"), volume("pv", host="n2"), podgroup("pa", 1, phase="Inqueue"),
                      claiming("a", name="pa-w-0", group="pa"))
    bound = claim("a")
    bound["spec"]["volumeName"] = "pv"
    bound["metadata"]["annotations"] = dict(BIND_COMPLETED)
    cluster.update(bound)
    cluster.update(volume("pv", host="n2", phase="Bound", ref=ref("a", "uid-pvc-a")))
    [bind] = outs_of(cluster.session().outputs, o.BindPod)
    assert (bind.node, bind.volumes) == ("n2", [])


def test_vcbus_schedule_and_why_pending_take_the_same_path(tmp_path):
    """Offline, as the live scheduler: session 1 gives the one PV to pa's claim and refuses pb; between the
    sessions the offline cluster writes the PV's claimRef as the actuator does, so session 2 does not give
    it to pb either; why-pending names VolumeBinding's reason for pb."""
    objects = [queue(), *NODES, local(), claim("a"), claim("b"), volume("pv", host="n2"),
               podgroup("pa", 1, phase="Inqueue"), podgroup("pb", 1, phase="Inqueue"),
               claiming("a", name="pa-w-0", group="pa"), claiming("b", name="pb-w-0", group="pb")]
    path = tmp_path / "static.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    res = vcbus("schedule", "--json", "--sessions", "2", str(path))
    assert res.returncode == 0, res.stderr.decode()
    assert [(b["name"], b["node"]) for b in json.loads(res.stdout)["binds"]] == [("pa-w-0", "n2")]
    res = vcbus("why-pending", "default/pb", "--from", str(path))
    assert res.returncode == 0, res.stderr.decode()
    assert "2 node(s) didn't find available persistent volumes to bind" in res.stdout.decode()
