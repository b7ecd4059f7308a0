"""End to end: the seed job's pods share a claim bound to a zonal PersistentVolume, placed by vcbus alone
on a real API server and KWOK nodes (the setup of `tests/test_e2e_scheduler.py`: `vcbus up --kubeconfig`
with its own bus, its `scenario` fixture).

The API server here runs no PV controller, so the test binds the claim itself as the controller would
(`spec.volumeName` and `pv.kubernetes.io/bind-completed`). Three nodes, one of them in the PV's zone:
the three pods (cpu 1 each, all of them fit on any node) are bound to that node alone, which needs the
PVC and PV records on the bus and the scheduler's VolumeBinding check. Before the claim is bound, a
StorageClass-less unbound claim keeps every pod pending with kube-scheduler's words.
"""

from __future__ import annotations

import pytest

from tests.test_e2e_scheduler import scenario, seed_job, unschedulable_condition  # noqa: F401 - scenario is a fixture
from tests.test_webhook_k8s import webhook  # noqa: F401 - the admission webhook fixture

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow]

SMALL = {"cpu": "1", "memory": "1Gi"}
ZONE = "topology.kubernetes.io/zone"
UNBOUND = "plugin VolumeZone pre-predicates failed PersistentVolumeClaim had no pv name and storageClass name"


def claiming_seed_job() -> dict:
    job = seed_job()
    for task in job["spec"]["tasks"]:
        spec = task["template"]["spec"]
        for c in spec["containers"]:
            c["resources"] = {"requests": dict(SMALL), "limits": dict(SMALL)}
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
    return job


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

        def bound():
            pods = sc.pods()
            ok = len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)
            return pods if ok else None

        pods = sc.wait("3 pods bound", bound)
        assert {p["spec"]["nodeName"] for p in pods} == {sc.nodes[1]}
    finally:
        sc.core.delete_persistent_volume(pv)
