"""End to end: the seed job's pods share a claim bound to a zonal PersistentVolume, placed by vcbus alone
on a real API server and KWOK nodes (the setup of `tests/test_e2e_scheduler.py`: `vcbus up --kubeconfig`
with its own bus, its `scenario` fixture).

The API server here runs no PV controller, so the test binds the claim itself as the controller would
(`spec.volumeName` and `pv.kubernetes.io/bind-completed`). Three nodes, one of them in the PV's zone:
the three pods (cpu 1 each, all of them fit on any node) are bound to that node alone, which needs the
PVC and PV records on the bus and the scheduler's VolumeBinding check. Before the claim is bound, a
StorageClass-less unbound claim keeps every pod pending with kube-scheduler's words.

A claim of a WaitForFirstConsumer class of static PVs (`kubernetes.io/no-provisioner`, the local-volume
setup) is left unbound by the PV controller for the scheduler: vcbus finds the PV for the node its pods
go to, writes the PV's claimRef before the binds (VolumeBinding's PreBind), and binds the pods there.
"""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.test_e2e_scheduler import scenario, seed_job, unschedulable_condition  # noqa: F401 - scenario is a fixture
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

SMALL = {"cpu": "1", "memory": "1Gi"}
ZONE = "topology.kubernetes.io/zone"
UNBOUND = "plugin VolumeZone pre-predicates failed PersistentVolumeClaim had no pv name and storageClass name"


def claiming_seed_job(claim: str = "data") -> dict:
    job = seed_job()
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        for c in spec["containers"]:
            c["resources"] = {"requests": dict(SMALL), "limits": dict(SMALL)}
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return job


def all_bound(sc) -> list | None:
    """The job's three pods, once all are bound."""
    pods = sc.pods()
    return pods if len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods) else None


@pytest.mark.parametrize("scenario", [3], indirect=True)
def test_the_pods_of_a_claim_bound_to_a_zonal_volume_go_to_its_zone(scenario):
    sc = scenario
    for i, name in enumerate(sc.nodes):
        sc.core.patch_node(name, {"metadata": {"labels": {ZONE: "zb" if i == 1 else "za"}}})
    pv = f"{sc.ns}-data"
    sc.core.create_persistent_volume({"metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/data"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["zb"]}]}]}}}})
    try:
        sc.core.create_namespaced_persistent_volume_claim(sc.ns, {"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": ""}})
        sc.submit(claiming_seed_job())
        sc.wait("the Unschedulable condition naming the unbound claim",
                lambda: unschedulable_condition(sc, lambda message: UNBOUND in message))
        assert not any(p["spec"].get("nodeName") for p in sc.pods())
        # what the PV controller does on a real cluster
        sc.core.patch_namespaced_persistent_volume_claim("data", sc.ns, {
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}, "spec": {"volumeName": pv}})

        pods = sc.wait("3 pods bound", lambda: all_bound(sc))
        assert {p["spec"]["nodeName"] for p in pods} == {sc.nodes[1]}
    finally:
        sc.core.delete_persistent_volume(pv)


@pytest.mark.parametrize("scenario", [3], indirect=True)
def test_a_wait_for_first_consumer_claim_gets_a_static_volume_and_its_pods_follow_it(scenario):
    """The PV fits only the second node (its zone); a smaller PV of the class elsewhere does not fit the
    claim. The PV's claimRef is written to the claim (with its uid) and the three pods are bound to that
    node. No PV controller runs here: the test makes the PVs Available as it would, and the claim itself stays
    Pending (on a cluster the controller binds it to the PV its claimRef names)."""
    sc = scenario
    for i, name in enumerate(sc.nodes):
        sc.core.patch_node(name, {"metadata": {"labels": {ZONE: "zb" if i == 1 else "za"}}})
    cls = f"{sc.ns}-local"
    storage = client.StorageV1Api(sc.api)
    storage.create_storage_class({"metadata": {"name": cls}, "provisioner": "kubernetes.io/no-provisioner",
                                     "volumeBindingMode": "WaitForFirstConsumer"})
    pvs = {f"{sc.ns}-small": ("512Mi", "za"), f"{sc.ns}-local": ("2Gi", "zb")}
    for name, (size, zone) in pvs.items():
        sc.core.create_persistent_volume({"metadata": {"name": name}, "spec": {
            "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"], "storageClassName": cls,
            "local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}]}}}})
        # what the PV controller does with a new PV on a real cluster (none runs here): Pending -> Available
        sc.core.patch_persistent_volume_status(name, {"status": {"phase": "Available"}})
    try:
        claim = sc.core.create_namespaced_persistent_volume_claim(sc.ns, {"metadata": {"name": "local"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": cls}})
        sc.submit(claiming_seed_job("local"))

        pods = sc.wait("3 pods bound", lambda: all_bound(sc))
        assert {p["spec"]["nodeName"] for p in pods} == {sc.nodes[1]}
        ref = sc.core.read_persistent_volume(f"{sc.ns}-local").spec.claim_ref
        assert (ref.namespace, ref.name, ref.uid) == (sc.ns, "local", claim.metadata.uid)
        assert sc.core.read_persistent_volume(f"{sc.ns}-small").spec.claim_ref is None
    finally:
        for name in pvs:
            sc.core.delete_persistent_volume(name)
        storage.delete_storage_class(cls)


@pytest.mark.parametrize("scenario", [3], indirect=True)
def test_the_pods_of_a_claim_go_where_its_csi_driver_has_room(scenario):
    """NodeVolumeLimits: the job's pods share a claim bound to a CSI PV; the CSINodes of the first two nodes
    allow no volume of its driver, the third's one. Every pod goes to the third node (the shared volume counts
    once there), where without the limit they would spread over the three."""
    sc = scenario
    driver = "csi.vcbus.test"
    storage = client.StorageV1Api(sc.api)
    for i, name in enumerate(sc.nodes):
        storage.create_csi_node({"metadata": {"name": name}, "spec": {"drivers": [
            {"name": driver, "nodeID": name, "allocatable": {"count": 1 if i == 2 else 0}}]}})
    pv = f"{sc.ns}-csi"
    sc.core.create_persistent_volume({"metadata": {"name": pv}, "spec": {
        "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
        "csi": {"driver": driver, "volumeHandle": f"handle-{sc.ns}"}}})
    try:
        sc.core.create_namespaced_persistent_volume_claim(sc.ns, {"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "",
            "volumeName": pv}})
        # what the PV controller does on a real cluster (none runs here): the claim bound
        sc.core.patch_namespaced_persistent_volume_claim("data", sc.ns, {
            "metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}})
        sc.submit(claiming_seed_job())
        pods = sc.wait("3 pods bound", lambda: all_bound(sc))
        assert {p["spec"]["nodeName"] for p in pods} == {sc.nodes[2]}
    finally:
        sc.core.delete_persistent_volume(pv)
        for name in sc.nodes:
            storage.delete_csi_node(name)
